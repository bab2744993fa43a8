/* Tokenizer: GGUF vocab -> hash tables, then byte-level BPE (gpt2) or score-driven
 * SentencePiece BPE (llama), both following llama.cpp's llama-vocab.cpp so that ids match
 * it and the Hugging Face tokenizers; special tokens are split out of the text first. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer.h"

#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"

/* ---------------------------------------------------------------- UTF-8 helpers */

/* Length of the sequence a lead byte announces; 1 for ASCII and for bytes that cannot lead. */
static int utf8_len(unsigned char c)
{
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) return 2;
    if (c >= 0xE0 && c <= 0xEF) return 3;
    if (c >= 0xF0 && c <= 0xF4) return 4;
    return 1;
}

static int utf8_put(uint32_t cp, char *o)
{
    if (cp < 0x80) { o[0] = (char)cp; return 1; }
    if (cp < 0x800) {
        o[0] = (char)(0xC0 | (cp >> 6));
        o[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | (cp >> 12));
        o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | (cp >> 18));
    o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Length of the well-formed UTF-8 sequence at s[0..n), or 0 if it is not one. */
static int utf8_valid_at(const unsigned char *s, size_t n)
{
    unsigned char c = s[0];
    if (c < 0x80) return 1;
    int len = utf8_len(c);
    if (len == 1 || (size_t)len > n) return 0;
    for (int k = 1; k < len; k++)
        if ((s[k] & 0xC0) != 0x80) return 0;
    if (c == 0xE0 && s[1] < 0xA0) return 0;  /* overlong */
    if (c == 0xED && s[1] > 0x9F) return 0;  /* surrogate */
    if (c == 0xF0 && s[1] < 0x90) return 0;  /* overlong */
    if (c == 0xF4 && s[1] > 0x8F) return 0;  /* > U+10FFFF */
    return len;
}

/* Decodes one sequence (assumed well-formed, len from utf8_len). */
static uint32_t utf8_get(const unsigned char *s, int len)
{
    switch (len) {
    case 2: return ((uint32_t)(s[0] & 0x1F) << 6) | (s[1] & 0x3F);
    case 3: return ((uint32_t)(s[0] & 0x0F) << 12) | ((uint32_t)(s[1] & 0x3F) << 6) | (s[2] & 0x3F);
    case 4:
        return ((uint32_t)(s[0] & 0x07) << 18) | ((uint32_t)(s[1] & 0x3F) << 12) |
               ((uint32_t)(s[2] & 0x3F) << 6) | (s[3] & 0x3F);
    default: return s[0];
    }
}

/* GPT-2's byte -> code point alphabet: printable bytes map to themselves, the others to
 * 256, 257, ... in byte order, so every byte is a visible character. */
static void gpt2_byte_alphabet(uint32_t map[256])
{
    uint32_t n = 0;
    for (int b = 0; b < 256; b++) {
        int keep = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
        map[b] = keep ? (uint32_t)b : 256 + n++;
    }
}

/* ---------------------------------------------------------------- hash tables */

static uint64_t hash_bytes(const char *p, size_t n)
{
    uint64_t h = 1469598103934665603ull;  /* FNV-1a */
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)p[i];
        h *= 1099511628211ull;
    }
    return h ^ (h >> 29);
}

static size_t pow2_at_least(size_t n)
{
    size_t c = 16;
    while (c < n) c <<= 1;
    return c;
}

/* String -> id, keys borrowed from the token arena. Open addressing, linear probing. */
typedef struct {
    int32_t *slot; /* token id, or -1 when empty */
    size_t mask;
} str_map;

/* Pair of ids -> (merge rank, merged id). */
typedef struct {
    uint64_t key;  /* (left << 32) | right; UINT64_MAX when empty */
    int32_t rank;
    int32_t result;
} pair_entry;

typedef struct {
    pair_entry *slot;
    size_t mask;
} pair_map;

static uint64_t hash_pair(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    return k;
}

/* ---------------------------------------------------------------- the tokenizer */

enum { MAX_REGEX = 8 }; /* deepseek-llm splits by six */

struct hone_tokenizer {
    hone_tokenizer_kind kind;
    int32_t n_vocab;
    char *arena;        /* every token's text, NUL-terminated, back to back */
    size_t *tok_off;    /* (n_vocab) offset into arena */
    uint32_t *tok_len;  /* (n_vocab) bytes, without the NUL */
    float *scores;      /* (n_vocab) spm merge priorities (0 when absent) */
    uint8_t *types;     /* (n_vocab) hone_token_type */
    str_map tok_map;
    pair_map merges;          /* gpt2 only */
    int32_t byte_id[256];     /* gpt2: id of the alphabet character of each byte; spm: <0xXX> */
    uint32_t byte_cp[256];    /* gpt2: the alphabet */
    int16_t cp_byte[512];     /* gpt2: alphabet code point -> byte, -1 if not in it */
    int32_t bos, eos, unk, eot, pad;
    int add_bos, add_space_prefix;
    int ignore_merges;        /* llama3: a piece that is a whole token is taken as is */
    pcre2_code *re[MAX_REGEX];
    int n_re;
    int32_t *special;         /* ids of control / user-defined / unknown tokens, longest first */
    int32_t n_special;
    int32_t eog[8];
    int n_eog;
    char pre[64];
    char note[256];
};

static const char *tok_str(const hone_tokenizer *t, int32_t id) { return t->arena + t->tok_off[id]; }

static int32_t map_find(const hone_tokenizer *t, const char *p, size_t n)
{
    if (!t->tok_map.slot) return -1;
    size_t i = (size_t)hash_bytes(p, n) & t->tok_map.mask;
    for (;;) {
        int32_t id = t->tok_map.slot[i];
        if (id < 0) return -1;
        if (t->tok_len[id] == n && memcmp(tok_str(t, id), p, n) == 0) return id;
        i = (i + 1) & t->tok_map.mask;
    }
}

/* Later duplicates win, as in llama.cpp's token_to_id[text] = id. */
static void map_insert(hone_tokenizer *t, int32_t id)
{
    const char *p = tok_str(t, id);
    size_t n = t->tok_len[id];
    size_t i = (size_t)hash_bytes(p, n) & t->tok_map.mask;
    for (;;) {
        int32_t cur = t->tok_map.slot[i];
        if (cur < 0 || (t->tok_len[cur] == n && memcmp(tok_str(t, cur), p, n) == 0)) {
            t->tok_map.slot[i] = id;
            return;
        }
        i = (i + 1) & t->tok_map.mask;
    }
}

static const pair_entry *pair_find(const pair_map *m, int32_t l, int32_t r)
{
    uint64_t k = ((uint64_t)(uint32_t)l << 32) | (uint32_t)r;
    size_t i = (size_t)hash_pair(k) & m->mask;
    for (;;) {
        const pair_entry *e = &m->slot[i];
        if (e->key == UINT64_MAX) return NULL;
        if (e->key == k) return e;
        i = (i + 1) & m->mask;
    }
}

/* First rule for a pair wins (lowest rank), as a rank table built in order would. */
static void pair_insert(pair_map *m, int32_t l, int32_t r, int32_t rank, int32_t result)
{
    uint64_t k = ((uint64_t)(uint32_t)l << 32) | (uint32_t)r;
    size_t i = (size_t)hash_pair(k) & m->mask;
    for (;;) {
        pair_entry *e = &m->slot[i];
        if (e->key == k) return;
        if (e->key == UINT64_MAX) {
            e->key = k;
            e->rank = rank;
            e->result = result;
            return;
        }
        i = (i + 1) & m->mask;
    }
}

