#!/usr/bin/env bash
# Per-feed read and write access: what the row-level security on
# cfeed.change costs, measured against the same cluster with that security
# disabled (how 1.3 ran).  Writes: pgbench TPS, CLIENTS clients, of a writer
# role that is not the owner, has no read grant and a write grant of its
# feed only (its INSERT pattern passes the policy change_write, its publish()
# and tracked rows cfeed's own check in C, with the security on and off;
# the policies are what 1.8 adds to a write) (cfeed.publish() with an
# app row, the INSERT pattern, an INSERT into a tracked table), the
# background sweeper stamping meanwhile, and the server's CPU time per
# transaction (which decides: it varies less than the TPS of a shared
# machine); ROUNDS rounds of each variant with the security on and off,
# alternated: each round's pair gives a ratio, and the row reports the
# median of the rounds' ratios with their range (the tail), the median TPS
# and CPU beside.  Reads: readrate.c as a
# role granted the feed (cfeed._may_read runs for every row it reads),
# cfeed.read and the plain index range over an N-change shard, best of 3
# passes each way after a warm-up.
# Usage: bash test/bench/read_access.sh [N] [seconds] [clients] [rounds]
. "$(dirname "$0")/lib.sh"
N=${1:-300000}
SECS=${2:-5}
CLIENTS=${3:-8}
ROUNDS=${4:-5}
cc_tool readrate
bench_start
bench_settings
psqlc -c "CREATE EXTENSION cfeed" -c "SELECT cfeed.create_feed('r', 1)" -c "SELECT cfeed.create_feed('w', 4)" \
	-c "INSERT INTO cfeed.change (feed_id, shard, change_id) SELECT 1, 0, nextval('cfeed.change_id') FROM generate_series(1, $N)" \
	-c "DO \$\$ BEGIN LOOP EXIT WHEN (SELECT coalesce(sum(change_count), 0) FROM cfeed.sweep()) = 0; COMMIT; END LOOP; END \$\$" \
	-c "VACUUM ANALYZE cfeed.change" \
	-c "CREATE TABLE app (id bigserial PRIMARY KEY, payload text, change_id bigint)" \
	-c "CREATE TABLE tracked (id bigserial PRIMARY KEY, payload text)" -c "SELECT cfeed.track('tracked', 2)" \
	-c "CREATE ROLE bench_writer LOGIN" -c "CREATE ROLE bench_reader LOGIN" \
	-c "GRANT INSERT ON cfeed.change TO bench_writer" -c "GRANT USAGE ON SEQUENCE cfeed.change_id TO bench_writer" \
	-c "SELECT cfeed.grant_write(2, 'bench_writer')" \
	-c "GRANT INSERT ON app, tracked TO bench_writer" -c "GRANT USAGE ON SEQUENCE app_id_seq, tracked_id_seq TO bench_writer" \
	-c "GRANT SELECT ON cfeed.change, cfeed.shard TO bench_reader" -c "SELECT cfeed.grant_read(1, 'bench_reader')" >/dev/null
rls() { psqlc -c "ALTER TABLE cfeed.change $1 ROW LEVEL SECURITY" >/dev/null; }

# Reads, as the reader: cfeed.read and the plain range, with the security on and off.
start=$(psqlc -c "SELECT min(change_sequence_number) - 1 FROM cfeed.change WHERE feed_id = 1")
rate() { as_pg "$BENCH_DIR/readrate" "$CONNINFO user=bench_reader" cfeed "$start"; }
declare -A rows
for state in on off; do
	[ "$state" = on ] && rls ENABLE || rls DISABLE
	rate >/dev/null		# warm-up
	passes=$(for _ in 1 2 3; do rate; done)
	for m in cfeed plain; do
		rows[$m-$state]=$(echo "$passes" | awk -v m="$m" '$1 == m && $3 > best {best = $3} END {print best}')
	done
	echo "reader, row-level security $state: cfeed.read ${rows[cfeed-$state]} rows/s, plain range ${rows[plain-$state]} rows/s"
done
rls ENABLE

# Writes, as the writer.
sql_file publish.sql '\set s random(0, 3)' "INSERT INTO app (payload, change_id) VALUES ('hello', cfeed.publish(2, :s));"
sql_file insert.sql '\set s random(0, 3)' "BEGIN;" \
	"INSERT INTO app (payload, change_id) VALUES ('hello', nextval('cfeed.change_id'));" \
	"INSERT INTO cfeed.change (feed_id, shard, change_id) VALUES (2, :s, currval('cfeed.change_id'));" "COMMIT;"
