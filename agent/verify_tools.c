/* hone verify's agentic checks (agent/verify_tools.h): tool prompts as chat completions on both
 * sides, the calls compared and their arguments validated against the tools' schemas. */
#include "agent/verify_tools.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/error.h"
#include "engine/json_schema.h"

static cJSON *dup_item(const cJSON *j, const char *key) /* NULL when absent */
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
    return v ? cJSON_Duplicate(v, 1) : NULL;
}

int hone_verify_tool_prompt_parse(hone_verify_tool_prompt *p, const cJSON *j, const char *where)
{
    memset(p, 0, sizeof *p);
    p->expect = -1;
    const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(j, "messages");
    const cJSON *tools = cJSON_GetObjectItemCaseSensitive(j, "tools");
    if (!cJSON_IsArray(msgs) || !cJSON_GetArraySize(msgs))
        return hone_error_set(HONE_EFORMAT, "%s: \"messages\" must be a non-empty array of chat messages", where);
    if (!cJSON_IsArray(tools) || !cJSON_GetArraySize(tools))
        return hone_error_set(HONE_EFORMAT, "%s: \"tools\" must be a non-empty array of function tools", where);
    const cJSON *t;
    cJSON_ArrayForEach(t, tools) {
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(t, "function"), "name");
        if (!cJSON_IsString(name))
            return hone_error_set(HONE_EFORMAT, "%s: each tool must be {\"type\": \"function\", \"function\": "
                                  "{\"name\": ..., \"parameters\": ...}}", where);
    }
    const cJSON *exp = cJSON_GetObjectItemCaseSensitive(j, "expect");
    if (exp) {
        if (!cJSON_IsString(exp) || (strcmp(exp->valuestring, "call") && strcmp(exp->valuestring, "answer")))
            return hone_error_set(HONE_EFORMAT, "%s: \"expect\" must be \"call\" or \"answer\"", where);
        p->expect = !strcmp(exp->valuestring, "call");
    }
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(j, "id"), *set = cJSON_GetObjectItemCaseSensitive(j, "set");
    p->id = strdup(cJSON_IsString(id) ? id->valuestring : where);
    p->set = strdup(cJSON_IsString(set) ? set->valuestring : "tools");
    p->messages = cJSON_Duplicate(msgs, 1);
    p->tools = cJSON_Duplicate(tools, 1);
    p->tool_choice = dup_item(j, "tool_choice");
    if (!p->id || !p->set || !p->messages || !p->tools) {
        hone_verify_tool_prompt_clear(p);
        return hone_error_set(HONE_ENOMEM, "out of memory");
    }
    return 0;
}

void hone_verify_tool_prompt_clear(hone_verify_tool_prompt *p)
{
    if (!p) return;
    free(p->id);
    free(p->set);
    cJSON_Delete(p->messages);
    cJSON_Delete(p->tools);
    cJSON_Delete(p->tool_choice);
    memset(p, 0, sizeof *p);
}

/* The parameters schema of the tool called name (*found 0: no such tool). */
static const cJSON *tool_schema(const cJSON *tools, const char *name, int *found)
{
    const cJSON *t;
    *found = 0;
    cJSON_ArrayForEach(t, tools) {
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(t, "function");
        const cJSON *n = cJSON_GetObjectItemCaseSensitive(fn, "name");
        if (cJSON_IsString(n) && !strcmp(n->valuestring, name)) {
            *found = 1;
            return cJSON_GetObjectItemCaseSensitive(fn, "parameters");
        }
    }
    return NULL;
}

/* One call as the report keeps it: name, arguments (the text), schema_valid (true, false, or
 * null when the schema is outside the validator's keywords) and why. */
