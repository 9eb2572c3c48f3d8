/*
 * src/client/serve_hub.c
 *		The fan-out hub of `cfeed serve`: one thread and one database
 *		connection that follow every shard some streaming client reads, and
 *		keep a bounded in-memory tail of each.
 *
 * A followed shard's tail holds the events with numbers in (base, last],
 * read by the hub once per new batch, in order, so every client at the
 * head takes the same events from memory: the database's work grows with
 * the changes, not with the clients.  A client whose cursor is below base
 * catches up through the reading pool first.
 *
 * Following a shard (its first follower): LISTEN on cfeed.channel (SPEC
 * §3: cfeed_<feed_id>_<shard>), then base = last = cfeed.head(); because
 * LISTEN comes first no wake-up is lost.  A notification's payload is the
 * new head; the hub reads (last, head] with cfeed.read_rows and wakes the
 * followers.  Every SERVE_SAFETY_MS every followed shard is read anyway
 * (shards with longpoll = false are never notified).  On a hot standby,
 * where LISTEN is refused (25006), the hub waits in cfeed.wait() when it
 * follows one shard and otherwise reads the followed shards every
 * SERVE_STANDBY_POLL_MS.  When the last follower leaves, the tail is
 * dropped.  A lost connection is replaced with exponential backoff; the
 * tails continue from their last number, so nothing is skipped.
 *
 * The hub also re-checks the shard lists of followed feeds every
 * --refresh-ms: when a feed's FeedAPI token changes, its FeedAPI streams
 * end (with a final cursor), and the next fetch gets 409.
 *
 * Locking: hub_lock protects the shard list, the tails and the waiting
 * list.  The HTTP thread suspends a request and puts it on the waiting list
 * under hub_lock (cfeed_hub_wait); the hub takes it off under hub_lock and
 * resumes it after releasing the lock, so a resume never precedes its
 * suspend.  Only the HTTP thread takes a libmicrohttpd lock under hub_lock
 * (in suspend); the hub and pool threads resume without holding hub_lock,
 * since libmicrohttpd may call back into code that takes hub_lock while it
 * holds its own locks.
 * Database reads happen outside the lock; a tail reset while a read was
 * under way is detected by its generation number.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "serve.h"

#define TAKE_MAX	512			/* events handed to one request at a time */
#define BACKOFF_MIN_MS	100
#define BACKOFF_MAX_MS	5000

typedef struct HubEvent
{
	long long	number;
	long long	stamped_ms;
	char	   *json;
	int			len;
} HubEvent;

typedef struct HubShard
{
	struct HubShard *next;
	int			feed_id;
	int			shard;
	char		feed[SERVE_NAME_MAX];
	char		channel[48];
	char	   *sql;			/* cfeed_feedapi_read_sql of the feed */
	char		token[40];		/* the feed's FeedAPI token */
	bool		listened;
	int			followers;
	bool		based;			/* the tail is established */
	bool		due;			/* read it at the next pass */
	unsigned	gen;			/* bumped when the tail is dropped */
	long long	base;
	long long	last;
	long long	head;			/* highest head known */
	HubEvent   *ring;
	int			start;
	int			count;
} HubShard;

static pthread_mutex_t hub_lock = PTHREAD_MUTEX_INITIALIZER;
static HubShard *shards;
static ServeReq *waiters;
static pthread_t hub_thread;
static int	kick_pipe[2] = {-1, -1};
static atomic_bool hub_stopping;
static atomic_bool hub_connected;
static bool standby;

/*
 * kick
 *		Wake the hub thread (any thread may call it).
 */
static void
kick(void)
{
	char		c = 0;

	(void) !write(kick_pipe[1], &c, 1);
}

/*
 * drop_tail
 *		Forget a shard's tail (hub_lock held).
 */
static void
drop_tail(HubShard *h)
{
	for (int i = 0; i < h->count; i++)
		free(h->ring[(h->start + i) % SERVE_TAIL_EVENTS].json);
	h->start = h->count = 0;
	h->based = false;
	h->gen++;
}

/*
 * should_wake
 *		Whether a waiting request has something to do now (hub_lock held):
 *		an event or a catch-up on one of its shards, a heartbeat or its end
 *		due, a token change, or shutdown.
 */
