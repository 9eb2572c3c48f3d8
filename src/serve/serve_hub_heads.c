/*
 * src/serve/serve_hub_heads.c
 *		The hub's work on many followed shards at once, each a statement or
 *		two whatever their number: LISTEN on their channels, and their
 *		heads with the feed epoch of one snapshot.  An all-shards stream of
 *		a 1,000-shard feed used to cost the hub 2,000 statements to follow
 *		it (a LISTEN and a head each), and the safety pass (serve_hub.c,
 *		every SERVE_SAFETY_MS) 2,000 every time (a read and an epoch each),
 *		while every other followed shard waited for the hub.
 *
 * Following shards (cfeed_hub_activate): LISTEN on the channels of those
 * not listened to yet, one simple query (its statements commit together),
 * then their heads: base = last = head.  LISTEN comes first, so no wake-up
 * is lost.  The safety pass (cfeed_hub_safety): the heads of every
 * followed shard; a shard is due when its head is past its tail, its
 * epoch is another, or it was not found (the read says why).  A shard the
 * gateway's role may not read to its head is due at every pass, as before.
 * After a reconnect every followed shard is LISTENed to again
 * (cfeed_hub_listen) and read (serve_hub.c).
 */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve_hub.h"

/*
 * After a pass that left shards without their tail (a query failed, a
 * shard was not found), or without their LISTEN after a reconnect (refused
 * without losing the connection), no new attempt at that before these
 * times (cfeed_now_ms), rather than one at every read of the hub: it wakes
 * for them (cfeed_hub_heads_retry_ms).  Separate, so that a shard that
 * cannot get its tail does not keep the others from their LISTEN.  The
 * hub thread only, as listen_wanted: followed shards may have lost their
 * LISTEN (a reconnect).  activate_wanted: under cfeed_hub_lock.
 */
static long long activate_retry_ms;
static long long listen_retry_ms;
static bool listen_wanted;
bool		cfeed_hub_activate_wanted;

typedef enum
{
	WANT_ACTIVATE,				/* followed, no tail yet */
	WANT_LISTEN,				/* followed, not listened to on this connection */
	WANT_HEAD					/* followed, with a tail */
} Want;

/*
 * collect
 *		The followed shards that want what, with their generations (arrays
 *		to free).  Returns how many.
 */
static int
collect(Want want, HubShard ***hs, unsigned **gens)
{
	int			n = 0;

	pthread_mutex_lock(&cfeed_hub_lock);
	for (HubShard *h = cfeed_hub_shards; h != NULL; h = h->next)
		n++;
	*hs = cfeed_serve_alloc(sizeof(HubShard *) * (n > 0 ? n : 1));
	*gens = cfeed_serve_alloc(sizeof(unsigned) * (n > 0 ? n : 1));
	n = 0;
	for (HubShard *h = cfeed_hub_shards; h != NULL; h = h->next)
	{
		if (h->followers == 0 ||
			(want == WANT_ACTIVATE && h->based) ||
			(want == WANT_LISTEN && h->listened) ||
			(want == WANT_HEAD && !h->based))
			continue;
		(*hs)[n] = h;
		(*gens)[n++] = h->gen;
	}
	pthread_mutex_unlock(&cfeed_hub_lock);
	return n;
}

/*
 * listen_on
 *		LISTEN on the channels of those of hs[0..n) not listened to yet;
 *		on a hot standby (25006) note that the hub waits with cfeed.wait
 *		instead.  False when the connection is lost.
 */
static bool
listen_on(PGconn *conn, HubShard **hs, int n)
{
	ServeBuf	sql = {0};
	PGresult   *res;

	if (cfeed_hub_on_standby())
		return true;
	for (int i = 0; i < n; i++)
		if (!hs[i]->listened)	/* the hub thread alone writes it */
			cfeed_buf_printf(&sql, "LISTEN \"%s\";", hs[i]->channel);	/* digits and _ */
	if (sql.len == 0)
		return true;
	res = PQexec(conn, sql.data);
	free(sql.data);
	if (!cfeed_result_ok(res, PGRES_COMMAND_OK))
		return cfeed_hub_standby_refused(res) || !cfeed_hub_lost(conn, res, "LISTEN");
	PQclear(res);
	pthread_mutex_lock(&cfeed_hub_lock);
	for (int i = 0; i < n; i++)
		hs[i]->listened = true;
	pthread_mutex_unlock(&cfeed_hub_lock);
	return true;
}

