/*
 * src/client/tail_dead.c
 *		`cfeed tail --dead-letters --group G`: print the dead letters of a
 *		consumer group on the feed (or on --shard) as JSON lines, in order
 *		(by shard, then number: cfeed.read_dead_letters, which a database
 *		not yet updated lacks), and exit.  Read-only: resolving them is the
 *		operator's, in SQL (docs/consumer-groups.md, "Failures and dead
 *		letters").
 */
#define _POSIX_C_SOURCE 200809L

#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "tail.h"

/*
 * refused
 *		Report a failed read of the dead letters (res is cleared) and return
 *		the exit code: 4 for a feed the role may not read, 2 for a group
 *		without leases on the feed or a cfeed without dead letters, else 1.
 */
static int
refused(Tail *t, PGresult *res)
{
	const char *state = cfeed_sqlstate(res);
	int			code = CFEED_EXIT_ERROR;

	if (strcmp(state, "42501") == 0)
		code = CFEED_EXIT_DENIED;
	else if (strcmp(state, "42704") == 0)
		code = CFEED_EXIT_USAGE;
	else if (strcmp(state, "42883") == 0)
	{
		fprintf(stderr, "cfeed tail: --dead-letters needs cfeed 1.8 or later in the database\n");
		PQclear(res);
		return CFEED_EXIT_USAGE;
	}
	fprintf(stderr, "cfeed tail: reading the dead letters of group \"%s\" failed: %s",
			t->group, cfeed_error_text(t->conn, res));
	PQclear(res);
	return code;
}

/*
 * cfeed_tail_dead_letters
 *		Print the dead letters of t->group on each followed shard, a page at
 *		a time, at most --max in all.  Returns the exit code.
 */
int
cfeed_tail_dead_letters(Tail *t)
{
	for (int i = 0; i < t->nshards; i++)
	{
		TailShard  *s = &t->shards[i];
		char		shard_text[16];
		char		first_text[24];
		char		limit_text[24];
		const char *params[5] = {t->group, t->feed_id_text, shard_text, NULL, limit_text};
		long long	limit;
		int			n;

		snprintf(shard_text, sizeof(shard_text), "%d", s->shard);
		do
		{
			PGresult   *res;

			limit = PAGE_SIZE;
			if (t->max > 0 && t->max - t->printed < limit)
				limit = t->max - t->printed;
			if (limit <= 0 || cfeed_interrupted)
				return CFEED_EXIT_OK;
			snprintf(limit_text, sizeof(limit_text), "%lld", limit);
			res = cfeed_tail_exec_params(t,
										 "select pg_catalog.to_json(d.group_name), d.change_sequence_number,"
										 " d.change_id, d.attempts, pg_catalog.to_json(d.last_error),"
										 " pg_catalog.to_json(d.dead_lettered_at)"
										 " from cfeed.read_dead_letters($1, $2::int, $3::int, $4::bigint,"
										 " null, $5::int) d",
										 5, params);
			if (!cfeed_result_ok(res, PGRES_TUPLES_OK))
				return refused(t, res);
			n = PQntuples(res);
			for (int r = 0; r < n; r++)
			{
				int			rc = printf("{\"group\":%s,\"feed_id\":%d,\"shard\":%d,\"change_sequence_number\":%s,"
										"\"change_id\":%s,\"attempts\":%s,\"last_error\":%s,\"dead_lettered_at\":%s}\n",
										PQgetvalue(res, r, 0), t->feed_id, s->shard, PQgetvalue(res, r, 1),
										PQgetvalue(res, r, 2), PQgetvalue(res, r, 3), PQgetvalue(res, r, 4),
										PQgetvalue(res, r, 5));

				if (cfeed_tail_printed(t, rc) != STEP_OK)
				{
					PQclear(res);
					return t->exit_code;
				}
				t->printed++;
			}
			if (n > 0)
			{
				long long	last;

				if (!cfeed_parse_int64(PQgetvalue(res, n - 1, 1), LLONG_MIN, LLONG_MAX - 1, &last))
					n = 0;		/* the last number there is: nothing after it */
				else
				{
					snprintf(first_text, sizeof(first_text), "%lld", last + 1);
					params[3] = first_text;
				}
			}
			PQclear(res);
		} while (n == limit);
	}
	return CFEED_EXIT_OK;
}
