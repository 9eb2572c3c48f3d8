/*
 * src/serve/serve_feedapi.c
 *		The database side of a request to /feeds/<name>, run by a pool
 *		thread: the start job (look the feed up, serve_feed.c; answer the
 *		discovery call; check a fetch's token, partition and cursor, and
 *		read its first page) and a streaming request's next page below the
 *		hub's tail.
 *
 * FeedAPI v2 (vippsas/feedapi-spec) as cfeed maps it: partitions are the
 * feed's shards; a cursor is the last change_sequence_number delivered and
 * the feed epoch it belongs to, "number@epoch" (serve_stream.c; "_first":
 * from the beginning, backfilled history included; "_last": the shard's
 * head; a position beyond the head in the current epoch, or of an epoch
 * a day ahead of the clock, was never sent and gets 400: position_sent).  Every read first brings the cursor into the current
 * epoch (cfeed.resume_cursor) and checks the epoch again after reading
 * (client epoch.c): after a failover that lost stamps, the changes now
 * carrying them are sent again, not skipped.  The token is a hash of the
 * feed's id and shard list, so it changes when shards are added or
 * removed, and a fetch with another token gets 409.
 */
#define _POSIX_C_SOURCE 200809L

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve.h"

/*
 * shard_index
 *		The index of shard in req->feed, or -1.
 */
static int
shard_index(const ServeReq *req, int shard)
{
	for (int i = 0; i < req->feed.nshards; i++)
		if (req->feed.shards[i] == shard)
			return i;
	return -1;
}

/*
 * set_cursor
 *		Position c (of shard index i) from a cursor argument: _last or a
 *		position (_first or number[@epoch], serve_position.c).  False for
 *		anything else.
 */
static bool
set_cursor(const ServeReq *req, int i, const char *arg, ServeCursor *c)
{
	c->shard = req->feed.shards[i];
	c->epoch = req->feed.epoch;
	c->limit = LLONG_MAX;		/* no round (serve_sse.c) */
	if (strcmp(arg, "_last") == 0)
	{
		c->known = true;
		c->number = req->feed.heads[i];
	}
	else
		return cfeed_stream_parse_position(req, arg, c);
	return true;
}

/*
 * position_sent
 *		Whether c (what: how the answer names it) may be a position that a
 *		response sent; if not, the answer is set to 400.  Never sent were a
 *		position beyond its shard's head in the feed's current epoch
 *		(taking it would skip every change up to it), and one of an epoch
 *		more than SERVE_AHEAD_LIMIT_US ahead of the time of day (no database's
 *		clock is: cfeed.resume_cursor would take it for an epoch a failover
 *		lost, and send the shard again with a false warning).  A position of
 *		another epoch is resumed by the read (cfeed.resume_cursor): an older
 *		one, and a later one the database does not know, which epoch
 *		numbers, from each server's clock, cannot order (a failover that
 *		lost it, a restored backup or dump).  A hot standby is not asked: a
 *		position another gateway sent may be ahead of its replay, epoch
 *		included (docs/serve.md, "Serving from a hot standby").
 */
static bool
position_sent(ServeReq *req, const ServeCursor *c, const char *what)
{
	char		detail[192];

	if (req->feed.on_standby)
		return true;
	if (cfeed_serve_epochs && c->epoch > cfeed_wall_us() + SERVE_AHEAD_LIMIT_US)
		snprintf(detail, sizeof(detail),
				 "%s is of epoch %lld, a day or more ahead of this gateway's clock: a cursor this feed did not send",
				 what, c->epoch);
	else if (c->known && c->epoch == req->feed.epoch &&
			 c->number > req->feed.heads[shard_index(req, c->shard)])
		snprintf(detail, sizeof(detail),
				 "%s %lld of partition %d is beyond its head %lld: not a position this feed sent",
				 what, c->number, c->shard, req->feed.heads[shard_index(req, c->shard)]);
	else
		return true;
	cfeed_feedapi_error(req, 400, "bad_request", detail);
	return false;
}

