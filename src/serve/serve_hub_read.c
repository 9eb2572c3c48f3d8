/*
 * src/serve/serve_hub_read.c
 *		How the hub thread (serve_hub.c) reads a followed shard's new events
 *		into its in-memory tail (serve_hub_tail.c), page by page, following
 *		the feed epoch meanwhile; and how any of the hub's queries that fails
 *		is logged (cfeed_hub_lost).
 *
 * Feed epochs (client epoch.c): a tail's numbers belong to the epoch read
 * before its head.  On a new connection, before reading on, and whenever a
 * read is followed by another epoch, the tail's last number is
 * passed through cfeed.resume_cursor: unchanged, the tail moves to the new
 * epoch; rewound (a failover lost stamps it holds, whose numbers may now
 * be other changes), the tail is dropped and established again, and its
 * clients, whose cursors are of the older epoch, are resumed through the
 * reading pool.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdlib.h>

#include "serve_hub.h"

/* How an epoch step of the hub went. */
typedef enum EpochStep
{
	EPOCH_SAME,					/* carry on */
	EPOCH_MOVED,				/* resumed, or to be: read again */
	EPOCH_FAILED,				/* a query failed: try again at the next pass */
	EPOCH_LOST					/* the connection is gone */
} EpochStep;

/*
 * cfeed_hub_lost
 *		Whether a failed result means the hub's connection is gone; logs the
 *		failure either way and clears res.
 */
bool
cfeed_hub_lost(PGconn *conn, PGresult *res, const char *what)
{
	bool		gone = cfeed_connection_lost(conn, res);

	cfeed_serve_log(gone ? LOG_WARNING : LOG_ERROR, "hub: %s failed: %s", what,
					cfeed_error_text(conn, res));
	PQclear(res);
	return gone;
}

/*
 * epoch_failed
 *		Classify a failed epoch query (clears res).
 */
static EpochStep
epoch_failed(PGconn *conn, PGresult *res)
{
	return cfeed_hub_lost(conn, res, "following the feed epoch") ? EPOCH_LOST : EPOCH_FAILED;
}

/*
 * resume_tail
 *		Bring a tail (last number from, of epoch) into the current feed
 *		epoch, or drop it when a failover lost stamps it holds (see the file
 *		header).
 */
static EpochStep
resume_tail(PGconn *conn, HubShard *h, unsigned gen, long long from, long long epoch)
{
	long long	resumed = from;
	bool		rewound;
	PGresult   *res;

	if (!cfeed_epoch_resume(conn, h->feed_id, h->shard, true, &resumed, true, &epoch,
							&rewound, &res))
		return epoch_failed(conn, res);
	pthread_mutex_lock(&cfeed_hub_lock);
	if (h->gen == gen && h->based && h->last == from)
	{
		if (rewound)
		{
			cfeed_serve_log(LOG_WARNING, "hub: a failover lost stamps of feed \"%s\" shard %d after %lld; "
							"its streams resume there (changes are sent again)",
							h->feed, h->shard, resumed);
			cfeed_hub_drop_tail(h);
		}
		h->epoch = epoch;
		h->epoch_checked = true;
	}
	pthread_mutex_unlock(&cfeed_hub_lock);
	(void) cfeed_hub_wake(false);
	return EPOCH_MOVED;
}

/*
 * check_epoch
 *		After a read: whether the feed epoch is still
 *		the tail's (else the changes are discarded, and the tail resumed
 *		before reading again).
 */
static EpochStep
check_epoch(PGconn *conn, HubShard *h, long long epoch)
{
	long long	now;
	PGresult   *res;

	if (!cfeed_serve_epochs)
		return EPOCH_SAME;
	if (!cfeed_epoch_now(conn, &now, &res))
		return epoch_failed(conn, res);
	if (now == epoch)
		return EPOCH_SAME;
	pthread_mutex_lock(&cfeed_hub_lock);
	h->epoch_checked = false;
	pthread_mutex_unlock(&cfeed_hub_lock);
	return EPOCH_MOVED;
}

/*
 * cfeed_hub_read_new
 *		Read a followed shard's new events into its tail, page by page, and
 *		wake its followers; first bring the tail into the current feed
 *		epoch when that was not checked on this connection.  A read on a
 *		hint (hinted) that finds nothing quiets the shard's hints for
 *		SERVE_HINT_QUIET_MS.  False when the connection is lost.
 */
bool
cfeed_hub_read_new(PGconn *conn, HubShard *h, unsigned gen, long long from, bool hinted)
{
	long long	read_from = from;

	for (;;)
	{
		PGresult   *res = NULL;
		int			rows = 0;
		bool		current;
		bool		checked;
		long long	epoch;
		EpochStep	step = EPOCH_SAME;

		pthread_mutex_lock(&cfeed_hub_lock);
		current = h->gen == gen && h->based && h->last == from;
		checked = h->epoch_checked;
		epoch = h->epoch;
		pthread_mutex_unlock(&cfeed_hub_lock);
		if (!current)
			return true;		/* dropped meanwhile */
		if (cfeed_serve_epochs && !checked)
			step = resume_tail(conn, h, gen, from, epoch);
		else
		{
			res = cfeed_feedapi_read(conn, h->sql, h->feed_id, h->feed, h->shard, &from,
									 SERVE_MAX_PAGE);
			if (!cfeed_result_ok(res, PGRES_TUPLES_OK))
				return !cfeed_hub_lost(conn, res, "reading");
			rows = PQntuples(res);
			step = check_epoch(conn, h, epoch);
			if (step != EPOCH_SAME)
				PQclear(res);
		}
		if (step == EPOCH_LOST || step == EPOCH_FAILED)
			return step == EPOCH_FAILED;
		if (step == EPOCH_MOVED)
			continue;
		pthread_mutex_lock(&cfeed_hub_lock);
		if (h->gen != gen || !h->based || h->last != from)
			rows = 0;			/* dropped meanwhile */
		for (int r = 0; r < rows; r++)
			cfeed_hub_append(h, strtoll(PQgetvalue(res, r, 0), NULL, 10),
							 strtoll(PQgetvalue(res, r, 1), NULL, 10),
							 PQgetvalue(res, r, 2), PQgetlength(res, r, 2));
		from = h->last;
		pthread_mutex_unlock(&cfeed_hub_lock);
		PQclear(res);
		if (rows > 0)
			(void) cfeed_hub_wake(false);
		if (rows < SERVE_MAX_PAGE)
		{
			pthread_mutex_lock(&cfeed_hub_lock);
			h->quiet_until = hinted && from == read_from ? cfeed_now_ms() + SERVE_HINT_QUIET_MS : 0;
			pthread_mutex_unlock(&cfeed_hub_lock);
			return true;
		}
	}
}
