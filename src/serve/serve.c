/*
 * src/serve/serve.c
 *		`cfeed serve`: options, start-up, logging, small buffers, and the
 *		graceful shutdown on SIGTERM/SIGINT, the token file's reload on SIGHUP.
 *
 * Start-up: parse the options, load the token file, connect once to check
 * the database, whether it has feed epochs (cursors then carry one), and
 * resolve the --payload relations, start the reading pool
 * and the hub, then the HTTP daemon.  The main thread then only waits for a
 * signal (sigwait: the signals are blocked in every thread, so no handler
 * runs and no query is cancelled behind a thread's back): SIGHUP reloads
 * the token file, SIGTERM and SIGINT shut down.
 *
 * Shutdown: stop accepting connections, wake every streaming request (each
 * ends its response with a final cursor), wait up to --shutdown-ms for the
 * requests to finish, then stop the daemon, the hub and the pool.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "serve.h"

ServeOptions cfeed_serve_opts;
atomic_bool cfeed_serve_stopping;
bool		cfeed_serve_epochs;

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;

static const char *const level_names[] = {"error", "warning", "info", "debug"};

/*
 * print_serve_help
 *		Usage text of `cfeed serve`.
 */
static void
print_serve_help(void)
{
	printf("cfeed serve serves feeds over HTTP: FeedAPI v2 and Server-Sent Events.\n"
		   "\n"
		   "Usage:\n"
		   "  cfeed serve [OPTION]...\n"
		   "\n"
		   "Options:\n"
		   "  -d, --dbname=DSN         connection string or URI (default: PG* environment)\n"
		   "      --listen=ADDR        address to bind (default: 127.0.0.1)\n"
		   "  -p, --port=N             TCP port (default: %d)\n"
		   "      --tokens=FILE        bearer tokens and the feeds each may read (required)\n"
		   "      --tls-cert=FILE      serve HTTPS with this PEM certificate ...\n"
		   "      --tls-key=FILE       ... and this PEM private key\n"
		   "      --payload=FEED=REL   attach the row of relation REL with the event's\n"
		   "                           change_id to every event of FEED (repeatable)\n"
		   "      --allow-origin=ORIG  CORS: let pages of this origin read (or *)\n"
		   "      --readers=N          reading connections (default: 2)\n"
		   "      --heartbeat-ms=N     keep-alive interval of streams (default: 15000)\n"
		   "      --refresh-ms=N       how often shard lists are checked (default: 2000)\n"
		   "      --max-age=SECONDS    Cache-Control max-age of full pages (default: 31536000)\n"
		   "      --max-clients=N      concurrent connections (default: 10000)\n"
		   "      --shutdown-ms=N      how long SIGTERM waits for streams (default: 5000)\n"
		   "      --log-level=LEVEL    error, warning, info or debug (default: info)\n"
		   "  -h, --help               show this help, then exit\n"
		   "\n"
		   "URLs: /feeds/NAME (FeedAPI v2 discovery and fetch; SSE with\n"
		   "Accept: text/event-stream), /healthz, /metrics.  See docs/serve.md.\n",
		   SERVE_DEFAULT_PORT);
}

/*
 * parse_int_option
 *		An integer option in [min, max], or a usage error naming it.
 */
static long long
parse_int_option(const char *name, const char *text, long long min, long long max)
{
	long long	value;

	if (!cfeed_parse_int64(text, min, max, &value))
		cfeed_usage_error("serve", "invalid --%s \"%s\": expected an integer from %lld to %lld",
						  name, text, min, max);
	return value;
}

/*
 * add_payload
 *		Record one --payload FEED=RELATION.
 */
static void
add_payload(ServeOptions *o, const char *arg)
{
	const char *eq = strchr(arg, '=');
	ServePayload *p;

	if (eq == NULL || eq == arg || eq[1] == '\0' || eq - arg >= SERVE_NAME_MAX)
		cfeed_usage_error("serve", "invalid --payload \"%s\": expected FEED=RELATION", arg);
	o->payloads = realloc(o->payloads, sizeof(ServePayload) * (o->npayloads + 1));
	if (o->payloads == NULL)
		cfeed_serve_oom();
	p = &o->payloads[o->npayloads++];
	memset(p, 0, sizeof(*p));
	memcpy(p->feed, arg, eq - arg);
	p->relation = eq + 1;
}

