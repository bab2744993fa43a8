/* JSON Schema compiler (json_schema.h): one grammar rule per schema node, shared rules for
 * whitespace, strings, numbers and the generic value, recursion through $ref. */
#include "json_schema.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "error.h"

#define WS_MAX 20
#define MAX_COUNT 4096 /* largest minLength / maxLength / minItems / maxItems expanded */
#define MAX_REFS 256
#define MAX_DEPTH 64

typedef struct {
    hone_grammar *g;
    const cJSON *root;
    int ws, strchar, string, number, integer, value;
    struct { char *ref; int rule; } refs[MAX_REFS];
    int n_refs;
    int depth;
} jsc;

static int compile(jsc *c, const cJSON *s, const char *path);

#define TRY(x) do { int rc_ = (x); if (rc_ < 0) return rc_; } while (0)

static int unsupported(const char *what, const char *path)
{
    return hone_error_set(HONE_EUNSUPPORTED, "json_schema: %s is not supported (at %s)", what, path);
}

/* A new rule whose single alternative is the literal s. */
static int lit_rule(jsc *c, const char *s)
{
    int r = hone_grammar_rule(c->g);
    TRY(r);
    TRY(hone_grammar_alt(c->g, r));
    TRY(hone_grammar_add_literal(c->g, r, s, strlen(s)));
    return r;
}

/* ws ::= "" | " " | "\n" [ \t]{0,WS_MAX} (llama.cpp's choice: room for indentation, none for
 * runs of blank lines a small model may fall into) */
static int ws_rule(jsc *c)
{
    if (c->ws >= 0) return c->ws;
    int next = -1;
    uint64_t sp[4] = {(1ull << ' ') | (1ull << '\t'), 0, 0, 0};
    for (int k = WS_MAX; k >= 1; k--) { /* indent_k: up to WS_MAX - k + 1 more blanks */
        int r = hone_grammar_rule(c->g);
        TRY(r);
        TRY(hone_grammar_alt(c->g, r));
        TRY(hone_grammar_alt(c->g, r));
        TRY(hone_grammar_add_class(c->g, r, sp));
        if (next >= 0) TRY(hone_grammar_add_ref(c->g, r, next));
        next = r;
    }
    int w = hone_grammar_rule(c->g);
    TRY(w);
    TRY(hone_grammar_alt(c->g, w));
    TRY(hone_grammar_alt(c->g, w));
    TRY(hone_grammar_add_literal(c->g, w, " ", 1));
    TRY(hone_grammar_alt(c->g, w));
    TRY(hone_grammar_add_literal(c->g, w, "\n", 1));
    TRY(hone_grammar_add_ref(c->g, w, next));
    return c->ws = w;
}

static int add_ws(jsc *c, int r)
{
    int w = ws_rule(c);
    TRY(w);
    return hone_grammar_add_ref(c->g, r, w);
}

/* One character of a JSON string's body: printable ASCII but " and \, an escape (no lone
 * surrogates), or a well-formed UTF-8 sequence. */
static int strchar_rule(jsc *c)
{
    if (c->strchar >= 0) return c->strchar;
    hone_grammar *g = c->g;
    int hex = hone_grammar_rule(g);
    TRY(hex);
    uint64_t hx[4] = {0x03ff000000000000ull, 0x0000007e0000007eull, 0, 0}; /* 0-9 A-F a-f */
    TRY(hone_grammar_alt(g, hex));
    TRY(hone_grammar_add_class(g, hex, hx));
    int r = hone_grammar_rule(g);
    TRY(r);
    uint64_t plain[4] = {0, 0, 0, 0};
    for (unsigned b = 0x20; b < 0x80; b++)
        if (b != '"' && b != '\\') plain[b >> 6] |= 1ull << (b & 63);
    TRY(hone_grammar_alt(g, r));
    TRY(hone_grammar_add_class(g, r, plain));
    TRY(hone_grammar_alt(g, r));
    TRY(hone_grammar_add_literal(g, r, "\\", 1));
    uint64_t esc[4] = {0, 0, 0, 0};
    for (const char *p = "\"\\/bfnrt"; *p; p++) esc[(unsigned char)*p >> 6] |= 1ull << ((unsigned char)*p & 63);
    TRY(hone_grammar_add_class(g, r, esc));
    /* \uXXXX without surrogates: first digit not d/D, or d/D then 0-7 */
    uint64_t h1[4];
    memcpy(h1, hx, sizeof h1);
    h1[1] &= ~((1ull << ('d' - 64)) | (1ull << ('D' - 64)));
    TRY(hone_grammar_alt(g, r));
    TRY(hone_grammar_add_literal(g, r, "\\u", 2));
    TRY(hone_grammar_add_class(g, r, h1));
    for (int k = 0; k < 3; k++) TRY(hone_grammar_add_ref(g, r, hex));
    uint64_t dD[4] = {0, (1ull << ('d' - 64)) | (1ull << ('D' - 64)), 0, 0};
    TRY(hone_grammar_alt(g, r));
    TRY(hone_grammar_add_literal(g, r, "\\u", 2));
    TRY(hone_grammar_add_class(g, r, dD));
    TRY(hone_grammar_add_range(g, r, '0', '7'));
    for (int k = 0; k < 2; k++) TRY(hone_grammar_add_ref(g, r, hex));
    /* UTF-8 (RFC 3629) */
    static const struct { unsigned lo, hi, lo2, hi2; int tail; } u8[] = {
        {0xC2, 0xDF, 0x80, 0xBF, 0}, {0xE0, 0xE0, 0xA0, 0xBF, 1}, {0xE1, 0xEC, 0x80, 0xBF, 1},
        {0xED, 0xED, 0x80, 0x9F, 1}, {0xEE, 0xEF, 0x80, 0xBF, 1}, {0xF0, 0xF0, 0x90, 0xBF, 2},
        {0xF1, 0xF3, 0x80, 0xBF, 2}, {0xF4, 0xF4, 0x80, 0x8F, 2}};
    for (size_t i = 0; i < sizeof u8 / sizeof u8[0]; i++) {
        TRY(hone_grammar_alt(g, r));
        TRY(hone_grammar_add_range(g, r, u8[i].lo, u8[i].hi));
        TRY(hone_grammar_add_range(g, r, u8[i].lo2, u8[i].hi2));
        for (int k = 0; k < u8[i].tail; k++) TRY(hone_grammar_add_range(g, r, 0x80, 0xBF));
    }
    return c->strchar = r;
}

