/* `hone verify`: how close a serving stack is to a reference. Each side is a GGUF file (run in
 * process on the CPU, with approved kernels if asked) or an OpenAI-compatible base URL (its
 * /v1/completions with logprobs). On every prompt the reference decodes greedily; then
 *
 *   teacher-forced: both sides score the reference's continuation, and at each position
 *     KL(ref || cand), top-1 agreement and max |delta logit| are taken: exact over the whole
 *     vocabulary when both sides are files; when a side is an endpoint, over the tokens both
 *     sides know (its top_logprobs) with the rest of the mass lumped into one outcome, which is
 *     a lower bound on the true KL (the data-processing inequality), and |delta logprob| there;
 *   free-running: the candidate decodes greedily too, and the first step where the two outputs
 *     differ is recorded.
 *
 * The per-step flip rate p is the teacher-forced top-1 disagreement rate; a task of n steps
 * survives every step with (1-p)^n (reported for n = 20, 50, 100), and the measured survival
 * (the fraction of prompts whose free-running outputs still agree after n steps) sits beside it.
 *
 * Prompt lines with "messages" and "tools" instead of "prompt" are the agentic checks
 * (agent/verify_tools.h): chat completions with tools on both sides, the candidate's tool-call
 * trigger scored against the reference's (precision, recall, F1), names and arguments compared,
 * each side's arguments validated against the tool's schema. A file side answers them through
 * an in-process server on a loopback port, the chat path of `hone serve`. */
#ifndef HONE_VERIFY_H
#define HONE_VERIFY_H

#include <stdio.h>

struct cJSON;

typedef struct {
    const char *reference, *candidate; /* a GGUF path, or an http(s):// base URL ("/v1") */
    const char *prompts;    /* JSONL ({"prompt": "...", "set": "...", "id": "..."} per line, or a tool
                             * prompt: {"messages": [...], "tools": [...], "tool_choice"?, "expect"?:
                             * "call" | "answer", "set"?, "id"?});
                             * NULL: the shipped set (tools/data/verify.jsonl) */
    int steps;              /* tokens of continuation per prompt; default 32 */
    int top_k;              /* top_logprobs asked of endpoints; default 20 (OpenAI's limit) */
    int max_prompts;        /* 0: all */
    int n_threads;          /* file sides; 0: the CPUs this process may use */
    const char *kernels_dir;/* file sides: approved CPU kernels (NULL: the shipped baselines) */
    const char *api_key;    /* endpoints; NULL: $HONE_LLM_API_KEY */
    const char *model;      /* endpoints' "model"; NULL: the first of the endpoint's /models */
    long timeout_ms;        /* per endpoint request; <= 0: 120 s */
    int quiet;              /* no progress lines on stderr */
    int tool_tokens;        /* tool prompts: max_tokens of each chat completion; default 96 */
    const char *chat_template; /* tool prompts, file sides: a Jinja template file for the chat
                                * (NULL: the model file's own, else the builtin ChatML) */
} hone_verify_opts;

#define HONE_VERIFY_OPTS_INIT {.steps = 32, .top_k = 20, .tool_tokens = 96}

/* Runs the comparison and returns its JSON (caller deletes): "reference" and "candidate"
 * (source, kind, description), "exact" (both files: full distributions), "summary" and
 * "sets" (per prompt set: positions, kl_mean, kl_max, top1_agreement, max_abs_dlogit,
 * flip_rate, survival_model {20,50,100}, greedy_identical, first_divergence_median),
 * "kl_per_position" and "greedy_survival" (per step), and "prompts" (per prompt: kl and
 * top1 per position, first_divergence (-1: none within steps)); with tool prompts, "tools"
 * (max_tokens, summary: hone_verify_tools_summarise, prompts: each side's calls).
 * Errors: unreadable models or prompts, an endpoint that is unreachable or returns no
 * logprobs, continuations the candidate tokenizes differently (named with the position). */
int hone_verify_run(struct cJSON **out, const hone_verify_opts *o);

/* The table on the terminal. */
void hone_verify_print(FILE *f, const struct cJSON *result);

/* DIR/index.html (created with DIR), DIR/verify.json and, with gnuplot (NULL: from PATH; "":
 * none), DIR/kl.png (KL per position), DIR/flips.png (histogram of per-prompt flip rates) and
 * DIR/survival.png (the model's (1-p)^n and the measured free-running survival). *charts: PNGs
 * written; note: why there are none. Returns 0 or a negative HONE_E*. */
int hone_verify_report(const char *dir, const struct cJSON *result, const char *gnuplot, int *charts,
                       char *note, size_t cap);

#endif
