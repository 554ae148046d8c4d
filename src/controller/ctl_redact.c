/*
 * ctl_redact.c - what a user reads of other tenants' work: nothing by name.
 * Event texts are written once for everybody ("preempted for job 812
 * (priority 10 > 0)", "borrowed H100 capacity reclaimed by tenant vision for
 * job 812"); a user token reads them with another tenant's job id and
 * tenant name replaced ("another tenant's job", "another tenant"). Admins
 * read them whole. The cluster map and node views (ctl_nodes.c, ctl_ui.c)
 * hide the same things with ctl_job_visible_to, here. A job's environment,
 * read with GET /v1/jobs/{id}?env=1 by those who may read the job, comes
 * with its credential-looking values redacted (ctl_redact_env).
 */
#include "ctl_int.h"

#include "cr_secretshape.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

bool ctl_job_visible_to(ctl *c, int64_t id, const cr_principal *p)
{
    if (!p || p->role == CR_ROLE_ADMIN) {
        return true;
    }
    const ctl_job *j = ctl_job_get(c, id);
    return j && p->role == CR_ROLE_USER && strcmp(j->tenant, p->tenant) == 0;
}

static int name_char(char ch)
{
    return isalnum((unsigned char)ch) || ch == '-' || ch == '_' || ch == '.';
}

void ctl_redact_text(ctl *c, const cr_principal *p, const char *in, char *out, size_t outlen)
{
    size_t o = 0;
    if (outlen == 0) {
        return;
    }
    for (const char *s = in; *s && o + 1 < outlen;) {
        const char *rep = NULL;
        size_t skip = 0;
        bool word = s == in || !name_char(s[-1]);
        if (word && strncmp(s, "job ", 4) == 0 && isdigit((unsigned char)s[4])) {
            long long id = 0;
            size_t k = 4;
            while (isdigit((unsigned char)s[k]) && k < 24) {
                id = id * 10 + (s[k] - '0');
                k++;
            }
            if (!ctl_job_visible_to(c, (int64_t)id, p)) {
                rep = "another tenant's job";
                skip = k;
            }
        } else if (word && strncmp(s, "tenant ", 7) == 0 && name_char(s[7])) {
            size_t k = 7;
            while (name_char(s[k])) {
                k++;
            }
            /* a name ends at a space or the text's end, not at a trailing '.' */
            while (k > 7 && s[k - 1] == '.') {
                k--;
            }
            if (p->role != CR_ROLE_ADMIN &&
                (k - 7 != strlen(p->tenant) || strncmp(s + 7, p->tenant, k - 7) != 0)) {
                rep = "another tenant";
                skip = k;
            }
        }
        if (rep) {
            int w = snprintf(out + o, outlen - o, "%s", rep);
            o = w < 0 ? o : o + (size_t)w >= outlen ? outlen - 1 : o + (size_t)w;
            s += skip;
        } else {
            out[o++] = *s++;
        }
    }
    out[o] = '\0';
}

void ctl_redact_member(ctl *c, const cr_principal *p, json_t *v, const char *key)
{
    const char *s = json_string_value(json_object_get(v, key));
    if (!s || p->role == CR_ROLE_ADMIN) {
        return;
    }
    char buf[2048];
    ctl_redact_text(c, p, s, buf, sizeof buf);
    json_t *w = json_string(buf); /* NULL: cut inside a UTF-8 sequence */
    json_object_set_new(v, key, w ? w : json_string("(redacted)"));
}

void ctl_redact_env(json_t *env)
{
    const char *k;
    json_t *x;
    json_object_foreach(env, k, x)
    {
        const char *s = json_string_value(x);
        if (cr_secret_name(k, strlen(k)) || !s || cr_secret_value(s)) {
            json_object_set_new(env, k, json_string("(redacted)"));
        }
    }
}
