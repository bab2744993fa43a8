/* Prompt assembly: the contract comes from the slot's descriptor (engine/slots.h), the
 * incumbent and its helpers from the kernels tree, so the prompt and the code cannot drift
 * apart. */
#include "prompt.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "candidates/kernel_loader.h"
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

/* ---- the helpers an incumbent uses, out of kernels/cpu/common.h ---- */

typedef struct {
    const char *b, *e;   /* the unit's text, its leading comment included */
    char name[80];       /* the name it defines; "" for a line kept as structure */
    int keep;
} unit;

static int ident_char(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'; }

/* Whether [b, e) mentions the identifier name as a whole word. */
static int mentions(const char *b, const char *e, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = b; p + n <= e; p++)
        if (!memcmp(p, name, n) && (p == b || !ident_char(p[-1])) && (p + n == e || !ident_char(p[n]))) return 1;
    return 0;
}

static const char *line_end(const char *p, const char *end)
{
    const char *q = memchr(p, '\n', (size_t)(end - p));
    return q ? q + 1 : end;
}

static int starts(const char *p, const char *end, const char *w)
{
    size_t n = strlen(w);
    return (size_t)(end - p) >= n && !memcmp(p, w, n);
}

/* The name a definition starting at [b, e) defines: the identifier before the first "(" that
 * follows an identifier (a function), the macro's name, or a typedef's name. */
static void unit_name(const char *b, const char *e, char *out, size_t cap)
{
    out[0] = 0;
    const char *p = b, *nb = NULL, *ne = NULL;
    if (starts(p, e, "#define")) {
        for (p += 7; p < e && (*p == ' ' || *p == '\t'); p++) {}
        for (nb = p; p < e && ident_char(*p); p++) {}
        ne = p;
    } else if (starts(p, e, "typedef")) {
        const char *semi = memchr(b, ';', (size_t)(e - b));
        const char *star = memchr(b, '*', (size_t)(e - b));
        if (star && (!semi || star < semi) && star > b && star[-1] == '(') { /* a function pointer */
            for (p = star + 1; p < e && *p == ' '; p++) {}
            for (nb = p; p < e && ident_char(*p); p++) {}
            ne = p;
        } else if (semi) {
            for (ne = semi; ne > b && !ident_char(ne[-1]); ne--) {}
            for (nb = ne; nb > b && ident_char(nb[-1]); nb--) {}
        }
    } else {
        for (; p < e; p++) {
            if (!ident_char(*p) || (p > b && ident_char(p[-1]))) continue;
            const char *q = p;
            while (q < e && ident_char(*q)) q++;
            const char *r = q;
            while (r < e && (*r == ' ' || *r == '\n')) r++;
            if (r < e && *r == '(' && strncmp(p, "__attribute__", 13) && (q - p) < (ptrdiff_t)cap) {
                nb = p;
                ne = q;
                break;
            }
            p = q;
        }
    }
    if (nb && ne > nb && (size_t)(ne - nb) < cap) {
        memcpy(out, nb, (size_t)(ne - nb));
        out[ne - nb] = 0;
    }
}

/* Splits header into units: definitions (with their leading comments) and single structural
 * lines (preprocessor conditionals, includes); blank and other lines are dropped. */
static int split_units(const char *h, unit *u, int cap)
{
    const char *end = h + strlen(h), *p = h, *comment = NULL;
    int n = 0;
    while (p < end && n < cap) {
        const char *le = line_end(p, end);
        if (starts(p, end, "/*") || starts(p, end, " *") || starts(p, end, "//")) {
            if (!comment) comment = p;
            p = le;
            continue;
        }
        int def = starts(p, end, "static ") || starts(p, end, "typedef") ||
                  (starts(p, end, "#define") && !mentions(p, le, "HONE_KERNELS_CPU_COMMON_H"));
        if (def) {
            const char *e = le;
            if (starts(p, end, "#define")) {
                while (e < end && e - 2 >= p && e[-2] == '\\') e = line_end(e, end);
            } else if (starts(p, end, "typedef") && memchr(p, ';', (size_t)(le - p))) {
                /* one line */
            } else {
                /* up to the line that is a lone closing brace, or a prototype's ';' */
                const char *q = p;
                for (;;) {
                    const char *qe = line_end(q, end);
                    if (starts(q, end, "}") || (q == p && memchr(q, ';', (size_t)(qe - q)) && !memchr(q, '{', (size_t)(qe - q))))
                        { e = qe; break; }
                    if (qe >= end) { e = end; break; }
                    q = qe;
                }
            }
            u[n].b = comment ? comment : p;
            u[n].e = e;
            unit_name(p, e, u[n].name, sizeof u[n].name);
            u[n].keep = 0;
            n++;
            p = e;
        } else {
            if (p[0] == '#' && !mentions(p, le, "HONE_KERNELS_CPU_COMMON_H")) {
                u[n].b = p;
                u[n].e = le;
                u[n].name[0] = 0;
                u[n].keep = 1;
                n++;
            }
            p = le;
        }
        comment = NULL;
    }
    return n;
}

