/*
 * src/client/serve_feedapi.c
 *		The database side of a request to /feeds/<name>, run by a pool
 *		thread: look the feed up, answer the FeedAPI v2 discovery call, check
 *		a fetch (token, partition, cursor) and read its first page, or read
 *		a streaming request's next page below the hub's tail.
 *
 * FeedAPI v2 (vippsas/feedapi-spec) as cfeed maps it: partitions are the
 * feed's shards; a cursor is the last change_sequence_number delivered and
 * the feed epoch it belongs to, "number@epoch" (serve_stream.c; "_first":
 * from the beginning, backfilled history included; "_last": the shard's
 * head).  Every read first brings the cursor into the current epoch
 * (cfeed.resume_cursor) and checks the epoch again after reading (client
 * epoch.c): after a failover that lost stamps, the changes now
 * carrying them are sent again, not skipped.  The token is a hash of the feed's id and shard list, so it
 * changes when shards are added or removed, and a fetch with another token
 * gets 409.  Every SQL statement is fixed text with parameters; the only
 * identifiers spliced in are the --payload relations, quoted by the server
 * at start-up (cfeed_feedapi_resolve_payloads).
 */
#define _POSIX_C_SOURCE 200809L

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "serve.h"

#define READ_SQL \
	"select r.change_sequence_number," \
	" (extract(epoch from r.stamped_at) * 1000)::bigint," \
	" pg_catalog.json_build_object('feed', $5::text, 'shard', $2::int," \
	" 'number', r.change_sequence_number, 'change_id', r.change_id," \
	" 'stamped_at', r.stamped_at, 'op', r.op, 'table', r.tbl::text," \
	" 'row', r.row%s)::text" \
	" from cfeed.read_rows($1::int, $2::int, $3::bigint, $4::int) r"

#define PAYLOAD_SQL \
	", 'payload', (select pg_catalog.to_jsonb(p) from %s p" \
	" where p.change_id operator(pg_catalog.=) r.change_id limit 1)"

/*
 * cfeed_feedapi_error
 *		Make req's answer an error: status and a JSON body
 *		{"error": ..., "detail": ...}.
 */
void
cfeed_feedapi_error(ServeReq *req, int status, const char *error, const char *detail)
{
	json_t	   *obj = json_pack("{s:s, s:s}", "error", error, "detail", detail);
	char	   *text = obj ? json_dumps(obj, JSON_COMPACT) : NULL;

	if (text == NULL)
		cfeed_serve_oom();
	req->status = status;
	req->stream = false;
	req->cacheable = false;
	cfeed_buf_reset(&req->out);
	cfeed_buf_printf(&req->out, "%s\n", text);
	free(text);
	json_decref(obj);
}

/*
 * cfeed_feedapi_token
 *		The FeedAPI token of a feed with these shards (a comma-separated
 *		list in ascending order): "v1-<feed_id>-<FNV-1a of the list>".
 */
void
cfeed_feedapi_token(int feed_id, const char *shard_list, char *token, size_t size)
{
	unsigned long long h = 14695981039346656037ULL;

	for (const char *p = shard_list; *p; p++)
	{
		h ^= (unsigned char) *p;
		h *= 1099511628211ULL;
	}
	snprintf(token, size, "v1-%d-%016llx", feed_id, h);
}

/*
 * cfeed_feedapi_read_sql
 *		The statement that reads a page of feed (with its --payload, if
 *		any), malloc'd.  Parameters: $1 feed_id, $2 shard, $3 cursor, $4
 *		max_count, $5 the feed's name.
 */
char *
cfeed_feedapi_read_sql(const char *feed)
{
	const ServePayload *p = cfeed_serve_payload(feed);
	ServeBuf	payload = {0};
	ServeBuf	sql = {0};

	cfeed_buf_append(&payload, "", 0);
	if (p != NULL && p->quoted != NULL)
		cfeed_buf_printf(&payload, PAYLOAD_SQL, p->quoted);
	cfeed_buf_printf(&sql, READ_SQL, payload.data);
	free(payload.data);
	return sql.data;
}

