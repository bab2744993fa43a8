/* Prefix caching for the server: full KV blocks of earlier sequences, keyed by their token ids
 * chained to the block before them, so that a new sequence sharing a block-aligned prefix
 * starts with those blocks (shared, reference-counted) and only computes the rest. Reuse is
 * bit-exact: a block's K/V depend only on the tokens at and before its positions. */
#ifndef HONE_PREFIX_CACHE_H
#define HONE_PREFIX_CACHE_H

#include <stdint.h>

#include "kv_cache.h"

typedef struct hone_prefix_cache hone_prefix_cache;

/* An entry is one cached block: it holds one reference to its KV block (so the block outlives
 * the sequence that computed it) and is identified by (parent entry, the block's tokens) —
 * exact keys, so a hash collision can never match the wrong block. Entries are in use while
 * a running sequence holds them (users > 0); idle ones are evicted least recently used
 * first, leaves before their parents. Not thread-safe: one owner (the scheduler thread). */
int hone_prefix_cache_new(hone_prefix_cache **out, hone_kv_cache *kv);
/* Drops every entry's reference; accepts NULL. */
void hone_prefix_cache_free(hone_prefix_cache *pc);

/* The longest cached chain covering tokens[0 .. n_blocks * block_size): writes the entry ids
 * of blocks 0.. into out_entries[n_blocks] and returns how many matched (0..n_blocks). No
 * side effects. */
int64_t hone_prefix_cache_match(const hone_prefix_cache *pc, const int32_t *tokens,
                                int64_t n_blocks, int32_t *out_entries);

/* Gives the empty seq the blocks of entries[0..n) (a chain from hone_prefix_cache_match),
 * marks them in use and recently used. On error seq is released and nothing is in use. */
int hone_prefix_cache_attach(hone_prefix_cache *pc, hone_kv_seq *seq, const int32_t *entries,
                             int64_t n);

/* Caches block (full, holding tokens[0..block_size)) as the child of parent (an entry id, or
 * -1 for a sequence's first block). Returns 0 and *out_entry, in use once (the caller's
 * sequence holds the block), or 1 when an equal entry already exists (*out_entry = -1; the
 * caller's chain stops there). parent must be in use by the caller. */
int hone_prefix_cache_insert(hone_prefix_cache *pc, int32_t parent, const int32_t *tokens,
                             int32_t block, int32_t *out_entry);

/* Ends one use of each of entries[0..n) (a sequence that held them is released). */
void hone_prefix_cache_unuse(hone_prefix_cache *pc, const int32_t *entries, int64_t n);

/* Evicts idle entries, least recently used leaves first, until the KV cache has at least
 * n_free free blocks or nothing idle is left. Returns the entries evicted. */
int64_t hone_prefix_cache_evict(hone_prefix_cache *pc, int64_t n_free);

int64_t hone_prefix_cache_n_entries(const hone_prefix_cache *pc);
/* Entries no running sequence uses: blocks that eviction can give back. */
int64_t hone_prefix_cache_n_idle(const hone_prefix_cache *pc);
/* 1 if entry is idle (used to count what admission may evict). */
int hone_prefix_cache_is_idle(const hone_prefix_cache *pc, int32_t entry);

#endif