/* A string with min..max characters (max < 0: unbounded). */
static int string_rule(jsc *c, long min, long max)
{
    hone_grammar *g = c->g;
    if (min == 0 && max < 0 && c->string >= 0) return c->string;
    int ch = strchar_rule(c);
    TRY(ch);
    /* tail_k: k characters written; the closing quote allowed from min on */
    int free_tail = -1;
    if (max < 0) { /* body ::= '"' | char body */
        free_tail = hone_grammar_rule(g);
        TRY(free_tail);
        TRY(hone_grammar_alt(g, free_tail));
        TRY(hone_grammar_add_literal(g, free_tail, "\"", 1));
        TRY(hone_grammar_alt(g, free_tail));
        TRY(hone_grammar_add_ref(g, free_tail, ch));
        TRY(hone_grammar_add_ref(g, free_tail, free_tail));
    }
    long top = max < 0 ? min : max;
    int next = free_tail;
    for (long k = top; k >= 0; k--) {
        if (max < 0 && k == top) continue; /* the free tail stands for k = min */
        int r = hone_grammar_rule(g);
        TRY(r);
        if (k >= min) {
            TRY(hone_grammar_alt(g, r));
            TRY(hone_grammar_add_literal(g, r, "\"", 1));
        }
        if (next >= 0) {
            TRY(hone_grammar_alt(g, r));
            TRY(hone_grammar_add_ref(g, r, ch));
            TRY(hone_grammar_add_ref(g, r, next));
        }
        next = r;
    }
    int s = hone_grammar_rule(g);
    TRY(s);
    TRY(hone_grammar_alt(g, s));
    TRY(hone_grammar_add_literal(g, s, "\"", 1));
    TRY(hone_grammar_add_ref(g, s, next));
    if (min == 0 && max < 0) c->string = s;
    return s;
}

/* digits{lo,hi} as a chain: d_k ::= "" | [0-9] d_{k+1} after lo required ones */
static int digits_rule(jsc *c, int lo, int hi, unsigned first_lo)
{
    hone_grammar *g = c->g;
    int next = -1;
    for (int k = hi; k >= 1; k--) {
        int r = hone_grammar_rule(g);
        TRY(r);
        if (k > lo) TRY(hone_grammar_alt(g, r)); /* optional from here: may stop */
        TRY(hone_grammar_alt(g, r));
        TRY(hone_grammar_add_range(g, r, k == 1 ? first_lo : '0', '9'));
        if (next >= 0) TRY(hone_grammar_add_ref(g, r, next));
        next = r;
    }
    return next;
}

/* integer ::= "-"? ("0" | [1-9] [0-9]{0,15}) */
static int int_part(jsc *c)
{
    hone_grammar *g = c->g;
    int r = hone_grammar_rule(g);
    TRY(r);
    int nz = digits_rule(c, 1, 16, '1');
    TRY(nz);
    for (int neg = 0; neg < 2; neg++) {
        TRY(hone_grammar_alt(g, r));
        if (neg) TRY(hone_grammar_add_literal(g, r, "-", 1));
        TRY(hone_grammar_add_literal(g, r, "0", 1));
        TRY(hone_grammar_alt(g, r));
        if (neg) TRY(hone_grammar_add_literal(g, r, "-", 1));
        TRY(hone_grammar_add_ref(g, r, nz));
    }
    return r;
}

static int integer_rule(jsc *c)
{
    if (c->integer >= 0) return c->integer;
    return c->integer = int_part(c);
}

/* number ::= integer ("." [0-9]{1,16})? ([eE] [+-]? [0-9]{1,3})? */
static int number_rule(jsc *c)
{
    if (c->number >= 0) return c->number;
    hone_grammar *g = c->g;
    int ip = integer_rule(c);
    TRY(ip);
    int fd = digits_rule(c, 1, 16, '0');
    TRY(fd);
    int ed = digits_rule(c, 1, 3, '0');
    TRY(ed);
    int frac = hone_grammar_rule(g);
    TRY(frac);
    TRY(hone_grammar_alt(g, frac));
    TRY(hone_grammar_alt(g, frac));
    TRY(hone_grammar_add_literal(g, frac, ".", 1));
    TRY(hone_grammar_add_ref(g, frac, fd));
    int ex = hone_grammar_rule(g);
    TRY(ex);
    uint64_t eE[4] = {0, (1ull << ('e' - 64)) | (1ull << ('E' - 64)), 0, 0};
    uint64_t pm[4] = {(1ull << '+') | (1ull << '-'), 0, 0, 0};
    TRY(hone_grammar_alt(g, ex));
    TRY(hone_grammar_alt(g, ex));
    TRY(hone_grammar_add_class(g, ex, eE));
    TRY(hone_grammar_add_ref(g, ex, ed));
    TRY(hone_grammar_alt(g, ex));
    TRY(hone_grammar_add_class(g, ex, eE));
    TRY(hone_grammar_add_class(g, ex, pm));
    TRY(hone_grammar_add_ref(g, ex, ed));
    int r = hone_grammar_rule(g);
    TRY(r);
    TRY(hone_grammar_alt(g, r));
    TRY(hone_grammar_add_ref(g, r, ip));
    TRY(hone_grammar_add_ref(g, r, frac));
    TRY(hone_grammar_add_ref(g, r, ex));
    return c->number = r;
}

/* Adds the alternative ws "," ws item next to r. */
static int comma_item(jsc *c, int r, int item, int next)
{
    TRY(hone_grammar_alt(c->g, r));
    TRY(add_ws(c, r));
    TRY(hone_grammar_add_literal(c->g, r, ",", 1));
    TRY(add_ws(c, r));
    TRY(hone_grammar_add_ref(c->g, r, item));
    return hone_grammar_add_ref(c->g, r, next);
}

/* tail ::= "" | ws "," ws item tail: the rest of a comma-separated list. */
static int list_tail_rule(jsc *c, int item)
{
    int t = hone_grammar_rule(c->g);
    TRY(t);
    TRY(hone_grammar_alt(c->g, t));
    TRY(comma_item(c, t, item, t));
    return t;
}

/* Adds to r: open ws close (when empty_ok) and open ws first tail ws close (when first >= 0). */
static int bracketed(jsc *c, int r, char open, char close, int empty_ok, int first, int tail)
{
    hone_grammar *g = c->g;
    if (empty_ok) {
        TRY(hone_grammar_alt(g, r));
        TRY(hone_grammar_add_literal(g, r, &open, 1));
        TRY(add_ws(c, r));
        TRY(hone_grammar_add_literal(g, r, &close, 1));
    }
    if (first >= 0) {
        TRY(hone_grammar_alt(g, r));
        TRY(hone_grammar_add_literal(g, r, &open, 1));
        TRY(add_ws(c, r));
        TRY(hone_grammar_add_ref(g, r, first));
        TRY(hone_grammar_add_ref(g, r, tail));
        TRY(add_ws(c, r));
        TRY(hone_grammar_add_literal(g, r, &close, 1));
    }
    return 0;
}

