#!/usr/bin/env bash
# Write overhead (rows 1a, 1b and 1e, test/bench/README.md): pgbench,
# CLIENTS clients, one app row per transaction, on one cluster with
# wal_level = logical, the background sweeper stamping meanwhile.  Every
# cfeed write is compared with the same transaction without the change
# and with PgQ's insert_event written in the same shape, like with like:
# the same statements but the change, the same protocol (-M $QUERY_MODE,
# default extended), the same meta-commands.  Variants (NAME.sql):
#   alone     BEGIN, the app row, COMMIT (the baseline)
#   insert    BEGIN, the app row with nextval('cfeed.change_id'), INSERT
#             INTO cfeed.change, COMMIT (the seed's pattern, row 1a)
#   pgq       BEGIN, the app row, SELECT pgq.insert_event(...), COMMIT
#             (PgQ in row 1a's shape)
#   publish   BEGIN, the app row with cfeed.publish() in it, COMMIT (row 1b)
#   pgqin     BEGIN, the app row with pgq.insert_event() in it, COMMIT
#             (PgQ in row 1b's shape)
#   two       BEGIN, the app row, a row of a second plain table, COMMIT
#             (two plain rows in the seed's shape: no cfeed at all)
#   rinsert, rpublish
#             insert and publish to a feed stored in ranges (its changes
#             numbered by cfeed.stamp rows, never updated), in the same
#             sweep group
# each also pipelined (NAME_p: the same between \startpipeline and
# \endpipeline, one round trip), and alone, publish and pgqin as one
# autocommit statement (NAME_1); and, beside: alone while a wal2json slot
# is drained every 10 ms (w2j), and publish while the sweeper is paused
# (unswept: cfeed.enable_sweeper off, the backlog stamped after the run,
# outside the figures).  ROUNDS rounds, each running every variant once in
# turn; a ratio is taken within each round (a change in the machine's load
# hits the variants of a round alike) and the median over the rounds is
# judged.  Beside TPS: the transactions' p99 and max latency (medians over
# the rounds), the server's CPU time and WAL per transaction (all its
# processes, the sweeper included, up to the stamp of the run's last
# change).  Row 1e, the WAL of stamping alone per change: the WAL records
# of the sweeps' transactions during publish's run (lib.sh sweep_wal) over
# the changes they stamped (one change per transaction), and beside it
# publish's WAL per transaction less unswept's, in the same round.
# VARIANTS (env) runs only those listed (the baselines of the rows printed
# must be among them).
# SWEEP_DELAY (env, ms): cfeed.sweep_delay for the run (default 0);
# SWEEP_GATHER (env, ms): cfeed.sweep_gather (default: the setting's);
# SWEEP_GATHER_CHANGES (env): cfeed.sweep_gather_changes (the same).
# Usage: bash test/bench/write_overhead.sh [seconds] [clients] [rounds]
. "$(dirname "$0")/lib.sh"
SECS=${1:-5}
CLIENTS=${2:-8}
ROUNDS=${3:-3}
QUERY_MODE=${QUERY_MODE:-extended}
BENCH_EXTRA_CONF="$LOGICAL_CONF
cfeed.sweep_delay = ${SWEEP_DELAY:-0}
${SWEEP_GATHER:+cfeed.sweep_gather = $SWEEP_GATHER}
${SWEEP_GATHER_CHANGES:+cfeed.sweep_gather_changes = $SWEEP_GATHER_CHANGES}" bench_start
bench_settings
psqlc -c "CREATE EXTENSION cfeed" -c "SELECT cfeed.create_feed('bench', 4)" \
	-c "SET cfeed.default_storage = ranges" -c "SELECT cfeed.create_feed('bench_ranges', 4)" \
	-c "CREATE TABLE app (id bigserial PRIMARY KEY, payload text, change_id bigint)" \
	-c "CREATE TABLE app2 (id bigserial PRIMARY KEY, payload text, change_id bigint)" >/dev/null