/*
 * cfeed_feedapi_resolve_payloads
 *		Resolve every --payload relation with the server (it must exist and
 *		have a change_id column) into a quoted schema.relation.  Exits 2 on
 *		a bad one.
 */
void
cfeed_feedapi_resolve_payloads(PGconn *conn)
{
	for (int i = 0; i < cfeed_serve_opts.npayloads; i++)
	{
		ServePayload *p = &cfeed_serve_opts.payloads[i];
		const char *params[1] = {p->relation};
		PGresult   *res;

		res = PQexecParams(conn,
						   "select pg_catalog.format('%I.%I', n.nspname, c.relname),"
						   " exists (select from pg_catalog.pg_attribute a where a.attrelid = c.oid"
						   "  and a.attname = 'change_id' and a.attnum > 0 and not a.attisdropped)"
						   " from pg_catalog.pg_class c join pg_catalog.pg_namespace n on n.oid = c.relnamespace"
						   " where c.oid = pg_catalog.to_regclass($1)",
						   1, NULL, params, NULL, NULL, 0);
		if (!cfeed_result_ok(res, PGRES_TUPLES_OK))
		{
			fprintf(stderr, "cfeed serve: could not look up --payload relation \"%s\": %s",
					p->relation, cfeed_error_text(conn, res));
			exit(CFEED_EXIT_ERROR);
		}
		if (PQntuples(res) != 1 || strcmp(PQgetvalue(res, 0, 1), "t") != 0)
		{
			fprintf(stderr, "cfeed serve: --payload relation \"%s\" of feed \"%s\" does not exist or has no change_id column\n",
					p->relation, p->feed);
			exit(CFEED_EXIT_USAGE);
		}
		p->quoted = cfeed_serve_strdup(PQgetvalue(res, 0, 0));
		PQclear(res);
	}
}

/*
 * answer_hidden
 *		Answer a feed that does not exist (404) or that the gateway's role
 *		may not read (403).  A token of every feed (*) may read just the
 *		feeds the role may read, so it gets the token's own 403 for both:
 *		it learns nothing of the feeds it may not read (docs/serve.md, "Who
 *		may read what").
 */
static void
answer_hidden(ServeReq *req, int status, const char *error, const char *detail)
{
	if (req->token->all_feeds)
		cfeed_feedapi_error(req, 403, "forbidden", CFEED_SERVE_FORBIDDEN);
	else
		cfeed_feedapi_error(req, status, error, detail);
}

/*
 * answer_db_error
 *		Turn a failed query into req's answer: 404 unknown, 403 no read
 *		grant for the gateway's role (both as answer_hidden says), 503
 *		connection lost (the connection is closed, the pool opens a new
 *		one), 500 otherwise.
 */
static void
answer_db_error(PGconn **conn, ServeReq *req, PGresult *res)
{
	const char *state = cfeed_sqlstate(res);
	const char *primary = res ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) : NULL;
	char		detail[512];

	snprintf(detail, sizeof(detail), "%s", primary ? primary : cfeed_error_text(*conn, res));
	detail[strcspn(detail, "\n")] = '\0';
	if (cfeed_connection_lost(*conn, res))
	{
		cfeed_serve_log(LOG_WARNING, "database connection lost: %s", detail);
		PQfinish(*conn);
		*conn = NULL;
		cfeed_feedapi_error(req, 503, "unavailable", "the database connection was lost; retry");
	}
	else if (strcmp(state, "42704") == 0)
		answer_hidden(req, 404, "not_found", detail);
	else if (strcmp(state, "42501") == 0)
		answer_hidden(req, 403, "forbidden", detail);
	else
	{
		cfeed_serve_log(LOG_ERROR, "query failed (SQLSTATE %s): %s", state, detail);
		cfeed_feedapi_error(req, 500, "internal", detail);
	}
	PQclear(res);
}

/*
 * look_up_feed
 *		Fill req->feed (epoch, then id, retention, shards and their heads,
 *		token).  Only shards with ids in [0..32767], FeedAPI's partition ids
 *		(docs/serve.md), are the feed's partitions.
 *		False, with the answer set (answer_hidden), for an unknown feed, one
 *		the gateway's role may not read, or a database failure.
 */
