/*
 * src/client/sweep.c
 *		`cfeed sweep`: an external sweeper, for databases without the
 *		background worker (the SQL edition on managed PostgreSQL, or the C
 *		extension without shared_preload_libraries), in the manner of PgQ's
 *		pgqd.  It calls cfeed.sweep(group) in a loop, each sweep its own
 *		transaction: at once again after a sweep that stamped changes (more
 *		may have committed meanwhile), else after --poll-ms, or sooner when
 *		a writer's commit hint arrives (NOTIFY cfeed_sweep, which the SQL
 *		edition's trigger change_sweep_hint sends when it is enabled;
 *		docs/sql-edition.md).  A lost connection is made again after a
 *		second; a 40001 (a sweep that found changes deleted or moved under
 *		it) is retried.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"

#define SWEEP_HINT_CHANNEL "cfeed_sweep"
#define SWEEP_RECONNECT_MS 1000

/* One sweep's totals: changes stamped, shards, highest lag. */
#define SWEEP_SQL \
	"select coalesce(pg_catalog.sum(s.change_count), 0)," \
	" pg_catalog.count(*), coalesce(pg_catalog.max(s.lag_ms), 0)" \
	" from cfeed.sweep($1::int) s"

typedef struct SweepOptions
{
	const char *dsn;
	const char *group_text;
	int			poll_ms;
	bool		once;
	bool		verbose;
} SweepOptions;

/*
 * print_sweep_help
 *		Usage text of `cfeed sweep`.
 */
static void
print_sweep_help(void)
{
	printf("cfeed sweep stamps the committed changes of a sweep group, again and again,\n"
		   "for a database without cfeed's background sweeper (the SQL edition).\n"
		   "\n"
		   "Usage:\n"
		   "  cfeed sweep [OPTION]...\n"
		   "\n"
		   "Options:\n"
		   "  -g, --group=N            the sweep group (default 0)\n"
		   "      --poll-ms=MS         longest wait between sweeps without a commit hint\n"
		   "                           (default 100)\n"
		   "      --once               sweep once, print the totals, exit\n"
		   "  -v, --verbose            print a JSON line per sweep that stamped changes\n"
		   "\n"
		   CFEED_CONN_HELP);
}

/*
 * parse_sweep_options
 *		Fill o from argv ("sweep" first); exits on a usage error or --help.
 */
static void
parse_sweep_options(int argc, char **argv, SweepOptions *o)
{
	static const struct option long_options[] = {
		CFEED_COMMON_LONGOPTS,
		{"group", required_argument, NULL, 'g'},
		{"poll-ms", required_argument, NULL, 1},
		{"once", no_argument, NULL, 2},
		{"verbose", no_argument, NULL, 'v'},
		{NULL, 0, NULL, 0}
	};
	long long	value;
	int			c;

	memset(o, 0, sizeof(*o));
	o->group_text = "0";
	o->poll_ms = 100;
	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, ":g:v" CFEED_COMMON_SHORTOPTS, long_options, NULL)) != -1)
	{
		switch (c)
		{
			case 'g':
				if (!cfeed_parse_int64(optarg, -2147483648LL, 2147483647LL, &value))
					cfeed_usage_error("sweep", "invalid --group \"%s\": expected an integer", optarg);
				o->group_text = optarg;
				break;
			case 1:
				if (!cfeed_parse_int64(optarg, 1, 3600000, &value))
					cfeed_usage_error("sweep", "invalid --poll-ms \"%s\": expected 1 to 3600000", optarg);
				o->poll_ms = (int) value;
				break;
			case 2:
				o->once = true;
				break;
			case 'v':
				o->verbose = true;
				break;
			default:
				switch (cfeed_common_option(c, argv, &o->dsn))
				{
					case CFEED_OPTION_TAKEN:
						break;
					case CFEED_OPTION_HELP:
						print_sweep_help();
						exit(CFEED_EXIT_OK);
					case CFEED_OPTION_OTHER:
						cfeed_bad_option("sweep", c, argv);
				}
		}
	}
	cfeed_no_more_arguments("sweep", argc, argv);
}

/*
 * connect_sweeper
 *		Connect and LISTEN for commit hints; NULL (reported) on failure.
 */
static PGconn *
connect_sweeper(const SweepOptions *o)
{
	PGconn	   *conn = cfeed_connect_as(o->dsn, "cfeed sweep", true);
	PGresult   *res;

	if (conn == NULL)
		return NULL;
	res = PQexec(conn, "LISTEN " SWEEP_HINT_CHANNEL);
	if (!cfeed_result_ok(res, PGRES_COMMAND_OK))
	{
		fprintf(stderr, "cfeed sweep: %s", cfeed_error_text(conn, res));
		PQclear(res);
		cfeed_set_cancel(NULL);
		PQfinish(conn);
		return NULL;
	}
	PQclear(res);
	return conn;
}

