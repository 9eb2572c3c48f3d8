/*
 * src/client/client.h
 *		Declarations shared by the files of the `cfeed` command: exit codes,
 *		connection helpers, option parsing helpers and the subcommands.
 *
 * The command is a plain libpq program; it does not include any server
 * header.  Every non-static symbol starts with cfeed_.
 */
#ifndef CFEED_CLIENT_H
#define CFEED_CLIENT_H

#include <signal.h>
#include <stdbool.h>

#include <libpq-fe.h>

/* CFEED_CLIENT_VERSION: the extension's version, from cfeed.control (Makefile). */

/* Exit codes (documented in docs/client.md). */
#define CFEED_EXIT_OK		0	/* done, or stopped by SIGINT/SIGTERM */
#define CFEED_EXIT_ERROR	1	/* connection or server error */
#define CFEED_EXIT_USAGE	2	/* bad arguments, unknown feed or shard */
#define CFEED_EXIT_GAP		3	/* a shard's numbers were not contiguous */
#define CFEED_EXIT_DENIED	4	/* the role may not read the feed */

/* Set by the SIGINT/SIGTERM handler; the loops poll it. */
extern volatile sig_atomic_t cfeed_interrupted;

/* args.c, clock.c */
extern void cfeed_usage_error(const char *command, const char *fmt,...)
			__attribute__((format(printf, 2, 3), noreturn));
extern void cfeed_bad_option(const char *command, int c, char **argv)
			__attribute__((noreturn));
extern void cfeed_no_more_arguments(const char *command, int argc, char **argv);
extern bool cfeed_parse_int64(const char *text, long long min, long long max,
							  long long *result);
extern long long cfeed_now_us(void);
extern long long cfeed_wall_us(void);
extern long long cfeed_now_ms(void);
extern void cfeed_sleep_ms(int ms);

/*
 * The options every subcommand but serve takes, as PostgreSQL's own clients
 * (psql, pg_dump, pgbench) spell them (conn.c): in getopt_long's optstring
 * and long options, and handled by cfeed_common_option.
 */
#define CFEED_COMMON_SHORTOPTS "d:h:p:U:V?"
#define CFEED_COMMON_LONGOPTS \
	{"dbname", required_argument, NULL, 'd'}, \
	{"host", required_argument, NULL, 'h'}, \
	{"port", required_argument, NULL, 'p'}, \
	{"username", required_argument, NULL, 'U'}, \
	{"version", no_argument, NULL, 'V'}, \
	{"help", no_argument, NULL, '?'}
#define CFEED_CONN_HELP \
	"Connection options (default: libpq's, the PG* environment variables):\n" \
	"  -d, --dbname=DBNAME      database name, or a connection string or URI\n" \
	"  -h, --host=HOSTNAME      database server host or socket directory\n" \
	"  -p, --port=PORT          database server port\n" \
	"  -U, --username=USERNAME  database user name\n" \
	"\n" \
	"  -V, --version            output version information, then exit\n" \
	"  -?, --help               show this help, then exit\n"

typedef enum CfeedOptionKind
{
	CFEED_OPTION_OTHER,			/* not a common option: the caller's */
	CFEED_OPTION_TAKEN,			/* a connection option, kept */
	CFEED_OPTION_HELP			/* -? or --help: the caller prints its help */
} CfeedOptionKind;

/* conn.c */
extern CfeedOptionKind cfeed_common_option(int c, char **argv, const char **dsn);
extern PGconn *cfeed_connect(const char *dsn, bool report);
extern PGconn *cfeed_connect_as(const char *dsn, const char *appname, bool report);
extern bool cfeed_args_to_utf8(const char *dsn, const char **args, int n);
extern void cfeed_set_cancel(PGconn *conn);
extern void cfeed_install_signal_handlers(void);
extern bool cfeed_behind_pooler(PGconn *conn, bool *pooled, PGresult **failed);
extern bool cfeed_result_ok(const PGresult *res, ExecStatusType expected);
extern bool cfeed_connection_lost(PGconn *conn, const PGresult *res);
extern const char *cfeed_sqlstate(const PGresult *res);
extern const char *cfeed_error_text(PGconn *conn, const PGresult *res);

/* epoch.c */
extern int	cfeed_epoch_probe(PGconn *conn, PGresult **failed);
extern bool cfeed_epoch_now(PGconn *conn, long long *epoch, PGresult **failed);
extern bool cfeed_epoch_resume(PGconn *conn, int feed_id, int shard, bool known,
							   long long *cursor, bool epoch_known, long long *epoch,
							   bool *rewound, PGresult **failed);

/* tail.c, stat.c, sweep.c, serve.c */
extern int	cfeed_tail_main(int argc, char **argv);
extern int	cfeed_stat_main(int argc, char **argv);
extern int	cfeed_sweep_main(int argc, char **argv);
extern int	cfeed_serve_main(int argc, char **argv);

#endif							/* CFEED_CLIENT_H */
