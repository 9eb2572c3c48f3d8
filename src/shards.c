/*-------------------------------------------------------------------------
 *
 * shards.c
 *	  A feed's shards as a writer sees them: the shard of a key, the
 *	  layouts (shard counts, open and closed shards) each backend keeps,
 *	  and the feed's shards lock that stands in for a foreign key of
 *	  cfeed.change, on a direct write (append.c) and on an INSERT
 *	  (change_guard, guard.c), and keeps a feed's layout from changing
 *	  under a writer (reshard.c).  The triggers of cfeed.shard_config that
 *	  make it hold are in shard_guard.c.
 *
 * The shard of a key
 * ------------------
 * cfeed_key_shard's hash is part of the public contract (clients outside
 * the database compute it too, for cfeed.shard_for and the tracking
 * triggers alike): FNV-1a, 32 bits, over the key's UTF-8 bytes (offset basis
 * 2166136261, prime 16777619), taken as an unsigned 32-bit number modulo
 * the number of the feed's open shards, plus the first open one.  A feed's
 * layout is its shards 0..n-1, of which the highest are open and the ones
 * below closed (cfeed.reshard closes the open ones and adds their children
 * above); a feed never resharded has all its shards open, and a key's shard
 * is the hash modulo n.
 *
 * The shards lock instead of a foreign key
 * ----------------------------------------
 * A foreign key's own check would lock the shard's row FOR KEY SHARE, after
 * an index lookup: a WAL record and, with concurrent writers, a new
 * multixact on a row all writers of the shard lock.  cfeed.change has no
 * foreign key.  Instead, the guard trigger of cfeed.shard_config
 * (shard_guard.c) makes a shard row that goes away (DELETE, or UPDATE of
 * its key) take a heavyweight lock on its feed's set of shards in exclusive
 * mode, and sends an invalidation of shard_config for every change to the
 * set of shards.  One lock per feed, not per shard: a bulk write to a feed
 * of thousands of shards must not fill the lock table, and deleting a shard
 * is rare enough to wait for all the feed's writers.  A direct writer then:
 *
 *	 1. processes the invalidations that came, takes the feed's shard count
 *		from this backend's memory (read with a fresh snapshot after
 *		shard_config's last invalidation), and the key's shard from it;
 *	 2. takes the feed's shards lock in share mode, until the transaction
 *		ends;
 *	 3. if that lock is new, processes the invalidations that came before
 *		it, and starts again from 1 if shard_config's was among them.
 *
 * cfeed.publish, whose caller names the shard, checks at 1 that it is one of
 * the feed's open shards (the layout is remembered with the count), refuses
 * a closed one (55000) once 3 confirms the layout, and otherwise leaves the
 * change to the SQL path, which reports a missing shard or writes to one
 * this backend does not know yet.  An INSERT's check
 * (cfeed_shard_check) does the same, and for a shard it does not know takes
 * the lock and looks the shard up with SnapshotSelf.  A transaction that
 * holds the lock in exclusive mode (it takes shards of the feed away
 * itself) skips 1 to 3: its counts are stale within the command that did
 * it, so it writes by SQL and looks the shard up likewise.
 *
 * A transaction that deleted the shard committed either before 3, and its
 * invalidation (sent before its locks are released) is seen there, or after
 * this transaction, having waited for it at its BEFORE trigger; after that
 * the trigger sees this transaction's change with SnapshotSelf and fails
 * with 23503, as a foreign key would: no writer of the feed is in progress
 * once it holds the lock in exclusive mode.  SnapshotSelf, unlike a fresh
 * MVCC snapshot, also sees the rows of the current command: a statement
 * that deletes a shard and writes a change to it (a data-modifying WITH)
 * fails whichever part runs first, as a foreign key's checks at the end of
 * the statement would.  A lock held already was checked when it was taken,
 * and an aborted subtransaction releases its locks.  When a concurrent
 * deletion renumbers the shards, the writer waits for it and then places
 * the change by the new count.  Without the guard trigger (a database whose
 * cfeed schema is not yet updated to have it) changes take the SQL path.
 * TRUNCATE of shard_config holds it in ACCESS EXCLUSIVE mode, which every
 * writer's ACCESS SHARE waits for, and is refused by an AFTER TRUNCATE
 * trigger unless cfeed.change is empty then.
 *
 * Writers that do not check (replica mode, the extension owner's restored
 * rows: guard.c) take no lock: a shard deleted meanwhile leaves their
 * changes behind.  Nor is a shard's deletion refused in replica mode: a
 * logical subscriber applies its publisher's deletion of a shard.
 *
 * Resharding: the same lock keeps a feed's layout while a writer that
 * placed a change by it is in progress.  cfeed.reshard takes it in
 * exclusive mode (and the guard trigger for a shard closed, opened or
 * added open by hand: each changes where keys go), so
 * it commits after every change placed by the old layout, and every change
 * placed after it commits after it, by the new layout (its invalidation is
 * seen at 3).  A closed shard is refused at 1 or, for a shard this backend
 * did not know, by the SQL path's check.  A key's shard given to SQL
 * (cfeed.shard_for, the tracked SQL path) is chosen under the lock too,
 * where the transaction can write and the current user may write the feed
 * (cfeed_shard_of_key), so that the INSERT that follows is not refused by
 * a reshard committed in between; elsewhere (read-only, a hot standby,
 * parallel mode, a role without a write grant on the feed) nothing is
 * locked and the shard is the layout's as of the last invalidation.  A
 * role that may not write the feed cannot hold its lock, by shard_for or
 * by an INSERT (change_guard checks the grant first, guard.c), and so
 * cannot keep the feed from being resharded.
 *
 * Locking protocol, in short: a writer of a change (direct, or an INSERT's
 * check, or cfeed.shard_for where it can write the feed) holds its feed's
 * shards lock (locks.c) in share mode until its transaction ends; a
 * transaction that takes a shard away, closes or opens one, or adds an
 * open one holds it in exclusive mode; a transaction that moves a shard
 * between sweep groups holds both groups' sweep locks.  The layouts are
 * cached per backend (cache.h) until shard_config's next invalidation.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/tableam.h"
#include "catalog/pg_trigger.h"
#include "commands/trigger.h"
#include "executor/tuptable.h"
#include "fmgr.h"
#include "mb/pg_wchar.h"
#include "storage/lmgr.h"
#include "utils/fmgroids.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "cache.h"
#include "cfeed.h"
#include "shmem.h"

#define SHARD_GUARD_TRIGGER			"shard_config_guard"

/* The layout of a feed, valid while gen is shard_counts_gen. */
typedef struct CfeedShardCount
{
	int32		feed_id;		/* hash key */
	CfeedLayout layout;
	uint64		gen;
} CfeedShardCount;