static cJSON *call_json(const cJSON *tools, const char *name, const char *args)
{
    cJSON *c = cJSON_CreateObject();
    cJSON_AddStringToObject(c, "name", name);
    cJSON_AddStringToObject(c, "arguments", args);
    char why[256] = "";
    int found, valid = 0, rc = 0;
    const cJSON *schema = tool_schema(tools, name, &found);
    cJSON *v = cJSON_ParseWithOpts(args, NULL, 1);
    if (!found) snprintf(why, sizeof why, "no tool is named '%.100s'", name);
    else if (!v) snprintf(why, sizeof why, "the arguments are not JSON");
    else if (!cJSON_IsObject(v)) snprintf(why, sizeof why, "the arguments are not a JSON object");
    else if ((rc = hone_json_schema_validate(&valid, schema, v, why, sizeof why)))
        snprintf(why, sizeof why, "not checked: %s", hone_error_last());
    if (rc) cJSON_AddNullToObject(c, "schema_valid");
    else cJSON_AddBoolToObject(c, "schema_valid", valid);
    if (why[0]) cJSON_AddStringToObject(c, "why", why);
    cJSON_Delete(v);
    return c;
}

/* POSTs p's chat completion to l; *out: {called, calls, content, finish_reason}. */
static int side_chat(hone_llm *l, const hone_verify_tool_prompt *p, int max_tokens, cJSON **out)
{
    *out = NULL;
    cJSON *req = cJSON_CreateObject();
    cJSON_AddStringToObject(req, "model", hone_llm_model(l));
    cJSON_AddItemToObject(req, "messages", cJSON_Duplicate(p->messages, 1));
    cJSON_AddItemToObject(req, "tools", cJSON_Duplicate(p->tools, 1));
    if (p->tool_choice) cJSON_AddItemToObject(req, "tool_choice", cJSON_Duplicate(p->tool_choice, 1));
    cJSON_AddNumberToObject(req, "temperature", 0);
    cJSON_AddNumberToObject(req, "max_tokens", max_tokens);
    cJSON_AddNumberToObject(req, "seed", 0);
    char *body = cJSON_PrintUnformatted(req), *reply = NULL;
    cJSON_Delete(req);
    if (!body) return hone_error_set(HONE_ENOMEM, "out of memory");
    hone_llm_usage usage;
    memset(&usage, 0, sizeof usage);
    int rc = hone_llm_post(l, "/chat/completions", body, &reply, &usage);
    free(body);
    if (rc && usage.http_status >= 400 && usage.http_status < 500) {
        /* the side refused this request (a schema it cannot take, say): a finding about that
         * prompt, not the end of the run */
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "error", hone_error_last());
        cJSON_AddNumberToObject(o, "http_status", (double)usage.http_status);
        *out = o;
        free(reply);
        return 0;
    }
    if (rc) return rc;
    cJSON *root = cJSON_Parse(reply);
    const cJSON *c0 = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(root, "choices"), 0);
    const cJSON *msg = cJSON_GetObjectItemCaseSensitive(c0, "message");
    if (!cJSON_IsObject(msg)) {
        rc = hone_error_set(HONE_EFORMAT, "%s: the chat completion has no choices[0].message: %.160s",
                            hone_llm_endpoint(l), reply);
        goto done;
    }
    cJSON *o = cJSON_CreateObject(), *calls = cJSON_CreateArray();
    const cJSON *tc;
    cJSON_ArrayForEach(tc, cJSON_GetObjectItemCaseSensitive(msg, "tool_calls")) {
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(tc, "function");
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(fn, "name");
        const cJSON *args = cJSON_GetObjectItemCaseSensitive(fn, "arguments");
        cJSON_AddItemToArray(calls, call_json(p->tools, cJSON_IsString(name) ? name->valuestring : "",
                                              cJSON_IsString(args) ? args->valuestring : ""));
    }
    cJSON_AddBoolToObject(o, "called", cJSON_GetArraySize(calls) > 0);
    cJSON_AddItemToObject(o, "calls", calls);
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(msg, "content");
    if (cJSON_IsString(content)) cJSON_AddStringToObject(o, "content", content->valuestring);
    else cJSON_AddNullToObject(o, "content");
    const cJSON *fr = cJSON_GetObjectItemCaseSensitive(c0, "finish_reason");
    cJSON_AddStringToObject(o, "finish_reason", cJSON_IsString(fr) ? fr->valuestring : "");
    *out = o;
