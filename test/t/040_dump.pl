# pg_dump / pg_restore: feeds, shards, stamped and pending
# changes, backfilled history, the change_id sequence position and a
# resharded feed's layout (1.9: parents closed with pending changes,
# children) survive into a fresh database, which then sweeps and reads on
# from where it stopped, gaplessly, and routes by the restored layout.
# A feed resharded twice (feed 21) keeps every generation: parents,
# closed, ended and heads, one parent of the second generation closed with
# a change pending; it ends once swept.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use CfeedCheck;

my $node = PostgreSQL::Test::Cluster->new('dump');
$node->init;
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'cfeed'\ncfeed.enable_sweeper = off\n");
$node->start;
$node->safe_psql('postgres', 'CREATE DATABASE src');
$node->safe_psql('src', q{
	CREATE EXTENSION cfeed;
	SELECT cfeed.create_feed('orders', 3);
	SELECT cfeed.create_feed('audit', 1, feed_id => 10, sweep_group => 2, longpoll => false);
	CREATE TABLE truth (change_id bigint PRIMARY KEY);
	INSERT INTO cfeed.change (feed_id, shard, change_id, change_sequence_number)
	VALUES (1, 0, 1, 1999999999999999), (1, 0, 2, 2000000000000000);
	INSERT INTO truth VALUES (1), (2);
	INSERT INTO truth SELECT cfeed.publish(1, g % 3) FROM generate_series(1, 30) g;
	INSERT INTO truth SELECT cfeed.publish(10, 0) FROM generate_series(1, 5) g;
	SELECT count(*) FROM cfeed.sweep(0);
	SELECT count(*) FROM cfeed.sweep(2);
	SELECT cfeed.create_feed('split2', 2, feed_id => 21);
	INSERT INTO truth SELECT cfeed.publish(21, cfeed.shard_for(21, 'k' || g)) FROM generate_series(1, 20) g;
	SELECT count(*) FROM cfeed.reshard(21, 4);
	INSERT INTO truth SELECT cfeed.publish(21, cfeed.shard_for(21, 'k' || g)) FROM generate_series(1, 20) g;
	SELECT count(*) FROM cfeed.sweep(0);
	INSERT INTO truth SELECT cfeed.publish(21, 3);
	SELECT count(*) FROM cfeed.reshard(21, 8);
	INSERT INTO truth SELECT cfeed.publish(21, cfeed.shard_for(21, 'k' || g)) FROM generate_series(1, 20) g;
	INSERT INTO truth SELECT cfeed.publish(1, g % 3) FROM generate_series(1, 7) g;
	SELECT cfeed.create_feed('split', 1, feed_id => 20);
	INSERT INTO truth SELECT cfeed.publish(20, 0) FROM generate_series(1, 3) g;
	SELECT count(*) FROM cfeed.reshard(20, 2);
	INSERT INTO truth SELECT cfeed.publish(20, cfeed.shard_for(20, g::text)) FROM generate_series(1, 4) g;
});

my $before = $node->safe_psql('src', q{
	SELECT string_agg(format('%s/%s/%s/%s', feed_id, shard, change_id, change_sequence_number), ',' ORDER BY feed_id, shard, change_id)
	FROM cfeed.change});
my $heads = $node->safe_psql('src', q{
	SELECT string_agg(format('%s/%s/%s/%s/%s/%s/%s', feed_id, shard, last_change_sequence_number, start_sequence_number,
							 sweep_group, parent, closed), ',' ORDER BY 1)
	FROM cfeed.shard});
my $seq = $node->safe_psql('src', q{SELECT last_value FROM cfeed.change_id});
my $LAYOUT = q{
	SELECT string_agg(format('%s/%s/%s/%s/%s', shard, coalesce(parent::text, '-'), closed, ended, last_change_sequence_number),
					  ',' ORDER BY shard)
	FROM cfeed.shard WHERE feed_id = 21};
