#!/usr/bin/env bash
# Read throughput (SPEC §9 row 4): a consumer reading a whole log in
# 1000-row pages over libpq (readrate.c), rows/s: cfeed.read over an
# N-change shard vs the same query on cfeed.change directly (best of 2 each,
# alternated), vs PgQ batches of 1000 events and pg_logical_slot_get_changes
# over N/5 rows written in 1000-row transactions (read once: both consume;
# each get_changes call re-decodes from the slot's restart_lsn, so the
# logical rate falls with N: rows/s are comparable only at the same size).
# Usage: bash test/bench/read_rate.sh [N]
. "$(dirname "$0")/lib.sh"
N=${1:-1000000}
cc -O2 -Wall -o "$BENCH_DIR/readrate" "$(dirname "$0")/readrate.c" \
	-I"$(pg_config --includedir)" -L"$(pg_config --libdir)" -lpq
BENCH_EXTRA_CONF="$LOGICAL_CONF
cfeed.enable_sweeper = off" bench_start
bench_settings
psqlc -c "CREATE EXTENSION cfeed" -c "SELECT cfeed.create_feed('r', 1)" \
	-c "INSERT INTO cfeed.change (feed_id, shard, change_id) SELECT 1, 0, nextval('cfeed.change_id') FROM generate_series(1, $N)" >/dev/null
while [ "$(psqlc -c "SELECT coalesce(sum(change_count), 0) FROM cfeed.sweep()")" != 0 ]; do :; done
psqlc -c "VACUUM ANALYZE cfeed.change"
start=$(psqlc -c "SELECT min(change_sequence_number) - 1 FROM cfeed.change")
conninfo="host=$BENCH_DIR port=$BENCH_PORT dbname=postgres"
rate() { as_pg "$BENCH_DIR/readrate" "$conninfo" "$1" "$start" | awk '{print $3}'; }
best() { local a b; a=$(rate "$1"); b=$(rate "$1"); echo $((a > b ? a : b)); }
plain=$(rate plain); cfeed=$(rate cfeed)	# warm-up
plain=$(best plain); cfeed=$(best cfeed)
echo "plain index range (cfeed.read's query): $plain rows/s"
echo "cfeed.read:                             $cfeed rows/s (ratio $(calc "$cfeed / $plain"))"
pgq=n/a; w2j=n/a
if have_pgq; then
	psqlc -c "CREATE EXTENSION pgq" -c "SELECT pgq.create_queue('q')" \
		-c "SELECT pgq.set_queue_config('q', 'ticker_max_count', '1000')" \
		-c "SELECT pgq.register_consumer('q', 'c')" \
		-c "DO \$\$ BEGIN FOR i IN 1..$N / 5000 LOOP PERFORM pgq.insert_event('q', 'app', 'hello') FROM generate_series(1, 1000); COMMIT; PERFORM pgq.ticker('q'); COMMIT; END LOOP; END \$\$" >/dev/null
	pgq=$(rate pgq)
	echo "PgQ batches:                            $pgq rows/s (ratio to plain $(calc "$pgq / $plain"))"
else echo "PgQ not installed: row skipped"; fi
if have_wal2json; then
	psqlc -c "SELECT pg_create_logical_replication_slot('r', 'wal2json')" -c "CREATE TABLE ev (id bigint, payload text)" \
		-c "DO \$\$ BEGIN FOR i IN 1..$N / 5000 LOOP INSERT INTO ev SELECT g, 'hello' FROM generate_series(1, 1000) g; COMMIT; END LOOP; END \$\$" >/dev/null
	w2j=$(rate logical)
	echo "pg_logical_slot_get_changes (wal2json): $w2j rows/s (ratio to plain $(calc "$w2j / $plain"))"
else echo "wal2json not installed: row skipped"; fi
result "read 1000-row pages, $N-change shard" "≥ 0.9× plain index range" "$cfeed rows/s" \
	"plain $plain; PgQ $pgq; wal2json $w2j rows/s ($((N / 5)) rows)" "$(calc "$cfeed / $plain")" \
	"$([ "$(calc "$cfeed >= 0.9 * $plain")" = 1 ] && echo yes || echo no)"
