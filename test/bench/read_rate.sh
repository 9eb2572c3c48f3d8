#!/usr/bin/env bash
# Read throughput (rows 2a and 2b, test/bench/README.md): a consumer reading a whole log in
# 1000-row pages over libpq (readrate.c), rows/s: cfeed.read over an
# N-change shard vs the same query on cfeed.change directly (the baseline;
# a page of each in turn, the median of 3 passes after a warm-up); the
# seed's join pattern (an app table, orders, joined with cfeed.change by
# change_id) vs the same join written by hand on a plain copy of the change
# rows with its own index (hand_change), as a reader role granted the feed
# (row-level security applies to cfeed.change, as for any consumer that is
# not its owner) and as the superuser; and the peers
# over N/5 events written in 1000-row transactions, each read once (reading
# consumes): PgQ batches of 1000 events; wal2json by
# pg_logical_slot_get_changes in pages of 1000 changes (each call decodes
# again from the slot's restart_lsn, so this rate falls as the backlog
# grows) and in one call for the whole backlog.
# STORAGE (env): the feed's storage, rows (the default, as in make bench)
# or ranges: then the plain index range reads hand_change (the same rows,
# numbered, with their own index: a range change's row holds no number),
# and the join pattern is the one for that storage, orders JOIN
# cfeed.read(...) USING (change_id) (readrate.c, READRATE_STORAGE); the
# rows' labels say so.
# Usage: bash test/bench/read_rate.sh [N]
. "$(dirname "$0")/lib.sh"
N=${1:-1000000}
STORAGE=${STORAGE:-rows}
export READRATE_STORAGE=$STORAGE
label=
[ "$STORAGE" = rows ] || label=", a feed stored in $STORAGE"
cc_tool readrate
BENCH_EXTRA_CONF="$LOGICAL_CONF
cfeed.enable_sweeper = off" bench_start
bench_settings
psqlc -c "CREATE EXTENSION cfeed" -c "SET cfeed.default_storage = $STORAGE" -c "SELECT cfeed.create_feed('r', 1)" \
	-c "INSERT INTO cfeed.change (feed_id, shard, change_id) SELECT 1, 0, nextval('cfeed.change_id') FROM generate_series(1, $N)" \
	-c "DO \$\$ BEGIN LOOP EXIT WHEN (SELECT coalesce(sum(change_count), 0) FROM cfeed.sweep()) = 0; COMMIT; END LOOP; END \$\$" \
	-c "VACUUM ANALYZE cfeed.change" >/dev/null
start=$(psqlc -c "SELECT start_sequence_number FROM cfeed.shard WHERE feed_id = 1 AND shard = 0")
# hand_change: the feed's changes, numbered, in a plain table with its own
# index (2b's join by hand; in ranges 2a's plain index range too)
hand_rows="SELECT * FROM cfeed.change"
[ "$STORAGE" = rows ] || hand_rows="SELECT 1 AS feed_id, 0 AS shard, r.* FROM cfeed.read(1, 0, NULL, $N) r"
psqlc -c "CREATE TABLE hand_change AS $hand_rows" \
	-c "CREATE INDEX ON hand_change (feed_id, shard, change_sequence_number)" \
	-c "VACUUM ANALYZE hand_change" >/dev/null
rate() { as_pg "$BENCH_DIR/readrate" "$CONNINFO${2:-}" "$1" "$start"; }
# passes MODE [CONNINFO...]: a warm-up, then 3 passes
passes() { rate "$@" >/dev/null; for _ in 1 2 3; do rate "$@"; done; }
# rows PASSES NAME: the median rows/s of NAME's lines
rows() { echo "$1" | awk -v m="$2" '$1 == m {print $3}' | median; }
p=$(passes cfeed)
cfeed=$(rows "$p" cfeed); plain=$(rows "$p" plain)
echo "plain index range (cfeed.read's query): $plain rows/s"
echo "cfeed.read:                             $cfeed rows/s ($(calc "$cfeed / $plain")×)"
psqlc -c "CREATE TABLE orders (id bigint PRIMARY KEY, customer text, total numeric, change_id bigint UNIQUE)" \
	-c "INSERT INTO orders SELECT row_number() OVER (ORDER BY change_id), 'customer ' || change_id % 1000, change_id % 997 * 1.5, change_id FROM cfeed.change" \
	-c "VACUUM ANALYZE orders" \
	-c "CREATE ROLE bench_reader LOGIN" -c "GRANT SELECT ON cfeed.change, orders, hand_change TO bench_reader" \
	-c "SELECT cfeed.grant_read(1, 'bench_reader')" >/dev/null
p=$(passes join " user=bench_reader")
join=$(rows "$p" join); hand=$(rows "$p" hand)
p=$(passes join)
join_su=$(rows "$p" join); hand_su=$(rows "$p" hand)
echo "join by hand on hand_change: $hand rows/s as a granted reader, $hand_su as the superuser"
echo "the seed's join on cfeed.change: $join rows/s ($(calc "$join / $hand")×) as a granted reader, $join_su ($(calc "$join_su / $hand_su")×) as the superuser"
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
result "2a. cfeed.read, 1000-row pages, $N-change shard$label" "≥ 0.95× plain index range" "$cfeed rows/s" \
	"plain index range $plain rows/s (medians of 3 passes); peers over $((N / 5)) events: ${peers:-n/a}" "$(calc "$cfeed / $plain")×" \
	"$(yesno "$cfeed >= 0.95 * $plain")"
result "2b. the seed's join pattern (orders JOIN cfeed.change$([ "$STORAGE" = rows ] || echo ", in ranges JOIN cfeed.read()")), 1000-row pages, granted reader$label" "≥ 0.9× the same join by hand" "$join rows/s" \
	"the same join on a plain table of the same rows: $hand rows/s; as the superuser (no row-level security) $join_su vs $hand_su rows/s ($(calc "$join_su / $hand_su")×)" \
	"$(calc "$join / $hand")×" "$(yesno "$join >= 0.9 * $hand")"
