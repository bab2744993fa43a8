/* Chat templates (contract in chat.h): load the template text (a file, the GGUF's, or the
 * builtin ChatML), parse it with engine/jinja, and render conversations given as cJSON with the
 * variables transformers' apply_chat_template passes. */
#include "chat.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "file.h"

/* The builtin for models without a template: ChatML, content strings or text parts. A model
 * without a template cannot be told about tools, so tools are refused rather than dropped. */
static const char BUILTIN_CHATML[] =
    "{%- if tools %}{{ raise_exception('the model has no chat template and the builtin ChatML one cannot "
    "render tools: give a template with --chat-template FILE') }}{% endif %}"
    "{%- for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' }}"
    "{%- if message['content'] is string %}{{ message['content'] }}"
    "{%- elif message['content'] is iterable %}{% for part in message['content'] %}"
    "{%- if part['type'] == 'text' %}{{ part['text'] }}{% endif %}{% endfor %}{% endif %}"
    "{{- '<|im_end|>\\n' }}{% endfor %}"
    "{%- if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

static char *dup_n(const char *s, size_t n)
{
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

static int has(const char *hay, size_t hl, const char *needle)
{
    size_t nl = strlen(needle);
    for (size_t i = 0; nl <= hl && i <= hl - nl; i++)
        if (hay[i] == needle[0] && !memcmp(hay + i, needle, nl)) return 1;
    return 0;
}

const char *hone_chat_family_name(hone_chat_family f)
{
    switch (f) {
    case HONE_CHAT_CHATML: return "chatml";
    case HONE_CHAT_LLAMA2: return "llama2";
    case HONE_CHAT_LLAMA3: return "llama3";
    case HONE_CHAT_MISTRAL: return "mistral";
    case HONE_CHAT_OTHER: return "other";
    }
    return "unknown";
}

void hone_chat_clear(hone_chat_template *t)
{
    if (!t) return;
    free(t->path);
    free(t->bos_text);
    free(t->eos_text);
    hone_jinja_free(t->jinja);
    memset(t, 0, sizeof *t);
}

int hone_chat_detect(hone_chat_template *out, const char *text, size_t len, const char *bos_text,
                     const char *eos_text)
{
    memset(out, 0, sizeof *out);
    if (!text) len = 0;
    if (!len) {
        out->family = HONE_CHAT_CHATML;
        out->source = HONE_CHAT_SOURCE_BUILTIN;
        out->is_fallback = 1;
        text = BUILTIN_CHATML;
    } else {
        out->source = HONE_CHAT_SOURCE_GGUF;
        out->text_len = len;
        out->emits_bos = has(text, len, "bos_token");
        if (has(text, len, "<|im_start|>")) out->family = HONE_CHAT_CHATML;
        else if (has(text, len, "<|start_header_id|>")) out->family = HONE_CHAT_LLAMA3;
        else if (has(text, len, "[INST]")) out->family = has(text, len, "<<SYS>>") ? HONE_CHAT_LLAMA2 : HONE_CHAT_MISTRAL;
        else out->family = HONE_CHAT_OTHER;
    }
    int rc = hone_jinja_new(&out->jinja, text, len ? len : strlen(text));
    if (rc) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", hone_error_last());
        hone_chat_clear(out);
        return hone_error_set(rc, "chat template: %s", msg);
    }
    const char *bos = bos_text, *eos = eos_text;
    if (!bos) bos = out->family == HONE_CHAT_LLAMA3 ? "<|begin_of_text|>" : "<s>";
    if (!eos) eos = out->family == HONE_CHAT_LLAMA3 ? "<|eot_id|>" : "</s>";
    out->bos_text = dup_n(bos, strlen(bos));
    out->eos_text = dup_n(eos, strlen(eos));
    if (!out->bos_text || !out->eos_text) {
        hone_chat_clear(out);
        return hone_error_set(HONE_ENOMEM, "chat: out of memory");
    }
    return 0;
}

int hone_chat_load_with(hone_chat_template *out, const hone_gguf *g, const hone_tokenizer *tok,
                        const char *template_path)
{
    memset(out, 0, sizeof *out);
    const char *bos = NULL, *eos = NULL;
    if (tok) {
        if (hone_tokenizer_bos(tok) >= 0) bos = hone_tokenizer_token_text(tok, hone_tokenizer_bos(tok));
        if (hone_tokenizer_eos(tok) >= 0) eos = hone_tokenizer_token_text(tok, hone_tokenizer_eos(tok));
    }
    if (template_path) {
        char *text = NULL;
        size_t len = 0;
        int rc = hone_file_read(template_path, &text, &len);
        if (rc) return rc;
        if (!len) {
            free(text);
            return hone_error_set(HONE_EINVAL, "--chat-template %s is empty", template_path);
        }
        rc = hone_chat_detect(out, text, len, bos, eos);
        free(text);
        if (rc) {
            char msg[1024];
            snprintf(msg, sizeof msg, "%s", hone_error_last());
            return hone_error_set(rc, "--chat-template %s: %s", template_path, msg);
        }
        out->source = HONE_CHAT_SOURCE_FILE;
        out->path = dup_n(template_path, strlen(template_path));
        if (!out->path) {
            hone_chat_clear(out);
            return hone_error_set(HONE_ENOMEM, "chat: out of memory");
        }
        return 0;
    }
    int64_t i = g ? hone_gguf_find_key(g, "tokenizer.chat_template") : -1;
    hone_gguf_str s = {NULL, 0};
    if (i >= 0) {
        int rc = hone_gguf_kv_str(g, i, &s);
        if (rc) return rc;
    }
    return hone_chat_detect(out, s.ptr, (size_t)s.len, bos, eos);
}

