/*
 * src/serve/serve_position.c
 *		Positions as text, written and parsed: a shard's position
 *		("number[@epoch]", or "_first" before anything was read from the
 *		beginning; serve_stream.c's header: FeedAPI cursors and the
 *		SSE ids of partition=N) and the compact ids of all-shards SSE
 *		streams (their form and meaning: serve_sse.c's header).
 */
#define _POSIX_C_SOURCE 200809L

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve.h"

/*
 * cfeed_stream_append_position
 *		Append c's position (see the file header) to b: _first while
 *		nothing was read from the beginning.
 */
void
cfeed_stream_append_position(ServeBuf *b, const ServeCursor *c)
{
	if (!c->known)
		cfeed_buf_append(b, "_first", 6);
	else if (cfeed_serve_epochs)
		cfeed_buf_printf(b, "%lld@%lld", c->number, c->epoch);
	else
		cfeed_buf_printf(b, "%lld", c->number);
}

/*
 * cfeed_stream_parse_position
 *		Set c from a position "number[@epoch]" of req's feed (a number alone
 *		is of the epoch the feed was looked up in), or _first.  False when
 *		malformed.
 */
bool
cfeed_stream_parse_position(const ServeReq *req, const char *text, ServeCursor *c)
{
	char		number[24];
	const char *at = strchr(text, '@');
	size_t		len = at ? (size_t) (at - text) : strlen(text);

	c->epoch = req->feed.epoch;
	if (strcmp(text, "_first") == 0)
	{
		c->known = false;
		return true;
	}
	if (len >= sizeof(number))
		return false;
	memcpy(number, text, len);
	number[len] = '\0';
	if (!cfeed_parse_int64(number, 0, LLONG_MAX, &c->number) ||
		(at != NULL && !cfeed_parse_int64(at + 1, 0, LLONG_MAX, &c->epoch)))
		return false;
	c->known = true;
	return true;
}

/*
 * append_time
 *		Append a round's time to b: microseconds, or _first.
 */
static void
append_time(ServeBuf *b, long long t)
{
	if (t == SERVE_ROUND_FIRST)
		cfeed_buf_append(b, "_first", 6);
	else
		cfeed_buf_printf(b, "%lld", t);
}

/*
 * cfeed_sse_append_id
 *		Append req's current SSE id (see the file header) to b.
 */
void
cfeed_sse_append_id(ServeReq *req, ServeBuf *b)
{
	if (!req->all_shards)
	{
		cfeed_stream_append_position(b, &req->cursors[0]);
		return;
	}
	if (req->listed_ids)
	{
		bool		first = true;

		for (int i = 0; i < req->ncursors; i++)
		{
			ServeCursor *c = &req->cursors[i];

			if (!c->known)
				continue;
			cfeed_buf_printf(b, "%s%d:", first ? "" : ",", c->shard);
			cfeed_stream_append_position(b, c);
			first = false;
		}
		return;
	}
	append_time(b, req->round_lo);
	if (req->round_open && req->round_last >= 0)
	{
		const ServeCursor *c = &req->cursors[req->round_last];

		cfeed_buf_printf(b, ".%lld.%d:%lld", req->round_hi, c->shard, c->number);
	}
	if (cfeed_serve_epochs)
		cfeed_buf_printf(b, "@%lld", req->round_epoch);
}

/*
 * parse_time
 *		A round's time (microseconds or _first), of len bytes at text.
 */
static bool
parse_time(const char *text, size_t len, long long *t)
{
	char		copy[24];

	if (len == 6 && strncmp(text, "_first", 6) == 0)
	{
		*t = SERVE_ROUND_FIRST;
		return true;
	}
	if (len == 0 || len >= sizeof(copy))
		return false;
	memcpy(copy, text, len);
	copy[len] = '\0';
	return cfeed_parse_int64(copy, LLONG_MIN + 1, LLONG_MAX, t);
}

