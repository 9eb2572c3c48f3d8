/*
 * src/client/tail_read.c
 *		`cfeed tail`: reading a shard's pages (cfeed.read_rows, or cfeed.read
 *		for a role that may not read row images) after its cursor, checking
 *		that the numbers follow it, and printing the changes as JSON lines,
 *		with what changed for a tracked table's.  The sequence rules are in
 *		tail.c's header.  A group member reads with cfeed.read_group (where
 *		the database has it): the group's dead letters are left out, so
 *		numbers may skip them.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "tail.h"

/*
 * in_sequence
 *		Whether number may follow the shard's cursor (see the file header);
 *		always true while the cursor is unknown.
 */
static bool
in_sequence(const TailShard *s, long long number)
{
	if (!s->cursor_known)
		return true;
	if (number <= s->cursor)
		return false;
	if (number == s->cursor + 1)
		return true;
	if (s->start_known && number <= s->start)
		return true;			/* sparse backfilled history */
	if (s->start_known && number == s->start + 1 && s->cursor <= s->start)
		return true;			/* first stamp after the history */
	return false;
}

/*
 * emit
 *		Print row r of a page (read_page's columns) as one JSON line and
 *		flush it: the numbers, stamped_at, and for a change with a row image
 *		tbl, op and row.  The server made every value JSON already.
 */
static TailStep
emit(Tail *t, const TailShard *s, const PGresult *res, int r)
{
	int			rc;

#define COLUMN(c) (PQgetisnull(res, r, (c)) ? "null" : PQgetvalue(res, r, (c)))
	if (PQnfields(res) > 3 && !PQgetisnull(res, r, 3))
		rc = printf("{\"feed_id\":%d,\"shard\":%d,\"change_sequence_number\":%s,"
					"\"change_id\":%s,\"stamped_at\":%s,\"tbl\":%s,\"op\":%s,\"row\":%s}\n",
					t->feed_id, s->shard, COLUMN(0), COLUMN(1), COLUMN(2),
					COLUMN(3), COLUMN(4), COLUMN(5));
	else
		rc = printf("{\"feed_id\":%d,\"shard\":%d,\"change_sequence_number\":%s,"
					"\"change_id\":%s,\"stamped_at\":%s}\n",
					t->feed_id, s->shard, COLUMN(0), COLUMN(1), COLUMN(2));
#undef COLUMN
	return cfeed_tail_printed(t, rc);
}

/*
 * cfeed_tail_printed
 *		After printing a line (rc: printf's result): flush it.  STEP_STOP
 *		when standard output failed (exit code 0 when the reader went away,
 *		1 otherwise), else STEP_OK.
 */
TailStep
cfeed_tail_printed(Tail *t, int rc)
{
	if (rc < 0 || fflush(stdout) != 0)
	{
		if (errno == EPIPE)
			t->exit_code = CFEED_EXIT_OK;	/* the reader went away */
		else
		{
			perror("cfeed tail: could not write to standard output");
			t->exit_code = CFEED_EXIT_ERROR;
		}
		return STEP_STOP;
	}
	return STEP_OK;
}

/*
 * page_limit
 *		How many changes the next page may hold (fewer near --max); 0 when
 *		the run stops instead (a signal, or --max reached), with exit code 0.
 */
static long long
page_limit(Tail *t)
{
	long long	limit = PAGE_SIZE;

	if (cfeed_interrupted || (t->max > 0 && t->printed >= t->max))
	{
		t->exit_code = CFEED_EXIT_OK;
		return 0;
	}
	if (t->max > 0 && t->max - t->printed < limit)
		limit = t->max - t->printed;
	return limit;
}

/*
 * read_page
 *		cfeed.read_rows (cfeed.read without t->rows) of at most limit changes
 *		of the shard after its cursor (from the beginning while the cursor
 *		is unknown), every column as JSON.
 */
