/* Tool calls (toolcall.h): rendering through plain role/content messages, parsing the
 * model's calls, and the forcing grammar (a json_schema of the call, wrapped in the
 * format's markers). */
#include "toolcall.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "json_schema.h"

typedef struct {
    char *s;
    size_t n, cap;
    int failed;
} tbuf;

static void tb_put(tbuf *b, const char *p, size_t n)
{
    if (b->failed) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1) cap *= 2;
        char *q = realloc(b->s, cap);
        if (!q) {
            b->failed = 1;
            return;
        }
        b->s = q;
        b->cap = cap;
    }
    memcpy(b->s + b->n, p, n);
    b->n += n;
    b->s[b->n] = 0;
}

static void tb_str(tbuf *b, const char *s) { tb_put(b, s, strlen(s)); }

static void tb_json(tbuf *b, const cJSON *v)
{
    char *t = cJSON_PrintUnformatted(v);
    if (!t) {
        b->failed = 1;
        return;
    }
    tb_str(b, t);
    free(t);
}

hone_toolcall_format hone_toolcall_format_for(hone_chat_family f)
{
    switch (f) {
    case HONE_CHAT_LLAMA3: return HONE_TOOLCALL_LLAMA3;
    case HONE_CHAT_MISTRAL:
    case HONE_CHAT_LLAMA2: return HONE_TOOLCALL_MISTRAL;
    default: return HONE_TOOLCALL_HERMES;
    }
}

/* The text of a message's content: a string, an array of text parts, or null (""). */
static int content_of(const cJSON *msg, int i, tbuf *b)
{
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(msg, "content");
    if (!c || cJSON_IsNull(c)) return 0;
    if (cJSON_IsString(c)) {
        tb_str(b, c->valuestring);
        return 0;
    }
    if (cJSON_IsArray(c)) {
        const cJSON *p;
        cJSON_ArrayForEach(p, c) {
            const cJSON *t = cJSON_GetObjectItemCaseSensitive(p, "text");
            if (!cJSON_IsString(t))
                return hone_error_set(HONE_EINVAL, "messages[%d].content parts must be {\"type\": \"text\", \"text\": ...}", i);
            tb_str(b, t->valuestring);
        }
        return 0;
    }
    return hone_error_set(HONE_EINVAL, "messages[%d].content must be a string, an array of text parts or null", i);
}

/* One function of tools[] as {"name", "arguments" | "parameters"} for history, from an
 * assistant's tool_calls entry (arguments is a JSON string there). */
static int call_json(const cJSON *tc, int i, hone_toolcall_format fmt, tbuf *b)
{
    const cJSON *fn = cJSON_GetObjectItemCaseSensitive(tc, "function");
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(fn, "name");
    const cJSON *args = cJSON_GetObjectItemCaseSensitive(fn, "arguments");
    if (!cJSON_IsString(name))
        return hone_error_set(HONE_EINVAL, "messages[%d].tool_calls[].function.name must be a string", i);
    cJSON *parsed = cJSON_IsString(args) ? cJSON_Parse(args->valuestring) : NULL;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", name->valuestring);
    cJSON *a = parsed ? parsed : args ? cJSON_Duplicate(args, 1) : cJSON_CreateObject();
    cJSON_AddItemToObject(o, fmt == HONE_TOOLCALL_LLAMA3 ? "parameters" : "arguments", a);
    tb_json(b, o);
    cJSON_Delete(o);
    return 0;
}

static int add_msg(cJSON *out, const char *role, const char *content)
{
    cJSON *m = cJSON_CreateObject();
    if (!m) return hone_error_set(HONE_ENOMEM, "out of memory");
    cJSON_AddStringToObject(m, "role", role);
    cJSON_AddStringToObject(m, "content", content);
    cJSON_AddItemToArray(out, m);
    return 0;
}

/* Appends text to the last message when it has role, else adds a message (Mistral and
 * Llama 2 need user and assistant to alternate). */
static int add_or_merge(cJSON *out, const char *role, const char *content, int merge)
{
    int n = cJSON_GetArraySize(out);
    cJSON *last = n ? cJSON_GetArrayItem(out, n - 1) : NULL;
    const cJSON *lr = cJSON_GetObjectItemCaseSensitive(last, "role");
    if (merge && last && cJSON_IsString(lr) && !strcmp(lr->valuestring, role)) {
        const cJSON *lc = cJSON_GetObjectItemCaseSensitive(last, "content");
        tbuf b = {0};
        tb_str(&b, lc->valuestring);
        tb_str(&b, "\n\n");
        tb_str(&b, content);
        if (b.failed) return hone_error_set(HONE_ENOMEM, "out of memory");
        cJSON_ReplaceItemInObjectCaseSensitive(last, "content", cJSON_CreateString(b.s));
        free(b.s);
        return 0;
    }
    return add_msg(out, role, content);
}

