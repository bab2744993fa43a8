/* Constrained decoding: a context-free grammar over bytes (rules of alternatives of byte
 * classes and rule references, built by code such as engine/json_schema.c), an incremental
 * pushdown matcher (a set of element stacks, as llama.cpp's GBNF sampler), and the per-step
 * mask over a vocabulary: a token trie built once per vocabulary is walked against the
 * matcher's state, whose byte transitions are memoised (a lazily built DFA over the
 * reachable configurations), so a step costs one trie walk per new state and a cache hit
 * otherwise — never a scan of every token's string. */
#ifndef HONE_GRAMMAR_H
#define HONE_GRAMMAR_H

#include <stddef.h>
#include <stdint.h>

#include "tokenizer.h"

typedef struct hone_grammar hone_grammar;

/* ---- building ----
 * Rules are numbered from 0 in creation order. Each rule has alternatives; each alternative
 * is a sequence of elements: a byte class (a set of bytes) or a reference to a rule. The
 * "current" alternative of a rule is its last one; the add functions append to it.
 * Left recursion and rules that reach themselves without consuming a byte are not allowed
 * (the matcher drops such stacks past a depth / step bound).
 * Example: digits ::= [0-9] digits | [0-9]
 *   int d = hone_grammar_rule(g);
 *   hone_grammar_alt(g, d); hone_grammar_add_range(g, d, '0', '9'); hone_grammar_add_ref(g, d, d);
 *   hone_grammar_alt(g, d); hone_grammar_add_range(g, d, '0', '9'); */
int hone_grammar_new(hone_grammar **out);
void hone_grammar_free(hone_grammar *g);
/* A new rule with no alternatives; returns its id (>= 0) or a negative HONE_E* code. */
int hone_grammar_rule(hone_grammar *g);
/* Starts a new, empty alternative of rule (an alternative left empty matches ""). */
int hone_grammar_alt(hone_grammar *g, int rule);
/* Appends the byte class set[256 bits] (bit b of set[b / 64]). */
int hone_grammar_add_class(hone_grammar *g, int rule, const uint64_t set[4]);
/* Appends the class [lo-hi]. */
int hone_grammar_add_range(hone_grammar *g, int rule, unsigned lo, unsigned hi);
/* Appends one single-byte class per byte of s[0..n). */
int hone_grammar_add_literal(hone_grammar *g, int rule, const char *s, size_t n);
int hone_grammar_add_ref(hone_grammar *g, int rule, int ref);
/* Sets the start rule and freezes the grammar (no more edits). HONE_EINVAL for a reference
 * to a rule without alternatives or an out-of-range id. */
int hone_grammar_finish(hone_grammar *g, int root);
/* Elements in the finished grammar (its size, for limits and reports). */
int64_t hone_grammar_size(const hone_grammar *g);
/* A deep copy of a finished grammar. */
int hone_grammar_clone(hone_grammar **out, const hone_grammar *g);
/* 1 if a and b (finished) are the same grammar, element for element; hash: equal grammars
 * hash equal. */
int hone_grammar_equal(const hone_grammar *a, const hone_grammar *b);
uint64_t hone_grammar_hash(const hone_grammar *g);

/* ---- the vocabulary ---- */
typedef struct hone_token_trie hone_token_trie;

/* Builds the trie of every token's bytes (hone_tokenizer_decode_piece with flags 0; tokens
 * that decode to nothing, such as control tokens, are left out) and notes the
 * end-of-generation ids. Borrows nothing: tok may be freed afterwards. */
int hone_token_trie_new(hone_token_trie **out, const hone_tokenizer *tok);
void hone_token_trie_free(hone_token_trie *t);
int64_t hone_token_trie_n_vocab(const hone_token_trie *t);
int64_t hone_token_trie_n_nodes(const hone_token_trie *t);
/* The bytes a token adds to the text (what the matcher consumes for it); NULL, 0 for tokens
 * outside the trie. */
const char *hone_token_trie_bytes(const hone_token_trie *t, int32_t id, size_t *len);
/* 1 if id ends a generation (hone_tokenizer_is_eog). */
int hone_token_trie_is_eog(const hone_token_trie *t, int32_t id);

/* ---- matching ---- */
typedef struct hone_grammar_matcher hone_grammar_matcher;

/* A matcher at the start of g (a finished grammar), which it borrows: g must outlive it. */
int hone_grammar_matcher_new(hone_grammar_matcher **out, const hone_grammar *g);

/* The memo of g's states (transitions and masks), to share between matchers of the same
 * grammar, so that a state's mask is walked once for all of them (a server sees the same
 * schema again and again). Matchers sharing a memo must all be used on one thread. g must
 * outlive the memo and its matchers. hone_grammar_memo_free drops the caller's reference;
 * each matcher holds one of its own. */
typedef struct hone_grammar_memo hone_grammar_memo;
int hone_grammar_memo_new(hone_grammar_memo **out, const hone_grammar *g);
void hone_grammar_memo_free(hone_grammar_memo *m);
int64_t hone_grammar_memo_n_states(const hone_grammar_memo *m);
/* References held: the creator's, until it frees it, and one per matcher. */
int hone_grammar_memo_refs(const hone_grammar_memo *m);
/* A matcher at the start of memo's grammar, sharing memo. */
int hone_grammar_matcher_new_shared(hone_grammar_matcher **out, hone_grammar_memo *memo);
void hone_grammar_matcher_free(hone_grammar_matcher *m);
/* Consumes bytes[0..n). On a byte the grammar rejects returns HONE_EINVAL and leaves the
 * state as it was before the call. */
int hone_grammar_matcher_feed(hone_grammar_matcher *m, const char *bytes, size_t n);
/* 1 if bytes[0..n) could be consumed now (the state is left as it is). */
int hone_grammar_matcher_try(hone_grammar_matcher *m, const char *bytes, size_t n);
/* 1 when the bytes so far form a complete sentence of the grammar. */
int hone_grammar_matcher_accepting(const hone_grammar_matcher *m);
/* 1 when they do and no byte may follow (the output is finished). */
int hone_grammar_matcher_done(const hone_grammar_matcher *m);

/* The allowed tokens in the current state: bit id of words[id / 64] (n_vocab bits), an
 * end-of-generation token allowed exactly when the state is accepting. Borrowed from m and
 * valid until the next call on m; *n_allowed receives how many bits are set. NULL with the
 * error set on failure (memory). */
const uint64_t *hone_grammar_matcher_mask(hone_grammar_matcher *m, const hone_token_trie *t,
                                          int64_t *n_allowed);
/* Consumes token id (its trie bytes); an end-of-generation token is accepted only in an
 * accepting state and consumes nothing. HONE_EINVAL (state unchanged) if not allowed. */
int hone_grammar_matcher_accept_token(hone_grammar_matcher *m, const hone_token_trie *t, int32_t id);

/* Sets logits[i] = -inf for every i in [0, n) whose bit in mask is clear. */
void hone_grammar_mask_apply(const uint64_t *mask, float *logits, int64_t n);

/* 1 if g accepts exactly s[0..n) as a whole sentence (a fresh matcher). */
int hone_grammar_accepts(const hone_grammar *g, const char *s, size_t n);

#endif
