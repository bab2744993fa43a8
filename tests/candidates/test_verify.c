/* The object verifier on compiled objects: every shipped baseline kernel and every accepted
 * candidate, compiled with the guard's flags, passes; each hostile object (the red-team
 * corpus compiled without the source scan, and small cases written here) fails with its
 * reason. */
#include "harness.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/search.h"
#include "candidates/compile.h"
#include "candidates/verify.h"
#include "engine/error.h"
#include "engine/slots.h"
#include "guard/scan.h"

#define SRC HONE_SOURCE_DIR "/"

static char DIR_[64];

static void setup(void)
{
    if (DIR_[0]) return;
    snprintf(DIR_, sizeof DIR_, "/tmp/hone-verify-test-XXXXXX");
    if (!mkdtemp(DIR_)) {
        perror("mkdtemp");
        exit(1);
    }
}

/* Compiles src_path with the guard's flags into DIR_/<tag>.so (path in so). 0 on success. */
static int compile(char *so, size_t cap, const char *src_path, const char *tag)
{
    snprintf(so, cap, "%s/%s.so", DIR_, tag);
    hone_compile_cpu_result r;
    hone_compile_cpu_opts o = HONE_COMPILE_CPU_OPTS_INIT;
    o.timeout_s = 120;
    o.max_bytes = (size_t)512 << 20; /* the verifier's own caps are under test here */
    int rc = hone_compile_cpu(&r, src_path, so, &o);
    CHECK_MSG(rc == 0, "%s does not compile: %s", src_path, r.log ? r.log : hone_error_last());
    hone_compile_cpu_result_clear(&r);
    return rc;
}

/* Writes text to DIR_/<tag>.c and compiles it with cc and flags (the guard's when NULL). */
static int compile_text(char *so, size_t cap, const char *text, const char *tag, const char *flags)
{
    char src[256];
    snprintf(src, sizeof src, "%s/%s.c", DIR_, tag);
    FILE *f = fopen(src, "w");
    fputs(text, f);
    fclose(f);
    if (!flags) return compile(so, cap, src, tag);
    char cmd[1024];
    snprintf(so, cap, "%s/%s.so", DIR_, tag);
    snprintf(cmd, sizeof cmd, "cc %s -I%s -o %s %s", flags, HONE_SOURCE_DIR, so, src);
    int rc = system(cmd);
    CHECK_MSG(rc == 0, "%s failed", cmd);
    return rc;
}

static void expect_ok(const char *so, const char *symbol)
{
    hone_verify_result v;
    CHECK_EQ_INT(hone_verify_object(&v, so, symbol, NULL), 0);
    CHECK_MSG(v.ok, "%s (%s) refused: %s", so, symbol, v.reason);
    if (v.ok) {
        CHECK(v.n_instructions > 0 && v.code_bytes > 0 && v.n_exec_sections >= 1);
        CHECK(v.file_bytes > 0 && v.largest_section_bytes > 0 && v.reason[0] == 0);
    }
}

static void expect_refused(const char *so, const char *symbol, const char *reason)
{
    hone_verify_result v;
    CHECK_EQ_INT(hone_verify_object(&v, so, symbol, NULL), 0);
    fprintf(stderr, "  %-28s -> %s\n", strrchr(so, '/') + 1, v.ok ? "accepted" : v.reason);
    CHECK_MSG(!v.ok, "%s accepted, expected: %s", so, reason);
    CHECK_STR_CONTAINS(v.reason, reason);
}

/* kernels/cpu/<slot>.c defines hone_cpu_<slot>. */
static void test_baselines_pass(void)
{
    setup();
    DIR *d = opendir(SRC "kernels/cpu");
    CHECK(d != NULL);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));) {
        size_t l = strlen(e->d_name);
        if (l < 3 || strcmp(e->d_name + l - 2, ".c") != 0) continue;
        char slot[128], src[512], so[512], sym[160];
        snprintf(slot, sizeof slot, "%.*s", (int)(l - 2), e->d_name);
        snprintf(src, sizeof src, SRC "kernels/cpu/%s", e->d_name);
        snprintf(sym, sizeof sym, "hone_cpu_%s", slot);
        if (compile(so, sizeof so, src, slot) == 0) expect_ok(so, sym);
        n++;
    }
    if (d) closedir(d);
    CHECK(n >= 19);
    static const char *const G[][2] = {{"swiglu_vexp", "hone_cpu_swiglu"},
                                       {"rmsnorm_vec", "hone_cpu_rmsnorm"},
                                       {"matvec_q4_1_prefetch", "hone_cpu_matvec_q4_1"}};
    for (size_t i = 0; i < sizeof G / sizeof G[0]; i++) {
        char src[512], so[512];
        snprintf(src, sizeof src, SRC "tests/guard/good/%s.c", G[i][0]);
        if (compile(so, sizeof so, src, G[i][0]) == 0) expect_ok(so, G[i][1]);
    }
}

