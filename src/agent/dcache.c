/*
 * dcache.c - the agent's node-local data cache (cr_dcache.h, docs/data.md):
 * the entries and their pins, room by LRU eviction, and the worker thread
 * that fetches (file:, http(s):// and s3:// through libcurl) and hashes.
 */
#include "cr_dcache.h"

#include "cr_alloc.h"
#include "cr_curl.h"
#include "cr_error.h"
#include "cr_log.h"
#include "cr_time.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sodium.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_REFS 16 /* per job: the controller's CTL_DATA_PER_JOB */

enum { E_QUEUED = 0, E_FETCHING, E_READY, E_CHECKING };

typedef struct entry {
    char sha[65];
    char name[64];
    int64_t version;
    char *uri;           /* owned */
    int64_t size;        /* declared */
    int state;           /* E_* */
    int64_t got;         /* E_FETCHING: bytes so far */
    int64_t fetch_start; /* E_FETCHING: monotonic */
    int64_t last_use;    /* monotonic: LRU */
    int pins;            /* jobs holding it */
    uint64_t seq;        /* bumped by each fetch or check that passed */
    bool need_check;     /* a job asked since the last check: hash it */
    /* What the file looked like when last hashed: a job's ask with the
     * same inode, size, mtime and ctime within verify_ns of that hash is
     * served without hashing again (a write, a chmod, a replacement
     * changes ctime); otherwise it is hashed. */
    bool known; /* the fields below are set */
    uint64_t ino;
    int64_t fsize, mtime_ns, ctime_ns;
    int64_t hashed_mono; /* monotonic */
    char wait[200];      /* E_QUEUED: why it waits ("" not waiting) */
} entry;

typedef struct partial {
    char sha[65];
    int64_t bytes;
} partial;

typedef struct jobrec {
    int64_t job, run;
    size_t n;
    char sha[MAX_REFS][65];
    uint64_t seq0[MAX_REFS]; /* the entry's seq at the ask: ready once past it */
    int failed;              /* 0, or the code */
    char why[400];
} jobrec;

struct cr_dcache {
    char *dir;                               /* owned */
    int64_t cap;                             /* bytes */
    int64_t verify_ns;                       /* an entry in use is hashed at least this often */
    char *s3_endpoint, *s3_region, *s3_user; /* owned; s3_user "ACCESS:SECRET" or NULL */
    void (*notify)(void *);
    void *notify_arg;
    pthread_mutex_t mu; /* guards everything below */
    pthread_cond_t cv;
    entry **ents;
    size_t nents, capents;
    partial *parts;
    size_t nparts, capparts;
    jobrec *jobs;
    size_t njobs, capjobs;
    cr_dcache_stats st;
    atomic_int stop;
    pthread_t worker;
    bool started;
};

/* ------------------------------------------------------------------------ */
/* Accounting (mu held)                                                     */

static int64_t used_bytes(const cr_dcache *d)
{
    int64_t u = 0;
    for (size_t i = 0; i < d->nents; i++) {
        const entry *e = d->ents[i];
        if (e->state != E_QUEUED) {
            u += e->size; /* fetching: its reservation */
        }
    }
    for (size_t i = 0; i < d->nparts; i++) {
        u += d->parts[i].bytes;
    }
    return u;
}

static entry *find_entry(cr_dcache *d, const char *sha)
{
    for (size_t i = 0; i < d->nents; i++) {
        if (strcmp(d->ents[i]->sha, sha) == 0) {
            return d->ents[i];
        }
    }
    return NULL;
}

static partial *find_part(cr_dcache *d, const char *sha)
{
    for (size_t i = 0; i < d->nparts; i++) {
        if (strcmp(d->parts[i].sha, sha) == 0) {
            return &d->parts[i];
        }
    }
    return NULL;
}

static void drop_part(cr_dcache *d, const char *sha)
{
    partial *p = find_part(d, sha);
    if (p) {
        *p = d->parts[--d->nparts];
    }
}

static void entry_remove(cr_dcache *d, entry *e)
{
    for (size_t i = 0; i < d->nents; i++) {
        if (d->ents[i] == e) {
            d->ents[i] = d->ents[--d->nents];
            break;
        }
    }
    free(e->uri);
    free(e);
}

static jobrec *find_job(cr_dcache *d, int64_t job)
{
    for (size_t i = 0; i < d->njobs; i++) {
        if (d->jobs[i].job == job) {
            return &d->jobs[i];
        }
    }
    return NULL;
}

static void path_of(const cr_dcache *d, const char *sha, char *buf, size_t len)
{
    snprintf(buf, len, "%s/%s", d->dir, sha);
}

static void part_path(const cr_dcache *d, const char *sha, char *buf, size_t len)
{
    snprintf(buf, len, "%s/.partial/%s.part", d->dir, sha);
}

