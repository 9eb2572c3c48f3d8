#!/usr/bin/env bash
# Tracked-table write overhead (budget: a tracked INSERT costs at most 1.2x
# an untracked one, in TPS and in server CPU per INSERT; rows 1c and 1d,
# test/bench/README.md): pgbench TPS of single-row INSERTs into an
# untracked table and into the same table tracked by cfeed.track() (change +
# row image per row), same clients, same run, the background sweeper
# stamping meanwhile.  Prints the cost ratio untracked_tps / tracked_tps,
# and the ratio of the server's CPU time per transaction (all its processes,
# the sweeper included: what a tracked INSERT costs the machine, less
# sensitive than TPS to the shared machine's disk and neighbours), with the
# ratios of the WAL per transaction and of the p99 latency beside.
# Also a multi-row variant (100 rows per INSERT), where per-row trigger cost
# is not hidden behind commit, and a bulk load (one 200k-row INSERT).
#
# For reference, when PgQ is installed, its own way to track a table: the same table with
# PgQ's C row trigger pgq.logutriga, which queues every row change as an
# event (no sweeper: PgQ's consumers pay later, by batch).
#
# Each workload runs REPS times, untracked and tracked alternating, and the
# median of the per-pair ratios is reported: on a shared machine a single
# pair can be off by 2x either way.  For the CPU cost alone, without the
# machine's noise, see track_instructions.sh.
# Usage: bash test/bench/track.sh [seconds] [clients] [reps]
# BENCH_FSYNC=off measures CPU cost rather than commit-bound throughput;
# BENCH_EXTRA_CONF="cfeed.enable_sweeper = off" leaves the sweeper's CPU out.
# STORAGE (env): the storage of the tracking feed, rows (the default, as in
# make bench) or ranges; the rows' labels then say so.
. "$(dirname "$0")/lib.sh"
SECS=${1:-10}
CLIENTS=${2:-8}
REPS=${3:-3}
STORAGE=${STORAGE:-rows}
label=
[ "$STORAGE" = rows ] || label=", a feed stored in $STORAGE"
bench_start
bench_settings
psqlc -c "CREATE EXTENSION cfeed" -c "SET cfeed.default_storage = $STORAGE" -c "SELECT cfeed.create_feed('bench', 4)" >/dev/null
psqlc -c "CREATE TABLE plain (id bigserial PRIMARY KEY, payload text, change_id bigint)" \
      -c "CREATE TABLE tracked (id bigserial PRIMARY KEY, payload text, change_id bigint)" \
      -c "SELECT cfeed.track('tracked', 1)" >/dev/null
for t in plain tracked; do
	sql_file "$t.sql" "INSERT INTO $t (payload) VALUES ('hello');"
	sql_file "${t}100.sql" "INSERT INTO $t (payload) SELECT 'hello' FROM generate_series(1, 100);"
done
if have_pgq; then
	psqlc -c "CREATE EXTENSION pgq" -c "SELECT pgq.create_queue('q')" \
	      -c "CREATE TABLE pgqtracked (id bigserial PRIMARY KEY, payload text, change_id bigint)" \
	      -c "CREATE TRIGGER pgq AFTER INSERT OR UPDATE OR DELETE ON pgqtracked FOR EACH ROW EXECUTE FUNCTION pgq.logutriga('q')" >/dev/null
	sql_file pgqtracked.sql "INSERT INTO pgqtracked (payload) VALUES ('hello');"
	sql_file pgqtracked100.sql "INSERT INTO pgqtracked (payload) SELECT 'hello' FROM generate_series(1, 100);"
