/*
 * mock_ctl.h - a stand-in for the controller's agent routes (docs/api.md,
 * "Agents"), served in the test process with libmicrohttpd, so the agent
 * can be tested as a real process before and apart from the controller.
 *
 * Join token "jt-secret"; the node token it hands out is "nt-<node>".
 * Tests set the desired state, flip failure modes and read what the agent
 * sent. Every member below is guarded by mu.
 */
#ifndef MOCK_CTL_H
#define MOCK_CTL_H

#include <jansson.h>
#include <pthread.h>
#include <stdint.h>

typedef struct mock_ctl {
    void *daemon; /* struct MHD_Daemon * */
    int port;     /* bound port */
    pthread_mutex_t mu;
    pthread_cond_t cv;     /* signalled on every desired-state change */
    int64_t version;       /* desired-state version */
    json_t *jobs;          /* desired jobs array (owned) */
    json_t *mig_layouts;   /* desired "mig_layouts" (owned, NULL none): set before set_jobs */
    json_t *last_register; /* last register body (owned) */
    json_t *last_status;   /* last status body (owned) */
    json_t *exits;         /* {"<job>": {"exit_code":..,"signal":..}} from status reports */
    int registers;         /* register calls accepted */
    int statuses;          /* status calls accepted */
    int down;              /* answer 503 to everything */
    int forget_tokens;     /* answer 401 to node routes until the next register */
} mock_ctl;

mock_ctl *mock_ctl_start(void);
void mock_ctl_stop(mock_ctl *m);
/* Replace the desired jobs (taken) and bump the version. */
void mock_ctl_set_jobs(mock_ctl *m, json_t *jobs);

#endif
