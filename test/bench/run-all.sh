#!/usr/bin/env bash
# The benchmark suite (`make bench`): every performance target of
# test/bench/README.md against its baseline and the peers (PgQ, wal2json)
# measured in the same run, ~13-16 minutes on 2 cores.  The PostgreSQL
# used is the one whose pg_config comes first in PATH.  Run as root: it
# installs the peers from Debian when they are missing (their rows are
# skipped when it cannot) and each script starts and removes its own
# throwaway cluster.  Uses the installed cfeed (make install); the gateway
# rows (serve.sh) the `cfeed` command built in the tree, else the installed one.
# Output: results/latest.txt (everything), RESULTS.md (settings and table;
# the notes after its "<!-- notes -->" marker are kept), latency.png.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=$here/results
mkdir -p "$out"
log=$out/latest.txt
: > "$log"
began=$(date +%s)
load=$(cut -d' ' -f1 /proc/loadavg)	# before the suite: other jobs' load
peers=(postgresql-15-pgq3 pgqd postgresql-15-wal2json gnuplot-nox)
if [ "$(id -u)" = 0 ] && ! dpkg -s "${peers[@]}" >/dev/null 2>&1; then
	echo "installing ${peers[*]}"
	{ apt-get install -y -q "${peers[@]}" || { apt-get update -q && apt-get install -y -q "${peers[@]}"; }; } >/dev/null 2>&1 ||
		echo "peers not installable: their rows are skipped" | tee -a "$log"
fi
if ! [ -f "$(pg_config --sharedir)/extension/cfeed.control" ]; then
	echo "cfeed is not installed: run make install (as root) first" >&2
	exit 1
fi

