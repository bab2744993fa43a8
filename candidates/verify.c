/* The object verifier (see verify.h): the ELF headers read with elf.h, the machine code with
 * capstone. Every check looks at types, flags and bytes: a candidate chooses its section and
 * symbol names (`__attribute__((section))`), so a name never makes anything allowed. */
#include "verify.h"

#include <capstone/capstone.h>
#include <elf.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "engine/error.h"
#include "engine/file.h"

const char *const HONE_VERIFY_IMPORTS[] = {
    "expf", "exp", "exp2f", "exp2", "expm1f", "expm1", "logf", "log", "log2f", "log2", "log1pf",
    "log1p", "sqrtf", "sqrt", "fmaf", "fma", "tanhf", "tanh", "powf", "pow", "sinf", "sin", "cosf",
    "cos", "sincosf", "sincos", "fabsf", "fabs", "floorf", "floor", "ceilf", "ceil", "roundf",
    "round", "rintf", "rint", "nearbyintf", "nearbyint", "truncf", "trunc", "ldexpf", "ldexp",
    "frexpf", "frexp", "erff", "erf", "fmaxf", "fmax", "fminf", "fmin", "memcpy", "memset",
    "memmove", "memcmp", "strlen", "hone_dtype_block_size", "hone_dtype_type_size",
    "hone_dtype_row_bytes", "hone_dtype_supported", "hone_dtype_name", "hone_f32_to_fp16",
    "__stack_chk_fail", NULL};

/* Libraries an object may name in DT_NEEDED: both are in every process that loads kernels. */
static const char *const NEEDED_OK[] = {"libc.so.6", "libm.so.6", NULL};

typedef struct { const char *name; const char *what; } denied;

/* Instructions refused whatever group capstone puts them in, with the reason's category. */
static const denied INSN_DENIED[] = {
    {"syscall", "system calls"}, {"sysenter", "system calls"}, {"sysexit", "system calls"},
    {"sysret", "system calls"}, {"int", "interrupts"}, {"int1", "interrupts"},
    {"int3", "interrupts"}, {"into", "interrupts"}, {"iret", "interrupts"}, {"iretd", "interrupts"},
    {"iretq", "interrupts"}, {"rdtsc", "timers"}, {"rdtscp", "timers"}, {"rdpmc", "timers"},
    {"rdpid", "timers"}, {"tpause", "timers"}, {"umwait", "timers"}, {"umonitor", "timers"},
    {"rdrand", "hardware randomness"}, {"rdseed", "hardware randomness"},
    {"cpuid", "CPU identification"}, {"xgetbv", "CPU identification"},
    {"ldmxcsr", "floating-point control"}, {"vldmxcsr", "floating-point control"},
    {"fldcw", "floating-point control"}, {"fldenv", "floating-point control"},
    {"frstor", "floating-point control"}, {"fnsave", "floating-point control"},
    {"fninit", "floating-point control"}, {"fxrstor", "floating-point control"},
    {"fxrstor64", "floating-point control"}, {"xrstor", "floating-point control"},
    {"xrstor64", "floating-point control"}, {"xrstors", "floating-point control"},
    {"xrstors64", "floating-point control"}, {"xsave", "floating-point control"},
    {"xsave64", "floating-point control"}, {"xsavec", "floating-point control"},
    {"xsavec64", "floating-point control"}, {"xsaveopt", "floating-point control"},
    {"xsaveopt64", "floating-point control"}, {"xsaves", "floating-point control"},
    {"xsaves64", "floating-point control"}, {"fxsave", "floating-point control"},
    {"fxsave64", "floating-point control"}, {"xsetbv", "privileged"},
    {"wrpkru", "protection keys"}, {"rdpkru", "protection keys"},
    {"in", "I/O"}, {"out", "I/O"}, {"insb", "I/O"}, {"insw", "I/O"}, {"insd", "I/O"},
    {"outsb", "I/O"}, {"outsw", "I/O"}, {"outsd", "I/O"}, {"hlt", "privileged"},
    {"cli", "privileged"}, {"sti", "privileged"}, {"lgdt", "privileged"}, {"lidt", "privileged"},
    {"lldt", "privileged"}, {"ltr", "privileged"}, {"sgdt", "privileged"}, {"sidt", "privileged"},
    {"sldt", "privileged"}, {"str", "privileged"}, {"smsw", "privileged"}, {"lmsw", "privileged"},
    {"clts", "privileged"}, {"invd", "privileged"}, {"wbinvd", "privileged"},
    {"invlpg", "privileged"}, {"rdmsr", "privileged"}, {"wrmsr", "privileged"},
    {"swapgs", "privileged"}, {"monitor", "privileged"}, {"mwait", "privileged"},
    {"lar", "privileged"}, {"lsl", "privileged"}, {"verr", "privileged"}, {"verw", "privileged"},
    {"getsec", "privileged"}, {"ljmp", "far control transfer"}, {"lcall", "far control transfer"},
    {"retf", "far control transfer"}, {"retfq", "far control transfer"},
    {"clflush", "cache control"}, {"clflushopt", "cache control"}, {"clwb", "cache control"},
    {"xbegin", "transactional memory"}, {"xend", "transactional memory"},
    {"xabort", "transactional memory"}, {"xtest", "transactional memory"},
    {"rdfsbase", "thread pointer"}, {"rdgsbase", "thread pointer"},
    {"wrfsbase", "thread pointer"}, {"wrgsbase", "thread pointer"}, {NULL, NULL}};

/* Groups refused wholesale (the rest of an instruction's groups do not matter). */
static const struct { int group; const char *what; } GROUP_DENIED[] = {
    {X86_GRP_INT, "interrupts"}, {X86_GRP_IRET, "interrupts"}, {X86_GRP_PRIVILEGE, "privileged"},
    {X86_GRP_VM, "virtualization"}, {X86_GRP_SGX, "enclaves"}, {X86_GRP_RTM, "transactional memory"},
    {X86_GRP_FSGSBASE, "thread pointer"}, {X86_GRP_SMAP, "privileged"},
    {X86_GRP_MMX, "MMX state"}, {X86_GRP_3DNOW, "MMX state"}, {0, NULL}};

