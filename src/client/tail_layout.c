/*
 * src/client/tail_layout.c
 *		`cfeed tail`: the feed's shards and how they follow each other.
 *
 * A resharded feed (cfeed.reshard) has closed shards and their children:
 * a key's changes are on the parent up to the split and on one of its
 * children after it.  The run follows the feed's shards (or, with --shard,
 * that shard and its descendants); a child is read only once its parent
 * is *done*: ended (closed, nothing unstamped left: its head can never
 * grow) and printed to that head (is_done).  So every key's changes are
 * printed in order, each once.  A shard that is done is no longer read.
 *
 * The layout (parent, closed, ended and head of every shard) is loaded at
 * the start and looked at again: after every round of reads that read a
 * closed shard (to see it end and go on with its children); before the
 * round of reads every --wait-ms and on every new connection (to see a
 * split made since: shards created during the run are followed from their
 * start); and in group mode whenever cfeed.acquire hands out a shard the
 * run does not know yet (the group decides there who reads what, and
 * when).
 * A cfeed version without resharding has no parent, closed and ended:
 * every shard is then an open, original one.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tail.h"

/* The layout query's columns. */
enum
{
	COL_SHARD,
	COL_START,
	COL_CHANNEL,
	COL_PARENT,
	COL_CLOSED,
	COL_ENDED,
	COL_HEAD
};

/*
 * query_layout
 *		The feed's shards in ascending order with the layout query's
 *		columns.  to_jsonb: start_sequence_number, parent, closed and ended
 *		are not in every cfeed version.
 */
static PGresult *
query_layout(Tail *t)
{
	const char *params[1] = {t->feed_id_text};

	return cfeed_tail_exec_params(t,
								  "select s.shard, (j operator(pg_catalog.->>) 'start_sequence_number')::bigint,"
								  " cfeed.channel(s.feed_id, s.shard),"
								  " (j operator(pg_catalog.->>) 'parent')::int,"
								  " coalesce((j operator(pg_catalog.->>) 'closed')::bool, false),"
								  " coalesce((j operator(pg_catalog.->>) 'ended')::bool, false),"
								  " s.last_change_sequence_number"
								  " from cfeed.shard s cross join lateral pg_catalog.to_jsonb(s) j"
								  " where s.feed_id = $1::int order by s.shard",
								  1, params);
}

/*
 * in_scope
 *		Whether the run follows a shard with this number and parent (-1:
 *		none): every shard, or --shard's and, when changes are followed,
 *		its descendants.  Parents are numbered below their children, so a
 *		parent in scope has been added before the child is asked about.
 */
static bool
in_scope(Tail *t, int shard, int parent)
{
	if (t->only_shard < 0 || shard == t->only_shard)
		return true;
	return !t->dead_letters && parent >= 0 && cfeed_tail_find_shard(t, parent) != NULL;
}

/*
 * add_shard
 *		Append a followed shard (row r of the layout) to t->shards, which
 *		may move.  Returns it, or NULL when out of memory.
 */
static TailShard *
add_shard(Tail *t, const PGresult *res, int r)
{
	TailShard  *shards;
	TailShard  *s;

	shards = realloc(t->shards, (t->nshards + 1) * sizeof(TailShard));
	if (shards == NULL)
		return NULL;
	t->shards = shards;
	s = &t->shards[t->nshards];
	memset(s, 0, sizeof(*s));
	s->shard = atoi(PQgetvalue(res, r, COL_SHARD));
	s->channel = strdup(PQgetvalue(res, r, COL_CHANNEL));
	if (s->channel == NULL)
		return NULL;
	s->start_known = !PQgetisnull(res, r, COL_START);
	if (s->start_known)
		s->start = strtoll(PQgetvalue(res, r, COL_START), NULL, 10);
	s->parent = PQgetisnull(res, r, COL_PARENT) ? -1 : atoi(PQgetvalue(res, r, COL_PARENT));
	t->nshards++;
	return s;
}

/*
 * update_shard
 *		Take row r's closed, ended and head into the shard.
 */