static int check_tools(const cJSON *tools)
{
    if (!tools) return 0;
    if (!cJSON_IsArray(tools)) return hone_error_set(HONE_EINVAL, "'tools' must be an array");
    int i = 0;
    const cJSON *t;
    cJSON_ArrayForEach(t, tools) {
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(t, "type");
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(t, "function");
        if (!cJSON_IsObject(t) || !cJSON_IsString(type) || strcmp(type->valuestring, "function") || !cJSON_IsObject(fn) ||
            !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(fn, "name")))
            return hone_error_set(HONE_EINVAL, "tools[%d] must be {\"type\": \"function\", \"function\": {\"name\": ...}}", i);
        i++;
    }
    return 0;
}

/* The tools block: Qwen2.5's (Hermes), Llama 3.1's JSON prompt, or Mistral's. */
static void tools_text(tbuf *b, const cJSON *tools, hone_toolcall_format fmt)
{
    const cJSON *t;
    if (fmt == HONE_TOOLCALL_HERMES) {
        tb_str(b, "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
                  "You are provided with function signatures within <tools></tools> XML tags:\n<tools>");
        cJSON_ArrayForEach(t, tools) {
            tb_str(b, "\n");
            tb_json(b, t);
        }
        tb_str(b, "\n</tools>\n\nFor each function call, return a json object with function name and arguments "
                  "within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
                  "<args-json-object>}\n</tool_call>");
    } else if (fmt == HONE_TOOLCALL_LLAMA3) {
        tb_str(b, "Given the following functions, please respond with a JSON for a function call with its proper "
                  "arguments that best answers the given prompt.\n\nRespond in the format {\"name\": function name, "
                  "\"parameters\": dictionary of argument name and its value}.Do not use variables.\n\n");
        cJSON_ArrayForEach(t, tools) {
            tb_json(b, t);
            tb_str(b, "\n\n");
        }
    } else {
        tb_str(b, "[AVAILABLE_TOOLS] ");
        tb_json(b, tools);
        tb_str(b, "[/AVAILABLE_TOOLS]");
    }
}

