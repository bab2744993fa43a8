/* Text <-> token ids for GGUF models: byte-level BPE ("gpt2", PCRE2 pre-tokenizers chosen
 * by tokenizer.ggml.pre as llama.cpp does) and SentencePiece-style BPE by scores with byte
 * fallback ("llama"), plus a streaming detokenizer that never splits a UTF-8 character. */
#ifndef HONE_TOKENIZER_H
#define HONE_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "gguf.h"

typedef struct hone_tokenizer hone_tokenizer;

typedef enum {
    HONE_TOKENIZER_GPT2 = 1, /* byte-level BPE by merge rank */
    HONE_TOKENIZER_SPM = 2   /* SentencePiece-style BPE by score, "▁" for spaces, <0xXX> bytes */
} hone_tokenizer_kind;

/* tokenizer.ggml.token_type values. */
typedef enum {
    HONE_TOKEN_UNDEFINED = 0, /* treated as normal */
    HONE_TOKEN_NORMAL = 1,
    HONE_TOKEN_UNKNOWN = 2,
    HONE_TOKEN_CONTROL = 3,
    HONE_TOKEN_USER_DEFINED = 4,
    HONE_TOKEN_UNUSED = 5,
    HONE_TOKEN_BYTE = 6
} hone_token_type;

/* Reads the tokenizer.ggml.* metadata of g and builds the lookup tables. Everything is
 * copied: g may be freed afterwards. Errors: HONE_EUNSUPPORTED for an unknown
 * tokenizer.ggml.model (named in the message), HONE_EFORMAT for missing or inconsistent
 * metadata (array lengths, ids out of range, malformed merges), HONE_ENOMEM. */
int hone_tokenizer_new(hone_tokenizer **out, const hone_gguf *g);
void hone_tokenizer_free(hone_tokenizer *t);

/* Tokenizes text[0..len). Any bytes are accepted: invalid UTF-8 is encoded byte by byte
 * (gpt2: a byte whose alphabet character is not in the vocab, e.g. 0xFF for SmolLM2, becomes
 * the unknown token, or HONE_EINVAL if there is none; spm: byte fallback, else unknown).
 * add_bos: -1 = the model's default (tokenizer.ggml.add_bos_token), 0 = no, 1 = yes.
 * parse_special: 1 = control and unknown tokens written literally in the text ("<|im_start|>")
 * become their ids, longest token first, as llama.cpp does with parse_special=true.
 * User-defined tokens are always matched, as in llama.cpp. The text between them is
 * tokenized normally. On success *out_ids is malloc'd (caller frees; non-NULL even when
 * *out_n is 0).
 * Example: encode(t, "<|im_start|>user", 16, 0, 1, &ids, &n) -> ids = {1, 4093} for SmolLM2. */
int hone_tokenizer_encode(const hone_tokenizer *t, const char *text, size_t len, int add_bos,
                          int parse_special, int32_t **out_ids, int64_t *out_n);

/* Flags for decoding. */
enum {
    /* Render control and unknown tokens as their vocab text ("<|im_end|>"); without it
     * they decode to nothing. User-defined tokens always render as their text, unused
     * tokens never do. */
    HONE_TOKENIZER_DECODE_SPECIAL = 1
};

/* The bytes of one token: gpt2 maps the byte-level alphabet back to bytes; spm turns
 * "▁" into ' ' and <0xXX> into that byte. Writes at most cap bytes (no NUL terminator)
 * and sets *out_len to the full length; returns HONE_ERANGE if cap was too small (so a
 * call with cap 0 measures), HONE_ERANGE also for an id outside [0, n_vocab). */
int hone_tokenizer_decode_piece(const hone_tokenizer *t, int32_t id, int flags, char *buf,
                                size_t cap, size_t *out_len);

/* Decodes a whole sequence into a malloc'd NUL-terminated string (caller frees).
 * For spm with add_space_prefix, the leading space of the first non-empty piece is
 * dropped (the space the encoder added), so decode(encode(s)) == s. */
