/*
 * src/client/tail.c
 *		`cfeed tail`: print a feed's changes as JSON lines, long-polling.
 *
 * The loop: LISTEN on every shard's channel first, then read
 * each shard's pages (cfeed.read) until a short page, then wait for a
 * notification on the connection's socket (at most --wait-ms, after which
 * every shard is read anyway as a safety net), and repeat.  Because LISTEN
 * comes before the first read, no wake-up is lost.
 *
 * Each shard keeps its own cursor (the last number printed).  Every printed
 * number must be exactly cursor + 1 once the cursor is known; anything else
 * is a gap (exit 3).  Numbers at or below the shard's start value are the
 * migration range (backfilled history, which may be sparse): they only have
 * to ascend, and the first stamped number after them is start + 1.
 *
 * A lost connection (closed, terminated, class 08) is repaired by
 * reconnecting with exponential backoff; the new connection LISTENs again
 * and reading resumes from the cursors.  Each cursor carries the feed epoch
 * it belongs to (epoch.c): on every connection, and whenever a read sees
 * another epoch, it is passed through cfeed.resume_cursor, so that after a
 * failover that lost stamps (possibly reissued to other changes) the
 * changes now carrying those numbers are printed, not skipped; that may
 * print changes again, which is said on stderr.
 *
 * On a resharded feed, a child shard is read once its parent has ended and
 * has been printed to its end, from the child's start (tail_layout.c), so
 * that every key's changes are printed in order across splits.
 *
 * With --group/--owner the command is a member of a consumer group; the
 * lease handling is in group.c.  With --dead-letters --group it prints the
 * group's dead letters instead and exits (tail_dead.c).
 *
 * This file has the options, the lookup of the feed and the loop; the
 * shards and their layout are in tail_layout.c, connection setup and
 * reconnecting in tail_conn.c, reading and printing in tail_read.c,
 * waiting in tail_wait.c, and the queries' helpers all of them use in
 * tail_query.c.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tail.h"

/*
 * print_tail_help
 *		Usage text of `cfeed tail`.
 */
static void
print_tail_help(void)
{
	printf("cfeed tail prints a feed's changes as JSON lines and waits for more.\n"
		   "\n"
		   "Usage:\n"
		   "  cfeed tail --feed NAME|ID [OPTION]...\n"
		   "\n"
		   "Options:\n"
		   "  -f, --feed=NAME|ID       the feed to read (required)\n"
		   "  -s, --shard=N|all        one shard (then the shards that continue it after a\n"
		   "                           split), or all of them (default: all)\n"
		   "      --from=POSITION      where to start (default: beginning):\n"
		   "                             beginning  everything, backfilled history included\n"
		   "                             now        only changes stamped from now on\n"
		   "                             TIME       changes stamped at or after a timestamptz\n"
		   "                                        (e.g. '2024-05-01 12:00:00+00')\n"
		   "                             CURSOR     changes after this change_sequence_number\n"
		   "  -n, --max=N              exit after printing N changes\n"
		   "      --wait-ms=N          longest wait for a notification before reading\n"
		   "                           anyway (default: %d)\n"
		   "      --idle-exit-ms=N     exit after N ms without a new change\n"
		   "      --group=G            read as a member of consumer group G (needs --owner)\n"
		   "      --owner=O            this member's name in the group\n"
		   "      --ttl-ms=N           lease time to live in group mode (default: %d)\n"
		   "      --dead-letters       print the dead letters of --group on the feed (or\n"
		   "                           on --shard), in order, and exit; no --owner needed\n"
		   "\n"
		   CFEED_CONN_HELP
		   "\n"
		   "Each change is one line:\n"
		   "  {\"feed_id\":1,\"shard\":0,\"change_sequence_number\":2000000000000001,\n"
		   "   \"change_id\":1000000000000000,\"stamped_at\":\"2024-05-01T12:00:00.1+00:00\"}\n"
		   "and a change of a tracked table also what changed:\n"
		   "   ..., \"tbl\":\"item\",\"op\":\"update\",\"row\":{\"id\":1,...}}\n"
		   "A dead letter (--dead-letters) is one line:\n"
		   "  {\"group\":\"billing\",\"feed_id\":1,\"shard\":0,\"change_sequence_number\":...,\n"
		   "   \"change_id\":...,\"attempts\":3,\"last_error\":\"...\",\"dead_lettered_at\":\"...\"}\n"
		   "\n"
		   "Exit codes: 0 done (--max, --idle-exit-ms, SIGINT, SIGTERM), 1 connection\n"
		   "or server error, 2 bad arguments or unknown feed, 3 gap in a shard's numbers,\n"
		   "4 the role may not read the feed.\n",
		   DEFAULT_WAIT_MS, DEFAULT_TTL_MS);
}

