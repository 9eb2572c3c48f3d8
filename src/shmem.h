/*-------------------------------------------------------------------------
 *
 * shmem.h
 *	  cfeed's shared state: databases, sweepers and reader wait buckets.
 *	  See shmem.c for the locking protocol.
 *
 *-------------------------------------------------------------------------
 */
#ifndef CFEED_SHMEM_H
#define CFEED_SHMEM_H

#include "port/atomics.h"
#include "postmaster/bgworker.h"
#include "storage/condition_variable.h"
#include "storage/latch.h"
#include "utils/timestamp.h"
#include "storage/lwlock.h"

#define CFEED_WAIT_BUCKETS		256
#define CFEED_MAX_DATABASES		64
#define CFEED_MAX_GROUPS		16
#define CFEED_ERROR_LEN			256

/* What the launcher knows of a database. */
typedef enum CfeedDbState
{
	CFEED_DB_FREE = 0,			/* unused entry */
	CFEED_DB_PROBE,				/* not known yet whether it has cfeed */
	CFEED_DB_ACTIVE,			/* has cfeed: sweep it */
	CFEED_DB_ABSENT				/* has no cfeed */
} CfeedDbState;

typedef struct CfeedDatabase
{
	Oid			dboid;
	CfeedDbState state;
	int			paused;			/* utility commands that need it unconnected */
	int			paused_pid;		/* the backend that paused it last */
	char		paused_by[32];	/* and its command, for cfeed.sweepers */
	int			ngroups;		/* sweep groups with shards (0 always) */
	int32		groups[CFEED_MAX_GROUPS];
	/* the groups the launcher could not start a sweeper for, and why */
	int			nunstarted;
	int32		unstarted[CFEED_MAX_GROUPS];
	char		unstarted_why[96];
} CfeedDatabase;

typedef struct CfeedWorkerSlot
{
	bool		in_use;
	Oid			dboid;
	int32		sweep_group;
	pid_t		pid;
	Latch	   *latch;
	/* 1 while the worker pauses after a sweep: commits need not wake it */
	pg_atomic_uint32 pausing;
	/* written by the worker alone */
	uint64		sweeps;
	uint64		changes_stamped;
	TimestampTz last_sweep_time;
	char		last_error[CFEED_ERROR_LEN];
} CfeedWorkerSlot;

typedef struct CfeedSharedState
{
	LWLock	   *lock;
	pid_t		launcher_pid;
	Latch	   *launcher_latch;
	int			max_workers;
	CfeedDatabase dbs[CFEED_MAX_DATABASES];
	ConditionVariable buckets[CFEED_WAIT_BUCKETS];
	/* a hot standby's waits and their waker (standby_waker.c) */
	ConditionVariable replayed; /* broadcast when replay moved */
	pg_atomic_uint64 standby_wait_until;	/* the latest end of a wait */
	Latch	   *waker_latch;	/* the waker's, while it runs */
	CfeedWorkerSlot workers[FLEXIBLE_ARRAY_MEMBER];
} CfeedSharedState;

extern CfeedSharedState *CfeedShared;

/* shmem.c */
extern void cfeed_shmem_init(void);
extern void cfeed_note_write(void);
extern void cfeed_wake_sweepers(Oid dboid);
extern void cfeed_wake_sweepers_for_commit(Oid dboid);
extern ConditionVariable *cfeed_wait_bucket(int32 feed_id, int32 shard);
extern void cfeed_broadcast_at_commit(int32 feed_id, int32 shard);

/* utility.c */
extern void cfeed_utility_hook_init(void);

/* standby_waker.c */
extern void cfeed_standby_waker_register(void);
extern ConditionVariable *cfeed_standby_wait_begin(TimestampTz deadline);

/* launcher.c */
extern void cfeed_worker_init(BackgroundWorker *worker, const char *function, const char *type,
							  BgWorkerStartTime start_time, int restart_time);
extern void cfeed_launcher_register(void);
extern CfeedDatabase *cfeed_find_db(Oid dboid, bool create);
extern void cfeed_wake_launcher(void);

#endif							/* CFEED_SHMEM_H */
