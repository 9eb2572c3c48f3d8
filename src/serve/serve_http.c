/*
 * src/serve/serve_http.c
 *		The HTTP side of `cfeed serve` (libmicrohttpd): the daemon, routing,
 *		authorization and request parameters (the answers: serve_answer.c).
 *
 * Every callback runs on libmicrohttpd's polling thread and never waits
 * for the database.  A request to /feeds/<name> is authorized first (the
 * token file: 401 without a valid token, 403 for a feed the token may not
 * read), before anything is read; its parameters are checked (400); then
 * the connection is suspended and a pool thread looks the feed up and reads
 * (serve_feedapi.c).  When the pool resumes it, the access handler is
 * called again and queues the answer: a buffer, or for a stream the
 * content reader of serve_stream.c, whose cursors then take from the hub.
 *
 * Nothing from the query string is logged but the path: a browser's
 * EventSource cannot send headers, so its token may come as access_token.
 */
#define _POSIX_C_SOURCE 200809L

#include <arpa/inet.h>
#include <ctype.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "serve.h"

static atomic_int active;

/*
 * The con_cls of a request between the access handler's first call (its
 * headers) and the call after its body: libmicrohttpd closes a connection
 * whose response was queued in the first call (the body might be unread),
 * so nothing is answered before the second.
 */
static char headers_seen;

/*
 * read_file
 *		A whole file as a NUL-terminated string (TLS certificate and key);
 *		exits 2 when it cannot be read.
 */
static char *
read_file(const char *path)
{
	FILE	   *f = fopen(path, "r");
	ServeBuf	b = {0};
	char		chunk[4096];
	size_t		n;

	if (f == NULL)
	{
		fprintf(stderr, "cfeed serve: could not open \"%s\": %m\n", path);
		exit(CFEED_EXIT_USAGE);
	}
	while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
		cfeed_buf_append(&b, chunk, n);
	fclose(f);
	cfeed_buf_append(&b, "", 0);
	return b.data;
}

/*
 * bearer_secret
 *		The request's token: "Authorization: Bearer X", else the
 *		access_token parameter (for EventSource), else NULL.
 */
static const char *
bearer_secret(struct MHD_Connection *conn)
{
	const char *auth = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Authorization");

	if (auth != NULL && strncasecmp(auth, "Bearer ", 7) == 0)
	{
		auth += 7;
		while (*auth == ' ')
			auth++;
		return auth;
	}
	return MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "access_token");
}

/*
 * answer_refused
 *		The answer to a request the token file refused: 401 without a token
 *		or with an unknown one (AUTH_UNKNOWN), else 403 saying forbidden.
 */
static enum MHD_Result
answer_refused(struct MHD_Connection *conn, ServeAuth auth, const char *secret,
			   const char *forbidden)
{
	if (auth == AUTH_UNKNOWN)
		return cfeed_answer_error(conn, 401, "unauthorized",
								  secret ? "unknown token" : "a bearer token is required");
	return cfeed_answer_error(conn, 403, "forbidden", forbidden);
}

/*
 * count_argument
 *		MHD_KeyValueIterator counting arguments other than access_token.
 */
static enum MHD_Result
count_argument(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
	(void) kind;
	(void) value;
	if (strcmp(key, "access_token") != 0)
		(*(int *) cls)++;
	return MHD_YES;
}

/*
 * parse_request
 *		Fill req's parameters from the query string and headers (events:
 *		the URL was <discovery URL>/events, always a fetch).  NULL when
 *		they are fine, else the 400 detail.
 */
