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

# Promotion: the waker exits; the promoted server's waits are woken by its
# sweeps.
$standby->promote;
ok($standby->poll_query_until('postgres', "SELECT ($wakers) = 0"), 'the waker exits at promotion');
$standby->safe_psql('postgres', 'SELECT cfeed.publish(1, 0)');
ok($standby->poll_query_until('postgres', q{
	SELECT count(*) = 0 FROM cfeed.change WHERE change_sequence_number IS NULL}),
	'the promoted server sweeps');

done_testing();
