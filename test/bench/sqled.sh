#!/usr/bin/env bash
# The SQL edition beside the C extension and PgQ (rows 10a-10c,
# test/bench/README.md), in one cluster: the C extension in database
# postgres (its background sweeper on), the SQL edition's script in database
# sqled, swept by `cfeed sweep` (the external sweeper) or by a sweep_loop
# session (what a pg_cron job runs).
#
#  10a  write overhead, 8 pgbench clients, SECS seconds a run, ROUNDS rounds
#       alternating the variants: an app row alone, in each database; with
#       cfeed.publish() in each edition (the SQL edition swept by `cfeed
#       sweep`, commit hints off, its default); with PgQ's insert_event.
#       Per variant: TPS, server CPU and WAL per transaction, p99 and max
#       (medians of the rounds); the ratios against the app row alone of
#       the same database and against PgQ.
#  10b  commit -> woken (latency.c's wait and listen modes, SAMPLES a run,
#       RUNS runs) against the NOTIFY of a flushed commit (notifywal, the
#       durable floor): the C edition; the SQL edition with `cfeed sweep`
#       (hints off, --poll-ms 100), with commit hints on, and with a
#       sweep_loop sleeping 100 ms (pg_cron's loop at its default).
#  10c  drain: N changes inserted in one statement, then swept until none
#       is pending (cfeed.sweep() in a loop, each sweep committed): the SQL
#       edition against the C edition's sweep and the insert itself.
#
# Usage: bash test/bench/sqled.sh [secs] [rounds] [samples] [changes]
# (RUNS: env).  Needs the SQL edition's script (make -C sqled) and the cfeed
# command (make), both made by the test suite's build.
. "$(dirname "$0")/lib.sh"
SECS=${1:-5}
ROUNDS=${2:-3}
SAMPLES=${3:-200}
N=${4:-100000}
RUNS=${RUNS:-2}
top=$(cd "$(dirname "$0")/../.." && pwd)
version=$(sed -n "s/^default_version = '\(.*\)'/\1/p" "$top/cfeed.control")
script="$top/sqled/cfeed-sql--$version.sql"
[ -f "$script" ] || make -s -C "$top/sqled" >/dev/null
cfeed_bin=$top/src/client/cfeed
[ -x "$cfeed_bin" ] || cfeed_bin=$(command -v cfeed) || { echo "sqled.sh: build the cfeed command first (make)" >&2; exit 1; }
cc_tool latency
bench_start
bench_settings
cp "$script" "$BENCH_DIR/cfeed-sql.sql"
chmod 644 "$BENCH_DIR/cfeed-sql.sql"
psqlc -c "CREATE DATABASE sqled"
for db in postgres sqled; do
	if [ "$db" = postgres ]; then
		BENCH_DB=$db psqlc -c "CREATE EXTENSION cfeed"
	else
		BENCH_DB=$db psqlc -f "$BENCH_DIR/cfeed-sql.sql" >/dev/null
	fi
	BENCH_DB=$db psqlc -c "SELECT cfeed.create_feed('probe', 1)" -c "SELECT cfeed.create_feed('bench', 4)" \
		-c "CREATE TABLE app (id bigserial PRIMARY KEY, note text NOT NULL)" -c "CREATE TABLE lat_probe (x int)" >/dev/null
done
pgq=no
if have_pgq; then
	psqlc -c "CREATE EXTENSION pgq" -c "SELECT pgq.create_queue('bench')" >/dev/null
	pgq=yes
else
	echo "sqled.sh: PgQ not installed, its variant skipped"
fi
SQLED_CONNINFO="host=$BENCH_DIR port=$BENCH_PORT dbname=sqled"

# the external sweeper of the SQL edition, in the background until stopped
sweeper_start()
{
	as_pg "$cfeed_bin" sweep -d "$SQLED_CONNINFO" --poll-ms "${1:-100}" >/dev/null 2>&1 &
	SWEEPER=$!
}
sweeper_stop()
{
	# as root $SWEEPER is runuser, which leaves its child running
	pkill -TERM -P "$SWEEPER" 2>/dev/null || true
	kill "$SWEEPER" 2>/dev/null || true
	wait "$SWEEPER" 2>/dev/null || true
}

