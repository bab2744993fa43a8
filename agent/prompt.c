/* Prompt assembly from the source tree: the contract is read from engine/slots.h itself, so
 * the prompt and the code cannot drift apart. */
#include "prompt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/error.h"
#include "engine/file.h"

#ifndef HONE_SOURCE_DIR
#define HONE_SOURCE_DIR "."
#endif

/* The file's text, or NULL (the callers say which file they could not read). */
static char *slurp(const char *path)
{
    char *s = NULL;
    return hone_file_read(path, &s, NULL) ? NULL : s;
}

/* The typedef name of a slot's function type in engine/slots.h. */
static const char *typedef_name(hone_slot_id slot)
{
    if (slot >= HONE_SLOT_MATVEC_F32 && slot <= HONE_SLOT_MATVEC_Q4_1) return "hone_slot_matvec_fn";
    if (slot >= HONE_SLOT_MATMUL_F32 && slot <= HONE_SLOT_MATMUL_Q4_1) return "hone_slot_matmul_fn";
    switch (slot) {
    case HONE_SLOT_EMBED: return "hone_slot_embed_fn";
    case HONE_SLOT_RMSNORM: return "hone_slot_rmsnorm_fn";
    case HONE_SLOT_ROPE: return "hone_slot_rope_fn";
    case HONE_SLOT_ATTENTION_DECODE: return "hone_slot_attention_decode_fn";
    case HONE_SLOT_ATTENTION_PREFILL: return "hone_slot_attention_prefill_fn";
    case HONE_SLOT_SWIGLU: return "hone_slot_swiglu_fn";
    case HONE_SLOT_ADD: return "hone_slot_add_fn";
    default: return NULL;
    }
}

char *hone_prompt_contract(const char *source_dir, hone_slot_id slot)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/engine/slots.h", source_dir ? source_dir : HONE_SOURCE_DIR);
    char *h = slurp(path);
    const char *td = typedef_name(slot);
    if (!h || !td) {
        free(h);
        return NULL;
    }
    char needle[96];
    snprintf(needle, sizeof needle, "(*%s)", td);
    char *at = strstr(h, needle);
    char *out = NULL;
    if (at) {
        /* back to the start of "typedef", then to the comment above it */
        char *start = at;
        while (start > h && strncmp(start, "typedef", 7)) start--;
        char *c = start;
        while (c > h && (c[-1] == '\n' || c[-1] == ' ')) c--;
        if (c - h >= 2 && !strncmp(c - 2, "*/", 2)) {
            char *open = c - 2;
            while (open > h && strncmp(open, "/*", 2)) open--;
            start = open;
        }
        char *end = strchr(at, ';');
        if (end) out = strndup(start, (size_t)(end + 1 - start));
    }
    /* the rules block at the top of the header applies to every slot */
    char *rules_start = strstr(h, "Rules every CPU slot");
    char *rules_end = rules_start ? strstr(rules_start, "*/") : NULL;
    if (out && rules_start && rules_end) {
        size_t n = strlen(out) + (size_t)(rules_end - rules_start) + 64;
        char *both = malloc(n);
        if (both) {
            snprintf(both, n, "/* %.*s*/\n\n%s", (int)(rules_end - rules_start), rules_start, out);
            free(out);
            out = both;
        }
    }
    free(h);
    return out;
}

void hone_prompt_cpu_device(char *buf, int cap)
{
    char model[256] = "unknown CPU", flags[8192] = "";
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[8192];
    while (f && fgets(line, sizeof line, f)) {
        if (!strncmp(line, "model name", 10) && strchr(line, ':')) {
            snprintf(model, sizeof model, "%s", strchr(line, ':') + 2);
            model[strcspn(model, "\n")] = 0;
        } else if (!strncmp(line, "flags", 5) && strchr(line, ':') && !flags[0]) {
            snprintf(flags, sizeof flags, " %s ", strchr(line, ':') + 2);
        }
    }
    if (f) fclose(f);
    static const char *const feats[] = {"avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl",
                                        "avx512dq", "avx512_bf16", "avx512_vnni", "avx512_fp16",
                                        "avx_vnni", "amx_tile", "asimd", "sve"};
    int o = snprintf(buf, (size_t)cap, "%s, %ld online CPUs, SIMD:", model, sysconf(_SC_NPROCESSORS_ONLN));
    for (size_t i = 0; i < sizeof feats / sizeof feats[0] && o < cap; i++) {
        char pat[64];
        snprintf(pat, sizeof pat, " %s ", feats[i]);
        if (strstr(flags, pat)) o += snprintf(buf + o, (size_t)(cap - o), " %s", feats[i]);
    }
}

static const char system_cpu[] =
    "You are an expert performance engineer who writes C11 compute kernels for Hone, an LLM "
    "inference engine that must never change the model's results. You rewrite one kernel slot "
    "at a time to make it faster on the given CPU while keeping its exact contract. Your kernel "
    "is checked against a float64 oracle on fresh random inputs of many shapes (including odd "
    "ones), for bit-for-bit determinism, for not touching memory outside its share, and timed "
    "against the incumbent by the harness. Answer with exactly one ```c code block holding the "
    "complete kernel file, then at most three sentences on the idea.";

static const char system_cuda[] =
    "You are an expert CUDA performance engineer who writes kernels for Hone, an LLM inference "
    "engine that must never change the model's results. You rewrite one kernel slot at a time "
    "to make it faster on the given GPU while keeping its exact contract. Your kernel is checked "
    "against a float64 oracle on fresh random inputs of many shapes, for determinism, and timed "
    "against the incumbent by the harness. Answer with exactly one ```cuda code block holding "
    "the complete device-code file, then at most three sentences on the idea.";