static const char *
parse_request(struct MHD_Connection *conn, ServeReq *req, bool events)
{
	const char *accept = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Accept");
	const char *token = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "token");
	const char *partition = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "partition");
	const char *cursor = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "cursor");
	const char *hint = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "pageSizeHint");
	const char *stream = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "stream");
	const char *last_id = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Last-Event-ID");
	long long	value;
	int			nargs = 0;

	MHD_get_connection_values(conn, MHD_GET_ARGUMENT_KIND, count_argument, &nargs);
	snprintf(req->cursor_arg, sizeof(req->cursor_arg), "%s", cursor ? cursor : "_first");
	if (cursor != NULL && strlen(cursor) >= sizeof(req->cursor_arg))
		return "cursor must be _first, _last or a number";
	if (partition != NULL)
	{
		if (!cfeed_parse_int64(partition, 0, INT_MAX, &value))
			return "partition must be a partition id from the discovery call";
		req->partition = (int) value;
	}

	if (stream != NULL)
	{
		req->stream = true;
		if (strcmp(stream, "y") == 0)
			req->stream_ms = 0;
		else if (cfeed_parse_int64(stream, 0, INT_MAX, &value))
			req->stream_ms = value > 0 ? value : 1;
		else
			return "stream must be a number of milliseconds or y";
	}

	if (accept != NULL && strstr(accept, "text/event-stream") != NULL)
	{
		req->kind = REQ_SSE;
		req->stream = true;
		req->all_shards = (partition == NULL);
		if (last_id != NULL)
			req->last_event_id = cfeed_serve_strdup(last_id);
		return NULL;
	}
	if (nargs == 0 && !events)
	{
		req->kind = REQ_DISCOVERY;
		return NULL;
	}
	if (stream != NULL && hint != NULL)
		return "pageSizeHint and stream cannot be combined";
	req->kind = REQ_FETCH;
	if (token == NULL)
		return "token is required (FeedAPI v2: call without arguments for discovery; FeedAPI v1 is not served)";
	if (strlen(token) >= sizeof(req->api_token))
		return "unknown token; repeat the discovery call";
	snprintf(req->api_token, sizeof(req->api_token), "%s", token);
	if (partition == NULL)
		return "partition is required";
	if (cursor == NULL)
		return "cursor is required (_first, _last or a cursor from an earlier response)";
	req->page_size = SERVE_DEFAULT_PAGE;
	if (hint != NULL)
	{
		if (!cfeed_parse_int64(hint, 1, INT_MAX, &value))
			return "pageSizeHint must be a positive integer";
		req->page_size = value > SERVE_MAX_PAGE ? SERVE_MAX_PAGE : (int) value;
	}
	return NULL;
}

/*
 * start_feed_request
 *		First call for /feeds/<name>: authorize, parse, suspend, and hand
 *		the request to the pool.
 */
static enum MHD_Result
start_feed_request(struct MHD_Connection *conn, const char *name, bool events, bool head,
				   void **con_cls)
{
	const char *secret = bearer_secret(conn);
	ServeAuth	auth;
	ServeGrant	grant;
	ServeReq   *req;
	const char *bad;

	auth = cfeed_auth_check(secret, name, &grant);
	if (auth != AUTH_OK)
		return answer_refused(conn, auth, secret, CFEED_SERVE_FORBIDDEN);
	req = cfeed_serve_alloc(sizeof(ServeReq));
	req->conn = conn;
	req->grant = grant;
	req->started_ms = cfeed_now_ms();
	req->head = head;
	snprintf(req->feed_name, sizeof(req->feed_name), "%s", name);
	bad = parse_request(conn, req, events);
	if (bad != NULL || atomic_load(&cfeed_serve_stopping))
	{
		bool		sse = req->kind == REQ_SSE;

		free(req->last_event_id);
		free(req);
		if (bad != NULL)
			return cfeed_answer_error(conn, 400, "bad_request", bad);
		if (!sse)
			return cfeed_answer_error(conn, 503, "unavailable", "the gateway is shutting down");
		atomic_fetch_add(&cfeed_metric_requests, 1);
		return cfeed_answer_sse_retry(conn, "the gateway is shutting down");
	}
	*con_cls = req;
	atomic_fetch_add(&active, 1);
	atomic_fetch_add(&cfeed_metric_clients, 1);
	MHD_suspend_connection(conn);
	cfeed_pool_submit(req, JOB_START);
	return MHD_YES;
}

