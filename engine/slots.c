/* Slot names and the CPU baseline table (kernels/cpu/). */
#include "slots.h"

#include <stdio.h>
#include <string.h>

/* The baselines, one per kernels/cpu/<slot>.c. */
void hone_cpu_embed(float *, const void *, int32_t, const int32_t *, int64_t, int64_t, int, int);
void hone_cpu_rmsnorm(float *, const float *, const float *, int64_t, int64_t, float, int, int);
#define DECL_MV(dt)                                                                            \
    void hone_cpu_matvec_##dt(float *, const void *, const float *, int64_t, int64_t, int, int); \
    void hone_cpu_matmul_##dt(float *, const void *, const float *, int64_t, int64_t, int64_t, int, int);
DECL_MV(f32)
DECL_MV(f16)
DECL_MV(bf16)
DECL_MV(q8_0)
DECL_MV(q4_0)
DECL_MV(q4_1)
void hone_cpu_rope(float *, const int32_t *, int64_t, int64_t, int64_t, int64_t, float, int32_t, int,
                   int);
void hone_cpu_attention_decode(float *, const float *, const float *, const float *, const int32_t *,
                               int64_t, int64_t, int64_t, int64_t, int64_t, float, float *, int, int);
void hone_cpu_attention_prefill(float *, const float *, const float *, const float *,
                                const int32_t *, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                                float, float *, int, int);
void hone_cpu_swiglu(float *, const float *, const float *, int64_t, int, int);
void hone_cpu_add(float *, const float *, const float *, int64_t, int, int);

static const char *const slot_names[HONE_SLOT_COUNT] = {
    "embed", "rmsnorm",
    "matvec_f32", "matvec_f16", "matvec_bf16", "matvec_q8_0", "matvec_q4_0", "matvec_q4_1",
    "matmul_f32", "matmul_f16", "matmul_bf16", "matmul_q8_0", "matmul_q4_0", "matmul_q4_1",
    "rope", "attention_decode", "attention_prefill", "swiglu", "add"};

static const int mat_dtypes[6] = {HONE_DTYPE_F32, HONE_DTYPE_F16, HONE_DTYPE_BF16,
                                  HONE_DTYPE_Q8_0, HONE_DTYPE_Q4_0, HONE_DTYPE_Q4_1};

const char *hone_slots_name(hone_slot_id id)
{
    return (unsigned)id < HONE_SLOT_COUNT ? slot_names[id] : "unknown";
}

int hone_slots_from_name(const char *name)
{
    for (int i = 0; i < HONE_SLOT_COUNT; i++)
        if (strcmp(name, slot_names[i]) == 0) return i;
    return -1;
}

void hone_slots_cpu_symbol(hone_slot_id id, char *buf, int cap)
{
    snprintf(buf, (size_t)cap, "hone_cpu_%s", hone_slots_name(id));
}

int hone_slots_matvec_id(int dtype)
{
    for (int i = 0; i < 6; i++)
        if (mat_dtypes[i] == dtype) return HONE_SLOT_MATVEC_F32 + i;
    return -1;
}

int hone_slots_matmul_id(int dtype)
{
    for (int i = 0; i < 6; i++)
        if (mat_dtypes[i] == dtype) return HONE_SLOT_MATMUL_F32 + i;
    return -1;
}

void hone_slots_cpu_baseline(hone_slot_table *t)
{
    memset(t, 0, sizeof *t);
    t->embed = hone_cpu_embed;
    t->rmsnorm = hone_cpu_rmsnorm;
    t->matvec[HONE_DTYPE_F32] = hone_cpu_matvec_f32;
    t->matvec[HONE_DTYPE_F16] = hone_cpu_matvec_f16;
    t->matvec[HONE_DTYPE_BF16] = hone_cpu_matvec_bf16;
    t->matvec[HONE_DTYPE_Q8_0] = hone_cpu_matvec_q8_0;
    t->matvec[HONE_DTYPE_Q4_0] = hone_cpu_matvec_q4_0;
    t->matvec[HONE_DTYPE_Q4_1] = hone_cpu_matvec_q4_1;
    t->matmul[HONE_DTYPE_F32] = hone_cpu_matmul_f32;
    t->matmul[HONE_DTYPE_F16] = hone_cpu_matmul_f16;
    t->matmul[HONE_DTYPE_BF16] = hone_cpu_matmul_bf16;
    t->matmul[HONE_DTYPE_Q8_0] = hone_cpu_matmul_q8_0;
    t->matmul[HONE_DTYPE_Q4_0] = hone_cpu_matmul_q4_0;
    t->matmul[HONE_DTYPE_Q4_1] = hone_cpu_matmul_q4_1;
    t->rope = hone_cpu_rope;
    t->attention_decode = hone_cpu_attention_decode;
    t->attention_prefill = hone_cpu_attention_prefill;
    t->swiglu = hone_cpu_swiglu;
    t->add = hone_cpu_add;
}

/* The address of slot id's pointer inside t. */
static void **slot_ref(hone_slot_table *t, hone_slot_id id)
{
    if (id >= HONE_SLOT_MATVEC_F32 && id <= HONE_SLOT_MATVEC_Q4_1)
        return (void **)&t->matvec[mat_dtypes[id - HONE_SLOT_MATVEC_F32]];
    if (id >= HONE_SLOT_MATMUL_F32 && id <= HONE_SLOT_MATMUL_Q4_1)
        return (void **)&t->matmul[mat_dtypes[id - HONE_SLOT_MATMUL_F32]];
    switch (id) {
    case HONE_SLOT_EMBED: return (void **)&t->embed;
    case HONE_SLOT_RMSNORM: return (void **)&t->rmsnorm;
    case HONE_SLOT_ROPE: return (void **)&t->rope;
    case HONE_SLOT_ATTENTION_DECODE: return (void **)&t->attention_decode;
    case HONE_SLOT_ATTENTION_PREFILL: return (void **)&t->attention_prefill;
    case HONE_SLOT_SWIGLU: return (void **)&t->swiglu;
    case HONE_SLOT_ADD: return (void **)&t->add;
    default: return NULL;
    }
}

void *hone_slots_get(const hone_slot_table *t, hone_slot_id id)
{
    void **p = slot_ref((hone_slot_table *)t, id);
    return p ? *p : NULL;
}

void hone_slots_set(hone_slot_table *t, hone_slot_id id, void *fn)
{
    void **p = slot_ref(t, id);
    if (p) *p = fn;
}
