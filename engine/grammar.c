/* Byte-level grammars, their pushdown matcher and the vocabulary mask (grammar.h).
 * A matcher state is a set of stacks of element indices whose tops are byte classes (an
 * empty stack: the sentence may end here); states are interned, and each byte transition
 * is computed once per state and memoised, so the trie walk of a mask is mostly table
 * look-ups. */
#include "grammar.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"

enum { EL_END = 0, EL_CLASS = 1, EL_REF = 2 };

#define MAX_STACK_DEPTH 512    /* deeper stacks (runaway nesting) are dropped */
#define MAX_STACKS 256         /* stacks per state */
#define MAX_EXPAND_STEPS 65536 /* rule expansions per byte: a bound for malformed grammars */
#define STATE_FLUSH 4096       /* interned states before the memo is cleared at a mask call */

typedef struct {
    uint8_t type;
    uint32_t arg; /* class index or rule id */
} gel;

typedef struct {
    gel *el;
    int n, cap;
} alt_b;

typedef struct {
    alt_b *alts;
    int n, cap;
} rule_b;

struct hone_grammar {
    rule_b *rules; /* while building */
    int n_rules, cap_rules;
    int finished;
    gel *el;                /* (n_el) the alternatives, each closed by EL_END */
    int64_t n_el;
    int32_t *rule_alt0;     /* (n_rules) first alternative of each rule */
    int32_t *rule_nalt;     /* (n_rules) */
    int32_t *alt_start;     /* (n_alts) element index of each alternative */
    int n_alts;
    uint64_t (*cls)[4];     /* (n_cls) byte classes */
    int n_cls, cap_cls;
    int root;
};

static int grow(void **p, int *cap, int need, size_t elsize)
{
    if (need <= *cap) return 0;
    int nc = *cap ? *cap : 8;
    while (nc < need) nc *= 2;
    void *q = realloc(*p, (size_t)nc * elsize);
    if (!q) return hone_error_set(HONE_ENOMEM, "grammar: out of memory");
    *p = q;
    *cap = nc;
    return 0;
}

int hone_grammar_new(hone_grammar **out)
{
    *out = calloc(1, sizeof **out);
    if (!*out) return hone_error_set(HONE_ENOMEM, "grammar: out of memory");
    (*out)->root = -1;
    return 0;
}

void hone_grammar_free(hone_grammar *g)
{
    if (!g) return;
    for (int r = 0; r < g->n_rules && g->rules; r++) {
        for (int a = 0; a < g->rules[r].n; a++) free(g->rules[r].alts[a].el);
        free(g->rules[r].alts);
    }
    free(g->rules);
    free(g->el);
    free(g->rule_alt0);
    free(g->rule_nalt);
    free(g->alt_start);
    free(g->cls);
    free(g);
}

int hone_grammar_rule(hone_grammar *g)
{
    if (g->finished) return hone_error_set(HONE_EINVAL, "grammar: already finished");
    int rc = grow((void **)&g->rules, &g->cap_rules, g->n_rules + 1, sizeof *g->rules);
    if (rc) return rc;
    memset(&g->rules[g->n_rules], 0, sizeof *g->rules);
    return g->n_rules++;
}

int hone_grammar_alt(hone_grammar *g, int rule)
{
    if (g->finished || rule < 0 || rule >= g->n_rules)
        return hone_error_set(HONE_EINVAL, "grammar: bad rule %d", rule);
    rule_b *r = &g->rules[rule];
    int rc = grow((void **)&r->alts, &r->cap, r->n + 1, sizeof *r->alts);
    if (rc) return rc;
    memset(&r->alts[r->n++], 0, sizeof *r->alts);
    return 0;
}

static int add_el(hone_grammar *g, int rule, uint8_t type, uint32_t arg)
{
    if (g->finished || rule < 0 || rule >= g->n_rules || g->rules[rule].n == 0)
        return hone_error_set(HONE_EINVAL, "grammar: rule %d has no open alternative", rule);
    alt_b *a = &g->rules[rule].alts[g->rules[rule].n - 1];
    int rc = grow((void **)&a->el, &a->cap, a->n + 1, sizeof *a->el);
    if (rc) return rc;
    a->el[a->n].type = type;
    a->el[a->n].arg = arg;
    a->n++;
    return 0;
}

int hone_grammar_add_class(hone_grammar *g, int rule, const uint64_t set[4])
{
    int i;
    for (i = 0; i < g->n_cls; i++)
        if (!memcmp(g->cls[i], set, sizeof g->cls[i])) break;
    if (i == g->n_cls) {
        int rc = grow((void **)&g->cls, &g->cap_cls, g->n_cls + 1, sizeof *g->cls);
        if (rc) return rc;
        memcpy(g->cls[g->n_cls++], set, sizeof g->cls[0]);
    }
    return add_el(g, rule, EL_CLASS, (uint32_t)i);
}

int hone_grammar_add_range(hone_grammar *g, int rule, unsigned lo, unsigned hi)
{
    uint64_t set[4] = {0, 0, 0, 0};
    for (unsigned b = lo; b <= hi && b < 256; b++) set[b >> 6] |= 1ull << (b & 63);
    return hone_grammar_add_class(g, rule, set);
}

int hone_grammar_add_literal(hone_grammar *g, int rule, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned b = (unsigned char)s[i];
        int rc = hone_grammar_add_range(g, rule, b, b);
        if (rc) return rc;
    }
    return 0;
}