/* Fail every job waiting on sha with why (the entry is forgotten by the caller). */
static void fail_waiters(cr_dcache *d, const char *sha, int code, const char *why)
{
    for (size_t i = 0; i < d->njobs; i++) {
        jobrec *r = &d->jobs[i];
        for (size_t k = 0; k < r->n && !r->failed; k++) {
            if (strcmp(r->sha[k], sha) == 0) {
                r->failed = code;
                snprintf(r->why, sizeof r->why, "%s", why);
            }
        }
    }
}

static void unpin(cr_dcache *d, jobrec *r)
{
    for (size_t k = 0; k < r->n; k++) {
        entry *e = find_entry(d, r->sha[k]);
        if (e && e->pins > 0) {
            e->pins--;
        }
    }
}

/*
 * Room for e (queued) to be fetched: its size less the partial file it
 * resumes. Removes partial files no entry is fetching, then the least
 * recently used ready entries no job holds. true when there is room.
 */
static bool make_room(cr_dcache *d, entry *e)
{
    partial *own = find_part(d, e->sha);
    int64_t need = e->size - (own ? own->bytes : 0);
    while (used_bytes(d) + need > d->cap) {
        /* a partial file of an entry nobody fetches now goes first */
        size_t pi = d->nparts;
        for (size_t i = 0; i < d->nparts && pi == d->nparts; i++) {
            if (strcmp(d->parts[i].sha, e->sha) != 0 && !find_entry(d, d->parts[i].sha)) {
                pi = i;
            }
        }
        if (pi < d->nparts) {
            char p[1200];
            part_path(d, d->parts[pi].sha, p, sizeof p);
            unlink(p);
            cr_info("data: removed a partial fetch (%lld bytes) to make room",
                    (long long)d->parts[pi].bytes);
            d->parts[pi] = d->parts[--d->nparts];
            continue;
        }
        entry *lru = NULL;
        for (size_t i = 0; i < d->nents; i++) {
            entry *x = d->ents[i];
            if (x->state == E_READY && x->pins == 0 && (!lru || x->last_use < lru->last_use)) {
                lru = x;
            }
        }
        if (!lru) {
            snprintf(e->wait, sizeof e->wait,
                     "waiting for room in the node's data cache (%lld of %lld bytes held by "
                     "running jobs)",
                     (long long)used_bytes(d), (long long)d->cap);
            return false;
        }
        char p[1200];
        path_of(d, lru->sha, p, sizeof p);
        unlink(p);
        cr_info("data: evicted %s@%lld (%lld bytes, least recently used) for %s@%lld", lru->name,
                (long long)lru->version, (long long)lru->size, e->name, (long long)e->version);
        d->st.evictions++;
        entry_remove(d, lru);
    }
    e->wait[0] = '\0';
    return true;
}

/* ------------------------------------------------------------------------ */
/* The worker: fetch and hash (no lock held during I/O)                     */

typedef struct fetch {
    cr_dcache *d;
    entry *e; /* pinned by state E_FETCHING: never removed meanwhile */
    int fd;
    int64_t have; /* bytes in the file */
    int64_t size;
    crypto_hash_sha256_state hs;
    CURL *h;
    const cr_curl_api *api;
    bool restarted; /* the server sent the whole object: written from 0 */
    bool checked;   /* the status was looked at (first write) */
    long status;
    char err[300];
} fetch;

static int put_bytes(fetch *f, const void *buf, size_t n)
{
    if (f->have + (int64_t)n > f->size) {
        snprintf(f->err, sizeof f->err, "more than its declared %lld bytes", (long long)f->size);
        return -1;
    }
    const char *p = buf;
    size_t left = n;
    while (left > 0) {
        ssize_t w = write(f->fd, p, left);
        if (w < 0 && errno == EINTR) {
            continue;
        }
        if (w <= 0) {
            snprintf(f->err, sizeof f->err, "writing the cache: %s", strerror(errno));
            return -1;
        }
        p += w;
        left -= (size_t)w;
    }
    crypto_hash_sha256_update(&f->hs, buf, n);
    f->have += (int64_t)n;
    pthread_mutex_lock(&f->d->mu);
    f->e->got = f->have;
    pthread_mutex_unlock(&f->d->mu);
    return 0;
}

static size_t on_body(char *ptr, size_t size, size_t nmemb, void *ud)
{
    fetch *f = ud;
    size_t n = size * nmemb;
    if (atomic_load(&f->d->stop)) {
        snprintf(f->err, sizeof f->err, "the agent is stopping");
        return 0;
    }
    if (!f->checked) {
        f->checked = true;
        f->api->easy_getinfo(f->h, CURLINFO_RESPONSE_CODE, &f->status);
        if (f->status == 200 && f->have > 0) {
            /* the server ignored the Range: the whole object from 0 */
            if (ftruncate(f->fd, 0) != 0 || lseek(f->fd, 0, SEEK_SET) != 0) {
                snprintf(f->err, sizeof f->err, "truncating the partial file: %s", strerror(errno));
                return 0;
            }
            crypto_hash_sha256_init(&f->hs);
            f->have = 0;
            f->restarted = true;
        }
    }
    return put_bytes(f, ptr, n) == 0 ? n : 0;
}