char *hone_prompt_helpers(const char *header, const char *source)
{
    enum { MAX_UNITS = 512 };
    unit *u = calloc(MAX_UNITS, sizeof *u);
    if (!u) return NULL;
    int n = split_units(header, u, MAX_UNITS);
    const char *src_end = source + strlen(source);
    for (int i = 0; i < n; i++)
        if (u[i].name[0] && mentions(source, src_end, u[i].name)) u[i].keep = 1;
    for (int changed = 1; changed;) { /* what the chosen ones use, to a fixed point */
        changed = 0;
        for (int i = 0; i < n; i++) {
            if (!u[i].name[0] || u[i].keep) continue;
            for (int j = 0; j < n && !u[i].keep; j++)
                if (u[j].keep && u[j].name[0] && mentions(u[j].b, u[j].e, u[i].name)) u[i].keep = changed = 1;
        }
    }
    char *out = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&out, &len);
    if (m) {
        for (int i = 0; i < n; i++)
            if (u[i].keep) fwrite(u[i].b, 1, (size_t)(u[i].e - u[i].b), m);
        fclose(m);
    }
    free(u);
    return out;
}

int hone_prompt_build(const hone_prompt_opts *o, char **out_system, char **out_user)
{
    const char *dir = o->source_dir ? o->source_dir : HONE_SOURCE_DIR;
    int cuda = o->backend && !strcmp(o->backend, "cuda");
    char path[4096], inc_path[4096], entry[96];
    *out_system = *out_user = NULL;
    snprintf(entry, sizeof entry, "hone_%s_%s", cuda ? "cuda" : "cpu", hone_slots_name(o->slot));
    int served = 0;
    if (cuda)
        snprintf(inc_path, sizeof inc_path, "%s/kernels/cuda/%s.cu", dir, hone_slots_name(o->slot));
    else
        served = hone_kernel_loader_source(inc_path, sizeof inc_path, o->kernels_dir, dir, hone_slots_name(o->slot));
    char *incumbent = slurp(inc_path);
    if (!incumbent) return hone_error_set(HONE_EIO, "cannot read the incumbent %s", inc_path);
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
    if (served)
        fprintf(m, "# The incumbent: the approved kernel served now (%s)\n```c\n%s```\n\n", inc_path, incumbent);
    else
        fprintf(m, "# The incumbent (kernels/%s/%s.%s)\n```%s\n%s```\n\n", cuda ? "cuda" : "cpu",
                hone_slots_name(o->slot), cuda ? "cu" : "c", cuda ? "cuda" : "c", incumbent);
    if (common && cuda) {
        fprintf(m, "# Helpers you may include (kernels/cuda/common.cuh)\n```cuda\n%s```\n\n", common);
    } else if (common) {
        /* what the incumbent uses, not the whole header: the prompt stays small enough for a
         * small model's context (this engine's own, --llm self) */
        char *used = hone_prompt_helpers(common, incumbent);
        if (used && o->level == 0)
            fprintf(m, "# The helpers of kernels/cpu/common.h the incumbent uses (the whole header is "
                    "there to #include)\n```c\n%s```\n\n", used);
        else if (used)
            fprintf(m, "# kernels/cpu/common.h (#include it) defines the helpers the incumbent calls; "
                    "their names are in the incumbent above\n\n");
        free(used);
    }
    if (o->best_source)
        fprintf(m, "# The best kernel accepted so far in this run (%s): beat it\n```c\n%s```\n\n",
                o->best_summary ? o->best_summary : "accepted", o->best_source);
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
