/*
 * src/serve/serve_feed.c
 *		The feed a request to /feeds/<name> is about, for the pool threads:
 *		looking it up (id, partitions and their layout, heads, epoch,
 *		FeedAPI token), answering the FeedAPI v2 discovery call, the statement that reads a page of
 *		it (with its --payload), the one query that asks about many of its
 *		positions at once, and turning errors into answers.
 *
 * What a token learns: a token of every feed (*) may read the feeds the
 * gateway's role may read, so a feed that does not exist and one the role
 * may not read get the same 403 as a feed the token does not list
 * (cfeed_feed_hidden).  Every SQL statement is fixed text with parameters;
 * the only identifiers spliced in are the --payload relations, quoted by
 * the server at start-up (cfeed_feedapi_resolve_payloads).
 */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "serve.h"

#define READ_SQL \
	"select r.change_sequence_number," \
	" (extract(epoch from r.stamped_at) * 1000000)::bigint," \
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
 * cfeed_feed_hidden
 *		Answer a feed that does not exist (404) or that the gateway's role
 *		may not read (403).  A token of every feed (*) may read just the
 *		feeds the role may read, so it gets the token's own 403 for both:
 *		it learns nothing of the feeds it may not read (docs/serve.md, "Who
 *		may read what").
 */
void
cfeed_feed_hidden(ServeReq *req, int status, const char *error, const char *detail)
{
	if (req->grant.all_feeds)
		cfeed_feedapi_error(req, 403, "forbidden", CFEED_SERVE_FORBIDDEN);
	else
		cfeed_feedapi_error(req, status, error, detail);
}

/*
 * cfeed_feed_db_error
 *		Turn a failed query into req's answer: 404 unknown, 403 no read
 *		grant for the gateway's role (both as cfeed_feed_hidden says), 503
 *		connection lost (the connection is closed, the pool opens a new
 *		one), 500 otherwise.
 */
void
cfeed_feed_db_error(PGconn **conn, ServeReq *req, PGresult *res)
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
		cfeed_feed_hidden(req, 404, "not_found", detail);
	else if (strcmp(state, "42501") == 0)
		cfeed_feed_hidden(req, 403, "forbidden", detail);
	else
	{
		cfeed_serve_log(LOG_ERROR, "query failed (SQLSTATE %s): %s", state, detail);
		cfeed_feedapi_error(req, 500, "internal", detail);
	}
	PQclear(res);
}

/*
 * cfeed_feed_count_positions
 *		How many of the known ones of the n cursors at cursors meet where, a
 *		condition on u.shard and u.n (a fixed text of the caller's; $1 is
 *		req's feed id, $4 extra, when not NULL): one query, however many
 *		shards.  -1, with the answer set (cfeed_feed_db_error), when the
 *		query fails.
 */
long long
cfeed_feed_count_positions(PGconn **conn, ServeReq *req, const ServeCursor *cursors,
						   int n, const char *where, const char *extra)
{
	char		feed_text[16];
	ServeBuf	shards = {0};
	ServeBuf	numbers = {0};
	ServeBuf	sql = {0};
	const char *params[4] = {feed_text, NULL, NULL, extra};
	const char *sep = "";
	PGresult   *res;
	long long	count;

	for (int i = 0;; i++)
		if (i == n)
			return 0;			/* nothing known, nothing to ask */
		else if (cursors[i].known)
			break;
	snprintf(feed_text, sizeof(feed_text), "%d", req->feed.feed_id);
	cfeed_buf_append(&shards, "{", 1);
	cfeed_buf_append(&numbers, "{", 1);
	for (int i = 0; i < n; i++)
	{
		if (!cursors[i].known)
			continue;
		cfeed_buf_printf(&shards, "%s%d", sep, cursors[i].shard);
		cfeed_buf_printf(&numbers, "%s%lld", sep, cursors[i].number);
		sep = ",";
	}
	cfeed_buf_append(&shards, "}", 1);
	cfeed_buf_append(&numbers, "}", 1);
	params[1] = shards.data;
	params[2] = numbers.data;
	cfeed_buf_printf(&sql, "select count(*) from rows from (pg_catalog.unnest($2::int[]),"
					 " pg_catalog.unnest($3::bigint[])) u(shard, n) where %s", where);
	/* a parameter the condition does not use would have no type */
	res = PQexecParams(*conn, sql.data, extra ? 4 : 3, NULL, params, NULL, NULL, 0);
	free(shards.data);
	free(numbers.data);
	free(sql.data);
	if (!cfeed_result_ok(res, PGRES_TUPLES_OK) || PQntuples(res) != 1)
	{
		cfeed_feed_db_error(conn, req, res);
		return -1;
	}
	count = strtoll(PQgetvalue(res, 0, 0), NULL, 10);
	PQclear(res);
	return count;
}

