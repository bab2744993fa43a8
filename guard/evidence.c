/* The evidence record as JSON (cJSON): unknown values (NaN doubles, negative counts, NULL
 * strings) become null; and the machine it was measured on. */
#include "evidence.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "candidates/compile.h"
#include "engine/error.h"
#include "engine/slots.h"

const double hone_evidence_quantile_at[HONE_EVIDENCE_NQ] = {0, 0.10, 0.25, 0.50, 0.75, 0.90, 1.0};

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void hone_evidence_quantiles(double q[HONE_EVIDENCE_NQ], const double *v, int n)
{
    double *s = n > 0 ? malloc(sizeof *s * (size_t)n) : NULL;
    for (int k = 0; k < HONE_EVIDENCE_NQ; k++) q[k] = NAN;
    if (!s) return;
    memcpy(s, v, sizeof *s * (size_t)n);
    qsort(s, (size_t)n, sizeof *s, cmp_d);
    for (int k = 0; k < HONE_EVIDENCE_NQ; k++) { /* linear interpolation between order statistics */
        double x = hone_evidence_quantile_at[k] * (n - 1);
        int i = (int)x;
        double f = x - i;
        q[k] = i + 1 < n ? s[i] * (1 - f) + s[i + 1] * f : s[n - 1];
    }
    free(s);
}

/* The flags of /proc/cpuinfo's "flags" line that decide which code a kernel may run. */
static const char *const isa_flags[] = {"sse4_2", "avx", "avx2", "fma", "f16c", "bmi2", "avx512f",
                                        "avx512bw", "avx512vl", "avx512dq", "avx512_vnni",
                                        "avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16", NULL};

static void machine_cpuinfo(hone_evidence_machine *m)
{
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char *line = NULL;
    size_t cap = 0;
    int have_model = 0, have_flags = 0, siblings = -1, cores = -1;
    while (getline(&line, &cap, f) > 0) {
        char *c = strchr(line, ':');
        if (!c) continue;
        char *v = c + 1 + (c[1] == ' ');
        v[strcspn(v, "\n")] = 0;
        if (!have_model && strncmp(line, "model name", 10) == 0) {
            snprintf(m->cpu_model, sizeof m->cpu_model, "%s", v);
            have_model = 1;
        } else if (cores < 0 && strncmp(line, "cpu cores", 9) == 0) {
            cores = atoi(v);
        } else if (siblings < 0 && strncmp(line, "siblings", 8) == 0) {
            siblings = atoi(v);
        } else if (!have_flags && strncmp(line, "flags", 5) == 0) {
            have_flags = 1;
            size_t o = 0;
            for (int k = 0; isa_flags[k]; k++) {
                size_t len = strlen(isa_flags[k]);
                for (char *p = v; (p = strstr(p, isa_flags[k])); p += len)
                    if ((p == v || p[-1] == ' ') && (p[len] == ' ' || p[len] == 0)) {
                        if (o + len + 2 < sizeof m->cpu_flags) {
                            if (o) m->cpu_flags[o++] = ' ';
                            memcpy(m->cpu_flags + o, isa_flags[k], len + 1);
                            o += len;
                        }
                        break;
                    }
            }
        }
    }
    free(line);
    fclose(f);
    /* physical cores of the CPUs this process sees: "cpu cores" is per package; with SMT the
     * online threads are siblings / cores per core */
    if (cores > 0 && siblings > 0 && m->threads > 0) m->cores = m->threads * cores / siblings;
}

void hone_evidence_machine_detect(hone_evidence_machine *m)
{
    memset(m, 0, sizeof *m);
    m->cores = -1;
    m->threads = (int)sysconf(_SC_NPROCESSORS_ONLN);
    machine_cpuinfo(m);
    hone_compile_cpu_compiler(m->compiler, sizeof m->compiler); /* "cc: unknown" when it cannot run */
    struct utsname u;
    if (uname(&u) == 0) snprintf(m->os, sizeof m->os, "%.40s %.80s %.30s", u.sysname, u.release, u.machine);
}

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

/* A char-array field: "" is unknown. */
static void json_text(cJSON *o, const char *k, const char *v) { json_str(o, k, v[0] ? v : NULL); }

static void json_quantiles(cJSON *o, const char *k, const double q[HONE_EVIDENCE_NQ])
{
    if (!isfinite(q[3])) {
        cJSON_AddNullToObject(o, k);
        return;
    }
    cJSON *a = cJSON_AddArrayToObject(o, k);
    for (int i = 0; a && i < HONE_EVIDENCE_NQ; i++)
        cJSON_AddItemToArray(a, isfinite(q[i]) ? cJSON_CreateNumber(q[i]) : cJSON_CreateNull());
}

/* pct of a 0..1 fraction, or null */
static void json_pct(cJSON *o, const char *k, double frac) { json_num(o, k, 100.0 * frac); }