static int xfer_cb(void *ud, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
    (void)dt, (void)dn, (void)ut, (void)un;
    fetch *f = ud;
    return atomic_load(&f->d->stop) ? 1 : 0;
}

static int fetch_url(fetch *f, const char *uri)
{
    const char *why = NULL;
    f->api = cr_curl_get(&why);
    if (!f->api) {
        snprintf(f->err, sizeof f->err, "libcurl is not available: %s", why);
        return CR_ENOTSUP;
    }
    cr_dcache *d = f->d;
    char *url = NULL;
    if (strncmp(uri, "s3://", 5) == 0) {
        url = cr_asprintf("%s/%s", d->s3_endpoint, uri + 5); /* path style: /bucket/key */
    } else {
        url = cr_strdup(uri);
    }
    f->h = f->api->easy_init();
    if (!f->h) {
        free(url);
        snprintf(f->err, sizeof f->err, "libcurl: no handle");
        return CR_EIO;
    }
    const cr_curl_api *c = f->api;
    c->easy_setopt(f->h, CURLOPT_URL, url);
    c->easy_setopt(f->h, CURLOPT_WRITEFUNCTION, on_body);
    c->easy_setopt(f->h, CURLOPT_WRITEDATA, f);
    c->easy_setopt(f->h, CURLOPT_NOPROGRESS, 0L);
    c->easy_setopt(f->h, CURLOPT_XFERINFOFUNCTION, xfer_cb);
    c->easy_setopt(f->h, CURLOPT_XFERINFODATA, f);
    c->easy_setopt(f->h, CURLOPT_FAILONERROR, 1L);
    c->easy_setopt(f->h, CURLOPT_FOLLOWLOCATION, 1L);
    c->easy_setopt(f->h, CURLOPT_MAXREDIRS, 5L);
    c->easy_setopt(f->h, CURLOPT_NOSIGNAL, 1L);
    c->easy_setopt(f->h, CURLOPT_CONNECTTIMEOUT, 30L);
    c->easy_setopt(f->h, CURLOPT_LOW_SPEED_LIMIT, 1L); /* a stalled server: 60 s */
    c->easy_setopt(f->h, CURLOPT_LOW_SPEED_TIME, 60L);
    c->easy_setopt(f->h, CURLOPT_PROTOCOLS_STR, "http,https");
    c->easy_setopt(f->h, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    if (f->have > 0) {
        c->easy_setopt(f->h, CURLOPT_RESUME_FROM_LARGE, (curl_off_t)f->have);
    }
    char sigv4[160];
    if (strncmp(uri, "s3://", 5) == 0 && d->s3_user) {
        /* untested against a real S3 here (docs/data.md) */
        snprintf(sigv4, sizeof sigv4, "aws:amz:%s:s3", d->s3_region);
        c->easy_setopt(f->h, CURLOPT_AWS_SIGV4, sigv4);
        c->easy_setopt(f->h, CURLOPT_USERPWD, d->s3_user);
    }
    CURLcode rc = c->easy_perform(f->h);
    long status = 0;
    c->easy_getinfo(f->h, CURLINFO_RESPONSE_CODE, &status);
    c->easy_cleanup(f->h);
    f->h = NULL;
    int out = 0;
    if (rc != CURLE_OK && !f->err[0]) {
        if (rc == CURLE_HTTP_RETURNED_ERROR) {
            snprintf(f->err, sizeof f->err, "%s answered HTTP %ld", url, status);
        } else {
            snprintf(f->err, sizeof f->err, "fetching %s: %s", url, c->easy_strerror(rc));
        }
        out = CR_EIO;
    } else if (rc != CURLE_OK) {
        out = CR_EIO;
    }
    free(url);
    return out;
}

static int fetch_file(fetch *f, const char *uri)
{
    const char *path = uri + 5;
    if (strncmp(path, "//", 2) == 0) {
        path += 2;
    }
    int in = open(path, O_RDONLY | O_CLOEXEC);
    if (in < 0) {
        snprintf(f->err, sizeof f->err, "cannot open %s: %s", path, strerror(errno));
        return CR_EIO;
    }
    struct stat sb;
    if (fstat(in, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(in);
        snprintf(f->err, sizeof f->err, "%s is not a regular file", path);
        return CR_EINVAL;
    }
    if ((int64_t)sb.st_size != f->size) {
        close(in);
        snprintf(f->err, sizeof f->err, "%s is %lld bytes, its object says %lld", path,
                 (long long)sb.st_size, (long long)f->size);
        return CR_ECORRUPT;
    }
    if (f->have > 0 && lseek(in, f->have, SEEK_SET) != f->have) {
        close(in);
        snprintf(f->err, sizeof f->err, "seeking %s: %s", path, strerror(errno));
        return CR_EIO;
    }
    char buf[1 << 16];
    int rc = 0;
    for (;;) {
        if (atomic_load(&f->d->stop)) {
            snprintf(f->err, sizeof f->err, "the agent is stopping");
            rc = CR_EIO;
            break;
        }
        ssize_t n = read(in, buf, sizeof buf);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0) {
            snprintf(f->err, sizeof f->err, "reading %s: %s", path, strerror(errno));
            rc = CR_EIO;
            break;
        }
        if (n == 0 || put_bytes(f, buf, (size_t)n) != 0) {
            rc = n == 0 ? 0 : CR_EIO;
            break;
        }
    }
    close(in);
    return rc;
}

/* Hash fd from its start up to bytes into hs; 0 or -1. */
static int hash_fd(int fd, int64_t bytes, crypto_hash_sha256_state *hs, atomic_int *stop)
{
    char buf[1 << 16];
    int64_t left = bytes;
    if (lseek(fd, 0, SEEK_SET) != 0) {
        return -1;
    }
    while (left > 0) {
        if (atomic_load(stop)) {
            return -1;
        }
        ssize_t n = read(fd, buf, left < (int64_t)sizeof buf ? (size_t)left : sizeof buf);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            return -1;
        }
        crypto_hash_sha256_update(hs, (unsigned char *)buf, (size_t)n);
        left -= n;
    }
    return 0;
}