failed=
step()	# step SCRIPT ARGS...: run one bench script, keep its output
{
	local script=$1 t0
	shift
	t0=$(date +%s)
	echo "=== $script $* ($(date -u +%H:%M:%S))" | tee -a "$log"
	if ! bash "$here/$script" "$@" 2>&1 | tee -a "$log"; then
		failed="$failed $script"
		echo "RESULT|$script failed|-|see results/latest.txt|-|-|no" | tee -a "$log"
	fi
	echo "--- $script: $(( $(date +%s) - t0 )) s" | tee -a "$log"
}
# latency_rows: the RESULT rows of latency.sh's runs in the log: p50/p90/
# p99/max as min-max over the runs; per run, a cfeed mode's p50 and p99
# against the raw NOTIFY's of the same run, the median of those ratios
# judged (p50 ≤ 2×, p99 ≤ 3×).
latency_rows()
{
	local rows
	rows=$(awk '
function seen(m) { if (!(m in runs)) { order[++n] = m; runs[m] = 0 } }
/^run [0-9]+: [a-z]+ FAILED$/ { seen($3); failed[$3]++ }
/^run [0-9]+: [a-z]+ +n=/ {
	m = $3; seen(m); r = ++runs[m]; run_of[m, r] = $2 + 0
	for (f = 5; f <= 8; f++) { split($f, kv, "="); v[m, f, r] = kv[2] + 0 }
}
function lo(m, f,  r, x) { x = v[m, f, 1]; for (r = 2; r <= runs[m]; r++) if (v[m, f, r] < x) x = v[m, f, r]; return x }
function hi(m, f,  r, x) { x = v[m, f, 1]; for (r = 2; r <= runs[m]; r++) if (v[m, f, r] > x) x = v[m, f, r]; return x }
function span(m, f) { return runs[m] ? sprintf("%.2f–%.2f", lo(m, f), hi(m, f)) : "n/a" }
# the median over the runs of m/floor in field f, the floor taken from the same run
function ratio(m, f, floor,  r, k, i, j, t, a, nr) {
	nr = 0
	for (r = 1; r <= runs[m]; r++)
		for (k = 1; k <= runs[floor]; k++)
			if (run_of[floor, k] == run_of[m, r] && v[floor, f, k] > 0)
				a[++nr] = v[m, f, r] / v[floor, f, k]
	for (i = 1; i <= nr; i++) for (j = i + 1; j <= nr; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
	return nr ? a[int((nr + 1) / 2)] : 0
}
END {
	name["notify"] = "raw NOTIFY round trip (the floor)"; name["wait"] = "cfeed.wait"
	name["notifywal"] = "NOTIFY sent with a row, its commit flushed (the floor with a WAL flush)"
	name["read"] = "cfeed.read(wait_ms)"; name["listen"] = "LISTEN on the shard channel"
	name["pgq"] = "PgQ, ticker every 1 ms, idle ticks and consumer polls every 10 ms"
	name["logical"] = "wal2json slot polled every 10 ms"
	for (i = 1; i <= n; i++) {
		m = order[i]
		cf = (m == "wait" || m == "read" || m == "listen")
		r50 = ratio(m, 5, "notify"); r99 = ratio(m, 7, "notify")
		w50 = ratio(m, 5, "notifywal"); w99 = ratio(m, 7, "notifywal")
		met = "-"
		if (cf)
			met = (!failed[m] && r50 > 0 && r50 <= 2 && r99 <= 3) ? "yes" : \
				sprintf("no (vs the flushed NOTIFY: %s)", (!failed[m] && w50 > 0 && w50 <= 2 && w99 <= 3) ? "yes" : "no")
		printf "RESULT|%scommit → woken, %s (1k tx/s load, %d runs%s)|%s|p50 %s, p90 %s, p99 %s, max %s ms|raw NOTIFY p50 %s, p99 %s ms; NOTIFY with a row p50 %s, p99 %s ms|p50 %.1f×, p99 %.1f× NOTIFY; p50 %.1f×, p99 %.1f× NOTIFY with a row (medians of the runs)|%s\n",
			cf ? "3a. " : "", name[m], runs[m], failed[m] ? sprintf(" + %d failed: a sample took > 10 s", failed[m]) : "",
			cf ? "p50 ≤ 2×, p99 ≤ 3× raw NOTIFY" : "peer", span(m, 5), span(m, 6), span(m, 7), span(m, 8),
			span("notify", 5), span("notify", 7), span("notifywal", 5), span("notifywal", 7), r50, r99, w50, w99, met
	}
}' "$log")
	[ -z "$rows" ] || echo "$rows" | tee -a "$log"
}
# In the order of the goals of test/bench/README.md: writes, reads,
# latency (quiet, then under a held horizon), the rest.
step write_overhead.sh 5 8 3
step track.sh 3 8 3
step read_rate.sh 1000000
LATENCY_DUMP=$out/latency.dat step latency.sh 500
latency_rows
step held_xmin.sh 60 15 2
step sweep_rate.sh 200000 2
step idle.sh 20
step feeds1000.sh 10 200
step e2e.sh 100000
step open_writer.sh 20
step read_access.sh 300000 5 8 3
step serve.sh 10000 10 1000
step wide.sh 10000
runtime=$(( $(date +%s) - began ))


# The plot: CDF of every latency mode, the samples of all runs together.
declare -A title=([notify]="raw NOTIFY (the floor)" [notifywal]="NOTIFY with a row (flushed)" [wait]="cfeed.wait" [read]="cfeed.read(wait_ms)"
	[listen]="LISTEN, cfeed channel" [pgq]="PgQ, 1 ms ticker, 10 ms poll" [logical]="wal2json, 10 ms poll")
if command -v gnuplot >/dev/null && [ -s "$out/latency.dat" ]; then
	plots=
	for m in $(awk '!seen[$1]++ {print $1}' "$out/latency.dat"); do
		awk -v m="$m" '$1 == m {print $2}' "$out/latency.dat" | sort -g |
			awk '{v[NR] = $1} END {for (i = 1; i <= NR; i++) print v[i], i / NR}' > "$out/cdf-$m.dat"
		plots="$plots\"$out/cdf-$m.dat\" using 1:2 with lines lw 2 title \"${title[$m]:-$m}\","
	done
	gnuplot <<GP
set terminal png size 760,440 noenhanced
set output "$here/latency.png"
set title "commit -> consumer woken, under 1k tx/s: CDF of all runs ($(date -u +%Y-%m-%d), $(nproc) cores, fsync on)"
set xlabel "ms (log scale)"; set ylabel "fraction of samples"; set logscale x; set grid
set xrange [0.02:200]; set key below horizontal maxcols 3
plot ${plots%,}
GP
fi

# RESULTS.md: settings and the table; notes after the marker are kept.
md=$here/RESULTS.md
notes=$([ -f "$md" ] && sed -n '/^<!-- notes -->/,$p' "$md" || true)
{
	echo "# cfeed benchmark results"
	echo
	echo "Generated by \`make bench\` on $(date -u '+%Y-%m-%d %H:%M UTC') in ${runtime} s; each figure against a baseline"
	echo "measured in the same run. The load average just before the run was $load (on $(nproc) cores: other jobs"
	echo "running meanwhile slow every figure, and more so the absolute ones). Settings:"
	echo
	grep -m3 -E '^(settings|versions|machine):' "$log" | sed 's/^/    /'
	echo
	echo "wal_level is logical only in the clusters of the rows with a wal2json peer (write overhead, latency, read), replica elsewhere."
	echo
	echo "| row | target | measured | baseline (same run) | ratio | met |"
	echo "|---|---|---|---|---|---|"
	grep '^RESULT|' "$log" | cut -d'|' -f2- | sed 's/|/ | /g; s/^/| /; s/$/ |/'
	echo
	echo "![commit → consumer latency CDF](latency.png)"
	echo
	echo "${notes:-<!-- notes -->}"
} > "$md"
echo "=== summary ($runtime s)"
sed -n '/^| row/,/^$/p' "$md"
if [ -n "$failed" ]; then
	echo "failed:$failed" >&2
	exit 1
fi
