/*-------------------------------------------------------------------------
 *
 * sweep.c
 *	  Stamping: the one routine that turns committed changes into gapless
 *	  per-shard sequence numbers, shared by cfeed.sweep(), cfeed.sweep_loop()
 *	  (sweep_sql.c) and the background sweeper (sweeper.c).
 *
 * Storage design
 * --------------
 * cfeed.change is one heap with two partial indexes:
 *
 *	 change_sequence_idx (feed_id, shard, change_sequence_number)
 *		 WHERE change_sequence_number IS NOT NULL  -- readers' range scans
 *	 change_pending_idx (writer_xid) WHERE change_sequence_number IS NULL
 *
 * A writer inserts one row (number null) and pays for one index entry, in
 * the pending index, plus the check that its shard exists (shards.c: the
 * feed's shards lock, no row lock).  Its writer_xid defaults to the
 * writer's top-level xid.  A sweep stamps by updating rows in place:
 * the new version enters only the readers' index; the old version leaves a
 * dead entry in the pending index until VACUUM removes it, which the xid
 * watermark of each sweep group keeps the sweeps from re-reading
 * (watermark.c).
 *
 * The steps of a sweep (cfeed_sweep_group)
 * ----------------------------------------
 *	 begin		take the group's sweep lock, switch to the extension's
 *				owner, lock cfeed.shard_config and cfeed.change, read the
 *				invalidations, check that cfeed.change is still the
 *				extension's (a move to the SQL edition), take the snapshot
 *	 collect	the pending changes the watermark points at, visible to the
 *				snapshot, of shards that are in the group as of it
 *	 leave		the changes of row shards whose rows another transaction
 *				has locked (its DELETE or UPDATE of a pending change still
 *				running), each with the changes after it in its shard and, in
 *				a group with a mark, its writer's range changes: left for a
 *				later sweep, as a sweep never waits for a row lock (stamp.c);
 *				before the cut, so that what they hold back never fills a
 *				batch
 *	 cut		at most cfeed.sweep_batch_size of the rest, the lowest
 *				change_ids (a transaction that committed before another
 *				began drew lower change_ids, so it is never numbered after it)
 *	 number		per shard in change_id order, on from the shard's head as of
 *				the snapshot
 *	 propose	the next watermark, with the xids of the changes left (cut,
 *				locked or out of numbers)
 *	 write		the numbers and stamped_at (stamp.c: a change locked since it
 *				was collected is left then, as in the leave step), after a
 *				new feed epoch is recorded if this is the first stamp on this
 *				timeline;
 *				the commit is forced synchronous at
 *				cfeed.sweep_synchronous_commit (stamp.c), so a stamp is
 *				on disk (and on a synchronous standby) before a reader can see it
 *	 announce	the result per shard, the readers' wake-up at commit
 *				(shmem.c) and a NOTIFY of each longpoll shard's new head on
 *				channel cfeed_<feed_id>_<shard> (notify.c: queued at
 *				commit when PostgreSQL's notification queue has room,
 *				owed until it has: a full queue never fails the sweep)
 *
 * Locking protocol
 * ----------------
 * Sweeps of one group are serialized by a transaction-level advisory lock
 * (locks.c) taken before the snapshot, so a sweep sees every stamp of the
 * sweeps before it, and numbers each shard on from its head as of that
 * snapshot.  Next, still before the snapshot, the sweep locks cfeed.change
 * (ROW EXCLUSIVE) until its transaction ends: a rewrite (VACUUM FULL,
 * CLUSTER, a rewriting ALTER TABLE) or TRUNCATE waits for the sweep, so the
 * tuple addresses it collected stay valid until it has stamped them, and
 * one that committed before is in the sweep's snapshot (isolation test
 * sweep_rewrite).  (cfeed.shard_config is locked first, in the order of
 * DROP EXTENSION, which would otherwise deadlock with a sweep.)  A shard
 * moved to another group takes both groups' locks until its move commits
 * (shard_guard.c), and its invalidation of cfeed.shard_config makes every
 * backend's watermarks invalid.
 *
 * A shard's head is not stored anywhere: it is the highest stamped number,
 * read from change_sequence_idx (see cfeed.shard; a sweep first checks the
 * head its backend's last sweep left, its head hint, with a cheaper forward
 * probe, see cfeed_shard_head), so no sweep updates a row of
 * cfeed.shard_config, which writers' shard checks read (and, in a database
 * whose cfeed.change still has its foreign key, not yet updated, lock FOR
 * KEY SHARE), and nothing grows a version chain while the xmin horizon is
 * held.  A number whose row is deleted is never issued
 * again: the shard's floor (cfeed.shard_config.deleted_head, kept by the
 * statement triggers of DELETE and TRUNCATE) is where numbering goes on
 * when it is above the highest stamped row.  That gives guarantees 1-5; for
 * safety beyond it (a shard moved to another group while both groups
 * sweep) the unique change_sequence_idx refuses a number issued twice, and
 * the write must touch every change it read as unstamped, or the sweep
 * fails (23505 or 40001) and changes nothing (isolation test
 * sweep_moved_shard).
 *
 * Running out of numbers
 * ----------------------
 * Numbers are bigints: a shard whose next number would pass 2^63 - 1 has
 * run out.  Its changes are held back (left pending, their xids kept in
 * the watermark) while the group's other shards are stamped as ever; the
 * sweep succeeds and lists the shard in its result, and its callers report
 * it: a WARNING with SQLSTATE 22003 from cfeed.sweep() and sweep_loop(),
 * cfeed.sweepers.last_error (and a WARNING in the log) from the background
 * sweeper.  The next number is never computed past 2^63 - 1: wrapped to
 * -2^63 it would collide in change_sequence_idx and fail every later sweep
 * of the group (23505).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/relscan.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/dependency.h"
#include "catalog/pg_class.h"
#include "commands/extension.h"
#include "common/int.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
#include "utils/xid8.h"

#include "cache.h"
#include "cfeed.h"
#include "shmem.h"

/* The head a sweep of this backend last left a shard at: a hint only. */
typedef struct HeadHint
{
	int32		key[2];			/* feed_id, shard: hash key */
	int64		head;
} HeadHint;

