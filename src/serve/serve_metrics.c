/*
 * src/serve/serve_metrics.c
 *		The gateway's counters and the /metrics page (Prometheus text
 *		format 0.0.4).
 *
 * Counters are atomics, bumped by whichever thread does the work; the
 * latency histogram (stamp -> sent, for events delivered live from a
 * shard's in-memory tail) is a fixed set of atomic buckets.  The per-shard
 * figures come from the hub (cfeed_hub_metrics, which serve_http.c passes
 * to cfeed_metrics_render).  The consumer groups'
 * dead letters and failing shards (cfeed.groups) are read by the hub
 * thread every --refresh-ms (cfeed_metrics_refresh_groups) into lines kept
 * under groups_lock, since the HTTP thread never touches the database.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "serve.h"

atomic_long cfeed_metric_clients;
atomic_long cfeed_metric_events;
atomic_long cfeed_metric_requests;
atomic_long cfeed_metric_buffered;

/* Upper bounds of the latency buckets, in milliseconds. */
static const double bucket_ms[] = {1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000};
#define NBUCKETS (sizeof(bucket_ms) / sizeof(bucket_ms[0]))

static atomic_long bucket_count[NBUCKETS];
static atomic_long latency_count;
static atomic_llong latency_sum_us;

/* The groups' metric lines, as of the last refresh. */
static pthread_mutex_t groups_lock = PTHREAD_MUTEX_INITIALIZER;
static ServeBuf groups_lines;
static bool groups_unavailable;

/*
 * One row per consumer group and feed: its labels (the group name escaped
 * for the exposition format: backslash, double quote, newline), dead
 * letters and shards retrying a failed change.
 */
#define GROUPS_SQL \
	"select pg_catalog.format('{group=\"%s\",feed=\"%s\"}'," \
	" pg_catalog.replace(pg_catalog.replace(pg_catalog.replace(g.group_name," \
	" '\\', '\\\\'), '\"', '\\\"'), e'\\n', '\\n'), f.name)," \
	" g.dead_letters, g.failing" \
	" from cfeed.groups g join cfeed.feed f on f.feed_id = g.feed_id" \
	" order by g.group_name, f.name"

/*
 * cfeed_metrics_latency
 *		Record the delivery of an event stamped at stamped_us (Unix time in
 *		microseconds, the database server's clock) as of now.
 */
void
cfeed_metrics_latency(long long stamped_us)
{
	struct timespec ts;
	long long	now_us;
	long long	us;

	clock_gettime(CLOCK_REALTIME, &ts);
	now_us = (long long) ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
	us = now_us - stamped_us;
	if (us < 0)
		us = 0;					/* clocks of two machines */
	for (size_t i = 0; i < NBUCKETS; i++)
		if (us <= bucket_ms[i] * 1000)
			atomic_fetch_add(&bucket_count[i], 1);
	atomic_fetch_add(&latency_count, 1);
	atomic_fetch_add(&latency_sum_us, us);
}

/*
 * cfeed_metrics_refresh_groups
 *		Read the consumer groups' figures (cfeed.groups) into the lines
 *		/metrics shows.  A role that may not read the view, or a cfeed
 *		without dead letters, leaves them out (said once in the log).
 *		Returns false when the connection is lost.
 */
bool
cfeed_metrics_refresh_groups(PGconn *conn)
{
	static const char *const names[] = {"dead_letters", "failing_shards"};
	static const char *const help[] = {
		"Changes a consumer group set aside after their last failed attempt (cfeed.dead_letters).",
		"Shards on which a consumer group is retrying a failed change."
	};
	ServeBuf	lines = {0};
	PGresult   *res;

	if (groups_unavailable)
		return true;
	res = PQexec(conn, GROUPS_SQL);
	if (!cfeed_result_ok(res, PGRES_TUPLES_OK))
	{
		bool		gone = cfeed_connection_lost(conn, res);

		if (!gone)
		{
			cfeed_serve_log(LOG_INFO, "hub: consumer group metrics left out: %s",
							cfeed_error_text(conn, res));
			groups_unavailable = true;
		}
		PQclear(res);
		return !gone;
	}
	for (int m = 0; m < 2; m++)
	{
		cfeed_buf_printf(&lines, "# HELP cfeed_serve_group_%s %s\n# TYPE cfeed_serve_group_%s gauge\n",
						 names[m], help[m], names[m]);
		for (int r = 0; r < PQntuples(res); r++)
			cfeed_buf_printf(&lines, "cfeed_serve_group_%s%s %s\n", names[m],
							 PQgetvalue(res, r, 0), PQgetvalue(res, r, m + 1));
	}
	PQclear(res);
	pthread_mutex_lock(&groups_lock);
	free(groups_lines.data);
	groups_lines = lines;
	pthread_mutex_unlock(&groups_lock);
	return true;
}

/*
 * cfeed_metrics_render
 *		Append the /metrics page to b; more appends the figures of the layer
 *		above (cfeed_hub_metrics) before the consumer groups'.  Without more
 *		(NULL), the gateway's own figures only, which name no feed.
 */
void
cfeed_metrics_render(ServeBuf *b, ServeMetricsMore more)
{
	cfeed_buf_printf(b,
					 "# HELP cfeed_serve_clients Open HTTP requests to feeds (streams included).\n"
					 "# TYPE cfeed_serve_clients gauge\n"
					 "cfeed_serve_clients %ld\n"
					 "# HELP cfeed_serve_requests_total Requests to feeds answered.\n"
					 "# TYPE cfeed_serve_requests_total counter\n"
					 "cfeed_serve_requests_total %ld\n"
					 "# HELP cfeed_serve_events_sent_total Events sent to clients.\n"
					 "# TYPE cfeed_serve_events_sent_total counter\n"
					 "cfeed_serve_events_sent_total %ld\n"
					 "# HELP cfeed_serve_client_buffer_bytes Memory held for answers not yet sent to clients.\n"
					 "# TYPE cfeed_serve_client_buffer_bytes gauge\n"
					 "cfeed_serve_client_buffer_bytes %ld\n",
					 atomic_load(&cfeed_metric_clients),
					 atomic_load(&cfeed_metric_requests),
					 atomic_load(&cfeed_metric_events),
					 atomic_load(&cfeed_metric_buffered));
	cfeed_buf_printf(b,
					 "# HELP cfeed_serve_delivery_seconds Time from a change's stamp to its delivery to a streaming client at the head.\n"
					 "# TYPE cfeed_serve_delivery_seconds histogram\n");
	for (size_t i = 0; i < NBUCKETS; i++)
		cfeed_buf_printf(b, "cfeed_serve_delivery_seconds_bucket{le=\"%g\"} %ld\n",
						 bucket_ms[i] / 1000, atomic_load(&bucket_count[i]));
	cfeed_buf_printf(b,
					 "cfeed_serve_delivery_seconds_bucket{le=\"+Inf\"} %ld\n"
					 "cfeed_serve_delivery_seconds_sum %.6f\n"
					 "cfeed_serve_delivery_seconds_count %ld\n",
					 atomic_load(&latency_count),
					 (double) atomic_load(&latency_sum_us) / 1e6,
					 atomic_load(&latency_count));
	if (more == NULL)
		return;
	more(b);
	pthread_mutex_lock(&groups_lock);
	if (groups_lines.len > 0)
		cfeed_buf_append(b, groups_lines.data, groups_lines.len);
	pthread_mutex_unlock(&groups_lock);
}
