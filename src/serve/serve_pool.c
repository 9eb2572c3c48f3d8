/*
 * src/serve/serve_pool.c
 *		The reading pool of `cfeed serve`: a few threads, each with its own
 *		database connection, running the reads that requests need (the
 *		start of a request, a streaming request's catch-up below the tail).
 *
 * The HTTP thread suspends a request's connection and submits it; a pool
 * thread runs the job and resumes the connection, through the callbacks
 * cfeed_pool_start was given (serve_feedapi.c's and serve_http.c's: the
 * pool calls no file above it).  A
 * lost connection is replaced before the next job (one the server closed
 * while idle, e.g. at a restart, is noticed before the job; one lost during
 * a job makes that job answer 503); the connections are opened lazily, so a database that is
 * down at a moment costs a 503, not a crash.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve.h"

typedef struct PoolItem
{
	ServeReq   *req;
	struct PoolItem *next;
} PoolItem;

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t pool_cond = PTHREAD_COND_INITIALIZER;
static PoolItem *queue_head;
static PoolItem *queue_tail;
static bool pool_stopping;
static pthread_t *threads;
static int	nthreads;
static ServePoolRun pool_run;	/* cfeed_pool_start's callbacks */
static ServePoolDone pool_done;

/*
 * cfeed_serve_connect
 *		A gateway connection: application_name "cfeed serve", UTC time
 *		stamps, and a search_path of pg_catalog only (every object is
 *		schema-qualified, and regclass prints schema-qualified).  NULL on
 *		failure (libpq's reason on stderr, then a log line).
 */
PGconn *
cfeed_serve_connect(const char *who)
{
	PGconn	   *conn = cfeed_connect_as(cfeed_serve_opts.dsn, "cfeed serve", true);
	PGresult   *res;

	if (conn == NULL)
	{
		cfeed_serve_log(LOG_WARNING, "%s: could not connect to the database", who);
		return NULL;
	}
	res = PQexec(conn, "set timezone to 'UTC'; set search_path to pg_catalog, pg_temp");
	if (!cfeed_result_ok(res, PGRES_COMMAND_OK))
	{
		cfeed_serve_log(LOG_WARNING, "%s: could not set up the connection: %s", who,
						cfeed_error_text(conn, res));
		PQclear(res);
		PQfinish(conn);
		return NULL;
	}
	PQclear(res);
	cfeed_serve_log(LOG_INFO, "%s: connected to the database (backend %d)", who,
					PQbackendPID(conn));
	return conn;
}

/*
 * connection_alive
 *		False when the server closed conn while it was idle (a restart): a
 *		terminated backend sends its FATAL message, then closes, so the first
 *		PQconsumeInput may read only the message (shown as a notice) and the
 *		second sees the end of the connection.  Neither blocks.
 */
static bool
connection_alive(PGconn *conn)
{
	for (int i = 0; i < 2; i++)
		if (!PQconsumeInput(conn) || PQstatus(conn) != CONNECTION_OK)
			return false;
	return true;
}

/*
 * pool_thread
 *		Take requests off the queue and run their jobs until stopped.
 */
static void *
pool_thread(void *arg)
{
	char		who[32];
	PGconn	   *conn = NULL;

	snprintf(who, sizeof(who), "reader %d", (int) (intptr_t) arg);
	for (;;)
	{
		PoolItem   *item;

		pthread_mutex_lock(&pool_lock);
		while (queue_head == NULL && !pool_stopping)
			pthread_cond_wait(&pool_cond, &pool_lock);
		item = queue_head;
		if (item != NULL)
		{
			queue_head = item->next;
			if (queue_head == NULL)
				queue_tail = NULL;
		}
		pthread_mutex_unlock(&pool_lock);
		if (item == NULL)
			break;

		if (conn != NULL && !connection_alive(conn))
		{
			cfeed_serve_log(LOG_WARNING, "%s: connection lost; reconnecting", who);
			PQfinish(conn);
			conn = NULL;
		}
		if (conn == NULL)
			conn = cfeed_serve_connect(who);
		pool_run(&conn, item->req);
		pool_done(item->req);
		free(item);
	}
	if (conn != NULL)
		PQfinish(conn);
	return NULL;
}

/*
 * cfeed_pool_start
 *		Start n reading threads, which run each request's job with run
 *		(cfeed_feedapi_run), then hand the request back with done
 *		(cfeed_http_resume).
 */
void
cfeed_pool_start(int n, ServePoolRun run, ServePoolDone done)
{
	pool_run = run;
	pool_done = done;
	threads = cfeed_serve_alloc(sizeof(pthread_t) * n);
	for (nthreads = 0; nthreads < n; nthreads++)
		if (pthread_create(&threads[nthreads], NULL, pool_thread,
						   (void *) (intptr_t) (nthreads + 1)) != 0)
		{
			fprintf(stderr, "cfeed serve: could not start a reading thread\n");
			exit(CFEED_EXIT_ERROR);
		}
}

/*
 * cfeed_pool_submit
 *		Queue job for req, whose connection the caller (the HTTP thread) has
 *		just suspended.
 */
void
cfeed_pool_submit(ServeReq *req, ServeJob job)
{
	PoolItem   *item = cfeed_serve_alloc(sizeof(PoolItem));

	item->req = req;
	req->job = job;
	pthread_mutex_lock(&pool_lock);
	if (queue_tail)
		queue_tail->next = item;
	else
		queue_head = item;
	queue_tail = item;
	pthread_cond_signal(&pool_cond);
	pthread_mutex_unlock(&pool_lock);
}

/*
 * cfeed_pool_stop
 *		Let the threads finish the queued jobs, then stop them.
 */
void
cfeed_pool_stop(void)
{
	pthread_mutex_lock(&pool_lock);
	pool_stopping = true;
	pthread_cond_broadcast(&pool_cond);
	pthread_mutex_unlock(&pool_lock);
	for (int i = 0; i < nthreads; i++)
		pthread_join(threads[i], NULL);
}
