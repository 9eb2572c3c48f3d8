#!/usr/bin/env bash
# `cfeed serve` with many streaming clients (rows 7a and 7b,
# test/bench/README.md).  The gateway built from the tree (src/client/cfeed,
# else the installed one) in front of a throwaway cluster with a feed of
# SHARDS shards; serveload.c (libcurl multi, epoll) opens the clients, 10% of
# them Server-Sent Events and the rest FeedAPI NDJSON streams, client i on
# shard i % SHARDS, and a writer publishes one change per autocommit
# transaction at a fixed rate, in pairs: two commits back to back on two
# shards, the shards in turn (a second shard's commit must not wait for
# the next one).  Commit -> delivered is reported over all shards (p50,
# p99, max) and for the worst shard (its p99, and the highest max).
# Three phases, the
# gateway restarted for each:
#   A  1,000 clients, RATE commits/s     row 7a: commit -> delivered p50,
#                                        p99 and max across the shards
#   B  1,000 clients, RATE/10 commits/s  the baseline of row 7b
#   C  CLIENTS clients, RATE/10          row 7b: all served, gapless;
#                                        the gateway's backends; the
#                                        database's CPU per commit vs B
# Why RATE/10 for 10,000 clients: every commit goes to CLIENTS/SHARDS
# clients, so the deliveries per second are RATE × CLIENTS / SHARDS; phases
# A and C deliver the same number per second (62,500 with the defaults),
# what the 2 cores can carry beside the database and the load client.
# Usage: bash test/bench/serve.sh [clients] [seconds] [rate]
# (env SMALL: the clients of phases A and B, 1,000 by default, for the
# curve of commit -> delivered against the clients at one rate)
. "$(dirname "$0")/lib.sh"
CLIENTS=${1:-10000}
SECS=${2:-10}
RATE=${3:-1000}
SHARDS=16
SMALL=${SMALL:-1000}
LOW=$((RATE / 10))
SSE_PCT=10
THREADS=2
HTTP_PORT=$((BENCH_PORT + 1))
TOKEN=bench-token-0123456789abcdef
READERS=2						# --readers (the default)
root=$(cd "$(dirname "$0")/../.." && pwd)
CFEED=$root/src/client/cfeed
[ -x "$CFEED" ] || CFEED=$(pg_config --bindir)/cfeed
if [ "$(id -u)" = 0 ] && ! dpkg -s libcurl4-openssl-dev >/dev/null 2>&1; then
	{ apt-get install -y -q libcurl4-openssl-dev || { apt-get update -q && apt-get install -y -q libcurl4-openssl-dev; }; } >/dev/null 2>&1
fi
# 10,000 clients: a descriptor each in the gateway and in the load client
ulimit -Hn 65536 2>/dev/null || true
ulimit -n "$(ulimit -Hn)"
if [ "$(ulimit -n)" -lt $((CLIENTS + 1000)) ]; then
	echo "ulimit -n is $(ulimit -n): too low for $CLIENTS clients (run as root)" >&2
	exit 1
fi
cc_tool serveload -lcurl -lpthread
bench_start
bench_settings
echo "machine load: $(cut -d' ' -f1-3 /proc/loadavg); gateway $CFEED; load client: $THREADS threads"
psqlc -c "CREATE EXTENSION cfeed" >/dev/null
FEED_ID=$(psqlc -c "SELECT cfeed.create_feed('bench', $SHARDS)")
printf '%s * bench\n' "$TOKEN" > "$BENCH_DIR/tokens"
chmod 600 "$BENCH_DIR/tokens"

