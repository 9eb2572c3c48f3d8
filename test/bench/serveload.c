/*
 * serveload.c
 *	  Load client of the `cfeed serve` rows (7a, 7b, test/bench/README.md):
 *	  CLIENTS concurrent streaming HTTP clients of one feed, and a writer
 *	  publishing to it at a fixed rate, timing commit -> delivered.
 *
 *	  Clients: libcurl's multi interface driven by curl_multi_socket_action
 *	  and epoll, THREADS threads (each its own multi handle and epoll set).
 *	  Client i follows shard i % SHARDS from the shard's head when the run
 *	  starts: as a FeedAPI stream (?token=...&partition=S&cursor=HEAD&stream=y,
 *	  NDJSON), or, for SSE_PERCENT of them, as Server-Sent Events
 *	  (Accept: text/event-stream, ?partition=S&cursor=HEAD).  Every event's
 *	  number must be the previous one + 1 (the first: HEAD + 1): a lower one
 *	  is a repeat, a higher one a gap, both errors.  A stream that ends, or
 *	  is not answered 200, is a dropped client.
 *
 *	  Writer (its own thread and connection): after every client is
 *	  served, SECONDS of autocommit `SELECT cfeed.publish(FEED_ID, shard)`
 *	  at RATE per second, in pairs: two commits back to back on two shards
 *	  (the shards in turn), then a pause to the next pair's time (the case
 *	  of a second shard's commit that must not wait for the next one; fewer
 *	  when the commits take longer: the rate reached is reported), each
 *	  change_id's commit
 *	  acknowledgement time recorded (CLOCK_MONOTONIC).  A client that
 *	  receives an event looks its change_id up: commit -> delivered, into a
 *	  histogram of 10 us bins (per thread, merged at the end); and the
 *	  event's stamped_at (the sweep's time on the database server, the same
 *	  machine) -> delivered (CLOCK_REALTIME) into another, which splits the
 *	  gateway's part from the sweeper's; and commit -> delivered per shard
 *	  (100 us bins), whose worst p99 and max are reported besides the
 *	  p50, p99 and max over all shards.  Then up to
 *	  DRAIN_S for the clients to reach the last number of their shard.
 *
 *	  Meanwhile (the main thread): the gateway's CPU (/proc/GW_PID/stat) and
 *	  RSS (VmRSS) before the clients, once they are served and at the end of
 *	  the writing window; the cluster's CPU over the window (the postmaster
 *	  of PGDATA and its children, reaped ones included); the database
 *	  backends of the gateway (pg_stat_activity, application_name
 *	  'cfeed serve'), the most seen in the per-second samples; and this
 *	  program's own CPU.
 *
 *	  Prints progress lines and one "summary key=value ..." line.
 *
 *	  usage: serveload BASE_URL BEARER API_TOKEN CONNINFO PGDATA GW_PID FEED FEED_ID
 *			 SHARDS CLIENTS SECONDS RATE SSE_PERCENT THREADS
 *	  (BASE_URL e.g. http://127.0.0.1:8080, API_TOKEN the discovery call's token)
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <dirent.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>
#include <libpq-fe.h>

#define BIN_US		10			/* histogram bin */
#define NBINS		(1 << 20)	/* 10.5 s; later ones go to the last bin */
#define SHARD_BIN_US 100		/* per-shard histogram bin */
#define SHARD_NBINS	(1 << 17)	/* 13.1 s */
#define CONNECT_S	180			/* all clients served within this, or the run fails */
#define DRAIN_S		15			/* after writing: the clients reach the last number */
#define RAMP_PER_MS	2			/* clients started per millisecond, per thread */

/* One streaming client. */
typedef struct Client
{
	CURL	   *easy;
	struct Worker *w;
	int			shard;
	bool		sse;
	bool		served;			/* 200 and the first bytes */
	bool		ended;			/* the transfer ended (dropped) */
	long long	last;			/* last number received */
	long long	gaps;
	long long	repeats;
	char	   *line;			/* a partial line */
	size_t		len;
	size_t		cap;
} Client;