/*
 * looks_like_time
 *		A --from value containing '-' or ':' is a point in time.
 */
static bool
looks_like_time(const char *text)
{
	return strchr(text, '-') != NULL || strchr(text, ':') != NULL;
}

/*
 * parse_option
 *		Apply one option c (from getopt_long, its value in optarg) to t;
 *		--from is only kept in *from_arg, for parse_from.
 */
static void
parse_option(Tail *t, int c, char **argv, const char **from_arg)
{
	long long	value;

	switch (c)
	{
		case 'f':
			t->feed_arg = optarg;
			break;
		case 's':
			if (strcmp(optarg, "all") == 0)
				t->only_shard = -1;
			else if (cfeed_parse_int64(optarg, 0, INT_MAX, &value))
				t->only_shard = (int) value;
			else
				cfeed_usage_error("tail", "invalid --shard \"%s\": expected a shard number or \"all\"", optarg);
			break;
		case 'F':
			*from_arg = optarg;
			break;
		case 'n':
			if (!cfeed_parse_int64(optarg, 1, LLONG_MAX, &t->max))
				cfeed_usage_error("tail", "invalid --max \"%s\": expected a positive integer", optarg);
			break;
		case 'w':
			if (!cfeed_parse_int64(optarg, 1, INT_MAX, &value))
				cfeed_usage_error("tail", "invalid --wait-ms \"%s\": expected a positive integer", optarg);
			t->wait_ms = (int) value;
			break;
		case 'i':
			if (!cfeed_parse_int64(optarg, 1, LLONG_MAX / 2, &t->idle_exit_ms))
				cfeed_usage_error("tail", "invalid --idle-exit-ms \"%s\": expected a positive integer", optarg);
			break;
		case 'g':
			t->group = optarg;
			break;
		case 'o':
			t->owner = optarg;
			break;
		case 'D':
			t->dead_letters = true;
			break;
		case 't':
			if (!cfeed_parse_int64(optarg, 3, INT_MAX, &value))
				cfeed_usage_error("tail", "invalid --ttl-ms \"%s\": expected an integer of at least 3", optarg);
			t->ttl_ms = (int) value;
			break;
		default:
			switch (cfeed_common_option(c, argv, &t->dsn))
			{
				case CFEED_OPTION_TAKEN:
					break;
				case CFEED_OPTION_HELP:
					print_tail_help();
					exit(CFEED_EXIT_OK);
				case CFEED_OPTION_OTHER:
					cfeed_bad_option("tail", c, argv);
			}
	}
}

/*
 * parse_from
 *		Set t->from from the --from value: beginning, now, a cursor or a
 *		time (checked on the server later).
 */
static void
parse_from(Tail *t, const char *from_arg)
{
	t->from_text = from_arg;
	if (strcmp(from_arg, "beginning") == 0)
		t->from = FROM_BEGINNING;
	else if (strcmp(from_arg, "now") == 0)
		t->from = FROM_NOW;
	else if (cfeed_parse_int64(from_arg, 0, LLONG_MAX, &t->from_cursor))
		t->from = FROM_CURSOR;
	else if (looks_like_time(from_arg))
		t->from = FROM_TIME;
	else
		cfeed_usage_error("tail", "invalid --from \"%s\": expected beginning, now, a timestamp or a cursor", from_arg);
}