static bool
look_up_feed(PGconn **conn, ServeReq *req)
{
	const char *params[1] = {req->feed_name};
	PGresult   *res;
	int			n;
	ServeBuf	list = {0};

	req->feed.epoch = 0;
	if (cfeed_serve_epochs && !cfeed_epoch_now(*conn, &req->feed.epoch, &res))
	{
		answer_db_error(conn, req, res);
		return false;
	}
	/* FeedAPI partition ids are in [0..32767]: shards above are not served */
	res = PQexecParams(*conn,
					   "select f.feed_id, f.retention is not null, s.shard, s.last_change_sequence_number,"
					   " pg_catalog.pg_is_in_recovery()"
					   " from cfeed.feed f left join cfeed.shard s"
					   " on s.feed_id = f.feed_id and s.shard <= 32767"
					   " where f.name = $1 order by s.shard",
					   1, NULL, params, NULL, NULL, 0);
	if (!cfeed_result_ok(res, PGRES_TUPLES_OK))
	{
		answer_db_error(conn, req, res);
		return false;
	}
	n = PQntuples(res);
	if (n == 0)
	{
		PQclear(res);
		answer_hidden(req, 404, "not_found", "no such feed");
		return false;
	}
	if (PQgetisnull(res, 0, 2))
	{
		PQclear(res);
		answer_hidden(req, 403, "forbidden",
					  "the gateway's database role may not read this feed (cfeed.grant_read)");
		return false;
	}
	snprintf(req->feed.name, sizeof(req->feed.name), "%s", req->feed_name);
	req->feed.feed_id = atoi(PQgetvalue(res, 0, 0));
	req->feed.has_retention = strcmp(PQgetvalue(res, 0, 1), "t") == 0;
	req->feed.on_standby = strcmp(PQgetvalue(res, 0, 4), "t") == 0;
	req->feed.nshards = n;
	req->feed.shards = cfeed_serve_alloc(sizeof(int) * n);
	req->feed.heads = cfeed_serve_alloc(sizeof(long long) * n);
	cfeed_buf_append(&list, "", 0);
	for (int i = 0; i < n; i++)
	{
		req->feed.shards[i] = atoi(PQgetvalue(res, i, 2));
		req->feed.heads[i] = strtoll(PQgetvalue(res, i, 3), NULL, 10);
		cfeed_buf_printf(&list, "%s%d", i ? "," : "", req->feed.shards[i]);
	}
	cfeed_feedapi_token(req->feed.feed_id, list.data, req->feed.token, sizeof(req->feed.token));
	free(list.data);
	PQclear(res);
	return true;
}

/*
 * answer_discovery
 *		The discovery call's JSON.
 */
static void
answer_discovery(ServeReq *req)
{
	json_t	   *parts = json_array();
	json_t	   *obj;
	char	   *text;

	for (int i = 0; i < req->feed.nshards; i++)
	{
		char		id[16];

		snprintf(id, sizeof(id), "%d", req->feed.shards[i]);
		json_array_append_new(parts, json_pack("{s:s}", "id", id));
	}
	obj = json_pack("{s:s, s:o, s:b, s:b}", "token", req->feed.token,
					"partitions", parts, "stream", 1, "exactlyOnce", 1);
	text = obj ? json_dumps(obj, JSON_COMPACT) : NULL;
	if (text == NULL)
		cfeed_serve_oom();
	cfeed_buf_printf(&req->out, "%s\n", text);
	free(text);
	json_decref(obj);
	req->status = 200;
}

/*
 * shard_index
 *		The index of shard in req->feed, or -1.
 */
static int
shard_index(const ServeReq *req, int shard)
{
	for (int i = 0; i < req->feed.nshards; i++)
		if (req->feed.shards[i] == shard)
			return i;
	return -1;
}

/*
 * set_cursor
 *		Position c (of shard index i) from a cursor argument: _first,
 *		_last or a position (number[@epoch]).  False for anything else.
 */
