/*
 * src/client/stat.c
 *		`cfeed stat`: print the cfeed.stats view as an aligned text
 *		table, one row per shard.  Against a cfeed version without the view
 *		it computes the basic columns from cfeed.feed, cfeed.shard and
 *		cfeed.change instead.
 */
#define _POSIX_C_SOURCE 200809L

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"

/* $1 = NULL or a feed_id / feed name to filter on. */
#define STATS_SQL \
	"select * from cfeed.stats s" \
	" where $1::text is null or s.feed_id::text = $1 or s.feed_name = $1" \
	" order by s.feed_id, s.shard"

#define FALLBACK_SQL \
	"select s.feed_id, f.name as feed_name, s.shard, s.sweep_group," \
	" s.last_change_sequence_number as head, s.last_sweep_time," \
	" (select pg_catalog.count(*) from cfeed.change c" \
	"   where c.feed_id = s.feed_id and c.shard = s.shard" \
	"   and c.change_sequence_number is null) as pending" \
	" from cfeed.shard s join cfeed.feed f on f.feed_id = s.feed_id" \
	" where $1::text is null or s.feed_id::text = $1 or f.name = $1" \
	" order by s.feed_id, s.shard"

/*
 * print_stat_help
 *		Usage text of `cfeed stat`.
 */
static void
print_stat_help(void)
{
	printf("cfeed stat prints one row per shard: head, last sweep, pending changes.\n"
		   "\n"
		   "Usage:\n"
		   "  cfeed stat [OPTION]...\n"
		   "\n"
		   "Options:\n"
		   "  -f, --feed=NAME|ID       only this feed\n"
		   "\n"
		   CFEED_CONN_HELP);
}

/*
 * is_numeric_type
 *		Whether a column of this type oid is right-aligned (int2, int4, int8,
 *		oid, float4, float8, numeric), as psql does.
 */
static bool
is_numeric_type(Oid type)
{
	return type == 20 || type == 21 || type == 23 || type == 26 ||
		type == 700 || type == 701 || type == 1700;
}

/*
 * print_table
 *		Print res as an aligned table with a header, a rule and a row count.
 *		NULLs print as empty cells.
 */
static void
print_table(const PGresult *res)
{
	int			ncols = PQnfields(res);
	int			nrows = PQntuples(res);
	int		   *width = calloc(ncols > 0 ? ncols : 1, sizeof(int));

	if (width == NULL)
	{
		fprintf(stderr, "cfeed stat: out of memory\n");
		exit(CFEED_EXIT_ERROR);
	}
	for (int c = 0; c < ncols; c++)
	{
		width[c] = (int) strlen(PQfname(res, c));
		for (int r = 0; r < nrows; r++)
			if (PQgetlength(res, r, c) > width[c])
				width[c] = PQgetlength(res, r, c);
	}

	for (int c = 0; c < ncols; c++)
	{
		int			len = (int) strlen(PQfname(res, c));
		int			left = (width[c] - len) / 2;

		printf("%s%*s%s%*s", c > 0 ? " | " : " ", left, "", PQfname(res, c),
			   c == ncols - 1 ? 0 : width[c] - len - left, "");
	}
	printf("\n");
	for (int c = 0; c < ncols; c++)
	{
		printf("%s", c > 0 ? "-+-" : "-");
		for (int i = 0; i < width[c]; i++)
			putchar('-');
	}
	printf("-\n");
	for (int r = 0; r < nrows; r++)
	{
		for (int c = 0; c < ncols; c++)
		{
			const char *sep = c > 0 ? " | " : " ";

			if (is_numeric_type(PQftype(res, c)))
				printf("%s%*s", sep, width[c], PQgetvalue(res, r, c));
			else if (c == ncols - 1)
				printf("%s%s", sep, PQgetvalue(res, r, c));
			else
				printf("%s%-*s", sep, width[c], PQgetvalue(res, r, c));
		}
		printf("\n");
	}
	printf("(%d row%s)\n", nrows, nrows == 1 ? "" : "s");
	fflush(stdout);
	free(width);
}

/*
 * cfeed_stat_main
 *		`cfeed stat`: argv[0] is "stat".  Returns the exit code.
 */
int
cfeed_stat_main(int argc, char **argv)
{
	static const struct option long_options[] = {
		CFEED_COMMON_LONGOPTS,
		{"feed", required_argument, NULL, 'f'},
		{NULL, 0, NULL, 0}
	};
	const char *dsn = NULL;
	const char *params[1] = {NULL};
	PGconn	   *conn;
	PGresult   *res;
	int			c;

	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, ":f:" CFEED_COMMON_SHORTOPTS, long_options, NULL)) != -1)
	{
		switch (c)
		{
			case 'f':
				params[0] = optarg;
				break;
			default:
				switch (cfeed_common_option(c, argv, &dsn))
				{
					case CFEED_OPTION_TAKEN:
						break;
					case CFEED_OPTION_HELP:
						print_stat_help();
						return CFEED_EXIT_OK;
					case CFEED_OPTION_OTHER:
						cfeed_bad_option("stat", c, argv);
				}
		}
	}
	cfeed_no_more_arguments("stat", argc, argv);

	conn = cfeed_connect(dsn, true);
	if (conn == NULL)
		return CFEED_EXIT_ERROR;

	res = PQexecParams(conn, STATS_SQL, 1, NULL, params, NULL, NULL, 0);
	if (!cfeed_result_ok(res, PGRES_TUPLES_OK) &&
		strcmp(cfeed_sqlstate(res), "42P01") == 0)
	{
		/* No cfeed.stats view in this version (or no cfeed at all). */
		PQclear(res);
		res = PQexecParams(conn, FALLBACK_SQL, 1, NULL, params, NULL, NULL, 0);
	}
	if (!cfeed_result_ok(res, PGRES_TUPLES_OK))
	{
		const char *state = cfeed_sqlstate(res);
		bool		missing = strcmp(state, "3F000") == 0 || strcmp(state, "42P01") == 0;

		if (missing)
			fprintf(stderr, "cfeed stat: the cfeed extension is not installed in this database\n");
		else
			fprintf(stderr, "cfeed stat: %s", cfeed_error_text(conn, res));
		PQclear(res);
		cfeed_set_cancel(NULL);
		PQfinish(conn);
		return missing ? CFEED_EXIT_USAGE : CFEED_EXIT_ERROR;
	}
	if (params[0] != NULL && PQntuples(res) == 0)
	{
		/* the view shows the feeds the role may read (docs/security.md) */
		fprintf(stderr, "cfeed stat: feed \"%s\" does not exist, or this role may not read it\n"
				"List the feeds with \"cfeed stat\".\n", params[0]);
		PQclear(res);
		cfeed_set_cancel(NULL);
		PQfinish(conn);
		return CFEED_EXIT_USAGE;
	}
	print_table(res);
	PQclear(res);
	cfeed_set_cancel(NULL);
	PQfinish(conn);
	return CFEED_EXIT_OK;
}
