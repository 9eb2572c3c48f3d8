/*
 * src/client/group.c
 *		`cfeed tail --group G --owner O`: membership of a consumer group
 *		through cfeed.acquire, cfeed.checkpoint and cfeed.release.
 *
 * The member follows exactly the shards cfeed.acquire returns (which hands
 * a child of a split shard out only once the group has consumed the
 * parent); one the run does not know yet (created by a split since) is
 * looked up first (tail_layout.c).  A shard newly held, or held at a new
 * epoch (someone else owned it in between), restarts from the lease's
 * cursor; a shard still held at the same epoch keeps the member's own
 * cursor.  Every page read is followed by a checkpoint with the
 * lease's epoch; a refusal (55000) drops the shard and renews at once.
 * Leases are renewed every ttl/3 and released at a clean exit.  Delivery is
 * at least once: a change printed just before the lease moved on is printed
 * again by the next owner.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tail.h"

/*
 * cfeed_group_check_api
 *		Exit 2 unless this cfeed version has consumer groups (cfeed.acquire
 *		with the signature in docs/reference.md).
 */
void
cfeed_group_check_api(Tail *t)
{
	PGresult   *res;
	bool		available;

	res = cfeed_tail_exec_params(t,
								 "select pg_catalog.to_regprocedure("
								 "'cfeed.acquire(text, integer, text, integer, timestamp with time zone)')"
								 " is not null",
								 0, NULL);
	if (!cfeed_result_ok(res, PGRES_TUPLES_OK))
	{
		fprintf(stderr, "cfeed tail: %s", cfeed_error_text(t->conn, res));
		exit(CFEED_EXIT_ERROR);
	}
	available = strcmp(PQgetvalue(res, 0, 0), "t") == 0;
	PQclear(res);
	if (!available)
	{
		fprintf(stderr, "cfeed tail: consumer groups are not available in this cfeed version\n"
				"Update the extension (ALTER EXTENSION cfeed UPDATE) or omit --group and --owner.\n");
		exit(CFEED_EXIT_USAGE);
	}

	/*
	 * A member reads with cfeed.read_group: the group's dead letters left
	 * out (also after a seek back), a change another member is retrying
	 * only once its backoff has passed.  In a database without it (not yet
	 * updated), with cfeed.read.
	 */
	res = cfeed_tail_exec_params(t,
								 "select pg_catalog.to_regprocedure("
								 "'cfeed.read_group(text, integer, integer, bigint, integer)')"
								 " is not null",
								 0, NULL);
	if (!cfeed_result_ok(res, PGRES_TUPLES_OK))
	{
		fprintf(stderr, "cfeed tail: %s", cfeed_error_text(t->conn, res));
		exit(CFEED_EXIT_ERROR);
	}
	t->group_read = strcmp(PQgetvalue(res, 0, 0), "t") == 0;
	PQclear(res);
}

/*
 * cfeed_group_acquire
 *		Group mode: call cfeed.acquire (which also renews) and follow exactly
 *		the shards it returns.  A shard newly held, or held at a new epoch,
 *		restarts from the lease's cursor; one still held keeps its cursor.
 */
