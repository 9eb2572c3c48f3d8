/*
 * src/client/args.c
 *		The command line's helpers, shared by every subcommand: usage errors
 *		(exit CFEED_EXIT_USAGE with a hint) and whole integer arguments.
 */
#define _POSIX_C_SOURCE 200809L

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "client.h"

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
 *		Parse a whole decimal integer in [min, max]: digits only, with a
 *		leading '-' only when min is negative.  False when text is not one
 *		(empty, a sign or space that strtoll would skip, trailing garbage,
 *		out of range): "+5", " 5" and "-0" are no partition or cursor, as
 *		"5 " is not.
 */
bool
cfeed_parse_int64(const char *text, long long min, long long max,
				  long long *result)
{
	const char *digits = text;
	char	   *end;
	long long	value;

	if (text == NULL)
		return false;
	if (*digits == '-' && min < 0)
		digits++;
	if (!isdigit((unsigned char) *digits))
		return false;
	errno = 0;
	value = strtoll(text, &end, 10);
	if (errno != 0 || *end != '\0' || value < min || value > max)
		return false;
	*result = value;
	return true;
}
