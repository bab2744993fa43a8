/* The guard as the CUDA guard tests run it (tests/guard/, tests/gpu/): one options set. */
#ifndef HONE_TEST_GUARD_TEST_H
#define HONE_TEST_GUARD_TEST_H

#include <stdlib.h>

#include "engine/file.h"
#include "guard/guard.h"
#include "harness.h"

/* What a run of a red-team candidate must give. */
typedef struct {
    const char *file, *slot;
    hone_guard_code code;
    const char *text; /* a substring of the reason */
} guard_test_expect;

/* Options for candidate `file` of `slot` on `backend`: the file's text (malloc'd: run them with
 * guard_test_run, which frees it), the tiny q4_1 model, the test's state directory, a small model
 * gate (3 prompts x 16 steps), the report only with HONE_TEST_VERBOSE. Tests set what else they
 * need (timeouts, skips) on the result. */
static inline hone_guard_opts guard_test_opts(const char *backend, const char *slot, const char *file,
                                              const char *state_dir)
{
    hone_guard_opts o = HONE_GUARD_OPTS_INIT;
    o.model_path = HONE_TEST_DATA_DIR "/tiny-llama-q4_1.gguf";
    o.backend = backend;
    o.slot = slot;
    char *src = NULL;
    size_t len = 0;
    if (hone_file_read(file, &src, &len) == 0) {
        o.source = src;
        o.source_len = len;
    }
    o.name = file;
    o.state_dir = state_dir;
    o.model_prompts = 3;
    o.model_steps = 16;
    o.quiet = getenv("HONE_TEST_VERBOSE") == NULL;
    return o;
}

/* hone_guard_run on o, then frees o's source (guard_test_opts read it). */
static inline int guard_test_run(hone_guard_result *res, hone_guard_opts *o, FILE *report)
{
    int rc = hone_guard_run(res, o, report);
    free((void *)o->source);
    o->source = NULL;
    return rc;
}

/* Prints res and checks it against e: rejected (or not evaluated) with e's code and text. */
static inline void guard_test_check(const hone_guard_result *res, const guard_test_expect *e)
{
    fprintf(stderr, "  %-34s -> %-14s %s\n", e->file, hone_guard_code_name(res->code), res->reason);
    CHECK_MSG(!res->accepted && res->code == e->code, "%s: expected %s, got %s (%s)", e->file,
              hone_guard_code_name(e->code), hone_guard_code_name(res->code), res->reason);
    CHECK_STR_CONTAINS(res->reason, e->text);
    CHECK_EQ_INT(res->evaluated, e->code != HONE_GUARD_NOT_EVALUATED);
}

#endif
