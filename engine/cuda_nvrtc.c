/* NVRTC compilation, launch-line parsing and the on-disk cubin cache (engine/cuda_nvrtc.h). */
#include "cuda_nvrtc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cuda.h"
#include "error.h"

/* ---- the launch line ----------------------------------------------------------------------- */

int hone_cuda_nvrtc_parse_launch(hone_cuda_launch *out, const char *src, const char *name)
{
    static const char tag[] = "hone-launch:";
    const char *p = strstr(src, tag);
    memset(out, 0, sizeof *out);
    if (!p) return hone_error_set(HONE_EFORMAT, "%s: no '// hone-launch: block=B x=X y=Y' line", name);
    if (strstr(p + 1, tag))
        return hone_error_set(HONE_EFORMAT, "%s: more than one hone-launch line", name);
    p += sizeof tag - 1;
    int seen_block = 0, seen_x = 0, seen_y = 0;
    out->smem = 0;
    while (*p && *p != '\n') {
        while (*p == ' ' || *p == '\t' || *p == '\r') p++;
        if (!*p || *p == '\n') break;
        char key[16];
        int k = 0;
        while (*p && *p != '=' && *p != ' ' && *p != '\n' && k < (int)sizeof key - 1) key[k++] = *p++;
        key[k] = 0;
        if (*p != '=') return hone_error_set(HONE_EFORMAT, "%s: hone-launch: expected key=value near '%s'", name, key);
        p++;
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || errno || v < 0 || v > (1L << 20))
            return hone_error_set(HONE_EFORMAT, "%s: hone-launch: bad value for %s", name, key);
        p = end;
        if (!strcmp(key, "block")) { out->block = (int)v; seen_block = 1; }
        else if (!strcmp(key, "x")) { out->x = (int)v; seen_x = 1; }
        else if (!strcmp(key, "y")) { out->y = (int)v; seen_y = 1; }
        else if (!strcmp(key, "smem")) out->smem = (int)v;
        else return hone_error_set(HONE_EFORMAT, "%s: hone-launch: unknown key '%s'", name, key);
    }
    if (!seen_block || !seen_x || !seen_y)
        return hone_error_set(HONE_EFORMAT, "%s: hone-launch needs block, x and y", name);
    if (out->block < 32 || out->block > 1024 || out->block % 32)
        return hone_error_set(HONE_EFORMAT, "%s: hone-launch: block=%d is not a multiple of 32 in "
                              "[32, 1024]", name, out->block);
    if (out->x < 1 || out->y < 1)
        return hone_error_set(HONE_EFORMAT, "%s: hone-launch: x and y must be >= 1", name);
    if (out->smem > 227 * 1024)
        return hone_error_set(HONE_EFORMAT, "%s: hone-launch: smem=%d exceeds 227 KiB", name, out->smem);
    return 0;
}

#ifdef HONE_HAVE_CUDA

/* ---- hashing: two independent 64-bit FNV-1a streams, finalised by splitmix64 -------------- */

typedef struct { uint64_t a, b; } hash128;

static void hash_bytes(hash128 *h, const void *p, size_t n)
{
    const unsigned char *s = p;
    for (size_t i = 0; i < n; i++) {
        h->a = (h->a ^ s[i]) * 0x100000001b3ull;
        h->b = (h->b ^ s[i]) * 0x00000100000001b3ull + 0x9e3779b97f4a7c15ull;
    }
}

/* A field: its length, then its bytes (so "ab"+"c" and "a"+"bc" differ). */
static void hash_field(hash128 *h, const void *p, size_t n)
{
    uint64_t len = n;
    hash_bytes(h, &len, sizeof len);
    hash_bytes(h, p, n);
}

