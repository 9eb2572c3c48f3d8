# Wait events: from PostgreSQL 17 each cfeed wait has a name of
# its own in pg_stat_activity.wait_event, so an idle sweeper, the launcher,
# a reader waiting for changes and a sweep_loop between sweeps are told
# apart; before 17 all of them show wait_event 'Extension'.  Always
# wait_event_type 'Extension'.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('waits');
$node->init;
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'cfeed'\n");
$node->start;
$node->safe_psql('postgres', q{
	CREATE EXTENSION cfeed;
	SELECT cfeed.create_feed('f', 1);
});

my $named = $node->safe_psql('postgres', 'SHOW server_version_num') >= 170000;
sub event { return $named ? $_[0] : 'Extension'; }

# Wait until the backend that $where picks waits on event $name.
sub waits_on
{
	my ($where, $name, $label) = @_;
	ok( $node->poll_query_until('postgres', qq{
			SELECT count(*) > 0 FROM pg_stat_activity
			WHERE $where AND wait_event_type = 'Extension' AND wait_event = '$name'}),
		"$label waits on $name");
}

waits_on(q{backend_type = 'cfeed launcher'}, event('CfeedLauncherMain'), 'the launcher');
waits_on(q{backend_type = 'cfeed sweeper'}, event('CfeedSweeperMain'), 'an idle sweeper');

# A reader long-polling an empty shard.
my ($out, $err) = ('', '');
my $reader = IPC::Run::start(
	[ 'psql', '-X', '-At', '-h', $node->host, '-p', $node->port, '-d', 'postgres',
	  '-c', 'SELECT count(*) FROM cfeed.read(1, 0, NULL, 10, 60000)' ],
	'>', \$out, '2>', \$err);
waits_on(q{query LIKE 'SELECT count(*) FROM cfeed.read(%'}, event('CfeedRead'), 'a waiting reader');
if ($named)
{
	is($node->safe_psql('postgres', q{
			SELECT count(DISTINCT wait_event) FROM pg_stat_activity
			WHERE backend_type = 'cfeed sweeper' OR query LIKE 'SELECT count(*) FROM cfeed.read(%'}),
		'2', 'an idle sweeper and a waiting reader are told apart');
}
$node->safe_psql('postgres', 'SELECT cfeed.publish(1, 0)');
$reader->finish;
chomp $out;
is($out, '1', 'the reader woke with the change');

# A sweep_loop between sweeps of a group with nothing to sweep.
my $loop = IPC::Run::start(
	[ 'psql', '-X', '-At', '-h', $node->host, '-p', $node->port, '-d', 'postgres',
	  '-c', 'CALL cfeed.sweep_loop(7, 0, 5000, 1000, null, null, null)' ],
	'>', \$out, '2>', \$err);
waits_on(q{query LIKE 'CALL cfeed.sweep_loop(7%'}, event('CfeedSweepLoop'), 'an idle sweep_loop');
$loop->finish;

done_testing();