/*
 * feed_not_readable
 *		Answer a feed the look-up did not find among those the gateway's role
 *		may read.  A token of every feed gets its 403 at once: a feed that
 *		exists and one that does not cost it the same one query, so that not
 *		even the answer's time tells them apart.  A token that names the
 *		feed (the operator's choice) learns which it is, by a second query.
 */
static void
feed_not_readable(PGconn **conn, ServeReq *req)
{
	const char *params[1] = {req->feed_name};
	PGresult   *res;

	if (req->grant.all_feeds)
	{
		cfeed_feed_hidden(req, 403, "forbidden", CFEED_SERVE_FORBIDDEN);
		return;
	}
	res = PQexecParams(*conn, "select from cfeed.feed f where f.name = $1", 1, NULL, params,
					   NULL, NULL, 0);
	if (!cfeed_result_ok(res, PGRES_TUPLES_OK))
	{
		cfeed_feed_db_error(conn, req, res);
		return;
	}
	if (PQntuples(res) == 0)
		cfeed_feed_hidden(req, 404, "not_found", "no such feed");
	else
		cfeed_feed_hidden(req, 403, "forbidden",
						  "the gateway's database role may not read this feed (cfeed.grant_read)");
	PQclear(res);
}

/*
 * cfeed_feed_look_up
 *		Fill req->feed (id, retention, partitions with their parents,
 *		heads, start values and whether they ended, token, and the epoch of
 *		the heads' snapshot: SERVE_EPOCH_COLUMN).  Only
 *		shards with ids in [0..32767], FeedAPI's partition ids
 *		(docs/serve.md), can be partitions, and of those the ones
 *		serve_layout.c lists.  False, with the answer set
 *		(feed_not_readable), for an unknown feed, one the gateway's role may
 *		not read, or a database failure.
 */
bool
cfeed_feed_look_up(PGconn **conn, ServeReq *req)
{
	const char *params[1] = {req->feed_name};
	char		sql[512];
	PGresult   *res;
	ServeFeed  *f = &req->feed;
	int			n;
	int			k = 0;
	int		   *shards;
	int		   *parents;
	bool	   *ended;
	bool	   *listed;

	f->looked_up_us = cfeed_now_us();
	/* FeedAPI partition ids are in [0..32767]: shards above are not served */
	snprintf(sql, sizeof(sql),
			 "select f.feed_id, f.retention is not null, s.shard, s.last_change_sequence_number,"
			 " pg_catalog.pg_is_in_recovery(), s.start_sequence_number, %s, %s"
			 " from cfeed.feed f left join lateral (select * from cfeed.shard s"
			 " where s.feed_id = f.feed_id and s.shard <= 32767 offset 0) s on true"
			 " where f.name = $1 and cfeed._may_read(f.feed_id) order by s.shard",
			 SERVE_LAYOUT_COLUMNS, SERVE_EPOCH_COLUMN);
	res = PQexecParams(*conn, sql, 1, NULL, params, NULL, NULL, 0);
	if (!cfeed_result_ok(res, PGRES_TUPLES_OK))
	{
		cfeed_feed_db_error(conn, req, res);
		return false;
	}
	n = PQntuples(res);
	if (n == 0 || PQgetisnull(res, 0, 2))
	{
		PQclear(res);
		feed_not_readable(conn, req);
		return false;
	}
	snprintf(f->name, sizeof(f->name), "%s", req->feed_name);
	f->feed_id = atoi(PQgetvalue(res, 0, 0));
	f->has_retention = strcmp(PQgetvalue(res, 0, 1), "t") == 0;
	f->on_standby = strcmp(PQgetvalue(res, 0, 4), "t") == 0;
	f->epoch = strtoll(PQgetvalue(res, 0, 8), NULL, 10);
	shards = cfeed_serve_alloc(sizeof(int) * n);
	parents = cfeed_serve_alloc(sizeof(int) * n);
	ended = cfeed_serve_alloc(sizeof(bool) * n);
	listed = cfeed_serve_alloc(sizeof(bool) * n);
	for (int i = 0; i < n; i++)
	{
		shards[i] = atoi(PQgetvalue(res, i, 2));
		parents[i] = PQgetisnull(res, i, 6) ? -1 : atoi(PQgetvalue(res, i, 6));
		ended[i] = strcmp(PQgetvalue(res, i, 7), "t") == 0;
	}
	f->nshards = cfeed_layout_list(f->feed_id, n, shards, parents, ended, listed,
								   f->token, sizeof(f->token));
	f->shards = cfeed_serve_alloc(sizeof(int) * f->nshards);
	f->parents = cfeed_serve_alloc(sizeof(int) * f->nshards);
	f->ended = cfeed_serve_alloc(sizeof(bool) * f->nshards);
	f->heads = cfeed_serve_alloc(sizeof(long long) * f->nshards);
	f->starts = cfeed_serve_alloc(sizeof(long long) * f->nshards);
	for (int i = 0; i < n; i++)
	{
		if (!listed[i])
			continue;
		f->shards[k] = shards[i];
		f->parents[k] = parents[i];
		f->ended[k] = ended[i];
		f->heads[k] = strtoll(PQgetvalue(res, i, 3), NULL, 10);
		f->starts[k] = strtoll(PQgetvalue(res, i, 5), NULL, 10);
		k++;
	}
	free(shards);
	free(parents);
	free(ended);
	free(listed);
	PQclear(res);
	return true;
}