/* What the search proposer renders (a point per supported slot: the first and the
 * incumbent's) passes the source scan and the verifier, like the baselines. */
static void test_search_points_pass(void)
{
    setup();
    int n = 0;
    for (int slot = 0; slot < HONE_SLOT_COUNT; slot++) {
        if (!hone_search_supports((hone_slot_id)slot)) continue;
        hone_search_point pts[64];
        int np = hone_search_space((hone_slot_id)slot, pts, 64);
        for (int k = 0; k < np; k += np - 1 > 0 ? np - 1 : 1) {
            char *src = NULL, why[512], path[256], so[512], tag[64], sym[96];
            CHECK_EQ_INT(hone_search_render((hone_slot_id)slot, pts[k], &src), 0);
            if (!src) break;
            int rc = hone_scan_c_source(src, HONE_SOURCE_DIR, why, sizeof why);
            CHECK_MSG(rc == 0, "%s point %d refused by the scan: %s", hone_slots_name((hone_slot_id)slot), k, why);
            snprintf(tag, sizeof tag, "search_%d_%d", slot, k);
            snprintf(path, sizeof path, "%s/%s.c", DIR_, tag);
            FILE *f = fopen(path, "w");
            fputs(src, f);
            fclose(f);
            free(src);
            hone_slots_cpu_symbol((hone_slot_id)slot, sym, sizeof sym);
            if (compile(so, sizeof so, path, tag) == 0) expect_ok(so, sym);
            n++;
            if (np <= 1) break;
        }
    }
    CHECK(n >= 12);
}

/* The red-team corpus's object tricks, and the source tricks the scan stops first, compiled
 * as they are: the verifier refuses each on its own. */
static void test_redteam_objects(void)
{
    setup();
    static const struct { const char *file, *reason; } R[] = {
        {"ifunc_resolver.c", "ifunc symbol 'hone_cpu_swiglu'"},
        {"ifunc_local.c", "ifunc symbol 'act'"},
        {"init_array.c", "runs code at load time (section .init_array"},
        {"init_function.c", "runs code at load time (DT_INIT)"},
        {"counter_tm_clone_table.c", "mutable global 'calls' in .tm_clone_table"},
        {"counter_data_rel_ro.c", "mutable global 'calls' in .data.rel.ro"},
        {"counter_got.c", "mutable global 'calls' in .got"},
        {"cache_by_count.c", "mutable global 'calls' in .bss"},
        {"tls_counter.c", "thread-local storage"},
        {"big_table_64.c", "above the cap of 16777216"},
        {"big_table_12.c", "section .rodata is 125829"},
        {"code_in_rodata.c", "outside executable code"},
        {"code_in_text.c", "data object 'code' placed in executable section .text"},
        {"code_in_text_offset.c", "data object 'code' placed in executable section .text"},
        {"fnptr_call.c", "indirect call at 0x"},
        {"paste_asm.c", "instruction 'rdtsc' at 0x"},
        {"paste_rdtsc.c", "instruction 'rdtsc' at 0x"},
        {"reads_clock.c", "(timers)"},
        {"dunder_constructor.c", "runs code at load time"},
        {"calls_system.c", "calls 'system', which is not on the allowed list"},
    };
    for (size_t i = 0; i < sizeof R / sizeof R[0]; i++) {
        char src[512], so[512], tag[128];
        snprintf(src, sizeof src, SRC "tests/guard/redteam/%s", R[i].file);
        snprintf(tag, sizeof tag, "rt_%.*s", (int)(strlen(R[i].file) - 2), R[i].file);
        if (compile(so, sizeof so, src, tag) == 0) expect_refused(so, "hone_cpu_swiglu", R[i].reason);
        unlink(so);
    }
}

