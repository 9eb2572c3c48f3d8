/*-------------------------------------------------------------------------
 *
 * notify.c
 *	  The NOTIFY of a longpoll shard's new head on its channel
 *	  cfeed_<feed_id>_<shard> (payload: the head), at commit: a sweep's
 *	  (sweep.c) and that of a publisher's stamp applied on a subscriber
 *	  (upstream.c).  A hint only: a reader that LISTENs reads the shard
 *	  again and trusts nothing in the payload; cfeed.wait and read(wait_ms)
 *	  are woken through shared memory (shmem.c), never by a NOTIFY.
 *
 * A full notification queue
 * -------------------------
 * PostgreSQL has one notification queue for the cluster, and a commit that
 * has NOTIFYs to queue while it is full fails (PreCommit_Notify: "too many
 * notifications in the NOTIFY queue", 54000).  Any role can fill it: a
 * session LISTENs on some channel and stays in a transaction, which holds
 * the queue's tail back, while another NOTIFYs (from 17 the queue can be
 * as small as max_notify_queue_pages = 64, 512 kB).  A sweep whose
 * NOTIFYs were queued in its transaction would then fail at commit, its
 * stamps lost, and so would every sweep after it, in every database.  So
 * cfeed's NOTIFYs wait in a list of their own until the commit:
 *
 *	 announce	cfeed_notify_head appends (feed, shard, head) to this
 *				transaction's list, tagged with the subtransaction level:
 *				an aborted subtransaction's entries leave the list, a
 *				committed one's pass to its parent, as PostgreSQL's own
 *				pending NOTIFYs do
 *	 pre-commit	(XACT_EVENT_PRE_COMMIT, before PreCommit_Notify)
 *				measure the queue (pg_notification_queue_usage(),
 *				which first moves its tail past what every listener has
 *				read); if the list and the notifications this process
 *				owes (below) leave the queue at most NOTIFY_QUEUE_LIMIT
 *				full, hand them all to Async_Notify, and PreCommit_Notify
 *				has room for them; else hand none, owe the list's, and
 *				log a WARNING (at most once a minute per process)
 *	 owed		per process, each shard's highest head not notified: sent
 *				at the first commit of this process that finds room (a
 *				LOG line says so), whether or not it swept, and dropped
 *				once that commit is done.  So a LISTENer that slept
 *				through a full queue is woken once the queue drains, even
 *				when no change follows: the background sweeper commits at
 *				least every cfeed.fallback_interval; cfeed.sweep() and
 *				sweep_loop() send at a later commit of their session, a
 *				subscriber's apply worker at its next applied transaction.
 *				What a process owes when it exits is lost (docs/
 *				operations.md: a LISTENer should also wait with a timeout)
 *
 * A synchronous standby
 * ---------------------
 * PreCommit_Notify holds the queue's cluster-wide lock until the commit
 * has ended, and a stamping commit waits for the synchronous standby
 * (cfeed.sweep_synchronous_commit): were its NOTIFYs in it, every NOTIFY of
 * the cluster, in any database, would wait as long, and with the standby
 * gone until it is back.  So the background sweeper, whose commits would
 * wait for one (cfeed_notify_defer_sync), owes its notifications instead
 * and sends them right after the commit, in a transaction of its own that
 * waits for no standby (cfeed_notify_send_owed).  cfeed.sweep() and
 * sweep_loop(), whose commits are their callers', NOTIFY as before.
 *
 * The sweep itself never waits for the queue: its stamps commit, and the
 * readers in cfeed.wait and read(wait_ms) are woken, however full it is.
 * A transaction with cfeed's notifications cannot be prepared: at
 * XACT_EVENT_PRE_PREPARE the list goes to Async_Notify, and PostgreSQL
 * refuses to prepare a transaction that notified (a sweep's is refused
 * before that, locks.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "commands/async.h"
#include "fmgr.h"
#include "nodes/pg_list.h"
#include "replication/syncrep.h"
#include "replication/walsender.h"
#include "utils/fmgrprotos.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "cfeed.h"
#include "compat.h"

/* The share of the queue cfeed's notifications may fill it up to. */
#define NOTIFY_QUEUE_LIMIT		0.9