/* A client thread: its clients, multi handle, epoll set, counters. */
typedef struct Worker
{
	pthread_t	thread;
	CURLM	   *multi;
	int			epfd;
	long		timeout_ms;		/* curl's timer, -1: none */
	Client	   *clients;
	int			nclients;
	int			added;
	long long	events;
	long long	untimed;		/* no commit time known (yet) */
	unsigned   *hist;			/* commit -> delivered */
	unsigned   *stamp_hist;		/* stamped_at -> delivered */
	unsigned   *shard_hist;		/* commit -> delivered, per shard */
	atomic_int	served;
	atomic_int	ended;
} Worker;

static const char *base_url;
static const char *bearer;
static const char *api_token;
static const char *feed;
static int	feed_id;
static int	nshards;
static long long *heads;		/* each shard's head when the run starts */
static atomic_bool stopping;

/* Commit times, indexed by change_id - first_id (ns, CLOCK_MONOTONIC). */
static _Atomic long long first_id = -1;
static _Atomic long long *commit_ns;
static long long ncommits_max;

static long long
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void
die(const char *what, const char *detail)
{
	fprintf(stderr, "serveload: %s: %s\n", what, detail);
	exit(1);
}

static PGconn *
connect_db(const char *conninfo)
{
	PGconn	   *conn = PQconnectdb(conninfo);

	if (PQstatus(conn) != CONNECTION_OK)
		die("connect", PQerrorMessage(conn));
	return conn;
}

static long long
query_int(PGconn *conn, const char *sql)
{
	PGresult   *res = PQexec(conn, sql);
	long long	v;

	if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1)
		die(sql, PQerrorMessage(conn));
	v = atoll(PQgetvalue(res, 0, 0));
	PQclear(res);
	return v;
}

/* The value of "key" : NUMBER in an event object, or -1. */
static long long
field(const char *json, const char *key)
{
	const char *p = strstr(json, key);

	if (p == NULL)
		return -1;
	p += strlen(key);
	while (*p == '"' || *p == ' ' || *p == ':')
		p++;
	return strtoll(p, NULL, 10);
}

/* Microseconds since the epoch of the event's "stamped_at" (UTC), or -1. */
static long long
stamped_us(const char *json)
{
	const char *p = strstr(json, "\"stamped_at\"");
	struct tm	tm = {0};
	int			us = 0;
	int			digits = 0;

	if (p == NULL || (p = strchr(p + 12, '"')) == NULL ||
		sscanf(p + 1, "%4d-%2d-%2dT%2d:%2d:%2d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
			   &tm.tm_hour, &tm.tm_min, &tm.tm_sec) != 6)
		return -1;
	tm.tm_year -= 1900;
	tm.tm_mon -= 1;
	if (p[20] == '.')
		for (p += 21; *p >= '0' && *p <= '9'; p++, digits++)
			us = us * 10 + (*p - '0');
	while (digits++ < 6)
		us *= 10;
	return timegm(&tm) * 1000000LL + us;
}

/* Count a latency of us microseconds into a histogram. */
static void
count(unsigned *hist, long long us)
{
	long long	bin = us < 0 ? 0 : us / BIN_US;

	hist[bin >= NBINS ? NBINS - 1 : bin]++;
}

/* One event (its JSON object) received by c. */
static void
event(Client *c, const char *json)
{
	Worker	   *w = c->w;
	long long	number = field(json, "\"number\"");
	long long	id = field(json, "\"change_id\"");
	long long	base = atomic_load(&first_id);
	long long	t = 0;
	long long	stamped = stamped_us(json);
	struct timespec now;

	clock_gettime(CLOCK_REALTIME, &now);
	if (stamped >= 0)
		count(w->stamp_hist, now.tv_sec * 1000000LL + now.tv_nsec / 1000 - stamped);
	if (number != c->last + 1)
	{
		if (number <= c->last)
			c->repeats++;
		else
			c->gaps++;
	}
	if (number > c->last)
		c->last = number;
	w->events++;
	if (base >= 0 && id >= base && id - base < ncommits_max)
		t = atomic_load(&commit_ns[id - base]);
	if (t == 0)
		w->untimed++;
	else
	{
		long long	us = (now_ns() - t) / 1000;
		long long	bin = us < 0 ? 0 : us / SHARD_BIN_US;

		count(w->hist, us);
		w->shard_hist[(long long) c->shard * SHARD_NBINS +
					  (bin >= SHARD_NBINS ? SHARD_NBINS - 1 : bin)]++;
	}
}

