/* Prefix cache: a hash table of (parent entry, block tokens) -> entry, each entry holding one
 * reference to its KV block through a one-block hone_kv_seq. */
#include "prefix_cache.h"

#include <stdlib.h>
#include <string.h>

#include "error.h"

typedef struct {
    uint64_t hash;
    int32_t parent;       /* entry id of the block before, -1 for a first block */
    int32_t block;        /* KV block id */
    int32_t next;         /* next entry in the same bucket, -1 at the end */
    int32_t users;        /* running sequences holding this block */
    int32_t children;     /* live entries whose parent this is */
    int32_t live;
    uint64_t last_use;
    hone_kv_seq holder;   /* the cache's own reference to block */
} entry;

struct hone_prefix_cache {
    hone_kv_cache *kv;
    int64_t bs;           /* tokens per block */
    int64_t cap;          /* entries: at most one per KV block */
    entry *e;             /* [cap] */
    int32_t *tokens;      /* [cap][bs] each entry's block tokens */
    int32_t *free_ids;    /* [cap] stack of unused entry ids */
    int64_t n_free_ids;
    int32_t *buckets;     /* [n_buckets] first entry id or -1 */
    uint64_t mask;        /* n_buckets - 1 */
    int64_t n_live, n_idle;
    uint64_t tick;
};

static uint64_t mix(uint64_t x)
{
    x ^= x >> 30; x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27; x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static uint64_t key_hash(int32_t parent, const int32_t *tokens, int64_t bs)
{
    uint64_t h = mix((uint64_t)(int64_t)parent + 0x9e3779b97f4a7c15ull);
    for (int64_t i = 0; i < bs; i++) h = mix(h ^ (uint32_t)tokens[i]);
    return h;
}

static int32_t find(const hone_prefix_cache *pc, int32_t parent, const int32_t *tokens)
{
    uint64_t h = key_hash(parent, tokens, pc->bs);
    for (int32_t id = pc->buckets[h & pc->mask]; id >= 0; id = pc->e[id].next) {
        const entry *x = &pc->e[id];
        if (x->hash == h && x->parent == parent &&
            memcmp(pc->tokens + (int64_t)id * pc->bs, tokens, (size_t)pc->bs * sizeof *tokens) == 0)
            return id;
    }
    return -1;
}

int hone_prefix_cache_new(hone_prefix_cache **out, hone_kv_cache *kv)
{
    *out = NULL;
    hone_prefix_cache *pc = calloc(1, sizeof *pc);
    if (!pc) return hone_error_set(HONE_ENOMEM, "out of memory");
    pc->kv = kv;
    pc->bs = hone_kv_cache_block_size(kv);
    pc->cap = hone_kv_cache_n_blocks(kv);
    uint64_t nb = 16;
    while (nb < (uint64_t)pc->cap * 2) nb *= 2;
    pc->mask = nb - 1;
    pc->e = calloc((size_t)pc->cap, sizeof *pc->e);
    pc->tokens = malloc((size_t)(pc->cap * pc->bs) * sizeof *pc->tokens);
    pc->free_ids = malloc((size_t)pc->cap * sizeof *pc->free_ids);
    pc->buckets = malloc((size_t)nb * sizeof *pc->buckets);
    if (!pc->e || !pc->tokens || !pc->free_ids || !pc->buckets) {
        hone_prefix_cache_free(pc);
        return hone_error_set(HONE_ENOMEM, "out of memory for the prefix cache");
    }
    for (uint64_t i = 0; i < nb; i++) pc->buckets[i] = -1;
    for (int64_t i = 0; i < pc->cap; i++) pc->free_ids[i] = (int32_t)(pc->cap - 1 - i);
    pc->n_free_ids = pc->cap;
    *out = pc;
    return 0;
}

void hone_prefix_cache_free(hone_prefix_cache *pc)
{
    if (!pc) return;
    if (pc->e)
        for (int64_t i = 0; i < pc->cap; i++)
            if (pc->e[i].live) hone_kv_cache_release(pc->kv, &pc->e[i].holder);
    free(pc->e);
    free(pc->tokens);
    free(pc->free_ids);
    free(pc->buckets);
    free(pc);
}

int64_t hone_prefix_cache_match(const hone_prefix_cache *pc, const int32_t *tokens,
                                int64_t n_blocks, int32_t *out_entries)
{
    int32_t parent = -1;
    int64_t j;
    for (j = 0; j < n_blocks; j++) {
        int32_t id = find(pc, parent, tokens + j * pc->bs);
        if (id < 0) break;
        out_entries[j] = parent = id;
    }
    return j;
}

static void use(hone_prefix_cache *pc, int32_t id)
{
    entry *x = &pc->e[id];
    if (x->users++ == 0) pc->n_idle--;
    x->last_use = ++pc->tick;
}

void hone_prefix_cache_unuse(hone_prefix_cache *pc, const int32_t *entries, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        entry *x = &pc->e[entries[i]];
        if (x->users > 0 && --x->users == 0) pc->n_idle++;
    }
}

