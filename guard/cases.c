/* The guard's cases (see cases.h): built from the slot descriptors alone (engine/slots.h):
 * their shape sets, inputs by argument role, layout, generic calls and the oracles. */
#include "cases.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <sys/mman.h>

#include "candidates/worker.h"
#include "engine/dtype.h"
#include "engine/error.h"
#include "guard/oracle.h"

/* ---- layout ---------------------------------------------------------------------------- */

#define PAGE ((size_t)4096)

static size_t page_up(size_t x) { return (x + PAGE - 1) & ~(PAGE - 1); }
static size_t page_down(size_t x) { return x & ~(PAGE - 1); }

/* Places a buffer of `bytes` (with `pre` bytes of canary before it and `tail` after it) so
 * that it ends `tail` bytes before a page boundary, after a guard page:
 * [guard][... pre | buffer | tail][next guard]. Returns the buffer's offset; *off moves to the
 * next guard page, which the next buffer shares. */
static size_t place(size_t *off, size_t bytes, size_t pre, size_t tail)
{
    size_t start = page_up(*off) + PAGE; /* the leading guard page is [page_up(*off), start) */
    size_t end = start + page_up(bytes + pre + tail > 0 ? bytes + pre + tail : 1);
    *off = end;
    return end - tail - bytes;
}

/* The tail after output k: output 0 (the first run, and the fresh-input run) ends exactly at
 * its guard page; the next runs end 64 and 160 bytes before theirs (canaries there), so the
 * three runs' addresses differ in their low bits and a result that depends on the address
 * differs between runs. */
static size_t out_tail(int k) { return k % 3 == 0 ? 0 : k % 3 == 1 ? 64 : 160; }

/* Fills the case's geometry from its descriptor and shape, and lays its inputs, outputs
 * and scratch out from *off on. */
static void layout(hone_case *c, size_t *off)
{
    const hone_slot_desc *d = c->d;
    const hone_slot_shape *s = &c->shape;
    c->out_arg = hone_slots_out_arg(d);
    c->scratch_arg = -1;
    c->inplace = d->args[c->out_arg].role == HONE_SLOT_ARG_INOUT;
    c->out_len = hone_slots_arg_elems(d, c->out_arg, s);
    c->cmp_rows = hone_slots_dims_prod(d->cmp_rows, s);
    c->cmp_row_len = c->cmp_rows ? c->out_len / c->cmp_rows : c->out_len;
    c->share_units = hone_slots_dims_prod(d->share_units, s);
    c->share_unit_len = hone_slots_dims_prod(d->share_len, s);
    c->n_kv = 0;
    for (int a = 0; a < d->n_args; a++) {
        const hone_slot_arg *g = &d->args[a];
        if (g->role == HONE_SLOT_ARG_SCRATCH) {
            c->scratch_arg = a;
            c->scratch_len = hone_slots_arg_elems(d, a, s);
            c->scratch_row = hone_slots_dims_prod(g->dims, s);
        }
        if (g->role == HONE_SLOT_ARG_KV) c->n_kv = s->d[g->bound];
    }
    hone_slots_shape_text(d, s, c->desc, (int)sizeof c->desc);
    for (int a = 0; a < d->n_args; a++) {
        if (!hone_slots_arg_is_input(d->args[a].role)) continue;
        c->in_bytes[a] = (size_t)hone_slots_arg_bytes(d, a, s);
        c->in_off[a] = place(off, c->in_bytes[a], 0, 0);
    }
    for (int k = 0; k < HONE_CASES_NOUT; k++)
        c->out_off[k] = place(off, (size_t)c->out_len * 4, HONE_CASES_CANARY, out_tail(k));
    c->scratch_off = place(off, (size_t)c->scratch_len * 4, HONE_CASES_CANARY, 0);
}

/* ---- inputs ----------------------------------------------------------------------------- */

static void fill(hone_case *c, uint8_t *base, uint64_t *st)
{
    void *in[HONE_SLOT_MAX_ARGS] = {NULL};
    for (int a = 0; a < c->d->n_args; a++)
        if (hone_slots_arg_is_input(c->d->args[a].role)) in[a] = base + c->in_off[a];
    hone_slots_fill_inputs(c->d, &c->shape, in, st);
}