/* One complete line of c's response. */
static void
line(Client *c, char *s)
{
	if (c->sse)
	{
		if (strncmp(s, "data: ", 6) == 0)
			event(c, s + 6);
	}
	else if (strncmp(s, "{\"data\":", 8) == 0)
		event(c, s + 8);
}

/* curl's write callback: split into lines. */
static size_t
on_data(char *data, size_t size, size_t n, void *arg)
{
	Client	   *c = arg;
	size_t		total = size * n;
	long		status = 0;

	if (!c->served)
	{
		curl_easy_getinfo(c->easy, CURLINFO_RESPONSE_CODE, &status);
		if (status != 200)
			return 0;			/* ends the transfer: dropped */
		c->served = true;
		atomic_fetch_add(&c->w->served, 1);
	}
	while (total > 0)
	{
		char	   *nl = memchr(data, '\n', total);
		size_t		len = nl ? (size_t) (nl - data) : total;

		if (c->len + len + 1 > c->cap)
		{
			c->cap = (c->len + len + 1) * 2;
			if ((c->line = realloc(c->line, c->cap)) == NULL)
				die("realloc", "out of memory");
		}
		memcpy(c->line + c->len, data, len);
		c->len += len;
		if (nl == NULL)
			break;
		c->line[c->len] = '\0';
		line(c, c->line);
		c->len = 0;
		data += len + 1;
		total -= len + 1;
	}
	return size * n;
}

/* CURLMOPT_SOCKETFUNCTION: keep the epoll set in step. */
static int
on_socket(CURL *easy, curl_socket_t fd, int what, void *arg, void *sockp)
{
	Worker	   *w = arg;
	struct epoll_event ev = {0};

	(void) easy;
	ev.data.fd = fd;
	if (what == CURL_POLL_REMOVE)
	{
		epoll_ctl(w->epfd, EPOLL_CTL_DEL, fd, NULL);
		return 0;
	}
	ev.events = (what & CURL_POLL_IN ? EPOLLIN : 0) | (what & CURL_POLL_OUT ? EPOLLOUT : 0);
	if (sockp == NULL)
	{
		epoll_ctl(w->epfd, EPOLL_CTL_ADD, fd, &ev);
		curl_multi_assign(w->multi, fd, w);	/* marks it known */
	}
	else
		epoll_ctl(w->epfd, EPOLL_CTL_MOD, fd, &ev);
	return 0;
}

/* CURLMOPT_TIMERFUNCTION */
static int
on_timer(CURLM *multi, long timeout_ms, void *arg)
{
	(void) multi;
	((Worker *) arg)->timeout_ms = timeout_ms;
	return 0;
}

static void
add_client(Worker *w, Client *c)
{
	char		url[512];
	struct curl_slist *hdrs = NULL;
	char		auth[256];

	if (c->sse)
		snprintf(url, sizeof(url), "%s/feeds/%s?partition=%d&cursor=%lld",
				 base_url, feed, c->shard, heads[c->shard]);
	else
		snprintf(url, sizeof(url), "%s/feeds/%s?token=%s&partition=%d&cursor=%lld&stream=y",
				 base_url, feed, api_token, c->shard, heads[c->shard]);
	snprintf(auth, sizeof(auth), "Authorization: Bearer %s", bearer);
	hdrs = curl_slist_append(hdrs, auth);
	if (c->sse)
		hdrs = curl_slist_append(hdrs, "Accept: text/event-stream");
	c->easy = curl_easy_init();
	curl_easy_setopt(c->easy, CURLOPT_URL, url);
	curl_easy_setopt(c->easy, CURLOPT_HTTPHEADER, hdrs);	/* kept: freed at exit */
	curl_easy_setopt(c->easy, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(c->easy, CURLOPT_WRITEDATA, c);
	curl_easy_setopt(c->easy, CURLOPT_PRIVATE, c);
	curl_easy_setopt(c->easy, CURLOPT_CONNECTTIMEOUT, (long) CONNECT_S);
	curl_easy_setopt(c->easy, CURLOPT_BUFFERSIZE, 4096L);
	curl_easy_setopt(c->easy, CURLOPT_NOSIGNAL, 1L);
	curl_multi_add_handle(w->multi, c->easy);
}

/* Transfers that ended: their clients are dropped. */
static void
reap(Worker *w)
{
	CURLMsg    *m;
	int			left;

	while ((m = curl_multi_info_read(w->multi, &left)) != NULL)
		if (m->msg == CURLMSG_DONE)
		{
			Client	   *c;

			curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **) &c);
			if (!c->ended && !atomic_load(&stopping))
				fprintf(stderr, "client %ld (shard %d) ended: %s\n", (long) (c - w->clients),
						c->shard, curl_easy_strerror(m->data.result));
			c->ended = true;
			atomic_fetch_add(&w->ended, 1);
		}
}

