#!/usr/bin/env bash
# The benchmark suite (`make bench`): every performance target of
# test/bench/README.md against its baseline and the peers (PgQ, wal2json)
# measured in the same run, ~7-10 minutes on 2 cores.  Run as root: it
# installs the peers from Debian when they are missing (their rows are
# skipped when it cannot) and each script starts and removes its own
# throwaway cluster.  Uses the installed cfeed (make install).
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
# p99/max as min-max over the runs; the ratio of the median p50 to raw
# NOTIFY's.
latency_rows()
{
	local rows
	rows=$(awk '
function seen(m) { if (!(m in runs)) { order[++n] = m; runs[m] = 0 } }
/^run [0-9]+: [a-z]+ FAILED$/ { seen($3); failed[$3]++ }
/^run [0-9]+: [a-z]+ +n=/ {
	m = $3; seen(m); r = ++runs[m]
	for (f = 5; f <= 8; f++) { split($f, kv, "="); v[m, f, r] = kv[2] + 0 }
}
function lo(m, f,  r, x) { x = v[m, f, 1]; for (r = 2; r <= runs[m]; r++) if (v[m, f, r] < x) x = v[m, f, r]; return x }
function hi(m, f,  r, x) { x = v[m, f, 1]; for (r = 2; r <= runs[m]; r++) if (v[m, f, r] > x) x = v[m, f, r]; return x }
function med(m, f,  r, i, j, t, a) {
	for (r = 1; r <= runs[m]; r++) a[r] = v[m, f, r]
	for (i = 1; i <= runs[m]; i++) for (j = i + 1; j <= runs[m]; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
	return a[int((runs[m] + 1) / 2)]
}
function span(m, f) { return runs[m] ? sprintf("%.2f–%.2f", lo(m, f), hi(m, f)) : "n/a" }
END {
	name["notify"] = "raw NOTIFY round trip (the floor)"; name["wait"] = "cfeed.wait"
	name["read"] = "cfeed.read(wait_ms)"; name["listen"] = "LISTEN on the shard channel"
	name["pgq"] = "PgQ, ticker every 1 ms, idle ticks and consumer polls every 10 ms"
	name["logical"] = "wal2json slot polled every 10 ms"
	for (i = 1; i <= n; i++) {
		m = order[i]
		cf = (m == "wait" || m == "read" || m == "listen")
		ratio = (runs[m] && runs["notify"]) ? med(m, 5) / med("notify", 5) : 0
		met = "-"
		if (cf) {
			abs = runs[m] && !failed[m] && hi(m, 5) <= 2 && hi(m, 7) <= 10; rel = ratio > 0 && ratio <= 3
			met = (abs && rel) ? "yes" : sprintf("no (p50/p99 %s; ≤ 3× NOTIFY %s)", abs ? "yes" : "no", rel ? "yes" : "no")
		}
		printf "RESULT|commit → woken, %s (1k tx/s load, %d runs%s)|%s|p50 %s, p90 %s, p99 %s, max %s ms|raw NOTIFY p50 %s ms|%.1f× NOTIFY (median p50s)|%s\n",
			name[m], runs[m], failed[m] ? sprintf(" + %d failed: a sample took > 10 s", failed[m]) : "",
			cf ? "p50 ≤ 2 ms, p99 ≤ 10 ms; ≤ 3× NOTIFY" : "peer", span(m, 5), span(m, 6), span(m, 7), span(m, 8),
			span("notify", 5), ratio, met
	}
}' "$log")
	[ -z "$rows" ] || echo "$rows" | tee -a "$log"
}
step write_overhead.sh 5 8 2
step sweep_rate.sh 200000 2
LATENCY_DUMP=$out/latency.dat step latency.sh 500
latency_rows
step read_rate.sh 1000000
step idle.sh 20
step feeds1000.sh 10 200
step open_writer.sh 20
step held_xmin.sh 60 15
step e2e.sh 100000
step track.sh 3 8 3
step read_access.sh 300000 5 8 3
runtime=$(( $(date +%s) - began ))


# The plot: CDF of every latency mode, the samples of all runs together.
declare -A title=([notify]="raw NOTIFY (the floor)" [wait]="cfeed.wait" [read]="cfeed.read(wait_ms)"
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
