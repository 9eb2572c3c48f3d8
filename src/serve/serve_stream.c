/*
 * src/serve/serve_stream.c
 *		The body of a feed response: NDJSON lines for FeedAPI
 *		({"data": ...} and {"cursor": "..."}), Server-Sent Events for
 *		browsers, and the content reader that libmicrohttpd calls for a
 *		streaming response (stream=<ms>|y, or SSE).
 *
 * The content reader runs on the HTTP thread and never blocks: it hands
 * out what is buffered, takes new events from the hub's in-memory tail of
 * each followed shard, sends a catch-up read to the pool when a cursor is
 * below the tail, and otherwise suspends the connection in the hub, which
 * resumes it when a followed shard gets new events, when a heartbeat or
 * the stream's end is due, or at shutdown.  A stream ends at its
 * stream=<ms>, at shutdown, when its feed's layout changes (the hub
 * notices: serve_layout.c), and, streaming one partition, at the end of a
 * partition that ended: a FeedAPI stream with a final cursor line (the
 * next fetch gets 409), an SSE stream with a final id-only event, from which
 * the browser reconnects and gets the new layout (a reconnect at the end of
 * a partition that ended gets 204, which ends an EventSource).
 *
 * Positions: a position is "number@epoch" when the database has feed
 * epochs (docs/replication.md), else the number; a number given without an
 * epoch is taken as of the feed's current epoch.  The reads resume a
 * position of an older epoch through cfeed.resume_cursor (serve_feedapi.c,
 * serve_hub.c), so after a failover that lost stamps the changes now
 * carrying those numbers are sent again rather than skipped.
 *
 * SSE ids: with partition=N the id is the position; without, every shard
 * is streamed in rounds, and the id is a compact one whatever the number
 * of shards (serve_sse.c).  The stream starts with an event that has an id
 * and no data: browsers then know the starting position without an event
 * being dispatched.
 *
 * The lines are written by serve_event.c, positions and ids as text by
 * serve_position.c.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve.h"

/*
 * heartbeat
 *		Something to send on an idle stream, so that proxies keep it open
 *		and a vanished client is noticed: a cursor line, or an SSE comment.
 */
static void
heartbeat(ServeReq *req)
{
	if (req->kind == REQ_SSE)
		cfeed_buf_append(&req->out, ":\n\n", 3);
	else
		cfeed_stream_cursor(req);
}

/*
 * at_end
 *		Whether a single-shard stream has sent its partition to its end, and
 *		the partition ended (it never grows again: serve_layout.c).  An
 *		all-shards stream goes on with the others.
 */
static bool
at_end(const ServeReq *req)
{
	const ServeCursor *c = &req->cursors[0];

	if (req->all_shards || !c->known || c->epoch != req->feed.epoch)
		return false;
	for (int i = 0; i < req->feed.nshards; i++)
		if (req->feed.shards[i] == c->shard)
			return req->feed.ended[i] && c->number >= req->feed.heads[i];
	return false;
}

/*
 * produce
 *		Fill req->out with what the stream has next.  Returns false when the
 *		request is now suspended (waiting in the hub or for a catch-up read).
 */