/* An object whose values match rule val: "{" ws ("}" | member more ws "}"), where
 * member ::= string ws ":" ws val. */
static int map_rule(jsc *c, int val)
{
    hone_grammar *g = c->g;
    int str = string_rule(c, 0, -1);
    TRY(str);
    int member = hone_grammar_rule(g);
    TRY(member);
    TRY(hone_grammar_alt(g, member));
    TRY(hone_grammar_add_ref(g, member, str));
    TRY(add_ws(c, member));
    TRY(hone_grammar_add_literal(g, member, ":", 1));
    TRY(add_ws(c, member));
    TRY(hone_grammar_add_ref(g, member, val));
    int more = list_tail_rule(c, member);
    TRY(more);
    int r = hone_grammar_rule(g);
    TRY(r);
    TRY(bracketed(c, r, '{', '}', 1, member, more));
    return r;
}

/* The generic JSON value (any object, array, string, number, true, false, null). */
static int value_rule(jsc *c)
{
    if (c->value >= 0) return c->value;
    hone_grammar *g = c->g;
    int v = hone_grammar_rule(g);
    TRY(v);
    c->value = v;
    int str = string_rule(c, 0, -1), num = number_rule(c), obj = map_rule(c, v), elems = list_tail_rule(c, v);
    TRY(str);
    TRY(num);
    TRY(obj);
    TRY(elems);
    TRY(hone_grammar_alt(g, v));
    TRY(hone_grammar_add_ref(g, v, obj));
    TRY(bracketed(c, v, '[', ']', 1, v, elems));
    TRY(hone_grammar_alt(g, v));
    TRY(hone_grammar_add_ref(g, v, str));
    TRY(hone_grammar_alt(g, v));
    TRY(hone_grammar_add_ref(g, v, num));
    static const char *const words[] = {"true", "false", "null"};
    for (int i = 0; i < 3; i++) {
        TRY(hone_grammar_alt(g, v));
        TRY(hone_grammar_add_literal(g, v, words[i], strlen(words[i])));
    }
    return v;
}

static int any_object_rule(jsc *c)
{
    int v = value_rule(c);
    TRY(v);
    return map_rule(c, v);
}

/* A rule matching the JSON text of v exactly (compact). */
static int json_literal_rule(jsc *c, const cJSON *v)
{
    char *t = cJSON_PrintUnformatted(v);
    if (!t) return hone_error_set(HONE_ENOMEM, "json_schema: out of memory");
    int r = lit_rule(c, t);
    free(t);
    return r;
}

static int get_count(const cJSON *s, const char *name, long dflt, long *out, const char *path)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(s, name);
    *out = dflt;
    if (!v) return 0;
    if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble != (double)(long)v->valuedouble)
        return hone_error_set(HONE_EINVAL, "json_schema: '%s' must be a non-negative integer (at %s)", name, path);
    if (v->valuedouble > MAX_COUNT)
        return hone_error_set(HONE_EUNSUPPORTED, "json_schema: '%s' above %d is not supported (at %s)", name,
                              MAX_COUNT, path);
    *out = (long)v->valuedouble;
    return 0;
}

static int object_rule(jsc *c, const cJSON *s, const char *path)
{
    hone_grammar *g = c->g;
    const cJSON *props = cJSON_GetObjectItemCaseSensitive(s, "properties");
    const cJSON *req = cJSON_GetObjectItemCaseSensitive(s, "required");
    const cJSON *addl = cJSON_GetObjectItemCaseSensitive(s, "additionalProperties");
    char sub[512];
    if (props && !cJSON_IsObject(props))
        return hone_error_set(HONE_EINVAL, "json_schema: 'properties' must be an object (at %s)", path);
    if (req && !cJSON_IsArray(req))
        return hone_error_set(HONE_EINVAL, "json_schema: 'required' must be an array (at %s)", path);
    /* the keys: declared properties, then required names not declared (any value) */
    int n = 0, cap = (props ? cJSON_GetArraySize(props) : 0) + (req ? cJSON_GetArraySize(req) : 0);
    if (cap == 0) {
        if (addl && cJSON_IsObject(addl)) { /* a map of string keys to that schema */
            snprintf(sub, sizeof sub, "%s/additionalProperties", path);
            int val = compile(c, addl, sub);
            TRY(val);
            return map_rule(c, val);
        }
        if (addl && cJSON_IsFalse(addl)) return lit_rule(c, "{}");
        return any_object_rule(c);
    }
    const char **names = calloc((size_t)cap, sizeof *names);
    int *vals = calloc((size_t)cap, sizeof *vals), *isreq = calloc((size_t)cap, sizeof *isreq);
    int rc = 0;
    if (!names || !vals || !isreq) {
        rc = hone_error_set(HONE_ENOMEM, "json_schema: out of memory");
        goto done;
    }
    const cJSON *p;
    cJSON_ArrayForEach(p, props) {
        names[n] = p->string;
        snprintf(sub, sizeof sub, "%s/properties/%s", path, p->string);
        if ((rc = vals[n] = compile(c, p, sub)) < 0) goto done;
        n++;
    }
    const cJSON *q;
    cJSON_ArrayForEach(q, req) {
        if (!cJSON_IsString(q)) {
            rc = hone_error_set(HONE_EINVAL, "json_schema: 'required' must hold strings (at %s)", path);
            goto done;
        }
        int k;
        for (k = 0; k < n; k++)
            if (!strcmp(names[k], q->valuestring)) break;
        if (k == n) {
            names[n] = q->valuestring;
            if ((rc = vals[n] = value_rule(c)) < 0) goto done;
            n++;
        }
        isreq[k] = 1;
    }
    /* F_i: nothing written yet, keys i.. left; A_i: something written. F_n = A_n = "". */
    int fnext = hone_grammar_rule(g), anext = hone_grammar_rule(g);
    if ((rc = fnext) < 0 || (rc = anext) < 0) goto done;
    if ((rc = hone_grammar_alt(g, fnext)) || (rc = hone_grammar_alt(g, anext))) goto done;
    for (int i = n - 1; i >= 0; i--) {
        cJSON *key = cJSON_CreateString(names[i]);
        char *kt = key ? cJSON_PrintUnformatted(key) : NULL;
        cJSON_Delete(key);
        if (!kt) {
            rc = hone_error_set(HONE_ENOMEM, "json_schema: out of memory");
            goto done;
        }
        int kv = hone_grammar_rule(g);
        if ((rc = kv) < 0 || (rc = hone_grammar_alt(g, kv)) ||
            (rc = hone_grammar_add_literal(g, kv, kt, strlen(kt))) || (rc = add_ws(c, kv)) ||
            (rc = hone_grammar_add_literal(g, kv, ":", 1)) || (rc = add_ws(c, kv)) ||
            (rc = hone_grammar_add_ref(g, kv, vals[i]))) {
            free(kt);
            goto done;
        }
        free(kt);
        int f = hone_grammar_rule(g), a = hone_grammar_rule(g);
        if ((rc = f) < 0 || (rc = a) < 0) goto done;
        if ((rc = hone_grammar_alt(g, f)) || (rc = hone_grammar_add_ref(g, f, kv)) ||
            (rc = hone_grammar_add_ref(g, f, anext)))
            goto done;
        if ((rc = comma_item(c, a, kv, anext))) goto done;
        if (!isreq[i]) {
            if ((rc = hone_grammar_alt(g, f)) || (rc = hone_grammar_add_ref(g, f, fnext))) goto done;
            if ((rc = hone_grammar_alt(g, a)) || (rc = hone_grammar_add_ref(g, a, anext))) goto done;
        }
        fnext = f;
        anext = a;
    }
    int r = hone_grammar_rule(g);
    if ((rc = r) < 0 || (rc = hone_grammar_alt(g, r)) || (rc = hone_grammar_add_literal(g, r, "{", 1)) ||
        (rc = add_ws(c, r)) || (rc = hone_grammar_add_ref(g, r, fnext)) || (rc = add_ws(c, r)) ||
        (rc = hone_grammar_add_literal(g, r, "}", 1)))
        goto done;
    rc = r;
done:
    free(names);
    free(vals);
    free(isreq);
    return rc;
}