my $ROUTES = q{SELECT string_agg(cfeed.shard_for(21, 'k' || g)::text, ',' ORDER BY g) FROM generate_series(1, 40) g};
my $layout = $node->safe_psql('src', $LAYOUT);
my $routes2 = $node->safe_psql('src', $ROUTES);
like($layout, qr{^0/-/t/t/\d+,1/-/t/t/\d+,2/0/t/t/\d+,3/1/t/f/\d+,4/0/t/t/\d+,5/1/t/t/\d+,6/2/f/f/\d+,7/3/f/f/\d+,8/4/f/f/\d+,9/5/f/f/\d+,10/2/f/f/\d+,11/3/f/f/\d+,12/4/f/f/\d+,13/5/f/f/\d+$},
	'resharded twice: shard 3 closed with a change pending, the other parents ended');

my $dump = $node->basedir . '/src.dump';
$node->command_ok([ 'pg_dump', '-Fc', '-h', $node->host, '-p', $node->port, '-f', $dump, 'src' ], 'pg_dump');
$node->safe_psql('postgres', 'CREATE DATABASE dst');
$node->command_ok([ 'pg_restore', '--exit-on-error', '-h', $node->host, '-p', $node->port, '-d', 'dst', $dump ],
	'pg_restore as the extension owner');

is($node->safe_psql('dst', q{
	SELECT string_agg(format('%s/%s/%s/%s', feed_id, shard, change_id, change_sequence_number), ',' ORDER BY feed_id, shard, change_id)
	FROM cfeed.change}), $before, 'changes, stamped and pending, restored with their numbers');
is($node->safe_psql('dst', q{
	SELECT string_agg(format('%s/%s/%s/%s/%s/%s/%s', feed_id, shard, last_change_sequence_number, start_sequence_number,
							 sweep_group, parent, closed), ',' ORDER BY 1)
	FROM cfeed.shard}), $heads, 'shards restored with heads, start values, groups, parents and closed');
my $routes = q{SELECT string_agg(cfeed.shard_for(20, g::text)::text, ',' ORDER BY g) FROM generate_series(1, 8) g};
is($node->safe_psql('dst', $routes), $node->safe_psql('src', $routes), 'keys routed by the restored layout');
my ($rc, $out, $err) = $node->psql('dst', 'SELECT cfeed.publish(20, 0, 1)');
like($err, qr/shard 0 of feed 20 is closed/, 'the restored parent refuses changes');
is($node->safe_psql('dst', $LAYOUT), $layout, 'resharded twice: parents, closed, ended and heads restored');
is($node->safe_psql('dst', $ROUTES), $routes2, 'resharded twice: keys routed to the same open shards');
is($node->safe_psql('dst', q{SELECT name || ':' || coalesce(comment, '') FROM cfeed.feed WHERE feed_id = 10}),
	'audit:', 'feeds restored');
is($node->safe_psql('dst', q{SELECT last_value FROM cfeed.change_id}), $seq, 'change_id sequence position restored');

# The restored database sweeps the pending changes on from the old heads.
$node->safe_psql('dst', 'SELECT count(*) FROM cfeed.sweep(0)');
is($node->safe_psql('dst', 'SELECT count(*) FROM cfeed.change WHERE change_sequence_number IS NULL'), '0',
	'restored pending changes are swept');
check_invariants($node, 'dst', 'restored database');
is($node->safe_psql('dst', q{SELECT ended FROM cfeed.shard WHERE feed_id = 20 AND shard = 0}), 't',
	'the restored parent ends once its pending changes are swept');
is($node->safe_psql('dst', q{SELECT count(*) FROM cfeed.shard WHERE feed_id = 21 AND closed AND NOT ended}), 0,
	'resharded twice: the second generation\'s parent with a pending change ends once swept');
is($node->safe_psql('dst', q{SELECT count(*) FROM cfeed.read(1, 0, NULL, 1000)}),
	$node->safe_psql('dst', q{SELECT count(*) FROM cfeed.change WHERE feed_id = 1 AND shard = 0}),
	'a reader from the beginning sees history and live changes');
cmp_ok($node->safe_psql('dst', q{SELECT cfeed.publish(1, 0)}), '>', $seq, 'new change_ids continue after the restored position');

