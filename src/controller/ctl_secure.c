/*
 * ctl_secure.c - what keeps one tenant's secrets from another and one node
 * from impersonating another: the state dir's modes and key, sealed
 * secrets, bootstrap tokens and node admission, and the audit log.
 *
 * Key: <state_dir>/secret.key, 32 random bytes, 0600, made once. Job
 * secrets and the controller's bearer for each agent are sealed with it
 * (libsodium crypto_secretbox: XSalsa20-Poly1305, a random nonce per seal)
 * before they reach the store, so a copy of corral.db alone reveals none.
 *
 * Node admission: a node joins with a bootstrap token (admin-made,
 * short-lived, single use by default, stored as a hash) and receives its
 * own credential (an agent token, hashed in the store) that may act only as
 * that node. A bootstrap token may register only a name that is not
 * registered yet, unless an admin bound it to that node (a re-key). The
 * legacy join.token file (config "join_token": true, the default for
 * one-machine demos) is an unlimited bootstrap token under the same rule.
 *
 * Audit: one objects row ("audit", key = zero-padded time + sequence) per
 * mutating request, queued without waiting for the commit; pruned by the
 * scheduler thread's timer after audit_retention_s.
 */
#include "ctl_int.h"

#include "cr_alloc.h"
#include "cr_envname.h"
#include "cr_error.h"
#include "cr_log.h"
#include "cr_parse.h"
#include "cr_time.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_SECRETS       64
#define MAX_SECRET_BYTES  (64 * 1024)
#define MAX_SEALED_BYTES  (4 * 1024 * 1024)
#define MAX_BOOT_TOKENS   1024
#define MAX_BOOT_TTL_S    (30LL * 86400)
#define AUDIT_MAX_LIMIT   10000
#define AUDIT_PRUNE_EVERY (3600 * CR_NS_PER_SEC)

/* ------------------------------------------------------------------------ */
/* State dir and key                                                        */

/* 0700 for the state dir, 0600 for the controller's own files in it: the
 * store, its WAL, the token files and the key. Nothing else in the
 * directory is touched (a state dir pointed at a directory holding other
 * things must not make them private), links are never followed, and a
 * shared directory (world-writable, sticky like /tmp, or another user's) is
 * refused. */
static int fix_modes(const char *dir)
{
    static const char *const own[] = {
        "corral.db",  "corral.db-wal", "corral.db-shm", "corral.db-journal", "admin.token",
        "join.token", "secret.key",    "cluster.id",    "listen.addr",       NULL};
    struct stat st;
    if (lstat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        cr_error("state dir %s: not a directory", dir);
        return CR_EIO;
    }
    if ((st.st_mode & (S_ISVTX | S_IWOTH)) != 0 || st.st_uid != geteuid()) {
        cr_error("state dir %s: a shared directory (world-writable, sticky or not this user's): "
                 "give the controller a directory of its own",
                 dir);
        return CR_EPERM;
    }
    if (chmod(dir, 0700) != 0) {
        cr_error("state dir %s: chmod 0700: %s", dir, strerror(errno));
        return CR_EIO;
    }
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) {
        cr_error("state dir %s: %s", dir, strerror(errno));
        return CR_EIO;
    }
    int rc = 0;
    for (size_t i = 0; own[i]; i++) {
        if (fstatat(dfd, own[i], &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) {
            continue;
        }
        if ((st.st_mode & 07777) != 0600 && fchmodat(dfd, own[i], 0600, 0) != 0) {
            cr_error("state dir %s: chmod %s: %s", dir, own[i], strerror(errno));
            rc = CR_EIO;
        }
    }
    close(dfd);
    return rc;
}