int hone_grammar_add_ref(hone_grammar *g, int rule, int ref)
{
    if (ref < 0) return hone_error_set(HONE_EINVAL, "grammar: bad reference %d", ref);
    return add_el(g, rule, EL_REF, (uint32_t)ref);
}

int hone_grammar_finish(hone_grammar *g, int root)
{
    if (g->finished) return hone_error_set(HONE_EINVAL, "grammar: already finished");
    if (root < 0 || root >= g->n_rules) return hone_error_set(HONE_EINVAL, "grammar: bad root %d", root);
    int64_t n_el = 0;
    int n_alts = 0;
    for (int r = 0; r < g->n_rules; r++) {
        if (g->rules[r].n == 0) return hone_error_set(HONE_EINVAL, "grammar: rule %d has no alternatives", r);
        for (int a = 0; a < g->rules[r].n; a++) {
            n_el += g->rules[r].alts[a].n + 1;
            for (int k = 0; k < g->rules[r].alts[a].n; k++) {
                gel e = g->rules[r].alts[a].el[k];
                if (e.type == EL_REF && (int)e.arg >= g->n_rules)
                    return hone_error_set(HONE_EINVAL, "grammar: rule %d refers to rule %u, which does not exist",
                                          r, e.arg);
            }
        }
        n_alts += g->rules[r].n;
    }
    g->el = malloc((size_t)(n_el + 1) * sizeof *g->el);
    g->rule_alt0 = malloc((size_t)g->n_rules * sizeof *g->rule_alt0);
    g->rule_nalt = malloc((size_t)g->n_rules * sizeof *g->rule_nalt);
    g->alt_start = malloc((size_t)n_alts * sizeof *g->alt_start);
    if (!g->el || !g->rule_alt0 || !g->rule_nalt || !g->alt_start)
        return hone_error_set(HONE_ENOMEM, "grammar: out of memory");
    int64_t k = 0;
    int ai = 0;
    for (int r = 0; r < g->n_rules; r++) {
        g->rule_alt0[r] = ai;
        g->rule_nalt[r] = g->rules[r].n;
        for (int a = 0; a < g->rules[r].n; a++) {
            g->alt_start[ai++] = (int32_t)k;
            alt_b *al = &g->rules[r].alts[a];
            if (al->n) memcpy(g->el + k, al->el, (size_t)al->n * sizeof *al->el);
            k += al->n;
            g->el[k].type = EL_END;
            g->el[k++].arg = 0;
            free(al->el);
        }
        free(g->rules[r].alts);
    }
    free(g->rules);
    g->rules = NULL;
    g->n_el = k;
    g->n_alts = n_alts;
    g->root = root;
    g->finished = 1;
    return 0;
}

int64_t hone_grammar_size(const hone_grammar *g) { return g->finished ? g->n_el : 0; }

int hone_grammar_clone(hone_grammar **out, const hone_grammar *g)
{
    *out = NULL;
    if (!g->finished) return hone_error_set(HONE_EINVAL, "grammar: clone of an unfinished grammar");
    hone_grammar *c = calloc(1, sizeof *c);
    if (!c) return hone_error_set(HONE_ENOMEM, "grammar: out of memory");
    *c = *g;
    c->rules = NULL;
    c->el = malloc((size_t)(g->n_el + 1) * sizeof *c->el);
    c->rule_alt0 = malloc((size_t)g->n_rules * sizeof *c->rule_alt0);
    c->rule_nalt = malloc((size_t)g->n_rules * sizeof *c->rule_nalt);
    c->alt_start = malloc((size_t)g->n_alts * sizeof *c->alt_start);
    c->cls = malloc((size_t)(g->n_cls ? g->n_cls : 1) * sizeof *c->cls);
    c->cap_cls = g->n_cls;
    if (!c->el || !c->rule_alt0 || !c->rule_nalt || !c->alt_start || !c->cls) {
        hone_grammar_free(c);
        return hone_error_set(HONE_ENOMEM, "grammar: out of memory");
    }
    memcpy(c->el, g->el, (size_t)(g->n_el + 1) * sizeof *c->el);
    memcpy(c->rule_alt0, g->rule_alt0, (size_t)g->n_rules * sizeof *c->rule_alt0);
    memcpy(c->rule_nalt, g->rule_nalt, (size_t)g->n_rules * sizeof *c->rule_nalt);
    memcpy(c->alt_start, g->alt_start, (size_t)g->n_alts * sizeof *c->alt_start);
    memcpy(c->cls, g->cls, (size_t)g->n_cls * sizeof *c->cls);
    *out = c;
    return 0;
}

int hone_grammar_equal(const hone_grammar *a, const hone_grammar *b)
{
    if (!a->finished || !b->finished || a->n_el != b->n_el || a->n_rules != b->n_rules || a->n_alts != b->n_alts ||
        a->n_cls != b->n_cls || a->root != b->root)
        return 0;
    for (int64_t i = 0; i < a->n_el; i++)
        if (a->el[i].type != b->el[i].type || a->el[i].arg != b->el[i].arg) return 0;
    return !memcmp(a->rule_alt0, b->rule_alt0, (size_t)a->n_rules * sizeof *a->rule_alt0) &&
           !memcmp(a->rule_nalt, b->rule_nalt, (size_t)a->n_rules * sizeof *a->rule_nalt) &&
           !memcmp(a->alt_start, b->alt_start, (size_t)a->n_alts * sizeof *a->alt_start) &&
           !memcmp(a->cls, b->cls, (size_t)a->n_cls * sizeof *a->cls);
}

