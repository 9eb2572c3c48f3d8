/*
 * latency.c
 *	  Commit -> woken reader latency (SPEC §9 row 3).  Two connections: the
 *	  reader starts waiting (asynchronously), the writer publishes and
 *	  commits, and the time from COMMIT returning to the reader's wake-up is
 *	  recorded (for the raw NOTIFY floor, from sending it).  Modes:
 *		wait	SELECT cfeed.wait(feed, 0, head, timeout)
 *		read	SELECT count(*) FROM cfeed.read(feed, 0, head, 100, timeout)
 *		listen	LISTEN cfeed_<feed>_0; notification after the sweep
 *		notify	raw NOTIFY from the writer's own transaction (the floor)
 *	  Prints p50/p90/p99/max in milliseconds.
 *
 *	  usage: latency CONNINFO MODE SAMPLES FEED_ID
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/select.h>
#include <libpq-fe.h>

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

	FD_ZERO(&fds);
	FD_SET(sock, &fds);
	if (select(sock + 1, &fds, NULL, NULL, NULL) < 0)
		die(conn, "select");
	if (!PQconsumeInput(conn))
		die(conn, "consume");
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

	if (argc != 5)
	{
		fprintf(stderr, "usage: %s CONNINFO wait|read|listen|notify SAMPLES FEED_ID\n", argv[0]);
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

	for (i = 0; i < samples; i++)
	{
		long long	head;
		double		t0;
		PGnotify   *n;

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
				PQclear(res);
			}
		}
	}

	qsort(lat, samples, sizeof(double), cmp_double);
	printf("%-7s n=%d p50=%.3f p90=%.3f p99=%.3f max=%.3f ms\n", mode, samples,
		   lat[samples / 2], lat[samples * 9 / 10], lat[samples * 99 / 100], lat[samples - 1]);
	PQfinish(reader);
	PQfinish(writer);
	free(lat);
	return 0;
}