static bool
should_wake(ServeReq *req, long long now)
{
	if (atomic_load(&cfeed_serve_stopping) || now >= req->next_beat_ms ||
		(req->deadline_ms > 0 && now >= req->deadline_ms))
		return true;
	for (int i = 0; i < req->ncursors; i++)
	{
		ServeCursor *c = &req->cursors[i];
		HubShard   *h = c->hub;

		if (h->based && (!c->known || c->number < h->last || c->number < h->base))
			return true;
		if (req->kind == REQ_FETCH && i == 0 && strcmp(h->token, req->feed.token) != 0)
			return true;
	}
	return false;
}

/*
 * wake_waiters
 *		Take off the waiting list every request that has something to do,
 *		or every one when all is true (hub_lock held), linking them into
 *		*woken for resume_woken.  Returns the earliest time a remaining
 *		waiter is due.
 */
static long long
wake_waiters(bool all, ServeReq **woken)
{
	long long	now = cfeed_now_ms();
	long long	next = now + SERVE_SAFETY_MS;
	ServeReq  **link = &waiters;

	while (*link != NULL)
	{
		ServeReq   *req = *link;

		if (all || should_wake(req, now))
		{
			*link = req->next_waiting;
			req->next_waiting = *woken;
			*woken = req;
			continue;
		}
		if (req->next_beat_ms < next)
			next = req->next_beat_ms;
		if (req->deadline_ms > 0 && req->deadline_ms < next)
			next = req->deadline_ms;
		link = &req->next_waiting;
	}
	return next;
}

/*
 * resume_woken
 *		Resume the requests wake_waiters took off the list, after hub_lock
 *		is released (libmicrohttpd takes its own locks in resume, and may
 *		hold them while it calls back into code that takes hub_lock).  They
 *		stay suspended until then, so none can be freed meanwhile.
 */
static void
resume_woken(ServeReq *woken)
{
	while (woken != NULL)
	{
		ServeReq   *next = woken->next_waiting;

		woken->next_waiting = NULL;
		MHD_resume_connection(woken->conn);
		woken = next;
	}
}

/*
 * wake
 *		Wake the waiters that have something to do (or all): lock, take,
 *		unlock, resume.  Returns as wake_waiters.
 */
static long long
wake(bool all)
{
	ServeReq   *woken = NULL;
	long long	next;

	pthread_mutex_lock(&hub_lock);
	next = wake_waiters(all, &woken);
	pthread_mutex_unlock(&hub_lock);
	resume_woken(woken);
	return next;
}

/*
 * cfeed_hub_follow
 *		Make c (a cursor of a request for feed) take from the hub's tail of
 *		its shard, following the shard if nobody did.
 */
void
cfeed_hub_follow(const ServeFeed *feed, ServeCursor *c)
{
	HubShard   *h;

	pthread_mutex_lock(&hub_lock);
	for (h = shards; h != NULL; h = h->next)
		if (h->feed_id == feed->feed_id && h->shard == c->shard)
			break;
	if (h == NULL)
	{
		h = cfeed_serve_alloc(sizeof(HubShard));
		h->feed_id = feed->feed_id;
		h->shard = c->shard;
		snprintf(h->feed, sizeof(h->feed), "%s", feed->name);
		snprintf(h->channel, sizeof(h->channel), "cfeed_%d_%d", h->feed_id, h->shard);
		h->sql = cfeed_feedapi_read_sql(feed->name);
		h->ring = cfeed_serve_alloc(sizeof(HubEvent) * SERVE_TAIL_EVENTS);
		h->next = shards;
		shards = h;
	}
	if (h->followers++ == 0)
		snprintf(h->token, sizeof(h->token), "%s", feed->token);
	c->hub = h;
	pthread_mutex_unlock(&hub_lock);
	kick();
}

/*
 * cfeed_hub_unfollow
 *		c no longer takes from the hub; the last follower drops the tail.
 */
void
cfeed_hub_unfollow(ServeCursor *c)
{
	if (c->hub == NULL)
		return;
	pthread_mutex_lock(&hub_lock);
	if (--c->hub->followers == 0)
		drop_tail(c->hub);
	pthread_mutex_unlock(&hub_lock);
	c->hub = NULL;
}

/*
 * cfeed_hub_take
 *		Append to req's output the tail's events after c (at most TAKE_MAX).
 *		HUB_BEHIND when c is below the tail (or at _first): the caller
 *		catches up through the pool.
 */