/*
 * More than the bytes one of cfeed's notifications takes in the queue: an
 * entry's header (16 bytes), the channel (at most 29 characters) and the
 * payload (at most 20), each with its NUL, aligned.
 */
#define NOTIFY_ENTRY_BYTES		128

/* How often a process may warn that it skipped notifications. */
#define NOTIFY_WARN_MS			60000

/* A new head to notify when this transaction commits. */
typedef struct PendingNotify
{
	int32		feed_id;
	int32		shard;
	int64		head;
	int			level;			/* the (sub)transaction nesting level */
} PendingNotify;

/* A shard whose notification a full queue made this process skip. */
typedef struct OwedNotify
{
	int32		key[2];			/* feed_id, shard: hash key */
	int64		head;			/* the highest head skipped */
} OwedNotify;

/* This transaction's notifications, in TopTransactionContext. */
static List *pending = NIL;

/* What this process owes (TopMemoryContext), NULL when nothing. */
static HTAB *owed = NULL;

/* This transaction queued what was owed: drop it when it commits. */
static bool owed_queued = false;

/* What is owed was skipped for a full queue (say so when it is sent). */
static bool owed_for_queue = false;

/* This process owes its notifications at a commit that waits for a standby. */
static bool defer_sync = false;

/* When this process last warned of a full queue. */
static TimestampTz last_warning = 0;

/*
 * queue_notify
 *		Async_Notify the head of a shard on its channel.
 */
static void
queue_notify(int32 feed_id, int32 shard, int64 head)
{
	char		channel[NAMEDATALEN];
	char		payload[32];

	snprintf(channel, sizeof(channel), CFEED_CHANNEL_PREFIX "%d_%d", feed_id, shard);
	snprintf(payload, sizeof(payload), INT64_FORMAT, head);
	Async_Notify(channel, payload);
}

/*
 * queue_usage
 *		pg_notification_queue_usage(): the share of the notification queue
 *		in use, after moving its tail past what every listener has read.
 */
static double
queue_usage(void)
{
	LOCAL_FCINFO(fcinfo, 0);

	InitFunctionCallInfoData(*fcinfo, NULL, 0, InvalidOid, NULL, NULL);
	return DatumGetFloat8(pg_notification_queue_usage(fcinfo));
}

/*
 * owe
 *		Remember that the head of a shard was not notified.
 */