static bool
produce(ServeReq *req)
{
	long long	now = cfeed_now_ms();
	bool		took = false;

	if (req->closing || atomic_load(&cfeed_serve_stopping) ||
		(req->deadline_ms > 0 && now >= req->deadline_ms) ||
		!cfeed_hub_token_current(req) || at_end(req))
	{
		if (req->kind == REQ_SSE)
			cfeed_stream_id_event(req);
		else
			cfeed_stream_cursor(req);
		req->finished = true;
		return true;
	}
	for (int i = req->rounds ? req->round_shard : 0;
		 i < req->ncursors && req->out.len < SERVE_CLIENT_BYTES; i++)
	{
		ServeCursor *c = &req->cursors[i];
		HubTake		take = HUB_NOTHING;

		if (req->rounds && !req->round_open)
			break;
		if (!req->rounds || !c->through)
			take = cfeed_hub_take(req, c);
		if (req->rounds && take == HUB_NOTHING && !c->through)
			take = HUB_BEHIND;	/* the hub has not read up to the round's
								 * head: the pool reads (serve_sse.c) */
		switch (take)
		{
			case HUB_BEHIND:
				if (now < req->retry_ms)
					break;		/* the database was down: heartbeats only */
				req->catch_up = i;
				MHD_suspend_connection(req->conn);
				cfeed_pool_submit(req, JOB_CATCH_UP);
				return false;
			case HUB_TOOK:
				took = true;
				break;
			case HUB_NOTHING:
				break;
		}
		if (req->rounds)
		{
			if (!c->through)
				break;			/* shard by shard: this one first */
			req->round_shard = i + 1;
		}
	}
	if (req->rounds && req->round_open && req->round_shard == req->ncursors)
		took |= cfeed_sse_round_done(req);
	if (req->rounds && !req->round_open && now >= req->retry_ms &&
		(req->round_waiting || cfeed_sse_wants_round(req)))
	{
		cfeed_sse_ask_round(req);
		MHD_suspend_connection(req->conn);
		cfeed_pool_submit(req, JOB_ROUND);
		return false;
	}
	if (took)
	{
		cfeed_stream_cursor(req);
		req->next_beat_ms = now + cfeed_serve_opts.heartbeat_ms;
		return true;
	}
	if (now >= req->next_beat_ms)
	{
		heartbeat(req);
		req->next_beat_ms = now + cfeed_serve_opts.heartbeat_ms;
		return true;
	}
	return !cfeed_hub_wait(req);
}

/*
 * account
 *		Count the change of req's output buffer in cfeed_metric_buffered.
 */
static void
account(ServeReq *req)
{
	if (req->out.cap != req->accounted)
	{
		atomic_fetch_add(&cfeed_metric_buffered, (long) req->out.cap - (long) req->accounted);
		req->accounted = req->out.cap;
	}
}

/*
 * cfeed_stream_page_limit
 *		How many events a page read for req may hold: SERVE_MAX_PAGE, or
 *		fewer when the events sent so far say that many would be well over
 *		SERVE_CLIENT_BYTES (the read stops there anyway: fewer rows spare
 *		the database the rest).
 */
int
cfeed_stream_page_limit(const ServeReq *req)
{
	long long	fit;

	if (req->nevents == 0 || req->event_bytes == 0)
		return SERVE_MAX_PAGE;
	fit = SERVE_CLIENT_BYTES / (req->event_bytes / req->nevents + 1) + 1;
	return fit < SERVE_MAX_PAGE ? (int) fit : SERVE_MAX_PAGE;
}

/*
 * cfeed_stream_release
 *		Free req's output buffer (the request is done, or the buffer is
 *		empty and larger than SERVE_CLIENT_BYTES).  The HTTP thread only.
 */
void
cfeed_stream_release(ServeReq *req)
{
	free(req->out.data);
	memset(&req->out, 0, sizeof(req->out));
	req->out_off = 0;
	account(req);
}

/*
 * cfeed_stream_read
 *		libmicrohttpd's content reader of a streaming response (cls is the
 *		ServeReq).  Returns bytes copied, 0 after suspending the connection,
 *		or the end of the stream.  Nothing new is produced before what was
 *		produced is handed out, production stops at SERVE_CLIENT_BYTES, and
 *		a buffer grown past that is freed once empty: a client that does not
 *		read holds a buffer of at most about twice SERVE_CLIENT_BYTES (it
 *		grows by doubling), besides its socket's.  The buffer is counted on
 *		this thread, never while a pool thread has req.
 */
ssize_t
cfeed_stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	ServeReq   *req = cls;

	(void) pos;
	for (;;)
	{
		if (req->out_off < req->out.len)
		{
			size_t		n = req->out.len - req->out_off;

			if (n > max)
				n = max;
			memcpy(buf, req->out.data + req->out_off, n);
			req->out_off += n;
			if (req->out_off == req->out.len)
			{
				if (req->out.cap > SERVE_CLIENT_BYTES)
					cfeed_stream_release(req);
				cfeed_buf_reset(&req->out);
				req->out_off = 0;
			}
			account(req);
			return (ssize_t) n;
		}
		if (req->finished)
			return MHD_CONTENT_READER_END_OF_STREAM;
		account(req);			/* produce may hand req to a pool thread */
		if (!produce(req))
			return 0;
	}
}
