/*
 * latency.c
 *	  Commit -> woken reader latency (target 3, test/bench/README.md).  Two connections: the
 *	  reader starts waiting (asynchronously), the writer publishes and
 *	  commits, and the time from COMMIT returning to the reader's wake-up is
 *	  recorded (for the raw NOTIFY floor, from sending it).  Modes:
 *		wait	SELECT cfeed.wait(feed, 0, head, timeout)
 *		read	SELECT count(*) FROM cfeed.read(feed, 0, head, 100, timeout)
 *		listen	LISTEN cfeed_<feed>_0; notification after the sweep
 *		notify	raw NOTIFY from the writer's own transaction (the floor)
 *		pgq		PgQ: insert_event; the consumer polls every POLL_MS (see
 *				poll_once; a ticker runs elsewhere)
 *		logical	INSERT into lat_probe; consumer polls a wal2json slot 'lat'
 *				with pg_logical_slot_get_changes every POLL_MS
 *	  Pollers start at a random phase in [0, POLL_MS) after the commit, as a
 *	  free-running poller would.  Prints p50/p90/p99/max in milliseconds and,
 *	  with DUMP_FILE given, appends the sorted samples ("mode ms") to it.
 *
 *	  usage: latency CONNINFO MODE SAMPLES FEED_ID [DUMP_FILE]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/select.h>
#include <libpq-fe.h>

/* A sample that takes longer is a failure, not a figure. */
#define SAMPLE_TIMEOUT_S 10

static double
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000.0 + ts.tv_nsec / 1e6;
}

static void
die(PGconn *conn, const char *what)
{
	fprintf(stderr, "%s: %s", what, PQerrorMessage(conn));
	exit(1);
}

static void
exec_ok(PGconn *conn, const char *sql)
{
	PGresult   *res = PQexec(conn, sql);

	if (PQresultStatus(res) != PGRES_COMMAND_OK && PQresultStatus(res) != PGRES_TUPLES_OK)
		die(conn, sql);
	PQclear(res);
}

static long long
query_int(PGconn *conn, const char *sql)
{
	PGresult   *res = PQexec(conn, sql);
	long long	v;

	if (PQresultStatus(res) != PGRES_TUPLES_OK)
		die(conn, sql);
	v = atoll(PQgetvalue(res, 0, 0));
	PQclear(res);
	return v;
}

/* Block until the reader connection has input, then consume it. */
static void
wait_readable(PGconn *conn)
{
	fd_set		fds;
	int			sock = PQsocket(conn);
	struct timeval timeout = {SAMPLE_TIMEOUT_S, 0};
	int			rc;

	FD_ZERO(&fds);
	FD_SET(sock, &fds);
	rc = select(sock + 1, &fds, NULL, NULL, &timeout);
	if (rc < 0)
		die(conn, "select");
	if (rc == 0)
	{
		fprintf(stderr, "no wake-up within %d s\n", SAMPLE_TIMEOUT_S);
		exit(1);
	}
	if (!PQconsumeInput(conn))
		die(conn, "consume");
}

/* The next PgQ batch id, or -1 when none is ready. */
static long long
pgq_batch(PGconn *conn, const char *sql)
{
	PGresult   *res = PQexec(conn, sql);
	long long	batch = -1;

	if (PQresultStatus(res) != PGRES_TUPLES_OK)
		die(conn, sql);
	if (!PQgetisnull(res, 0, 0))
		batch = atoll(PQgetvalue(res, 0, 0));
	PQclear(res);
	return batch;
}

/*
 * One consumer poll; true when it delivered at least one event.  Gives up
 * (false) at the deadline.
 *
 * PgQ: a batch up to the latest tick when events arrived since the last one
 * taken (next_batch_custom with min_count 1), so that the consumer never
 * walks the idle ticks one by one, which it cannot keep up with on 2 busy
 * cores; else the next tick's batch (next_batch): the event may have been
 * counted by a tick whose snapshot did not see it committed yet, and then
 * it is in the next batch, which min_count would not return.
 */
static int
poll_once(PGconn *conn, const char *mode, double deadline)
{
	long long	batch;
	char		sql[160];
	int			got = 0;

	if (strcmp(mode, "logical") == 0)
		return query_int(conn, "SELECT count(*) FROM pg_logical_slot_get_changes('lat', NULL, NULL, "
						 "'format-version', '2', 'include-transaction', 'false', "
						 "'add-tables', 'public.lat_probe')") > 0;
	while (!got && now_ms() < deadline)
	{
		batch = pgq_batch(conn, "SELECT batch_id FROM pgq.next_batch_custom('lat', 'c', NULL, 1, NULL)");
		if (batch < 0)
			batch = pgq_batch(conn, "SELECT pgq.next_batch('lat', 'c')");
		if (batch < 0)
			break;
		snprintf(sql, sizeof(sql), "SELECT count(*) FROM pgq.get_batch_events(%lld)", batch);
		got = query_int(conn, sql) > 0;
		snprintf(sql, sizeof(sql), "SELECT pgq.finish_batch(%lld)", batch);
		exec_ok(conn, sql);
	}
	return got;
}

static int
cmp_double(const void *a, const void *b)
{
	double		x = *(const double *) a;
	double		y = *(const double *) b;

	return (x > y) - (x < y);
}