static int load_key(ctl *c)
{
    char path[1200];
    snprintf(path, sizeof path, "%s/secret.key", c->cfg.state_dir);
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0 && errno == ENOENT) {
        randombytes_buf(c->secret_key, sizeof c->secret_key);
        fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd < 0 ||
            write(fd, c->secret_key, sizeof c->secret_key) != (ssize_t)sizeof c->secret_key ||
            fsync(fd) != 0) {
            cr_error("cannot create the key file %s: %s", path, strerror(errno));
            if (fd >= 0) {
                close(fd);
            }
            return CR_EIO;
        }
        close(fd);
        cr_info("first start: secrets key written to %s (mode 0600)", path);
        return 0;
    }
    if (fd < 0) {
        cr_error("cannot open the key file %s: %s", path, strerror(errno));
        return CR_EIO;
    }
    uint8_t extra;
    ssize_t n = read(fd, c->secret_key, sizeof c->secret_key);
    ssize_t more = read(fd, &extra, 1);
    close(fd);
    if (n != (ssize_t)sizeof c->secret_key || more != 0) {
        cr_error("key file %s: must hold exactly %zu bytes", path, sizeof c->secret_key);
        return CR_EIO;
    }
    return 0;
}

int ctl_secure_start(ctl *c)
{
    /* Whatever this process creates from now on (the store, its WAL and
     * shared-memory files, token files) is the controller's alone. */
    umask(077);
    int rc = fix_modes(c->cfg.state_dir);
    if (rc == 0) {
        rc = load_key(c);
    }
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Sealed secrets                                                           */

char *ctl_seal(const ctl *c, const char *text)
{
    size_t len = strlen(text);
    size_t blen = crypto_secretbox_NONCEBYTES + crypto_secretbox_MACBYTES + len;
    uint8_t *box = cr_malloc(blen);
    randombytes_buf(box, crypto_secretbox_NONCEBYTES);
    crypto_secretbox_easy(box + crypto_secretbox_NONCEBYTES, (const uint8_t *)text, len, box,
                          c->secret_key);
    size_t olen = sodium_base64_ENCODED_LEN(blen, sodium_base64_VARIANT_ORIGINAL);
    char *out = cr_malloc(olen);
    sodium_bin2base64(out, olen, box, blen, sodium_base64_VARIANT_ORIGINAL);
    free(box);
    return out;
}

int ctl_unseal(const ctl *c, const char *sealed, char **out)
{
    size_t slen = strlen(sealed);
    if (slen > MAX_SEALED_BYTES) {
        return CR_EINVAL;
    }
    uint8_t *box = cr_malloc(slen + 1);
    size_t blen = 0;
    int rc = CR_EINVAL;
    char *plain = NULL;
    if (sodium_base642bin(box, slen + 1, sealed, slen, NULL, &blen, NULL,
                          sodium_base64_VARIANT_ORIGINAL) != 0 ||
        blen < crypto_secretbox_NONCEBYTES + crypto_secretbox_MACBYTES) {
        goto out;
    }
    size_t plen = blen - crypto_secretbox_NONCEBYTES - crypto_secretbox_MACBYTES;
    plain = cr_malloc(plen + 1);
    if (crypto_secretbox_open_easy((uint8_t *)plain, box + crypto_secretbox_NONCEBYTES,
                                   blen - crypto_secretbox_NONCEBYTES, box, c->secret_key) != 0) {
        goto out;
    }
    plain[plen] = '\0';
    *out = plain;
    plain = NULL;
    rc = 0;
out:
    free(box);
    free(plain);
    return rc;
}

void ctl_secret_free(char *s)
{
    if (s) {
        sodium_memzero(s, strlen(s));
        free(s);
    }
}

/* ------------------------------------------------------------------------ */
/* A job's environment, sealed at rest                                      */

void ctl_job_env_seal(const ctl *c, json_t *spec)
{
    json_t *env = json_object_get(spec, "env");
    if (!json_is_object(env)) {
        return;
    }
    if (json_object_size(env) > 0) {
        char *plain = json_dumps(env, JSON_COMPACT);
        char *sealed = ctl_seal(c, plain ? plain : "{}");
        ctl_secret_free(plain);
        json_object_set_new(spec, "env_enc", json_string(sealed));
        json_object_set_new(spec, "env_names", ctl_env_names(env));
        free(sealed);
    }
    json_object_del(spec, "env");
}

json_t *ctl_job_env_open(const ctl *c, int64_t job_id, const json_t *spec)
{
    const char *sealed = json_string_value(json_object_get(spec, "env_enc"));
    if (!sealed) {
        /* a job stored before its environment was sealed */
        json_t *env = json_object_get(spec, "env");
        return json_is_object(env) ? json_deep_copy(env) : json_object();
    }
    char *plain = NULL;
    json_t *env = NULL;
    if (ctl_unseal(c, sealed, &plain) == 0) {
        env = json_loads(plain, 0, NULL);
    }
    ctl_secret_free(plain);
    if (!json_is_object(env)) {
        cr_error("job=%lld: its environment does not open with this controller's key",
                 (long long)job_id);
        json_decref(env);
        return NULL;
    }
    return env;
}

static bool env_name_ok(const char *k)
{
    if (!*k || strlen(k) > 128 || (*k >= '0' && *k <= '9')) {
        return false;
    }
    for (const char *p = k; *p; p++) {
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '_')) {
            return false;
        }
    }
    return true;
}

