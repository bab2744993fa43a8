/* The tuning prompt: carries the slot's contract read from engine/slots.h, the incumbent
 * source, the helpers, shapes, profile, device, the hard rules and the earlier rejections. */
#include <stdlib.h>
#include <string.h>

#include "agent/prompt.h"
#include "engine/error.h"
#include "harness.h"

static void test_cpu_prompt(void)
{
    hone_prompt_history hist[2] = {{"candidate 1a2b3c4d (rows=8)", "wrong math: max error 3.1e-2 vs incumbent 1.2e-6"},
                                   {"candidate 5e6f7a8b", "compile error: 'acc' undeclared"}};
    hone_prompt_opts o = HONE_PROMPT_OPTS_INIT;
    o.slot = HONE_SLOT_MATVEC_Q4_1;
    o.shapes = "rows 1536 cols 576, 60 calls per token";
    o.profile = "23% of decode step time, 16.5 GB/s = 33% of roofline";
    char dev[512];
    hone_prompt_cpu_device(dev, sizeof dev);
    o.device = dev;
    o.history = hist;
    o.n_history = 2;
    char *sys = NULL, *user = NULL;
    CHECK_EQ_INT(hone_prompt_build(&o, &sys, &user), 0);
    CHECK_STR_CONTAINS(sys, "```c");
    CHECK_STR_CONTAINS(user, "hone_cpu_matvec_q4_1");
    CHECK_STR_CONTAINS(user, "typedef void (*hone_slot_matvec_fn)");   /* the contract itself */
    CHECK_STR_CONTAINS(user, "y[r] = sum_c W[r][c] * x[c]");
    CHECK_STR_CONTAINS(user, "Rules every CPU slot");                  /* the general rules */
    CHECK_STR_CONTAINS(user, "hone_cpu_deq_q4_1");                     /* the incumbent */
    CHECK_STR_CONTAINS(user, "hone_cpu_matvec_simd");                  /* the helpers */
    CHECK_STR_CONTAINS(user, "rows 1536 cols 576");
    CHECK_STR_CONTAINS(user, "33% of roofline");
    CHECK_STR_CONTAINS(user, "online CPUs");
    CHECK_STR_CONTAINS(user, "never quantise");
    CHECK_STR_CONTAINS(user, "wrong math: max error 3.1e-2");
    CHECK_STR_CONTAINS(user, "'acc' undeclared");
    free(sys);
    free(user);
    /* every slot has a contract */
    for (int s = 0; s < HONE_SLOT_COUNT; s++) {
        char *c = hone_prompt_contract(s);
        CHECK_MSG(c && strstr(c, "typedef void"), "%s", hone_slots_name((hone_slot_id)s));
        free(c);
    }
    /* a missing source tree is a clear error */
    o.source_dir = "/nonexistent";
    CHECK_EQ_INT(hone_prompt_build(&o, &sys, &user), HONE_EIO);
    CHECK_STR_CONTAINS(hone_error_last(), "cannot read the incumbent");
}

TEST_MAIN(TEST_CASE(test_cpu_prompt))
