/*
 * src/serve/serve_log.c
 *		The gateway's log: one line per message on stderr, at or above
 *		--log-level, from any thread.
 */
#define _POSIX_C_SOURCE 200809L

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "serve.h"

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;

static const char *const level_names[] = {"error", "warning", "info", "debug"};

static ServeLogLevel log_level = LOG_INFO;	/* --log-level */

/*
 * cfeed_serve_set_log_level
 *		Log at the level named text (--log-level) and above, or exit with a
 *		usage error.
 */
void
cfeed_serve_set_log_level(const char *text)
{
	for (int i = 0; i <= LOG_DEBUG; i++)
		if (strcmp(text, level_names[i]) == 0)
		{
			log_level = (ServeLogLevel) i;
			return;
		}
	cfeed_usage_error("serve", "invalid --log-level \"%s\": expected error, warning, info or debug", text);
}

/*
 * cfeed_serve_logs
 *		Whether a message of this level would be logged.
 */
bool
cfeed_serve_logs(ServeLogLevel level)
{
	return level <= log_level;
}

/*
 * cfeed_serve_log
 *		One line on stderr, "<UTC time> cfeed serve <level>: message", when
 *		level is at or above --log-level.  Callers never pass a token.
 */
void
cfeed_serve_log(ServeLogLevel level, const char *fmt,...)
{
	char		stamp[32];
	struct timespec ts;
	struct tm	tm;
	va_list		ap;

	if (!cfeed_serve_logs(level))
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%S", &tm);
	pthread_mutex_lock(&log_lock);
	fprintf(stderr, "%s.%03ldZ cfeed serve %s: ", stamp, ts.tv_nsec / 1000000,
			level_names[level]);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	fflush(stderr);
	pthread_mutex_unlock(&log_lock);
}