/* ---------------------------------------------------------------- loading */

/* Pre-tokenizer regexes, as in llama.cpp's llama-vocab.cpp; a piece is split by each
 * regex in turn, and both the matches and the text between them become pieces. */
static const char RE_GPT2[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)";
static const char RE_LLAMA3[] =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
    "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char RE_QWEN2[] =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
    "\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char RE_DIGIT[] = "\\p{N}";
/* DeepSeek's pre-tokenizers (the Split patterns of their tokenizer.json, in order): newlines
 * alone, letter runs with one leading space, punctuation runs, CJK runs, digits. deepseek-llm
 * spells its letters as a class of ranges (the cased letters, written here by code point: NFC
 * would fold some of them, U+212A KELVIN SIGN to K) and its punctuation as ASCII and
 * full-width ranges. */
static const char *const RE_DEEPSEEK_CODER[] = {"[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+",
                                                "[一-龥ࠀ-一가-퟿]+", "\\p{N}"};
static const char *const RE_DEEPSEEK_LLM[] = {
    "[\r\n]",
    "\\s?["
    "\\x{41}-\\x{5A}\\x{61}-\\x{7A}\\x{B5}\\x{C0}-\\x{D6}\\x{D8}-\\x{F6}\\x{F8}-\\x{1BA}"
    "\\x{1BC}-\\x{1BF}\\x{1C4}-\\x{293}\\x{295}-\\x{2AF}\\x{370}-\\x{373}\\x{376}\\x{377}"
    "\\x{37B}-\\x{37D}\\x{37F}\\x{386}\\x{388}-\\x{38A}\\x{38C}\\x{38E}-\\x{3A1}\\x{3A3}-"
    "\\x{3F5}\\x{3F7}-\\x{481}\\x{48A}-\\x{52F}\\x{531}-\\x{556}\\x{10A0}-\\x{10C5}"
    "\\x{13A0}-\\x{13F5}\\x{13F8}-\\x{13FD}\\x{1C90}-\\x{1CBA}\\x{1CBD}-\\x{1CBF}"
    "\\x{1D00}-\\x{1D2B}\\x{1D6B}-\\x{1D77}\\x{1D79}-\\x{1D9A}\\x{1E00}-\\x{1F15}"
    "\\x{1F18}-\\x{1F1D}\\x{1F20}-\\x{1F45}\\x{1F48}-\\x{1F4D}\\x{1F50}-\\x{1F57}"
    "\\x{1F59}\\x{1F5B}\\x{1F5D}\\x{1F5F}-\\x{1F7D}\\x{1F80}-\\x{1FB4}\\x{1FB6}-\\x{1FBC}"
    "\\x{1FBE}\\x{1FC2}-\\x{1FC4}\\x{1FC6}-\\x{1FCC}\\x{1FD0}-\\x{1FD3}\\x{1FD6}-"
    "\\x{1FDB}\\x{1FE0}-\\x{1FEC}\\x{1FF2}-\\x{1FF4}\\x{1FF6}-\\x{1FFC}\\x{2102}\\x{2107}"
    "\\x{210A}-\\x{2113}\\x{2115}\\x{2119}-\\x{211D}\\x{2124}\\x{2126}\\x{2128}\\x{212A}-"
    "\\x{212D}\\x{212F}-\\x{2134}\\x{2139}\\x{213C}-\\x{213F}\\x{2145}-\\x{2149}\\x{214E}"
    "\\x{2183}\\x{2184}\\x{2C00}-\\x{2C7B}\\x{2C7E}-\\x{2CE4}\\x{2CEB}-\\x{2CEE}\\x{2CF2}"
    "\\x{2CF3}\\x{A640}-\\x{A66D}\\x{A680}-\\x{A69B}\\x{A722}-\\x{A76F}\\x{A771}-"
    "\\x{A787}\\x{A78B}-\\x{A78E}\\x{AB70}-\\x{ABBF}\\x{FB00}-\\x{FB06}\\x{FB13}-"
    "\\x{FB17}\\x{FF21}-\\x{FF3A}\\x{FF41}-\\x{FF5A}\\x{10400}-\\x{1044F}\\x{104B0}-"
    "\\x{104D3}\\x{104D8}-\\x{104FB}\\x{10C80}-\\x{10CB2}\\x{10CC0}-\\x{10CF2}\\x{118A0}-"
    "\\x{118DF}\\x{1E900}-\\x{1E943}"
    "]+",
    "\\s?[!-/:-~！-／：-～‘-‟　-。]+",
    "\\s+$",
    "[一-龥ࠀ-一가-퟿]+",
    "\\p{N}+"};

/* Adds each of patterns[n] in order. */
static int add_regexes(hone_tokenizer *t, const char *const *patterns, size_t n);

static int add_regex(hone_tokenizer *t, const char *pattern)
{
    int err = 0;
    PCRE2_SIZE off = 0;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED,
                                   PCRE2_UTF | PCRE2_UCP, &err, &off, NULL);
    if (!re) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(err, msg, sizeof msg);
        return hone_error_set(HONE_EINTERNAL, "tokenizer: pre-tokenizer regex does not compile at %zu: %s",
                              (size_t)off, (const char *)msg);
    }
    (void)pcre2_jit_compile(re, PCRE2_JIT_COMPLETE); /* optional: the interpreter is the fallback */
    t->re[t->n_re++] = re;
    return 0;
}

static int add_regexes(hone_tokenizer *t, const char *const *patterns, size_t n)
{
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) rc = add_regex(t, patterns[i]);
    return rc;
}

static int setup_pre(hone_tokenizer *t)
{
    const char *p = t->pre;
    if (!strcmp(p, "deepseek-coder"))
        return add_regexes(t, RE_DEEPSEEK_CODER, sizeof RE_DEEPSEEK_CODER / sizeof *RE_DEEPSEEK_CODER);
    if (!strcmp(p, "deepseek-llm"))
        return add_regexes(t, RE_DEEPSEEK_LLM, sizeof RE_DEEPSEEK_LLM / sizeof *RE_DEEPSEEK_LLM);
    if (!strcmp(p, "llama3") || !strcmp(p, "llama-v3") || !strcmp(p, "llama-bpe") ||
        !strcmp(p, "falcon3")) {
        t->ignore_merges = 1;
        return add_regex(t, RE_LLAMA3);
    }
    if (!strcmp(p, "qwen2")) return add_regex(t, RE_QWEN2);
    if (!strcmp(p, "starcoder") || !strcmp(p, "refact") || !strcmp(p, "smollm") ||
        !strcmp(p, "command-r") || !strcmp(p, "codeshell") || !strcmp(p, "exaone") ||
        !strcmp(p, "minerva-7b")) {
        int rc = add_regex(t, RE_DIGIT);
        return rc ? rc : add_regex(t, RE_GPT2);
    }
    if (strcmp(p, "default") && strcmp(p, "gpt2") && strcmp(p, "gpt-2"))
        snprintf(t->note, sizeof t->note,
                 "unknown pre-tokenizer '%s': using the GPT-2 regex, token ids may differ", p);
    return add_regex(t, RE_GPT2);
}

