/*
 * cr_log.h - structured logging to stderr.
 *
 * One line per event: "ts level msg key=value ...". Callers put job and
 * node ids in the message as key=value pairs. The level threshold comes
 * from the CORRAL_LOG environment variable (debug|info|warn|error) read
 * once by cr_log_init(); before that, info. Thread-safe (one write(2) per
 * line).
 */
#ifndef CR_LOG_H
#define CR_LOG_H

enum cr_log_level { CR_LOG_DEBUG = 0, CR_LOG_INFO, CR_LOG_WARN, CR_LOG_ERROR, CR_LOG_OFF };

/* Read CORRAL_LOG; returns the level in effect. */
int cr_log_init(void);
void cr_log_set_level(int level);
int cr_log_level(void);
void cr_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define cr_debug(...) cr_log(CR_LOG_DEBUG, __VA_ARGS__)
#define cr_info(...)  cr_log(CR_LOG_INFO, __VA_ARGS__)
#define cr_warn(...)  cr_log(CR_LOG_WARN, __VA_ARGS__)
#define cr_error(...) cr_log(CR_LOG_ERROR, __VA_ARGS__)

#endif