/* Arithmetic extensions: an instruction in one of these (and not refused above) is allowed. */
static const int GROUP_OK[] = {X86_GRP_SSE1, X86_GRP_SSE2, X86_GRP_SSE3, X86_GRP_SSSE3,
                               X86_GRP_SSE41, X86_GRP_SSE42, X86_GRP_SSE4A, X86_GRP_AVX,
                               X86_GRP_AVX2, X86_GRP_AVX512, X86_GRP_FMA, X86_GRP_FMA4,
                               X86_GRP_F16C, X86_GRP_BMI, X86_GRP_BMI2, X86_GRP_ADX, X86_GRP_CMOV,
                               X86_GRP_AES, X86_GRP_PCLMUL, X86_GRP_SHA, X86_GRP_XOP, X86_GRP_TBM,
                               X86_GRP_CDI, X86_GRP_ERI, X86_GRP_DQI, X86_GRP_BWI, X86_GRP_PFI,
                               X86_GRP_VLX, X86_GRP_NOVLX, X86_GRP_FPU, 0};

/* General-purpose instructions -O3 code contains (capstone's names). Branches are judged by
 * their operands instead (see check_branch). */
static const char *const BASE_OK[] = {
    "mov", "movabs", "movzx", "movsx", "movsxd", "movbe", "lea", "add", "adc", "sub", "sbb",
    "imul", "mul", "idiv", "div", "neg", "not", "and", "or", "xor", "test", "cmp", "inc", "dec",
    "shl", "shr", "sar", "sal", "rol", "ror", "rcl", "rcr", "shld", "shrd", "bt", "btc", "btr",
    "bts", "bsf", "bsr", "bswap", "push", "pop", "nop", "xchg", "cbw", "cwde", "cdqe", "cwd",
    "cdq", "cqo", "leave", "endbr64", "lzcnt", "tzcnt", "popcnt", "sete", "setne", "seta",
    "setae", "setb", "setbe", "setg", "setge", "setl", "setle", "seto", "setno", "setp", "setnp",
    "sets", "setns", "pause", "ud2", "cmpxchg", "xadd", "clc", "stc", "cmc", "cld", "std", "sahf",
    "lahf", "movsb", "movsw", "movsd", "movsq", "stosb", "stosw", "stosd", "stosq", "lodsb",
    "lodsw", "lodsd", "lodsq", "cmpsb", "cmpsw", "cmpsd", "cmpsq", "scasb", "scasw", "scasd",
    "scasq", "prefetch", "prefetchw", "prefetcht0", "prefetcht1", "prefetcht2", "prefetchnta",
    "lfence", "mfence", "sfence", "crc32", "ret", NULL};

typedef struct {
    const Elf64_Sym *sym;
    size_t n;
    const char *str;
    size_t str_n;
} symtab;

static const char *str_at(const char *tab, size_t n, uint64_t off);

static const char *sym_name(const symtab *t, size_t k)
{
    return str_at(t->str, t->str_n, t->sym[k].st_name);
}

typedef struct {
    hone_verify_result *out;
    const uint8_t *b;
    size_t n;
    const Elf64_Ehdr *eh;
    const Elf64_Shdr *sh;
    const Elf64_Phdr *ph;
    const char *shstr;
    size_t shstr_n;
    symtab dyn;  /* .dynsym: what the loader reads */
    symtab full; /* .symtab (local symbols too), may be absent */
    uint64_t dyn_addr;
    uint64_t relro_lo, relro_hi; /* PT_GNU_RELRO: read-only once relocated */
    int have_dyn, have_pltgot, bind_now;
    uint64_t pltgot;
    uint64_t *slot_addr; /* GOT slots bound by JUMP_SLOT/GLOB_DAT relocations */
    uint32_t *slot_sym;  /* their .dynsym index */
    size_t n_slots;
    uint8_t **starts; /* per section: 1 bit a byte, set at each instruction start */
} obj;

static int bad(obj *o, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(o->out->reason, sizeof o->out->reason, fmt, ap);
    va_end(ap);
    o->out->ok = 0;
    return 1;
}

static int in_list(const char *s, const char *const *l)
{
    for (int i = 0; l[i]; i++)
        if (strcmp(s, l[i]) == 0) return 1;
    return 0;
}

/* A NUL-terminated string at off in a table of n bytes, or "" (never reads outside). */
static const char *str_at(const char *tab, size_t n, uint64_t off)
{
    if (!tab || off >= n || !memchr(tab + off, 0, n - off)) return "";
    return tab + off;
}

static int inside(const obj *o, uint64_t off, uint64_t len)
{
    return off <= o->n && len <= o->n - off;
}

static const char *sec_name(const obj *o, int i)
{
    return str_at(o->shstr, o->shstr_n, o->sh[i].sh_name);
}

/* File bytes behind [va, va+len) of one PT_LOAD, or NULL. */
static const uint8_t *at_vaddr(const obj *o, uint64_t va, uint64_t len)
{
    for (int i = 0; i < o->eh->e_phnum; i++) {
        const Elf64_Phdr *p = &o->ph[i];
        if (p->p_type != PT_LOAD || va < p->p_vaddr || va - p->p_vaddr > p->p_filesz ||
            len > p->p_filesz - (va - p->p_vaddr))
            continue;
        return o->b + p->p_offset + (va - p->p_vaddr);
    }
    return NULL;
}

/* The allocated executable section holding va, or -1. */
static int exec_section_at(const obj *o, uint64_t va)
{
    for (int i = 0; i < o->eh->e_shnum; i++) {
        const Elf64_Shdr *s = &o->sh[i];
        if ((s->sh_flags & (SHF_ALLOC | SHF_EXECINSTR)) == (SHF_ALLOC | SHF_EXECINSTR) &&
            va >= s->sh_addr && va - s->sh_addr < s->sh_size)
            return i;
    }
    return -1;
}