static HTAB *shard_counts = NULL;
static uint64 shard_counts_gen = 1;	/* bumped by shard_config's invalidations */
static Oid	shard_config_relid = InvalidOid;
static uint64 guard_gen = 0;	/* guard_present holds while it is shard_counts_gen */
static bool guard_present = false;

/*
 * fnv1a
 *		FNV-1a, 32 bits, of a byte string.
 */
static uint32
fnv1a(const unsigned char *bytes, size_t len)
{
	uint32		h = 2166136261u;
	size_t		i;

	for (i = 0; i < len; i++)
	{
		h ^= bytes[i];
		h *= 16777619u;
	}
	return h;
}

/*
 * cfeed_key_shard
 *		The shard of a partition key given in the server encoding among the
 *		count (> 0) shards first .. first+count-1: first plus FNV-1a 32 of
 *		its UTF-8 bytes modulo count.  Shared by cfeed.shard_for and the
 *		tracking triggers, so that both always agree.
 */
int32
cfeed_key_shard(const char *key, int len, int32 first, int32 count)
{
	const char *utf8 = pg_server_to_any(key, len, PG_UTF8);
	uint32		h;

	if (utf8 != key)
		len = strlen(utf8);
	h = fnv1a((const unsigned char *) utf8, len);
	if (utf8 != key)
		pfree((void *) utf8);
	return first + (int32) (h % (uint32) count);
}

/*
 * layout_routable
 *		Whether keys can be routed by the layout: shards numbered 0..n-1, at
 *		least one open, the open ones the highest.
 */
static bool
layout_routable(const CfeedLayout *layout)
{
	return layout->count > 0 && layout->max_shard == layout->count - 1 &&
		layout->first_open >= 0 && layout->max_closed < layout->first_open;
}

/*
 * cfeed_check_layout
 *		Raise 42704 for a feed without shards (unknown, or with none) and
 *		55000 when shard_for cannot route by its layout: its shards are not
 *		numbered 0..n-1, none is open, or a closed one is above an open one.
 */
