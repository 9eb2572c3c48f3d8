/*
 * src/client/tail_query.c
 *		The helpers of `cfeed tail`'s files (and group.c) for their queries:
 *		running one, classifying its failure (interrupted, connection lost,
 *		an error), and finding a followed shard.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>

#include "tail.h"

/*
 * cfeed_tail_fail
 *		Classify the failure of a query (res may be NULL; it is cleared).
 *		Interrupted: stop with 0.  Connection gone: STEP_LOST.  Anything
 *		else: print it and stop with exit code 1.
 */
TailStep
cfeed_tail_fail(Tail *t, PGresult *res, const char *what)
{
	TailStep	step;

	if (cfeed_interrupted)
	{
		t->exit_code = CFEED_EXIT_OK;
		step = STEP_STOP;
	}
	else if (cfeed_connection_lost(t->conn, res))
	{
		fprintf(stderr, "cfeed tail: connection lost while %s: %s", what,
				cfeed_error_text(t->conn, res));
		step = STEP_LOST;
	}
	else
	{
		fprintf(stderr, "cfeed tail: %s failed: %s", what,
				cfeed_error_text(t->conn, res));
		t->exit_code = CFEED_EXIT_ERROR;
		step = STEP_STOP;
	}
	PQclear(res);
	return step;
}

/*
 * cfeed_tail_exec_params
 *		PQexecParams with text parameters and text results.
 */
PGresult *
cfeed_tail_exec_params(Tail *t, const char *sql, int nparams,
					   const char *const *values)
{
	return PQexecParams(t->conn, sql, nparams, NULL, values, NULL, NULL, 0);
}

/*
 * cfeed_tail_find_shard
 *		The followed shard with number shard, or NULL.
 */
TailShard *
cfeed_tail_find_shard(Tail *t, int shard)
{
	for (int i = 0; i < t->nshards; i++)
		if (t->shards[i].shard == shard)
			return &t->shards[i];
	return NULL;
}