int hone_prefix_cache_attach(hone_prefix_cache *pc, hone_kv_seq *seq, const int32_t *entries,
                             int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        int rc = hone_kv_cache_share(pc->kv, seq, pc->e[entries[i]].block);
        if (rc) {
            hone_prefix_cache_unuse(pc, entries, i);
            hone_kv_cache_release(pc->kv, seq);
            return rc;
        }
        use(pc, entries[i]);
    }
    return 0;
}

int hone_prefix_cache_insert(hone_prefix_cache *pc, int32_t parent, const int32_t *tokens,
                             int32_t block, int32_t *out_entry)
{
    *out_entry = -1;
    if (parent >= pc->cap || (parent >= 0 && !pc->e[parent].live))
        return hone_error_set(HONE_EINVAL, "prefix cache: parent entry %d is not live", parent);
    if (find(pc, parent, tokens) >= 0) return 1;
    if (pc->n_free_ids == 0) return 1; /* cannot happen: one entry per distinct block */
    int32_t id = pc->free_ids[pc->n_free_ids - 1];
    entry *x = &pc->e[id];
    memset(x, 0, sizeof *x);
    int rc = hone_kv_cache_share(pc->kv, &x->holder, block);
    if (rc) return rc;
    pc->n_free_ids--;
    memcpy(pc->tokens + (int64_t)id * pc->bs, tokens, (size_t)pc->bs * sizeof *tokens);
    x->hash = key_hash(parent, tokens, pc->bs);
    x->parent = parent;
    x->block = block;
    x->live = 1;
    x->users = 1;
    x->last_use = ++pc->tick;
    x->next = pc->buckets[x->hash & pc->mask];
    pc->buckets[x->hash & pc->mask] = id;
    if (parent >= 0) pc->e[parent].children++;
    pc->n_live++;
    *out_entry = id;
    return 0;
}

static void evict_entry(hone_prefix_cache *pc, int32_t id)
{
    entry *x = &pc->e[id];
    int32_t *link = &pc->buckets[x->hash & pc->mask];
    while (*link != id) link = &pc->e[*link].next;
    *link = x->next;
    if (x->parent >= 0) pc->e[x->parent].children--;
    hone_kv_cache_release(pc->kv, &x->holder);
    x->live = 0;
    pc->n_live--;
    pc->n_idle--;
    pc->free_ids[pc->n_free_ids++] = id;
}

int64_t hone_prefix_cache_evict(hone_prefix_cache *pc, int64_t n_free)
{
    int64_t evicted = 0;
    while (hone_kv_cache_n_free(pc->kv) < n_free && pc->n_idle > 0) {
        int32_t best = -1;
        for (int64_t i = 0; i < pc->cap; i++) {
            const entry *x = &pc->e[i];
            if (x->live && x->users == 0 && x->children == 0 &&
                (best < 0 || x->last_use < pc->e[best].last_use))
                best = (int32_t)i;
        }
        if (best < 0) break; /* cannot happen: an idle entry's descendants are idle */
        evict_entry(pc, best);
        evicted++;
    }
    return evicted;
}

int64_t hone_prefix_cache_n_entries(const hone_prefix_cache *pc) { return pc->n_live; }
int64_t hone_prefix_cache_n_idle(const hone_prefix_cache *pc) { return pc->n_idle; }

int hone_prefix_cache_is_idle(const hone_prefix_cache *pc, int32_t entry)
{
    return entry >= 0 && entry < pc->cap && pc->e[entry].live && pc->e[entry].users == 0;
}
