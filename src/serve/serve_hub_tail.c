/*
 * src/serve/serve_hub_tail.c
 *		The followed shards of the fan-out hub and their in-memory tails:
 *		the streaming requests that follow a shard, take its events from
 *		memory, and wait in the hub until it has something for them.
 *
 * A followed shard's tail holds the events with numbers in (base, last]
 * of one feed epoch, at most SERVE_TAIL_EVENTS of them and SERVE_TAIL_BYTES
 * of their JSON (wide rows: 4,096 events of 16 kB rows held 64 MB a
 * shard), or the newest one alone when it is larger, appended in order by
 * the hub thread (serve_hub.c) once per new batch, so every client at the
 * head takes the same events from memory: the database's work grows with
 * the changes, not with the clients.  A client whose cursor is below base,
 * or of an older epoch (it is resumed there, serve_feedapi.c), catches up
 * through the reading pool first; one of a newer epoch than the tail's
 * waits for the hub to get there.  When the last follower leaves, or a
 * failover lost stamps of the tail, the tail is dropped (and its
 * generation bumped).
 *
 * Waiting: the HTTP thread suspends a request and puts it on the waiting
 * list under cfeed_hub_lock (cfeed_hub_wait); the hub takes it off under
 * the lock and resumes it after releasing the lock, so a resume never
 * precedes its suspend.  Only the HTTP thread takes a libmicrohttpd lock
 * under cfeed_hub_lock (in suspend); the hub and pool threads resume
 * without holding it (serve_hub.h).
 */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve_hub.h"

#define TAKE_MAX	512			/* events handed to one request at a time */

pthread_mutex_t cfeed_hub_lock = PTHREAD_MUTEX_INITIALIZER;
HubShard   *cfeed_hub_shards;
static ServeReq *waiters;
/*
 * When the hub walks the waiters next (wake_waiters sets it): every sleep of
 * the hub thread must be bounded by the walk just before it, so that a
 * request due later than this needs no kick.
 */
static long long waiters_due_ms;

/*
 * cfeed_hub_drop_tail
 *		Forget a shard's tail (cfeed_hub_lock held).
 */
void
cfeed_hub_drop_tail(HubShard *h)
{
	for (int i = 0; i < h->count; i++)
		free(h->ring[(h->start + i) % SERVE_TAIL_EVENTS].json);
	h->start = h->count = 0;
	h->bytes = 0;
	h->based = false;
	h->gen++;
	cfeed_hub_activate_wanted = true;
}

/*
 * req_due
 *		The earliest time a waiting request has something to do whatever the
 *		hub reads: its heartbeat, its end, or the retry of a catch-up read
 *		that found the database down.
 */
static long long
req_due(const ServeReq *req, long long now)
{
	long long	due = req->next_beat_ms;

	if (req->deadline_ms > 0 && req->deadline_ms < due)
		due = req->deadline_ms;
	if (req->retry_ms > now && req->retry_ms < due)
		due = req->retry_ms;
	return due;
}

/*
 * has_more
 *		Whether the hub has something for cursor c of req (cfeed_hub_lock
 *		held): events in the tail after it, or a catch-up read (not before
 *		the request's retry time).
 */
static bool
has_more(const ServeReq *req, const ServeCursor *c, long long now)
{
	const HubShard *h = c->hub;

	if (h->based && c->known && c->epoch == h->epoch && c->number < h->last &&
		c->number >= h->base)
		return true;			/* events in the tail */
	return h->based && now >= req->retry_ms &&
		(!c->known || c->epoch < h->epoch ||
		 (c->epoch == h->epoch && c->number < h->base));	/* a catch-up read */
}

/*
 * wants_round
 *		Whether an all-shards SSE stream between rounds has a reason to
 *		begin the next one (cfeed_hub_lock held): the hub has something
 *		for one of its shards.
 */
static bool
wants_round(const ServeReq *req, long long now)
{
	for (int i = 0; i < req->ncursors; i++)
		if (has_more(req, &req->cursors[i], now))
			return true;
	return false;
}

/*
 * cfeed_sse_wants_round
 *		wants_round, taking the lock.
 */
bool
cfeed_sse_wants_round(const ServeReq *req)
{
	bool		wants;

	pthread_mutex_lock(&cfeed_hub_lock);
	wants = wants_round(req, cfeed_now_ms());
	pthread_mutex_unlock(&cfeed_hub_lock);
	return wants;
}

/*
 * should_wake
 *		Whether a waiting request has something to do now (cfeed_hub_lock
 *		held): an event or a catch-up on one of its shards (a catch-up not
 *		before its retry time: until then the request waits, rather than
 *		spinning the HTTP thread), a heartbeat or its end due, a token
 *		change, or shutdown.
 */
