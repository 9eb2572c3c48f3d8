/*-------------------------------------------------------------------------
 *
 * locks.c
 *	  cfeed's heavyweight advisory locks: their tags, built here only, and
 *	  the calls that take and release them.
 *
 *	  Field 4 of every tag is a value user-level advisory locks never use
 *	  (pg_advisory_lock sets 1 or 2), so no application lock collides:
 *
 *	   lock			tag (db, field1, field2, field4)	held
 *	   sweep		(db, 'cfee', group, 0x6366)		transaction: one sweep of a
 *													group at a time; also a
 *													shard's move between groups
 *	   leader		(db, 'cfee', group, 0x6367)		session: one sweep_loop per
 *													group
 *	   shards		(db, feed_id, 0, 0x6368)		transaction: a feed's set of
 *													shards and its layout, share
 *													for a writer, exclusive for
 *													a shard that goes away,
 *													closes, opens or is added
 *													open (reshard.c)
 *	   number		(db, relid, 0, 0x6369)			transaction: giving a tracked
 *													table its number
 *
 *	  pg_locks shows them as locktype 'advisory' with objsubid the field 4
 *	  value (the tests look for 25448, the shards lock).  Who takes which, in
 *	  what order, is described where they are used: sweep.c (sweep), shards.c
 *	  (shards), shard_guard.c (the guard trigger's shards and sweep locks),
 *	  sweep_sql.c (leader), table_numbers.c (number).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "storage/lock.h"
#include "utils/guc.h"
#include "utils/inval.h"
#include "utils/timestamp.h"

#include "cfeed.h"

/* First key of the sweep and leader locks ('cfee'). */
#define CFEED_LOCK_KEY				0x63666565

/* Field 4 of each lock's tag. */
#define CFEED_LOCK_SWEEP			0x6366
#define CFEED_LOCK_LEADER			0x6367
#define CFEED_LOCK_SHARDS			0x6368
#define CFEED_LOCK_NUMBER			0x6369

/*
 * lock_tag
 *		The tag of one of cfeed's locks in this database: a sweep group's
 *		(CFEED_LOCK_SWEEP, CFEED_LOCK_LEADER), a feed's (CFEED_LOCK_SHARDS)
 *		or a table's (CFEED_LOCK_NUMBER).
 */
static void
lock_tag(LOCKTAG *tag, uint16 kind, int32 id)
{
	if (kind == CFEED_LOCK_SHARDS || kind == CFEED_LOCK_NUMBER)
		SET_LOCKTAG_ADVISORY(*tag, MyDatabaseId, (uint32) id, 0, kind);
	else
		SET_LOCKTAG_ADVISORY(*tag, MyDatabaseId, CFEED_LOCK_KEY, (uint32) id, kind);
}

/* The sweep group whose sweep lock this transaction took first, if any. */
static bool sweep_locked = false;
static int32 sweep_locked_group = 0;

/*
 * sweep_lock_xact_callback
 *		A transaction that took a sweep lock (it swept, or moved a shard
 *		between groups) may not be prepared: the prepared transaction would
 *		keep the lock, and the group's sweeps waiting, until COMMIT PREPARED
 *		or ROLLBACK PREPARED, and its stamps would become visible at a
 *		COMMIT PREPARED whose durability is the committing session's, not
 *		cfeed.sweep_synchronous_commit (0A000, as PostgreSQL refuses to
 *		prepare a transaction that ran NOTIFY).
 */
static void
sweep_lock_xact_callback(XactEvent event, void *arg pg_attribute_unused())
{
	if (!sweep_locked)
		return;
	if (event == XACT_EVENT_PRE_PREPARE)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot PREPARE a transaction that swept sweep group %d or moved a shard between sweep groups",
						sweep_locked_group),
				 errdetail("The prepared transaction would keep the group's sweeps waiting until COMMIT PREPARED or ROLLBACK PREPARED, and its stamps would become visible as durably as the committing session says, not as cfeed.sweep_synchronous_commit does."),
				 errhint("Sweep, or move shards, in a transaction of its own.")));
	if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_PARALLEL_COMMIT ||
		event == XACT_EVENT_ABORT || event == XACT_EVENT_PARALLEL_ABORT ||
		event == XACT_EVENT_PREPARE)
		sweep_locked = false;
}

/*
 * cfeed_sweep_lock
 *		Take the transaction-level lock that serializes the sweeps of a group
 *		(also taken by a transaction that moves a shard between groups).
 *		Returns false (only with nowait) when another transaction holds it.
 *		The transaction may not be prepared after (sweep_lock_xact_callback).
 */
