/*-------------------------------------------------------------------------
 *
 * catalog.c
 *	  Lookups in cfeed's own catalogs (cfeed.feed, cfeed.shard) by direct
 *	  index access, for checks that must not depend on the caller's table
 *	  privileges (a writer publishes without SELECT on the catalogs) and for
 *	  the hot paths that must not pay for SPI.
 *
 *	  The functions that return data to a user check SELECT themselves
 *	  (cfeed_shard_get with check_select); existence checks do not: they only
 *	  tell whether a feed or shard exists, which every error message says.
 *
 *	  Locking: every relation of cfeed is opened through cfeed_relid_locked,
 *	  which takes the caller's lock mode and looks the name up again when
 *	  invalidations arrived while it waited (a relation dropped or swapped
 *	  by REINDEX CONCURRENTLY).  Catalog lookups take ACCESS SHARE and use a
 *	  fresh snapshot unless the caller passes one (a sweep passes its own).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/indexing.h"
#include "catalog/namespace.h"
#include "catalog/pg_extension.h"
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "storage/sinval.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
#include "utils/xid8.h"

#include "cache.h"
#include "cfeed.h"

/*
 * cfeed_schema_oid
 *		OID of schema cfeed; errors out (or returns InvalidOid) when the
 *		extension is not installed in this database.
 */
Oid
cfeed_schema_oid(bool missing_ok)
{
	Oid			nsp = get_namespace_oid(CFEED_SCHEMA, true);

	if (!OidIsValid(nsp) && !missing_ok)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("extension \"cfeed\" is not installed in this database"),
				 errhint("Run CREATE EXTENSION cfeed.")));
	return nsp;
}

/*
 * The OIDs cfeed_relid has looked up, by name.  An entry stays valid until
 * a relcache invalidation names its relation (DROP, RENAME, and the rollback
 * of a CREATE all send one), or all relations (a cache reset), or a schema
 * changes; the callback (relids_invalidate) then forgets every entry.
 * This spares the hot paths (the triggers of a tracked table, shard_for) two
 * syscache lookups per relation per call.
 */
#define RELID_CACHE_SIZE			16

typedef struct CfeedRelidEntry
{
	char		name[NAMEDATALEN];
	Oid			relid;
} CfeedRelidEntry;

static CfeedRelidEntry relid_cache[RELID_CACHE_SIZE];
static int	relid_cache_used = 0;

/*
 * relids_invalidate
 *		The cache's invalidation callback (cache.c): forget every entry if
 *		the relation is one of them, or for InvalidOid (every relation, or a
 *		change of pg_namespace: the schema's name or OID may have changed).
 */
static void
relids_invalidate(Oid relid)
{
	int			i;

	for (i = 0; i < relid_cache_used; i++)
	{
		if (!OidIsValid(relid) || relid_cache[i].relid == relid)
		{
			relid_cache_used = 0;
			return;
		}
	}
}

/*
 * cfeed_relid
 *		OID of a relation (table, index, sequence) of schema cfeed.
 */
Oid
cfeed_relid(const char *relname)
{
	Oid			relid;
	int			i;

	cfeed_cache_register(CFEED_CACHE_RELIDS, relids_invalidate);
	for (i = 0; i < relid_cache_used; i++)
	{
		if (strcmp(relid_cache[i].name, relname) == 0)
			return relid_cache[i].relid;
	}

	relid = get_relname_relid(relname, cfeed_schema_oid(false));
	if (!OidIsValid(relid))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("relation cfeed.%s does not exist", relname),
				 errdetail("The extension cfeed is being dropped, or one of its relations was dropped by hand."),
				 errhint("Reinstall it with DROP EXTENSION cfeed and CREATE EXTENSION cfeed.")));

	if (relid_cache_used < RELID_CACHE_SIZE)
	{
		strlcpy(relid_cache[relid_cache_used].name, relname, NAMEDATALEN);
		relid_cache[relid_cache_used].relid = relid;
		relid_cache_used++;
	}
	return relid;
}