static int array_rule(jsc *c, const cJSON *s, const char *path)
{
    hone_grammar *g = c->g;
    long min, max;
    TRY(get_count(s, "minItems", 0, &min, path));
    TRY(get_count(s, "maxItems", -1, &max, path));
    if (max >= 0 && max < min)
        return hone_error_set(HONE_EINVAL, "json_schema: maxItems < minItems (at %s)", path);
    const cJSON *items = cJSON_GetObjectItemCaseSensitive(s, "items");
    char sub[512];
    snprintf(sub, sizeof sub, "%s/items", path);
    int el = items ? compile(c, items, sub) : value_rule(c);
    TRY(el);
    /* tail_k (k >= 1 items written): "," item tail_{k+1}, and "" once k >= min */
    int free_tail = -1;
    if (max < 0 && (free_tail = list_tail_rule(c, el)) < 0) return free_tail;
    long top = max < 0 ? (min > 1 ? min : 1) : max;
    int next = free_tail, tail1 = -1;
    for (long k = top; k >= 1; k--) {
        if (max < 0 && k == top) { if (k == 1) tail1 = free_tail; continue; }
        int r = hone_grammar_rule(g);
        TRY(r);
        if (k >= min) TRY(hone_grammar_alt(g, r));
        if (next >= 0) TRY(comma_item(c, r, el, next));
        next = r;
        if (k == 1) tail1 = r;
    }
    int r = hone_grammar_rule(g);
    TRY(r);
    TRY(bracketed(c, r, '[', ']', min == 0, max != 0 ? el : -1, tail1));
    return r;
}

/* A bit set of the JSON types a schema's instances may have (for oneOf's disjointness). */
enum { T_OBJ = 1, T_ARR = 2, T_STR = 4, T_NUM = 8, T_INT = 16, T_BOOL = 32, T_NULL = 64, T_ALL = 127 };

static int type_bit(const char *t)
{
    static const char *const names[] = {"object", "array", "string", "number", "integer", "boolean", "null"};
    for (int i = 0; i < 7; i++)
        if (!strcmp(t, names[i])) return 1 << i;
    return 0;
}

static int value_types(const cJSON *v)
{
    if (cJSON_IsObject(v)) return T_OBJ;
    if (cJSON_IsArray(v)) return T_ARR;
    if (cJSON_IsString(v)) return T_STR;
    if (cJSON_IsNumber(v)) return isfinite(v->valuedouble) && v->valuedouble == floor(v->valuedouble) ? T_NUM | T_INT : T_NUM;
    if (cJSON_IsBool(v)) return T_BOOL;
    return T_NULL;
}

/* The schema a $ref names in root: #, #/$defs/NAME or #/definitions/NAME; NULL otherwise. */
static const cJSON *resolve_in(const cJSON *root, const char *ref)
{
    if (!strcmp(ref, "#")) return root;
    const char *pre[] = {"#/$defs/", "#/definitions/"};
    for (int i = 0; i < 2; i++) {
        size_t n = strlen(pre[i]);
        if (!strncmp(ref, pre[i], n)) {
            const cJSON *defs = cJSON_GetObjectItemCaseSensitive(root, i ? "definitions" : "$defs");
            return defs ? cJSON_GetObjectItemCaseSensitive(defs, ref + n) : NULL;
        }
    }
    return NULL;
}

static const cJSON *resolve(jsc *c, const char *ref) { return resolve_in(c->root, ref); }

/* The types a schema admits (T_ALL when it cannot tell). */
static int schema_types(jsc *c, const cJSON *s, int depth)
{
    if (depth > 8 || !cJSON_IsObject(s)) return T_ALL;
    const cJSON *ref = cJSON_GetObjectItemCaseSensitive(s, "$ref");
    if (cJSON_IsString(ref)) return schema_types(c, resolve(c, ref->valuestring), depth + 1);
    const cJSON *k = cJSON_GetObjectItemCaseSensitive(s, "const");
    if (k) return value_types(k);
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(s, "enum");
    if (cJSON_IsArray(e)) {
        int t = 0;
        const cJSON *v;
        cJSON_ArrayForEach(v, e) t |= value_types(v);
        return t;
    }
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(s, "type");
    int bits = 0;
    if (cJSON_IsString(t)) bits = type_bit(t->valuestring);
    else if (cJSON_IsArray(t)) {
        const cJSON *x;
        cJSON_ArrayForEach(x, t) if (cJSON_IsString(x)) bits |= type_bit(x->valuestring);
    } else {
        return T_ALL;
    }
    if (bits & T_NUM) bits |= T_INT; /* a number may be integral */
    if (bits & T_INT) bits |= T_NUM;
    return bits;
}