static void
update_shard(TailShard *s, const PGresult *res, int r)
{
	s->closed = PQgetvalue(res, r, COL_CLOSED)[0] == 't';
	s->ended = PQgetvalue(res, r, COL_ENDED)[0] == 't';
	s->head = strtoll(PQgetvalue(res, r, COL_HEAD), NULL, 10);
}

/*
 * is_root
 *		Whether the shard is read from the start of the run on: it has no
 *		parent the run follows.
 */
static bool
is_root(Tail *t, const TailShard *s)
{
	return s->parent < 0 || cfeed_tail_find_shard(t, s->parent) == NULL;
}

/*
 * cfeed_tail_load_shards
 *		Fill t->shards with the shards the run follows, their start values,
 *		LISTEN channels and layout.  Outside group mode, the shards without
 *		a followed parent are read; the others wait for it.  Exits 2 for an
 *		unknown shard or a feed without shards, 4 for one the role may not
 *		read, 1 on other errors.
 */
void
cfeed_tail_load_shards(Tail *t)
{
	PGresult   *res = query_layout(t);
	int			n;

	if (!cfeed_result_ok(res, PGRES_TUPLES_OK))
	{
		fprintf(stderr, "cfeed tail: could not list the shards of feed %d: %s",
				t->feed_id, cfeed_error_text(t->conn, res));
		exit(CFEED_EXIT_ERROR);
	}
	n = PQntuples(res);
	for (int r = 0; r < n; r++)
	{
		int			shard = atoi(PQgetvalue(res, r, COL_SHARD));
		int			parent = PQgetisnull(res, r, COL_PARENT) ? -1 : atoi(PQgetvalue(res, r, COL_PARENT));
		TailShard  *s;

		if (!in_scope(t, shard, parent))
			continue;
		s = add_shard(t, res, r);
		if (s == NULL)
		{
			fprintf(stderr, "cfeed tail: out of memory\n");
			exit(CFEED_EXIT_ERROR);
		}
		update_shard(s, res, r);
	}
	PQclear(res);
	for (int i = 0; i < t->nshards; i++)
	{
		TailShard  *s = &t->shards[i];

		s->held = t->group == NULL && is_root(t, s);
		s->dirty = s->held;
	}
	t->next_layout_ms = cfeed_now_ms() + t->wait_ms;

	if (n == 0)
	{
		/*
		 * The feed shows no shard: ask the server whether the role may read
		 * it at all (cfeed.head raises 42501 for a feed it may not read,
		 * before looking the feed up).
		 */
		const char *params[1] = {t->feed_id_text};
		const char *state;

		res = cfeed_tail_exec_params(t, "select cfeed.head($1::int, 0)", 1, params);
		state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
		if (state != NULL && strcmp(state, "42501") == 0)
		{
			fprintf(stderr, "cfeed tail: %s", cfeed_error_text(t->conn, res));
			exit(CFEED_EXIT_DENIED);
		}
		PQclear(res);
	}
	if (t->nshards == 0)
	{
		if (t->only_shard >= 0)
			fprintf(stderr, "cfeed tail: shard %d of feed %d does not exist\n",
					t->only_shard, t->feed_id);
		else
			fprintf(stderr, "cfeed tail: feed %d has no shards\n", t->feed_id);
		exit(CFEED_EXIT_USAGE);
	}
}

/*
 * is_done
 *		Whether a shard that is read is done, asked after a round of reads
 *		(a shard that is not dirty has been read since its last wake-up):
 *		it is ended, and either printed to the head it ended at (with no
 *		cursor: nothing was ever stamped on it), or read once more since it
 *		was seen ended (its head may be a number whose change was deleted).
 */
static bool
is_done(const TailShard *s)
{
	if (!s->ended || s->dirty)
		return false;
	if (s->read_ended)
		return true;
	if (s->cursor_known)
		return s->cursor >= s->head;
	return s->start_known && s->head <= s->start;
}

/*
 * follow_children
 *		Outside group mode: stop reading the shards that are done, and read
 *		the children of done shards from their position (their start, for a
 *		shard created during the run).  An ended shard not yet read to its
 *		head is read again.  Sets *more when a shard is due for a read.
 */