# phase NAME CLIENTS RATE: a fresh gateway, the load client's run; prints its summary line
phase()
{
	local name=$1 n=$2 rate=$3 gw api out
	"$CFEED" serve --dbname "$CONNINFO user=postgres" --port "$HTTP_PORT" --tokens "$BENCH_DIR/tokens" \
		--readers "$READERS" --max-clients $((CLIENTS + 100)) --log-level warning 2>>"$BENCH_DIR/gateway.log" &
	gw=$!
	for _ in $(seq 100); do
		curl -sf "http://127.0.0.1:$HTTP_PORT/healthz" >/dev/null 2>&1 && break
		sleep 0.1
	done
	api=$(curl -sf -H "Authorization: Bearer $TOKEN" "http://127.0.0.1:$HTTP_PORT/feeds/bench" | sed -n 's/.*"token":"\([^"]*\)".*/\1/p')
	[ -n "$api" ] || { echo "the gateway did not start: $(tail -5 "$BENCH_DIR/gateway.log")" >&2; exit 1; }
	out=$("$BENCH_DIR/serveload" "http://127.0.0.1:$HTTP_PORT" "$TOKEN" "$api" "$CONNINFO user=postgres" \
		"$BENCH_DIR/data" "$gw" bench "$FEED_ID" "$SHARDS" "$n" "$SECS" "$rate" "$SSE_PCT" "$THREADS" \
		2> >(sed "s/^/$name: /" | head -20 >&2))
	kill -TERM "$gw"
	wait "$gw" || echo "$name: the gateway exited with $?" >&2
	echo "$out" | sed "s/^/$name: /" >&2
	echo "$out" | grep '^summary '
}
# get LINE KEY: the value of KEY=value in a summary line
get() { echo "$1" | sed -n "s/.* $2=\([^ ]*\).*/\1/p"; }
# per_client LINE: the gateway's RSS per client (kB) over its RSS before the clients
per_client() { calc "($(get "$1" gw_rss_end_kb) - $(get "$1" gw_rss_idle_kb)) / $(get "$1" clients)" 1; }
# clean LINE: every client served, none dropped, each got every event, gapless and in order
clean() { [ "$(get "$1" served)" = "$(get "$1" clients)" ] && [ "$(get "$1" dropped)" = 0 ] && [ "$(get "$1" incomplete)" = 0 ] && [ "$(get "$1" gapped)" = 0 ]; }
# figures LINE: what a row shows of a run
figures()
{
	echo "served $(get "$1" served)/$(get "$1" clients), dropped $(get "$1" dropped), incomplete $(get "$1" incomplete), gaps $(get "$1" gaps), repeats $(get "$1" repeats); $(get "$1" events) events at $(get "$1" rate) commits/s; commit → delivered over $SHARDS shards p50 $(get "$1" p50), p99 $(get "$1" p99), max $(get "$1" max) ms, worst shard p99 $(get "$1" shard_p99), max $(get "$1" shard_max) ms; gateway $(get "$1" gw_cpu_pct)% of a core, RSS $(get "$1" gw_rss_end_kb) kB ($(get "$1" gw_rss_idle_kb) kB without clients: $(per_client "$1") kB per client); $(get "$1" backends) backends; database $(get "$1" db_cpu_us_per_commit) µs CPU per commit; load client $(get "$1" client_cpu_pct)% CPU"
}

a=$(phase A "$SMALL" "$RATE")
b=$(phase B "$SMALL" "$LOW")
c=$(phase C "$CLIENTS" "$LOW")
for l in "$a" "$b" "$c"; do [ -n "$l" ] || { echo "a phase gave no summary" >&2; exit 1; }; done
met_a=no
clean "$a" && [ "$(yesno "$(get "$a" p50) <= 5")" = yes ] && met_a=yes
ratio=$(calc "$(get "$c" db_cpu_us_per_commit) / $(get "$b" db_cpu_us_per_commit)")
met_c=no
clean "$c" && [ "$(get "$c" backends)" -le $((1 + READERS)) ] && [ "$(yesno "$ratio <= 1.2")" = yes ] && met_c=yes
result "7a. cfeed serve, $SMALL streaming clients ($SHARDS shards, $((SMALL / SHARDS)) clients each; $SSE_PCT% SSE), $RATE commits/s" \
	"all served, gapless; commit → delivered p50 ≤ 5 ms" "$(figures "$a")" "-" \
	"p50 $(get "$a" p50), p99 $(get "$a" p99), max $(get "$a" max) ms" "$met_a"
result "7b. cfeed serve, $CLIENTS streaming clients ($SHARDS shards, $((CLIENTS / SHARDS)) clients each; $SSE_PCT% SSE), $LOW commits/s" \
	"all served, gapless; database backends ≤ 1 + --readers ($((1 + READERS))); database CPU per commit ≤ 1.2× with $SMALL clients" \
	"$(figures "$c")" "$SMALL clients at $LOW commits/s: $(get "$b" db_cpu_us_per_commit) µs per commit, $(get "$b" backends) backends; p50 $(get "$b" p50), p99 $(get "$b" p99) ms" \
	"database CPU per commit ${ratio}×; p50 $(get "$c" p50), p99 $(get "$c" p99), max $(get "$c" max) ms" "$met_c"
