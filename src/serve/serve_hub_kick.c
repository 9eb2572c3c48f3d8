/*
 * src/serve/serve_hub_kick.c
 *		Waking the hub thread: a non-blocking pipe any thread writes a byte
 *		to (cfeed_hub_kick), which the hub thread polls along with its
 *		connection's socket (serve_hub.c) or alone while it naps.
 */
#define _POSIX_C_SOURCE 200809L

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include "serve_hub.h"

static int	kick_pipe[2] = {-1, -1};

/*
 * cfeed_hub_kick_open
 *		Make the kick pipe (before the hub thread starts).  False on failure.
 */
bool
cfeed_hub_kick_open(void)
{
	return pipe(kick_pipe) == 0 &&
		fcntl(kick_pipe[0], F_SETFL, O_NONBLOCK) == 0 &&
		fcntl(kick_pipe[1], F_SETFL, O_NONBLOCK) == 0;
}

/*
 * cfeed_hub_kick_fd
 *		The descriptor the hub thread polls for kicks.
 */
int
cfeed_hub_kick_fd(void)
{
	return kick_pipe[0];
}

/*
 * cfeed_hub_kick
 *		Wake the hub thread (any thread may call it).
 */
void
cfeed_hub_kick(void)
{
	char		c = 0;

	(void) !write(kick_pipe[1], &c, 1);
}

/*
 * cfeed_hub_drain_kicks
 *		Empty the kick pipe (the hub thread, after waking).
 */
void
cfeed_hub_drain_kicks(void)
{
	char		buf[64];

	(void) !read(kick_pipe[0], buf, sizeof(buf));
}

/*
 * cfeed_hub_nap
 *		Sleep until a kick or ms milliseconds (the hub thread).
 */
void
cfeed_hub_nap(int ms)
{
	struct pollfd pfd = {kick_pipe[0], POLLIN, 0};

	if (poll(&pfd, 1, ms) > 0)
		cfeed_hub_drain_kicks();
}
