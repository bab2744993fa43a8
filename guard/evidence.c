/* The evidence record as JSON (cJSON): unknown values (NaN doubles, negative counts, NULL
 * strings) become null. */
#include "evidence.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "engine/error.h"

static void json_num(cJSON *o, const char *k, double v)
{
    if (isfinite(v)) cJSON_AddNumberToObject(o, k, v);
    else cJSON_AddNullToObject(o, k);
}

static void json_int(cJSON *o, const char *k, long long v)
{
    if (v >= 0) cJSON_AddNumberToObject(o, k, (double)v);
    else cJSON_AddNullToObject(o, k);
}

static void json_str(cJSON *o, const char *k, const char *v)
{
    if (v) cJSON_AddStringToObject(o, k, v);
    else cJSON_AddNullToObject(o, k);
}

int hone_evidence_to_json(char **out, const hone_evidence *ev, const char *slot, const char *backend)
{
    *out = NULL;
    cJSON *root = cJSON_CreateObject(), *cand, *speed, *kp, *mp;
    if (!root) return hone_error_set(HONE_ENOMEM, "out of memory");
    json_str(root, "slot", slot);
    json_str(root, "backend", backend);
    if ((cand = cJSON_AddObjectToObject(root, "candidate"))) {
        json_str(cand, "hash", ev->candidate_hash);
        json_str(cand, "so_hash", ev->so_hash);
        json_str(cand, "origin_kind", ev->origin_kind);
        json_str(cand, "origin", ev->origin);
    }
    if ((speed = cJSON_AddObjectToObject(root, "speed"))) {
        json_num(speed, "speedup_median", ev->speedup_median);
        json_num(speed, "ci_low", ev->speedup_ci_low);
        json_num(speed, "ci_high", ev->speedup_ci_high);
        json_num(speed, "ci_level", ev->ci_level);
        json_num(speed, "incumbent_ns", ev->incumbent_ns);
        json_num(speed, "candidate_ns", ev->candidate_ns);
        json_int(speed, "reps", ev->reps);
        json_num(speed, "threshold", ev->threshold);
    }
    if ((kp = cJSON_AddObjectToObject(root, "kernel_parity"))) {
        json_str(kp, "tier", ev->parity_tier);
        json_num(kp, "candidate_max_abs_err", ev->candidate_max_abs_err);
        json_num(kp, "incumbent_max_abs_err", ev->incumbent_max_abs_err);
        json_num(kp, "slack", ev->slack);
        json_str(kp, "shapes", ev->shapes);
    }
    if ((mp = cJSON_AddObjectToObject(root, "model_parity"))) {
        json_num(mp, "max_abs_dlogit", ev->model_max_abs_dlogit);
        json_num(mp, "kl_mean", ev->model_kl_mean);
        json_num(mp, "kl_max", ev->model_kl_max);
        json_num(mp, "argmax_agreement", ev->model_argmax_agreement);
        json_int(mp, "prompts", ev->model_prompts);
        json_int(mp, "steps", ev->model_steps);
    }
    json_str(root, "device", ev->device);
    json_str(root, "model", ev->model);
    json_int(root, "seed", ev->seed);
    json_num(root, "guard_seconds", ev->guard_seconds);
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    if (!text) return hone_error_set(HONE_ENOMEM, "out of memory");
    size_t n = strlen(text);
    char *res = malloc(n + 2);
    if (!res) {
        cJSON_free(text);
        return hone_error_set(HONE_ENOMEM, "out of memory");
    }
    memcpy(res, text, n);
    res[n] = '\n';
    res[n + 1] = 0;
    cJSON_free(text);
    *out = res;
    return 0;
}