/* The named data symbol of section i that covers address at (else the first in table
 * order), for messages; NULL if the section has none. */
static const char *symbol_in(const obj *o, int i, uint64_t at)
{
    const char *any = NULL;
    for (int pass = 0; pass < 2; pass++) {
        const symtab *t = pass ? &o->dyn : &o->full;
        for (size_t k = 1; k < t->n; k++) {
            const Elf64_Sym *s = &t->sym[k];
            int ty = ELF64_ST_TYPE(s->st_info);
            const char *nm = sym_name(t, k);
            if (s->st_shndx != i || !*nm || !(ty == STT_OBJECT || ty == STT_NOTYPE || ty == STT_TLS)) continue;
            if (at >= s->st_value && at - s->st_value < (s->st_size ? s->st_size : 1)) return nm;
            if (!any) any = nm;
        }
    }
    return any;
}

static int check_header(obj *o)
{
    const Elf64_Ehdr *eh = o->eh;
    if (o->n < sizeof *eh || memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 ||
        eh->e_ident[EI_CLASS] != ELFCLASS64 || eh->e_ident[EI_DATA] != ELFDATA2LSB)
        return bad(o, "not a 64-bit ELF shared object");
    if (eh->e_type != ET_DYN || eh->e_machine != EM_X86_64)
        return bad(o, "not an x86-64 shared object (type %u, machine %u)", eh->e_type, eh->e_machine);
    if (eh->e_shentsize != sizeof(Elf64_Shdr) || eh->e_phentsize != sizeof(Elf64_Phdr) ||
        !inside(o, eh->e_shoff, (uint64_t)eh->e_shnum * sizeof(Elf64_Shdr)) ||
        !inside(o, eh->e_phoff, (uint64_t)eh->e_phnum * sizeof(Elf64_Phdr)) ||
        eh->e_shstrndx >= eh->e_shnum || eh->e_shoff % 8 || eh->e_phoff % 8)
        return bad(o, "malformed ELF headers");
    o->sh = (const Elf64_Shdr *)(o->b + eh->e_shoff);
    o->ph = (const Elf64_Phdr *)(o->b + eh->e_phoff);
    o->out->n_sections = eh->e_shnum;
    return 0;
}

/* Sizes, bounds, TLS and load-time code by section type; finds the symbol tables. */
static int check_sections(obj *o, const hone_verify_opts *opts)
{
    const Elf64_Shdr *shs = &o->sh[o->eh->e_shstrndx];
    if (!inside(o, shs->sh_offset, shs->sh_size)) return bad(o, "malformed section name table");
    o->shstr = (const char *)o->b + shs->sh_offset;
    o->shstr_n = shs->sh_size;
    for (int i = 1; i < o->eh->e_shnum; i++) {
        const Elf64_Shdr *s = &o->sh[i];
        const char *name = sec_name(o, i);
        if (s->sh_size > o->out->largest_section_bytes) o->out->largest_section_bytes = s->sh_size;
        if (s->sh_size > opts->max_section_bytes)
            return bad(o, "section %s is %" PRIu64 " bytes, above the cap of %" PRIu64, name,
                       (uint64_t)s->sh_size, opts->max_section_bytes);
        if (s->sh_type != SHT_NOBITS && !inside(o, s->sh_offset, s->sh_size))
            return bad(o, "section %s lies outside the file", name);
        if (s->sh_flags & SHF_TLS) return bad(o, "thread-local storage (section %s): candidates keep no state", name);
        if ((s->sh_type == SHT_INIT_ARRAY || s->sh_type == SHT_FINI_ARRAY ||
             s->sh_type == SHT_PREINIT_ARRAY) && s->sh_size > 0)
            return bad(o, "runs code at load time (section %s of type %s)", name,
                       s->sh_type == SHT_INIT_ARRAY ? "INIT_ARRAY"
                       : s->sh_type == SHT_FINI_ARRAY ? "FINI_ARRAY" : "PREINIT_ARRAY");
        if ((s->sh_flags & SHF_EXECINSTR) && (s->sh_flags & SHF_ALLOC) && s->sh_type != SHT_PROGBITS && s->sh_size)
            return bad(o, "executable section %s of type %u", name, s->sh_type);
        if (s->sh_type == SHT_DYNSYM || s->sh_type == SHT_SYMTAB) {
            if (s->sh_link >= o->eh->e_shnum || s->sh_entsize != sizeof(Elf64_Sym) ||
                s->sh_offset % 8 || !inside(o, o->sh[s->sh_link].sh_offset, o->sh[s->sh_link].sh_size))
                return bad(o, "malformed symbol table %s", name);
            const Elf64_Sym *st = (const Elf64_Sym *)(o->b + s->sh_offset);
            const char *str = (const char *)o->b + o->sh[s->sh_link].sh_offset;
            if (s->sh_type == SHT_DYNSYM) {
                if (o->dyn.sym) return bad(o, "two dynamic symbol tables");
                o->dyn.sym = st, o->dyn.n = s->sh_size / sizeof *st;
                o->dyn.str = str, o->dyn.str_n = o->sh[s->sh_link].sh_size;
            } else {
                o->full.sym = st, o->full.n = s->sh_size / sizeof *st;
                o->full.str = str, o->full.str_n = o->sh[s->sh_link].sh_size;
            }
        }
    }
    if (!o->dyn.sym) return bad(o, "no dynamic symbol table");
    return 0;
}