static void hex_of(crypto_hash_sha256_state *hs, char out[65])
{
    unsigned char md[crypto_hash_sha256_BYTES];
    crypto_hash_sha256_final(hs, md);
    sodium_bin2hex(out, 65, md, sizeof md);
}

/* Fetch e (E_FETCHING) into its partial file and rename it into place.
 * 0, or a code with why; *keep_part: the partial file stays for a resume. */
static int do_fetch(cr_dcache *d, entry *e, const char *uri, char *why, size_t whylen,
                    bool *keep_part, bool *resumed)
{
    char part[1200], final[1200];
    part_path(d, e->sha, part, sizeof part);
    path_of(d, e->sha, final, sizeof final);
    fetch f = {.d = d, .e = e, .fd = -1, .size = e->size};
    crypto_hash_sha256_init(&f.hs);
    *keep_part = false;
    *resumed = false;
    f.fd = open(part, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (f.fd < 0) {
        snprintf(why, whylen, "cannot write the cache's partial file: %s", strerror(errno));
        return CR_EIO;
    }
    struct stat sb;
    int rc = 0;
    if (fstat(f.fd, &sb) == 0 && sb.st_size > 0 && sb.st_size <= e->size &&
        hash_fd(f.fd, sb.st_size, &f.hs, &d->stop) == 0) {
        f.have = sb.st_size;
        *resumed = true;
        cr_info("data: %s@%lld: resuming a partial fetch at %lld bytes", e->name,
                (long long)e->version, (long long)f.have);
    } else {
        crypto_hash_sha256_init(&f.hs);
        if (ftruncate(f.fd, 0) != 0) {
            snprintf(why, whylen, "truncating the partial file: %s", strerror(errno));
            close(f.fd);
            return CR_EIO;
        }
    }
    if (lseek(f.fd, f.have, SEEK_SET) != f.have) {
        snprintf(why, whylen, "seeking the partial file: %s", strerror(errno));
        close(f.fd);
        return CR_EIO;
    }
    if (f.have < f.size) {
        rc = strncmp(uri, "file:", 5) == 0 ? fetch_file(&f, uri) : fetch_url(&f, uri);
    }
    if (f.restarted) {
        *resumed = false;
    }
    if (rc == 0 && f.have != f.size) {
        snprintf(f.err, sizeof f.err, "got %lld bytes, its object says %lld", (long long)f.have,
                 (long long)f.size);
        rc = CR_ECORRUPT;
    }
    char hex[65] = "";
    if (rc == 0) {
        hex_of(&f.hs, hex);
        if (strcmp(hex, e->sha) != 0) {
            /* what came is named in the agent's log only: the job's reason
             * (its user) learns no hash of bytes it may not read */
            cr_warn("data: %s@%lld: what came has sha256 %s", e->name, (long long)e->version, hex);
            snprintf(f.err, sizeof f.err,
                     "checksum mismatch: what came does not have the object's sha256 %s", e->sha);
            rc = CR_ECORRUPT;
        }
    }
    if (rc == 0 && (fsync(f.fd) != 0 || fchmod(f.fd, 0444) != 0 || rename(part, final) != 0)) {
        snprintf(f.err, sizeof f.err, "putting it in place: %s", strerror(errno));
        rc = CR_EIO;
    }
    close(f.fd);
    if (rc != 0) {
        snprintf(why, whylen, "%s", f.err[0] ? f.err : cr_strerror(rc));
        /* a transport failure keeps what came, for a later resume; bad
         * bytes never stay */
        *keep_part = rc == CR_EIO && f.have > 0 && f.have < f.size;
        if (!*keep_part) {
            unlink(part);
        }
        e->got = f.have;
    }
    return rc;
}

/* Hash DIR/<sha>; 0 when it is the object. */
static int check_entry(cr_dcache *d, const entry *e, char *got, size_t gotlen)
{
    char p[1200];
    path_of(d, e->sha, p, sizeof p);
    int fd = open(p, O_RDONLY | O_CLOEXEC);
    struct stat sb;
    if (fd < 0 || fstat(fd, &sb) != 0 || sb.st_size != e->size) {
        snprintf(got, gotlen, fd < 0 ? "missing" : "%lld bytes",
                 fd < 0 ? 0LL : (long long)sb.st_size);
        if (fd >= 0) {
            close(fd);
        }
        return -1;
    }
    crypto_hash_sha256_state hs;
    crypto_hash_sha256_init(&hs);
    int rc = hash_fd(fd, e->size, &hs, &d->stop);
    close(fd);
    if (rc != 0) {
        snprintf(got, gotlen, "unreadable");
        return -1;
    }
    char hex[65];
    hex_of(&hs, hex);
    if (strcmp(hex, e->sha) != 0) {
        snprintf(got, gotlen, "sha256 %s", hex);
        return -1;
    }
    return 0;
}

/* Remember what the entry's file looks like now (it was just hashed). */
static void note_file(cr_dcache *d, entry *e)
{
    char p[1200];
    struct stat sb;
    path_of(d, e->sha, p, sizeof p);
    e->known = stat(p, &sb) == 0;
    if (e->known) {
        e->ino = (uint64_t)sb.st_ino;
        e->fsize = (int64_t)sb.st_size;
        e->mtime_ns = (int64_t)sb.st_mtim.tv_sec * CR_NS_PER_SEC + sb.st_mtim.tv_nsec;
        e->ctime_ns = (int64_t)sb.st_ctim.tv_sec * CR_NS_PER_SEC + sb.st_ctim.tv_nsec;
    }
    e->hashed_mono = cr_mono_ns();
}

/* The entry's file is as it was when hashed, and that was recently. */
static bool file_unchanged(const cr_dcache *d, const entry *e)
{
    char p[1200];
    struct stat sb;
    if (!e->known || cr_mono_ns() - e->hashed_mono >= d->verify_ns) {
        return false;
    }
    path_of(d, e->sha, p, sizeof p);
    return stat(p, &sb) == 0 && (uint64_t)sb.st_ino == e->ino && (int64_t)sb.st_size == e->fsize &&
           (int64_t)sb.st_mtim.tv_sec * CR_NS_PER_SEC + sb.st_mtim.tv_nsec == e->mtime_ns &&
           (int64_t)sb.st_ctim.tv_sec * CR_NS_PER_SEC + sb.st_ctim.tv_nsec == e->ctime_ns;
}

static void *worker(void *arg)
{
    cr_dcache *d = arg;
    pthread_mutex_lock(&d->mu);
    while (!atomic_load(&d->stop)) {
        entry *e = NULL;
        bool check = false;
        for (size_t i = 0; i < d->nents && !e; i++) {
            if (d->ents[i]->state == E_READY && d->ents[i]->need_check) {
                e = d->ents[i];
                check = true;
            }
        }
        for (size_t i = 0; i < d->nents && !e; i++) {
            entry *x = d->ents[i];
            if (x->state != E_QUEUED) {
                continue;
            }
            if (x->size > d->cap) {
                char why[400];
                snprintf(why, sizeof why,
                         "data %s@%lld: %lld bytes, larger than this node's data cache (cap "
                         "%lld bytes)",
                         x->name, (long long)x->version, (long long)x->size, (long long)d->cap);
                cr_error("%s", why);
                fail_waiters(d, x->sha, CR_ETOOBIG, why);
                entry_remove(d, x);
                pthread_mutex_unlock(&d->mu);
                if (d->notify) {
                    d->notify(d->notify_arg);
                }
                pthread_mutex_lock(&d->mu);
                i = (size_t)-1; /* the list changed: from the start */
                continue;
            }
            if (make_room(d, x)) {
                e = x;
            }
        }
        if (!e) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_sec += 1;
            pthread_cond_timedwait(&d->cv, &d->mu, &ts);
            continue;
        }
        if (check) {
            e->state = E_CHECKING;
            pthread_mutex_unlock(&d->mu);
            char got[120];
            int bad = check_entry(d, e, got, sizeof got);
            pthread_mutex_lock(&d->mu);
            e->need_check = false;
            if (bad == 0) {
                e->state = E_READY;
                e->seq++;
                note_file(d, e);
            } else {
                cr_warn("data: %s@%lld: the cached copy is damaged (%s, want sha256 %s): "
                        "removed, fetching it again",
                        e->name, (long long)e->version, got, e->sha);
                d->st.corrupt++;
                char p[1200];
                path_of(d, e->sha, p, sizeof p);
                unlink(p);
                e->state = E_QUEUED;
                continue;
            }
        } else {
            char *uri = cr_strdup(e->uri);
            drop_part(d, e->sha);
            e->state = E_FETCHING;
            e->got = 0;
            e->fetch_start = cr_mono_ns();
            d->st.fetches++;
            cr_info("data: fetching %s@%lld from %s (%lld bytes)", e->name, (long long)e->version,
                    uri, (long long)e->size);
            pthread_mutex_unlock(&d->mu);
            char why[320];
            bool keep = false, resumed = false;
            int rc = do_fetch(d, e, uri, why, sizeof why, &keep, &resumed);
            free(uri);
            pthread_mutex_lock(&d->mu);
            if (rc == 0) {
                e->state = E_READY;
                e->need_check = false;
                e->seq++;
                note_file(d, e);
                e->last_use = cr_mono_ns();
                d->st.fetched_ok++;
                d->st.resumed += resumed ? 1 : 0;
                cr_info("data: fetched %s@%lld (%lld bytes, sha256 ok%s, %lld ms)", e->name,
                        (long long)e->version, (long long)e->size, resumed ? ", resumed" : "",
                        (long long)((cr_mono_ns() - e->fetch_start) / CR_NS_PER_MS));
            } else {
                char msg[400];
                snprintf(msg, sizeof msg, "data %s@%lld: %s", e->name, (long long)e->version, why);
                cr_error("%s", msg);
                if (keep) {
                    CR_GROW(d->parts, d->nparts, d->capparts);
                    partial *p = &d->parts[d->nparts++];
                    snprintf(p->sha, sizeof p->sha, "%s", e->sha);
                    p->bytes = e->got;
                }
                fail_waiters(d, e->sha, rc, msg);
                entry_remove(d, e);
            }
        }
        pthread_mutex_unlock(&d->mu);
        if (d->notify) {
            d->notify(d->notify_arg);
        }
        pthread_mutex_lock(&d->mu);
    }
    pthread_mutex_unlock(&d->mu);
    return NULL;
}