/*
 * cfeed_relid_locked
 *		OID of relation cfeed.<relname>, locked in lockmode (until the end of
 *		the transaction, or until the caller unlocks it: an index passed to
 *		systable_beginscan is unlocked after systable_endscan).  The OID cfeed_relid remembers can be stale until an
 *		invalidation is read, and taking a lock is what reads them: a
 *		relation dropped meanwhile (DROP EXTENSION), or an index that REINDEX
 *		CONCURRENTLY swapped for a new one, would fail with "could not open
 *		relation".  So, as RangeVarGetRelidExtended does, when invalidations
 *		arrived while locking, look the name up again and start over if it
 *		now names another relation.
 */
Oid
cfeed_relid_locked(const char *relname, LOCKMODE lockmode)
{
	Oid			locked = InvalidOid;

	for (;;)
	{
		uint64		inval_count = SharedInvalidMessageCounter;
		Oid			relid = cfeed_relid(relname);

		if (OidIsValid(locked))
		{
			if (relid == locked)
				return relid;
			UnlockRelationOid(locked, lockmode);
		}
		LockRelationOid(relid, lockmode);
		if (inval_count == SharedInvalidMessageCounter)
			return relid;
		locked = relid;
	}
}

/*
 * cfeed_table_open / cfeed_index_open
 *		Open cfeed.<relname> with lockmode (see cfeed_relid_locked).
 */
Relation
cfeed_table_open(const char *relname, LOCKMODE lockmode)
{
	return table_open(cfeed_relid_locked(relname, lockmode), NoLock);
}

Relation
cfeed_index_open(const char *relname, LOCKMODE lockmode)
{
	return index_open(cfeed_relid_locked(relname, lockmode), NoLock);
}

/*
 * cfeed_find_extension_owner
 *		The role that owns the cfeed extension in this database, InvalidOid
 *		when it is not installed.  Reads pg_extension itself, with the
 *		transaction's catalog snapshot, not through a cache: after
 *		InvalidateCatalogSnapshot() it sees every CREATE EXTENSION whose
 *		commit has ended, even one whose invalidations are not sent yet
 *		(PostgreSQL 18's get_extension_oid() answers from a syscache, which
 *		can still hold "not installed" then; sweeper.c relies on this).
 */
Oid
cfeed_find_extension_owner(void)
{
	Relation	rel;
	SysScanDesc scan;
	ScanKeyData key;
	HeapTuple	tup;
	Oid			owner = InvalidOid;

	rel = table_open(ExtensionRelationId, AccessShareLock);
	ScanKeyInit(&key, Anum_pg_extension_extname, BTEqualStrategyNumber,
				F_NAMEEQ, CStringGetDatum("cfeed"));
	scan = systable_beginscan(rel, ExtensionNameIndexId, true, NULL, 1, &key);
	tup = systable_getnext(scan);
	if (HeapTupleIsValid(tup))
		owner = ((Form_pg_extension) GETSTRUCT(tup))->extowner;
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return owner;
}

/*
 * cfeed_extension_owner
 *		The role that owns the cfeed extension in this database.
 */
Oid
cfeed_extension_owner(void)
{
	Oid			owner = cfeed_find_extension_owner();

	if (!OidIsValid(owner))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("extension \"cfeed\" is not installed in this database")));
	return owner;
}

/*
 * cfeed_number_probe
 *		First number of a shard in direction dir among those compared with
 *		bound by strategy (as of the snapshot), in *number, and with
 *		stamped_at its stamped_at (DT_NOBEGIN when null); with second,
 *		whether a second one follows.  Returns whether there was one.  index
 *		is on (feed_id, shard, number) of rel, whose first two columns are
 *		feed_id and shard and whose column number_att the number:
 *		change_sequence_idx of cfeed.change, or stamp_pkey of cfeed.stamp
 *		(the last number of each stamp).
 */