static bool
set_cursor(const ServeReq *req, int i, const char *arg, ServeCursor *c)
{
	c->shard = req->feed.shards[i];
	c->epoch = req->feed.epoch;
	if (strcmp(arg, "_first") == 0)
		c->known = false;
	else if (strcmp(arg, "_last") == 0)
	{
		c->known = true;
		c->number = req->feed.heads[i];
	}
	else
		return cfeed_stream_parse_position(req, arg, c);
	return true;
}

/*
 * beyond_head
 *		Whether c is past its shard's head, in the feed's current epoch: no
 *		response sent that position (a corrupted or made-up cursor), and
 *		taking it would skip every change up to it.  A hot standby is not
 *		asked: a position another gateway sent may be ahead of its replay
 *		(docs/serve.md, "Serving from a hot standby").  A position of
 *		another epoch is resumed by the read (cfeed.resume_cursor).
 */
static bool
beyond_head(const ServeReq *req, const ServeCursor *c)
{
	return !req->feed.on_standby && c->known && c->epoch == req->feed.epoch &&
		c->number > req->feed.heads[shard_index(req, c->shard)];
}

/*
 * position_request
 *		Fill req->cursors from the cursor argument (and, for SSE, the
 *		Last-Event-ID).  False, with a 400 answer, when they are invalid or
 *		one is beyond its shard's head (beyond_head).
 */
static bool
position_request(ServeReq *req)
{
	int			first = 0;
	int			n = req->feed.nshards;

	if (!req->all_shards)
	{
		first = shard_index(req, req->partition);
		if (first < 0)
		{
			cfeed_feedapi_error(req, 400, "bad_request", "no such partition (see the discovery call)");
			return false;
		}
		n = 1;
	}
	req->ncursors = n;
	req->cursors = cfeed_serve_alloc(sizeof(ServeCursor) * n);
	for (int i = 0; i < n; i++)
		if (!set_cursor(req, first + i, req->cursor_arg, &req->cursors[i]))
		{
			cfeed_feedapi_error(req, 400, "bad_request", "cursor must be _first, _last or a cursor this feed sent");
			return false;
		}
	if (req->last_event_id != NULL && !cfeed_sse_parse_id(req, req->last_event_id))
	{
		cfeed_feedapi_error(req, 400, "bad_request", "Last-Event-ID is not an id this feed sent");
		return false;
	}
	for (int i = 0; i < n; i++)
		if (beyond_head(req, &req->cursors[i]))
		{
			const ServeCursor *c = &req->cursors[i];
			char		detail[160];

			snprintf(detail, sizeof(detail),
					 "%s %lld of partition %d is beyond its head %lld: not a position this feed sent",
					 req->last_event_id ? "Last-Event-ID position" : "cursor", c->number,
					 c->shard, req->feed.heads[shard_index(req, c->shard)]);
			cfeed_feedapi_error(req, 400, "bad_request", detail);
			return false;
		}
	return true;
}

/*
 * cfeed_feedapi_read
 *		Read a page of a shard: sql is cfeed_feedapi_read_sql of the feed
 *		(named feed, id feed_id), after is the cursor (NULL: from the
 *		beginning), limit the most events.  Its rows are number, stamped_at
 *		(Unix milliseconds) and the event's JSON; the caller checks and
 *		clears the result.
 */
PGresult *
cfeed_feedapi_read(PGconn *conn, const char *sql, int feed_id, const char *feed,
				   int shard, const long long *after, int limit)
{
	char		feed_text[16];
	char		shard_text[16];
	char		cursor_text[24];
	char		limit_text[16];
	const char *params[5] = {feed_text, shard_text, NULL, limit_text, feed};

	snprintf(feed_text, sizeof(feed_text), "%d", feed_id);
	snprintf(shard_text, sizeof(shard_text), "%d", shard);
	snprintf(limit_text, sizeof(limit_text), "%d", limit);
	if (after != NULL)
	{
		snprintf(cursor_text, sizeof(cursor_text), "%lld", *after);
		params[2] = cursor_text;
	}
	return PQexecParams(conn, sql, 5, NULL, params, NULL, NULL, 0);
}