/* A shard touched by a sweep. */
typedef struct ShardEntry
{
	int32		key[2];			/* feed_id, shard: hash key */
	bool		in_group;
	CfeedShard	shard;
	int32		count;
	int64		new_last;
	TimestampTz head_at;		/* its latest stamped_at (cfeed_shard_head) */
	int64		lag_ms;
	HeadHint   *hint;
	int32		held;			/* changes left pending: out of numbers */
} ShardEntry;

/* A writer with a change left, while sweep_leave_locked closes the left set. */
typedef struct LeftWriter
{
	FullTransactionId xid;		/* hash key */
	bool		left;			/* has a change left: its range changes go too */
	List	   *ranged;			/* indexes of its range changes in the batch */
} LeftWriter;

/* A writer with a change of a range shard, while the batch is cut. */
typedef struct RangeWriter
{
	FullTransactionId xid;		/* hash key */
	bool		in_batch;		/* has a change in the batch */
} RangeWriter;

/* One sweep in progress, from step to step (in the sweep's memory context). */
typedef struct SweepState
{
	int32		sweep_group;
	CfeedGroupWatermark *watermark;
	bool		marked;			/* the group has a mark: it has range shards */
	FullTransactionId mark_xmax;	/* and that mark's next_xid */
	Snapshot	snapshot;
	Relation	changerel;		/* cfeed.change, locked until commit */
	Relation	pending_index;	/* change_pending_idx, while collecting */
	CfeedPendingChange *changes;	/* collected; then the batch */
	int			nchanges;
	int			capacity;		/* of changes[], while collecting */
	int			nbatch;			/* the batch's size after the cut */
	int			ncollected;		/* changes[nbatch..ncollected-1]: cut off */
	FullTransactionId *held;	/* writer_xids of the changes held back */
	int			nheld;
	FullTransactionId *locked;	/* writer_xids of the changes left locked */
	int			nlocked;
	int			nexhausted;		/* shards with changes held back */
	HTAB	   *shards;			/* ShardEntry by (feed_id, shard) */
	int			nshards;		/* shards with a change in the batch */
	TimestampTz clock;			/* the clock's time at numbering */
} SweepState;

/* HeadHint by (feed_id, shard): each shard's head as this backend's last sweep left it (cache.h) */
static HTAB *head_hints = NULL;

/* The cfeed.change this backend found to be the extension's (cache.h) */
static Oid	member_change = InvalidOid;

/*
 * head_hint
 *		The hint entry of a shard (head 0 when new), for cfeed_shard_head.
 */
static HeadHint *
head_hint(int32 feed_id, int32 shard)
{
	int32		key[2] = {feed_id, shard};
	HeadHint   *h;
	bool		found;

	if (head_hints == NULL)
		head_hints = cfeed_cache_hash(CFEED_CACHE_HEAD_HINTS, NULL, "cfeed head hints",
									  sizeof(key), sizeof(HeadHint));
	h = hash_search(head_hints, key, HASH_ENTER, &found);
	if (!found)
		h->head = 0;
	return h;
}

/* Order pending changes by change_id (the batch cut). */
static int
compare_change_id(const void *a, const void *b)
{
	const CfeedPendingChange *x = a;
	const CfeedPendingChange *y = b;

	if (x->change_id != y->change_id)
		return x->change_id < y->change_id ? -1 : 1;
	return ItemPointerCompare((ItemPointer) &x->tid, (ItemPointer) &y->tid);
}

/* Order pending changes by shard, then change_id (the numbering). */
static int
compare_shard_change(const void *a, const void *b)
{
	const CfeedPendingChange *x = a;
	const CfeedPendingChange *y = b;

	if (x->feed_id != y->feed_id)
		return x->feed_id < y->feed_id ? -1 : 1;
	if (x->shard != y->shard)
		return x->shard < y->shard ? -1 : 1;
	return compare_change_id(a, b);
}

/*
 * report_moved
 *		Fail (55000): the database moved to the SQL edition (sqled/move/)
 *		while this sweep waited for its group's sweep lock or for its tables.
 *		The name cfeed.change is then the SQL edition's table, which the SQL
 *		edition's sweeps number under a lock of their own: this sweep must
 *		not stamp it.
 */
static void
report_moved(void)
{
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("cfeed.change is not a table of extension cfeed"),
			 errdetail("The database moved to the SQL edition of cfeed while this sweep waited for its locks."),
			 errhint("The SQL edition's cfeed.sweep sweeps it now.")));
}