static void *
worker_main(void *arg)
{
	Worker	   *w = arg;
	struct epoll_event evs[256];
	int			running;
	long long	ramp_from = now_ns();

	while (!atomic_load(&stopping))
	{
		long long	due = (now_ns() - ramp_from) / 1000000 * RAMP_PER_MS + RAMP_PER_MS;
		int			wait_ms = w->timeout_ms < 0 || w->timeout_ms > 100 ? 100 : (int) w->timeout_ms;
		int			n;

		while (w->added < w->nclients && w->added < due)
			add_client(w, &w->clients[w->added++]);
		if (w->added < w->nclients)
			wait_ms = 1;
		n = epoll_wait(w->epfd, evs, 256, wait_ms);
		if (n == 0 || w->timeout_ms == 0)
			curl_multi_socket_action(w->multi, CURL_SOCKET_TIMEOUT, 0, &running);
		for (int i = 0; i < n; i++)
			curl_multi_socket_action(w->multi, evs[i].data.fd,
									 (evs[i].events & EPOLLIN ? CURL_CSELECT_IN : 0) |
									 (evs[i].events & EPOLLOUT ? CURL_CSELECT_OUT : 0) |
									 (evs[i].events & (EPOLLERR | EPOLLHUP) ? CURL_CSELECT_ERR : 0),
									 &running);
		reap(w);
	}
	return NULL;
}

/* Writer */
static int	rate;
static int	seconds;
static const char *conninfo;
static long long published;
static long long *per_shard;
static double write_s;

static void *
writer_main(void *arg)
{
	PGconn	   *conn = connect_db(conninfo);
	char		f[16];
	char		s[16];
	const char *params[2] = {f, s};
	long long	total = (long long) rate * seconds;
	long long	start = now_ns();

	(void) arg;
	snprintf(f, sizeof(f), "%d", feed_id);
	if (PQprepare(conn, "p", "select cfeed.publish($1::int, $2::int)", 2, NULL) == NULL)
		die("prepare", PQerrorMessage(conn));
	for (long long i = 0; i < total && now_ns() - start < seconds * 1000000000LL; i++)
	{
		long long	at = start + (i / 2) * 2000000000LL / rate;	/* pairs */
		struct timespec ts = {at / 1000000000LL, at % 1000000000LL};
		PGresult   *res;
		long long	id;
		long long	t;

		clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
		snprintf(s, sizeof(s), "%lld", i % nshards);
		res = PQexecPrepared(conn, "p", 2, params, NULL, NULL, 0);
		t = now_ns();
		if (PQresultStatus(res) != PGRES_TUPLES_OK)
			die("publish", PQerrorMessage(conn));
		id = atoll(PQgetvalue(res, 0, 0));
		PQclear(res);
		if (i == 0)
			atomic_store(&first_id, id);
		if (id - first_id >= 0 && id - first_id < ncommits_max)
			atomic_store(&commit_ns[id - first_id], t);
		per_shard[i % nshards]++;
		published++;
	}
	write_s = (now_ns() - start) / 1e9;
	PQfinish(conn);
	return NULL;
}

/* CPU (user + system) of /proc/PID/stat in clock ticks; children: the reaped ones too. */
static long long
proc_cpu(int pid, bool children, int *ppid)
{
	char		path[64];
	char		buf[1024];
	FILE	   *f;
	char	   *p;
	unsigned long long ut = 0, st = 0, cut = 0, cst = 0;
	int			pp = 0;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	if ((f = fopen(path, "r")) == NULL)
		return -1;
	p = fgets(buf, sizeof(buf), f);
	fclose(f);
	if (p == NULL || (p = strrchr(buf, ')')) == NULL)
		return -1;
	/* fields 3.. after ") ": state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime cutime cstime */
	if (sscanf(p + 2, "%*c %d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %llu %llu",
			   &pp, &ut, &st, &cut, &cst) != 5)
		return -1;
	if (ppid)
		*ppid = pp;
	return ut + st + (children ? cut + cst : 0);
}

