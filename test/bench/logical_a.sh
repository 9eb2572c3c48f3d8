#!/usr/bin/env bash
# Topology A (portable cursors, docs/replication.md) on the publisher, a
# feed stored in rows against one stored in ranges: the WAL the publisher
# writes per change and the bytes a subscriber receives per change (what
# pgoutput sends for the publication, read from a logical slot), the
# background sweeper on.  Rows: the publication filters cfeed.change on
# its number, inserts and updates (each stamp's UPDATE sends the stamped
# row); ranges: the inserts of cfeed.change and cfeed.stamp (each change's
# row, and its share of a sweep's stamp).  First with CLIENTS pgbench
# clients publishing one change per transaction for SECS seconds (sweeps
# gather several changes), then with one session publishing N changes one
# per transaction (each sweep stamps one).  ROUNDS rounds, the storages
# alternated within each; the medians of the rounds.
# Usage: bash test/bench/logical_a.sh [seconds] [clients] [n] [rounds]
. "$(dirname "$0")/lib.sh"
SECS=${1:-10}
CLIENTS=${2:-8}
N=${3:-2000}
ROUNDS=${4:-3}
BENCH_EXTRA_CONF="wal_level = logical" bench_start
bench_settings
sql_file publish.sql '\set s random(0, 3)' 'SELECT cfeed.publish(1, :s);'

# one LOAD (concurrent, serial) of STORAGE: prints "WAL-per-change sent-per-change"
measure()
{
	local storage=$1 load=$2 db w0 w n sent
	db=a_$storage
	psqlc -c "DROP DATABASE IF EXISTS $db" 2>/dev/null
	psqlc -c "CREATE DATABASE $db"
	BENCH_DB=$db psqlc -c "SET cfeed.default_storage = $storage" -c "CREATE EXTENSION cfeed" \
		-c "SELECT cfeed.create_feed('f', 4)" >/dev/null
	if [ "$storage" = rows ]; then
		BENCH_DB=$db psqlc -c "CREATE PUBLICATION p FOR TABLE cfeed.change WHERE (change_sequence_number IS NOT NULL),
			cfeed.tracked_table (table_no, name) WITH (publish = 'insert, update')"
	else
		BENCH_DB=$db psqlc -c "CREATE PUBLICATION p FOR TABLE cfeed.change, cfeed.stamp,
			cfeed.tracked_table (table_no, name) WITH (publish = 'insert')"
	fi
	BENCH_DB=$db psqlc -c "SELECT pg_create_logical_replication_slot('s', 'pgoutput')" >/dev/null
	BENCH_DB=$db psqlc -c "CHECKPOINT"
	w0=$(BENCH_DB=$db psqlc -c "SELECT pg_current_wal_insert_lsn()")
	if [ "$load" = concurrent ]; then
		BENCH_DB=$db pgbenchc -n -c "$CLIENTS" -j 2 -T "$SECS" -f "$BENCH_DIR/publish.sql" >/dev/null 2>&1
	else
		BENCH_DB=$db psqlc -c "DO \$\$ BEGIN FOR i IN 1 .. $N LOOP PERFORM cfeed.publish(1, i % 4); COMMIT; END LOOP; END \$\$"
	fi
	BENCH_DB=$db swept
	n=$(BENCH_DB=$db psqlc -c "SELECT count(*) FROM cfeed.change")
	w=$(BENCH_DB=$db psqlc -c "SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '$w0')::bigint")
	sent=$(BENCH_DB=$db psqlc -c "SELECT coalesce(sum(length(data)), 0)
		FROM pg_logical_slot_get_binary_changes('s', NULL, NULL, 'proto_version', '1', 'publication_names', 'p')")
	BENCH_DB=$db psqlc -c "SELECT pg_drop_replication_slot('s')" >/dev/null
	echo "$(( w / n )) $(( sent / n ))"
}

for load in concurrent serial; do
	declare -A wal=() sent=()
	for r in $(seq "$ROUNDS"); do
		for storage in rows ranges; do
			read -r w s <<< "$(measure "$storage" "$load")"
			wal[$storage]+="$w "
			sent[$storage]+="$s "
		done
	done
	for storage in rows ranges; do
		echo "$load ($([ "$load" = concurrent ] && echo "$CLIENTS clients, $SECS s" || echo "one session, $N changes")), $storage:" \
			"WAL $(tr " " "\n" <<< "${wal[$storage]% }" | median) B/change (rounds: ${wal[$storage]% }), sent $(tr " " "\n" <<< "${sent[$storage]% }" | median) B/change (rounds: ${sent[$storage]% })"
	done
done
