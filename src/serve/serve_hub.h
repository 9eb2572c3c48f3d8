/*
 * src/serve/serve_hub.h
 *		What the files of the fan-out hub of `cfeed serve` share: the
 *		followed shards and their in-memory tails (serve_hub_tail.c), the
 *		hub thread and its database connection (serve_hub.c), reading a
 *		shard's new events (serve_hub_read.c), and waiting on a hot standby
 *		(serve_hub_standby.c).  The interface to the rest of the gateway is
 *		in serve.h.
 *
 * Locking: cfeed_hub_lock protects the shard list, every shard's fields
 * and tail, and the list of waiting requests.  Database work happens
 * outside it; a tail dropped while a read was under way is detected by its
 * generation number.  Requests are resumed only after the lock is released
 * (libmicrohttpd takes its own locks in resume, and may hold them while it
 * calls back into code that takes cfeed_hub_lock).
 */
#ifndef CFEED_SERVE_HUB_H
#define CFEED_SERVE_HUB_H

#include "serve.h"

/* One event in a shard's tail: its number, stamp and JSON object. */
typedef struct HubEvent
{
	long long	number;
	long long	stamped_us;
	char	   *json;
	int			len;
} HubEvent;

/* A shard some streaming request follows (or followed). */
typedef struct HubShard
{
	struct HubShard *next;
	int			feed_id;
	int			shard;
	char		feed[SERVE_NAME_MAX];
	char		channel[48];
	char	   *sql;			/* cfeed_feedapi_read_sql of the feed */
	char		token[40];		/* the feed's FeedAPI token ... */
	long long	token_us;		/* ... as of a look-up begun then */
	bool		listened;
	int			followers;
	bool		based;			/* the tail is established */
	bool		due;			/* read it at the next pass */
	bool		hinted;			/* due because of a notification */
	long long	quiet_until;	/* after a hinted read that found nothing:
								 * no read on a hint before this (ms) */
	unsigned	gen;			/* bumped when the tail is dropped */
	long long	base;
	long long	last;
	long long	head;			/* highest number read from the database */
	long long	epoch;			/* the feed epoch of the tail's numbers */
	bool		epoch_checked;	/* epoch checked on this connection */
	HubEvent   *ring;
	int			start;
	int			count;
	long long	bytes;			/* of the events' JSON in the ring */
} HubShard;

extern pthread_mutex_t cfeed_hub_lock;
extern HubShard *cfeed_hub_shards;

/* serve_hub.c */
extern void cfeed_hub_connection_reset(void);

/* serve_hub_tail.c */
extern long long cfeed_hub_wake(bool all);
extern void cfeed_hub_append(HubShard *h, long long number, long long stamped_us,
							 const char *json, int len);
extern void cfeed_hub_mark_all_due(void);
extern void cfeed_hub_drop_tail(HubShard *h);

/* serve_hub_kick.c */
extern bool cfeed_hub_kick_open(void);
extern int	cfeed_hub_kick_fd(void);
extern void cfeed_hub_kick(void);
extern void cfeed_hub_drain_kicks(void);
extern void cfeed_hub_nap(int ms);

/* serve_hub_read.c */
extern bool cfeed_hub_lost(PGconn *conn, PGresult *res, const char *what);
extern bool cfeed_hub_read_new(PGconn *conn, HubShard *h, unsigned gen, long long from,
							   bool hinted);

/* serve_hub_heads.c */
extern bool cfeed_hub_activate(PGconn *conn);
extern bool cfeed_hub_listen(PGconn *conn);
extern bool cfeed_hub_activate_wanted;	/* a followed shard has no tail */
extern bool cfeed_hub_safety(PGconn *conn);
extern void cfeed_hub_heads_reset(void);
extern long long cfeed_hub_heads_retry_ms(void);

/* serve_hub_standby.c */
extern bool cfeed_hub_standby_reset(PGconn *conn);
extern bool cfeed_hub_on_standby(void);
extern bool cfeed_hub_standby_refused(PGresult *res);
extern bool cfeed_hub_standby_wait(PGconn *conn, long long timeout);

#endif							/* CFEED_SERVE_HUB_H */
