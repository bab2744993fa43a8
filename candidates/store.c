/* The content-addressed candidate store (see store.h): directories named by SHA-256, a
 * meta.json per candidate rewritten atomically on every state change. */
#include "store.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "candidates/sha256.h"
#include "engine/error.h"
#include "engine/file.h"

struct hone_store {
    char dir[4096];
};


const char *hone_store_state_name(hone_store_state st)
{

    switch (st) {
    case HONE_STORE_PROPOSED: return "proposed";
    case HONE_STORE_COMPILED: return "compiled";
    case HONE_STORE_KERNEL_PARITY: return "kernel-parity";
    case HONE_STORE_MODEL_PARITY: return "model-parity";
    case HONE_STORE_SPEED: return "speed";
    case HONE_STORE_ACCEPTED: return "accepted";
    case HONE_STORE_REJECTED: return "rejected";
    }
    return "unknown";
}

int hone_store_default_dir(char *buf, size_t cap)
{
    const char *x = getenv("XDG_CACHE_HOME");
    int n;
    if (x && *x) {
        n = snprintf(buf, cap, "%s/hone", x);
    } else {
        const char *h = getenv("HOME");
        if (!h || !*h) return hone_error_set(HONE_EINVAL, "neither XDG_CACHE_HOME nor HOME is set");
        n = snprintf(buf, cap, "%s/.cache/hone", h);
    }
    if (n < 0 || (size_t)n >= cap) return hone_error_set(HONE_ERANGE, "state directory path too long");
    return 0;
}

/* mkdir -p */
static int mkdirs(const char *path)
{
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s", path) >= (int)sizeof tmp)
        return hone_error_set(HONE_ERANGE, "path too long: %s", path);
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
            return hone_error_set(HONE_EIO, "mkdir %s: %s", tmp, strerror(errno));
        *p = '/';
    }
    if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
        return hone_error_set(HONE_EIO, "mkdir %s: %s", tmp, strerror(errno));
    return 0;
}