/*
 * check_group_options
 *		--group and --owner go together, and exclude --shard and a --from
 *		of now or a cursor; --dead-letters needs --group alone.
 */
static void
check_group_options(const Tail *t, const char *from_arg)
{
	if (t->dead_letters)
	{
		if (t->group == NULL || *t->group == '\0')
			cfeed_usage_error("tail", "--dead-letters needs --group");
		if (t->owner != NULL)
			cfeed_usage_error("tail", "--dead-letters takes no --owner: it reads the group's dead letters, it holds no lease");
		if (from_arg != NULL)
			cfeed_usage_error("tail", "--dead-letters takes no --from: it prints every dead letter of the group");
		return;
	}
	if ((t->group == NULL) != (t->owner == NULL))
		cfeed_usage_error("tail", "--group and --owner go together");
	if (t->group != NULL)
	{
		if (*t->group == '\0' || *t->owner == '\0')
			cfeed_usage_error("tail", "--group and --owner must not be empty");
		if (t->only_shard >= 0)
			cfeed_usage_error("tail", "--shard cannot be combined with --group: the group assigns shards");
		if (t->from == FROM_NOW || t->from == FROM_CURSOR)
			cfeed_usage_error("tail", "with --group, --from can only be beginning or a time: a lease keeps its own cursor");
	}
}

/*
 * parse_options
 *		Fill the option fields of t from argv; exits 2 on bad arguments and
 *		0 after --help.
 */
static void
parse_options(Tail *t, int argc, char **argv)
{
	static const struct option long_options[] = {
		CFEED_COMMON_LONGOPTS,
		{"feed", required_argument, NULL, 'f'},
		{"shard", required_argument, NULL, 's'},
		{"from", required_argument, NULL, 'F'},
		{"max", required_argument, NULL, 'n'},
		{"wait-ms", required_argument, NULL, 'w'},
		{"idle-exit-ms", required_argument, NULL, 'i'},
		{"group", required_argument, NULL, 'g'},
		{"owner", required_argument, NULL, 'o'},
		{"ttl-ms", required_argument, NULL, 't'},
		{"dead-letters", no_argument, NULL, 'D'},
		{NULL, 0, NULL, 0}
	};
	const char *from_arg = NULL;
	int			c;

	memset(t, 0, sizeof(*t));
	t->only_shard = -1;
	t->from = FROM_BEGINNING;
	t->wait_ms = DEFAULT_WAIT_MS;
	t->ttl_ms = DEFAULT_TTL_MS;
	t->feed_id = -1;

	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, ":f:s:n:" CFEED_COMMON_SHORTOPTS, long_options, NULL)) != -1)
		parse_option(t, c, argv, &from_arg);
	cfeed_no_more_arguments("tail", argc, argv);
	if (t->feed_arg == NULL || *t->feed_arg == '\0')
		cfeed_usage_error("tail", "--feed is required");
	if (from_arg != NULL)
		parse_from(t, from_arg);
	check_group_options(t, from_arg);
}

/*
 * have_feed_id
 *		Whether the database's cfeed has cfeed._feed_id (1.9).
 */
static bool
have_feed_id(Tail *t)
{
	PGresult   *res = cfeed_tail_exec_params(t, "select pg_catalog.to_regprocedure('cfeed._feed_id(text)') is not null",
											 0, NULL);
	bool		have = cfeed_result_ok(res, PGRES_TUPLES_OK) && strcmp(PQgetvalue(res, 0, 0), "t") == 0;

	PQclear(res);
	return have;
}

/*
 * resolve_feed
 *		Find the feed named by --feed: by feed_id when it is a number (then
 *		by name), else by name.  Exits 2 when there is no such feed or no
 *		cfeed in the database, 1 on other errors.  A reader without SELECT
 *		on cfeed.feed (docs/security.md's reader) names its feed by number,
 *		taken as it is (reading the layout then tells 42501 from a missing
 *		feed), or by name, found by cfeed._feed_id (1.9: a feed it may read
 *		or write; exit 4 with the same words for the others, whether they
 *		exist or not; before 1.9 it exits 4).
 */
