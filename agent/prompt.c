/* Prompt assembly: the contract comes from the slot's descriptor (engine/slots.h), the
 * incumbent and its helpers from the kernels tree, so the prompt and the code cannot drift
 * apart. */
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

static const char *role_text(hone_slot_role r)
{
    switch (r) {
    case HONE_SLOT_ARG_OUT: return "output (write every element of your share)";
    case HONE_SLOT_ARG_INOUT: return "input and output (updated in place)";
    case HONE_SLOT_ARG_IN: return "input activations (f32, never written)";
    case HONE_SLOT_ARG_NORM: return "norm weights (f32, never written)";
    case HONE_SLOT_ARG_WEIGHT: return "weights of the slot's dtype (GGUF rows, never written)";
    case HONE_SLOT_ARG_INDEX: return "int32 ids / positions";
    case HONE_SLOT_ARG_KV: return "paged cache (f32, never written)";
    case HONE_SLOT_ARG_BLOCKS: return "int32 block table";
    case HONE_SLOT_ARG_SCRATCH: return "this share's own workspace (f32)";
    case HONE_SLOT_ARG_DIM: return "dimension";
    case HONE_SLOT_ARG_DTYPE: return "weight dtype";
    default: return "parameter";
    }
}

/* "[rows][cols]" from a dims list. */
static void dims_text(const hone_slot_desc *d, const int8_t *l, char *buf, size_t cap)
{
    size_t n = 0;
    buf[0] = 0;
    for (int i = 0; i < 5 && l[i] != HONE_SLOT_END && n < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, "[%s]", d->dims[l[i]]);
}

char *hone_prompt_contract(int slot)
{
    const hone_slot_desc *d = hone_slots_desc(slot);
    if (!d) return NULL;
    char *out = NULL, sh[96];
    size_t len = 0;
    FILE *m = open_memstream(&out, &len);
    if (!m) return NULL;
    fprintf(m, "/* %s */\n\n", hone_slots_rules);
    fprintf(m, "/* %s", d->name);
    if (d->dtype >= 0) fprintf(m, " (weights %s)", hone_dtype_name(d->dtype));
    fprintf(m, ": %s\n * Arguments:\n", d->math);
    for (int a = 0; a < d->n_args; a++) {
        const hone_slot_arg *g = &d->args[a];
        int tensor = hone_slots_arg_is_tensor(g->role);
        if (tensor) dims_text(d, g->dims, sh, sizeof sh);
        else sh[0] = 0;
        fprintf(m, " *   %-12s %s%s%s\n", g->name, role_text(g->role), tensor ? " " : "", sh);
    }
    dims_text(d, d->share_units, sh, sizeof sh);
    fprintf(m, " * Share: ith of nth takes its part of the units %s of the output. */\n", sh);
    char proto[1024];
    hone_slots_prototype(slot, proto, sizeof proto);
    const char *params = strchr(proto, '('); /* "void hone_cpu_x(...)" as the slot's typedef */
    if (d->fn_type) fprintf(m, "typedef void (*%s)%s;\n", d->fn_type, params ? params : "()");
    else fprintf(m, "typedef void (*hone_slot_%s_fn)%s;\n", d->name, params ? params : "()");
    fclose(m);
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
    char *contract = hone_prompt_contract(o->slot);
    if (!contract) {
        free(incumbent);
        free(common);
        return hone_error_set(HONE_ENOMEM, "no contract for slot %d", (int)o->slot);
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