/* Reads an optional token id key: absent or negative -> -1; >= n_vocab is an error. */
static int read_id(const hone_gguf *g, const char *key, int32_t n_vocab, int32_t *out)
{
    int64_t v = -1;
    int rc = hone_gguf_get_i64_opt(g, key, &v);
    if (rc) return rc;
    if (v >= n_vocab)
        return hone_error_set(HONE_EFORMAT, "%s: %s = %lld is out of range (vocab has %d tokens)",
                              hone_gguf_path(g), key, (long long)v, n_vocab);
    *out = v < 0 ? -1 : (int32_t)v;
    return 0;
}

/* Index of an array key whose elements have type elem (0 = any numeric), checking its length. */
static int find_array(const hone_gguf *g, const char *key, hone_gguf_type elem, uint64_t want_len,
                      int64_t *out)
{
    int64_t i = hone_gguf_find_key(g, key);
    *out = i;
    if (i < 0) return 0;
    if (hone_gguf_kv_type(g, i) != HONE_GGUF_TYPE_ARRAY)
        return hone_error_set(HONE_EFORMAT, "%s: %s is %s, expected an array", hone_gguf_path(g), key,
                              hone_gguf_type_name(hone_gguf_kv_type(g, i)));
    hone_gguf_type at = hone_gguf_arr_type(g, i);
    int ok = elem ? at == elem
                  : (at != HONE_GGUF_TYPE_STRING && at != HONE_GGUF_TYPE_ARRAY && at != HONE_GGUF_TYPE_BOOL);
    if (!ok)
        return hone_error_set(HONE_EFORMAT, "%s: %s holds %s elements, expected %s", hone_gguf_path(g),
                              key, hone_gguf_type_name(at), elem ? hone_gguf_type_name(elem) : "numbers");
    if (want_len && hone_gguf_arr_len(g, i) != want_len)
        return hone_error_set(HONE_EFORMAT, "%s: %s has %llu elements but the vocab has %llu tokens",
                              hone_gguf_path(g), key, (unsigned long long)hone_gguf_arr_len(g, i),
                              (unsigned long long)want_len);
    return 0;
}

typedef struct {
    uint32_t len;
    int32_t id;
} len_id;