int hone_chat_load(hone_chat_template *out, const hone_gguf *g, const hone_tokenizer *tok)
{
    return hone_chat_load_with(out, g, tok, NULL);
}

const char *hone_chat_describe(const hone_chat_template *t, char *buf, size_t n)
{
    switch (t->source) {
    case HONE_CHAT_SOURCE_GGUF:
        snprintf(buf, n, "the GGUF's tokenizer.chat_template (%zu bytes, %s-like)", t->text_len,
                 hone_chat_family_name(t->family));
        break;
    case HONE_CHAT_SOURCE_FILE:
        snprintf(buf, n, "file %s (%zu bytes, %s-like)", t->path ? t->path : "?", t->text_len,
                 hone_chat_family_name(t->family));
        break;
    default:
        snprintf(buf, n, "builtin ChatML (the model file has no tokenizer.chat_template)");
    }
    return buf;
}

/* Adds a reference to item (not a copy) under key, replacing what vars had there. */
static int set_ref(cJSON *vars, const char *key, const cJSON *item)
{
    cJSON_DeleteItemFromObjectCaseSensitive(vars, key);
    return cJSON_AddItemReferenceToObject(vars, key, (cJSON *)item) ? 0 : -1;
}

int hone_chat_render(char **out, const hone_chat_template *tmpl, const cJSON *messages, const cJSON *tools,
                     const hone_chat_render_opts *opts)
{
    static const hone_chat_render_opts defaults = HONE_CHAT_RENDER_OPTS_INIT;
    *out = NULL;
    if (!opts) opts = &defaults;
    if (!tmpl || !tmpl->jinja) return hone_error_set(HONE_EINVAL, "chat: no template loaded");
    if (!cJSON_IsArray(messages)) return hone_error_set(HONE_EINVAL, "chat: messages must be a JSON array");
    if (tools && !cJSON_IsArray(tools) && !cJSON_IsNull(tools))
        return hone_error_set(HONE_EINVAL, "chat: tools must be a JSON array");
    if (opts->extra && !cJSON_IsObject(opts->extra))
        return hone_error_set(HONE_EINVAL, "chat: the extra template variables must be a JSON object");
    cJSON *vars = cJSON_CreateObject();
    int bad = !vars;
    bad = bad || set_ref(vars, "messages", messages);
    if (!bad && tools && cJSON_IsArray(tools)) bad = set_ref(vars, "tools", tools);
    else bad = bad || !cJSON_AddNullToObject(vars, "tools");
    bad = bad || !cJSON_AddNullToObject(vars, "documents");
    bad = bad || !cJSON_AddBoolToObject(vars, "add_generation_prompt", opts->add_generation_prompt != 0);
    bad = bad || !cJSON_AddStringToObject(vars, "bos_token", tmpl->bos_text ? tmpl->bos_text : "");
    bad = bad || !cJSON_AddStringToObject(vars, "eos_token", tmpl->eos_text ? tmpl->eos_text : "");
    if (opts->enable_thinking >= 0) bad = bad || !cJSON_AddBoolToObject(vars, "enable_thinking", opts->enable_thinking);
    for (const cJSON *x = opts->extra ? opts->extra->child : NULL; x && !bad; x = x->next)
        if (x->string) bad = set_ref(vars, x->string, x);
    if (bad) {
        cJSON_Delete(vars);
        return hone_error_set(HONE_ENOMEM, "chat: out of memory");
    }
    int rc = hone_jinja_render(out, tmpl->jinja, vars, NULL);
    cJSON_Delete(vars);
    if (rc) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", hone_error_last());
        return hone_error_set(rc, "chat template: %s", msg);
    }
    return 0;
}

int hone_chat_format(char **out, const hone_chat_template *tmpl, const hone_chat_msg *msgs, int n,
                     int add_generation_prompt)
{
    *out = NULL;
    if (n < 0 || (n > 0 && !msgs)) return hone_error_set(HONE_EINVAL, "chat: bad message list (n = %d)", n);
    for (int i = 0; i < n; i++)
        if (!msgs[i].role || !msgs[i].content)
            return hone_error_set(HONE_EINVAL, "chat: message %d has a NULL %s", i,
                                  msgs[i].role ? "content" : "role");
    cJSON *arr = cJSON_CreateArray();
    int bad = !arr;
    for (int i = 0; i < n && !bad; i++) {
        cJSON *m = cJSON_CreateObject();
        bad = !m || !cJSON_AddItemToArray(arr, m) || !cJSON_AddStringToObject(m, "role", msgs[i].role) ||
              !cJSON_AddStringToObject(m, "content", msgs[i].content);
    }
    if (bad) {
        cJSON_Delete(arr);
        return hone_error_set(HONE_ENOMEM, "chat: out of memory");
    }
    hone_chat_render_opts o = HONE_CHAT_RENDER_OPTS_INIT;
    o.add_generation_prompt = add_generation_prompt;
    int rc = hone_chat_render(out, tmpl, arr, NULL, &o);
    cJSON_Delete(arr);
    return rc;
}
