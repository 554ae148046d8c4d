/*
 * agent_cred.c - this node's credential, kept across agent restarts.
 *
 * At its first registration an agent presents a bootstrap token (single
 * use, short-lived) and receives its node token (its identity towards the
 * controller: it may act only as this node) and the agent secret (the
 * controller's bearer for calls to this agent, e.g. job logs). Both go to
 * STATE-DIR/node.cred, mode 0600, written to a temporary file and renamed,
 * so a restarted agent re-registers with its own credential and a used-up
 * bootstrap token is never needed again.
 */
#include "agent_int.h"

#include "cr_alloc.h"
#include "cr_error.h"
#include "cr_log.h"

#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static char *cred_path(const char *state_dir)
{
    return cr_asprintf("%s/node.cred", state_dir);
}

int cr__agent_cred_exists(const char *state_dir)
{
    char *path = cred_path(state_dir);
    int ok = access(path, F_OK) == 0;
    free(path);
    return ok;
}

int cr__agent_cred_load(agent *a)
{
    char *path = cred_path(a->cfg.state_dir);
    json_error_t je;
    json_t *v = json_load_file(path, 0, &je);
    int rc = CR_ENOENT;
    const char *node = NULL, *tok = NULL, *sec = NULL;
    if (v &&
        json_unpack(v, "{s:s,s:s,s:s}", "node", &node, "node_token", &tok, "agent_secret", &sec) ==
            0 &&
        strcmp(node, a->cfg.node) == 0 && strlen(tok) < sizeof a->node_token &&
        strlen(sec) < sizeof a->agent_secret) {
        pthread_mutex_lock(&a->mu);
        snprintf(a->node_token, sizeof a->node_token, "%s", tok);
        snprintf(a->agent_secret, sizeof a->agent_secret, "%s", sec);
        pthread_mutex_unlock(&a->mu);
        rc = 0;
    } else if (v) {
        cr_warn("agent: %s is not node %s's credential: ignored", path, a->cfg.node);
    }
    json_decref(v);
    free(path);
    return rc;
}

int cr__agent_cred_save(agent *a)
{
    char *path = cred_path(a->cfg.state_dir);
    char *tmp = cr_asprintf("%s.tmp", path);
    pthread_mutex_lock(&a->mu);
    json_t *v = json_pack("{s:s,s:s,s:s}", "node", a->cfg.node, "node_token", a->node_token,
                          "agent_secret", a->agent_secret);
    pthread_mutex_unlock(&a->mu);
    char *text = json_dumps(v, JSON_COMPACT);
    json_decref(v);
    int rc = CR_EIO;
    unlink(tmp);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    size_t len = text ? strlen(text) : 0;
    bool ok = fd >= 0 && text && write(fd, text, len) == (ssize_t)len && fsync(fd) == 0;
    if (fd >= 0) {
        /* Exactly once: a close that fails has still released the number
         * (Linux), and a second close would take whatever another thread
         * opened since (a libmicrohttpd socket: "Close socket failed"). */
        ok = close(fd) == 0 && ok;
        fd = -1;
    }
    if (ok) {
        rc = rename(tmp, path) == 0 ? 0 : CR_EIO;
    }
    if (rc != 0) {
        cr_warn("agent: cannot write %s: %s", path, strerror(errno));
        unlink(tmp);
    }
    if (text) {
        sodium_memzero(text, len);
        free(text);
    }
    free(tmp);
    free(path);
    return rc;
}

void cr__agent_cred_forget(agent *a)
{
    char *path = cred_path(a->cfg.state_dir);
    unlink(path);
    free(path);
    pthread_mutex_lock(&a->mu);
    sodium_memzero(a->node_token, sizeof a->node_token);
    sodium_memzero(a->agent_secret, sizeof a->agent_secret);
    pthread_mutex_unlock(&a->mu);
}

int cr__agent_token_ok(agent *a, const char *token)
{
    /* Compare hashes of equal length, so neither the time taken nor an
     * early exit tells how much of a guess was right. */
    uint8_t got[crypto_generichash_BYTES], want[crypto_generichash_BYTES];
    crypto_generichash(got, sizeof got, (const uint8_t *)token, strlen(token), NULL, 0);
    pthread_mutex_lock(&a->mu);
    int have = a->agent_secret[0] != '\0';
    crypto_generichash(want, sizeof want, (const uint8_t *)a->agent_secret, strlen(a->agent_secret),
                       NULL, 0);
    pthread_mutex_unlock(&a->mu);
    int ok = have && sodium_memcmp(got, want, sizeof got) == 0;
    sodium_memzero(want, sizeof want);
    return ok;
}