int ctl_secrets_check(const json_t *secrets, cr_json_err *err)
{
    if (json_object_size(secrets) > MAX_SECRETS) {
        return cr_json_fail(err, CR_EINVAL, "secrets", "field 'secrets': at most %d secrets",
                            MAX_SECRETS);
    }
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)secrets, k, v)
    {
        char f[300];
        cr_json_path(f, sizeof f, "secrets", k);
        if (!env_name_ok(k)) {
            return cr_json_fail(err, CR_EINVAL, f,
                                "field '%s': a secret name is a variable name (letters, digits, "
                                "'_', not starting with a digit)",
                                f);
        }
        if (cr_env_reserved(k, strlen(k))) {
            return cr_json_fail(err, CR_EINVAL, f,
                                "field '%s': %s is set by the node (GPU selection, ranks, "
                                "Corral's own), not by a job",
                                f, k);
        }
        if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v) ||
            json_string_length(v) > MAX_SECRET_BYTES) {
            return cr_json_fail(err, CR_EINVAL, f,
                                "field '%s': must be a string without NUL, at most %d bytes", f,
                                MAX_SECRET_BYTES);
        }
    }
    return 0;
}

/* Control characters as \xNN, so that a value cannot forge a line. */
static void escape_text(const char *s, char *out, size_t len)
{
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p && o + 5 < len; p++) {
        if (*p < 0x20 || *p >= 0x7f) {
            o += (size_t)snprintf(out + o, len - o, "\\x%02x", *p);
        } else {
            out[o++] = (char)*p;
        }
    }
    out[o] = '\0';
}

/* ------------------------------------------------------------------------ */
/* Bootstrap tokens                                                         */

static void boot_key(int64_t id, char *buf, size_t len)
{
    snprintf(buf, len, "%012lld", (long long)id);
}

static json_t *boot_json(const ctl_boot *b)
{
    char t[64];
    return json_pack("{s:I,s:s,s:I,s:s,s:s}", "id", (json_int_t)b->id, "expires",
                     ctl_time_str(b->expires_ns, t, sizeof t), "uses_left",
                     (json_int_t)b->uses_left, "node", b->node, "name", b->name);
}

static void boot_persist(cr_store_txn *txn, const ctl_boot *b)
{
    char key[32];
    boot_key(b->id, key, sizeof key);
    json_t *doc = json_pack("{s:I,s:I,s:I,s:s,s:s,s:s}", "id", (json_int_t)b->id, "expires_ns",
                            (json_int_t)b->expires_ns, "uses_left", (json_int_t)b->uses_left,
                            "node", b->node, "name", b->name, "hash", b->hash_hex);
    char *s = json_dumps(doc, JSON_COMPACT);
    cr_store_txn_put(txn, "bootstrap", key, s);
    free(s);
    json_decref(doc);
}

