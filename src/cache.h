/*-------------------------------------------------------------------------
 *
 * cache.h
 *	  cfeed's backend state that outlives a call: the list of it, and the
 *	  registry that tells each cache of the invalidations that concern it
 *	  (cache.c).
 *
 * Every piece of backend state of cfeed that outlives a call: where it
 * lives, what it holds, how long it lasts and what drops it.  Nothing else
 * outlives a call: the rest of cfeed's static variables are constants.
 *
 * Caches, valid until an invalidation or checked at every use:
 *
 *	 relation OIDs		catalog.c: cfeed_relid's name -> OID of cfeed's own
 *						relations.  Backend.  Dropped whole at a relcache
 *						invalidation of one of them (DROP, RENAME, a rolled
 *						back CREATE) or of every relation, and at any change
 *						of pg_namespace.
 *	 shard counts		shards.c: per feed, its layout (number of shards,
 *						highest shard, lowest open and highest closed one);
 *						and whether shard_config has its guard trigger.  Backend.  Dropped at a relcache
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
 *	 extension member	sweep.c (member_change): the OID of the cfeed.change
 *						a sweep of this backend found to be a member of
 *						extension cfeed.  Backend.  Never dropped: compared
 *						with the OID each sweep locks, and looked up again
 *						when they differ (a move between the editions).
 *	 tracked relations	track_trigger.c: per relation a tracking trigger
 *						fired on, its feed, key columns and output functions,
 *						change_id column and tracked root.  Backend.  An entry
 *						is dropped at a relcache invalidation of its relation
 *						or of every relation.
 *	 row image plans	row_image.c: per relation, how each column becomes
 *						jsonb.  Backend.  As tracked relations.
 *	 access				read_access.c: for the current user, cfeed.read_grant
 *						and cfeed.write_grant, and the decisions made per
 *						feed (read and write) and per table.  Backend.
 *						Dropped when the user changes, at a relcache
 *						invalidation of either grant table, of a table
 *						decided about or of every relation, and at any change
 *						of pg_authid or pg_auth_members.
 *	 insert policies	direct.c: what the INSERT policies of cfeed.change
 *						say (whether a direct INSERT has their semantics,
 *						whether they refuse a change to a feed the user may
 *						not write), whoever the user.  Backend.  Dropped at a
 *						relcache invalidation of cfeed.change or of every
 *						relation, and at any change of pg_proc or
 *						pg_namespace.
 *	 row lockers		stamp.c (others_may_lock): whether a role other
 *						than cfeed.change's owner may lock its rows.  Backend.
 *						Dropped at a relcache invalidation of cfeed.change
 *						(GRANT and REVOKE on it or its columns send one) or of
 *						every relation, and at any change of pg_rewrite (a
 *						view or rule made or dropped) or pg_auth_members.
 *	 direct indexes		direct.c: the IndexInfo of cfeed.change's indexes,
 *						and an expression context for their predicates (reset
 *						after each row).  Backend.  Rebuilt when the table's
 *						index list differs from the one it was built for,
 *						compared at every direct write.
 *	 epoch memo			epoch.c (epoch_seen_*): the cluster, timeline, server
 *						start and cfeed.epoch OID whose epoch row this backend
 *						found committed, so that a sweep looks it up once.
 *						Backend.  Never dropped: a new timeline, a restart or
 *						a recreated extension no longer matches it, and the
 *						next sweep looks again.
 *	 secured timeline	change_id.c: the timeline on which this backend found
 *						cfeed.change_id secured (moved up past what earlier
 *						timelines may have issued), so that the check before
 *						every statement costs two comparisons.  Backend.
 *						Never dropped: a new timeline no longer matches it.
 *	 saved plans		append.c (3), stamp.c (1), ranges.c (2), read.c (6:
 *						read, read_rows and read_rows of a regclass tbl,
 *						each for rows and for ranges), epoch.c (2),
 *						sweeper.c (2: its once-a-second refresh):
 *						SPI plans kept for the backend.  PostgreSQL's plan
 *						cache re-plans them after an invalidation; one a rule
 *						rewrote into nothing is dropped by cfeed_spi_run.
 *
 * State of one transaction, statement or query (cleared at its end, on error
 * too):
 *
 *	 pending deletes	track_trigger.c: change_ids the BEFORE trigger drew
 *						for the AFTER trigger.  One transaction (the map is
 *						tagged with its local transaction id).
 *	 backfill mute		track_trigger.c (backfill_relid): the tracked table
 *						whose tracking triggers do nothing in this backend
 *						while backfill.c's statement copies its rows.  One
 *						statement; reset in PG_FINALLY.
 *	 image scope		guard.c: the table and feed whose row images
 *						cfeed's own statement may insert past change_guard.
 *						One statement; restored in PG_FINALLY.
 *	 tracked key		tracked.c: cfeed._track_key's key columns, in the
 *						call site's fn_extra.  One query.
 *	 commit wake-ups	shmem.c: whether the transaction recorded changes
 *						(wake the sweepers) and the wait buckets a sweep
 *						advanced (wake their readers), acted on at commit.
 *						One transaction.
 *	 stamp level		stamp.c (stamped_in_xact): the transaction stamped,
 *						so its commit level is set again at commit.  One
 *						transaction.
 *	 created extension	utility.c: CREATE EXTENSION cfeed ran, so the
 *						launcher probes the database at commit.  One
 *						transaction.
 *	 notifications		notify.c: the longpoll shards' new heads to NOTIFY
 *						at commit, each with its subtransaction level.
 *						One transaction.
 *
 * Process state, for the life of the process:
 *
 *	 cache registry		cache.c: each cache's invalidation callback, and
 *						whether the one relcache callback is registered.
 *	 hooks				the previous hooks cfeed chains to (ExecutorStart in
 *						change_id.c, ProcessUtility in utility.c, shared
 *						memory's in shmem.c), the transaction callbacks
 *						registered once (shmem.c, stamp.c, watermark.c,
 *						utility.c, notify.c), and CfeedShared, where cfeed's shared
 *						memory is (shmem.c).
 *	 sweeper			sweeper.c, in a sweeper worker: its slot in shared
 *						memory, the extension's owner and when it was last
 *						read, when retention last ran, and the state of its
 *						once-only and rate-limited warnings.
 *	 launcher			launcher.c, in the launcher: the sweepers it started.
 *	 owed notifications	notify.c: per longpoll shard whose NOTIFY a full
 *						queue made this process skip, the highest head;
 *						dropped once a commit has queued them.  And when
 *						the process last warned of a full queue.
 *	 settings			settings.c: the GUC variables (PostgreSQL sets them).
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
	CFEED_CACHE_POLICIES,		/* also pg_proc, pg_namespace */
	CFEED_CACHE_LOCKERS,		/* also pg_rewrite, pg_auth_members */
	CFEED_CACHE_HEAD_HINTS,		/* never invalidated */
	CFEED_CACHE_COUNT
} CfeedCacheId;

/* Relation relid changed; InvalidOid: every relation, or a watched catalog. */
typedef void (*CfeedInvalidate) (Oid relid);

extern void cfeed_cache_register(CfeedCacheId id, CfeedInvalidate invalidate);
extern HTAB *cfeed_cache_hash(CfeedCacheId id, CfeedInvalidate invalidate,
							  const char *name, Size keysize, Size entrysize);

#endif							/* CFEED_CACHE_H */