done:
    cJSON_Delete(root);
    free(reply);
    return rc;
}

static const char *call_str(const cJSON *call, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(call, k);
    return cJSON_IsString(v) ? v->valuestring : "";
}

/* The side answered the prompt with an HTTP 4xx (side_chat). */
static int failed(const cJSON *side) { return cJSON_GetObjectItemCaseSensitive(side, "error") != NULL; }

/* Both sides made the same calls, in order: names (args 0) or names and argument values (1). */
static int calls_agree(const cJSON *a, const cJSON *b, int args)
{
    const cJSON *ca = cJSON_GetObjectItemCaseSensitive(a, "calls"), *cb = cJSON_GetObjectItemCaseSensitive(b, "calls");
    if (cJSON_GetArraySize(ca) != cJSON_GetArraySize(cb)) return 0;
    for (const cJSON *x = ca ? ca->child : NULL, *y = cb ? cb->child : NULL; x && y; x = x->next, y = y->next) {
        if (strcmp(call_str(x, "name"), call_str(y, "name"))) return 0;
        if (!args) continue;
        cJSON *va = cJSON_Parse(call_str(x, "arguments")), *vb = cJSON_Parse(call_str(y, "arguments"));
        int same = va && vb ? cJSON_Compare(va, vb, 1) : !strcmp(call_str(x, "arguments"), call_str(y, "arguments"));
        cJSON_Delete(va);
        cJSON_Delete(vb);
        if (!same) return 0;
    }
    return 1;
}

int hone_verify_tools_run(cJSON *out_prompts, hone_llm *ref, hone_llm *cand, const hone_verify_tool_prompt *prompts,
                          int n, int max_tokens, int quiet)
{
    for (int i = 0; i < n; i++) {
        const hone_verify_tool_prompt *p = &prompts[i];
        if (!quiet) fprintf(stderr, "verify: tool prompt %d/%d (%s)\n", i + 1, n, p->id);
        cJSON *r = NULL, *c = NULL;
        int rc = side_chat(ref, p, max_tokens, &r);
        if (!rc) rc = side_chat(cand, p, max_tokens, &c);
        if (rc) {
            char msg[1024];
            snprintf(msg, sizeof msg, "%s", hone_error_last());
            cJSON_Delete(r);
            return hone_error_set(rc, "tool prompt %s: %s", p->id, msg);
        }
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "id", p->id);
        cJSON_AddStringToObject(j, "set", p->set);
        if (p->expect >= 0) cJSON_AddStringToObject(j, "expect", p->expect ? "call" : "answer");
        int rcall = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "called"));
        int ccall = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(c, "called"));
        int refused = failed(r) || failed(c);
        if (!quiet && refused)
            fprintf(stderr, "verify: tool prompt %s: refused by the %s: %s\n", p->id, failed(r) ? "reference" : "candidate",
                    cJSON_GetObjectItemCaseSensitive(failed(r) ? r : c, "error")->valuestring);
        if (!refused) cJSON_AddBoolToObject(j, "trigger_agree", rcall == ccall);
        if (!refused && rcall && ccall) {
            int names = calls_agree(r, c, 0);
            cJSON_AddBoolToObject(j, "names_agree", names);
            cJSON_AddBoolToObject(j, "arguments_agree", names && calls_agree(r, c, 1));
        }
        cJSON_AddItemToObject(j, "reference", r);
        cJSON_AddItemToObject(j, "candidate", c);
        cJSON_AddItemToArray(out_prompts, j);
    }
    return 0;
}