int hone_toolcall_render(cJSON **out, const cJSON *messages, const cJSON *tools, hone_toolcall_format fmt,
                         const char *default_system)
{
    *out = NULL;
    int rc = check_tools(tools);
    if (rc) return rc;
    if (!cJSON_IsArray(messages)) return hone_error_set(HONE_EINVAL, "'messages' must be an array");
    int has_tools = tools && cJSON_GetArraySize(tools) > 0;
    cJSON *res = cJSON_CreateArray();
    if (!res) return hone_error_set(HONE_ENOMEM, "out of memory");
    int last_user = -1, first_user = -1, i = 0;
    const cJSON *m;
    cJSON_ArrayForEach(m, messages) {
        const cJSON *r = cJSON_GetObjectItemCaseSensitive(m, "role");
        if (cJSON_IsString(r) && !strcmp(r->valuestring, "user")) {
            last_user = i;
            if (first_user < 0) first_user = i;
        }
        i++;
    }
    int merge = fmt == HONE_TOOLCALL_MISTRAL, sys_done = 0;
    const cJSON *first = cJSON_GetArrayItem(messages, 0);
    const cJSON *fr = cJSON_GetObjectItemCaseSensitive(first, "role");
    int first_is_sys = cJSON_IsString(fr) && (!strcmp(fr->valuestring, "system") || !strcmp(fr->valuestring, "developer"));
    if (fmt == HONE_TOOLCALL_HERMES && has_tools && !first_is_sys) { /* the tools need a system turn */
        tbuf b = {0};
        if (default_system && *default_system) {
            tb_str(&b, default_system);
            tb_str(&b, "\n\n");
        }
        tools_text(&b, tools, fmt);
        rc = b.failed ? hone_error_set(HONE_ENOMEM, "out of memory") : add_msg(res, "system", b.s);
        free(b.s);
        sys_done = 1;
        if (rc) goto fail;
    }
    i = 0;
    cJSON_ArrayForEach(m, messages) {
        tbuf b = {0};
        const cJSON *r = cJSON_GetObjectItemCaseSensitive(m, "role");
        if (!cJSON_IsObject(m) || !cJSON_IsString(r)) {
            rc = hone_error_set(HONE_EINVAL, "messages[%d] must be an object with a string 'role'", i);
            goto fail;
        }
        const char *role = r->valuestring;
        if (!strcmp(role, "developer")) role = "system";
        if (!strcmp(role, "system")) {
            if ((rc = content_of(m, i, &b))) goto msg_fail;
            if (fmt == HONE_TOOLCALL_HERMES && has_tools && !sys_done) {
                tb_str(&b, "\n\n");
                tools_text(&b, tools, fmt);
                sys_done = 1;
            }
        } else if (!strcmp(role, "user")) {
            if (fmt == HONE_TOOLCALL_LLAMA3 && has_tools && i == first_user) tools_text(&b, tools, fmt);
            if (fmt == HONE_TOOLCALL_MISTRAL && has_tools && i == last_user) tools_text(&b, tools, fmt);
            if ((rc = content_of(m, i, &b))) goto msg_fail;
        } else if (!strcmp(role, "assistant")) {
            if ((rc = content_of(m, i, &b))) goto msg_fail;
            const cJSON *tcs = cJSON_GetObjectItemCaseSensitive(m, "tool_calls");
            if (tcs && !cJSON_IsNull(tcs)) {
                if (!cJSON_IsArray(tcs)) {
                    rc = hone_error_set(HONE_EINVAL, "messages[%d].tool_calls must be an array", i);
                    goto msg_fail;
                }
                const cJSON *tc;
                int k = 0;
                if (fmt == HONE_TOOLCALL_MISTRAL) tb_str(&b, "[TOOL_CALLS] [");
                cJSON_ArrayForEach(tc, tcs) {
                    if (fmt == HONE_TOOLCALL_HERMES) tb_str(&b, b.n ? "\n<tool_call>\n" : "<tool_call>\n");
                    else if (k) tb_str(&b, fmt == HONE_TOOLCALL_MISTRAL ? ", " : "\n");
                    if ((rc = call_json(tc, i, fmt, &b))) goto msg_fail;
                    if (fmt == HONE_TOOLCALL_HERMES) tb_str(&b, "\n</tool_call>");
                    k++;
                }
                if (fmt == HONE_TOOLCALL_MISTRAL) tb_str(&b, "]");
            }
        } else if (!strcmp(role, "tool")) {
            tbuf c = {0};
            if ((rc = content_of(m, i, &c))) {
                free(c.s);
                goto msg_fail;
            }
            if (fmt == HONE_TOOLCALL_HERMES) {
                tb_str(&b, "<tool_response>\n");
                tb_str(&b, c.s ? c.s : "");
                tb_str(&b, "\n</tool_response>");
                role = "user";
            } else if (fmt == HONE_TOOLCALL_LLAMA3) {
                tb_str(&b, c.s ? c.s : "");
                role = "ipython";
            } else {
                cJSON *o = cJSON_CreateObject();
                cJSON_AddStringToObject(o, "content", c.s ? c.s : "");
                tb_str(&b, "[TOOL_RESULTS] ");
                tb_json(&b, o);
                tb_str(&b, "[/TOOL_RESULTS]");
                cJSON_Delete(o);
                role = "user";
            }
            free(c.s);
            /* Qwen's template joins consecutive tool results into one user turn */
            int prev_tool = i > 0 && cJSON_IsString(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(messages, i - 1), "role")) &&
                            !strcmp(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(messages, i - 1), "role")->valuestring, "tool");
            if (fmt == HONE_TOOLCALL_HERMES && prev_tool) {
                cJSON *last = cJSON_GetArrayItem(res, cJSON_GetArraySize(res) - 1);
                tbuf j = {0};
                tb_str(&j, cJSON_GetObjectItemCaseSensitive(last, "content")->valuestring);
                tb_str(&j, "\n");
                tb_str(&j, b.s ? b.s : "");
                if (!j.failed) cJSON_ReplaceItemInObjectCaseSensitive(last, "content", cJSON_CreateString(j.s));
                free(j.s);
                free(b.s);
                i++;
                continue;
            }
        } else {
            rc = hone_error_set(HONE_EINVAL, "messages[%d].role is '%.40s'; it must be one of system, developer, user, "
                                "assistant, tool", i, role);
            goto msg_fail;
        }
        if (b.failed) {
            rc = hone_error_set(HONE_ENOMEM, "out of memory");
            goto msg_fail;
        }
        rc = add_or_merge(res, role, b.s ? b.s : "", merge);
    msg_fail:
        free(b.s);
        if (rc) goto fail;
        i++;
    }
    *out = res;
    return 0;
fail:
    cJSON_Delete(res);
    return rc;
}

/* ---- the prompt: the template's own tool rendering, or the fallback ---- */

void hone_toolcall_style_fallback(hone_toolcall_style *out, hone_toolcall_format fmt)
{
    memset(out, 0, sizeof *out);
    out->format = fmt;
    snprintf(out->open, sizeof out->open, "%s",
             fmt == HONE_TOOLCALL_HERMES ? "<tool_call>\n" : fmt == HONE_TOOLCALL_MISTRAL ? "[TOOL_CALLS] [" : "");
}

/* The probe: one tool, one call of it (id of 9 alphanumerics, as Mistral's templates demand),
 * its result; each part carries a phrase the output is searched for. */
static const char PROBE_TOOLS[] =
    "[{\"type\": \"function\", \"function\": {\"name\": \"hone_probe\", \"description\": \"hone probe tool\", "
    "\"parameters\": {\"type\": \"object\", \"properties\": {\"hone_arg\": {\"type\": \"string\"}}}}}]";
static const char PROBE_MESSAGES[] =
    "[{\"role\": \"user\", \"content\": \"hone probe question\"}, {\"role\": \"assistant\", \"content\": \"\", "
    "\"tool_calls\": [{\"id\": \"probecall\", \"type\": \"function\", \"function\": {\"name\": \"hone_probe\", "
    "\"arguments\": {\"hone_arg\": \"hone probe argument\"}}}]}, "
    "{\"role\": \"tool\", \"tool_call_id\": \"probecall\", \"content\": \"hone probe result\"}]";

