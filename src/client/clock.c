/*
 * src/client/clock.c
 *		Time for the loops of every subcommand: a monotonic clock in
 *		milliseconds for timeouts, and a sleep that a signal cuts short;
 *		and the time of day, to compare with a database's times.
 */
#define _POSIX_C_SOURCE 200809L

#include <poll.h>
#include <time.h>

#include "client.h"

/*
 * cfeed_now_us
 *		Monotonic clock in microseconds.
 */
long long
cfeed_now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long) ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/*
 * cfeed_wall_us
 *		The time of day in microseconds since 1970, as a database's
 *		timestamps and feed epochs count them.
 */
long long
cfeed_wall_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (long long) ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/*
 * cfeed_now_ms
 *		Monotonic clock in milliseconds, for timeouts.
 */
long long
cfeed_now_ms(void)
{
	return cfeed_now_us() / 1000;
}

/*
 * cfeed_sleep_ms
 *		Sleep up to ms milliseconds; returns early when a signal arrives.
 */
void
cfeed_sleep_ms(int ms)
{
	if (ms > 0 && !cfeed_interrupted)
		(void) poll(NULL, 0, ms);
}
