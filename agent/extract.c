/* Code extraction: fenced blocks, entry-point search, and a parameter-type comparison that
 * ignores names, whitespace and `restrict`. */
#include "extract.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/error.h"

/* The parameter types of a CPU slot from its descriptor, as norm_params() produces them. */
const char *hone_extract_cpu_signature(int slot)
{
    static _Thread_local char buf[512];
    hone_slots_param_types(slot, buf, (int)sizeof buf);
    return buf;
}

void hone_extract_entry(hone_slot_id slot, const char *backend, char *buf, int cap)
{
    snprintf(buf, (size_t)cap, "hone_%s_%s", strcmp(backend, "cuda") == 0 ? "cuda" : "cpu",
             hone_slots_name(slot));
}

const char *hone_extract_status_name(hone_extract_status s)
{
    switch (s) {
    case HONE_EXTRACT_OK: return "ok";
    case HONE_EXTRACT_NO_CODE: return "no code";
    case HONE_EXTRACT_NO_ENTRY: return "no entry point";
    case HONE_EXTRACT_BAD_SIGNATURE: return "bad signature";
    case HONE_EXTRACT_PARTIAL: return "partial code";
    default: return "?";
    }
}

static int is_ident(int c) { return isalnum(c) || c == '_'; }

/* Normalises one parameter declaration to its type: drops the name, `restrict` and extra
 * whitespace, and writes pointer stars as " *". "const float *restrict x" -> "const float *". */
static void norm_param(const char *p, size_t n, char *out, size_t cap)
{
    char words[16][64];
    int nw = 0, stars_after[16] = {0}, lead_stars = 0;
    size_t i = 0;
    while (i < n && nw < 16) {
        if (isspace((unsigned char)p[i])) { i++; continue; }
        if (p[i] == '*') {
            if (nw) stars_after[nw - 1]++;
            else lead_stars++;
            i++;
            continue;
        }
        if (is_ident((unsigned char)p[i])) {
            size_t j = i;
            while (j < n && is_ident((unsigned char)p[j])) j++;
            size_t len = j - i < 63 ? j - i : 63;
            memcpy(words[nw], p + i, len);
            words[nw][len] = 0;
            if (strcmp(words[nw], "restrict") && strcmp(words[nw], "__restrict") &&
                strcmp(words[nw], "__restrict__"))
                nw++;
            i = j;
            continue;
        }
        i++; /* brackets etc. */
    }
    (void)lead_stars;
    /* the last identifier is the name when there is more than one word (C requires a type) */
    int last_is_name = nw > 1 && !(nw == 1);
    if (nw >= 2) {
        const char *w = words[nw - 1];
        /* "unsigned int" style types have no name: only drop a name that is not a type word */
        static const char *const type_words[] = {"int", "float", "double", "char", "void", "long",
                                                 "short", "unsigned", "signed", "int32_t",
                                                 "int64_t", "uint8_t", "uint16_t", "uint32_t",
                                                 "uint64_t", "int8_t", "int16_t", "size_t"};
        for (size_t k = 0; k < sizeof type_words / sizeof type_words[0]; k++)
            if (!strcmp(w, type_words[k]) && stars_after[nw - 1] == 0 && stars_after[nw - 2] == 0)
                last_is_name = 0;
    }
    int end = last_is_name ? nw - 1 : nw;
    int total_stars = 0;
    for (int k = 0; k < nw; k++) total_stars += stars_after[k];
    size_t o = 0;
    out[0] = 0;
    for (int k = 0; k < end; k++) o += (size_t)snprintf(out + o, cap > o ? cap - o : 0, "%s%s", k ? " " : "", words[k]);
    if (total_stars) {
        o += (size_t)snprintf(out + o, cap > o ? cap - o : 0, " ");
        for (int k = 0; k < total_stars; k++) o += (size_t)snprintf(out + o, cap > o ? cap - o : 0, "*");
    }
}

/* The normalised parameter list of the definition of `entry` in code, or -1 if absent. */
static int find_definition(const char *code, const char *entry, char *out, size_t cap)
{
    size_t el = strlen(entry);
    for (const char *p = strstr(code, entry); p; p = strstr(p + 1, entry)) {
        if ((p > code && is_ident((unsigned char)p[-1])) || is_ident((unsigned char)p[el])) continue;
        const char *q = p + el;
        while (isspace((unsigned char)*q)) q++;
        if (*q != '(') continue;
        const char *close = strchr(q, ')');
        if (!close) continue;
        const char *r = close + 1;
        while (isspace((unsigned char)*r)) r++;
        if (*r != '{') continue; /* a declaration or a call, not the definition */
        size_t o = 0;
        out[0] = 0;
        const char *s = q + 1;
        while (s < close) {
            const char *comma = memchr(s, ',', (size_t)(close - s));
            const char *e = comma ? comma : close;
            char one[160];
            norm_param(s, (size_t)(e - s), one, sizeof one);
            o += (size_t)snprintf(out + o, cap > o ? cap - o : 0, "%s%s", o ? "," : "", one);
            s = e + 1;
        }
        return 0;
    }
    return -1;
}