/* The last occurrence of needle in hay, or NULL. */
static const char *last_of(const char *hay, const char *needle)
{
    const char *p = strstr(hay, needle), *last = NULL;
    while (p) {
        last = p;
        p = strstr(p + 1, needle);
    }
    return last;
}

/* open: marker and the whitespace (and, for Mistral, the '[' of the call list) after it up to
 * the call's '{' in the probe's output; 0 when the marker is not followed by a call. */
static int open_from(char *out, size_t cap, const char *marker_at, size_t marker_len, int list)
{
    const char *p = marker_at + marker_len;
    while (*p == ' ' || *p == '\n') p++;
    if (list && *p == '[') {
        p++;
        while (*p == ' ' || *p == '\n') p++;
    }
    if (*p != '{' || (size_t)(p - marker_at) >= cap) return 0;
    memcpy(out, marker_at, (size_t)(p - marker_at));
    out[p - marker_at] = 0;
    return 1;
}

void hone_toolcall_style_of(hone_toolcall_style *out, const hone_chat_template *t)
{
    hone_toolcall_style_fallback(out, hone_toolcall_format_for(t ? t->family : HONE_CHAT_CHATML));
    cJSON *tools = cJSON_Parse(PROBE_TOOLS), *msgs = cJSON_Parse(PROBE_MESSAGES);
    char *r = NULL;
    if (!t || !tools || !msgs || hone_chat_render(&r, t, msgs, tools, NULL)) goto done;
    if (!strstr(r, "hone probe tool") || !strstr(r, "hone probe argument") || !strstr(r, "hone probe result"))
        goto done;
    hone_toolcall_style st = {.native = 1};
    const char *m;
    if ((m = last_of(r, "<tool_call>"))) {
        st.format = HONE_TOOLCALL_HERMES;
        if (!open_from(st.open, sizeof st.open, m, strlen("<tool_call>"), 0)) goto done;
    } else if ((m = last_of(r, "[TOOL_CALLS]"))) {
        st.format = HONE_TOOLCALL_MISTRAL;
        if (!open_from(st.open, sizeof st.open, m, strlen("[TOOL_CALLS]"), 1)) goto done;
    } else if (strstr(r, "\"parameters\": {\"hone_arg\"")) {
        st.format = HONE_TOOLCALL_LLAMA3; /* a bare {"name", "parameters"} object, open "" */
    } else {
        goto done; /* a call syntax the parser does not know: the fallback teaches one it does */
    }
    *out = st;
done:
    free(r);
    cJSON_Delete(tools);
    cJSON_Delete(msgs);
}