/*
 * set_defaults
 *		The options' defaults.
 */
static void
set_defaults(ServeOptions *o)
{
	memset(o, 0, sizeof(*o));
	o->listen_addr = "127.0.0.1";
	o->port = SERVE_DEFAULT_PORT;
	o->readers = 2;
	o->heartbeat_ms = 15000;
	o->refresh_ms = 2000;
	o->max_age_s = 31536000;
	o->max_clients = 10000;
	o->shutdown_ms = 5000;
	o->log_level = LOG_INFO;
}

/*
 * parse_log_level
 *		The --log-level named text, or a usage error.
 */
static ServeLogLevel
parse_log_level(const char *text)
{
	for (int i = 0; i <= LOG_DEBUG; i++)
		if (strcmp(text, level_names[i]) == 0)
			return (ServeLogLevel) i;
	cfeed_usage_error("serve", "invalid --log-level \"%s\": expected error, warning, info or debug", text);
}

/*
 * set_option
 *		Apply one option c (getopt_long's value) with argument arg to o;
 *		--help prints the help and exits.  False when c is no option.
 */
static bool
set_option(ServeOptions *o, int c, char *arg)
{
	switch (c)
	{
		case 'd':
			o->dsn = arg;
			break;
		case 'l':
			o->listen_addr = arg;
			break;
		case 'p':
			o->port = (int) parse_int_option("port", arg, 0, 65535);
			break;
		case 't':
			o->tokens_file = arg;
			break;
		case 'C':
			o->tls_cert = arg;
			break;
		case 'K':
			o->tls_key = arg;
			break;
		case 'P':
			add_payload(o, arg);
			break;
		case 'O':
			o->allow_origin = arg;
			break;
		case 'r':
			o->readers = (int) parse_int_option("readers", arg, 1, 64);
			break;
		case 'b':
			o->heartbeat_ms = (int) parse_int_option("heartbeat-ms", arg, 100, INT_MAX);
			break;
		case 'R':
			o->refresh_ms = (int) parse_int_option("refresh-ms", arg, 10, INT_MAX);
			break;
		case 'a':
			o->max_age_s = (int) parse_int_option("max-age", arg, 0, INT_MAX);
			break;
		case 'm':
			o->max_clients = (unsigned int) parse_int_option("max-clients", arg, 1, 1000000);
			break;
		case 's':
			o->shutdown_ms = (int) parse_int_option("shutdown-ms", arg, 0, INT_MAX);
			break;
		case 'L':
			o->log_level = parse_log_level(arg);
			break;
		case 'h':
			print_serve_help();
			exit(CFEED_EXIT_OK);
		default:
			return false;
	}
	return true;
}

/*
 * parse_options
 *		Fill cfeed_serve_opts from argv; exits 2 on bad arguments.
 */
static void
parse_options(int argc, char **argv)
{
	static const struct option long_options[] = {
		{"dbname", required_argument, NULL, 'd'},
		{"listen", required_argument, NULL, 'l'},
		{"port", required_argument, NULL, 'p'},
		{"tokens", required_argument, NULL, 't'},
		{"tls-cert", required_argument, NULL, 'C'},
		{"tls-key", required_argument, NULL, 'K'},
		{"payload", required_argument, NULL, 'P'},
		{"allow-origin", required_argument, NULL, 'O'},
		{"readers", required_argument, NULL, 'r'},
		{"heartbeat-ms", required_argument, NULL, 'b'},
		{"refresh-ms", required_argument, NULL, 'R'},
		{"max-age", required_argument, NULL, 'a'},
		{"max-clients", required_argument, NULL, 'm'},
		{"shutdown-ms", required_argument, NULL, 's'},
		{"log-level", required_argument, NULL, 'L'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0}
	};
	ServeOptions *o = &cfeed_serve_opts;
	int			c;

	set_defaults(o);
	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, ":d:p:h", long_options, NULL)) != -1)
		if (!set_option(o, c, optarg))
			cfeed_bad_option("serve", c, argv);
	cfeed_no_more_arguments("serve", argc, argv);
	if (o->tokens_file == NULL)
		cfeed_usage_error("serve", "--tokens is required (see docs/serve.md for the file format)");
	if ((o->tls_cert == NULL) != (o->tls_key == NULL))
		cfeed_usage_error("serve", "--tls-cert and --tls-key go together");
}