static void
owe(const PendingNotify *n)
{
	int32		key[2] = {n->feed_id, n->shard};
	OwedNotify *o;
	bool		found;

	if (owed == NULL)
	{
		HASHCTL		ctl;

		ctl.keysize = sizeof(key);
		ctl.entrysize = sizeof(OwedNotify);
		ctl.hcxt = TopMemoryContext;
		owed = hash_create("cfeed owed notifications", 64, &ctl,
						   HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	}
	o = hash_search(owed, key, HASH_ENTER, &found);
	if (!found || n->head > o->head)
		o->head = n->head;
}

/*
 * notify_pre_commit
 *		Just before PreCommit_Notify: hand this transaction's notifications
 *		and those owed to Async_Notify if the queue has room for them, else
 *		owe this transaction's (see the file header).
 */
static void
notify_pre_commit(void)
{
	long		nowed = owed != NULL ? hash_get_num_entries(owed) : 0;
	int			n = list_length(pending) + (int) nowed;
	double		pages = CFEED_NOTIFY_QUEUE_PAGES;
	double		usage;
	ListCell   *lc;

	if (n == 0)
		return;

	/*
	 * A commit that waits for a synchronous standby (see the file header):
	 * nothing goes to the queue in it, what was owed before included.
	 */
	if (defer_sync && SyncRepRequested() &&
		SyncRepStandbyNames != NULL && SyncRepStandbyNames[0] != '\0')
	{
		foreach(lc, pending)
			owe(lfirst(lc));
		return;
	}

	/*
	 * Without PreCommit_Notify's lock, which would be held while the
	 * callbacks after this one run (postgres_fdw's remote COMMIT, whose
	 * NOTIFY would wait for it: a wait no deadlock check sees): another
	 * commit may add to the queue before this one does, which the limit's
	 * margin leaves room for.  Were the queue full all the same, this
	 * commit would fail as before, once: the next sweep finds it full.
	 */
	usage = queue_usage();

	/*
	 * PreCommit_Notify checks for room before each page it fills, so n
	 * entries need the pages they cover plus the one being filled, and one
	 * for the check before the last.
	 */
	if (usage * pages + (double) n * NOTIFY_ENTRY_BYTES / BLCKSZ + 2 +
		CFEED_NOTIFY_QUEUE_SLACK <= NOTIFY_QUEUE_LIMIT * pages)
	{
		if (nowed > 0)
		{
			HASH_SEQ_STATUS status;
			OwedNotify *o;

			if (owed_for_queue)
				ereport(LOG,
						(errmsg_plural("cfeed: PostgreSQL's notification queue has room again (%.0f%% full): notifying the %ld longpoll shard not notified while it was full",
									   "cfeed: PostgreSQL's notification queue has room again (%.0f%% full): notifying the %ld longpoll shards not notified while it was full",
									   (unsigned long) nowed, usage * 100, nowed)));
			hash_seq_init(&status, owed);
			while ((o = hash_seq_search(&status)) != NULL)
				queue_notify(o->key[0], o->key[1], o->head);
			owed_queued = true;
		}
		foreach(lc, pending)
		{
			PendingNotify *p = lfirst(lc);

			queue_notify(p->feed_id, p->shard, p->head);
		}
		return;
	}

	foreach(lc, pending)
		owe(lfirst(lc));
	owed_for_queue = true;
	if (TimestampDifferenceExceeds(last_warning, GetCurrentTimestamp(), NOTIFY_WARN_MS))
	{
		ereport(WARNING,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg_plural("cfeed: PostgreSQL's notification queue is %.0f%% full: %ld longpoll shard is not notified of its new changes",
							   "cfeed: PostgreSQL's notification queue is %.0f%% full: %ld longpoll shards are not notified of their new changes",
							   (unsigned long) hash_get_num_entries(owed),
							   usage * 100, hash_get_num_entries(owed)),
				 errdetail("The changes are stamped, and cfeed.wait and cfeed.read(wait_ms) are woken, as ever; a reader that LISTENs on a shard's channel is notified once the queue has room again."),
				 errhint("A session that LISTENs and stays in a transaction holds the queue back: find it (PostgreSQL's warning \"NOTIFY queue is ... full\" names one; pg_stat_activity shows it idle in transaction) and end its transaction or terminate it. pg_notification_queue_usage() shows the queue drain.")));
		last_warning = GetCurrentTimestamp();
	}
}

/*
 * notify_xact_callback
 *		Queue or owe the notifications before the commit; forget the list
 *		when the transaction ends, and what was owed once a commit has
 *		queued it.  Nothing here may fail once the transaction has
 *		committed: dropping the owed table frees memory only.
 */
static void
notify_xact_callback(XactEvent event, void *arg pg_attribute_unused())
{
	ListCell   *lc;

	switch (event)
	{
		case XACT_EVENT_PRE_COMMIT:
			notify_pre_commit();
			break;
		case XACT_EVENT_PRE_PREPARE:
			/* PostgreSQL refuses to prepare it, as before the list */
			foreach(lc, pending)
			{
				PendingNotify *p = lfirst(lc);

				queue_notify(p->feed_id, p->shard, p->head);
			}
			break;
		case XACT_EVENT_COMMIT:
			if (owed_queued)
			{
				hash_destroy(owed);
				owed = NULL;
				owed_for_queue = false;
			}
			pending = NIL;
			owed_queued = false;
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PREPARE:
			pending = NIL;
			owed_queued = false;
			break;
		default:
			break;
	}
}