uint64_t hone_cases_hash_inputs(const hone_case_set *s, const hone_case *c)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (int i = 0; i < c->d->n_args; i++) {
        const uint8_t *p = s->base + c->in_off[i];
        for (size_t k = 0; k < c->in_bytes[i]; k++) h = (h ^ p[k]) * 0x100000001b3ull;
    }
    return h;
}

double hone_cases_cost(const hone_case *c, double *flops)
{
    double bytes = 0, f = 0;
    if (c->d->cost) c->d->cost(c->d, &c->shape, &bytes, &f);
    if (flops) *flops = f;
    return bytes;
}

int hone_cases_new(hone_case_set *out, int slot, const hone_model *m, uint64_t seed)
{
    memset(out, 0, sizeof *out);
    const hone_slot_desc *d = hone_slots_desc(slot);
    if (!d || !d->shapes) return hone_error_set(HONE_EINVAL, "slot %d has no shape set", slot);
    hone_slot_shape *shapes = malloc(sizeof *shapes * HONE_SLOT_MAX_SHAPES);
    hone_case *cs = shapes ? calloc(HONE_SLOT_MAX_SHAPES, sizeof *cs) : NULL;
    if (!cs) {
        free(shapes);
        return hone_error_set(HONE_ENOMEM, "out of memory");
    }
    int n = d->shapes(d, m, shapes, HONE_SLOT_MAX_SHAPES);
    size_t off = 0;
    double best = -1;
    int tbest = 0;
    for (int i = 0; i < n; i++) {
        cs[i].slot = slot;
        cs[i].d = d;
        cs[i].shape = shapes[i];
        layout(&cs[i], &off);
        double bytes = hone_cases_cost(&cs[i], NULL);
        if (!shapes[i].edge && bytes > best) {
            best = bytes;
            tbest = i;
        }
    }
    free(shapes);
    if (n > 0) cs[tbest].timing = 1;
    out->bytes = off;
    out->base = hone_worker_shared_new(off);
    if (!out->base) {
        free(cs);
        return HONE_ENOMEM;
    }
    out->c = cs;
    out->n = n;
    out->seed = seed;
    /* every page that holds no buffer is a guard page */
    if (mprotect(out->base, off, PROT_NONE) != 0) {
        hone_cases_free(out);
        return hone_error_set(HONE_EIO, "guard pages: %s", strerror(errno));
    }
    for (int i = 0; i < n; i++) {
        size_t lo[HONE_CASES_MAX_RANGES], hi[HONE_CASES_MAX_RANGES];
        int nr = hone_cases_ranges(&cs[i], lo, hi, HONE_CASES_MAX_RANGES);
        for (int k = 0; k < nr; k++)
            if (mprotect(out->base + lo[k], hi[k] - lo[k], PROT_READ | PROT_WRITE) != 0) {
                hone_cases_free(out);
                return hone_error_set(HONE_EIO, "guard pages: %s", strerror(errno));
            }
    }
    uint64_t st = seed;
    for (int i = 0; i < HONE_CASES_CANARY; i++) out->canary[i] = (uint8_t)(hone_slots_rand(&st) | 1);
    for (int i = 0; i < n; i++) {
        hone_case *c = &cs[i];
        fill(c, out->base, &st);
        if (c->shape.edge) {
            size_t l = strlen(c->desc);
            snprintf(c->desc + l, sizeof c->desc - l, " (edge values)");
        }
        c->in_hash = hone_cases_hash_inputs(out, c);
        for (int k = 0; k < HONE_CASES_NOUT; k++) {
            memcpy(out->base + c->out_off[k] - HONE_CASES_CANARY, out->canary, HONE_CASES_CANARY);
            memcpy(out->base + c->out_off[k] + (size_t)c->out_len * 4, out->canary, out_tail(k));
        }
        memcpy(out->base + c->scratch_off - HONE_CASES_CANARY, out->canary, HONE_CASES_CANARY);
    }
    return 0;
}

void hone_cases_free(hone_case_set *s)
{
    if (!s) return;
    hone_worker_shared_free(s->base, s->bytes);
    free(s->c);
    memset(s, 0, sizeof *s);
}