# ---- 10a: write overhead ----
sql_file app.sql "INSERT INTO app (note) VALUES ('order');"
sql_file publish.sql "\\set s random(0, 3)" "INSERT INTO app (note) VALUES ('order');" "SELECT cfeed.publish(2, :s);"
sql_file pgq.sql "INSERT INTO app (note) VALUES ('order');" "SELECT pgq.insert_event('bench', 'order', 'x');"
variants="c_app c_publish sql_app sql_publish"
[ "$pgq" = no ] || variants="$variants pgq"
declare -A measured
sweeper_start
for round in $(seq 1 "$ROUNDS"); do
	for v in $variants; do
		case $v in
			c_app) db=postgres f=app.sql ;;
			c_publish) db=postgres f=publish.sql ;;
			sql_app) db=sqled f=app.sql ;;
			sql_publish) db=sqled f=publish.sql ;;
			pgq) db=postgres f=pgq.sql ;;
		esac
		line=$(BENCH_DB=$db tps_cpu 8 "$SECS" "$f")
		echo "round $round: $v: TPS CPU-us/tx WAL-B/tx p99-ms max-ms = $line"
		measured[$v]+="$line"$'\n'
	done
done
sweeper_stop
# med VARIANT FIELD: the median over the rounds of one field of tps_cpu's line
med() { printf '%s' "${measured[$1]}" | awk -v f="$2" 'NF { print $f }' | median; }
summary()
{
	echo "$1 $(med "$1" 1) tps, $(med "$1" 2) µs CPU and $(med "$1" 3) B WAL per tx, p99 $(med "$1" 4) ms, max $(med "$1" 5) ms"
}
for v in $variants; do summary "$v"; done
sql_ratio=$(calc "$(med sql_publish 1) / $(med sql_app 1)")
c_ratio=$(calc "$(med c_publish 1) / $(med c_app 1)")
pgq_text=""
[ "$pgq" = no ] || pgq_text="; PgQ insert_event $(calc "$(med pgq 1) / $(med c_app 1)")× its app row, the SQL edition $(calc "$(med sql_publish 1) / $(med pgq 1)")× PgQ"
result "10a. SQL edition: write overhead, publish() with an app row, 8 clients, $ROUNDS rounds of ${SECS} s (cfeed sweep, hints off)" \
	"≥ 0.85× the app row alone (as the C edition)" \
	"$(med sql_publish 1) tps, $(med sql_publish 2) µs CPU/tx, $(med sql_publish 3) B WAL/tx, p99 $(med sql_publish 4) ms" \
	"its app row alone $(med sql_app 1) tps; the C edition $(med c_publish 1) tps ($(med c_publish 3) B WAL/tx) against $(med c_app 1)" \
	"${sql_ratio}× its app row (C edition ${c_ratio}×)$pgq_text" \
	"$(yesno "$sql_ratio >= 0.85")"