uint64_t hone_grammar_hash(const hone_grammar *g)
{
    uint64_t h = 1469598103934665603ull ^ (uint64_t)g->root;
    for (int64_t i = 0; i < g->n_el; i++) {
        h ^= (uint64_t)g->el[i].type << 32 | g->el[i].arg;
        h *= 1099511628211ull;
    }
    for (int i = 0; i < g->n_cls; i++)
        for (int k = 0; k < 4; k++) {
            h ^= g->cls[i][k];
            h *= 1099511628211ull;
        }
    return h ^ (uint64_t)g->n_rules << 40;
}

/* ---- the token trie ----
 * Nodes in preorder of the sorted token strings; node i is the byte at depth `depth` below
 * its parent (the nearest earlier node of depth - 1); skip is the index after its subtree,
 * so a walk that rejects a byte jumps over everything below it. */

typedef struct {
    uint8_t byte;
    uint16_t depth;  /* 1 = a child of the root */
    int32_t tok;     /* first token ending here; n_vocab (a spare bit of the mask) for none;
                      * more tokens with the same bytes via tok_next */
} trie_node;         /* 8 bytes: the walk streams through them */

struct hone_token_trie {
    int64_t n_vocab;
    trie_node *nodes;
    int32_t *skip;       /* (n_nodes) index after each node's subtree (read only on a rejection) */
    int64_t n_nodes;
    int32_t *tok_next;   /* (n_vocab) next token with the same bytes, -1 */
    int32_t *dup_heads;  /* (n_dups) first tokens of the nodes that end more than one token */
    int64_t n_dups;
    int64_t *tok_off;    /* (n_vocab) offset of its bytes in pool, -1 if not in the trie */
    uint32_t *tok_len;   /* (n_vocab) */
    char *pool;
    uint8_t *eog;        /* (n_vocab) */
    int32_t *eog_ids;
    int n_eog;
    int max_depth;
};

/* Orders token ids by their bytes, then by id. */
static int tok_before(const hone_token_trie *t, int32_t a, int32_t b)
{
    uint32_t la = t->tok_len[a], lb = t->tok_len[b];
    int c = memcmp(t->pool + t->tok_off[a], t->pool + t->tok_off[b], la < lb ? la : lb);
    if (c) return c < 0;
    if (la != lb) return la < lb;
    return a < b;
}

/* Merge sort of ids[0..n) with tok_before (qsort has no context argument). */
static void sort_ids(const hone_token_trie *t, int32_t *ids, int32_t *tmp, int64_t n)
{
    if (n < 2) return;
    int64_t h = n / 2;
    sort_ids(t, ids, tmp, h);
    sort_ids(t, ids + h, tmp, n - h);
    int64_t i = 0, j = h, k = 0;
    while (i < h && j < n) tmp[k++] = tok_before(t, ids[j], ids[i]) ? ids[j++] : ids[i++];
    while (i < h) tmp[k++] = ids[i++];
    while (j < n) tmp[k++] = ids[j++];
    memcpy(ids, tmp, (size_t)n * sizeof *ids);
}

void hone_token_trie_free(hone_token_trie *t)
{
    if (!t) return;
    free(t->nodes);
    free(t->skip);
    free(t->tok_next);
    free(t->dup_heads);
    free(t->tok_off);
    free(t->tok_len);
    free(t->pool);
    free(t->eog);
    free(t->eog_ids);
    free(t);
}

