/*
 * src/serve/serve.h
 *		State shared by the files of `cfeed serve`, the HTTP gateway:
 *		options, requests, the reading pool, the fan-out hub, tokens, metrics
 *		and logging.
 *
 * Threads (docs/serve.md, "How it works"):
 *	 - libmicrohttpd's one polling thread runs every HTTP callback
 *	   (serve_http.c, serve_stream.c); it never touches the database;
 *	 - the reading pool (serve_pool.c): a few threads, each with its own
 *	   database connection, run the requests' reads (serve_feedapi.c);
 *	 - the hub (serve_hub.c): one thread and one connection that LISTENs
 *	   (or waits with cfeed.wait on a hot standby, serve_hub_standby.c) and
 *	   reads each new batch of a followed shard once, into a bounded
 *	   in-memory tail that every streaming client at the head of that shard
 *	   takes from (serve_hub_tail.c);
 *	 - the main thread waits for signals: SIGHUP reloads the token file,
 *	   SIGTERM/SIGINT shut down (serve.c).
 *
 * Ownership of a ServeReq: the HTTP thread owns it, except while it is
 * suspended waiting for a pool job (then the pool thread owns it until it
 * resumes the connection).  The hub only touches req->next_waiting and the
 * connection's resume, under the hub lock.
 */
#ifndef CFEED_SERVE_H
#define CFEED_SERVE_H

#include <pthread.h>
#include <stdatomic.h>
#include <limits.h>
#include <stddef.h>

#include <microhttpd.h>

#include "client.h"

#define SERVE_DEFAULT_PORT		8080
#define SERVE_MAX_PAGE			1000	/* largest page of one read */
#define SERVE_RETRY_MS			500		/* a stream's next read after the database was down */
#define SERVE_SSE_RETRY_MS		1000	/* EventSource's reconnection delay */
#define SERVE_DEFAULT_PAGE		100		/* fetch without pageSizeHint */
#define SERVE_TAIL_EVENTS		4096	/* in-memory tail of a shard ... */
#define SERVE_TAIL_BYTES		(8 * 1024 * 1024)	/* ... and its bytes, but for
													 * its newest event */
#define SERVE_NAME_MAX			201	/* a feed name: 200 characters (cfeed.feed) */
#define SERVE_SAFETY_MS			5000	/* read followed shards anyway */
#define SERVE_HINT_QUIET_MS		20		/* hints after a read that found
										 * nothing wait this long */
#define SERVE_STANDBY_POLL_MS	50
#define SERVE_PROMOTED_CHECK_MS	1000	/* on a standby: was it promoted? */
#define SERVE_GZIP_MIN			1024	/* smaller answers are sent as they are */
#define SERVE_CLIENT_BYTES		(128 * 1024)	/* a client's unsent output:
												 * pages and takes stop here */

/* The detail of every 403 a token gets for a feed it may not read. */
#define CFEED_SERVE_FORBIDDEN	"this token may not read this feed"

/* Log levels (--log-level). */
typedef enum ServeLogLevel
{
	LOG_ERROR,
	LOG_WARNING,
	LOG_INFO,
	LOG_DEBUG
} ServeLogLevel;

/* A feed whose events carry a payload from a relation (--payload). */
typedef struct ServePayload
{
	char		feed[SERVE_NAME_MAX];
	const char *relation;		/* as given */
	char	   *quoted;			/* schema.relation, quoted by the server */
} ServePayload;

/* Options of one `cfeed serve` run. */
/* Who may GET /metrics (--metrics). */
typedef enum ServeMetricsAccess
{
	METRICS_OPEN,				/* anyone (the default) */
	METRICS_TOKEN,				/* a token that reads every feed (*) */
	METRICS_OFF					/* no one: 404 */
} ServeMetricsAccess;