static int is_alnum(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

static const char ALNUM[] = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";

void hone_toolcall_id(char *out, size_t cap, const hone_toolcall_style *st, unsigned long long r)
{
    if (st->format != HONE_TOOLCALL_MISTRAL) {
        snprintf(out, cap, "call_%016llx", r);
        return;
    }
    char id[10];
    for (int i = 0; i < 9; i++, r /= 62) id[i] = ALNUM[r % 62];
    id[9] = 0;
    snprintf(out, cap, "%s", id);
}

/* A Mistral id: s itself when it is 9 alphanumerics, else 9 from its FNV-1a hash. */
static cJSON *mistral_id(const char *s)
{
    size_t n = strlen(s), k = 0;
    while (k < n && is_alnum(s[k])) k++;
    if (n == 9 && k == 9) return cJSON_CreateString(s);
    unsigned long long h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    char id[16];
    hone_toolcall_style st = {.format = HONE_TOOLCALL_MISTRAL};
    hone_toolcall_id(id, sizeof id, &st, h);
    return cJSON_CreateString(id);
}

/* Replaces (or adds) key in o by v; v NULL is out of memory. */
static int set_item(cJSON *o, const char *key, cJSON *v)
{
    if (!v) return hone_error_set(HONE_ENOMEM, "out of memory");
    if (cJSON_GetObjectItemCaseSensitive(o, key)) cJSON_ReplaceItemInObjectCaseSensitive(o, key, v);
    else cJSON_AddItemToObject(o, key, v);
    return 0;
}

/* The messages as the native templates take them (hone_toolcall_prompt's conversions). */
static int native_messages(cJSON **out, const cJSON *messages, const hone_toolcall_style *st)
{
    *out = NULL;
    if (!cJSON_IsArray(messages)) return hone_error_set(HONE_EINVAL, "'messages' must be an array");
    cJSON *res = cJSON_Duplicate(messages, 1);
    if (!res) return hone_error_set(HONE_ENOMEM, "out of memory");
    int rc = 0, i = 0;
    cJSON *m;
    cJSON_ArrayForEach(m, res) {
        const cJSON *r = cJSON_GetObjectItemCaseSensitive(m, "role");
        if (!cJSON_IsObject(m) || !cJSON_IsString(r)) {
            rc = hone_error_set(HONE_EINVAL, "messages[%d] must be an object with a string 'role'", i);
            goto fail;
        }
        const char *role = r->valuestring;
        if (strcmp(role, "system") && strcmp(role, "developer") && strcmp(role, "user") && strcmp(role, "assistant") &&
            strcmp(role, "tool")) {
            rc = hone_error_set(HONE_EINVAL, "messages[%d].role is '%.40s'; it must be one of system, developer, user, "
                                "assistant, tool", i, role);
            goto fail;
        }
        if (!strcmp(role, "developer") && (rc = set_item(m, "role", cJSON_CreateString("system")))) goto fail;
        tbuf b = {0};
        if ((rc = content_of(m, i, &b))) {
            free(b.s);
            goto fail;
        }
        rc = b.failed ? hone_error_set(HONE_ENOMEM, "out of memory") : set_item(m, "content", cJSON_CreateString(b.s ? b.s : ""));
        free(b.s);
        if (rc) goto fail;
        cJSON *tcs = cJSON_GetObjectItemCaseSensitive(m, "tool_calls");
        if (tcs && cJSON_IsNull(tcs)) {
            cJSON_DeleteItemFromObjectCaseSensitive(m, "tool_calls");
            tcs = NULL;
        }
        if (tcs && (strcmp(role, "assistant") || !cJSON_IsArray(tcs))) {
            rc = hone_error_set(HONE_EINVAL, "messages[%d].tool_calls must be an array on an assistant message", i);
            goto fail;
        }
        cJSON *tc;
        cJSON_ArrayForEach(tc, tcs) {
            cJSON *fn = cJSON_GetObjectItemCaseSensitive(tc, "function");
            cJSON *args = cJSON_GetObjectItemCaseSensitive(fn, "arguments");
            cJSON *id = cJSON_GetObjectItemCaseSensitive(tc, "id");
            if (!cJSON_IsString(cJSON_GetObjectItemCaseSensitive(fn, "name"))) {
                rc = hone_error_set(HONE_EINVAL, "messages[%d].tool_calls[].function.name must be a string", i);
                goto fail;
            }
            if (cJSON_IsString(args)) { /* OpenAI sends a JSON string; templates tojson an object */
                cJSON *parsed = cJSON_Parse(args->valuestring);
                if (parsed) cJSON_ReplaceItemInObjectCaseSensitive(fn, "arguments", parsed);
            }
            if (st->format == HONE_TOOLCALL_MISTRAL && cJSON_IsString(id) && (rc = set_item(tc, "id", mistral_id(id->valuestring))))
                goto fail;
        }
        cJSON *tid = cJSON_GetObjectItemCaseSensitive(m, "tool_call_id");
        if (st->format == HONE_TOOLCALL_MISTRAL && cJSON_IsString(tid) &&
            (rc = set_item(m, "tool_call_id", mistral_id(tid->valuestring))))
            goto fail;
        i++;
    }
    *out = res;
    return 0;
fail:
    cJSON_Delete(res);
    return rc;
}

/* Joins consecutive turns of one role of plain (role/content) messages. */
static int join_turns(cJSON *plain)
{
    cJSON *m = plain->child;
    while (m && m->next) {
        cJSON *n = m->next;
        const char *r1 = cJSON_GetObjectItemCaseSensitive(m, "role")->valuestring;
        const char *r2 = cJSON_GetObjectItemCaseSensitive(n, "role")->valuestring;
        if (strcmp(r1, r2)) {
            m = n;
            continue;
        }
        tbuf b = {0};
        tb_str(&b, cJSON_GetObjectItemCaseSensitive(m, "content")->valuestring);
        tb_str(&b, "\n\n");
        tb_str(&b, cJSON_GetObjectItemCaseSensitive(n, "content")->valuestring);
        int rc = b.failed ? hone_error_set(HONE_ENOMEM, "out of memory") : set_item(m, "content", cJSON_CreateString(b.s));
        free(b.s);
        if (rc) return rc;
        cJSON_Delete(cJSON_DetachItemViaPointer(plain, n));
    }
    return 0;
}

int hone_toolcall_prompt(char **out, const hone_chat_template *t, const hone_toolcall_style *st, const cJSON *messages,
                         const cJSON *tools)
{
    *out = NULL;
    cJSON *msgs = NULL;
    int rc = check_tools(tools);
    if (rc) return rc;
    if (st->native) {
        if ((rc = native_messages(&msgs, messages, st))) return rc;
        rc = hone_chat_render(out, t, msgs, tools, NULL);
        cJSON_Delete(msgs);
        return rc;
    }
    /* no default system text: the template's own default system turn gives way to the tools' */
    if ((rc = hone_toolcall_render(&msgs, messages, tools, st->format, NULL))) return rc;
    rc = hone_chat_render(out, t, msgs, NULL, NULL);
    if (rc == HONE_EINVAL && hone_jinja_raised()) {
        char first[1024];
        snprintf(first, sizeof first, "%s", hone_error_last());
        if (join_turns(msgs) == 0 && (rc = hone_chat_render(out, t, msgs, NULL, NULL)))
            hone_error_set(rc, "%s", first); /* the template's objection to the turns as given */
    }
    cJSON_Delete(msgs);
    return rc;
}

static const cJSON *find_tool(const cJSON *tools, const char *name)
{
    const cJSON *t;
    cJSON_ArrayForEach(t, tools) {
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(t, "function");
        const cJSON *nm = cJSON_GetObjectItemCaseSensitive(fn, "name");
        if (cJSON_IsString(nm) && !strcmp(nm->valuestring, name)) return fn;
    }
    return NULL;
}

int hone_toolcall_grammar(hone_grammar **out, const cJSON *tools, const char *name, const hone_toolcall_style *st)
{
    hone_toolcall_format fmt = st->format;
    *out = NULL;
    int rc = check_tools(tools);
    if (rc) return rc;
    if (!tools || cJSON_GetArraySize(tools) == 0) return hone_error_set(HONE_EINVAL, "no tools to call");
    if (name && !find_tool(tools, name)) return hone_error_set(HONE_EINVAL, "no tool is named '%.100s'", name);
    /* {"anyOf": [{"type": "object", "properties": {"name": {"const": N}, "arguments": P},
     *  "required": ["name", "arguments"], "additionalProperties": false}, ...]} */
    cJSON *schema = cJSON_CreateObject(), *any = cJSON_AddArrayToObject(schema, "anyOf");
    const cJSON *t;
    const char *akey = fmt == HONE_TOOLCALL_LLAMA3 ? "parameters" : "arguments";
    cJSON_ArrayForEach(t, tools) {
        const cJSON *fn = cJSON_GetObjectItemCaseSensitive(t, "function");
        const char *nm = cJSON_GetObjectItemCaseSensitive(fn, "name")->valuestring;
        if (name && strcmp(nm, name)) continue;
        const cJSON *params = cJSON_GetObjectItemCaseSensitive(fn, "parameters");
        cJSON *b = cJSON_CreateObject();
        cJSON_AddStringToObject(b, "type", "object");
        cJSON *props = cJSON_AddObjectToObject(b, "properties");
        cJSON *ns = cJSON_AddObjectToObject(props, "name");
        cJSON_AddStringToObject(ns, "const", nm);
        cJSON *ps = params ? cJSON_Duplicate(params, 1) : cJSON_CreateObject();
        if (!params) cJSON_AddStringToObject(ps, "type", "object");
        /* a tool that is not strict: its bounds and patterns are guidance the grammar need not
         * enforce (and could not: the compiler refuses them), as OpenAI treats them */
        if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(fn, "strict"))) hone_json_schema_relax(ps);
        cJSON_AddItemToObject(props, akey, ps);
        cJSON *req = cJSON_AddArrayToObject(b, "required");
        cJSON_AddItemToArray(req, cJSON_CreateString("name"));
        cJSON_AddItemToArray(req, cJSON_CreateString(akey));
        cJSON_AddBoolToObject(b, "additionalProperties", 0);
        cJSON_AddItemToArray(any, b);
    }
    /* $defs of the tool's parameters resolve against the root: hoist a single tool's */
    hone_json_schema_opts o = HONE_JSON_SCHEMA_OPTS_INIT;
    size_t on = strlen(st->open);
    o.prefix = st->open;
    if (fmt == HONE_TOOLCALL_HERMES) o.suffix = "\n</tool_call>";
    else if (fmt == HONE_TOOLCALL_MISTRAL && on && st->open[on - 1] == '[') o.suffix = "]";
    rc = hone_json_schema_compile(out, schema, &o);
    cJSON_Delete(schema);
    return rc;
}