void
cfeed_check_layout(int32 feed_id, const CfeedLayout *layout)
{
	if (layout->count == 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg(cfeed_feed_exists(feed_id) ? "feed %d has no shards" : "feed %d does not exist",
						feed_id),
				 errhint("Create it with cfeed.create_feed().")));
	if (layout->max_shard != layout->count - 1)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("shards of feed %d are not numbered 0..%d", feed_id, layout->count - 1),
				 errdetail("The feed has %d shards, the highest being %d.", layout->count,
						   layout->max_shard),
				 errhint("cfeed.shard_for() needs contiguous shard numbers starting at 0.")));
	if (layout->first_open < 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("feed %d has no open shard", feed_id),
				 errdetail("All of its %d shards are closed.", layout->count),
				 errhint("Open its highest shards again (cfeed.shard_config.closed), or create new ones.")));
	if (layout->max_closed > layout->first_open)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the open shards of feed %d are not its highest", feed_id),
				 errdetail("Shard %d is closed and shard %d is open.", layout->max_closed,
						   layout->first_open),
				 errhint("cfeed.shard_for() routes keys to the highest shards, those above the closed ones.")));
	Assert(layout_routable(layout));
}

/*
 * cfeed_feed_layout
 *		A feed's layout (see CfeedLayout), read with a fresh snapshot.
 */
void
cfeed_feed_layout(int32 feed_id, CfeedLayout *layout)
{
	Relation	rel;
	SysScanDesc scan;
	ScanKeyData key;
	HeapTuple	tup;
	Oid			pkey;
	Snapshot	snapshot = cfeed_fresh_snapshot();
	TupleDesc	desc;

	layout->count = 0;
	layout->max_shard = -1;
	layout->first_open = -1;
	layout->max_closed = -1;
	rel = cfeed_table_open("shard_config", AccessShareLock);
	desc = RelationGetDescr(rel);
	ScanKeyInit(&key, Anum_shard_feed_id, BTEqualStrategyNumber,
				F_INT4EQ, Int32GetDatum(feed_id));
	pkey = cfeed_relid_locked("shard_config_pkey", AccessShareLock);
	scan = systable_beginscan(rel, pkey, true, snapshot, 1, &key);
	while (HeapTupleIsValid(tup = systable_getnext(scan)))
	{
		bool		isnull;
		Datum		closed;
		int32		s = DatumGetInt32(heap_getattr(tup, Anum_shard_shard, desc, &isnull));

		layout->count++;
		layout->max_shard = Max(layout->max_shard, s);
		if (cfeed_shard_column(desc, tup, Anum_shard_closed, "closed", &closed) &&
			DatumGetBool(closed))
			layout->max_closed = Max(layout->max_closed, s);
		else if (layout->first_open < 0 || s < layout->first_open)
			layout->first_open = s;
	}
	systable_endscan(scan);
	UnlockRelationOid(pkey, AccessShareLock);
	table_close(rel, AccessShareLock);
	UnregisterSnapshot(snapshot);
}

/*
 * cfeed_feed_shard_count
 *		Number of shards of a feed, open and closed (fresh snapshot); errors
 *		as cfeed_check_layout.
 */
int32
cfeed_feed_shard_count(int32 feed_id)
{
	CfeedLayout layout;

	cfeed_feed_layout(feed_id, &layout);
	cfeed_check_layout(feed_id, &layout);
	return layout.count;
}

/*
 * cfeed_shard_closed
 *		Raise 55000 for a write to a closed shard.
 */
void
cfeed_shard_closed(int32 feed_id, int32 shard)
{
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("shard %d of feed %d is closed", shard, feed_id),
			 errdetail("cfeed.reshard() closed it: its changes go on in its children."),
			 errhint("Place the change with cfeed.shard_for(%d, key).", feed_id)));
}

/*
 * shard_counts_invalidate
 *		The cache's invalidation callback (cache.c): shard_config (or every
 *		relation) has changed; forget the shard counts and whether the guard
 *		trigger exists.
 */
static void
shard_counts_invalidate(Oid relid)
{
	if (!OidIsValid(relid) || relid == shard_config_relid)
		shard_counts_gen++;
}

