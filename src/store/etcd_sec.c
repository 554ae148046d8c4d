/*
 * etcd_sec.c - the etcd client's TLS and authentication options: flag
 * values, the checks made before anything connects, and the password read
 * from its file (cr_etcd.h). The password never comes from a flag or an
 * environment variable, where every user of the machine could read it
 * (ps, /proc/PID/cmdline); its file must not be readable by every user.
 */
#include "cr_etcd.h"

#include "cr_error.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int cr_etcd_sec_set(cr_etcd_sec *s, const char *name, const char *value, char *err, size_t err_len)
{
    char *dst = NULL;
    size_t cap = 0;
    if (strcmp(name, "etcd-cacert") == 0) {
        dst = s->cacert, cap = sizeof s->cacert;
    } else if (strcmp(name, "etcd-cert") == 0) {
        dst = s->cert, cap = sizeof s->cert;
    } else if (strcmp(name, "etcd-key") == 0) {
        dst = s->key, cap = sizeof s->key;
    } else if (strcmp(name, "etcd-user") == 0) {
        dst = s->user, cap = sizeof s->user;
    } else if (strcmp(name, "etcd-password-file") == 0) {
        dst = s->password_file, cap = sizeof s->password_file;
    } else {
        return CR_ENOENT;
    }
    size_t n = strlen(value);
    if (n == 0 || n >= cap) {
        snprintf(err, err_len, "--%s: expected 1..%zu bytes, got %zu", name, cap - 1, n);
        return CR_EINVAL;
    }
    if (dst == s->user) {
        /* etcd allows any name; this keeps it printable in messages and
         * safe in a JSON body (jansson escapes the rest anyway). */
        for (size_t i = 0; i < n; i++) {
            unsigned char c = (unsigned char)value[i];
            if (c < 0x21 || c > 0x7e) {
                snprintf(err, err_len, "--etcd-user: byte %zu is not a printable character", i);
                return CR_EINVAL;
            }
        }
    }
    memcpy(dst, value, n + 1);
    s->loaded = false;
    return 0;
}

bool cr_etcd_sec_any(const cr_etcd_sec *s)
{
    return s && (*s->cacert || *s->cert || *s->key || *s->user || *s->password_file);
}

void cr_etcd_sec_wipe(cr_etcd_sec *s)
{
    if (s) {
        explicit_bzero(s->password, sizeof s->password);
        s->loaded = false;
    }
}

/* Opens path for reading: a regular file of at most max bytes. *fd and
 * *st on 0; else the reason, naming flag, in err. */
static int open_file(const char *flag, const char *path, size_t max, int *fd, struct stat *st,
                     char *err, size_t err_len)
{
    *fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (*fd < 0) {
        snprintf(err, err_len, "--%s %s: %s", flag, path, strerror(errno));
        return errno == EACCES ? CR_EPERM : CR_EIO;
    }
    if (fstat(*fd, st) != 0 || !S_ISREG(st->st_mode)) {
        snprintf(err, err_len, "--%s %s: not a regular file", flag, path);
        close(*fd);
        *fd = -1;
        return CR_EINVAL;
    }
    if ((uint64_t)st->st_size > max) {
        snprintf(err, err_len, "--%s %s: %lld bytes, over the %zu this reads", flag, path,
                 (long long)st->st_size, max);
        close(*fd);
        *fd = -1;
        return CR_EINVAL;
    }
    return 0;
}

/* Reads up to cap - 1 bytes of fd into buf, NUL-terminated; *len. */
static int read_all(int fd, char *buf, size_t cap, size_t *len)
{
    size_t n = 0;
    while (n + 1 < cap) {
        ssize_t r = read(fd, buf + n, cap - 1 - n);
        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r < 0) {
            return CR_EIO;
        }
        if (r == 0) {
            break;
        }
        n += (size_t)r;
    }
    buf[n] = '\0';
    *len = n;
    return 0;
}

/* A PEM file holding marker ("-----BEGIN CERTIFICATE-----", "PRIVATE
 * KEY-----"): libcurl's own message for a file it cannot use names no
 * flag, so the common mistakes are caught here. */