app="INSERT INTO app (payload, change_id) VALUES ('hello', %s);"
# shapes NAME STATEMENT...: NAME.sql, the statements in a transaction, and
# NAME_p.sql, the same pipelined
shapes()
{
	local name=$1
	shift
	sql_file "$name.sql" '\set s random(0, 3)' "BEGIN;" "$@" "COMMIT;"
	sql_file "${name}_p.sql" '\set s random(0, 3)' '\startpipeline' "BEGIN;" "$@" "COMMIT;" '\endpipeline'
}
# shellcheck disable=SC2059	# $app is the format
{
	shapes alone "$(printf "$app" NULL)"
	shapes insert "$(printf "$app" "nextval('cfeed.change_id')")" \
		"INSERT INTO cfeed.change (feed_id, shard, change_id) VALUES (1, :s, currval('cfeed.change_id'));"
	shapes publish "$(printf "$app" "cfeed.publish(1, :s)")"
	shapes two "$(printf "$app" NULL)" "INSERT INTO app2 (payload) VALUES ('hello');"
	sql_file alone_1.sql '\set s random(0, 3)' "$(printf "$app" NULL)"
	sql_file publish_1.sql '\set s random(0, 3)' "$(printf "$app" "cfeed.publish(1, :s)")"
	shapes rinsert "$(printf "$app" "nextval('cfeed.change_id')")" \
		"INSERT INTO cfeed.change (feed_id, shard, change_id) VALUES (2, :s, currval('cfeed.change_id'));"
	shapes rpublish "$(printf "$app" "cfeed.publish(2, :s)")"
	sql_file rpublish_1.sql '\set s random(0, 3)' "$(printf "$app" "cfeed.publish(2, :s)")"
	variants="alone alone_p alone_1 insert insert_p publish publish_p publish_1 two unswept"
	variants="$variants rinsert rinsert_p rpublish rpublish_p rpublish_1 runswept"
	if have_pgq; then
		psqlc -c "CREATE EXTENSION pgq" -c "SELECT pgq.create_queue('q')" >/dev/null
		shapes pgq "$(printf "$app" NULL)" "SELECT pgq.insert_event('q', 'app', 'hello');"
		shapes pgqin "$(printf "$app" "pgq.insert_event('q', 'app', 'hello')")"
		sql_file pgqin_1.sql '\set s random(0, 3)' "$(printf "$app" "pgq.insert_event('q', 'app', 'hello')")"
		variants="$variants pgq pgq_p pgqin pgqin_p pgqin_1"
	else
		echo "PgQ not installed: PgQ variants skipped"
	fi
}
if have_wal2json; then
	variants="$variants w2j"
else
	echo "wal2json not installed: logical-decoding variant skipped"
fi
variants=${VARIANTS:-$variants}
# sweeper on|off: start or stop the background sweepers, and wait until
# the server has reloaded its configuration (a new session sees the
# setting) and a sweeper runs, or none does
sweeper()
{
	psqlc -c "ALTER SYSTEM SET cfeed.enable_sweeper = $1" -c "SELECT pg_reload_conf()" >/dev/null
	until [ "$(psqlc -c "SHOW cfeed.enable_sweeper")" = "$1" ]; do sleep 0.1; done
	until [ "$(psqlc -c "SELECT count(*) > 0 FROM pg_stat_activity WHERE backend_type LIKE 'cfeed sweeper%'")" = "$([ "$1" = on ] && echo t || echo f)" ]; do sleep 0.1; done
}
run() { tps_cpu "$CLIENTS" "$SECS" "$1.sql" -M "$QUERY_MODE"; }
# the background sweepers' sweeps and changes stamped so far
sweep_counts() { psqlc -c "SELECT COALESCE(sum(sweeps), 0) || ' ' || COALESCE(sum(changes_stamped), 0) FROM cfeed.sweepers"; }
declare -A tps cpu wal p99 max batch sweepwal
for round in $(seq 1 "$ROUNDS"); do
	for v in $variants; do
		if [ "$v" = w2j ]; then
			psqlc -c "SELECT pg_create_logical_replication_slot('w', 'wal2json')" >/dev/null
			bg_sql drain "DO \$\$ BEGIN LOOP PERFORM count(*) FROM pg_logical_slot_get_changes('w', NULL, NULL, 'format-version', '2'); COMMIT; PERFORM pg_sleep(0.01); END LOOP; END \$\$"
			read -r t c w l m < <(run alone)
			stop_bg drain
			psqlc -c "SELECT pg_drop_replication_slot('w')" >/dev/null
		elif [ "$v" = unswept ] || [ "$v" = runswept ]; then
			sweeper off
			read -r t c w l m < <(run "${v%unswept}publish")
			sweeper on
			swept
		else
			read -r s0 n0 < <(sweep_counts)
			read -r t c w l m < <(run "$v")
			read -r s1 n1 < <(sweep_counts)
			batch[$v,$round]=$(calc "($n1 - $n0) / ($s1 - $s0 + $(( s1 == s0 )))" 1)
			if [ "$v" = publish ] || [ "$v" = rpublish ]; then
				read -r w0 w1 < "$BENCH_DIR/wal_range"
				sweepwal[$v,$round]=$(calc "$(sweep_wal "$w0" "$w1") / ($n1 - $n0 + $(( n1 == n0 )))" 1)
			fi
		fi
		echo "round $round: $v $t tps, p99 $l ms, max $m ms; $c µs server CPU and $w bytes WAL per transaction${batch[$v,$round]:+; ${batch[$v,$round]} changes per sweep}${sweepwal[$v,$round]:+; WAL of the sweeps alone ${sweepwal[$v,$round]} B per change}"
		# shellcheck disable=SC2034	# read through per's and mid's name references
		tps[$v,$round]=$t cpu[$v,$round]=$c wal[$v,$round]=$w p99[$v,$round]=$l max[$v,$round]=$m
	done