/*
 * position_request
 *		Fill req->cursors from the cursor argument (and, for SSE, the
 *		Last-Event-ID).  False, with a 400 answer, when they are invalid or
 *		one was never sent (position_sent): a compact Last-Event-ID is
 *		checked here too, its epoch and the one position it names (the
 *		others are found by the times, serve_sse.c).
 */
static bool
position_request(ServeReq *req)
{
	int			first = 0;
	int			n = req->feed.nshards;
	const char *what = req->last_event_id ? "Last-Event-ID position" : "cursor";
	const ServeSseId *id = &req->resume;

	if (!req->all_shards)
	{
		first = shard_index(req, req->partition);
		if (first < 0)
		{
			cfeed_feedapi_error(req, 400, "bad_request", "no such partition (see the discovery call)");
			return false;
		}
		n = 1;
	}
	req->ncursors = n;
	req->cursors = cfeed_serve_alloc(sizeof(ServeCursor) * n);
	for (int i = 0; i < n; i++)
		if (!set_cursor(req, first + i, req->cursor_arg, &req->cursors[i]))
		{
			cfeed_feedapi_error(req, 400, "bad_request", "cursor must be _first, _last or a cursor this feed sent");
			return false;
		}
	if (req->last_event_id != NULL && !cfeed_sse_parse_id(req, req->last_event_id))
	{
		cfeed_feedapi_error(req, 400, "bad_request", "Last-Event-ID is not an id this feed sent");
		return false;
	}
	for (int i = 0; i < n; i++)
		if (!position_sent(req, &req->cursors[i], what))
			return false;
	if (id->set)
	{
		ServeCursor named = {
			.shard = id->shard,
			.known = id->mid,
			.number = id->number,
			.epoch = id->has_epoch ? id->epoch : req->feed.epoch
		};

		if (!position_sent(req, &named, what))
			return false;
	}
	return true;
}

/*
 * cfeed_feedapi_read
 *		Read a page of a shard: sql is cfeed_feedapi_read_sql of the feed
 *		(named feed, id feed_id), after is the cursor (NULL: from the
 *		beginning), limit the most events.  Its rows are number, stamped_at
 *		(Unix microseconds) and the event's JSON; the caller checks and
 *		clears the result.
 */
PGresult *
cfeed_feedapi_read(PGconn *conn, const char *sql, int feed_id, const char *feed,
				   int shard, const long long *after, int limit)
{
	char		feed_text[16];
	char		shard_text[16];
	char		cursor_text[24];
	char		limit_text[16];
	const char *params[5] = {feed_text, shard_text, NULL, limit_text, feed};

	snprintf(feed_text, sizeof(feed_text), "%d", feed_id);
	snprintf(shard_text, sizeof(shard_text), "%d", shard);
	snprintf(limit_text, sizeof(limit_text), "%d", limit);
	if (after != NULL)
	{
		snprintf(cursor_text, sizeof(cursor_text), "%lld", *after);
		params[2] = cursor_text;
	}
	return PQexecParams(conn, sql, 5, NULL, params, NULL, NULL, 0);
}

/*
 * retained
 *		Whether the feed's retention left every change after the n cursors
 *		at cursors: none is below its shard's retention floor, cfeed.cursor_at
 *		at -infinity (the cursor from which reading returns every change
 *		left; it looks at the rows themselves, so changes the gateway's role
 *		is not shown, such as those of a tracked table it may not SELECT,
 *		are not taken for removed ones).  A floor at the shard's start value
 *		is a shard without history from which nothing was removed: a cursor
 *		below it (0, in the migration range) misses nothing.  False with the
 *		answer set: 410, or the failure of the query.
 */
static bool
retained(PGconn **conn, ServeReq *req, const ServeCursor *cursors, int n)
{
	long long	removed = cfeed_feed_count_positions(conn, req, cursors, n,
													 "u.n < (select nullif(cfeed.cursor_at($1::int, u.shard, '-infinity'),"
													 " s.start_sequence_number) from cfeed.shard s"
													 " where s.feed_id = $1::int and s.shard = u.shard)",
													 NULL);

	if (removed > 0)
		cfeed_feedapi_error(req, 410, "gone",
							"changes after this cursor were removed by the feed's retention; start again from _first");
	return removed == 0;
}