/* Longest first; lower id first among equals, so the order is deterministic. */
static int cmp_len_id(const void *a, const void *b)
{
    const len_id *x = a, *y = b;
    if (x->len != y->len) return x->len > y->len ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

static void add_eog(hone_tokenizer *t, int32_t id)
{
    if (id < 0) return;
    for (int i = 0; i < t->n_eog; i++)
        if (t->eog[i] == id) return;
    if (t->n_eog < (int)(sizeof t->eog / sizeof t->eog[0])) t->eog[t->n_eog++] = id;
}

static int load_merges(hone_tokenizer *t, const hone_gguf *g)
{
    int64_t ki;
    int rc = find_array(g, "tokenizer.ggml.merges", HONE_GGUF_TYPE_STRING, 0, &ki);
    if (rc) return rc;
    if (ki < 0)
        return hone_error_set(HONE_EFORMAT, "%s: missing metadata key 'tokenizer.ggml.merges' "
                              "(required by the gpt2 tokenizer)", hone_gguf_path(g));
    uint64_t n = hone_gguf_arr_len(g, ki);
    if (n > INT32_MAX)
        return hone_error_set(HONE_EFORMAT, "%s: %llu merges is too many", hone_gguf_path(g),
                              (unsigned long long)n);
    t->merges.mask = pow2_at_least((size_t)n * 2 + 1) - 1;
    t->merges.slot = malloc((t->merges.mask + 1) * sizeof *t->merges.slot);
    if (!t->merges.slot) return hone_error_set(HONE_ENOMEM, "tokenizer: out of memory for merges");
    for (size_t i = 0; i <= t->merges.mask; i++) t->merges.slot[i].key = UINT64_MAX;
    char *buf = NULL;
    size_t cap = 0;
    for (uint64_t j = 0; j < n; j++) {
        hone_gguf_str s;
        if ((rc = hone_gguf_arr_str(g, ki, j, &s))) goto done;
        const char *sp = s.len > 1 ? memchr(s.ptr + 1, ' ', s.len - 1) : NULL;
        if (!sp || sp + 1 == s.ptr + s.len) {
            rc = hone_error_set(HONE_EFORMAT, "%s: merge %llu ('%.*s') is not 'left right'",
                                hone_gguf_path(g), (unsigned long long)j, (int)(s.len > 64 ? 64 : s.len), s.ptr);
            goto done;
        }
        size_t ln = (size_t)(sp - s.ptr), rn = s.len - ln - 1;
        int32_t l = map_find(t, s.ptr, ln), r = map_find(t, sp + 1, rn);
        if (ln + rn > cap) {
            cap = (ln + rn) * 2;
            char *nb = realloc(buf, cap);
            if (!nb) { rc = hone_error_set(HONE_ENOMEM, "tokenizer: out of memory"); goto done; }
            buf = nb;
        }
        memcpy(buf, s.ptr, ln);
        memcpy(buf + ln, sp + 1, rn);
        int32_t m = map_find(t, buf, ln + rn);
        /* A rule whose parts or result are not tokens can never fire in a vocab-driven
         * merge (Hugging Face rejects such files); skip it rather than fail. */
        if (l < 0 || r < 0 || m < 0) continue;
        pair_insert(&t->merges, l, r, (int32_t)j, m);
    }
done:
    free(buf);
    return rc;
}

int hone_tokenizer_new(hone_tokenizer **out, const hone_gguf *g)
{
    int rc = 0;
    *out = NULL;
    const char *path = hone_gguf_path(g);
    hone_tokenizer *t = calloc(1, sizeof *t);
    if (!t) return hone_error_set(HONE_ENOMEM, "tokenizer: out of memory");

    hone_gguf_str model;
    if ((rc = hone_gguf_get_str(g, "tokenizer.ggml.model", &model))) goto done;
    if (model.len == 4 && !memcmp(model.ptr, "gpt2", 4)) {
        t->kind = HONE_TOKENIZER_GPT2;
    } else if (model.len == 5 && !memcmp(model.ptr, "llama", 5)) {
        t->kind = HONE_TOKENIZER_SPM;
    } else {
        rc = hone_error_set(HONE_EUNSUPPORTED,
                            "%s: tokenizer model '%.*s' is not supported (expected 'gpt2' or 'llama')",
                            path, (int)(model.len > 64 ? 64 : model.len), model.ptr);
        goto done;
    }

    int64_t ki;
    if ((rc = find_array(g, "tokenizer.ggml.tokens", HONE_GGUF_TYPE_STRING, 0, &ki))) goto done;
    if (ki < 0) {
        rc = hone_error_set(HONE_EFORMAT, "%s: missing metadata key 'tokenizer.ggml.tokens'", path);
        goto done;
    }
    uint64_t n = hone_gguf_arr_len(g, ki);
    if (n == 0 || n > INT32_MAX) {
        rc = hone_error_set(HONE_EFORMAT, "%s: tokenizer.ggml.tokens has %llu entries", path,
                            (unsigned long long)n);
        goto done;
    }
    t->n_vocab = (int32_t)n;
    size_t total = 0;
    for (uint64_t j = 0; j < n; j++) {
        hone_gguf_str s;
        if ((rc = hone_gguf_arr_str(g, ki, j, &s))) goto done;
        if (s.len > UINT32_MAX / 2) {
            rc = hone_error_set(HONE_EFORMAT, "%s: token %llu is %llu bytes long", path,
                                (unsigned long long)j, (unsigned long long)s.len);
            goto done;
        }
        total += (size_t)s.len + 1;
    }
    t->arena = malloc(total);
    t->tok_off = malloc(n * sizeof *t->tok_off);
    t->tok_len = malloc(n * sizeof *t->tok_len);
    t->scores = calloc(n, sizeof *t->scores);
    t->types = malloc(n);
    t->tok_map.mask = pow2_at_least((size_t)n * 2 + 1) - 1;
    t->tok_map.slot = malloc((t->tok_map.mask + 1) * sizeof *t->tok_map.slot);
    if (!t->arena || !t->tok_off || !t->tok_len || !t->scores || !t->types || !t->tok_map.slot) {
        rc = hone_error_set(HONE_ENOMEM, "tokenizer: out of memory for %llu tokens", (unsigned long long)n);
        goto done;
    }
    memset(t->tok_map.slot, 0xFF, (t->tok_map.mask + 1) * sizeof *t->tok_map.slot);
    memset(t->types, HONE_TOKEN_NORMAL, n);
    size_t off = 0;
    for (uint64_t j = 0; j < n; j++) {
        hone_gguf_str s;
        hone_gguf_arr_str(g, ki, j, &s);
        memcpy(t->arena + off, s.ptr, s.len);
        t->arena[off + s.len] = '\0';
        t->tok_off[j] = off;
        t->tok_len[j] = (uint32_t)s.len;
        off += s.len + 1;
    }
    for (int32_t j = 0; j < t->n_vocab; j++) map_insert(t, j);

    int64_t si;
    if ((rc = find_array(g, "tokenizer.ggml.scores", 0, n, &si))) goto done;
    for (uint64_t j = 0; si >= 0 && j < n; j++) {
        double v;
        if ((rc = hone_gguf_arr_f64(g, si, j, &v))) goto done;
        t->scores[j] = (float)v;
    }
    int64_t ti;
    if ((rc = find_array(g, "tokenizer.ggml.token_type", 0, n, &ti))) goto done;
    for (uint64_t j = 0; ti >= 0 && j < n; j++) {
        int64_t v;
        if ((rc = hone_gguf_arr_i64(g, ti, j, &v))) goto done;
        if (v < 0 || v > HONE_TOKEN_BYTE) {
            rc = hone_error_set(HONE_EFORMAT, "%s: token %llu ('%s') has type %lld, expected 0..6", path,
                                (unsigned long long)j, tok_str(t, (int32_t)j), (long long)v);
            goto done;
        }
        t->types[j] = (uint8_t)(v == HONE_TOKEN_UNDEFINED ? HONE_TOKEN_NORMAL : v);
    }

    t->bos = t->eos = t->unk = t->eot = t->pad = -1;
    if ((rc = read_id(g, "tokenizer.ggml.bos_token_id", t->n_vocab, &t->bos)) ||
        (rc = read_id(g, "tokenizer.ggml.eos_token_id", t->n_vocab, &t->eos)) ||
        (rc = read_id(g, "tokenizer.ggml.unknown_token_id", t->n_vocab, &t->unk)) ||
        (rc = read_id(g, "tokenizer.ggml.eot_token_id", t->n_vocab, &t->eot)) ||
        (rc = read_id(g, "tokenizer.ggml.padding_token_id", t->n_vocab, &t->pad)))
        goto done;
    if (t->kind == HONE_TOKENIZER_SPM && t->unk < 0) t->unk = map_find(t, "<unk>", 5);
    t->add_bos = t->kind == HONE_TOKENIZER_SPM;
    t->add_space_prefix = t->kind == HONE_TOKENIZER_SPM;
    if ((rc = hone_gguf_get_bool_opt(g, "tokenizer.ggml.add_bos_token", &t->add_bos)) ||
        (rc = hone_gguf_get_bool_opt(g, "tokenizer.ggml.add_space_prefix", &t->add_space_prefix)))
        goto done;
    if (t->bos < 0) t->add_bos = 0;

    add_eog(t, t->eos);
    add_eog(t, t->eot);
    static const char *const eog_names[] = {"<|im_end|>", "<|eot_id|>", "<|end_of_text|>", "<|endoftext|>"};
    for (size_t k = 0; k < sizeof eog_names / sizeof eog_names[0]; k++) {
        int32_t id = map_find(t, eog_names[k], strlen(eog_names[k]));
        if (id >= 0 && t->types[id] == HONE_TOKEN_CONTROL) add_eog(t, id);
    }

    int32_t n_special = 0;
    for (int32_t j = 0; j < t->n_vocab; j++) {
        int ty = t->types[j];
        if ((ty == HONE_TOKEN_CONTROL || ty == HONE_TOKEN_USER_DEFINED || ty == HONE_TOKEN_UNKNOWN) &&
            t->tok_len[j] > 0)
            n_special++;
    }
    t->special = malloc(((size_t)n_special + 1) * sizeof *t->special);
    len_id *order = malloc(((size_t)n_special + 1) * sizeof *order);
    if (!t->special || !order) {
        free(order);
        rc = hone_error_set(HONE_ENOMEM, "tokenizer: out of memory");
        goto done;
    }
    for (int32_t j = 0, k = 0; j < t->n_vocab; j++) {
        int ty = t->types[j];
        if ((ty == HONE_TOKEN_CONTROL || ty == HONE_TOKEN_USER_DEFINED || ty == HONE_TOKEN_UNKNOWN) &&
            t->tok_len[j] > 0)
            order[k++] = (len_id){t->tok_len[j], j};
    }
    qsort(order, (size_t)n_special, sizeof *order, cmp_len_id);
    for (int32_t k = 0; k < n_special; k++) t->special[k] = order[k].id;
    t->n_special = n_special;
    free(order);

    if (t->kind == HONE_TOKENIZER_GPT2) {
        gpt2_byte_alphabet(t->byte_cp);
        memset(t->cp_byte, 0xFF, sizeof t->cp_byte);
        for (int b = 0; b < 256; b++) {
            char c[4];
            int len = utf8_put(t->byte_cp[b], c);
            t->byte_id[b] = map_find(t, c, (size_t)len);
            t->cp_byte[t->byte_cp[b]] = (int16_t)b;
        }
        if ((rc = load_merges(t, g))) goto done;
        int64_t pi = hone_gguf_find_key(g, "tokenizer.ggml.pre");
        hone_gguf_str pre = {"default", 7};
        if (pi >= 0 && (rc = hone_gguf_kv_str(g, pi, &pre))) goto done;
        snprintf(t->pre, sizeof t->pre, "%.*s", (int)(pre.len > 63 ? 63 : pre.len), pre.ptr);
        if ((rc = setup_pre(t))) goto done;
    } else {
        for (int b = 0; b < 256; b++) {
            char name[8];
            snprintf(name, sizeof name, "<0x%02X>", b);
            t->byte_id[b] = map_find(t, name, 6);
            if (t->byte_id[b] < 0) {
                char c = (char)b;
                t->byte_id[b] = map_find(t, &c, 1);
            }
        }
    }
done:
    if (rc) {
        hone_tokenizer_free(t);
        return rc;
    }
    *out = t;
    return 0;
}

void hone_tokenizer_free(hone_tokenizer *t)
{
    if (!t) return;
    for (int i = 0; i < t->n_re; i++) pcre2_code_free(t->re[i]);
    free(t->arena);
    free(t->tok_off);
    free(t->tok_len);
    free(t->scores);
    free(t->types);
    free(t->tok_map.slot);
    free(t->merges.slot);
    free(t->special);
    free(t);
}

/* ---------------------------------------------------------------- encoding */

typedef struct {
    int32_t *v;
    size_t n, cap;
} id_vec;

static int ids_push(id_vec *o, int32_t id)
{
    if (o->n == o->cap) {
        size_t cap = o->cap ? o->cap * 2 : 64;
        int32_t *nv = realloc(o->v, cap * sizeof *nv);
        if (!nv) return hone_error_set(HONE_ENOMEM, "tokenizer: out of memory");
        o->v = nv;
        o->cap = cap;
    }
    o->v[o->n++] = id;
    return 0;
}

/* A merge candidate between adjacent symbols left and right. */
typedef struct {
    double key;      /* lower merges first: gpt2 rank, spm -score */
    int32_t left, right;
    int32_t result;  /* merged token id */
    uint32_t size;   /* bytes of the merged text, to spot stale entries */
} cand;

typedef struct {
    int32_t prev, next;
    int32_t id;       /* token id of the symbol's text, -1 if none */
    uint32_t start, len; /* len 0 once merged into its left neighbour */
} sym;

/* Scratch space reused across the pieces of one encode call. */
typedef struct {
    cand *heap;
    size_t nh, caph;
    sym *syms;
    size_t caps;
    char *buf;
    size_t capb;
} work;

static int cand_less(const cand *a, const cand *b)
{
    return a->key < b->key || (a->key == b->key && a->left < b->left);
}

static int heap_push(work *w, cand c)
{
    if (w->nh == w->caph) {
        size_t cap = w->caph ? w->caph * 2 : 256;
        cand *nh = realloc(w->heap, cap * sizeof *nh);
        if (!nh) return hone_error_set(HONE_ENOMEM, "tokenizer: out of memory");
        w->heap = nh;
        w->caph = cap;
    }
    size_t i = w->nh++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!cand_less(&c, &w->heap[p])) break;
        w->heap[i] = w->heap[p];
        i = p;
    }
    w->heap[i] = c;
    return 0;
}