/*
 * cfeed_serve_log
 *		One line on stderr, "<UTC time> cfeed serve <level>: message", when
 *		level is at or above --log-level.  Callers never pass a token.
 */
void
cfeed_serve_log(ServeLogLevel level, const char *fmt,...)
{
	char		stamp[32];
	struct timespec ts;
	struct tm	tm;
	va_list		ap;

	if (level > cfeed_serve_opts.log_level)
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%S", &tm);
	pthread_mutex_lock(&log_lock);
	fprintf(stderr, "%s.%03ldZ cfeed serve %s: ", stamp, ts.tv_nsec / 1000000,
			level_names[level]);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	fflush(stderr);
	pthread_mutex_unlock(&log_lock);
}

/*
 * cfeed_serve_oom
 *		Out of memory: there is no sensible way on; exit 1.
 */
void
cfeed_serve_oom(void)
{
	fprintf(stderr, "cfeed serve: out of memory\n");
	exit(CFEED_EXIT_ERROR);
}

/*
 * cfeed_serve_alloc
 *		Zeroed memory, or exit on failure.
 */
void *
cfeed_serve_alloc(size_t size)
{
	void	   *p = calloc(1, size ? size : 1);

	if (p == NULL)
		cfeed_serve_oom();
	return p;
}

/*
 * cfeed_serve_strdup
 *		strdup, or exit on failure.
 */
char *
cfeed_serve_strdup(const char *s)
{
	char	   *p = strdup(s);

	if (p == NULL)
		cfeed_serve_oom();
	return p;
}

/*
 * cfeed_buf_reserve
 *		Make room in b for len more bytes and a NUL.
 */
void
cfeed_buf_reserve(ServeBuf *b, size_t len)
{
	if (b->len + len + 1 > b->cap)
	{
		size_t		cap = b->cap ? b->cap : 256;

		while (cap < b->len + len + 1)
			cap *= 2;
		b->data = realloc(b->data, cap);
		if (b->data == NULL)
			cfeed_serve_oom();
		b->cap = cap;
	}
}

/*
 * cfeed_buf_append
 *		Append len bytes to b (kept NUL-terminated).
 */
void
cfeed_buf_append(ServeBuf *b, const char *data, size_t len)
{
	cfeed_buf_reserve(b, len);
	memcpy(b->data + b->len, data, len);
	b->len += len;
	b->data[b->len] = '\0';
}

/*
 * cfeed_buf_printf
 *		Append formatted text to b.
 */
void
cfeed_buf_printf(ServeBuf *b, const char *fmt,...)
{
	char		small[256];
	va_list		ap;
	int			n;

	va_start(ap, fmt);
	n = vsnprintf(small, sizeof(small), fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t) n < sizeof(small))
	{
		cfeed_buf_append(b, small, n);
		return;
	}
	{
		char	   *big = cfeed_serve_alloc(n + 1);

		va_start(ap, fmt);
		vsnprintf(big, n + 1, fmt, ap);
		va_end(ap);
		cfeed_buf_append(b, big, n);
		free(big);
	}
}

/*
 * cfeed_buf_reset
 *		Empty b, keeping its memory.
 */
void
cfeed_buf_reset(ServeBuf *b)
{
	b->len = 0;
	if (b->data)
		b->data[0] = '\0';
}

/*
 * cfeed_serve_payload
 *		The --payload of a feed, or NULL.
 */
const ServePayload *
cfeed_serve_payload(const char *feed)
{
	for (int i = 0; i < cfeed_serve_opts.npayloads; i++)
		if (strcmp(cfeed_serve_opts.payloads[i].feed, feed) == 0)
			return &cfeed_serve_opts.payloads[i];
	return NULL;
}