/*
 * notify_subxact_callback
 *		A subtransaction's notifications pass to its parent when it
 *		commits and leave the list when it aborts.  The callback runs at
 *		the subtransaction's own nesting level.
 */
static void
notify_subxact_callback(SubXactEvent event,
						SubTransactionId mySubid pg_attribute_unused(),
						SubTransactionId parentSubid pg_attribute_unused(),
						void *arg pg_attribute_unused())
{
	int			level;
	ListCell   *lc;

	if (pending == NIL)
		return;
	level = GetCurrentTransactionNestLevel();
	if (event == SUBXACT_EVENT_COMMIT_SUB)
	{
		foreach(lc, pending)
		{
			PendingNotify *p = lfirst(lc);

			if (p->level >= level)
				p->level = level - 1;
		}
	}
	else if (event == SUBXACT_EVENT_ABORT_SUB)
	{
		foreach(lc, pending)
		{
			PendingNotify *p = lfirst(lc);

			if (p->level >= level)
				pending = foreach_delete_current(pending, lc);
		}
	}
}

/*
 * cfeed_notify_head
 *		NOTIFY a longpoll shard's new head on channel cfeed_<feed_id>_<shard>
 *		when the current transaction commits, if PostgreSQL's notification
 *		queue has room then; else later (see the file header).  Never fails
 *		the commit.
 */
void
cfeed_notify_head(const CfeedShard *shard, int64 head)
{
	static bool callbacks_registered = false;
	MemoryContext oldcxt;
	PendingNotify *p;

	if (!callbacks_registered)
	{
		RegisterXactCallback(notify_xact_callback, NULL);
		RegisterSubXactCallback(notify_subxact_callback, NULL);
		callbacks_registered = true;
	}
	oldcxt = MemoryContextSwitchTo(TopTransactionContext);
	p = palloc(sizeof(PendingNotify));
	p->feed_id = shard->feed_id;
	p->shard = shard->shard;
	p->head = head;
	p->level = GetCurrentTransactionNestLevel();
	pending = lappend(pending, p);
	MemoryContextSwitchTo(oldcxt);
}

/*
 * cfeed_notify_defer_sync
 *		The background sweeper: owe the notifications of a commit that waits
 *		for a synchronous standby, to send with cfeed_notify_send_owed (see
 *		the file header).
 */
void
cfeed_notify_defer_sync(void)
{
	defer_sync = true;
}

/*
 * cfeed_notify_send_owed
 *		Outside a transaction, after a commit: send what this process owes
 *		(its deferred notifications, or those a full queue made it skip, if
 *		the queue has room now) in a transaction of its own, whose commit
 *		waits for no standby.  Nothing when nothing is owed.  A failure is
 *		logged, not raised: the stamps are committed, and what is owed stays
 *		owed.
 */
void
cfeed_notify_send_owed(void)
{
	MemoryContext oldcxt = CurrentMemoryContext;

	if (owed == NULL)
		return;
	PG_TRY();
	{
		SetCurrentStatementStartTimestamp();
		StartTransactionCommand();
		(void) set_config_option("synchronous_commit", "local", PGC_SUSET, PGC_S_SESSION,
								 GUC_ACTION_LOCAL, true, 0, false);
		CommitTransactionCommand();
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		/* the stamps are committed: no failed sweep; what is owed stays owed */
		MemoryContextSwitchTo(oldcxt);
		edata = CopyErrorData();
		FlushErrorState();
		AbortCurrentTransaction();
		ereport(LOG,
				(errmsg("cfeed: sending the notifications of a sweep failed: %s", edata->message),
				 errdetail("They are sent at a later commit of this sweeper.")));
		FreeErrorData(edata);
	}
	PG_END_TRY();
	MemoryContextSwitchTo(oldcxt);
}
