/*
 * src/client/tail_conn.c
 *		`cfeed tail`: setting up a connection (LISTEN, feed epochs, start
 *		positions, leases) and replacing a lost one.
 *
 * A new connection LISTENs before anything is read, so that no wake-up is
 * lost; then each shard's cursor is brought into the current feed epoch
 * (epoch.c) through cfeed.resume_cursor.  The loop itself is in tail.c.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tail.h"

/*
 * cfeed_tail_listen_shard
 *		LISTEN on the shard's channel.  On a hot standby, where LISTEN is
 *		refused, note it and fall back to polling (nothing is listened to
 *		then), as behind a pooler (listen_all).
 */
TailStep
cfeed_tail_listen_shard(Tail *t, TailShard *s)
{
	char	   *ident;
	char	   *sql;
	PGresult   *res;

	if (!t->listening)
		return STEP_OK;
	ident = PQescapeIdentifier(t->conn, s->channel, strlen(s->channel));
	if (ident == NULL)
		return cfeed_tail_fail(t, NULL, "quoting a channel name");
	sql = malloc(strlen(ident) + 8);
	if (sql == NULL)
	{
		PQfreemem(ident);
		fprintf(stderr, "cfeed tail: out of memory\n");
		t->exit_code = CFEED_EXIT_ERROR;
		return STEP_STOP;
	}
	sprintf(sql, "LISTEN %s", ident);
	PQfreemem(ident);
	res = PQexec(t->conn, sql);
	free(sql);
	if (!cfeed_result_ok(res, PGRES_COMMAND_OK))
	{
		if (strcmp(cfeed_sqlstate(res), "25006") == 0)
		{
			PQclear(res);
			fprintf(stderr, "cfeed tail: LISTEN is not possible (hot standby?); "
					"waiting with cfeed.wait or polling instead\n");
			t->listening = false;
			return STEP_OK;
		}
		return cfeed_tail_fail(t, res, "LISTEN");
	}
	PQclear(res);
	return STEP_OK;
}

/*
 * listen_all
 *		LISTEN on the channel of every shard (or on none, on a hot standby
 *		or behind a pooler: cfeed_behind_pooler).
 */
static TailStep
listen_all(Tail *t)
{
	bool		pooled = false;
	PGresult   *failed = NULL;
	TailStep	step = STEP_OK;

	if (!cfeed_behind_pooler(t->conn, &pooled, &failed))
		return cfeed_tail_fail(t, failed, "asking for the backend's process id");
	if (pooled)
		fprintf(stderr, "cfeed tail: the connection goes through a pooler (its process id is not the "
				"server's); waiting with cfeed.wait or polling instead of LISTEN\n");
	t->listening = !pooled;
	for (int i = 0; i < t->nshards && step == STEP_OK; i++)
		step = cfeed_tail_listen_shard(t, &t->shards[i]);
	return step;
}

/*
 * cfeed_tail_resume_shard
 *		Bring the shard's cursor into the current feed epoch (epoch.c);
 *		say so on stderr when a failover lost stamps at or below it.
 */
TailStep
cfeed_tail_resume_shard(Tail *t, TailShard *s)
{
	long long	before = s->cursor;
	bool		rewound;
	PGresult   *res;

	if (!cfeed_epoch_resume(t->conn, t->feed_id, s->shard, s->cursor_known, &s->cursor,
							s->feed_epoch_known, &s->feed_epoch, &rewound, &res))
		return cfeed_tail_fail(t, res, "resuming the cursor in the feed's epoch");
	s->feed_epoch_known = true;
	if (rewound)
		fprintf(stderr, "cfeed tail: a failover lost stamps of shard %d of feed %d after %lld "
				"(the numbers up to %lld may now be other changes); resuming after %lld, "
				"changes may be printed again\n",
				s->shard, t->feed_id, s->cursor, before, s->cursor);
	return STEP_OK;
}

/*
 * resume_all
 *		On a new connection, before reading: whether the database has feed
 *		epochs, and if so every shard's cursor brought into the current one.
 */
static TailStep
resume_all(Tail *t)
{
	PGresult   *res = NULL;
	int			available = cfeed_epoch_probe(t->conn, &res);
	TailStep	step = STEP_OK;

	if (available < 0)
		return cfeed_tail_fail(t, res, "looking for feed epochs");
	t->epochs = available > 0;
	for (int i = 0; i < t->nshards && t->epochs && step == STEP_OK; i++)
		step = cfeed_tail_resume_shard(t, &t->shards[i]);
	return step;
}

/*
 * cfeed_tail_epoch_moved
 *		After a read: whether the feed epoch is no
 *		longer the shard's (the changes are then discarded and the cursor
 *		resumed).  *step is set when the query fails.
 */
bool
cfeed_tail_epoch_moved(Tail *t, TailShard *s, TailStep *step)
{
	long long	epoch;
	PGresult   *res;

	if (!t->epochs)
		return false;
	if (!cfeed_epoch_now(t->conn, &epoch, &res))
	{
		*step = cfeed_tail_fail(t, res, "reading the feed epoch");
		return true;
	}
	if (epoch == s->feed_epoch)
		return false;
	*step = cfeed_tail_resume_shard(t, s);
	return true;
}