bool
cfeed_number_probe(Relation rel, Relation index, Snapshot snapshot, int32 feed_id, int32 shard,
				   AttrNumber number_att, StrategyNumber strategy, RegProcedure proc,
				   int64 bound, ScanDirection dir, int64 *number, TimestampTz *stamped_at,
				   bool *second)
{
	SysScanDesc scan;
	ScanKeyData keys[3];
	HeapTuple	tup;
	bool		found;

	StaticAssertStmt(Anum_change_feed_id == 1 && Anum_change_shard == 2,
					 "cfeed.change and cfeed.stamp begin with feed_id and shard");
	StaticAssertStmt(Anum_change_stamped_at == Anum_stamp_stamped_at,
					 "cfeed.change and cfeed.stamp have stamped_at at the same place");
	ScanKeyInit(&keys[0], Anum_change_feed_id, BTEqualStrategyNumber,
				F_INT4EQ, Int32GetDatum(feed_id));
	ScanKeyInit(&keys[1], Anum_change_shard, BTEqualStrategyNumber,
				F_INT4EQ, Int32GetDatum(shard));
	ScanKeyInit(&keys[2], number_att, strategy, proc, Int64GetDatum(bound));
	scan = systable_beginscan_ordered(rel, index, snapshot, 3, keys);
	tup = systable_getnext_ordered(scan, dir);
	found = HeapTupleIsValid(tup);
	if (found)
	{
		bool		isnull;
		Datum		at;

		*number = DatumGetInt64(heap_getattr(tup, number_att, RelationGetDescr(rel), &isnull));
		if (stamped_at != NULL)
		{
			at = heap_getattr(tup, Anum_change_stamped_at, RelationGetDescr(rel), &isnull);
			*stamped_at = isnull ? DT_NOBEGIN : DatumGetTimestampTz(at);
		}
		if (second != NULL)
			*second = HeapTupleIsValid(systable_getnext_ordered(scan, dir));
	}
	systable_endscan_ordered(scan);
	return found;
}

/*
 * cfeed_shard_has_after
 *		Whether cfeed.change holds a stamped change of the shard numbered
 *		above bound as of the snapshot (one probe of change_sequence_idx);
 *		the first one's number in *first, unless first is NULL.
 */
bool
cfeed_shard_has_after(int32 feed_id, int32 shard, int64 bound, Snapshot snapshot,
					  int64 *first)
{
	Relation	rel = cfeed_table_open("change", AccessShareLock);
	Relation	index = cfeed_index_open("change_sequence_idx", AccessShareLock);
	int64		number;
	bool		found;

	found = cfeed_number_probe(rel, index, snapshot, feed_id, shard, Anum_change_sequence,
							   BTGreaterStrategyNumber, F_INT8GT, bound, ForwardScanDirection,
							   &number, NULL, NULL);
	index_close(index, AccessShareLock);
	table_close(rel, AccessShareLock);
	if (found && first != NULL)
		*first = number;
	return found;
}

/*
 * pending_scan
 *		Look through change_pending_idx (all of it, or with a key on
 *		writer_xid that writer's entries only) for an unstamped change of
 *		the shard as of the snapshot; its writer in *writer.
 */
static bool
pending_scan(Relation rel, Oid pending, Snapshot snapshot, int32 feed_id, int32 shard,
			 int nkeys, ScanKey keys, FullTransactionId *writer)
{
	SysScanDesc scan = systable_beginscan(rel, pending, true, snapshot, nkeys, keys);
	TupleDesc	desc = RelationGetDescr(rel);
	HeapTuple	tup;
	bool		found = false;

	while (!found && HeapTupleIsValid(tup = systable_getnext(scan)))
	{
		bool		isnull;

		CHECK_FOR_INTERRUPTS();
		found = DatumGetInt32(heap_getattr(tup, Anum_change_feed_id, desc, &isnull)) == feed_id &&
			DatumGetInt32(heap_getattr(tup, Anum_change_shard, desc, &isnull)) == shard;
		if (found)
			*writer = DatumGetFullTransactionId(heap_getattr(tup, Anum_change_writer_xid,
															 desc, &isnull));
	}
	systable_endscan(scan);
	return found;
}

/*
 * cfeed_shard_has_changes
 *		Whether cfeed.change holds a change of the shard as of the snapshot:
 *		a stamped one (one probe of change_sequence_idx: every number is
 *		above PG_INT64_MIN), or one without a number (change_pending_idx,
 *		whose entries are the backlog a sweep reads and every change of a
 *		range shard: all of them are looked at, since it is not ordered by
 *		shard).
 */
bool
cfeed_shard_has_changes(int32 feed_id, int32 shard, Snapshot snapshot)
{
	Relation	rel;
	Oid			pending;
	FullTransactionId writer;
	bool		found;

	if (cfeed_shard_has_after(feed_id, shard, PG_INT64_MIN, snapshot, NULL))
		return true;
	rel = cfeed_table_open("change", AccessShareLock);
	pending = cfeed_relid_locked("change_pending_idx", AccessShareLock);
	found = pending_scan(rel, pending, snapshot, feed_id, shard, 0, NULL, &writer);
	UnlockRelationOid(pending, AccessShareLock);
	table_close(rel, AccessShareLock);
	return found;
}

