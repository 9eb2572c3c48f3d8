/*
 * src/serve/serve_round.c
 *		The safe end of an all-shards SSE stream's next round (serve_sse.c),
 *		found by one query per feed that the feed's streams share.
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
 * Layout (serve_layout.c): a round covers the shards the feed lists; the
 * children not listed yet (their parents have not ended) count for the
 * safe end all the same (their sweep groups), and a round never ends past
 * the first stamp of one of them.  So a stream that takes a child in once
 * it is listed (its id's times place it) has skipped none of its changes.
 *
 * Sharing: the database work of rounds must grow with the feed's changes,
 * not with the number of its streams.  So the last query's result is kept
 * per feed: a stream that asks for a round takes a result whose query began
 * after it asked (for its shards' new changes: after it saw them; to retry a
 * round that found no later end: after the query that found none), or
 * waits for such a query under way, for at most ROUND_WAIT_LIMIT_US; else it
 * runs the query itself, and its result is kept unless a later one is
 * (queries are ordered by when they began, on the monotonic microsecond
 * clock, so that two rarely tie).
 *
 * Locking: round_lock protects the kept results; the queries run outside
 * it, on the stream's connection.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve.h"

#define ROUND_WAIT_LIMIT_US	1000000 /* the longest wait for a query under way */

/* The stamp of a child shard's first change (Unix microseconds), or null. */
#define FIRST_STAMP_SQL \
	"case when s.parent is not null then (select" \
	" (extract(epoch from x.stamped_at) * 1000000)::bigint from cfeed.change x" \
	" where x.feed_id = t.feed_id and x.shard = t.shard" \
	" and x.change_sequence_number is not null" \
	" order by x.change_sequence_number limit 1) end"

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

static pthread_mutex_t round_lock = PTHREAD_MUTEX_INITIALIZER;
static RoundResult **round_results;	/* under round_lock */
static int	nround_results;
static int	round_results_size;