static void json_shapes(cJSON *root, const hone_evidence *ev)
{
    cJSON *arr = cJSON_AddArrayToObject(root, "shapes");
    for (int i = 0; arr && i < ev->n_shapes && i < HONE_EVIDENCE_MAX_SHAPES; i++) {
        const hone_evidence_shape *s = &ev->shape[i];
        cJSON *o = cJSON_CreateObject();
        if (!o) break;
        cJSON_AddItemToArray(arr, o);
        cJSON_AddStringToObject(o, "shape", s->desc);
        cJSON_AddBoolToObject(o, "gate", s->gate != 0);
        json_int(o, "reps", s->reps);
        json_num(o, "incumbent_ns", s->incumbent_ns);
        json_num(o, "candidate_ns", s->candidate_ns);
        json_num(o, "speedup", s->speedup);
        json_num(o, "ci_low", s->ci_low);
        json_num(o, "ci_high", s->ci_high);
        json_quantiles(o, "incumbent_ns_quantiles", s->incumbent_q);
        json_quantiles(o, "candidate_ns_quantiles", s->candidate_q);
        json_num(o, "bytes", s->bytes);
        json_num(o, "flops", s->flops);
        json_num(o, "roofline_ns", s->roofline_ns);
        json_pct(o, "incumbent_roofline_pct", s->incumbent_roofline);
        json_pct(o, "candidate_roofline_pct", s->candidate_roofline);
    }
}

/* The fields added for the report: shapes, e2e, noise, machine, reproduce, the LLM's cost. */
static void json_report_fields(cJSON *root, const hone_evidence *ev)
{
    json_shapes(root, ev);
    cJSON *e2e = cJSON_AddObjectToObject(root, "e2e"), *noise, *mach, *q;
    if (e2e) {
        json_num(e2e, "incumbent_tok_s", ev->e2e_incumbent_tok_s);
        json_num(e2e, "candidate_tok_s", ev->e2e_candidate_tok_s);
        json_quantiles(e2e, "incumbent_tok_s_quantiles", ev->e2e_incumbent_q);
        json_quantiles(e2e, "candidate_tok_s_quantiles", ev->e2e_candidate_q);
        json_num(e2e, "ratio_median", ev->e2e_ratio_median);
        json_num(e2e, "ci_low", ev->e2e_ratio_ci_low);
        json_num(e2e, "ci_high", ev->e2e_ratio_ci_high);
        json_int(e2e, "steps", ev->e2e_steps);
    }
    if ((noise = cJSON_AddObjectToObject(root, "noise"))) {
        json_quantiles(noise, "ab_ratio_quantiles", ev->ab_ratio_q);
        json_num(noise, "ab_ratio_iqr_rel", ev->ab_ratio_iqr_rel);
        json_num(noise, "bandwidth_gbps_before", ev->bandwidth_gbps_before);
        json_num(noise, "bandwidth_gbps_after", ev->bandwidth_gbps_after);
        json_int(noise, "preempted_reps", ev->preempted_reps);
    }
    if ((mach = cJSON_AddObjectToObject(root, "machine"))) {
        json_text(mach, "cpu_model", ev->machine.cpu_model);
        json_text(mach, "cpu_flags", ev->machine.cpu_flags);
        json_int(mach, "cores", ev->machine.cores);
        json_int(mach, "threads", ev->machine.threads);
        json_text(mach, "compiler", ev->machine.compiler);
        json_text(mach, "os", ev->machine.os);
    }
    json_text(root, "reproduce", ev->reproduce);
    cJSON_AddNumberToObject(root, "llm_prompt_tokens", ev->llm_prompt_tokens >= 0 ? ev->llm_prompt_tokens : -1);
    cJSON_AddNumberToObject(root, "llm_completion_tokens",
                            ev->llm_completion_tokens >= 0 ? ev->llm_completion_tokens : -1);
    json_num(root, "llm_cost_usd", ev->llm_cost_usd);
    if ((q = cJSON_AddArrayToObject(root, "quantiles")))
        for (int i = 0; i < HONE_EVIDENCE_NQ; i++) cJSON_AddItemToArray(q, cJSON_CreateNumber(hone_evidence_quantile_at[i]));
}

int hone_evidence_to_json(char **out, const hone_evidence *ev, const char *slot, const char *backend)
{
    *out = NULL;
    cJSON *root = cJSON_CreateObject(), *cand, *speed, *kp, *mp;
    if (!root) return hone_error_set(HONE_ENOMEM, "out of memory");
    json_str(root, "slot", slot);
    /* the contract the candidate was judged against (engine/slots.h hone_slots_rev) */
    int sid = slot ? hone_slots_from_name(slot) : -1;
    if (sid >= 0) cJSON_AddNumberToObject(root, "slot_rev", hone_slots_rev(sid));
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
    if (ev->seed >= 0) { /* a string: exact (see evidence.h) */
        char seed[32];
        snprintf(seed, sizeof seed, "%lld", (long long)ev->seed);
        cJSON_AddStringToObject(root, "seed", seed);
    } else {
        cJSON_AddNullToObject(root, "seed");
    }
    json_num(root, "guard_seconds", ev->guard_seconds);
    json_report_fields(root, ev);
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
