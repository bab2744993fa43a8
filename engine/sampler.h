/* Token sampling: turns one row of logits into a token id, with a repetition penalty,
 * top-k, top-p, min-p and temperature, and a self-contained PRNG (xoshiro256** seeded by
 * splitmix64) so that the same seed and logits give the same tokens on every machine. */
#ifndef HONE_SAMPLER_H
#define HONE_SAMPLER_H

#include <stdint.h>

/* Sampling parameters. The filters run in llama.cpp's default order:
 *
 *   logit bias -> repetition penalty -> presence/frequency penalty -> top-k -> top-p -> min-p -> temperature -> softmax -> draw
 *
 * top-p and min-p look at softmax(logits) at temperature 1 (after the penalty and top-k),
 * as llama.cpp does; temperature only reshapes the distribution of the survivors.
 * Every filter always keeps at least the most likely token. */
typedef struct {
    float temperature;      /* > 0: sample from softmax(l / T); <= 0: greedy argmax (ties -> lowest id) */
    int32_t top_k;          /* keep the k largest logits; 0 = off; must be >= 0 */
    float top_p;            /* keep the smallest set with mass >= top_p; in (0, 1]; 1 = off */
    float min_p;            /* drop tokens with p < min_p * p_max; in [0, 1]; 0 = off */
    float repeat_penalty;   /* > 0; 1 = off; applied once per distinct recent token */
    int32_t repeat_last_n;  /* how many accepted tokens the penalty looks back; >= 0; 0 = off */
    uint64_t seed;          /* PRNG seed; any value, 0 included */
    /* OpenAI's penalties (platform.openai.com/docs/advanced-usage, "frequency and presence
     * penalties"): with c[j] the times token j was accepted so far,
     *   l[j] -= c[j] * frequency_penalty + (c[j] > 0) * presence_penalty
     * after logit_bias and the repetition penalty; both in [-2, 2], 0 = off. */
    float presence_penalty;
    float frequency_penalty;
    /* logit_bias: n_bias (token id, bias) pairs, added to the logits first (OpenAI: -100 bans,
     * 100 forces). Copied by hone_sampler_new; ids must be in [0, n_vocab), bias finite. */
    const int32_t *bias_ids;
    const float *bias_vals;
    int32_t n_bias;
} hone_sampler_params;

#define HONE_SAMPLER_PARAMS_INIT                                                            \
    {.temperature = 1.0f, .top_k = 0, .top_p = 1.0f, .min_p = 0.0f, .repeat_penalty = 1.0f,   \
     .repeat_last_n = 64, .seed = 0}

typedef struct hone_sampler hone_sampler;

/* Creates a sampler for a vocabulary of n_vocab tokens. Validates params: HONE_EINVAL (with
 * a message naming the field) for NaN or infinite floats, top_k < 0, top_p outside (0, 1],
 * min_p outside [0, 1], repeat_penalty <= 0, repeat_last_n < 0, n_vocab <= 0;
 * HONE_ERANGE for repeat_last_n above 1<<24. A temperature <= 0 is valid and means greedy.
 * The sampler owns O(n_vocab) scratch, so sampling allocates nothing. */
int hone_sampler_new(hone_sampler **out, const hone_sampler_params *params, int32_t n_vocab);

/* Frees s; accepts NULL. */
void hone_sampler_free(hone_sampler *s);

/* Picks the next token from logits[n_vocab] (read only, never modified).
 *
 * NaN and -inf logits are never chosen while any other logit exists. If some logits are
 * +inf, the choice is uniform among those (greedy: the lowest such id). If every logit is
 * -inf or NaN, returns the lowest id whose logit is -inf, or -1 (and sets the error
 * message) if all are NaN. Greedy sampling (temperature <= 0) and those all-impossible
 * cases do not advance the PRNG; every other call draws exactly one 53-bit uniform.
 * Cost for 49152 tokens: about 20 us greedy, 65 us with top_k = 40, 0.2 ms for plain
 * sampling (one exp per token), 0.5 to 1 ms for top_p alone (it needs every token's mass).
 *
 * The draw walks the surviving tokens in ascending id order, summing exp((l - l_max) / T)
 * in double, so the result depends only on the logits, the params and the PRNG state, not
 * on how the filters were computed. The token is NOT recorded for the repetition penalty:
 * call hone_sampler_accept() with the token actually used (it may differ, e.g. in
 * speculative decoding or with forced tokens). */