static int check_segments(obj *o, const hone_verify_opts *opts)
{
    int stack = 0;
    for (int i = 0; i < o->eh->e_phnum; i++) {
        const Elf64_Phdr *p = &o->ph[i];
        switch (p->p_type) {
        case PT_LOAD:
            if (p->p_memsz > opts->max_section_bytes || p->p_filesz > p->p_memsz ||
                !inside(o, p->p_offset, p->p_filesz))
                return bad(o, "loaded segment %d is malformed or above the cap (%" PRIu64 " bytes)", i,
                           (uint64_t)p->p_memsz);
            if ((p->p_flags & PF_X) && (p->p_flags & PF_W)) return bad(o, "segment %d is writable and executable", i);
            if ((p->p_flags & PF_X) && p->p_memsz != p->p_filesz)
                return bad(o, "executable segment %d has memory without file bytes", i);
            break;
        case PT_DYNAMIC:
            o->dyn_addr = p->p_vaddr;
            o->have_dyn = 1;
            break;
        case PT_GNU_STACK:
            if (p->p_flags & PF_X) return bad(o, "asks for an executable stack");
            stack = 1;
            break;
        case PT_TLS: return bad(o, "thread-local storage (PT_TLS segment): candidates keep no state");
        case PT_GNU_RELRO:
            o->relro_lo = p->p_vaddr;
            o->relro_hi = p->p_vaddr + p->p_memsz;
            break;
        case PT_NOTE: case PT_GNU_EH_FRAME: case PT_GNU_PROPERTY: break;
        default: return bad(o, "program header of type 0x%x is not allowed", p->p_type);
        }
    }
    if (!stack) return bad(o, "no PT_GNU_STACK: the stack would be executable");
    if (!o->have_dyn) return bad(o, "no dynamic section");
    return 0;
}

/* Every byte the loader maps executable belongs to an executable section that is decoded,
 * or is zero padding: the segment's file bytes and the rest of its first and last pages
 * (mmap maps whole pages, so a neighbour's bytes on a shared page run too). */
static int check_exec_coverage(obj *o)
{
    for (int i = 0; i < o->eh->e_phnum; i++) {
        const Elf64_Phdr *p = &o->ph[i];
        if (p->p_type != PT_LOAD || !(p->p_flags & PF_X)) continue;
        uint64_t page = p->p_align > 1 && p->p_align <= 1u << 21 ? p->p_align : 4096;
        uint64_t lo = p->p_offset & ~(page - 1), hi = (p->p_offset + p->p_filesz + page - 1) & ~(page - 1);
        if (hi > o->n) hi = o->n;
        for (uint64_t f = lo; f < hi;) {
            int s = exec_section_at(o, p->p_vaddr + (f - p->p_offset)); /* wraps below p_offset: no match */
            if (f >= p->p_offset && s >= 0 && o->sh[s].sh_offset - p->p_offset == o->sh[s].sh_addr - p->p_vaddr) {
                f = o->sh[s].sh_offset + o->sh[s].sh_size;
                continue;
            }
            if (o->b[f] != 0)
                return bad(o, "byte at file offset 0x%" PRIx64 " is mapped executable but in no executable section", f);
            f++;
        }
    }
    return 0;
}

static int check_dynamic(obj *o, const uint8_t **rela, uint64_t *relasz, const uint8_t **jmprel,
                         uint64_t *pltrelsz)
{
    /* the dynamic section's bytes, from the segment the loader reads */
    const Elf64_Dyn *d = NULL;
    size_t nd = 0;
    for (int i = 0; i < o->eh->e_phnum; i++)
        if (o->ph[i].p_type == PT_DYNAMIC) {
            d = (const Elf64_Dyn *)at_vaddr(o, o->ph[i].p_vaddr, o->ph[i].p_filesz);
            nd = o->ph[i].p_filesz / sizeof *d;
        }
    if (!d || (uintptr_t)d % 8) return bad(o, "malformed dynamic segment");
    uint64_t strtab = 0, symtab_va = 0, rela_va = 0, jmprel_va = 0, strsz = 0;
    *relasz = *pltrelsz = 0;
    size_t k;
    for (k = 0; k < nd && d[k].d_tag != DT_NULL; k++) {
        uint64_t v = d[k].d_un.d_val;
        switch (d[k].d_tag) {
        case DT_NEEDED: case DT_HASH: case DT_GNU_HASH: case DT_SYMENT: case DT_RELAENT:
        case DT_RELACOUNT: case DT_VERSYM: case DT_VERNEED: case DT_VERNEEDNUM: case DT_VERDEF:
        case DT_VERDEFNUM: case DT_SONAME: break;
        case DT_BIND_NOW: o->bind_now = 1; break;
        case DT_STRTAB: strtab = v; break;
        case DT_STRSZ: strsz = v; break;
        case DT_SYMTAB: symtab_va = v; break;
        case DT_RELA: rela_va = v; break;
        case DT_RELASZ: *relasz = v; break;
        case DT_JMPREL: jmprel_va = v; break;
        case DT_PLTRELSZ: *pltrelsz = v; break;
        case DT_PLTGOT: o->pltgot = v, o->have_pltgot = 1; break;
        case DT_PLTREL: if (v != DT_RELA) return bad(o, "PLT relocations are not RELA"); break;
        case DT_FLAGS:
            if (v & ~(uint64_t)DF_BIND_NOW) return bad(o, "dynamic flags 0x%" PRIx64 " are not allowed", v);
            o->bind_now |= (v & DF_BIND_NOW) != 0;
            break;
        case DT_FLAGS_1:
            if (v & ~(uint64_t)DF_1_NOW) return bad(o, "dynamic flags_1 0x%" PRIx64 " are not allowed", v);
            o->bind_now |= (v & DF_1_NOW) != 0;
            break;
        case DT_INIT: return bad(o, "runs code at load time (DT_INIT)");
        case DT_FINI: return bad(o, "runs code at load time (DT_FINI)");
        case DT_INIT_ARRAY: case DT_INIT_ARRAYSZ: return bad(o, "runs code at load time (DT_INIT_ARRAY)");
        case DT_FINI_ARRAY: case DT_FINI_ARRAYSZ: return bad(o, "runs code at load time (DT_FINI_ARRAY)");
        case DT_PREINIT_ARRAY: case DT_PREINIT_ARRAYSZ: return bad(o, "runs code at load time (DT_PREINIT_ARRAY)");
        case DT_TEXTREL: return bad(o, "relocations in the code (DT_TEXTREL)");
        default: return bad(o, "dynamic tag 0x%" PRIx64 " is not allowed", (uint64_t)d[k].d_tag);
        }
    }
    if (k == nd) return bad(o, "dynamic section without DT_NULL");
    /* the tables the loader uses must be the ones read here */
    int ds = -1;
    for (int i = 0; i < o->eh->e_shnum; i++)
        if (o->sh[i].sh_type == SHT_DYNSYM) ds = i;
    if (o->sh[ds].sh_addr != symtab_va || o->sh[o->sh[ds].sh_link].sh_addr != strtab || strsz > o->dyn.str_n)
        return bad(o, "DT_SYMTAB/DT_STRTAB do not match the dynamic symbol table");
    for (k = 0; k < nd && d[k].d_tag != DT_NULL; k++) {
        if (d[k].d_tag != DT_NEEDED) continue;
        const char *lib = str_at(o->dyn.str, o->dyn.str_n, d[k].d_un.d_val);
        if (!in_list(lib, NEEDED_OK)) return bad(o, "needs library '%s', which is not on the allowed list", lib);
    }
    *rela = *relasz ? at_vaddr(o, rela_va, *relasz) : NULL;
    *jmprel = *pltrelsz ? at_vaddr(o, jmprel_va, *pltrelsz) : NULL;
    if ((*relasz && !*rela) || (*pltrelsz && !*jmprel) || *relasz % sizeof(Elf64_Rela) ||
        *pltrelsz % sizeof(Elf64_Rela))
        return bad(o, "malformed relocation tables");
    return 0;
}