/*
 * removed_after
 *		Whether the feed's retention removed changes after c: whether c is
 *		below the shard's retention floor, cfeed.cursor_at at -infinity (the
 *		cursor from which reading returns every change left; it looks at
 *		the rows themselves, so changes the gateway's role is not shown,
 *		such as those of a tracked table it may not SELECT, are not taken
 *		for removed ones).  -1, with the answer set, when the query fails.
 */
static int
removed_after(PGconn **conn, ServeReq *req, const ServeCursor *c)
{
	char		feed_text[16];
	char		shard_text[16];
	const char *params[2] = {feed_text, shard_text};
	PGresult   *res;
	bool		removed;

	snprintf(feed_text, sizeof(feed_text), "%d", req->feed.feed_id);
	snprintf(shard_text, sizeof(shard_text), "%d", c->shard);
	res = PQexecParams(*conn, "select cfeed.cursor_at($1::int, $2::int, '-infinity')",
					   2, NULL, params, NULL, NULL, 0);
	if (!cfeed_result_ok(res, PGRES_TUPLES_OK) || PQntuples(res) != 1)
	{
		answer_db_error(conn, req, res);
		return -1;
	}
	removed = c->number < strtoll(PQgetvalue(res, 0, 0), NULL, 10);
	PQclear(res);
	return removed;
}

/*
 * resume_in_epoch
 *		Bring c into the current feed epoch (client epoch.c); a cursor that
 *		a failover rewound is logged, and its page is not cacheable.  False,
 *		with the answer set, when the query fails.
 */
static bool
resume_in_epoch(PGconn **conn, ServeReq *req, ServeCursor *c)
{
	long long	before = c->number;
	bool		rewound;
	PGresult   *res;

	if (!cfeed_epoch_resume(*conn, req->feed.feed_id, c->shard, c->known, &c->number,
							true, &c->epoch, &rewound, &res))
	{
		answer_db_error(conn, req, res);
		return false;
	}
	if (rewound)
	{
		cfeed_serve_log(LOG_WARNING, "feed \"%s\" shard %d: a failover lost stamps after %lld; "
						"a client at %lld resumes there (changes are sent again)",
						req->feed.name, c->shard, c->number, before);
		req->cacheable = false;
	}
	return true;
}

/*
 * read_epoch_page
 *		Read up to limit events after c, in c's feed epoch: c is first
 *		brought into the current epoch, and a read after which the epoch
 *		moved on is done again.  The result (checked) or
 *		NULL with the answer set.
 */
static PGresult *
read_epoch_page(PGconn **conn, ServeReq *req, ServeCursor *c, int limit)
{
	char	   *sql = cfeed_feedapi_read_sql(req->feed.name);
	PGresult   *res = NULL;

	for (;;)
	{
		long long	epoch;
		PGresult   *failed;

		if (cfeed_serve_epochs && !resume_in_epoch(conn, req, c))
			break;
		res = cfeed_feedapi_read(*conn, sql, req->feed.feed_id, req->feed.name, c->shard,
								 c->known ? &c->number : NULL, limit);
		if (!cfeed_result_ok(res, PGRES_TUPLES_OK))
		{
			answer_db_error(conn, req, res);
			res = NULL;
			break;
		}
		if (!cfeed_serve_epochs)
			break;
		if (!cfeed_epoch_now(*conn, &epoch, &failed))
		{
			PQclear(res);
			res = NULL;
			answer_db_error(conn, req, failed);
			break;
		}
		if (epoch == c->epoch)
			break;
		PQclear(res);
		res = NULL;
	}
	free(sql);
	return res;
}

/*
 * read_page
 *		Read up to limit events after c into req->out (framed for the
 *		request's kind) and advance c.  Returns the rows read, or -1 with
 *		the answer set: 410 when retention removed changes after c.  That
 *		is asked only of a feed with retention when the read skipped
 *		numbers after c (or returned nothing below the head), which changes
 *		the gateway's role may not read do as well as removed ones.
 */