static ctl_boot *boot_find(ctl *c, int64_t id)
{
    for (size_t i = 0; i < c->nboots; i++) {
        if (c->boots[i].id == id) {
            return &c->boots[i];
        }
    }
    return NULL;
}

/* Forget a bootstrap token: memory, lookup table, store. mu held. */
static void boot_drop(ctl *c, cr_store_txn *txn, ctl_boot *b)
{
    char key[32];
    boot_key(b->id, key, sizeof key);
    cr_auth_table_revoke_id(c->auth, b->id);
    cr_store_txn_del(txn, "bootstrap", key);
    *b = c->boots[--c->nboots];
}

static void boot_create(ctl *c, cr_http_req *req)
{
    size_t len;
    const char *body = cr_http_body(req, &len);
    json_t *v = NULL;
    cr_json_err err;
    static const char *const members[] = {"ttl_s", "uses", "node", "name", NULL};
    int64_t ttl = 3600, uses = 1;
    const char *node = "", *name = "bootstrap";
    if (cr_json_parse_object(len ? body : "{}", len ? len : 2, &v, &err) ||
        cr_json_only(v, "", members, &err) ||
        cr_json_int(v, "", "ttl_s", false, 1, MAX_BOOT_TTL_S, &ttl, &err) ||
        cr_json_int(v, "", "uses", false, 1, 1000, &uses, &err) ||
        cr_json_str(v, "", "node", false, CTL_NAME_MAX - 1, &node, &err) ||
        cr_json_str(v, "", "name", false, CTL_NAME_MAX - 1, &name, &err)) {
        json_decref(v);
        ctl_reply_jerr(req, &err);
        return;
    }
    /* node and name point into v: decide before it goes. */
    const char *bad = !ctl_text_clean(name) ? "name" : !ctl_text_clean(node) ? "node" : NULL;
    bool slash = !bad && strchr(node, '/') != NULL;
    if (bad || slash) {
        json_decref(v);
        if (slash) {
            ctl_reply_err(req, 400, CR_EINVAL, "node", "field 'node': '/' is not allowed");
        } else {
            ctl_reply_err(req, 400, CR_EINVAL, bad,
                          "field '%s': control characters are not allowed", bad);
        }
        return;
    }
    ctl_boot b;
    memset(&b, 0, sizeof b);
    b.expires_ns = cr_now_ns() + ttl * CR_NS_PER_SEC;
    b.uses_left = uses;
    snprintf(b.node, sizeof b.node, "%s", node);
    snprintf(b.name, sizeof b.name, "%s", name);
    json_decref(v);
    pthread_mutex_lock(&c->mu);
    if (c->nboots >= MAX_BOOT_TOKENS) {
        pthread_mutex_unlock(&c->mu);
        ctl_reply_err(req, 409, CR_EQUOTA, NULL,
                      "%d bootstrap tokens exist: delete some (DELETE /v1/bootstrap-tokens/ID)",
                      MAX_BOOT_TOKENS);
        return;
    }
    b.id = c->next_token_id++;
    char text[CR_TOKEN_TEXT_MAX];
    uint8_t hash[CR_TOKEN_HASH_BYTES];
    cr_auth_mint(text, hash);
    cr_auth_hash_hex(hash, b.hash_hex);
    cr_principal p;
    memset(&p, 0, sizeof p);
    p.id = b.id;
    p.role = CR_ROLE_JOIN;
    snprintf(p.name, sizeof p.name, "bootstrap:%.53s", b.name);
    cr_auth_table_put(c->auth, hash, &p);
    CR_GROW(c->boots, c->nboots, c->capboots);
    c->boots[c->nboots++] = b;
    cr_store_txn *txn = cr_store_txn_new();
    boot_persist(txn, &b);
    json_t *ans = boot_json(&b);
    json_object_set_new(ans, "token", json_string(text));
    sodium_memzero(text, sizeof text);
    ctl_commit_reply(c, txn, req, 201, ans);
    pthread_mutex_unlock(&c->mu);
}