/* ------------------------------------------------------------------------ */
/* Open, close, ask                                                         */

static bool is_sha_name(const char *s, size_t n)
{
    if (strlen(s) < n) {
        return false;
    }
    for (size_t i = 0; i < 64; i++) {
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) {
            return false;
        }
    }
    return strlen(s) == n;
}

/* What the directory holds from an earlier run: entries (not trusted:
 * checked at their first use like any), partial files. */
static void scan(cr_dcache *d)
{
    DIR *dd = opendir(d->dir);
    struct dirent *de;
    while (dd && (de = readdir(dd))) {
        char p[1200];
        struct stat sb;
        snprintf(p, sizeof p, "%s/%s", d->dir, de->d_name);
        if (de->d_name[0] == '.' || lstat(p, &sb) != 0) {
            continue;
        }
        if (!S_ISREG(sb.st_mode) || !is_sha_name(de->d_name, 64)) {
            cr_warn("data: %s is no cache entry: removed", p);
            unlink(p);
            continue;
        }
        entry *e = cr_calloc(1, sizeof *e);
        snprintf(e->sha, sizeof e->sha, "%s", de->d_name);
        snprintf(e->name, sizeof e->name, "%.12s", de->d_name);
        e->uri = cr_strdup("");
        e->size = (int64_t)sb.st_size;
        e->state = E_READY;
        e->last_use = 0; /* older than anything used in this run */
        CR_GROW(d->ents, d->nents, d->capents);
        d->ents[d->nents++] = e;
    }
    if (dd) {
        closedir(dd);
    }
    char pd[1100];
    snprintf(pd, sizeof pd, "%s/.partial", d->dir);
    dd = opendir(pd);
    while (dd && (de = readdir(dd))) {
        char p[1400];
        struct stat sb;
        snprintf(p, sizeof p, "%s/%s", pd, de->d_name);
        if (de->d_name[0] == '.' || lstat(p, &sb) != 0) {
            continue;
        }
        if (!S_ISREG(sb.st_mode) || !is_sha_name(de->d_name, 69) ||
            strcmp(de->d_name + 64, ".part") != 0) {
            unlink(p);
            continue;
        }
        CR_GROW(d->parts, d->nparts, d->capparts);
        partial *pp = &d->parts[d->nparts++];
        snprintf(pp->sha, sizeof pp->sha, "%.64s", de->d_name);
        pp->bytes = (int64_t)sb.st_size;
    }
    if (dd) {
        closedir(dd);
    }
}