# A parallel restore (pg_restore -j): pg_dump orders the data of an
# extension's tables by their foreign keys for a serial restore only, so
# the workers may copy shard_config before feed, lease before shard_config,
# failed_change before lease.  Since 1.9 cfeed's tables reference each
# other by triggers that let a restore's rows in (check_function_bodies
# off), and the complete data restores, as it does with the replica
# setting, where no such trigger fires and cfeed's own guards (enabled
# ALWAYS) do.
$node->safe_psql('src', q{
	CREATE ROLE dump_reader;
	SELECT cfeed.grant_read(1, 'dump_reader');
	SELECT count(*) FROM cfeed.acquire('g', 1, 'a');
	SELECT count(*) FROM cfeed.acquire('g', 21, 'a');
	SELECT cfeed.set_failure_policy('g', 1, max_attempts => 1, dead_letter => true);
});
my $cursor = $node->safe_psql('src', q{SELECT cursor FROM cfeed.lease WHERE group_name = 'g' AND feed_id = 1 AND shard = 0});
my ($epoch) = $node->safe_psql('src', q{SELECT epoch FROM cfeed.lease WHERE group_name = 'g' AND feed_id = 1 AND shard = 0});
my $next = $node->safe_psql('src', qq{SELECT change_sequence_number FROM cfeed.read(1, 0, $cursor, 1)});
$node->safe_psql('src', qq{SELECT count(*) FROM cfeed.fail('g', 1, 0, 'a', $epoch, $next, 'poison')});
my $GROUPS = q{
	SELECT (SELECT string_agg(format('%s/%s/%s/%s/%s', group_name, feed_id, shard, cursor, epoch), ',' ORDER BY 1) FROM cfeed.lease)
		|| ' ' || (SELECT count(*) FROM cfeed.failed_change) || ' ' || (SELECT count(*) FROM cfeed.failure_policy)
		|| ' ' || (SELECT count(*) FROM cfeed.read_grant)};
my $groups = $node->safe_psql('src', $GROUPS);
like($groups, qr/ 1 1 1$/, 'the source has a dead letter, a failure policy and a read grant');
$node->command_ok([ 'pg_dump', '-Fc', '-h', $node->host, '-p', $node->port, '-f', $dump, 'src' ], 'pg_dump again');
foreach my $round (1 .. 3)
{
	$node->safe_psql('postgres', 'DROP DATABASE IF EXISTS dstj');
	$node->safe_psql('postgres', 'CREATE DATABASE dstj');
	$node->command_ok([ 'pg_restore', '--exit-on-error', '-j', '4', '-h', $node->host, '-p', $node->port, '-d', 'dstj', $dump ],
		"pg_restore -j 4, round $round");
	is($node->safe_psql('dstj', $GROUPS), $groups, "parallel restore, round $round: leases, dead letters, policies and grants");
}
$node->safe_psql('postgres', 'CREATE DATABASE dstr');
{
	local $ENV{PGOPTIONS} = '-c session_replication_role=replica';
	$node->command_ok([ 'pg_restore', '--exit-on-error', '-j', '4', '-h', $node->host, '-p', $node->port, '-d', 'dstr', $dump ],
		'pg_restore -j 4 with session_replication_role = replica');
}
is($node->safe_psql('dstr', $GROUPS), $groups, 'parallel restore in replica mode: leases, dead letters, policies and grants');
is($node->safe_psql('dstj', q{
	SELECT string_agg(format('%s/%s/%s/%s/%s/%s/%s', feed_id, shard, last_change_sequence_number, start_sequence_number,
							 sweep_group, parent, closed), ',' ORDER BY 1)
	FROM cfeed.shard}), $node->safe_psql('src', q{
	SELECT string_agg(format('%s/%s/%s/%s/%s/%s/%s', feed_id, shard, last_change_sequence_number, start_sequence_number,
							 sweep_group, parent, closed), ',' ORDER BY 1)
	FROM cfeed.shard}), 'parallel restore: shards with heads, groups, parents and closed');
is($node->safe_psql('dstj', q{SELECT count(*) FROM cfeed.change}), $node->safe_psql('src', q{SELECT count(*) FROM cfeed.change}),
	'parallel restore: every change');
$node->safe_psql('dstj', 'SELECT count(*) FROM cfeed.sweep(0)');
check_invariants($node, 'dstj', 'database restored in parallel');

done_testing();