static int is_annotation(const char *k)
{
    static const char *const ann[] = {"title", "description", "default", "examples", "$schema", "$id",
                                      "$comment", "deprecated", "readOnly", "writeOnly", "$defs",
                                      "definitions", "strict", NULL};
    for (int i = 0; ann[i]; i++)
        if (!strcmp(k, ann[i])) return 1;
    return 0;
}

static int is_known(const char *k)
{
    static const char *const kw[] = {"type", "properties", "required", "additionalProperties", "enum", "const",
                                     "items", "minItems", "maxItems", "anyOf", "oneOf", "allOf", "$ref",
                                     "minLength", "maxLength", NULL};
    for (int i = 0; kw[i]; i++)
        if (!strcmp(k, kw[i])) return 1;
    return is_annotation(k);
}

/* Alternatives of the branches of an anyOf / oneOf. */
static int union_rule(jsc *c, const cJSON *list, const char *name, const char *path)
{
    char sub[512];
    if (!cJSON_IsArray(list) || cJSON_GetArraySize(list) == 0)
        return hone_error_set(HONE_EINVAL, "json_schema: '%s' must be a non-empty array (at %s)", name, path);
    if (!strcmp(name, "oneOf")) {
        int seen = 0;
        const cJSON *b;
        cJSON_ArrayForEach(b, list) {
            int t = schema_types(c, b, 0);
            if (t & seen)
                return hone_error_set(HONE_EUNSUPPORTED,
                                      "json_schema: oneOf whose branches may overlap (the same JSON type in two "
                                      "branches) is not supported (at %s); use anyOf", path);
            seen |= t;
        }
    }
    int r = hone_grammar_rule(c->g);
    TRY(r);
    int i = 0;
    const cJSON *b;
    cJSON_ArrayForEach(b, list) {
        snprintf(sub, sizeof sub, "%s/%s/%d", path, name, i++);
        int br = compile(c, b, sub);
        TRY(br);
        TRY(hone_grammar_alt(c->g, r));
        TRY(hone_grammar_add_ref(c->g, r, br));
    }
    return r;
}

/* One type's rule under the schema's keywords for that type. */
static int typed_rule(jsc *c, const cJSON *s, int bit, const char *path)
{
    long min, max;
    switch (bit) {
    case T_OBJ: return object_rule(c, s, path);
    case T_ARR: return array_rule(c, s, path);
    case T_STR:
        TRY(get_count(s, "minLength", 0, &min, path));
        TRY(get_count(s, "maxLength", -1, &max, path));
        if (max >= 0 && max < min)
            return hone_error_set(HONE_EINVAL, "json_schema: maxLength < minLength (at %s)", path);
        return string_rule(c, min, max);
    case T_NUM: return number_rule(c);
    case T_INT: return integer_rule(c);
    case T_BOOL: {
        int r = hone_grammar_rule(c->g);
        TRY(r);
        TRY(hone_grammar_alt(c->g, r));
        TRY(hone_grammar_add_literal(c->g, r, "true", 4));
        TRY(hone_grammar_alt(c->g, r));
        TRY(hone_grammar_add_literal(c->g, r, "false", 5));
        return r;
    }
    default: return lit_rule(c, "null");
    }
}

static int compile_body(jsc *c, const cJSON *s, const char *path)
{
    if (cJSON_IsTrue(s)) return value_rule(c);
    if (cJSON_IsFalse(s))
        return hone_error_set(HONE_EUNSUPPORTED, "json_schema: the schema false admits nothing (at %s)", path);
    if (!cJSON_IsObject(s))
        return hone_error_set(HONE_EINVAL, "json_schema: a schema must be an object or a boolean (at %s)", path);
    const cJSON *k;
    int n_struct = 0;
    cJSON_ArrayForEach(k, s) {
        if (!is_known(k->string)) {
            char what[160];
            snprintf(what, sizeof what, "the keyword '%.100s'", k->string);
            return unsupported(what, path);
        }
        if (!is_annotation(k->string)) n_struct++;
    }
    const cJSON *ref = cJSON_GetObjectItemCaseSensitive(s, "$ref");
    if (ref) {
        if (!cJSON_IsString(ref)) return hone_error_set(HONE_EINVAL, "json_schema: '$ref' must be a string (at %s)", path);
        if (n_struct > 1) return unsupported("'$ref' beside other keywords", path);
        for (int i = 0; i < c->n_refs; i++)
            if (!strcmp(c->refs[i].ref, ref->valuestring)) return c->refs[i].rule;
        const cJSON *target = resolve(c, ref->valuestring);
        if (!target) {
            char what[200];
            snprintf(what, sizeof what, "'$ref' '%.120s' (only #, #/$defs/NAME, #/definitions/NAME)", ref->valuestring);
            return unsupported(what, path);
        }
        if (c->n_refs == MAX_REFS) return unsupported("more than 256 distinct $ref targets", path);
        int r = hone_grammar_rule(c->g);
        TRY(r);
        if (!(c->refs[c->n_refs].ref = strdup(ref->valuestring))) return hone_error_set(HONE_ENOMEM, "out of memory");
        c->refs[c->n_refs++].rule = r;
        int body = compile(c, target, ref->valuestring);
        TRY(body);
        TRY(hone_grammar_alt(c->g, r));
        TRY(hone_grammar_add_ref(c->g, r, body));
        return r;
    }
    const cJSON *all = cJSON_GetObjectItemCaseSensitive(s, "allOf");
    if (all) {
        if (!cJSON_IsArray(all) || cJSON_GetArraySize(all) != 1) return unsupported("'allOf' of more than one schema", path);
        if (n_struct > 1) return unsupported("'allOf' beside other keywords", path);
        char sub[512];
        snprintf(sub, sizeof sub, "%s/allOf/0", path);
        return compile(c, cJSON_GetArrayItem(all, 0), sub);
    }
    const char *unions[] = {"anyOf", "oneOf"};
    for (int i = 0; i < 2; i++) {
        const cJSON *u = cJSON_GetObjectItemCaseSensitive(s, unions[i]);
        if (!u) continue;
        if (n_struct > 1) {
            char what[64];
            snprintf(what, sizeof what, "'%s' beside other keywords", unions[i]);
            return unsupported(what, path);
        }
        return union_rule(c, u, unions[i], path);
    }
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(s, "type");
    int bits = 0;
    if (t) {
        if (cJSON_IsString(t)) {
            bits = type_bit(t->valuestring);
            if (!bits) return hone_error_set(HONE_EINVAL, "json_schema: unknown type '%.60s' (at %s)", t->valuestring, path);
        } else if (cJSON_IsArray(t)) {
            const cJSON *x;
            cJSON_ArrayForEach(x, t) {
                int b = cJSON_IsString(x) ? type_bit(x->valuestring) : 0;
                if (!b) return hone_error_set(HONE_EINVAL, "json_schema: 'type' lists an unknown type (at %s)", path);
                bits |= b;
            }
        } else {
            return hone_error_set(HONE_EINVAL, "json_schema: 'type' must be a string or an array (at %s)", path);
        }
        if ((bits & T_NUM) && (bits & T_INT)) bits &= ~T_INT; /* number covers integer */
    }
    const cJSON *cst = cJSON_GetObjectItemCaseSensitive(s, "const");
    const cJSON *en = cJSON_GetObjectItemCaseSensitive(s, "enum");
    if (cst) return json_literal_rule(c, cst);
    if (en) {
        if (!cJSON_IsArray(en) || cJSON_GetArraySize(en) == 0)
            return hone_error_set(HONE_EINVAL, "json_schema: 'enum' must be a non-empty array (at %s)", path);
        int r = hone_grammar_rule(c->g), n = 0;
        TRY(r);
        const cJSON *v;
        cJSON_ArrayForEach(v, en) {
            int vt = value_types(v);
            if (bits && !(vt & (bits | ((bits & T_NUM) ? T_INT : 0)))) continue; /* excluded by 'type' */
            int lr = json_literal_rule(c, v);
            TRY(lr);
            TRY(hone_grammar_alt(c->g, r));
            TRY(hone_grammar_add_ref(c->g, r, lr));
            n++;
        }
        if (!n) return hone_error_set(HONE_EINVAL, "json_schema: no 'enum' value has the schema's type (at %s)", path);
        return r;
    }
    if (!bits) { /* infer from the keywords, else anything */
        if (cJSON_GetObjectItemCaseSensitive(s, "properties") || cJSON_GetObjectItemCaseSensitive(s, "required") ||
            cJSON_GetObjectItemCaseSensitive(s, "additionalProperties"))
            bits = T_OBJ;
        else if (cJSON_GetObjectItemCaseSensitive(s, "items") || cJSON_GetObjectItemCaseSensitive(s, "minItems") ||
                 cJSON_GetObjectItemCaseSensitive(s, "maxItems"))
            bits = T_ARR;
        else if (cJSON_GetObjectItemCaseSensitive(s, "minLength") || cJSON_GetObjectItemCaseSensitive(s, "maxLength"))
            bits = T_STR;
        else
            return value_rule(c);
    }
    int single = 0;
    for (int b = 1; b < 128; b <<= 1) single += (bits & b) != 0;
    if (single == 1) return typed_rule(c, s, bits, path);
    int r = hone_grammar_rule(c->g);
    TRY(r);
    for (int b = 1; b < 128; b <<= 1) {
        if (!(bits & b)) continue;
        int tr = typed_rule(c, s, b, path);
        TRY(tr);
        TRY(hone_grammar_alt(c->g, r));
        TRY(hone_grammar_add_ref(c->g, r, tr));
    }
    return r;
}

