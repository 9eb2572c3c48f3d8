/*
 * src/serve/serve_hub_standby.c
 *		The fan-out hub on a hot standby, where LISTEN is refused (25006):
 *		noticing it, and waiting for new changes without notifications.
 *
 * When it follows one shard, the hub waits in cfeed.wait() (at most a
 * second, or until its next timer), and the shard is then due to be read.
 * Otherwise it reads the heads of the followed shards in one query every
 * SERVE_STANDBY_POLL_MS, or sooner when kicked, and those past their tails
 * are due (cfeed_hub_safety); up to 1.9 every followed shard was read at
 * every poll: 20,000 reads a second for a 1,000-shard stream.  Prefix
 * visibility holds on a standby, so the tails skip nothing there either.
 * Once a second the hub asks whether the standby was promoted (its
 * sessions live on): then it LISTENs and reads every followed shard, as
 * on a new connection.  The state belongs to the hub thread: it is set on
 * a refused LISTEN and cleared on each new connection or a promotion; a
 * connection through a pooler has it from its start to its end.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <string.h>

#include "serve_hub.h"

static bool standby;
static bool pooled;
static long long next_promoted_check;	/* cfeed_now_ms */

/*
 * cfeed_hub_standby_reset
 *		A new connection: not known to be a standby until LISTEN is refused.
 *		One through a pooler or proxy (cfeed_behind_pooler: pgbouncer, say)
 *		waits as on a standby for as long as it lasts, without LISTEN, which
 *		would stay on a pooled server connection.  False when the question
 *		failed (logged, res cleared).
 */
bool
cfeed_hub_standby_reset(PGconn *conn)
{
	PGresult   *failed = NULL;

	if (!cfeed_behind_pooler(conn, &pooled, &failed))
	{
		(void) cfeed_hub_lost(conn, failed, "asking for the backend's process id");
		return false;
	}
	standby = pooled;
	if (pooled)
		cfeed_serve_log(LOG_INFO, "hub: the connection goes through a pooler (its process id is not the "
						"server's): waiting with cfeed.wait instead of LISTEN");
	return true;
}

/*
 * cfeed_hub_on_standby
 *		Whether the hub's connection is to a hot standby.
 */
bool
cfeed_hub_on_standby(void)
{
	return standby;
}

/*
 * cfeed_hub_standby_refused
 *		Whether a failed LISTEN was refused because the server is a hot
 *		standby (25006); then note it (and log it) and clear res.
 */
bool
cfeed_hub_standby_refused(PGresult *res)
{
	if (strcmp(cfeed_sqlstate(res), "25006") != 0)
		return false;
	PQclear(res);
	standby = true;
	next_promoted_check = cfeed_now_ms() + SERVE_PROMOTED_CHECK_MS;
	cfeed_serve_log(LOG_INFO, "hub: hot standby (LISTEN refused): waiting with cfeed.wait instead");
	return true;
}

/*
 * promoted
 *		Every SERVE_PROMOTED_CHECK_MS: whether the standby was promoted (its
 *		sessions live on); then the hub LISTENs and reads every followed
 *		shard, as on a new connection.  False when the connection is lost.
 */
static bool
promoted(PGconn *conn)
{
	PGresult   *res;
	bool		in_recovery;

	if (pooled || cfeed_now_ms() < next_promoted_check)
		return true;
	next_promoted_check = cfeed_now_ms() + SERVE_PROMOTED_CHECK_MS;
	res = PQexec(conn, "select pg_is_in_recovery()");
	if (!cfeed_result_ok(res, PGRES_TUPLES_OK))
		return !cfeed_hub_lost(conn, res, "checking for a promotion");
	in_recovery = strcmp(PQgetvalue(res, 0, 0), "t") == 0;
	PQclear(res);
	if (!in_recovery)
	{
		standby = false;
		cfeed_serve_log(LOG_INFO, "hub: the standby was promoted: LISTEN again");
		cfeed_hub_connection_reset();
	}
	return true;
}

/*
 * cfeed_hub_standby_wait
 *		On a hot standby: wait in cfeed.wait for the one followed shard,
 *		which is then due; or sleep a poll interval, then read the heads of
 *		the followed shards in one query, and those past their tails are due
 *		(cfeed_hub_safety: one statement a poll, not a read of every shard).
 *		False when the connection is lost.
 */
bool
cfeed_hub_standby_wait(PGconn *conn, long long timeout)
{
	HubShard   *one = NULL;
	int			followed = 0;
	char		text[4][24];
	const char *params[4] = {text[0], text[1], text[2], text[3]};
	PGresult   *res;

	if (!promoted(conn))
		return false;
	if (!standby)
		return true;
	pthread_mutex_lock(&cfeed_hub_lock);
	for (HubShard *h = cfeed_hub_shards; h != NULL; h = h->next)
		if (h->followers > 0 && h->based)
		{
			followed++;
			one = h;
			snprintf(text[0], sizeof(text[0]), "%d", h->feed_id);
			snprintf(text[1], sizeof(text[1]), "%d", h->shard);
			snprintf(text[2], sizeof(text[2]), "%lld", h->last);
		}
	pthread_mutex_unlock(&cfeed_hub_lock);
	if (followed != 1 || one == NULL)
	{
		cfeed_hub_nap((int) (timeout < SERVE_STANDBY_POLL_MS ? timeout : SERVE_STANDBY_POLL_MS));
		return cfeed_hub_safety(conn);
	}
	snprintf(text[3], sizeof(text[3]), "%lld", timeout < 1000 ? timeout : 1000);
	res = PQexecParams(conn, "select cfeed.wait($1::int, $2::int, $3::bigint, $4::int)",
					   4, NULL, params, NULL, NULL, 0);
	if (!cfeed_result_ok(res, PGRES_TUPLES_OK))
		return !cfeed_hub_lost(conn, res, "waiting");
	PQclear(res);
	cfeed_hub_mark_all_due();
	return true;
}