/* Without .symtab the data objects are not named, and the sweep itself must refuse the bytes:
 * `int $0x80` decodes as an instruction; code + 1 is not an instruction the sweep found. */
static void test_stripped_code_bytes(void)
{
    setup();
    static const struct { const char *file, *reason; } R[] = {
        {"code_in_text.c", "instruction 'int' at 0x"},
        {"code_in_text_offset.c", "indirect call at 0x"},
    };
    for (size_t i = 0; i < sizeof R / sizeof R[0]; i++) {
        char src[512], so[512], tag[128], cmd[1200];
        snprintf(src, sizeof src, SRC "tests/guard/redteam/%s", R[i].file);
        snprintf(tag, sizeof tag, "stripped_%.*s", (int)(strlen(R[i].file) - 2), R[i].file);
        if (compile(so, sizeof so, src, tag)) continue;
        snprintf(cmd, sizeof cmd, "objcopy --strip-all %s", so);
        CHECK_EQ_INT(system(cmd), 0);
        expect_refused(so, "hone_cpu_swiglu", R[i].reason);
    }
}

/* Instructions written with asm (objects the guard would never compile: the scan refuses
 * asm): each refused with its name, address and category. */
static void test_instruction_list(void)
{
    setup();
    static const struct { const char *insn, *reason; } I[] = {
        {"syscall", "instruction 'syscall' at 0x"}, {"int $0x80", "'int' at 0x"},
        {"int3", "'int3' at 0x"}, {"rdtsc", "(timers)"}, {"rdtscp", "'rdtscp' at 0x"},
        {"rdpmc", "(timers)"}, {"rdrand %%eax", "(hardware randomness)"},
        {"cpuid", "(CPU identification)"}, {"ldmxcsr (%0)", "'ldmxcsr' at 0x"},
        {"vldmxcsr (%0)", "'vldmxcsr' at 0x"}, {"fldcw (%0)", "(floating-point control)"},
        {"xrstor (%0)", "(floating-point control)"}, {"fxsave (%0)", "(floating-point control)"},
        /* capstone 4 does not know wrpkru: refused all the same, as undecodable */
        {"wrpkru", "undecodable bytes at 0x"}, {"inb $0x60, %%al", "(I/O)"}, {"hlt", "(privileged)"},
        {"cli", "(privileged)"}, {"ljmp *(%0)", "(far control transfer)"},
        {"jmp *%0", "indirect jmp at 0x"}, {"call *(%0)", "indirect call at 0x"},
        {"clflush (%0)", "(cache control)"}, {"xbegin 1f; 1:", "(transactional memory)"},
        {"wrfsbase %0", "(thread pointer)"}, {"mov %%fs:0x10, %%rax", "through fs/gs"},
        {"jmp 1f + 1; 1: .byte 0xb8, 0x0f, 0x05, 0x90, 0x90", "which is not the start of an instruction"},
        /* an executable section whose last instruction falls through */
        {".pushsection .tailx, \\\"ax\\\"; nop; .popsection", "the code of .tailx runs off its end"},
    };
    for (size_t i = 0; i < sizeof I / sizeof I[0]; i++) {
        char text[512], so[512], tag[32];
        snprintf(text, sizeof text,
                 "void hone_cpu_k(void *p) { __asm__ volatile(\"%s\" : : \"r\"(p) : \"rax\", \"rdx\", \"memory\"); }\n",
                 I[i].insn);
        snprintf(tag, sizeof tag, "insn_%zu", i);
        if (compile_text(so, sizeof so, text, tag, "-O2 -march=native -fPIC -shared -nostartfiles") == 0)
            expect_refused(so, "hone_cpu_k", I[i].reason);
    }
}

/* Encodings capstone 4 cannot decode are measured from their fields: AVX512-FP16's EVEX maps
 * 5 and 6 (GCC emits vmovw for f16 loads on Sapphire Rapids) pass, with and without a memory
 * operand and displacement; the reserved maps 4 and 7 (where APX puts promoted legacy
 * instructions) stay undecodable and refused. Likewise the VEX opmask instructions GCC emits for
 * AVX-512 tail masks (kmovd, kmovq, 64-bit mask logic and shifts) pass, and other VEX bytes,
 * or a mask opcode with an operand form it does not have, stay refused. Written as bytes so the test does not depend on
 * the assembler's or this CPU's AVX512-FP16 support: the object is verified, never run. */