/*
 * writer_scan
 *		pending_scan of one writer's entries (strategy BTEqualStrategyNumber)
 *		or of those of every writer from xid on (BTGreaterEqualStrategyNumber).
 */
static bool
writer_scan(Relation rel, Oid pending, Snapshot snapshot, int32 feed_id, int32 shard,
			StrategyNumber strategy, FullTransactionId xid, FullTransactionId *writer)
{
	ScanKeyData key;

	ScanKeyInit(&key, Anum_change_writer_xid, strategy,
				strategy == BTEqualStrategyNumber ? F_XID8EQ : F_XID8GE,
				FullTransactionIdGetDatum(xid));
	return pending_scan(rel, pending, snapshot, feed_id, shard, 1, &key, writer);
}

/*
 * mark_stamped
 *		Whether the mark says that the writer's range changes are stamped:
 *		below its xmax and not in its xip.
 */
static bool
mark_stamped(const CfeedMark *mark, FullTransactionId xid)
{
	int			i;

	if (!FullTransactionIdPrecedes(xid, mark->xmax))
		return false;
	for (i = 0; i < mark->nxip; i++)
		if (FullTransactionIdEquals(mark->xip[i], xid))
			return false;
	return true;
}

/*
 * marked_pending_writer
 *		Whether the shard has an unstamped change among those the mark of
 *		its sweep group points at (docs/design.md, "Storage in ranges"):
 *		written by an xid from its xmax on, or in its xip.  The previous
 *		writer first, then the writers from xmax on (the recent ones), then
 *		those of xip, one probe each.  Frees mark->xip.
 */
static bool
marked_pending_writer(Relation rel, Oid pending, const CfeedShard *sh, Snapshot snapshot,
					  CfeedMark *mark, FullTransactionId *writer)
{
	bool		found = false;
	int			i;

	if (FullTransactionIdIsValid(*writer) && !mark_stamped(mark, *writer))
		found = writer_scan(rel, pending, snapshot, sh->feed_id, sh->shard,
							BTEqualStrategyNumber, *writer, writer);
	if (!found)
		found = writer_scan(rel, pending, snapshot, sh->feed_id, sh->shard,
							BTGreaterEqualStrategyNumber, mark->xmax, writer);
	for (i = 0; !found && i < mark->nxip; i++)
		found = writer_scan(rel, pending, snapshot, sh->feed_id, sh->shard,
							BTEqualStrategyNumber, mark->xip[i], writer);
	pfree(mark->xip);
	return found;
}

/*
 * row_shard_mark
 *		The mark that records which changes of a row shard are stamped: its
 *		sweep group's, once the group has one (its first range shard made
 *		it), whose sweeps then look for changes only where it points, those
 *		of its row shards too (sweep.c; a row shard with unstamped changes
 *		may not join a marked group).  False without one, and while the
 *		group has another cluster's mark (its sweeps refuse until
 *		cfeed.adopt_marks(): every change without a number is unstamped).
 */
static bool
row_shard_mark(const CfeedShard *sh, Snapshot snapshot, CfeedMark *mark)
{
	return cfeed_schema_has(CFEED_SCHEMA_RANGES) &&
		cfeed_mark_load_local(sh->sweep_group, snapshot, mark);
}

/*
 * cfeed_shard_pending_writer
 *		Whether cfeed.change holds an unstamped change of the shard as of the
 *		snapshot, and the writer of one in *writer (invalid when none).  A
 *		shard whose sweep group has a mark (a range shard's always should)
 *		is probed where the mark points (marked_pending_writer).  Else
 *		change_pending_idx, whose entries are the backlog a sweep reads and
 *		every change of a range shard, is not ordered by shard: all of it
 *		may have to be looked at.  With a valid *writer (the one a previous
 *		call found), that writer's entries are probed first: while it still
 *		has a change of the shard pending, which is the common case for a
 *		caller that polls, the answer costs one probe.  A range shard of a
 *		group without a mark (a row of cfeed.sweep_mark deleted by hand,
 *		which the group's sweeps refuse) has no change stamped.
 */