static int compile(jsc *c, const cJSON *s, const char *path)
{
    if (++c->depth > MAX_DEPTH) return unsupported("nesting deeper than 64 schemas", path);
    int r = compile_body(c, s, path);
    c->depth--;
    return r;
}

int hone_json_schema_compile(hone_grammar **out, const cJSON *schema, const hone_json_schema_opts *opts)
{
    hone_json_schema_opts dflt = HONE_JSON_SCHEMA_OPTS_INIT;
    const hone_json_schema_opts *o = opts ? opts : &dflt;
    jsc c;
    memset(&c, 0, sizeof c);
    c.ws = c.strchar = c.string = c.number = c.integer = c.value = -1;
    c.root = schema;
    *out = NULL;
    int rc = hone_grammar_new(&c.g);
    if (rc) return rc;
    int v = schema ? compile(&c, schema, "#") : any_object_rule(&c);
    int root = -1;
    if (v >= 0) {
        root = hone_grammar_rule(c.g);
        if (root >= 0 && !(rc = hone_grammar_alt(c.g, root))) {
            if (o->prefix) rc = hone_grammar_add_literal(c.g, root, o->prefix, strlen(o->prefix));
            else rc = add_ws(&c, root); /* a value may start after a little whitespace */
            if (!rc) rc = hone_grammar_add_ref(c.g, root, v);
            if (!rc && o->suffix) rc = hone_grammar_add_literal(c.g, root, o->suffix, strlen(o->suffix));
            if (!rc) rc = hone_grammar_finish(c.g, root);
        } else if (root < 0) {
            rc = root;
        }
    } else {
        rc = v;
    }
    for (int i = 0; i < c.n_refs; i++) free(c.refs[i].ref);
    if (rc < 0) {
        hone_grammar_free(c.g);
        return rc;
    }
    *out = c.g;
    return 0;
}

/* ---- validation (hone_json_schema_validate) ---------------------------------------------------- */

typedef struct {
    const cJSON *root;
    char *why;
    size_t cap;
    int depth;
} jsv;

static int validate(jsv *v, const cJSON *s, const cJSON *x, const char *path);

/* Records the first failure and returns 0 (invalid). */
static int fail_at(jsv *v, const char *path, const char *what)
{
    if (v->why && v->cap && !v->why[0]) snprintf(v->why, v->cap, "%s: %s", path, what);
    return 0;
}

static int is_validation_only(const char *k)
{
    static const char *const kw[] = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
                                     "pattern", "minProperties", "maxProperties", "uniqueItems", "format", NULL};
    for (int i = 0; kw[i]; i++)
        if (!strcmp(k, kw[i])) return 1;
    return 0;
}

static int get_num(const cJSON *s, const char *k, double *out, const char *path)
{
    const cJSON *n = cJSON_GetObjectItemCaseSensitive(s, k);
    if (!n) return 0;
    if (!cJSON_IsNumber(n))
        return hone_error_set(HONE_EUNSUPPORTED, "json_schema: '%s' must be a number (at %s)", k, path);
    *out = n->valuedouble;
    return 1;
}

/* Code points of a UTF-8 string (what minLength / maxLength count). */
static long utf8_len(const char *s)
{
    long n = 0;
    for (; *s; s++) n += ((unsigned char)*s & 0xC0) != 0x80;
    return n;
}