int
main(int argc, char **argv)
{
	PGconn	   *reader;
	PGconn	   *writer;
	const char *mode;
	int			samples;
	int			feed;
	double	   *lat;
	char		sql[256];
	int			i;
	int			poll;
	double		poll_ms = 10;

	if (argc != 5 && argc != 6)
	{
		fprintf(stderr, "usage: %s CONNINFO wait|read|listen|notify|pgq|logical SAMPLES FEED_ID [DUMP_FILE]\n", argv[0]);
		return 2;
	}
	mode = argv[2];
	samples = atoi(argv[3]);
	feed = atoi(argv[4]);
	reader = PQconnectdb(argv[1]);
	writer = PQconnectdb(argv[1]);
	if (PQstatus(reader) != CONNECTION_OK || PQstatus(writer) != CONNECTION_OK)
		die(reader, "connect");
	lat = calloc(samples, sizeof(double));

	if (strcmp(mode, "listen") == 0)
	{
		snprintf(sql, sizeof(sql), "LISTEN cfeed_%d_0", feed);
		exec_ok(reader, sql);
	}
	else if (strcmp(mode, "notify") == 0)
		exec_ok(reader, "LISTEN cfeed_bench_raw");
	poll = strcmp(mode, "pgq") == 0 || strcmp(mode, "logical") == 0;
	if (getenv("POLL_MS"))
		poll_ms = atof(getenv("POLL_MS"));
	srandom(getpid());

	for (i = 0; i < samples; i++)
	{
		long long	head;
		double		t0;
		PGnotify   *n;

		if (poll)
		{
			/* the write, then a poller at a random phase */
			exec_ok(writer, strcmp(mode, "pgq") == 0 ?
					"SELECT pgq.insert_event('lat', 'x', '1')" :
					"INSERT INTO lat_probe VALUES (1)");
			t0 = now_ms();
			usleep((useconds_t) (poll_ms * 1000.0 * (random() / (RAND_MAX + 1.0))));
			while (!poll_once(reader, mode, t0 + SAMPLE_TIMEOUT_S * 1000.0))
			{
				if (now_ms() - t0 > SAMPLE_TIMEOUT_S * 1000.0)
				{
					fprintf(stderr, "%s: event not delivered within %d s\n", mode, SAMPLE_TIMEOUT_S);
					exit(1);
				}
				usleep((useconds_t) (poll_ms * 1000.0));
			}
			lat[i] = now_ms() - t0;
			continue;
		}
		snprintf(sql, sizeof(sql), "SELECT cfeed.head(%d, 0)", feed);
		head = query_int(writer, sql);
		if (strcmp(mode, "wait") == 0)
			snprintf(sql, sizeof(sql), "SELECT cfeed.wait(%d, 0, %lld, 10000)", feed, head);
		else if (strcmp(mode, "read") == 0)
			snprintf(sql, sizeof(sql), "SELECT count(*) FROM cfeed.read(%d, 0, %lld, 100, 10000)", feed, head);
		else
			sql[0] = '\0';
		if (sql[0] && !PQsendQuery(reader, sql))
			die(reader, "send");
		if (sql[0])
		{
			/* let the reader get to its sleep before the write */
			struct timespec pause = {0, 2000000};

			nanosleep(&pause, NULL);
		}

		if (strcmp(mode, "notify") == 0)
		{
			/* the floor: a full round trip, from sending the NOTIFY */
			t0 = now_ms();
			exec_ok(writer, "NOTIFY cfeed_bench_raw, '1'");
		}
		else
		{
			snprintf(sql, sizeof(sql), "SELECT cfeed.publish(%d, 0)", feed);
			exec_ok(writer, sql);
			t0 = now_ms();
		}

		if (strcmp(mode, "listen") == 0 || strcmp(mode, "notify") == 0)
		{
			while ((n = PQnotifies(reader)) == NULL)
				wait_readable(reader);
			PQfreemem(n);
			lat[i] = now_ms() - t0;
			while ((n = PQnotifies(reader)) != NULL)
				PQfreemem(n);
		}
		else
		{
			PGresult   *res;

			while (PQisBusy(reader))
				wait_readable(reader);
			lat[i] = now_ms() - t0;
			while ((res = PQgetResult(reader)) != NULL)
			{
				if (PQresultStatus(res) != PGRES_TUPLES_OK)
					die(reader, "reader");
				/* wait returns the new head, read the count of changes */
				if (atoll(PQgetvalue(res, 0, 0)) <= (strcmp(mode, "wait") == 0 ? head : 0))
				{
					fprintf(stderr, "%s: timed out without the change\n", mode);
					exit(1);
				}
				PQclear(res);
			}
		}
	}

	qsort(lat, samples, sizeof(double), cmp_double);
	printf("%-7s n=%d p50=%.3f p90=%.3f p99=%.3f max=%.3f ms\n", mode, samples,
		   lat[samples / 2], lat[samples * 9 / 10], lat[samples * 99 / 100], lat[samples - 1]);
	if (argc == 6)
	{
		FILE	   *f = fopen(argv[5], "a");

		if (f == NULL)
		{
			perror(argv[5]);
			return 1;
		}
		for (i = 0; i < samples; i++)
			fprintf(f, "%s %.4f\n", mode, lat[i]);
		fclose(f);
	}
	PQfinish(reader);
	PQfinish(writer);
	free(lat);
	return 0;
}