void hone_toolcall_result_clear(hone_toolcall_result *r)
{
    if (!r) return;
    for (int i = 0; i < r->n_calls; i++) {
        free(r->calls[i].name);
        free(r->calls[i].arguments);
    }
    free(r->calls);
    free(r->content);
    memset(r, 0, sizeof *r);
}

/* Adds the call(s) in v (an object or an array of objects) to r; 0 if none was valid. */
static int take_calls(hone_toolcall_result *r, const cJSON *v, const cJSON *tools)
{
    int added = 0;
    const cJSON *one = v;
    int is_arr = cJSON_IsArray(v);
    const cJSON *it = is_arr ? v->child : v;
    for (; it; it = is_arr ? it->next : NULL) {
        one = it;
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(one, "name");
        const cJSON *args = cJSON_GetObjectItemCaseSensitive(one, "arguments");
        if (!args) args = cJSON_GetObjectItemCaseSensitive(one, "parameters");
        if (!cJSON_IsObject(one) || !cJSON_IsString(name) || !find_tool(tools, name->valuestring)) continue;
        char *a = cJSON_IsString(args) ? strdup(args->valuestring) : args ? cJSON_PrintUnformatted(args) : strdup("{}");
        hone_toolcall *q = realloc(r->calls, (size_t)(r->n_calls + 1) * sizeof *q);
        char *nm = strdup(name->valuestring);
        if (!a || !q || !nm) {
            free(a);
            free(nm);
            if (q) r->calls = q;
            return hone_error_set(HONE_ENOMEM, "out of memory");
        }
        r->calls = q;
        r->calls[r->n_calls].name = nm;
        r->calls[r->n_calls].arguments = a;
        r->n_calls++;
        added++;
    }
    return added;
}