/*
 * answer_feed_request
 *		After the start job: queue the answer, or start the stream.
 */
static enum MHD_Result
answer_feed_request(struct MHD_Connection *conn, ServeReq *req)
{
	char		cache[96];
	enum MHD_Result ret;

	req->queued = true;
	atomic_fetch_add(&cfeed_metric_requests, 1);
	if (req->kind == REQ_SSE && req->status == 503)
	{
		req->status = 200;
		req->told_to_retry = true;
		return cfeed_answer_sse_retry(conn, req->retry_why ? req->retry_why :
									  "the database is not reachable");
	}
	/* HEAD of a stream: its headers, and no body (not even a last chunk) */
	if (req->status != 200 || !req->stream || req->head)
	{
		const char *type = req->status != 200 ? "application/json" :
			req->kind == REQ_SSE ? "text/event-stream" :
			req->kind == REQ_FETCH ? "application/x-ndjson" : "application/json";

		if (req->cacheable)
			snprintf(cache, sizeof(cache), "%s, max-age=%d, immutable",
					 req->grant.public_feed ? "public" : "private", cfeed_serve_opts.max_age_s);
		else
			snprintf(cache, sizeof(cache), "no-store");
		ret = cfeed_answer_buffer(conn, req->status, type, req->out.data ? req->out.data : "",
								  req->out.len, cache);
		cfeed_stream_release(req);	/* the answer holds a copy */
		return ret;
	}

	for (int i = 0; i < req->ncursors; i++)
		cfeed_hub_follow(&req->feed, &req->cursors[i]);
	req->next_beat_ms = cfeed_now_ms() + cfeed_serve_opts.heartbeat_ms;
	if (req->stream_ms > 0)
		req->deadline_ms = cfeed_now_ms() + req->stream_ms;
	return cfeed_answer_stream(conn, req);
}

/*
 * handle_request
 *		libmicrohttpd's access handler: routes /healthz, /metrics and
 *		/feeds/<name>; a fetch also at /feeds/<name>/events (FeedAPI v2).
 */
