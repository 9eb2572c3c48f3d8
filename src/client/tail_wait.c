/*
 * src/client/tail_wait.c
 *		`cfeed tail`: waiting between reads, for a notification on the
 *		connection's socket, or on a hot standby (no LISTEN) in cfeed.wait or
 *		by sleeping; at most --wait-ms, after which every shard is read anyway
 *		as a safety net.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>
#include <stdio.h>
#include <string.h>

#include "tail.h"

/*
 * cfeed_tail_mark_all_dirty
 *		Ask for a read of every held shard (after a timeout or reconnect).
 */
void
cfeed_tail_mark_all_dirty(Tail *t)
{
	for (int i = 0; i < t->nshards; i++)
		t->shards[i].dirty = t->shards[i].held;
}

/*
 * collect_notifications
 *		Mark the shards whose channel was notified; true when any held shard
 *		is now due for a read.
 */
static bool
collect_notifications(Tail *t)
{
	PGnotify   *notify;
	bool		due = false;

	while ((notify = PQnotifies(t->conn)) != NULL)
	{
		for (int i = 0; i < t->nshards; i++)
			if (strcmp(notify->relname, t->shards[i].channel) == 0)
				t->shards[i].dirty = t->shards[i].held;
		PQfreemem(notify);
	}
	for (int i = 0; i < t->nshards; i++)
		due |= t->shards[i].dirty;
	return due;
}

/*
 * wait_standby
 *		Without notifications: one shard with a known cursor waits server
 *		side in cfeed.wait (event-driven or cheap polling there); otherwise
 *		sleep a little.  Either way every held shard is then read.
 */
static TailStep
wait_standby(Tail *t, long long timeout_ms)
{
	int			held = 0;
	TailShard  *one = NULL;

	for (int i = 0; i < t->nshards; i++)
		if (t->shards[i].held)
		{
			held++;
			one = &t->shards[i];
		}
	if (held == 1 && one->cursor_known)
	{
		char		shard_text[16];
		char		cursor_text[24];
		char		timeout_text[24];
		const char *params[4] = {t->feed_id_text, shard_text, cursor_text, timeout_text};
		PGresult   *res;

		snprintf(shard_text, sizeof(shard_text), "%d", one->shard);
		snprintf(cursor_text, sizeof(cursor_text), "%lld", one->cursor);
		snprintf(timeout_text, sizeof(timeout_text), "%lld",
				 timeout_ms > INT_MAX ? (long long) INT_MAX : timeout_ms);
		res = cfeed_tail_exec_params(t, "select cfeed.wait($1::int, $2::int, $3::bigint, $4::int)", 4, params);
		if (!cfeed_result_ok(res, PGRES_TUPLES_OK))
			return cfeed_tail_fail(t, res, "waiting");
		PQclear(res);
	}
	else
		cfeed_sleep_ms((int) (timeout_ms < STANDBY_POLL_MS ? timeout_ms : STANDBY_POLL_MS));
	cfeed_tail_mark_all_dirty(t);
	return STEP_OK;
}

/*
 * stdout_watched
 *		Whether standard output is a pipe or a socket whose reader may go
 *		away (cfeed tail ... | head -3): a write would fail with EPIPE, but an
 *		idle tail writes nothing, and would hold its connection, and in a
 *		group its leases, until the feed's next change.  Not a terminal or a
 *		file, and not when standard output was closed and the database
 *		connection took its descriptor (the connection's end is no reader's).
 */
static bool
stdout_watched(Tail *t)
{
	struct stat st;

	return STDOUT_FILENO != PQsocket(t->conn) && fstat(STDOUT_FILENO, &st) == 0 &&
		(S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode));
}

/*
 * reader_gone
 *		Whether standard output's reader went away (a watched pipe or socket
 *		reports an error or a hang-up).
 */
static bool
reader_gone(const struct pollfd *out)
{
	return out->fd >= 0 && (out->revents & (POLLERR | POLLHUP)) != 0;
}

/*
 * cfeed_tail_wait_for_wakeup
 *		Wait until a notification marks a shard dirty, --wait-ms passes (then
 *		all shards are due), a lease renewal is due, --idle-exit-ms passes
 *		(stop with 0) or a signal arrives (stop with 0).
 */
TailStep
cfeed_tail_wait_for_wakeup(Tail *t)
{
	long long	deadline = cfeed_now_ms() + t->wait_ms;

	for (;;)
	{
		long long	now;
		long long	timeout;
		struct pollfd pfd[2] = {{.fd = -1}, {.fd = stdout_watched(t) ? STDOUT_FILENO : -1}};
		int			rc;

		if (cfeed_interrupted || (pfd[1].fd >= 0 && poll(&pfd[1], 1, 0) > 0 && reader_gone(&pfd[1])))
		{
			t->exit_code = CFEED_EXIT_OK;
			return STEP_STOP;
		}
		/* Notifications may have arrived with the last query's results. */
		if (collect_notifications(t))
			return STEP_OK;

		now = cfeed_now_ms();
		if (t->idle_exit_ms > 0 && now - t->last_activity_ms >= t->idle_exit_ms)
		{
			t->exit_code = CFEED_EXIT_OK;
			return STEP_STOP;
		}
		if (t->group != NULL && now >= t->next_renew_ms)
			return STEP_OK;
		if (now >= deadline)
		{
			cfeed_tail_mark_all_dirty(t);
			return STEP_OK;
		}

		timeout = deadline - now;
		if (t->idle_exit_ms > 0 && t->last_activity_ms + t->idle_exit_ms - now < timeout)
			timeout = t->last_activity_ms + t->idle_exit_ms - now;
		if (t->group != NULL && t->next_renew_ms - now < timeout)
			timeout = t->next_renew_ms - now;
		if (timeout < 1)
			timeout = 1;

		if (!t->listening)
			return wait_standby(t, timeout);

		/* the connection's input, and standard output's errors only */
		pfd[0].fd = PQsocket(t->conn);
		pfd[0].events = POLLIN;
		pfd[0].revents = 0;
		pfd[1].events = 0;
		pfd[1].revents = 0;
		if (pfd[0].fd < 0)
			return cfeed_tail_fail(t, NULL, "waiting");
		rc = poll(pfd, 2, (int) (timeout > INT_MAX ? INT_MAX : timeout));
		if (rc < 0 && errno != EINTR)
		{
			perror("cfeed tail: poll");
			t->exit_code = CFEED_EXIT_ERROR;
			return STEP_STOP;
		}
		if (rc > 0 && reader_gone(&pfd[1]))
		{
			t->exit_code = CFEED_EXIT_OK;
			return STEP_STOP;
		}
		if (rc > 0 && pfd[0].revents != 0 &&
			(!PQconsumeInput(t->conn) || PQstatus(t->conn) != CONNECTION_OK))
			return cfeed_tail_fail(t, NULL, "waiting for notifications");
	}
}
