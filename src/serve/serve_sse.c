/*
 * src/serve/serve_sse.c
 *		Compact ids of all-shards Server-Sent Events streams, whatever the
 *		number of shards: the stream is sent in rounds bounded by stamp
 *		times, and an id names a point in them (docs/serve.md, "Server-Sent
 *		Events").
 *
 * Rounds: a round sends, shard after shard in ascending order, each
 * shard's changes stamped before the round's end time hi, having sent in
 * the rounds before those stamped before lo.  A shard's stamps never
 * decrease with its numbers (sweeps of a sweep group are serialized, each
 * stamping at a clock time read after the one before it committed), so
 * "stamped before t" is a prefix of each shard, which cfeed.cursor_at(t)
 * gives back (backfilled history, numbers at or below the start value,
 * counts as stamped before every time).  The ids:
 *
 *	 lo@epoch				every shard sent up to its changes stamped before lo
 *							(lo is _first: nothing yet)
 *	 lo.hi.shard:n@epoch	within a round: the shards below `shard` up to hi,
 *							`shard` up to number n, the shards above up to lo
 *
 * Times are Unix microseconds of the database's clock; an id is about 70
 * bytes.  A resume computes every shard's position with cfeed.cursor_at in
 * one query.
 *
 * A round's end is a safe time, found by serve_round.c's query (shared by
 * the feed's all-shards streams), which says why it is safe.
 *
 * Resuming: an id names positions only once its times are safe on the
 * connection that resumes (a hot standby behind the one that sent the id
 * may not have replayed them): until then the browser is told to retry.
 * Feed epochs: an id carries the epoch of its stream; a Last-Event-ID of
 * another epoch has every position passed through cfeed.resume_cursor
 * (changes a failover lost are sent again).  A stream whose rounds cross
 * into another epoch ends with its id, and the browser reconnects.  Ids in
 * the listed form of earlier gateways ("shard:number@epoch,...") are still
 * taken; a stream starting from positions that no time describes (such an id, a
 * cursor=number, positions a failover rewound) lists every shard in its
 * ids until its first round ends.
 *
 * The ids are written and parsed by serve_position.c; whether an event
 * belongs in the round under way, by serve_event.c (cfeed_sse_admits).
 */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "serve.h"


#define ROUND_RETRY_MS	50		/* a round that found no later safe time */

/*
 * open_round
 *		Begin a round up to hi (the cursors' limits are set).
 */
static void
open_round(ServeReq *req, long long hi, int from_shard)
{
	req->round_open = true;
	req->round_hi = hi;
	req->round_shard = from_shard;
	req->round_last = -1;
	for (int i = 0; i < req->ncursors; i++)
		req->cursors[i].through = false;
}

/*
 * resume_positions
 *		Set every cursor from the compact id req->resume, with cursor_at of
 *		its times (see the file header), passing them through
 *		cfeed.resume_cursor when the id is of another epoch than the
 *		current one (epoch).  A position that moved back (a failover lost
 *		stamps) is not what the id's times say any more: the stream then
 *		lists every shard in its ids until its first round ends.  False,
 *		with the answer set, when the query fails.
 */
