/*
 * src/serve/serve.c
 *		`cfeed serve`'s entry: start-up, and the graceful shutdown on
 *		SIGTERM/SIGINT, the token file's reload on SIGHUP.  The options are
 *		serve_options.c's, logging serve_log.c's, memory serve_buf.c's.
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

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "serve.h"

/*
 * check_database
 *		Connect once before serving: the database must be reachable and have
 *		cfeed, and the --payload relations must resolve.  Notes whether it
 *		has feed epochs and shard layouts.  Exits 1 or 2.
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
	cfeed_serve_layouts = cfeed_layout_probe(conn);
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

	cfeed_serve_parse_options(argc, argv);
	cfeed_auth_load(cfeed_serve_opts.tokens_file);

	/* Every thread inherits the blocked mask; the main thread sigwaits. */
	sigemptyset(&signals);
	sigaddset(&signals, SIGINT);
	sigaddset(&signals, SIGTERM);
	sigaddset(&signals, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &signals, NULL);
	signal(SIGPIPE, SIG_IGN);

	check_database();
	cfeed_pool_start(cfeed_serve_opts.readers, cfeed_feedapi_run, cfeed_http_resume);
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
