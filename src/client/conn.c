/*
 * src/client/conn.c
 *		Connections and signals for the `cfeed` command: connecting with
 *		application_name "cfeed", classifying failed results (lost
 *		connection or server error), and SIGINT/SIGTERM handling.
 *
 * Signals: the handler only sets cfeed_interrupted and, when a query is
 * running, asks the server to cancel it through a PGcancel object (PQcancel
 * is async-signal-safe).  The loops check the flag and exit cleanly.  The
 * PGcancel object is swapped with the signals blocked, so the handler never
 * sees a freed one.
 */
#define _POSIX_C_SOURCE 200809L

#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"

volatile sig_atomic_t cfeed_interrupted = 0;

static PGcancel *volatile current_cancel = NULL;

/*
 * handle_stop_signal
 *		SIGINT/SIGTERM: remember it and cancel the running query, if any.
 */
static void
handle_stop_signal(int signo)
{
	char		errbuf[256];

	(void) signo;
	cfeed_interrupted = 1;
	if (current_cancel != NULL)
		(void) PQcancel(current_cancel, errbuf, sizeof(errbuf));
}

/*
 * cfeed_install_signal_handlers
 *		Route SIGINT and SIGTERM to handle_stop_signal (without SA_RESTART,
 *		so poll() returns EINTR) and ignore SIGPIPE (a closed stdout is
 *		reported by the write instead).
 */
void
cfeed_install_signal_handlers(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = handle_stop_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sa.sa_handler = SIG_IGN;
	sigaction(SIGPIPE, &sa, NULL);
}

/*
 * cfeed_set_cancel
 *		Make conn (or nothing, when NULL) the connection a signal cancels.
 *		Call it after every connect and before PQfinish.
 */
void
cfeed_set_cancel(PGconn *conn)
{
	sigset_t	block;
	sigset_t	saved;
	PGcancel   *old;

	sigemptyset(&block);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGTERM);
	sigprocmask(SIG_BLOCK, &block, &saved);
	old = current_cancel;
	current_cancel = conn ? PQgetCancel(conn) : NULL;
	sigprocmask(SIG_SETMASK, &saved, NULL);
	if (old != NULL)
		PQfreeCancel(old);
}

/*
 * print_notice
 *		Notice processor: server notices and asynchronous messages (such as
 *		"terminating connection due to administrator command") go to stderr
 *		marked as coming from the server.
 */
static void
print_notice(void *arg, const char *message)
{
	(void) arg;
	fprintf(stderr, "cfeed: server: %s", message);
}

/* -h, -p, -U (cfeed_common_option), for every connection the command makes. */
static const char *conn_host = NULL;
static const char *conn_port = NULL;
static const char *conn_user = NULL;

/*
 * cfeed_common_option
 *		getopt_long returned c for one of CFEED_COMMON_SHORTOPTS or
 *		CFEED_COMMON_LONGOPTS: keep -d in *dsn and -h, -p, -U for
 *		cfeed_connect_as, print the version for -V (and exit 0), report -?
 *		and --help.  getopt_long also returns '?' for an unknown option:
 *		that is CFEED_OPTION_OTHER, for the caller's cfeed_bad_option.
 */
CfeedOptionKind
cfeed_common_option(int c, char **argv, const char **dsn)
{
	switch (c)
	{
		case 'd':
			*dsn = optarg;
			return CFEED_OPTION_TAKEN;
		case 'h':
			conn_host = optarg;
			return CFEED_OPTION_TAKEN;
		case 'p':
			conn_port = optarg;
			return CFEED_OPTION_TAKEN;
		case 'U':
			conn_user = optarg;
			return CFEED_OPTION_TAKEN;
		case 'V':
			printf("cfeed (cfeed client) %s\n", CFEED_CLIENT_VERSION);
			exit(CFEED_EXIT_OK);
		case '?':
			if (strcmp(argv[optind - 1], "-?") == 0 || strcmp(argv[optind - 1], "--help") == 0)
				return CFEED_OPTION_HELP;
			return CFEED_OPTION_OTHER;
		default:
			return CFEED_OPTION_OTHER;
	}
}

/*
 * cfeed_connect_as
 *		Connect using dsn (a database name, a connection string or URI; NULL
 *		= PG* environment variables only) and the -h, -p, -U given (a value
 *		the connection string names wins, as in psql), with
 *		application_name appname (a DSN that names one wins; PGAPPNAME does
 *		not).  On failure prints the reason when report is true and returns
 *		NULL.  Signals do not cancel its queries.
 */
static PGconn *connect_with(const char *dsn, const char *appname, bool report, bool utf8);

PGconn *
cfeed_connect_as(const char *dsn, const char *appname, bool report)
{
	return connect_with(dsn, appname, report, true);
}

/*
 * connect_with
 *		cfeed_connect_as; utf8 false leaves the client encoding to the
 *		connection string and the environment (cfeed_args_to_utf8).
 */
static PGconn *
connect_with(const char *dsn, const char *appname, bool report, bool utf8)
{
	const char *keywords[7];
	const char *values[7];
	int			n = 0;
	PGconn	   *conn;

	keywords[n] = "application_name";
	values[n++] = appname;
	if (conn_host != NULL)
	{
		keywords[n] = "host";
		values[n++] = conn_host;
	}
	if (conn_port != NULL)
	{
		keywords[n] = "port";
		values[n++] = conn_port;
	}
	if (conn_user != NULL)
	{
		keywords[n] = "user";
		values[n++] = conn_user;
	}
	keywords[n] = "dbname";
	values[n++] = dsn;
	/* after dbname, so that no DSN or PGCLIENTENCODING changes it: JSON is UTF-8 */
	if (utf8)
	{
		keywords[n] = "client_encoding";
		values[n++] = "UTF8";
	}
	keywords[n] = NULL;
	values[n] = NULL;

	conn = PQconnectdbParams(keywords, values, 1);
	if (conn == NULL)
	{
		if (report)
			fprintf(stderr, "cfeed: out of memory\n");
		return NULL;
	}
	if (PQstatus(conn) != CONNECTION_OK)
	{
		if (report)
			fprintf(stderr, "cfeed: could not connect: %s", PQerrorMessage(conn));
		PQfinish(conn);
		return NULL;
	}
	PQsetNoticeProcessor(conn, print_notice, NULL);
	return conn;
}