const hone_case *hone_cases_timing(const hone_case_set *s)
{
    const hone_case *tc = &s->c[0];
    for (int i = 0; i < s->n; i++)
        if (s->c[i].timing) tc = &s->c[i];
    return tc;
}

float *hone_cases_out(const hone_case_set *s, const hone_case *c, int k)
{
    return (float *)(s->base + c->out_off[k]);
}

float *hone_cases_scratch(const hone_case_set *s, const hone_case *c)
{
    return (float *)(s->base + c->scratch_off);
}

static void poison_floats(float *p, int64_t n)
{
    uint32_t v = HONE_CASES_POISON;
    for (int64_t i = 0; i < n; i++) memcpy(&p[i], &v, 4);
}

void hone_cases_poison(const hone_case_set *s, const hone_case *c, float *out)
{
    if (c->inplace) {
        memcpy(out, s->base + c->in_off[c->out_arg], (size_t)c->out_len * 4);
        return;
    }
    poison_floats(out, c->out_len);
}

/* 1 if the canary before buffer `off` and the zero bytes before it on its first page are intact. */
static int before_ok(const hone_case_set *s, size_t off)
{
    const uint8_t *pre = s->base + off - HONE_CASES_CANARY;
    if (memcmp(pre, s->canary, HONE_CASES_CANARY) != 0) return 0;
    for (const uint8_t *g = s->base + page_down(off - HONE_CASES_CANARY); g < pre; g++)
        if (*g) return 0;
    return 1;
}

int hone_cases_canaries_ok(const hone_case_set *s, const hone_case *c, char *what, size_t cap)
{
    /* past the end of a buffer is a guard page (a fault), or the tail canary before it;
     * before it, its canary */
    for (int k = 0; k < HONE_CASES_NOUT; k++) {
        if (!before_ok(s, c->out_off[k])) {
            snprintf(what, cap, "wrote before its output (%s)", c->desc);
            return 0;
        }
        if (memcmp(s->base + c->out_off[k] + (size_t)c->out_len * 4, s->canary, out_tail(k))) {
            snprintf(what, cap, "wrote past the end of its output (%s)", c->desc);
            return 0;
        }
    }
    if (!before_ok(s, c->scratch_off)) {
        snprintf(what, cap, "wrote before its scratch buffer (%s)", c->desc);
        return 0;
    }
    return 1;
}

/* One buffer of a case's span: its readable pages [lo, hi) (a guard page follows hi), where its
 * data ends (end <= hi: an output's tail canary lies between), and what it is. */
typedef struct {
    size_t lo, end, hi;
    const char *arg;   /* an input's argument name; NULL for the outputs and the scratch */
    int out;           /* the output's index; -1 for inputs and the scratch */
} case_buffer;

/* Buffer b of case c, in span order: the inputs in argument order, the outputs, the scratch.
 * 0 past the last. */
static int buffer_of(const hone_case *c, int b, case_buffer *o)
{
    for (int a = 0; a < c->d->n_args; a++)
        if (hone_slots_arg_is_input(c->d->args[a].role) && b-- == 0) {
            *o = (case_buffer){page_down(c->in_off[a]), c->in_off[a] + c->in_bytes[a],
                               c->in_off[a] + c->in_bytes[a], c->d->args[a].name, -1};
            return 1;
        }
    if (b < HONE_CASES_NOUT) {
        size_t end = c->out_off[b] + (size_t)c->out_len * 4;
        *o = (case_buffer){page_down(c->out_off[b] - HONE_CASES_CANARY), end, end + out_tail(b), NULL, b};
        return 1;
    }
    if (b > HONE_CASES_NOUT) return 0;
    size_t end = c->scratch_off + (size_t)c->scratch_len * 4;
    *o = (case_buffer){page_down(c->scratch_off - HONE_CASES_CANARY), end, end, NULL, -1};
    return 1;
}

int hone_cases_ranges(const hone_case *c, size_t *lo, size_t *hi, int cap)
{
    case_buffer cb;
    int n = 0;
    for (; n < cap && buffer_of(c, n, &cb); n++) {
        lo[n] = cb.lo;
        hi[n] = cb.hi;
    }
    return n;
}