bool
cfeed_shard_pending_writer(const CfeedShard *sh, Snapshot snapshot, FullTransactionId *writer)
{
	Relation	rel = cfeed_table_open("change", AccessShareLock);
	Oid			pending = cfeed_relid_locked("change_pending_idx", AccessShareLock);
	CfeedMark	mark;
	bool		found = false;

	if (sh->ranges ? cfeed_mark_load(sh->sweep_group, snapshot, &mark) :
		row_shard_mark(sh, snapshot, &mark))
		found = marked_pending_writer(rel, pending, sh, snapshot, &mark, writer);
	else
	{
		if (FullTransactionIdIsValid(*writer))
			found = writer_scan(rel, pending, snapshot, sh->feed_id, sh->shard,
								BTEqualStrategyNumber, *writer, writer);
		if (!found)
			found = pending_scan(rel, pending, snapshot, sh->feed_id, sh->shard, 0, NULL, writer);
	}
	if (!found)
		*writer = InvalidFullTransactionId;
	UnlockRelationOid(pending, AccessShareLock);
	table_close(rel, AccessShareLock);
	return found;
}

/*
 * cfeed_shard_has_pending
 *		Whether cfeed.change holds an unstamped change of the shard as of the
 *		snapshot (cfeed_shard_pending_writer).
 */
bool
cfeed_shard_has_pending(const CfeedShard *sh, Snapshot snapshot)
{
	FullTransactionId writer = InvalidFullTransactionId;

	return cfeed_shard_pending_writer(sh, snapshot, &writer);
}

/*
 * cfeed_ranges_has_after
 *		cfeed_shard_has_after for a range shard: whether a change its stamps
 *		number above bound is still in cfeed.change as of the snapshot (a
 *		stamp keeps naming a change deleted by hand, which no reader can
 *		read).  The stamps after bound are read in number order, and each
 *		change they name after bound is probed in change_pending_idx
 *		(writer_xid, change_id) until one is there: the first, unless
 *		changes were deleted.  That one's number in *first, unless first is
 *		NULL.
 */
bool
cfeed_ranges_has_after(int32 feed_id, int32 shard, int64 bound, Snapshot snapshot,
					   int64 *first)
{
	Relation	stamps = cfeed_table_open("stamp", AccessShareLock);
	Relation	stamp_pkey = cfeed_index_open("stamp_pkey", AccessShareLock);
	Relation	rel = cfeed_table_open("change", AccessShareLock);
	Oid			pending = cfeed_relid_locked("change_pending_idx", AccessShareLock);
	TupleDesc	desc = RelationGetDescr(stamps);
	SysScanDesc scan;
	ScanKeyData keys[3];
	HeapTuple	tup;
	bool		found = false;

	ScanKeyInit(&keys[0], Anum_change_feed_id, BTEqualStrategyNumber,
				F_INT4EQ, Int32GetDatum(feed_id));
	ScanKeyInit(&keys[1], Anum_change_shard, BTEqualStrategyNumber,
				F_INT4EQ, Int32GetDatum(shard));
	ScanKeyInit(&keys[2], Anum_stamp_last_number, BTGreaterStrategyNumber,
				F_INT8GT, Int64GetDatum(bound));
	scan = systable_beginscan_ordered(stamps, stamp_pkey, snapshot, 3, keys);
	while (!found && HeapTupleIsValid(tup = systable_getnext_ordered(scan, ForwardScanDirection)))
	{
		bool		isnull;
		int64		stamp_first = DatumGetInt64(heap_getattr(tup, Anum_stamp_first_number, desc, &isnull));
		int64	   *ids;
		FullTransactionId *xids;
		int			n = cfeed_stamp_entries(tup, desc, &ids, &xids);
		int64		i;

		/* entry i (from 0) is number stamp_first + i */
		for (i = (bound >= stamp_first) ? bound - stamp_first + 1 : 0; !found && i < n; i++)
		{
			ScanKeyData change_keys[2];
			FullTransactionId writer;

			ScanKeyInit(&change_keys[0], Anum_change_writer_xid, BTEqualStrategyNumber,
						F_XID8EQ, FullTransactionIdGetDatum(xids[i]));
			ScanKeyInit(&change_keys[1], Anum_change_change_id, BTEqualStrategyNumber,
						F_INT8EQ, Int64GetDatum(ids[i]));
			found = pending_scan(rel, pending, snapshot, feed_id, shard, 2, change_keys, &writer);
			if (found && first != NULL)
				*first = stamp_first + i;
		}
		pfree(ids);
		pfree(xids);
	}
	systable_endscan_ordered(scan);
	UnlockRelationOid(pending, AccessShareLock);
	table_close(rel, AccessShareLock);
	index_close(stamp_pkey, AccessShareLock);
	table_close(stamps, AccessShareLock);
	return found;
}