/*
 * position_shard
 *		Resolve --from into the shard's starting cursor.
 */
static TailStep
position_shard(Tail *t, TailShard *s)
{
	char		shard_text[16];
	const char *params[3] = {t->feed_id_text, shard_text, t->from_text};
	PGresult   *res;

	snprintf(shard_text, sizeof(shard_text), "%d", s->shard);
	switch (t->from)
	{
		case FROM_BEGINNING:
			s->cursor_known = false;
			return STEP_OK;
		case FROM_CURSOR:
			s->cursor_known = true;
			s->cursor = t->from_cursor;
			return STEP_OK;
		case FROM_NOW:
			res = cfeed_tail_exec_params(t, "select cfeed.head($1::int, $2::int)", 2, params);
			break;
		case FROM_TIME:
			res = cfeed_tail_exec_params(t, "select cfeed.cursor_at($1::int, $2::int, $3::timestamptz)",
										 3, params);
			break;
		default:
			return STEP_OK;
	}
	if (!cfeed_result_ok(res, PGRES_TUPLES_OK) || PQntuples(res) != 1)
		return cfeed_tail_fail(t, res, "finding the start position");
	s->cursor_known = !PQgetisnull(res, 0, 0);
	if (s->cursor_known)
		s->cursor = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
	PQclear(res);
	return STEP_OK;
}

/*
 * position_shards
 *		Resolve --from into each shard's starting cursor (outside group
 *		mode).  Called after LISTEN and resume_all, once.  A position read
 *		from the database (cfeed.head, cfeed.cursor_at: a fresh snapshot)
 *		belongs to the shard's feed epoch, read before it, only when the
 *		epoch is still that one after it (epoch.c); when it moved, the
 *		positions are read again in the new one.  Labelled with the epoch
 *		before, a head read just after the database's first stamp was of
 *		epoch 0, and the first read rewound it to where that stamp began:
 *		`--from now` printed the changes before it.
 */
static TailStep
position_shards(Tail *t)
{
	bool		read = t->from == FROM_NOW || t->from == FROM_TIME;

	for (;;)
	{
		long long	epoch;
		PGresult   *res;
		bool		moved = false;

		for (int i = 0; i < t->nshards; i++)
		{
			TailStep	step = position_shard(t, &t->shards[i]);

			if (step != STEP_OK)
				return step;
		}
		if (!read || !t->epochs)
			break;
		if (!cfeed_epoch_now(t->conn, &epoch, &res))
			return cfeed_tail_fail(t, res, "reading the feed epoch");
		for (int i = 0; i < t->nshards; i++)
		{
			moved |= t->shards[i].feed_epoch != epoch;
			t->shards[i].feed_epoch = epoch;
		}
		if (!moved)
			break;
	}
	t->positioned = true;
	return STEP_OK;
}

/*
 * cfeed_tail_setup_connection
 *		On a new connection: LISTEN first, then bring the cursors into the
 *		current feed epoch, then (once) resolve the start positions, then in
 *		group mode acquire the leases; every held shard is then due for a
 *		read, and on a reconnection the layout for a look (a split may have
 *		been made while the connection was lost).
 */
TailStep
cfeed_tail_setup_connection(Tail *t)
{
	bool		first = !t->positioned;
	TailStep	step;

	step = listen_all(t);
	if (step == STEP_OK)
		step = resume_all(t);
	if (step == STEP_OK && t->group == NULL && !t->positioned)
		step = position_shards(t);
	if (step == STEP_OK && t->group != NULL)
		step = cfeed_group_acquire(t);
	if (step == STEP_OK)
	{
		cfeed_tail_mark_all_dirty(t);
		t->layout_due = !first;
	}
	return step;
}

/*
 * cfeed_tail_reconnect
 *		Replace a lost connection, retrying with exponential backoff until it
 *		works or a signal arrives, and set it up again (LISTEN, leases).
 */
TailStep
cfeed_tail_reconnect(Tail *t)
{
	int			backoff = BACKOFF_MIN_MS;

	for (;;)
	{
		cfeed_set_cancel(NULL);
		if (t->conn != NULL)
			PQfinish(t->conn);
		t->conn = NULL;
		if (cfeed_interrupted)
		{
			t->exit_code = CFEED_EXIT_OK;
			return STEP_STOP;
		}

		fprintf(stderr, "cfeed tail: reconnecting in %d ms\n", backoff);
		cfeed_sleep_ms(backoff);
		if (backoff < BACKOFF_MAX_MS)
			backoff = backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : backoff * 2;
		if (cfeed_interrupted)
			continue;

		t->conn = cfeed_connect(t->dsn, true);
		if (t->conn == NULL)
			continue;
		switch (cfeed_tail_setup_connection(t))
		{
			case STEP_OK:
				fprintf(stderr, "cfeed tail: reconnected; resuming feed %d\n", t->feed_id);
				return STEP_OK;
			case STEP_STOP:
				return STEP_STOP;
			case STEP_LOST:
				break;
		}
	}
}
