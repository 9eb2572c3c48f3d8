/*
 * src/serve/serve_gzip.c
 *		gzip for the gateway's complete answers (pages, discovery, errors,
 *		/metrics) when the client's Accept-Encoding allows it (zlib).
 *
 * Streams are not compressed: a compressor per stream would hold ~256 KB
 * of zlib state for as long as it is open, which the gateway's bound on
 * the memory per client (serve_stream.c) does not allow.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <zlib.h>

#include "serve.h"

/*
 * coding_q
 *		The q-value of one Accept-Encoding element (text of length len, e.g.
 *		"gzip;q=0.5"): 1 without a q parameter, 0 for a malformed one.
 */
static double
coding_q(const char *text, size_t len)
{
	const char *semi = memchr(text, ';', len);
	char		value[16];
	char	   *end;
	double		q;

	if (semi == NULL)
		return 1;
	for (semi++; semi < text + len && (*semi == ' ' || *semi == '\t'); semi++)
		;
	if (text + len - semi < 3 || strncasecmp(semi, "q=", 2) != 0 ||
		(size_t) (text + len - semi - 2) >= sizeof(value))
		return 0;
	memcpy(value, semi + 2, text + len - semi - 2);
	value[text + len - semi - 2] = '\0';
	q = strtod(value, &end);
	return end != value ? q : 0;
}

/*
 * cfeed_gzip_accepted
 *		Whether an Accept-Encoding header (NULL: none) accepts gzip: gzip
 *		or x-gzip with a q-value above 0, or * when gzip is not named.
 */
bool
cfeed_gzip_accepted(const char *header)
{
	int			gzip = -1;		/* -1: not named, 0: refused, 1: accepted */
	int			star = -1;

	if (header == NULL)
		return false;
	while (*header != '\0')
	{
		size_t		len = strcspn(header, ",");
		size_t		name;

		while (len > 0 && (*header == ' ' || *header == '\t'))
			header++, len--;
		name = strcspn(header, ";, \t");
		if (name > len)
			name = len;
		if ((name == 4 && strncasecmp(header, "gzip", 4) == 0) ||
			(name == 6 && strncasecmp(header, "x-gzip", 6) == 0))
			gzip = coding_q(header, len) > 0;
		else if (name == 1 && header[0] == '*')
			star = coding_q(header, len) > 0;
		header += len;
		if (*header == ',')
			header++;
	}
	return gzip == 1 || (gzip == -1 && star == 1);
}

/*
 * cfeed_gzip
 *		Compress len bytes of data into out (emptied first) as a gzip
 *		member.  False when zlib fails (the caller sends data as it is).
 */
bool
cfeed_gzip(const char *data, size_t len, ServeBuf *out)
{
	z_stream	z;
	uLong		bound;
	int			rc;

	memset(&z, 0, sizeof(z));
	if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
		return false;
	bound = deflateBound(&z, (uLong) len);
	cfeed_buf_reset(out);
	cfeed_buf_reserve(out, bound);
	z.next_in = (Bytef *) data;
	z.avail_in = (uInt) len;
	z.next_out = (Bytef *) out->data;
	z.avail_out = (uInt) bound;
	rc = deflate(&z, Z_FINISH);
	out->len = z.total_out;
	deflateEnd(&z);
	return rc == Z_STREAM_END;
}