typedef struct ServeOptions
{
	const char *dsn;
	const char *listen_addr;
	int			port;
	const char *tokens_file;
	const char *tls_cert;
	const char *tls_key;
	const char *allow_origin;
	int			readers;
	int			heartbeat_ms;
	int			refresh_ms;
	int			max_age_s;
	int			shutdown_ms;
	unsigned int max_clients;
	unsigned int idle_timeout_s;	/* libmicrohttpd's connection timeout */
	ServeMetricsAccess metrics;
	ServePayload *payloads;
	int			npayloads;
} ServeOptions;

extern ServeOptions cfeed_serve_opts;
extern atomic_bool cfeed_serve_stopping;
extern bool cfeed_serve_epochs;	/* the database has feed epochs */
extern bool cfeed_serve_layouts;	/* the database's shards have parents
									 * and end (resharding, cfeed 1.9) */

/*
 * The feed epoch as a column of a query that reads heads: cfeed.epoch() is
 * STABLE and reads with the statement's snapshot, so the heads are of that
 * epoch or an earlier one.  Read in a statement before, it could be older
 * than the heads' stamps: heads read just after the database's first stamp
 * were then labelled epoch 0, which cfeed.resume_cursor places before every
 * epoch, and resuming them sent the first changes again.
 */
#define SERVE_EPOCH_COLUMN \
	(cfeed_serve_epochs ? "(select cfeed.epoch())" : "0::bigint")

/*
 * How far a position's time (an SSE id's, a feed epoch's: both are
 * microseconds of a database's clock) may be ahead of the clocks here
 * before it is taken for one this feed never sent (400: an EventSource
 * stops) rather than one of a database ahead or not reached yet (a hot
 * standby behind its primary, a failover to a server whose clock is
 * behind: retried, resumed).
 */
#define SERVE_AHEAD_LIMIT_US	(24LL * 3600 * 1000000)

/* A growable byte buffer. */
typedef struct ServeBuf
{
	char	   *data;
	size_t		len;
	size_t		cap;
} ServeBuf;

/* What the token file decided for a request (serve_auth.c). */
typedef enum ServeAuth
{
	AUTH_OK,
	AUTH_UNKNOWN,				/* no such token: 401 */
	AUTH_FORBIDDEN				/* the token may not read the feed: 403 */
} ServeAuth;

/* A request's token, as authorized (a copy: the file may be reloaded). */
typedef struct ServeGrant
{
	char		label[SERVE_NAME_MAX];	/* logged instead of the token */
	bool		all_feeds;		/* a * token */
	bool		public_feed;	/* the feed is readable without a token */
} ServeGrant;

/* The feed a request is about, as looked up by a pool thread. */
typedef struct ServeFeed
{
	char		name[SERVE_NAME_MAX];
	int			feed_id;
	bool		has_retention;
	char		token[40];		/* FeedAPI token: changes with the layout */
	long long	looked_up_us;	/* when the look-up began (cfeed_now_us) */
	int			nshards;		/* its partitions (serve_layout.c): */
	int		   *shards;
	int		   *parents;		/* each one's parent partition, or -1 */
	bool	   *ended;			/* each one is closed and ended: published
								 * closed, its head is its end */
	long long  *heads;			/* each shard's head when looked up */
	long long  *starts;			/* each shard's start value: numbers at or
								 * below it are backfilled history */
	long long	epoch;			/* the feed epoch, read before the heads */
	bool		on_standby;		/* read from a hot standby */
} ServeFeed;

/* Position of a request in one shard. */
typedef struct ServeCursor
{
	int			shard;
	bool		known;			/* false: from the beginning (_first) */
	long long	number;			/* last number delivered */
	long long	epoch;			/* the feed epoch number belongs to */
	struct HubShard *hub;		/* the hub's tail of this shard */

	/* all-shards SSE rounds (serve_sse.c); unbounded otherwise */
	long long	limit;			/* the round's last number: the shard's head */
	long long	start;			/* the shard's start value (history) */
	bool		through;		/* done with the round */
} ServeCursor;

typedef enum ServeKind
{
	REQ_DISCOVERY,
	REQ_FETCH,
	REQ_SSE
} ServeKind;

