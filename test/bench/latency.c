/*
 * latency.c
 *	  Commit -> woken reader latency (rows 3a, 3b and 4c, test/bench/README.md).  Two connections: the
 *	  reader starts waiting (asynchronously), the writer publishes and
 *	  commits, and the time from COMMIT returning to the reader's wake-up is
 *	  recorded (for the raw NOTIFY floor, from sending it).  Modes:
 *		wait	SELECT cfeed.wait(feed, 0, head, timeout)
 *		read	SELECT count(*) FROM cfeed.read(feed, 0, head, 100, timeout)
 *		listen	LISTEN cfeed_<feed>_0; notification after the sweep
 *		notify	raw NOTIFY from the writer's own transaction (the floor); a
 *				transaction that writes no WAL, so its commit is not flushed
 *		notifywal	the same NOTIFY sent with a row (INSERT into lat_probe) in
 *				one transaction: a commit flushed to disk, as the sweep's is
 *		pgq		PgQ: insert_event; the consumer polls every POLL_MS (see
 *				poll_once; a ticker runs elsewhere)
 *		logical	INSERT into lat_probe; consumer polls a wal2json slot 'lat'
 *				with pg_logical_slot_get_changes every POLL_MS
 *	  Pollers start at a random phase in [0, POLL_MS) after the commit, as a
 *	  free-running poller would.  Prints p50/p90/p99/max in milliseconds and,
 *	  with DUMP_FILE given, appends the sorted samples ("mode ms") to it.
 *
 *		replayed	the reader polls SELECT cfeed.head(feed, 0) every 0.2 ms
 *				until the new number shows (on a standby: when the stamp has
 *				been replayed and is visible; the floor of a standby's
 *				waiter)
 *	  MODE may also list cfeed modes (e.g. wait,read,listen): one reader
 *	  of each waits on its own connection, and one publish per sample wakes
 *	  them all.  Environment: PACE_MS, the interval at which samples start
 *	  (0: each as soon as the last was delivered); SERIES_FILE, where every
 *	  sample is appended as it is taken ("mode epoch_ms ms"), for figures
 *	  per time window; READER_CONNINFO, where the readers connect (a hot
 *	  standby of the writer's server: a wait that ends without the change,
 *	  as a standby's does on a recovery conflict, is then started again
 *	  rather than failing the run; LISTEN does not work there).
 *
 *	  usage: latency CONNINFO MODE[,MODE...] SAMPLES FEED_ID [DUMP_FILE]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/select.h>
#include <libpq-fe.h>

#define Max(a, b) ((a) > (b) ? (a) : (b))

/* A sample that takes longer is a failure, not a figure. */
#define SAMPLE_TIMEOUT_S 10

/* Milliseconds on a clock: CLOCK_MONOTONIC for intervals, CLOCK_REALTIME for SERIES_FILE. */
static double
clock_ms(clockid_t clock)
{
	struct timespec ts;

	clock_gettime(clock, &ts);
	return ts.tv_sec * 1000.0 + ts.tv_nsec / 1e6;
}