static cand heap_pop(work *w)
{
    cand top = w->heap[0], last = w->heap[--w->nh];
    size_t i = 0, n = w->nh;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && cand_less(&w->heap[c + 1], &w->heap[c])) c++;
        if (!cand_less(&w->heap[c], &last)) break;
        w->heap[i] = w->heap[c];
        i = c;
    }
    if (n) w->heap[i] = last;
    return top;
}

static int syms_reserve(work *w, size_t n)
{
    if (n <= w->caps) return 0;
    size_t cap = w->caps ? w->caps : 64;
    while (cap < n) cap *= 2;
    sym *ns = realloc(w->syms, cap * sizeof *ns);
    if (!ns) return hone_error_set(HONE_ENOMEM, "tokenizer: out of memory");
    w->syms = ns;
    w->caps = cap;
    return 0;
}

static int buf_reserve(work *w, size_t n)
{
    if (n <= w->capb) return 0;
    size_t cap = w->capb ? w->capb : 256;
    while (cap < n) cap *= 2;
    char *nb = realloc(w->buf, cap);
    if (!nb) return hone_error_set(HONE_ENOMEM, "tokenizer: out of memory");
    w->buf = nb;
    w->capb = cap;
    return 0;
}

static int push_unknown(const hone_tokenizer *t, id_vec *o, const char *what, unsigned byte)
{
    if (t->unk >= 0) return ids_push(o, t->unk);
    return hone_error_set(HONE_EINVAL, "tokenizer: %s 0x%02X has no token and the vocab has no unknown token",
                          what, byte);
}

static int bpe_add_pair(const hone_tokenizer *t, work *w, int32_t l, int32_t r)
{
    if (l < 0 || r < 0) return 0;
    const sym *a = &w->syms[l], *b = &w->syms[r];
    if (a->id < 0 || b->id < 0) return 0;
    const pair_entry *e = pair_find(&t->merges, a->id, b->id);
    if (!e) return 0;
    cand c = {(double)e->rank, l, r, e->result, a->len + b->len};
    return heap_push(w, c);
}

/* Byte-level BPE of one pre-tokenized piece p[0..n). */
static int bpe_piece(const hone_tokenizer *t, work *w, const unsigned char *p, size_t n, id_vec *o)
{
    int rc;
    if (t->ignore_merges && n > 1) {
        if ((rc = buf_reserve(w, n * 2))) return rc;
        size_t m = 0;
        for (size_t i = 0; i < n; i++) m += (size_t)utf8_put(t->byte_cp[p[i]], w->buf + m);
        int32_t id = map_find(t, w->buf, m);
        if (id >= 0) return ids_push(o, id);
    }
    if ((rc = syms_reserve(w, n))) return rc;
    for (size_t i = 0; i < n; i++) {
        sym *s = &w->syms[i];
        s->prev = (int32_t)i - 1;
        s->next = i + 1 < n ? (int32_t)i + 1 : -1;
        s->id = t->byte_id[p[i]];
        s->start = (uint32_t)i;
        s->len = 1;
    }
    w->nh = 0;
    for (size_t i = 0; i + 1 < n; i++)
        if ((rc = bpe_add_pair(t, w, (int32_t)i, (int32_t)i + 1))) return rc;
    while (w->nh) {
        cand c = heap_pop(w);
        sym *a = &w->syms[c.left], *b = &w->syms[c.right];
        if (a->len == 0 || b->len == 0 || a->next != c.right || a->len + b->len != c.size) continue;
        a->id = c.result;
        a->len += b->len;
        b->len = 0;
        a->next = b->next;
        if (b->next >= 0) w->syms[b->next].prev = c.left;
        if ((rc = bpe_add_pair(t, w, a->prev, c.left)) || (rc = bpe_add_pair(t, w, c.left, a->next)))
            return rc;
    }
    for (int32_t i = 0; i >= 0; i = w->syms[i].next) {
        rc = w->syms[i].id >= 0 ? ids_push(o, w->syms[i].id)
                                : push_unknown(t, o, "byte", p[w->syms[i].start]);
        if (rc) return rc;
    }
    return 0;
}

typedef struct {
    size_t off, len;
} span;

typedef struct {
    span *v;
    size_t n, cap;
} span_vec;

static int spans_push(span_vec *s, size_t off, size_t len)
{
    if (len == 0) return 0;
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 64;
        span *nv = realloc(s->v, cap * sizeof *nv);
        if (!nv) return hone_error_set(HONE_ENOMEM, "tokenizer: out of memory");
        s->v = nv;
        s->cap = cap;
    }
    s->v[s->n].off = off;
    s->v[s->n].len = len;
    s->n++;
    return 0;
}

/* Splits text[sp.off .. +len) by re into out: matches and the gaps between them. */
static int regex_split(pcre2_code *re, pcre2_match_data *md, const char *text, span sp, span_vec *out)
{
    PCRE2_SPTR subj = (PCRE2_SPTR)(text + sp.off);
    size_t pos = 0, gap = 0;
    int rc;
    while (pos < sp.len) {
        int m = pcre2_match(re, subj, sp.len, pos, PCRE2_NO_UTF_CHECK, md, NULL);
        if (m == PCRE2_ERROR_NOMATCH) break;
        if (m < 0) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(m, msg, sizeof msg);
            return hone_error_set(HONE_EINTERNAL, "tokenizer: regex match failed: %s", (const char *)msg);
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        size_t ms = ov[0], me = ov[1];
        if (me == ms) { /* an empty match: step one character and look again */
            pos = ms + (size_t)utf8_len((unsigned char)text[sp.off + ms]);
            continue;
        }
        if ((rc = spans_push(out, sp.off + gap, ms - gap)) || (rc = spans_push(out, sp.off + ms, me - ms)))
            return rc;
        pos = gap = me;
    }
    return spans_push(out, sp.off + gap, sp.len - gap);
}

