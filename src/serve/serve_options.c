/*
 * src/serve/serve_options.c
 *		`cfeed serve`'s options (--help, parsing, defaults, --payload) and the
 *		run-wide state every thread reads.
 */
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve.h"

ServeOptions cfeed_serve_opts;
atomic_bool cfeed_serve_stopping;
bool		cfeed_serve_epochs;
bool		cfeed_serve_layouts;

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
		   "      --idle-timeout-s=N   close a connection idle or stalled this long (default: 30)\n"
		   "      --shutdown-ms=N      how long SIGTERM waits for streams (default: 5000)\n"
		   "      --metrics=WHO        who may GET /metrics: open (anyone, the default),\n"
		   "                           token (a token of every feed, *) or off\n"
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
	o->idle_timeout_s = 30;
	o->shutdown_ms = 5000;
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
		case 'i':
			o->idle_timeout_s = (unsigned int) parse_int_option("idle-timeout-s", arg, 1, 86400);
			break;
		case 'L':
			cfeed_serve_set_log_level(arg);
			break;
		case 'M':
			if (strcmp(arg, "open") == 0)
				o->metrics = METRICS_OPEN;
			else if (strcmp(arg, "token") == 0)
				o->metrics = METRICS_TOKEN;
			else if (strcmp(arg, "off") == 0)
				o->metrics = METRICS_OFF;
			else
				cfeed_usage_error("serve", "--metrics must be open, token or off");
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
 * cfeed_serve_parse_options
 *		Fill cfeed_serve_opts from argv; exits 2 on bad arguments.
 */
void
cfeed_serve_parse_options(int argc, char **argv)
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
		{"idle-timeout-s", required_argument, NULL, 'i'},
		{"log-level", required_argument, NULL, 'L'},
		{"metrics", required_argument, NULL, 'M'},
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
