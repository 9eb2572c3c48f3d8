# Long-polling (the sweeper's NOTIFY, wait and read(wait_ms)): every
# longpoll shard of a sweep group notifies its channel with the new head;
# longpoll = false shards send nothing; waits wake on a stamp, time out,
# are cancellable and show a wait event; without the preload and on a hot
# standby they still work by polling.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

my $node = PostgreSQL::Test::Cluster->new('primary');
$node->init(allows_streaming => 1);
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'cfeed'\n");
$node->start;
$node->safe_psql('postgres', q{
	CREATE EXTENSION cfeed;
	SELECT cfeed.create_feed('f', 4);
	UPDATE cfeed.shard SET longpoll = false WHERE feed_id = 1 AND shard = 3;
});

# Start a psql running $sql on $n in the background and wait until it
# sleeps in a cfeed wait (wait_event_type Extension); returns the harness
# and a reference to its stdout.
sub start_waiter
{
	my ($n, $sql, $pattern) = @_;
	my ($out, $err) = ('', '');
	my $h = IPC::Run::start(
		[ 'psql', '-X', '-At', '-h', $n->host, '-p', $n->port, '-d', 'postgres', '-c', $sql ],
		'>', \$out, '2>', \$err);
	$n->poll_query_until('postgres', qq{
		SELECT count(*) = 1 FROM pg_stat_activity
		WHERE query LIKE '$pattern' AND wait_event_type = 'Extension'}) or die "waiter not seen: $sql";
	return ($h, \$out, \$err);
}

# Listen on all four channels in a background session, then write to every
# shard; the sweep of the group must notify shards 0..2 (all of them,
# including the last longpoll shard of the group) and not shard 3.
my ($in, $out, $err) = ('', '', '');
my $listener = IPC::Run::start(
	[ 'psql', '-X', '-h', $node->host, '-p', $node->port, '-d', 'postgres' ],
	'<', \$in, '>', \$out, '2>', \$err);
$in .= "LISTEN cfeed_1_0; LISTEN cfeed_1_1; LISTEN cfeed_1_2; LISTEN cfeed_1_3;\n";
$in .= "SELECT 'listening';\n";
$listener->pump until $out =~ /listening/;
$node->safe_psql('postgres', 'SELECT cfeed.publish(1, s) FROM generate_series(0, 3) s, generate_series(1, 2)');
$node->poll_query_until('postgres', 'SELECT cfeed.head(1, 3) = 2000000000000002') or die 'not swept';
$in .= "SELECT pg_sleep(0.2); SELECT 'done';\n";
$listener->pump until $out =~ /done/;
$in .= "\\q\n";
$listener->finish;
for my $s (0 .. 2)
{
	like($out, qr/notification "cfeed_1_$s" with payload "2000000000000002"/,
		"shard $s notified its channel with the new head");
}
unlike($out, qr/cfeed_1_3/, 'longpoll = false shard sent no notification');

# cfeed.wait wakes when a stamp passes the cursor.
my $head = $node->safe_psql('postgres', 'SELECT cfeed.head(1, 0)');
my $t0 = time;
my ($waiter, $wout, $werr) = start_waiter($node, "SELECT cfeed.wait(1, 0, $head, 20000)", 'SELECT cfeed.wait%');
pass('a waiting reader shows wait_event_type Extension');
$node->safe_psql('postgres', 'SELECT cfeed.publish(1, 0)');
$waiter->finish;
chomp $$wout;
is($$wout, $head + 1, 'cfeed.wait returned the new head');
ok(time - $t0 < 15, 'well before its timeout');

# read(wait_ms) returns the new rows in the same call.
$head = $node->safe_psql('postgres', 'SELECT cfeed.head(1, 1)');
($waiter, $wout, $werr) = start_waiter($node,
	"SELECT count(*) FROM cfeed.read(1, 1, $head, 100, 20000)", '%cfeed.read%');
$node->safe_psql('postgres', 'SELECT cfeed.publish(1, 1), cfeed.publish(1, 1)');
$waiter->finish;
chomp $$wout;
is($$wout, '2', 'read(wait_ms) returned both new changes');

# A wait times out with the unchanged head.
$head = $node->safe_psql('postgres', 'SELECT cfeed.head(1, 2)');
is($node->safe_psql('postgres', "SELECT cfeed.wait(1, 2, $head, 200)"), $head, 'timeout returns the head');

# A wait is cancellable, by pg_cancel_backend and by statement_timeout.
($waiter, $wout, $werr) = start_waiter($node, "SELECT cfeed.wait(1, 2, $head, 60000)", 'SELECT cfeed.wait%');
$node->safe_psql('postgres', q{
	SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE query LIKE 'SELECT cfeed.wait%'});
$waiter->finish;
like($$werr, qr/canceling statement due to user request/, 'pg_cancel_backend cancels a wait');
my ($ret, $stdout, $stderr) = $node->psql('postgres',
	"SET statement_timeout = '200ms'; SELECT cfeed.wait(1, 2, $head, 60000)");
like($stderr, qr/canceling statement due to statement timeout/, 'statement_timeout cancels a wait');

# A hot standby: reads work, and a wait there wakes (by polling the
# replayed head) when the primary stamps.
$node->backup('b');
my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($node, 'b', has_streaming => 1);
$standby->start;
$node->wait_for_catchup($standby);
$head = $standby->safe_psql('postgres', 'SELECT cfeed.head(1, 0)');
($waiter, $wout, $werr) = start_waiter($standby,
	"SELECT count(*) FROM cfeed.read(1, 0, $head, 100, 20000)", '%cfeed.read%');
$node->safe_psql('postgres', 'SELECT cfeed.publish(1, 0)');
$waiter->finish;
chomp $$wout;
is($$wout, '1', 'read(wait_ms) on the standby woke with the replayed change');
my (undef, undef, $serr) = $standby->psql('postgres', 'SELECT * FROM cfeed.sweep()');
like($serr, qr/cannot sweep during recovery/, 'sweeping on a standby is refused');
$standby->stop;

# Without the preload: sweep() from SQL, wait() by polling.
my $plain = PostgreSQL::Test::Cluster->new('nopreload');
$plain->init;
$plain->start;
$plain->safe_psql('postgres', q{CREATE EXTENSION cfeed; SELECT cfeed.create_feed('f', 1);});
is($plain->safe_psql('postgres', 'SELECT count(*) FROM cfeed.sweepers'), '0', 'no sweepers without the preload');
($waiter, $wout, $werr) = start_waiter($plain,
	'SELECT cfeed.wait(1, 0, 2000000000000000, 20000)', 'SELECT cfeed.wait%');
$plain->safe_psql('postgres', 'SELECT cfeed.publish(1, 0)');
$plain->safe_psql('postgres', 'CALL cfeed.sweep_loop(0, 0, 0, 0, null, null, null)');
$waiter->finish;
chomp $$wout;
is($$wout, '2000000000000001', 'without the preload a wait wakes by polling after a SQL sweep');

done_testing();