/*
 * heads
 *		The heads of hs[0..n) and the feed epoch, as of one snapshot
 *		(SERVE_EPOCH_COLUMN): rows (i, head, epoch), i the 1-based index in
 *		hs of a shard found.  One probe of cfeed.shard per shard (a lateral
 *		subquery kept apart with OFFSET 0), whatever the planner knows of
 *		its tables.  NULL when the query failed: *lost says whether the
 *		connection is gone (the failure is logged).
 */
static PGresult *
heads(PGconn *conn, HubShard **hs, int n, bool *lost)
{
	ServeBuf	feeds = {0};
	ServeBuf	shards = {0};
	const char *params[2];
	char		sql[512];
	PGresult   *res;

	for (int i = 0; i < n; i++)
	{
		cfeed_buf_printf(&feeds, "%s%d", i > 0 ? "," : "{", hs[i]->feed_id);
		cfeed_buf_printf(&shards, "%s%d", i > 0 ? "," : "{", hs[i]->shard);
	}
	cfeed_buf_append(&feeds, "}", 1);
	cfeed_buf_append(&shards, "}", 1);
	params[0] = feeds.data;
	params[1] = shards.data;
	snprintf(sql, sizeof(sql),
			 "select k.i, s.last_change_sequence_number, %s"
			 " from rows from (pg_catalog.unnest($1::int[]), pg_catalog.unnest($2::int[]))"
			 " with ordinality k(f, s, i)"
			 " cross join lateral (select s.last_change_sequence_number from cfeed.shard s"
			 " where s.feed_id = k.f and s.shard = k.s offset 0) s",
			 SERVE_EPOCH_COLUMN);
	res = PQexecParams(conn, sql, 2, NULL, params, NULL, NULL, 0);
	free(feeds.data);
	free(shards.data);
	*lost = false;
	if (cfeed_result_ok(res, PGRES_TUPLES_OK))
		return res;
	*lost = cfeed_hub_lost(conn, res, "reading heads");
	return NULL;
}

/*
 * unlistened
 *		Whether a shard of hs[0..n) is still not listened to after
 *		listen_on, other than on a hot standby (where nothing is).
 */
static bool
unlistened(HubShard **hs, int n)
{
	if (cfeed_hub_on_standby())
		return false;
	for (int i = 0; i < n; i++)
		if (!hs[i]->listened)
			return true;
	return false;
}

/*
 * cfeed_hub_activate
 *		Establish the tails of newly followed shards (see the file header).
 *		Those not listened to or whose head was not found stay without one,
 *		and are tried again SERVE_RETRY_MS later (activate_retry_ms).  False when the
 *		connection is lost.
 */
bool
cfeed_hub_activate(PGconn *conn)
{
	HubShard  **hs;
	unsigned   *gens;
	int			n;
	bool		lost = false;
	bool		failed = false;
	bool		based = false;
	bool		wanted;
	PGresult   *res = NULL;

	pthread_mutex_lock(&cfeed_hub_lock);
	wanted = cfeed_hub_activate_wanted && cfeed_now_ms() >= activate_retry_ms;
	if (wanted)
		cfeed_hub_activate_wanted = false;
	pthread_mutex_unlock(&cfeed_hub_lock);
	if (!wanted)
		return true;
	n = collect(WANT_ACTIVATE, &hs, &gens);
	if (n > 0 && !listen_on(conn, hs, n))
		lost = true;
	else if (n > 0)
	{
		failed = unlistened(hs, n);
		res = heads(conn, hs, n, &lost);
		failed |= res == NULL && !lost;
	}
	if (res != NULL)
	{
		failed |= PQntuples(res) < n;	/* not found (dropped?): read later */
		pthread_mutex_lock(&cfeed_hub_lock);
		for (int r = 0; r < PQntuples(res); r++)
		{
			int			i = atoi(PQgetvalue(res, r, 0)) - 1;
			HubShard   *h = hs[i];

			if (h->gen != gens[i] || h->followers == 0 || h->based ||
				(!h->listened && !cfeed_hub_on_standby()))
				continue;
			h->base = h->last = strtoll(PQgetvalue(res, r, 1), NULL, 10);
			if (h->last > h->head)
				h->head = h->last;
			h->epoch = strtoll(PQgetvalue(res, r, 2), NULL, 10);
			h->epoch_checked = true;
			h->based = true;
			based = true;
		}
		pthread_mutex_unlock(&cfeed_hub_lock);
		if (PQntuples(res) < n)
			cfeed_serve_log(LOG_DEBUG, "hub: %d followed shard(s) not found", n - PQntuples(res));
		PQclear(res);
	}
	free(hs);
	free(gens);
	if (based)
		(void) cfeed_hub_wake(false);
	if (failed || lost)
	{
		pthread_mutex_lock(&cfeed_hub_lock);
		cfeed_hub_activate_wanted = true;
		pthread_mutex_unlock(&cfeed_hub_lock);
	}
	if (failed)
		activate_retry_ms = cfeed_now_ms() + SERVE_RETRY_MS;
	return !lost;
}