/* The cluster's CPU (ticks): the postmaster with its reaped children, and its live children. */
static long long
cluster_cpu(int pm)
{
	long long	sum = proc_cpu(pm, true, NULL);
	DIR		   *d = opendir("/proc");
	struct dirent *e;

	while ((e = readdir(d)) != NULL)
	{
		int			pid;
		int			ppid;
		long long	v;

		if (!isdigit((unsigned char) e->d_name[0]))
			continue;
		pid = atoi(e->d_name);
		if ((v = proc_cpu(pid, false, &ppid)) >= 0 && ppid == pm)
			sum += v;
	}
	closedir(d);
	return sum;
}

static long
rss_kb(int pid)
{
	char		path[64];
	char		buf[256];
	long		kb = -1;
	FILE	   *f;

	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	if ((f = fopen(path, "r")) == NULL)
		return -1;
	while (fgets(buf, sizeof(buf), f))
		if (sscanf(buf, "VmRSS: %ld", &kb) == 1)
			break;
	fclose(f);
	return kb;
}

static double
self_cpu_s(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

static int
sum_workers(Worker *ws, int n, bool served)
{
	int			s = 0;

	for (int i = 0; i < n; i++)
		s += served ? atomic_load(&ws[i].served) : atomic_load(&ws[i].ended);
	return s;
}

/* The q-quantile of a histogram of nbins bins of bin_us, in ms. */
static double
quantile_of(const unsigned long long *h, int nbins, int bin_us, unsigned long long n, double q)
{
	unsigned long long want = (unsigned long long) (q * n);
	unsigned long long seen = 0;

	for (int b = 0; b < nbins; b++)
		if ((seen += h[b]) > want)
			return (b + 0.5) * bin_us / 1000.0;
	return 0;
}

/* The q-quantile of the merged histogram, in ms. */
static double
quantile(const unsigned long long *h, unsigned long long n, double q)
{
	return quantile_of(h, NBINS, BIN_US, n, q);
}

/*
 * worst_shard
 *		The highest per-shard p99 and max (ms) of the workers' per-shard
 *		histograms, and the shard with that p99.
 */
static void
worst_shard(Worker *ws, int nthreads, double *p99, double *max, int *which)
{
	unsigned long long *h = calloc(SHARD_NBINS, sizeof(unsigned long long));

	*p99 = *max = 0;
	*which = -1;
	for (int s = 0; s < nshards; s++)
	{
		unsigned long long n = 0;
		double		q;
		double		m;

		memset(h, 0, SHARD_NBINS * sizeof(unsigned long long));
		for (int t = 0; t < nthreads; t++)
		{
			const unsigned *sh = &ws[t].shard_hist[(long long) s * SHARD_NBINS];

			for (int b = 0; b < SHARD_NBINS; b++)
			{
				h[b] += sh[b];
				n += sh[b];
			}
		}
		if (n == 0)
			continue;
		q = quantile_of(h, SHARD_NBINS, SHARD_BIN_US, n, 0.99);
		m = quantile_of(h, SHARD_NBINS, SHARD_BIN_US, n, 1.0 - 1e-12);
		if (q > *p99)
		{
			*p99 = q;
			*which = s;
		}
		if (m > *max)
			*max = m;
	}
	free(h);
}

int
main(int argc, char **argv)
{
	const char *pgdata;
	int			gw;
	int			nclients;
	int			sse_pct;
	int			nthreads;
	int			pm;
	PGconn	   *mon;
	Worker	   *ws;
	pthread_t	writer;
	FILE	   *f;
	char		path[1024];
	long long	t0;
	long long	gw0, gw1, db0, db1;
	long		rss_idle, rss_served, rss_end;
	double		cpu0, cpu1, win_s;
	int			backends = 0;
	long long	events = 0, untimed = 0, gaps = 0, repeats = 0;
	int			gapped = 0, incomplete = 0, dropped;
	unsigned long long *hist;
	unsigned long long *shist;
	unsigned long long nhist = 0;
	unsigned long long nshist = 0;
	int			ticks = sysconf(_SC_CLK_TCK);

	if (argc != 15)
	{
		fprintf(stderr, "usage: serveload BASE_URL BEARER API_TOKEN CONNINFO PGDATA GW_PID FEED FEED_ID "
				"SHARDS CLIENTS SECONDS RATE SSE_PERCENT THREADS\n");
		return 2;
	}
	base_url = argv[1];
	bearer = argv[2];
	api_token = argv[3];
	conninfo = argv[4];
	pgdata = argv[5];
	gw = atoi(argv[6]);
	feed = argv[7];
	feed_id = atoi(argv[8]);
	nshards = atoi(argv[9]);
	nclients = atoi(argv[10]);
	seconds = atoi(argv[11]);
	rate = atoi(argv[12]);
	sse_pct = atoi(argv[13]);
	nthreads = atoi(argv[14]);

	snprintf(path, sizeof(path), "%s/postmaster.pid", pgdata);
	if ((f = fopen(path, "r")) == NULL || fscanf(f, "%d", &pm) != 1)
		die("postmaster.pid", path);
	fclose(f);
	curl_global_init(CURL_GLOBAL_DEFAULT);
	mon = connect_db(conninfo);
	heads = calloc(nshards, sizeof(long long));
	per_shard = calloc(nshards, sizeof(long long));
	for (int s = 0; s < nshards; s++)
	{
		char		sql[128];

		snprintf(sql, sizeof(sql), "select cfeed.head(%d, %d)", feed_id, s);
		heads[s] = query_int(mon, sql);
	}
	ncommits_max = (long long) rate * seconds + 1;
	commit_ns = calloc(ncommits_max, sizeof(long long));

	rss_idle = rss_kb(gw);
	ws = calloc(nthreads, sizeof(Worker));
	for (int t = 0; t < nthreads; t++)
	{
		Worker	   *w = &ws[t];

		w->multi = curl_multi_init();
		w->epfd = epoll_create1(0);
		w->timeout_ms = -1;
		w->hist = calloc(NBINS, sizeof(unsigned));
		w->stamp_hist = calloc(NBINS, sizeof(unsigned));
		w->shard_hist = calloc((size_t) nshards * SHARD_NBINS, sizeof(unsigned));
		curl_multi_setopt(w->multi, CURLMOPT_SOCKETFUNCTION, on_socket);
		curl_multi_setopt(w->multi, CURLMOPT_SOCKETDATA, w);
		curl_multi_setopt(w->multi, CURLMOPT_TIMERFUNCTION, on_timer);
		curl_multi_setopt(w->multi, CURLMOPT_TIMERDATA, w);
		curl_multi_setopt(w->multi, CURLMOPT_MAXCONNECTS, (long) nclients);
		w->nclients = nclients / nthreads + (t < nclients % nthreads);
		w->clients = calloc(w->nclients, sizeof(Client));
		for (int i = 0; i < w->nclients; i++)
		{
			int			g = i * nthreads + t;	/* the client's number overall */

			w->clients[i].w = w;
			w->clients[i].shard = g % nshards;
			w->clients[i].sse = (g % 100) < sse_pct;
			w->clients[i].last = heads[g % nshards];
		}
	}
	t0 = now_ns();
	for (int t = 0; t < nthreads; t++)
		pthread_create(&ws[t].thread, NULL, worker_main, &ws[t]);
	while (sum_workers(ws, nthreads, true) + sum_workers(ws, nthreads, false) < nclients &&
		   now_ns() - t0 < CONNECT_S * 1000000000LL)
		usleep(100000);
	printf("served %d of %d clients in %.1f s (%d ended)\n", sum_workers(ws, nthreads, true), nclients,
		   (now_ns() - t0) / 1e9, sum_workers(ws, nthreads, false));
	fflush(stdout);
	sleep(1);					/* connections settle */
	rss_served = rss_kb(gw);

	/* the writing window */
	gw0 = proc_cpu(gw, false, NULL);
	db0 = cluster_cpu(pm);
	cpu0 = self_cpu_s();
	t0 = now_ns();
	pthread_create(&writer, NULL, writer_main, NULL);
	for (int i = 0; i < seconds; i++)
	{
		int			b;

		sleep(1);
		b = (int) query_int(mon, "select count(*) from pg_stat_activity where application_name = 'cfeed serve'");
		if (b > backends)
			backends = b;
	}
	pthread_join(writer, NULL);
	win_s = (now_ns() - t0) / 1e9;
	usleep(200000);				/* the last commits are stamped and sent */
	gw1 = proc_cpu(gw, false, NULL);
	db1 = cluster_cpu(pm);
	cpu1 = self_cpu_s();
	rss_end = rss_kb(gw);

	/* drain: every live client at its shard's last number */
	t0 = now_ns();
	for (;;)
	{
		int			behind = 0;

		for (int t = 0; t < nthreads; t++)
			for (int i = 0; i < ws[t].nclients; i++)
			{
				Client	   *c = &ws[t].clients[i];

				if (!c->ended && c->last < heads[c->shard] + per_shard[c->shard])
					behind++;
			}
		if (behind == 0 || now_ns() - t0 > DRAIN_S * 1000000000LL)
			break;
		usleep(100000);
	}
	atomic_store(&stopping, true);
	for (int t = 0; t < nthreads; t++)
		pthread_join(ws[t].thread, NULL);

	hist = calloc(NBINS, sizeof(unsigned long long));
	shist = calloc(NBINS, sizeof(unsigned long long));
	for (int t = 0; t < nthreads; t++)
	{
		events += ws[t].events;
		untimed += ws[t].untimed;
		for (int b = 0; b < NBINS; b++)
		{
			hist[b] += ws[t].hist[b];
			nhist += ws[t].hist[b];
			shist[b] += ws[t].stamp_hist[b];
			nshist += ws[t].stamp_hist[b];
		}
		for (int i = 0; i < ws[t].nclients; i++)
		{
			Client	   *c = &ws[t].clients[i];

			gaps += c->gaps;
			repeats += c->repeats;
			gapped += (c->gaps + c->repeats) > 0;
			incomplete += c->last != heads[c->shard] + per_shard[c->shard];
		}
	}
	dropped = sum_workers(ws, nthreads, false);
	{
		long long	expected = 0;
		double		shard_p99;
		double		shard_max;
		int			shard_worst;

		worst_shard(ws, nthreads, &shard_p99, &shard_max, &shard_worst);

		for (int t = 0; t < nthreads; t++)
			for (int i = 0; i < ws[t].nclients; i++)
				expected += per_shard[ws[t].clients[i].shard];
		printf("summary clients=%d served=%d dropped=%d complete=%d incomplete=%d gapped=%d gaps=%lld repeats=%lld "
			   "published=%lld rate=%.0f events=%lld expected=%lld untimed=%lld p50=%.2f p90=%.2f p99=%.2f max=%.2f "
			   "shard_p99=%.2f shard_max=%.2f shard_worst=%d stamp_p50=%.2f stamp_p99=%.2f gw_cpu_pct=%.1f gw_rss_idle_kb=%ld gw_rss_served_kb=%ld gw_rss_end_kb=%ld "
			   "db_cpu_us_per_commit=%.0f db_cpu_pct=%.1f backends=%d client_cpu_pct=%.1f window_s=%.1f\n",
			   nclients, sum_workers(ws, nthreads, true), dropped, nclients - incomplete, incomplete, gapped,
			   gaps, repeats, published, published / write_s, events, expected, untimed,
			   quantile(hist, nhist, 0.5), quantile(hist, nhist, 0.9), quantile(hist, nhist, 0.99),
			   quantile(hist, nhist, 1.0 - 1e-12), shard_p99, shard_max, shard_worst, quantile(shist, nshist, 0.5), quantile(shist, nshist, 0.99),
			   100.0 * (gw1 - gw0) / ticks / win_s, rss_idle, rss_served, rss_end,
			   published ? (db1 - db0) * 1e6 / ticks / published : 0, 100.0 * (db1 - db0) / ticks / win_s,
			   backends, 100.0 * (cpu1 - cpu0) / win_s, win_s);
	}
	PQfinish(mon);
	return 0;
}
