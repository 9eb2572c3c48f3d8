/*
 * src/client/cfeed.c
 *		Entry point of the `cfeed` command: dispatches to the subcommands
 *		(tail, stat, serve), prints the top-level help and version, and holds the
 *		small helpers every subcommand uses (usage errors, integer parsing,
 *		clocks).
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client.h"

/*
 * print_help
 *		The top-level usage text.
 */
static void
print_help(FILE *out)
{
	fprintf(out,
			"cfeed - read cfeed change feeds from the command line\n"
			"\n"
			"Usage:\n"
			"  cfeed tail --feed NAME|ID [OPTION]...   print a feed as JSON lines, long-polling\n"
			"  cfeed stat [OPTION]...                  print the cfeed.stats view\n"
			"  cfeed serve --tokens FILE [OPTION]...   serve feeds over HTTP (FeedAPI v2, SSE)\n"
			"  cfeed help [COMMAND]                    show help for a command\n"
			"\n"
			"Options:\n"
			"  -h, --help       show this help, then exit\n"
			"  -V, --version    output version information, then exit\n"
			"\n"
			"The database comes from --dbname (a connection string or URI) or from\n"
			"the usual PG* environment variables.\n"
			"\n"
			"Exit codes: 0 done or interrupted, 1 connection or server error,\n"
			"2 bad arguments or unknown feed, 3 gap in a shard's numbers.\n");
}

/*
 * cfeed_usage_error
 *		Print "cfeed COMMAND: message" and a hint to stderr and exit with
 *		CFEED_EXIT_USAGE.  command may be NULL for top-level errors.
 */
void
cfeed_usage_error(const char *command, const char *fmt,...)
{
	va_list		ap;

	fprintf(stderr, "cfeed%s%s: ", command ? " " : "", command ? command : "");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nTry \"cfeed%s%s --help\" for more information.\n",
			command ? " " : "", command ? command : "");
	exit(CFEED_EXIT_USAGE);
}

/*
 * cfeed_bad_option
 *		Exit 2 for what getopt_long returned that is no option of command
 *		(it is called with opterr = 0 and an optstring starting with ':'):
 *		':' for an option without its value, anything else for an unknown
 *		option.
 */
void
cfeed_bad_option(const char *command, int c, char **argv)
{
	if (c == ':')
		cfeed_usage_error(command, "option \"%s\" needs a value", argv[optind - 1]);
	cfeed_usage_error(command, "unknown option \"%s\"", argv[optind - 1]);
}

/*
 * cfeed_no_more_arguments
 *		Exit 2 when argv has arguments after its options (getopt_long done).
 */
void
cfeed_no_more_arguments(const char *command, int argc, char **argv)
{
	if (optind < argc)
		cfeed_usage_error(command, "unexpected argument \"%s\"", argv[optind]);
}

/*
 * cfeed_parse_int64
 *		Parse a whole decimal integer in [min, max]; false when text is not
 *		one (empty, trailing garbage, out of range).
 */
bool
cfeed_parse_int64(const char *text, long long min, long long max,
				  long long *result)
{
	char	   *end;
	long long	value;

	if (text == NULL || *text == '\0')
		return false;
	errno = 0;
	value = strtoll(text, &end, 10);
	if (errno != 0 || *end != '\0' || value < min || value > max)
		return false;
	*result = value;
	return true;
}

/*
 * cfeed_now_ms
 *		Monotonic clock in milliseconds, for timeouts.
 */
long long
cfeed_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/*
 * cfeed_sleep_ms
 *		Sleep up to ms milliseconds; returns early when a signal arrives.
 */
void
cfeed_sleep_ms(int ms)
{
	if (ms > 0 && !cfeed_interrupted)
		(void) poll(NULL, 0, ms);
}

/*
 * main
 *		Dispatch on the first argument.  Exit codes: see client.h.
 */
int
main(int argc, char **argv)
{
	const char *command;

	if (argc < 2)
		cfeed_usage_error(NULL, "no command given");
	command = argv[1];

	if (strcmp(command, "--help") == 0 || strcmp(command, "-h") == 0 ||
		strcmp(command, "-?") == 0)
	{
		print_help(stdout);
		return CFEED_EXIT_OK;
	}
	if (strcmp(command, "--version") == 0 || strcmp(command, "-V") == 0)
	{
		printf("cfeed (cfeed client) %s\n", CFEED_CLIENT_VERSION);
		return CFEED_EXIT_OK;
	}
	if (strcmp(command, "help") == 0)
	{
		char	   *help_argv[3];

		if (argc < 3)
		{
			print_help(stdout);
			return CFEED_EXIT_OK;
		}
		help_argv[0] = argv[2];
		help_argv[1] = "--help";
		help_argv[2] = NULL;
		if (strcmp(argv[2], "tail") == 0)
			return cfeed_tail_main(2, help_argv);
		if (strcmp(argv[2], "stat") == 0)
			return cfeed_stat_main(2, help_argv);
		if (strcmp(argv[2], "serve") == 0)
			return cfeed_serve_main(2, help_argv);
		cfeed_usage_error(NULL, "unknown command \"%s\"", argv[2]);
	}

	if (strcmp(command, "serve") == 0)
		return cfeed_serve_main(argc - 1, argv + 1);	/* its own signals */
	cfeed_install_signal_handlers();
	if (strcmp(command, "tail") == 0)
		return cfeed_tail_main(argc - 1, argv + 1);
	if (strcmp(command, "stat") == 0)
		return cfeed_stat_main(argc - 1, argv + 1);

	cfeed_usage_error(NULL, "unknown command \"%s\"", command);
}