typedef enum ServeJob
{
	JOB_NONE,
	JOB_START,					/* look up the feed, check, first read */
	JOB_CATCH_UP,				/* a streaming request behind the tail */
	JOB_ROUND					/* the next round of an all-shards SSE stream */
} ServeJob;

/* A round's lower bound that is no time: from the beginning (_first). */
#define SERVE_ROUND_FIRST	LLONG_MIN

/* A compact SSE id, parsed (serve_sse.c). */
typedef struct ServeSseId
{
	bool		set;
	bool		mid;			/* within a round: lo.hi.shard:number */
	long long	lo;				/* or SERVE_ROUND_FIRST */
	long long	hi;
	int			shard;
	long long	number;
	long long	epoch;
	bool		has_epoch;
} ServeSseId;

/* One HTTP request to /feeds/<name>. */
typedef struct ServeReq
{
	struct MHD_Connection *conn;
	ServeKind	kind;
	char		feed_name[SERVE_NAME_MAX];
	ServeGrant	grant;

	/* request parameters */
	char		api_token[40];
	char		cursor_arg[48];	/* _first, _last, number[@epoch] */
	char	   *last_event_id;	/* SSE resume position, or NULL */
	bool		all_shards;		/* SSE without partition= */
	int			partition;
	int			page_size;
	bool		stream;
	bool		head;			/* a HEAD request: headers only */
	long long	stream_ms;		/* 0 = forever (stream=y) */
	bool		immutable_ok;	/* a fixed page: may be cached */
	bool		told_to_retry;	/* SSE answered with retry only (the
								 * database was not reachable) */

	/* results of the start job */
	ServeJob	job;
	int			status;			/* 0 until decided */
	ServeFeed	feed;
	bool		cacheable;
	int			ncursors;
	ServeCursor *cursors;
	int			catch_up;		/* index of the cursor behind the tail */

	/*
	 * Rounds of an all-shards SSE stream (serve_sse.c): the stream sends the
	 * changes stamped before round_hi, shard after shard, having sent those
	 * stamped before round_lo; times in Unix microseconds.
	 */
	bool		rounds;			/* an all-shards SSE stream */
	bool		round_open;		/* a round is under way */
	bool		listed_ids;		/* ids list every shard until the first
								 * round ends (a start no time describes) */
	int			round_shard;	/* index of the shard being sent */
	int			round_last;		/* index of the shard of the round's last
								 * event, or -1 */
	ServeSseId	resume;			/* the Last-Event-ID, when compact */
	long long	round_lo;
	long long	round_hi;
	long long	round_epoch;	/* the epoch of the ids */
	long long	round_query_epoch;	/* the epoch round_hi was found in */
	long long	round_asked_us; /* the round query it will take began after
								 * this (serve_sse.c, monotonic microseconds) */
	long long	round_seen_us;	/* when its last round query began */
	bool		round_waiting;	/* for the feed's round query under way */
	bool		round_retrying; /* its last round query found no later end */
	const char *retry_why;		/* SSE told to retry: why (for the log) */

	/* streaming */
	bool		queued;			/* the response is queued */
	bool		closing;		/* end the stream (after a final cursor) */
	bool		finished;		/* nothing more to produce */
	long long	deadline_ms;	/* end of stream=<ms>, 0 = none */
	long long	next_beat_ms;
	long long	retry_ms;		/* a catch-up found no database: not before */
	long long	started_ms;
	ServeBuf	out;			/* bytes not yet handed to MHD */
	size_t		out_off;
	size_t		accounted;		/* out.cap counted in cfeed_metric_buffered */
	long long	event_bytes;	/* size of the events sent so far ... */
	long long	nevents;		/* ... and their number */
	struct ServeReq *next_waiting;	/* waiting in the hub (hub lock) */
} ServeReq;

/* serve_options.c */
extern void cfeed_serve_parse_options(int argc, char **argv);
extern const ServePayload *cfeed_serve_payload(const char *feed);

/* serve_log.c */
extern void cfeed_serve_set_log_level(const char *text);
extern bool cfeed_serve_logs(ServeLogLevel level);
extern void cfeed_serve_log(ServeLogLevel level, const char *fmt,...)
			__attribute__((format(printf, 2, 3)));

