#!/usr/bin/env bash
# Write overhead (target 1, test/bench/README.md): pgbench TPS, CLIENTS clients, one app row
# per transaction, on one cluster with wal_level = logical: the app row alone
# (the baseline); + cfeed.publish() in the same statement, the background
# sweeper stamping meanwhile; + PgQ's insert_event in the same statement; the
# app row alone while a wal2json slot is drained every 10 ms; and two plain
# rows in one statement, the floor of any two-row write.  ROUNDS rounds of
# every variant, alternated, best of each (others' load only lowers TPS).
# Usage: bash test/bench/write_overhead.sh [seconds] [clients] [rounds]
. "$(dirname "$0")/lib.sh"
SECS=${1:-10}
CLIENTS=${2:-8}
ROUNDS=${3:-2}
BENCH_EXTRA_CONF="$LOGICAL_CONF" bench_start
bench_settings
psqlc -c "CREATE EXTENSION cfeed" -c "SELECT cfeed.create_feed('bench', 4)" \
	-c "CREATE TABLE app (id bigserial PRIMARY KEY, payload text, change_id bigint)" >/dev/null
sql_file plain.sql "INSERT INTO app (payload) VALUES ('hello');"
sql_file cfeed.sql '\set s random(0, 3)' "INSERT INTO app (payload, change_id) VALUES ('hello', cfeed.publish(1, :s));"
sql_file two.sql "WITH a AS (INSERT INTO app (payload) VALUES ('x') RETURNING id) INSERT INTO app (payload) SELECT 'hello' FROM a;"
variants="plain cfeed two"
if have_pgq; then
	psqlc -c "CREATE EXTENSION pgq" -c "SELECT pgq.create_queue('q')" >/dev/null
	sql_file pgq.sql "INSERT INTO app (payload, change_id) VALUES ('hello', pgq.insert_event('q', 'app', 'hello'));"
	variants="$variants pgq"
else
	echo "PgQ not installed: PgQ variant skipped"
fi
if have_wal2json; then
	variants="$variants w2j"
else
	echo "wal2json not installed: logical-decoding variant skipped"
fi
declare -A best
for round in $(seq 1 "$ROUNDS"); do
	for v in $variants; do
		if [ "$v" = w2j ]; then
			psqlc -c "SELECT pg_create_logical_replication_slot('w', 'wal2json')" >/dev/null
			bg_sql drain "DO \$\$ BEGIN LOOP PERFORM count(*) FROM pg_logical_slot_get_changes('w', NULL, NULL, 'format-version', '2'); COMMIT; PERFORM pg_sleep(0.01); END LOOP; END \$\$"
			t=$(tps "$CLIENTS" "$SECS" plain.sql)
			stop_bg drain
			psqlc -c "SELECT pg_drop_replication_slot('w')" >/dev/null
		else
			t=$(tps "$CLIENTS" "$SECS" "$v.sql")
		fi
		echo "round $round: $v $t tps"
		[ "${best[$v]:-0}" -ge "$t" ] || best[$v]=$t
	done
done
plain=${best[plain]}
for v in $variants; do
	echo "best of $ROUNDS: $v ${best[$v]} tps, $(calc "${best[$v]} / $plain")× the app row alone"
done
pgq=${best[pgq]:-}
w2j=${best[w2j]:-}
result "write overhead: app row + change, $CLIENTS clients" "≥ 0.8× app row alone, > PgQ" "${best[cfeed]} tps" \
	"app row alone $plain tps; + PgQ insert_event ${pgq:-n/a} ($(calc "0${pgq} / $plain")×); wal2json slot drained ${w2j:-n/a} ($(calc "0${w2j} / $plain")×); two plain rows ${best[two]} ($(calc "${best[two]} / $plain")×)" \
	"$(calc "${best[cfeed]} / $plain")× alone${pgq:+, $(calc "${best[cfeed]} / $pgq")× PgQ}" \
	"$(yesno "${best[cfeed]} >= 0.8 * $plain && ${best[cfeed]} > 0${pgq}")"