/* Whether s is ASCII only: the same bytes in every client encoding. */
static bool
plain_ascii(const char *s)
{
	for (; *s; s++)
		if ((unsigned char) *s >= 0x80)
			return false;
	return true;
}

/*
 * cfeed_args_to_utf8
 *		cfeed's connections speak UTF-8 (cfeed_connect_as), but its
 *		arguments (a group's or an owner's name) come in the client encoding
 *		the connection string or the environment names (PGCLIENTENCODING):
 *		each of the n strings *args that is not plain ASCII is replaced by
 *		its UTF-8 form, converted by the server on a connection in that
 *		encoding.  False, with the reason printed, when it fails (a byte
 *		sequence invalid in that encoding, say).
 */
bool
cfeed_args_to_utf8(const char *dsn, const char **args, int n)
{
	PGconn	   *conn = NULL;
	bool		ok = true;

	for (int i = 0; i < n && ok; i++)
	{
		const char *params[1] = {args[i]};
		PGresult   *res;
		size_t		len;
		unsigned char *bytes;

		if (args[i] == NULL || plain_ascii(args[i]))
			continue;
		if (conn == NULL && (conn = connect_with(dsn, "cfeed", true, false)) == NULL)
			return false;
		res = PQexecParams(conn, "select pg_catalog.convert_to($1, 'UTF8')", 1, NULL, params, NULL, NULL, 0);
		ok = cfeed_result_ok(res, PGRES_TUPLES_OK) &&
			(bytes = PQunescapeBytea((const unsigned char *) PQgetvalue(res, 0, 0), &len)) != NULL;
		if (ok)
		{
			char	   *utf8 = malloc(len + 1);

			if (utf8 == NULL)
			{
				fprintf(stderr, "cfeed: out of memory\n");
				exit(CFEED_EXIT_ERROR);
			}
			memcpy(utf8, bytes, len);
			utf8[len] = '\0';
			PQfreemem(bytes);
			args[i] = utf8;
		}
		else
			fprintf(stderr, "cfeed: could not read argument \"%s\" in the client encoding: %s",
					args[i], cfeed_error_text(conn, res));
		PQclear(res);
	}
	if (conn != NULL)
		PQfinish(conn);
	return ok;
}

/*
 * cfeed_connect
 *		cfeed_connect_as with application_name "cfeed", made the connection
 *		that SIGINT/SIGTERM cancel.
 */
PGconn *
cfeed_connect(const char *dsn, bool report)
{
	PGconn	   *conn = cfeed_connect_as(dsn, "cfeed", report);

	if (conn != NULL)
		cfeed_set_cancel(conn);
	return conn;
}

/*
 * cfeed_behind_pooler
 *		Whether conn goes through a pooler or proxy (pgbouncer, say): the
 *		backend that answers a query is not the one whose process id the
 *		connection's start-up announced.  A LISTEN there would stay on a
 *		pooled server connection, whose notifications would go to other
 *		clients of the pool.  Sets *pooled and returns true, or returns false
 *		with the failed result in *failed.
 */
bool
cfeed_behind_pooler(PGconn *conn, bool *pooled, PGresult **failed)
{
	PGresult   *res = PQexec(conn, "select pg_catalog.pg_backend_pid()");

	if (!cfeed_result_ok(res, PGRES_TUPLES_OK))
	{
		*failed = res;
		return false;
	}
	*pooled = atoi(PQgetvalue(res, 0, 0)) != PQbackendPID(conn);
	PQclear(res);
	return true;
}

/*
 * cfeed_result_ok
 *		Whether res exists and has the expected status.
 */
bool
cfeed_result_ok(const PGresult *res, ExecStatusType expected)
{
	return res != NULL && PQresultStatus(res) == expected;
}

/*
 * cfeed_sqlstate
 *		The SQLSTATE of a failed result, or "" when there is none (a
 *		client-side failure such as a broken connection).
 */
const char *
cfeed_sqlstate(const PGresult *res)
{
	const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;

	return state ? state : "";
}

/*
 * cfeed_connection_lost
 *		Whether a failed query failed because the connection is gone (closed,
 *		terminated by the server, class 08 or an admin shutdown), as opposed
 *		to an error that reconnecting would not fix.
 */
bool
cfeed_connection_lost(PGconn *conn, const PGresult *res)
{
	const char *state = cfeed_sqlstate(res);

	if (conn == NULL || PQstatus(conn) != CONNECTION_OK)
		return true;
	if (strncmp(state, "08", 2) == 0 || strcmp(state, "57P01") == 0 ||
		strcmp(state, "57P02") == 0 || strcmp(state, "57P03") == 0)
		return true;
	return false;
}

/*
 * cfeed_error_text
 *		The message of a failed result, else of the connection; never NULL.
 *		Trailing newlines are the caller's to print as they are.
 */
const char *
cfeed_error_text(PGconn *conn, const PGresult *res)
{
	const char *msg = res ? PQresultErrorMessage(res) : NULL;

	if (msg == NULL || *msg == '\0')
		msg = conn ? PQerrorMessage(conn) : "no connection\n";
	if (msg == NULL || *msg == '\0')
		msg = "unknown error\n";
	return msg;
}