static int check_pem(const char *flag, const char *path, const char *marker, const char *what,
                     char *err, size_t err_len)
{
    int fd = -1;
    struct stat st;
    int rc = open_file(flag, path, CR_ETCD_PEM_MAX, &fd, &st, err, err_len);
    if (rc != 0) {
        return rc;
    }
    char *buf = malloc((size_t)st.st_size + 1);
    size_t n = 0;
    if (!buf || read_all(fd, buf, (size_t)st.st_size + 1, &n) != 0) {
        snprintf(err, err_len, "--%s %s: cannot read it", flag, path);
        rc = CR_EIO;
    } else if (memchr(buf, '\0', n) || !strstr(buf, marker)) {
        snprintf(err, err_len, "--%s %s: not a PEM file with %s (no \"%s\" line)", flag, path, what,
                 marker);
        rc = CR_EINVAL;
    }
    if (buf) {
        explicit_bzero(buf, n); /* may be a private key */
    }
    free(buf);
    close(fd);
    return rc;
}

static int load_password(cr_etcd_sec *s, char *err, size_t err_len)
{
    const char *path = s->password_file;
    int fd = -1;
    struct stat st;
    char buf[CR_ETCD_PASSWORD_MAX + 4];
    size_t n = 0;
    /* Read at most sizeof buf - 1 bytes: a longer first line is refused
     * below, whatever the file's size. */
    int rc = open_file("etcd-password-file", path, CR_ETCD_PEM_MAX, &fd, &st, err, err_len);
    if (rc != 0) {
        goto out;
    }
    if (st.st_mode & (S_IROTH | S_IWOTH)) {
        snprintf(err, err_len,
                 "--etcd-password-file %s: readable or writable by every user (mode %04o): "
                 "refusing it; chmod 600 (or 640 for a group) and choose a new password",
                 path, (unsigned)(st.st_mode & 07777));
        rc = CR_EPERM;
        goto out;
    }
    if (read_all(fd, buf, sizeof buf, &n) != 0) {
        snprintf(err, err_len, "--etcd-password-file %s: cannot read it", path);
        rc = CR_EIO;
        goto out;
    }
    /* The first line; one trailing newline (and CR) is not part of it. */
    if (n > 0 && buf[n - 1] == '\n') {
        buf[--n] = '\0';
        if (n > 0 && buf[n - 1] == '\r') {
            buf[--n] = '\0';
        }
    }
    if (n == 0 || n > CR_ETCD_PASSWORD_MAX || memchr(buf, '\0', n) || memchr(buf, '\n', n)) {
        snprintf(err, err_len,
                 "--etcd-password-file %s: expected one line of 1..%d bytes (the password)", path,
                 CR_ETCD_PASSWORD_MAX);
        rc = CR_EINVAL;
        goto out;
    }
    memcpy(s->password, buf, n + 1);
out:
    explicit_bzero(buf, sizeof buf);
    if (fd >= 0) {
        close(fd);
    }
    return rc;
}

int cr_etcd_sec_load(cr_etcd_sec *s, char *err, size_t err_len)
{
    if (s->loaded) {
        return 0;
    }
    if ((*s->cert != '\0') != (*s->key != '\0')) {
        snprintf(err, err_len, "--etcd-cert and --etcd-key go together");
        return CR_EINVAL;
    }
    if (*s->user && !*s->password_file) {
        snprintf(err, err_len,
                 "--etcd-user needs --etcd-password-file FILE (a password is "
                 "never taken on the command line)");
        return CR_EINVAL;
    }
    if (!*s->user && *s->password_file) {
        snprintf(err, err_len, "--etcd-password-file needs --etcd-user NAME");
        return CR_EINVAL;
    }
    int rc = 0;
    if (*s->cacert && (rc = check_pem("etcd-cacert", s->cacert, "-----BEGIN CERTIFICATE-----",
                                      "certificates", err, err_len)) != 0) {
        return rc;
    }
    if (*s->cert && (rc = check_pem("etcd-cert", s->cert, "-----BEGIN CERTIFICATE-----",
                                    "a certificate", err, err_len)) != 0) {
        return rc;
    }
    if (*s->key && (rc = check_pem("etcd-key", s->key, "PRIVATE KEY-----", "a private key", err,
                                   err_len)) != 0) {
        return rc;
    }
    explicit_bzero(s->password, sizeof s->password);
    if (*s->user && (rc = load_password(s, err, err_len)) != 0) {
        return rc;
    }
    s->loaded = true;
    return 0;
}