/*
 * resume_in_epoch
 *		Bring c into the current feed epoch (client epoch.c); a cursor that
 *		a failover rewound is logged, and its page is not cacheable.  False,
 *		with the answer set, when the query fails.
 */
static bool
resume_in_epoch(PGconn **conn, ServeReq *req, ServeCursor *c)
{
	long long	before = c->number;
	bool		rewound;
	PGresult   *res;

	if (!cfeed_epoch_resume(*conn, req->feed.feed_id, c->shard, c->known, &c->number,
							true, &c->epoch, &rewound, &res))
	{
		cfeed_feed_db_error(conn, req, res);
		return false;
	}
	if (rewound)
	{
		cfeed_serve_log(LOG_WARNING, "feed \"%s\" shard %d: a failover lost stamps after %lld; "
						"a client at %lld resumes there (changes are sent again)",
						req->feed.name, c->shard, c->number, before);
		req->cacheable = false;
	}
	return true;
}

/*
 * read_epoch_page
 *		Read up to limit events after c, in c's feed epoch: c is first
 *		brought into the current epoch, and a read after which the epoch
 *		moved on is done again.  The result (checked) or
 *		NULL with the answer set.
 */
static PGresult *
read_epoch_page(PGconn **conn, ServeReq *req, ServeCursor *c, int limit)
{
	char	   *sql = cfeed_feedapi_read_sql(req->feed.name);
	PGresult   *res = NULL;

	for (;;)
	{
		long long	epoch;
		PGresult   *failed;

		if (cfeed_serve_epochs && !resume_in_epoch(conn, req, c))
			break;
		res = cfeed_feedapi_read(*conn, sql, req->feed.feed_id, req->feed.name, c->shard,
								 c->known ? &c->number : NULL, limit);
		if (!cfeed_result_ok(res, PGRES_TUPLES_OK))
		{
			cfeed_feed_db_error(conn, req, res);
			res = NULL;
			break;
		}
		if (!cfeed_serve_epochs)
			break;
		if (!cfeed_epoch_now(*conn, &epoch, &failed))
		{
			PQclear(res);
			res = NULL;
			cfeed_feed_db_error(conn, req, failed);
			break;
		}
		if (epoch == c->epoch)
			break;
		PQclear(res);
		res = NULL;
	}
	free(sql);
	return res;
}

/*
 * round_head_visible
 *		Whether this connection sees c's shard up to the head of the round
 *		under way (cfeed.head, read before the read that follows: a hot
 *		standby may be behind the connection that found the round): 1 or 0,
 *		-1 with the answer set when the query fails.
 */
static int
round_head_visible(PGconn **conn, ServeReq *req, const ServeCursor *c)
{
	char		feed_text[16];
	char		shard_text[16];
	const char *params[2] = {feed_text, shard_text};
	PGresult   *res;
	bool		visible;

	if (c->through)
		return 0;
	snprintf(feed_text, sizeof(feed_text), "%d", req->feed.feed_id);
	snprintf(shard_text, sizeof(shard_text), "%d", c->shard);
	res = PQexecParams(*conn, "select cfeed.head($1::int, $2::int)", 2, NULL, params, NULL, NULL, 0);
	if (!cfeed_result_ok(res, PGRES_TUPLES_OK) || PQntuples(res) != 1)
	{
		cfeed_feed_db_error(conn, req, res);
		return -1;
	}
	visible = strtoll(PQgetvalue(res, 0, 0), NULL, 10) >= c->limit;
	PQclear(res);
	return visible;
}

/*
 * read_page
 *		Read up to limit events after c into req->out (framed for the
 *		request's kind) and advance c.  Returns the rows read, or -1 with
 *		the answer set: 410 when retention removed changes after c.  That
 *		is asked only of a feed with retention when the read skipped
 *		numbers after c (or returned nothing below the head), which changes
 *		the gateway's role may not read do as well as removed ones.
 */