/*
 * cfeed_shard_column
 *		Column attnum of a shard_config row, when this database's schema has
 *		it under that name (a column a later version added: deleted_head,
 *		parent, closed); false when it has not, or when it is null.
 */
bool
cfeed_shard_column(TupleDesc desc, HeapTuple tup, int attnum, const char *attname,
				   Datum *value)
{
	bool		isnull;

	if (desc->natts < attnum ||
		strcmp(NameStr(TupleDescAttr(desc, attnum - 1)->attname), attname) != 0)
		return false;
	*value = heap_getattr(tup, attnum, desc, &isnull);
	return !isnull;
}

/*
 * cfeed_shard_head
 *		The shard's head as of the snapshot: its highest stamped number above
 *		floor_number, or floor_number (the shard's: its start value, or the
 *		highest number whose change was deleted while it was the head).  Read
 *		from change_sequence_idx, whose high end never holds dead entries:
 *		stamped rows are not updated, and retention never deletes the head;
 *		for a shard stored in ranges, from its last cfeed.stamp row.
 *
 *		With a hint above the start (the head a sweep of this backend left),
 *		a forward probe from the hint settles it when it finds the hint and
 *		nothing after it: a forward scan stops at the first entry past the
 *		shard, while the backward probe reads the whole leaf page it lands on
 *		(hundreds of entries, each compared with three keys).  Anything else
 *		(another backend stamped since, the hint's change is gone) falls back
 *		to the backward probe; a wrong hint costs time, never correctness.
 *
 *		With head_at, also the latest stamped_at of the shard's stamps above
 *		its start: the head's, or when the head is a deleted number (the
 *		floor), the highest stamp left's (one more probe); DT_NOBEGIN when
 *		there is none, or when it is not finite (a row copied in: no clock
 *		reading, which a sweep would follow for ever).
 */
int64
cfeed_shard_head(const CfeedShard *sh, int64 hint, Snapshot snapshot, TimestampTz *head_at)
{
	int32		feed_id = sh->feed_id;
	int32		shard = sh->shard;
	int64		floor_number = sh->floor_number;
	/* a range shard's numbers: the last numbers of its stamps (ranges.c) */
	AttrNumber	number_att = sh->ranges ? Anum_stamp_last_number : Anum_change_sequence;
	Relation	rel = cfeed_table_open(sh->ranges ? "stamp" : "change", AccessShareLock);
	Relation	index = cfeed_index_open(sh->ranges ? "stamp_pkey" : "change_sequence_idx",
										 AccessShareLock);
	int64		head = floor_number;
	int64		first;
	TimestampTz at = DT_NOBEGIN;
	bool		more;

	if (hint > floor_number &&
		cfeed_number_probe(rel, index, snapshot, feed_id, shard, number_att,
						   BTGreaterEqualStrategyNumber, F_INT8GE, hint, ForwardScanDirection,
						   &first, &at, &more) &&
		first == hint && !more)
		head = hint;
	else if (!cfeed_number_probe(rel, index, snapshot, feed_id, shard, number_att,
								 BTGreaterStrategyNumber, F_INT8GT, floor_number,
								 BackwardScanDirection, &head, &at, NULL))
	{
		/* the head is the floor: the start, or a deleted number */
		at = DT_NOBEGIN;
		if (head_at != NULL && floor_number > sh->start_number)
			(void) cfeed_number_probe(rel, index, snapshot, feed_id, shard, number_att,
									  BTGreaterStrategyNumber, F_INT8GT, sh->start_number,
									  BackwardScanDirection, &first, &at, NULL);
	}
	if (head_at != NULL)
		*head_at = TIMESTAMP_NOT_FINITE(at) ? DT_NOBEGIN : at;
	index_close(index, AccessShareLock);
	table_close(rel, AccessShareLock);
	/* numbering goes on from the floor or above, never below it */
	Assert(head >= floor_number);
	return head;
}

