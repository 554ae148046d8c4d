/*
 * cr_log.h - structured logging to stderr.
 *
 * One line per event. Text (default): "ts level msg key=value ...";
 * callers put job and node ids in the message as key=value pairs.
 * JSON (--log-format json): {"ts":..,"level":..,"msg":..} with the
 * message's leading-free key=value pairs also lifted into fields.
 * Under systemd (JOURNAL_STREAM set, stderr is that stream) each text line
 * starts with a "<N>" syslog priority and drops the timestamp, which the
 * journal keeps itself. The level threshold comes from CORRAL_LOG
 * (debug|info|warn|error|off) read by cr_log_init(); an unknown value is
 * an error there. Before that, info. Thread-safe (one write(2) per line).
 */
#ifndef CR_LOG_H
#define CR_LOG_H

enum cr_log_level { CR_LOG_DEBUG = 0, CR_LOG_INFO, CR_LOG_WARN, CR_LOG_ERROR, CR_LOG_OFF };
enum cr_log_format { CR_LOG_TEXT = 0, CR_LOG_JSON };

/* Read CORRAL_LOG and JOURNAL_STREAM; returns the level in effect, or
 * CR_EINVAL when CORRAL_LOG names no level (the threshold is unchanged). */
int cr_log_init(void);
void cr_log_set_level(int level);
int cr_log_level(void);
/* "json" or "text" (case-sensitive); CR_EINVAL otherwise. */
int cr_log_set_format_name(const char *name);
void cr_log_set_format(int format);
void cr_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define cr_debug(...) cr_log(CR_LOG_DEBUG, __VA_ARGS__)
#define cr_info(...)  cr_log(CR_LOG_INFO, __VA_ARGS__)
#define cr_warn(...)  cr_log(CR_LOG_WARN, __VA_ARGS__)
#define cr_error(...) cr_log(CR_LOG_ERROR, __VA_ARGS__)

#endif