static int is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

/* The trimmed text[lo..hi) appended to b (with a newline between pieces). */
static void add_content(tbuf *b, const char *text, size_t lo, size_t hi)
{
    while (lo < hi && is_space(text[lo])) lo++;
    while (hi > lo && is_space(text[hi - 1])) hi--;
    if (hi == lo) return;
    if (b->n) tb_str(b, "\n");
    tb_put(b, text + lo, hi - lo);
}

static const char *const LEAD_MARKERS[] = {"<|python_tag|>", "[TOOL_CALLS]", NULL};

int hone_toolcall_parse(hone_toolcall_result *out, const char *text, size_t len, const cJSON *tools)
{
    memset(out, 0, sizeof *out);
    tbuf content = {0};
    char *z = malloc(len + 1); /* NUL-terminated copy for cJSON */
    if (!z) return hone_error_set(HONE_ENOMEM, "out of memory");
    memcpy(z, text, len);
    z[len] = 0;
    int rc = 0;
    static const char open[] = "<tool_call>", close[] = "</tool_call>";
    const char *p = strstr(z, open);
    if (p) { /* Hermes blocks, anywhere */
        size_t at = 0;
        while (p) {
            add_content(&content, z, at, (size_t)(p - z));
            const char *body = p + sizeof open - 1;
            const char *end = strstr(body, close);
            size_t body_end = end ? (size_t)(end - z) : len;
            char saved = z[body_end];
            z[body_end] = 0;
            cJSON *v = cJSON_Parse(body);
            z[body_end] = saved;
            int added = v ? take_calls(out, v, tools) : 0;
            cJSON_Delete(v);
            if (added < 0) { rc = added; goto done; }
            if (!added) add_content(&content, z, (size_t)(p - z), end ? body_end + sizeof close - 1 : len);
            at = end ? body_end + sizeof close - 1 : len;
            p = at < len ? strstr(z + at, open) : NULL;
        }
        add_content(&content, z, at, len);
    } else { /* a JSON call at the very start, after an optional marker */
        size_t i = 0;
        while (i < len && is_space(z[i])) i++;
        for (int k = 0; LEAD_MARKERS[k]; k++) {
            size_t n = strlen(LEAD_MARKERS[k]);
            if (!strncmp(z + i, LEAD_MARKERS[k], n)) {
                i += n;
                while (i < len && is_space(z[i])) i++;
                break;
            }
        }
        const char *end = NULL;
        cJSON *v = (z[i] == '{' || z[i] == '[') ? cJSON_ParseWithOpts(z + i, &end, 0) : NULL;
        int added = v ? take_calls(out, v, tools) : 0;
        cJSON_Delete(v);
        if (added < 0) { rc = added; goto done; }
        if (added) add_content(&content, z, (size_t)(end - z), len);
        else add_content(&content, z, 0, len);
    }
    if (content.failed) {
        rc = hone_error_set(HONE_ENOMEM, "out of memory");
        goto done;
    }
    out->content = content.s;
    content.s = NULL;
done:
    free(content.s);
    free(z);
    if (rc) hone_toolcall_result_clear(out);
    return rc;
}

size_t hone_toolcall_content_prefix(const char *text, size_t len)
{
    size_t i = 0;
    while (i < len && is_space(text[i])) i++;
    if (i == len) return 0; /* only whitespace so far: a call may still start */
    if (text[i] == '{' || text[i] == '[') return 0;
    for (int k = 0; LEAD_MARKERS[k]; k++) {
        size_t n = strlen(LEAD_MARKERS[k]), m = len - i < n ? len - i : n;
        if (!strncmp(text + i, LEAD_MARKERS[k], m)) return 0;
    }
    static const char open[] = "<tool_call>";
    const size_t on = sizeof open - 1;
    for (size_t j = 0; j < len; j++) { /* a block, or a suffix that may begin one */
        size_t m = len - j < on ? len - j : on;
        if (text[j] == '<' && !strncmp(text + j, open, m)) return j;
    }
    return len;
}

/* ---- the incremental scan (streaming) ---- */

static size_t skip_ws(const char *t, size_t len, size_t i)
{
    while (i < len && is_space(t[i])) i++;
    return i;
}

/* The end of the JSON string whose quote is at t[i] (the index after the closing quote, with
 * *closed = 1), or len when it has not closed yet. Copies up to cap - 1 raw bytes into out
 * when non-NULL. */
