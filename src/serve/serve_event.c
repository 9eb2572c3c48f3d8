/*
 * src/serve/serve_event.c
 *		Writing a feed response's lines into the request's output: an event
 *		framed for the request's kind (an NDJSON {"data": ...} line or an SSE
 *		event), FeedAPI cursor lines and SSE id-only events (serve_stream.c's
 *		header), and whether an event belongs in the round under way of an
 *		all-shards SSE stream (serve_sse.c).  Called by the pool's reads
 *		and by the hub's tail alike.
 */

#include "serve.h"

/*
 * cfeed_stream_event
 *		Append one event (json: the event object) to req's output, framed
 *		for the request's kind, and advance cursor c to number.  live: it
 *		comes from the hub's tail (it then counts in the latency histogram).
 *		False, with nothing appended, when the event is beyond the round of
 *		an all-shards SSE stream (serve_sse.c): c is then through with it.
 */
bool
cfeed_stream_event(ServeReq *req, ServeCursor *c, long long number,
				   long long stamped_us, const char *json, size_t len, bool live)
{
	if (!cfeed_sse_admits(req, c, number, stamped_us))
		return false;
	c->known = true;
	c->number = number;
	req->event_bytes += len;
	req->nevents++;
	if (req->kind == REQ_SSE)
	{
		cfeed_buf_append(&req->out, "id: ", 4);
		cfeed_sse_append_id(req, &req->out);
		cfeed_buf_append(&req->out, "\ndata: ", 7);
		cfeed_buf_append(&req->out, json, len);
		cfeed_buf_append(&req->out, "\n\n", 2);
	}
	else
	{
		cfeed_buf_append(&req->out, "{\"data\":", 8);
		cfeed_buf_append(&req->out, json, len);
		cfeed_buf_append(&req->out, "}\n", 2);
	}
	atomic_fetch_add(&cfeed_metric_events, 1);
	if (live)
		cfeed_metrics_latency(stamped_us);
	return true;
}

/*
 * cfeed_stream_cursor
 *		Append a FeedAPI checkpoint line with the cursor of the request's
 *		partition ("_first" while nothing has been read from the beginning).
 *		Nothing for SSE, whose events carry their ids.
 */
void
cfeed_stream_cursor(ServeReq *req)
{
	ServeCursor *c = &req->cursors[0];

	if (req->kind != REQ_FETCH)
		return;
	cfeed_buf_append(&req->out, "{\"cursor\":\"", 11);
	cfeed_stream_append_position(&req->out, c);
	cfeed_buf_append(&req->out, "\"}\n", 3);
}

/*
 * cfeed_stream_id_event
 *		Append an SSE event with req's position as its id and no data: the
 *		browser takes the id (and reconnects from it) without an event
 *		being dispatched.  Sent first, last when the stream ends, and when
 *		the form of the id changes (serve_sse.c).
 */
void
cfeed_stream_id_event(ServeReq *req)
{
	cfeed_buf_append(&req->out, "id: ", 4);
	cfeed_sse_append_id(req, &req->out);
	cfeed_buf_append(&req->out, "\n\n", 2);
}

/*
 * cfeed_stream_position
 *		Start an SSE stream: the reconnection delay and an id-only event
 *		with the starting position.
 */
void
cfeed_stream_position(ServeReq *req)
{
	cfeed_buf_printf(&req->out, "retry: %d\n", SERVE_SSE_RETRY_MS);
	cfeed_stream_id_event(req);
}

/*
 * cfeed_sse_admits
 *		Whether an event (number, stamped at stamped_us) of cursor c belongs
 *		in the round under way; if not, c is through with the round.  Always
 *		true but for all-shards SSE streams.
 */
bool
cfeed_sse_admits(ServeReq *req, ServeCursor *c, long long number, long long stamped_us)
{
	if (!req->rounds)
		return true;
	if (number > c->limit || (number > c->start && stamped_us >= req->round_hi))
	{
		c->through = true;
		return false;
	}
	req->round_last = c - req->cursors;
	return true;
}