static uint64_t mix64(uint64_t x)
{
    x ^= x >> 30; x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27; x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static uint64_t checksum(const void *p, size_t n)
{
    hash128 h = {0xcbf29ce484222325ull, 0x6a09e667f3bcc908ull};
    hash_bytes(&h, p, n);
    return mix64(h.a ^ mix64(h.b));
}

/* ---- compile options --------------------------------------------------------------------- */

#define MAX_OPTS 12

/* The engine's NVRTC options for arch sm: the architecture, HONE_CUDA_NVRTC_FLAGS, and in
 * strict mode the spill warnings. The strings live in b. */
typedef struct {
    char arch[64];
    char flags[sizeof HONE_CUDA_NVRTC_FLAGS];
} opts_buf;

static int build_opts(const char *opts[MAX_OPTS], opts_buf *b, const hone_cuda_nvrtc_opts *o)
{
    int n = 0;
    snprintf(b->arch, sizeof b->arch, "--gpu-architecture=sm_%d", o->sm);
    opts[n++] = b->arch;
    n += hone_cuda_nvrtc_flags(opts + n, MAX_OPTS - 2, b->flags);
    if (o->strict) opts[n++] = "--ptxas-options=--warn-on-spills";
    return n;
}

static void key_of(hash128 *key, const char *name, const char *src, const hone_cuda_nvrtc_opts *o)
{
    const char *opts[MAX_OPTS];
    opts_buf ob;
    int n = build_opts(opts, &ob, o);
    int major = 0, minor = 0;
    nvrtcVersion(&major, &minor);
    hash128 h = {0xcbf29ce484222325ull, 0x84caa73b2cee4cb5ull};
    static const char domain[] = "hone-cubin-v1";
    hash_field(&h, domain, sizeof domain);
    int ver[2] = {major, minor};
    hash_field(&h, ver, sizeof ver);
    for (int i = 0; i < n; i++) hash_field(&h, opts[i], strlen(opts[i]));
    hash_field(&h, name, strlen(name));
    hash_field(&h, src, strlen(src));
    const char *hdr = o->header ? o->header : "";
    hash_field(&h, hdr, strlen(hdr));
    key->a = mix64(h.a);
    key->b = mix64(h.b ^ key->a);
}

/* ---- the cache --------------------------------------------------------------------------- */

int hone_cuda_nvrtc_cache_dir(char *buf, size_t cap)
{
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    int n;
    if (xdg && *xdg) n = snprintf(buf, cap, "%s/hone/cubin", xdg);
    else if (home && *home) n = snprintf(buf, cap, "%s/.cache/hone/cubin", home);
    else n = snprintf(buf, cap, "/tmp/hone-cache-%ld/cubin", (long)getuid());
    if (n < 0 || (size_t)n >= cap) return hone_error_set(HONE_ERANGE, "cache directory path too long");
    return 0;
}

int hone_cuda_nvrtc_cache_path(char *buf, size_t cap, const char *name, const char *src,
                               const hone_cuda_nvrtc_opts *o)
{
    char dir[4096];
    int rc;
    if (o->cache_dir) snprintf(dir, sizeof dir, "%s", o->cache_dir);
    else if ((rc = hone_cuda_nvrtc_cache_dir(dir, sizeof dir))) return rc;
    hash128 k;
    key_of(&k, name, src, o);
    int n = snprintf(buf, cap, "%s/%016llx%016llx-sm%d.cubin", dir, (unsigned long long)k.a,
                     (unsigned long long)k.b, o->sm);
    if (n < 0 || (size_t)n >= cap) return hone_error_set(HONE_ERANGE, "cache path too long");
    return 0;
}

static const char cache_magic[8] = {'H', 'O', 'N', 'E', 'C', 'U', 'B', '1'};

typedef struct {
    char magic[8];
    uint64_t key_a, key_b;
    uint64_t size;
    uint64_t sum;
} cache_header;

/* 1: *out filled from a valid cache file; 0: no file; -1: a file that failed its checks. */
static int cache_read(const char *path, const hash128 *key, void **out, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    cache_header h;
    int ok = -1;
    void *buf = NULL;
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || fread(&h, sizeof h, 1, f) != 1) goto done;
    if (memcmp(h.magic, cache_magic, sizeof cache_magic) || h.key_a != key->a || h.key_b != key->b)
        goto done;
    if (h.size == 0 || h.size > (1u << 30) || (uint64_t)st.st_size != sizeof h + h.size) goto done;
    if (!(buf = malloc(h.size)) || fread(buf, 1, h.size, f) != h.size) goto done;
    if (checksum(buf, h.size) != h.sum) goto done;
    *out = buf;
    *size = h.size;
    buf = NULL;
    ok = 1;
done:
    free(buf);
    fclose(f);
    return ok;
}

static int mkdirs(const char *path)
{
    char tmp[4400];
    snprintf(tmp, sizeof tmp, "%s", path);
    for (char *p = tmp + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            if (mkdir(tmp, 0755) != 0 && errno != EEXIST) return -1;
            *p = '/';
        }
    return mkdir(tmp, 0755) != 0 && errno != EEXIST ? -1 : 0;
}

