#!/usr/bin/env bash
# Read throughput (target 4, test/bench/README.md): a consumer reading a whole log in
# 1000-row pages over libpq (readrate.c), rows/s: cfeed.read over an
# N-change shard vs the same query on cfeed.change directly (the baseline;
# a page of each in turn, best of 3 passes after a warm-up); and the peers
# over N/5 events written in 1000-row transactions, each read once (reading
# consumes): PgQ batches of 1000 events; wal2json by
# pg_logical_slot_get_changes in pages of 1000 changes (each call decodes
# again from the slot's restart_lsn, so this rate falls as the backlog
# grows) and in one call for the whole backlog.
# Usage: bash test/bench/read_rate.sh [N]
. "$(dirname "$0")/lib.sh"
N=${1:-1000000}
cc_tool readrate
BENCH_EXTRA_CONF="$LOGICAL_CONF
cfeed.enable_sweeper = off" bench_start
bench_settings
psqlc -c "CREATE EXTENSION cfeed" -c "SELECT cfeed.create_feed('r', 1)" \
	-c "INSERT INTO cfeed.change (feed_id, shard, change_id) SELECT 1, 0, nextval('cfeed.change_id') FROM generate_series(1, $N)" \
	-c "DO \$\$ BEGIN LOOP EXIT WHEN (SELECT coalesce(sum(change_count), 0) FROM cfeed.sweep()) = 0; COMMIT; END LOOP; END \$\$" \
	-c "VACUUM ANALYZE cfeed.change" >/dev/null
start=$(psqlc -c "SELECT min(change_sequence_number) - 1 FROM cfeed.change")
rate() { as_pg "$BENCH_DIR/readrate" "$CONNINFO" "$1" "$start"; }
rate cfeed >/dev/null	# warm-up
passes=$(for _ in 1 2 3; do rate cfeed; done)
best() { echo "$passes" | awk -v m="$1" '$1 == m && $3 > best {best = $3} END {print best}'; }
cfeed=$(best cfeed); plain=$(best plain)
echo "plain index range (cfeed.read's query): $plain rows/s"
echo "cfeed.read:                             $cfeed rows/s ($(calc "$cfeed / $plain")×)"
peers=
if have_pgq; then
	psqlc -c "CREATE EXTENSION pgq" -c "SELECT pgq.create_queue('q')" \
		-c "SELECT pgq.set_queue_config('q', 'ticker_max_count', '1000')" \
		-c "SELECT pgq.register_consumer('q', 'c')" \
		-c "DO \$\$ BEGIN FOR i IN 1..$N / 5000 LOOP PERFORM pgq.insert_event('q', 'app', 'hello') FROM generate_series(1, 1000); COMMIT; PERFORM pgq.ticker('q'); COMMIT; END LOOP; END \$\$" >/dev/null
	pgq=$(rate pgq | awk '{print $3}')
	echo "PgQ batches:                            $pgq rows/s ($(calc "$pgq / $plain")× plain)"
	peers="PgQ batches $pgq ($(calc "$pgq / $plain")×)"
else
	echo "PgQ not installed: row skipped"
fi
if have_wal2json; then
	psqlc -c "SELECT pg_create_logical_replication_slot('r', 'wal2json')" \
		-c "SELECT pg_create_logical_replication_slot('r_all', 'wal2json')" -c "CREATE TABLE ev (id bigint, payload text)" \
		-c "DO \$\$ BEGIN FOR i IN 1..$N / 5000 LOOP INSERT INTO ev SELECT g, 'hello' FROM generate_series(1, 1000) g; COMMIT; END LOOP; END \$\$" >/dev/null
	w2j=$(rate logical | awk '{print $3}')
	w2j_all=$(rate logical-all | awk '{print $3}')
	echo "wal2json, get_changes pages of 1000:    $w2j rows/s ($(calc "$w2j / $plain")× plain)"
	echo "wal2json, one get_changes for all:      $w2j_all rows/s ($(calc "$w2j_all / $plain")× plain)"
	peers="${peers:+$peers; }wal2json pages $w2j ($(calc "$w2j / $plain")×), one call $w2j_all ($(calc "$w2j_all / $plain")×)"
else
	echo "wal2json not installed: row skipped"
fi
result "read 1000-row pages, $N-change shard" "≥ 0.9× plain index range" "$cfeed rows/s" \
	"plain index range $plain rows/s; peers over $((N / 5)) events: ${peers:-n/a}" "$(calc "$cfeed / $plain")" \
	"$(yesno "$cfeed >= 0.9 * $plain")"
