# Waiting readers on a hot standby under load, with default settings
# (hot_standby_feedback off, max_standby_streaming_delay 30 s).
#
# pgbench writes to a busy feed on the primary for $SECONDS s; a quiet feed
# gets a change every 0.5 s; $NWAITERS sessions on the standby long-poll the
# quiet feed with cfeed.wait and cfeed.read(..., wait_ms) and the default
# 30 s timeout, one statement per wait.  A wait holds its statement's
# snapshot; replaying the cleanup of the busy feed's stamped changes'
# old versions conflicts with it, and replay (the quiet feed's next stamp
# too) then waits for the waiter, up to max_standby_streaming_delay.  A
# wait on a standby therefore ends early (as if timed out) when the startup
# process waits for the same recovery conflict for 30 ms.
# Asserts: replay lag stays under 5 s (measured 0.3-1.1 s), no query is cancelled
# (pg_stat_database_conflicts, the waiters' errors), and the waiters wake
# promptly after the quiet feed's stamps (p50 < 200 ms).
#
# Then: brief recovery conflicts not involving the waiter (a standby session
# holding a table lock a few ms at a time, the primary locking that table
# 50 times a second) leave a wait be: it is not ended by each of them.
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

my $SECONDS = $ENV{CFEED_STANDBY_SECONDS} // 20;
my $NWAITERS = 4;

my $primary = cfeed_node('primary', '', allows_streaming => 1);
$primary->safe_psql('postgres', q{
	CREATE EXTENSION cfeed;
	SELECT cfeed.create_feed('busy', 1);
	SELECT cfeed.create_feed('quiet', 1);});
setup_truth($primary, 'postgres');
my $standby = cfeed_standby($primary, 'standby');
is($standby->safe_psql('postgres', 'SHOW hot_standby_feedback'), 'off', 'hot_standby_feedback is off');
is($standby->safe_psql('postgres', 'SHOW max_standby_streaming_delay'), '30s',
	'max_standby_streaming_delay is the default');

# A waiter: one statement per wait until the deadline; prints
# "cursor head woken_at" per wake.  Odd waiters use read(wait_ms).
my $deadline = $standby->safe_psql('postgres', "SELECT clock_timestamp() + interval '$SECONDS s'");
my @waiters;
for my $w (1 .. $NWAITERS)
{
	my $file = $standby->basedir . "/waiter$w.sql";
	open my $fh, '>', $file or die $!;
	print $fh "SELECT cfeed.head(2, 0) AS cur \\gset\n";
	for (1 .. 20000)
	{
		print $fh "SELECT clock_timestamp() > '$deadline' AS done \\gset\n\\if :done\n\\q\n\\endif\n";
		print $fh $w % 2
		  ? "SELECT cfeed.wait(2, 0, :cur) AS head, extract(epoch FROM clock_timestamp()) AS t \\gset\n"
		  : "SELECT COALESCE(max(change_sequence_number), :cur) AS head, extract(epoch FROM clock_timestamp()) AS t "
		  . "FROM cfeed.read(2, 0, :cur, 1000, 30000) \\gset\n";
		print $fh "\\echo :cur :head :t\n\\set cur :head\n";
	}
	close $fh;
	my ($out, $err) = ('', '');
	push @waiters, [ IPC::Run::start(
		[ 'psql', '-X', '-At', '-h', $standby->host, '-p', $standby->port, '-d', 'postgres', '-f', $file ],
		'>', \$out, '2>', \$err), \$out, \$err ];
}

my $script = $primary->basedir . '/writer.sql';
pgbench_writer_script($script, 1);
my ($pout, $perr) = ('', '');
my $writers = IPC::Run::start(
	[ 'pgbench', '-n', '-c', '2', '-j', '2', '-R', '300', '-T', $SECONDS, '-f', $script,
	  '-h', $primary->host, '-p', $primary->port, 'postgres' ],
	'>', \$pout, '2>', \$perr);

# Replay lag: when the standby's replay position passes a primary WAL
# position, the time since that position was current.
my @queue;
my $max_lag = 0;
my $end = time + $SECONDS;
my $next_quiet = 0;
while (time < $end)
{
	if (time >= $next_quiet)
	{
		$primary->safe_psql('postgres', 'SELECT cfeed.publish(2, 0)');
		$next_quiet = time + 0.5;
	}
	push @queue, [ time, $primary->safe_psql('postgres', 'SELECT pg_current_wal_lsn()') ];
	my $replayed = $standby->safe_psql('postgres', 'SELECT pg_last_wal_replay_lsn()');
	my $now = time;
	while (@queue && $standby->safe_psql('postgres', "SELECT '$queue[0][1]'::pg_lsn <= '$replayed'::pg_lsn") eq 't')
	{
		my $lag = $now - (shift @queue)->[0];
		$max_lag = $lag if $lag > $max_lag;
	}
	$max_lag = time - $queue[0][0] if @queue && time - $queue[0][0] > $max_lag;
	usleep(200_000);
}
$writers->finish;
# wake the waiters past their deadline, which then quit
while (grep { $_->[0]->pumpable } @waiters)
{
	$primary->safe_psql('postgres', 'SELECT cfeed.publish(2, 0)');
	usleep(300_000);
	$_->[0]->pump_nb for grep { $_->[0]->pumpable } @waiters;
}
$_->[0]->finish for @waiters;
$primary->wait_for_catchup($standby);