int hone_cases_where(const hone_case_set *s, uintptr_t addr, char *buf, size_t cap)
{
    uintptr_t base = (uintptr_t)s->base;
    if (addr < base || addr >= base + s->bytes) return 0;
    size_t a = addr - base;
    for (int i = 0; i < s->n; i++) {
        const hone_case *c = &s->c[i];
        case_buffer cb;
        for (int k = 0; buffer_of(c, k, &cb); k++) {
            char name[64];
            if (cb.arg) snprintf(name, sizeof name, "input '%s'", cb.arg);
            else if (cb.out >= 0) snprintf(name, sizeof name, "output %d", cb.out);
            else snprintf(name, sizeof name, "the scratch buffer");
            if (a >= cb.hi && a < cb.hi + PAGE) { /* the guard page after the buffer */
                snprintf(buf, cap, "%zu bytes past the end of %s (%s)", a - cb.end, name, c->desc);
                return 1;
            }
            if (a < cb.lo && a + PAGE >= cb.lo) {
                snprintf(buf, cap, "%zu bytes before the page of %s (%s)", cb.lo - a, name, c->desc);
                return 1;
            }
        }
    }
    snprintf(buf, cap, "inside the case region at offset %zu", a);
    return 1;
}

void hone_cases_copy(uint8_t *dst, const uint8_t *src, const hone_case *c, int swap)
{
    size_t lo[HONE_CASES_MAX_RANGES], hi[HONE_CASES_MAX_RANGES];
    int n = hone_cases_ranges(c, lo, hi, HONE_CASES_MAX_RANGES);
    for (int k = 0; k < n; k++) {
        if (!swap) {
            memcpy(dst + lo[k], src + lo[k], hi[k] - lo[k]);
            continue;
        }
        uint8_t *a = dst + lo[k], *b = (uint8_t *)src + lo[k];
        for (size_t i = 0; i < hi[k] - lo[k]; i++) {
            uint8_t t = a[i];
            a[i] = b[i];
            b[i] = t;
        }
    }
}

static void case_values(const hone_case *c, const uint8_t *base, float *out, float *scratch,
                        hone_slot_value *v)
{
    const void *in[HONE_SLOT_MAX_ARGS] = {NULL};
    for (int a = 0; a < c->d->n_args; a++)
        if (hone_slots_arg_is_input(c->d->args[a].role)) in[a] = base + c->in_off[a];
    hone_slots_values(c->d, &c->shape, in, out, scratch, v);
}

void hone_cases_call(void *fn, const hone_case *c, const uint8_t *base, float *out,
                     float *scratch, int ith, int nth)
{
    hone_slot_value v[HONE_SLOT_MAX_ARGS];
    case_values(c, base, out, scratch, v);
    /* a call's shares go 0 .. nth - 1 here. Before the first, a slot that the caller finishes
     * gets its scratch poisoned: the fold must read what this call's shares left, not the partials
     * of an earlier call (a kernel that wrote none would pass on the incumbent's) */
    if (ith == 0 && c->d->finish && scratch) poison_floats(scratch, c->scratch_len);
    c->d->invoke(fn, v, ith, nth);
    /* after the last, the caller's part (attention_decode folds its shares' partials; trusted
     * code of this library, on numbers the kernel left) */
    if (ith == nth - 1 && c->d->finish) c->d->finish(v);
}

void hone_cases_span(const hone_case *c, size_t *lo, size_t *hi)
{
    size_t l[HONE_CASES_MAX_RANGES], h[HONE_CASES_MAX_RANGES];
    int n = hone_cases_ranges(c, l, h, HONE_CASES_MAX_RANGES);
    *lo = l[0];
    *hi = h[n - 1];
}

int64_t hone_cases_cuda_scratch_len(const hone_case *c)
{
    return c->scratch_arg < 0 ? 0 : c->share_units * c->scratch_row;
}

static void *arg_ptr(hone_cases_cuda_launch *o, int *k, const void *p)
{
    o->ptr[*k] = (void *)p;
    return &o->ptr[(*k)++];
}

static void *arg_i64(hone_cases_cuda_launch *o, int *k, int64_t v)
{
    o->i64[*k] = v;
    return &o->i64[(*k)++];
}

