/*
 * src/client/epoch.c
 *		Feed epochs for the readers of the `cfeed` command (`cfeed tail`,
 *		the hub and the reading pool of `cfeed serve`): the queries that keep
 *		a cursor held outside the database valid across a failover that lost
 *		stamps (docs/replication.md, "Detecting a lossy failover").
 *
 * The protocol, for a cursor C saved with epoch E (the epoch read before C
 * was reached, on the same connection):
 *	 - on a new connection, and whenever the epoch differs from E, C becomes
 *	   cfeed.resume_cursor(feed, shard, C, E) and E the epoch read in the
 *	   same statement (same snapshot): cfeed_epoch_resume;
 *	 - after every read, the epoch is read again (cfeed_epoch_now); if it
 *	   is no longer E, the changes read are discarded and the cursor
 *	   resumed as above before reading again.  Reading the epoch only before
 *	   a read could rewind needlessly (a standby promoted during the read);
 *	   only after it, could skip (the read's changes may belong to the epoch
 *	   before).  Empty reads are checked too: a new primary keeps the old
 *	   epoch until its first stamp, so a reader that reconnected before it
 *	   and whose cursor is past the new primary's head learns of the
 *	   failover from the epoch only, at its first read after that stamp.
 * A database without cfeed.epoch() (its cfeed schema not yet updated) has
 * no epochs: cursors are then used as they are.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>

#include "client.h"

/*
 * cfeed_epoch_probe
 *		Whether the database has feed epochs: 1, 0, or -1 when the query
 *		failed (its result, to be classified and cleared by the caller, is
 *		then in *failed).
 */
int
cfeed_epoch_probe(PGconn *conn, PGresult **failed)
{
	PGresult   *res = PQexec(conn, "select pg_catalog.to_regprocedure('cfeed.epoch()') is not null");
	int			available;

	if (!cfeed_result_ok(res, PGRES_TUPLES_OK) || PQntuples(res) != 1)
	{
		*failed = res;
		return -1;
	}
	available = PQgetvalue(res, 0, 0)[0] == 't';
	PQclear(res);
	return available;
}

/*
 * cfeed_epoch_now
 *		cfeed.epoch(): true with *epoch set, or false with the failed result
 *		in *failed.
 */
bool
cfeed_epoch_now(PGconn *conn, long long *epoch, PGresult **failed)
{
	PGresult   *res = PQexec(conn, "select cfeed.epoch()");

	if (!cfeed_result_ok(res, PGRES_TUPLES_OK) || PQntuples(res) != 1)
	{
		*failed = res;
		return false;
	}
	*epoch = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
	PQclear(res);
	return true;
}

/*
 * cfeed_epoch_resume
 *		Bring the position (*known, *cursor) of a shard, saved under *epoch,
 *		into the current epoch: *cursor becomes cfeed.resume_cursor() of it
 *		and *epoch the current epoch, both as of one snapshot.  epoch_known
 *		false: the position is taken as of the current epoch (a cursor given
 *		without one).  Returns true (*rewound: the cursor moved back) or
 *		false with the failed result in *failed.
 */
bool
cfeed_epoch_resume(PGconn *conn, int feed_id, int shard, bool known,
				   long long *cursor, bool epoch_known, long long *epoch,
				   bool *rewound, PGresult **failed)
{
	char		feed_text[16];
	char		shard_text[16];
	char		cursor_text[24];
	char		epoch_text[24];
	const char *params[4] = {feed_text, shard_text, known ? cursor_text : NULL,
	epoch_known ? epoch_text : NULL};
	PGresult   *res;

	snprintf(feed_text, sizeof(feed_text), "%d", feed_id);
	snprintf(shard_text, sizeof(shard_text), "%d", shard);
	snprintf(cursor_text, sizeof(cursor_text), "%lld", *cursor);
	snprintf(epoch_text, sizeof(epoch_text), "%lld", *epoch);
	res = PQexecParams(conn,
					   "select e, case when $4::bigint is null then $3::bigint"
					   " else cfeed.resume_cursor($1::int, $2::int, $3::bigint, $4::bigint) end"
					   " from cfeed.epoch() e",
					   4, NULL, params, NULL, NULL, 0);
	if (!cfeed_result_ok(res, PGRES_TUPLES_OK) || PQntuples(res) != 1)
	{
		*failed = res;
		return false;
	}
	*rewound = false;
	if (known)
	{
		long long	resumed = strtoll(PQgetvalue(res, 0, 1), NULL, 10);

		*rewound = resumed < *cursor;
		*cursor = resumed;
	}
	*epoch = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
	PQclear(res);
	return true;
}
