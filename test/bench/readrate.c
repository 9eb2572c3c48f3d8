/*
 * readrate.c
 *	  Read throughput in 1000-row pages (rows 2a and 2b, test/bench/README.md): reads a whole log
 *	  page by page, as a consumer does, and prints "MODE ROWS ROWS/S".  Every
 *	  statement is prepared once (a consumer's best).  Modes:
 *		cfeed	SELECT * FROM cfeed.read(1, 0, cursor, 1000), and the same
 *				query as cfeed.read's on cfeed.change directly (the plain
 *				index range), page by page alternately, each timed on its own
 *				(a drift in the machine's load hits both alike); prints a
 *				"cfeed" and a "plain" line
 *		join	the seed's join pattern, orders JOIN cfeed.change USING
 *				(change_id) in 1000-row pages, and the same join written by
 *				hand on hand_change, a plain table of the same rows with its
 *				own (feed_id, shard, change_sequence_number) index, alternately
 *				as above; prints a "join" and a "hand" line
 *		pgq		pgq.next_batch / get_batch_events / finish_batch on queue 'q'
 *		logical	pg_logical_slot_get_changes('r', NULL, 1000) (wal2json) until empty
 *		logical-all	one pg_logical_slot_get_changes('r_all', NULL, NULL): the
 *				whole backlog in one call (the peer's best case, no pages)
 *
 *	  READRATE_STORAGE=ranges: the feed's shard is stored in ranges, whose
 *	  change rows hold no number: the plain index range reads hand_change
 *	  (the same rows, numbered, with their own index), and the join pattern
 *	  is the one for that storage, orders JOIN cfeed.read(...) USING
 *	  (change_id).
 *
 *	  usage: readrate CONNINFO MODE START_CURSOR
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <libpq-fe.h>

static PGconn *conn;

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void
check(PGresult *res, ExecStatusType status, const char *what)
{
	if (PQresultStatus(res) != status)
	{
		fprintf(stderr, "%s: %s", what, PQerrorMessage(conn));
		exit(1);
	}
}

static void
prepare(const char *name, const char *sql)
{
	PGresult   *res = PQprepare(conn, name, sql, 0, NULL);

	check(res, PGRES_COMMAND_OK, sql);
	PQclear(res);
}

/* Run a prepared statement with at most one parameter. */
static PGresult *
run(const char *name, const char *param)
{
	const char *params[1] = {param};
	PGresult   *res = PQexecPrepared(conn, name, param ? 1 : 0, params, NULL, NULL, 0);

	check(res, PGRES_TUPLES_OK, name);
	return res;
}

/*
 * Two page queries compared: one page of each in turn, from START_CURSOR to
 * the end of the shard; each query's first column is the cursor.
 */
static void
compare(const char *start, const char *name[2], const char *sql[2])
{
	char		cursor[2][32];
	long long	rows[2] = {0, 0};
	double		secs[2] = {0, 0};
	int			done = 0;
	int			i;

	for (i = 0; i < 2; i++)
	{
		prepare(name[i], sql[i]);
		snprintf(cursor[i], sizeof(cursor[i]), "%s", start);
	}
	while (!done)
	{
		for (i = 0; i < 2; i++)
		{
			double		t0 = now_s();
			PGresult   *res = run(name[i], cursor[i]);
			int			n = PQntuples(res);

			if (n > 0)
				snprintf(cursor[i], sizeof(cursor[i]), "%s", PQgetvalue(res, n - 1, 0));
			PQclear(res);
			secs[i] += now_s() - t0;
			rows[i] += n;
			done = n == 0;
		}
	}
	for (i = 0; i < 2; i++)
		printf("%s %lld %.0f\n", name[i], rows[i], rows[i] / secs[i]);
}

