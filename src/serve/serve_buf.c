/*
 * src/serve/serve_buf.c
 *		The gateway's memory: allocation that exits on failure, and ServeBuf,
 *		the growable byte buffer every answer is built in.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve.h"

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