static const char rules_cpu[] =
    "Hard rules (a candidate that breaks one is rejected before it runs):\n"
    "- Define exactly `void %s(...)` with the parameter types of the contract, in one C11 file.\n"
    "- Compute only the share ith of nth described in the contract; the shares together cover the "
    "output exactly once. Never create threads, allocate memory, make system calls, read clocks, "
    "do I/O, or keep state between calls (no mutable globals or static locals).\n"
    "- Allowed headers only: <stdint.h> <stddef.h> <math.h> <string.h> <float.h> <stdbool.h> "
    "<immintrin.h> \"kernels/cpu/common.h\" \"engine/dtype.h\". No inline assembly.\n"
    "- Every output element must come from one fixed sequence of f32 operations that does not "
    "depend on ith, nth or the batch size. Weights are dequantised exactly; activations stay "
    "f32: never quantise or round activations, never accumulate in a lower precision.\n"
    "- Your error against the float64 oracle must not exceed the incumbent's (bitwise equality "
    "with the incumbent is the best outcome). NaN and Inf must appear exactly where the oracle's do.\n"
    "- It must be correct for every shape allowed by the contract, not only the shapes listed.\n";

static const char rules_cuda[] =
    "Hard rules (a candidate that breaks one is rejected before it runs):\n"
    "- Device code only: define `extern \"C\" __global__ void %s(...)` with the contract's "
    "parameters and keep the launch-configuration declaration convention of the incumbent.\n"
    "- No printf, no clock()/clock64()/%%globaltimer reads, no device malloc/new, no host code.\n"
    "- Weights are dequantised exactly; activations stay f32; accumulate in f32 or wider. Your "
    "error against the float64 oracle must not exceed the incumbent's; results must be "
    "deterministic run to run.\n";

int hone_prompt_build(const hone_prompt_opts *o, char **out_system, char **out_user)
{
    const char *dir = o->source_dir ? o->source_dir : HONE_SOURCE_DIR;
    int cuda = o->backend && !strcmp(o->backend, "cuda");
    char path[4096], entry[96];
    *out_system = *out_user = NULL;
    snprintf(entry, sizeof entry, "hone_%s_%s", cuda ? "cuda" : "cpu", hone_slots_name(o->slot));
    snprintf(path, sizeof path, "%s/kernels/%s/%s.%s", dir, cuda ? "cuda" : "cpu",
             hone_slots_name(o->slot), cuda ? "cu" : "c");
    char *incumbent = slurp(path);
    if (!incumbent) return hone_error_set(HONE_EIO, "cannot read the incumbent %s", path);
    snprintf(path, sizeof path, "%s/kernels/%s/common.%s", dir, cuda ? "cuda" : "cpu", cuda ? "cuh" : "h");
    char *common = slurp(path);
    char *contract = hone_prompt_contract(dir, o->slot);
    if (!contract) {
        free(incumbent);
        free(common);
        return hone_error_set(HONE_EIO, "cannot read the contract of %s from %s/engine/slots.h",
                              hone_slots_name(o->slot), dir);
    }
    /* assemble the user message in an open_memstream */
    char *user = NULL;
    size_t ulen = 0;
    FILE *m = open_memstream(&user, &ulen);
    fprintf(m, "# Task\nMake the `%s` slot faster on this %s. The function to write is `%s`.\n\n",
            hone_slots_name(o->slot), cuda ? "GPU" : "CPU", entry);
    fprintf(m, "# Contract (engine/slots.h)\n```c\n%s\n```\n\n", contract);
    fprintf(m, cuda ? rules_cuda : rules_cpu, entry);
    fprintf(m, "\n# Where the time goes\n%s\n\n", o->profile ? o->profile : "(no profile)");
    fprintf(m, "# Shapes this model calls it with\n%s\n\n", o->shapes ? o->shapes : "(unknown)");
    fprintf(m, "# Device\n%s\n\n", o->device ? o->device : "(unknown)");
    fprintf(m, "# The incumbent (kernels/%s/%s.%s)\n```%s\n%s```\n\n", cuda ? "cuda" : "cpu",
            hone_slots_name(o->slot), cuda ? "cu" : "c", cuda ? "cuda" : "c", incumbent);
    if (common)
        fprintf(m, "# Helpers you may include (kernels/%s/common.%s)\n```%s\n%s```\n\n",
                cuda ? "cuda" : "cpu", cuda ? "cuh" : "h", cuda ? "cuda" : "c", common);
    if (o->n_history > 0) {
        fprintf(m, "# Earlier candidates for this slot, and why they were rejected\n");
        for (int i = 0; i < o->n_history; i++)
            fprintf(m, "- %s: %s\n", o->history[i].summary, o->history[i].reason);
        fprintf(m, "Do not repeat these mistakes.\n\n");
    }
    fprintf(m, "Reply with the complete file in one ```%s block.\n", cuda ? "cuda" : "c");
    fclose(m);
    free(incumbent);
    free(common);
    free(contract);
    *out_system = strdup(cuda ? system_cuda : system_cpu);
    *out_user = user;
    if (!*out_system || !user) {
        free(*out_system);
        free(user);
        *out_system = *out_user = NULL;
        return hone_error_set(HONE_ENOMEM, "out of memory");
    }
    return 0;
}
