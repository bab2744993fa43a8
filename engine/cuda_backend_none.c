/* The CUDA backend entry points of a build without the CUDA toolkit. */
#include "backend_impl.h"

#include <stdio.h>

#include "error.h"

#ifndef HONE_HAVE_CUDA
int hone_cuda_backend_probe(int *out_available, char *why, int cap)
{
    *out_available = 0;
    snprintf(why, (size_t)cap, "this build has no CUDA support");
    return HONE_EUNSUPPORTED;
}

int hone_cuda_backend_new(hone_backend_i *out_iface, void **out_ctx, const hone_model *m,
                          const hone_ctx_opts *opts)
{
    (void)out_iface; (void)out_ctx; (void)m; (void)opts;
    return hone_error_set(HONE_EUNSUPPORTED, "this build has no CUDA support");
}
#endif