/*
 * cfeed_shard_fetch
 *		Read one shard's configuration, and with with_head its head, as of the
 *		given snapshot (a fresh one when NULL).  Returns false when there is
 *		no such shard.  No privilege check.
 */
bool
cfeed_shard_fetch(int32 feed_id, int32 shard, Snapshot snapshot, bool with_head,
				  CfeedShard *out)
{
	Relation	rel;
	SysScanDesc scan;
	ScanKeyData keys[2];
	HeapTuple	tup;
	Oid			pkey;
	bool		found = false;
	bool		own_snapshot = (snapshot == NULL);

	if (own_snapshot)
		snapshot = cfeed_fresh_snapshot();

	rel = cfeed_table_open("shard_config", AccessShareLock);
	pkey = cfeed_relid_locked("shard_config_pkey", AccessShareLock);
	ScanKeyInit(&keys[0], Anum_shard_feed_id, BTEqualStrategyNumber,
				F_INT4EQ, Int32GetDatum(feed_id));
	ScanKeyInit(&keys[1], Anum_shard_shard, BTEqualStrategyNumber,
				F_INT4EQ, Int32GetDatum(shard));
	scan = systable_beginscan(rel, pkey, true, snapshot, 2, keys);
	tup = systable_getnext(scan);
	if (HeapTupleIsValid(tup))
	{
		TupleDesc	desc = RelationGetDescr(rel);
		bool		isnull;
		Datum		d;

		found = true;
		out->feed_id = feed_id;
		out->shard = shard;
		out->sweep_group = DatumGetInt32(heap_getattr(tup, Anum_shard_sweep_group, desc, &isnull));
		out->longpoll = DatumGetBool(heap_getattr(tup, Anum_shard_longpoll, desc, &isnull));
		out->start_number = DatumGetInt64(heap_getattr(tup, Anum_shard_start, desc, &isnull));
		out->floor_number = out->start_number;
		if (cfeed_shard_column(desc, tup, Anum_shard_deleted_head, "deleted_head", &d))
			out->floor_number = Max(out->floor_number, DatumGetInt64(d));
		out->parent = cfeed_shard_column(desc, tup, Anum_shard_parent, "parent", &d)
			? DatumGetInt32(d) : -1;
		out->closed = cfeed_shard_column(desc, tup, Anum_shard_closed, "closed", &d) &&
			DatumGetBool(d);
		out->ranges = cfeed_shard_column(desc, tup, Anum_shard_storage, "storage", &d) &&
			strcmp(TextDatumGetCString(d), "ranges") == 0;
		out->stamps_whole = cfeed_shard_column(desc, tup, Anum_shard_changes_deleted,
											   "changes_deleted", &d) &&
			!DatumGetBool(d);
		out->last_number = out->floor_number;
	}
	systable_endscan(scan);
	UnlockRelationOid(pkey, AccessShareLock);
	table_close(rel, AccessShareLock);

	if (found && with_head)
		out->last_number = cfeed_shard_head(out, 0, snapshot, NULL);
	if (own_snapshot)
		UnregisterSnapshot(snapshot);
	return found;
}

/*
 * feed_row
 *		Whether cfeed.feed has a row for feed_id (fresh snapshot); and, with
 *		mine, whether this transaction (or a subtransaction of it) inserted
 *		that row (a version it updated does not count: the feed is not new).
 */
static bool
feed_row(int32 feed_id, bool *mine)
{
	Relation	rel;
	SysScanDesc scan;
	ScanKeyData key;
	Oid			pkey;
	HeapTuple	tuple;
	bool		found;
	Snapshot	snapshot = cfeed_fresh_snapshot();

	rel = cfeed_table_open("feed", AccessShareLock);
	ScanKeyInit(&key, Anum_feed_feed_id, BTEqualStrategyNumber, F_INT4EQ,
				Int32GetDatum(feed_id));
	pkey = cfeed_relid_locked("feed_pkey", AccessShareLock);
	scan = systable_beginscan(rel, pkey, true, snapshot, 1, &key);
	tuple = systable_getnext(scan);
	found = HeapTupleIsValid(tuple);
	if (found && mine != NULL)
		*mine = !(tuple->t_data->t_infomask & HEAP_UPDATED) &&
			TransactionIdIsCurrentTransactionId(HeapTupleHeaderGetXmin(tuple->t_data));
	systable_endscan(scan);
	UnlockRelationOid(pkey, AccessShareLock);
	table_close(rel, AccessShareLock);
	UnregisterSnapshot(snapshot);
	return found;
}