/*
 * check_extension_member
 *		Fail (report_moved) unless cfeed.change, locked by the caller, is a
 *		member of extension cfeed.  Looked up once per OID of cfeed.change.
 */
static void
check_extension_member(Oid changerel)
{
	Oid			extension;

	if (changerel == member_change)
		return;
	extension = get_extension_oid("cfeed", true);
	if (!OidIsValid(extension) ||
		getExtensionOfObject(RelationRelationId, changerel) != extension)
		report_moved();
	member_change = changerel;
}

/*
 * sweep_begin
 *		The begin step, once the caller holds the sweep lock and runs as the
 *		extension's owner.  cfeed.change stays locked until the sweep's
 *		transaction ends, and is locked before the snapshot is taken: the
 *		addresses of the changes the sweep finds must still be theirs when it
 *		stamps them, so a rewrite (VACUUM FULL, CLUSTER, a rewriting ALTER
 *		TABLE) or a TRUNCATE waits for the sweep, and one that committed
 *		before is in its snapshot.  Then the invalidations that came are read
 *		(a shard moved to another group resets the watermarks), and the
 *		watermark is looked at.  A group with range shards has a stored mark
 *		(ranges.c), read with the sweep's snapshot, which is then its
 *		watermark: the record of which range changes are stamped.
 */
static void
sweep_begin(SweepState *s, int32 sweep_group)
{
	CfeedMark	mark;

	Assert(cfeed_sweep_lock_held(sweep_group));
	memset(s, 0, sizeof(SweepState));
	s->sweep_group = sweep_group;
	(void) cfeed_relid_locked("shard_config", AccessShareLock);
	s->changerel = cfeed_table_open("change", RowExclusiveLock);
	/* and cfeed.stamp, whose TRUNCATE records the range shards' heads */
	if (cfeed_schema_has(CFEED_SCHEMA_RANGES))
		(void) cfeed_relid_locked("stamp", RowExclusiveLock);
	AcceptInvalidationMessages();
	check_extension_member(RelationGetRelid(s->changerel));
	s->watermark = cfeed_watermark_get(sweep_group);
	s->snapshot = RegisterSnapshot(GetLatestSnapshot());
	if (cfeed_schema_has(CFEED_SCHEMA_RANGES) &&
		cfeed_mark_load(sweep_group, s->snapshot, &mark))
	{
		s->marked = true;
		s->mark_xmax = mark.xmax;
		cfeed_watermark_adopt(s->watermark, &mark);
	}
}

/*
 * collect_probe
 *		Append to s->changes the pending changes that change_pending_idx
 *		yields for one scan key (or all of them when key is NULL), as visible
 *		to the sweep's snapshot.  A cfeed_watermark_probes callback.
 */
static void
collect_probe(ScanKey key, void *arg)
{
	SweepState *s = arg;
	Relation	heap = s->changerel;
	IndexScanDesc scan;
	TupleTableSlot *slot = table_slot_create(heap, NULL);
	bool		images = cfeed_schema_has(CFEED_SCHEMA_TABLE_NUMBERS);

	scan = cfeed_index_beginscan(heap, s->pending_index, s->snapshot, key ? 1 : 0, 0);
	index_rescan(scan, key, key ? 1 : 0, NULL, 0);
	while (index_getnext_slot(scan, ForwardScanDirection, slot))
	{
		CfeedPendingChange *c;
		bool		isnull;

		CHECK_FOR_INTERRUPTS();
		(void) slot_getattr(slot, Anum_change_sequence, &isnull);
		if (!isnull)
			continue;			/* defensive: the index is partial */
		if (s->nchanges >= s->capacity)
		{
			s->capacity *= 2;
			s->changes = repalloc_huge(s->changes, sizeof(CfeedPendingChange) * s->capacity);
		}
		c = &s->changes[s->nchanges++];
		c->feed_id = DatumGetInt32(slot_getattr(slot, Anum_change_feed_id, &isnull));
		c->shard = DatumGetInt32(slot_getattr(slot, Anum_change_shard, &isnull));
		c->change_id = DatumGetInt64(slot_getattr(slot, Anum_change_change_id, &isnull));
		c->written_at = DatumGetTimestampTz(slot_getattr(slot, Anum_change_written_at, &isnull));
		c->writer_xid = DatumGetFullTransactionId(slot_getattr(slot, Anum_change_writer_xid, &isnull));
		c->locked = cfeed_stamp_would_wait(slot);
		c->image = false;
		c->image_table = 0;
		if (images)
		{
			Datum		tbl = slot_getattr(slot, Anum_change_tbl, &isnull);

			c->image = !isnull;
			if (c->image)
				c->image_table = DatumGetInt32(tbl);
		}
		/* the address stamp.c updates, of the version this snapshot sees */
		c->tid = slot->tts_tid;
		Assert(ItemPointerIsValid(&c->tid));
		c->number = 0;
	}
	index_endscan(scan);
	ExecDropSingleTupleTableSlot(slot);
}

/*
 * shard_entry
 *		The sweep's entry of a shard, looked up on first sight: whether it is
 *		in the sweep's group as of the snapshot and, if so, its head.
 */