/* Writes the cache file atomically (temporary name, fsync, rename). Failure only loses the
 * cache entry, so it is not an error for the caller. */
static void cache_write(const char *path, const hash128 *key, const void *cubin, size_t size)
{
    char dir[4400], tmp[4480];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash) return;
    *slash = 0;
    if (mkdirs(dir) != 0) return;
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return;
    cache_header h;
    memcpy(h.magic, cache_magic, sizeof cache_magic);
    h.key_a = key->a;
    h.key_b = key->b;
    h.size = size;
    h.sum = checksum(cubin, size);
    int ok = write(fd, &h, sizeof h) == (ssize_t)sizeof h && write(fd, cubin, size) == (ssize_t)size &&
             fsync(fd) == 0;
    ok = close(fd) == 0 && ok;
    if (!ok || rename(tmp, path) != 0) unlink(tmp);
}

/* ---- compile ----------------------------------------------------------------------------- */

static int compile(hone_cuda_cubin *out, const char *name, const char *src, const hone_cuda_nvrtc_opts *o)
{
    nvrtcProgram prog = NULL;
    const char *opts[MAX_OPTS];
    opts_buf ob;
    int n_opts = build_opts(opts, &ob, o);
    const char *hdr_src[1] = {o->header}, *hdr_name[1] = {"common.cuh"};
    int rc = HONE_NVRTC(nvrtcCreateProgram(&prog, src, name, o->header ? 1 : 0, hdr_src, hdr_name));
    if (rc) return rc;
    nvrtcResult cr = nvrtcCompileProgram(prog, n_opts, opts);
    size_t log_size = 0;
    if ((rc = HONE_NVRTC(nvrtcGetProgramLogSize(prog, &log_size)))) goto done;
    if (!(out->log = malloc(log_size + 1))) { rc = hone_error_set(HONE_ENOMEM, "out of memory"); goto done; }
    out->log[0] = 0;
    if (log_size && (rc = HONE_NVRTC(nvrtcGetProgramLog(prog, out->log)))) goto done;
    out->log[log_size] = 0;
    /* trim the trailing newlines/NUL NVRTC adds to an empty log */
    for (size_t l = strlen(out->log); l > 0 && (out->log[l - 1] == '\n' || out->log[l - 1] == ' '); l--)
        out->log[l - 1] = 0;
    if (cr != NVRTC_SUCCESS) {
        rc = hone_error_set(HONE_EFORMAT, "%s: NVRTC compile for sm_%d failed (%s):\n%s", name, o->sm,
                            nvrtcGetErrorString(cr), out->log);
        goto done;
    }
    if (o->strict && out->log[0]) {
        rc = hone_error_set(HONE_EFORMAT, "%s: NVRTC warnings for sm_%d (strict):\n%s", name, o->sm, out->log);
        goto done;
    }
    if ((rc = HONE_NVRTC(nvrtcGetCUBINSize(prog, &out->size)))) goto done;
    if (out->size == 0) { rc = hone_error_set(HONE_EINTERNAL, "%s: NVRTC produced no cubin", name); goto done; }
    if (!(out->cubin = malloc(out->size))) { rc = hone_error_set(HONE_ENOMEM, "out of memory"); goto done; }
    rc = HONE_NVRTC(nvrtcGetCUBIN(prog, out->cubin));
done:
    nvrtcDestroyProgram(&prog);
    return rc;
}

int hone_cuda_nvrtc_compile(hone_cuda_cubin *out, const char *name, const char *src,
                            const hone_cuda_nvrtc_opts *o)
{
    int rc;
    char path[4400];
    hash128 key;
    memset(out, 0, sizeof *out);
    if (o->sm < 50 || o->sm > 200) return hone_error_set(HONE_EINVAL, "%s: bad architecture sm_%d", name, o->sm);
    int cached = o->use_cache && hone_cuda_nvrtc_cache_path(path, sizeof path, name, src, o) == 0;
    if (cached) {
        key_of(&key, name, src, o);
        int r = cache_read(path, &key, &out->cubin, &out->size);
        if (r == 1) {
            out->from_cache = 1;
            out->log = calloc(1, 1);
            if (!out->log) { hone_cuda_cubin_free(out); return hone_error_set(HONE_ENOMEM, "out of memory"); }
            return 0;
        }
        out->cache_rejected = r < 0;
    }
    int rejected = out->cache_rejected;
    if ((rc = compile(out, name, src, o))) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", hone_error_last());
        hone_cuda_cubin_free(out);
        out->cache_rejected = rejected;
        return hone_error_set(rc, "%s", msg);
    }
    if (cached) cache_write(path, &key, out->cubin, out->size);
    return 0;
}