TailStep
cfeed_group_acquire(Tail *t)
{
	char		ttl_text[16];
	const char *params[5] = {t->group, t->feed_id_text, t->owner, ttl_text,
	t->from == FROM_TIME ? t->from_text : NULL};
	bool	   *now_held;
	PGresult   *res;

	snprintf(ttl_text, sizeof(ttl_text), "%d", t->ttl_ms);
	res = cfeed_tail_exec_params(t,
								 "select shard, \"cursor\", epoch from cfeed.acquire($1, $2::int, $3, $4::int, $5::timestamptz)",
								 5, params);
	if (!cfeed_result_ok(res, PGRES_TUPLES_OK))
		return cfeed_tail_fail(t, res, "acquiring leases");

	/* A shard created since the layout was loaded (a split): load it. */
	for (int r = 0; r < PQntuples(res); r++)
	{
		if (cfeed_tail_find_shard(t, atoi(PQgetvalue(res, r, 0))) == NULL)
		{
			bool		more;
			TailStep	step = cfeed_tail_follow_layout(t, &more);

			if (step != STEP_OK)
			{
				PQclear(res);
				return step;
			}
			break;
		}
	}

	now_held = calloc(t->nshards > 0 ? t->nshards : 1, sizeof(bool));
	if (now_held == NULL)
	{
		PQclear(res);
		fprintf(stderr, "cfeed tail: out of memory\n");
		t->exit_code = CFEED_EXIT_ERROR;
		return STEP_STOP;
	}
	for (int r = 0; r < PQntuples(res); r++)
	{
		int			shard = atoi(PQgetvalue(res, r, 0));
		long long	epoch = strtoll(PQgetvalue(res, r, 2), NULL, 10);
		TailShard  *s = cfeed_tail_find_shard(t, shard);

		if (s == NULL)
		{
			fprintf(stderr, "cfeed tail: lease on shard %d of feed %d, which this run cannot see; not reading it\n",
					shard, t->feed_id);
			continue;
		}
		now_held[s - t->shards] = true;
		if (!s->held || s->epoch != epoch)
		{
			s->held = true;
			s->epoch = epoch;
			s->dirty = true;
			s->cursor_known = !PQgetisnull(res, r, 1);
			if (s->cursor_known)
				s->cursor = strtoll(PQgetvalue(res, r, 1), NULL, 10);
			fprintf(stderr, "cfeed tail: holding shard %d of feed %d (epoch %lld) from cursor %s\n",
					s->shard, t->feed_id, epoch,
					s->cursor_known ? PQgetvalue(res, r, 1) : "null");
		}
	}
	PQclear(res);

	for (int i = 0; i < t->nshards; i++)
	{
		if (t->shards[i].held && !now_held[i])
		{
			fprintf(stderr, "cfeed tail: no longer holding shard %d of feed %d\n",
					t->shards[i].shard, t->feed_id);
			t->shards[i].held = false;
			t->shards[i].dirty = false;
		}
	}
	free(now_held);
	t->next_renew_ms = cfeed_now_ms() + t->ttl_ms / 3;
	return STEP_OK;
}

/*
 * cfeed_group_checkpoint
 *		Group mode: store the shard's cursor in its lease.  A refusal with
 *		55000 means the lease was lost: stop reading the shard and renew at
 *		once.
 */
TailStep
cfeed_group_checkpoint(Tail *t, TailShard *s)
{
	char		shard_text[16];
	char		epoch_text[24];
	char		cursor_text[24];
	const char *params[6] = {t->group, t->feed_id_text, shard_text, t->owner,
	epoch_text, cursor_text};
	PGresult   *res;

	snprintf(shard_text, sizeof(shard_text), "%d", s->shard);
	snprintf(epoch_text, sizeof(epoch_text), "%lld", s->epoch);
	snprintf(cursor_text, sizeof(cursor_text), "%lld", s->cursor);
	res = cfeed_tail_exec_params(t,
								 "select cfeed.checkpoint($1, $2::int, $3::int, $4, $5::bigint, $6::bigint)",
								 6, params);
	if (cfeed_result_ok(res, PGRES_TUPLES_OK))
	{
		PQclear(res);
		return STEP_OK;
	}
	if (strcmp(cfeed_sqlstate(res), "55000") == 0)
	{
		fprintf(stderr, "cfeed tail: lease on shard %d of feed %d lost: %s",
				s->shard, t->feed_id, cfeed_error_text(t->conn, res));
		PQclear(res);
		s->held = false;
		s->dirty = false;
		t->next_renew_ms = cfeed_now_ms();
		return STEP_OK;
	}
	return cfeed_tail_fail(t, res, "checkpointing");
}

/*
 * cfeed_group_release
 *		Group mode, clean exit: give the leases up (their cursors stay), so
 *		that other members take the shards over without waiting for expiry.
 *		Best effort.
 */
void
cfeed_group_release(Tail *t)
{
	const char *params[3] = {t->group, t->feed_id_text, t->owner};
	PGresult   *res;

	if (t->conn == NULL || PQstatus(t->conn) != CONNECTION_OK)
		return;
	res = cfeed_tail_exec_params(t, "select cfeed.release($1, $2::int, $3)", 3, params);
	if (!cfeed_result_ok(res, PGRES_TUPLES_OK))
		fprintf(stderr, "cfeed tail: could not release the leases: %s",
				cfeed_error_text(t->conn, res));
	PQclear(res);
}
