/*
 * src/client/serve_metrics.c
 *		The gateway's counters and the /metrics page (Prometheus text
 *		format 0.0.4).
 *
 * Counters are atomics, bumped by whichever thread does the work; the
 * latency histogram (stamp -> sent, for events delivered live from a
 * shard's in-memory tail) is a fixed set of atomic buckets.  The per-shard
 * figures come from the hub (cfeed_hub_metrics).
 */
#define _POSIX_C_SOURCE 200809L

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

/*
 * cfeed_metrics_latency
 *		Record the delivery of an event stamped at stamped_ms (Unix time in
 *		milliseconds, the database server's clock) as of now.
 */
void
cfeed_metrics_latency(long long stamped_ms)
{
	struct timespec ts;
	long long	now_us;
	long long	us;

	clock_gettime(CLOCK_REALTIME, &ts);
	now_us = (long long) ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
	us = now_us - stamped_ms * 1000;
	if (us < 0)
		us = 0;					/* clocks of two machines */
	for (size_t i = 0; i < NBUCKETS; i++)
		if (us <= bucket_ms[i] * 1000)
			atomic_fetch_add(&bucket_count[i], 1);
	atomic_fetch_add(&latency_count, 1);
	atomic_fetch_add(&latency_sum_us, us);
}

/*
 * cfeed_metrics_render
 *		Append the /metrics page to b.
 */
void
cfeed_metrics_render(ServeBuf *b)
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
	cfeed_hub_metrics(b);
}