static PGresult *
read_page(Tail *t, const TailShard *s, long long limit)
{
	char		shard_text[16];
	char		cursor_text[24];
	char		limit_text[24];
	const char *params[5] = {t->feed_id_text, shard_text, NULL, limit_text, t->group};

	snprintf(shard_text, sizeof(shard_text), "%d", s->shard);
	snprintf(limit_text, sizeof(limit_text), "%lld", limit);
	if (s->cursor_known)
	{
		snprintf(cursor_text, sizeof(cursor_text), "%lld", s->cursor);
		params[2] = cursor_text;
	}
	if (t->group_read)
		return cfeed_tail_exec_params(t, t->rows ?
									  "select g.change_sequence_number, g.change_id, pg_catalog.to_json(g.stamped_at),"
									  " pg_catalog.to_json(r.tbl::text), pg_catalog.to_json(r.op), r.\"row\""
									  " from cfeed.read_group($5, $1::int, $2::int, $3::bigint, $4::int) g"
									  " left join lateral cfeed.read_rows($1::int, $2::int,"
									  " g.change_sequence_number - 1, 1) r"
									  " on r.change_sequence_number = g.change_sequence_number"
									  " order by g.change_sequence_number" :
									  "select change_sequence_number, change_id, pg_catalog.to_json(stamped_at)"
									  " from cfeed.read_group($5, $1::int, $2::int, $3::bigint, $4::int)",
									  5, params);
	return cfeed_tail_exec_params(t, t->rows ?
								  "select change_sequence_number, change_id, pg_catalog.to_json(stamped_at),"
								  " pg_catalog.to_json(tbl::text), pg_catalog.to_json(op), \"row\""
								  " from cfeed.read_rows($1::int, $2::int, $3::bigint, $4::int)" :
								  "select change_sequence_number, change_id, pg_catalog.to_json(stamped_at)"
								  " from cfeed.read($1::int, $2::int, $3::bigint, $4::int)",
								  4, params);
}

/*
 * print_page
 *		Print the page's changes in order, moving the shard's cursor; stops
 *		at a gap (exit 3) or when standard output fails.
 */
static TailStep
print_page(Tail *t, TailShard *s, const PGresult *res)
{
	TailStep	step = STEP_OK;

	for (int r = 0; r < PQntuples(res) && step == STEP_OK; r++)
	{
		long long	number = strtoll(PQgetvalue(res, r, 0), NULL, 10);

		/* cfeed.read_group leaves dead letters out: gaps are expected */
		if (t->group_read ? s->cursor_known && number <= s->cursor : !in_sequence(s, number))
		{
			fprintf(stderr, "cfeed tail: gap in shard %d of feed %d: change_sequence_number %lld follows %lld\n"
					"Changes between them are missing (removed by retention, or a bug in cfeed).\n",
					s->shard, t->feed_id, number, s->cursor);
			t->exit_code = CFEED_EXIT_GAP;
			return STEP_STOP;
		}
		step = emit(t, s, res, r);
		if (step == STEP_OK)
		{
			s->cursor = number;
			s->cursor_known = true;
			t->printed++;
		}
	}
	return step;
}

/*
 * cfeed_tail_drain_shard
 *		Read and print the shard's pages after its cursor until a short page
 *		(then everything visible has been read); checkpoint each page in
 *		group mode.  Stops the run at --max, at a gap (exit 3) and on signals.
 */
TailStep
cfeed_tail_drain_shard(Tail *t, TailShard *s)
{
	for (;;)
	{
		long long	limit = page_limit(t);
		PGresult   *res;
		int			rows;
		TailStep	step = STEP_OK;

		if (limit == 0)
			return STEP_STOP;
		res = read_page(t, s, limit);
		if (!cfeed_result_ok(res, PGRES_TUPLES_OK))
			return cfeed_tail_fail(t, res, "reading");

		rows = PQntuples(res);
		if (cfeed_tail_epoch_moved(t, s, &step))
		{
			PQclear(res);
			if (step != STEP_OK)
				return step;
			continue;			/* read again from the resumed cursor */
		}
		step = print_page(t, s, res);
		PQclear(res);
		if (rows > 0)
		{
			t->last_activity_ms = cfeed_now_ms();
			if (t->group != NULL && s->held)
			{
				TailStep	cp = cfeed_group_checkpoint(t, s);

				if (step == STEP_OK)
					step = cp;
			}
		}
		if (step != STEP_OK)
			return step;
		if (!s->held || rows < limit)
			break;
	}
	s->dirty = false;
	return STEP_OK;
}
