/*
 * src/client/serve_none.c
 *		`cfeed serve` in a cfeed command built without the HTTP gateway
 *		(SERVE=no, or libmicrohttpd and jansson absent: src/client/Makefile):
 *		it says so and how to get it.
 */
#include <stdio.h>

#include "client.h"

/*
 * cfeed_serve_main
 *		Exit 2 with a message: this build has no gateway.
 */
int
cfeed_serve_main(int argc, char **argv)
{
	(void) argc;
	(void) argv;
	fprintf(stderr,
			"cfeed serve: this cfeed command was built without the HTTP gateway\n"
			"Install libmicrohttpd-dev, libjansson-dev and zlib1g-dev and rebuild (make SERVE=yes).\n");
	return CFEED_EXIT_USAGE;
}
