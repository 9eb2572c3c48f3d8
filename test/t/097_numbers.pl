# Numbers (issue 28, items 5 and 9), the parts pg_regress cannot show:
#
#  - a shard that runs out of numbers fails alone under the background
#    sweeper: the other shard of its sweep group keeps being stamped, its
#    own changes stay pending, and cfeed.sweepers shows why (last_error) and
#    so does the log (a WARNING with SQLSTATE 22003);
#  - every consumer-group function and view stays linear in shards on a
#    group whose leases have no statistics yet (a new group: the case that
#    was quadratic in 1.7).  Not timed: auto_explain's row counts of every
#    statement, nested ones included, must stay within a small multiple of
#    the shard count, and no filter may search a parameter's array (a
#    linear search per row).
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('numbers');
$node->init;
# autovacuum off: the leases keep having no statistics
$node->append_conf('postgresql.conf',
	"shared_preload_libraries = 'cfeed'\nautovacuum = off\ncfeed.fallback_interval = 200\n");
$node->start;
$node->safe_psql('postgres', q{
	CREATE EXTENSION cfeed;
	SELECT cfeed.create_feed('edge', 1, 1);
	INSERT INTO cfeed.shard (feed_id, shard, last_change_sequence_number) VALUES (1, 1, 9223372036854775806);
});

# Shard 1 gets the last number, 2^63 - 1; then it has run out.
$node->safe_psql('postgres', 'SELECT cfeed.publish(1, 1, 1)');
$node->poll_query_until('postgres', 'SELECT cfeed.head(1, 1) = 9223372036854775807')
  or die 'shard 1 was not stamped';
my $log_offset = -s $node->logfile;
$node->safe_psql('postgres', 'SELECT cfeed.publish(1, 1, 2)');
$node->safe_psql('postgres', 'SELECT cfeed.publish(1, 0, 3)');
ok($node->poll_query_until('postgres', 'SELECT cfeed.head(1, 0) = 2000000000000001'),
	'the other shard of the group is stamped');
ok( $node->poll_query_until('postgres', q{
	SELECT last_error = 'shard 1 of feed 1 has run out of sequence numbers'
	FROM cfeed.sweepers WHERE datname = 'postgres' AND sweep_group = 0}),
	'cfeed.sweepers shows the shard that ran out');
# last_error names feeds: an operator who may not read every feed sees
# that there is an error, not its text (as pg_stat_activity's query)
$node->safe_psql('postgres', q{
	CREATE ROLE numbers_ops; CREATE ROLE numbers_all; CREATE ROLE numbers_stats;
	GRANT SELECT ON cfeed.sweepers TO numbers_ops, numbers_all, numbers_stats;
	GRANT EXECUTE ON FUNCTION cfeed._sweepers() TO numbers_ops, numbers_all, numbers_stats;
	SELECT cfeed.grant_read_all('numbers_all');
	GRANT pg_read_all_stats TO numbers_stats;
});
my $error_as = sub {
	$node->safe_psql('postgres', qq{SET ROLE $_[0];
		SELECT last_error FROM cfeed.sweepers WHERE datname = 'postgres' AND sweep_group = 0});
};
is($error_as->('numbers_ops'), '<insufficient privilege>', 'an operator without every feed does not see the text');
is($error_as->('numbers_all'), 'shard 1 of feed 1 has run out of sequence numbers',
	'a role that may read every feed does');
is($error_as->('numbers_stats'), 'shard 1 of feed 1 has run out of sequence numbers',
	'and so does one with pg_read_all_stats');
ok($node->wait_for_log(qr/WARNING:  shard 1 of feed 1 has run out of sequence numbers/, $log_offset),
	'and the log has the warning');
# more changes: the other shard goes on, the exhausted one stays put
$node->safe_psql('postgres', 'SELECT cfeed.publish(1, 0, 4), cfeed.publish(1, 1, 5), cfeed.publish(1, 0, 6)');
ok($node->poll_query_until('postgres', 'SELECT cfeed.head(1, 0) = 2000000000000003'),
	'the other shard keeps being stamped');
is( $node->safe_psql('postgres', q{
	SELECT string_agg(change_id || ':' || coalesce(change_sequence_number::text, 'pending'), ' ' ORDER BY change_id)
	FROM cfeed.change}),
	'1:9223372036854775807 2:pending 3:2000000000000001 4:2000000000000002 5:pending 6:2000000000000003',
	'the exhausted shard\'s changes stay pending, nothing wrapped around');
is($node->safe_psql('postgres', 'SELECT head, pending FROM cfeed.stats WHERE shard = 1'),
	'9223372036854775807|2', 'cfeed.stats shows them pending');

