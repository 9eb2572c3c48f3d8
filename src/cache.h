/*-------------------------------------------------------------------------
 *
 * cache.h
 *	  cfeed's backend-local caches: the list of them, and the registry that
 *	  tells each one of the invalidations that concern it (cache.c).
 *
 * Every cache of cfeed, where it lives, how long it lasts and what drops it:
 *
 *	 relation OIDs		catalog.c: cfeed_relid's name -> OID of cfeed's own
 *						relations.  Backend.  Dropped whole at a relcache
 *						invalidation of one of them (DROP, RENAME, a rolled
 *						back CREATE) or of every relation, and at any change
 *						of pg_namespace.
 *	 shard counts		shards.c: per feed, its number of shards and highest
 *						shard; and whether shard_config has its guard
 *						trigger.  Backend.  Dropped at a relcache
 *						invalidation of cfeed.shard_config (its guard trigger
 *						sends one for every change to the set of shards) or
 *						of every relation.
 *	 watermarks			watermark.c: per sweep group, the xid watermark of
 *						the last committed sweep, and one proposed by a sweep
 *						that has not committed yet.  Backend; a proposed one
 *						lives until its (sub)transaction ends.  Dropped at a
 *						relcache invalidation of cfeed.shard_config or of
 *						every relation.
 *	 head hints			sweep.c: per shard, the head this backend's last
 *						sweep left.  Backend.  Never dropped: a hint, checked
 *						against change_sequence_idx at every use.
 *	 tracked relations	track_trigger.c: per relation a tracking trigger
 *						fired on, its feed, key columns and output functions,
 *						change_id column and tracked root.  Backend.  An entry
 *						is dropped at a relcache invalidation of its relation
 *						or of every relation.
 *	 row image plans	row_image.c: per relation, how each column becomes
 *						jsonb.  Backend.  As tracked relations.
 *	 read access		read_access.c: for the current user, cfeed.read_grant
 *						and the decisions made per feed and per table.
 *						Backend.  Dropped when the user changes, at a relcache
 *						invalidation of cfeed.read_grant, of a table decided
 *						about or of every relation, and at any change of
 *						pg_authid or pg_auth_members.
 *	 direct indexes		direct.c: the IndexInfo of cfeed.change's indexes.
 *						Backend.  Rebuilt when the table's index list differs
 *						from the one it was built for, compared at every
 *						direct write.
 *	 pending deletes	track_trigger.c: change_ids the BEFORE trigger drew
 *						for the AFTER trigger.  One transaction.
 *	 tracked key		tracked.c: cfeed._track_key's key columns, in the
 *						call site's fn_extra.  One query.
 *	 saved plans		append.c (3), stamp.c (1), read.c (2): SPI plans kept
 *						for the backend.  PostgreSQL's plan cache re-plans
 *						them after an invalidation; one a rule rewrote into
 *						nothing is dropped by cfeed_spi_run.
 *
 * The caches in the registry (CfeedCacheId) register their callback when
 * they are first filled: an empty cache needs no invalidation, and
 * PostgreSQL allows a backend only ten relcache callbacks, so cfeed uses one
 * for all of them.  A callback is told the relation that changed, or
 * InvalidOid for every relation (a cache reset) and for a change of a
 * system catalog the cache watches; it may run in the middle of anything
 * that reads invalidations (taking a lock, say), so it only marks entries
 * stale and never frees memory an in-progress lookup may hold.
 *
 *-------------------------------------------------------------------------
 */
#ifndef CFEED_CACHE_H
#define CFEED_CACHE_H

#include "postgres.h"

#include "utils/hsearch.h"

/* The caches with a hash table or invalidations (see the list above). */
typedef enum CfeedCacheId
{
	CFEED_CACHE_RELIDS,			/* also pg_namespace */
	CFEED_CACHE_SHARD_COUNTS,
	CFEED_CACHE_WATERMARKS,
	CFEED_CACHE_TRACKED_RELS,
	CFEED_CACHE_ROW_IMAGES,
	CFEED_CACHE_READ_ACCESS,	/* also pg_authid, pg_auth_members */
	CFEED_CACHE_HEAD_HINTS,		/* never invalidated */
	CFEED_CACHE_COUNT
} CfeedCacheId;

/* Relation relid changed; InvalidOid: every relation, or a watched catalog. */
typedef void (*CfeedInvalidate) (Oid relid);

extern void cfeed_cache_register(CfeedCacheId id, CfeedInvalidate invalidate);
extern HTAB *cfeed_cache_hash(CfeedCacheId id, CfeedInvalidate invalidate,
							  const char *name, Size keysize, Size entrysize);

#endif							/* CFEED_CACHE_H */