int32_t hone_sampler_sample(hone_sampler *s, const float *logits);

/* ---- positional draws: the uniform of each position is a fixed function of (seed, position),
 * so that a token's draw does not depend on how many draws came before it (speculative
 * decoding verifies several positions in one pass and must sample each with the draw plain
 * decoding would have used: engine/spec.h). ---- */

/* The uniform in [0, 1) (53 bits) of position pos in stream `stream` for seed: splitmix64 of
 * the mixed seed xor pos and stream times odd constants. Stream 0 is the token draw; other
 * streams are free for other decisions (distribution-mode acceptance, residual draws).
 *   hone_sampler_uniform_at(7, 12, 0) is the same on every machine and every run. */
double hone_sampler_uniform_at(uint64_t seed, int64_t pos, uint32_t stream);
/* The seed of the last reset (the params' seed unless hone_sampler_reset changed it). */
uint64_t hone_sampler_seed(const hone_sampler *s);
/* The vocabulary size it was made for. */
int64_t hone_sampler_n_vocab(const hone_sampler *s);
/* hone_sampler_sample with the given uniform u in [0, 1) instead of the PRNG stream's next
 * one (the stream is not advanced): the same filters, the same inverse CDF. */
int32_t hone_sampler_sample_u(hone_sampler *s, const float *logits, double u);
/* The token for sequence position pos (the index the sampled token will have in the
 * sequence): hone_sampler_sample_u with hone_sampler_uniform_at(seed, pos, 0). Greedy
 * sampling ignores the draw, so it equals hone_sampler_sample. */
int32_t hone_sampler_sample_at(hone_sampler *s, const float *logits, int64_t pos);
/* The distribution the samplers above draw from, written to probs[n_vocab]: after the
 * penalty and the filters, exp((l - l_max) / T) over the survivors, normalised (in double);
 * greedy: 1 at the argmax. 0, or HONE_EINVAL when every logit is NaN. */
int hone_sampler_probs(hone_sampler *s, const float *logits, double *probs);

/* The first index of the largest of x[n] (ties: the lowest index; NaN never wins over a
 * number unless x[0] is NaN): the raw argmax, without penalty or filters. */
int32_t hone_sampler_argmax(const float *x, int64_t n);

/* Records an accepted token for the repetition penalty (a ring of the last repeat_last_n).
 * Tokens outside [0, n_vocab) are ignored. */
void hone_sampler_accept(hone_sampler *s, int32_t token);

/* Forgets the accepted tokens and reseeds the PRNG, as if newly created with this seed. */
void hone_sampler_reset(hone_sampler *s, uint64_t seed);

/* ---- log-probabilities (OpenAI's logprobs / top_logprobs) ---- */

#define HONE_SAMPLER_TOP_LOGPROBS_MAX 20

/* One position's log-probabilities under the model's own distribution. */
typedef struct {
    int32_t token;      /* the token at this position (sampled, or the prompt's) */
    float logprob;      /* log softmax(logits)[token] */
    int32_t n_top;      /* entries in top_ids / top_lps */
    int32_t top_ids[HONE_SAMPLER_TOP_LOGPROBS_MAX];  /* the most likely tokens, most likely first (ties: lower id) */
    float top_lps[HONE_SAMPLER_TOP_LOGPROBS_MAX];
} hone_token_logprob;

/* Fills out from the exact logits[n_vocab] (before any bias, penalty or temperature):
 * log softmax with the maximum subtracted and the normaliser summed in double, so that
 * logprob = (double)l[token] - (l_max + log(sum_j exp(l[j] - l_max))), rounded to float once.
 * k (clamped to [0, HONE_SAMPLER_TOP_LOGPROBS_MAX]) top entries; NaN logits count as -inf.
 * Example: logits {0, ln 3} give logprobs {ln 1/4, ln 3/4}. */
void hone_sampler_logprobs(const float *logits, int32_t n_vocab, int32_t token, int32_t k,
                           hone_token_logprob *out);

#endif