int cr_dcache_new(const char *dir, int64_t cap_bytes, int64_t verify_s, const cr_dcache_s3 *s3,
                  void (*notify)(void *arg), void *arg, cr_dcache **out, char *why, size_t whylen)
{
    if (cap_bytes <= 0) {
        snprintf(why, whylen, "the cap must be > 0 bytes");
        return CR_EINVAL;
    }
    char pd[1100];
    snprintf(pd, sizeof pd, "%s/.partial", dir);
    if ((mkdir(dir, 0711) != 0 && errno != EEXIST) || chmod(dir, 0711) != 0 ||
        (mkdir(pd, 0700) != 0 && errno != EEXIST)) {
        snprintf(why, whylen, "cannot make %s: %s", dir, strerror(errno));
        return CR_EIO;
    }
    if (sodium_init() < 0) {
        snprintf(why, whylen, "libsodium did not initialise");
        return CR_EIO;
    }
    cr_dcache *d = cr_calloc(1, sizeof *d);
    d->dir = cr_strdup(dir);
    d->cap = cap_bytes;
    d->verify_ns = verify_s * CR_NS_PER_SEC;
    d->st.cap_bytes = cap_bytes;
    d->s3_endpoint = cr_strdup(s3 && s3->endpoint ? s3->endpoint : "https://s3.amazonaws.com");
    d->s3_region = cr_strdup(s3 && s3->region ? s3->region : "us-east-1");
    if (s3 && s3->access_key && s3->secret_key) {
        d->s3_user = cr_asprintf("%s:%s", s3->access_key, s3->secret_key);
    }
    d->notify = notify;
    d->notify_arg = arg;
    pthread_mutex_init(&d->mu, NULL);
    pthread_cond_init(&d->cv, NULL);
    scan(d);
    if (pthread_create(&d->worker, NULL, worker, d) != 0) {
        snprintf(why, whylen, "cannot start the cache's thread");
        d->started = false;
        cr_dcache_free(d);
        return CR_EIO;
    }
    d->started = true;
    cr_info("data: cache %s, cap %lld bytes, %zu entries and %zu partial fetches from before "
            "(%lld bytes)",
            dir, (long long)cap_bytes, d->nents, d->nparts, (long long)used_bytes(d));
    *out = d;
    return 0;
}