/* ifunc and TLS symbols and data objects in code, in either table; imports on the
 * allow-list; the slot's function. */
static int check_symbols(obj *o, const char *symbol)
{
    for (int pass = 0; pass < 2; pass++) {
        const symtab *t = pass ? &o->full : &o->dyn;
        for (size_t k = 1; k < t->n; k++) {
            const Elf64_Sym *s = &t->sym[k];
            const char *n = sym_name(t, k);
            int ty = ELF64_ST_TYPE(s->st_info);
            if (ty == STT_GNU_IFUNC) return bad(o, "ifunc symbol '%s': its resolver would run at load time", n);
            if (ty == STT_TLS) return bad(o, "thread-local symbol '%s': candidates keep no state", n);
            /* bytes a data object puts in code (a section attribute on an array) are not code */
            if ((ty == STT_OBJECT || ty == STT_COMMON) && s->st_shndx != SHN_UNDEF && s->st_shndx < o->eh->e_shnum &&
                (o->sh[s->st_shndx].sh_flags & SHF_EXECINSTR))
                return bad(o, "data object '%s' placed in executable section %s", n, sec_name(o, s->st_shndx));
            if (pass == 0 && s->st_shndx == SHN_UNDEF && *n) {
                o->out->n_imports++;
                if (!in_list(n, HONE_VERIFY_IMPORTS)) return bad(o, "calls '%s', which is not on the allowed list", n);
            }
        }
    }
    if (!symbol) return 0;
    for (size_t k = 1; k < o->dyn.n; k++) {
        const Elf64_Sym *s = &o->dyn.sym[k];
        if (strcmp(sym_name(&o->dyn, k), symbol) != 0 || s->st_shndx == SHN_UNDEF) continue;
        if (ELF64_ST_TYPE(s->st_info) != STT_FUNC || exec_section_at(o, s->st_value) < 0)
            return bad(o, "%s is not a function in executable code", symbol);
        return 0;
    }
    return bad(o, "does not define the slot function %s", symbol);
}

static int check_relocations(obj *o, const uint8_t *tab, uint64_t size)
{
    size_t n = size / sizeof(Elf64_Rela);
    uint64_t *na = realloc(o->slot_addr, (o->n_slots + n + 1) * sizeof *na);
    if (na) o->slot_addr = na;
    uint32_t *ns = realloc(o->slot_sym, (o->n_slots + n + 1) * sizeof *ns);
    if (ns) o->slot_sym = ns;
    if (!na || !ns) return -1;
    for (size_t i = 0; i < n; i++) {
        Elf64_Rela r;
        memcpy(&r, tab + i * sizeof r, sizeof r);
        uint32_t type = ELF64_R_TYPE(r.r_info), sym = ELF64_R_SYM(r.r_info);
        o->out->n_relocations++;
        if (type == R_X86_64_IRELATIVE)
            return bad(o, "R_X86_64_IRELATIVE relocation at 0x%" PRIx64 ": an ifunc resolver would run at load time",
                       (uint64_t)r.r_offset);
        if (type != R_X86_64_JUMP_SLOT && type != R_X86_64_GLOB_DAT)
            return bad(o, "dynamic relocation of type %u at 0x%" PRIx64 " is not allowed (only GOT slots)", type,
                       (uint64_t)r.r_offset);
        if (sym == 0 || sym >= o->dyn.n || r.r_addend != 0 || r.r_offset % 8)
            return bad(o, "malformed GOT relocation at 0x%" PRIx64, (uint64_t)r.r_offset);
        o->slot_addr[o->n_slots] = r.r_offset;
        o->slot_sym[o->n_slots++] = sym;
    }
    return 0;
}

static int slot_index(const obj *o, uint64_t va)
{
    for (size_t i = 0; i < o->n_slots; i++)
        if (o->slot_addr[i] == va) return (int)i;
    return -1;
}

/* A writable allocated section passes only as the dynamic section or as a GOT: every 8-byte
 * slot bound by a relocation or one of the PLT0 header's three (the dynamic section's
 * address, then two zeros the loader fills). Anything else holds the candidate's bytes. Both
 * must be read-only once relocated (inside PT_GNU_RELRO, GOT slots bound at load time: the
 * compile's -Wl,-z,now), so the code cannot redirect its own PLT calls. */
