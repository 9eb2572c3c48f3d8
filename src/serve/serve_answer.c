/*
 * src/serve/serve_answer.c
 *		The answers of `cfeed serve` as libmicrohttpd responses: complete
 *		answers (pages, discovery, errors, /healthz, /metrics; gzip when the
 *		client accepts it), streams, and CORS preflights, with their
 *		headers.
 *
 * Memory held for clients: a complete answer is one copy, made here and
 * freed when libmicrohttpd is done with it; a stream holds what it has
 * produced and not yet sent (serve_stream.c), at most about
 * SERVE_CLIENT_BYTES (pages and takes from the hub stop there).  Both are
 * counted in cfeed_metric_buffered (/metrics' cfeed_serve_client_buffer_bytes).
 * Called on the HTTP thread only.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdlib.h>
#include <string.h>

#include "serve.h"

/* A complete answer's copy, counted in cfeed_metric_buffered. */
typedef struct HeldAnswer
{
	size_t		len;
	char		data[];
} HeldAnswer;

/*
 * add_common_headers
 *		CORS (--allow-origin), the content type, and Vary: the answer
 *		depends on Accept (the same URL answers NDJSON or Server-Sent
 *		Events), on Origin with CORS, and a complete one, which may be
 *		compressed, on Accept-Encoding.
 */
static void
add_common_headers(struct MHD_Response *resp, const char *type, bool complete)
{
	bool		cors = cfeed_serve_opts.allow_origin != NULL;
	char		vary[64];

	MHD_add_response_header(resp, "Content-Type", type);
	if (cors)
		MHD_add_response_header(resp, "Access-Control-Allow-Origin", cfeed_serve_opts.allow_origin);
	snprintf(vary, sizeof(vary), "Accept%s%s", cors ? ", Origin" : "",
			 complete ? ", Accept-Encoding" : "");
	MHD_add_response_header(resp, "Vary", vary);
}

/*
 * queue_response
 *		Queue resp with status, and release it (libmicrohttpd keeps its own
 *		reference while it sends it).
 */
static enum MHD_Result
queue_response(struct MHD_Connection *conn, int status, struct MHD_Response *resp)
{
	enum MHD_Result ret = MHD_queue_response(conn, status, resp);

	MHD_destroy_response(resp);
	return ret;
}

/*
 * release_answer
 *		libmicrohttpd is done with a complete answer: free its copy.
 */
static void
release_answer(void *cls)
{
	HeldAnswer *a = cls;

	atomic_fetch_sub(&cfeed_metric_buffered, (long) a->len);
	free(a);
}

/*
 * held_response
 *		A response with a counted copy of len bytes of data, or NULL.
 */
static struct MHD_Response *
held_response(const char *data, size_t len)
{
	HeldAnswer *a = cfeed_serve_alloc(sizeof(HeldAnswer) + len);
	struct MHD_Response *resp;

	memcpy(a->data, data, len);
	a->len = len;
	atomic_fetch_add(&cfeed_metric_buffered, (long) len);
	resp = MHD_create_response_from_buffer_with_free_callback_cls(len, a->data, release_answer, a);
	if (resp == NULL)
		release_answer(a);
	return resp;
}

/*
 * cfeed_answer_buffer
 *		Queue a complete answer with the given status, type and body (the
 *		caller keeps body), gzip-compressed when the client accepts it and
 *		it is worth it.
 */
enum MHD_Result
cfeed_answer_buffer(struct MHD_Connection *conn, int status, const char *type,
					const char *body, size_t len, const char *cache)
{
	struct MHD_Response *resp;
	ServeBuf	gz = {0};
	bool		zipped = len >= SERVE_GZIP_MIN &&
		cfeed_gzip_accepted(MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Accept-Encoding")) &&
		cfeed_gzip(body, len, &gz);

	resp = zipped ? held_response(gz.data, gz.len) : held_response(body, len);
	free(gz.data);
	if (resp == NULL)
		return MHD_NO;
	add_common_headers(resp, type, true);
	if (zipped)
		MHD_add_response_header(resp, "Content-Encoding", "gzip");
	MHD_add_response_header(resp, "Cache-Control", cache);
	if (status == 401)
		MHD_add_response_header(resp, "WWW-Authenticate", "Bearer realm=\"cfeed\"");
	if (status == 405)
		MHD_add_response_header(resp, "Allow", cfeed_serve_opts.allow_origin != NULL ?
								"GET, HEAD, OPTIONS" : "GET, HEAD");
	return queue_response(conn, status, resp);
}

/*
 * cfeed_answer_error
 *		Queue a JSON error without a request (routing, authorization and
 *		parameter errors).
 */
enum MHD_Result
cfeed_answer_error(struct MHD_Connection *conn, int status, const char *error, const char *detail)
{
	ServeReq	tmp;
	enum MHD_Result ret;

	memset(&tmp, 0, sizeof(tmp));
	cfeed_feedapi_error(&tmp, status, error, detail);
	ret = cfeed_answer_buffer(conn, status, "application/json", tmp.out.data, tmp.out.len, "no-store");
	free(tmp.out.data);
	atomic_fetch_add(&cfeed_metric_requests, 1);
	return ret;
}

/*
 * cfeed_answer_stream
 *		Queue the streaming response of req: its body comes from the content
 *		reader of serve_stream.c.
 */
enum MHD_Result
cfeed_answer_stream(struct MHD_Connection *conn, ServeReq *req)
{
	struct MHD_Response *resp;

	resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, cfeed_stream_read, req, NULL);
	if (resp == NULL)
		return MHD_NO;
	add_common_headers(resp, req->kind == REQ_SSE ? "text/event-stream" : "application/x-ndjson", false);
	MHD_add_response_header(resp, "Cache-Control", "no-store");
	MHD_add_response_header(resp, "X-Accel-Buffering", "no");
	return queue_response(conn, 200, resp);
}

/*
 * cfeed_answer_sse_retry
 *		Answer an SSE request that cannot be served now (why: the database
 *		is not reachable, or the gateway is shutting down): 200, an event
 *		stream with the reconnection delay and a comment, ended at once.
 *		EventSource reconnects after the delay with the same Last-Event-ID;
 *		any answer but a 200 event stream (a 503) closes it for good.
 */
enum MHD_Result
cfeed_answer_sse_retry(struct MHD_Connection *conn, const char *why)
{
	struct MHD_Response *resp;
	ServeBuf	b = {0};

	cfeed_buf_printf(&b, "retry: %d\n: %s; reconnect\n\n", SERVE_SSE_RETRY_MS, why);
	resp = held_response(b.data, b.len);
	free(b.data);
	if (resp == NULL)
		return MHD_NO;
	add_common_headers(resp, "text/event-stream", false);
	MHD_add_response_header(resp, "Cache-Control", "no-store");
	return queue_response(conn, 200, resp);
}

/*
 * cfeed_answer_preflight
 *		CORS preflight (OPTIONS) for pages that send Authorization.
 */
enum MHD_Result
cfeed_answer_preflight(struct MHD_Connection *conn)
{
	struct MHD_Response *resp = MHD_create_response_from_buffer(0, "", MHD_RESPMEM_PERSISTENT);

	if (resp == NULL)
		return MHD_NO;
	add_common_headers(resp, "text/plain", false);
	MHD_add_response_header(resp, "Access-Control-Allow-Methods", "GET");
	MHD_add_response_header(resp, "Access-Control-Allow-Headers", "Authorization, Last-Event-ID");
	MHD_add_response_header(resp, "Access-Control-Max-Age", "600");
	return queue_response(conn, 204, resp);
}