/*
 * cfeed_feed_exists
 *		Whether cfeed.feed has a row for feed_id (fresh snapshot).
 */
bool
cfeed_feed_exists(int32 feed_id)
{
	return feed_row(feed_id, NULL);
}

/*
 * cfeed_feed_mine
 *		Whether this transaction created the feed (inserted its row of
 *		cfeed.feed, in a subtransaction of it too).
 */
bool
cfeed_feed_mine(int32 feed_id)
{
	bool		mine = false;

	return feed_row(feed_id, &mine) && mine;
}

/*
 * cfeed_sweep_group_in_use
 *		Whether a shard of cfeed.shard_config is in the sweep group (fresh
 *		snapshot; group 0 always counts).  A scan of the table, which holds
 *		a row per shard.
 */
bool
cfeed_sweep_group_in_use(int32 sweep_group)
{
	Relation	rel;
	SysScanDesc scan;
	ScanKeyData key;
	bool		found;
	Snapshot	snapshot;

	if (sweep_group == 0)
		return true;
	snapshot = cfeed_fresh_snapshot();
	rel = cfeed_table_open("shard_config", AccessShareLock);
	ScanKeyInit(&key, get_attnum(RelationGetRelid(rel), "sweep_group"), BTEqualStrategyNumber,
				F_INT4EQ, Int32GetDatum(sweep_group));
	scan = systable_beginscan(rel, InvalidOid, false, snapshot, 1, &key);
	found = HeapTupleIsValid(systable_getnext(scan));
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	UnregisterSnapshot(snapshot);
	return found;
}

/*
 * cfeed_shard_get
 *		Like cfeed_shard_fetch with a fresh snapshot, but raises 42704 naming
 *		the missing feed or shard.  With check_select, the caller must also
 *		have SELECT on cfeed.shard (the function returns its data), and the
 *		head is read too.
 */
void
cfeed_shard_get(int32 feed_id, int32 shard, bool check_select, CfeedShard *out)
{
	if (check_select)
		cfeed_check_select("shard");

	if (cfeed_shard_fetch(feed_id, shard, NULL, check_select, out))
		return;
	cfeed_shard_missing(feed_id, shard, ERRCODE_UNDEFINED_OBJECT, NULL);
}

/*
 * cfeed_shard_missing
 *		Raise sqlerrcode for a shard that does not exist, naming the feed when
 *		that is what is missing (fresh snapshot), with detail when not NULL.
 */
void
cfeed_shard_missing(int32 feed_id, int32 shard, int sqlerrcode, const char *detail)
{
	if (!cfeed_feed_exists(feed_id))
		ereport(ERROR,
				(errcode(sqlerrcode),
				 errmsg("feed %d does not exist", feed_id),
				 detail ? errdetail_internal("%s", detail) : 0,
				 errhint("Create it with cfeed.create_feed().")));
	ereport(ERROR,
			(errcode(sqlerrcode),
			 errmsg("shard %d of feed %d does not exist", shard, feed_id),
			 detail ? errdetail_internal("%s", detail) : 0,
			 errhint("Shards are numbered from 0; add one by inserting into cfeed.shard.")));
}

/*
 * cfeed_check_select
 *		Raise 42501 unless the current user may SELECT from cfeed.<relname>.
 */
void
cfeed_check_select(const char *relname)
{
	Oid			relid = cfeed_relid(relname);
	AclResult	aclresult = pg_class_aclcheck(relid, GetUserId(), ACL_SELECT);

	if (aclresult != ACLCHECK_OK)
		aclcheck_error(aclresult, OBJECT_TABLE, get_rel_name(relid));
}

/*
 * cfeed_fresh_snapshot
 *		A registered snapshot as fresh as this process may take: the latest,
 *		or in parallel mode (the leader or a worker of a parallel query, as
 *		cfeed.head, shard_for and the read policies may run in) the query's
 *		own, since no new one may be taken there.  Unregister it.
 */
Snapshot
cfeed_fresh_snapshot(void)
{
	return RegisterSnapshot(IsInParallelMode() ? GetActiveSnapshot() : GetLatestSnapshot());
}