void hone_cases_cuda_args(hone_cases_cuda_launch *o, const hone_case *c, uint8_t *dev, size_t lo,
                          float *dev_out, float *scratch, int32_t *n_kv)
{
    const hone_slot_desc *d = c->d;
    hone_slot_value v[HONE_SLOT_MAX_ARGS];
    memset(o, 0, sizeof *o);
    hone_slots_scalars(d, &c->shape, v);
    int np = 0, ni = 0, nf = 0, n32 = 0, a = 0;
    for (int k = 0; k < d->n_args; k++) {
        const hone_slot_arg *g = &d->args[k];
        switch (g->role) {
        case HONE_SLOT_ARG_OUT:
        case HONE_SLOT_ARG_INOUT: o->args[a++] = arg_ptr(o, &np, dev_out); break;
        case HONE_SLOT_ARG_SCRATCH:
            o->args[a++] = arg_ptr(o, &np, scratch);
            o->args[a++] = arg_i64(o, &ni, c->scratch_row); /* the row stride */
            break;
        case HONE_SLOT_ARG_DIM:
            if (g->flags & HONE_SLOT_ARG_DEVICE_I32) o->args[a++] = arg_ptr(o, &np, n_kv);
            else o->args[a++] = arg_i64(o, &ni, v[k].i64);
            break;
        case HONE_SLOT_ARG_F32:
            o->f32[nf] = v[k].f32;
            o->args[a++] = &o->f32[nf++];
            break;
        case HONE_SLOT_ARG_DTYPE:
        case HONE_SLOT_ARG_I32:
            o->i32[n32] = v[k].i32;
            o->args[a++] = &o->i32[n32++];
            break;
        default: o->args[a++] = arg_ptr(o, &np, dev + (c->in_off[k] - lo)); break;
        }
    }
    o->items_x = hone_slots_dims_prod(d->cuda_x, &c->shape);
    o->items_y = hone_slots_dims_prod(d->cuda_y, &c->shape);
    o->n_args = a;
}

/* The built-in kinds' oracles (guard/oracle.h), called with the case's argument values in
 * signature order; a registered slot brings its own (hone_slot_desc.oracle). */
void hone_cases_oracle(const hone_case *c, const uint8_t *base, double *ref)
{
    const hone_slot_shape *s = &c->shape;
    const int64_t *D = s->d;
    hone_slot_value v[HONE_SLOT_MAX_ARGS];
    case_values(c, base, NULL, NULL, v);
    switch (c->d->kind) {
    case HONE_SLOT_KIND_EMBED: hone_oracle_embed(ref, v[1].cp, s->dtype, v[3].cp, D[0], D[1]); break;
    case HONE_SLOT_KIND_RMSNORM: hone_oracle_rmsnorm(ref, v[1].cp, v[2].cp, D[0], D[1], s->f[0]); break;
    case HONE_SLOT_KIND_MATVEC: hone_oracle_matvec(ref, s->dtype, v[1].cp, v[2].cp, D[0], D[1]); break;
    case HONE_SLOT_KIND_MATMUL:
        hone_oracle_matmul(ref, s->dtype, v[1].cp, v[2].cp, D[0], D[1], D[2]);
        break;
    case HONE_SLOT_KIND_ROPE:
        hone_oracle_rope(ref, v[0].cp, v[1].cp, D[0], D[1], D[2], D[3], s->f[0], s->flag);
        break;
    case HONE_SLOT_KIND_ATTENTION_DECODE:
        hone_oracle_attention_decode(ref, v[1].cp, v[2].cp, v[3].cp, v[4].cp, D[2], D[3], D[4],
                                     D[5], D[6], s->f[0]);
        break;
    case HONE_SLOT_KIND_ATTENTION_PREFILL:
        hone_oracle_attention_prefill(ref, v[1].cp, v[2].cp, v[3].cp, v[4].cp, D[0], D[1], D[3],
                                      D[4], D[5], D[6], s->f[0]);
        break;
    case HONE_SLOT_KIND_SWIGLU: hone_oracle_swiglu(ref, v[1].cp, v[2].cp, D[0]); break;
    case HONE_SLOT_KIND_GEGLU: hone_oracle_geglu(ref, v[1].cp, v[2].cp, D[0]); break;
    case HONE_SLOT_KIND_ROPE_FREQS:
        hone_oracle_rope_freqs(ref, v[0].cp, v[1].cp, v[2].cp, D[0], D[1], D[2], D[3], s->f[0], s->flag);
        break;
    case HONE_SLOT_KIND_ADD: hone_oracle_add(ref, v[1].cp, v[2].cp, D[0]); break;
    case HONE_SLOT_KIND_QKV:
        hone_oracle_qkv(ref, s->dtype, v[1].cp, v[2].cp, v[3].cp, v[4].cp, D[0], D[1], D[2], D[3]);
        break;
    case HONE_SLOT_KIND_FFN: hone_oracle_ffn(ref, s->dtype, v[1].cp, v[2].cp, v[3].cp, D[0], D[1]); break;
    case HONE_SLOT_KIND_RMSNORM_MATVEC:
        hone_oracle_rmsnorm_matvec(ref, s->dtype, v[1].cp, v[2].cp, v[3].cp, D[0], D[1], s->f[0]);
        break;
    default:
        if (c->d->oracle) c->d->oracle(c->d, s, v, ref);
        else for (int64_t i = 0; i < c->out_len; i++) ref[i] = NAN;
        break;
    }
}

