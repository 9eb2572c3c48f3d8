/*
 * src/client/cfeed.c
 *		Entry point of the `cfeed` command: dispatches to the subcommands
 *		(tail, stat, sweep, serve) and prints the top-level help and version.  The
 *		helpers every subcommand uses are in args.c (usage errors, integer
 *		arguments) and clock.c (timeouts, sleeps).
 */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
			"  cfeed sweep [OPTION]...                 stamp changes in a loop (no background sweeper)\n"
			"  cfeed serve --tokens FILE [OPTION]...   serve feeds over HTTP (FeedAPI v2, SSE)\n"
			"  cfeed help [COMMAND]                    show help for a command\n"
			"\n"
			"Options:\n"
			"  -?, --help       show this help, then exit\n"
			"  -V, --version    output version information, then exit\n"
			"\n"
			"The database comes from --dbname (a connection string or URI) or from\n"
			"the usual PG* environment variables.\n"
			"\n"
			"Exit codes: 0 done or interrupted, 1 connection or server error,\n"
			"2 bad arguments or unknown feed, 3 gap in a shard's numbers,\n"
			"4 the role may not read the feed.\n");
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
		if (strcmp(argv[2], "sweep") == 0)
			return cfeed_sweep_main(2, help_argv);
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
	if (strcmp(command, "sweep") == 0)
		return cfeed_sweep_main(argc - 1, argv + 1);

	cfeed_usage_error(NULL, "unknown command \"%s\"", command);
}