bool
cfeed_sweep_lock(int32 sweep_group, bool nowait)
{
	static bool callback_registered = false;
	LOCKTAG		tag;
	LockAcquireResult res;

	lock_tag(&tag, CFEED_LOCK_SWEEP, sweep_group);
	res = LockAcquire(&tag, ExclusiveLock, false, nowait);
	if (res == LOCKACQUIRE_NOT_AVAIL)
		return false;

	/*
	 * As LockRelationOid does: what committed while the lock was waited for
	 * (a move to the SQL edition, sweep.c's report_moved) is seen by the
	 * catalog lookups that follow.
	 */
	if (res != LOCKACQUIRE_ALREADY_CLEAR)
		AcceptInvalidationMessages();
	if (!callback_registered)
	{
		RegisterXactCallback(sweep_lock_xact_callback, NULL);
		callback_registered = true;
	}
	if (!sweep_locked)
	{
		sweep_locked = true;
		sweep_locked_group = sweep_group;
	}
	return true;
}

/*
 * cfeed_sweep_lock_held
 *		Whether this transaction holds a group's sweep lock (for Asserts).
 */
bool
cfeed_sweep_lock_held(int32 sweep_group)
{
	LOCKTAG		tag;

	lock_tag(&tag, CFEED_LOCK_SWEEP, sweep_group);
	return cfeed_lock_held_by_me(&tag, ExclusiveLock);
}

/*
 * cfeed_leader_lock / cfeed_leader_unlock
 *		The session-level lock a sweep_loop holds for its whole duration:
 *		taken without waiting (false when another session holds it), and
 *		released by the caller, also on error.
 */
bool
cfeed_leader_lock(int32 sweep_group)
{
	LOCKTAG		tag;

	lock_tag(&tag, CFEED_LOCK_LEADER, sweep_group);
	return LockAcquire(&tag, ExclusiveLock, true, true) != LOCKACQUIRE_NOT_AVAIL;
}

void
cfeed_leader_unlock(int32 sweep_group)
{
	LOCKTAG		tag;

	lock_tag(&tag, CFEED_LOCK_LEADER, sweep_group);
	LockRelease(&tag, ExclusiveLock, true);
}

/*
 * cfeed_shards_lock
 *		Take a feed's shards lock in lockmode until the transaction ends
 *		(waiting as long as it takes).  Returns true when this transaction
 *		did not hold it in that mode before.
 */
bool
cfeed_shards_lock(int32 feed_id, LOCKMODE lockmode)
{
	LOCKTAG		tag;

	lock_tag(&tag, CFEED_LOCK_SHARDS, feed_id);
	return LockAcquire(&tag, lockmode, false, false) == LOCKACQUIRE_OK;
}

/*
 * cfeed_shards_lock_exclusive
 *		Take a feed's shards lock in exclusive mode until the transaction
 *		ends, without joining the lock's queue, where the writers that come
 *		after would wait behind this transaction: try it without waiting,
 *		and while others hold it, wait for the transactions that hold it
 *		then (WaitForLockers, a wait for each one's end, which the deadlock
 *		detector and pg_blocking_pids see) and try again.  Gives up at
 *		deadline: false when the lock was still held then, or the error of
 *		lock_timeout (55P03), set to the time left, during a wait (the
 *		caller makes a positive lock_timeout of the session the deadline
 *		when it comes first).  Writers
 *		that keep the lock held without a gap until deadline (a new one
 *		always in progress) keep it from this transaction.
 */
bool
cfeed_shards_lock_exclusive(int32 feed_id, TimestampTz deadline)
{
	LOCKTAG		tag;

	lock_tag(&tag, CFEED_LOCK_SHARDS, feed_id);
	for (;;)
	{
		long		remaining;
		int			nestlevel;
		char		timeout[32];

		CHECK_FOR_INTERRUPTS();
		if (LockAcquire(&tag, AccessExclusiveLock, false, true) != LOCKACQUIRE_NOT_AVAIL)
			return true;
		remaining = cfeed_ms_until(GetCurrentTimestamp(), deadline);
		if (remaining <= 0)
			return false;
		nestlevel = NewGUCNestLevel();
		snprintf(timeout, sizeof(timeout), "%ld", remaining);
		(void) set_config_option("lock_timeout", timeout, PGC_USERSET, PGC_S_SESSION,
								 GUC_ACTION_SAVE, true, 0, false);
		WaitForLockers(tag, AccessExclusiveLock, false);
		AtEOXact_GUC(true, nestlevel);
	}
}

/*
 * cfeed_shards_lock_held
 *		Whether this transaction holds a feed's shards lock in lockmode.
 */
bool
cfeed_shards_lock_held(int32 feed_id, LOCKMODE lockmode)
{
	LOCKTAG		tag;

	lock_tag(&tag, CFEED_LOCK_SHARDS, feed_id);
	return cfeed_lock_held_by_me(&tag, lockmode);
}

/*
 * cfeed_number_lock
 *		Take, until the transaction ends, the lock that serializes giving
 *		table relid its number (table_numbers.c).
 */
void
cfeed_number_lock(Oid relid)
{
	LOCKTAG		tag;

	lock_tag(&tag, CFEED_LOCK_NUMBER, (int32) relid);
	(void) LockAcquire(&tag, ExclusiveLock, false, false);
}
