/* Chat templates: pick the family by marker strings in the Jinja text, then render with
 * hand-written code that mirrors each official template line by line (including Python's
 * str.strip() where the template calls .strip() or |trim). */
#include "chat.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"

typedef struct {
    char *s;
    size_t n, cap;
    int failed;
} sbuf;

static void sb_put(sbuf *b, const char *p, size_t n)
{
    if (b->failed) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1) cap *= 2;
        char *ns = realloc(b->s, cap);
        if (!ns) {
            b->failed = 1;
            return;
        }
        b->s = ns;
        b->cap = cap;
    }
    memcpy(b->s + b->n, p, n);
    b->n += n;
    b->s[b->n] = '\0';
}

static void sb_str(sbuf *b, const char *s) { sb_put(b, s ? s : "", s ? strlen(s) : 0); }

/* Length of the Python-whitespace character at s[0..n) (str.isspace: ASCII \t\n\v\f\r,
 * \x1c-\x1f, space, U+0085, U+00A0, U+1680, U+2000-U+200A, U+2028, U+2029, U+202F, U+205F,
 * U+3000), or 0. */
static size_t py_space_at(const unsigned char *s, size_t n)
{
    unsigned char c = s[0];
    if (c == ' ' || (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x1F)) return 1;
    if (c == 0xC2 && n >= 2 && (s[1] == 0x85 || s[1] == 0xA0)) return 2;
    if (c == 0xE1 && n >= 3 && s[1] == 0x9A && s[2] == 0x80) return 3;
    if (c == 0xE2 && n >= 3 && s[1] == 0x80 &&
        (s[2] <= 0x8A || s[2] == 0xA8 || s[2] == 0xA9 || s[2] == 0xAF)) return 3;
    if (c == 0xE2 && n >= 3 && s[1] == 0x81 && s[2] == 0x9F) return 3;
    if (c == 0xE3 && n >= 3 && s[1] == 0x80 && s[2] == 0x80) return 3;
    return 0;
}

/* Python's str.strip(): appends s without leading and trailing whitespace. */
static void sb_strip(sbuf *b, const char *str)
{
    const unsigned char *s = (const unsigned char *)(str ? str : "");
    size_t n = strlen((const char *)s), lo = 0, k;
    while (lo < n && (k = py_space_at(s + lo, n - lo)) > 0) lo += k;
    /* Trailing: scan forward so multi-byte spaces are recognised from their lead byte. */
    size_t i = lo, last_non_space_end = lo;
    while (i < n) {
        k = py_space_at(s + i, n - i);
        if (k) {
            i += k;
        } else {
            i++;
            while (i < n && (s[i] & 0xC0) == 0x80) i++;
            last_non_space_end = i;
        }
    }
    sb_put(b, (const char *)s + lo, last_non_space_end - lo);
}