int hone_tokenizer_decode(const hone_tokenizer *t, const int32_t *ids, int64_t n, int flags,
                          char **out, size_t *out_len);

hone_tokenizer_kind hone_tokenizer_kind_of(const hone_tokenizer *t);
int64_t hone_tokenizer_n_vocab(const hone_tokenizer *t);
/* Special ids; -1 when the model has none. */
int32_t hone_tokenizer_bos(const hone_tokenizer *t);
int32_t hone_tokenizer_eos(const hone_tokenizer *t);
int32_t hone_tokenizer_unk(const hone_tokenizer *t);
int32_t hone_tokenizer_eot(const hone_tokenizer *t);
int32_t hone_tokenizer_pad(const hone_tokenizer *t);
/* The model's defaults (tokenizer.ggml.add_bos_token / add_space_prefix, with llama.cpp's
 * defaults when absent: spm 1 / 1, gpt2 0 / 0; add_bos is 0 if there is no bos id). */
int hone_tokenizer_add_bos(const hone_tokenizer *t);
int hone_tokenizer_add_space_prefix(const hone_tokenizer *t);
/* 1 if id ends a generation: eos, eot, or a control token spelled "<|im_end|>",
 * "<|eot_id|>", "<|end_of_text|>" or "<|endoftext|>". */
int hone_tokenizer_is_eog(const hone_tokenizer *t, int32_t id);
/* The id whose vocab text is exactly text (NUL-terminated), or -1. */
int32_t hone_tokenizer_find(const hone_tokenizer *t, const char *text);
/* Raw vocab text of id (NUL-terminated, borrowed), or NULL if id is out of range. */
const char *hone_tokenizer_token_text(const hone_tokenizer *t, int32_t id);
/* hone_token_type of id, or -1 if out of range. */
int hone_tokenizer_token_type(const hone_tokenizer *t, int32_t id);
/* The pre-tokenizer name (tokenizer.ggml.pre, "default" when absent; "" for spm). */
const char *hone_tokenizer_pre(const hone_tokenizer *t);
/* A warning from loading, e.g. an unknown pre-tokenizer that fell back to GPT-2's regex;
 * "" when there is none. Borrowed. */
const char *hone_tokenizer_note(const hone_tokenizer *t);

/* 1 when a and b give every token id the same meaning (a draft model must share its
 * target's): the same kind, token count, token texts and types, and special ids (bos, eos,
 * eot, unk, pad). Else 0, with the first difference in why[cap] (may be NULL), e.g.
 * "token 300 is 'ab' vs 'cd'" or "2048 tokens vs 512". */
int hone_tokenizer_same_vocab(const hone_tokenizer *a, const hone_tokenizer *b, char *why, size_t cap);

/* Streaming detokenizer: push ids as they are generated and get back only complete UTF-8;
 * an incomplete trailing sequence is held until later tokens finish it. */
typedef struct hone_detok hone_detok;

/* flags: HONE_TOKENIZER_DECODE_SPECIAL or 0. Borrows t, which must outlive d. The leading
 * space of the first non-empty piece is dropped for spm with add_space_prefix, as in
 * hone_tokenizer_decode; to stream a continuation, push the ids with that in mind. */
int hone_detok_new(hone_detok **out, const hone_tokenizer *t, int flags);
void hone_detok_free(hone_detok *d);
/* Appends the bytes of id; *out (NUL-terminated, borrowed from d, valid until the next call
 * on d) receives the bytes that now form complete UTF-8, *out_len their count (may be 0).
 * Bytes that can never become valid (a stray continuation byte, a bad lead byte) are passed
 * through rather than held. */
int hone_detok_push(hone_detok *d, int32_t id, const char **out, size_t *out_len);
/* Returns whatever is still held (an unfinished sequence, as raw bytes) and resets d. */
int hone_detok_flush(hone_detok *d, const char **out, size_t *out_len);

#endif