static enum MHD_Result
handle_request(void *cls, struct MHD_Connection *conn, const char *url,
			   const char *method, const char *version, const char *upload_data,
			   size_t *upload_data_size, void **con_cls)
{
	ServeReq   *req = *con_cls;
	char		name[SERVE_NAME_MAX];
	size_t		len;
	bool		events = false;

	(void) cls;
	(void) version;
	(void) upload_data;
	if (req == NULL)
	{
		*con_cls = &headers_seen;	/* answered after the body (keep-alive) */
		return MHD_YES;
	}
	if (*upload_data_size != 0)
	{
		*upload_data_size = 0;	/* a body is ignored */
		return MHD_YES;
	}
	if ((void *) req != (void *) &headers_seen)
		return req->queued ? MHD_YES : answer_feed_request(conn, req);
	*con_cls = NULL;
	if (strcmp(method, "OPTIONS") == 0 && cfeed_serve_opts.allow_origin != NULL)
		return cfeed_answer_preflight(conn);
	if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0)
		return cfeed_answer_error(conn, 405, "method_not_allowed", "only GET is served");
	if (strcmp(url, "/healthz") == 0)
	{
		bool		ok = cfeed_hub_healthy();
		const char *body = ok ? "{\"status\":\"ok\"}\n" : "{\"status\":\"database unreachable\"}\n";

		return cfeed_answer_buffer(conn, ok ? 200 : 503, "application/json", body, strlen(body), "no-store");
	}
	if (strcmp(url, "/metrics") == 0 && cfeed_serve_opts.metrics != METRICS_OFF)
	{
		ServeBuf	b = {0};
		enum MHD_Result ret;

		const char *secret = bearer_secret(conn);
		ServeAuth	auth = cfeed_auth_check_all_feeds(secret);

		if (cfeed_serve_opts.metrics == METRICS_TOKEN && auth != AUTH_OK)
			return answer_refused(conn, auth, secret, "/metrics needs a token of every feed (*)");
		/* the feeds' and groups' series name feeds: a token of every feed only */
		cfeed_metrics_render(&b, auth == AUTH_OK ? cfeed_hub_metrics : NULL);
		ret = cfeed_answer_buffer(conn, 200, "text/plain; version=0.0.4", b.data, b.len, "no-store");
		free(b.data);
		return ret;
	}
	if (strncmp(url, "/feeds/", 7) != 0)
		return cfeed_answer_error(conn, 404, "not_found", "the feeds are at /feeds/<name>");
	len = strlen(url + 7);
	if (len > 7 && strcmp(url + 7 + len - 7, "/events") == 0)
	{
		events = true;			/* FeedAPI v2 fetch: <discovery URL>/events */
		len -= 7;
	}
	if (len == 0 || len >= SERVE_NAME_MAX ||
		strspn(url + 7, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-") != len)
		return cfeed_answer_error(conn, 404, "not_found", "no such feed");
	memcpy(name, url + 7, len);
	name[len] = '\0';
	return start_feed_request(conn, name, events, strcmp(method, "HEAD") == 0, con_cls);
}

/*
 * request_completed
 *		libmicrohttpd's completion callback: release the request and log it.
 */
static void
request_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
				  enum MHD_RequestTerminationCode toe)
{
	ServeReq   *req = *con_cls;

	(void) cls;
	(void) conn;
	if (req == NULL || (void *) req == (void *) &headers_seen)
		return;
	cfeed_hub_forget(req);
	for (int i = 0; i < req->ncursors; i++)
		cfeed_hub_unfollow(&req->cursors[i]);
	cfeed_serve_log(LOG_INFO, "GET /feeds/%s %s %d (%s) %lld ms%s%s", req->feed_name,
					req->kind == REQ_SSE ? "sse" : req->kind == REQ_DISCOVERY ? "discovery" :
					req->stream ? "stream" : "fetch",
					req->status, req->grant.label, cfeed_now_ms() - req->started_ms,
					req->told_to_retry ? ", told to retry: " : "",
					req->told_to_retry ? (req->retry_why ? req->retry_why : "the database is not reachable") :
					toe == MHD_REQUEST_TERMINATED_COMPLETED_OK ? "" : ", closed by the client or an error");
	cfeed_stream_release(req);
	free(req->cursors);
	free(req->feed.shards);
	free(req->feed.parents);
	free(req->feed.ended);
	free(req->feed.heads);
	free(req->feed.starts);
	free(req->last_event_id);
	free(req);
	*con_cls = NULL;
	atomic_fetch_sub(&active, 1);
	atomic_fetch_sub(&cfeed_metric_clients, 1);
}

/*
 * unescape
 *		libmicrohttpd's unescape callback for the path and the query
 *		arguments: decode %XX in place, but leave %00 as it is, so that a NUL
 *		cannot cut a path or a value short ("/feeds/orders%00x" is no feed,
 *		not /feeds/orders).  Returns the new length.
 */
static size_t
unescape(void *cls, struct MHD_Connection *conn, char *s)
{
	char	   *out = s;

	(void) cls;
	(void) conn;
	for (const char *in = s; *in != '\0'; in++)
	{
		unsigned int value;

		if (in[0] == '%' && isxdigit((unsigned char) in[1]) && isxdigit((unsigned char) in[2]) &&
			sscanf(in + 1, "%2x", &value) == 1 && value != 0)
		{
			*out++ = (char) value;
			in += 2;
		}
		else
			*out++ = *in;
	}
	*out = '\0';
	return (size_t) (out - s);
}

