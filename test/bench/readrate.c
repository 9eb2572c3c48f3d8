/*
 * readrate.c
 *	  Read throughput in 1000-row pages (SPEC §9 row 4): reads a whole log
 *	  page by page, as a consumer does, and prints rows/s.  Modes:
 *		cfeed	SELECT * FROM cfeed.read(1, 0, cursor, 1000)
 *		plain	the same query as cfeed.read's, on cfeed.change directly
 *		pgq		pgq.next_batch / get_batch_events / finish_batch on queue 'q'
 *		logical	pg_logical_slot_get_changes('r', NULL, 1000) (wal2json) until empty
 *		logical-all	one pg_logical_slot_get_changes('r_all', NULL, NULL): the
 *				whole backlog in one call (the peer's best case, no pages)
 *
 *	  usage: readrate CONNINFO MODE START_CURSOR
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <libpq-fe.h>

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static PGresult *
run(PGconn *conn, const char *sql, int nparams, const char *const *params)
{
	PGresult   *res = PQexecParams(conn, sql, nparams, NULL, params, NULL, NULL, 0);

	if (PQresultStatus(res) != PGRES_TUPLES_OK)
	{
		fprintf(stderr, "%s: %s", sql, PQerrorMessage(conn));
		exit(1);
	}
	return res;
}

int
main(int argc, char **argv)
{
	PGconn	   *conn;
	const char *mode;
	char		cursor[32];
	long long	rows = 0;
	double		t0;

	if (argc != 4)
	{
		fprintf(stderr, "usage: %s CONNINFO cfeed|plain|pgq|logical|logical-all START_CURSOR\n", argv[0]);
		return 2;
	}
	mode = argv[2];
	snprintf(cursor, sizeof(cursor), "%s", argv[3]);
	conn = PQconnectdb(argv[1]);
	if (PQstatus(conn) != CONNECTION_OK)
	{
		fprintf(stderr, "connect: %s", PQerrorMessage(conn));
		return 1;
	}
	t0 = now_s();
	for (;;)
	{
		const char *p[1] = {cursor};
		PGresult   *res;
		int			n;

		if (strcmp(mode, "cfeed") == 0)
			res = run(conn, "SELECT * FROM cfeed.read(1, 0, $1::bigint, 1000)", 1, p);
		else if (strcmp(mode, "plain") == 0)
			res = run(conn, "SELECT change_sequence_number, change_id, stamped_at "
					  "FROM cfeed.change "
					  "WHERE feed_id = 1 AND shard = 0 AND change_sequence_number > $1::bigint "
					  "ORDER BY change_sequence_number LIMIT 1000", 1, p);
		else if (strcmp(mode, "logical") == 0)
			res = run(conn, "SELECT * FROM pg_logical_slot_get_changes('r', NULL, 1000, "
					  "'format-version', '2', 'include-transaction', 'false')", 0, NULL);
		else if (strcmp(mode, "logical-all") == 0)
			res = run(conn, "SELECT * FROM pg_logical_slot_get_changes('r_all', NULL, NULL, "
					  "'format-version', '2', 'include-transaction', 'false')", 0, NULL);
		else
		{
			char		batch[32];
			const char *b[1] = {batch};

			res = run(conn, "SELECT pgq.next_batch('q', 'c')", 0, NULL);
			if (PQgetisnull(res, 0, 0))
			{
				PQclear(res);
				break;
			}
			snprintf(batch, sizeof(batch), "%s", PQgetvalue(res, 0, 0));
			PQclear(res);
			res = run(conn, "SELECT * FROM pgq.get_batch_events($1::bigint)", 1, b);
			PQclear(run(conn, "SELECT pgq.finish_batch($1::bigint)", 1, b));
		}
		n = PQntuples(res);
		if (n > 0 && (strcmp(mode, "cfeed") == 0 || strcmp(mode, "plain") == 0))
			snprintf(cursor, sizeof(cursor), "%s", PQgetvalue(res, n - 1, 0));
		PQclear(res);
		rows += n;
		if ((n == 0 && strcmp(mode, "pgq") != 0) || strcmp(mode, "logical-all") == 0)
			break;
	}
	printf("%s %lld %.0f\n", mode, rows, rows / (now_s() - t0));
	PQfinish(conn);
	return 0;
}