static int
read_page(PGconn **conn, ServeReq *req, ServeCursor *c, int limit)
{
	PGresult   *res;
	int			rows;
	int			sent = 0;
	int			complete = req->rounds ? round_head_visible(conn, req, c) : 0;

	if (complete < 0)
		return -1;
	res = read_epoch_page(conn, req, c, limit);
	if (res == NULL)
		return -1;
	rows = PQntuples(res);
	if (c->known && req->feed.has_retention &&
		(rows > 0 ? strtoll(PQgetvalue(res, 0, 0), NULL, 10) > c->number + 1 :
		 c->number < req->feed.heads[shard_index(req, c->shard)]) &&
		!retained(conn, req, c, 1))
	{
		PQclear(res);
		return -1;
	}
	/* at least one event, and no more once the output holds SERVE_CLIENT_BYTES */
	for (; sent < rows && (sent == 0 || req->out.len < SERVE_CLIENT_BYTES); sent++)
		if (!cfeed_stream_event(req, c, strtoll(PQgetvalue(res, sent, 0), NULL, 10),
								strtoll(PQgetvalue(res, sent, 1), NULL, 10),
								PQgetvalue(res, sent, 2), PQgetlength(res, sent, 2), false))
			break;				/* beyond the round (serve_sse.c) */
	PQclear(res);

	/*
	 * Every change up to the round's head was visible to the read, and it
	 * returned all it could: the rest up to that head, if any, are changes
	 * the gateway's role may not read.
	 */
	if (complete > 0 && sent == rows && rows < limit)
	{
		c->known = true;
		c->number = c->limit;
		c->through = true;
	}

	/*
	 * Nothing from the beginning: nothing up to the head seen at look-up
	 * (an earlier snapshot) is readable, so the position is that head.  A
	 * partition that ended has its end at that head: a read that returned
	 * all it could leaves nothing readable below it (the rest are changes
	 * the gateway's role may not read), so the position is its end.
	 */
	if ((rows == 0 && !c->known) ||
		(!req->rounds && req->feed.ended[shard_index(req, c->shard)] && sent == rows &&
		 rows < limit && (!c->known || c->epoch == req->feed.epoch)))
	{
		long long	end = req->feed.heads[shard_index(req, c->shard)];

		if (!c->known || c->number < end)
			c->number = end;
		c->known = true;
		c->epoch = req->feed.epoch;
	}
	return rows;
}

/*
 * label_asked_epoch
 *		A cacheable page's cursor line carries the epoch the request's
 *		cursor named, when its last event is a position of that epoch too:
 *		at or below the head every later epoch recorded when it began
 *		(cfeed.resume_cursor leaves it where it is).  A page that reaches
 *		past such a head (changes stamped after a restart, read from a
 *		cursor of the epoch before) keeps the epoch it was read in and is
 *		not cacheable: labelled with the old epoch, its cursor would be
 *		rewound to that head, and the changes above it sent again.  False,
 *		with the answer set, when the query fails.
 */
static bool
label_asked_epoch(PGconn **conn, ServeReq *req, ServeCursor *c, long long asked_epoch)
{
	long long	number = c->number;
	long long	epoch = asked_epoch;
	bool		rewound;
	PGresult   *res;

	if (c->epoch == asked_epoch)
		return true;
	if (!cfeed_epoch_resume(*conn, req->feed.feed_id, c->shard, true, &number,
							true, &epoch, &rewound, &res))
	{
		cfeed_feed_db_error(conn, req, res);
		return false;
	}
	if (rewound)
		req->cacheable = false;
	else
		c->epoch = asked_epoch;
	return true;
}

/*
 * start_request
 *		The start job: look up, check, position, and read the first page.
 */