static int check_writable(obj *o)
{
    for (int i = 1; i < o->eh->e_shnum; i++) {
        const Elf64_Shdr *s = &o->sh[i];
        if ((s->sh_flags & (SHF_ALLOC | SHF_WRITE)) != (SHF_ALLOC | SHF_WRITE) || s->sh_size == 0) continue;
        int relro = s->sh_addr >= o->relro_lo && s->sh_addr + s->sh_size <= o->relro_hi;
        if (s->sh_type == SHT_DYNAMIC && s->sh_addr == o->dyn_addr) {
            if (!relro) return bad(o, "the dynamic section stays writable after loading (outside PT_GNU_RELRO)");
            continue;
        }
        /* the PLT0 header: at DT_PLTGOT, or at the start of a GOT the linker emits without a
         * PLT; its first word is the dynamic section's address, which the candidate cannot
         * write without a relocation (refused) */
        uint64_t hdr = o->have_pltgot ? o->pltgot : s->sh_addr, w[3];
        int has_hdr = 0;
        if (hdr >= s->sh_addr && hdr - s->sh_addr + sizeof w <= s->sh_size) {
            memcpy(w, o->b + s->sh_offset + (hdr - s->sh_addr), sizeof w);
            has_hdr = w[0] == o->dyn_addr && w[1] == 0 && w[2] == 0;
        }
        int got = s->sh_type == SHT_PROGBITS && s->sh_addr % 8 == 0 && s->sh_size % 8 == 0;
        uint64_t a = UINT64_MAX; /* GOT-shaped: the first slot that is not one */
        for (uint64_t v = s->sh_addr; got && v < s->sh_addr + s->sh_size; v += 8)
            if (slot_index(o, v) < 0 && !(has_hdr && v >= hdr && v - hdr < sizeof w)) {
                got = 0;
                a = v;
            }
        if (got && (!relro || !o->bind_now))
            return bad(o, "GOT %s stays writable after loading (%s)", sec_name(o, i),
                       relro ? "lazy binding: no DT_BIND_NOW" : "outside PT_GNU_RELRO");
        if (got) continue;
        const char *sym = symbol_in(o, i, a);
        return bad(o, "mutable global%s%s%s in %s (%" PRIu64 " bytes): candidates keep no state", sym ? " '" : "",
                   sym ? sym : "", sym ? "'" : "", sec_name(o, i), (uint64_t)s->sh_size);
    }
    return 0;
}

static const char *denied_group(const cs_insn *in)
{
    const cs_detail *d = in->detail;
    for (int g = 0; g < d->groups_count; g++)
        for (int k = 0; GROUP_DENIED[k].what; k++)
            if (d->groups[g] == GROUP_DENIED[k].group) return GROUP_DENIED[k].what;
    return NULL;
}

static int allowed_group(const cs_insn *in)
{
    const cs_detail *d = in->detail;
    for (int g = 0; g < d->groups_count; g++)
        for (int k = 0; GROUP_OK[k]; k++)
            if (d->groups[g] == GROUP_OK[k]) return 1;
    return 0;
}

static int has_group(const cs_insn *in, int group)
{
    for (int g = 0; g < in->detail->groups_count; g++)
        if (in->detail->groups[g] == group) return 1;
    return 0;
}

/* The length of a ModRM operand (ModRM, SIB, displacement) at p, or 0 when it does not fit. */
static size_t modrm_length(const uint8_t *p, size_t left)
{
    if (left < 1) return 0;
    size_t n = 1;
    unsigned mod = p[0] >> 6, rm = p[0] & 7;
    if (mod != 3 && rm == 4) {
        if (left < 2) return 0;
        if (mod == 0 && (p[1] & 7) == 5) n += 4; /* SIB without base: disp32 */
        n++;
    }
    if (mod == 1) n += 1;
    else if (mod == 2 || (mod == 0 && rm == 5)) n += 4;
    return n <= left ? n : 0;
}

/* The length of the EVEX (AVX-512) instruction at p, or 0: capstone 4 does not know every
 * AVX-512 instruction GCC emits for -march=native. An EVEX instruction is never a branch, a
 * system or state instruction; its length follows from its fields alone: 62 P0 P1 P2, the
 * opcode, ModRM, SIB and displacement, and an imm8 for every 0F3A opcode and the 0F opcodes
 * 70-73, C2, C4-C6 (Intel SDM vol. 2, 2.6). Maps 5 and 6 hold AVX512-FP16's arithmetic, moves
 * and conversions (GCC emits vmovw for f16 loads on Sapphire Rapids), none with an immediate
 * (Intel's AVX512-FP16 architecture specification; its immediates are all in map 0F3A).
 * Legacy prefixes before it (fs:/gs:, 66, F2/F3) make the byte at the failure not 62, so they
 * are refused as undecodable. */
static size_t evex_length(const uint8_t *p, size_t left)
{
    if (left < 6 || p[0] != 0x62) return 0;
    uint8_t p0 = p[1], p1 = p[2], map = p0 & 7, op = p[4];
    /* fixed bits; maps 0F, 0F38, 0F3A, and AVX512-FP16's maps 5 and 6 (no imm8 in either) */
    if ((p0 & 0x08) || !(p1 & 0x04) || map < 1 || map == 4 || map > 6) return 0;
    size_t m = modrm_length(p + 5, left - 5);
    if (!m) return 0;
    size_t n = 5 + m;
    if (map == 3 || (map == 1 && ((op >= 0x70 && op <= 0x73) || op == 0xc2 || (op >= 0xc4 && op <= 0xc6)))) n++;
    return n <= left && n <= 15 ? n : 0;
}

/* The length of the VEX opmask instruction at p, or 0: capstone 4 does not decode kmovd/kmovq
 * (VEX.pp F2, or VEX.W1) and most of the 32- and 64-bit mask operations, which GCC emits for
 * AVX-512 tail masks. Only AVX-512's opmask opcodes are measured (Intel SDM vol. 2, "Opmask
 * instructions"): in map 0F, 41-42, 44-47, 4A-4B (kand, kandn, knot, kor, kxnor, kxor, kadd,
 * kunpck) and 98-99 (kortest, ktest) on registers only, 90 (kmov load, or k to k), 91
 * (kmov store, memory only) and 92-93 (GPR to k, k to GPR, registers only); in map 0F3A, 30-33
 * (kshiftr, kshiftl) with an imm8. None branches or touches system state; every other VEX byte sequence capstone
 * cannot decode stays undecodable. */