static void test_unknown_encodings(void)
{
    setup();
    static const struct { const char *bytes; int ok; } E[] = {
        {"0x62,0xf5,0x7d,0x08,0x6e,0xc0", 1},            /* vmovw %eax, %xmm0 (map 5) */
        {"0x62,0xf5,0x7e,0x08,0x6e,0x47,0x01", 1},       /* vmovw 2(%rdi), %xmm0 (disp8*N) */
        {"0x62,0xf6,0x7d,0x48,0x13,0xc1", 1},            /* vcvtph2psx %ymm1, %zmm0 (map 6) */
        {"0x62,0xf5,0x7c,0x48,0x58,0x84,0x24,0x00,0x01,0x00,0x00", 1}, /* vaddph 256(%rsp), SIB, disp32 */
        {"0x62,0xf4,0x7c,0x08,0x05,0xc0", 0},            /* map 4 */
        {"0x62,0xf7,0x7c,0x08,0x05,0xc0", 0},            /* map 7 */
        {"0xc5,0xfb,0x92,0xcf", 1},                      /* kmovd %edi, %k1 */
        {"0xc4,0xe1,0xfb,0x92,0xc6", 1},                 /* kmovq %rsi, %k0 */
        {"0xc4,0x61,0xfb,0x93,0xc8", 1},                 /* kmovq %k0, %r9 */
        {"0xc4,0xe1,0xf9,0x90,0x0f", 1},                 /* kmovd (%rdi), %k1 */
        {"0xc4,0xe1,0xfd,0x41,0xc2", 1},                 /* kandd %k2, %k0, %k0 */
        {"0xc4,0xe3,0xf9,0x31,0xc1,0x03", 1},            /* kshiftrq $3, %k1, %k0 (imm8) */
        {"0xc5,0xfb,0x92,0x07", 0},                      /* 92 has no memory form */
        {"0xc4,0xe1,0xf8,0x91,0xc1", 0},                 /* 91 has no register form */
        {"0xc5,0xfb,0x94,0xc1", 0},                      /* not a mask opcode */
    };
    for (size_t i = 0; i < sizeof E / sizeof E[0]; i++) {
        char text[512], so[512], tag[32];
        snprintf(text, sizeof text, "void hone_cpu_k(void) { __asm__ volatile(\".byte %s\" ::: \"memory\"); }\n",
                 E[i].bytes);
        snprintf(tag, sizeof tag, "evex_%zu", i);
        if (compile_text(so, sizeof so, text, tag, "-O2 -fPIC -shared -nostartfiles -Wl,-z,now") != 0) continue;
        if (E[i].ok)
            expect_ok(so, "hone_cpu_k");
        else
            expect_refused(so, "hone_cpu_k", "undecodable bytes at 0x");
    }
}

static const char SWITCH_SRC[] =
    "#include <stdint.h>\n"
    "void hone_cpu_add(float *y, const float *a, const float *b, int64_t n, int ith, int nth) {\n"
    "  for (int64_t i = 0; i < n; i++) {\n"
    "    float v;\n"
    "    switch ((i + ith + nth) & 7) {\n"
    "    case 0: v = a[i] + b[i]; break; case 1: v = a[i] - b[i]; break;\n"
    "    case 2: v = a[i] * b[i]; break; case 3: v = a[i] + 2 * b[i]; break;\n"
    "    case 4: v = 3 * a[i] + b[i]; break; case 5: v = a[i] - 4 * b[i]; break;\n"
    "    case 6: v = a[i] * a[i]; break; default: v = b[i] * b[i] + 1; break;\n"
    "    }\n"
    "    y[i] = v;\n"
    "  }\n"
    "}\n";

/* A switch: with the guard's -fno-jump-tables it is compares and direct branches, and
 * passes; compiled with a jump table its `jmp *%rax` is refused. */
static void test_jump_tables(void)
{
    setup();
    char so[512];
    if (compile_text(so, sizeof so, SWITCH_SRC, "switch_guard", NULL) == 0) expect_ok(so, "hone_cpu_add");
    if (compile_text(so, sizeof so, SWITCH_SRC, "switch_table",
                     "-std=c11 -O3 -march=native -fPIC -shared -nostartfiles") == 0)
        expect_refused(so, "hone_cpu_add", "indirect jmp at 0x");
}

