/* The object verifier: judges a compiled candidate by its machine code and its ELF contents,
 * not by its source or its section names. Used by the guard's ELF gate before any of the
 * candidate's code runs, and by the kernel loader before it dlopens a kernel.
 *
 * A shared object passes when (each check by content and type, never by a name the candidate
 * can choose):
 * - it is a 64-bit x86-64 ET_DYN within the size caps (file, every section, every segment);
 * - every instruction of every executable section decodes (capstone) and is on the allow-list:
 *   general-purpose integer code, branches, and the SIMD/FP extensions (SSE*, AVX*, FMA, F16C,
 *   BMI, VEX/EVEX-encoded, ...; AVX-512 encodings capstone 4 cannot decode are measured by a
 *   length decoder), minus system calls, interrupts, timers, randomness, cpuid, FP-environment loads,
 *   xsave/xrstor, protection keys, privileged/I/O/VM instructions, far transfers, cache
 *   flushes, transactional memory, fs/gs-base access; no fs:/gs: memory operand except the
 *   stack protector's fs:0x28;
 * - every direct branch lands on an instruction start of an executable section; every
 *   indirect jmp/call is `[rip+disp]` through a GOT slot that a JUMP_SLOT/GLOB_DAT relocation
 *   binds to an allowed symbol (PLT stubs, -fno-plt calls) or the PLT0 resolver slot; no
 *   register-indirect branch (function pointers, jump tables: candidates are compiled with
 *   -fno-jump-tables, see HONE_COMPILE_CPU_FLAGS);
 * - no executable section runs off its end (its last instruction is ret, jmp or ud2);
 *   executable segments are not writable, and every byte they map (whole pages) is in a
 *   decoded section or zero; no data object sits in code; the stack is not executable
 *   (PT_GNU_STACK present, no PF_X);
 * - no writable allocated section holds candidate bytes: only the SHT_DYNAMIC section and GOTs
 *   whose every 8-byte slot is a relocation slot or one of the three PLT0 header slots, all
 *   read-only once relocated (inside PT_GNU_RELRO, bound now: HONE_COMPILE_CPU_FLAGS links
 *   with -z now);
 *   no .bss, no TLS (SHF_TLS, PT_TLS, STT_TLS), no init/fini arrays or DT_INIT/DT_FINI;
 * - dynamic tags on an allow-list (DT_NEEDED only libc/libm), relocations only JUMP_SLOT and
 *   GLOB_DAT (no IRELATIVE, no STT_GNU_IFUNC symbol), undefined symbols on the allow-list
 *   (HONE_VERIFY_IMPORTS: memcpy/memset/..., libm);
 * - symbol is defined as a function inside an executable section. */
#ifndef HONE_VERIFY_H
#define HONE_VERIFY_H

#include <stddef.h>
#include <stdint.h>

typedef struct hone_verify_opts {
    int version;
    uint64_t max_file_bytes;    /* the whole .so */
    uint64_t max_section_bytes; /* any one section (NOBITS included) or loaded segment */
} hone_verify_opts;

#define HONE_VERIFY_OPTS_INIT { .version = 1, .max_file_bytes = 16u << 20, .max_section_bytes = 8u << 20 }

typedef struct hone_verify_result {
    int ok;               /* 1: the object passed every check */
    char reason[512];     /* when !ok: the first finding ("instruction 'rdtsc' at 0x1139 is not
                           * allowed (timers)"); empty when ok */
    uint64_t file_bytes;  /* size of the .so */
    uint64_t code_bytes;  /* bytes of executable sections decoded */
    uint64_t largest_section_bytes;
    int n_sections;       /* section headers */
    int n_exec_sections;  /* executable sections decoded */
    int n_instructions;   /* instructions decoded and allowed */
    int n_got_branches;   /* indirect jmp/call through an allowed GOT slot (PLT stubs) */
    int n_imports;        /* undefined dynamic symbols (all on the allow-list when ok) */
    int n_relocations;    /* dynamic relocations (all JUMP_SLOT/GLOB_DAT when ok) */
} hone_verify_result;

/* Undefined symbols a kernel may import (NULL-terminated): libm, mem*, the engine's dtype
 * helpers. */
extern const char *const HONE_VERIFY_IMPORTS[];

/* Verifies the shared object at so_path, which must define the function `symbol`
 * ("hone_cpu_swiglu"; NULL: no symbol required). opts NULL: HONE_VERIFY_OPTS_INIT.
 * The verdict is out->ok / out->reason. Returns 0 when the check ran (whatever the verdict);
 * HONE_EIO when the file cannot be read, HONE_ENOMEM, HONE_EINTERNAL when the disassembler
 * cannot start.
 *
 *   hone_verify_result v;
 *   hone_verify_opts o = HONE_VERIFY_OPTS_INIT;
 *   if (hone_verify_object(&v, "k.so", "hone_cpu_swiglu", &o) == 0 && !v.ok)
 *       refuse(v.reason);
 */
int hone_verify_object(hone_verify_result *out, const char *so_path, const char *symbol,
                       const hone_verify_opts *opts);

#endif