sql_file tracked.sql "INSERT INTO tracked (payload) VALUES ('hello');"
declare -A tps_r cpu_r
for round in $(seq 1 "$ROUNDS"); do
	for v in publish insert tracked; do
		for state in on off; do
			[ "$state" = on ] && rls ENABLE || rls DISABLE
			read -r t c _ < <(tps_cpu "$CLIENTS" "$SECS" "$v.sql" -U bench_writer)
			echo "round $round: $v, row-level security $state: $t tps, $c µs server CPU per transaction"
			tps_r[$v-$state-$round]=$t
			cpu_r[$v-$state-$round]=$c
		done
	done
done
rls ENABLE
# per variant: the median TPS and CPU of each state, and the median and the
# range of the rounds' on/off ratios (each round's pair ran back to back)
declare -A med ratio span
for v in publish insert tracked; do
	for state in on off; do
		med[tps-$v-$state]=$(for r in $(seq 1 "$ROUNDS"); do echo "${tps_r[$v-$state-$r]}"; done | median)
		med[cpu-$v-$state]=$(for r in $(seq 1 "$ROUNDS"); do echo "${cpu_r[$v-$state-$r]}"; done | median)
	done
	for m in tps cpu; do
		ratios=$(for r in $(seq 1 "$ROUNDS"); do
			if [ "$m" = tps ]; then calc "${tps_r[$v-on-$r]} / ${tps_r[$v-off-$r]}"; else calc "${cpu_r[$v-on-$r]} / ${cpu_r[$v-off-$r]}"; fi
		done)
		ratio[$m-$v]=$(echo "$ratios" | median)
		span[$m-$v]="$(echo "$ratios" | sort -g | head -n 1)-$(echo "$ratios" | sort -g | tail -n 1)"
	done
	echo "median of $ROUNDS: $v ${med[tps-$v-on]} tps, ${med[cpu-$v-on]} µs CPU/tx with per-feed access; ${med[tps-$v-off]} tps, ${med[cpu-$v-off]} µs without (rounds' ratios: ${ratio[tps-$v]}× TPS, ${span[tps-$v]}; ${ratio[cpu-$v]}× CPU, ${span[cpu-$v]})"
done
# The CPU per transaction decides: the TPS of a loaded 2-core machine varies more than the cost.
worst=$(calc "x = ${ratio[cpu-publish]}; y = ${ratio[cpu-insert]}; z = ${ratio[cpu-tracked]}; if (y > x) x = y; if (z > x) x = z; x")
result "per-feed read and write access, writer of one feed ($CLIENTS clients, medians of $ROUNDS alternated rounds): with vs without the row-level security" "≤ 1.03× server CPU per transaction (nothing measurable)" \
	"publish ${med[tps-publish-on]} tps ${med[cpu-publish-on]} µs, INSERT ${med[tps-insert-on]} tps ${med[cpu-insert-on]} µs, tracked ${med[tps-tracked-on]} tps ${med[cpu-tracked-on]} µs" \
	"without: ${med[tps-publish-off]} tps ${med[cpu-publish-off]} µs, ${med[tps-insert-off]} tps ${med[cpu-insert-off]} µs, ${med[tps-tracked-off]} tps ${med[cpu-tracked-off]} µs" \
	"CPU ${ratio[cpu-publish]}× (${span[cpu-publish]}), ${ratio[cpu-insert]}× (${span[cpu-insert]}), ${ratio[cpu-tracked]}× (${span[cpu-tracked]}); TPS ${ratio[tps-publish]}×, ${ratio[tps-insert]}×, ${ratio[tps-tracked]}×" \
	"$(yesno "$worst <= 1.03")"
result "per-feed read access, reader rows/s (1000-row pages, $N-change shard): a granted reader with vs without its row-level security" "≥ 0.9×" \
	"cfeed.read ${rows[cfeed-on]}, plain range ${rows[plain-on]} rows/s" \
	"without: ${rows[cfeed-off]}, ${rows[plain-off]} rows/s" \
	"$(calc "${rows[cfeed-on]} / ${rows[cfeed-off]}")×, $(calc "${rows[plain-on]} / ${rows[plain-off]}")×" \
	"$(yesno "${rows[cfeed-on]} >= 0.9 * ${rows[cfeed-off]}")"