static void
follow_children(Tail *t, bool *more)
{
	for (int i = 0; i < t->nshards; i++)
	{
		TailShard  *s = &t->shards[i];

		if (!s->held)
			continue;
		if (is_done(s))
		{
			s->held = false;
			s->done = true;
			fprintf(stderr, "cfeed tail: shard %d of feed %d ended at %lld\n",
					s->shard, t->feed_id, s->head);
		}
		else if (s->ended && !s->dirty)
		{
			/* stamped after the last read: read it once more */
			s->read_ended = true;
			s->dirty = true;
			*more = true;
		}
	}
	for (int i = 0; i < t->nshards; i++)
	{
		TailShard  *c = &t->shards[i];
		TailShard  *p;

		if (c->held || c->done || c->parent < 0)
			continue;
		p = cfeed_tail_find_shard(t, c->parent);
		if (p == NULL || !p->done)
			continue;
		c->held = true;
		c->dirty = true;
		*more = true;
		if (c->cursor_known)
			fprintf(stderr, "cfeed tail: following shard %d of feed %d (after shard %d) after %lld\n",
					c->shard, t->feed_id, p->shard, c->cursor);
		else
			fprintf(stderr, "cfeed tail: following shard %d of feed %d (after shard %d) from the beginning\n",
					c->shard, t->feed_id, p->shard);
	}
}

/*
 * cfeed_tail_follow_layout
 *		Look at the layout again: add the shards created since (LISTEN on
 *		them, cursor at their start), note which shards ended, and outside
 *		group mode go on from done shards to their children.  Sets *more
 *		when a shard is due for a read now.
 */
TailStep
cfeed_tail_follow_layout(Tail *t, bool *more)
{
	PGresult   *res = query_layout(t);
	TailStep	step = STEP_OK;

	*more = false;
	t->layout_due = false;
	t->next_layout_ms = cfeed_now_ms() + t->wait_ms;
	if (!cfeed_result_ok(res, PGRES_TUPLES_OK))
		return cfeed_tail_fail(t, res, "looking at the feed's shards");
	for (int r = 0; r < PQntuples(res) && step == STEP_OK; r++)
	{
		int			shard = atoi(PQgetvalue(res, r, COL_SHARD));
		int			parent = PQgetisnull(res, r, COL_PARENT) ? -1 : atoi(PQgetvalue(res, r, COL_PARENT));
		TailShard  *s = cfeed_tail_find_shard(t, shard);

		if (s == NULL && in_scope(t, shard, parent))
		{
			s = add_shard(t, res, r);
			if (s == NULL)
			{
				PQclear(res);
				fprintf(stderr, "cfeed tail: out of memory\n");
				t->exit_code = CFEED_EXIT_ERROR;
				return STEP_STOP;
			}
			s->cursor_known = s->start_known;
			s->cursor = s->start;
			if (t->group == NULL && is_root(t, s))
				s->held = s->dirty = true;
			step = cfeed_tail_listen_shard(t, s);
			if (step == STEP_OK && t->epochs)
				step = cfeed_tail_resume_shard(t, s);
			*more |= s->dirty;
		}
		if (s != NULL)
			update_shard(s, res, r);
	}
	PQclear(res);
	if (step == STEP_OK && t->group == NULL)
		follow_children(t, more);
	return step;
}

/*
 * cfeed_tail_layout_due
 *		Outside group mode, before a round of reads: whether to look for a
 *		split made since the last look (on a new connection, and every
 *		--wait-ms).
 */
bool
cfeed_tail_layout_due(const Tail *t)
{
	return t->layout_due || cfeed_now_ms() >= t->next_layout_ms;
}

/*
 * cfeed_tail_reading_closed
 *		Outside group mode, after a round of reads: whether a shard that is
 *		read is closed (the layout then tells whether it is done).
 */
bool
cfeed_tail_reading_closed(const Tail *t)
{
	for (int i = 0; i < t->nshards; i++)
		if (t->shards[i].held && t->shards[i].closed)
			return true;
	return false;
}