HubTake
cfeed_hub_take(ServeReq *req, ServeCursor *c)
{
	HubShard   *h = c->hub;
	HubTake		result = HUB_NOTHING;

	pthread_mutex_lock(&hub_lock);
	if (!h->based)
		result = HUB_NOTHING;
	else if (!c->known || c->number < h->base)
		result = HUB_BEHIND;
	else if (c->number < h->last)
	{
		int			lo = 0;
		int			hi = h->count;

		/* the first event with a number above the cursor */
		while (lo < hi)
		{
			int			mid = (lo + hi) / 2;

			if (h->ring[(h->start + mid) % SERVE_TAIL_EVENTS].number <= c->number)
				lo = mid + 1;
			else
				hi = mid;
		}
		for (int i = lo; i < h->count && i < lo + TAKE_MAX; i++)
		{
			HubEvent   *e = &h->ring[(h->start + i) % SERVE_TAIL_EVENTS];

			cfeed_stream_event(req, c, e->number, e->stamped_ms, e->json, e->len, true);
			result = HUB_TOOK;
		}
		if (result == HUB_NOTHING)
			c->number = h->last;	/* numbers the gateway may not read */
	}
	pthread_mutex_unlock(&hub_lock);
	return result;
}

/*
 * cfeed_hub_wait
 *		Suspend req until the hub has something for it.  False (not
 *		suspended) when it has something already.
 */
bool
cfeed_hub_wait(ServeReq *req)
{
	bool		suspended = false;

	pthread_mutex_lock(&hub_lock);
	if (!should_wake(req, cfeed_now_ms()))
	{
		req->next_waiting = waiters;
		waiters = req;
		MHD_suspend_connection(req->conn);
		suspended = true;
	}
	pthread_mutex_unlock(&hub_lock);
	if (suspended)
		kick();					/* its timers may be the earliest */
	return suspended;
}

/*
 * cfeed_hub_forget
 *		Take a finished request off the waiting list, if it is there.
 */
void
cfeed_hub_forget(ServeReq *req)
{
	pthread_mutex_lock(&hub_lock);
	for (ServeReq **link = &waiters; *link != NULL; link = &(*link)->next_waiting)
		if (*link == req)
		{
			*link = req->next_waiting;
			break;
		}
	pthread_mutex_unlock(&hub_lock);
}

/*
 * cfeed_hub_token_current
 *		Whether a FeedAPI stream's token is still its feed's token.
 */
bool
cfeed_hub_token_current(const ServeReq *req)
{
	bool		current;

	pthread_mutex_lock(&hub_lock);
	current = strcmp(req->cursors[0].hub->token, req->feed.token) == 0;
	pthread_mutex_unlock(&hub_lock);
	return current;
}

/*
 * cfeed_hub_wake_all
 *		Resume every waiting request (shutdown).
 */
