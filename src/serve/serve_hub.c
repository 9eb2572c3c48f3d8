/*
 * src/serve/serve_hub.c
 *		The fan-out hub of `cfeed serve`: one thread and one database
 *		connection that follow every shard some streaming client reads,
 *		reading each new batch once into the shard's in-memory tail
 *		(serve_hub_tail.c), from which every client at the head takes it.
 *
 * Following a shard (its first follower): LISTEN on cfeed.channel (SPEC
 * §3: cfeed_<feed_id>_<shard>), then base = last = its head; because
 * LISTEN comes first no wake-up is lost (serve_hub_heads.c, for every
 * newly followed shard at once).  A notification is only a hint
 * that the shard may have more (anyone may NOTIFY on the channel, and its
 * payload is never read): the hub reads after its last number with
 * cfeed.read_rows and wakes the followers.  Hints are coalesced per shard
 * (one read for any number of them), notifications that libpq took in
 * while the hub ran queries are taken before it sleeps, and after a read on
 * a hint that found nothing a shard's hints wait SERVE_HINT_QUIET_MS: a flood of
 * NOTIFYs costs at most one read per shard per SERVE_HINT_QUIET_MS, and a
 * real change after a fruitless read at most that delay.  Every
 * SERVE_SAFETY_MS the heads of all followed shards are read in one query,
 * and those past their tails read (shards with longpoll = false are never
 * notified; serve_hub_heads.c).  On a hot standby,
 * where LISTEN is refused, the hub waits as serve_hub_standby.c says.  A
 * lost connection is replaced with exponential backoff; the tails continue
 * from their last number, so nothing is skipped.
 *
 * Reading a shard's new events, and following the feed epoch meanwhile:
 * serve_hub_read.c.
 *
 * The hub also re-checks the layouts of followed feeds every
 * --refresh-ms (serve_layout.c: a shard added, a closed shard that
 * ended): when a feed's FeedAPI token changes, its streams end (a
 * FeedAPI stream with a final cursor, and the next fetch gets 409; an SSE
 * stream with a final id, from which the browser reconnects and gets the
 * new shards).
 *
 * Other threads wake the hub through a pipe (serve_hub_kick.c).  Locking:
 * serve_hub.h.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "serve_hub.h"

#define BACKOFF_MIN_MS	100
#define BACKOFF_MAX_MS	5000

static pthread_t hub_thread;
static atomic_bool hub_stopping;
static atomic_bool hub_connected;
static long long hints_deferred_until;	/* hub thread only; 0: none */

/*
 * feed_token
 *		The token of feed_id's layout (serve_layout.c) from rows [from, to)
 *		of res (feed, shard, parent, ended; ascending).
 */
static void
feed_token(PGresult *res, int from, int to, int feed_id, char *token, size_t size)
{
	int			n = to - from;
	int		   *shards = cfeed_serve_alloc(sizeof(int) * (n > 0 ? n : 1));
	int		   *parents = cfeed_serve_alloc(sizeof(int) * (n > 0 ? n : 1));
	bool	   *ended = cfeed_serve_alloc(sizeof(bool) * (n > 0 ? n : 1));
	bool	   *listed = cfeed_serve_alloc(sizeof(bool) * (n > 0 ? n : 1));

	for (int i = 0; i < n; i++)
	{
		shards[i] = atoi(PQgetvalue(res, from + i, 1));
		parents[i] = PQgetisnull(res, from + i, 2) ? -1 : atoi(PQgetvalue(res, from + i, 2));
		ended[i] = strcmp(PQgetvalue(res, from + i, 3), "t") == 0;
	}
	(void) cfeed_layout_list(feed_id, n, shards, parents, ended, listed, token, size);
	free(shards);
	free(parents);
	free(ended);
	free(listed);
}

/*
 * refresh_tokens
 *		Recompute the FeedAPI token of every followed feed (its layout:
 *		shards added, shards that ended); wake everyone when one changed.
 *		A token that a request's later look-up brought (cfeed_hub_follow)
 *		stays.  False when the connection is lost.
 */
