# The standby waker (standby_waker.c): on a hot standby, a wait is woken
# when replay moved, not at its next cfeed.poll_interval.  With the poll
# interval at 10 s, a wait begun before a change is committed on the
# primary returns within a few seconds of it only if something woke it.
# Also: the waker runs on a standby only, sleeps while no wait is under
# way, and exits at promotion.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use Time::HiRes qw(time usleep);
use FindBin;
use lib $FindBin::RealBin;
use CfeedCheck;

my $primary = cfeed_node('primary', '', allows_streaming => 1);
$primary->safe_psql('postgres', q{
	CREATE EXTENSION cfeed;
	SELECT cfeed.create_feed('orders', 1);
	SELECT cfeed.publish(1, 0);});
$primary->poll_query_until('postgres', 'SELECT cfeed.head(1, 0) > 2000000000000000')
  or die 'the first change was not stamped';
my $standby = cfeed_standby($primary, 'standby', "cfeed.poll_interval = '10s'\n");

my $wakers = q{SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'cfeed standby waker'};
ok($standby->poll_query_until('postgres', "SELECT ($wakers) = 1"), 'the standby runs a waker');
is($primary->safe_psql('postgres', $wakers), '0', 'the primary runs none');
if ($standby->safe_psql('postgres', 'SHOW server_version_num') >= 170000)
{
	ok($standby->poll_query_until('postgres', q{
		SELECT wait_event = 'CfeedStandbyWaker' FROM pg_stat_activity
		WHERE backend_type = 'cfeed standby waker'}), 'the waker shows its wait event');
}

# A wait that returns at once (its cursor behind the head) leaves the waker
# asleep: it watched replay every 10 ms until that wait's timeout (about
# 200 wake-ups in 2 s), counted in its voluntary context switches.
my $waker_pid = $standby->safe_psql('postgres', "SELECT pid FROM pg_stat_activity WHERE backend_type = 'cfeed standby waker'");
sub waker_switches
{
	my $status = slurp_file("/proc/$waker_pid/status");
	return $status =~ /^voluntary_ctxt_switches:\s*(\d+)/m ? $1 : die 'no context switches';
}
is($standby->safe_psql('postgres', 'SELECT cfeed.wait(1, 0, 0, 600000) > 0'), 't', 'a wait behind the head returns at once');
my $switches = waker_switches();
sleep 2;
$switches = waker_switches() - $switches;
cmp_ok($switches, '<', 20, "after it the waker sleeps ($switches wake-ups in 2 s)");

# Each wait: a psql on the standby, started with the head as its cursor; a
# change published on the primary a second later.  Without a wake-up the
# wait re-reads the head after 10 s.
for my $round (1 .. 3)
{
	my $head = $standby->safe_psql('postgres', 'SELECT cfeed.head(1, 0)');
	my ($out, $err) = ('', '');
	my $t0 = time;
	my $waiter = IPC::Run::start(
		[ 'psql', '-XAtq', '-d', $standby->connstr('postgres'), '-c',
		  "SELECT cfeed.wait(1, 0, $head, 30000) > $head" ],
		'>', \$out, '2>', \$err);
	$standby->poll_query_until('postgres', q{
		SELECT count(*) = 1 FROM pg_stat_activity WHERE query LIKE 'SELECT cfeed.wait(%' AND state = 'active'})
	  or die 'the wait did not begin';
	usleep(300_000);
	my $published = time;
	$primary->safe_psql('postgres', 'SELECT cfeed.publish(1, 0)');
	$waiter->finish;
	my $took = time - $published;
	is($out, "t\n", "round $round: the wait on the standby returned the new head") or diag($err);
	cmp_ok($took, '<', 5, sprintf('round %d: woken %.2f s after the commit on the primary (poll interval 10 s)',
			$round, $took));
}

# Memory: while WAL streams in, the waker wakes a wait about every
# millisecond, and each look at the head must not leave memory behind (it
# left about 12 kB a second, 180 kB in 15 s, in its function's context).
$primary->safe_psql('postgres', 'CREATE TABLE filler (i int)');
my $filler = IPC::Run::start(
	[ 'psql', '-XAtq', '-d', $primary->connstr('postgres'), '-c', q{
		DO $$ BEGIN FOR i IN 1 .. 1000000 LOOP
			INSERT INTO filler VALUES (i); COMMIT; PERFORM pg_sleep(0.0005);
		END LOOP; END $$} ], '>', \my $filler_out, '2>', \my $filler_err);
my $long_wait = IPC::Run::start(
	[ 'psql', '-XAtq', '-d', $standby->connstr('postgres'), '-c',
	  'SELECT cfeed.wait(1, 0, 9000000000000000000, 60000)' ],
	'>', \my $long_out, '2>', \my $long_err);
my $long_waiter = q{FROM pg_stat_activity WHERE query LIKE 'SELECT cfeed.wait(1, 0, 9%' AND state = 'active'};
$standby->poll_query_until('postgres', "SELECT count(*) = 1 $long_waiter")
  or die 'the long wait did not begin';
my $waiter_pid = $standby->safe_psql('postgres', "SELECT pid $long_waiter");

# the waiter's memory in use, from pg_log_backend_memory_contexts
sub waiter_memory
{
	my $offset = -s $standby->logfile;
	$standby->safe_psql('postgres', "SELECT pg_log_backend_memory_contexts($waiter_pid)");
	for (1 .. 100)
	{
		return $1 if slurp_file($standby->logfile, $offset) =~ /Grand total: .*; (\d+) used/;
		usleep(100_000);
	}
	die 'no memory report';
}
sleep 1;
my $before = waiter_memory();
sleep 8;
my $grown = waiter_memory() - $before;
cmp_ok($grown, '<', 16384, "a wait woken while WAL streams in keeps its memory (grew $grown bytes in 8 s)");
$filler->kill_kill;
$long_wait->kill_kill;

# Promotion: the waker exits; the promoted server's waits are woken by its
# sweeps.
$standby->promote;
ok($standby->poll_query_until('postgres', "SELECT ($wakers) = 0"), 'the waker exits at promotion');
$standby->safe_psql('postgres', 'SELECT cfeed.publish(1, 0)');
ok($standby->poll_query_until('postgres', q{
	SELECT count(*) = 0 FROM cfeed.change WHERE change_sequence_number IS NULL}),
	'the promoted server sweeps');

done_testing();