/* serve_buf.c */
extern void cfeed_serve_oom(void) __attribute__((noreturn));
extern void *cfeed_serve_alloc(size_t size);
extern char *cfeed_serve_strdup(const char *s);
extern void cfeed_buf_reserve(ServeBuf *b, size_t len);
extern void cfeed_buf_append(ServeBuf *b, const char *data, size_t len);
extern void cfeed_buf_printf(ServeBuf *b, const char *fmt,...)
			__attribute__((format(printf, 2, 3)));
extern void cfeed_buf_reset(ServeBuf *b);

/* serve_http.c */
extern struct MHD_Daemon *cfeed_http_start(void);
extern void cfeed_http_resume(ServeReq *req);
extern int	cfeed_http_active(void);

/* serve_answer.c */
extern enum MHD_Result cfeed_answer_buffer(struct MHD_Connection *conn, int status,
										   const char *type, const char *body,
										   size_t len, const char *cache);
extern enum MHD_Result cfeed_answer_error(struct MHD_Connection *conn, int status,
										  const char *error, const char *detail);
extern enum MHD_Result cfeed_answer_stream(struct MHD_Connection *conn, ServeReq *req);
extern enum MHD_Result cfeed_answer_preflight(struct MHD_Connection *conn);
extern enum MHD_Result cfeed_answer_sse_retry(struct MHD_Connection *conn, const char *why);

/* serve_gzip.c */
extern bool cfeed_gzip_accepted(const char *header);
extern bool cfeed_gzip(const char *data, size_t len, ServeBuf *out);

/* serve_auth.c */
extern void cfeed_auth_load(const char *path);
extern void cfeed_auth_reload(const char *path);
extern ServeAuth cfeed_auth_check(const char *secret, const char *feed,
								  ServeGrant *grant);
extern ServeAuth cfeed_auth_check_all_feeds(const char *secret);

/*
 * serve_pool.c: the upper layer gives the pool what to run for a request
 * (on a pool thread, with its connection) and what to do after.
 */
typedef void (*ServePoolRun) (PGconn **conn, ServeReq *req);
typedef void (*ServePoolDone) (ServeReq *req);
extern void cfeed_pool_start(int nthreads, ServePoolRun run, ServePoolDone done);
extern void cfeed_pool_submit(ServeReq *req, ServeJob job);
extern void cfeed_pool_stop(void);
extern PGconn *cfeed_serve_connect(const char *who);

/*
 * serve_layout.c: which shards are a feed's partitions, and its token.  The
 * queries select a shard's parent and whether it ended with
 * SERVE_LAYOUT_COLUMNS, cfeed.shard being "s" (a cfeed before 1.9 has
 * neither: no parent, never ended).
 */
#define SERVE_LAYOUT_COLUMNS \
	(cfeed_serve_layouts ? "s.parent, s.ended" : "null::int, false")
extern int	cfeed_layout_list(int feed_id, int n, const int *shards, int *parents,
							  const bool *ended, bool *listed, char *token, size_t size);
extern bool cfeed_layout_probe(PGconn *conn);

/* serve_feed.c */
extern void cfeed_feedapi_error(ServeReq *req, int status, const char *error,
								const char *detail);
extern char *cfeed_feedapi_read_sql(const char *feed);
extern void cfeed_feedapi_resolve_payloads(PGconn *conn);
extern void cfeed_feed_hidden(ServeReq *req, int status, const char *error,
							  const char *detail);
extern void cfeed_feed_db_error(PGconn **conn, ServeReq *req, PGresult *res);
extern bool cfeed_feed_look_up(PGconn **conn, ServeReq *req);
extern long long cfeed_feed_count_positions(PGconn **conn, ServeReq *req,
											const ServeCursor *cursors, int n,
											const char *where, const char *extra);
extern void cfeed_feed_discovery(PGconn **conn, ServeReq *req);