done
# per VARIANT BASE [tps|cpu|wal]: the median over the rounds of VARIANT's
# figure over BASE's in the same round
per()
{
	local -n m=${3:-tps}
	for round in $(seq 1 "$ROUNDS"); do calc "${m[$1,$round]} / ${m[$2,$round]}" 3; done | median | xargs printf '%.3g\n'
}
# mid VARIANT tps|cpu|wal|p99|max: the median over the rounds
mid()
{
	local -n m=$2
	for round in $(seq 1 "$ROUNDS"); do echo "${m[$1,$round]}"; done | median | xargs printf '%.4g\n'
}
figures() { for round in $(seq 1 "$ROUNDS"); do printf '%s ' "${tps[$1,$round]}"; done; }
# what VARIANT: its figures, for the table
what() { echo "$(figures "$1")tps, p99 $(mid "$1" p99) ms, max $(mid "$1" max) ms, $(mid "$1" cpu) µs CPU, $(mid "$1" wal) B WAL per transaction"; }
has() { [[ " $variants " == *" $1 "* ]]; }
for v in $variants; do
	base=alone${v#"${v%_[p1]}"}
	case $v in w2j | unswept | runswept) base=alone;; esac
	! has "$base" || echo "$v: $(what "$v"); median per round $(per "$v" "$base")× $base in TPS, $(per "$v" "$base" cpu)× its server CPU, $(per "$v" "$base" wal)× its WAL per transaction"
done
peers=
! has two || peers="; two plain rows in the same shape $(per two alone)× (server CPU $(per two alone cpu)×, WAL $(per two alone wal)×)"
! has unswept || peers="$peers; publish() with the sweeper paused $(per unswept alone)× (server CPU $(per unswept alone cpu)×, WAL $(per unswept alone wal)×)"
! has w2j || peers="$peers; the app row while a wal2json slot is drained $(per w2j alone)×"
# row VARIANT PGQ-VARIANT ROW LABEL: a row of the table, against the app row
# alone in the same shape and PgQ's
row()
{
	local v=$1 peer=$2 base alone pgq=n/a met
	base=alone${v#"${v%_[p1]}"}
	has "$v" && has "$base" || return 0
	alone=$(per "$v" "$base")
	met=$(yesno "$alone >= 0.85")
	if has "$peer"; then
		pgq=$(per "$v" "$peer")
		met=$(yesno "$alone >= 0.85 && $pgq >= 1.15")
	fi
	result "$3. write throughput, $4, $CLIENTS clients, sweeper on" "≥ 0.85× the same without the change, ≥ 1.15× PgQ in the same shape" \
		"$(what "$v"); $(per "$v" "$base" cpu)× the server CPU and $(per "$v" "$base" wal)× the WAL of the baseline's" \
		"without the change: $(what "$base"); PgQ: $(has "$peer" && echo "$(what "$peer") ($(per "$peer" "$base")× without)" || echo n/a)${5:-}" \
		"$alone× without, $pgq× PgQ" "$met"
}
row insert pgq 1a "app row + INSERT INTO cfeed.change (the seed's pattern: BEGIN, 2 INSERTs, COMMIT), not pipelined" "$peers"
row insert_p pgq_p 1a "the same pipelined"
row publish pgqin 1b "app row + cfeed.publish() in its INSERT (BEGIN, INSERT, COMMIT), not pipelined"
row publish_p pgqin_p 1b "the same pipelined"
row publish_1 pgqin_1 1b "app row + cfeed.publish() in one autocommit statement"
# stamp PUBLISH UNSWEPT LABEL: row 1e for one storage: the sweeps' own WAL
# per change they stamped in PUBLISH's runs (sweep_wal), the median of the
# rounds; beside it, PUBLISH's WAL per transaction less UNSWEPT's (which
# also counts whatever else wrote in either window: an autovacuum of
# cfeed.change that fell in the paused run once made it 1,136 B against
# 416 B swept)
stamp()
{
	local stamp diff
	has "$1" && has "$2" || return 0
	stamp=$(mid "$1" sweepwal)
	diff=$(for round in $(seq 1 "$ROUNDS"); do echo "${wal[$1,$round]} - ${wal[$2,$round]}" | bc; done | median)
	result "1e. WAL of the stamp per change, $CLIENTS writers (publish(), one change per transaction)${3:-}" "≤ 40 B" \
		"$stamp B (the sweeps' own records and commits, pg_waldump)" \
		"publish() with the sweeper on $(mid "$1" wal) B per transaction (sweeps of $(mid "$1" batch) changes), paused $(mid "$2" wal) B (the difference $diff B); the app row alone $(mid alone wal) B" \
		"$stamp B" "$(yesno "$stamp <= 40")"
}
stamp publish unswept
row rinsert pgq 1a "the seed's pattern, a feed stored in ranges, not pipelined"
row rinsert_p pgq_p 1a "the same pipelined"
row rpublish pgqin 1b "app row + cfeed.publish() in its INSERT, a feed stored in ranges, not pipelined"
row rpublish_p pgqin_p 1b "the same pipelined"
row rpublish_1 pgqin_1 1b "app row + cfeed.publish() in one autocommit statement, a feed stored in ranges"
stamp rpublish runswept ", a feed stored in ranges"