int ctl_boot_mint(ctl *c, cr_store_txn *txn, const char *node, int64_t ttl_s, char *text_out)
{
    if (c->nboots >= MAX_BOOT_TOKENS) {
        return CR_EQUOTA;
    }
    ctl_boot b;
    memset(&b, 0, sizeof b);
    b.expires_ns = cr_now_ns() + ttl_s * CR_NS_PER_SEC;
    b.uses_left = 1;
    snprintf(b.node, sizeof b.node, "%s", node);
    snprintf(b.name, sizeof b.name, "pool:%.50s", node);
    b.id = c->next_token_id++;
    uint8_t hash[CR_TOKEN_HASH_BYTES];
    cr_auth_mint(text_out, hash);
    cr_auth_hash_hex(hash, b.hash_hex);
    cr_principal p;
    memset(&p, 0, sizeof p);
    p.id = b.id;
    p.role = CR_ROLE_JOIN;
    snprintf(p.name, sizeof p.name, "bootstrap:%.53s", b.name);
    cr_auth_table_put(c->auth, hash, &p);
    CR_GROW(c->boots, c->nboots, c->capboots);
    c->boots[c->nboots++] = b;
    boot_persist(txn, &b);
    return 0;
}

void ctl_boot_forget(ctl *c, cr_store_txn *txn, const char *node)
{
    for (size_t i = 0; i < c->nboots;) {
        if (strcmp(c->boots[i].node, node) == 0 && strncmp(c->boots[i].name, "pool:", 5) == 0) {
            boot_drop(c, txn, &c->boots[i]); /* (the last one moves into slot i) */
        } else {
            i++;
        }
    }
}

void ctl_route_bootstrap(ctl *c, cr_http_req *req, const cr_principal *p, char **seg, size_t nseg)
{
    const char *m = cr_http_method(req);
    cr_http_set_route(req, nseg == 2 ? "/v1/bootstrap-tokens" : "/v1/bootstrap-tokens/{id}");
    if (p->role != CR_ROLE_ADMIN) {
        ctl_reply_err(req, 403, CR_EPERM, NULL, "only an admin may manage bootstrap tokens");
        return;
    }
    if (nseg == 2 && strcmp(m, "POST") == 0) {
        boot_create(c, req);
        return;
    }
    if (nseg == 2 && strcmp(m, "GET") == 0) {
        json_t *items = json_array();
        pthread_mutex_lock(&c->mu);
        for (size_t i = 0; i < c->nboots; i++) {
            json_array_append_new(items, boot_json(&c->boots[i]));
        }
        pthread_mutex_unlock(&c->mu);
        size_t n = json_array_size(items);
        ctl_reply_json(req, 200, json_pack("{s:o,s:I}", "items", items, "count", (json_int_t)n));
        return;
    }
    if (nseg == 3 && strcmp(m, "DELETE") == 0) {
        int64_t id;
        pthread_mutex_lock(&c->mu);
        ctl_boot *b = cr_parse_i64(seg[2], 1, INT64_MAX / 2, &id) == 0 ? boot_find(c, id) : NULL;
        if (!b) {
            pthread_mutex_unlock(&c->mu);
            ctl_reply_err(req, 404, CR_ENOENT, NULL, "bootstrap token '%s' not found", seg[2]);
            return;
        }
        cr_store_txn *txn = cr_store_txn_new();
        boot_drop(c, txn, b);
        ctl_commit_reply(c, txn, req, 200,
                         json_pack("{s:I,s:b}", "id", (json_int_t)id, "revoked", 1));
        pthread_mutex_unlock(&c->mu);
        return;
    }
    ctl_reply_err(req, 405, CR_ENOTSUP, NULL, "method %s not allowed here", m);
}