/* Whether code's braces balance (outside comments, strings and character literals). */
static int braces_balance(const char *code)
{
    long depth = 0;
    for (const char *p = code; *p; p++) {
        if (p[0] == '/' && p[1] == '*') {
            const char *e = strstr(p + 2, "*/");
            if (!e) return 0;
            p = e + 1;
        } else if (p[0] == '/' && p[1] == '/') {
            while (p[1] && p[1] != '\n') p++;
        } else if (*p == '"' || *p == '\'') {
            char q = *p;
            for (p++; *p && *p != q; p++)
                if (*p == '\\' && p[1]) p++;
            if (!*p) return 0;
        } else if (*p == '{') {
            depth++;
        } else if (*p == '}') {
            if (--depth < 0) return 0;
        }
    }
    return depth == 0;
}

/* The first slot entry point other than slot's that code defines ("hone_cpu_rmsnorm"), or "". */
static void other_entry(const char *code, const char *backend, hone_slot_id slot, char *out, size_t cap)
{
    out[0] = 0;
    char entry[96], sig[1024];
    for (int id = 0; id < hone_slots_count(); id++) {
        if (id == (int)slot) continue;
        hone_extract_entry((hone_slot_id)id, backend, entry, sizeof entry);
        if (find_definition(code, entry, sig, sizeof sig) == 0) {
            snprintf(out, cap, "%s", entry);
            return;
        }
    }
}

int hone_extract_code(const char *reply, hone_slot_id slot, const char *backend, char **out_code,
                      hone_extract_status *status)
{
    char entry[96];
    hone_extract_entry(slot, backend, entry, sizeof entry);
    *out_code = NULL;
    *status = HONE_EXTRACT_NO_CODE;
    const char *best = NULL;
    size_t best_len = 0;
    int saw_block = 0, best_cut = 0;
    char sig[1024] = "", other[96] = "";
    for (const char *p = strstr(reply, "```"); p;) {
        const char *body = strchr(p + 3, '\n');
        if (!body) break;
        body++;
        const char *end = strstr(body, "```");
        if (!end) end = body + strlen(body); /* an unterminated last block */
        saw_block = 1;
        char *block = strndup(body, (size_t)(end - body));
        if (!block) return hone_error_set(HONE_ENOMEM, "out of memory");
        char s[1024];
        if (find_definition(block, entry, s, sizeof s) == 0) {
            best = body;
            best_len = (size_t)(end - body);
            best_cut = !*end && !braces_balance(block);
            snprintf(sig, sizeof sig, "%s", s);
        } else if (!other[0]) {
            other_entry(block, backend, slot, other, sizeof other);
        }
        free(block);
        p = *end ? strstr(end + 3, "```") : NULL;
    }
    if (!saw_block) {
        hone_error_set(HONE_EINVAL, "the reply contains no fenced code block: answer with one "
                       "```c block that defines %s", entry);
        return 0;
    }
    if (!best) {
        *status = HONE_EXTRACT_NO_ENTRY;
        if (other[0])
            hone_error_set(HONE_EINVAL, "the code defines %s, the entry point of slot %s; this slot is %s: "
                           "define %s(...) { ... }", other, other + strlen(strcmp(backend, "cuda") ? "hone_cpu_" : "hone_cuda_"),
                           hone_slots_name(slot), entry);
        else
            hone_error_set(HONE_EINVAL, "no code block defines %s(...) { ... }", entry);
        return 0;
    }
    if (best_cut) {
        *status = HONE_EXTRACT_PARTIAL;
        hone_error_set(HONE_EINVAL, "the code block that defines %s is cut off (its fence never closes and "
                       "its braces do not balance): reply with the complete file", entry);
        return 0;
    }
    const char *want = hone_extract_cpu_signature(slot);
    if (strcmp(backend, "cuda") != 0 && strcmp(sig, want) != 0) {
        *status = HONE_EXTRACT_BAD_SIGNATURE;
        hone_error_set(HONE_EINVAL, "%s has parameters (%s); the slot's are (%s)", entry, sig, want);
        return 0;
    }
    if (!(*out_code = strndup(best, best_len))) return hone_error_set(HONE_ENOMEM, "out of memory");
    *status = HONE_EXTRACT_OK;
    return 0;
}
