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
 * A round's end must be a safe time: one before which no change will ever
 * be stamped that the stream's snapshot did not see.  A time alone is not:
 * a sweep reads the clock before it commits, so a change stamped at t can
 * become visible after a reader saw later stamps (of another sweep group).
 * Within a sweep group sweeps are serialized: a sweep takes the group's
 * lock after the sweep before it committed and became visible, and reads
 * its clock after that.  So, per sweep group of the feed's shards, as of
 * one snapshot (cfeed.stats):
 *	 - with changes pending (committed, not stamped), a sweep may be under
 *	   way and have read its clock already, but after the last visible
 *	   sweep: the group's latest stamp is safe;
 *	 - with none, any sweep under way or to come stamps changes committed
 *	   after the snapshot (those committed before it would be pending), so
 *	   it reads its clock after the snapshot: the time before the snapshot
 *	   is safe, now() on a primary; on a hot standby the primary's commit
 *	   time of the last transaction replayed, read in a statement before
 *	   (pg_last_xact_replay_timestamp(): the clock of a sweep not replayed
 *	   yet was read after that commit's), or the group's latest stamp if
 *	   that is later.
 * The round's end is the least of these.  Its limits are the shards' heads
 * in the same snapshot: every change stamped before it is at or below.
 * A group whose sweeps stall with changes pending holds the rounds of the
 * feed's other groups back until it is swept.
 *
 * Resuming: an id names positions only once its times are safe on the
 * connection that resumes (a hot standby behind the one that sent the id
 * may not have replayed them): until then the browser is told to retry.
 * Feed epochs: an id carries the epoch of its stream; a Last-Event-ID of
 * another epoch has every position passed through cfeed.resume_cursor
 * (changes a failover lost are sent again).  A stream whose rounds cross
 * into another epoch ends with its id, and the browser reconnects.  Ids in
 * the listed form of earlier gateways ("shard:number@epoch,...") are still
 * taken; a
 * stream starting from positions that no time describes (such an id, a
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
#define ROUND_WAIT_MS	2		/* a round waiting for the feed's query */
#define ROUND_WAIT_LIMIT_US	1000000 /* ... for at most this long: then its own */

/*
 * The last round query of each feed, shared by the feed's all-shards
 * streams, so that their database work grows with the feed's changes, not
 * with the number of streams (round_get).
 */
typedef struct RoundResult
{
	int			feed_id;
	long long	begun_us;		/* when its query began (0: none yet) */
	bool		busy;			/* a query is under way, begun at busy_us */
	long long	busy_us;
	long long	safe;			/* the safe end it found */
	long long	epoch;
	int			nshards;		/* the feed's shards and their heads, in */
	int		   *shards;			/* the order of the stream's cursors */
	long long  *heads;
} RoundResult;

typedef enum RoundGet
{
	ROUND_GET_OK,
	ROUND_GET_WAIT,
	ROUND_GET_FAILED
} RoundGet;

static pthread_mutex_t round_lock = PTHREAD_MUTEX_INITIALIZER;
static RoundResult **round_results;	/* under round_lock */
static int	nround_results;
static int	round_results_size;

/* The time parameter of a query: 'epoch' plus microseconds. */
#define SQL_TIME(n) \
	"('epoch'::pg_catalog.timestamptz operator(pg_catalog.+)" \
	" ($" #n "::bigint operator(pg_catalog.*) interval '1 microsecond'))"

/*
 * round_query
 *		Find a safe end for the next round of req's feed (see the file
 *		header), with every shard's head as of the same snapshot and the
 *		feed epoch read before, into *r.  False, with req's answer set, when
 *		a query fails.
 */
static bool
round_query(PGconn **conn, ServeReq *req, RoundResult *r)
{
	char		feed_text[16];
	char		replayed[24];
	const char *params[2] = {feed_text, NULL};
	PGresult   *res;
	int			n;
	int			i;
	int			g;
	struct
	{
		int			group;
		long long	last;		/* the latest stamp of its shards */
		bool		pending;	/* changes of its shards wait for a stamp */
	}		   *groups;
	long long	idle = SERVE_ROUND_FIRST;	/* before the snapshot */
	int			ngroups = 0;

	snprintf(feed_text, sizeof(feed_text), "%d", req->feed.feed_id);
	res = PQexec(*conn, cfeed_serve_epochs ?
				 "select cfeed.epoch(), (extract(epoch from pg_catalog.pg_last_xact_replay_timestamp())"
				 " * 1000000)::bigint" :
				 "select 0, (extract(epoch from pg_catalog.pg_last_xact_replay_timestamp())"
				 " * 1000000)::bigint");
	if (!cfeed_result_ok(res, PGRES_TUPLES_OK) || PQntuples(res) != 1)
	{
		cfeed_feed_db_error(conn, req, res);
		return false;
	}
	r->epoch = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
	if (!PQgetisnull(res, 0, 1))
	{
		snprintf(replayed, sizeof(replayed), "%s", PQgetvalue(res, 0, 1));
		params[1] = replayed;
	}
	PQclear(res);

	res = PQexecParams(*conn,
					   "select s.shard, s.sweep_group, s.head,"
					   " (extract(epoch from s.last_sweep_time) * 1000000)::bigint, s.pending > 0,"
					   " (extract(epoch from case when pg_catalog.pg_is_in_recovery() then "
					   SQL_TIME(2) " else pg_catalog.now() end) * 1000000)::bigint"
					   " from cfeed.stats s where s.feed_id = $1::int and s.shard <= 32767"
					   " order by s.shard",
					   2, NULL, params, NULL, NULL, 0);
	if (!cfeed_result_ok(res, PGRES_TUPLES_OK))
	{
		cfeed_feed_db_error(conn, req, res);
		return false;
	}
	n = PQntuples(res);
	r->nshards = n;
	r->shards = cfeed_serve_alloc(sizeof(int) * (n > 0 ? n : 1));
	r->heads = cfeed_serve_alloc(sizeof(long long) * (n > 0 ? n : 1));
	groups = cfeed_serve_alloc(sizeof(*groups) * (n > 0 ? n : 1));
	for (i = 0; i < n; i++)
	{
		int			group = atoi(PQgetvalue(res, i, 1));
		long long	last = PQgetisnull(res, i, 3) ? SERVE_ROUND_FIRST :
			strtoll(PQgetvalue(res, i, 3), NULL, 10);

		r->shards[i] = atoi(PQgetvalue(res, i, 0));
		r->heads[i] = strtoll(PQgetvalue(res, i, 2), NULL, 10);
		if (!PQgetisnull(res, i, 5))
			idle = strtoll(PQgetvalue(res, i, 5), NULL, 10);
		for (g = 0; g < ngroups && groups[g].group != group; g++)
			;
		if (g == ngroups)
		{
			groups[ngroups].group = group;
			groups[ngroups].last = SERVE_ROUND_FIRST;
			groups[ngroups++].pending = false;
		}
		if (last > groups[g].last)
			groups[g].last = last;
		if (strcmp(PQgetvalue(res, i, 4), "t") == 0)
			groups[g].pending = true;
	}
	PQclear(res);
	r->safe = n > 0 ? LLONG_MAX : SERVE_ROUND_FIRST;
	for (g = 0; g < ngroups; g++)
	{
		long long	t = groups[g].last;

		if (!groups[g].pending && idle > t)
			t = idle;
		if (t < r->safe)
			r->safe = t;
	}
	free(groups);
	return true;
}

/*
 * round_apply
 *		Take a round query's result for req: the cursors' limits (the heads)
 *		and the safe end and epoch.  A stream whose feed's shards are no
 *		longer those it follows ends.
 */
static void
round_apply(ServeReq *req, const RoundResult *r, long long *safe, long long *epoch)
{
	bool		same = r->nshards == req->ncursors;

	for (int i = 0; same && i < r->nshards; i++)
		same = r->shards[i] == req->cursors[i].shard;
	if (!same)
	{
		req->closing = true;	/* the shards changed: the stream ends */
		*safe = SERVE_ROUND_FIRST;
		*epoch = r->epoch;
		return;
	}
	for (int i = 0; i < r->nshards; i++)
		req->cursors[i].limit = r->heads[i];
	*safe = r->safe;
	*epoch = r->epoch;
}

/*
 * round_result
 *		The shared result of feed_id's round queries, made when missing
 *		(round_lock held).
 */
static RoundResult *
round_result(int feed_id)
{
	for (int i = 0; i < nround_results; i++)
		if (round_results[i]->feed_id == feed_id)
			return round_results[i];
	if (nround_results == round_results_size)
	{
		round_results_size = round_results_size > 0 ? round_results_size * 2 : 8;
		round_results = realloc(round_results, sizeof(RoundResult *) * round_results_size);
		if (round_results == NULL)
			cfeed_serve_oom();
	}
	round_results[nround_results] = cfeed_serve_alloc(sizeof(RoundResult));
	memset(round_results[nround_results], 0, sizeof(RoundResult));
	round_results[nround_results]->feed_id = feed_id;
	return round_results[nround_results++];
}

/*
 * now_us
 *		The monotonic clock in microseconds: round queries are ordered by
 *		when they began, finer than milliseconds so that two rarely tie.
 */
static long long
now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long) ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/*
 * cfeed_sse_ask_round
 *		An all-shards stream asks for its next round (the pool then runs
 *		cfeed_sse_next_round): for its shards' new changes, any query begun
 *		from now on will do; to retry a round that found no later end, any
 *		query begun after the one that found none; waiting for the feed's
 *		query under way, the ask stands as it was.
 */
void
cfeed_sse_ask_round(ServeReq *req)
{
	if (req->round_waiting)
		return;
	req->round_asked_us = req->round_retrying ? req->round_seen_us + 1 : now_us();
}

/*
 * round_get
 *		The safe end of req's next round and the epoch, with the cursors'
 *		limits set: from the feed's shared result when its query began at or
 *		after asked_us (the stream's reason to ask is older, so the query saw
 *		it), else from a query of its own, which becomes the shared result
 *		unless a later one is there.  With may_wait, a stream that finds such
 *		a query under way, for less than ROUND_WAIT_LIMIT_US, waits for it
 *		instead: ROUND_GET_WAIT, to ask again in ROUND_WAIT_MS.
 *		ROUND_GET_FAILED, with req's answer set, when a query fails.  Sets
 *		req->round_seen_us to when the result's query began.
 */
static RoundGet
round_get(PGconn **conn, ServeReq *req, long long asked_us, bool may_wait,
		  long long *safe, long long *epoch)
{
	RoundResult *shared;
	RoundResult mine;
	bool		querying;
	bool		ok;

	pthread_mutex_lock(&round_lock);
	shared = round_result(req->feed.feed_id);
	if (shared->begun_us > 0 && shared->begun_us >= asked_us)
	{
		round_apply(req, shared, safe, epoch);
		req->round_seen_us = shared->begun_us;
		pthread_mutex_unlock(&round_lock);
		return ROUND_GET_OK;
	}
	if (may_wait && shared->busy && shared->busy_us >= asked_us &&
		now_us() - shared->busy_us < ROUND_WAIT_LIMIT_US)
	{
		pthread_mutex_unlock(&round_lock);
		return ROUND_GET_WAIT;
	}
	querying = !shared->busy;
	if (querying)
	{
		shared->busy = true;
		shared->busy_us = now_us();
	}
	pthread_mutex_unlock(&round_lock);

	memset(&mine, 0, sizeof(mine));
	mine.feed_id = req->feed.feed_id;
	mine.begun_us = now_us();
	ok = round_query(conn, req, &mine);

	pthread_mutex_lock(&round_lock);
	shared = round_result(req->feed.feed_id);
	if (querying)
		shared->busy = false;
	if (ok)
	{
		round_apply(req, &mine, safe, epoch);
		req->round_seen_us = mine.begun_us;
		if (mine.begun_us > shared->begun_us)
		{
			RoundResult old = *shared;

			*shared = mine;
			shared->busy = old.busy;
			shared->busy_us = old.busy_us;
			mine.shards = old.shards;
			mine.heads = old.heads;
		}
	}
	pthread_mutex_unlock(&round_lock);
	free(mine.shards);
	free(mine.heads);
	return ok ? ROUND_GET_OK : ROUND_GET_FAILED;
}

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
	const char *params[6] = {feed_text, NULL, NULL, NULL, NULL, NULL};
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
	res = PQexecParams(*conn,
					   "select s.shard, p.n, case when p.n is null or $6::bigint is null then p.n"
					   " else cfeed.resume_cursor($1::int, s.shard, p.n, $6::bigint) end"
					   " from cfeed.shard s cross join lateral (select case"
					   "  when s.shard = $4::int then $5::bigint"
					   "  when s.shard < $4::int then greatest(cfeed.cursor_at($1::int, s.shard, "
					   SQL_TIME(3) "), s.start_sequence_number)"
					   "  when $2::bigint is not null then greatest(cfeed.cursor_at($1::int, s.shard, "
					   SQL_TIME(2) "), s.start_sequence_number)"
					   "  end as n) p"
					   " where s.feed_id = $1::int and s.shard <= 32767 order by s.shard",
					   6, NULL, params, NULL, NULL, 0);
	if (!cfeed_result_ok(res, PGRES_TUPLES_OK))
	{
		cfeed_feed_db_error(conn, req, res);
		return false;
	}
	if (PQntuples(res) != req->ncursors)
	{
		PQclear(res);
		cfeed_feedapi_error(req, 503, "unavailable", "the feed's shards changed; retry");
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
	if (round_get(conn, req, now_us(), false, &safe, &epoch) != ROUND_GET_OK)
		return false;
	req->round_epoch = epoch;
	req->round_query_epoch = epoch;
	req->round_lo = SERVE_ROUND_FIRST;
	if (id->set)
	{
		long long	needed = id->mid ? id->hi : id->lo;

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
	char		feed_text[16];
	char		epoch_text[24];
	ServeBuf	shards = {0};
	ServeBuf	numbers = {0};
	const char *params[4] = {feed_text, NULL, NULL, epoch_text};
	PGresult   *res;
	bool		kept;

	snprintf(feed_text, sizeof(feed_text), "%d", req->feed.feed_id);
	snprintf(epoch_text, sizeof(epoch_text), "%lld", req->round_epoch);
	cfeed_buf_append(&shards, "{", 1);
	cfeed_buf_append(&numbers, "{", 1);
	for (int i = 0; i < req->ncursors; i++)
	{
		const ServeCursor *c = &req->cursors[i];

		if (!c->known)
			continue;
		cfeed_buf_printf(&shards, "%s%d", shards.len > 1 ? "," : "", c->shard);
		cfeed_buf_printf(&numbers, "%s%lld", numbers.len > 1 ? "," : "", c->number);
	}
	cfeed_buf_append(&shards, "}", 1);
	cfeed_buf_append(&numbers, "}", 1);
	params[1] = shards.data;
	params[2] = numbers.data;
	res = PQexecParams(*conn,
					   "select count(*) = 0 from rows from (pg_catalog.unnest($2::int[]),"
					   " pg_catalog.unnest($3::bigint[])) u(shard, n)"
					   " where cfeed.resume_cursor($1::int, u.shard, u.n, $4::bigint) < u.n",
					   4, NULL, params, NULL, NULL, 0);
	free(shards.data);
	free(numbers.data);
	if (!cfeed_result_ok(res, PGRES_TUPLES_OK) || PQntuples(res) != 1)
	{
		int			status = req->status;

		cfeed_feed_db_error(conn, req, res);
		cfeed_buf_reset(&req->out);
		req->status = status;
		return false;
	}
	kept = strcmp(PQgetvalue(res, 0, 0), "t") == 0;
	PQclear(res);
	if (!kept)
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
 *		ROUND_WAIT_MS when the feed's round query is under way for another
 *		stream: round_get).
 *		A stream whose feed epoch moved ends (see the file header).
 */
void
cfeed_sse_next_round(PGconn **conn, ServeReq *req)
{
	long long	safe;
	long long	epoch;
	int			status = req->status;
	RoundGet	got;

	got = round_get(conn, req, req->round_asked_us, true, &safe, &epoch);
	req->round_waiting = (got == ROUND_GET_WAIT);
	req->round_retrying = false;
	if (got == ROUND_GET_WAIT)
	{
		req->retry_ms = cfeed_now_ms() + ROUND_WAIT_MS;
		return;
	}
	if (got == ROUND_GET_FAILED)
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