# ---- 10b: commit -> woken ----
# latency_runs LABEL CONNINFO: latency.c's notifywal, wait and listen modes,
# RUNS runs, lines "LABEL MODE n=... p50=... p90=... p99=... max=..."
latency_runs()
{
	local run mode out
	for run in $(seq 1 "$RUNS"); do
		for mode in notifywal wait listen; do
			if out=$(as_pg "$BENCH_DIR/latency" "$2" "$mode" "$SAMPLES" 1 2>&1); then
				sed -n "s/^$mode /$1 $mode /p" <<<"$out"
			else
				echo "$1 $mode FAILED: $out"
			fi
		done
	done
}
{
	latency_runs c "$CONNINFO"
	sweeper_start 100
	latency_runs sweep "$SQLED_CONNINFO"
	BENCH_DB=sqled psqlc -c "ALTER TABLE cfeed.change ENABLE TRIGGER change_sweep_hint"
	latency_runs hints "$SQLED_CONNINFO"
	BENCH_DB=sqled psqlc -c "ALTER TABLE cfeed.change DISABLE TRIGGER change_sweep_hint"
	sweeper_stop
	BENCH_DB=sqled bg_sql loop "CALL cfeed.sweep_loop(0, 1000, 3600000, 100, null, null, null)"
	sleep 1
	latency_runs loop "$SQLED_CONNINFO"
	BENCH_DB=sqled stop_bg loop
} | tee "$BENCH_DIR/latency.out"
# p50 LABEL MODE: the median over the runs of a mode's p50 (ms)
p50() { awk -v l="$1" -v m="$2" '$1 == l && $2 == m { split($4, kv, "="); print kv[2] }' "$BENCH_DIR/latency.out" | median; }
p99() { awk -v l="$1" -v m="$2" '$1 == l && $2 == m { split($6, kv, "="); print kv[2] }' "$BENCH_DIR/latency.out" | median; }
result "10b. SQL edition: commit → woken (wait / LISTEN), $RUNS runs of $SAMPLES" \
	"measured beside the C edition (no target: no condition variable, no preload)" \
	"cfeed sweep: wait p50 $(p50 sweep wait) ms p99 $(p99 sweep wait); with commit hints p50 $(p50 hints wait) p99 $(p99 hints wait); sweep_loop sleeping 100 ms p50 $(p50 loop wait) p99 $(p99 loop wait); LISTEN p50 $(p50 sweep listen) / $(p50 hints listen) / $(p50 loop listen)" \
	"C edition: wait p50 $(p50 c wait) ms p99 $(p99 c wait), LISTEN p50 $(p50 c listen); NOTIFY of a flushed commit p50 $(p50 c notifywal) (C database) / $(p50 sweep notifywal) (SQL database)" \
	"hints: $(calc "$(p50 hints wait) / $(p50 c wait)" 1)× the C edition's p50" "-"

# ---- 10c: drain ----
timed()	# DB SQL: milliseconds
{
	local t0
	t0=$(now_ms)
	BENCH_DB=$1 psqlc -c "$2" >/dev/null
	echo $(( $(now_ms) - t0 ))
}
psqlc -c "ALTER SYSTEM SET cfeed.enable_sweeper = off" -c "SELECT pg_reload_conf()" >/dev/null
sleep 1
drain_sql="DO \$\$ BEGIN LOOP EXIT WHEN (SELECT coalesce(sum(change_count), 0) FROM cfeed.sweep()) = 0; COMMIT; END LOOP; END \$\$"
insert_sql="INSERT INTO cfeed.change (feed_id, shard, change_id) SELECT 2, g % 4, nextval('cfeed.change_id') FROM generate_series(1, $N) g"
declare -a sql_rates c_rates ins_rates
for round in $(seq 1 "$ROUNDS"); do
	for db in postgres sqled; do
		i=$(timed $db "$insert_sql")
		d=$(timed $db "$drain_sql")
		[ "$(BENCH_DB=$db pending)" = 0 ]
		echo "round $round: $db: inserted $N changes in $i ms, drained in $d ms ($((N * 1000 / d)) changes/s)"
		if [ $db = sqled ]; then sql_rates+=("$((N * 1000 / d))") ins_rates+=("$((N * 1000 / i))"); else c_rates+=("$((N * 1000 / d))"); fi
	done
done
sql_drain=$(printf '%s\n' "${sql_rates[@]}" | median)
c_drain=$(printf '%s\n' "${c_rates[@]}" | median)
ins=$(printf '%s\n' "${ins_rates[@]}" | median)
result "10c. SQL edition: drain of one commit of $N changes on 4 shards, $ROUNDS rounds" \
	"measured beside the C edition (its target: ≥ 2× the insert rate)" \
	"$sql_drain changes/s" "the C edition's sweep $c_drain changes/s; the one-statement insert into the SQL edition $ins rows/s" \
	"$(calc "$sql_drain / $c_drain")× the C edition; $(calc "$sql_drain / $ins")× the insert" "$(yesno "$sql_drain >= 2 * $ins")"
