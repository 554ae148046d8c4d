/*
 * cr_time.h - time as int64_t nanoseconds.
 *
 * Wall-clock reads live here and only here; the scheduler core never calls
 * them (its callers pass now_ns). Durations parse from "90s", "40m",
 * "1h30m", "2d", or a bare number of seconds.
 *
 * Time rule: every timer, deadline, time limit and accounting interval is
 * measured on CLOCK_MONOTONIC (cr_mono_ns), so a wall-clock step (NTP, an
 * operator's `date -s`) neither fires nor delays any of them. Wall time
 * (cr_now_ns) is for display and for timestamps that are persisted or sent;
 * timed waits on condition variables go through cr_cond_wait_mono.
 */
#ifndef CR_TIME_H
#define CR_TIME_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#define CR_NS_PER_US  INT64_C(1000)
#define CR_NS_PER_MS  INT64_C(1000000)
#define CR_NS_PER_SEC INT64_C(1000000000)
#define CR_NS_PER_MIN (60 * CR_NS_PER_SEC)
#define CR_NS_PER_H   (3600 * CR_NS_PER_SEC)

/* Wall-clock time since the Unix epoch (CLOCK_REALTIME). */
int64_t cr_now_ns(void);
/* Monotonic time, for measuring intervals. */
int64_t cr_mono_ns(void);
/* Wait on cv (mu held) until it is signalled or CLOCK_MONOTONIC reaches
 * deadline_ns (pthread_cond_clockwait: any condition variable, no clock
 * attribute needed); returns 0 or ETIMEDOUT. */
int cr_cond_wait_mono(pthread_cond_t *cv, pthread_mutex_t *mu, int64_t deadline_ns);
/* Parse a duration; returns 0 or CR_EINVAL / CR_ERANGE, *out_ns untouched on failure. */
int cr_duration_parse(const char *s, int64_t *out_ns);
/*
 * A time limit as Slurm writes it, or a suffixed duration: "MM" (a bare
 * number is MINUTES, as in sbatch -t), "MM:SS", "HH:MM:SS", "D-HH",
 * "D-HH:MM", "D-HH:MM:SS", or anything cr_duration_parse takes with a
 * unit ("90s", "2h", "1h30m"). Fields after the first are bounded as on a
 * clock (seconds and minutes < 60, hours < 24 after a day). Returns 0 or
 * CR_EINVAL (CR_ERANGE past 10 years); *out_ns untouched on failure.
 */
int cr_time_limit_parse(const char *s, int64_t *out_ns);
/* Short human form ("1h30m", "40m", "12s", "350ms") into buf; returns buf. */
char *cr_duration_fmt(int64_t ns, char *buf, size_t len);
/* ISO-8601 UTC form of an epoch time into buf; returns buf. */
char *cr_time_fmt(int64_t epoch_ns, char *buf, size_t len);

#endif
