# A resharded feed on a streaming standby, and after a failover to it
# (docs/operations.md, "Resharding a feed").
#
# The standby replays cfeed.reshard's commit: cfeed.shard there shows the
# parents closed (and ended once their changes are stamped) and the
# children with their parents; cfeed.shard_for routes by the new layout,
# in a session that had routed keys (and so cached the old layout) before
# the reshard too: the invalidation of shard_config comes with the replay.
# read and wait on an ended parent at its head return at once there, and a
# waiter on a child wakes at its first stamp.  Then the primary is stopped
# and the standby promoted: writes go to the children, a write naming a
# closed parent fails with 55000, and the new primary stamps on.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use FindBin;
use lib $FindBin::RealBin;
use CfeedCheck;

my $primary = cfeed_node('primary', '', allows_streaming => 1);
$primary->safe_psql('postgres', q{
	CREATE EXTENSION cfeed;
	SELECT cfeed.create_feed('f', 2);});
setup_truth($primary, 'postgres');
$primary->safe_psql('postgres',
	q{INSERT INTO truth SELECT cfeed.publish(1, cfeed.shard_for(1, 'k' || g)) FROM generate_series(1, 50) g});
ok(wait_all_stamped($primary, 'postgres'), 'the primary stamped the changes before the reshard');
my $standby = cfeed_standby($primary, 'standby');

my $ROUTES = q{SELECT string_agg(cfeed.shard_for(1, 'k' || g)::text, ',' ORDER BY g) FROM generate_series(1, 50) g};
my $LAYOUT = q{SELECT string_agg(format('%s/%s/%s/%s/%s', shard, coalesce(parent::text, '-'), closed, ended,
										last_change_sequence_number), ',' ORDER BY shard)
			   FROM cfeed.shard WHERE feed_id = 1};

# A standby session that caches the old layout.
my $session = $standby->background_psql('postgres');
my $old_routes = $session->query_safe($ROUTES);
is($old_routes, $primary->safe_psql('postgres', $ROUTES), 'before the reshard the standby routes as the primary');
unlike($old_routes, qr/[2-5]/, 'before the reshard keys go to shards 0 and 1');

$primary->safe_psql('postgres', 'SELECT count(*) FROM cfeed.reshard(1, 4)');
ok($primary->poll_query_until('postgres',
	'SELECT bool_and(ended) FROM cfeed.shard WHERE feed_id = 1 AND closed'), 'the primary\'s parents ended');
$primary->wait_for_catchup($standby);

my $layout = $primary->safe_psql('postgres', $LAYOUT);
like($layout, qr{^0/-/t/t/\d+,1/-/t/t/\d+,2/0/f/f/\d+,3/1/f/f/\d+,4/0/f/f/\d+,5/1/f/f/\d+$}, 'the primary\'s layout');
is($standby->safe_psql('postgres', $LAYOUT), $layout, 'the standby shows parents, closed, ended and heads as the primary');
my $new_routes = $primary->safe_psql('postgres', $ROUTES);
is($standby->safe_psql('postgres', $ROUTES), $new_routes, 'a new standby session routes by the new layout');
is($session->query_safe($ROUTES), $new_routes,
	'a standby session that routed keys before the reshard routes by the new layout after its replay');
unlike($new_routes, qr/\b[01]\b/, 'after the reshard keys go to the children only');

# read and wait on an ended parent at its head return at once.
my $head0 = $standby->safe_psql('postgres', 'SELECT cfeed.head(1, 0)');
my $t0 = time;
is($standby->safe_psql('postgres', "SELECT cfeed.wait(1, 0, $head0, 5000)"), $head0,
	'standby: wait at the head of an ended parent returns its head');
is($standby->safe_psql('postgres', "SELECT count(*) FROM cfeed.read(1, 0, $head0, 100, 5000)"), 0,
	'standby: read(wait_ms) at the head of an ended parent returns no rows');
my $ended_ms = (time - $t0) * 1000;
cmp_ok($ended_ms, '<', 2500, sprintf('standby: both returned at once (%.0f ms for both, 5 s each asked)', $ended_ms));

# A waiter on a child wakes at the child's first stamp.
my $child = $primary->safe_psql('postgres', "SELECT cfeed.shard_for(1, 'k1')");
my $chead = $standby->safe_psql('postgres', "SELECT cfeed.head(1, $child)");
my $waiter = $standby->background_psql('postgres');
$waiter->query_until(qr/started/, "\\echo started\nSELECT cfeed.wait(1, $child, $chead, 20000) AS woke \\gset\n\\echo woke :woke\n");
$standby->poll_query_until('postgres', q{
	SELECT count(*) = 1 FROM pg_stat_activity WHERE query LIKE 'SELECT cfeed.wait(%' AND wait_event IS NOT NULL})
  or die 'the waiter does not wait';
$t0 = time;
$primary->safe_psql('postgres', q{INSERT INTO truth SELECT cfeed.publish(1, cfeed.shard_for(1, 'k1'))});
my $out = $waiter->query_until(qr/woke \d+/, '');
my $wake_ms = (time - $t0) * 1000;
my ($woke) = $out =~ /woke (\d+)/;
cmp_ok($woke, '>', $chead, 'standby: a waiter on a child wakes with the child\'s new head');
cmp_ok($wake_ms, '<', 10000, sprintf('standby: woken %.0f ms after the write', $wake_ms));
$waiter->quit;
$session->quit;

# Failover: the promoted standby routes writes to the children and refuses
# writes to the closed parents.
$primary->wait_for_catchup($standby);
$primary->stop('immediate');
$standby->promote;
$standby->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()') or die 'not promoted';
is($standby->safe_psql('postgres', $ROUTES), $new_routes, 'promoted: keys routed to the children');
my ($rc, $stdout, $stderr) = $standby->psql('postgres', 'SELECT cfeed.publish(1, 1)');
like($stderr, qr/ERROR:  shard 1 of feed 1 is closed/, 'promoted: a write to a closed parent is refused');
($rc, $stdout, $stderr) = $standby->psql('postgres', q{
	\set VERBOSITY sqlstate
	SELECT cfeed.publish(1, 0)});
like($stderr, qr/55000/, 'promoted: with 55000');
$standby->safe_psql('postgres',
	q{INSERT INTO truth SELECT cfeed.publish(1, cfeed.shard_for(1, 'k' || g)) FROM generate_series(1, 50) g});
ok(wait_all_stamped($standby, 'postgres'), 'promoted: the new primary stamps the children\'s changes');
is($standby->safe_psql('postgres', q{
	SELECT count(*) FROM cfeed.change WHERE feed_id = 1 AND shard < 2}), 50,
	'promoted: nothing more on the parents');
check_invariants($standby, 'postgres', 'promoted');

done_testing();
