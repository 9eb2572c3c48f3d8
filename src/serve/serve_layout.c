/*
 * src/serve/serve_layout.c
 *		A feed's layout as FeedAPI publishes it: which of its shards are
 *		partitions, which are closed, which start after which, and the
 *		discovery token that names that layout.
 *
 * Resharding (cfeed 1.9, docs/reference.md) closes a feed's open shards and
 * creates children, each continuing a parent (cfeed.shard's parent); a
 * closed shard has ended once no change waits for a stamp on it (its number
 * never grows again).  FeedAPI's "closed" promises that no new event will
 * appear on a partition, and a consumer that reads a closed partition to
 * its end goes on with the partitions that start after it; so:
 *
 *	 - a shard is listed closed only once it has ended (a closed shard
 *	   whose last changes are still being stamped is listed open);
 *	 - a child is listed, with startsAfterPartition its parent, only once
 *	   its parent is listed closed: before that, nothing of it is
 *	   published (discovery, fetch, Server-Sent Events);
 *	 - the token is a hash of the listed layout, so it changes when a
 *	   shard is added or ends, and fetches with the old one get 409.
 *
 * A feed never resharded lists every shard, open, with the token it had
 * before 1.9 (the hash of the comma-separated shard numbers).  Shards with
 * ids above 32767 are never partitions (docs/serve.md): the callers leave
 * them out.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve.h"

/*
 * cfeed_layout_list
 *		Decide which of feed_id's n shards (ascending, with their parents,
 *		-1 for none, and whether each has ended) are listed (see the file
 *		header) into listed[], set parents[i] to -1 where the parent is not
 *		a partition, and write the layout's token.  Returns how many are
 *		listed.
 */
int
cfeed_layout_list(int feed_id, int n, const int *shards, int *parents,
				  const bool *ended, bool *listed, char *token, size_t size)
{
	ServeBuf	text = {0};
	unsigned long long h = 14695981039346656037ULL;
	int			count = 0;

	cfeed_buf_append(&text, "", 0);
	for (int i = 0; i < n; i++)
	{
		int			p = -1;

		/* a parent has a lower number than its children */
		for (int j = 0; parents[i] >= 0 && j < i && p < 0; j++)
			if (shards[j] == parents[i])
				p = j;
		listed[i] = p < 0 || (listed[p] && ended[p]);
		if (p < 0)
			parents[i] = -1;	/* an original shard, or its parent is gone */
		if (!listed[i])
			continue;
		cfeed_buf_printf(&text, "%s%d", count++ ? "," : "", shards[i]);
		if (ended[i])
			cfeed_buf_append(&text, "c", 1);
		if (parents[i] >= 0)
			cfeed_buf_printf(&text, "<%d", parents[i]);
	}

	/* "v1-<feed_id>-<FNV-1a of the layout>" */
	for (const char *c = text.data; *c; c++)
	{
		h ^= (unsigned char) *c;
		h *= 1099511628211ULL;
	}
	snprintf(token, size, "v1-%d-%016llx", feed_id, h);
	free(text.data);
	return count;
}

/*
 * cfeed_layout_probe
 *		Whether the database's shards have layouts (cfeed.shard has the
 *		parent and ended columns of cfeed 1.9); false also when the query
 *		fails (the caller has checked that cfeed.shard can be read).
 */
bool
cfeed_layout_probe(PGconn *conn)
{
	PGresult   *res = PQexec(conn,
							 "select count(*) = 2 from pg_catalog.pg_attribute"
							 " where attrelid = 'cfeed.shard'::pg_catalog.regclass"
							 " and attname in ('parent', 'ended') and not attisdropped");
	bool		has = cfeed_result_ok(res, PGRES_TUPLES_OK) && PQntuples(res) == 1 &&
		strcmp(PQgetvalue(res, 0, 0), "t") == 0;

	PQclear(res);
	return has;
}
