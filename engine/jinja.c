/* The chat-template Jinja interpreter (contract in jinja.h): a scanner that applies Jinja2's
 * whitespace rules (trim_blocks, lstrip_blocks, - and +), a recursive-descent parser into an
 * AST, and a tree-walking renderer over Python-like values.
 * Every allocation of a parse or a render comes from one arena freed at its end, so errors
 * unwind with longjmp from anywhere inside to the public entry point, which returns the code. */
#include "jinja.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "error.h"

enum { MAX_NEST = 200, MAX_RANGE = 100000, MAX_VALUE_DEPTH = 512 };

/* ------------------------------------------------------------------ arena, failure */

typedef struct ablock {
    struct ablock *next;
    size_t used, cap;
    char data[];
} ablock;

typedef struct {
    ablock *head;
    size_t total, limit;
} arena;

typedef struct {
    jmp_buf jb;
    int code;
} failure;

static _Thread_local char raised_msg[1024];
static _Thread_local int raised_set;

static void arena_free(arena *a)
{
    ablock *b = a->head;
    while (b) {
        ablock *n = b->next;
        free(b);
        b = n;
    }
    a->head = NULL;
    a->total = 0;
}

static _Noreturn void fail(failure *f, int code, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static _Noreturn void fail(failure *f, int code, int line, const char *fmt, ...)
{
    char msg[900];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (line > 0) hone_error_set(code, "template line %d: %s", line, msg);
    else hone_error_set(code, "template: %s", msg);
    f->code = code;
    longjmp(f->jb, 1);
}

static void *xalloc(failure *f, arena *a, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    if (!a->head || a->head->used + n > a->head->cap) {
        size_t cap = n > 65536 ? n : 65536;
        if (a->limit && a->total + cap > a->limit)
            fail(f, HONE_ERANGE, 0, "the template needs more than %zu bytes of memory", a->limit);
        ablock *b = malloc(sizeof *b + cap);
        if (!b) fail(f, HONE_ENOMEM, 0, "out of memory");
        b->next = a->head;
        b->used = 0;
        b->cap = cap;
        a->head = b;
        a->total += cap;
    }
    void *p = a->head->data + a->head->used;
    a->head->used += n;
    return p;
}

/* Grows an arena array *arr of *cap elements of size elt to hold need. */
static void grow(failure *f, arena *a, void **arr, size_t *cap, size_t need, size_t elt)
{
    if (need <= *cap) return;
    size_t nc = *cap ? *cap * 2 : 8;
    while (nc < need) nc *= 2;
    void *p = xalloc(f, a, nc * elt);
    if (*cap) memcpy(p, *arr, *cap * elt);
    *arr = p;
    *cap = nc;
}

/* ------------------------------------------------------------------ text helpers */

typedef struct {
    const char *p;
    size_t n;
} str;

static int str_eq(str a, const char *b) { return strlen(b) == a.n && !memcmp(a.p, b, a.n); }
static int str_same(str a, str b) { return a.n == b.n && !memcmp(a.p, b.p, a.n); }

/* Length of the Python-whitespace character at s[0..n) (str.isspace), or 0. */
static size_t py_space_at(const unsigned char *s, size_t n)
{
    unsigned char c = s[0];
    if (c == ' ' || (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x1F)) return 1;
    if (c == 0xC2 && n >= 2 && (s[1] == 0x85 || s[1] == 0xA0)) return 2;
    if (c == 0xE1 && n >= 3 && s[1] == 0x9A && s[2] == 0x80) return 3;
    if (c == 0xE2 && n >= 3 && s[1] == 0x80 && (s[2] <= 0x8A || s[2] == 0xA8 || s[2] == 0xA9 || s[2] == 0xAF))
        return 3;
    if (c == 0xE2 && n >= 3 && s[1] == 0x81 && s[2] == 0x9F) return 3;
    if (c == 0xE3 && n >= 3 && s[1] == 0x80 && s[2] == 0x80) return 3;
    return 0;
}

/* Length of the UTF-8 sequence starting at s[0] (1 for stray bytes). */
static size_t cp_len(const unsigned char *s, size_t n)
{
    size_t k = s[0] < 0x80 ? 1 : s[0] >= 0xF0 ? 4 : s[0] >= 0xE0 ? 3 : s[0] >= 0xC0 ? 2 : 1;
    if (k > n) k = n;
    for (size_t i = 1; i < k; i++)
        if ((s[i] & 0xC0) != 0x80) return i;
    return k;
}

static size_t cp_count(str s)
{
    size_t c = 0;
    for (size_t i = 0; i < s.n; i += cp_len((const unsigned char *)s.p + i, s.n - i)) c++;
    return c;
}

static unsigned cp_decode(const unsigned char *s, size_t k)
{
    if (k == 1) return s[0];
    unsigned v = s[0] & (0x7F >> k);
    for (size_t i = 1; i < k; i++) v = (v << 6) | (s[i] & 0x3F);
    return v;
}

static size_t cp_encode(char *o, unsigned v)
{
    if (v < 0x80) { o[0] = (char)v; return 1; }
    if (v < 0x800) { o[0] = (char)(0xC0 | (v >> 6)); o[1] = (char)(0x80 | (v & 0x3F)); return 2; }
    if (v < 0x10000) {
        o[0] = (char)(0xE0 | (v >> 12)); o[1] = (char)(0x80 | ((v >> 6) & 0x3F));
        o[2] = (char)(0x80 | (v & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | (v >> 18)); o[1] = (char)(0x80 | ((v >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((v >> 6) & 0x3F)); o[3] = (char)(0x80 | (v & 0x3F));
    return 4;
}

/* Python's str.strip family: which = 1 left, 2 right, 3 both; chars NULL means whitespace,
 * else the set of code points in chars. */
static int in_chars(const unsigned char *s, size_t k, const str *chars)
{
    for (size_t i = 0; i < chars->n;) {
        size_t m = cp_len((const unsigned char *)chars->p + i, chars->n - i);
        if (m == k && !memcmp(chars->p + i, s, k)) return 1;
        i += m;
    }
    return 0;
}

static str py_strip(str s, int which, const str *chars)
{
    const unsigned char *u = (const unsigned char *)s.p;
    size_t lo = 0, hi = s.n;
    if (which & 1)
        while (lo < s.n) {
            size_t k = chars ? cp_len(u + lo, s.n - lo) : py_space_at(u + lo, s.n - lo);
            if (!k || (chars && !in_chars(u + lo, k, chars))) break;
            lo += k;
        }
    if (which & 2) {
        size_t i = lo, end = lo;
        while (i < s.n) {
            size_t k = cp_len(u + i, s.n - i);
            int sp = chars ? in_chars(u + i, k, chars) : py_space_at(u + i, s.n - i) > 0;
            i += k;
            if (!sp) end = i;
        }
        hi = end;
    }
    return (str){s.p + lo, hi - lo};
}

/* ------------------------------------------------------------------ values */

typedef struct value value;
typedef struct node node;
typedef struct frame frame;

enum { V_UNDEF, V_NONE, V_BOOL, V_INT, V_FLOAT, V_STR, V_LIST, V_DICT, V_NS, V_MACRO, V_CALLER, V_FUNC, V_METHOD };
enum { F_RAISE, F_STRFTIME, F_NAMESPACE, F_RANGE, F_DICT };

typedef struct {
    value *v;
    size_t n, cap;
    int tuple; /* prints as (a, b) */
} list;

typedef struct {
    str *k;
    value *v;
    size_t n, cap;
} dict;

typedef struct caller caller;
typedef struct method method;

struct value {
    int t;
    union {
        int64_t i;
        double f;
        str s;       /* V_STR; V_UNDEF: why it is undefined ("'x' is undefined") */
        list *l;
        dict *d;     /* V_DICT, V_NS */
        const node *mac;
        caller *c;
        int fn;
        method *m;
    } u;
};

struct caller {
    const node *call; /* the call block */
    frame *scope;
};

struct method {
    value self;
    str name;
};

struct frame {
    frame *parent;
    dict vars;
};

/* ------------------------------------------------------------------ AST */

enum {
    /* statements */
    N_TEXT, N_OUTPUT, N_IF, N_FOR, N_SET, N_SET_ATTR, N_SET_BLOCK, N_MACRO, N_CALL_BLOCK, N_BREAK,
    N_CONTINUE, N_BLOCK,
    /* expressions */
    E_LIT, E_NAME, E_ATTR, E_ITEM, E_SLICE, E_CALL, E_FILTER, E_TEST, E_NEG, E_POS, E_NOT, E_BIN,
    E_AND, E_OR, E_COND, E_LIST, E_DICT, E_COMPARE
};

enum { OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_FLOORDIV, OP_MOD, OP_POW, OP_CONCAT };
enum { CMP_EQ, CMP_NE, CMP_LT, CMP_LE, CMP_GT, CMP_GE, CMP_IN, CMP_NOTIN };

struct node {
    int kind, op, line;
    value lit;           /* E_LIT; N_TEXT's text */
    str name;            /* names, attributes, filters, tests, macros */
    node *a, *b, *c;     /* operands; N_FOR: a iterable, b filter; N_IF: a condition */
    node **kids;         /* call / filter / test arguments, list items, dict key-value pairs */
    str *kw;             /* keyword of each argument (n == 0: positional) */
    int nkids;
    int *ops;            /* E_COMPARE: nkids - 1 operators */
    node **body, **alt;  /* statement bodies; alt: else / elif */
    int nbody, nalt;
    str *names;          /* for / set targets, macro parameters */
    node **defaults;     /* macro parameter defaults (NULL entries: none) */
    int nnames;
};

/* ------------------------------------------------------------------ scanner: chunks and tokens */

enum { T_NAME, T_STR, T_INT, T_FLOAT, T_OP, T_END };

typedef struct {
    int t, line;
    str s; /* name, operator or decoded string */
    int64_t i;
    double f;
} token;

enum { C_TEXT, C_VAR, C_BLOCK };

typedef struct {
    int kind, line;
    str text;      /* C_TEXT */
    size_t tok0;   /* C_VAR, C_BLOCK: tokens [tok0, tok1) */
    size_t tok1;
} chunk;

struct hone_jinja {
    arena a;
    node **body;
    int nbody;
};

typedef struct {
    failure f;
    arena *a;
    chunk *ch;
    size_t nch, capch;
    token *tk;
    size_t ntk, captk;
    size_t ci;          /* current chunk */
    size_t ti, tend;    /* token cursor within the current chunk */
    int depth, loops;
    token end;          /* the T_END returned past a chunk's last token */
} parser;

static void add_chunk(parser *p, chunk c)
{
    grow(&p->f, p->a, (void **)&p->ch, &p->capch, p->nch + 1, sizeof *p->ch);
    p->ch[p->nch++] = c;
}

static void add_token(parser *p, token t)
{
    grow(&p->f, p->a, (void **)&p->tk, &p->captk, p->ntk + 1, sizeof *p->tk);
    p->tk[p->ntk++] = t;
}

static int is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static int is_digit(char c) { return c >= '0' && c <= '9'; }

/* Decodes a string literal (Python's unicode-escape, as Jinja2 does) from s[*pos], the quote. */
static str lex_string(parser *p, const char *s, size_t n, size_t *pos, int *line)
{
    char q = s[*pos];
    size_t i = *pos + 1, start_line = (size_t)*line;
    char *o = xalloc(&p->f, p->a, n - *pos + 1);
    size_t m = 0;
    while (i < n && s[i] != q) {
        if (s[i] == '\n') (*line)++;
        if (s[i] != '\\' || i + 1 >= n) {
            o[m++] = s[i++];
            continue;
        }
        char e = s[i + 1];
        i += 2;
        switch (e) {
        case 'n': o[m++] = '\n'; break;
        case 't': o[m++] = '\t'; break;
        case 'r': o[m++] = '\r'; break;
        case 'a': o[m++] = '\a'; break;
        case 'b': o[m++] = '\b'; break;
        case 'f': o[m++] = '\f'; break;
        case 'v': o[m++] = '\v'; break;
        case '\\': case '\'': case '"': o[m++] = e; break;
        case '\n': (*line)++; break; /* line continuation */
        case 'x': case 'u': case 'U': {
            int digits = e == 'x' ? 2 : e == 'u' ? 4 : 8;
            unsigned v = 0;
            for (int d = 0; d < digits; d++, i++) {
                char h = i < n ? s[i] : 0;
                int hv = is_digit(h) ? h - '0' : (h >= 'a' && h <= 'f') ? h - 'a' + 10 : (h >= 'A' && h <= 'F') ? h - 'A' + 10 : -1;
                if (hv < 0) fail(&p->f, HONE_EINVAL, *line, "truncated \\%c escape in a string", e);
                v = v * 16 + (unsigned)hv;
            }
            if (v > 0x10FFFF) fail(&p->f, HONE_EINVAL, *line, "\\%c escape out of range", e);
            m += cp_encode(o + m, v);
            break;
        }
        default:
            if (e >= '0' && e <= '7') {
                unsigned v = (unsigned)(e - '0');
                for (int d = 0; d < 2 && i < n && s[i] >= '0' && s[i] <= '7'; d++) v = v * 8 + (unsigned)(s[i++] - '0');
                m += cp_encode(o + m, v);
            } else if (e == 'N') {
                fail(&p->f, HONE_EINVAL, *line, "unsupported \\N{...} escape in a string");
            } else {
                o[m++] = '\\';
                o[m++] = e;
            }
        }
    }
    if (i >= n) fail(&p->f, HONE_EINVAL, (int)start_line, "unterminated string literal");
    *pos = i + 1;
    o[m] = '\0';
    return (str){o, m};
}

/* Tokenises a tag body from s[*pos] up to its end marker ("}}" or "%}", optionally with - or +
 * before it) at bracket depth 0; *pos ends after the marker, *sign is '-', '+' or 0. */
static void lex_tag(parser *p, const char *s, size_t n, size_t *pos, int *line, char close, char *sign)
{
    static const char *const ops2[] = {"//", "**", "==", "!=", "<=", ">="};
    int depth = 0, open_line = *line;
    size_t i = *pos;
    for (;;) {
        while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r' || s[i] == '\f' || s[i] == '\v')) {
            if (s[i] == '\n') (*line)++;
            i++;
        }
        if (i >= n) fail(&p->f, HONE_EINVAL, open_line, "unclosed tag (no '%c}')", close);
        if ((s[i] == '-' || s[i] == '+') && i + 2 < n + 0 && s[i + 1] == close && s[i + 2] == '}' && depth == 0) {
            *sign = s[i];
            *pos = i + 3;
            return;
        }
        if (s[i] == close && i + 1 < n && s[i + 1] == '}' && depth == 0) {
            *sign = 0;
            *pos = i + 2;
            return;
        }
        token t = {.line = *line};
        char c = s[i];
        if (is_name_start(c)) {
            size_t j = i;
            while (j < n && (is_name_start(s[j]) || is_digit(s[j]))) j++;
            t.t = T_NAME;
            t.s = (str){s + i, j - i};
            i = j;
        } else if (is_digit(c)) {
            char num[64];
            size_t m = 0, j = i;
            int is_float = 0;
            while (j < n && (is_digit(s[j]) || (s[j] == '_' && j + 1 < n && is_digit(s[j + 1])))) {
                if (s[j] != '_' && m < 60) num[m++] = s[j];
                j++;
            }
            if (j + 1 < n && s[j] == '.' && is_digit(s[j + 1])) {
                is_float = 1;
                num[m++] = s[j++];
                while (j < n && is_digit(s[j]) && m < 60) num[m++] = s[j++];
            }
            if (j < n && (s[j] == 'e' || s[j] == 'E')) {
                size_t k = j + 1;
                if (k < n && (s[k] == '+' || s[k] == '-')) k++;
                if (k < n && is_digit(s[k])) {
                    is_float = 1;
                    while (j < k && m < 60) num[m++] = s[j++];
                    while (j < n && is_digit(s[j]) && m < 60) num[m++] = s[j++];
                }
            }
            num[m] = '\0';
            if (is_float) {
                t.t = T_FLOAT;
                t.f = strtod(num, NULL);
            } else {
                t.t = T_INT;
                char *end;
                unsigned long long v = strtoull(num, &end, 10);
                if (m > 18 || v > (unsigned long long)INT64_MAX)
                    fail(&p->f, HONE_EINVAL, *line, "integer literal %s is too large", num);
                t.i = (int64_t)v;
            }
            i = j;
        } else if (c == '\'' || c == '"') {
            t.t = T_STR;
            t.s = lex_string(p, s, n, &i, line);
        } else {
            t.t = T_OP;
            for (size_t k = 0; k < sizeof ops2 / sizeof ops2[0]; k++)
                if (i + 1 < n && s[i] == ops2[k][0] && s[i + 1] == ops2[k][1]) t.s = (str){s + i, 2};
            if (!t.s.n) {
                if (!strchr("+-*/%~<>=.,:|()[]{}", c) || c == '\0')
                    fail(&p->f, HONE_EINVAL, *line, "unexpected character '%.*s' in a tag",
                         (int)cp_len((const unsigned char *)s + i, n - i), s + i);
                t.s = (str){s + i, 1};
                if (c == '(' || c == '[' || c == '{') depth++;
                if ((c == ')' || c == ']' || c == '}') && depth > 0) depth--;
            }
            i += t.s.n;
        }
        add_token(p, t);
    }
}

/* Length of the Python-whitespace character that ends at s[end] (exclusive), not before lo. */
static size_t space_before(const char *s, size_t lo, size_t end)
{
    for (size_t k = 1; k <= 3 && k <= end - lo; k++)
        if (py_space_at((const unsigned char *)s + end - k, k) == k) return k;
    return 0;
}

static size_t skip_spaces(const char *s, size_t n, size_t i, int *line)
{
    size_t k;
    while (i < n && (k = py_space_at((const unsigned char *)s + i, n - i)) > 0) {
        if (s[i] == '\n') (*line)++;
        i += k;
    }
    return i;
}

/* Splits the normalised source into text / {{ }} / {% %} chunks with Jinja2's whitespace
 * control: "-" strips all whitespace on that side, lstrip_blocks removes spaces and tabs
 * before a block or comment tag that starts its line, trim_blocks removes the first newline
 * after a block or comment tag. */
static void scan(parser *p, const char *s, size_t n)
{
    size_t pos = 0;
    int line = 1, line_starting = 1;
    while (pos < n) {
        size_t q = pos;
        while (q + 1 < n && !(s[q] == '{' && (s[q + 1] == '{' || s[q + 1] == '%' || s[q + 1] == '#'))) q++;
        if (q + 1 >= n) {
            add_chunk(p, (chunk){.kind = C_TEXT, .line = line, .text = {s + pos, n - pos}});
            break;
        }
        char kind = s[q + 1];
        char sign = q + 2 < n && (s[q + 2] == '-' || s[q + 2] == '+') ? s[q + 2] : 0;
        if (kind == '{' && sign == '+') sign = 0; /* {{+ is not a marker */
        size_t tend = q, k;
        if (sign == '-') {
            while (tend > pos && (k = space_before(s, pos, tend)) > 0) tend -= k;
        } else if (sign != '+' && kind != '{') {
            size_t l = tend;
            while (l > pos && s[l - 1] != '\n') l--;
            if (l > pos || line_starting) {
                size_t j = l;
                while (j < tend && (s[j] == ' ' || s[j] == '\t')) j++;
                if (j == tend) tend = l;
            }
        }
        if (tend > pos) add_chunk(p, (chunk){.kind = C_TEXT, .line = line, .text = {s + pos, tend - pos}});
        for (size_t j = pos; j < q; j++) line += s[j] == '\n';
        int tag_line = line;
        size_t b = q + 2 + (sign ? 1 : 0);
        char end_sign = 0;
        if (kind == '#') {
            size_t e = b;
            while (e + 1 < n && !(s[e] == '#' && s[e + 1] == '}')) e++;
            if (e + 1 >= n) fail(&p->f, HONE_EINVAL, tag_line, "unclosed comment");
            for (size_t j = q; j < e; j++) line += s[j] == '\n';
            end_sign = e > b && (s[e - 1] == '-' || s[e - 1] == '+') ? s[e - 1] : 0;
            pos = e + 2;
        } else {
            chunk c = {.kind = kind == '{' ? C_VAR : C_BLOCK, .line = tag_line, .tok0 = p->ntk};
            size_t i = b;
            lex_tag(p, s, n, &i, &line, kind == '{' ? '}' : '%', &end_sign);
            c.tok1 = p->ntk;
            add_chunk(p, c);
            pos = i;
        }
        if (end_sign == '-') pos = skip_spaces(s, n, pos, &line);
        else if (kind != '{' && end_sign != '+' && pos < n && s[pos] == '\n') {
            pos++;
            line++;
        }
        line_starting = pos > 0 && s[pos - 1] == '\n';
    }
}

/* ------------------------------------------------------------------ parser */

static const token *peek(parser *p) { return p->ti < p->tend ? &p->tk[p->ti] : &p->end; }
static const token *next_tok(parser *p)
{
    const token *t = peek(p);
    if (p->ti < p->tend) p->ti++;
    return t;
}
static int tok_op(const token *t, const char *op) { return t->t == T_OP && str_eq(t->s, op); }
static int tok_name(const token *t, const char *nm) { return t->t == T_NAME && str_eq(t->s, nm); }

static int accept_op(parser *p, const char *op)
{
    if (!tok_op(peek(p), op)) return 0;
    p->ti++;
    return 1;
}

static int accept_name(parser *p, const char *nm)
{
    if (!tok_name(peek(p), nm)) return 0;
    p->ti++;
    return 1;
}

static const char *tok_desc(const token *t, char *buf, size_t n)
{
    switch (t->t) {
    case T_END: return "end of tag";
    case T_STR: return "string literal";
    case T_INT: case T_FLOAT: return "number";
    default: snprintf(buf, n, "'%.*s'", (int)(t->s.n > 40 ? 40 : t->s.n), t->s.p); return buf;
    }
}

static _Noreturn void unexpected(parser *p, const char *want)
{
    char b[64];
    const token *t = peek(p);
    fail(&p->f, HONE_EINVAL, t->line, "expected %s, got %s", want, tok_desc(t, b, sizeof b));
}

static void expect_op(parser *p, const char *op)
{
    if (!accept_op(p, op)) {
        char w[16];
        snprintf(w, sizeof w, "'%s'", op);
        unexpected(p, w);
    }
}

static str expect_ident(parser *p)
{
    const token *t = peek(p);
    if (t->t != T_NAME) unexpected(p, "a name");
    p->ti++;
    return t->s;
}

static node *mk(parser *p, int kind, int line)
{
    node *n = xalloc(&p->f, p->a, sizeof *n);
    memset(n, 0, sizeof *n);
    n->kind = kind;
    n->line = line;
    return n;
}

typedef struct {
    node **v;
    size_t n, cap;
} nvec;

static void nv_push(parser *p, nvec *v, node *x)
{
    grow(&p->f, p->a, (void **)&v->v, &v->cap, v->n + 1, sizeof *v->v);
    v->v[v->n++] = x;
}

static const char *const FILTERS[] = {
    "abs", "capitalize", "count", "d", "default", "first", "float", "indent", "int", "items", "join",
    "last", "length", "list", "lower", "map", "reject", "rejectattr", "replace", "reverse", "safe",
    "select", "selectattr", "sort", "string", "sum", "title", "tojson", "trim", "unique", "upper", NULL};

static const char *const TESTS[] = {
    "boolean", "callable", "defined", "divisibleby", "eq", "equalto", "==", "even", "false", "float",
    "ge", "gt", "le", "lt", "ne", "!=", ">", ">=", "<", "<=", "in", "integer", "iterable", "lower",
    "mapping", "none", "number", "odd", "sameas", "sequence", "string", "true", "undefined", "upper", NULL};

static int in_table(const char *const *tab, str name)
{
    for (int i = 0; tab[i]; i++)
        if (str_eq(name, tab[i])) return 1;
    return 0;
}

static node *parse_expr(parser *p);
static node *parse_or(parser *p);
static node *parse_unary(parser *p, int with_filter);

static void enter(parser *p)
{
    if (++p->depth > MAX_NEST) fail(&p->f, HONE_ERANGE, peek(p)->line, "nesting deeper than %d", MAX_NEST);
}

/* (args) after a callee, filter or test: positional and name=value arguments. */
static void parse_args(parser *p, node *n)
{
    nvec v = {0};
    str *kw = NULL;
    size_t kwcap = 0;
    while (!accept_op(p, ")")) {
        if (v.n) expect_op(p, ",");
        if (accept_op(p, ")")) break;
        if (tok_op(peek(p), "*") || tok_op(peek(p), "**"))
            fail(&p->f, HONE_EINVAL, peek(p)->line, "unsupported *args / **kwargs in a call");
        str k = {0};
        if (peek(p)->t == T_NAME && p->ti + 1 < p->tend && tok_op(&p->tk[p->ti + 1], "=")) {
            k = next_tok(p)->s;
            p->ti++;
        }
        nv_push(p, &v, parse_expr(p));
        grow(&p->f, p->a, (void **)&kw, &kwcap, v.n, sizeof *kw);
        kw[v.n - 1] = k;
    }
    n->kids = v.v;
    n->kw = kw;
    n->nkids = (int)v.n;
}

static node *parse_primary(parser *p)
{
    const token *t = peek(p);
    node *n;
    int line = t->line;
    enter(p);
    if (t->t == T_NAME) {
        p->ti++;
        n = mk(p, E_LIT, line);
        if (str_eq(t->s, "true") || str_eq(t->s, "True")) n->lit = (value){.t = V_BOOL, .u.i = 1};
        else if (str_eq(t->s, "false") || str_eq(t->s, "False")) n->lit = (value){.t = V_BOOL, .u.i = 0};
        else if (str_eq(t->s, "none") || str_eq(t->s, "None")) n->lit = (value){.t = V_NONE};
        else {
            n->kind = E_NAME;
            n->name = t->s;
        }
    } else if (t->t == T_STR) {
        /* adjacent literals concatenate */
        size_t total = 0, j = p->ti;
        while (j < p->tend && p->tk[j].t == T_STR) total += p->tk[j++].s.n;
        char *s = xalloc(&p->f, p->a, total + 1);
        size_t m = 0;
        while (p->ti < j) {
            memcpy(s + m, p->tk[p->ti].s.p, p->tk[p->ti].s.n);
            m += p->tk[p->ti++].s.n;
        }
        s[m] = '\0';
        n = mk(p, E_LIT, line);
        n->lit = (value){.t = V_STR, .u.s = {s, m}};
    } else if (t->t == T_INT || t->t == T_FLOAT) {
        p->ti++;
        n = mk(p, E_LIT, line);
        n->lit = t->t == T_INT ? (value){.t = V_INT, .u.i = t->i} : (value){.t = V_FLOAT, .u.f = t->f};
    } else if (accept_op(p, "(")) {
        if (accept_op(p, ")")) {
            n = mk(p, E_LIST, line);
            n->op = 1;
        } else {
            n = parse_expr(p);
            if (tok_op(peek(p), ",")) {
                nvec v = {0};
                nv_push(p, &v, n);
                while (accept_op(p, ",") && !tok_op(peek(p), ")")) nv_push(p, &v, parse_expr(p));
                n = mk(p, E_LIST, line);
                n->op = 1; /* tuple */
                n->kids = v.v;
                n->nkids = (int)v.n;
            }
            expect_op(p, ")");
        }
    } else if (accept_op(p, "[")) {
        nvec v = {0};
        while (!accept_op(p, "]")) {
            if (v.n) expect_op(p, ",");
            if (accept_op(p, "]")) break;
            nv_push(p, &v, parse_expr(p));
        }
        n = mk(p, E_LIST, line);
        n->kids = v.v;
        n->nkids = (int)v.n;
    } else if (accept_op(p, "{")) {
        nvec v = {0};
        while (!accept_op(p, "}")) {
            if (v.n) expect_op(p, ",");
            if (accept_op(p, "}")) break;
            nv_push(p, &v, parse_expr(p));
            expect_op(p, ":");
            nv_push(p, &v, parse_expr(p));
        }
        n = mk(p, E_DICT, line);
        n->kids = v.v;
        n->nkids = (int)v.n;
    } else {
        unexpected(p, "an expression");
    }
    p->depth--;
    return n;
}

static node *parse_postfix(parser *p, node *n)
{
    for (;;) {
        int line = peek(p)->line;
        if (accept_op(p, ".")) {
            const token *t = next_tok(p);
            node *m = mk(p, t->t == T_INT ? E_ITEM : E_ATTR, line);
            m->a = n;
            if (t->t == T_INT) {
                m->b = mk(p, E_LIT, line);
                m->b->lit = (value){.t = V_INT, .u.i = t->i};
            } else if (t->t == T_NAME) {
                m->name = t->s;
            } else {
                p->ti--;
                unexpected(p, "an attribute name");
            }
            n = m;
        } else if (accept_op(p, "[")) {
            node *parts[3] = {NULL, NULL, NULL};
            int colons = 0;
            for (;;) {
                if (tok_op(peek(p), ":")) {
                    if (++colons > 2) unexpected(p, "']'");
                    p->ti++;
                    continue;
                }
                if (tok_op(peek(p), "]")) break;
                if (parts[colons]) unexpected(p, "':' or ']'");
                parts[colons] = parse_expr(p);
                if (tok_op(peek(p), ",")) fail(&p->f, HONE_EINVAL, line, "unsupported tuple subscript");
            }
            expect_op(p, "]");
            node *m;
            if (!colons) {
                if (!parts[0]) unexpected(p, "a subscript");
                m = mk(p, E_ITEM, line);
                m->b = parts[0];
            } else {
                m = mk(p, E_SLICE, line);
                m->b = parts[0];
                m->c = parts[1];
                m->kids = xalloc(&p->f, p->a, sizeof(node *));
                m->kids[0] = parts[2];
                m->nkids = 1;
            }
            m->a = n;
            n = m;
        } else if (accept_op(p, "(")) {
            node *m = mk(p, E_CALL, line);
            m->a = n;
            parse_args(p, m);
            n = m;
        } else {
            return n;
        }
    }
}

static node *parse_filter_expr(parser *p, node *n)
{
    for (;;) {
        int line = peek(p)->line;
        if (accept_op(p, "|")) {
            node *m = mk(p, E_FILTER, line);
            m->a = n;
            m->name = expect_ident(p);
            if (!in_table(FILTERS, m->name))
                fail(&p->f, HONE_EINVAL, line, "unsupported filter '%.*s'", (int)m->name.n, m->name.p);
            if (accept_op(p, "(")) parse_args(p, m);
            n = m;
        } else if (accept_name(p, "is")) {
            node *m = mk(p, E_TEST, line);
            m->a = n;
            m->op = accept_name(p, "not");
            const token *t = peek(p);
            if (t->t == T_NAME) m->name = t->s;
            else if (tok_op(t, "==") || tok_op(t, "!=") || tok_op(t, "<") || tok_op(t, "<=") || tok_op(t, ">") || tok_op(t, ">="))
                m->name = t->s;
            else unexpected(p, "a test name");
            p->ti++;
            if (!in_table(TESTS, m->name))
                fail(&p->f, HONE_EINVAL, line, "unsupported test '%.*s'", (int)m->name.n, m->name.p);
            if (accept_op(p, "(")) {
                parse_args(p, m);
            } else {
                t = peek(p);
                int starts = t->t == T_NAME || t->t == T_STR || t->t == T_INT || t->t == T_FLOAT ||
                             tok_op(t, "(") || tok_op(t, "[") || tok_op(t, "{");
                if (starts && !tok_name(t, "else") && !tok_name(t, "or") && !tok_name(t, "and")) {
                    m->kids = xalloc(&p->f, p->a, sizeof(node *));
                    m->kids[0] = parse_postfix(p, parse_primary(p));
                    m->kw = xalloc(&p->f, p->a, sizeof(str));
                    m->kw[0] = (str){0};
                    m->nkids = 1;
                }
            }
            n = m;
        } else if (accept_op(p, "(")) {
            node *m = mk(p, E_CALL, line);
            m->a = n;
            parse_args(p, m);
            n = m;
        } else {
            return n;
        }
    }
}

static node *parse_unary(parser *p, int with_filter)
{
    int line = peek(p)->line;
    node *n;
    enter(p);
    if (accept_op(p, "-")) {
        n = mk(p, E_NEG, line);
        n->a = parse_unary(p, 0);
    } else if (accept_op(p, "+")) {
        n = mk(p, E_POS, line);
        n->a = parse_unary(p, 0);
    } else {
        n = parse_primary(p);
    }
    n = parse_postfix(p, n);
    if (with_filter) n = parse_filter_expr(p, n);
    p->depth--;
    return n;
}

static node *bin(parser *p, int op, node *a, node *b, int line)
{
    node *n = mk(p, E_BIN, line);
    n->op = op;
    n->a = a;
    n->b = b;
    return n;
}

static node *parse_pow(parser *p)
{
    node *n = parse_unary(p, 1);
    int line;
    while (line = peek(p)->line, accept_op(p, "**")) n = bin(p, OP_POW, n, parse_unary(p, 1), line);
    return n;
}

static node *parse_math2(parser *p)
{
    node *n = parse_pow(p);
    for (;;) {
        int line = peek(p)->line, op;
        if (accept_op(p, "*")) op = OP_MUL;
        else if (accept_op(p, "/")) op = OP_DIV;
        else if (accept_op(p, "//")) op = OP_FLOORDIV;
        else if (accept_op(p, "%")) op = OP_MOD;
        else return n;
        n = bin(p, op, n, parse_pow(p), line);
    }
}

static node *parse_concat(parser *p)
{
    node *n = parse_math2(p);
    int line;
    while (line = peek(p)->line, accept_op(p, "~")) n = bin(p, OP_CONCAT, n, parse_math2(p), line);
    return n;
}

static node *parse_math1(parser *p)
{
    node *n = parse_concat(p);
    for (;;) {
        int line = peek(p)->line, op;
        if (accept_op(p, "+")) op = OP_ADD;
        else if (accept_op(p, "-")) op = OP_SUB;
        else return n;
        n = bin(p, op, n, parse_concat(p), line);
    }
}

static node *parse_compare(parser *p)
{
    int line = peek(p)->line;
    node *first = parse_math1(p);
    nvec v = {0};
    int *ops = NULL;
    size_t opcap = 0;
    for (;;) {
        const token *t = peek(p);
        int op;
        if (tok_op(t, "==")) op = CMP_EQ;
        else if (tok_op(t, "!=")) op = CMP_NE;
        else if (tok_op(t, "<")) op = CMP_LT;
        else if (tok_op(t, "<=")) op = CMP_LE;
        else if (tok_op(t, ">")) op = CMP_GT;
        else if (tok_op(t, ">=")) op = CMP_GE;
        else if (tok_name(t, "in")) op = CMP_IN;
        else if (tok_name(t, "not") && p->ti + 1 < p->tend && tok_name(&p->tk[p->ti + 1], "in")) {
            op = CMP_NOTIN;
            p->ti++;
        } else break;
        p->ti++;
        if (!v.n) nv_push(p, &v, first);
        nv_push(p, &v, parse_math1(p));
        grow(&p->f, p->a, (void **)&ops, &opcap, v.n - 1, sizeof *ops);
        ops[v.n - 2] = op;
    }
    if (!v.n) return first;
    node *n = mk(p, E_COMPARE, line);
    n->kids = v.v;
    n->nkids = (int)v.n;
    n->ops = ops;
    return n;
}

static node *parse_not(parser *p)
{
    int line = peek(p)->line;
    if (accept_name(p, "not")) {
        enter(p);
        node *n = mk(p, E_NOT, line);
        n->a = parse_not(p);
        p->depth--;
        return n;
    }
    return parse_compare(p);
}

/* `and` (is_or 0) binds tighter than `or` (is_or 1). */
static node *parse_bool(parser *p, int is_or)
{
    node *n = is_or ? parse_bool(p, 0) : parse_not(p);
    int line;
    while (line = peek(p)->line, accept_name(p, is_or ? "or" : "and")) {
        node *m = mk(p, is_or ? E_OR : E_AND, line);
        m->a = n;
        m->b = is_or ? parse_bool(p, 0) : parse_not(p);
        n = m;
    }
    return n;
}

static node *parse_or(parser *p) { return parse_bool(p, 1); }

static node *parse_expr(parser *p)
{
    enter(p);
    node *n = parse_or(p);
    int line;
    while (line = peek(p)->line, accept_name(p, "if")) {
        node *m = mk(p, E_COND, line);
        m->a = parse_or(p);
        m->b = n;
        if (accept_name(p, "else")) m->c = parse_expr(p);
        n = m;
    }
    p->depth--;
    return n;
}

/* `a, b` after `set` or `for`: target names. */
static void parse_targets(parser *p, node *n)
{
    str *names = NULL;
    size_t cap = 0, k = 0;
    do {
        grow(&p->f, p->a, (void **)&names, &cap, k + 1, sizeof *names);
        names[k++] = expect_ident(p);
    } while (accept_op(p, ","));
    n->names = names;
    n->nnames = (int)k;
}

static void expect_end(parser *p, const char *what)
{
    if (peek(p)->t != T_END) {
        char b[64];
        fail(&p->f, HONE_EINVAL, peek(p)->line, "unexpected %s in '%s'", tok_desc(peek(p), b, sizeof b), what);
    }
}

/* Enters chunk p->ci for token reading. */
static void open_chunk(parser *p)
{
    chunk *c = &p->ch[p->ci];
    p->ti = c->tok0;
    p->tend = c->tok1;
    p->end = (token){.t = T_END, .line = c->line};
    if (c->tok1 > c->tok0) p->end.line = p->tk[c->tok1 - 1].line;
}

/* Parses statements until a block tag whose keyword is in stops (NULL-terminated); returns
 * the index of that keyword (the tag's tokens are left to read), or -1 at the end of input
 * (an error when stops is non-empty). */
static int parse_body(parser *p, const char *const *stops, node ***out, int *nout, const char *opener, int open_line);

static void parse_statement(parser *p, nvec *v)
{
    chunk *c = &p->ch[p->ci];
    int line = c->line;
    if (c->kind == C_TEXT) {
        node *n = mk(p, N_TEXT, line);
        n->lit = (value){.t = V_STR, .u.s = c->text};
        nv_push(p, v, n);
        p->ci++;
        return;
    }
    open_chunk(p);
    if (c->kind == C_VAR) {
        if (peek(p)->t == T_END) fail(&p->f, HONE_EINVAL, line, "empty {{ }}");
        node *n = mk(p, N_OUTPUT, line);
        n->a = parse_expr(p);
        expect_end(p, "{{ }}");
        nv_push(p, v, n);
        p->ci++;
        return;
    }
    const token *kw = peek(p);
    if (kw->t != T_NAME) unexpected(p, "a statement name");
    str name = kw->s;
    p->ti++;
    line = kw->line;
    node *n = NULL;
    if (str_eq(name, "if")) {
        static const char *const stops[] = {"elif", "else", "endif", NULL};
        n = mk(p, N_IF, line);
        n->a = parse_expr(p);
        expect_end(p, "if");
        p->ci++;
        node *cur = n;
        for (;;) {
            int which = parse_body(p, stops, &cur->body, &cur->nbody, "if", line);
            if (which == 0) { /* elif */
                node *e = mk(p, N_IF, p->tk[p->ti - 1].line);
                e->a = parse_expr(p);
                expect_end(p, "elif");
                p->ci++;
                cur->alt = xalloc(&p->f, p->a, sizeof(node *));
                cur->alt[0] = e;
                cur->nalt = 1;
                cur = e;
                continue;
            }
            if (which == 1) { /* else */
                static const char *const end[] = {"endif", NULL};
                expect_end(p, "else");
                p->ci++;
                parse_body(p, end, &cur->alt, &cur->nalt, "if", line);
            }
            expect_end(p, "endif");
            p->ci++;
            break;
        }
    } else if (str_eq(name, "for")) {
        static const char *const stops[] = {"else", "endfor", NULL};
        static const char *const end[] = {"endfor", NULL};
        n = mk(p, N_FOR, line);
        if (tok_op(peek(p), "(")) fail(&p->f, HONE_EINVAL, line, "unsupported parenthesised for target");
        parse_targets(p, n);
        if (!accept_name(p, "in")) unexpected(p, "'in'");
        n->a = parse_or(p);
        if (tok_op(peek(p), ",")) fail(&p->f, HONE_EINVAL, line, "unsupported tuple after 'in'");
        if (accept_name(p, "if")) n->b = parse_expr(p);
        if (tok_name(peek(p), "recursive")) fail(&p->f, HONE_EINVAL, line, "unsupported recursive for loop");
        expect_end(p, "for");
        p->ci++;
        p->loops++;
        int which = parse_body(p, stops, &n->body, &n->nbody, "for", line);
        p->loops--;
        if (which == 0) {
            expect_end(p, "else");
            p->ci++;
            parse_body(p, end, &n->alt, &n->nalt, "for", line);
        }
        expect_end(p, "endfor");
        p->ci++;
    } else if (str_eq(name, "set")) {
        n = mk(p, N_SET, line);
        str first = expect_ident(p);
        if (accept_op(p, ".")) {
            n->kind = N_SET_ATTR;
            n->name = first;
            n->names = xalloc(&p->f, p->a, sizeof(str));
            n->names[0] = expect_ident(p);
            n->nnames = 1;
        } else {
            p->ti--;
            parse_targets(p, n);
        }
        if (accept_op(p, "=")) {
            node *e = parse_expr(p);
            if (tok_op(peek(p), ",")) {
                nvec t = {0};
                nv_push(p, &t, e);
                while (accept_op(p, ",")) nv_push(p, &t, parse_expr(p));
                e = mk(p, E_LIST, line);
                e->op = 1;
                e->kids = t.v;
                e->nkids = (int)t.n;
            }
            n->a = e;
            expect_end(p, "set");
            p->ci++;
        } else {
            static const char *const end[] = {"endset", NULL};
            if (n->kind != N_SET || n->nnames != 1)
                fail(&p->f, HONE_EINVAL, line, "a block set takes one plain name");
            if (tok_op(peek(p), "|")) fail(&p->f, HONE_EINVAL, line, "unsupported filter on a block set");
            expect_end(p, "set");
            n->kind = N_SET_BLOCK;
            p->ci++;
            parse_body(p, end, &n->body, &n->nbody, "set", line);
            expect_end(p, "endset");
            p->ci++;
        }
    } else if (str_eq(name, "macro")) {
        static const char *const end[] = {"endmacro", NULL};
        n = mk(p, N_MACRO, line);
        n->name = expect_ident(p);
        expect_op(p, "(");
        str *names = NULL;
        node **defs = NULL;
        size_t cap = 0, dcap = 0, k = 0;
        while (!accept_op(p, ")")) {
            if (k) expect_op(p, ",");
            if (accept_op(p, ")")) break;
            grow(&p->f, p->a, (void **)&names, &cap, k + 1, sizeof *names);
            grow(&p->f, p->a, (void **)&defs, &dcap, k + 1, sizeof *defs);
            names[k] = expect_ident(p);
            defs[k] = accept_op(p, "=") ? parse_expr(p) : NULL;
            k++;
        }
        n->names = names;
        n->defaults = defs;
        n->nnames = (int)k;
        expect_end(p, "macro");
        p->ci++;
        int loops = p->loops;
        p->loops = 0;
        parse_body(p, end, &n->body, &n->nbody, "macro", line);
        p->loops = loops;
        expect_end(p, "endmacro");
        p->ci++;
    } else if (str_eq(name, "call")) {
        static const char *const end[] = {"endcall", NULL};
        n = mk(p, N_CALL_BLOCK, line);
        if (tok_op(peek(p), "(")) fail(&p->f, HONE_EINVAL, line, "unsupported call block with caller arguments");
        n->a = parse_expr(p);
        if (n->a->kind != E_CALL) fail(&p->f, HONE_EINVAL, line, "a call block needs a macro call");
        expect_end(p, "call");
        p->ci++;
        parse_body(p, end, &n->body, &n->nbody, "call", line);
        expect_end(p, "endcall");
        p->ci++;
    } else if (str_eq(name, "generation")) {
        static const char *const end[] = {"endgeneration", NULL};
        n = mk(p, N_BLOCK, line);
        expect_end(p, "generation");
        p->ci++;
        parse_body(p, end, &n->body, &n->nbody, "generation", line);
        expect_end(p, "endgeneration");
        p->ci++;
    } else if (str_eq(name, "break") || str_eq(name, "continue")) {
        if (!p->loops) fail(&p->f, HONE_EINVAL, line, "'%.*s' outside a for loop", (int)name.n, name.p);
        n = mk(p, str_eq(name, "break") ? N_BREAK : N_CONTINUE, line);
        expect_end(p, "break");
        p->ci++;
    } else {
        static const char *const known[] = {"include", "import", "from", "extends", "block", "raw", "filter",
                                            "with", "autoescape", "do", "trans", NULL};
        fail(&p->f, HONE_EINVAL, line, "%s statement '%.*s'", in_table(known, name) ? "unsupported" : "unknown",
             (int)name.n, name.p);
    }
    nv_push(p, v, n);
}

static int parse_body(parser *p, const char *const *stops, node ***out, int *nout, const char *opener, int open_line)
{
    nvec v = {0};
    enter(p);
    while (p->ci < p->nch) {
        chunk *c = &p->ch[p->ci];
        if (c->kind == C_BLOCK && c->tok1 > c->tok0 && p->tk[c->tok0].t == T_NAME) {
            str kw = p->tk[c->tok0].s;
            for (int i = 0; stops && stops[i]; i++)
                if (str_eq(kw, stops[i])) {
                    open_chunk(p);
                    p->ti++;
                    *out = v.v;
                    *nout = (int)v.n;
                    p->depth--;
                    return i;
                }
            static const char *const closers[] = {"endif", "endfor", "endset", "endmacro", "endcall", "endgeneration",
                                                  "elif", "else", NULL};
            if (in_table(closers, kw))
                fail(&p->f, HONE_EINVAL, c->line, "unexpected '%.*s'%s%s", (int)kw.n, kw.p,
                     opener ? " inside " : "", opener ? opener : "");
        }
        parse_statement(p, &v);
    }
    if (stops) {
        int last = 0;
        while (stops[last + 1]) last++;
        fail(&p->f, HONE_EINVAL, open_line, "'%s' is never closed (missing '%s')", opener, stops[last]);
    }
    *out = v.v;
    *nout = (int)v.n;
    p->depth--;
    return -1;
}

int hone_jinja_new(hone_jinja **out, const char *src, size_t len)
{
    *out = NULL;
    if (!src && len) return hone_error_set(HONE_EINVAL, "template: NULL text");
    hone_jinja *t = calloc(1, sizeof *t);
    if (!t) return hone_error_set(HONE_ENOMEM, "template: out of memory");
    t->a.limit = 64u << 20;
    parser p = {.a = &t->a};
    if (setjmp(p.f.jb)) {
        hone_jinja_free(t);
        return p.f.code;
    }
    /* newlines: \r\n and \r become \n; one trailing newline goes (keep_trailing_newline off) */
    char *s = xalloc(&p.f, &t->a, len + 1);
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        if (src[i] == '\r') {
            s[n++] = '\n';
            if (i + 1 < len && src[i + 1] == '\n') i++;
        } else {
            s[n++] = src[i];
        }
    }
    if (n && s[n - 1] == '\n') n--;
    s[n] = '\0';
    scan(&p, s, n);
    parse_body(&p, NULL, &t->body, &t->nbody, NULL, 0);
    *out = t;
    return 0;
}

void hone_jinja_free(hone_jinja *t)
{
    if (!t) return;
    arena_free(&t->a);
    free(t);
}

/* ------------------------------------------------------------------ renderer: state, values */

typedef struct {
    char *s;
    size_t n, cap;
} buf;

typedef struct {
    failure f;
    arena a;
    hone_jinja_opts o;
    int64_t steps;
    int depth;
    frame *root;
    buf *out;
    int ctl; /* 1: break, 2: continue pending */
    time_t now;
} rctx;

typedef struct {
    value *v;
    str *kw;
    int n, line;
} args;

#define FAIL(c, line, ...) fail(&(c)->f, HONE_EINVAL, (line), __VA_ARGS__)

static void bput(rctx *c, buf *b, const char *p, size_t n)
{
    if (b->n + n > c->o.max_output)
        fail(&c->f, HONE_ERANGE, 0, "the rendered text exceeds %zu bytes", c->o.max_output);
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 256;
        while (cap < b->n + n + 1) cap *= 2;
        char *s = xalloc(&c->f, &c->a, cap);
        if (b->n) memcpy(s, b->s, b->n);
        b->s = s;
        b->cap = cap;
    }
    if (n) memcpy(b->s + b->n, p, n);
    b->n += n;
    b->s[b->n] = '\0';
}

static void bputs(rctx *c, buf *b, const char *s) { bput(c, b, s, strlen(s)); }
static void bputc(rctx *c, buf *b, char ch) { bput(c, b, &ch, 1); }

static void bprintf(rctx *c, buf *b, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void bprintf(rctx *c, buf *b, const char *fmt, ...)
{
    char tmp[128];
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    bput(c, b, tmp, k < 0 ? 0 : (size_t)k < sizeof tmp ? (size_t)k : sizeof tmp - 1);
}

static str buf_str(buf *b) { return b->s ? (str){b->s, b->n} : (str){"", 0}; }

static value vundef(const char *why) { return (value){.t = V_UNDEF, .u.s = {why, strlen(why)}}; }
static value vnone(void) { return (value){.t = V_NONE}; }
static value vbool(int b) { return (value){.t = V_BOOL, .u.i = b != 0}; }
static value vint(int64_t i) { return (value){.t = V_INT, .u.i = i}; }
static value vfloat(double f) { return (value){.t = V_FLOAT, .u.f = f}; }
static value vstr(str s) { return (value){.t = V_STR, .u.s = s}; }

static value vundef_fmt(rctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static value vundef_fmt(rctx *c, const char *fmt, ...)
{
    char tmp[256];
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    size_t n = k < 0 ? 0 : (size_t)k < sizeof tmp ? (size_t)k : sizeof tmp - 1;
    char *s = xalloc(&c->f, &c->a, n + 1);
    memcpy(s, tmp, n);
    s[n] = '\0';
    return (value){.t = V_UNDEF, .u.s = {s, n}};
}

static str sdup(rctx *c, const char *p, size_t n)
{
    char *s = xalloc(&c->f, &c->a, n + 1);
    if (n) memcpy(s, p, n);
    s[n] = '\0';
    return (str){s, n};
}

static list *new_list(rctx *c)
{
    list *l = xalloc(&c->f, &c->a, sizeof *l);
    memset(l, 0, sizeof *l);
    return l;
}

static void list_push(rctx *c, list *l, value v)
{
    grow(&c->f, &c->a, (void **)&l->v, &l->cap, l->n + 1, sizeof *l->v);
    l->v[l->n++] = v;
}

static value vlist(list *l) { return (value){.t = V_LIST, .u.l = l}; }

static dict *new_dict(rctx *c)
{
    dict *d = xalloc(&c->f, &c->a, sizeof *d);
    memset(d, 0, sizeof *d);
    return d;
}

static value *dict_get(const dict *d, str k)
{
    for (size_t i = 0; i < d->n; i++)
        if (str_same(d->k[i], k)) return &d->v[i];
    return NULL;
}

static void dict_set(rctx *c, dict *d, str k, value v)
{
    value *old = dict_get(d, k);
    if (old) {
        *old = v;
        return;
    }
    size_t kc = d->cap;
    grow(&c->f, &c->a, (void **)&d->k, &kc, d->n + 1, sizeof *d->k);
    grow(&c->f, &c->a, (void **)&d->v, &d->cap, d->n + 1, sizeof *d->v);
    d->k[d->n] = k;
    d->v[d->n++] = v;
}

static void dict_set_c(rctx *c, dict *d, const char *k, value v) { dict_set(c, d, (str){k, strlen(k)}, v); }

static frame *new_frame(rctx *c, frame *parent)
{
    frame *f = xalloc(&c->f, &c->a, sizeof *f);
    memset(f, 0, sizeof *f);
    f->parent = parent;
    return f;
}

static value lookup(frame *f, str name)
{
    for (; f; f = f->parent) {
        value *v = dict_get(&f->vars, name);
        if (v) return *v;
    }
    return (value){.t = V_UNDEF};
}

static const char *type_name(value v)
{
    static const char *const names[] = {"Undefined", "NoneType", "bool", "int", "float", "str", "list",
                                        "dict", "Namespace", "Macro", "caller", "function", "method"};
    return names[v.t];
}

static int is_num(value v) { return v.t == V_BOOL || v.t == V_INT || v.t == V_FLOAT; }
static double num_f(value v) { return v.t == V_FLOAT ? v.u.f : (double)v.u.i; }

static int truthy(value v)
{
    switch (v.t) {
    case V_UNDEF: case V_NONE: return 0;
    case V_BOOL: case V_INT: return v.u.i != 0;
    case V_FLOAT: return v.u.f != 0.0;
    case V_STR: return v.u.s.n != 0;
    case V_LIST: return v.u.l->n != 0;
    case V_DICT: return v.u.d->n != 0;
    default: return 1;
    }
}

static void step(rctx *c, int line)
{
    if (++c->steps > c->o.max_steps)
        fail(&c->f, HONE_ERANGE, line, "the template ran more than %lld steps", (long long)c->o.max_steps);
}

static _Noreturn void fail_undefined(rctx *c, value v, int line)
{
    FAIL(c, line, "%.*s", (int)v.u.s.n, v.u.s.p);
}

/* ------------------------------------------------------------------ printing: str(), repr(), tojson */

/* Python's repr(float) (also json.dumps' spelling of finite floats). */
static void put_float(rctx *c, buf *b, double d, int json)
{
    if (isnan(d)) { bputs(c, b, json ? "NaN" : "nan"); return; }
    if (isinf(d)) { bputs(c, b, d < 0 ? (json ? "-Infinity" : "-inf") : (json ? "Infinity" : "inf")); return; }
    char tmp[48];
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*e", prec - 1, d);
        if (strtod(tmp, NULL) == d) break;
    }
    int neg = tmp[0] == '-';
    const char *q = tmp + neg;
    char digits[24];
    int nd = 0;
    const char *e = strchr(q, 'e');
    for (const char *x = q; x < e; x++)
        if (*x != '.') digits[nd++] = *x;
    int ex = atoi(e + 1);
    if (neg) bputc(c, b, '-');
    if (ex >= -4 && ex < 16) {
        if (ex >= 0) {
            for (int i = 0; i <= ex; i++) bputc(c, b, i < nd ? digits[i] : '0');
            bputc(c, b, '.');
            if (nd > ex + 1) bput(c, b, digits + ex + 1, (size_t)(nd - ex - 1));
            else bputc(c, b, '0');
        } else {
            bputs(c, b, "0.");
            for (int i = 0; i < -ex - 1; i++) bputc(c, b, '0');
            bput(c, b, digits, (size_t)nd);
        }
    } else {
        bputc(c, b, digits[0]);
        if (nd > 1) {
            bputc(c, b, '.');
            bput(c, b, digits + 1, (size_t)(nd - 1));
        }
        bprintf(c, b, "e%c%02d", ex < 0 ? '-' : '+', ex < 0 ? -ex : ex);
    }
}

static int py_unprintable(unsigned cp)
{
    return cp < 0x20 || (cp >= 0x7F && cp <= 0xA0) || cp == 0xAD || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200F) ||
           (cp >= 0x2028 && cp <= 0x202F) || (cp >= 0x205F && cp <= 0x2064) || cp == 0x3000 || cp == 0xFEFF ||
           (cp >= 0xD800 && cp <= 0xDFFF);
}

static void repr_str(rctx *c, buf *b, str s)
{
    int sq = memchr(s.p, '\'', s.n) != NULL, dq = memchr(s.p, '"', s.n) != NULL;
    char q = sq && !dq ? '"' : '\'';
    bputc(c, b, q);
    for (size_t i = 0; i < s.n;) {
        size_t k = cp_len((const unsigned char *)s.p + i, s.n - i);
        unsigned cp = cp_decode((const unsigned char *)s.p + i, k);
        if (cp == (unsigned)q || cp == '\\') { bputc(c, b, '\\'); bputc(c, b, (char)cp); }
        else if (cp == '\n') bputs(c, b, "\\n");
        else if (cp == '\r') bputs(c, b, "\\r");
        else if (cp == '\t') bputs(c, b, "\\t");
        else if (py_unprintable(cp)) bprintf(c, b, cp < 0x100 ? "\\x%02x" : "\\u%04x", cp);
        else bput(c, b, s.p + i, k);
        i += k;
    }
    bputc(c, b, q);
}

static void put_value(rctx *c, buf *b, value v, int repr, int depth);

static void put_items(rctx *c, buf *b, value v, int depth)
{
    if (v.t == V_LIST) {
        bputc(c, b, v.u.l->tuple ? '(' : '[');
        for (size_t i = 0; i < v.u.l->n; i++) {
            if (i) bputs(c, b, ", ");
            put_value(c, b, v.u.l->v[i], 1, depth + 1);
        }
        if (v.u.l->tuple && v.u.l->n == 1) bputc(c, b, ',');
        bputc(c, b, v.u.l->tuple ? ')' : ']');
    } else {
        bputc(c, b, '{');
        for (size_t i = 0; i < v.u.d->n; i++) {
            if (i) bputs(c, b, ", ");
            repr_str(c, b, v.u.d->k[i]);
            bputs(c, b, ": ");
            put_value(c, b, v.u.d->v[i], 1, depth + 1);
        }
        bputc(c, b, '}');
    }
}

/* Python's str(v) (repr 0) or repr(v) (repr 1). */
static void put_value(rctx *c, buf *b, value v, int repr, int depth)
{
    if (depth > MAX_VALUE_DEPTH) fail(&c->f, HONE_ERANGE, 0, "a value nested deeper than %d", MAX_VALUE_DEPTH);
    switch (v.t) {
    case V_UNDEF: if (repr) bputs(c, b, "Undefined"); break;
    case V_NONE: bputs(c, b, "None"); break;
    case V_BOOL: bputs(c, b, v.u.i ? "True" : "False"); break;
    case V_INT: bprintf(c, b, "%lld", (long long)v.u.i); break;
    case V_FLOAT: put_float(c, b, v.u.f, 0); break;
    case V_STR: if (repr) repr_str(c, b, v.u.s); else bput(c, b, v.u.s.p, v.u.s.n); break;
    case V_LIST: case V_DICT: put_items(c, b, v, depth); break;
    case V_NS:
        bputs(c, b, "<Namespace ");
        put_items(c, b, (value){.t = V_DICT, .u.d = v.u.d}, depth);
        bputc(c, b, '>');
        break;
    case V_MACRO: bprintf(c, b, "<Macro '%.*s'>", (int)v.u.mac->name.n, v.u.mac->name.p); break;
    default: bprintf(c, b, "<%s>", type_name(v)); break;
    }
}

static str to_string(rctx *c, value v)
{
    if (v.t == V_STR) return v.u.s;
    buf b = {0};
    put_value(c, &b, v, 0, 0);
    return buf_str(&b);
}

static void json_str(rctx *c, buf *b, str s)
{
    bputc(c, b, '"');
    size_t run = 0;
    for (size_t i = 0; i < s.n; i++) {
        unsigned char ch = (unsigned char)s.p[i];
        if (ch >= 0x20 && ch != '"' && ch != '\\') continue;
        bput(c, b, s.p + run, i - run);
        run = i + 1;
        switch (ch) {
        case '"': bputs(c, b, "\\\""); break;
        case '\\': bputs(c, b, "\\\\"); break;
        case '\n': bputs(c, b, "\\n"); break;
        case '\r': bputs(c, b, "\\r"); break;
        case '\t': bputs(c, b, "\\t"); break;
        case '\b': bputs(c, b, "\\b"); break;
        case '\f': bputs(c, b, "\\f"); break;
        default: bprintf(c, b, "\\u%04x", ch);
        }
    }
    bput(c, b, s.p + run, s.n - run);
    bputc(c, b, '"');
}

static void json_nl(rctx *c, buf *b, int indent, int level)
{
    bputc(c, b, '\n');
    for (int i = 0; i < indent * level; i++) bputc(c, b, ' ');
}

/* json.dumps(v, ensure_ascii=False, indent=indent) (indent < 0: none), as HF's tojson. */
static void put_json(rctx *c, buf *b, value v, int indent, int level, int line)
{
    if (level > MAX_VALUE_DEPTH) fail(&c->f, HONE_ERANGE, line, "a value nested deeper than %d", MAX_VALUE_DEPTH);
    switch (v.t) {
    case V_NONE: bputs(c, b, "null"); return;
    case V_BOOL: bputs(c, b, v.u.i ? "true" : "false"); return;
    case V_INT: bprintf(c, b, "%lld", (long long)v.u.i); return;
    case V_FLOAT: put_float(c, b, v.u.f, 1); return;
    case V_STR: json_str(c, b, v.u.s); return;
    case V_LIST: case V_DICT: {
        int is_list = v.t == V_LIST;
        size_t n = is_list ? v.u.l->n : v.u.d->n;
        bputc(c, b, is_list ? '[' : '{');
        if (!n) { bputc(c, b, is_list ? ']' : '}'); return; }
        for (size_t i = 0; i < n; i++) {
            if (i) bputc(c, b, ',');
            if (indent >= 0) json_nl(c, b, indent, level + 1);
            else if (i) bputc(c, b, ' ');
            if (!is_list) {
                json_str(c, b, v.u.d->k[i]);
                bputs(c, b, ": ");
            }
            put_json(c, b, is_list ? v.u.l->v[i] : v.u.d->v[i], indent, level + 1, line);
        }
        if (indent >= 0) json_nl(c, b, indent, level);
        bputc(c, b, is_list ? ']' : '}');
        return;
    }
    default: FAIL(c, line, "tojson: Object of type %s is not JSON serializable", type_name(v));
    }
}

/* ------------------------------------------------------------------ comparisons */

static int eq(value a, value b, int depth)
{
    if (depth > MAX_VALUE_DEPTH) return 0;
    if (is_num(a) && is_num(b)) {
        if (a.t != V_FLOAT && b.t != V_FLOAT) return a.u.i == b.u.i;
        return num_f(a) == num_f(b);
    }
    if (a.t != b.t) return 0;
    switch (a.t) {
    case V_UNDEF: case V_NONE: return 1;
    case V_STR: return str_same(a.u.s, b.u.s);
    case V_LIST:
        if (a.u.l->n != b.u.l->n) return 0;
        for (size_t i = 0; i < a.u.l->n; i++)
            if (!eq(a.u.l->v[i], b.u.l->v[i], depth + 1)) return 0;
        return 1;
    case V_DICT:
        if (a.u.d->n != b.u.d->n) return 0;
        for (size_t i = 0; i < a.u.d->n; i++) {
            value *o = dict_get(b.u.d, a.u.d->k[i]);
            if (!o || !eq(a.u.d->v[i], *o, depth + 1)) return 0;
        }
        return 1;
    case V_NS: return a.u.d == b.u.d;
    case V_MACRO: return a.u.mac == b.u.mac;
    default: return 0;
    }
}

static int str_cmp(str a, str b)
{
    int r = memcmp(a.p, b.p, a.n < b.n ? a.n : b.n);
    return r ? r : (a.n > b.n) - (a.n < b.n);
}

/* <0, 0, >0 as Python orders a and b; an error where Python raises TypeError. */
static int order(rctx *c, value a, value b, const char *op, int line)
{
    if (is_num(a) && is_num(b)) {
        if (a.t != V_FLOAT && b.t != V_FLOAT) return (a.u.i > b.u.i) - (a.u.i < b.u.i);
        double x = num_f(a), y = num_f(b);
        return (x > y) - (x < y);
    }
    if (a.t == V_STR && b.t == V_STR) return str_cmp(a.u.s, b.u.s);
    if (a.t == V_LIST && b.t == V_LIST) {
        for (size_t i = 0; i < a.u.l->n && i < b.u.l->n; i++)
            if (!eq(a.u.l->v[i], b.u.l->v[i], 0)) return order(c, a.u.l->v[i], b.u.l->v[i], op, line);
        return (a.u.l->n > b.u.l->n) - (a.u.l->n < b.u.l->n);
    }
    if (a.t == V_UNDEF) fail_undefined(c, a, line);
    if (b.t == V_UNDEF) fail_undefined(c, b, line);
    FAIL(c, line, "'%s' not supported between instances of '%s' and '%s'", op, type_name(a), type_name(b));
}

static size_t find_bytes(str h, str nd, size_t from)
{
    if (nd.n == 0) return from <= h.n ? from : (size_t)-1;
    for (size_t i = from; i + nd.n <= h.n; i++)
        if (h.p[i] == nd.p[0] && !memcmp(h.p + i, nd.p, nd.n)) return i;
    return (size_t)-1;
}

static size_t rfind_bytes(str h, str nd, size_t end)
{
    if (nd.n > end) return (size_t)-1;
    for (size_t i = end - nd.n + 1; i-- > 0;)
        if (!memcmp(h.p + i, nd.p, nd.n)) return i;
    return (size_t)-1;
}

static int contains(rctx *c, value hay, value item, int line)
{
    switch (hay.t) {
    case V_STR:
        if (item.t != V_STR) {
            if (item.t == V_UNDEF) fail_undefined(c, item, line);
            FAIL(c, line, "'in <string>' requires string as left operand, not %s", type_name(item));
        }
        return find_bytes(hay.u.s, item.u.s, 0) != (size_t)-1;
    case V_LIST:
        for (size_t i = 0; i < hay.u.l->n; i++)
            if (eq(hay.u.l->v[i], item, 0)) return 1;
        return 0;
    case V_DICT: return item.t == V_STR && dict_get(hay.u.d, item.u.s) != NULL;
    case V_UNDEF: return 0;
    default: FAIL(c, line, "argument of type '%s' is not iterable", type_name(hay));
    }
}

/* ------------------------------------------------------------------ attributes, items, slices */

static const char *const STR_METHODS[] = {"startswith", "endswith", "split", "rsplit", "strip", "lstrip",
                                          "rstrip", "upper", "lower", "title", "capitalize", "replace",
                                          "find", "rfind", "count", "join", "splitlines", "format",
                                          "isdigit", "isalpha", "isspace", "islower", "isupper", NULL};
static const char *const DICT_METHODS[] = {"items", "keys", "values", "get", "copy", "update", "pop",
                                           "setdefault", "clear", "popitem", NULL};
static const char *const LIST_METHODS[] = {"append", "extend", "insert", "pop", "remove", "clear", "sort",
                                           "reverse", "index", "count", "copy", NULL};

static value vmethod(rctx *c, value self, str name)
{
    method *m = xalloc(&c->f, &c->a, sizeof *m);
    m->self = self;
    m->name = name;
    return (value){.t = V_METHOD, .u.m = m};
}

static value get_attr(rctx *c, value v, str name, int line)
{
    switch (v.t) {
    case V_UNDEF: fail_undefined(c, v, line);
    case V_DICT:
        if (in_table(DICT_METHODS, name)) return vmethod(c, v, name);
        /* fall through */
    case V_NS: {
        value *x = dict_get(v.u.d, name);
        if (x) return *x;
        break;
    }
    case V_STR:
        if (in_table(STR_METHODS, name)) return vmethod(c, v, name);
        break;
    case V_LIST:
        if (in_table(LIST_METHODS, name)) return vmethod(c, v, name);
        break;
    default: break;
    }
    return vundef_fmt(c, "'%s object' has no attribute '%.*s'", v.t == V_DICT ? "dict" : type_name(v), (int)name.n,
                      name.p);
}

/* Byte offset of code point idx of s (idx <= count). */
static size_t cp_offset(str s, size_t idx)
{
    size_t i = 0;
    while (idx-- > 0 && i < s.n) i += cp_len((const unsigned char *)s.p + i, s.n - i);
    return i;
}

static value get_item(rctx *c, value v, value key, int line)
{
    if (v.t == V_UNDEF) fail_undefined(c, v, line);
    if (key.t == V_UNDEF) return vundef_fmt(c, "%s object has no element Undefined", type_name(v));
    if ((v.t == V_DICT || v.t == V_NS) && key.t == V_STR) {
        value *x = dict_get(v.u.d, key.u.s);
        if (x) return *x;
        return get_attr(c, v, key.u.s, line);
    }
    if ((v.t == V_LIST || v.t == V_STR) && (key.t == V_INT || key.t == V_BOOL)) {
        int64_t n = v.t == V_LIST ? (int64_t)v.u.l->n : (int64_t)cp_count(v.u.s), i = key.u.i;
        if (i < 0) i += n;
        if (i < 0 || i >= n) return vundef_fmt(c, "%s object has no element %lld", type_name(v), (long long)key.u.i);
        if (v.t == V_LIST) return v.u.l->v[i];
        size_t o = cp_offset(v.u.s, (size_t)i);
        return vstr((str){v.u.s.p + o, cp_len((const unsigned char *)v.u.s.p + o, v.u.s.n - o)});
    }
    if (key.t == V_STR) return get_attr(c, v, key.u.s, line);
    return vundef_fmt(c, "%s object has no element", type_name(v));
}

static int64_t slice_bound(rctx *c, value v, int64_t dflt, int64_t n, int64_t lo, int64_t hi, int line)
{
    if (v.t == V_NONE || v.t == V_UNDEF) return dflt;
    if (v.t != V_INT && v.t != V_BOOL) FAIL(c, line, "slice indices must be integers or None, not %s", type_name(v));
    int64_t i = v.u.i;
    if (i < 0) {
        i += n;
        if (i < lo) i = lo;
    } else if (i > hi) {
        i = hi;
    }
    return i;
}

static value do_slice(rctx *c, value v, value a, value b, value s, int line)
{
    if (v.t == V_UNDEF) fail_undefined(c, v, line);
    if (v.t != V_LIST && v.t != V_STR) FAIL(c, line, "'%s' object is not subscriptable", type_name(v));
    int64_t stepv = 1;
    if (s.t != V_NONE && s.t != V_UNDEF) {
        if (s.t != V_INT) FAIL(c, line, "slice indices must be integers or None, not %s", type_name(s));
        stepv = s.u.i;
        if (stepv == 0) FAIL(c, line, "slice step cannot be zero");
    }
    int is_str = v.t == V_STR;
    int64_t n = is_str ? (int64_t)cp_count(v.u.s) : (int64_t)v.u.l->n;
    int64_t lo = stepv < 0 ? -1 : 0, hi = stepv < 0 ? n - 1 : n;
    int64_t start = slice_bound(c, a, stepv < 0 ? hi : lo, n, lo, hi, line);
    int64_t stop = slice_bound(c, b, stepv < 0 ? lo : hi, n, lo, hi, line);
    if (is_str && stepv == 1) {
        if (stop < start) stop = start;
        size_t o0 = cp_offset(v.u.s, (size_t)start), o1 = cp_offset(v.u.s, (size_t)stop);
        return vstr((str){v.u.s.p + o0, o1 - o0});
    }
    size_t *offs = NULL;
    if (is_str) { /* code point offsets, then pick */
        offs = xalloc(&c->f, &c->a, (size_t)(n + 1) * sizeof *offs);
        size_t o = 0;
        for (int64_t i = 0; i <= n; i++) {
            offs[i] = o;
            if (i < n) o += cp_len((const unsigned char *)v.u.s.p + o, v.u.s.n - o);
        }
    }
    list *l = is_str ? NULL : new_list(c);
    buf sb = {0};
    for (int64_t i = start; stepv > 0 ? i < stop : i > stop; i += stepv) {
        if (is_str) bput(c, &sb, v.u.s.p + offs[i], offs[i + 1] - offs[i]);
        else list_push(c, l, v.u.l->v[i]);
    }
    return is_str ? vstr(buf_str(&sb)) : vlist(l);
}

/* The items a for loop (or list()) walks: list items, dict keys, string code points. */
static list *iter_list(rctx *c, value v, int line)
{
    switch (v.t) {
    case V_LIST: return v.u.l;
    case V_UNDEF: return new_list(c);
    case V_DICT: {
        list *l = new_list(c);
        for (size_t i = 0; i < v.u.d->n; i++) list_push(c, l, vstr(v.u.d->k[i]));
        return l;
    }
    case V_STR: {
        list *l = new_list(c);
        for (size_t i = 0; i < v.u.s.n;) {
            size_t k = cp_len((const unsigned char *)v.u.s.p + i, v.u.s.n - i);
            list_push(c, l, vstr((str){v.u.s.p + i, k}));
            i += k;
        }
        return l;
    }
    default: FAIL(c, line, "'%s' object is not iterable", type_name(v));
    }
}

static value dict_items(rctx *c, dict *d)
{
    list *l = new_list(c);
    for (size_t i = 0; i < d->n; i++) {
        list *pair = new_list(c);
        pair->tuple = 1;
        list_push(c, pair, vstr(d->k[i]));
        list_push(c, pair, d->v[i]);
        list_push(c, l, vlist(pair));
    }
    return vlist(l);
}

static int64_t len_of(rctx *c, value v, int line)
{
    switch (v.t) {
    case V_STR: return (int64_t)cp_count(v.u.s);
    case V_LIST: return (int64_t)v.u.l->n;
    case V_DICT: return (int64_t)v.u.d->n;
    case V_UNDEF: return 0;
    default: FAIL(c, line, "object of type '%s' has no len()", type_name(v));
    }
}

/* ------------------------------------------------------------------ arguments */

/* The argument at position pos (counting positional ones) or given as name=, or NULL. */
static value *arg(args *a, int pos, const char *name)
{
    int k = 0;
    for (int i = 0; i < a->n; i++) {
        if (a->kw[i].n) {
            if (name && str_eq(a->kw[i], name)) return &a->v[i];
        } else if (k++ == pos) {
            return &a->v[i];
        }
    }
    return NULL;
}

static int n_positional(args *a)
{
    int k = 0;
    for (int i = 0; i < a->n; i++) k += a->kw[i].n == 0;
    return k;
}

/* Rejects keywords outside allowed (NULL-terminated) and more than max_pos positionals. */
static void check_args(rctx *c, args *a, int max_pos, const char *const *allowed, const char *what)
{
    if (n_positional(a) > max_pos) FAIL(c, a->line, "%s takes at most %d positional arguments", what, max_pos);
    for (int i = 0; i < a->n; i++)
        if (a->kw[i].n && !(allowed && in_table(allowed, a->kw[i])))
            FAIL(c, a->line, "%s: unsupported argument '%.*s'", what, (int)a->kw[i].n, a->kw[i].p);
}

static str arg_str(rctx *c, args *a, int pos, const char *name, const char *what)
{
    value *v = arg(a, pos, name);
    if (!v) FAIL(c, a->line, "%s needs a string argument", what);
    if (v->t != V_STR) FAIL(c, a->line, "%s: expected a string argument, got %s", what, type_name(*v));
    return v->u.s;
}

static int64_t arg_int(rctx *c, args *a, int pos, const char *name, int64_t dflt, const char *what)
{
    value *v = arg(a, pos, name);
    if (!v || v->t == V_NONE) return dflt;
    if (v->t != V_INT && v->t != V_BOOL) FAIL(c, a->line, "%s: expected an integer, got %s", what, type_name(*v));
    return v->u.i;
}

/* ------------------------------------------------------------------ string methods */

static value str_case(rctx *c, str s, int mode) /* 0 upper, 1 lower, 2 capitalize, 3 title */
{
    char *o = xalloc(&c->f, &c->a, s.n + 1);
    int prev_cased = 0;
    for (size_t i = 0; i < s.n; i++) {
        char ch = s.p[i];
        int up = ch >= 'A' && ch <= 'Z', lo = ch >= 'a' && ch <= 'z';
        int to_upper = mode == 0 || (mode == 2 && i == 0) || (mode == 3 && !prev_cased);
        if (to_upper && lo) ch = (char)(ch - 32);
        else if (!to_upper && up) ch = (char)(ch + 32);
        o[i] = ch;
        prev_cased = up || lo;
    }
    o[s.n] = '\0';
    return vstr((str){o, s.n});
}

static value str_replace(rctx *c, str s, str old, str nw, int64_t count, int line)
{
    if (!old.n) FAIL(c, line, "unsupported replace() of an empty string");
    buf b = {0};
    size_t i = 0, at;
    while (count != 0 && (at = find_bytes(s, old, i)) != (size_t)-1) {
        bput(c, &b, s.p + i, at - i);
        bput(c, &b, nw.p, nw.n);
        i = at + old.n;
        if (count > 0) count--;
    }
    bput(c, &b, s.p + i, s.n - i);
    return vstr(buf_str(&b));
}

/* str.split / str.rsplit (sep NULL: runs of whitespace). */
static value str_split(rctx *c, str s, const str *sep, int64_t maxsplit, int right, int line)
{
    list *l = new_list(c);
    if (sep && !sep->n) FAIL(c, line, "split(): empty separator");
    if (!sep) {
        str t = py_strip(s, right ? 2 : 1, NULL);
        if (!right) {
            size_t i = (size_t)(t.p - s.p);
            while (i < s.n) {
                if (maxsplit >= 0 && (int64_t)l->n == maxsplit) {
                    list_push(c, l, vstr(py_strip((str){s.p + i, s.n - i}, 2, NULL)));
                    return vlist(l);
                }
                size_t j = i, k;
                while (j < s.n && !py_space_at((const unsigned char *)s.p + j, s.n - j)) j += cp_len((const unsigned char *)s.p + j, s.n - j);
                list_push(c, l, vstr((str){s.p + i, j - i}));
                while (j < s.n && (k = py_space_at((const unsigned char *)s.p + j, s.n - j)) > 0) j += k;
                i = j;
            }
            return vlist(l);
        }
        if (maxsplit < 0) return str_split(c, s, NULL, -1, 0, line);
        FAIL(c, line, "unsupported rsplit() on whitespace with maxsplit");
    }
    if (!right) {
        size_t i = 0, at;
        while ((maxsplit < 0 || (int64_t)l->n < maxsplit) && (at = find_bytes(s, *sep, i)) != (size_t)-1) {
            list_push(c, l, vstr((str){s.p + i, at - i}));
            i = at + sep->n;
        }
        list_push(c, l, vstr((str){s.p + i, s.n - i}));
        return vlist(l);
    }
    /* from the right: collect pieces in reverse, then flip */
    size_t end = s.n, at;
    while ((maxsplit < 0 || (int64_t)l->n < maxsplit) && (at = rfind_bytes(s, *sep, end)) != (size_t)-1) {
        list_push(c, l, vstr((str){s.p + at + sep->n, end - at - sep->n}));
        end = at;
    }
    list_push(c, l, vstr((str){s.p, end}));
    for (size_t i = 0; i < l->n / 2; i++) {
        value t = l->v[i];
        l->v[i] = l->v[l->n - 1 - i];
        l->v[l->n - 1 - i] = t;
    }
    return vlist(l);
}

static int affix_match(rctx *c, str s, value affix, int end, int line)
{
    if (affix.t == V_LIST) {
        for (size_t i = 0; i < affix.u.l->n; i++)
            if (affix_match(c, s, affix.u.l->v[i], end, line)) return 1;
        return 0;
    }
    if (affix.t != V_STR) FAIL(c, line, "%s arg must be str or a tuple of str, not %s", end ? "endswith" : "startswith", type_name(affix));
    str a = affix.u.s;
    return a.n <= s.n && !memcmp(end ? s.p + s.n - a.n : s.p, a.p, a.n);
}

static value call_method(rctx *c, method *m, args *a)
{
    int line = a->line;
    str nm = m->name;
    char what[48];
    snprintf(what, sizeof what, "%.*s()", (int)nm.n, nm.p);
    if (m->self.t == V_STR) {
        str s = m->self.u.s;
        if (str_eq(nm, "startswith") || str_eq(nm, "endswith")) {
            check_args(c, a, 1, NULL, what);
            value *x = arg(a, 0, NULL);
            if (!x) FAIL(c, line, "%s needs an argument", what);
            return vbool(affix_match(c, s, *x, str_eq(nm, "endswith"), line));
        }
        if (str_eq(nm, "split") || str_eq(nm, "rsplit")) {
            static const char *const kw[] = {"sep", "maxsplit", NULL};
            check_args(c, a, 2, kw, what);
            value *sep = arg(a, 0, "sep");
            str sp = {0};
            if (sep && sep->t != V_NONE) {
                if (sep->t != V_STR) FAIL(c, line, "%s: sep must be a string", what);
                sp = sep->u.s;
            }
            return str_split(c, s, sep && sep->t != V_NONE ? &sp : NULL, arg_int(c, a, 1, "maxsplit", -1, what),
                             str_eq(nm, "rsplit"), line);
        }
        if (str_eq(nm, "strip") || str_eq(nm, "lstrip") || str_eq(nm, "rstrip")) {
            check_args(c, a, 1, NULL, what);
            value *ch = arg(a, 0, NULL);
            if (ch && ch->t != V_NONE && ch->t != V_STR) FAIL(c, line, "%s arg must be None or str", what);
            str cs = ch && ch->t == V_STR ? ch->u.s : (str){0};
            int which = nm.p[0] == 'l' ? 1 : nm.p[0] == 'r' ? 2 : 3;
            return vstr(py_strip(s, which, ch && ch->t == V_STR ? &cs : NULL));
        }
        if (str_eq(nm, "upper") || str_eq(nm, "lower") || str_eq(nm, "capitalize") || str_eq(nm, "title")) {
            check_args(c, a, 0, NULL, what);
            return str_case(c, s, str_eq(nm, "upper") ? 0 : str_eq(nm, "lower") ? 1 : str_eq(nm, "capitalize") ? 2 : 3);
        }
        if (str_eq(nm, "replace")) {
            check_args(c, a, 3, NULL, what);
            return str_replace(c, s, arg_str(c, a, 0, NULL, what), arg_str(c, a, 1, NULL, what),
                               arg_int(c, a, 2, NULL, -1, what), line);
        }
        if (str_eq(nm, "find") || str_eq(nm, "rfind") || str_eq(nm, "count")) {
            check_args(c, a, 1, NULL, what);
            str sub = arg_str(c, a, 0, NULL, what);
            if (str_eq(nm, "count")) {
                int64_t k = 0;
                if (!sub.n) return vint((int64_t)cp_count(s) + 1);
                for (size_t i = 0, at; (at = find_bytes(s, sub, i)) != (size_t)-1; i = at + sub.n) k++;
                return vint(k);
            }
            size_t at = str_eq(nm, "find") ? find_bytes(s, sub, 0) : rfind_bytes(s, sub, s.n);
            return vint(at == (size_t)-1 ? -1 : (int64_t)cp_count((str){s.p, at}));
        }
        if (str_eq(nm, "join")) {
            check_args(c, a, 1, NULL, what);
            value *x = arg(a, 0, NULL);
            if (!x) FAIL(c, line, "join() needs an argument");
            list *l = iter_list(c, *x, line);
            buf b = {0};
            for (size_t i = 0; i < l->n; i++) {
                if (l->v[i].t != V_STR) FAIL(c, line, "sequence item %zu: expected str instance, %s found", i, type_name(l->v[i]));
                if (i) bput(c, &b, s.p, s.n);
                bput(c, &b, l->v[i].u.s.p, l->v[i].u.s.n);
            }
            return vstr(buf_str(&b));
        }
        if (str_eq(nm, "splitlines")) {
            check_args(c, a, 0, NULL, what);
            list *l = new_list(c);
            size_t i = 0;
            while (i < s.n) {
                size_t j = i;
                while (j < s.n && s.p[j] != '\n' && s.p[j] != '\r') j++;
                list_push(c, l, vstr((str){s.p + i, j - i}));
                if (j < s.n && s.p[j] == '\r' && j + 1 < s.n && s.p[j + 1] == '\n') j++;
                i = j + 1;
            }
            return vlist(l);
        }
    } else if (m->self.t == V_DICT) {
        dict *d = m->self.u.d;
        if (str_eq(nm, "items")) { check_args(c, a, 0, NULL, what); return dict_items(c, d); }
        if (str_eq(nm, "keys") || str_eq(nm, "values")) {
            check_args(c, a, 0, NULL, what);
            list *l = new_list(c);
            for (size_t i = 0; i < d->n; i++) list_push(c, l, nm.p[0] == 'k' ? vstr(d->k[i]) : d->v[i]);
            return vlist(l);
        }
        if (str_eq(nm, "get")) {
            check_args(c, a, 2, NULL, what);
            value *k = arg(a, 0, NULL), *dflt = arg(a, 1, NULL);
            if (!k) FAIL(c, line, "get() needs a key");
            value *x = k->t == V_STR ? dict_get(d, k->u.s) : NULL;
            return x ? *x : dflt ? *dflt : vnone();
        }
    }
    FAIL(c, line, "unsupported method %s.%.*s()", type_name(m->self), (int)nm.n, nm.p);
}

/* ------------------------------------------------------------------ tests */

static int apply_test(rctx *c, str name, value v, args *a)
{
    int line = a->line;
    value *x = arg(a, 0, NULL);
#define IS(s) str_eq(name, s)
    if (IS("defined")) return v.t != V_UNDEF;
    if (IS("undefined")) return v.t == V_UNDEF;
    if (IS("none")) return v.t == V_NONE;
    if (IS("boolean")) return v.t == V_BOOL;
    if (IS("true")) return v.t == V_BOOL && v.u.i;
    if (IS("false")) return v.t == V_BOOL && !v.u.i;
    if (IS("integer")) return v.t == V_INT;
    if (IS("float")) return v.t == V_FLOAT;
    if (IS("number")) return is_num(v);
    if (IS("string")) return v.t == V_STR;
    if (IS("mapping")) return v.t == V_DICT;
    if (IS("iterable") || IS("sequence")) return v.t == V_STR || v.t == V_LIST || v.t == V_DICT || v.t == V_UNDEF;
    if (IS("callable")) return v.t == V_MACRO || v.t == V_CALLER || v.t == V_FUNC || v.t == V_METHOD;
    if (IS("lower") || IS("upper")) {
        if (v.t != V_STR) FAIL(c, line, "test '%.*s' needs a string", (int)name.n, name.p);
        int cased = 0;
        for (size_t i = 0; i < v.u.s.n; i++) {
            char ch = v.u.s.p[i];
            if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z')) {
                cased = 1;
                if (IS("lower") ? (ch >= 'A' && ch <= 'Z') : (ch >= 'a' && ch <= 'z')) return 0;
            }
        }
        return cased;
    }
    if (IS("odd") || IS("even") || IS("divisibleby")) {
        if (v.t != V_INT && v.t != V_BOOL) FAIL(c, line, "test '%.*s' needs an integer", (int)name.n, name.p);
        int64_t d = IS("divisibleby") ? arg_int(c, a, 0, NULL, 0, "divisibleby") : 2;
        if (d == 0) FAIL(c, line, "divisibleby 0");
        int64_t r = v.u.i % d;
        return IS("odd") ? r != 0 : r == 0;
    }
    if (!x) FAIL(c, line, "test '%.*s' needs an argument", (int)name.n, name.p);
    if (IS("eq") || IS("equalto") || IS("==")) return eq(v, *x, 0);
    if (IS("ne") || IS("!=")) return !eq(v, *x, 0);
    if (IS("lt") || IS("<")) return order(c, v, *x, "<", line) < 0;
    if (IS("le") || IS("<=")) return order(c, v, *x, "<=", line) <= 0;
    if (IS("gt") || IS(">")) return order(c, v, *x, ">", line) > 0;
    if (IS("ge") || IS(">=")) return order(c, v, *x, ">=", line) >= 0;
    if (IS("in")) return contains(c, *x, v, line);
    if (IS("sameas")) {
        if (v.t != x->t) return 0;
        switch (v.t) {
        case V_NONE: case V_UNDEF: return 1;
        case V_BOOL: case V_INT: return v.u.i == x->u.i;
        case V_FLOAT: return v.u.f == x->u.f;
        case V_STR: return v.u.s.p == x->u.s.p && v.u.s.n == x->u.s.n;
        case V_LIST: return v.u.l == x->u.l;
        default: return v.u.d == x->u.d;
        }
    }
#undef IS
    FAIL(c, line, "unsupported test '%.*s'", (int)name.n, name.p);
}

/* ------------------------------------------------------------------ filters */

/* Dotted attribute path of map / selectattr / join / sort ("function.name", "0"). */
static value attr_path(rctx *c, value v, str path, int line)
{
    size_t i = 0;
    while (i <= path.n) {
        size_t j = i;
        while (j < path.n && path.p[j] != '.') j++;
        str part = {path.p + i, j - i};
        int digits = part.n > 0;
        for (size_t k = 0; k < part.n; k++) digits &= is_digit(part.p[k]);
        value key = digits ? vint(strtoll(part.p, NULL, 10)) : vstr(part);
        if (v.t == V_UNDEF) return v;
        v = get_item(c, v, key, line);
        i = j + 1;
    }
    return v;
}

static value apply_filter(rctx *c, str name, value v, args *a);
static value binop(rctx *c, int op, value x, value y, int line);

static int sort_before(rctx *c, value x, value y, int case_sensitive, int line)
{
    if (!case_sensitive && x.t == V_STR && y.t == V_STR)
        return order(c, str_case(c, x.u.s, 1), str_case(c, y.u.s, 1), "<", line) < 0;
    return order(c, x, y, "<", line) < 0;
}

static value apply_filter(rctx *c, str name, value v, args *a)
{
    int line = a->line;
    char what[48];
    snprintf(what, sizeof what, "filter '%.*s'", (int)name.n, name.p);
#define IS(s) str_eq(name, s)
    if (IS("safe")) { check_args(c, a, 0, NULL, what); return v; }
    if (IS("string")) { check_args(c, a, 0, NULL, what); return vstr(to_string(c, v)); }
    if (IS("trim")) {
        static const char *const kw[] = {"chars", NULL};
        check_args(c, a, 1, kw, what);
        value *ch = arg(a, 0, "chars");
        str cs = ch && ch->t == V_STR ? ch->u.s : (str){0};
        return vstr(py_strip(to_string(c, v), 3, ch && ch->t == V_STR ? &cs : NULL));
    }
    if (IS("upper") || IS("lower") || IS("capitalize") || IS("title")) {
        check_args(c, a, 0, NULL, what);
        return str_case(c, to_string(c, v), IS("upper") ? 0 : IS("lower") ? 1 : IS("capitalize") ? 2 : 3);
    }
    if (IS("length") || IS("count")) { check_args(c, a, 0, NULL, what); return vint(len_of(c, v, line)); }
    if (IS("tojson")) {
        static const char *const kw[] = {"indent", NULL};
        check_args(c, a, 1, kw, what);
        buf b = {0};
        put_json(c, &b, v, (int)arg_int(c, a, 0, "indent", -1, what), 0, line);
        return vstr(buf_str(&b));
    }
    if (IS("default") || IS("d")) {
        static const char *const kw[] = {"default_value", "boolean", NULL};
        check_args(c, a, 2, kw, what);
        value *dv = arg(a, 0, "default_value"), *boolean = arg(a, 1, "boolean");
        if (v.t == V_UNDEF || (boolean && truthy(*boolean) && !truthy(v))) return dv ? *dv : vstr((str){"", 0});
        return v;
    }
    if (IS("first") || IS("last")) {
        check_args(c, a, 0, NULL, what);
        list *l = iter_list(c, v, line);
        if (!l->n) return vundef("No first item, sequence was empty.");
        return IS("first") ? l->v[0] : l->v[l->n - 1];
    }
    if (IS("items")) {
        check_args(c, a, 0, NULL, what);
        if (v.t == V_UNDEF) return vlist(new_list(c));
        if (v.t != V_DICT) FAIL(c, line, "can only get item pairs from a mapping, not %s", type_name(v));
        return dict_items(c, v.u.d);
    }
    if (IS("list")) {
        check_args(c, a, 0, NULL, what);
        list *src = iter_list(c, v, line), *l = new_list(c);
        for (size_t i = 0; i < src->n; i++) list_push(c, l, src->v[i]);
        return vlist(l);
    }
    if (IS("join")) {
        static const char *const kw[] = {"d", "attribute", NULL};
        check_args(c, a, 2, kw, what);
        value *sep = arg(a, 0, "d"), *attr = arg(a, 1, "attribute");
        str sp = sep ? to_string(c, *sep) : (str){"", 0};
        list *l = iter_list(c, v, line);
        buf b = {0};
        for (size_t i = 0; i < l->n; i++) {
            if (i) bput(c, &b, sp.p, sp.n);
            value x = attr ? attr_path(c, l->v[i], to_string(c, *attr), line) : l->v[i];
            put_value(c, &b, x, 0, 0);
        }
        return vstr(buf_str(&b));
    }
    if (IS("replace")) {
        check_args(c, a, 3, NULL, what);
        return str_replace(c, to_string(c, v), to_string(c, *(arg(a, 0, NULL) ? arg(a, 0, NULL) : &v)),
                           arg(a, 1, NULL) ? to_string(c, *arg(a, 1, NULL)) : (str){"", 0},
                           arg_int(c, a, 2, NULL, -1, what), line);
    }
    if (IS("selectattr") || IS("rejectattr") || IS("select") || IS("reject")) {
        int by_attr = IS("selectattr") || IS("rejectattr"), rej = name.p[0] == 'r';
        check_args(c, a, a->n, NULL, what);
        int t0 = by_attr ? 1 : 0;
        str attr = by_attr ? arg_str(c, a, 0, NULL, what) : (str){0};
        value *test = arg(a, t0, NULL);
        if (test && test->t != V_STR) FAIL(c, line, "%s: the test name must be a string", what);
        if (test && !in_table(TESTS, test->u.s))
            FAIL(c, line, "unsupported test '%.*s'", (int)test->u.s.n, test->u.s.p);
        args ta = {.v = a->v + t0 + 1, .kw = a->kw + t0 + 1, .n = test ? a->n - t0 - 1 : 0, .line = line};
        list *src = iter_list(c, v, line), *l = new_list(c);
        for (size_t i = 0; i < src->n; i++) {
            value x = by_attr ? attr_path(c, src->v[i], attr, line) : src->v[i];
            int r = test ? apply_test(c, test->u.s, x, &ta) : truthy(x);
            if (r != rej) list_push(c, l, src->v[i]);
        }
        return vlist(l);
    }
    if (IS("map")) {
        value *attr = arg(a, -1, "attribute");
        list *src = iter_list(c, v, line), *l = new_list(c);
        if (attr) {
            static const char *const kw[] = {"attribute", "default", NULL};
            check_args(c, a, 0, kw, what);
            value *dflt = arg(a, -1, "default");
            for (size_t i = 0; i < src->n; i++) {
                value x = attr_path(c, src->v[i], to_string(c, *attr), line);
                list_push(c, l, x.t == V_UNDEF && dflt ? *dflt : x);
            }
            return vlist(l);
        }
        str fname = arg_str(c, a, 0, NULL, what);
        if (!in_table(FILTERS, fname)) FAIL(c, line, "unsupported filter '%.*s'", (int)fname.n, fname.p);
        args fa = {.v = a->v + 1, .kw = a->kw + 1, .n = a->n - 1, .line = line};
        for (size_t i = 0; i < src->n; i++) list_push(c, l, apply_filter(c, fname, src->v[i], &fa));
        return vlist(l);
    }
    if (IS("abs")) {
        check_args(c, a, 0, NULL, what);
        if (v.t == V_FLOAT) return vfloat(fabs(v.u.f));
        if (v.t == V_INT || v.t == V_BOOL) {
            if (v.u.i == INT64_MIN) FAIL(c, line, "integer overflow");
            return vint(v.u.i < 0 ? -v.u.i : v.u.i);
        }
        FAIL(c, line, "bad operand type for abs(): '%s'", type_name(v));
    }
    if (IS("int") || IS("float")) {
        static const char *const kw[] = {"default", NULL};
        check_args(c, a, 1, kw, what);
        value *dv = arg(a, 0, "default");
        int to_int = IS("int");
        if (v.t == V_INT || v.t == V_BOOL) return to_int ? vint(v.u.i) : vfloat((double)v.u.i);
        if (v.t == V_FLOAT) {
            if (!to_int) return v;
            if (!(fabs(v.u.f) < 9.2e18)) FAIL(c, line, "int(): %g out of range", v.u.f);
            return vint((int64_t)v.u.f);
        }
        if (v.t == V_STR) {
            char tmp[64];
            str s = py_strip(v.u.s, 3, NULL);
            if (s.n && s.n < sizeof tmp) {
                memcpy(tmp, s.p, s.n);
                tmp[s.n] = '\0';
                char *end;
                if (to_int) {
                    long long x = strtoll(tmp, &end, 10);
                    if (!*end) return vint(x);
                    double f = strtod(tmp, &end);
                    if (!*end && fabs(f) < 9.2e18) return vint((int64_t)f);
                } else {
                    double f = strtod(tmp, &end);
                    if (!*end) return vfloat(f);
                }
            }
        }
        return dv ? *dv : to_int ? vint(0) : vfloat(0.0);
    }
    if (IS("reverse")) {
        check_args(c, a, 0, NULL, what);
        if (v.t == V_STR) return do_slice(c, v, vnone(), vnone(), vint(-1), line);
        list *src = iter_list(c, v, line), *l = new_list(c);
        for (size_t i = src->n; i-- > 0;) list_push(c, l, src->v[i]);
        return vlist(l);
    }
    if (IS("sort") || IS("unique")) {
        static const char *const kw[] = {"reverse", "case_sensitive", "attribute", NULL};
        check_args(c, a, IS("sort") ? 3 : 0, kw, what);
        int sort = IS("sort");
        value *rv = sort ? arg(a, 0, "reverse") : NULL, *cs = arg(a, sort ? 1 : 0, "case_sensitive"),
              *attr = arg(a, sort ? 2 : 1, "attribute");
        int reverse = rv && truthy(*rv), case_sensitive = cs && truthy(*cs);
        list *src = iter_list(c, v, line), *l = new_list(c);
        for (size_t i = 0; i < src->n; i++) {
            value x = src->v[i], kx = attr ? attr_path(c, x, to_string(c, *attr), line) : x;
            if (!sort) {
                int dup = 0;
                for (size_t j = 0; j < l->n && !dup; j++) {
                    value ky = attr ? attr_path(c, l->v[j], to_string(c, *attr), line) : l->v[j];
                    dup = case_sensitive || kx.t != V_STR || ky.t != V_STR
                              ? eq(kx, ky, 0)
                              : eq(str_case(c, kx.u.s, 1), str_case(c, ky.u.s, 1), 0);
                }
                if (!dup) list_push(c, l, x);
                continue;
            }
            /* stable insertion sort */
            list_push(c, l, x);
            size_t j = l->n - 1;
            while (j > 0) {
                value ky = attr ? attr_path(c, l->v[j - 1], to_string(c, *attr), line) : l->v[j - 1];
                int before = reverse ? sort_before(c, ky, kx, case_sensitive, line)
                                     : sort_before(c, kx, ky, case_sensitive, line);
                if (!before) break;
                l->v[j] = l->v[j - 1];
                j--;
            }
            l->v[j] = x;
        }
        return vlist(l);
    }
    if (IS("sum")) {
        static const char *const kw[] = {"attribute", "start", NULL};
        check_args(c, a, 2, kw, what);
        value *attr = arg(a, 0, "attribute"), *start = arg(a, 1, "start");
        list *src = iter_list(c, v, line);
        value acc = start ? *start : vint(0);
        if (acc.t == V_STR) FAIL(c, line, "sum() can't sum strings [use ''.join(seq) instead]");
        for (size_t i = 0; i < src->n; i++)
            acc = binop(c, OP_ADD, acc, attr ? attr_path(c, src->v[i], to_string(c, *attr), line) : src->v[i], line);
        return acc;
    }
    if (IS("indent")) {
        static const char *const kw[] = {"width", "first", "blank", NULL};
        check_args(c, a, 3, kw, what);
        value *w = arg(a, 0, "width"), *first = arg(a, 1, "first"), *blank = arg(a, 2, "blank");
        str ind;
        if (w && w->t == V_STR) ind = w->u.s;
        else {
            int64_t n = w ? arg_int(c, a, 0, "width", 4, what) : 4;
            if (n < 0 || n > 1000) FAIL(c, line, "indent width %lld out of range", (long long)n);
            char *sp = xalloc(&c->f, &c->a, (size_t)n + 1);
            memset(sp, ' ', (size_t)n);
            ind = (str){sp, (size_t)n};
        }
        str s = to_string(c, v);
        buf b = {0};
        if (first && truthy(*first)) bput(c, &b, ind.p, ind.n);
        for (size_t i = 0; i < s.n;) {
            size_t j = i;
            while (j < s.n && s.p[j] != '\n') j++;
            if (i > 0 && (j > i || (blank && truthy(*blank)))) bput(c, &b, ind.p, ind.n);
            bput(c, &b, s.p + i, j - i);
            if (j < s.n) bputc(c, &b, '\n');
            i = j + 1;
        }
        return vstr(buf_str(&b));
    }
#undef IS
    FAIL(c, line, "unsupported filter '%.*s'", (int)name.n, name.p);
}

/* ------------------------------------------------------------------ evaluation */

static value eval(rctx *c, frame *f, const node *n);
static void exec_body(rctx *c, frame *f, node *const *body, int n);

static args eval_args(rctx *c, frame *f, const node *n)
{
    args a = {.n = n->nkids, .line = n->line, .kw = n->kw};
    if (n->nkids) {
        a.v = xalloc(&c->f, &c->a, (size_t)n->nkids * sizeof *a.v);
        for (int i = 0; i < n->nkids; i++) a.v[i] = eval(c, f, n->kids[i]);
    }
    if (!a.kw && n->nkids) FAIL(c, n->line, "internal: arguments without keywords");
    return a;
}

/* Renders body in frame fr into a new string (macro bodies, caller(), block set). */
static str render_to_string(rctx *c, frame *fr, node *const *body, int nbody)
{
    buf tmp = {0}, *saved = c->out;
    c->out = &tmp;
    exec_body(c, fr, body, nbody);
    c->out = saved;
    c->ctl = 0;
    return buf_str(&tmp);
}

static value call_macro(rctx *c, const node *m, args *a, value caller_v)
{
    if (++c->depth > c->o.max_depth)
        fail(&c->f, HONE_ERANGE, a->line, "macro calls nested deeper than %d", c->o.max_depth);
    frame *fr = new_frame(c, c->root);
    int pos = 0;
    for (int i = 0; i < a->n; i++) {
        if (!a->kw[i].n) {
            if (pos >= m->nnames)
                FAIL(c, a->line, "macro '%.*s' takes not more than %d argument(s)", (int)m->name.n, m->name.p, m->nnames);
            dict_set(c, &fr->vars, m->names[pos++], a->v[i]);
            continue;
        }
        int k = 0;
        while (k < m->nnames && !str_same(m->names[k], a->kw[i])) k++;
        if (k == m->nnames)
            FAIL(c, a->line, "macro '%.*s' has no parameter '%.*s'", (int)m->name.n, m->name.p, (int)a->kw[i].n, a->kw[i].p);
        dict_set(c, &fr->vars, a->kw[i], a->v[i]);
    }
    for (int k = 0; k < m->nnames; k++)
        if (!dict_get(&fr->vars, m->names[k]))
            dict_set(c, &fr->vars, m->names[k],
                     m->defaults[k] ? eval(c, fr, m->defaults[k])
                                    : vundef_fmt(c, "parameter '%.*s' was not provided", (int)m->names[k].n, m->names[k].p));
    if (caller_v.t == V_CALLER) dict_set_c(c, &fr->vars, "caller", caller_v);
    str s = render_to_string(c, fr, m->body, m->nbody);
    c->depth--;
    return vstr(s);
}

static value call_value(rctx *c, value fn, args *a)
{
    int line = a->line;
    step(c, line);
    switch (fn.t) {
    case V_MACRO: return call_macro(c, fn.u.mac, a, (value){.t = V_UNDEF});
    case V_CALLER: {
        if (a->n) FAIL(c, line, "unsupported caller() with arguments");
        if (++c->depth > c->o.max_depth)
            fail(&c->f, HONE_ERANGE, line, "macro calls nested deeper than %d", c->o.max_depth);
        str s = render_to_string(c, new_frame(c, fn.u.c->scope), fn.u.c->call->body, fn.u.c->call->nbody);
        c->depth--;
        return vstr(s);
    }
    case V_METHOD: return call_method(c, fn.u.m, a);
    case V_UNDEF: fail_undefined(c, fn, line);
    case V_FUNC: break;
    default: FAIL(c, line, "'%s' object is not callable", type_name(fn));
    }
    switch (fn.u.fn) {
    case F_RAISE: {
        value *m = arg(a, 0, NULL);
        str s = m ? to_string(c, *m) : (str){"", 0};
        snprintf(raised_msg, sizeof raised_msg, "%.*s", (int)s.n, s.p);
        raised_set = 1;
        FAIL(c, line, "raise_exception: %s", raised_msg);
    }
    case F_STRFTIME: {
        check_args(c, a, 1, NULL, "strftime_now()");
        str fmt = arg_str(c, a, 0, NULL, "strftime_now()");
        char fz[256], outb[512];
        if (fmt.n >= sizeof fz) FAIL(c, line, "strftime_now(): format too long");
        memcpy(fz, fmt.p, fmt.n);
        fz[fmt.n] = '\0';
        struct tm tmv;
        localtime_r(&c->now, &tmv);
        size_t k = strftime(outb, sizeof outb, fz, &tmv);
        return vstr(sdup(c, outb, k));
    }
    case F_NAMESPACE: case F_DICT: {
        dict *d = new_dict(c);
        for (int i = 0; i < a->n; i++) {
            if (a->kw[i].n) {
                dict_set(c, d, a->kw[i], a->v[i]);
            } else if (a->v[i].t == V_DICT || a->v[i].t == V_NS) {
                for (size_t k = 0; k < a->v[i].u.d->n; k++) dict_set(c, d, a->v[i].u.d->k[k], a->v[i].u.d->v[k]);
            } else {
                FAIL(c, line, "%s() takes a mapping or name=value arguments", fn.u.fn == F_DICT ? "dict" : "namespace");
            }
        }
        return (value){.t = fn.u.fn == F_DICT ? V_DICT : V_NS, .u.d = d};
    }
    case F_RANGE: {
        check_args(c, a, 3, NULL, "range()");
        int np = n_positional(a);
        if (np == 0) FAIL(c, line, "range expected at least 1 argument");
        int64_t start = np >= 2 ? arg_int(c, a, 0, NULL, 0, "range()") : 0;
        int64_t stop = arg_int(c, a, np >= 2 ? 1 : 0, NULL, 0, "range()");
        int64_t st = np >= 3 ? arg_int(c, a, 2, NULL, 1, "range()") : 1;
        if (st == 0) FAIL(c, line, "range() arg 3 must not be zero");
        double count = st > 0 ? ceil(((double)stop - (double)start) / (double)st) : ceil(((double)start - (double)stop) / (double)-st);
        if (count > MAX_RANGE) fail(&c->f, HONE_ERANGE, line, "range too big (the sandbox's limit is %d)", MAX_RANGE);
        list *l = new_list(c);
        for (int64_t i = start; st > 0 ? i < stop : i > stop; i += st) list_push(c, l, vint(i));
        return vlist(l);
    }
    }
    FAIL(c, line, "internal: unknown function");
}

static value repeat(rctx *c, value seq, int64_t times, int line)
{
    if (times < 0) times = 0;
    size_t unit = seq.t == V_STR ? seq.u.s.n : seq.u.l->n * sizeof(value);
    if (unit && (uint64_t)times > c->o.max_output / unit)
        fail(&c->f, HONE_ERANGE, line, "a repeated sequence exceeds %zu bytes", c->o.max_output);
    if (seq.t == V_STR) {
        buf b = {0};
        for (int64_t i = 0; i < times; i++) bput(c, &b, seq.u.s.p, seq.u.s.n);
        return vstr(buf_str(&b));
    }
    list *l = new_list(c);
    for (int64_t i = 0; i < times; i++)
        for (size_t k = 0; k < seq.u.l->n; k++) list_push(c, l, seq.u.l->v[k]);
    return vlist(l);
}

static value binop(rctx *c, int op, value x, value y, int line)
{
    static const char *const names[] = {"+", "-", "*", "/", "//", "%", "**", "~"};
    if (op == OP_CONCAT) {
        str a = to_string(c, x), b = to_string(c, y);
        char *s = xalloc(&c->f, &c->a, a.n + b.n + 1);
        memcpy(s, a.p, a.n);
        memcpy(s + a.n, b.p, b.n);
        s[a.n + b.n] = '\0';
        return vstr((str){s, a.n + b.n});
    }
    if (x.t == V_UNDEF) fail_undefined(c, x, line);
    if (y.t == V_UNDEF) fail_undefined(c, y, line);
    if (op == OP_ADD && ((x.t == V_STR && y.t == V_STR) || (x.t == V_LIST && y.t == V_LIST))) {
        if (x.t == V_STR) return binop(c, OP_CONCAT, x, y, line);
        list *l = new_list(c);
        for (size_t i = 0; i < x.u.l->n; i++) list_push(c, l, x.u.l->v[i]);
        for (size_t i = 0; i < y.u.l->n; i++) list_push(c, l, y.u.l->v[i]);
        return vlist(l);
    }
    if (op == OP_MUL && (x.t == V_STR || x.t == V_LIST) && (y.t == V_INT || y.t == V_BOOL)) return repeat(c, x, y.u.i, line);
    if (op == OP_MUL && (y.t == V_STR || y.t == V_LIST) && (x.t == V_INT || x.t == V_BOOL)) return repeat(c, y, x.u.i, line);
    if (!is_num(x) || !is_num(y))
        FAIL(c, line, "unsupported operand type(s) for %s: '%s' and '%s'", names[op], type_name(x), type_name(y));
    int ints = x.t != V_FLOAT && y.t != V_FLOAT;
    int64_t a = x.u.i, b = y.u.i, r;
    double fa = num_f(x), fb = num_f(y);
    switch (op) {
    case OP_ADD:
        if (!ints) return vfloat(fa + fb);
        if (__builtin_add_overflow(a, b, &r)) FAIL(c, line, "integer overflow");
        return vint(r);
    case OP_SUB:
        if (!ints) return vfloat(fa - fb);
        if (__builtin_sub_overflow(a, b, &r)) FAIL(c, line, "integer overflow");
        return vint(r);
    case OP_MUL:
        if (!ints) return vfloat(fa * fb);
        if (__builtin_mul_overflow(a, b, &r)) FAIL(c, line, "integer overflow");
        return vint(r);
    case OP_DIV:
        if (fb == 0.0) FAIL(c, line, "division by zero");
        return vfloat(fa / fb);
    case OP_FLOORDIV: case OP_MOD:
        if (ints) {
            if (b == 0) FAIL(c, line, "integer division or modulo by zero");
            if (a == INT64_MIN && b == -1) FAIL(c, line, "integer overflow");
            int64_t q = a / b, m = a % b;
            if (m != 0 && ((m < 0) != (b < 0))) { q--; m += b; }
            return vint(op == OP_FLOORDIV ? q : m);
        } else {
            if (fb == 0.0) FAIL(c, line, "float division by zero");
            double m = fmod(fa, fb);
            if (m != 0.0 && ((m < 0) != (fb < 0))) m += fb;
            return op == OP_MOD ? vfloat(m) : vfloat(floor(fa / fb));
        }
    case OP_POW:
        if (ints && b >= 0) {
            int64_t res = 1, base = a;
            for (int64_t e = b; e > 0; e >>= 1) {
                if ((e & 1) && __builtin_mul_overflow(res, base, &res)) FAIL(c, line, "integer overflow");
                if (e > 1 && __builtin_mul_overflow(base, base, &base)) FAIL(c, line, "integer overflow");
            }
            return vint(res);
        }
        return vfloat(pow(fa, fb));
    }
    FAIL(c, line, "internal: bad operator");
}

static value eval(rctx *c, frame *f, const node *n)
{
    switch (n->kind) {
    case E_LIT: return n->lit;
    case E_NAME: {
        value v = lookup(f, n->name);
        if (v.t == V_UNDEF) return vundef_fmt(c, "'%.*s' is undefined", (int)n->name.n, n->name.p);
        return v;
    }
    case E_ATTR: return get_attr(c, eval(c, f, n->a), n->name, n->line);
    case E_ITEM: {
        value o = eval(c, f, n->a);
        return get_item(c, o, eval(c, f, n->b), n->line);
    }
    case E_SLICE: {
        value o = eval(c, f, n->a);
        value a = n->b ? eval(c, f, n->b) : vnone(), b = n->c ? eval(c, f, n->c) : vnone();
        value s = n->kids[0] ? eval(c, f, n->kids[0]) : vnone();
        return do_slice(c, o, a, b, s, n->line);
    }
    case E_CALL: {
        value fn = eval(c, f, n->a);
        args a = eval_args(c, f, n);
        return call_value(c, fn, &a);
    }
    case E_FILTER: {
        value v = eval(c, f, n->a);
        args a = eval_args(c, f, n);
        return apply_filter(c, n->name, v, &a);
    }
    case E_TEST: {
        value v = eval(c, f, n->a);
        args a = eval_args(c, f, n);
        return vbool(apply_test(c, n->name, v, &a) != n->op);
    }
    case E_NEG: case E_POS: {
        value v = eval(c, f, n->a);
        if (v.t == V_UNDEF) fail_undefined(c, v, n->line);
        if (!is_num(v)) FAIL(c, n->line, "bad operand type for unary %c: '%s'", n->kind == E_NEG ? '-' : '+', type_name(v));
        if (n->kind == E_POS) return v.t == V_BOOL ? vint(v.u.i) : v;
        if (v.t == V_FLOAT) return vfloat(-v.u.f);
        if (v.u.i == INT64_MIN) FAIL(c, n->line, "integer overflow");
        return vint(-v.u.i);
    }
    case E_NOT: return vbool(!truthy(eval(c, f, n->a)));
    case E_BIN: {
        value x = eval(c, f, n->a);
        return binop(c, n->op, x, eval(c, f, n->b), n->line);
    }
    case E_AND: {
        value x = eval(c, f, n->a);
        return truthy(x) ? eval(c, f, n->b) : x;
    }
    case E_OR: {
        value x = eval(c, f, n->a);
        return truthy(x) ? x : eval(c, f, n->b);
    }
    case E_COND:
        if (truthy(eval(c, f, n->a))) return eval(c, f, n->b);
        return n->c ? eval(c, f, n->c) : vundef("the inline if-expression evaluated to false and no else section was defined.");
    case E_LIST: {
        list *l = new_list(c);
        l->tuple = n->op;
        for (int i = 0; i < n->nkids; i++) list_push(c, l, eval(c, f, n->kids[i]));
        return vlist(l);
    }
    case E_DICT: {
        dict *d = new_dict(c);
        for (int i = 0; i + 1 < n->nkids; i += 2) {
            value k = eval(c, f, n->kids[i]);
            if (k.t != V_STR) FAIL(c, n->line, "unsupported dict key of type %s (only strings)", type_name(k));
            dict_set(c, d, k.u.s, eval(c, f, n->kids[i + 1]));
        }
        return (value){.t = V_DICT, .u.d = d};
    }
    case E_COMPARE: {
        static const char *const names[] = {"==", "!=", "<", "<=", ">", ">="};
        value l = eval(c, f, n->kids[0]);
        for (int i = 1; i < n->nkids; i++) {
            value r = eval(c, f, n->kids[i]);
            int op = n->ops[i - 1], ok;
            switch (op) {
            case CMP_EQ: ok = eq(l, r, 0); break;
            case CMP_NE: ok = !eq(l, r, 0); break;
            case CMP_IN: ok = contains(c, r, l, n->line); break;
            case CMP_NOTIN: ok = !contains(c, r, l, n->line); break;
            default: {
                int o = order(c, l, r, names[op], n->line);
                ok = op == CMP_LT ? o < 0 : op == CMP_LE ? o <= 0 : op == CMP_GT ? o > 0 : o >= 0;
            }
            }
            if (!ok) return vbool(0);
            l = r;
        }
        return vbool(1);
    }
    }
    FAIL(c, n->line, "internal: cannot evaluate node %d", n->kind);
}

/* ------------------------------------------------------------------ statements */

static void bind_targets(rctx *c, frame *fr, const node *n, value v)
{
    if (n->nnames == 1) {
        dict_set(c, &fr->vars, n->names[0], v);
        return;
    }
    if (v.t != V_LIST) FAIL(c, n->line, "cannot unpack %s into %d names", type_name(v), n->nnames);
    if ((int)v.u.l->n != n->nnames)
        FAIL(c, n->line, "cannot unpack %zu values into %d names", v.u.l->n, n->nnames);
    for (int i = 0; i < n->nnames; i++) dict_set(c, &fr->vars, n->names[i], v.u.l->v[i]);
}

static void exec_for(rctx *c, frame *f, const node *n)
{
    list *items = iter_list(c, eval(c, f, n->a), n->line);
    if (n->b) {
        list *keep = new_list(c);
        frame *fr = new_frame(c, f);
        for (size_t i = 0; i < items->n; i++) {
            step(c, n->line);
            fr->vars.n = 0;
            bind_targets(c, fr, n, items->v[i]);
            if (truthy(eval(c, fr, n->b))) list_push(c, keep, items->v[i]);
        }
        items = keep;
    }
    if (!items->n) {
        exec_body(c, f, n->alt, n->nalt);
        return;
    }
    /* one frame and one loop object for the whole loop (Jinja's LoopContext advances too);
     * the frame's variables are cleared per iteration, so a set lasts one iteration */
    int64_t len = (int64_t)items->n;
    frame *fr = new_frame(c, f);
    dict *loop = new_dict(c);
    for (int64_t i = 0; i < len; i++) {
        step(c, n->line);
        fr->vars.n = 0;
        bind_targets(c, fr, n, items->v[i]);
        dict_set_c(c, loop, "index", vint(i + 1));
        dict_set_c(c, loop, "index0", vint(i));
        dict_set_c(c, loop, "revindex", vint(len - i));
        dict_set_c(c, loop, "revindex0", vint(len - i - 1));
        dict_set_c(c, loop, "first", vbool(i == 0));
        dict_set_c(c, loop, "last", vbool(i == len - 1));
        dict_set_c(c, loop, "length", vint(len));
        dict_set_c(c, loop, "depth", vint(1));
        dict_set_c(c, loop, "depth0", vint(0));
        dict_set_c(c, loop, "previtem", i > 0 ? items->v[i - 1] : vundef("there is no previous item"));
        dict_set_c(c, loop, "nextitem", i + 1 < len ? items->v[i + 1] : vundef("there is no next item"));
        dict_set_c(c, &fr->vars, "loop", (value){.t = V_DICT, .u.d = loop});
        exec_body(c, fr, n->body, n->nbody);
        if (c->ctl == 1) {
            c->ctl = 0;
            break;
        }
        c->ctl = 0;
    }
}

static void exec_stmt(rctx *c, frame *f, const node *n)
{
    step(c, n->line);
    switch (n->kind) {
    case N_TEXT: bput(c, c->out, n->lit.u.s.p, n->lit.u.s.n); return;
    case N_OUTPUT: put_value(c, c->out, eval(c, f, n->a), 0, 0); return;
    case N_IF:
        if (truthy(eval(c, f, n->a))) exec_body(c, f, n->body, n->nbody);
        else exec_body(c, f, n->alt, n->nalt);
        return;
    case N_FOR: exec_for(c, f, n); return;
    case N_SET: bind_targets(c, f, n, eval(c, f, n->a)); return;
    case N_SET_ATTR: {
        value ns = lookup(f, n->name);
        if (ns.t != V_NS) FAIL(c, n->line, "cannot assign attribute on non-namespace object '%.*s'", (int)n->name.n, n->name.p);
        dict_set(c, ns.u.d, n->names[0], eval(c, f, n->a));
        return;
    }
    case N_SET_BLOCK: {
        str s = render_to_string(c, f, n->body, n->nbody);
        dict_set(c, &f->vars, n->names[0], vstr(s));
        return;
    }
    case N_MACRO: dict_set(c, &f->vars, n->name, (value){.t = V_MACRO, .u.mac = n}); return;
    case N_CALL_BLOCK: {
        value fn = eval(c, f, n->a->a);
        if (fn.t != V_MACRO) FAIL(c, n->line, "a call block needs a macro, not %s", type_name(fn));
        args a = eval_args(c, f, n->a);
        caller *cl = xalloc(&c->f, &c->a, sizeof *cl);
        cl->call = n;
        cl->scope = f;
        step(c, n->line);
        value s = call_macro(c, fn.u.mac, &a, (value){.t = V_CALLER, .u.c = cl});
        bput(c, c->out, s.u.s.p, s.u.s.n);
        return;
    }
    case N_BREAK: c->ctl = 1; return;
    case N_CONTINUE: c->ctl = 2; return;
    case N_BLOCK: exec_body(c, f, n->body, n->nbody); return;
    }
    FAIL(c, n->line, "internal: cannot run node %d", n->kind);
}

static void exec_body(rctx *c, frame *f, node *const *body, int n)
{
    for (int i = 0; i < n && !c->ctl; i++) exec_stmt(c, f, body[i]);
}

/* ------------------------------------------------------------------ entry */

static value from_json(rctx *c, const cJSON *j, int depth)
{
    if (depth > MAX_VALUE_DEPTH) fail(&c->f, HONE_ERANGE, 0, "a variable nested deeper than %d", MAX_VALUE_DEPTH);
    if (cJSON_IsNull(j)) return vnone();
    if (cJSON_IsTrue(j)) return vbool(1);
    if (cJSON_IsFalse(j)) return vbool(0);
    if (cJSON_IsNumber(j)) {
        double d = j->valuedouble;
        if (d == floor(d) && fabs(d) < 9007199254740992.0) return vint((int64_t)d);
        return vfloat(d);
    }
    if (cJSON_IsString(j)) return vstr((str){j->valuestring, strlen(j->valuestring)});
    if (cJSON_IsArray(j)) {
        list *l = new_list(c);
        for (const cJSON *x = j->child; x; x = x->next) list_push(c, l, from_json(c, x, depth + 1));
        return vlist(l);
    }
    if (cJSON_IsObject(j)) {
        dict *d = new_dict(c);
        for (const cJSON *x = j->child; x; x = x->next)
            if (x->string) dict_set(c, d, (str){x->string, strlen(x->string)}, from_json(c, x, depth + 1));
        return (value){.t = V_DICT, .u.d = d};
    }
    FAIL(c, 0, "unsupported JSON value in the variables");
}

static void bind_vars(rctx *c, const cJSON *vars)
{
    for (const cJSON *x = vars ? vars->child : NULL; x; x = x->next)
        if (x->string) dict_set(c, &c->root->vars, (str){x->string, strlen(x->string)}, from_json(c, x, 1));
}

const char *hone_jinja_raised(void) { return raised_set ? raised_msg : NULL; }

int hone_jinja_render(char **out, const hone_jinja *t, const cJSON *vars, const hone_jinja_opts *opts)
{
    static const hone_jinja_opts defaults = HONE_JINJA_OPTS_INIT;
    *out = NULL;
    raised_set = 0;
    if (!t) return hone_error_set(HONE_EINVAL, "template: NULL template");
    if (vars && !cJSON_IsObject(vars)) return hone_error_set(HONE_EINVAL, "template: the variables must be a JSON object");
    rctx *c = calloc(1, sizeof *c);
    if (!c) return hone_error_set(HONE_ENOMEM, "template: out of memory");
    c->o = opts ? *opts : defaults;
    c->a.limit = c->o.max_memory;
    c->now = c->o.now ? (time_t)c->o.now : time(NULL);
    if (setjmp(c->f.jb)) {
        int code = c->f.code;
        arena_free(&c->a);
        free(c);
        return code;
    }
    c->root = new_frame(c, NULL);
    static const struct { const char *name; int fn; } globals[] = {
        {"raise_exception", F_RAISE}, {"strftime_now", F_STRFTIME}, {"namespace", F_NAMESPACE},
        {"range", F_RANGE}, {"dict", F_DICT}};
    for (size_t i = 0; i < sizeof globals / sizeof globals[0]; i++)
        dict_set_c(c, &c->root->vars, globals[i].name, (value){.t = V_FUNC, .u.fn = globals[i].fn});
    bind_vars(c, vars);
    buf b = {0};
    c->out = &b;
    exec_body(c, c->root, t->body, t->nbody);
    char *r = malloc(b.n + 1);
    if (!r) {
        arena_free(&c->a);
        free(c);
        return hone_error_set(HONE_ENOMEM, "template: out of memory");
    }
    if (b.n) memcpy(r, b.s, b.n);
    r[b.n] = '\0';
    arena_free(&c->a);
    free(c);
    *out = r;
    return 0;
}
