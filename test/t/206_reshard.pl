# Resharding under load, from a hot standby and from parallel queries
# (docs/operations.md "Resharding"): shard_for works on a standby, takes no
# lock there (nothing can be written) and routes by the new layout once the
# reshard's commit is replayed; reshard itself is refused there (25006); a
# read or wait at the head of an ended parent returns at once on the
# standby too.  On the primary, shard_for in a parallel query (a worker,
# where no lock is taken) gives the leader's answer.  Under a write load,
# the reshard gets the lock, writers see no error, and every key's changes
# on its parent come before those on its child.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use Time::HiRes qw(time);
use FindBin;
use lib $FindBin::RealBin;
use CfeedCheck;

my $primary = cfeed_node('primary', '', allows_streaming => 1);
$primary->safe_psql('postgres', q{
	CREATE EXTENSION cfeed;
	SELECT cfeed.create_feed('rs', 2);
	SELECT cfeed.publish(1, cfeed.shard_for(1, k)) FROM unnest(ARRAY['a', 'b', 'c', 'd']) k;});
my $standby = cfeed_standby($primary, 'standby');

my $keys = q{SELECT string_agg(k || ':' || cfeed.shard_for(1, k), ' ' ORDER BY k)
	FROM unnest(ARRAY['a', 'b', 'c', 'd']) k};
my $before = $standby->safe_psql('postgres', $keys);
is($before, $primary->safe_psql('postgres', $keys), 'the standby routes as the primary');

$primary->safe_psql('postgres', 'SELECT * FROM cfeed.reshard(1, 4)');
$primary->wait_for_catchup($standby);
my $after = $standby->safe_psql('postgres', $keys);
is($after, $primary->safe_psql('postgres', $keys), 'after the replayed reshard, the standby routes by the new layout');
isnt($after, $before, 'the layout changed');
like($after, qr/^a:[2-5] b:[2-5] c:[2-5] d:[2-5]$/, 'keys go to the children');

# no lock on the standby, where nothing can be written
is($standby->safe_psql('postgres', q{
	BEGIN;
	SELECT cfeed.shard_for(1, 'a') >= 0;
	SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid();
	COMMIT;}), "t\n0", 'shard_for on a standby takes no lock');
my ($rc, $out, $err) = $standby->psql('postgres', 'SELECT * FROM cfeed.reshard(1, 8)');
like($err, qr/read-only transaction/, 'reshard is refused on a standby');

# the parents end once the sweeper stamped their changes; reads at their head
# return at once on the standby
$primary->poll_query_until('postgres', q{
	SELECT bool_and(ended) FROM cfeed.shard WHERE feed_id = 1 AND closed}) or die 'parents never ended';
$primary->wait_for_catchup($standby);
my $t0 = time;
is($standby->safe_psql('postgres', q{
	SELECT count(*) FROM cfeed.read(1, 0, cfeed.head(1, 0), 10, 20000);
	SELECT cfeed.wait(1, 1, cfeed.head(1, 1), 20000) = cfeed.head(1, 1);}), "0\nt",
	'read and wait at the head of an ended shard on the standby');
cmp_ok(time - $t0, '<', 10, 'they returned at once');

# a parallel query: workers compute shard_for without a lock
my $parallel = $primary->safe_psql('postgres', 'SHOW server_version_num') >= 160000
  ? 'debug_parallel_query' : 'force_parallel_mode';
is($primary->safe_psql('postgres', qq{
	SET $parallel = on;
	SET parallel_setup_cost = 0;
	SET parallel_tuple_cost = 0;
	$keys;}), $after, 'shard_for in a parallel query');

# Under load: pgbench writers upserting keys of a tracked table while the
# feed is split; the reshard gets the lock within wait_ms (it waits for the
# writers in progress, not queueing ahead of the new ones), no writer sees an
# error, and every key's changes on its parent come before those on its
# child (v counts the key's updates).
$primary->safe_psql('postgres', q{
	SELECT cfeed.create_feed('load', 2);
	CREATE TABLE kv (k int PRIMARY KEY, v int NOT NULL);
	SELECT cfeed.track('kv', 2);});
my $script = $primary->basedir . '/upsert.sql';
open my $fh, '>', $script or die $!;
print $fh "\\set k random(1, 200)\n"
  . "INSERT INTO kv VALUES (:k, 1) ON CONFLICT (k) DO UPDATE SET v = kv.v + 1;\n";
close $fh;
my ($pout, $perr) = ('', '');
my $writers = IPC::Run::start(
	[ 'pgbench', '-n', '-c', '4', '-j', '2', '-T', '6', '-f', $script, '-l',
	  '--log-prefix', $primary->basedir . '/upsert',
	  '-h', $primary->host, '-p', $primary->port, 'postgres' ],
	'>', \$pout, '2>', \$perr);
sleep 2;
$t0 = time;
is($primary->safe_psql('postgres', 'SELECT count(*) FROM cfeed.reshard(2, 4, 5000)'), '4',
	'reshard under load');
note(sprintf('reshard under load took %.0f ms', (time - $t0) * 1000));
$writers->finish;
is($?, 0, 'no writer failed');
unlike($perr, qr/ERROR/, 'no writer saw an error');
my ($txns) = $pout =~ /number of transactions actually processed: (\d+)/;
# the writers' latencies (pgbench's per-transaction log: field 3, in us)
my @lat;
for my $log (glob($primary->basedir . '/upsert.*'))
{
	open my $lf, '<', $log or die $!;
	push @lat, (split ' ')[2] while <$lf>;
	close $lf;
}
@lat = sort { $a <=> $b } @lat;
note(sprintf('writers: %d transactions, latency p50 %.1f ms, p99 %.1f ms, max %.1f ms across the split',
	$txns, $lat[int(@lat * 0.5)] / 1000, $lat[int(@lat * 0.99)] / 1000, $lat[-1] / 1000));
$primary->poll_query_until('postgres', q{
	SELECT bool_and(ended) FROM cfeed.shard WHERE feed_id = 2 AND closed}) or die 'parents never ended';
is($primary->safe_psql('postgres', q{
	SELECT count(*) FROM (
		SELECT c."row" ->> 'k' AS k,
			   max((c."row" ->> 'v')::int) FILTER (WHERE c.shard < 2) AS parent_max,
			   min((c."row" ->> 'v')::int) FILTER (WHERE c.shard >= 2) AS child_min
		FROM cfeed.change c WHERE c.feed_id = 2 GROUP BY 1) x
	WHERE parent_max >= child_min}), '0', 'every key: its parent\'s changes before its child\'s');
cmp_ok($primary->safe_psql('postgres', q{
	SELECT count(DISTINCT c."row" ->> 'k') FROM cfeed.change c
	WHERE c.feed_id = 2 AND c.shard >= 2
	  AND EXISTS (SELECT FROM cfeed.change p WHERE p.feed_id = 2 AND p.shard < 2
				  AND p."row" ->> 'k' = c."row" ->> 'k')}), '>', 0, 'keys written before and after the split');

done_testing();