/*
 * wait_for_hint
 *		Wait up to ms for a commit hint (a notification on the connection's
 *		socket) or a signal; drops the hints that came.  False when the
 *		connection broke.
 */
static bool
wait_for_hint(PGconn *conn, int ms)
{
	long long	deadline = cfeed_now_ms() + ms;
	PGnotify   *notify;
	bool		hinted = false;

	while (!hinted && !cfeed_interrupted)
	{
		long long	left = deadline - cfeed_now_ms();
		struct pollfd pfd;
		int			rc;

		while ((notify = PQnotifies(conn)) != NULL)
		{
			hinted = true;
			PQfreemem(notify);
		}
		if (hinted || left <= 0)
			break;
		pfd.fd = PQsocket(conn);
		pfd.events = POLLIN;
		pfd.revents = 0;
		rc = poll(&pfd, 1, (int) left);
		if (rc < 0 && errno != EINTR)
		{
			perror("cfeed sweep: poll");
			return false;
		}
		if (rc > 0 && (!PQconsumeInput(conn) || PQstatus(conn) != CONNECTION_OK))
			return false;
	}
	return true;
}

/*
 * cfeed_sweep_main
 *		`cfeed sweep`: argv[0] is "sweep".  Returns the exit code: 0 when
 *		interrupted (or after --once), 1 on a server error other than a lost
 *		connection, 2 for bad arguments or a database without cfeed.
 */
int
cfeed_sweep_main(int argc, char **argv)
{
	SweepOptions o;
	PGconn	   *conn = NULL;
	const char *params[1];

	parse_sweep_options(argc, argv, &o);
	params[0] = o.group_text;

	while (!cfeed_interrupted)
	{
		PGresult   *res;
		long long	changes;

		if (conn == NULL)
		{
			conn = connect_sweeper(&o);
			if (conn == NULL)
			{
				if (o.once)
					return CFEED_EXIT_ERROR;
				cfeed_sleep_ms(SWEEP_RECONNECT_MS);
				continue;
			}
		}

		res = PQexecParams(conn, SWEEP_SQL, 1, NULL, params, NULL, NULL, 0);
		if (!cfeed_result_ok(res, PGRES_TUPLES_OK))
		{
			const char *state = cfeed_sqlstate(res);

			if (cfeed_connection_lost(conn, res) && !o.once)
			{
				fprintf(stderr, "cfeed sweep: connection lost, reconnecting: %s",
						cfeed_error_text(conn, res));
				PQclear(res);
				cfeed_set_cancel(NULL);
				PQfinish(conn);
				conn = NULL;
				cfeed_sleep_ms(SWEEP_RECONNECT_MS);
				continue;
			}
			if (strcmp(state, "40001") == 0 && !o.once)
			{
				PQclear(res);
				continue;		/* changes moved under the sweep: again */
			}
			if (strcmp(state, "3F000") == 0 || strcmp(state, "42883") == 0)
				fprintf(stderr, "cfeed sweep: cfeed is not installed in this database\n");
			else if (!cfeed_interrupted)
				fprintf(stderr, "cfeed sweep: %s", cfeed_error_text(conn, res));
			PQclear(res);
			cfeed_set_cancel(NULL);
			PQfinish(conn);
			if (cfeed_interrupted)
				return CFEED_EXIT_OK;
			return strcmp(state, "3F000") == 0 || strcmp(state, "42883") == 0
				? CFEED_EXIT_USAGE : CFEED_EXIT_ERROR;
		}
		changes = atoll(PQgetvalue(res, 0, 0));
		if (o.once || (o.verbose && changes > 0))
		{
			printf("{\"group\":%s,\"changes\":%s,\"shards\":%s,\"max_lag_ms\":%s}\n",
				   o.group_text, PQgetvalue(res, 0, 0), PQgetvalue(res, 0, 1),
				   PQgetvalue(res, 0, 2));
			fflush(stdout);
		}
		PQclear(res);
		if (o.once)
			break;
		/* after a sweep that stamped, at once again: more may be there */
		if (changes == 0 && !wait_for_hint(conn, o.poll_ms))
		{
			fprintf(stderr, "cfeed sweep: connection lost, reconnecting: %s",
					PQerrorMessage(conn));
			cfeed_set_cancel(NULL);
			PQfinish(conn);
			conn = NULL;
			cfeed_sleep_ms(SWEEP_RECONNECT_MS);
		}
	}
	if (conn != NULL)
	{
		cfeed_set_cancel(NULL);
		PQfinish(conn);
	}
	return CFEED_EXIT_OK;
}