/*
 * cfeed_hub_listen
 *		LISTEN again on the channels of the followed shards after a
 *		reconnect (cfeed_hub_heads_reset).  False when the connection is
 *		lost.
 */
bool
cfeed_hub_listen(PGconn *conn)
{
	HubShard  **hs;
	unsigned   *gens;
	int			n;
	bool		ok;

	if (!listen_wanted || cfeed_hub_on_standby() || cfeed_now_ms() < listen_retry_ms)
		return true;
	n = collect(WANT_LISTEN, &hs, &gens);
	ok = n == 0 || listen_on(conn, hs, n);
	if (ok && unlistened(hs, n))
		listen_retry_ms = cfeed_now_ms() + SERVE_RETRY_MS;
	else if (ok)
		listen_wanted = false;
	free(hs);
	free(gens);
	return ok;
}

/*
 * cfeed_hub_heads_reset
 *		On a new connection: every followed shard is to be LISTENed to
 *		again, now.
 */
void
cfeed_hub_heads_reset(void)
{
	listen_wanted = true;
	listen_retry_ms = activate_retry_ms = 0;
}

/*
 * cfeed_hub_heads_retry_ms
 *		When the hub should try again what a failure left undone (0: none).
 */
long long
cfeed_hub_heads_retry_ms(void)
{
	long long	now = cfeed_now_ms();
	long long	next = 0;

	if (listen_wanted && listen_retry_ms > now)
		next = listen_retry_ms;
	if (activate_retry_ms > now && (next == 0 || activate_retry_ms < next))
		next = activate_retry_ms;
	return next;
}

/*
 * cfeed_hub_safety
 *		The safety pass: mark due the followed shards whose head is past
 *		their tail, whose feed epoch is another, or that were not found.
 *		When the query fails but for a lost connection, every followed
 *		shard is due.  False when the connection is lost.
 */
bool
cfeed_hub_safety(PGconn *conn)
{
	HubShard  **hs;
	unsigned   *gens;
	int			n = collect(WANT_HEAD, &hs, &gens);
	bool	   *found = cfeed_serve_alloc(sizeof(bool) * (n > 0 ? n : 1));
	bool		lost = false;
	PGresult   *res = n > 0 ? heads(conn, hs, n, &lost) : NULL;

	if (n > 0 && res == NULL && !lost)
		cfeed_hub_mark_all_due();
	if (res != NULL)
	{
		memset(found, 0, sizeof(bool) * n);
		pthread_mutex_lock(&cfeed_hub_lock);
		for (int r = 0; r < PQntuples(res); r++)
		{
			int			i = atoi(PQgetvalue(res, r, 0)) - 1;
			HubShard   *h = hs[i];

			found[i] = true;
			if (h->gen == gens[i] && h->based &&
				(strtoll(PQgetvalue(res, r, 1), NULL, 10) > h->last ||
				 strtoll(PQgetvalue(res, r, 2), NULL, 10) != h->epoch ||
				 (cfeed_serve_epochs && !h->epoch_checked)))
				h->due = true;
		}
		for (int i = 0; i < n; i++)
			if (!found[i])
				hs[i]->due = true;
		pthread_mutex_unlock(&cfeed_hub_lock);
		PQclear(res);
	}
	free(hs);
	free(gens);
	free(found);
	return !lost;
}