# Wake latency: from the stamp of the first change after the cursor to the wake.
my %stamped = map { split /\|/ } split /\n/, $primary->safe_psql('postgres', q{
	SELECT change_sequence_number, extract(epoch FROM stamped_at) FROM cfeed.change
	WHERE feed_id = 2 AND change_sequence_number IS NOT NULL});
my @lat;
my $errors = '';
for my $w (@waiters)
{
	$errors .= ${ $w->[2] };
	for my $line (split /\n/, ${ $w->[1] })
	{
		my ($cur, $head, $t) = split / /, $line, 3;
		next unless $head > $cur && defined $stamped{ $cur + 1 };
		push @lat, ($t - $stamped{ $cur + 1 }) * 1000;
	}
}
@lat = sort { $a <=> $b } @lat;
my $p50 = @lat ? $lat[ int(@lat / 2) ] : 1e9;
my $p99 = @lat ? $lat[ int(@lat * 0.99) ] : 1e9;
my $cancels = $standby->safe_psql('postgres', q{
	SELECT confl_snapshot + confl_lock + confl_bufferpin + confl_deadlock + confl_tablespace
	FROM pg_stat_database_conflicts WHERE datname = 'postgres'});
diag sprintf('standby waiters: replay lag max %.2f s, wake latency p50 %.1f ms p99 %.1f ms (%d wakes), %d cancelled',
	$max_lag, $p50, $p99, scalar(@lat), $cancels);
ok(@lat > $SECONDS * $NWAITERS, 'waiters woke for most stamps of the quiet feed');
ok($max_lag < 5, "replay lag stays under 5 s (max $max_lag; a stall lasts up to 30 s)");
is($cancels, '0', 'no standby query was cancelled');
unlike($errors, qr/conflict with recovery/, 'no waiter got a recovery conflict error');
ok($p50 < 200, "waiters wake promptly after the stamp (p50 $p50 ms)");

# Brief conflicts with another query.
$primary->safe_psql('postgres', 'CREATE TABLE locked (i int)');
$primary->wait_for_catchup($standby);
my $BRIEF = 4;
my $holder_file = $standby->basedir . '/holder.sql';
open my $hfh, '>', $holder_file or die $!;
print $hfh "SELECT count(*) FROM locked, pg_sleep(0.005);
" x ($BRIEF * 150);
close $hfh;
my $waiter_file = $standby->basedir . '/brief_waiter.sql';
open my $wfh, '>', $waiter_file or die $!;
print $wfh "SELECT cfeed.head(2, 0) AS cur, clock_timestamp() + interval '$BRIEF s' AS until \\gset\n";
print $wfh "SELECT clock_timestamp() > :'until' AS done \\gset\n\\if :done\n\\q\n\\endif\n"
  . "SELECT cfeed.wait(2, 0, :cur, 1000 * $BRIEF);\n" for 1 .. 2000;
close $wfh;
my $lock_script = $primary->basedir . '/lock.sql';
open my $lfh, '>', $lock_script or die $!;
print $lfh "BEGIN;\nLOCK TABLE locked IN ACCESS EXCLUSIVE MODE;\nCOMMIT;\n";
close $lfh;
my ($hout, $herr, $wout, $werr, $lout, $lerr) = ('', '', '', '', '', '');
my $holder = IPC::Run::start(
	[ 'psql', '-X', '-Atq', '-h', $standby->host, '-p', $standby->port, '-d', 'postgres', '-f', $holder_file ],
	'>', \$hout, '2>', \$herr);
my $lockers = IPC::Run::start(
	[ 'pgbench', '-n', '-c', '1', '-R', '50', '-T', $BRIEF + 1, '-f', $lock_script,
	  '-h', $primary->host, '-p', $primary->port, 'postgres' ],
	'>', \$lout, '2>', \$lerr);
my $brief_waiter = IPC::Run::start(
	[ 'psql', '-X', '-Atq', '-h', $standby->host, '-p', $standby->port, '-d', 'postgres', '-f', $waiter_file ],
	'>', \$wout, '2>', \$werr);
$brief_waiter->finish;
$lockers->finish;
$holder->kill_kill;
my $waits = () = $wout =~ /^\d+$/mg;
my $conflicts = $standby->safe_psql('postgres', 'SELECT confl_lock FROM pg_stat_database_conflicts WHERE datname = \'postgres\'');
diag "brief conflicts: $waits waits in $BRIEF s without a stamp ($conflicts lock conflicts cancelled)";
is($werr, '', 'the waiter got no error');
ok($waits <= 3, "brief conflicts with another query do not end a wait ($waits waits in $BRIEF s)");

done_testing();
