/*
 * src/client/tail.h
 *		State of one `cfeed tail` run, shared by tail.c (options and the
 *		loop), tail_conn.c (connection setup, reconnecting, feed epochs),
 *		tail_read.c (reading and printing), tail_wait.c (waiting between
 *		reads), tail_layout.c (the feed's shards, following splits),
 *		tail_dead.c (a group's dead letters) and group.c (consumer-group
 *		leases).
 */
#ifndef CFEED_TAIL_H
#define CFEED_TAIL_H

#include "client.h"

#define PAGE_SIZE			1000
#define DEFAULT_WAIT_MS		5000
#define DEFAULT_TTL_MS		30000
#define STANDBY_POLL_MS		250
#define BACKOFF_MIN_MS		100
#define BACKOFF_MAX_MS		5000

/* What a step of the loop asks the caller to do next. */
typedef enum TailStep
{
	STEP_OK,					/* carry on */
	STEP_LOST,					/* the connection is gone: reconnect */
	STEP_STOP					/* exit with Tail.exit_code */
} TailStep;

typedef enum TailFrom
{
	FROM_BEGINNING,
	FROM_NOW,
	FROM_TIME,
	FROM_CURSOR
} TailFrom;

/* One shard being followed. */
typedef struct TailShard
{
	int			shard;
	bool		held;			/* read it (always, outside group mode) */
	bool		dirty;			/* notified, or due for a safety-net read */
	bool		cursor_known;	/* false: read from the beginning */
	long long	cursor;			/* last number printed (or start position) */
	bool		start_known;
	long long	start;			/* the shard's start value */
	long long	epoch;			/* group mode: the lease's epoch */
	bool		feed_epoch_known;
	long long	feed_epoch;		/* the feed epoch cursor belongs to */
	char	   *channel;		/* cfeed.channel(feed, shard) */
	int			parent;			/* the shard it continues, or -1 */
	bool		closed;			/* layout: no change will come any more */
	bool		ended;			/* layout: closed, and head is final */
	long long	head;			/* layout: last_change_sequence_number */
	bool		read_ended;		/* read again since it was seen ended */
	bool		done;			/* ended and printed to its head */
} TailShard;

/* Options and state of one `cfeed tail` run. */
typedef struct Tail
{
	/* options */
	const char *dsn;
	const char *feed_arg;
	int			only_shard;		/* -1 = all */
	TailFrom	from;
	const char *from_text;
	long long	from_cursor;
	long long	max;			/* 0 = no limit */
	int			wait_ms;
	long long	idle_exit_ms;	/* 0 = never */
	const char *group;
	const char *owner;
	int			ttl_ms;
	bool		dead_letters;	/* print the group's dead letters and exit */

	/* state */
	PGconn	   *conn;
	int			feed_id;
	char		feed_id_text[16];
	TailShard  *shards;
	int			nshards;
	bool		listening;		/* false on a hot standby or behind a pooler:
								 * poll instead */
	bool		epochs;			/* the database has feed epochs (1.5) */
	bool		rows;			/* read with cfeed.read_rows: print row images */
	bool		group_read;		/* group mode with cfeed.read_group (1.8): no
								 * dead letters, failed changes after their
								 * backoff */
	bool		positioned;		/* initial cursors resolved */
	bool		layout_due;		/* look for a split made since */
	long long	next_layout_ms; /* ... and at the latest then */
	long long	printed;
	long long	last_activity_ms;
	long long	next_renew_ms;
	int			exit_code;
} Tail;

/* tail_query.c */
extern TailStep cfeed_tail_fail(Tail *t, PGresult *res, const char *what);
extern PGresult *cfeed_tail_exec_params(Tail *t, const char *sql, int nparams,
										const char *const *values);
extern TailShard *cfeed_tail_find_shard(Tail *t, int shard);

/* tail_conn.c */
extern TailStep cfeed_tail_setup_connection(Tail *t);
extern TailStep cfeed_tail_reconnect(Tail *t);
extern bool cfeed_tail_epoch_moved(Tail *t, TailShard *s, TailStep *step);
extern TailStep cfeed_tail_listen_shard(Tail *t, TailShard *s);
extern TailStep cfeed_tail_resume_shard(Tail *t, TailShard *s);

/* tail_layout.c */
extern void cfeed_tail_load_shards(Tail *t);
extern TailStep cfeed_tail_follow_layout(Tail *t, bool *more);
extern bool cfeed_tail_layout_due(const Tail *t);
extern bool cfeed_tail_reading_closed(const Tail *t);

/* tail_read.c */
extern TailStep cfeed_tail_drain_shard(Tail *t, TailShard *s);
extern TailStep cfeed_tail_printed(Tail *t, int rc);

/* tail_dead.c */
extern int	cfeed_tail_dead_letters(Tail *t);

/* tail_wait.c */
extern void cfeed_tail_mark_all_dirty(Tail *t);
extern TailStep cfeed_tail_wait_for_wakeup(Tail *t);

/* group.c */
extern void cfeed_group_check_api(Tail *t);
extern TailStep cfeed_group_acquire(Tail *t);
extern TailStep cfeed_group_checkpoint(Tail *t, TailShard *s);
extern void cfeed_group_release(Tail *t);

#endif							/* CFEED_TAIL_H */