static void load_boot(void *arg, const char *key, const char *doc)
{
    ctl *c = arg;
    json_t *v = json_loads(doc, 0, NULL);
    const char *hex = json_string_value(json_object_get(v, "hash"));
    uint8_t hash[CR_TOKEN_HASH_BYTES];
    if (!hex || cr_auth_hash_unhex(hex, hash) != 0) {
        cr_error("store: bad bootstrap token '%s' ignored", key);
        json_decref(v);
        return;
    }
    ctl_boot b;
    memset(&b, 0, sizeof b);
    b.id = (int64_t)json_integer_value(json_object_get(v, "id"));
    b.expires_ns = (int64_t)json_integer_value(json_object_get(v, "expires_ns"));
    b.uses_left = (int64_t)json_integer_value(json_object_get(v, "uses_left"));
    const char *node = json_string_value(json_object_get(v, "node"));
    const char *name = json_string_value(json_object_get(v, "name"));
    snprintf(b.node, sizeof b.node, "%s", node ? node : "");
    snprintf(b.name, sizeof b.name, "%s", name ? name : "");
    snprintf(b.hash_hex, sizeof b.hash_hex, "%s", hex);
    json_decref(v);
    if (b.id >= c->next_token_id) {
        c->next_token_id = b.id + 1;
    }
    if (b.uses_left == 0 || c->nboots >= MAX_BOOT_TOKENS) {
        return;
    }
    cr_principal p;
    memset(&p, 0, sizeof p);
    p.id = b.id;
    p.role = CR_ROLE_JOIN;
    snprintf(p.name, sizeof p.name, "bootstrap:%.53s", b.name);
    cr_auth_table_put(c->auth, hash, &p);
    CR_GROW(c->boots, c->nboots, c->capboots);
    c->boots[c->nboots++] = b;
}

int ctl_load_bootstrap(ctl *c)
{
    return cr_store_load_objects(c->store, "bootstrap", load_boot, c);
}