void
cfeed_hub_wake_all(void)
{
	(void) wake(true);
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
 * cfeed_hub_metrics
 *		Append the per-shard figures of followed shards to b.
 */
void
cfeed_hub_metrics(ServeBuf *b)
{
	static const char *const names[] = {"head", "tail", "lag", "followers"};
	static const char *const help[] = {
		"Highest change_sequence_number the gateway knows of.",
		"Last change_sequence_number in the gateway's in-memory tail.",
		"Changes stamped but not yet in the gateway's tail (head - tail).",
		"Streaming requests reading the shard."
	};

	pthread_mutex_lock(&hub_lock);
	for (int m = 0; m < 4; m++)
	{
		cfeed_buf_printf(b, "# HELP cfeed_serve_shard_%s %s\n# TYPE cfeed_serve_shard_%s gauge\n",
						 names[m], help[m], names[m]);
		for (HubShard *h = shards; h != NULL; h = h->next)
		{
			long long	v[4] = {h->head, h->last, h->head > h->last ? h->head - h->last : 0, h->followers};

			if (h->based)
				cfeed_buf_printf(b, "cfeed_serve_shard_%s{feed=\"%s\",shard=\"%d\"} %lld\n",
								 names[m], h->feed, h->shard, v[m]);
		}
	}
	pthread_mutex_unlock(&hub_lock);
}

/*
 * lost
 *		Whether a failed result means the hub's connection is gone; logs the
 *		failure either way and clears res.
 */
static bool
lost(PGconn *conn, PGresult *res, const char *what)
{
	bool		gone = cfeed_connection_lost(conn, res);

	cfeed_serve_log(gone ? LOG_WARNING : LOG_ERROR, "hub: %s failed: %s", what,
					cfeed_error_text(conn, res));
	PQclear(res);
	return gone;
}

/*
 * listen_shard
 *		LISTEN on a followed shard's channel; on a hot standby (25006) note
 *		that the hub waits with cfeed.wait instead.  False when the
 *		connection is lost.
 */
static bool
listen_shard(PGconn *conn, HubShard *h)
{
	char		sql[64];
	PGresult   *res;

	snprintf(sql, sizeof(sql), "LISTEN \"%s\"", h->channel);	/* digits and _ */
	res = PQexec(conn, sql);
	if (cfeed_result_ok(res, PGRES_COMMAND_OK))
	{
		PQclear(res);
		h->listened = true;
		return true;
	}
	if (strcmp(cfeed_sqlstate(res), "25006") != 0)
		return !lost(conn, res, "LISTEN");
	PQclear(res);
	standby = true;
	cfeed_serve_log(LOG_INFO, "hub: hot standby (LISTEN refused): waiting with cfeed.wait instead");
	return true;
}

/*
 * activate
 *		Establish the tail of a newly followed shard: LISTEN, then the head.
 *		False when the connection is lost.
 */
static bool
activate(PGconn *conn, HubShard *h, unsigned gen)
{
	char		feed_text[16];
	char		shard_text[16];
	const char *params[2] = {feed_text, shard_text};
	PGresult   *res;

	if (!h->listened && !standby && !listen_shard(conn, h))
		return false;
	snprintf(feed_text, sizeof(feed_text), "%d", h->feed_id);
	snprintf(shard_text, sizeof(shard_text), "%d", h->shard);
	res = PQexecParams(conn, "select cfeed.head($1::int, $2::int)", 2, NULL, params, NULL, NULL, 0);
	if (!cfeed_result_ok(res, PGRES_TUPLES_OK) || PQntuples(res) != 1)
		return !lost(conn, res, "reading a head");
	pthread_mutex_lock(&hub_lock);
	if (h->gen == gen && h->followers > 0 && !h->based)
	{
		h->base = h->last = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
		if (h->last > h->head)
			h->head = h->last;
		h->based = true;
	}
	pthread_mutex_unlock(&hub_lock);
	PQclear(res);
	(void) wake(false);
	return true;
}

/*
 * read_new
 *		Read a followed shard's new events into its tail, page by page, and
 *		wake its followers.  False when the connection is lost.
 */
static bool
read_new(PGconn *conn, HubShard *h, unsigned gen, long long from)
{
	for (;;)
	{
		char		feed_text[16];
		char		shard_text[16];
		char		cursor_text[24];
		char		limit_text[16];
		const char *params[5] = {feed_text, shard_text, cursor_text, limit_text, h->feed};
		PGresult   *res;
		int			rows;

		snprintf(feed_text, sizeof(feed_text), "%d", h->feed_id);
		snprintf(shard_text, sizeof(shard_text), "%d", h->shard);
		snprintf(cursor_text, sizeof(cursor_text), "%lld", from);
		snprintf(limit_text, sizeof(limit_text), "%d", SERVE_MAX_PAGE);
		res = PQexecParams(conn, h->sql, 5, NULL, params, NULL, NULL, 0);
		if (!cfeed_result_ok(res, PGRES_TUPLES_OK))
			return !lost(conn, res, "reading");
		rows = PQntuples(res);
		pthread_mutex_lock(&hub_lock);
		if (h->gen != gen || !h->based || h->last != from)
			rows = 0;			/* dropped meanwhile */
		for (int r = 0; r < rows; r++)
		{
			HubEvent   *e;

			if (h->count == SERVE_TAIL_EVENTS)
			{
				e = &h->ring[h->start];
				h->base = e->number;
				free(e->json);
				h->start = (h->start + 1) % SERVE_TAIL_EVENTS;
				h->count--;
			}
			e = &h->ring[(h->start + h->count++) % SERVE_TAIL_EVENTS];
			e->number = strtoll(PQgetvalue(res, r, 0), NULL, 10);
			e->stamped_ms = strtoll(PQgetvalue(res, r, 1), NULL, 10);
			e->len = PQgetlength(res, r, 2);
			e->json = cfeed_serve_alloc(e->len + 1);
			memcpy(e->json, PQgetvalue(res, r, 2), e->len);
			h->last = e->number;
			if (h->last > h->head)
				h->head = h->last;
		}
		from = h->last;
		pthread_mutex_unlock(&hub_lock);
		PQclear(res);
		if (rows > 0)
			(void) wake(false);
		if (rows < SERVE_MAX_PAGE)
			return true;
	}
}

/*
 * refresh_tokens
 *		Recompute the FeedAPI token of every followed feed; wake everyone
 *		when one changed.  False when the connection is lost.
 */
static bool
refresh_tokens(PGconn *conn)
{
	ServeBuf	ids = {0};
	const char *params[1];
	PGresult   *res;
	bool		changed = false;

	cfeed_buf_append(&ids, "{", 1);
	pthread_mutex_lock(&hub_lock);
	for (HubShard *h = shards; h != NULL; h = h->next)
		if (h->followers > 0)
			cfeed_buf_printf(&ids, "%s%d", ids.len > 1 ? "," : "", h->feed_id);
	pthread_mutex_unlock(&hub_lock);
	cfeed_buf_append(&ids, "}", 1);
	params[0] = ids.data;
	res = PQexecParams(conn,
					   "select f.id, coalesce((select pg_catalog.string_agg(s.shard::text, ',' order by s.shard)"
					   " from cfeed.shard s where s.feed_id = f.id), '')"
					   " from pg_catalog.unnest($1::int[]) f(id)",
					   1, NULL, params, NULL, NULL, 0);
	free(ids.data);
	if (!cfeed_result_ok(res, PGRES_TUPLES_OK))
		return !lost(conn, res, "checking shard lists");
	pthread_mutex_lock(&hub_lock);
	for (int r = 0; r < PQntuples(res); r++)
	{
		int			feed_id = atoi(PQgetvalue(res, r, 0));
		char		token[40];

		cfeed_feedapi_token(feed_id, PQgetvalue(res, r, 1), token, sizeof(token));
		for (HubShard *h = shards; h != NULL; h = h->next)
			if (h->feed_id == feed_id && h->followers > 0 && strcmp(h->token, token) != 0)
			{
				snprintf(h->token, sizeof(h->token), "%s", token);
				changed = true;
			}
	}
	pthread_mutex_unlock(&hub_lock);
	PQclear(res);
	if (changed)
	{
		cfeed_serve_log(LOG_INFO, "hub: the shards of a followed feed changed; ending its FeedAPI streams");
		(void) wake(false);
	}
	return true;
}

/*
 * take_notifications
 *		Note the heads that notifications carry; mark those shards due.
 */
static void
take_notifications(PGconn *conn)
{
	PGnotify   *n;

	pthread_mutex_lock(&hub_lock);
	while ((n = PQnotifies(conn)) != NULL)
	{
		for (HubShard *h = shards; h != NULL; h = h->next)
			if (strcmp(h->channel, n->relname) == 0)
			{
				long long	head = strtoll(n->extra, NULL, 10);

				if (head > h->head)
					h->head = head;
				h->due = true;
			}
		PQfreemem(n);
	}
	pthread_mutex_unlock(&hub_lock);
}

/*
 * work
 *		One pass: activate newly followed shards, LISTEN again after a
 *		reconnect (before reading on), read the due ones.  False when the
 *		connection is lost.
 */
static bool
work(PGconn *conn)
{
	for (;;)
	{
		HubShard   *todo = NULL;
		enum
		{
			ACTIVATE, LISTEN, READ
		}			what = READ;
		unsigned	gen = 0;
		long long	from = 0;
		bool		ok;

		pthread_mutex_lock(&hub_lock);
		for (HubShard *h = shards; h != NULL && todo == NULL; h = h->next)
		{
			if (h->followers == 0)
				continue;
			if (!h->based)
				what = ACTIVATE;
			else if (!h->listened && !standby)
				what = LISTEN;
			else if (h->due || h->head > h->last)
				what = READ;
			else
				continue;
			todo = h;
		}
		if (todo != NULL)
		{
			if (what == READ)
				todo->due = false;
			gen = todo->gen;
			from = todo->last;
		}
		pthread_mutex_unlock(&hub_lock);
		if (todo == NULL)
			return true;
		ok = what == ACTIVATE ? activate(conn, todo, gen) :
			what == LISTEN ? listen_shard(conn, todo) :
			read_new(conn, todo, gen, from);
		if (!ok)
			return false;
		if ((what == ACTIVATE && !todo->based) ||
			(what == LISTEN && !todo->listened && !standby))
			return true;		/* failed without losing the connection: retry later */
	}
}

/*
 * mark_all_due
 *		Read every followed shard at the next pass.
 */
static void
mark_all_due(void)
{
	pthread_mutex_lock(&hub_lock);
	for (HubShard *h = shards; h != NULL; h = h->next)
		h->due = true;
	pthread_mutex_unlock(&hub_lock);
}

/*
 * wait_standby
 *		On a hot standby: wait in cfeed.wait for the one followed shard, or
 *		sleep a poll interval; then every followed shard is due.  False when
 *		the connection is lost.
 */
static bool
wait_standby(PGconn *conn, long long timeout)
{
	HubShard   *one = NULL;
	int			followed = 0;
	char		text[4][24];
	const char *params[4] = {text[0], text[1], text[2], text[3]};
	PGresult   *res;

	pthread_mutex_lock(&hub_lock);
	for (HubShard *h = shards; h != NULL; h = h->next)
		if (h->followers > 0 && h->based)
		{
			followed++;
			one = h;
			snprintf(text[0], sizeof(text[0]), "%d", h->feed_id);
			snprintf(text[1], sizeof(text[1]), "%d", h->shard);
			snprintf(text[2], sizeof(text[2]), "%lld", h->last);
		}
	pthread_mutex_unlock(&hub_lock);
	if (followed != 1 || one == NULL)
	{
		struct pollfd pfd = {kick_pipe[0], POLLIN, 0};

		if (poll(&pfd, 1, (int) (timeout < SERVE_STANDBY_POLL_MS ? timeout : SERVE_STANDBY_POLL_MS)) > 0)
		{
			char		buf[64];

			(void) !read(kick_pipe[0], buf, sizeof(buf));
		}
		mark_all_due();
		return true;
	}
	snprintf(text[3], sizeof(text[3]), "%lld", timeout < 1000 ? timeout : 1000);
	res = PQexecParams(conn, "select cfeed.wait($1::int, $2::int, $3::bigint, $4::int)",
					   4, NULL, params, NULL, NULL, 0);
	if (!cfeed_result_ok(res, PGRES_TUPLES_OK))
		return !lost(conn, res, "waiting");
	PQclear(res);
	mark_all_due();
	return true;
}

/*
 * wait_listening
 *		Sleep until a notification, a kick or timeout ms.  False when the
 *		connection is lost.
 */
static bool
wait_listening(PGconn *conn, long long timeout)
{
	struct pollfd pfd[2] = {{PQsocket(conn), POLLIN, 0}, {kick_pipe[0], POLLIN, 0}};
	int			rc;

	rc = poll(pfd, 2, (int) (timeout > INT_MAX ? INT_MAX : timeout));
	if (rc < 0 && errno != EINTR)
		return false;
	if (pfd[1].revents & POLLIN)
	{
		char		buf[64];

		(void) !read(kick_pipe[0], buf, sizeof(buf));
	}
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

		if (conn == NULL)
		{
			conn = cfeed_serve_connect("hub");
			if (conn == NULL)
			{
				struct pollfd pfd = {kick_pipe[0], POLLIN, 0};

				(void) poll(&pfd, 1, backoff);
				backoff = backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : backoff * 2;
				continue;
			}
			backoff = BACKOFF_MIN_MS;
			standby = false;
			atomic_store(&hub_connected, true);
			/* work() LISTENs again before reading on */
			pthread_mutex_lock(&hub_lock);
			for (HubShard *h = shards; h != NULL; h = h->next)
				h->listened = false;
			pthread_mutex_unlock(&hub_lock);
			mark_all_due();
		}

		now = cfeed_now_ms();
		if (ok && now >= next_refresh)
		{
			ok = refresh_tokens(conn);
			next_refresh = now + cfeed_serve_opts.refresh_ms;
		}
		if (ok && now >= next_safety)
		{
			mark_all_due();
			next_safety = now + SERVE_SAFETY_MS;
		}
		if (ok)
			ok = work(conn);
		next = wake(false);
		if (next > next_refresh)
			next = next_refresh;
		if (next > next_safety)
			next = next_safety;
		now = cfeed_now_ms();
		if (ok)
			ok = standby ? wait_standby(conn, next > now ? next - now : 1)
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
 * cfeed_hub_start
 *		Start the hub thread.
 */
void
cfeed_hub_start(void)
{
	if (pipe(kick_pipe) != 0 ||
		fcntl(kick_pipe[0], F_SETFL, O_NONBLOCK) != 0 ||
		fcntl(kick_pipe[1], F_SETFL, O_NONBLOCK) != 0 ||
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
	kick();
	pthread_join(hub_thread, NULL);
}