/* gpt2: pre-tokenize text[0..len) and BPE every piece. */
static int encode_gpt2(const hone_tokenizer *t, work *w, const char *text, size_t len, id_vec *o)
{
    int rc = 0;
    span_vec a = {0}, b = {0};
    pcre2_match_data *md = pcre2_match_data_create(4, NULL);
    if (!md) return hone_error_set(HONE_ENOMEM, "tokenizer: out of memory");
    const unsigned char *u = (const unsigned char *)text;
    size_t i = 0;
    while (i < len) {
        /* Pre-tokenize each maximal run of valid UTF-8; an invalid byte is a piece of its own. */
        size_t j = i;
        int k;
        while (j < len && (k = utf8_valid_at(u + j, len - j)) > 0) j += (size_t)k;
        if (j > i) {
            a.n = 0;
            span whole = {i, j - i};
            if ((rc = spans_push(&a, whole.off, whole.len))) goto done;
            for (int r = 0; r < t->n_re; r++) {
                b.n = 0;
                for (size_t q = 0; q < a.n; q++)
                    if ((rc = regex_split(t->re[r], md, text, a.v[q], &b))) goto done;
                span_vec tmp = a;
                a = b;
                b = tmp;
            }
            for (size_t q = 0; q < a.n; q++)
                if ((rc = bpe_piece(t, w, u + a.v[q].off, a.v[q].len, o))) goto done;
        }
        if (j < len) {
            if ((rc = bpe_piece(t, w, u + j, 1, o))) goto done;
            j++;
        }
        i = j;
    }
done:
    pcre2_match_data_free(md);
    free(a.v);
    free(b.v);
    return rc;
}

static int spm_add_pair(const hone_tokenizer *t, work *w, int32_t l, int32_t r)
{
    if (l < 0 || r < 0) return 0;
    const sym *a = &w->syms[l], *b = &w->syms[r];
    int32_t id = map_find(t, w->buf + a->start, a->len + b->len);
    if (id < 0) return 0;
    cand c = {-(double)t->scores[id], l, r, id, a->len + b->len};
    return heap_push(w, c);
}

/* spm: text[0..len) with spaces already escaped to "▁" sits in w->buf. llama.cpp's
 * llm_tokenizer_spm: repeatedly merge the adjacent pair whose text is the token with the
 * highest score (leftmost on ties); symbols that are not tokens fall back to bytes. */
static int encode_spm_escaped(const hone_tokenizer *t, work *w, size_t len, id_vec *o)
{
    int rc;
    if ((rc = syms_reserve(w, len))) return rc;
    int32_t ns = 0;
    for (size_t i = 0; i < len;) {
        /* llama.cpp trusts the lead byte; an invalid sequence is split byte by byte here so
         * that a stray lead byte cannot swallow the "▁" after it. */
        int vl = utf8_valid_at((const unsigned char *)w->buf + i, len - i);
        size_t cl = vl > 0 ? (size_t)vl : 1;
        sym *s = &w->syms[ns];
        s->prev = ns - 1;
        s->next = -1;
        if (ns > 0) w->syms[ns - 1].next = ns;
        s->start = (uint32_t)i;
        s->len = (uint32_t)cl;
        s->id = -1;
        ns++;
        i += cl;
    }
    w->nh = 0;
    for (int32_t i = 0; i + 1 < ns; i++)
        if ((rc = spm_add_pair(t, w, i, i + 1))) return rc;
    while (w->nh) {
        cand c = heap_pop(w);
        sym *a = &w->syms[c.left], *b = &w->syms[c.right];
        if (a->len == 0 || b->len == 0 || a->next != c.right || a->len + b->len != c.size) continue;
        a->len += b->len;
        b->len = 0;
        a->next = b->next;
        if (b->next >= 0) w->syms[b->next].prev = c.left;
        if ((rc = spm_add_pair(t, w, a->prev, c.left)) || (rc = spm_add_pair(t, w, c.left, a->next)))
            return rc;
    }
    for (int32_t i = ns ? 0 : -1; i >= 0; i = w->syms[i].next) {
        const sym *s = &w->syms[i];
        int32_t id = map_find(t, w->buf + s->start, s->len);
        if (id >= 0) {
            if ((rc = ids_push(o, id))) return rc;
            continue;
        }
        for (uint32_t k = 0; k < s->len; k++) {
            unsigned char byte = (unsigned char)w->buf[s->start + k];
            rc = t->byte_id[byte] >= 0 ? ids_push(o, t->byte_id[byte]) : push_unknown(t, o, "byte", byte);
            if (rc) return rc;
        }
    }
    return 0;
}

static int encode_spm(const hone_tokenizer *t, work *w, const char *text, size_t len, int prefix, id_vec *o)
{
    size_t spaces = prefix ? 1 : 0;
    for (size_t i = 0; i < len; i++) spaces += text[i] == ' ';
    int rc = buf_reserve(w, len + spaces * 2 + 1);
    if (rc) return rc;
    size_t m = 0;
    if (prefix) { memcpy(w->buf, "\xE2\x96\x81", 3); m = 3; }
    for (size_t i = 0; i < len; i++) {
        if (text[i] == ' ') {
            memcpy(w->buf + m, "\xE2\x96\x81", 3);
            m += 3;
        } else {
            w->buf[m++] = text[i];
        }
    }
    return encode_spm_escaped(t, w, m, o);
}

/* A piece of the input: raw text (tok < 0) or an already-recognised special token. */
typedef struct {
    size_t off, len;
    int32_t tok;
} frag;

typedef struct {
    frag *v;
    size_t n, cap;
} frag_vec;

static int frags_push(frag_vec *f, size_t off, size_t len, int32_t tok)
{
    if (tok < 0 && len == 0) return 0;
    if (f->n == f->cap) {
        size_t cap = f->cap ? f->cap * 2 : 16;
        frag *nv = realloc(f->v, cap * sizeof *nv);
        if (!nv) return hone_error_set(HONE_ENOMEM, "tokenizer: out of memory");
        f->v = nv;
        f->cap = cap;
    }
    f->v[f->n++] = (frag){off, len, tok};
    return 0;
}

/* First occurrence of needle (nl > 0 bytes) in hay[0..hl), or NULL (memmem is not ISO C). */
static const char *find_bytes(const char *hay, size_t hl, const char *needle, size_t nl)
{
    while (hl >= nl) {
        const char *p = memchr(hay, needle[0], hl - nl + 1);
        if (!p) return NULL;
        if (!memcmp(p, needle, nl)) return p;
        hl -= (size_t)(p - hay) + 1;
        hay = p + 1;
    }
    return NULL;
}

/* llama.cpp's tokenizer_st_partition: each special token in turn, longest first, is cut out
 * of the raw fragments that remain. */