int
main(int argc, char **argv)
{
	const char *mode;
	char		batch[32];
	long long	rows = 0;
	double		t0;
	int			pgq;

	if (argc != 4)
	{
		fprintf(stderr, "usage: %s CONNINFO cfeed|join|pgq|logical|logical-all START_CURSOR\n", argv[0]);
		return 2;
	}
	mode = argv[2];
	conn = PQconnectdb(argv[1]);
	if (PQstatus(conn) != CONNECTION_OK)
	{
		fprintf(stderr, "connect: %s", PQerrorMessage(conn));
		return 1;
	}
	if (strcmp(mode, "cfeed") == 0 || strcmp(mode, "join") == 0)
	{
		const char *storage = getenv("READRATE_STORAGE");
		int			ranges = storage != NULL && strcmp(storage, "ranges") == 0;
		const char *cfeed_name[2] = {"cfeed", "plain"};
		const char *cfeed_sql[2] = {
			"SELECT * FROM cfeed.read(1, 0, $1::bigint, 1000)",
			ranges ?
			"SELECT change_sequence_number, change_id, stamped_at FROM hand_change "
			"WHERE feed_id = 1 AND shard = 0 AND change_sequence_number > $1::bigint "
			"ORDER BY change_sequence_number LIMIT 1000" :
			"SELECT change_sequence_number, change_id, stamped_at FROM cfeed.change "
			"WHERE feed_id = 1 AND shard = 0 AND change_sequence_number > $1::bigint "
			"ORDER BY change_sequence_number LIMIT 1000"};
		const char *join_name[2] = {"join", "hand"};
		const char *join_sql[2] = {
			ranges ?
			"SELECT c.change_sequence_number, o.* FROM orders o "
			"JOIN cfeed.read(1, 0, $1::bigint, 1000) c USING (change_id) "
			"ORDER BY c.change_sequence_number" :
			"SELECT c.change_sequence_number, o.* FROM orders o JOIN cfeed.change c USING (change_id) "
			"WHERE c.feed_id = 1 AND c.shard = 0 AND c.change_sequence_number > $1::bigint "
			"ORDER BY c.change_sequence_number LIMIT 1000",
			"SELECT c.change_sequence_number, o.* FROM orders o JOIN hand_change c USING (change_id) "
			"WHERE c.feed_id = 1 AND c.shard = 0 AND c.change_sequence_number > $1::bigint "
			"ORDER BY c.change_sequence_number LIMIT 1000"};

		if (strcmp(mode, "cfeed") == 0)
			compare(argv[3], cfeed_name, cfeed_sql);
		else
			compare(argv[3], join_name, join_sql);
		PQfinish(conn);
		return 0;
	}
	pgq = strcmp(mode, "pgq") == 0;
	if (strcmp(mode, "logical") == 0)
		prepare("page", "SELECT * FROM pg_logical_slot_get_changes('r', NULL, 1000, "
				"'format-version', '2', 'include-transaction', 'false')");
	else if (strcmp(mode, "logical-all") == 0)
		prepare("page", "SELECT * FROM pg_logical_slot_get_changes('r_all', NULL, NULL, "
				"'format-version', '2', 'include-transaction', 'false')");
	else if (pgq)
	{
		prepare("next", "SELECT pgq.next_batch('q', 'c')");
		prepare("page", "SELECT * FROM pgq.get_batch_events($1::bigint)");
		prepare("finish", "SELECT pgq.finish_batch($1::bigint)");
	}
	else
	{
		fprintf(stderr, "unknown mode %s\n", mode);
		return 2;
	}

	t0 = now_s();
	for (;;)
	{
		PGresult   *res;
		int			n;

		if (pgq)
		{
			res = run("next", NULL);
			if (PQgetisnull(res, 0, 0))
			{
				PQclear(res);
				break;
			}
			snprintf(batch, sizeof(batch), "%s", PQgetvalue(res, 0, 0));
			PQclear(res);
			res = run("page", batch);
			PQclear(run("finish", batch));
		}
		else
			res = run("page", NULL);
		n = PQntuples(res);
		PQclear(res);
		rows += n;
		if ((n == 0 && !pgq) || strcmp(mode, "logical-all") == 0)
			break;
	}
	printf("%s %lld %.0f\n", mode, rows, rows / (now_s() - t0));
	PQfinish(conn);
	return 0;
}