static char *dup_n(const char *s, size_t n)
{
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

static const char *find_n(const char *hay, size_t hl, const char *needle)
{
    size_t nl = strlen(needle);
    for (size_t i = 0; nl <= hl && i <= hl - nl; i++)
        if (hay[i] == needle[0] && !memcmp(hay + i, needle, nl)) return hay + i;
    return NULL;
}

/* Reads the Jinja string literal whose opening quote is at q (within text[0..len)) into a
 * malloc'd, unescaped *out. Returns 0, 1 if the literal is not closed, or HONE_ENOMEM. */
static int jinja_literal(const char *text, size_t len, const char *q, char **out)
{
    char quote = *q;
    const char *end = text + len;
    char *v = malloc((size_t)(end - q) + 1);
    *out = NULL;
    if (!v) return hone_error_set(HONE_ENOMEM, "chat: out of memory");
    size_t m = 0;
    for (const char *p = q + 1; p < end; p++) {
        if (*p == quote) {
            v[m] = '\0';
            *out = v;
            return 0;
        }
        if (*p == '\\' && p + 1 < end) {
            p++;
            switch (*p) {
            case 'n': v[m++] = '\n'; break;
            case 't': v[m++] = '\t'; break;
            case 'r': v[m++] = '\r'; break;
            default: v[m++] = *p; break; /* \\ \' \" */
            }
            continue;
        }
        v[m++] = *p;
    }
    free(v);
    return 1;
}

/* ChatML templates that hard-code a whole system turn in one literal, e.g. SmolLM2's
 * {% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\nYou are ...<|im_end|>\n' }}
 * insert it when the conversation has no system message: *out = its content (NULL if
 * none, malloc'd otherwise). */
static int chatml_default_system(const char *text, size_t len, char **out)
{
    static const char head[] = "<|im_start|>system";
    const char *p = text;
    *out = NULL;
    while ((p = find_n(p, (size_t)(text + len - p), head)) != NULL) {
        if (p > text && (p[-1] == '\'' || p[-1] == '"')) {
            char *lit;
            int rc = jinja_literal(text, len, p - 1, &lit);
            if (rc < 0) return rc;
            if (rc == 0) {
                const char *body = lit + sizeof head - 1;
                const char *end = strstr(body, "<|im_end|>");
                if (*body == '\n' && end && !strstr(body, "<|im_start|>")) {
                    *out = dup_n(body + 1, (size_t)(end - body - 1));
                    free(lit);
                    return *out ? 0 : hone_error_set(HONE_ENOMEM, "chat: out of memory");
                }
                free(lit);
            }
        }
        p += sizeof head - 1;
    }
    return 0;
}

const char *hone_chat_family_name(hone_chat_family f)
{
    switch (f) {
    case HONE_CHAT_CHATML: return "chatml";
    case HONE_CHAT_LLAMA2: return "llama2";
    case HONE_CHAT_LLAMA3: return "llama3";
    case HONE_CHAT_MISTRAL: return "mistral";
    }
    return "unknown";
}

void hone_chat_clear(hone_chat_template *t)
{
    if (!t) return;
    free(t->default_system);
    free(t->bos_text);
    free(t->eos_text);
    memset(t, 0, sizeof *t);
}

int hone_chat_detect(hone_chat_template *out, const char *text, size_t len, const char *bos_text,
                     const char *eos_text)
{
    memset(out, 0, sizeof *out);
    if (!text) len = 0;
    if (len && find_n(text, len, "<|im_start|>")) {
        out->family = HONE_CHAT_CHATML;
        int rc = chatml_default_system(text, len, &out->default_system);
        if (rc) return rc;
    } else if (len && find_n(text, len, "<|start_header_id|>")) {
        out->family = HONE_CHAT_LLAMA3;
        out->emits_bos = find_n(text, len, "bos_token") != NULL;
    } else if (len && find_n(text, len, "[INST]")) {
        int sys = find_n(text, len, "<<SYS>>") != NULL;
        out->family = sys ? HONE_CHAT_LLAMA2 : HONE_CHAT_MISTRAL;
        out->emits_bos = find_n(text, len, "bos_token") != NULL;
        out->eos_space = !sys && find_n(text, len, "eos_token + ' '") != NULL;
    } else {
        out->family = HONE_CHAT_CHATML;
        out->is_fallback = 1;
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

int hone_chat_load(hone_chat_template *out, const hone_gguf *g, const hone_tokenizer *tok)
{
    memset(out, 0, sizeof *out);
    const char *bos = NULL, *eos = NULL;
    if (tok) {
        if (hone_tokenizer_bos(tok) >= 0) bos = hone_tokenizer_token_text(tok, hone_tokenizer_bos(tok));
        if (hone_tokenizer_eos(tok) >= 0) eos = hone_tokenizer_token_text(tok, hone_tokenizer_eos(tok));
    }
    int64_t i = hone_gguf_find_key(g, "tokenizer.chat_template");
    hone_gguf_str s = {NULL, 0};
    if (i >= 0) {
        int rc = hone_gguf_kv_str(g, i, &s);
        if (rc) return rc;
    }
    return hone_chat_detect(out, s.ptr, (size_t)s.len, bos, eos);
}

static int is_role(const hone_chat_msg *m, const char *role)
{
    return m->role && !strcmp(m->role, role);
}

static void format_chatml(sbuf *b, const hone_chat_template *t, const hone_chat_msg *msgs, int n, int gen)
{
    for (int i = 0; i < n; i++) {
        if (i == 0 && t->default_system && !is_role(&msgs[0], "system")) {
            sb_str(b, "<|im_start|>system\n");
            sb_str(b, t->default_system);
            sb_str(b, "<|im_end|>\n");
        }
        sb_str(b, "<|im_start|>");
        sb_str(b, msgs[i].role);
        sb_str(b, "\n");
        sb_str(b, msgs[i].content);
        sb_str(b, "<|im_end|>\n");
    }
    if (gen) sb_str(b, "<|im_start|>assistant\n");
}

static void format_llama3(sbuf *b, const hone_chat_template *t, const hone_chat_msg *msgs, int n, int gen)
{
    for (int i = 0; i < n; i++) {
        if (i == 0 && t->emits_bos) sb_str(b, t->bos_text);
        sb_str(b, "<|start_header_id|>");
        sb_str(b, msgs[i].role);
        sb_str(b, "<|end_header_id|>\n\n");
        sb_strip(b, msgs[i].content);
        sb_str(b, "<|eot_id|>");
    }
    if (gen) sb_str(b, "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

static const char ALTERNATE[] = "Conversation roles must alternate user/assistant/user/assistant/...";

static int format_llama2(sbuf *b, const hone_chat_template *t, const hone_chat_msg *msgs, int n)
{
    const char *sys = NULL;
    if (n == 0) /* the template reads messages[0] unconditionally */
        return hone_error_set(HONE_EINVAL, "chat (llama2): the template needs at least one message");
    if (is_role(&msgs[0], "system")) {
        sys = msgs[0].content ? msgs[0].content : "";
        msgs++;
        n--;
    }
    for (int i = 0; i < n; i++) {
        int user = is_role(&msgs[i], "user");
        if (user != (i % 2 == 0)) return hone_error_set(HONE_EINVAL, "chat (llama2): %s", ALTERNATE);
    }
    for (int i = 0; i < n; i++) {
        sbuf content = {0};
        if (i == 0 && sys) {
            sb_str(&content, "<<SYS>>\n");
            sb_str(&content, sys);
            sb_str(&content, "\n<</SYS>>\n\n");
        }
        sb_str(&content, msgs[i].content);
        if (content.failed) {
            free(content.s);
            b->failed = 1;
            return 0;
        }
        if (is_role(&msgs[i], "user")) {
            if (t->emits_bos) sb_str(b, t->bos_text);
            sb_str(b, "[INST] ");
            sb_strip(b, content.s);
            sb_str(b, " [/INST]");
        } else if (is_role(&msgs[i], "assistant")) {
            sb_str(b, " ");
            sb_strip(b, content.s);
            sb_str(b, " ");
            sb_str(b, t->eos_text);
        }
        free(content.s);
    }
    return 0;
}

static int format_mistral(sbuf *b, const hone_chat_template *t, const hone_chat_msg *msgs, int n)
{
    if (t->emits_bos) sb_str(b, t->bos_text);
    for (int i = 0; i < n; i++) {
        int user = is_role(&msgs[i], "user");
        if (user != (i % 2 == 0)) return hone_error_set(HONE_EINVAL, "chat (mistral): %s", ALTERNATE);
        if (user) {
            sb_str(b, "[INST] ");
            sb_str(b, msgs[i].content);
            sb_str(b, " [/INST]");
        } else if (is_role(&msgs[i], "assistant")) {
            sb_str(b, msgs[i].content);
            sb_str(b, t->eos_text);
            if (t->eos_space) sb_str(b, " ");
        } else {
            return hone_error_set(HONE_EINVAL, "chat (mistral): Only user and assistant roles are supported! (got '%s')",
                                  msgs[i].role ? msgs[i].role : "(null)");
        }
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
    sbuf b = {0};
    int rc = 0;
    sb_put(&b, "", 0);
    switch (tmpl->family) {
    case HONE_CHAT_CHATML: format_chatml(&b, tmpl, msgs, n, add_generation_prompt); break;
    case HONE_CHAT_LLAMA3: format_llama3(&b, tmpl, msgs, n, add_generation_prompt); break;
    case HONE_CHAT_LLAMA2: rc = format_llama2(&b, tmpl, msgs, n); break;
    case HONE_CHAT_MISTRAL: rc = format_mistral(&b, tmpl, msgs, n); break;
    default: rc = hone_error_set(HONE_EINVAL, "chat: unknown template family %d", (int)tmpl->family);
    }
    if (!rc && b.failed) rc = hone_error_set(HONE_ENOMEM, "chat: out of memory");
    if (rc) {
        free(b.s);
        return rc;
    }
    *out = b.s;
    return 0;
}