static int partition_special(const hone_tokenizer *t, const char *text, size_t len, int parse_special,
                             frag_vec *a, frag_vec *b)
{
    int rc = frags_push(a, 0, len, -1);
    for (int32_t k = 0; !rc && k < t->n_special; k++) {
        int32_t id = t->special[k];
        if (!parse_special && t->types[id] != HONE_TOKEN_USER_DEFINED) continue;
        const char *s = tok_str(t, id);
        size_t sl = t->tok_len[id];
        if (sl > len || !find_bytes(text, len, s, sl)) continue;
        b->n = 0;
        for (size_t q = 0; !rc && q < a->n; q++) {
            frag f = a->v[q];
            if (f.tok >= 0) {
                rc = frags_push(b, f.off, f.len, f.tok);
                continue;
            }
            size_t pos = f.off, end = f.off + f.len;
            while (!rc) {
                const char *hit = end - pos >= sl ? find_bytes(text + pos, end - pos, s, sl) : NULL;
                if (!hit) {
                    rc = frags_push(b, pos, end - pos, -1);
                    break;
                }
                size_t h = (size_t)(hit - text);
                if (!(rc = frags_push(b, pos, h - pos, -1))) rc = frags_push(b, h, sl, id);
                pos = h + sl;
            }
        }
        frag_vec tmp = *a;
        *a = *b;
        *b = tmp;
    }
    return rc;
}

int hone_tokenizer_encode(const hone_tokenizer *t, const char *text, size_t len, int add_bos,
                          int parse_special, int32_t **out_ids, int64_t *out_n)
{
    int rc = 0;
    id_vec o = {0};
    work w = {0};
    frag_vec a = {0}, b = {0};
    *out_ids = NULL;
    *out_n = 0;
    if (!text && len) return hone_error_set(HONE_EINVAL, "tokenizer: NULL text with length %zu", len);
    if (add_bos < 0) add_bos = t->add_bos;
    if (add_bos) {
        if (t->bos < 0) {
            rc = hone_error_set(HONE_EINVAL, "tokenizer: add_bos requested but the model has no bos token");
            goto done;
        }
        if ((rc = ids_push(&o, t->bos))) goto done;
    }
    if (len && (rc = partition_special(t, text, len, parse_special, &a, &b))) goto done;
    int prev_special = 1; /* spm: a space prefix goes before the first text and after specials */
    for (size_t q = 0; q < a.n; q++) {
        frag f = a.v[q];
        if (f.tok >= 0) {
            rc = ids_push(&o, f.tok);
            prev_special = 1;
        } else if (t->kind == HONE_TOKENIZER_GPT2) {
            rc = encode_gpt2(t, &w, text + f.off, f.len, &o);
        } else {
            rc = encode_spm(t, &w, text + f.off, f.len, t->add_space_prefix && prev_special, &o);
            prev_special = 0;
        }
        if (rc) goto done;
    }
    if (!o.v && !(o.v = malloc(sizeof *o.v))) { /* never hand back NULL */
        rc = hone_error_set(HONE_ENOMEM, "tokenizer: out of memory");
        goto done;
    }
    *out_ids = o.v;
    *out_n = (int64_t)o.n;
    o.v = NULL;
done:
    free(o.v);
    free(w.heap);
    free(w.syms);
    free(w.buf);
    free(a.v);
    free(b.v);
    return rc;
}

/* ---------------------------------------------------------------- decoding */