void cr_dcache_free(cr_dcache *d)
{
    if (!d) {
        return;
    }
    atomic_store(&d->stop, 1);
    pthread_mutex_lock(&d->mu);
    pthread_cond_broadcast(&d->cv);
    pthread_mutex_unlock(&d->mu);
    if (d->started) {
        pthread_join(d->worker, NULL);
    }
    for (size_t i = 0; i < d->nents; i++) {
        free(d->ents[i]->uri);
        free(d->ents[i]);
    }
    free(d->ents);
    free(d->parts);
    free(d->jobs);
    free(d->dir);
    free(d->s3_endpoint);
    free(d->s3_region);
    if (d->s3_user) {
        sodium_memzero(d->s3_user, strlen(d->s3_user));
        free(d->s3_user);
    }
    pthread_cond_destroy(&d->cv);
    pthread_mutex_destroy(&d->mu);
    free(d);
}

static void release_locked(cr_dcache *d, int64_t job)
{
    jobrec *r = find_job(d, job);
    if (r) {
        unpin(d, r);
        *r = d->jobs[--d->njobs];
    }
}

void cr_dcache_pin(cr_dcache *d, int64_t job, int64_t run, const cr_dref *refs, size_t n)
{
    pthread_mutex_lock(&d->mu);
    if (!find_job(d, job) && n <= MAX_REFS) {
        CR_GROW(d->jobs, d->njobs, d->capjobs);
        jobrec *r = &d->jobs[d->njobs++];
        memset(r, 0, sizeof *r);
        r->job = job;
        r->run = run;
        for (size_t i = 0; i < n; i++) {
            entry *e = find_entry(d, refs[i].sha256);
            if (e) {
                e->pins++;
                snprintf(r->sha[r->n], sizeof r->sha[r->n], "%s", e->sha);
                r->seq0[r->n++] = e->seq;
            }
        }
    }
    pthread_mutex_unlock(&d->mu);
}

void cr_dcache_release(cr_dcache *d, int64_t job)
{
    pthread_mutex_lock(&d->mu);
    release_locked(d, job);
    pthread_cond_broadcast(&d->cv); /* room may have come */
    pthread_mutex_unlock(&d->mu);
}

size_t cr_dcache_jobs(cr_dcache *d, int64_t *ids, size_t max)
{
    pthread_mutex_lock(&d->mu);
    size_t n = d->njobs;
    for (size_t i = 0; i < n && i < max; i++) {
        ids[i] = d->jobs[i].job;
    }
    pthread_mutex_unlock(&d->mu);
    return n;
}

size_t cr_dcache_held(cr_dcache *d, char (*out)[65], size_t max)
{
    size_t n = 0;
    pthread_mutex_lock(&d->mu);
    for (size_t i = 0; i < d->nents && n < max; i++) {
        if (d->ents[i]->state == E_READY || d->ents[i]->state == E_CHECKING) {
            memcpy(out[n++], d->ents[i]->sha, 65);
        }
    }
    pthread_mutex_unlock(&d->mu);
    return n;
}

