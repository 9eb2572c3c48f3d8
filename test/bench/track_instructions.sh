#!/usr/bin/env bash
# The CPU cost of tracking, free of a shared machine's noise: instructions
# executed (valgrind --tool=callgrind) by a single-user backend running N
# single-row INSERTs, each its own transaction, into an untracked and into a
# tracked table (the tables of track.sh), and N/20 100-row INSERTs.  Startup
# is subtracted (a run of one SELECT).  No sweeper (single-user mode), no
# concurrency, commits included; WAL and fsync time are not instructions.
# With KEEP=1 the callgrind outputs stay in the temp dir for
# callgrind_annotate --inclusive=yes.
# Usage: bash test/bench/track_instructions.sh [N]   (needs valgrind)
. "$(dirname "$0")/lib.sh"
N=${1:-1000}
command -v valgrind >/dev/null || { echo "valgrind is not installed"; exit 1; }
trap '[ -n "${KEEP:-}" ] || rm -rf "$BENCH_DIR"' EXIT
chown postgres "$BENCH_DIR"
as_pg initdb -D "$BENCH_DIR/data" -A trust >/dev/null
echo "shared_preload_libraries = 'cfeed'" >> "$BENCH_DIR/data/postgresql.conf"
single()
{
	as_pg postgres --single -D "$BENCH_DIR/data" postgres
}
single >/dev/null 2>&1 <<'SQL'
CREATE EXTENSION cfeed;
SELECT cfeed.create_feed('bench', 4);
CREATE TABLE plain (id bigserial PRIMARY KEY, payload text, change_id bigint);
CREATE TABLE tracked (id bigserial PRIMARY KEY, payload text, change_id bigint);
SELECT cfeed.track('tracked', 1);
INSERT INTO plain (payload) VALUES ('warm-up');
INSERT INTO tracked (payload) VALUES ('warm-up');
SQL
echo "SELECT 1;" > "$BENCH_DIR/empty.sql"
for t in plain tracked; do
	for _ in $(seq "$N"); do echo "INSERT INTO $t (payload) VALUES ('hello');"; done > "$BENCH_DIR/$t.sql"
	for _ in $(seq $((N / 20))); do
		echo "INSERT INTO $t (payload) SELECT 'hello' FROM generate_series(1, 100);"
	done > "$BENCH_DIR/${t}100.sql"
done
chmod 644 "$BENCH_DIR"/*.sql
# instructions of a single-user backend running a script
instr()
{
	as_pg valgrind --tool=callgrind --callgrind-out-file="$BENCH_DIR/callgrind.$1" \
		postgres --single -D "$BENCH_DIR/data" postgres < "$BENCH_DIR/$1.sql" >/dev/null 2>"$BENCH_DIR/$1.err"
	sed -n 's/.*Collected : \([0-9]*\).*/\1/p' "$BENCH_DIR/$1.err"
}
e=$(instr empty)
p=$(instr plain); t=$(instr tracked)
p100=$(instr plain100); t100=$(instr tracked100)
echo "server: $(postgres --version)"
echo "single-row INSERT: untracked $(((p - e) / N)), tracked $(((t - e) / N)) instructions per statement;" \
	"ratio $(echo "scale=2; ($t - $e) / ($p - $e)" | bc)x"
echo "100-row INSERT: untracked $(((p100 - e) / (N / 20) / 100)), tracked $(((t100 - e) / (N / 20) / 100)) instructions per row;" \
	"ratio $(echo "scale=2; ($t100 - $e) / ($p100 - $e)" | bc)x"
[ -n "${KEEP:-}" ] && echo "callgrind outputs: $BENCH_DIR/callgrind.*"