static ShardEntry *
shard_entry(SweepState *s, int32 feed_id, int32 shard)
{
	int32		key[2] = {feed_id, shard};
	bool		found;
	ShardEntry *e = hash_search(s->shards, key, HASH_ENTER, &found);

	if (found)
		return e;
	e->in_group = cfeed_shard_fetch(feed_id, shard, s->snapshot, false, &e->shard) &&
		e->shard.sweep_group == s->sweep_group;
	if (e->in_group)
	{
		e->hint = head_hint(feed_id, shard);
		e->shard.last_number = cfeed_shard_head(&e->shard, e->hint->head, s->snapshot,
											   &e->head_at);
		Assert(e->shard.last_number >= e->shard.floor_number);
		e->hint->head = e->shard.last_number;
	}
	else
		e->head_at = DT_NOBEGIN;
	e->count = 0;
	e->lag_ms = 0;
	e->held = 0;
	return e;
}

/*
 * hold_change
 *		Leave a change pending: its shard has run out of numbers (its next
 *		one would pass 2^63 - 1).  Its writer_xid stays in the watermark, so
 *		a later sweep finds it again; the shard is reported (sweep_announce,
 *		cfeed_sweep_report_exhausted), and the group's other shards are
 *		stamped as ever.  A range shard's change fails the sweep instead:
 *		its writer's other changes would be stamped twice.
 */
static void
hold_change(SweepState *s, ShardEntry *e, const CfeedPendingChange *c)
{
	/* a range change held back would leave its transaction half stamped */
	if (c->ranges)
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("shard %d of feed %d has run out of sequence numbers", c->shard, c->feed_id),
				 errdetail("Its next number would pass 9223372036854775807."),
				 errhint("The shard is stored in ranges, so its sweep group cannot be swept until its changes are deleted.")));
	if (e->held++ == 0)
		s->nexhausted++;
	s->held[s->nheld++] = c->writer_xid;
}

/*
 * range_change_unstamped
 *		Whether a change of a range shard is one to stamp now: its writer is
 *		not stamped as of the group's mark, and is not this sweep's own
 *		transaction (whose xid stays in the proposed mark: it may write more
 *		after the sweep).  A range shard whose group has no mark would be
 *		numbered twice: refused.
 */
static bool
range_change_unstamped(SweepState *s, const CfeedPendingChange *c)
{
	if (!s->marked)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("sweep group %d has a shard stored in ranges but no sweep mark", s->sweep_group),
				 errdetail("Shard %d of feed %d is stored in ranges.", c->shard, c->feed_id),
				 errhint("A row of cfeed.sweep_mark was deleted by hand: as cfeed's owner, run SELECT * FROM cfeed.adopt_marks() to make it again from the group's stamps.")));
	if (FullTransactionIdEquals(c->writer_xid, GetTopFullTransactionIdIfAny()))
		return false;
	return cfeed_watermark_covers(s->watermark, c->writer_xid);
}

/*
 * sweep_collect
 *		The collect step: the pending changes the group's watermark points
 *		at (writer_xid >= xmax or in xip; all of them without a watermark),
 *		then only those of the group's shards; those of a shard already out
 *		of numbers are held back at once, so that they never fill a batch.
 */