/*
 * round_query
 *		Find a safe end for the next round of req's feed (see the file
 *		header), with every shard's head and the feed epoch as of the same
 *		snapshot (SERVE_EPOCH_COLUMN), into *r.  False, with req's answer
 *		set, when a query fails.
 *
 *		Each shard's parent and end are looked up beside its row of
 *		cfeed.stats (a lateral subquery kept apart with OFFSET 0: one probe
 *		of cfeed.shard per shard).  Joined to cfeed.stats as a view, a
 *		planner that still took the feed's shards for one (a new feed, not
 *		yet analyzed) computed every head of cfeed.shard for each shard:
 *		3 s a round for 1,000 shards (103_serve_sse_ids), 17 ms now.
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
	long long	hidden = LLONG_MAX; /* the first stamp of a shard not listed */
	int			ngroups = 0;
	char		sql[1536];
	char		token[40];
	int		   *shards;
	int		   *parents;
	bool	   *ended;
	bool	   *listed;

	snprintf(feed_text, sizeof(feed_text), "%d", req->feed.feed_id);
	res = PQexec(*conn, "select (extract(epoch from pg_catalog.pg_last_xact_replay_timestamp())"
				 " * 1000000)::bigint");
	if (!cfeed_result_ok(res, PGRES_TUPLES_OK) || PQntuples(res) != 1)
	{
		cfeed_feed_db_error(conn, req, res);
		return false;
	}
	if (!PQgetisnull(res, 0, 0))
	{
		snprintf(replayed, sizeof(replayed), "%s", PQgetvalue(res, 0, 0));
		params[1] = replayed;
	}
	PQclear(res);

	snprintf(sql, sizeof(sql),
			 "select t.shard, t.sweep_group, t.head,"
			 " (extract(epoch from t.last_sweep_time) * 1000000)::bigint, t.pending > 0,"
			 " (extract(epoch from case when pg_catalog.pg_is_in_recovery() then "
			 SQL_TIME(2) " else pg_catalog.now() end) * 1000000)::bigint, s.parent, s.ended, %s, %s"
			 " from cfeed.stats t cross join lateral (select %s from cfeed.shard s"
			 " where s.feed_id = t.feed_id and s.shard = t.shard offset 0) s(parent, ended)"
			 " where t.feed_id = $1::int and t.shard <= 32767 order by t.shard",
			 cfeed_serve_layouts ? FIRST_STAMP_SQL : "null::bigint", SERVE_EPOCH_COLUMN,
			 SERVE_LAYOUT_COLUMNS);
	res = PQexecParams(*conn, sql, 2, NULL, params, NULL, NULL, 0);
	if (!cfeed_result_ok(res, PGRES_TUPLES_OK))
	{
		cfeed_feed_db_error(conn, req, res);
		return false;
	}
	n = PQntuples(res);
	r->epoch = n > 0 ? strtoll(PQgetvalue(res, 0, 9), NULL, 10) : 0;
	shards = cfeed_serve_alloc(sizeof(int) * (n > 0 ? n : 1));
	parents = cfeed_serve_alloc(sizeof(int) * (n > 0 ? n : 1));
	ended = cfeed_serve_alloc(sizeof(bool) * (n > 0 ? n : 1));
	listed = cfeed_serve_alloc(sizeof(bool) * (n > 0 ? n : 1));
	for (i = 0; i < n; i++)
	{
		shards[i] = atoi(PQgetvalue(res, i, 0));
		parents[i] = PQgetisnull(res, i, 6) ? -1 : atoi(PQgetvalue(res, i, 6));
		ended[i] = strcmp(PQgetvalue(res, i, 7), "t") == 0;
	}
	(void) cfeed_layout_list(req->feed.feed_id, n, shards, parents, ended, listed,
							 token, sizeof(token));
	r->nshards = 0;
	r->shards = cfeed_serve_alloc(sizeof(int) * (n > 0 ? n : 1));
	r->heads = cfeed_serve_alloc(sizeof(long long) * (n > 0 ? n : 1));
	groups = cfeed_serve_alloc(sizeof(*groups) * (n > 0 ? n : 1));
	for (i = 0; i < n; i++)
	{
		int			group = atoi(PQgetvalue(res, i, 1));
		long long	last = PQgetisnull(res, i, 3) ? SERVE_ROUND_FIRST :
			strtoll(PQgetvalue(res, i, 3), NULL, 10);

		if (listed[i])
		{
			r->shards[r->nshards] = shards[i];
			r->heads[r->nshards++] = strtoll(PQgetvalue(res, i, 2), NULL, 10);
		}
		else if (!PQgetisnull(res, i, 8))
		{
			long long	first = strtoll(PQgetvalue(res, i, 8), NULL, 10);

			if (first < hidden)
				hidden = first;
		}
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
	free(shards);
	free(parents);
	free(ended);
	free(listed);
	r->safe = n > 0 ? LLONG_MAX : SERVE_ROUND_FIRST;
	for (g = 0; g < ngroups; g++)
	{
		long long	t = groups[g].last;

		if (!groups[g].pending && idle > t)
			t = idle;
		if (t < r->safe)
			r->safe = t;
	}
	if (hidden < r->safe)
		r->safe = hidden;
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
	req->round_asked_us = req->round_retrying ? req->round_seen_us + 1 : cfeed_now_us();
}

/*
 * cfeed_round_get
 *		The safe end of req's next round and the epoch, with the cursors'
 *		limits set: from the feed's shared result when its query began at or
 *		after asked_us (the stream's reason to ask is older, so the query saw
 *		it), else from a query of its own, which becomes the shared result
 *		unless a later one is there.  With may_wait, a stream that finds such
 *		a query under way, for less than ROUND_WAIT_LIMIT_US, waits for it
 *		instead: SERVE_ROUND_WAIT, to ask again in SERVE_ROUND_WAIT_MS.
 *		SERVE_ROUND_FAILED, with req's answer set, when a query fails.  Sets
 *		req->round_seen_us to when the result's query began.
 */
ServeRoundGet
cfeed_round_get(PGconn **conn, ServeReq *req, long long asked_us, bool may_wait,
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
		return SERVE_ROUND_OK;
	}
	if (may_wait && shared->busy && shared->busy_us >= asked_us &&
		cfeed_now_us() - shared->busy_us < ROUND_WAIT_LIMIT_US)
	{
		pthread_mutex_unlock(&round_lock);
		return SERVE_ROUND_WAIT;
	}
	querying = !shared->busy;
	if (querying)
	{
		shared->busy = true;
		shared->busy_us = cfeed_now_us();
	}
	pthread_mutex_unlock(&round_lock);

	memset(&mine, 0, sizeof(mine));
	mine.feed_id = req->feed.feed_id;
	mine.begun_us = cfeed_now_us();
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
	return ok ? SERVE_ROUND_OK : SERVE_ROUND_FAILED;
}