static int pattern_matches(const char *pat, const char *str, const char *path)
{
    int err;
    PCRE2_SIZE off;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)pat, PCRE2_ZERO_TERMINATED, PCRE2_UTF, &err, &off, NULL);
    if (!re) return hone_error_set(HONE_EUNSUPPORTED, "json_schema: 'pattern' '%.80s' does not compile (at %s)", pat, path);
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(re, NULL);
    int rc = md ? pcre2_match(re, (PCRE2_SPTR)str, strlen(str), 0, 0, md, NULL) : PCRE2_ERROR_NOMEMORY;
    pcre2_match_data_free(md);
    pcre2_code_free(re);
    if (rc == PCRE2_ERROR_NOMEMORY) return hone_error_set(HONE_ENOMEM, "out of memory");
    return rc >= 0;
}

#define VTRY(x) do { int r_ = (x); if (r_ <= 0) return r_; } while (0)

static int validate_object(jsv *v, const cJSON *s, const cJSON *x, const char *path)
{
    char sub[512], msg[160];
    const cJSON *props = cJSON_GetObjectItemCaseSensitive(s, "properties");
    const cJSON *req = cJSON_GetObjectItemCaseSensitive(s, "required");
    const cJSON *add = cJSON_GetObjectItemCaseSensitive(s, "additionalProperties");
    if (props && !cJSON_IsObject(props))
        return hone_error_set(HONE_EINVAL, "json_schema: 'properties' must be an object (at %s)", path);
    if (req && !cJSON_IsArray(req))
        return hone_error_set(HONE_EINVAL, "json_schema: 'required' must be an array (at %s)", path);
    const cJSON *k;
    cJSON_ArrayForEach(k, req) {
        if (!cJSON_IsString(k)) return hone_error_set(HONE_EINVAL, "json_schema: 'required' lists a non-string (at %s)", path);
        if (!cJSON_GetObjectItemCaseSensitive(x, k->valuestring)) {
            snprintf(msg, sizeof msg, "the required property '%.100s' is missing", k->valuestring);
            return fail_at(v, path, msg);
        }
    }
    int n = 0;
    cJSON_ArrayForEach(k, x) {
        n++;
        /* a duplicate key: cJSON finds the first, so the second would never be checked */
        if (cJSON_GetObjectItemCaseSensitive(x, k->string) != k) {
            snprintf(msg, sizeof msg, "the property '%.100s' appears twice", k->string);
            return fail_at(v, path, msg);
        }
        snprintf(sub, sizeof sub, "%s/%s", path, k->string);
        const cJSON *ps = props ? cJSON_GetObjectItemCaseSensitive(props, k->string) : NULL;
        if (ps) {
            VTRY(validate(v, ps, k, sub));
        } else if (cJSON_IsFalse(add)) {
            snprintf(msg, sizeof msg, "the property '%.100s' is not allowed", k->string);
            return fail_at(v, path, msg);
        } else if (add && !cJSON_IsTrue(add)) {
            VTRY(validate(v, add, k, sub));
        }
    }
    double lim = 0;
    int has;
    if ((has = get_num(s, "minProperties", &lim, path)) < 0) return has;
    if (has && n < lim) return fail_at(v, path, "fewer properties than minProperties");
    if ((has = get_num(s, "maxProperties", &lim, path)) < 0) return has;
    if (has && n > lim) return fail_at(v, path, "more properties than maxProperties");
    return 1;
}

static int validate_array(jsv *v, const cJSON *s, const cJSON *x, const char *path)
{
    char sub[512];
    const cJSON *items = cJSON_GetObjectItemCaseSensitive(s, "items");
    if (cJSON_IsArray(items)) return hone_error_set(HONE_EUNSUPPORTED, "json_schema: 'items' as a list of schemas (at %s)", path);
    int n = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, x) {
        if (items) {
            snprintf(sub, sizeof sub, "%s/%d", path, n);
            VTRY(validate(v, items, e, sub));
        }
        n++;
    }
    double lim = 0;
    int has;
    if ((has = get_num(s, "minItems", &lim, path)) < 0) return has;
    if (has && n < lim) return fail_at(v, path, "fewer items than minItems");
    if ((has = get_num(s, "maxItems", &lim, path)) < 0) return has;
    if (has && n > lim) return fail_at(v, path, "more items than maxItems");
    if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(s, "uniqueItems")))
        for (const cJSON *a = x->child; a; a = a->next)
            for (const cJSON *b = a->next; b; b = b->next)
                if (cJSON_Compare(a, b, 1)) return fail_at(v, path, "items are not unique");
    return 1;
}

static int validate_string(jsv *v, const cJSON *s, const cJSON *x, const char *path)
{
    double lim = 0;
    int has;
    long len = utf8_len(x->valuestring);
    if ((has = get_num(s, "minLength", &lim, path)) < 0) return has;
    if (has && len < lim) return fail_at(v, path, "shorter than minLength");
    if ((has = get_num(s, "maxLength", &lim, path)) < 0) return has;
    if (has && len > lim) return fail_at(v, path, "longer than maxLength");
    const cJSON *pat = cJSON_GetObjectItemCaseSensitive(s, "pattern");
    if (pat) {
        if (!cJSON_IsString(pat)) return hone_error_set(HONE_EINVAL, "json_schema: 'pattern' must be a string (at %s)", path);
        int m = pattern_matches(pat->valuestring, x->valuestring, path);
        if (m < 0) return m;
        if (!m) return fail_at(v, path, "does not match 'pattern'");
    }
    return 1;
}

static int validate_number(jsv *v, const cJSON *s, const cJSON *x, const char *path)
{
    static const char *const k[] = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"};
    double d = x->valuedouble;
    for (int i = 0; i < 5; i++) {
        double lim = 0;
        int has = get_num(s, k[i], &lim, path);
        if (has < 0) return has;
        if (!has) continue;
        int ok = i == 0 ? d >= lim : i == 1 ? d <= lim : i == 2 ? d > lim : i == 3 ? d < lim
               : lim > 0 && fabs(d / lim - nearbyint(d / lim)) < 1e-9;
        if (!ok) {
            char msg[96];
            snprintf(msg, sizeof msg, "%.17g breaks '%s' %.17g", d, k[i], lim);
            return fail_at(v, path, msg);
        }
    }
    return 1;
}