/*
 * connection_event
 *		libmicrohttpd's connection callback: one debug line per TCP
 *		connection opened or closed.
 */
static void
connection_event(void *cls, struct MHD_Connection *conn, void **socket_context,
				 enum MHD_ConnectionNotificationCode toe)
{
	const union MHD_ConnectionInfo *info =
		MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	char		addr[INET6_ADDRSTRLEN] = "?";

	(void) cls;
	(void) socket_context;
	if (!cfeed_serve_logs(LOG_DEBUG))
		return;
	if (info != NULL && info->client_addr != NULL)
	{
		const struct sockaddr *sa = info->client_addr;

		if (sa->sa_family == AF_INET)
			inet_ntop(AF_INET, &((const struct sockaddr_in *) sa)->sin_addr, addr, sizeof(addr));
		else if (sa->sa_family == AF_INET6)
			inet_ntop(AF_INET6, &((const struct sockaddr_in6 *) sa)->sin6_addr, addr, sizeof(addr));
	}
	cfeed_serve_log(LOG_DEBUG, "connection from %s %s", addr,
					toe == MHD_CONNECTION_NOTIFY_STARTED ? "opened" : "closed");
}

/*
 * cfeed_http_start
 *		Start the daemon on --listen/--port (with TLS when asked).  NULL on
 *		failure.
 */
struct MHD_Daemon *
cfeed_http_start(void)
{
	const ServeOptions *o = &cfeed_serve_opts;
	struct sockaddr_in6 addr6;
	struct sockaddr_in addr4;
	struct sockaddr *addr;
	unsigned int flags = MHD_USE_AUTO_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG;
	char	   *cert = NULL;
	char	   *key = NULL;

	memset(&addr4, 0, sizeof(addr4));
	memset(&addr6, 0, sizeof(addr6));
	if (inet_pton(AF_INET, o->listen_addr, &addr4.sin_addr) == 1)
	{
		addr4.sin_family = AF_INET;
		addr4.sin_port = htons(o->port);
		addr = (struct sockaddr *) &addr4;
	}
	else if (inet_pton(AF_INET6, o->listen_addr, &addr6.sin6_addr) == 1)
	{
		addr6.sin6_family = AF_INET6;
		addr6.sin6_port = htons(o->port);
		addr = (struct sockaddr *) &addr6;
		flags |= MHD_USE_IPv6;
	}
	else
		cfeed_usage_error("serve", "invalid --listen \"%s\": expected an IPv4 or IPv6 address", o->listen_addr);

	if (o->tls_cert != NULL)
	{
		cert = read_file(o->tls_cert);
		key = read_file(o->tls_key);
		flags |= MHD_USE_TLS;
	}
	return MHD_start_daemon(flags, (uint16_t) o->port, NULL, NULL,
							handle_request, NULL,
							MHD_OPTION_SOCK_ADDR, addr,
							MHD_OPTION_CONNECTION_LIMIT, o->max_clients,
							MHD_OPTION_CONNECTION_TIMEOUT, o->idle_timeout_s,
							MHD_OPTION_NOTIFY_COMPLETED, request_completed, NULL,
							MHD_OPTION_NOTIFY_CONNECTION, connection_event, NULL,
							MHD_OPTION_UNESCAPE_CALLBACK, unescape, NULL,
							cert ? MHD_OPTION_HTTPS_MEM_CERT : MHD_OPTION_END, cert,
							MHD_OPTION_HTTPS_MEM_KEY, key,
							MHD_OPTION_END);
}

/*
 * cfeed_http_resume
 *		A pool thread is done with req: hand it back to the HTTP thread.
 */
void
cfeed_http_resume(ServeReq *req)
{
	MHD_resume_connection(req->conn);
}

/*
 * cfeed_http_active
 *		Feed requests in progress.
 */
int
cfeed_http_active(void)
{
	return atomic_load(&active);
}
