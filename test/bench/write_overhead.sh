#!/usr/bin/env bash
# Write overhead (rows 1a and 1b, test/bench/README.md): pgbench TPS, CLIENTS clients, one app row
# per transaction, on one cluster with wal_level = logical, the background
# sweeper stamping meanwhile: the app row alone (the baseline); the app row
# and its change written as the seed writes them, BEGIN, the app row, an
# INSERT INTO cfeed.change, COMMIT ("insert"), and the same two INSERTs
# in one statement, one round trip ("insert1"); the app row with
# cfeed.publish() in the same statement ("publish"); the peer, PgQ's
# insert_event in the same statement ("pgq"); the app row alone while a
# wal2json slot is drained every 10 ms ("w2j"); and two plain rows in one
# statement, the floor of any two-row write ("two"); and, to show what
# stamping costs, cfeed.publish() again while the sweeper is paused
# ("unswept": cfeed.enable_sweeper off, the backlog stamped after the
# run).  ROUNDS rounds, each
# running every variant once in turn; a ratio is taken within each round
# (a change in the machine's load hits the variants of a round alike) and
# the median over the rounds is judged.  The server's CPU time and WAL per
# transaction (all its processes, the sweeper included) are shown beside.
# Usage: bash test/bench/write_overhead.sh [seconds] [clients] [rounds]
. "$(dirname "$0")/lib.sh"
SECS=${1:-5}
CLIENTS=${2:-8}
ROUNDS=${3:-3}
BENCH_EXTRA_CONF="$LOGICAL_CONF" bench_start
bench_settings
psqlc -c "CREATE EXTENSION cfeed" -c "SELECT cfeed.create_feed('bench', 4)" \
	-c "CREATE TABLE app (id bigserial PRIMARY KEY, payload text, change_id bigint)" >/dev/null
sql_file plain.sql "INSERT INTO app (payload) VALUES ('hello');"
sql_file insert.sql '\set s random(0, 3)' "BEGIN;" \
	"INSERT INTO app (payload, change_id) VALUES ('hello', nextval('cfeed.change_id'));" \
	"INSERT INTO cfeed.change (feed_id, shard, change_id) VALUES (1, :s, currval('cfeed.change_id'));" "COMMIT;"
sql_file insert1.sql '\set s random(0, 3)' \
	"WITH a AS (INSERT INTO app (payload, change_id) VALUES ('hello', nextval('cfeed.change_id')) RETURNING change_id) INSERT INTO cfeed.change (feed_id, shard, change_id) SELECT 1, :s, change_id FROM a;"
sql_file publish.sql '\set s random(0, 3)' "INSERT INTO app (payload, change_id) VALUES ('hello', cfeed.publish(1, :s));"
sql_file two.sql "WITH a AS (INSERT INTO app (payload) VALUES ('x') RETURNING id) INSERT INTO app (payload) SELECT 'hello' FROM a;"
variants="plain insert insert1 publish two unswept"
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
# sweeper on|off: start or stop the background sweepers (and wait for it)
sweeper()
{
	psqlc -c "ALTER SYSTEM SET cfeed.enable_sweeper = $1" -c "SELECT pg_reload_conf()" >/dev/null
	until [ "$(psqlc -c "SELECT count(*) > 0 FROM pg_stat_activity WHERE backend_type LIKE 'cfeed sweeper%'")" = "$([ "$1" = on ] && echo t || echo f)" ]; do sleep 0.1; done
}
# shellcheck disable=SC2034	# cpu, wal: read through per's name reference
declare -A tps cpu wal
for round in $(seq 1 "$ROUNDS"); do
	for v in $variants; do
		if [ "$v" = w2j ]; then
			psqlc -c "SELECT pg_create_logical_replication_slot('w', 'wal2json')" >/dev/null
			bg_sql drain "DO \$\$ BEGIN LOOP PERFORM count(*) FROM pg_logical_slot_get_changes('w', NULL, NULL, 'format-version', '2'); COMMIT; PERFORM pg_sleep(0.01); END LOOP; END \$\$"
			read -r t c w < <(tps_cpu "$CLIENTS" "$SECS" plain.sql)
			stop_bg drain
			psqlc -c "SELECT pg_drop_replication_slot('w')" >/dev/null
		elif [ "$v" = unswept ]; then
			sweeper off
			read -r t c w < <(tps_cpu "$CLIENTS" "$SECS" publish.sql)
			sweeper on
			while [ "$(psqlc -c "SELECT count(*) FROM cfeed.change WHERE change_sequence_number IS NULL")" != 0 ]; do sleep 0.2; done
		else
			read -r t c w < <(tps_cpu "$CLIENTS" "$SECS" "$v.sql")
		fi
		echo "round $round: $v $t tps, $c µs server CPU and $w bytes WAL per transaction"
		tps[$v,$round]=$t cpu[$v,$round]=$c wal[$v,$round]=$w
	done
done
# per VARIANT BASE [cpu]: the median over the rounds of VARIANT's TPS (or
# CPU per transaction) over BASE's in the same round
per()
{
	local -n m=${3:-tps}
	for round in $(seq 1 "$ROUNDS"); do calc "${m[$1,$round]} / ${m[$2,$round]}" 3; done | median
}
figures() { for round in $(seq 1 "$ROUNDS"); do printf '%s ' "${tps[$1,$round]}"; done; }
for v in $variants; do
	echo "$v: $(figures "$v")tps; median per round $(per "$v" plain)× the app row alone in TPS, $(per "$v" plain cpu)× its server CPU, $(per "$v" plain wal)× its WAL per transaction"
done
peers="the seed's two INSERTs in one statement $(per insert1 plain)× (server CPU $(per insert1 plain cpu)×); two plain rows $(per two plain)×; publish() with the sweeper paused $(per unswept plain)× (server CPU $(per unswept plain cpu)×, WAL $(per unswept plain wal)×)"
[ -z "${tps[w2j,1]:-}" ] || peers="$peers; app row while a wal2json slot is drained $(per w2j plain)×"
for v in insert publish; do
	case $v in
	insert) label="app row + INSERT INTO cfeed.change (the seed's pattern: BEGIN, 2 INSERTs, COMMIT)";;
	publish) label="app row + cfeed.publish() in one statement";;
	esac
	alone=$(per "$v" plain)
	pgq=n/a met=$(yesno "$alone >= 0.85")
	if [ -n "${tps[pgq,1]:-}" ]; then
		pgq=$(per "$v" pgq)
		met=$(yesno "$alone >= 0.85 && $pgq >= 1.15")
	fi
	result "$([ "$v" = insert ] && echo 1a || echo 1b). write throughput, $label, $CLIENTS clients, sweeper on" "≥ 0.85× app row alone, ≥ 1.15× PgQ insert_event" \
		"$(figures "$v")tps; per transaction $(per "$v" plain cpu)× the server CPU and $(per "$v" plain wal)× the WAL of the app row's" \
		"app row alone $(figures plain)tps; PgQ insert_event $( [ "$pgq" = n/a ] && echo n/a || echo "$(figures pgq)tps ($(per pgq plain)× alone)"); $peers" \
		"$alone× alone, $pgq× PgQ" "$met"
done