static int validate_body(jsv *v, const cJSON *s, const cJSON *x, const char *path)
{
    char sub[512], msg[256];
    if (cJSON_IsTrue(s)) return 1;
    if (cJSON_IsFalse(s)) return fail_at(v, path, "the schema false admits nothing");
    if (!cJSON_IsObject(s))
        return hone_error_set(HONE_EINVAL, "json_schema: a schema must be an object or a boolean (at %s)", path);
    const cJSON *k;
    cJSON_ArrayForEach(k, s)
        if (!is_known(k->string) && !is_validation_only(k->string)) {
            snprintf(msg, sizeof msg, "the keyword '%.100s'", k->string);
            return unsupported(msg, path);
        }
    const cJSON *ref = cJSON_GetObjectItemCaseSensitive(s, "$ref");
    if (ref) {
        const cJSON *t = cJSON_IsString(ref) ? resolve_in(v->root, ref->valuestring) : NULL;
        if (!t) {
            snprintf(msg, sizeof msg, "'$ref' %.120s (only #, #/$defs/NAME, #/definitions/NAME)",
                     cJSON_IsString(ref) ? ref->valuestring : "(not a string)");
            return unsupported(msg, path);
        }
        VTRY(validate(v, t, x, path));
    }
    const cJSON *all = cJSON_GetObjectItemCaseSensitive(s, "allOf");
    const cJSON *any = cJSON_GetObjectItemCaseSensitive(s, "anyOf");
    const cJSON *one = cJSON_GetObjectItemCaseSensitive(s, "oneOf");
    const cJSON *lists[] = {all, any, one};
    const char *names[] = {"allOf", "anyOf", "oneOf"};
    for (int l = 0; l < 3; l++) {
        if (!lists[l]) continue;
        if (!cJSON_IsArray(lists[l]) || !cJSON_GetArraySize(lists[l]))
            return hone_error_set(HONE_EINVAL, "json_schema: '%s' must be a non-empty array (at %s)", names[l], path);
        int i = 0, matched = 0;
        const cJSON *b;
        cJSON_ArrayForEach(b, lists[l]) {
            snprintf(sub, sizeof sub, "%s/%s/%d", path, names[l], i++);
            char *why = v->why; /* a failing branch of anyOf / oneOf is not the failure */
            if (l) v->why = NULL;
            int r = validate(v, b, x, l ? path : sub);
            v->why = why;
            if (r < 0) return r;
            if (l == 0 && !r) return 0;
            matched += r;
        }
        if (l == 1 && !matched) return fail_at(v, path, "matches no branch of 'anyOf'");
        if (l == 2 && matched != 1)
            return fail_at(v, path, matched ? "matches more than one branch of 'oneOf'" : "matches no branch of 'oneOf'");
    }
    const cJSON *cst = cJSON_GetObjectItemCaseSensitive(s, "const");
    if (cst && !cJSON_Compare(cst, x, 1)) return fail_at(v, path, "is not the 'const' value");
    const cJSON *en = cJSON_GetObjectItemCaseSensitive(s, "enum");
    if (en) {
        if (!cJSON_IsArray(en)) return hone_error_set(HONE_EINVAL, "json_schema: 'enum' must be an array (at %s)", path);
        int found = 0;
        const cJSON *e;
        cJSON_ArrayForEach(e, en) found |= cJSON_Compare(e, x, 1);
        if (!found) return fail_at(v, path, "is not one of the 'enum' values");
    }
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(s, "type");
    if (t) {
        int bits = 0;
        if (cJSON_IsString(t)) bits = type_bit(t->valuestring);
        else if (cJSON_IsArray(t)) {
            const cJSON *e;
            cJSON_ArrayForEach(e, t) bits |= cJSON_IsString(e) ? type_bit(e->valuestring) : 0;
        }
        if (!bits) return hone_error_set(HONE_EINVAL, "json_schema: 'type' names no known type (at %s)", path);
        if (!(value_types(x) & bits)) {
            char *txt = cJSON_PrintUnformatted(x);
            snprintf(msg, sizeof msg, "%.60s is not of type %.60s", txt ? txt : "the value",
                     cJSON_IsString(t) ? t->valuestring : "any listed");
            free(txt);
            return fail_at(v, path, msg);
        }
    }
    if (cJSON_IsObject(x)) return validate_object(v, s, x, path);
    if (cJSON_IsArray(x)) return validate_array(v, s, x, path);
    if (cJSON_IsString(x)) return validate_string(v, s, x, path);
    if (cJSON_IsNumber(x)) return validate_number(v, s, x, path);
    return 1;
}

static int validate(jsv *v, const cJSON *s, const cJSON *x, const char *path)
{
    if (++v->depth > MAX_DEPTH) return unsupported("nesting deeper than 64 schemas", path);
    int r = validate_body(v, s, x, path);
    v->depth--;
    return r;
}

int hone_json_schema_validate(int *valid, const cJSON *schema, const cJSON *value, char *why, size_t cap)
{
    static const char any_object[] = "{\"type\":\"object\"}";
    *valid = 0;
    if (why && cap) why[0] = 0;
    if (!value) return hone_error_set(HONE_EINVAL, "json_schema: no value to validate");
    cJSON *dflt = schema ? NULL : cJSON_Parse(any_object);
    jsv v = {.root = schema ? schema : dflt, .why = why, .cap = cap};
    int r = v.root ? validate(&v, v.root, value, "#") : hone_error_set(HONE_ENOMEM, "out of memory");
    cJSON_Delete(dflt);
    if (r < 0) return r;
    *valid = r;
    return 0;
}

/* ---- relaxing (hone_json_schema_relax) ---------------------------------------------------------- */

static void relax(cJSON *s, int depth)
{
    if (!cJSON_IsObject(s) || depth > MAX_DEPTH) return;
    for (cJSON *k = s->child, *next; k; k = next) {
        next = k->next;
        if (is_validation_only(k->string)) cJSON_DeleteItemFromObjectCaseSensitive(s, k->string);
    }
    static const char *const one[] = {"items", "additionalProperties", NULL};
    static const char *const lists[] = {"anyOf", "oneOf", "allOf", NULL};
    static const char *const maps[] = {"properties", "$defs", "definitions", NULL};
    for (int i = 0; one[i]; i++) relax(cJSON_GetObjectItemCaseSensitive(s, one[i]), depth + 1);
    for (int i = 0; lists[i]; i++) {
        cJSON *e;
        cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(s, lists[i])) relax(e, depth + 1);
    }
    for (int i = 0; maps[i]; i++) {
        cJSON *e;
        cJSON *m = cJSON_GetObjectItemCaseSensitive(s, maps[i]);
        if (cJSON_IsObject(m)) cJSON_ArrayForEach(e, m) relax(e, depth + 1);
    }
}

void hone_json_schema_relax(cJSON *schema) { relax(schema, 0); }