static int hexval(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

/* The byte of a "<0xXX>" token, or -1. */
static int byte_token_value(const char *s, uint32_t n)
{
    if (n != 6 || s[0] != '<' || s[1] != '0' || s[2] != 'x' || s[5] != '>') return -1;
    int hi = hexval(s[3]), lo = hexval(s[4]);
    return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

int hone_tokenizer_decode_piece(const hone_tokenizer *t, int32_t id, int flags, char *buf, size_t cap,
                                size_t *out_len)
{
    *out_len = 0;
    if (id < 0 || id >= t->n_vocab)
        return hone_error_set(HONE_ERANGE, "tokenizer: token id %d is out of range [0, %d)", id, t->n_vocab);
    const char *s = tok_str(t, id);
    uint32_t n = t->tok_len[id];
    size_t m = 0;
#define EMIT(c) do { if (m < cap) buf[m] = (char)(c); m++; } while (0)
    switch (t->types[id]) {
    case HONE_TOKEN_CONTROL:
    case HONE_TOKEN_UNKNOWN:
        if (!(flags & HONE_TOKENIZER_DECODE_SPECIAL)) break;
        /* fall through */
    case HONE_TOKEN_USER_DEFINED:
        for (uint32_t i = 0; i < n; i++) EMIT(s[i]);
        break;
    case HONE_TOKEN_UNUSED: break;
    case HONE_TOKEN_BYTE:
        if (byte_token_value(s, n) >= 0) {
            EMIT(byte_token_value(s, n));
            break;
        }
        /* fall through - a byte token spelled otherwise decodes like a normal one */
    default:
        if (t->kind == HONE_TOKENIZER_GPT2) {
            const unsigned char *u = (const unsigned char *)s;
            for (uint32_t i = 0; i < n;) {
                int k = utf8_valid_at(u + i, n - i);
                if (k > 0) {
                    uint32_t cp = utf8_get(u + i, k);
                    if (cp < 512 && t->cp_byte[cp] >= 0) {
                        EMIT(t->cp_byte[cp]);
                    } else {
                        for (int j = 0; j < k; j++) EMIT(u[i + j]);
                    }
                    i += (uint32_t)k;
                } else {
                    EMIT(u[i]);
                    i++;
                }
            }
        } else {
            for (uint32_t i = 0; i < n;) {
                if (n - i >= 3 && !memcmp(s + i, "\xE2\x96\x81", 3)) {
                    EMIT(' ');
                    i += 3;
                } else {
                    EMIT(s[i]);
                    i++;
                }
            }
        }
        break;
    }
#undef EMIT
    *out_len = m;
    if (m > cap)
        return hone_error_set(HONE_ERANGE, "tokenizer: token %d needs %zu bytes, buffer has %zu", id, m, cap);
    return 0;
}

struct hone_detok {
    const hone_tokenizer *t;
    int flags;
    int strip_space; /* drop a leading ' ' of the first non-empty piece */
    unsigned char held[4];
    size_t n_held;
    char *buf;
    size_t cap;
};

int hone_detok_new(hone_detok **out, const hone_tokenizer *t, int flags)
{
    *out = NULL;
    hone_detok *d = calloc(1, sizeof *d);
    if (!d) return hone_error_set(HONE_ENOMEM, "detok: out of memory");
    d->t = t;
    d->flags = flags;
    d->strip_space = t->kind == HONE_TOKENIZER_SPM && t->add_space_prefix;
    *out = d;
    return 0;
}

void hone_detok_free(hone_detok *d)
{
    if (!d) return;
    free(d->buf);
    free(d);
}

static int detok_reserve(hone_detok *d, size_t n)
{
    if (n <= d->cap) return 0;
    size_t cap = d->cap ? d->cap : 64;
    while (cap < n) cap *= 2;
    char *nb = realloc(d->buf, cap);
    if (!nb) return hone_error_set(HONE_ENOMEM, "detok: out of memory");
    d->buf = nb;
    d->cap = cap;
    return 0;
}

/* Where the complete prefix of b[0..n) ends: before a trailing lead byte whose sequence
 * is not finished yet. Anything that cannot become valid is not held. */
static size_t complete_prefix(const unsigned char *b, size_t n)
{
    for (size_t k = 1; k <= 4 && k <= n; k++) {
        unsigned char c = b[n - k];
        if ((c & 0xC0) == 0x80) continue; /* continuation: keep looking for its lead */
        int need = utf8_len(c);
        if (need > 1 && (size_t)need > k) {
            /* Hold only if what is there so far could still be well-formed. */
            unsigned char tmp[4] = {0x80, 0x80, 0x80, 0x80};
            if (c == 0xE0) tmp[1] = 0xA0; /* placeholders that are valid after this lead */
            if (c == 0xF0) tmp[1] = 0x90;
            memcpy(tmp, b + n - k, k);
            if (utf8_valid_at(tmp, (size_t)need) == need) return n - k;
        }
        return n;
    }
    return n;
}

int hone_detok_push(hone_detok *d, int32_t id, const char **out, size_t *out_len)
{
    *out = "";
    *out_len = 0;
    if (id < 0 || id >= d->t->n_vocab)
        return hone_error_set(HONE_ERANGE, "detok: token id %d is out of range [0, %d)", id, d->t->n_vocab);
    size_t need = d->n_held + d->t->tok_len[id] + 8, m;
    int rc = detok_reserve(d, need + 1);
    if (rc) return rc;
    memcpy(d->buf, d->held, d->n_held);
    if ((rc = hone_tokenizer_decode_piece(d->t, id, d->flags, d->buf + d->n_held, need - d->n_held, &m)))
        return rc;
    if (m > 0 && d->strip_space) {
        d->strip_space = 0;
        if (d->buf[d->n_held] == ' ') {
            memmove(d->buf + d->n_held, d->buf + d->n_held + 1, m - 1);
            m--;
        }
    }
    size_t total = d->n_held + m;
    size_t cut = complete_prefix((const unsigned char *)d->buf, total);
    d->n_held = total - cut;
    memcpy(d->held, d->buf + cut, d->n_held);
    d->buf[cut] = '\0';
    *out = d->buf;
    *out_len = cut;
    return 0;
}

int hone_detok_flush(hone_detok *d, const char **out, size_t *out_len)
{
    int rc = detok_reserve(d, 8);
    if (rc) return rc;
    memcpy(d->buf, d->held, d->n_held);
    d->buf[d->n_held] = '\0';
    *out = d->buf;
    *out_len = d->n_held;
    d->n_held = 0;
    d->strip_space = d->t->kind == HONE_TOKENIZER_SPM && d->t->add_space_prefix;
    return 0;
}

int hone_tokenizer_decode(const hone_tokenizer *t, const int32_t *ids, int64_t n, int flags, char **out,
                          size_t *out_len)
{
    int rc = 0;
    *out = NULL;
    *out_len = 0;
    size_t total = 1, m = 0;
    for (int64_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= t->n_vocab)
            return hone_error_set(HONE_ERANGE, "tokenizer: token id %d (at %lld) is out of range [0, %d)",
                                  ids[i], (long long)i, t->n_vocab);
        total += t->tok_len[ids[i]];
    }
    char *s = malloc(total);
    if (!s) return hone_error_set(HONE_ENOMEM, "tokenizer: out of memory");
    int strip = t->kind == HONE_TOKENIZER_SPM && t->add_space_prefix;
    for (int64_t i = 0; i < n; i++) {
        size_t k;
        if ((rc = hone_tokenizer_decode_piece(t, ids[i], flags, s + m, total - 1 - m, &k))) goto done;
        if (k > 0 && strip) {
            strip = 0;
            if (s[m] == ' ') {
                memmove(s + m, s + m + 1, k - 1);
                k--;
            }
        }
        m += k;
    }
    s[m] = '\0';
    *out = s;
    *out_len = m;
    s = NULL;
done:
    free(s);
    return rc;
}

/* ---------------------------------------------------------------- accessors */

hone_tokenizer_kind hone_tokenizer_kind_of(const hone_tokenizer *t) { return t->kind; }
int64_t hone_tokenizer_n_vocab(const hone_tokenizer *t) { return t->n_vocab; }
int32_t hone_tokenizer_bos(const hone_tokenizer *t) { return t->bos; }
int32_t hone_tokenizer_eos(const hone_tokenizer *t) { return t->eos; }
int32_t hone_tokenizer_unk(const hone_tokenizer *t) { return t->unk; }
int32_t hone_tokenizer_eot(const hone_tokenizer *t) { return t->eot; }
int32_t hone_tokenizer_pad(const hone_tokenizer *t) { return t->pad; }
int hone_tokenizer_add_bos(const hone_tokenizer *t) { return t->add_bos; }
int hone_tokenizer_add_space_prefix(const hone_tokenizer *t) { return t->add_space_prefix; }
const char *hone_tokenizer_pre(const hone_tokenizer *t) { return t->pre; }
const char *hone_tokenizer_note(const hone_tokenizer *t) { return t->note; }

int hone_tokenizer_is_eog(const hone_tokenizer *t, int32_t id)
{
    for (int i = 0; i < t->n_eog; i++)
        if (t->eog[i] == id) return 1;
    return 0;
}

int32_t hone_tokenizer_find(const hone_tokenizer *t, const char *text)
{
    return text ? map_find(t, text, strlen(text)) : -1;
}

const char *hone_tokenizer_token_text(const hone_tokenizer *t, int32_t id)
{
    return id >= 0 && id < t->n_vocab ? tok_str(t, id) : NULL;
}

int hone_tokenizer_token_type(const hone_tokenizer *t, int32_t id)
{
    return id >= 0 && id < t->n_vocab ? t->types[id] : -1;
}

int hone_tokenizer_same_vocab(const hone_tokenizer *a, const hone_tokenizer *b, char *why, size_t cap)
{
    char tmp[8];
    if (!why) {
        why = tmp;
        cap = sizeof tmp;
    }
    if (cap) why[0] = '\0';
    if (a->kind != b->kind) {
        snprintf(why, cap, "tokenizer kinds differ (%s vs %s)", a->kind == HONE_TOKENIZER_SPM ? "spm" : "gpt2",
                 b->kind == HONE_TOKENIZER_SPM ? "spm" : "gpt2");
        return 0;
    }
    if (a->n_vocab != b->n_vocab) {
        snprintf(why, cap, "%d tokens vs %d", (int)a->n_vocab, (int)b->n_vocab);
        return 0;
    }
    const struct { const char *name; int32_t x, y; } ids[] = {
        {"bos", a->bos, b->bos}, {"eos", a->eos, b->eos}, {"eot", a->eot, b->eot},
        {"unk", a->unk, b->unk}, {"pad", a->pad, b->pad}};
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++)
        if (ids[i].x != ids[i].y) {
            snprintf(why, cap, "the %s token is %d vs %d", ids[i].name, (int)ids[i].x, (int)ids[i].y);
            return 0;
        }
    for (int32_t id = 0; id < a->n_vocab; id++) {
        if (a->tok_len[id] != b->tok_len[id] || memcmp(tok_str(a, id), tok_str(b, id), a->tok_len[id])) {
            snprintf(why, cap, "token %d is '%.40s' vs '%.40s'", (int)id, tok_str(a, id), tok_str(b, id));
            return 0;
        }
        if (a->types[id] != b->types[id]) {
            snprintf(why, cap, "token %d ('%.40s') has type %d vs %d", (int)id, tok_str(a, id), (int)a->types[id],
                     (int)b->types[id]);
            return 0;
        }
    }
    return 1;
}