static size_t vex_mask_length(const uint8_t *p, size_t left)
{
    if (left < 4 || (p[0] != 0xc4 && p[0] != 0xc5)) return 0;
    unsigned map = 1;
    size_t at = 2;
    if (p[0] == 0xc4) {
        map = p[1] & 0x1f;
        at = 3;
    }
    if (left < at + 2) return 0;
    uint8_t op = p[at], modrm = p[at + 1];
    int reg_only = (modrm >> 6) == 3;
    int known;
    if (map == 1)
        known = ((op >= 0x41 && op <= 0x42) || (op >= 0x44 && op <= 0x47) || op == 0x4a || op == 0x4b ||
                 op == 0x98 || op == 0x99 || op == 0x92 || op == 0x93)
                    ? reg_only
                    : op == 0x90 || (op == 0x91 && !reg_only);
    else
        known = map == 3 && op >= 0x30 && op <= 0x33 && reg_only;
    if (!known) return 0;
    size_t m = modrm_length(p + at + 1, left - at - 1);
    if (!m) return 0;
    size_t n = at + 1 + m + (map == 3);
    return n <= left ? n : 0;
}

typedef struct { uint64_t from, to; } branch;

/* Branches: direct ones are recorded (their targets are checked once every instruction start
 * is known); an indirect one must read an allowed GOT slot rip-relatively. */
static int check_branch(obj *o, csh h, const cs_insn *in, branch **br, size_t *nbr, size_t *capbr)
{
    const cs_x86 *x = &in->detail->x86;
    const char *name = cs_insn_name(h, in->id);
    if (x->op_count < 1) return 0;
    const cs_x86_op *op = &x->operands[0];
    if (op->type == X86_OP_IMM) {
        if (*nbr == *capbr) {
            size_t nc = *capbr ? *capbr * 2 : 256;
            branch *nb = realloc(*br, nc * sizeof *nb);
            if (!nb) return -1;
            *br = nb, *capbr = nc;
        }
        (*br)[(*nbr)++] = (branch){in->address, (uint64_t)op->imm};
        return 0;
    }
    if (op->type == X86_OP_MEM && op->mem.base == X86_REG_RIP && op->mem.index == X86_REG_INVALID &&
        op->mem.segment == X86_REG_INVALID) {
        uint64_t slot = in->address + in->size + (uint64_t)op->mem.disp;
        int si = slot_index(o, slot);
        if (si >= 0) {
            const Elf64_Sym *s = &o->dyn.sym[o->slot_sym[si]];
            if (s->st_shndx == SHN_UNDEF || (ELF64_ST_TYPE(s->st_info) == STT_FUNC && exec_section_at(o, s->st_value) >= 0)) {
                o->out->n_got_branches++;
                return 0;
            }
        } else if (o->have_pltgot && slot == o->pltgot + 16 && strcmp(name, "jmp") == 0) {
            o->out->n_got_branches++; /* PLT0: the loader's lazy-binding resolver */
            return 0;
        }
        return bad(o, "indirect %s at 0x%" PRIx64 " through 0x%" PRIx64 ", which is not a GOT slot of a function",
                   name, (uint64_t)in->address, slot);
    }
    return bad(o, "indirect %s at 0x%" PRIx64 " is not allowed (function pointers, jump tables)", name,
               (uint64_t)in->address);
}

static int check_insn(obj *o, csh h, const cs_insn *in, branch **br, size_t *nbr, size_t *capbr)
{
    const char *name = cs_insn_name(h, in->id);
    if (!name) name = in->mnemonic;
    for (int k = 0; INSN_DENIED[k].name; k++)
        if (strcmp(name, INSN_DENIED[k].name) == 0)
            return bad(o, "instruction '%s' at 0x%" PRIx64 " is not allowed (%s)", name, (uint64_t)in->address,
                       INSN_DENIED[k].what);
    const char *g = denied_group(in);
    if (g) return bad(o, "instruction '%s' at 0x%" PRIx64 " is not allowed (%s)", name, (uint64_t)in->address, g);
    const cs_x86 *x = &in->detail->x86;
    for (int k = 0; k < x->op_count; k++) {
        const cs_x86_op *op = &x->operands[k];
        if (op->type != X86_OP_MEM || (op->mem.segment != X86_REG_FS && op->mem.segment != X86_REG_GS)) continue;
        /* the stack protector's canary, fs:0x28, is the one thread-pointer access allowed */
        if (op->mem.segment == X86_REG_FS && op->mem.base == X86_REG_INVALID &&
            op->mem.index == X86_REG_INVALID && op->mem.disp == 0x28)
            continue;
        return bad(o, "instruction '%s' at 0x%" PRIx64 " reads or writes through fs/gs (thread pointer)", name,
                   (uint64_t)in->address);
    }
    if (has_group(in, X86_GRP_JUMP) || has_group(in, X86_GRP_CALL))
        return check_branch(o, h, in, br, nbr, capbr);
    /* VEX and EVEX encode only vector, mask and BMI instructions (the state ones, vldmxcsr,
     * are refused above); capstone 4 leaves some of them without a group */
    int vex = in->size >= 3 && (in->bytes[0] == 0xc4 || in->bytes[0] == 0xc5 || in->bytes[0] == 0x62);
    if (has_group(in, X86_GRP_RET) || allowed_group(in) || vex || in_list(name, BASE_OK)) return 0;
    return bad(o, "instruction '%s' at 0x%" PRIx64 " is not on the allow-list", name, (uint64_t)in->address);
}