static bool
refresh_tokens(PGconn *conn)
{
	ServeBuf	ids = {0};
	const char *params[1];
	char		sql[384];
	PGresult   *res;
	bool		changed = false;
	int			nfeeds = 0;
	int			size = 0;
	int		   *feeds = NULL;
	int			r = 0;
	long long	begun = cfeed_now_us();

	pthread_mutex_lock(&cfeed_hub_lock);
	for (HubShard *h = cfeed_hub_shards; h != NULL; h = h->next)
		size++;
	feeds = cfeed_serve_alloc(sizeof(int) * (size > 0 ? size : 1));
	for (HubShard *h = cfeed_hub_shards; h != NULL; h = h->next)
	{
		int			f = 0;

		while (f < nfeeds && feeds[f] != h->feed_id)
			f++;
		if (h->followers > 0 && f == nfeeds)
			feeds[nfeeds++] = h->feed_id;
	}
	pthread_mutex_unlock(&cfeed_hub_lock);
	cfeed_buf_append(&ids, "{", 1);
	for (int f = 0; f < nfeeds; f++)
		cfeed_buf_printf(&ids, "%s%d", f > 0 ? "," : "", feeds[f]);
	cfeed_buf_append(&ids, "}", 1);
	params[0] = ids.data;
	snprintf(sql, sizeof(sql),
			 "select s.feed_id, s.shard, %s from cfeed.shard s"
			 " where s.feed_id = any ($1::int[]) and s.shard <= 32767"
			 " order by s.feed_id, s.shard", SERVE_LAYOUT_COLUMNS);
	res = PQexecParams(conn, sql, 1, NULL, params, NULL, NULL, 0);
	free(ids.data);
	if (!cfeed_result_ok(res, PGRES_TUPLES_OK))
	{
		free(feeds);
		return !cfeed_hub_lost(conn, res, "checking shard lists");
	}
	for (int f = 0; f < nfeeds; f++)
	{
		int			from;
		char		token[40];

		/* a feed without rows has the token of no shards */
		for (r = 0; r < PQntuples(res) && atoi(PQgetvalue(res, r, 0)) != feeds[f]; r++)
			;
		for (from = r; r < PQntuples(res) && atoi(PQgetvalue(res, r, 0)) == feeds[f]; r++)
			;
		feed_token(res, from, r, feeds[f], token, sizeof(token));
		pthread_mutex_lock(&cfeed_hub_lock);
		for (HubShard *h = cfeed_hub_shards; h != NULL; h = h->next)
			if (h->feed_id == feeds[f] && h->followers > 0 && strcmp(h->token, token) != 0 &&
				begun > h->token_us)
			{
				snprintf(h->token, sizeof(h->token), "%s", token);
				h->token_us = begun;
				changed = true;
			}
		pthread_mutex_unlock(&cfeed_hub_lock);
	}
	free(feeds);
	PQclear(res);
	if (changed)
	{
		cfeed_serve_log(LOG_INFO, "hub: the layout of a followed feed changed; ending its streams");
		(void) cfeed_hub_wake(false);
	}
	return true;
}

/*
 * take_notifications
 *		Mark the shards that notifications name due (a hint: the payload is
 *		not read).  Returns whether there was any.
 */
static bool
take_notifications(PGconn *conn)
{
	PGnotify   *n;
	bool		any = false;

	pthread_mutex_lock(&cfeed_hub_lock);
	while ((n = PQnotifies(conn)) != NULL)
	{
		for (HubShard *h = cfeed_hub_shards; h != NULL; h = h->next)
			if (strcmp(h->channel, n->relname) == 0)
				h->due = h->hinted = true;
		PQfreemem(n);
		any = true;
	}
	pthread_mutex_unlock(&cfeed_hub_lock);
	return any;
}

/*
 * work
 *		One pass: LISTEN again after a reconnect (before reading on), and
 *		establish the tails of newly followed shards (serve_hub_heads.c),
 *		before each read of the due ones (but not before their quiet_until:
 *		hints_deferred_until is then the earliest).  False when the
 *		connection is lost.
 */
static bool
work(PGconn *conn)
{
	for (;;)
	{
		HubShard   *todo = NULL;
		unsigned	gen = 0;
		long long	from = 0;
		bool		hinted = false;
		long long	now = cfeed_now_ms();

		/* LISTEN after a reconnect; shards followed since, or whose tail a read dropped (a failover) */
		if (!cfeed_hub_listen(conn) || !cfeed_hub_activate(conn))
			return false;
		hints_deferred_until = 0;
		pthread_mutex_lock(&cfeed_hub_lock);
		for (HubShard *h = cfeed_hub_shards; h != NULL && todo == NULL; h = h->next)
		{
			if (h->followers == 0 || !h->due || !h->based ||
				(!h->listened && !cfeed_hub_on_standby()))
				continue;
			if (h->quiet_until > now)
			{
				if (hints_deferred_until == 0 || h->quiet_until < hints_deferred_until)
					hints_deferred_until = h->quiet_until;
				continue;
			}
			todo = h;
		}
		if (todo != NULL)
		{
			hinted = todo->hinted;
			todo->due = todo->hinted = false;
			gen = todo->gen;
			from = todo->last;
		}
		pthread_mutex_unlock(&cfeed_hub_lock);
		if (todo == NULL)
			return true;
		if (!cfeed_hub_read_new(conn, todo, gen, from, hinted))
			return false;
	}
}

/*
 * wait_listening
 *		Sleep until a notification, a kick or timeout ms.  False when the
 *		connection is lost.
 */
static bool
wait_listening(PGconn *conn, long long timeout)
{
	struct pollfd pfd[2] = {{PQsocket(conn), POLLIN, 0}, {cfeed_hub_kick_fd(), POLLIN, 0}};
	int			rc;

	rc = poll(pfd, 2, (int) (timeout > INT_MAX ? INT_MAX : timeout));
	if (rc < 0 && errno != EINTR)
		return false;
	if (pfd[1].revents & POLLIN)
		cfeed_hub_drain_kicks();
	if ((pfd[0].revents & (POLLIN | POLLERR | POLLHUP)) &&
		(!PQconsumeInput(conn) || PQstatus(conn) != CONNECTION_OK))
	{
		cfeed_serve_log(LOG_WARNING, "hub: connection lost: %s", PQerrorMessage(conn));
		return false;
	}
	take_notifications(conn);
	return true;
}

