# sweep_loop's wait_ms: it bounds the wait for a turn when another
# sweeper holds the group.  Within the bound, sweep_loop takes its turn when
# the other sweep commits; past it, it returns with iterations = 0 while the
# other sweep still holds the group.  (The isolation spec double_sweep covers
# the bounds 0 and 200 ms; the wait polls, which the isolation tester cannot
# see as blocked, hence this test for the turn taken.)
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;

my $node = PostgreSQL::Test::Cluster->new('loop');
$node->init;
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'cfeed'\ncfeed.enable_sweeper = off\n");
$node->start;
$node->safe_psql('postgres', q{CREATE EXTENSION cfeed; SELECT cfeed.create_feed('f', 1)});

# hold_group(seconds): a session that sweeps group 0 and keeps its
# transaction (and so the group) for that long.
sub hold_group
{
	my ($seconds) = @_;
	my ($out, $err) = ('', '');
	my $h = IPC::Run::start(
		[ 'psql', '-XAtq', '-d', $node->connstr('postgres'), '-v', 'ON_ERROR_STOP=1',
		  '-c', 'BEGIN', '-c', 'SELECT count(*) FROM cfeed.sweep(0)',
		  '-c', "SELECT pg_sleep($seconds)", '-c', 'COMMIT' ],
		'>', \$out, '2>', \$err,
		IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));
	$node->poll_query_until('postgres', q{
		SELECT count(*) = 1 FROM pg_stat_activity WHERE query = 'SELECT pg_sleep(} . $seconds . q{)'})
	  or die 'the holding session did not start';
	return $h;
}

# loop(wait_ms): "change_count iterations" of one sweep_loop call.
sub loop
{
	my ($wait_ms) = @_;
	my ($count, undef, $iterations) = split /\|/,
	  $node->safe_psql('postgres', "CALL cfeed.sweep_loop(0, $wait_ms, 0, 0, null, null, null)");
	return "$count $iterations";
}

# Within the bound: the loop waits for the open sweep, then stamps the
# change committed meanwhile.
my $holder = hold_group(2);
$node->safe_psql('postgres', 'SELECT cfeed.publish(1, 0)');
is(loop(60000), '1 1', 'within wait_ms: takes its turn after the open sweep and stamps');
ok($holder->finish, 'the holding session committed');

# Past the bound: returns with nothing done while the other still holds.
$holder = hold_group(30);
$node->safe_psql('postgres', 'SELECT cfeed.publish(1, 0)');
is(loop(300), '0 0', 'past wait_ms: returns with iterations = 0');
ok($holder->pumpable, 'the holding session was still open then');
is($node->safe_psql('postgres', q{SELECT count(*) FROM cfeed.change WHERE change_sequence_number IS NULL}),
	'1', 'nothing was stamped');
$node->safe_psql('postgres', q{SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE query = 'SELECT pg_sleep(30)'});
$holder->finish;
is(loop(0), '1 1', 'once the group is free, wait_ms 0 sweeps at once');

done_testing();