static void
sweep_collect(SweepState *s)
{
	HASHCTL		ctl;
	int			n = 0;
	int			i;

	s->capacity = 1024;
	s->changes = palloc(sizeof(CfeedPendingChange) * s->capacity);
	s->pending_index = cfeed_index_open("change_pending_idx", AccessShareLock);
	cfeed_watermark_probes(s->watermark, collect_probe, s);
	index_close(s->pending_index, NoLock);

	ctl.keysize = sizeof(int32) * 2;
	ctl.entrysize = sizeof(ShardEntry);
	ctl.hcxt = CurrentMemoryContext;
	s->shards = hash_create("cfeed sweep shards", 64, &ctl,
							HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	s->held = palloc(sizeof(FullTransactionId) * Max(s->nchanges, 1));
	s->locked = palloc(sizeof(FullTransactionId) * Max(s->nchanges, 1));
	for (i = 0; i < s->nchanges; i++)
	{
		ShardEntry *e = shard_entry(s, s->changes[i].feed_id, s->changes[i].shard);

		if (!e->in_group)
			continue;
		s->changes[i].ranges = e->shard.ranges;
		if (e->shard.ranges && !range_change_unstamped(s, &s->changes[i]))
			continue;
		if (e->shard.last_number == PG_INT64_MAX)
			hold_change(s, e, &s->changes[i]);
		else
			s->changes[n++] = s->changes[i];
	}
	s->nchanges = n;
}

/*
 * cut_whole_writers
 *		A writer with a range change is stamped whole or not at all: its xid
 *		leaves the mark once, so the cut never splits it.  Each cut-off
 *		change of a writer that has a range change and a change in the batch
 *		joins the batch.  (The batch stays closed under "committed before the
 *		other began": such a writer's changes all follow the other's.)
 */
static void
cut_whole_writers(SweepState *s)
{
	HASHCTL		ctl;
	HTAB	   *writers;
	RangeWriter *w;
	bool		found;
	int			i;

	ctl.keysize = sizeof(FullTransactionId);
	ctl.entrysize = sizeof(RangeWriter);
	ctl.hcxt = CurrentMemoryContext;
	writers = hash_create("cfeed sweep range writers", 64, &ctl,
						  HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	for (i = 0; i < s->ncollected; i++)
		if (s->changes[i].ranges)
		{
			w = hash_search(writers, &s->changes[i].writer_xid, HASH_ENTER, &found);
			if (!found)
				w->in_batch = false;
		}
	if (hash_get_num_entries(writers) == 0)
		return;
	for (i = 0; i < s->nbatch; i++)
		if ((w = hash_search(writers, &s->changes[i].writer_xid, HASH_FIND, NULL)) != NULL)
			w->in_batch = true;
	for (i = s->nbatch; i < s->ncollected; i++)
	{
		w = hash_search(writers, &s->changes[i].writer_xid, HASH_FIND, NULL);
		if (w != NULL && w->in_batch)
		{
			CfeedPendingChange tmp = s->changes[s->nbatch];

			s->changes[s->nbatch++] = s->changes[i];
			s->changes[i] = tmp;
		}
	}
	s->nchanges = s->nbatch;
}

/*
 * sweep_cut
 *		The cut step: keep the cfeed.sweep_batch_size lowest change_ids; the
 *		rest stay in changes[nbatch..ncollected-1] for sweep_propose.
 */
static void
sweep_cut(SweepState *s)
{
	s->ncollected = s->nchanges;
	if (s->nchanges > cfeed_sweep_batch_size)
	{
		qsort(s->changes, s->nchanges, sizeof(CfeedPendingChange), compare_change_id);
		s->nchanges = cfeed_sweep_batch_size;
	}
	s->nbatch = s->nchanges;
	/* what is cut off never precedes the batch: the lowest change_ids go first */
	Assert(s->nbatch == s->ncollected || s->nbatch == 0 ||
		   s->changes[s->nbatch - 1].change_id <= s->changes[s->nbatch].change_id);
	if (s->nbatch < s->ncollected)
		cut_whole_writers(s);
}

/*
 * LeaveState: sweep_leave_locked's closure over the changes, sorted by shard
 */
typedef struct LeaveState
{
	SweepState *s;
	bool	   *leave;			/* per change: left for a later sweep */
	int		   *first;			/* per change: its shard's first index */
	int		   *stop;			/* at a shard's first index: its first left */
	HTAB	   *writers;		/* LeftWriter by writer_xid (a marked group) */
	List	   *work;			/* LeftWriters whose range changes must go */
} LeaveState;

/*
 * leave_from
 *		Leave change i and the rest of its shard in the batch (those after
 *		it in change_id order: a shard's numbers follow that order without a
 *		gap).  In a group with a mark, each writer of a change left joins
 *		the work list once, for its range changes (sweep_leave_locked).
 */
static void
leave_from(LeaveState *ls, int i)
{
	int			first = ls->first[i];
	int			j;

	for (j = i; j < ls->stop[first]; j++)
	{
		ls->leave[j] = true;
		if (ls->writers != NULL)
		{
			LeftWriter *w = hash_search(ls->writers, &ls->s->changes[j].writer_xid,
										HASH_FIND, NULL);

			if (w != NULL && !w->left)
			{
				w->left = true;
				ls->work = lappend(ls->work, w);
			}
		}
	}
	ls->stop[first] = Min(ls->stop[first], i);
}

/*
 * sweep_leave_locked
 *		The leave step: a change of a row shard whose row another
 *		transaction has locked (cfeed_stamp_would_wait, at collect) cannot
 *		be stamped without waiting for that transaction, which may stay open
 *		for as long as it likes and hold up every feed of the group.  It is
 *		left for a later sweep, with the changes after it in its shard.  In a
 *		group with a mark, a writer with a change left keeps its xid in the
 *		mark, which then says that none of its range changes is stamped: so
 *		its range changes are left too, each with the rest of its shard, and
 *		so on for their writers.  Each change is left once.  The writer_xids
 *		of the changes left go to s->locked, for the proposed watermark.  Run
 *		on the changes collected, before the cut: the backlog behind a locked
 *		change, which has the lowest change_ids, would otherwise fill every
 *		batch and stall the group.  They shrink within changes[0..nchanges-1].
 *		Run again on the batch once its rows are written, for the changes
 *		locked since they were collected (write_rows), none of which is
 *		written.
 */
static void
sweep_leave_locked(SweepState *s)
{
	LeaveState	ls;
	int			i;
	int			n = 0;

	for (i = 0; i < s->nchanges; i++)
		if (s->changes[i].locked && !s->changes[i].ranges)
			break;
	if (i == s->nchanges)
		return;

	qsort(s->changes, s->nchanges, sizeof(CfeedPendingChange), compare_shard_change);
	ls.s = s;
	ls.leave = palloc0(sizeof(bool) * s->nchanges);
	ls.first = palloc(sizeof(int) * s->nchanges);
	ls.stop = palloc(sizeof(int) * s->nchanges);
	ls.writers = NULL;
	ls.work = NIL;
	for (i = 0; i < s->nchanges; i++)
	{
		bool		same = i > 0 && s->changes[i].feed_id == s->changes[i - 1].feed_id &&
			s->changes[i].shard == s->changes[i - 1].shard;

		ls.first[i] = same ? ls.first[i - 1] : i;
		ls.stop[ls.first[i]] = i + 1;
	}
	if (s->marked)
	{
		HASHCTL		ctl;

		ctl.keysize = sizeof(FullTransactionId);
		ctl.entrysize = sizeof(LeftWriter);
		ctl.hcxt = CurrentMemoryContext;
		ls.writers = hash_create("cfeed sweep left writers", 64, &ctl,
								 HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
		for (i = 0; i < s->nchanges; i++)
		{
			bool		found;
			LeftWriter *w = hash_search(ls.writers, &s->changes[i].writer_xid, HASH_ENTER, &found);

			if (!found)
			{
				w->left = false;
				w->ranged = NIL;
			}
			if (s->changes[i].ranges)
				w->ranged = lappend_int(w->ranged, i);
		}
	}
	for (i = 0; i < s->nchanges; i++)
		if (s->changes[i].locked && !s->changes[i].ranges)
			leave_from(&ls, i);
	while (ls.work != NIL)
	{
		LeftWriter *w = linitial(ls.work);
		ListCell   *lc;

		ls.work = list_delete_first(ls.work);
		foreach(lc, w->ranged)
			leave_from(&ls, lfirst_int(lc));
	}

	for (i = 0; i < s->nchanges; i++)
	{
		if (ls.leave[i])
			s->locked[s->nlocked++] = s->changes[i].writer_xid;
		else
			s->changes[n++] = s->changes[i];
	}
	s->nchanges = n;
}

/*
 * sweep_propose
 *		Propose the watermark that holds once the sweep commits, with the
 *		writer_xids of the changes left for a later sweep: those the cut
 *		left, those left locked, and those held back because their shard is
 *		out of numbers.
 */
static void
sweep_propose(SweepState *s)
{
	int			ncut = s->ncollected - s->nbatch;
	int			nleft = s->nheld + s->nlocked + ncut;
	FullTransactionId *left = palloc(sizeof(FullTransactionId) * Max(nleft, 1));
	int			i;

	memcpy(left, s->held, sizeof(FullTransactionId) * s->nheld);
	if (s->nlocked > 0)
		memcpy(left + s->nheld, s->locked, sizeof(FullTransactionId) * s->nlocked);
	for (i = 0; i < ncut; i++)
		left[s->nheld + s->nlocked + i] = s->changes[s->nbatch + i].writer_xid;
	cfeed_watermark_propose(s->watermark, s->snapshot, left, nleft);
}

/*
 * batch_shard
 *		The sweep's entry of the shard of a change in the batch.
 */
static ShardEntry *
batch_shard(SweepState *s, const CfeedPendingChange *c)
{
	int32		key[2] = {c->feed_id, c->shard};
	ShardEntry *e = hash_search(s->shards, key, HASH_FIND, NULL);

	/* only changes of the group's shards, not out of numbers, are left */
	Assert(e != NULL && e->in_group && e->shard.last_number < PG_INT64_MAX);
	return e;
}

/*
 * sweep_tally
 *		Record each shard's count of changes in the batch, its new head and
 *		its oldest change's age; the batch is ordered by shard and number.
 */
static void
sweep_tally(SweepState *s)
{
	HASH_SEQ_STATUS status;
	ShardEntry *e;
	int			i;

	hash_seq_init(&status, s->shards);
	while ((e = hash_seq_search(&status)) != NULL)
	{
		e->count = 0;
		e->lag_ms = 0;
	}
	s->nshards = 0;
	for (i = 0; i < s->nchanges; i++)
	{
		e = batch_shard(s, &s->changes[i]);
		if (e->count++ == 0)
			s->nshards++;
		/* a stamp is above the shard's head as of the snapshot, and its floor */
		Assert(s->changes[i].number > e->shard.last_number &&
			   s->changes[i].number > e->shard.floor_number);
		e->new_last = s->changes[i].number;
		/* an infinite written_at only in a row copied in (guard.c) */
		if (!TIMESTAMP_NOT_FINITE(s->changes[i].written_at))
			e->lag_ms = Max(e->lag_ms, (s->clock - s->changes[i].written_at) / 1000);
	}
}

/*
 * sweep_number
 *		The number step: per shard in change_id order, each change the next
 *		number after its shard's head (sweep_tally then records the shards'
 *		new heads).  A change whose number would pass 2^63 - 1 is held back
 *		(hold_change) and leaves the batch; so are the rest of its shard's.
 *		The batch shrinks within changes[0..nbatch-1]; the cut-off part after
 *		it is left untouched.
 *
 *		A shard's changes get the clock's time as their stamped_at, or its
 *		head's stamped_at if that is later (the clock went back, or another
 *		server's stamps came first: a failover, a restore), so that a
 *		shard's stamped_at never decreases with its numbers, which cursor_at
 *		relies on.  Each shard's own: another shard's head far ahead (a row
 *		copied in) does not move it.
 */
static void
sweep_number(SweepState *s)
{
	int			i;
	int			n = 0;

	qsort(s->changes, s->nchanges, sizeof(CfeedPendingChange), compare_shard_change);
	s->clock = GetCurrentTimestamp();
	for (i = 0; i < s->nchanges; i++)
	{
		ShardEntry *e = batch_shard(s, &s->changes[i]);
		int64		last;
		int64		next;

		/* new_last is the shard's last number so far, once count is set */
		last = e->count > 0 ? e->new_last : e->shard.last_number;
		if (pg_add_s64_overflow(last, 1, &next))
		{
			hold_change(s, e, &s->changes[i]);
			continue;
		}
		e->count++;
		e->new_last = next;
		s->changes[n] = s->changes[i];
		s->changes[n].stamped_at = Max(s->clock, e->head_at);
		s->changes[n++].number = next;
	}
	s->nchanges = n;
	sweep_tally(s);
}

/*
 * check_held_writers
 *		In a group with a mark, a writer whose change was held back (its row
 *		shard out of numbers) keeps its xid in the mark, which says that none
 *		of its range changes is stamped: stamping one of them now would
 *		number it again at every later sweep.  Such a writer fails the sweep,
 *		as a range shard out of numbers does (hold_change).
 */
static void
check_held_writers(SweepState *s)
{
	HASHCTL		ctl;
	HTAB	   *held;
	int			i;

	if (!s->marked || s->nheld == 0)
		return;
	ctl.keysize = sizeof(FullTransactionId);
	ctl.entrysize = sizeof(FullTransactionId);
	ctl.hcxt = CurrentMemoryContext;
	held = hash_create("cfeed sweep held writers", s->nheld, &ctl,
					   HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	for (i = 0; i < s->nheld; i++)
		(void) hash_search(held, &s->held[i], HASH_ENTER, NULL);
	for (i = 0; i < s->nchanges; i++)
		if (s->changes[i].ranges &&
			hash_search(held, &s->changes[i].writer_xid, HASH_FIND, NULL) != NULL)
			ereport(ERROR,
					(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
					 errmsg("a transaction that wrote to shard %d of feed %d also wrote to a shard that has run out of sequence numbers",
							s->changes[i].shard, s->changes[i].feed_id),
					 errdetail("Shard %d of feed %d is stored in ranges, so transaction %llu is stamped whole or not at all.",
							   s->changes[i].shard, s->changes[i].feed_id,
							   (unsigned long long) U64FromFullTransactionId(s->changes[i].writer_xid)),
					 errhint("Delete the pending changes of the shard out of numbers; sweep group %d cannot be swept until then.",
							 s->sweep_group)));
}

/*
 * write_rows
 *		Write the numbers of the batch's changes of row shards into their
 *		rows (stamp.c).  A change another transaction locked since the sweep
 *		collected it is not written, nor are the rest of its shard's: they
 *		leave the batch as if they had been found locked (sweep_leave_locked,
 *		with the range changes of their writers, none written yet), the
 *		shards' heads are counted again and the watermark proposed again.
 */
static void
write_rows(SweepState *s)
{
	CfeedPendingChange *rows = palloc(sizeof(CfeedPendingChange) * s->nchanges);
	int		   *at = palloc(sizeof(int) * s->nchanges);
	int			nrows = 0;
	int			nleft;
	int			i;

	for (i = 0; i < s->nchanges; i++)
		if (!s->changes[i].ranges)
		{
			at[nrows] = i;
			rows[nrows++] = s->changes[i];
		}
	if (nrows == 0 || (nleft = cfeed_stamp(s->changerel, rows, nrows, s->snapshot)) == 0)
		return;
	for (i = 0; i < nrows; i++)
		s->changes[at[i]].locked = rows[i].locked;
	sweep_leave_locked(s);
#ifdef USE_ASSERT_CHECKING
	/* the closure left no row change that was written */
	for (i = 0; i < s->nchanges; i++)
		if (!s->changes[i].ranges)
			nrows--;
	Assert(nrows == nleft);
#endif
	sweep_tally(s);
	sweep_propose(s);
}

/*
 * sweep_write
 *		The write step: a new feed epoch first if this is the first stamp on
 *		this timeline; the numbers of row shards' changes into their rows
 *		(write_rows), those of range shards' as cfeed.stamp rows (ranges.c),
 *		in the order of the number step; and, when it stamped a range change,
 *		the group's new mark, its proposed watermark (a sweep that stamped
 *		none leaves the stored mark as it is: still true, if older).  The
 *		commit is forced synchronous.  Never into an unlogged table
 *		(persistence_guard.c: one made so without the preload).
 */
static void
sweep_write(SweepState *s)
{
	CfeedPendingChange *ranged = palloc(sizeof(CfeedPendingChange) * s->nchanges);
	int			nranged = 0;
	int			i;

	cfeed_check_logged(RelationGetRelid(s->changerel));
	cfeed_epoch_begin();
	write_rows(s);
	for (i = 0; i < s->nchanges; i++)
		if (s->changes[i].ranges)
			ranged[nranged++] = s->changes[i];
	if (nranged > 0)
	{
		CfeedMark	mark;
		int			spi_level = cfeed_spi_connect();

		Assert(s->marked);		/* else range_change_unstamped refused it */
		cfeed_check_logged(cfeed_relid("stamp"));
		cfeed_check_logged(cfeed_relid_locked("sweep_mark", RowExclusiveLock));
		cfeed_ranges_stamp(ranged, nranged);
		cfeed_watermark_proposal(s->watermark, &mark);
		cfeed_mark_store(s->sweep_group, &mark, s->mark_xmax);
		cfeed_spi_finish(spi_level);
	}
	cfeed_stamp_commit_level();
	pfree(ranged);
}

/*
 * sweep_announce
 *		The announce step: fill *result (shards[] palloc'd in the current
 *		memory context), remember each shard's new head as its hint, and have
 *		its readers woken and its longpoll listeners notified at commit.
 */
static void
sweep_announce(SweepState *s, CfeedSweepResult *result)
{
	HASH_SEQ_STATUS status;
	ShardEntry *e;
	int			k = 0;
	int			i;

	result->change_count = s->nchanges;
	for (i = 1; i < s->nchanges && !result->several_writers; i++)
		result->several_writers = !FullTransactionIdEquals(s->changes[i].writer_xid,
														   s->changes[0].writer_xid);
	result->nshards = s->nshards;
	result->shards = palloc(sizeof(CfeedSweptShard) * Max(s->nshards, 1));
	result->exhausted = palloc(sizeof(CfeedSweptShard) * Max(s->nexhausted, 1));
	if (s->nshards == 0 && s->nexhausted == 0)
		return;
	hash_seq_init(&status, s->shards);
	while ((e = hash_seq_search(&status)) != NULL)
	{
		CfeedSweptShard *r;

		if (e->held > 0)
		{
			r = &result->exhausted[result->nexhausted++];
			r->feed_id = e->shard.feed_id;
			r->shard = e->shard.shard;
			r->change_count = e->held;
			r->last_number = e->count > 0 ? e->new_last : e->shard.last_number;
			r->lag_ms = 0;
		}
		if (e->count == 0)
			continue;
		r = &result->shards[k++];
		r->feed_id = e->shard.feed_id;
		r->shard = e->shard.shard;
		r->change_count = e->count;
		r->last_number = e->new_last;
		e->hint->head = e->new_last;
		r->lag_ms = e->lag_ms;
		result->max_lag_ms = Max(result->max_lag_ms, e->lag_ms);
		cfeed_broadcast_at_commit(e->shard.feed_id, e->shard.shard);
		if (e->shard.longpoll)
			cfeed_notify_head(&e->shard, e->new_last);
	}
}

/*
 * cfeed_sweep_group
 *		Stamp the committed changes of one sweep group, in the caller's
 *		transaction, which must be READ COMMITTED.  Waits for a concurrent
 *		sweep of the group to finish unless nowait, in which case it returns
 *		false without sweeping.  Runs as the extension's owner: owner, or
 *		looked up when InvalidOid (the background sweeper passes the one it
 *		refreshes periodically).  Fills *result (shards[] palloc'd in the
 *		caller's memory context).  The caller commits; the commit is forced
 *		synchronous.  See the file header for the steps.  A shard out of
 *		numbers does not fail the sweep: its changes stay pending and it is
 *		listed in result->exhausted, for the caller to report
 *		(cfeed_sweep_report_exhausted).
 */
bool
cfeed_sweep_group(int32 sweep_group, bool nowait, Oid owner, CfeedSweepResult *result)
{
	SweepState	s;
	MemoryContext sweepcxt;
	MemoryContext oldcxt;
	Oid			save_userid;
	int			save_sec_context;

	memset(result, 0, sizeof(CfeedSweepResult));
	cfeed_check_sweep_isolation();
	(void) cfeed_schema_oid(false);

	if (!cfeed_sweep_lock(sweep_group, nowait))
		return false;
	/* the lock waited for a sweep that waited for a move (report_moved) */
	if (!OidIsValid(owner) && !OidIsValid(get_extension_oid("cfeed", true)))
		report_moved();

	/*
	 * Stamping is the extension owner's, whoever was granted EXECUTE on
	 * sweep(): switch for the rest of the sweep (an error's abort restores
	 * the caller).
	 */
	GetUserIdAndSecContext(&save_userid, &save_sec_context);
	SetUserIdAndSecContext(OidIsValid(owner) ? owner : cfeed_extension_owner(),
						   save_sec_context | SECURITY_LOCAL_USERID_CHANGE);

	sweepcxt = AllocSetContextCreate(CurrentMemoryContext, "cfeed sweep",
									 ALLOCSET_DEFAULT_SIZES);
	oldcxt = MemoryContextSwitchTo(sweepcxt);

	sweep_begin(&s, sweep_group);
	sweep_collect(&s);
	sweep_leave_locked(&s);
	sweep_cut(&s);
	if (s.nchanges > 0)
		sweep_number(&s);
	check_held_writers(&s);
	sweep_propose(&s);
	if (s.nchanges > 0)
		sweep_write(&s);
	UnregisterSnapshot(s.snapshot);
	table_close(s.changerel, NoLock);

	MemoryContextSwitchTo(oldcxt);
	sweep_announce(&s, result);
	MemoryContextDelete(sweepcxt);
	SetUserIdAndSecContext(save_userid, save_sec_context);
	return true;
}

/*
 * cfeed_check_sweep_isolation
 *		Sweeping needs a fresh snapshot per sweep: refuse REPEATABLE READ and
 *		SERIALIZABLE (25000), and recovery.
 */
void
cfeed_check_sweep_isolation(void)
{
	if (IsolationUsesXactSnapshot())
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TRANSACTION_STATE),
				 errmsg("cfeed cannot sweep in a REPEATABLE READ or SERIALIZABLE transaction"),
				 errdetail("A sweep must see every change committed before it starts, which a transaction snapshot does not."),
				 errhint("Sweep in a READ COMMITTED transaction.")));
	if (RecoveryInProgress())
		ereport(ERROR,
				(errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
				 errmsg("cfeed cannot sweep during recovery"),
				 errhint("Changes are stamped on the primary; a standby replays them.")));
}