static double
now_ms(void)
{
	return clock_ms(CLOCK_MONOTONIC);
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

/* The raw NOTIFY floors: notify, and notifywal (with a row: a flushed commit). */
static int
is_notify(const char *mode)
{
	return strcmp(mode, "notify") == 0 || strcmp(mode, "notifywal") == 0;
}

/* A consumer of the cfeed modes (or of the raw NOTIFY floor) on its own connection. */
typedef struct Reader
{
	const char *mode;
	PGconn	   *conn;
	double	   *lat;
	int			pending;		/* not woken yet for this sample */
	int			cancelled;		/* statements cancelled by recovery conflicts */
} Reader;

#define MAX_READERS 3

/* Readers on a standby (READER_CONNINFO): a wait may end early there. */
static int	on_standby;

/* How often the replayed mode polls the head. */
#define REPLAYED_POLL_US 200

/* Start waiting: send the reader's query (LISTEN readers wait as they are). */
static void
reader_start(Reader *r, int feed, long long head)
{
	char		sql[256];

	r->pending = 1;
	if (strcmp(r->mode, "wait") == 0)
		snprintf(sql, sizeof(sql), "SELECT cfeed.wait(%d, 0, %lld, 10000)", feed, head);
	else if (strcmp(r->mode, "read") == 0)
		snprintf(sql, sizeof(sql), "SELECT count(*) FROM cfeed.read(%d, 0, %lld, 100, 10000)", feed, head);
	else if (strcmp(r->mode, "replayed") == 0)
		snprintf(sql, sizeof(sql), "SELECT cfeed.head(%d, 0)", feed);
	else
		return;
	if (!PQsendQuery(r->conn, sql))
		die(r->conn, "send");
}

/*
 * True when the reader has been woken by the sample's change: its query
 * returned (a new head, or changes), or a notification came (for LISTEN,
 * one naming a head above the sample's; earlier ones are skipped).
 */
static int
reader_woken(Reader *r, int feed, long long head)
{
	PGnotify   *n;
	PGresult   *res;
	int			woken = 0;
	int			again = 0;

	if (strcmp(r->mode, "listen") == 0 || is_notify(r->mode))
	{
		while ((n = PQnotifies(r->conn)) != NULL)
		{
			if (is_notify(r->mode) || atoll(n->extra) > head)
				woken = 1;
			PQfreemem(n);
		}
		return woken;
	}
	if (PQisBusy(r->conn))
		return 0;
	while ((res = PQgetResult(r->conn)) != NULL)
	{
		/* on a standby, a statement cancelled by a recovery conflict is counted and started again */
		if (PQresultStatus(res) == PGRES_FATAL_ERROR && on_standby &&
			strcmp(PQresultErrorField(res, PG_DIAG_SQLSTATE), "40001") == 0)
		{
			r->cancelled++;
			again = 1;
		}
		else if (PQresultStatus(res) != PGRES_TUPLES_OK)
			die(r->conn, r->mode);
		/* wait and head return the new head, read the count of changes */
		else if (atoll(PQgetvalue(res, 0, 0)) <= (strcmp(r->mode, "read") != 0 ? head : 0))
		{
			if (strcmp(r->mode, "replayed") != 0 && !on_standby)
			{
				fprintf(stderr, "%s: timed out without the change\n", r->mode);
				exit(1);
			}
			again = 1;
		}
		PQclear(res);
	}
	if (again)
	{
		if (strcmp(r->mode, "replayed") == 0)
			usleep(REPLAYED_POLL_US);
		reader_start(r, feed, head);
		return 0;
	}
	return 1;
}

/* Wait until every reader has been woken; records each one's latency. */
static void
await_readers(Reader *readers, int nreaders, int sample, int feed, long long head, double t0, FILE *series)
{
	int			left = nreaders;

	while (left > 0)
	{
		fd_set		fds;
		struct timeval timeout = {SAMPLE_TIMEOUT_S, 0};
		int			maxfd = -1;
		int			i;

		FD_ZERO(&fds);
		for (i = 0; i < nreaders; i++)
			if (readers[i].pending)
			{
				FD_SET(PQsocket(readers[i].conn), &fds);
				maxfd = Max(maxfd, PQsocket(readers[i].conn));
			}
		/* readers started again (on a standby) keep the socket busy: the sample's own deadline */
		if (now_ms() - t0 > SAMPLE_TIMEOUT_S * 1000.0)
		{
			fprintf(stderr, "no wake-up within %d s\n", SAMPLE_TIMEOUT_S);
			exit(1);
		}
		i = select(maxfd + 1, &fds, NULL, NULL, &timeout);
		if (i < 0)
		{
			perror("select");
			exit(1);
		}
		if (i == 0)
		{
			fprintf(stderr, "no wake-up within %d s\n", SAMPLE_TIMEOUT_S);
			exit(1);
		}
		for (i = 0; i < nreaders; i++)
		{
			Reader	   *r = &readers[i];

			if (!r->pending || !FD_ISSET(PQsocket(r->conn), &fds))
				continue;
			if (!PQconsumeInput(r->conn))
				die(r->conn, "consume");
			if (reader_woken(r, feed, head))
			{
				r->lat[sample] = now_ms() - t0;
				r->pending = 0;
				left--;
				if (series)
					fprintf(series, "%s %.0f %.4f\n", r->mode, clock_ms(CLOCK_REALTIME), r->lat[sample]);
			}
		}
	}
}

/*
 * One mode's summary line (with the statements recovery conflicts
 * cancelled, on a standby), and its sorted samples appended to dump.
 */
static void
report(const char *mode, double *lat, int samples, int cancelled, const char *dump)
{
	int			i;

	qsort(lat, samples, sizeof(double), cmp_double);
	printf("%-7s n=%d p50=%.3f p90=%.3f p99=%.3f max=%.3f ms", mode, samples,
		   lat[samples / 2], lat[samples * 9 / 10], lat[samples * 99 / 100], lat[samples - 1]);
	if (on_standby)
		printf(" cancelled=%d", cancelled);
	printf("\n");
	if (dump)
	{
		FILE	   *f = fopen(dump, "a");

		if (f == NULL)
		{
			perror(dump);
			exit(1);
		}
		for (i = 0; i < samples; i++)
			fprintf(f, "%s %.4f\n", mode, lat[i]);
		fclose(f);
	}
}

int
main(int argc, char **argv)
{
	Reader		readers[MAX_READERS];
	int			nreaders = 0;
	PGconn	   *writer;
	const char *mode;
	int			samples;
	int			feed;
	char		sql[256];
	char	   *modes;
	char	   *tok;
	int			i;
	int			poll;
	double		poll_ms = getenv("POLL_MS") ? atof(getenv("POLL_MS")) : 10;
	double		pace_ms = getenv("PACE_MS") ? atof(getenv("PACE_MS")) : 0;
	FILE	   *series = NULL;
	double		begun;
	const char *reader_conninfo;

	if (argc != 5 && argc != 6)
	{
		fprintf(stderr, "usage: %s CONNINFO MODE[,MODE...] SAMPLES FEED_ID [DUMP_FILE]\n", argv[0]);
		return 2;
	}
	mode = argv[2];
	samples = atoi(argv[3]);
	feed = atoi(argv[4]);
	reader_conninfo = getenv("READER_CONNINFO") ? getenv("READER_CONNINFO") : argv[1];
	on_standby = getenv("READER_CONNINFO") != NULL;
	writer = PQconnectdb(argv[1]);
	if (PQstatus(writer) != CONNECTION_OK)
		die(writer, "connect");
	if (getenv("SERIES_FILE"))
	{
		if ((series = fopen(getenv("SERIES_FILE"), "a")) == NULL)
		{
			perror(getenv("SERIES_FILE"));
			return 1;
		}
		/* whole lines, whoever else appends, and all of them if killed */
		setvbuf(series, NULL, _IOLBF, 0);
	}
	poll = strcmp(mode, "pgq") == 0 || strcmp(mode, "logical") == 0;
	modes = strdup(poll ? "" : mode);
	for (tok = strtok(modes, ","); tok; tok = strtok(NULL, ","))
	{
		Reader	   *r = &readers[nreaders];

		if (nreaders == MAX_READERS || (strcmp(tok, "wait") != 0 && strcmp(tok, "read") != 0 &&
										strcmp(tok, "listen") != 0 && strcmp(tok, "replayed") != 0 &&
										!is_notify(tok)) ||
			(is_notify(tok) && strcmp(tok, mode) != 0))
		{
			fprintf(stderr, "bad mode list %s\n", mode);
			return 2;
		}
		r->mode = tok;
		r->conn = PQconnectdb(reader_conninfo);
		if (PQstatus(r->conn) != CONNECTION_OK)
			die(r->conn, "connect");
		r->lat = calloc(samples, sizeof(double));
		r->cancelled = 0;
		if (strcmp(tok, "listen") == 0)
		{
			snprintf(sql, sizeof(sql), "LISTEN cfeed_%d_0", feed);
			exec_ok(r->conn, sql);
		}
		else if (is_notify(tok))
			exec_ok(r->conn, "LISTEN cfeed_bench_raw");
		nreaders++;
	}
	srandom(getpid());
	begun = now_ms();

	if (poll)
	{
		PGconn	   *reader = PQconnectdb(argv[1]);
		double	   *lat = calloc(samples, sizeof(double));

		if (PQstatus(reader) != CONNECTION_OK)
			die(reader, "connect");
		for (i = 0; i < samples; i++)
		{
			double		t0;

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
		}
		report(mode, lat, samples, 0, argc == 6 ? argv[5] : NULL);
		PQfinish(reader);
		PQfinish(writer);
		return 0;
	}

	for (i = 0; i < samples; i++)
	{
		long long	head = 0;
		double		t0;
		double		next = begun + i * pace_ms;
		int			j;

		if (pace_ms > 0 && now_ms() < next)
			usleep((useconds_t) ((next - now_ms()) * 1000.0));
		if (!is_notify(mode))
		{
			snprintf(sql, sizeof(sql), "SELECT cfeed.head(%d, 0)", feed);
			head = query_int(writer, sql);
		}
		for (j = 0; j < nreaders; j++)
			reader_start(&readers[j], feed, head);
		if (is_notify(mode))
		{
			/* the floor: a full round trip, from sending the NOTIFY */
			t0 = now_ms();
			exec_ok(writer, strcmp(mode, "notify") == 0 ? "NOTIFY cfeed_bench_raw, '1'" :
					"INSERT INTO lat_probe VALUES (1); NOTIFY cfeed_bench_raw, '1'");
		}
		else
		{
			/* let the readers get to their sleep before the write */
			struct timespec pause = {0, 2000000};

			nanosleep(&pause, NULL);
			snprintf(sql, sizeof(sql), "SELECT cfeed.publish(%d, 0)", feed);
			exec_ok(writer, sql);
			t0 = now_ms();
		}
		await_readers(readers, nreaders, i, feed, head, t0, series);
	}

	for (i = 0; i < nreaders; i++)
	{
		report(readers[i].mode, readers[i].lat, samples, readers[i].cancelled, argc == 6 ? argv[5] : NULL);
		PQfinish(readers[i].conn);
	}
	if (series)
		fclose(series);
	PQfinish(writer);
	return 0;
}