/* serve_feedapi.c */
extern void cfeed_feedapi_run(PGconn **conn, ServeReq *req);
extern PGresult *cfeed_feedapi_read(PGconn *conn, const char *sql, int feed_id,
									const char *feed, int shard,
									const long long *after, int limit);

/* serve_stream.c */
extern ssize_t cfeed_stream_read(void *cls, uint64_t pos, char *buf, size_t max);
extern void cfeed_stream_release(ServeReq *req);
extern int	cfeed_stream_page_limit(const ServeReq *req);

/* serve_event.c */
extern bool cfeed_stream_event(ServeReq *req, ServeCursor *c, long long number,
							   long long stamped_us, const char *json, size_t len,
							   bool live);
extern void cfeed_stream_cursor(ServeReq *req);
extern void cfeed_stream_position(ServeReq *req);
extern void cfeed_stream_id_event(ServeReq *req);
extern bool cfeed_sse_admits(ServeReq *req, ServeCursor *c, long long number,
							 long long stamped_us);

/* serve_position.c */
extern bool cfeed_stream_parse_position(const ServeReq *req, const char *text,
										ServeCursor *c);
extern void cfeed_stream_append_position(ServeBuf *b, const ServeCursor *c);
extern void cfeed_sse_append_id(ServeReq *req, ServeBuf *b);
extern bool cfeed_sse_parse_id(ServeReq *req, const char *id);

/* serve_round.c: the safe end of a stream's next round, per feed */
#define SERVE_ROUND_WAIT_MS	2		/* wait for the feed's query under way */
typedef enum ServeRoundGet
{
	SERVE_ROUND_OK,
	SERVE_ROUND_WAIT,
	SERVE_ROUND_FAILED
} ServeRoundGet;
extern void cfeed_sse_ask_round(ServeReq *req);
extern ServeRoundGet cfeed_round_get(PGconn **conn, ServeReq *req, long long asked_us,
									 bool may_wait, long long *safe, long long *epoch);

/* The time parameter of a query: 'epoch' plus microseconds. */
#define SQL_TIME(n) \
	"('epoch'::pg_catalog.timestamptz operator(pg_catalog.+)" \
	" ($" #n "::bigint operator(pg_catalog.*) interval '1 microsecond'))"

/* serve_sse.c */
extern bool cfeed_sse_start(PGconn **conn, ServeReq *req);
extern void cfeed_sse_next_round(PGconn **conn, ServeReq *req);
extern bool cfeed_sse_round_done(ServeReq *req);

/* serve_hub.c, serve_hub_tail.c */
typedef enum HubTake
{
	HUB_TOOK,					/* events were added to req->out */
	HUB_BEHIND,					/* cursor below the tail: catch up */
	HUB_NOTHING					/* at the head */
} HubTake;
extern void cfeed_hub_start(void);
extern void cfeed_hub_stop(void);
extern void cfeed_hub_follow(const ServeFeed *feed, ServeCursor *c);
extern void cfeed_hub_unfollow(ServeCursor *c);
extern HubTake cfeed_hub_take(ServeReq *req, ServeCursor *c);
extern bool cfeed_hub_wait(ServeReq *req);
extern bool cfeed_sse_wants_round(const ServeReq *req);
extern void cfeed_hub_forget(ServeReq *req);
extern bool cfeed_hub_token_current(const ServeReq *req);
extern void cfeed_hub_wake_all(void);
extern bool cfeed_hub_healthy(void);
extern void cfeed_hub_metrics(ServeBuf *b);

/* serve_metrics.c */
extern atomic_long cfeed_metric_clients;
extern atomic_long cfeed_metric_events;
extern atomic_long cfeed_metric_requests;
extern atomic_long cfeed_metric_buffered;
extern void cfeed_metrics_latency(long long stamped_us);
typedef void (*ServeMetricsMore) (ServeBuf *b);
extern void cfeed_metrics_render(ServeBuf *b, ServeMetricsMore more);
extern bool cfeed_metrics_refresh_groups(PGconn *conn);

#endif							/* CFEED_SERVE_H */