int hone_token_trie_new(hone_token_trie **out, const hone_tokenizer *tok)
{
    int rc = 0;
    int32_t *ids = NULL, *tmp = NULL, *stack = NULL;
    *out = NULL;
    hone_token_trie *t = calloc(1, sizeof *t);
    if (!t) return hone_error_set(HONE_ENOMEM, "grammar: out of memory");
    int64_t nv = hone_tokenizer_n_vocab(tok);
    t->n_vocab = nv;
    t->tok_next = malloc((size_t)nv * sizeof *t->tok_next);
    t->dup_heads = malloc((size_t)nv * sizeof *t->dup_heads);
    t->tok_off = malloc((size_t)nv * sizeof *t->tok_off);
    t->tok_len = calloc((size_t)nv, sizeof *t->tok_len);
    t->eog = calloc((size_t)nv, 1);
    ids = malloc((size_t)nv * sizeof *ids);
    tmp = malloc((size_t)nv * sizeof *tmp);
    if (!t->tok_next || !t->dup_heads || !t->tok_off || !t->tok_len || !t->eog || !ids || !tmp) {
        rc = hone_error_set(HONE_ENOMEM, "grammar: out of memory for the token trie");
        goto done;
    }
    size_t pool_len = 0;
    for (int64_t i = 0; i < nv; i++) {
        size_t len = 0;
        hone_tokenizer_decode_piece(tok, (int32_t)i, 0, NULL, 0, &len);
        pool_len += len;
    }
    if (!(t->pool = malloc(pool_len + 1))) {
        rc = hone_error_set(HONE_ENOMEM, "grammar: out of memory for the token trie");
        goto done;
    }
    size_t off = 0;
    int64_t n_ids = 0, n_nodes_max = 0;
    for (int64_t i = 0; i < nv; i++) {
        size_t len = 0;
        t->tok_next[i] = -1;
        t->tok_off[i] = -1;
        if (hone_tokenizer_is_eog(tok, (int32_t)i)) {
            t->eog[i] = 1;
            t->n_eog++;
        }
        if (hone_tokenizer_decode_piece(tok, (int32_t)i, 0, t->pool + off, pool_len - off, &len) || !len ||
            len > 65535)
            continue;
        t->tok_off[i] = (int64_t)off;
        t->tok_len[i] = (uint32_t)len;
        off += len;
        ids[n_ids++] = (int32_t)i;
        n_nodes_max += (int64_t)len;
    }
    if (!(t->eog_ids = malloc((size_t)(t->n_eog + 1) * sizeof *t->eog_ids))) {
        rc = hone_error_set(HONE_ENOMEM, "grammar: out of memory");
        goto done;
    }
    t->n_eog = 0;
    for (int64_t i = 0; i < nv; i++)
        if (t->eog[i]) t->eog_ids[t->n_eog++] = (int32_t)i;
    sort_ids(t, ids, tmp, n_ids);
    t->nodes = malloc((size_t)(n_nodes_max + 1) * sizeof *t->nodes);
    t->skip = malloc((size_t)(n_nodes_max + 1) * sizeof *t->skip);
    stack = malloc(65537 * sizeof *stack); /* open node at each depth */
    if (!t->nodes || !t->skip || !stack) {
        rc = hone_error_set(HONE_ENOMEM, "grammar: out of memory for the token trie");
        goto done;
    }
    int64_t nn = 0;
    int open = 0; /* depth of the deepest open node */
    int32_t prev = -1;
    for (int64_t k = 0; k < n_ids; k++) {
        int32_t id = ids[k];
        const char *s = t->pool + t->tok_off[id];
        uint32_t len = t->tok_len[id];
        uint32_t lcp = 0;
        if (prev >= 0) {
            const char *p = t->pool + t->tok_off[prev];
            uint32_t lp = t->tok_len[prev];
            while (lcp < lp && lcp < len && p[lcp] == s[lcp]) lcp++;
        }
        if (prev >= 0 && lcp == len && t->tok_len[prev] == len) { /* same bytes: chain it */
            int32_t node = stack[len];
            int32_t *q = &t->nodes[node].tok;
            if (t->tok_next[*q] < 0) t->dup_heads[t->n_dups++] = *q; /* a node's first duplicate */
            while (*q >= 0 && *q < nv) q = &t->tok_next[*q];
            *q = id;
            prev = id;
            continue;
        }
        while (open > (int)lcp) t->skip[stack[open--]] = (int32_t)nn; /* close deeper nodes */
        for (uint32_t d = lcp + 1; d <= len; d++) {
            t->nodes[nn].byte = (uint8_t)s[d - 1];
            t->nodes[nn].depth = (uint16_t)d;
            t->skip[nn] = -1;
            t->nodes[nn].tok = d == len ? id : (int32_t)nv;
            stack[d] = (int32_t)nn++;
            open = (int)d;
        }
        if ((int)len > t->max_depth) t->max_depth = (int)len;
        prev = id;
    }
    while (open > 0) t->skip[stack[open--]] = (int32_t)nn;
    t->n_nodes = nn;
    *out = t;
    t = NULL;
done:
    free(ids);
    free(tmp);
    free(stack);
    hone_token_trie_free(t);
    return rc;
}

int64_t hone_token_trie_n_vocab(const hone_token_trie *t) { return t->n_vocab; }
int64_t hone_token_trie_n_nodes(const hone_token_trie *t) { return t->n_nodes; }

const char *hone_token_trie_bytes(const hone_token_trie *t, int32_t id, size_t *len)
{
    if (id < 0 || id >= t->n_vocab || t->tok_off[id] < 0) {
        *len = 0;
        return NULL;
    }
    *len = t->tok_len[id];
    return t->pool + t->tok_off[id];
}

int hone_token_trie_is_eog(const hone_token_trie *t, int32_t id)
{
    return id >= 0 && id < t->n_vocab && t->eog[id];
}

/* ---- the matcher ---- */

typedef struct {
    int64_t off;     /* words in m->words: for each stack, its depth then its elements (top last) */
    uint32_t len;
    uint32_t n_stacks;
    uint64_t hash;
    int accept;      /* an empty stack is in the set */
    uint64_t uni[4]; /* bytes some top accepts */
    uint64_t *mask;  /* the allowed tokens, once computed */
    int64_t n_allowed;
} gstate;

/* The memo of a grammar: its interned states with their transitions and masks. Matchers of
 * the same grammar may share one (hone_grammar_memo_new), each holding a reference; all of
 * them must then be used on one thread. */
struct hone_grammar_memo {
    const hone_grammar *g;
    int refs;
    int32_t start;   /* the start state */
    uint32_t *words;
    int64_t n_words, cap_words;
    gstate *st;
    int n_st, cap_st;
    /* (cap_st, 256) each state's memoised transitions: next state, -1 reject, -2 unknown.
     * One array indexed by state id, so that the trie walk finds a state's row by arithmetic
     * rather than by loading a pointer: one dependent load per trie node instead of two. */
    int32_t *rows;
    int32_t *ht;     /* open addressing over state ids, -1 empty */
    int64_t ht_cap;
    /* scratch */
    uint32_t *out;   /* stacks of the state being built */
    int64_t n_out, cap_out;
    uint32_t *arena; /* expansion copies */
    int64_t arena_top, cap_arena;
    int64_t *soff;   /* stack offsets in out, for sorting */
    int cap_soff;
    int steps;
    int32_t *walk;   /* state per trie depth */
    int walk_cap;
    int64_t mask_words;
};