void hone_cuda_cubin_free(hone_cuda_cubin *c)
{
    if (!c) return;
    free(c->cubin);
    free(c->log);
    memset(c, 0, sizeof *c);
}

/* ---- the ELF symbol check ---------------------------------------------------------------- */

typedef struct { unsigned char ident[16]; uint16_t type, machine; uint32_t version; uint64_t entry, phoff, shoff;
                 uint32_t flags; uint16_t ehsize, phentsize, phnum, shentsize, shnum, shstrndx; } elf64_ehdr;
typedef struct { uint32_t name, type; uint64_t flags, addr, offset, size; uint32_t link, info;
                 uint64_t addralign, entsize; } elf64_shdr;
typedef struct { uint32_t name; unsigned char info, other; uint16_t shndx; uint64_t value, size; } elf64_sym;

int hone_cuda_nvrtc_has_symbol(const void *cubin, size_t size, const char *sym)
{
    const unsigned char *b = cubin;
    elf64_ehdr eh;
    if (size < sizeof eh) return hone_error_set(HONE_EFORMAT, "cubin too small for an ELF header");
    memcpy(&eh, b, sizeof eh);
    if (memcmp(eh.ident, "\177ELF", 4) || eh.ident[4] != 2 /* ELFCLASS64 */)
        return hone_error_set(HONE_EFORMAT, "cubin is not an ELF64 file");
    if (eh.shentsize != sizeof(elf64_shdr) || eh.shoff > size ||
        (uint64_t)eh.shnum * sizeof(elf64_shdr) > size - eh.shoff)
        return hone_error_set(HONE_EFORMAT, "cubin section table out of bounds");
    for (int i = 0; i < eh.shnum; i++) {
        elf64_shdr sh;
        memcpy(&sh, b + eh.shoff + (uint64_t)i * sizeof sh, sizeof sh);
        if (sh.type != 2 /* SHT_SYMTAB */) continue;
        if (sh.entsize != sizeof(elf64_sym) || sh.offset > size || sh.size > size - sh.offset || sh.link >= eh.shnum)
            return hone_error_set(HONE_EFORMAT, "cubin symbol table out of bounds");
        elf64_shdr st;
        memcpy(&st, b + eh.shoff + (uint64_t)sh.link * sizeof st, sizeof st);
        if (st.offset > size || st.size > size - st.offset)
            return hone_error_set(HONE_EFORMAT, "cubin string table out of bounds");
        for (uint64_t k = 0; k < sh.size / sizeof(elf64_sym); k++) {
            elf64_sym s;
            memcpy(&s, b + sh.offset + k * sizeof s, sizeof s);
            if ((s.info & 0xf) != 2 /* STT_FUNC */ || s.name >= st.size) continue;
            const char *nm = (const char *)b + st.offset + s.name;
            size_t room = st.size - s.name;
            if (strnlen(nm, room) < room && !strcmp(nm, sym)) return 1;
        }
    }
    return 0;
}

#else /* !HONE_HAVE_CUDA: the launch parser above works everywhere; compiling needs NVRTC */

int hone_cuda_nvrtc_compile(hone_cuda_cubin *out, const char *name, const char *src,
                            const hone_cuda_nvrtc_opts *o)
{
    (void)src; (void)o;
    memset(out, 0, sizeof *out);
    return hone_error_set(HONE_EUNSUPPORTED, "%s: this build has no NVRTC", name);
}

void hone_cuda_cubin_free(hone_cuda_cubin *c) { (void)c; }

int hone_cuda_nvrtc_has_symbol(const void *cubin, size_t size, const char *sym)
{
    (void)cubin; (void)size; (void)sym;
    return hone_error_set(HONE_EUNSUPPORTED, "this build has no CUDA support");
}

int hone_cuda_nvrtc_cache_dir(char *buf, size_t cap)
{
    (void)buf; (void)cap;
    return hone_error_set(HONE_EUNSUPPORTED, "this build has no CUDA support");
}

int hone_cuda_nvrtc_cache_path(char *buf, size_t cap, const char *name, const char *src,
                               const hone_cuda_nvrtc_opts *o)
{
    (void)buf; (void)cap; (void)name; (void)src; (void)o;
    return hone_error_set(HONE_EUNSUPPORTED, "this build has no CUDA support");
}

#endif