/*
 * check_database
 *		Connect once before serving: the database must be reachable and have
 *		cfeed, and the --payload relations must resolve.  Notes whether it
 *		has feed epochs.  Exits 1 or 2.
 */
static void
check_database(void)
{
	PGconn	   *conn = cfeed_serve_connect("start-up check");
	PGresult   *res;
	int			epochs;

	if (conn == NULL)
		exit(CFEED_EXIT_ERROR);
	res = PQexec(conn, "select 1 from cfeed.feed limit 1");
	if (!cfeed_result_ok(res, PGRES_TUPLES_OK))
	{
		fprintf(stderr, "cfeed serve: cannot read cfeed.feed: %s",
				cfeed_error_text(conn, res));
		exit(CFEED_EXIT_USAGE);
	}
	PQclear(res);
	epochs = cfeed_epoch_probe(conn, &res);
	if (epochs < 0)
	{
		fprintf(stderr, "cfeed serve: %s", cfeed_error_text(conn, res));
		exit(CFEED_EXIT_ERROR);
	}
	cfeed_serve_epochs = epochs > 0;
	cfeed_feedapi_resolve_payloads(conn);
	PQfinish(conn);
}

/*
 * shut_down
 *		Stop accepting, end every stream with a final cursor, wait for the
 *		requests (at most --shutdown-ms), stop the daemon.
 */
static void
shut_down(struct MHD_Daemon *daemon)
{
	long long	deadline = cfeed_now_ms() + cfeed_serve_opts.shutdown_ms;
	MHD_socket	listen_fd;

	cfeed_serve_log(LOG_INFO, "shutting down: closing %d request(s)", cfeed_http_active());
	atomic_store(&cfeed_serve_stopping, true);
	listen_fd = MHD_quiesce_daemon(daemon);
	if (listen_fd != MHD_INVALID_SOCKET)
		close(listen_fd);
	cfeed_hub_wake_all();
	while (cfeed_http_active() > 0 && cfeed_now_ms() < deadline)
	{
		struct timespec ts = {0, 10 * 1000 * 1000};

		nanosleep(&ts, NULL);
		cfeed_hub_wake_all();
	}
	if (cfeed_http_active() > 0)
		cfeed_serve_log(LOG_WARNING, "%d request(s) still open after %d ms; closing them",
						cfeed_http_active(), cfeed_serve_opts.shutdown_ms);
	cfeed_pool_stop();
	MHD_stop_daemon(daemon);
	cfeed_hub_stop();
	cfeed_serve_log(LOG_INFO, "stopped");
}

/*
 * cfeed_serve_main
 *		`cfeed serve`: argv[0] is "serve".  Returns the exit code.
 */
int
cfeed_serve_main(int argc, char **argv)
{
	struct MHD_Daemon *daemon;
	sigset_t	signals;
	int			signo = 0;

	parse_options(argc, argv);
	cfeed_auth_load(cfeed_serve_opts.tokens_file);

	/* Every thread inherits the blocked mask; the main thread sigwaits. */
	sigemptyset(&signals);
	sigaddset(&signals, SIGINT);
	sigaddset(&signals, SIGTERM);
	sigaddset(&signals, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &signals, NULL);
	signal(SIGPIPE, SIG_IGN);

	check_database();
	cfeed_pool_start(cfeed_serve_opts.readers);
	cfeed_hub_start();
	daemon = cfeed_http_start();
	if (daemon == NULL)
	{
		fprintf(stderr, "cfeed serve: could not listen on %s port %d\n",
				cfeed_serve_opts.listen_addr, cfeed_serve_opts.port);
		return CFEED_EXIT_ERROR;
	}
	cfeed_serve_log(LOG_INFO, "listening on %s://%s:%d",
					cfeed_serve_opts.tls_cert ? "https" : "http",
					cfeed_serve_opts.listen_addr, cfeed_serve_opts.port);

	for (;;)
	{
		if (sigwait(&signals, &signo) != 0)
			continue;
		if (signo == SIGINT || signo == SIGTERM)
			break;
		if (signo == SIGHUP)
			cfeed_auth_reload(cfeed_serve_opts.tokens_file);
	}
	shut_down(daemon);
	return CFEED_EXIT_OK;
}