static int matcher_reserve(uint32_t **p, int64_t *cap, int64_t need)
{
    if (need <= *cap) return 0;
    int64_t nc = *cap ? *cap : 1024;
    while (nc < need) nc *= 2;
    uint32_t *q = realloc(*p, (size_t)nc * sizeof *q);
    if (!q) return hone_error_set(HONE_ENOMEM, "grammar: out of memory");
    *p = q;
    *cap = nc;
    return 0;
}

static uint64_t hash_words(const uint32_t *w, int64_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (int64_t i = 0; i < n; i++) {
        h ^= w[i];
        h *= 1099511628211ull;
    }
    return h ^ (h >> 29);
}

/* Appends stack[0..depth) to m->out, if the state being built has room. */
static int out_stack(hone_grammar_memo *m, const uint32_t *stack, int depth)
{
    if (m->n_out / 2 > MAX_STACKS * 64) return 0;
    int rc = matcher_reserve(&m->out, &m->cap_out, m->n_out + depth + 1);
    if (rc) return rc;
    m->out[m->n_out++] = (uint32_t)depth;
    memcpy(m->out + m->n_out, stack, (size_t)depth * sizeof *stack);
    m->n_out += depth;
    return 0;
}

/* Expands stack[0..depth) until every top is a byte class (or the stack is empty), adding
 * each result to m->out. stack is read only; copies go to the arena. */
static int expand(hone_grammar_memo *m, const uint32_t *stack, int depth)
{
    const hone_grammar *g = m->g;
    if (++m->steps > MAX_EXPAND_STEPS) return 0;
    if (depth == 0 || g->el[stack[depth - 1]].type == EL_CLASS) return out_stack(m, stack, depth);
    uint32_t top = stack[depth - 1];
    int rule = (int)g->el[top].arg;
    int64_t base = m->arena_top;
    /* stack may live in the arena, which the reserve may move */
    int in_arena = m->arena && stack >= m->arena && stack < m->arena + m->cap_arena;
    int64_t soff = in_arena ? stack - m->arena : 0;
    int rc = matcher_reserve(&m->arena, &m->cap_arena, base + depth + 2);
    if (rc) return rc;
    if (in_arena) stack = m->arena + soff;
    uint32_t *nb = m->arena + base;
    memcpy(nb, stack, (size_t)(depth - 1) * sizeof *nb);
    int nd = depth - 1;
    if (g->el[top + 1].type != EL_END) nb[nd++] = top + 1;
    m->arena_top = base + nd + 1;
    for (int a = 0; a < g->rule_nalt[rule] && !rc; a++) {
        uint32_t first = (uint32_t)g->alt_start[g->rule_alt0[rule] + a];
        nb = m->arena + base; /* the arena may have moved */
        if (g->el[first].type == EL_END) {
            rc = expand(m, nb, nd);
        } else if (nd < MAX_STACK_DEPTH) {
            nb[nd] = first;
            rc = expand(m, nb, nd + 1);
        }
    }
    m->arena_top = base;
    return rc;
}

/* Orders the stacks at word offsets a and b of w (depth first word, then elements). */
static int cmp_stack(const uint32_t *w, int64_t ia, int64_t ib)
{
    const uint32_t *a = w + ia, *b = w + ib;
    uint32_t n = a[0] < b[0] ? a[0] : b[0];
    for (uint32_t i = 1; i <= n; i++)
        if (a[i] != b[i]) return a[i] < b[i] ? -1 : 1;
    return a[0] < b[0] ? -1 : a[0] > b[0];
}

/* Insertion sort of stack offsets (the sets are small). */
static void sort_stacks(const uint32_t *w, int64_t *off, int n)
{
    for (int i = 1; i < n; i++) {
        int64_t x = off[i];
        int j = i;
        while (j > 0 && cmp_stack(w, x, off[j - 1]) < 0) {
            off[j] = off[j - 1];
            j--;
        }
        off[j] = x;
    }
}

static int ht_grow(hone_grammar_memo *m)
{
    int64_t nc = m->ht_cap ? m->ht_cap * 2 : 1024;
    int32_t *h = malloc((size_t)nc * sizeof *h);
    if (!h) return hone_error_set(HONE_ENOMEM, "grammar: out of memory");
    for (int64_t i = 0; i < nc; i++) h[i] = -1;
    for (int i = 0; i < m->n_st; i++) {
        int64_t k = (int64_t)(m->st[i].hash & (uint64_t)(nc - 1));
        while (h[k] >= 0) k = (k + 1) & (nc - 1);
        h[k] = i;
    }
    free(m->ht);
    m->ht = h;
    m->ht_cap = nc;
    return 0;
}

/* Interns the state in m->out (canonical: stacks sorted, duplicates dropped); returns its
 * id, or a negative error. An empty set (no stack) is -1: a rejection. */