/* Linear sweep of every executable section: each byte decodes, each instruction allowed; then
 * every direct branch must land on an instruction start (no jumping into the middle of one to
 * run bytes the sweep read differently). */
static int check_code(obj *o)
{
    csh h;
    if (cs_open(CS_ARCH_X86, CS_MODE_64, &h) != CS_ERR_OK)
        return hone_error_set(HONE_EINTERNAL, "capstone: cannot open the x86-64 disassembler");
    cs_option(h, CS_OPT_DETAIL, CS_OPT_ON);
    cs_insn *in = cs_malloc(h);
    branch *br = NULL;
    size_t nbr = 0, capbr = 0;
    int rc = in ? 0 : -1;
    for (int i = 1; i < o->eh->e_shnum && !rc; i++) {
        const Elf64_Shdr *s = &o->sh[i];
        if ((s->sh_flags & (SHF_ALLOC | SHF_EXECINSTR)) != (SHF_ALLOC | SHF_EXECINSTR) || !s->sh_size) continue;
        o->out->n_exec_sections++;
        o->out->code_bytes += s->sh_size;
        o->starts[i] = calloc(s->sh_size / 8 + 1, 1);
        if (!o->starts[i]) {
            rc = -1;
            break;
        }
        const uint8_t *code = o->b + s->sh_offset;
        size_t left = s->sh_size;
        uint64_t addr = s->sh_addr;
        int ends = 0; /* the last instruction does not fall through */
        while (left && !rc) {
            uint64_t at = addr;
            uint64_t off = at - s->sh_addr;
            int decoded = cs_disasm_iter(h, &code, &left, &addr, in);
            const uint8_t *here = o->b + s->sh_offset + off;
            /* an instruction capstone 4 does not know: its length from its fields, or 0 */
            size_t measured = 0;
            if (!decoded) measured = evex_length(here, s->sh_size - off);
            if (!decoded && !measured) measured = vex_mask_length(here, s->sh_size - off);
            if (!decoded && !measured) {
                rc = bad(o, "undecodable bytes at 0x%" PRIx64 " in %s", at, sec_name(o, i));
                break;
            }
            o->starts[i][off / 8] |= (uint8_t)(1u << (off % 8));
            o->out->n_instructions++;
            if (decoded) {
                rc = check_insn(o, h, in, &br, &nbr, &capbr);
                ends = in->id == X86_INS_RET || in->id == X86_INS_JMP || in->id == X86_INS_UD2;
            } else { /* an AVX-512 or opmask instruction capstone does not know */
                ends = 0;
                code = here + measured;
                left = s->sh_size - off - measured;
                addr = at + measured;
            }
        }
        /* running off the end would execute the padding or the next section from a point the
         * sweep did not decode from */
        if (!rc && !ends)
            rc = bad(o, "the code of %s runs off its end at 0x%" PRIx64 " (the last instruction falls through)",
                     sec_name(o, i), (uint64_t)(s->sh_addr + s->sh_size));
    }
    for (size_t k = 0; k < nbr && !rc; k++) {
        int s = exec_section_at(o, br[k].to);
        uint64_t off = s >= 0 ? br[k].to - o->sh[s].sh_addr : 0;
        if (s < 0 || !o->starts[s])
            rc = bad(o, "branch at 0x%" PRIx64 " to 0x%" PRIx64 ", outside executable code", br[k].from, br[k].to);
        else if (!(o->starts[s][off / 8] & (1u << (off % 8))))
            rc = bad(o, "branch at 0x%" PRIx64 " to 0x%" PRIx64 ", which is not the start of an instruction",
                     br[k].from, br[k].to);
    }
    if (rc < 0) rc = hone_error_set(HONE_ENOMEM, "out of memory");
    free(br);
    if (in) cs_free(in, 1);
    cs_close(&h);
    return rc;
}

int hone_verify_object(hone_verify_result *out, const char *so_path, const char *symbol,
                       const hone_verify_opts *opts)
{
    static const hone_verify_opts defaults = HONE_VERIFY_OPTS_INIT;
    if (!opts) opts = &defaults;
    memset(out, 0, sizeof *out);
    out->ok = 1;
    obj o = {.out = out};
    struct stat st;
    if (stat(so_path, &st) != 0) return hone_error_set(HONE_EIO, "cannot stat %s", so_path);
    out->file_bytes = (uint64_t)st.st_size;
    if (out->file_bytes > opts->max_file_bytes) {
        bad(&o, "the object is %" PRIu64 " bytes, above the cap of %" PRIu64, out->file_bytes, opts->max_file_bytes);
        return 0;
    }
    char *raw = NULL;
    size_t sz = 0;
    int rc = hone_file_read(so_path, &raw, &sz);
    if (rc) return rc;
    o.b = (const uint8_t *)raw;
    o.n = sz;
    o.eh = (const Elf64_Ehdr *)raw;
    const uint8_t *rela = NULL, *jmprel = NULL;
    uint64_t relasz = 0, pltrelsz = 0;
    int r = check_header(&o);
    if (!r) {
        o.starts = calloc(o.eh->e_shnum, sizeof *o.starts);
        if (!o.starts) r = -1;
    }
    if (!r) r = check_sections(&o, opts);
    if (!r) r = check_segments(&o, opts);
    if (!r) r = check_dynamic(&o, &rela, &relasz, &jmprel, &pltrelsz);
    if (!r) r = check_symbols(&o, symbol);
    if (!r && rela) r = check_relocations(&o, rela, relasz);
    if (!r && jmprel) r = check_relocations(&o, jmprel, pltrelsz);
    if (!r) r = check_writable(&o);
    if (!r) r = check_exec_coverage(&o);
    if (!r) r = check_code(&o);
    if (r < 0) rc = r == -1 ? hone_error_set(HONE_ENOMEM, "out of memory") : r;
    if (o.starts)
        for (int i = 0; i < o.eh->e_shnum; i++) free(o.starts[i]);
    free(o.starts);
    free(o.slot_addr);
    free(o.slot_sym);
    free(raw);
    return rc;
}