unsigned ctl_join_admit(ctl *c, cr_store_txn *txn, const cr_principal *p, const char *node,
                        bool exists, char *why, size_t whylen)
{
    if (p->role == CR_ROLE_ADMIN || (p->role == CR_ROLE_AGENT && strcmp(p->node, node) == 0)) {
        return 0;
    }
    if (p->role != CR_ROLE_JOIN) {
        snprintf(why, whylen, "registering a node needs a bootstrap token");
        return 403;
    }
    if (p->id == 0) { /* the legacy join token: new nodes only */
        if (exists) {
            snprintf(why, whylen,
                     "node '%s' is already registered: its agent re-registers with its own node "
                     "credential; to re-key it, an admin makes a bootstrap token for it "
                     "(corral admin bootstrap-token create --node %s)",
                     node, node);
            return 409;
        }
        return 0;
    }
    ctl_boot *b = boot_find(c, p->id);
    if (!b) {
        snprintf(why, whylen, "bootstrap token used up or revoked");
        return 401;
    }
    if (b->expires_ns > 0 && cr_now_ns() >= b->expires_ns) {
        char t[64];
        snprintf(why, whylen, "bootstrap token expired at %s",
                 ctl_time_str(b->expires_ns, t, sizeof t));
        boot_drop(c, txn, b);
        return 401;
    }
    if (*b->node && strcmp(b->node, node) != 0) {
        snprintf(why, whylen, "this bootstrap token may only register node '%s'", b->node);
        return 403;
    }
    if (!*b->node && exists) {
        snprintf(why, whylen,
                 "node '%s' is already registered: its agent re-registers with its own node "
                 "credential; to re-key it, an admin makes a bootstrap token for it "
                 "(corral admin bootstrap-token create --node %s)",
                 node, node);
        return 409;
    }
    if (b->uses_left > 0 && --b->uses_left == 0) {
        boot_drop(c, txn, b);
    } else {
        boot_persist(txn, b);
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Node secrets                                                             */

static void load_node_secret(void *arg, const char *key, const char *doc)
{
    ctl *c = arg;
    json_t *v = json_loads(doc, 0, NULL);
    const char *sealed = json_string_value(json_object_get(v, "agent_secret"));
    ctl_node *n = ctl_node_find(c, key);
    char *plain = NULL;
    if (n && sealed && ctl_unseal(c, sealed, &plain) == 0) {
        snprintf(n->agent_secret, sizeof n->agent_secret, "%s", plain);
    } else if (n && sealed) {
        cr_error("node=%s: its agent secret does not open with %s/secret.key", key,
                 c->cfg.state_dir);
    }
    ctl_secret_free(plain);
    json_decref(v);
}

int ctl_load_node_secrets(ctl *c)
{
    return cr_store_load_objects(c->store, "nodetoken", load_node_secret, c);
}

/* ------------------------------------------------------------------------ */
/* Audit                                                                    */

/* The audit row of a request (key and document, new): every text escaped
 * to printable ASCII (escape_text), so the document is valid JSON built
 * without jansson (a tenth of its cost: one is written per mutating
 * request). */
static char *audit_doc(ctl *c, cr_http_req *req, const cr_principal *p, const char *action,
                       char *key, size_t keylen)
{
    char t[64], e[600];
    int64_t now = cr_now_ns();
    uint64_t seq = atomic_fetch_add(&c->audit_seq, 1);
    snprintf(key, keylen, "%020lld-%010llu", (long long)now,
             (unsigned long long)(seq % 10000000000ULL));
    cr_buf b;
    cr_buf_init(&b);
    cr_buf_printf(&b, "{\"time\":\"%s\",\"time_ns\":%lld,\"token_id\":%lld",
                  ctl_time_str(now, t, sizeof t), (long long)now, (long long)p->id);
    const char *const keys[] = {"who", "role", "tenant", "node", "from", "action"};
    const char *const vals[] = {p->name, cr_role_name(p->role), p->tenant,
                                p->node, cr_http_peer(req),     action};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        escape_text(vals[i] ? vals[i] : "", e, sizeof e);
        cr_buf_puts(&b, ",\"");
        cr_buf_puts(&b, keys[i]);
        cr_buf_puts(&b, "\":");
        cr_buf_put_jstr(&b, e);
    }
    cr_buf_putc(&b, '}');
    return cr_buf_take(&b);
}

void ctl_audit(ctl *c, cr_http_req *req, const cr_principal *p, const char *action)
{
    char key[48];
    char *s = audit_doc(c, req, p, action, key, sizeof key);
    cr_store_txn *txn = cr_store_txn_new();
    cr_store_txn_put(txn, "audit", key, s);
    free(s);
    cr_store_submit(c->store, txn, NULL, NULL);
}

/* The deferred audit row of the request this HTTP thread is routing
 * (ctl_audit_defer .. ctl_audit_flush: one request at a time per thread). */
static _Thread_local struct {
    char *doc; /* NULL: none */
    char key[48];
} audit_pending;

void ctl_audit_defer(ctl *c, cr_http_req *req, const cr_principal *p, const char *action)
{
    free(audit_pending.doc);
    audit_pending.doc = audit_doc(c, req, p, action, audit_pending.key, sizeof audit_pending.key);
}

void ctl_audit_take(cr_store_txn *txn)
{
    if (audit_pending.doc) {
        cr_store_txn_put(txn, "audit", audit_pending.key, audit_pending.doc);
        CR_FREE(audit_pending.doc);
    }
}

void ctl_audit_flush(ctl *c)
{
    if (audit_pending.doc) {
        cr_store_txn *txn = cr_store_txn_new();
        cr_store_txn_put(txn, "audit", audit_pending.key, audit_pending.doc);
        CR_FREE(audit_pending.doc);
        cr_store_submit(c->store, txn, NULL, NULL);
    }
}

typedef struct audit_read {
    int64_t since_ns;
    json_t *items; /* a ring of the newest `limit` entries */
    size_t limit;
} audit_read;

static void audit_row(void *arg, const char *key, const char *doc)
{
    audit_read *r = arg;
    long long t = strtoll(key, NULL, 10);
    if (t < r->since_ns) {
        return;
    }
    json_t *v = json_loads(doc, 0, NULL);
    if (!v) {
        return;
    }
    if (json_array_size(r->items) == r->limit) {
        json_array_remove(r->items, 0);
    }
    json_array_append_new(r->items, v);
}

void ctl_route_audit(ctl *c, cr_http_req *req, const cr_principal *p)
{
    cr_http_set_route(req, "/v1/audit");
    if (p->role != CR_ROLE_ADMIN) {
        ctl_reply_err(req, 403, CR_EPERM, NULL, "only an admin may read the audit log");
        return;
    }
    const char *qs = cr_http_query(req, "since_s");
    const char *ql = cr_http_query(req, "limit");
    int64_t since_s = 0, limit = 100;
    if (qs && cr_parse_i64(qs, 0, INT64_MAX / CR_NS_PER_SEC, &since_s) != 0) {
        ctl_reply_err(req, 400, CR_EINVAL, "since_s",
                      "query 'since_s': seconds since the Unix epoch, an integer >= 0");
        return;
    }
    if (ql && cr_parse_i64(ql, 1, AUDIT_MAX_LIMIT, &limit) != 0) {
        ctl_reply_err(req, 400, CR_EINVAL, "limit", "query 'limit': an integer 1..%d",
                      AUDIT_MAX_LIMIT);
        return;
    }
    audit_read r = {
        .since_ns = since_s * CR_NS_PER_SEC, .items = json_array(), .limit = (size_t)limit};
    if (cr_store_load_objects(c->store, "audit", audit_row, &r) != 0) {
        json_decref(r.items);
        ctl_reply_err(req, 500, CR_EIO, NULL, "cannot read the audit log");
        return;
    }
    size_t n = json_array_size(r.items);
    ctl_reply_json(req, 200, json_pack("{s:o,s:I}", "items", r.items, "count", (json_int_t)n));
}

typedef struct audit_prune {
    int64_t cutoff_ns;
    cr_store_txn *txn;
    size_t n;
} audit_prune;

static void prune_row(void *arg, const char *key, const char *doc)
{
    audit_prune *a = arg;
    if (strtoll(key, NULL, 10) < a->cutoff_ns) {
        cr_store_txn_del(a->txn, "audit", key);
        a->n++;
    }
}

void ctl_audit_tick(ctl *c, int64_t now_mono)
{
    if (c->cfg.audit_retention_s <= 0 ||
        (c->audit_prune_mono != 0 && now_mono - c->audit_prune_mono < AUDIT_PRUNE_EVERY)) {
        return;
    }
    c->audit_prune_mono = now_mono;
    audit_prune a = {.cutoff_ns = cr_now_ns() - c->cfg.audit_retention_s * CR_NS_PER_SEC,
                     .txn = cr_store_txn_new(),
                     .n = 0};
    cr_store_txn_splittable(a.txn); /* deletes of old entries: independent */
    cr_store_load_objects(c->store, "audit", prune_row, &a);
    if (a.n > 0) {
        cr_info("audit: %zu entries older than %llds pruned", a.n,
                (long long)c->cfg.audit_retention_s);
        cr_store_submit(c->store, a.txn, NULL, NULL);
    } else {
        cr_store_txn_free(a.txn);
    }
}