static int32_t intern_out(hone_grammar_memo *m)
{
    const hone_grammar *g = m->g;
    int n = 0;
    for (int64_t i = 0; i < m->n_out; i += m->out[i] + 1) n++;
    if (n == 0) return -1;
    if (n > m->cap_soff) {
        int nc = n > 2 * m->cap_soff ? n : 2 * m->cap_soff;
        int64_t *q = realloc(m->soff, (size_t)nc * sizeof *q);
        if (!q) return hone_error_set(HONE_ENOMEM, "grammar: out of memory");
        m->soff = q;
        m->cap_soff = nc;
    }
    int64_t *off = m->soff;
    n = 0;
    for (int64_t i = 0; i < m->n_out; i += m->out[i] + 1) off[n++] = i;
    sort_stacks(m->out, off, n);
    int rc = matcher_reserve(&m->words, &m->cap_words, m->n_words + m->n_out);
    if (rc) return rc;
    int64_t start = m->n_words, w = start;
    int kept = 0, accept = 0;
    uint64_t uni[4] = {0, 0, 0, 0};
    for (int i = 0; i < n; i++) {
        if (i > 0 && cmp_stack(m->out, off[i], off[i - 1]) == 0) continue;
        if (kept >= MAX_STACKS) break;
        const uint32_t *s = m->out + off[i];
        memcpy(m->words + w, s, (size_t)(s[0] + 1) * sizeof *s);
        w += s[0] + 1;
        kept++;
        if (s[0] == 0) accept = 1;
        else {
            const uint64_t *c = g->cls[g->el[s[s[0]]].arg];
            for (int k = 0; k < 4; k++) uni[k] |= c[k];
        }
    }
    uint32_t len = (uint32_t)(w - start);
    uint64_t h = hash_words(m->words + start, len);
    if (m->ht_cap == 0 || (int64_t)(m->n_st + 1) * 2 > m->ht_cap)
        if ((rc = ht_grow(m))) return rc;
    int64_t k = (int64_t)(h & (uint64_t)(m->ht_cap - 1));
    for (; m->ht[k] >= 0; k = (k + 1) & (m->ht_cap - 1)) {
        gstate *o = &m->st[m->ht[k]];
        if (o->hash == h && o->len == len && !memcmp(m->words + o->off, m->words + start, len * sizeof(uint32_t)))
            return m->ht[k]; /* known: the words just written are dropped */
    }
    if (m->n_st == m->cap_st) {
        int nc = m->cap_st ? m->cap_st * 2 : 64;
        gstate *q = realloc(m->st, (size_t)nc * sizeof *q);
        if (!q) return hone_error_set(HONE_ENOMEM, "grammar: out of memory");
        m->st = q;
        int32_t *r = realloc(m->rows, (size_t)nc * 256 * sizeof *r);
        if (!r) return hone_error_set(HONE_ENOMEM, "grammar: out of memory");
        m->rows = r;
        m->cap_st = nc;
    }
    int32_t *row = m->rows + (int64_t)m->n_st * 256;
    for (int i = 0; i < 256; i++) row[i] = -2;
    gstate *s = &m->st[m->n_st];
    memset(s, 0, sizeof *s);
    s->off = start;
    s->len = len;
    s->n_stacks = (uint32_t)kept;
    s->hash = h;
    s->accept = accept;
    memcpy(s->uni, uni, sizeof uni);
    m->n_words = w;
    m->ht[k] = m->n_st;
    return m->n_st++;
}

/* The state after byte c from state sid: -1 if rejected, or a negative error below -1. */
static int32_t advance(hone_grammar_memo *m, int32_t sid, unsigned c)
{
    const hone_grammar *g = m->g;
    gstate *s = &m->st[sid];
    if (!(s->uni[c >> 6] >> (c & 63) & 1)) return -1;
    m->n_out = 0;
    m->steps = 0;
    m->arena_top = 0;
    int64_t off = s->off, end = s->off + s->len;
    uint32_t buf[MAX_STACK_DEPTH + 2];
    while (off < end) {
        const uint32_t *stk = m->words + off; /* re-read: expand may grow other buffers only */
        uint32_t depth = stk[0];
        off += depth + 1;
        if (depth == 0) continue;
        uint32_t top = stk[depth];
        if (!(g->cls[g->el[top].arg][c >> 6] >> (c & 63) & 1)) continue;
        memcpy(buf, stk + 1, (depth - 1) * sizeof *buf);
        int nd = (int)depth - 1;
        if (g->el[top + 1].type != EL_END) buf[nd++] = top + 1;
        int rc = expand(m, buf, nd);
        if (rc) return rc < -1 ? rc : HONE_ENOMEM;
    }
    int32_t r = intern_out(m);
    return r;
}

/* The memoised transition. */
static int32_t trans(hone_grammar_memo *m, int32_t sid, unsigned c)
{
    int32_t r = m->rows[(int64_t)sid * 256 + c];
    if (r != -2) return r;
    r = advance(m, sid, c); /* may intern states: m->rows may move */
    if (r < -1) return r;
    m->rows[(int64_t)sid * 256 + c] = r;
    return r;
}

static void clear_states(hone_grammar_memo *m)
{
    for (int i = 0; i < m->n_st; i++) free(m->st[i].mask);
    m->n_st = 0;
    m->n_words = 0;
    for (int64_t i = 0; i < m->ht_cap; i++) m->ht[i] = -1;
}

/* Keeps only state *keep (the memo has grown past STATE_FLUSH); *keep becomes its new id. */
static int flush_states(hone_grammar_memo *m, int32_t *keep)
{
    gstate *s = &m->st[*keep];
    int64_t len = s->len;
    int rc = matcher_reserve(&m->out, &m->cap_out, len);
    if (rc) return rc;
    memcpy(m->out, m->words + s->off, (size_t)len * sizeof *m->out);
    m->n_out = len;
    clear_states(m);
    int32_t id = intern_out(m);
    if (id < 0) return id == -1 ? hone_error_set(HONE_EINTERNAL, "grammar: lost the state") : id;
    *keep = id;
    m->start = -1; /* interned again on demand */
    return 0;
}