static void
start_request(PGconn **conn, ServeReq *req)
{
	ServeCursor *c;
	int			i;
	long long	head;
	long long	asked_epoch;

	if (!cfeed_feed_look_up(conn, req))
		return;
	if (req->kind == REQ_DISCOVERY)
	{
		cfeed_feed_discovery(conn, req);
		return;
	}
	if (req->kind == REQ_FETCH && strcmp(req->api_token, req->feed.token) != 0)
	{
		cfeed_feedapi_error(req, 409, "conflict",
							"the feed's partitions changed; repeat the discovery call");
		return;
	}
	if (!position_request(req))
		return;

	/*
	 * An SSE stream from a position whose next changes retention removed
	 * gets 410 before it starts, on which an EventSource stops.  Started,
	 * its first read would end it with that position as its id, and the
	 * browser would reconnect with it every second, for ever.  Asked of
	 * the positions the request names: its cursors, or the one a compact
	 * id names within a round (its others are found by their times, at or
	 * above each shard's floor).
	 */
	if (req->kind == REQ_SSE && req->feed.has_retention && !req->resume.set &&
		!retained(conn, req, req->cursors, req->ncursors))
		return;
	if (req->kind == REQ_SSE && req->all_shards && !cfeed_sse_start(conn, req))
		return;
	if (req->kind == REQ_SSE && req->feed.has_retention && req->resume.set && req->resume.mid &&
		!retained(conn, req, &req->cursors[shard_index(req, req->resume.shard)], 1))
		return;
	c = &req->cursors[0];
	i = shard_index(req, c->shard);
	head = req->feed.heads[i];
	if (req->kind == REQ_SSE && !req->all_shards && req->feed.ended[i] && c->known &&
		c->epoch == req->feed.epoch && c->number >= head)
	{
		req->status = 204;		/* the end of a closed partition: done */
		return;
	}
	req->status = 200;
	if (req->kind == REQ_SSE)
	{
		cfeed_stream_position(req);
		return;					/* the stream reads from the hub or catches up */
	}
	asked_epoch = c->epoch;

	/*
	 * A partition that ended never grows: a stream of it is answered as a
	 * page, the next fetch goes on from its cursor, and a page at its end,
	 * without events, tells the consumer that it is done.
	 */
	if (req->stream && req->feed.ended[i])
	{
		req->stream = false;
		req->page_size = cfeed_stream_page_limit(req);
	}

	/*
	 * A full page below the head is the same whenever it is read, so it may
	 * be cached: its cursor line carries the epoch the request's cursor
	 * named, not the one it was read in (a restart begins an epoch).  A
	 * bare number is taken as of the current epoch, so its page, whose
	 * cursor carries that epoch, is not; nor is a page that starts in the
	 * shard's history (at or below its start value), which a backfill may
	 * still add to.
	 */
	req->cacheable = !req->stream && c->known && c->number >= req->feed.starts[i] &&
		c->number + req->page_size <= head &&
		(!cfeed_serve_epochs || strchr(req->cursor_arg, '@') != NULL) &&
		cfeed_serve_payload(req->feed.name) == NULL;
	if (read_page(conn, req, c, req->stream ? cfeed_stream_page_limit(req) : req->page_size) < 0)
		return;
	if (req->cacheable && !label_asked_epoch(conn, req, c, asked_epoch))
		return;
	cfeed_stream_cursor(req);
}

/*
 * cfeed_feedapi_run
 *		Run req's job on *conn (which may be NULL: the database is down; set
 *		to NULL when the connection is lost).
 */
void
cfeed_feedapi_run(PGconn **conn, ServeReq *req)
{
	if (*conn == NULL)
	{
		if (req->job == JOB_START)
			cfeed_feedapi_error(req, 503, "unavailable", "the database is not reachable; retry");
		else
			req->retry_ms = cfeed_now_ms() + SERVE_RETRY_MS;
		return;
	}
	if (req->job == JOB_START)
		start_request(conn, req);
	else if (req->job == JOB_ROUND)
		cfeed_sse_next_round(conn, req);
	else
	{
		int			status = req->status;

		/*
		 * Mid-stream the status is sent: a lost connection makes the stream
		 * read again later (heartbeats go on meanwhile); another failure
		 * ends it.
		 */
		if (read_page(conn, req, &req->cursors[req->catch_up], cfeed_stream_page_limit(req)) < 0)
		{
			cfeed_buf_reset(&req->out);
			if (*conn == NULL)
				req->retry_ms = cfeed_now_ms() + SERVE_RETRY_MS;
			else
			{
				cfeed_serve_log(LOG_WARNING, "stream of feed \"%s\" ends: reading failed (%d)",
								req->feed.name, req->status);
				req->closing = true;
			}
			req->status = status;
		}
		else
			cfeed_stream_cursor(req);
	}
}