# The sweeper recovers, and last_error says so (issue 28, item 12: 1.7
# kept the last error for ever): the exhausted shard's pending changes go,
# and last_error is cleared by the next sweep.
$node->safe_psql('postgres', 'DELETE FROM cfeed.change WHERE feed_id = 1 AND shard = 1 AND change_sequence_number IS NULL');
$node->safe_psql('postgres', 'SELECT cfeed.publish(1, 0, 7)');
ok( $node->poll_query_until('postgres', q{
	SELECT last_error IS NULL FROM cfeed.sweepers WHERE datname = 'postgres' AND sweep_group = 0}),
	'last_error is cleared once the group sweeps without the exhausted shard');
# an ERROR of a sweep (a trigger of the owner's that refuses the stamps)
# shows until the sweeper stamps again
$node->safe_psql('postgres', q{
	CREATE FUNCTION refuse_stamps() RETURNS trigger LANGUAGE plpgsql AS
		$$BEGIN RAISE EXCEPTION 'stamps refused for a while'; END$$;
	CREATE TRIGGER refuse_stamps BEFORE UPDATE ON cfeed.change FOR EACH ROW EXECUTE FUNCTION refuse_stamps();
	SELECT cfeed.publish(1, 0, 8);
});
ok( $node->poll_query_until('postgres', q{
	SELECT last_error = 'stamps refused for a while' FROM cfeed.sweepers
	WHERE datname = 'postgres' AND sweep_group = 0}),
	'a failing sweep shows its error');
$node->safe_psql('postgres', 'DROP TRIGGER refuse_stamps ON cfeed.change');
ok( $node->poll_query_until('postgres', q{
	SELECT cfeed.head(1, 0) = 2000000000000005 AND last_error IS NULL FROM cfeed.sweepers
	WHERE datname = 'postgres' AND sweep_group = 0}),
	'and it is cleared when the sweeper stamps again');

# Plans of a new group on a feed of 3,000 shards.  work = the largest
# (rows + rows removed) x loops of any plan node of any statement.
my $shards = 3000;
$node->safe_psql('postgres', "SELECT cfeed.create_feed('wide', $shards, 2)");

sub max_work
{
	my ($sql) = @_;
	my ($ret, $out, $err) = $node->psql(
		'postgres', qq{
		LOAD 'auto_explain';
		SET auto_explain.log_min_duration = 0;
		SET auto_explain.log_analyze = on;
		SET auto_explain.log_timing = off;
		SET auto_explain.log_nested_statements = on;
		SET auto_explain.log_level = notice;
		SET client_min_messages = notice;
		$sql});
	die "$sql failed: $err" if $ret != 0;
	my $max = 0;
	my $work;
	for my $line (split /\n/, $err)
	{
		if ($line =~ /\(actual rows=(\d+) loops=(\d+)\)/)
		{
			$work = [ $1, $2 ];
			$max = $1 * $2 if $1 * $2 > $max;
		}
		elsif ($line =~ /Rows Removed by (?:Join )?Filter: (\d+)/ && $work)
		{
			my $w = ($work->[0] + $1) * $work->[1];
			$max = $w if $w > $max;
		}
		elsif ($line =~ /Filter: .*= ANY \(\$\d+\)/ && $work)
		{
			# a parameter's array, searched element by element for each
			# row: as much work per row as the array has elements
			my $w = $work->[0] * $shards;
			$max = $w if $w > $max;
		}
	}
	return $max;
}

for my $step (
	[ 'acquire, first member', q{SELECT count(*) FROM cfeed.acquire('new', 2, 'a')} ],
	[ 'acquire, second member', q{SELECT count(*) FROM cfeed.acquire('new', 2, 'b')} ],
	[ 'acquire, third member', q{SELECT count(*) FROM cfeed.acquire('new', 2, 'c')} ],
	[ 'acquire, renewal', q{SELECT count(*) FROM cfeed.acquire('new', 2, 'a')} ],
	[ 'checkpoint', q{SELECT cfeed.checkpoint('new', 2, s.shard, 'a', s.epoch, s.cursor) FROM cfeed.acquire('new', 2, 'a') s LIMIT 1} ],
	[ 'seek', q{SELECT cfeed.seek('new', 2, 0, 0)} ],
	[ 'release', q{SELECT cfeed.release('new', 2, 'b')} ],
	[ 'consumer_lag', q{SELECT count(*) FROM cfeed.consumer_lag WHERE group_name = 'new' AND feed_id = 2} ],
	[ 'groups', q{SELECT count(*) FROM cfeed.groups} ],
	[ 'drop_group', q{SELECT cfeed.drop_group('new', 2)} ])
{
	my $work = max_work($step->[1]);
	cmp_ok($work, '<=', 4 * $shards, "$step->[0]: linear in shards (largest plan node: $work rows)");
}

done_testing();