/* Interns the start state of m's grammar: each alternative of the root, expanded. */
static int32_t start_state(hone_grammar_memo *m)
{
    const hone_grammar *g = m->g;
    uint32_t start[1];
    m->n_out = 0;
    m->steps = 0;
    m->arena_top = 0;
    for (int a = 0; a < g->rule_nalt[g->root]; a++) {
        start[0] = (uint32_t)g->alt_start[g->rule_alt0[g->root] + a];
        int rc = expand(m, start, g->el[start[0]].type == EL_END ? 0 : 1);
        if (rc) return rc;
    }
    int32_t id = intern_out(m);
    if (id == -1) return hone_error_set(HONE_EINVAL, "grammar: the start rule matches nothing");
    return id;
}

int hone_grammar_memo_new(hone_grammar_memo **out, const hone_grammar *g)
{
    *out = NULL;
    if (!g->finished) return hone_error_set(HONE_EINVAL, "grammar: not finished");
    hone_grammar_memo *m = calloc(1, sizeof *m);
    if (!m) return hone_error_set(HONE_ENOMEM, "grammar: out of memory");
    m->g = g;
    m->refs = 1;
    int32_t id = start_state(m);
    if (id < 0) {
        hone_grammar_memo_free(m);
        return id;
    }
    m->start = id;
    *out = m;
    return 0;
}

void hone_grammar_memo_free(hone_grammar_memo *m)
{
    if (!m || --m->refs > 0) return;
    for (int i = 0; i < m->n_st; i++) free(m->st[i].mask);
    free(m->st);
    free(m->rows);
    free(m->ht);
    free(m->words);
    free(m->out);
    free(m->arena);
    free(m->soff);
    free(m->walk);
    free(m);
}

int64_t hone_grammar_memo_n_states(const hone_grammar_memo *m) { return m->n_st; }
int hone_grammar_memo_refs(const hone_grammar_memo *m) { return m->refs; }

struct hone_grammar_matcher {
    hone_grammar_memo *memo;
    int32_t cur;
};

int hone_grammar_matcher_new_shared(hone_grammar_matcher **out, hone_grammar_memo *memo)
{
    *out = NULL;
    hone_grammar_matcher *mt = calloc(1, sizeof *mt);
    if (!mt) return hone_error_set(HONE_ENOMEM, "grammar: out of memory");
    if (memo->start < 0) {
        int32_t id = start_state(memo);
        if (id < 0) {
            free(mt);
            return id;
        }
        memo->start = id;
    }
    memo->refs++;
    mt->memo = memo;
    mt->cur = memo->start;
    *out = mt;
    return 0;
}

int hone_grammar_matcher_new(hone_grammar_matcher **out, const hone_grammar *g)
{
    hone_grammar_memo *memo;
    *out = NULL;
    int rc = hone_grammar_memo_new(&memo, g);
    if (rc) return rc;
    rc = hone_grammar_matcher_new_shared(out, memo);
    hone_grammar_memo_free(memo); /* the matcher holds the only reference now */
    return rc;
}

void hone_grammar_matcher_free(hone_grammar_matcher *mt)
{
    if (!mt) return;
    hone_grammar_memo_free(mt->memo);
    free(mt);
}

/* A memo of its own for mt, holding only its current state (a shared memo grew too big). */
static int detach(hone_grammar_matcher *mt)
{
    hone_grammar_memo *old = mt->memo, *m = calloc(1, sizeof *m);
    if (!m) return hone_error_set(HONE_ENOMEM, "grammar: out of memory");
    m->g = old->g;
    m->refs = 1;
    m->start = -1;
    gstate *s = &old->st[mt->cur];
    int rc = matcher_reserve(&m->out, &m->cap_out, s->len);
    if (rc) {
        hone_grammar_memo_free(m);
        return rc;
    }
    memcpy(m->out, old->words + s->off, (size_t)s->len * sizeof *m->out);
    m->n_out = s->len;
    int32_t id = intern_out(m);
    if (id < 0) {
        hone_grammar_memo_free(m);
        return id == -1 ? hone_error_set(HONE_EINTERNAL, "grammar: lost the state") : id;
    }
    mt->cur = id;
    mt->memo = m;
    hone_grammar_memo_free(old);
    return 0;
}

int hone_grammar_matcher_feed(hone_grammar_matcher *mt, const char *bytes, size_t n)
{
    int32_t s = mt->cur;
    for (size_t i = 0; i < n; i++) {
        s = trans(mt->memo, s, (unsigned char)bytes[i]);
        if (s == -1) return hone_error_set(HONE_EINVAL, "grammar: byte %zu (0x%02x) is not allowed here", i,
                                           (unsigned char)bytes[i]);
        if (s < 0) return s;
    }
    mt->cur = s;
    return 0;
}

int hone_grammar_matcher_try(hone_grammar_matcher *mt, const char *bytes, size_t n)
{
    int32_t s = mt->cur;
    for (size_t i = 0; i < n && s >= 0; i++) s = trans(mt->memo, s, (unsigned char)bytes[i]);
    return s >= 0;
}