static int
read_page(PGconn **conn, ServeReq *req, ServeCursor *c, int limit)
{
	PGresult   *res = read_epoch_page(conn, req, c, limit);
	int			rows;

	if (res == NULL)
		return -1;
	rows = PQntuples(res);
	if (c->known && req->feed.has_retention &&
		(rows > 0 ? strtoll(PQgetvalue(res, 0, 0), NULL, 10) > c->number + 1 :
		 c->number < req->feed.heads[shard_index(req, c->shard)]))
	{
		int			removed = removed_after(conn, req, c);

		if (removed != 0)
		{
			PQclear(res);
			if (removed > 0)
				cfeed_feedapi_error(req, 410, "gone",
									"changes after this cursor were removed by the feed's retention; start again from _first");
			return -1;
		}
	}
	for (int r = 0; r < rows; r++)
		cfeed_stream_event(req, c, strtoll(PQgetvalue(res, r, 0), NULL, 10),
						   strtoll(PQgetvalue(res, r, 1), NULL, 10),
						   PQgetvalue(res, r, 2), PQgetlength(res, r, 2), false);
	PQclear(res);

	/*
	 * Nothing from the beginning: nothing up to the head seen at look-up
	 * (an earlier snapshot) is readable, so the position is that head.
	 */
	if (rows == 0 && !c->known)
	{
		c->known = true;
		c->number = req->feed.heads[shard_index(req, c->shard)];
		c->epoch = req->feed.epoch;
	}
	return rows;
}

/*
 * start_request
 *		The start job: look up, check, position, and read the first page.
 */
static void
start_request(PGconn **conn, ServeReq *req)
{
	ServeCursor *c;
	long long	head;

	if (!look_up_feed(conn, req))
		return;
	if (req->kind == REQ_DISCOVERY)
	{
		answer_discovery(req);
		return;
	}
	if (req->kind == REQ_FETCH && strcmp(req->api_token, req->feed.token) != 0)
	{
		cfeed_feedapi_error(req, 409, "conflict",
							"the feed's partitions changed; repeat the discovery call");
		return;
	}
	if (!position_request(req))
		return;
	req->status = 200;
	if (req->kind == REQ_SSE)
	{
		cfeed_stream_position(req);
		return;					/* the stream reads from the hub or catches up */
	}
	c = &req->cursors[0];
	head = req->feed.heads[shard_index(req, c->shard)];
	req->cacheable = !req->stream && c->known && c->number + req->page_size <= head &&
		cfeed_serve_payload(req->feed.name) == NULL;
	if (read_page(conn, req, c, req->stream ? SERVE_MAX_PAGE : req->page_size) >= 0)
		cfeed_stream_cursor(req);
}

/*
 * cfeed_feedapi_run
 *		Run req's job on *conn (which may be NULL: the database is down; set
 *		to NULL when the connection is lost).
 */
void
cfeed_feedapi_run(PGconn **conn, ServeReq *req)
{
	if (*conn == NULL)
	{
		if (req->job == JOB_START)
			cfeed_feedapi_error(req, 503, "unavailable", "the database is not reachable; retry");
		else
			req->retry_ms = cfeed_now_ms() + SERVE_RETRY_MS;
		return;
	}
	if (req->job == JOB_START)
		start_request(conn, req);
	else
	{
		int			status = req->status;

		/*
		 * Mid-stream the status is sent: a lost connection makes the stream
		 * read again later (heartbeats go on meanwhile); another failure
		 * ends it.
		 */
		if (read_page(conn, req, &req->cursors[req->catch_up], SERVE_MAX_PAGE) < 0)
		{
			cfeed_buf_reset(&req->out);
			if (*conn == NULL)
				req->retry_ms = cfeed_now_ms() + SERVE_RETRY_MS;
			else
			{
				cfeed_serve_log(LOG_WARNING, "stream of feed \"%s\" ends: reading failed (%d)",
								req->feed.name, req->status);
				req->closing = true;
			}
			req->status = status;
		}
		else
			cfeed_stream_cursor(req);
	}
}