/*
 * cfeed_shards_guarded
 *		Whether cfeed.shard_config has its guard trigger, always enabled;
 *		without it the shard counts are not cached and the direct path is
 *		not taken.
 */
bool
cfeed_shards_guarded(void)
{
	cfeed_cache_register(CFEED_CACHE_SHARD_COUNTS, shard_counts_invalidate);
	if (guard_gen != shard_counts_gen)
	{
		Relation	rel = cfeed_table_open("shard_config", AccessShareLock);
		TriggerDesc *td = rel->trigdesc;
		int			i;

		shard_config_relid = RelationGetRelid(rel);
		guard_present = false;
		for (i = 0; td != NULL && i < td->numtriggers; i++)
		{
			Trigger    *t = &td->triggers[i];

			if (strcmp(t->tgname, SHARD_GUARD_TRIGGER) == 0 &&
				t->tgenabled == TRIGGER_FIRES_ALWAYS &&
				TRIGGER_FOR_ROW(t->tgtype) && TRIGGER_FOR_BEFORE(t->tgtype) &&
				TRIGGER_FOR_INSERT(t->tgtype) && TRIGGER_FOR_DELETE(t->tgtype) &&
				TRIGGER_FOR_UPDATE(t->tgtype) && t->tgqual == NULL)
				guard_present = true;
		}
		table_close(rel, AccessShareLock);
		guard_gen = shard_counts_gen;
	}
	return guard_present;
}

/*
 * feed_shards
 *		The layout of a feed, remembered until shard_config's next
 *		invalidation (the guard trigger must be present: the caller checks).
 */
static CfeedShardCount *
feed_shards(int32 feed_id)
{
	uint64		gen = shard_counts_gen;
	CfeedShardCount *entry;
	CfeedLayout layout;

	if (shard_counts == NULL)
		shard_counts = cfeed_cache_hash(CFEED_CACHE_SHARD_COUNTS, shard_counts_invalidate,
										"cfeed shard counts", sizeof(int32),
										sizeof(CfeedShardCount));
	entry = (CfeedShardCount *) hash_search(shard_counts, &feed_id, HASH_FIND, NULL);
	if (entry != NULL && entry->gen == gen)
		return entry;

	cfeed_feed_layout(feed_id, &layout);
	entry = (CfeedShardCount *) hash_search(shard_counts, &feed_id, HASH_ENTER, NULL);
	entry->layout = layout;
	entry->gen = gen;			/* stale at once if an invalidation came meanwhile */
	return entry;
}

/*
 * key_shard
 *		The shard of a key by the feed's layout as of the last committed
 *		change to the feed's shards (the invalidations that came are read
 *		first), and in *gen the invalidation count it was chosen at: from a
 *		fresh read each time when shard_config has no guard trigger to send
 *		the invalidations (errors as cfeed_check_layout).
 */
static int32
key_shard(int32 feed_id, const char *key, int keylen, uint64 *gen)
{
	CfeedLayout fresh;
	const CfeedLayout *layout = &fresh;

	AcceptInvalidationMessages();
	*gen = shard_counts_gen;
	if (cfeed_shards_guarded())
		layout = &feed_shards(feed_id)->layout;
	else
		cfeed_feed_layout(feed_id, &fresh);
	cfeed_check_layout(feed_id, layout);
	return cfeed_key_shard(key, keylen, layout->first_open,
						   layout->count - layout->first_open);
}

/*
 * shards_locked
 *		The foreign-key check of a change to a feed (see the file header):
 *		take the feed's shards lock in share mode, then read the
 *		invalidations that came before it.  True when the shards the change
 *		was placed by, as of invalidation count gen, are still current.
 */
static bool
shards_locked(int32 feed_id, uint64 gen)
{
	if (!cfeed_shards_lock(feed_id, AccessShareLock))
		return true;			/* held since it was checked */
	AcceptInvalidationMessages();
	return gen == shard_counts_gen;
}

/*
 * cfeed_shard_of_key
 *		The shard of a key for a change about to be written by SQL
 *		(cfeed.shard_for, the tracked SQL path; the INSERT checks the shard):
 *		by the feed's layout as of the last committed change to its shards,
 *		under the feed's shards lock in share mode, held until the
 *		transaction ends, where it can be taken (the transaction can write:
 *		not read-only, as on a standby, not in parallel mode; the current
 *		user may write the feed, so that no other role can keep the feed
 *		from being resharded; the guard trigger is there; this transaction
 *		does not change the feed's shards itself), so that the layout stays
 *		the one the key was placed by until the change commits.  Errors as
 *		cfeed_check_layout.
 */