int hone_cases_bound(const hone_case *c, const uint8_t *base, const double *ref, double *bound)
{
    const hone_slot_shape *s = &c->shape;
    const int64_t *D = s->d;
    hone_slot_value v[HONE_SLOT_MAX_ARGS];
    case_values(c, base, NULL, NULL, v);
    switch (c->d->kind) {
    case HONE_SLOT_KIND_EMBED: hone_oracle_bound_embed(bound, ref, D[0] * D[1]); return 1;
    case HONE_SLOT_KIND_RMSNORM: hone_oracle_bound_rmsnorm(bound, ref, D[0], D[1]); return 1;
    case HONE_SLOT_KIND_MATVEC: hone_oracle_bound_matmul(bound, s->dtype, v[1].cp, v[2].cp, 1, D[0], D[1]); return 1;
    case HONE_SLOT_KIND_MATMUL: hone_oracle_bound_matmul(bound, s->dtype, v[1].cp, v[2].cp, D[0], D[1], D[2]); return 1;
    case HONE_SLOT_KIND_ROPE:
        hone_oracle_bound_rope(bound, v[0].cp, v[1].cp, D[0], D[1], D[2], D[3], s->f[0], s->flag);
        return 1;
    case HONE_SLOT_KIND_ATTENTION_DECODE:
    case HONE_SLOT_KIND_ATTENTION_PREFILL:
        hone_oracle_bound_attention(bound, v[1].cp, v[2].cp, v[3].cp, v[4].cp, D[0], D[1], D[3], D[4],
                                    D[5], D[6], s->f[0]);
        return 1;
    case HONE_SLOT_KIND_SWIGLU: hone_oracle_bound_swiglu(bound, ref, v[1].cp, D[0]); return 1;
    case HONE_SLOT_KIND_GEGLU: hone_oracle_bound_geglu(bound, v[1].cp, v[2].cp, D[0]); return 1;
    case HONE_SLOT_KIND_ROPE_FREQS:
        hone_oracle_bound_rope_freqs(bound, v[0].cp, v[1].cp, v[2].cp, D[0], D[1], D[2], D[3], s->f[0],
                                     s->flag);
        return 1;
    case HONE_SLOT_KIND_ADD: hone_oracle_bound_add(bound, ref, D[0]); return 1;
    case HONE_SLOT_KIND_QKV:
        hone_oracle_bound_qkv(bound, s->dtype, v[1].cp, v[2].cp, v[3].cp, v[4].cp, D[0], D[1], D[2], D[3]);
        return 1;
    case HONE_SLOT_KIND_FFN: hone_oracle_bound_ffn(bound, s->dtype, v[1].cp, v[2].cp, v[3].cp, D[0], D[1]); return 1;
    case HONE_SLOT_KIND_RMSNORM_MATVEC:
        hone_oracle_bound_rmsnorm_matvec(bound, s->dtype, v[1].cp, v[2].cp, v[3].cp, D[0], D[1], s->f[0]);
        return 1;
    default: return 0;
    }
}