/*
 * exactly_once
 *		Whether each change is delivered exactly once to a consumer that
 *		resumes from its cursor: only when no failover can lose a stamp a
 *		client saw, i.e. the database is a primary whose stamps wait for a
 *		synchronous standby (synchronous_standby_names set and
 *		cfeed.sweep_synchronous_commit not local; docs/replication.md).
 *		After a failover to an asynchronous standby changes are sent again
 *		(docs/serve.md, "Failover"): at least once.  -1, with the answer
 *		set, when the query fails.
 */
static int
exactly_once(PGconn **conn, ServeReq *req)
{
	PGresult   *res = PQexec(*conn,
							 "select not pg_catalog.pg_is_in_recovery()"
							 " and pg_catalog.current_setting('synchronous_standby_names') <> ''"
							 " and coalesce(pg_catalog.current_setting('cfeed.sweep_synchronous_commit', true),"
							 " 'local') <> 'local'");
	int			once;

	if (!cfeed_result_ok(res, PGRES_TUPLES_OK) || PQntuples(res) != 1)
	{
		cfeed_feed_db_error(conn, req, res);
		return -1;
	}
	once = strcmp(PQgetvalue(res, 0, 0), "t") == 0;
	PQclear(res);
	return once;
}

/*
 * cfeed_feed_discovery
 *		Answer the discovery call of the feed req looked up: its partitions,
 *		"closed" for those that ended and "startsAfterPartition" (a string,
 *		as the ids and the spec's examples) for children (serve_layout.c).
 */
void
cfeed_feed_discovery(PGconn **conn, ServeReq *req)
{
	json_t	   *parts = json_array();
	json_t	   *obj;
	char	   *text;
	int			once = exactly_once(conn, req);

	if (once < 0)
	{
		json_decref(parts);
		return;
	}

	for (int i = 0; i < req->feed.nshards; i++)
	{
		char		id[16];
		json_t	   *part;

		snprintf(id, sizeof(id), "%d", req->feed.shards[i]);
		part = json_pack("{s:s}", "id", id);
		if (part == NULL)
			cfeed_serve_oom();
		if (req->feed.ended[i])
			json_object_set_new(part, "closed", json_true());
		if (req->feed.parents[i] >= 0)
		{
			snprintf(id, sizeof(id), "%d", req->feed.parents[i]);
			json_object_set_new(part, "startsAfterPartition", json_string(id));
		}
		json_array_append_new(parts, part);
	}
	obj = json_pack("{s:s, s:o, s:b, s:b}", "token", req->feed.token,
					"partitions", parts, "stream", 1, "exactlyOnce", once);
	text = obj ? json_dumps(obj, JSON_COMPACT) : NULL;
	if (text == NULL)
		cfeed_serve_oom();
	cfeed_buf_printf(&req->out, "%s\n", text);
	free(text);
	json_decref(obj);
	req->status = 200;
}