int32
cfeed_shard_of_key(int32 feed_id, const char *key, int keylen)
{
	uint64		gen;

	if (!XactReadOnly && !IsInParallelMode() && cfeed_may_write_feed(feed_id) &&
		cfeed_shards_guarded())
	{
		int32		shard = cfeed_shard_locked(feed_id, key, keylen, -1);

		if (shard >= 0)
			return shard;
	}
	return key_shard(feed_id, key, keylen, &gen);
}

/*
 * cfeed_shard_locked
 *		The shard of a change written directly to a feed, with the foreign-key
 *		check of a change to it (the feed's shards lock, see the file
 *		header): with a key, the key's shard; else shard, when it is one of
 *		the feed's open shards as this backend knows them, or -1 (nothing
 *		locked) when it is not, for the SQL path to report a missing shard or
 *		write to one added since.  A shard this backend knows as closed is
 *		refused (55000) once the lock confirms the layout.  Also -1 in a
 *		transaction that holds the lock in exclusive mode, having changed
 *		the feed's shards itself: its pending invalidations are not read
 *		before its command ends, so the layout is stale within the command
 *		that did it; the SQL path's check (cfeed_shard_check) looks at the
 *		catalog instead.  The caller has checked cfeed_shards_guarded.
 */
int32
cfeed_shard_locked(int32 feed_id, const char *key, int keylen, int32 shard)
{
	if (cfeed_shards_lock_held(feed_id, AccessExclusiveLock))
		return -1;
	for (;;)
	{
		uint64		gen;
		int32		placed = shard;
		bool		closed = false;

		if (key != NULL)
			placed = key_shard(feed_id, key, keylen, &gen);
		else
		{
			const CfeedLayout *layout;

			AcceptInvalidationMessages();
			gen = shard_counts_gen;
			layout = &feed_shards(feed_id)->layout;
			if (shard < 0 || shard > layout->max_shard || !layout_routable(layout))
				return -1;
			closed = shard < layout->first_open;
		}
		if (shards_locked(feed_id, gen))
		{
			if (closed)
				cfeed_shard_closed(feed_id, shard);
			return placed;
		}
	}
}

/*
 * cfeed_shard_check
 *		The foreign-key check of a change that an INSERT writes
 *		(change_guard and change_shard_guard, guard.c): the check of
 *		cfeed_shard_locked, falling back to the catalog (under the same lock)
 *		for a shard this backend does not know as one of the feed's 0..n-1,
 *		or when this transaction takes shards of the feed away itself.
 *		Raises 23503 when the feed or the shard does not exist.  The caller
 *		holds cfeed.change in ROW EXCLUSIVE mode, as the foreign key's check
 *		did when it locked shard_config.
 *
 *		The catalog is read with SnapshotSelf: what has committed, and every
 *		command of this transaction including the current one.  The foreign
 *		key checked at the end of the statement, which saw all of it; an MVCC
 *		snapshot would miss a shard deleted (or added) earlier in the same
 *		command, as by a data-modifying WITH.  Another transaction's change
 *		to the feed's shards in progress is either waited for (a deletion
 *		holds the lock in exclusive mode) or not seen (an added shard, as with
 *		an MVCC snapshot).  A shard the statement adds after the change is
 *		written is still missing then (23503, where the foreign key accepted
 *		it): a refusal, never an orphan.
 */
void
cfeed_shard_check(int32 feed_id, int32 shard)
{
	CfeedShard	sh;

	(void) cfeed_relid_locked("shard_config", AccessShareLock);
	if (cfeed_shards_guarded() && cfeed_shard_locked(feed_id, NULL, 0, shard) >= 0)
		return;
	(void) cfeed_shards_lock(feed_id, AccessShareLock);
	if (!cfeed_shard_fetch(feed_id, shard, SnapshotSelf, false, &sh))
		cfeed_shard_missing(feed_id, shard, ERRCODE_FOREIGN_KEY_VIOLATION,
							"Every change of cfeed.change belongs to a shard of cfeed.shard_config.");
	if (sh.closed && SessionReplicationRole != SESSION_REPLICATION_ROLE_REPLICA)
		cfeed_shard_closed(feed_id, shard);
}
