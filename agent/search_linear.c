/* The matvec and matmul families' shared helpers (agent/search_linear.h). */
#include "search_linear.h"

#include <string.h>

#include "agent/search.h"
#include "engine/error.h"

const char *hone_search_linear_dtype(hone_slot_id slot)
{
    const char *name = hone_slots_name(slot);
    return strchr(name, '_') + 1; /* "matvec_q4_1" -> "q4_1" */
}

const char *hone_search_linear_deq_body(const char *dt)
{
    if (!strcmp(dt, "f32")) return "memcpy(out, (const float *)row + c0, (size_t)n * sizeof(float));";
    if (!strcmp(dt, "f16")) return "hone_cpu_deq_f16((const uint16_t *)row + c0, out, n);";
    if (!strcmp(dt, "bf16")) return "hone_cpu_deq_bf16((const uint16_t *)row + c0, out, n);";
    if (!strcmp(dt, "q8_0")) return "(void)n;\n    hone_cpu_deq_q8_0((const hone_block_q8_0 *)row + c0 / 32, out);";
    if (!strcmp(dt, "q4_0")) return "(void)n;\n    hone_cpu_deq_q4_0((const hone_block_q4_0 *)row + c0 / 32, out);";
    if (!strcmp(dt, "q4_1")) return "(void)n;\n    hone_cpu_deq_q4_1((const hone_block_q4_1 *)row + c0 / 32, out);";
    /* q5_0 .. mxfp4: the shipped kernels' own 32-value dequantiser */
    if (!strcmp(dt, "q5_0")) return "hone_cpu_deqr_q5_0(row, c0, n, out);";
    if (!strcmp(dt, "q5_1")) return "hone_cpu_deqr_q5_1(row, c0, n, out);";
    if (!strcmp(dt, "q4_k")) return "hone_cpu_deqr_q4_k(row, c0, n, out);";
    if (!strcmp(dt, "q5_k")) return "hone_cpu_deqr_q5_k(row, c0, n, out);";
    if (!strcmp(dt, "q6_k")) return "hone_cpu_deqr_q6_k(row, c0, n, out);";
    if (!strcmp(dt, "q3_k")) return "hone_cpu_deqr_q3_k(row, c0, n, out);";
    if (!strcmp(dt, "q2_k")) return "hone_cpu_deqr_q2_k(row, c0, n, out);";
    return "hone_cpu_deqr_mxfp4(row, c0, n, out);";
}

static void upper(const char *s, char *out, size_t cap)
{
    size_t i = 0;
    for (; s[i] && i + 1 < cap; i++) out[i] = (char)(s[i] >= 'a' && s[i] <= 'z' ? s[i] - 32 : s[i]);
    out[i] = 0;
}


int hone_search_linear_render(const char *tmpl, hone_slot_id slot, hone_search_point p, char **out_src)
{
    *out_src = NULL;
    static const int lo[] = {1, 0}, hi[] = {16, 32768};
    int rc = hone_search_check_range(p, lo, hi, 2);
    if (rc) return rc;
    const char *dt = hone_search_linear_dtype(slot);
    char up[16];
    upper(dt, up, sizeof up);
    *out_src = hone_search_format(tmpl, dt, p.v[0], p.v[1], hone_search_linear_deq_body(dt), up);
    return *out_src ? 0 : HONE_ENOMEM;
}