static bool
resume_positions(PGconn **conn, ServeReq *req, long long epoch)
{
	const ServeSseId *id = &req->resume;
	char		feed_text[16];
	char		lo_text[24];
	char		hi_text[24];
	char		shard_text[16];
	char		number_text[24];
	char		epoch_text[24];
	ServeBuf	shards = {0};
	ServeBuf	starts = {0};
	const char *params[8] = {feed_text, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
	PGresult   *res;

	snprintf(feed_text, sizeof(feed_text), "%d", req->feed.feed_id);
	if (id->lo != SERVE_ROUND_FIRST)
	{
		snprintf(lo_text, sizeof(lo_text), "%lld", id->lo);
		params[1] = lo_text;
	}
	if (id->mid)
	{
		snprintf(hi_text, sizeof(hi_text), "%lld", id->hi);
		snprintf(shard_text, sizeof(shard_text), "%d", id->shard);
		snprintf(number_text, sizeof(number_text), "%lld", id->number);
		params[2] = hi_text;
		params[3] = shard_text;
		params[4] = number_text;
	}
	if (cfeed_serve_epochs && id->has_epoch && id->epoch != epoch)
	{
		snprintf(epoch_text, sizeof(epoch_text), "%lld", id->epoch);
		params[5] = epoch_text;
	}
	for (int i = 0; i < req->ncursors; i++)
	{
		cfeed_buf_printf(&shards, "%s%d", i > 0 ? "," : "{", req->cursors[i].shard);
		cfeed_buf_printf(&starts, "%s%lld", i > 0 ? "," : "{", req->cursors[i].start);
	}
	cfeed_buf_append(&shards, "}", 1);
	cfeed_buf_append(&starts, "}", 1);
	params[6] = shards.data;
	params[7] = starts.data;
	res = PQexecParams(*conn,
					   "select s.shard, p.n, case when p.n is null or $6::bigint is null then p.n"
					   " else cfeed.resume_cursor($1::int, s.shard, p.n, $6::bigint) end"
					   " from rows from (pg_catalog.unnest($7::int[]), pg_catalog.unnest($8::bigint[]))"
					   " with ordinality s(shard, start, ord)"
					   " cross join lateral (select case"
					   "  when s.shard = $4::int then $5::bigint"
					   "  when s.shard < $4::int then greatest(cfeed.cursor_at($1::int, s.shard, "
					   SQL_TIME(3) "), s.start)"
					   "  when $2::bigint is not null then greatest(cfeed.cursor_at($1::int, s.shard, "
					   SQL_TIME(2) "), s.start)"
					   "  end as n) p"
					   " order by s.ord",
					   8, NULL, params, NULL, NULL, 0);
	free(shards.data);
	free(starts.data);
	if (!cfeed_result_ok(res, PGRES_TUPLES_OK) || PQntuples(res) != req->ncursors)
	{
		cfeed_feed_db_error(conn, req, res);
		return false;
	}
	for (int i = 0; i < req->ncursors; i++)
	{
		ServeCursor *c = &req->cursors[i];

		c->epoch = epoch;
		c->known = !PQgetisnull(res, i, 2);
		if (!c->known)
			continue;
		c->number = strtoll(PQgetvalue(res, i, 2), NULL, 10);
		if (c->number != strtoll(PQgetvalue(res, i, 1), NULL, 10))
			req->listed_ids = true;
	}
	PQclear(res);
	if (req->listed_ids)
		cfeed_serve_log(LOG_WARNING, "feed \"%s\": a failover lost stamps after a Last-Event-ID's "
						"positions; the stream resumes before them (changes are sent again)",
						req->feed.name);
	return true;
}

/*
 * cfeed_sse_start
 *		Position an all-shards SSE stream (req->cursors are set from the
 *		cursor argument, or from a listed Last-Event-ID) and begin its first
 *		round.  False, with the answer set, when a query fails, or with 503
 *		(the browser is told to retry) when the id's times are not safe yet
 *		on this connection.
 */
bool
cfeed_sse_start(PGconn **conn, ServeReq *req)
{
	const ServeSseId *id = &req->resume;
	long long	safe;
	long long	epoch;
	int			from = 0;

	req->rounds = true;
	for (int i = 0; i < req->ncursors; i++)
		req->cursors[i].start = req->feed.starts[i];
	if (cfeed_round_get(conn, req, cfeed_now_us(), false, &safe, &epoch) != SERVE_ROUND_OK)
		return false;
	req->round_epoch = epoch;
	req->round_query_epoch = epoch;
	req->round_lo = SERVE_ROUND_FIRST;
	if (id->set)
	{
		long long	needed = id->mid ? id->hi : id->lo;

		if (safe < needed && needed - safe > SERVE_AHEAD_LIMIT_US)
		{
			/* no database this feed's stamps came from is that far behind */
			cfeed_feedapi_error(req, 400, "bad_request",
								"a Last-Event-ID this feed did not send (its time is ahead of the database's)");
			return false;
		}
		if (safe < needed)
		{
			cfeed_feedapi_error(req, 503, "unavailable", "the database is behind this Last-Event-ID; retry");
			req->retry_why = "the database has not reached its Last-Event-ID";
			return false;
		}
		if (!resume_positions(conn, req, epoch))
			return false;
		req->round_lo = id->lo;
		if (id->mid)
		{
			for (from = 0; req->cursors[from].shard != id->shard; from++)
				;
			safe = id->hi;		/* the round goes on to its end */
		}
	}
	else if (strcmp(req->cursor_arg, "_last") == 0)
	{
		req->resume.lo = safe;
		if (!resume_positions(conn, req, epoch))
			return false;
		req->round_lo = safe;
	}
	else if (strcmp(req->cursor_arg, "_first") != 0 && !req->listed_ids)
		req->listed_ids = true; /* cursor=number: the same on every shard */
	if (safe > req->round_lo || id->mid)
		open_round(req, safe, from);
	if (id->mid)
		req->round_last = from;
	return true;
}

/*
 * keep_positions
 *		Between rounds, when the feed epoch moved (at the first stamp after
 *		a restart, or a failover): whether every position of req is still
 *		where it was in the new epoch (cfeed.resume_cursor), so that its
 *		id holds there; the stream then takes the new epoch.  False when a
 *		failover lost stamps of a position (the stream ends with its id and
 *		the browser resumes, see the file header), or a query failed.
 */
static bool
keep_positions(PGconn **conn, ServeReq *req, long long epoch)
{
	char		epoch_text[24];
	int			status = req->status;
	long long	moved;

	snprintf(epoch_text, sizeof(epoch_text), "%lld", req->round_epoch);
	moved = cfeed_feed_count_positions(conn, req, req->cursors, req->ncursors,
									   "cfeed.resume_cursor($1::int, u.shard, u.n, $4::bigint) < u.n",
									   epoch_text);
	if (moved < 0)
	{
		/* mid-stream: the failure is not the answer (the stream ends) */
		cfeed_buf_reset(&req->out);
		req->status = status;
		return false;
	}
	if (moved > 0)
		return false;
	req->round_epoch = epoch;
	for (int i = 0; i < req->ncursors; i++)
		req->cursors[i].epoch = epoch;
	return true;
}

/*
 * cfeed_sse_next_round
 *		The JOB_ROUND of a stream between rounds: begin the next one, or
 *		try again in ROUND_RETRY_MS when no later safe time is found yet (in
 *		SERVE_ROUND_WAIT_MS when the feed's round query is under way for another
 *		stream: round_get).
 *		A stream whose feed epoch moved ends (see the file header).
 */
void
cfeed_sse_next_round(PGconn **conn, ServeReq *req)
{
	long long	safe;
	long long	epoch;
	int			status = req->status;
	ServeRoundGet got;

	got = cfeed_round_get(conn, req, req->round_asked_us, true, &safe, &epoch);
	req->round_waiting = (got == SERVE_ROUND_WAIT);
	req->round_retrying = false;
	if (got == SERVE_ROUND_WAIT)
	{
		req->retry_ms = cfeed_now_ms() + SERVE_ROUND_WAIT_MS;
		return;
	}
	if (got == SERVE_ROUND_FAILED)
	{
		cfeed_buf_reset(&req->out);
		req->status = status;
		if (*conn == NULL)
			req->retry_ms = cfeed_now_ms() + SERVE_RETRY_MS;
		else
			req->closing = true;
		return;
	}
	req->round_query_epoch = epoch;
	if (epoch != req->round_epoch && !keep_positions(conn, req, epoch))
	{
		if (*conn == NULL)
			req->retry_ms = cfeed_now_ms() + SERVE_RETRY_MS;
		else
			req->closing = true;
	}
	else if (safe > req->round_lo)
		open_round(req, safe, 0);
	else
	{
		req->retry_ms = cfeed_now_ms() + ROUND_RETRY_MS;
		req->round_retrying = true;
	}
}

/*
 * cfeed_sse_round_done
 *		End the round under way: the stream has sent every change stamped
 *		before its end.  True when that appended an id-only event (the ids
 *		stop listing every shard).
 */
bool
cfeed_sse_round_done(ServeReq *req)
{
	bool		listed = req->listed_ids;

	req->round_open = false;
	req->round_lo = req->round_hi;
	req->round_last = -1;
	req->listed_ids = false;
	if (listed)
		cfeed_stream_id_event(req);
	return listed;
}