fi
# one 200k-row INSERT into $1, timed; the sweep of the previous one is
# waited for first, so that neither side's time carries it (in rows, the
# sweeper's 200k UPDATEs after a tracked load slowed the untracked load
# that followed: 2.78x in rows against 3.52x in ranges, where a load's
# stamps are cheap; alike, 3.9x both, once each load waits)
bulk()
{
	local s e
	swept
	psqlc -c "CHECKPOINT"
	s=$(now_ms)
	psqlc -c "INSERT INTO $1 (payload) SELECT 'hello' FROM generate_series(1, 200000)"
	e=$(now_ms)
	echo $((e - s))
}
# workload name, then "tps" (cost = untracked/tracked tps, and tracked/untracked
# server CPU, WAL and p99 latency per transaction: prints the four medians)
# or "ms" (tracked/untracked time); the tracked workload is tracked<name>,
# or $TRACKED when set
measure()
{
	local name=$1 unit=$2 i p t pc tc pw tw pl tl ratios="" cpus="" wals="" p99s=""
	for i in $(seq "$REPS"); do
		if [ "$unit" = tps ]; then
			read -r p pc pw pl _ < <(tps_cpu "$CLIENTS" "$SECS" "plain$name.sql")
			read -r t tc tw tl _ < <(tps_cpu "$CLIENTS" "$SECS" "${TRACKED:-tracked$name}.sql")
			ratios="$ratios $(calc "$p / $t" 3)"
			cpus="$cpus $(calc "$tc / $pc" 3)"
			wals="$wals $(calc "$tw / $pw" 3)"
			p99s="$p99s $(calc "$tl / $pl" 3)"
			echo "  $name run $i: untracked $p tps $pc us CPU $pw B WAL per txn p99 $pl ms, tracked $t tps $tc us $tw B p99 $tl ms" >&2
		else
			p=$(bulk plain); t=$(bulk tracked)
			ratios="$ratios $(calc "$t / $p" 3)"
			echo "  $name run $i: untracked $p ms, tracked $t ms" >&2
		fi
	done
	for r in "$ratios" "${cpus:-0}" "${wals:-0}" "${p99s:-0}"; do echo "$r" | xargs -n1 | median; done | paste -sd' '
}
read -r single single_cpu single_wal single_p99 < <(measure "" tps)
pgq="n/a" pgq_cpu="n/a"
if have_pgq; then
	read -r pgq pgq_cpu _ < <(TRACKED=pgqtracked measure "" tps)
fi
read -r multi multi_cpu _ < <(measure 100 tps)
pgq100="n/a" pgq100_cpu="n/a"
if have_pgq; then
	read -r pgq100 pgq100_cpu _ < <(TRACKED=pgqtracked100 measure 100 tps)
fi
read -r load _ < <(measure bulk ms)
psqlc -c "SELECT count(*) FROM cfeed.sweep()" >/dev/null
pending=$(pending)
echo "single-row INSERT, $CLIENTS clients: cost ratio tracked/untracked ${single}x in TPS, ${single_cpu}x in server CPU per INSERT (medians of $REPS)"
echo "  peer, the table tracked by PgQ's pgq.logutriga instead: ${pgq}x TPS, ${pgq_cpu}x CPU"
echo "100-row INSERT, $CLIENTS clients: cost ratio ${multi}x TPS, ${multi_cpu}x CPU (medians of $REPS)"
echo "  peer, pgq.logutriga: ${pgq100}x TPS, ${pgq100_cpu}x CPU"
echo "one 200k-row INSERT: cost ratio ${load}x (median of $REPS)"
echo "left pending at the end: $pending"
baseline="untracked, alternated, median of $REPS pairs; peer, the table tracked by PgQ's pgq.logutriga: ${pgq}× TPS, ${pgq_cpu}× CPU"
result "1c. tracked INSERT, TPS cost, $CLIENTS clients, sweeper on$label" "≤ 1.2× untracked" \
	"${single}× (100-row INSERTs ${multi}×, one 200k-row INSERT ${load}×)" "$baseline (100-row: ${pgq100}×)" "${single}×" "$(yesno "$single <= 1.2")"
result "1d. tracked INSERT, server CPU per INSERT, $CLIENTS clients, sweeper on$label" "≤ 1.2× untracked" \
	"${single_cpu}× (100-row INSERTs ${multi_cpu}×); WAL per INSERT ${single_wal}×, p99 latency ${single_p99}×" "$baseline (100-row: ${pgq100_cpu}×)" "${single_cpu}×" "$(yesno "$single_cpu <= 1.2")"