static size_t scan_string(const char *t, size_t len, size_t i, char *out, size_t cap, int *closed)
{
    size_t k = 0;
    *closed = 0;
    for (i++; i < len; i++) {
        if (t[i] == '\\') {
            if (out && k + 1 < cap) out[k++] = t[i];
            if (++i >= len) break;
        } else if (t[i] == '"') {
            *closed = 1;
            i++;
            break;
        }
        if (out && k + 1 < cap) out[k++] = t[i];
    }
    if (out) out[k] = 0;
    return i < len ? i : len;
}

/* The end of the JSON value starting at t[i] (after its last byte), or len if it is still
 * open; *closed says which. */
static size_t scan_value(const char *t, size_t len, size_t i, int *closed)
{
    *closed = 0;
    if (i >= len) return len;
    if (t[i] == '"') return scan_string(t, len, i, NULL, 0, closed);
    if (t[i] == '{' || t[i] == '[') {
        int depth = 0, sc;
        for (size_t j = i; j < len; j++) {
            if (t[j] == '"') {
                j = scan_string(t, len, j, NULL, 0, &sc);
                if (!sc) return len;
                j--;
            } else if (t[j] == '{' || t[j] == '[') {
                depth++;
            } else if (t[j] == '}' || t[j] == ']') {
                if (--depth == 0) {
                    *closed = 1;
                    return j + 1;
                }
            }
        }
        return len;
    }
    size_t j = i; /* a number, true, false, null: up to a delimiter */
    while (j < len && !is_space(t[j]) && t[j] != ',' && t[j] != '}' && t[j] != ']') j++;
    *closed = j < len;
    return j;
}

/* One call object at t[i] == '{' into *c; returns the index after it (len when open). */
static size_t scan_call(const char *t, size_t len, size_t i, hone_toolcall_partial *c)
{
    memset(c, 0, sizeof *c);
    i++;
    for (;;) {
        i = skip_ws(t, len, i);
        if (i >= len) return len;
        if (t[i] == '}') return i + 1;
        if (t[i] == ',') {
            i++;
            continue;
        }
        if (t[i] != '"') return len; /* not a call object after all: stop here */
        char key[32];
        int closed;
        size_t e = scan_string(t, len, i, key, sizeof key, &closed);
        if (!closed) return len;
        i = skip_ws(t, len, e);
        if (i >= len) return len;
        if (t[i] != ':') return len;
        i = skip_ws(t, len, i + 1);
        if (i >= len) return len;
        if (!strcmp(key, "name") && t[i] == '"') {
            e = scan_string(t, len, i, c->name, sizeof c->name, &closed);
            if (!closed) return len;
            c->name_done = 1;
            i = e;
        } else if (!strcmp(key, "arguments") || !strcmp(key, "parameters")) {
            c->args_started = 1;
            c->args_off = i;
            c->args_is_string = t[i] == '"';
            e = scan_value(t, len, i, &closed);
            c->args_len = e - i;
            c->args_done = closed;
            if (!closed) return len;
            i = e;
        } else {
            e = scan_value(t, len, i, &closed);
            if (!closed) return len;
            i = e;
        }
    }
}

/* The calls of one JSON value at t[i] ('{' or '['). */
static size_t scan_calls(const char *t, size_t len, size_t i, hone_toolcall_partial *calls, int cap, int *n)
{
    if (t[i] == '{') {
        hone_toolcall_partial c;
        size_t e = scan_call(t, len, i, &c);
        if (*n < cap) calls[*n] = c;
        (*n)++;
        return e;
    }
    for (i++;;) { /* an array of calls */
        i = skip_ws(t, len, i);
        if (i >= len) return len;
        if (t[i] == ']') return i + 1;
        if (t[i] == ',') {
            i++;
            continue;
        }
        if (t[i] != '{') return len;
        i = scan_calls(t, len, i, calls, cap, n);
    }
}

int hone_toolcall_scan(const char *text, size_t len, hone_toolcall_partial *calls, int cap)
{
    static const char open[] = "<tool_call>", close[] = "</tool_call>";
    int n = 0;
    size_t i = skip_ws(text, len, 0);
    if (len - i >= sizeof open - 1 && !strncmp(text + i, open, sizeof open - 1)) {
        while (i < len) { /* blocks, one after another */
            const char *p = memmem(text + i, len - i, open, sizeof open - 1);
            if (!p) break;
            i = skip_ws(text, len, (size_t)(p - text) + sizeof open - 1);
            if (i >= len || (text[i] != '{' && text[i] != '[')) break;
            i = scan_calls(text, len, i, calls, cap, &n);
            const char *q = i < len ? memmem(text + i, len - i, close, sizeof close - 1) : NULL;
            if (!q) break;
            i = (size_t)(q - text) + sizeof close - 1;
        }
        return n;
    }
    for (int k = 0; LEAD_MARKERS[k]; k++) {
        size_t m = strlen(LEAD_MARKERS[k]);
        if (len - i >= m && !strncmp(text + i, LEAD_MARKERS[k], m)) {
            i = skip_ws(text, len, i + m);
            break;
        }
    }
    if (i < len && (text[i] == '{' || text[i] == '[')) scan_calls(text, len, i, calls, cap, &n);
    return n;
}