static bool
should_wake(ServeReq *req, long long now)
{
	if (atomic_load(&cfeed_serve_stopping) || now >= req_due(req, now))
		return true;
	if (strcmp(req->cursors[0].hub->token, req->feed.token) != 0)
		return true;			/* the feed's shards changed: end */
	if (req->rounds)
	{
		/* a round goes shard by shard (serve_sse.c) */
		if (req->round_open)
			return req->round_shard == req->ncursors ||
				has_more(req, &req->cursors[req->round_shard], now) ||
				(now >= req->retry_ms && !req->cursors[req->round_shard].through);
		return now >= req->retry_ms && wants_round(req, now);
	}
	for (int i = 0; i < req->ncursors; i++)
		if (has_more(req, &req->cursors[i], now))
			return true;
	return false;
}

/*
 * wake_waiters
 *		Take off the waiting list every request that has something to do,
 *		or every one when all is true (cfeed_hub_lock held), linking them into
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
		if (req_due(req, now) < next)
			next = req_due(req, now);
		link = &req->next_waiting;
	}
	waiters_due_ms = next;
	return next;
}

/*
 * resume_woken
 *		Resume the requests wake_waiters took off the list, after
 *		cfeed_hub_lock is released (libmicrohttpd takes its own locks in
 *		resume, and may hold them while it calls back into code that takes
 *		cfeed_hub_lock).  They stay suspended until then, so none can be
 *		freed meanwhile.
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
 * cfeed_hub_wake
 *		Wake the waiters that have something to do (or all): lock, take,
 *		unlock, resume.  Returns as wake_waiters.
 */
long long
cfeed_hub_wake(bool all)
{
	ServeReq   *woken = NULL;
	long long	next;

	pthread_mutex_lock(&cfeed_hub_lock);
	next = wake_waiters(all, &woken);
	pthread_mutex_unlock(&cfeed_hub_lock);
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

	pthread_mutex_lock(&cfeed_hub_lock);
	for (h = cfeed_hub_shards; h != NULL; h = h->next)
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
		h->next = cfeed_hub_shards;
		cfeed_hub_shards = h;
	}
	if (h->followers++ == 0)
	{
		snprintf(h->token, sizeof(h->token), "%s", feed->token);
		h->token_us = feed->looked_up_us;
		cfeed_hub_activate_wanted = true;
	}

	/*
	 * The token of the later look-up is the feed's: a stream that looked
	 * its feed up after the hub last did, and found another layout, ends
	 * the others (they see the old one); one that looked it up before ends.
	 */
	for (HubShard *o = cfeed_hub_shards; o != NULL; o = o->next)
		if (o->feed_id == feed->feed_id && o->followers > 0 &&
			strcmp(o->token, feed->token) != 0 && feed->looked_up_us > o->token_us)
		{
			snprintf(o->token, sizeof(o->token), "%s", feed->token);
			o->token_us = feed->looked_up_us;
		}
	c->hub = h;
	pthread_mutex_unlock(&cfeed_hub_lock);
	cfeed_hub_kick();
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
	pthread_mutex_lock(&cfeed_hub_lock);
	if (--c->hub->followers == 0)
		cfeed_hub_drop_tail(c->hub);
	pthread_mutex_unlock(&cfeed_hub_lock);
	c->hub = NULL;
}

/*
 * cfeed_hub_take
 *		Append to req's output the tail's events after c (at most TAKE_MAX,
 *		and no more once the output holds SERVE_CLIENT_BYTES).
 *		HUB_BEHIND when c is below the tail, at _first or of an older epoch:
 *		the caller catches up through the pool.  Nothing for a c of a newer
 *		epoch than the tail's (the hub is about to move there).
 */
HubTake
cfeed_hub_take(ServeReq *req, ServeCursor *c)
{
	HubShard   *h = c->hub;
	HubTake		result = HUB_NOTHING;

	pthread_mutex_lock(&cfeed_hub_lock);
	if (!h->based || (c->known && c->epoch > h->epoch))
		result = HUB_NOTHING;
	else if (!c->known || c->number < h->base || c->epoch < h->epoch)
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
		for (int i = lo; i < h->count && i < lo + TAKE_MAX &&
			 (i == lo || req->out.len < SERVE_CLIENT_BYTES); i++)
		{
			HubEvent   *e = &h->ring[(h->start + i) % SERVE_TAIL_EVENTS];

			if (!cfeed_stream_event(req, c, e->number, e->stamped_us, e->json, e->len, true))
				break;			/* beyond the round (serve_sse.c) */
			result = HUB_TOOK;
		}
		if (lo == h->count)		/* numbers the gateway may not read */
			c->number = h->last < c->limit ? h->last : c->limit;
	}
	if (c->known && c->number >= c->limit)
		c->through = true;		/* the round's head (serve_sse.c) */
	pthread_mutex_unlock(&cfeed_hub_lock);
	return result;
}

/*
 * cfeed_hub_wait
 *		Suspend req until the hub has something for it.  False (not
 *		suspended) when it has something already.  The hub is kicked only
 *		when req is due (req_due) before the hub's next walk of the waiters
 *		(waiters_due_ms, set by wake_waiters): a suspend per event
 *		sent must not make the hub walk every waiter (with 10,000 streaming
 *		clients that walk per suspend was most of the gateway's CPU).  New
 *		events need no kick: the hub walks the waiters after every batch.
 */