/* Small objects the red-team corpus does not cover. */
static void test_small_cases(void)
{
    setup();
    char so[512];
    static const char data_x[] = "__attribute__((section(\".data.x\"))) int state = 3;\n"
                                 "int hone_cpu_k(void) { return state++; }\n";
    if (compile_text(so, sizeof so, data_x, "data_x", NULL) == 0)
        expect_refused(so, "hone_cpu_k", "mutable global 'state' in .data ");
    /* GCC's fs address space (GNU C only; the guard compiles ISO C11, and the scan bans the
     * keyword): a read of the host thread's TLS block */
    static const char segfs[] = "unsigned long hone_cpu_k(void) {\n"
                                "  return *(const unsigned long __seg_fs *)0x10; }\n";
    if (compile_text(so, sizeof so, segfs, "segfs", "-std=gnu11 -O3 -fPIC -shared -nostartfiles") == 0)
        expect_refused(so, "hone_cpu_k", "reads or writes through fs/gs (thread pointer)");
    static const char nodef[] = "int hone_cpu_k(void) { return 1; }\n";
    if (compile_text(so, sizeof so, nodef, "nodef", NULL) == 0) {
        expect_ok(so, "hone_cpu_k");
        expect_refused(so, "hone_cpu_other", "does not define the slot function hone_cpu_other");
        /* the caps come from the options */
        hone_verify_opts o = HONE_VERIFY_OPTS_INIT;
        o.max_file_bytes = 1024;
        hone_verify_result v;
        CHECK_EQ_INT(hone_verify_object(&v, so, "hone_cpu_k", &o), 0);
        CHECK(!v.ok);
        CHECK_STR_CONTAINS(v.reason, "above the cap of 1024");
    }
    /* a GOT the code could rewrite at run time (lazy binding, or no RELRO) */
    static const char calls_expf[] = "#include <math.h>\nfloat hone_cpu_k(float x) { return expf(x); }\n";
    if (compile_text(so, sizeof so, calls_expf, "calls_expf", NULL) == 0) expect_ok(so, "hone_cpu_k");
    if (compile_text(so, sizeof so, calls_expf, "lazy", "-std=c11 -O3 -fPIC -shared -nostartfiles") == 0)
        expect_refused(so, "hone_cpu_k", "GOT .got.plt stays writable after loading");
    if (compile_text(so, sizeof so, calls_expf, "norelro",
                     "-std=c11 -O3 -fPIC -shared -nostartfiles -Wl,-z,now -Wl,-z,norelro") == 0)
        expect_refused(so, "hone_cpu_k", "stays writable after loading (outside PT_GNU_RELRO)");
    /* one segment for headers, tables and code: their bytes would run too */
    if (compile_text(so, sizeof so, calls_expf, "noseparate",
                     "-std=c11 -O3 -fPIC -shared -nostartfiles -Wl,-z,now -Wl,-z,noseparate-code") == 0)
        expect_refused(so, "hone_cpu_k", "is mapped executable but in no executable section");
    static const char ptrdata[] = "#include <math.h>\n"
                                  "static float (*const fns[])(float) = {expf, sqrtf};\n"
                                  "float hone_cpu_k(float x, int i) { return fns[i & 1](x); }\n";
    if (compile_text(so, sizeof so, ptrdata, "ptrdata", NULL) == 0) expect_refused(so, "hone_cpu_k", "not allowed");
    /* not an object, and no object at all */
    char txt[256];
    snprintf(txt, sizeof txt, "%s/notelf.so", DIR_);
    FILE *f = fopen(txt, "w");
    fputs("#!/bin/sh\necho hello\n", f);
    fclose(f);
    expect_refused(txt, "hone_cpu_k", "not a 64-bit ELF shared object");
    hone_verify_result v;
    CHECK_EQ_INT(hone_verify_object(&v, "/nonexistent/k.so", "hone_cpu_k", NULL), HONE_EIO);
}

TEST_MAIN(TEST_CASE(test_baselines_pass), TEST_CASE(test_search_points_pass), TEST_CASE(test_redteam_objects),
          TEST_CASE(test_stripped_code_bytes), TEST_CASE(test_instruction_list), TEST_CASE(test_unknown_encodings),
          TEST_CASE(test_jump_tables),
          TEST_CASE(test_small_cases))
