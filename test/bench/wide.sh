#!/usr/bin/env bash
# A wide feed (row 8, test/bench/README.md): the consumer-group calls on a
# feed of 10,000 shards, against the same calls on 2,500 shards.  Each
# phase creates the feed and a new group (its leases without statistics,
# autovacuum off, as right after the group's first acquire), then times:
# the first acquire (creates 10,000 leases), a second and a third member
# joining (steals), a renewal, a checkpoint, a seek, a release, the views
# consumer_lag and groups, and drop_group.  Linear means the 10,000-shard
# time is about 4x the 2,500-shard one; the goal allows 6x (fixed costs
# favour the small feed), and the first acquire must take at most 1 s.
# Usage: bash test/bench/wide.sh [shards]
. "$(dirname "$0")/lib.sh"
SHARDS=${1:-10000}
SMALL=$((SHARDS / 4))
BENCH_EXTRA_CONF="autovacuum = off" bench_start
bench_settings
psqlc -c "CREATE EXTENSION cfeed" >/dev/null

# ms SQL: the server-side time of one statement, in ms (psql's \timing)
ms()
{
	psqlc -c '\timing on' -c "$1" | sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p'
}
# phase N FEED: prints "first join renew checkpoint seek release lag groups drop"
phase()
{
	local n=$1 f=$2 t=()
	psqlc -c "SELECT cfeed.create_feed('wide$n', $n, $f)" >/dev/null
	t+=("$(ms "SELECT count(*) FROM cfeed.acquire('g', $f, 'a')")")
	t+=("$(ms "SELECT count(*) FROM cfeed.acquire('g', $f, 'b')")")
	t+=("$(ms "SELECT count(*) FROM cfeed.acquire('g', $f, 'c')")")
	t+=("$(ms "SELECT count(*) FROM cfeed.acquire('g', $f, 'a')")")
	t+=("$(ms "SELECT cfeed.checkpoint('g', $f, shard, 'a', epoch, cursor) FROM cfeed.lease WHERE group_name = 'g' AND feed_id = $f AND owner = 'a' LIMIT 1")")
	t+=("$(ms "SELECT cfeed.seek('g', $f, 0, 0)")")
	t+=("$(ms "SELECT cfeed.release('g', $f, 'b')")")
	t+=("$(ms "SELECT count(*) FROM cfeed.consumer_lag WHERE group_name = 'g' AND feed_id = $f")")
	t+=("$(ms "SELECT count(*) FROM cfeed.groups WHERE feed_id = $f")")
	t+=("$(ms "SELECT cfeed.drop_group('g', $f)")")
	echo "${t[*]}"
}
names=(first-acquire 2nd-member 3rd-member renewal checkpoint seek release consumer_lag groups drop_group)
read -r -a small < <(phase "$SMALL" 1)
read -r -a wide < <(phase "$SHARDS" 2)
worst=0
for i in "${!names[@]}"; do
	r=$(awk -v a="${wide[$i]}" -v b="${small[$i]}" 'BEGIN { printf "%.1f", (b > 5 ? a / b : a / 5) }')
	echo "${names[$i]}: $SHARDS shards ${wide[$i]} ms, $SMALL shards ${small[$i]} ms (${r}x)" >&2
	worst=$(awk -v w="$worst" -v r="$r" 'BEGIN { print (r > w ? r : w) }')
done
met=$(awk -v f="${wide[0]}" -v w="$worst" 'BEGIN { print (f <= 1000 && w <= 6 ? "yes" : "no") }')
result "8. a feed of $SHARDS shards: consumer-group calls" "first acquire ≤ 1 s; every call linear in shards" \
	"first acquire ${wide[0]} ms; join ${wide[1]}, renew ${wide[3]}, release ${wide[6]}, consumer_lag ${wide[7]}, groups ${wide[8]} ms" \
	"$SMALL shards: first acquire ${small[0]} ms" "worst $SHARDS/$SMALL ratio ${worst}× (linear: 4×)" "$met"