bool
cfeed_hub_wait(ServeReq *req)
{
	bool		suspended = false;
	bool		earliest = false;
	long long	now;

	pthread_mutex_lock(&cfeed_hub_lock);
	now = cfeed_now_ms();
	if (!should_wake(req, now))
	{
		req->next_waiting = waiters;
		waiters = req;
		MHD_suspend_connection(req->conn);
		suspended = true;
		earliest = req_due(req, now) < waiters_due_ms;
	}
	pthread_mutex_unlock(&cfeed_hub_lock);
	if (earliest)
		cfeed_hub_kick();
	return suspended;
}

/*
 * cfeed_hub_forget
 *		Take a finished request off the waiting list, if it is there.
 */
void
cfeed_hub_forget(ServeReq *req)
{
	pthread_mutex_lock(&cfeed_hub_lock);
	for (ServeReq **link = &waiters; *link != NULL; link = &(*link)->next_waiting)
		if (*link == req)
		{
			*link = req->next_waiting;
			break;
		}
	pthread_mutex_unlock(&cfeed_hub_lock);
}

/*
 * cfeed_hub_token_current
 *		Whether a stream's token is still its feed's token (its shards did
 *		not change).
 */
bool
cfeed_hub_token_current(const ServeReq *req)
{
	bool		current;

	pthread_mutex_lock(&cfeed_hub_lock);
	current = strcmp(req->cursors[0].hub->token, req->feed.token) == 0;
	pthread_mutex_unlock(&cfeed_hub_lock);
	return current;
}

/*
 * cfeed_hub_wake_all
 *		Resume every waiting request (shutdown).
 */
void
cfeed_hub_wake_all(void)
{
	(void) cfeed_hub_wake(true);
}

/*
 * cfeed_hub_append
 *		Append an event to h's tail (cfeed_hub_lock held), dropping the
 *		oldest ones while the tail is full, in events or in bytes.  A
 *		follower whose cursor falls below the new base catches up through
 *		the pool (cfeed_hub_take).
 */
void
cfeed_hub_append(HubShard *h, long long number, long long stamped_us,
				 const char *json, int len)
{
	HubEvent   *e;

	while (h->count > 0 &&
		   (h->count == SERVE_TAIL_EVENTS || h->bytes + len > SERVE_TAIL_BYTES))
	{
		e = &h->ring[h->start];
		h->base = e->number;
		h->bytes -= e->len;
		free(e->json);
		h->start = (h->start + 1) % SERVE_TAIL_EVENTS;
		h->count--;
	}
	e = &h->ring[(h->start + h->count++) % SERVE_TAIL_EVENTS];
	e->number = number;
	e->stamped_us = stamped_us;
	e->len = len;
	h->bytes += len;
	e->json = cfeed_serve_alloc(len + 1);
	memcpy(e->json, json, len);
	h->last = number;
	if (h->last > h->head)
		h->head = h->last;
}

/*
 * cfeed_hub_mark_all_due
 *		Read every followed shard at the next pass.
 */
void
cfeed_hub_mark_all_due(void)
{
	pthread_mutex_lock(&cfeed_hub_lock);
	for (HubShard *h = cfeed_hub_shards; h != NULL; h = h->next)
		h->due = true;
	pthread_mutex_unlock(&cfeed_hub_lock);
}

/*
 * cfeed_hub_metrics
 *		Append the per-shard figures of followed shards to b.
 */
void
cfeed_hub_metrics(ServeBuf *b)
{
	static const char *const names[] = {"head", "tail", "lag", "followers", "tail_bytes"};
	static const char *const help[] = {
		"Highest change_sequence_number the gateway read from the database.",
		"Last change_sequence_number in the gateway's in-memory tail.",
		"Changes stamped but not yet in the gateway's tail (head - tail).",
		"Streaming requests reading the shard.",
		"Bytes of events held in the gateway's in-memory tail."
	};

	pthread_mutex_lock(&cfeed_hub_lock);
	for (int m = 0; m < 5; m++)
	{
		cfeed_buf_printf(b, "# HELP cfeed_serve_shard_%s %s\n# TYPE cfeed_serve_shard_%s gauge\n",
						 names[m], help[m], names[m]);
		for (HubShard *h = cfeed_hub_shards; h != NULL; h = h->next)
		{
			long long	v[5] = {h->head, h->last, h->head > h->last ? h->head - h->last : 0,
			h->followers, h->bytes};

			if (h->based)
				cfeed_buf_printf(b, "cfeed_serve_shard_%s{feed=\"%s\",shard=\"%d\"} %lld\n",
								 names[m], h->feed, h->shard, v[m]);
		}
	}
	pthread_mutex_unlock(&cfeed_hub_lock);
}