/*
 * parse_compact
 *		Parse a compact id (see the file header) into *id.
 */
static bool
parse_compact(const char *text, ServeSseId *id)
{
	const char *at = strchr(text, '@');
	size_t		len = at ? (size_t) (at - text) : strlen(text);
	const char *dot = memchr(text, '.', len);

	memset(id, 0, sizeof(*id));
	if (at != NULL && !cfeed_parse_int64(at + 1, 0, LLONG_MAX, &id->epoch))
		return false;
	id->has_epoch = at != NULL;
	if (dot == NULL)
		return id->set = parse_time(text, len, &id->lo);
	else
	{
		const char *dot2 = memchr(dot + 1, '.', len - (dot + 1 - text));
		const char *colon = dot2 ? memchr(dot2 + 1, ':', len - (dot2 + 1 - text)) : NULL;
		char		part[24];
		long long	shard;
		size_t		n;

		/* a round (lo, hi] is never empty */
		if (colon == NULL || !parse_time(text, dot - text, &id->lo) ||
			!parse_time(dot + 1, dot2 - dot - 1, &id->hi) || id->hi == SERVE_ROUND_FIRST ||
			id->lo >= id->hi)
			return false;
		n = colon - dot2 - 1;
		if (n == 0 || n >= sizeof(part))
			return false;
		memcpy(part, dot2 + 1, n);
		part[n] = '\0';
		if (!cfeed_parse_int64(part, 0, INT_MAX, &shard))
			return false;
		n = len - (colon + 1 - text);
		if (n == 0 || n >= sizeof(part))
			return false;
		memcpy(part, colon + 1, n);
		part[n] = '\0';
		if (!cfeed_parse_int64(part, LLONG_MIN, LLONG_MAX, &id->number))
			return false;
		id->shard = (int) shard;
		id->mid = true;
		return id->set = true;
	}
}

/*
 * parse_listed
 *		Resume req's cursors from an id that lists "shard:position" for each
 *		shard (as earlier gateways sent); the shards it does not list start
 *		from the beginning.
 */
static bool
parse_listed(ServeReq *req, const char *id)
{
	char	   *copy;
	char	   *save = NULL;
	bool		ok = true;

	for (int i = 0; i < req->ncursors; i++)
		req->cursors[i].known = false;
	copy = cfeed_serve_strdup(id);
	for (char *part = strtok_r(copy, ",", &save); part && ok; part = strtok_r(NULL, ",", &save))
	{
		char	   *colon = strchr(part, ':');
		long long	shard;
		int			i;

		ok = false;
		if (colon == NULL)
			break;
		*colon = '\0';
		if (!cfeed_parse_int64(part, 0, INT_MAX, &shard))
			break;
		for (i = 0; i < req->ncursors; i++)
			if (req->cursors[i].shard == shard)
				break;
		if (i == req->ncursors)
			break;
		ok = cfeed_stream_parse_position(req, colon + 1, &req->cursors[i]);
	}
	free(copy);
	req->listed_ids = ok;
	return ok;
}

/*
 * cfeed_sse_parse_id
 *		Take a Last-Event-ID: the position of a single-shard stream; for an
 *		all-shards stream a compact id (kept in req->resume for
 *		cfeed_sse_start) or a listed one (the cursors are set).  False when
 *		it is malformed or names a shard the request does not read.
 */
bool
cfeed_sse_parse_id(ServeReq *req, const char *id)
{
	if (*id == '\0')
		return true;
	if (!req->all_shards)
		return cfeed_stream_parse_position(req, id, &req->cursors[0]);
	if (strchr(id, ',') != NULL || (strchr(id, ':') != NULL && strchr(id, '.') == NULL))
		return parse_listed(req, id);
	if (!parse_compact(id, &req->resume))
		return false;
	if (req->resume.mid)
	{
		for (int i = 0; i < req->ncursors; i++)
			if (req->cursors[i].shard == req->resume.shard)
				return true;
		return false;
	}
	return true;
}