/*
 * back_off
 *		Sleep ms before the next connection attempt, waking the waiting
 *		requests that are due meanwhile (their heartbeats and ends do not
 *		wait for the database).  Kicks do not shorten it, but stopping does.
 */
static void
back_off(int ms)
{
	long long	until = cfeed_now_ms() + ms;
	long long	now;

	while (!atomic_load(&hub_stopping) && (now = cfeed_now_ms()) < until)
	{
		long long	next = cfeed_hub_wake(false);

		if (next > until)
			next = until;
		cfeed_hub_nap(next > now ? (int) (next - now) : 1);
	}
}

/*
 * reconnect
 *		A new hub connection, or NULL after backing off *backoff ms (doubled
 *		each time, up to BACKOFF_MAX_MS).  On a new connection every followed
 *		shard is LISTENed to again (work() does it before reading on), its
 *		tail brought into the current feed epoch, and read.
 */
static PGconn *
reconnect(int *backoff)
{
	PGconn	   *conn = cfeed_serve_connect("hub");

	if (conn != NULL && !cfeed_hub_standby_reset(conn))
	{
		PQfinish(conn);
		conn = NULL;
	}
	if (conn == NULL)
	{
		back_off(*backoff);
		*backoff = *backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : *backoff * 2;
		return NULL;
	}
	*backoff = BACKOFF_MIN_MS;
	cfeed_hub_connection_reset();
	atomic_store(&hub_connected, true);
	return conn;
}

/*
 * cfeed_hub_connection_reset
 *		A new connection, or one to a standby just promoted: no followed
 *		shard is LISTENed to on it yet, nor its epoch checked; every one is
 *		to be LISTENed to and read.
 */
void
cfeed_hub_connection_reset(void)
{
	cfeed_hub_heads_reset();
	pthread_mutex_lock(&cfeed_hub_lock);
	for (HubShard *h = cfeed_hub_shards; h != NULL; h = h->next)
	{
		h->listened = false;
		h->epoch_checked = false;
	}
	pthread_mutex_unlock(&cfeed_hub_lock);
	cfeed_hub_mark_all_due();
}

/*
 * hub_main
 *		The hub thread: connect (and reconnect), activate, read, wake, wait.
 */
static void *
hub_main(void *arg)
{
	PGconn	   *conn = NULL;
	int			backoff = BACKOFF_MIN_MS;
	long long	next_safety = 0;
	long long	next_refresh = 0;

	(void) arg;
	while (!atomic_load(&hub_stopping))
	{
		long long	now;
		long long	next;
		bool		ok = true;

		if (conn == NULL && (conn = reconnect(&backoff)) == NULL)
			continue;

		now = cfeed_now_ms();
		if (ok && now >= next_refresh)
		{
			ok = refresh_tokens(conn) && cfeed_metrics_refresh_groups(conn);
			next_refresh = now + cfeed_serve_opts.refresh_ms;
		}
		if (ok && now >= next_safety)
		{
			ok = cfeed_hub_safety(conn);
			next_safety = now + SERVE_SAFETY_MS;
		}
		if (ok)
			ok = work(conn);
		/* notifications libpq took in during the queries: read on at once */
		if (ok && take_notifications(conn))
			continue;
		next = cfeed_hub_wake(false);
		if (hints_deferred_until != 0 && next > hints_deferred_until)
			next = hints_deferred_until;
		if (next > next_refresh)
			next = next_refresh;
		if (next > next_safety)
			next = next_safety;
		if (cfeed_hub_heads_retry_ms() != 0 && next > cfeed_hub_heads_retry_ms())
			next = cfeed_hub_heads_retry_ms();
		now = cfeed_now_ms();
		if (ok)
			ok = cfeed_hub_on_standby() ? cfeed_hub_standby_wait(conn, next > now ? next - now : 1)
				: wait_listening(conn, next > now ? next - now : 1);
		if (!ok)
		{
			atomic_store(&hub_connected, false);
			PQfinish(conn);
			conn = NULL;
		}
	}
	if (conn != NULL)
		PQfinish(conn);
	return NULL;
}

/*
 * cfeed_hub_healthy
 *		Whether the hub has its database connection.
 */
bool
cfeed_hub_healthy(void)
{
	return atomic_load(&hub_connected);
}

/*
 * cfeed_hub_start
 *		Start the hub thread.
 */
void
cfeed_hub_start(void)
{
	if (!cfeed_hub_kick_open() ||
		pthread_create(&hub_thread, NULL, hub_main, NULL) != 0)
	{
		fprintf(stderr, "cfeed serve: could not start the hub thread\n");
		exit(CFEED_EXIT_ERROR);
	}
}

/*
 * cfeed_hub_stop
 *		Stop the hub thread (after the HTTP daemon).
 */
void
cfeed_hub_stop(void)
{
	atomic_store(&hub_stopping, true);
	cfeed_hub_kick();
	pthread_join(hub_thread, NULL);
}
