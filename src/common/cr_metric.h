/*
 * cr_metric.h - the contract for a job to report what it measured (issue
 * 26; docs/model.md "Learning from the cluster"): a line on the job's
 * stdout,
 *
 *     corral-metric tokens_per_s=12345.6 step_time_s=0.82
 *
 * the prefix, then one or more key=value fields separated by blanks; keys
 * tokens_per_s (training: tokens per second over all the job's GPUs;
 * serving: output tokens per second) and step_time_s; values finite
 * numbers > 0. The agent reads the job's output log when it ends; the last
 * good value of each key wins. A line that starts with the prefix and does
 * not parse is ignored and counted, never fatal to the job.
 *
 * Pure functions, no allocation.
 */
#ifndef CR_METRIC_H
#define CR_METRIC_H

#include <stddef.h>

#define CR_METRIC_PREFIX "corral-metric"

/* What one output log reported. */
typedef struct cr_metric {
    double tokens_per_s; /* 0 = not reported */
    double step_time_s;  /* 0 = not reported */
    int good;            /* metric lines that parsed */
    int bad;             /* lines with the prefix that did not (ignored) */
} cr_metric;

/*
 * One line (without its newline; len bytes). Returns 1 when the line is
 * not a metric line (left alone), 0 when it parsed (values set in *m, the
 * others untouched), CR_EINVAL when it starts with the prefix but a field
 * is unknown, not key=value, not a finite number > 0, or repeated; err
 * names the field. *m is untouched on error.
 */
int cr_metric_parse_line(const char *line, size_t len, cr_metric *m, char *err, size_t err_len);

/* Every line of buf (len bytes): the last good value of each key wins;
 * good and bad lines counted into *m (zeroed first). */
void cr_metric_scan(const char *buf, size_t len, cr_metric *m);

#endif