/* precision, recall and F1 of tp / fp / fn into o (the rules of the header). */
static void add_prf(cJSON *o, int tp, int fp, int fn)
{
    double p = tp + fp ? (double)tp / (tp + fp) : fn ? 0 : 1;
    double r = tp + fn ? (double)tp / (tp + fn) : fp ? 0 : 1;
    cJSON_AddNumberToObject(o, "precision", p);
    cJSON_AddNumberToObject(o, "recall", r);
    cJSON_AddNumberToObject(o, "f1", p + r > 0 ? 2 * p * r / (p + r) : 0);
}

static int called(const cJSON *p, const char *side)
{
    return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(p, side), "called"));
}

cJSON *hone_verify_tools_summarise(const cJSON *prompts)
{
    int n = 0, tp = 0, fp = 0, fn = 0, tn = 0, both = 0, names = 0, args = 0, labelled = 0, refused[2] = {0, 0};
    int valid[2] = {0, 0}, checked[2] = {0, 0}, lab[2][3] = {{0}}; /* lab: tp, fp, fn against the label */
    const char *sides[2] = {"reference", "candidate"};
    const cJSON *p;
    cJSON_ArrayForEach(p, prompts) {
        int fr = failed(cJSON_GetObjectItemCaseSensitive(p, "reference"));
        int fc = failed(cJSON_GetObjectItemCaseSensitive(p, "candidate"));
        refused[0] += fr;
        refused[1] += fc;
        if (fr || fc) continue; /* scored only where both sides answered */
        n++;
        int r = called(p, "reference"), c = called(p, "candidate");
        tp += r && c;
        fp += !r && c;
        fn += r && !c;
        tn += !r && !c;
        if (r && c) {
            both++;
            names += cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(p, "names_agree"));
            args += cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(p, "arguments_agree"));
        }
        for (int s = 0; s < 2; s++) {
            const cJSON *call;
            cJSON_ArrayForEach(call, cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(p, sides[s]), "calls")) {
                const cJSON *v = cJSON_GetObjectItemCaseSensitive(call, "schema_valid");
                if (!cJSON_IsBool(v)) continue;
                checked[s]++;
                valid[s] += cJSON_IsTrue(v);
            }
        }
        const cJSON *e = cJSON_GetObjectItemCaseSensitive(p, "expect");
        if (cJSON_IsString(e)) {
            int want = !strcmp(e->valuestring, "call");
            labelled++;
            for (int s = 0; s < 2; s++) {
                int got = s ? c : r;
                lab[s][0] += want && got;
                lab[s][1] += !want && got;
                lab[s][2] += want && !got;
            }
        }
    }
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "prompts", n);
    cJSON_AddNumberToObject(o, "refused_by_reference", refused[0]);
    cJSON_AddNumberToObject(o, "refused_by_candidate", refused[1]);
    cJSON_AddNumberToObject(o, "tp", tp);
    cJSON_AddNumberToObject(o, "fp", fp);
    cJSON_AddNumberToObject(o, "fn", fn);
    cJSON_AddNumberToObject(o, "tn", tn);
    add_prf(o, tp, fp, fn);
    cJSON_AddNumberToObject(o, "both_called", both);
    if (both) {
        cJSON_AddNumberToObject(o, "name_agreement", (double)names / both);
        cJSON_AddNumberToObject(o, "arguments_agreement", (double)args / both);
    } else {
        cJSON_AddNullToObject(o, "name_agreement");
        cJSON_AddNullToObject(o, "arguments_agreement");
    }
    for (int s = 0; s < 2; s++) {
        char k[40];
        snprintf(k, sizeof k, "schema_valid_%s", sides[s]);
        if (checked[s]) cJSON_AddNumberToObject(o, k, (double)valid[s] / checked[s]);
        else cJSON_AddNullToObject(o, k);
    }
    cJSON_AddNumberToObject(o, "labelled", labelled);
    if (labelled)
        for (int s = 0; s < 2; s++) {
            char k[40];
            snprintf(k, sizeof k, "%s_vs_label", sides[s]);
            add_prf(cJSON_AddObjectToObject(o, k), lab[s][0], lab[s][1], lab[s][2]);
        }
    return o;
}