static void
resolve_feed(Tail *t)
{
	const char *params[1] = {t->feed_arg};
	long long	id;
	bool		numeric = cfeed_parse_int64(t->feed_arg, INT_MIN, INT_MAX, &id);
	PGresult   *res = NULL;

	if (numeric)
	{
		res = cfeed_tail_exec_params(t, "select feed_id from cfeed.feed where feed_id = $1::int", 1, params);
		if (cfeed_result_ok(res, PGRES_TUPLES_OK) && PQntuples(res) == 0)
		{
			PQclear(res);
			res = NULL;
		}
	}
	if (res == NULL)
		res = cfeed_tail_exec_params(t, "select feed_id from cfeed.feed where name = $1", 1, params);
	if (!numeric && !cfeed_result_ok(res, PGRES_TUPLES_OK) && strcmp(cfeed_sqlstate(res), "42501") == 0 &&
		have_feed_id(t))
	{
		PQclear(res);
		res = cfeed_tail_exec_params(t, "select f from cfeed._feed_id($1) f where f is not null",
									 1, params);
		if (cfeed_result_ok(res, PGRES_TUPLES_OK) && PQntuples(res) == 0)
		{
			fprintf(stderr, "cfeed tail: no feed named \"%s\" that this role may read\n"
					"Ask the extension's owner for a read grant (cfeed.grant_read).\n", t->feed_arg);
			exit(CFEED_EXIT_DENIED);
		}
	}
	if (!cfeed_result_ok(res, PGRES_TUPLES_OK))
	{
		const char *state = cfeed_sqlstate(res);

		if (strcmp(state, "3F000") == 0 || strcmp(state, "42P01") == 0)
		{
			fprintf(stderr, "cfeed tail: the cfeed extension is not installed in this database\n"
					"Run CREATE EXTENSION cfeed first.\n");
			exit(CFEED_EXIT_USAGE);
		}
		if (strcmp(state, "42501") == 0 && numeric)
		{
			PQclear(res);
			t->feed_id = (int) id;
			snprintf(t->feed_id_text, sizeof(t->feed_id_text), "%d", t->feed_id);
			return;
		}
		fprintf(stderr, "cfeed tail: could not look up feed \"%s\": %s%s",
				t->feed_arg, cfeed_error_text(t->conn, res),
				strcmp(state, "42501") == 0 ? "Name the feed by its number (feed_id), or grant SELECT on cfeed.feed.\n" : "");
		exit(strcmp(state, "42501") == 0 ? CFEED_EXIT_DENIED : CFEED_EXIT_ERROR);
	}
	if (PQntuples(res) == 0)
	{
		fprintf(stderr, "cfeed tail: feed \"%s\" does not exist\n"
				"List the feeds with \"cfeed stat\" or \"select * from cfeed.feed\".\n",
				t->feed_arg);
		exit(CFEED_EXIT_USAGE);
	}
	t->feed_id = atoi(PQgetvalue(res, 0, 0));
	snprintf(t->feed_id_text, sizeof(t->feed_id_text), "%d", t->feed_id);
	PQclear(res);
}

/*
 * check_rows
 *		Whether changes are read with their row images (cfeed.read_rows, and
 *		SELECT on cfeed.row_image, which it needs); else with cfeed.read.
 */
static void
check_rows(Tail *t)
{
	PGresult   *res = cfeed_tail_exec_params(t,
											 "select pg_catalog.to_regprocedure('cfeed.read_rows(integer,integer,bigint,integer,integer)') is not null"
											 " and pg_catalog.has_table_privilege('cfeed.row_image', 'SELECT')",
											 0, NULL);

	if (!cfeed_result_ok(res, PGRES_TUPLES_OK))
	{
		fprintf(stderr, "cfeed tail: %s", cfeed_error_text(t->conn, res));
		exit(CFEED_EXIT_ERROR);
	}
	t->rows = strcmp(PQgetvalue(res, 0, 0), "t") == 0;
	PQclear(res);
}