static int fsync_dir_of(const char *path)
{
    char d[4096];
    snprintf(d, sizeof d, "%s", path);
    char *slash = strrchr(d, '/');
    if (slash) *slash = 0;
    else snprintf(d, sizeof d, ".");
    int fd = open(d[0] ? d : "/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return hone_error_set(HONE_EIO, "open %s: %s", d, strerror(errno));
    int rc = fsync(fd) == 0 || errno == EINVAL ? 0 : hone_error_set(HONE_EIO, "fsync %s: %s", d, strerror(errno));
    close(fd);
    return rc;
}

int hone_store_atomic_write(const char *path, const void *data, size_t len)
{
    /* a temp name no other writer (process or thread) can have: mkstemp's, in path's directory */
    char tmp[4200];
    if (snprintf(tmp, sizeof tmp, "%s.tmp.%ld.XXXXXX", path, (long)getpid()) >= (int)sizeof tmp)
        return hone_error_set(HONE_ERANGE, "path too long: %s", path);
    int fd = mkostemp(tmp, O_CLOEXEC);
    if (fd < 0) return hone_error_set(HONE_EIO, "open %s: %s", tmp, strerror(errno));
    fchmod(fd, 0644);
    const char *p = data;
    size_t left = len;
    while (left) {
        ssize_t w = write(fd, p, left);
        if (w < 0) {
            if (errno == EINTR) continue;
            int e = errno;
            close(fd);
            unlink(tmp);
            return hone_error_set(HONE_EIO, "write %s: %s", tmp, strerror(e));
        }
        p += w;
        left -= (size_t)w;
    }
    if (fsync(fd) != 0) {
        int e = errno;
        close(fd);
        unlink(tmp);
        return hone_error_set(HONE_EIO, "fsync %s: %s", tmp, strerror(e));
    }
    close(fd);
    if (rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        return hone_error_set(HONE_EIO, "rename %s: %s", path, strerror(e));
    }
    return fsync_dir_of(path);
}

int hone_store_open(hone_store **out, const char *dir)
{
    *out = NULL;
    hone_store *s = calloc(1, sizeof *s);
    if (!s) return hone_error_set(HONE_ENOMEM, "out of memory");
    int rc = 0;
    if (dir) snprintf(s->dir, sizeof s->dir, "%s", dir);
    else if ((rc = hone_store_default_dir(s->dir, sizeof s->dir)) != 0) goto done;
    char c[4200];
    snprintf(c, sizeof c, "%s/candidates", s->dir);
    if ((rc = mkdirs(c)) != 0) goto done;
    *out = s;
    s = NULL;
done:
    free(s);
    return rc;
}

void hone_store_free(hone_store *s) { free(s); }
const char *hone_store_dir(const hone_store *s) { return s->dir; }

static int valid_hash(const char *h)
{
    if (!h || strlen(h) != 64) return 0;
    for (int i = 0; i < 64; i++)
        if (!((h[i] >= '0' && h[i] <= '9') || (h[i] >= 'a' && h[i] <= 'f'))) return 0;
    return 1;
}

int hone_store_path(const hone_store *s, const char *hash, const char *name, char *buf, size_t cap)
{
    if (!valid_hash(hash)) return hone_error_set(HONE_EINVAL, "not a content hash: %s", hash ? hash : "(null)");
    if (strchr(name, '/') || name[0] == '.') return hone_error_set(HONE_EINVAL, "bad store file name %s", name);
    int n = snprintf(buf, cap, "%s/candidates/%s/%s", s->dir, hash, name);
    if (n < 0 || (size_t)n >= cap) return hone_error_set(HONE_ERANGE, "store path too long");
    return 0;
}

int hone_store_write(hone_store *s, const char *hash, const char *name, const void *data, size_t len)
{
    char p[4400];
    int rc = hone_store_path(s, hash, name, p, sizeof p);
    return rc ? rc : hone_store_atomic_write(p, data, len);
}

int hone_store_read_meta(const hone_store *s, const char *hash, char **out)
{
    char p[4400];
    int rc = hone_store_path(s, hash, "meta.json", p, sizeof p);
    if (rc) return rc;
    return hone_file_read(p, out, NULL) ? hone_error_set(HONE_EIO, "cannot read %s", p) : 0;
}

/* meta.json is read, changed and rewritten: two guards on one candidate would lose each other's
 * history. An exclusive flock on <candidate>/.lock (held until unlock_meta) serialises them. */
static int lock_meta(const hone_store *s, const char *hash)
{
    char p[4400];
    if (!valid_hash(hash)) return hone_error_set(HONE_EINVAL, "not a content hash: %s", hash ? hash : "(null)");
    if (snprintf(p, sizeof p, "%s/candidates/%s/.lock", s->dir, hash) >= (int)sizeof p)
        return hone_error_set(HONE_ERANGE, "store path too long");
    int fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return hone_error_set(HONE_EIO, "open %s: %s", p, strerror(errno));
    while (flock(fd, LOCK_EX) != 0)
        if (errno != EINTR) {
            int e = errno;
            close(fd);
            return hone_error_set(HONE_EIO, "flock %s: %s", p, strerror(e));
        }
    return fd;
}

static void unlock_meta(int fd)
{
    if (fd >= 0) close(fd); /* releases the flock */
}

static void iso_now(char buf[32])
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    strftime(buf, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static int save_meta(hone_store *s, const char *hash, cJSON *meta)
{
    char *txt = cJSON_Print(meta);
    if (!txt) return hone_error_set(HONE_ENOMEM, "out of memory");
    size_t n = strlen(txt);
    char *t2 = realloc(txt, n + 2);
    if (!t2) {
        free(txt);
        return hone_error_set(HONE_ENOMEM, "out of memory");
    }
    t2[n] = '\n';
    t2[n + 1] = 0;
    int rc = hone_store_write(s, hash, "meta.json", t2, n + 1);
    free(t2);
    return rc;
}

static void add_history(cJSON *meta, const char *state, const char *reason)
{
    char now[32];
    iso_now(now);
    cJSON *hist = cJSON_GetObjectItem(meta, "history");
    if (!hist) hist = cJSON_AddArrayToObject(meta, "history");
    cJSON *e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "state", state);
    cJSON_AddStringToObject(e, "time", now);
    if (reason) cJSON_AddStringToObject(e, "reason", reason);
    cJSON_AddItemToArray(hist, e);
    cJSON_DeleteItemFromObject(meta, "updated");
    cJSON_AddStringToObject(meta, "updated", now);
}

static void add_str(cJSON *o, const char *k, const char *v)
{
    if (v) cJSON_AddStringToObject(o, k, v);
    else cJSON_AddNullToObject(o, k);
}

int hone_store_put(hone_store *s, char out_hash[65], const char *src, size_t len,
                   const hone_store_meta *meta)
{
    hone_sha256_hex(src, len, out_hash);
    char d[4400];
    snprintf(d, sizeof d, "%s/candidates/%s", s->dir, out_hash);
    int rc = mkdirs(d);
    if (rc) return rc;
    int cuda = meta && meta->backend && strcmp(meta->backend, "cuda") == 0;
    const char *srcname = cuda ? "source.cu" : "source.c";
    char *old = NULL;
    cJSON *m = NULL;
    int lk = lock_meta(s, out_hash);
    if (lk < 0) return lk;
    if (hone_store_read_meta(s, out_hash, &old) == 0 && (m = cJSON_Parse(old)) != NULL) {
        /* already stored: record that it was proposed again */
        add_history(m, "proposed", "proposed again");
        cJSON_DeleteItemFromObject(m, "state");
        cJSON_AddStringToObject(m, "state", "proposed");
    } else {
        if ((rc = hone_store_write(s, out_hash, srcname, src, len)) != 0) goto done;
        char now[32];
        iso_now(now);
        m = cJSON_CreateObject();
        cJSON_AddStringToObject(m, "hash", out_hash);
        cJSON_AddStringToObject(m, "hash_algorithm", "sha256");
        add_str(m, "slot", meta ? meta->slot : NULL);
        add_str(m, "backend", meta ? meta->backend : NULL);
        cJSON *o = cJSON_AddObjectToObject(m, "origin");
        add_str(o, "kind", meta ? meta->origin_kind : NULL);
        add_str(o, "detail", meta ? meta->origin : NULL);
        add_str(m, "incumbent", meta ? meta->incumbent : NULL);
        cJSON_AddStringToObject(m, "source", srcname);
        cJSON_AddStringToObject(m, "created", now);
        cJSON_AddStringToObject(m, "state", "proposed");
        add_history(m, "proposed", NULL);
    }
    rc = save_meta(s, out_hash, m);
done:
    unlock_meta(lk);
    cJSON_Delete(m);
    free(old);
    return rc;
}

int hone_store_set_state(hone_store *s, const char *hash, hone_store_state state,
                         const char *reason, const char *evidence_json)
{
    char *old = NULL;
    int rc, lk = lock_meta(s, hash);
    if (lk < 0) return lk;
    if ((rc = hone_store_read_meta(s, hash, &old))) {
        unlock_meta(lk);
        return rc;
    }
    cJSON *m = cJSON_Parse(old);
    free(old);
    if (!m) {
        unlock_meta(lk);
        return hone_error_set(HONE_EFORMAT, "meta.json of %s is not JSON", hash);
    }
    const char *name = hone_store_state_name(state);
    cJSON_DeleteItemFromObject(m, "state");
    cJSON_AddStringToObject(m, "state", name);
    cJSON_DeleteItemFromObject(m, "reason");
    if (reason) cJSON_AddStringToObject(m, "reason", reason);
    if (evidence_json) {
        cJSON *ev = cJSON_Parse(evidence_json);
        if (ev) {
            cJSON_DeleteItemFromObject(m, "evidence");
            cJSON_AddItemToObject(m, "evidence", ev);
        }
    }
    add_history(m, name, reason);
    rc = save_meta(s, hash, m);
    unlock_meta(lk);
    cJSON_Delete(m);
    return rc;
}