int hone_grammar_matcher_accepting(const hone_grammar_matcher *mt) { return mt->memo->st[mt->cur].accept; }

int hone_grammar_matcher_done(const hone_grammar_matcher *mt)
{
    const gstate *s = &mt->memo->st[mt->cur];
    return s->accept && s->n_stacks == 1;
}

/* The mask of state sid of m: a walk of the trie in preorder, each node's state from its
 * parent's by one memoised transition, a rejected byte skipping its whole subtree. */
static const uint64_t *memo_mask(hone_grammar_memo *m, int32_t sid, const hone_token_trie *t, int64_t *n_allowed)
{
    int64_t words = (t->n_vocab + 1 + 63) / 64; /* and the spare bit n_vocab */
    uint64_t *mask = calloc((size_t)words, sizeof *mask);
    if (!mask || (m->walk_cap < t->max_depth + 1 &&
                  !(m->walk = realloc(m->walk, (size_t)(t->max_depth + 1) * sizeof *m->walk)))) {
        free(mask);
        hone_error_set(HONE_ENOMEM, "grammar: out of memory");
        return NULL;
    }
    if (m->walk_cap < t->max_depth + 1) m->walk_cap = t->max_depth + 1;
    int32_t *ws = m->walk;
    ws[0] = sid;
    const trie_node *nodes = t->nodes;
    int64_t n = t->n_nodes;
    for (int64_t i = 0; i < n;) {
        const trie_node *nd = &nodes[i];
        int32_t ps = ws[nd->depth - 1];
        int32_t ns = m->rows[(int64_t)ps * 256 + nd->byte];
        if (ns == -2) ns = trans(m, ps, nd->byte);
        if (ns < -1) {
            free(mask);
            return NULL;
        }
        if (ns < 0) {
            i = t->skip[i];
            continue;
        }
        ws[nd->depth] = ns;
        mask[nd->tok >> 6] |= 1ull << (nd->tok & 63); /* branch-free: no token marks the spare bit */
        i++;
    }
    for (int64_t k = 0; k < t->n_dups; k++) { /* tokens with the same bytes as an allowed one */
        int32_t id = t->dup_heads[k];
        if (mask[id >> 6] >> (id & 63) & 1)
            for (int32_t d = t->tok_next[id]; d >= 0; d = t->tok_next[d]) mask[d >> 6] |= 1ull << (d & 63);
    }
    mask[t->n_vocab >> 6] &= ~(1ull << (t->n_vocab & 63));
    gstate *s = &m->st[sid];
    if (s->accept)
        for (int k = 0; k < t->n_eog; k++) mask[t->eog_ids[k] >> 6] |= 1ull << (t->eog_ids[k] & 63);
    int64_t allowed = 0;
    for (int64_t w = 0; w < words; w++) allowed += __builtin_popcountll(mask[w]);
    s->mask = mask;
    s->n_allowed = allowed;
    if (n_allowed) *n_allowed = allowed;
    return mask;
}

const uint64_t *hone_grammar_matcher_mask(hone_grammar_matcher *mt, const hone_token_trie *t,
                                          int64_t *n_allowed)
{
    hone_grammar_memo *m = mt->memo;
    if (m->st[mt->cur].mask) {
        if (n_allowed) *n_allowed = m->st[mt->cur].n_allowed;
        return m->st[mt->cur].mask;
    }
    if (m->n_st > STATE_FLUSH) { /* a private memo is cleared; a shared one is left to the others */
        if (m->refs > 1 ? detach(mt) : flush_states(m, &mt->cur)) return NULL;
        m = mt->memo;
    }
    return memo_mask(m, mt->cur, t, n_allowed);
}

int hone_grammar_matcher_accept_token(hone_grammar_matcher *m, const hone_token_trie *t, int32_t id)
{
    if (hone_token_trie_is_eog(t, id)) {
        if (!hone_grammar_matcher_accepting(m))
            return hone_error_set(HONE_EINVAL, "grammar: the end of generation is not allowed here");
        return 0;
    }
    size_t len;
    const char *b = hone_token_trie_bytes(t, id, &len);
    if (!b) return hone_error_set(HONE_EINVAL, "grammar: token %d has no text", (int)id);
    return hone_grammar_matcher_feed(m, b, len);
}

void hone_grammar_mask_apply(const uint64_t *mask, float *logits, int64_t n)
{
    for (int64_t w = 0; w * 64 < n; w++) {
        uint64_t bits = mask[w];
        if (bits == ~0ull) continue;
        int64_t lim = n - w * 64 < 64 ? n - w * 64 : 64;
        float *l = logits + w * 64;
        if (bits == 0) { /* most words of a constrained step: a plain fill */
            for (int64_t b = 0; b < lim; b++) l[b] = -INFINITY;
            continue;
        }
        for (uint64_t z = ~bits & (lim == 64 ? ~0ull : (1ull << lim) - 1); z; z &= z - 1)
            l[__builtin_ctzll(z)] = -INFINITY; /* one store per rejected token, no branch per bit */
    }
}

int hone_grammar_accepts(const hone_grammar *g, const char *s, size_t n)
{
    hone_grammar_matcher *m;
    if (hone_grammar_matcher_new(&m, g)) return 0;
    int ok = hone_grammar_matcher_feed(m, s, n) == 0 && hone_grammar_matcher_accepting(m);
    hone_grammar_matcher_free(m);
    return ok;
}