/*
 * check_arguments_on_server
 *		Checks that need the server: a --from time must parse as
 *		timestamptz; group mode needs cfeed.acquire.  Exits 2 on failure.
 */
static void
check_arguments_on_server(Tail *t)
{
	PGresult   *res;

	if (t->from == FROM_TIME)
	{
		const char *params[1] = {t->from_text};

		res = cfeed_tail_exec_params(t, "select $1::timestamptz", 1, params);
		if (!cfeed_result_ok(res, PGRES_TUPLES_OK))
		{
			if (strncmp(cfeed_sqlstate(res), "22", 2) == 0)
			{
				const char *primary = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);

				fprintf(stderr, "cfeed tail: invalid --from time \"%s\": %s\n",
						t->from_text, primary ? primary : "not a timestamp");
				fprintf(stderr, "Try \"cfeed tail --help\" for more information.\n");
				exit(CFEED_EXIT_USAGE);
			}
			fprintf(stderr, "cfeed tail: %s", cfeed_error_text(t->conn, res));
			exit(CFEED_EXIT_ERROR);
		}
		PQclear(res);
	}

	if (t->group != NULL)
		cfeed_group_check_api(t);
}

/*
 * follow
 *		The loop of the file header, until it stops; leaves the exit code in
 *		t->exit_code.
 */
static void
follow(Tail *t)
{
	TailStep	step;

	check_rows(t);
	check_arguments_on_server(t);

	t->last_activity_ms = cfeed_now_ms();
	step = cfeed_tail_setup_connection(t);
	while (step != STEP_STOP)
	{
		if (step == STEP_LOST)
		{
			step = cfeed_tail_reconnect(t);
			continue;
		}

		if (t->group == NULL && cfeed_tail_layout_due(t))
		{
			bool		more;

			step = cfeed_tail_follow_layout(t, &more);
			if (step != STEP_OK)
				continue;
		}
		for (int i = 0; i < t->nshards && step == STEP_OK; i++)
			if (t->shards[i].held && t->shards[i].dirty)
				step = cfeed_tail_drain_shard(t, &t->shards[i]);
		if (step != STEP_OK)
			continue;
		if (t->max > 0 && t->printed >= t->max)
		{
			t->exit_code = CFEED_EXIT_OK;
			break;
		}
		if (t->group == NULL && cfeed_tail_reading_closed(t))
		{
			bool		more;

			step = cfeed_tail_follow_layout(t, &more);
			if (step != STEP_OK || more)
				continue;		/* read the shards now due first */
		}

		step = cfeed_tail_wait_for_wakeup(t);
		if (step == STEP_OK && t->group != NULL && cfeed_now_ms() >= t->next_renew_ms)
			step = cfeed_group_acquire(t);
	}

	if (t->group != NULL)
		cfeed_group_release(t);
}

/*
 * cfeed_tail_main
 *		`cfeed tail`: argv[0] is "tail".  Returns the exit code.
 */
int
cfeed_tail_main(int argc, char **argv)
{
	Tail		t;
	const char *names[2];

	parse_options(&t, argc, argv);
	names[0] = t.group;
	names[1] = t.owner;
	if (!cfeed_args_to_utf8(t.dsn, names, 2))
		return CFEED_EXIT_ERROR;
	t.group = names[0];
	t.owner = names[1];

	t.conn = cfeed_connect(t.dsn, true);
	if (t.conn == NULL)
		return CFEED_EXIT_ERROR;
	resolve_feed(&t);
	cfeed_tail_load_shards(&t);
	if (t.dead_letters)
		t.exit_code = cfeed_tail_dead_letters(&t);
	else
		follow(&t);

	cfeed_set_cancel(NULL);
	if (t.conn != NULL)
		PQfinish(t.conn);
	for (int i = 0; i < t.nshards; i++)
		free(t.shards[i].channel);
	free(t.shards);
	return t.exit_code;
}