void cr_dcache_get_stats(cr_dcache *d, cr_dcache_stats *out)
{
    pthread_mutex_lock(&d->mu);
    *out = d->st;
    out->used_bytes = used_bytes(d);
    pthread_mutex_unlock(&d->mu);
}

static void mb(int64_t bytes, char *buf, size_t len)
{
    snprintf(buf, len, "%.1f", (double)bytes / 1e6);
}

int cr_dcache_want(cr_dcache *d, int64_t job, int64_t run, const cr_dref *refs, size_t n,
                   char **paths, char *msg, size_t msglen)
{
    if (n > MAX_REFS) {
        snprintf(msg, msglen, "data: %zu objects, at most %d per job", n, MAX_REFS);
        return CR_ERANGE;
    }
    pthread_mutex_lock(&d->mu);
    jobrec *r = find_job(d, job);
    if (r && r->run != run) {
        release_locked(d, job);
        r = NULL;
    }
    if (!r) {
        bool ready_now[MAX_REFS] = {false};
        CR_GROW(d->jobs, d->njobs, d->capjobs);
        r = &d->jobs[d->njobs++];
        memset(r, 0, sizeof *r);
        r->job = job;
        r->run = run;
        r->n = n;
        for (size_t i = 0; i < n; i++) {
            entry *e = find_entry(d, refs[i].sha256);
            if (!e) {
                e = cr_calloc(1, sizeof *e);
                snprintf(e->sha, sizeof e->sha, "%s", refs[i].sha256);
                e->state = E_QUEUED;
                CR_GROW(d->ents, d->nents, d->capents);
                d->ents[d->nents++] = e;
            } else if (e->state == E_READY && e->seq > 0 && file_unchanged(d, e)) {
                ready_now[i] = true; /* hashed recently, not touched since */
            } else if (e->state == E_READY) {
                e->need_check = true; /* checked for this job */
            }
            if (!e->uri || !e->uri[0] || e->name[0] == '\0' || e->version == 0) {
                /* an entry from an earlier run learns its names */
                free(e->uri);
                e->uri = cr_strdup(refs[i].uri);
                snprintf(e->name, sizeof e->name, "%s", refs[i].name);
                e->version = refs[i].version;
                if (e->state == E_QUEUED) {
                    e->size = refs[i].size_bytes;
                }
            }
            if (e->state == E_QUEUED && e->size != refs[i].size_bytes) {
                e->size = refs[i].size_bytes;
            }
            e->pins++;
            snprintf(r->sha[i], sizeof r->sha[i], "%s", e->sha);
            r->seq0[i] = ready_now[i] ? e->seq - 1 : e->seq;
        }
        pthread_cond_broadcast(&d->cv);
    }
    int rc = CR_DCACHE_READY;
    if (r->failed) {
        snprintf(msg, msglen, "%s", r->why);
        rc = r->failed;
        goto out;
    }
    for (size_t i = 0; i < r->n && rc == CR_DCACHE_READY; i++) {
        entry *e = find_entry(d, r->sha[i]);
        const char *nm = refs[i].name;
        long long v = (long long)refs[i].version;
        char a[32], b[32];
        if (!e) {
            snprintf(msg, msglen, "data %s@%lld: gone from the cache", nm, v);
            rc = CR_EIO;
        } else if (e->state == E_READY && e->seq > r->seq0[i]) {
            continue;
        } else if (e->state == E_FETCHING) {
            mb(e->got, a, sizeof a);
            mb(e->size, b, sizeof b);
            double s = (double)(cr_mono_ns() - e->fetch_start) / 1e9;
            snprintf(msg, msglen, "staging %s@%lld %s/%s MB, %.1f MB/s", nm, v, a, b,
                     s > 0 ? (double)e->got / 1e6 / s : 0.0);
            rc = CR_DCACHE_STAGING;
        } else if (e->state == E_QUEUED) {
            snprintf(msg, msglen, "staging %s@%lld: %s", nm, v,
                     e->wait[0] ? e->wait : "queued for fetching");
            rc = CR_DCACHE_STAGING;
        } else {
            snprintf(msg, msglen, "staging %s@%lld: checking its sha256", nm, v);
            rc = CR_DCACHE_STAGING;
        }
    }
    if (rc == CR_DCACHE_READY) {
        int64_t now = cr_mono_ns();
        for (size_t i = 0; i < r->n; i++) {
            entry *e = find_entry(d, r->sha[i]);
            e->last_use = now;
            char p[1200];
            path_of(d, e->sha, p, sizeof p);
            paths[i] = cr_strdup(p);
        }
    }
out:
    pthread_mutex_unlock(&d->mu);
    return rc;
}
