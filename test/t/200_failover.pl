# Failover under load (SPEC §6 "Failover", docs/replication.md).
#
# Each part: a primary whose application writers commit with
# synchronous_commit = local (they wait for no standby), a streaming
# standby, pgbench writers, and a reader on the primary that records every
# stamp it sees.  Mid-run the standby's WAL receiver is stopped (SIGSTOP), as
# a standby falling behind; the reader keeps reading; then the primary is
# killed with SIGKILL, the WAL receiver resumed and the standby promoted.
#
# 1. Synchronous standby (synchronous_standby_names names it): the stamping
#    transactions wait for it (cfeed.sweep_synchronous_commit, default on,
#    whatever synchronous_commit says), so every stamp the reader saw is on
#    the promoted standby with the same change and stamped_at, and nothing
#    is issued twice; the writers were not slowed by the stopped standby; a
#    cursor from before the failover resumes unchanged (resume_cursor).
# 2. Asynchronous standby: stamps the reader saw are lost and their numbers
#    issued again to other changes, and cfeed.resume_cursor recognises the
#    cursor from before the failover: it rewinds it to the shard's head at
#    promotion, from which the reader gets the changes of the new timeline.
# 3. One server, no standby: a restart begins a new epoch without moving any
#    cursor; a sweep waiting for a synchronous standby that is not there is
#    not interrupted by ALTER DATABASE ... RENAME, which fails instead (the
#    stamp stays invisible), nor made asynchronous by a later SET LOCAL
#    synchronous_commit = off in its transaction; a copy of an older base
#    backup started without recovery.signal (crash recovery, same timeline)
#    begins a new epoch whose head rewinds a cursor saved beyond the backup,
#    and a cursor saved under an epoch the copy does not know rewinds to the
#    lowest head of any epoch.
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

my $NSHARDS = 2;

# Read every shard from its cursor, recording number => "change_id|stamped_at",
# and with each cursor the epoch read before the read that reached it
# (docs/replication.md, the consumer procedure).
sub read_all
{
	my ($node, $seen, $cursors, $epochs) = @_;
	my (undef, $epoch) = $node->psql('postgres', 'SELECT cfeed.epoch()');
	for my $s (0 .. $NSHARDS - 1)
	{
		my $out = $node->safe_psql('postgres', qq{
			SELECT change_sequence_number, change_id, stamped_at
			FROM cfeed.read(1, $s, @{[ $cursors->{$s} // 'NULL' ]}, 1000)});
		for my $line (split /\n/, $out)
		{
			my ($n, $id, $at) = split /\|/, $line;
			$seen->{$s}{$n} = "$id|$at";
			$cursors->{$s} = $n;
			$epochs->{$s} = $epoch;
		}
	}
}

# Run one failover; returns (seen stamps, cursors, their epochs, new primary).
sub failover
{
	my ($name, $sync) = @_;
	my $primary = cfeed_node("${name}_primary",
		"synchronous_commit = local\n" . ($sync ? "synchronous_standby_names = '${name}_standby'\n" : ''),
		allows_streaming => 1);
	$primary->safe_psql('postgres', qq{
		CREATE EXTENSION cfeed;
		SELECT cfeed.create_feed('f', $NSHARDS);});
	setup_truth($primary, 'postgres');
	# a promoted standby must not wait for a synchronous standby of its own
	my $standby = cfeed_standby($primary, "${name}_standby", "synchronous_standby_names = ''\n");
	is($primary->safe_psql('postgres', 'SELECT sync_state FROM pg_stat_replication'),
		$sync ? 'sync' : 'async', "$name: the standby is " . ($sync ? 'synchronous' : 'asynchronous'));

	my $script = $primary->basedir . '/writer.sql';
	pgbench_writer_script($script, $NSHARDS);
	my ($out, $err) = ('', '');
	my $writers = IPC::Run::start(
		[ 'pgbench', '-n', '-c', '2', '-j', '2', '-T', '60', '-f', $script,
		  '-h', $primary->host, '-p', $primary->port, 'postgres' ],
		'>', \$out, '2>', \$err);

	my (%seen, %cursors, %epochs);
	my $until = time + 2;
	read_all($primary, \%seen, \%cursors, \%epochs) while time < $until;

	# Stopped, not its WAL receiver paused: a paused receiver would read what
	# the socket buffered when it resumed, and an asynchronous standby could
	# end up with everything.
	$standby->stop;
	my $written = $primary->safe_psql('postgres', 'SELECT count(*) FROM truth');
	my $before = scalar(map { keys %$_ } values %seen);
	$until = time + 2;
	read_all($primary, \%seen, \%cursors, \%epochs) while time < $until;
	ok($primary->safe_psql('postgres', 'SELECT count(*) FROM truth') > $written + 50,
		"$name: writers keep committing while the standby is stopped");
	my $after = scalar(map { keys %$_ } values %seen);
	note "$name: $before stamps seen before the standby stopped, $after in all";

	$primary->kill9;
	$standby->start;
	$writers->kill_kill;
	$standby->promote;
	$standby->safe_psql('postgres', 'INSERT INTO truth SELECT cfeed.publish(1, 0)');
	ok(wait_all_stamped($standby, 'postgres'), "$name: the promoted standby stamps what it has");
	return (\%seen, \%cursors, \%epochs, $standby);
}

# Stamps the reader saw that the new primary lost or gave another change.
sub lost_stamps
{
	my ($node, $seen) = @_;
	my $lost = 0;
	for my $s (keys %$seen)
	{
		my %now = map { my ($n, $rest) = split /\|/, $_, 2; ($n => $rest) }
		  split /\n/, $node->safe_psql('postgres', qq{
			SELECT change_sequence_number, change_id, stamped_at FROM cfeed.read(1, $s, NULL, 1000000)});
		$lost += grep { !defined $now{$_} || $now{$_} ne $seen->{$s}{$_} } keys %{ $seen->{$s} };
	}
	return $lost;
}

# 1. Synchronous standby.
my ($seen, $cursors, $epochs, $node) = failover('sync', 1);
ok(scalar(keys %{ $seen->{0} }) > 0, 'sync: the reader saw stamps');
is(lost_stamps($node, $seen), 0,
	'sync: every stamp the reader saw is on the promoted standby, same change and stamped_at');
check_invariants($node, 'postgres', 'sync: after promotion');
ok($node->safe_psql('postgres', 'SELECT cfeed.epoch()') > $epochs->{0}, 'sync: promotion begins a new epoch');
for my $s (0 .. $NSHARDS - 1)
{
	is($node->safe_psql('postgres', "SELECT cfeed.resume_cursor(1, $s, $cursors->{$s}, $epochs->{$s})"),
		$cursors->{$s}, "sync: shard $s: a cursor from before the failover resumes unchanged");
}
$node->stop;

# 2. Asynchronous standby.
($seen, $cursors, $epochs, $node) = failover('async', 0);
my $lost = lost_stamps($node, $seen);
ok($lost > 0, "async: stamps the reader saw are lost ($lost)");
check_invariants($node, 'postgres', 'async: after promotion');
my $rewound = 0;
for my $s (0 .. $NSHARDS - 1)
{
	my $resume = $node->safe_psql('postgres',
		"SELECT cfeed.resume_cursor(1, $s, $cursors->{$s}, $epochs->{$s})");
	my $fork = $node->safe_psql('postgres', qq{
		SELECT h.head FROM cfeed.epoch_head h WHERE h.feed_id = 1 AND h.shard = $s
		AND h.epoch = cfeed.epoch()});
	$rewound++ if $resume < $cursors->{$s};
	ok($resume <= $cursors->{$s} && $resume == ($cursors->{$s} < $fork ? $cursors->{$s} : $fork),
		"async: shard $s: resume_cursor is the cursor or the head at promotion, the lower");
	# every stamp at or below the resumed cursor is one the reader saw
	my $differ = 0;
	for my $line (split /\n/, $node->safe_psql('postgres', qq{
		SELECT change_sequence_number, change_id, stamped_at FROM cfeed.read(1, $s, NULL, 1000000)
		WHERE change_sequence_number <= $resume}))
	{
		my ($n, $rest) = split /\|/, $line, 2;
		$differ++ if ($seen->{$s}{$n} // '') ne $rest;
	}
	is($differ, 0, "async: shard $s: up to the resumed cursor, the new primary has what the reader saw");
}
ok($rewound > 0, 'async: a cursor from before the lossy failover is recognised and rewound');
$node->stop;

# 3. One server: restarts, an interrupted synchronous wait, a copy of a backup.
my $lone = cfeed_node('lone', "synchronous_commit = local\n", allows_streaming => 1);
$lone->safe_psql('postgres', q{CREATE EXTENSION cfeed; SELECT cfeed.create_feed('f', 1);});
setup_truth($lone, 'postgres');
sub stamp_one
{
	my ($n, $label) = @_;
	$n->safe_psql('postgres', 'INSERT INTO truth SELECT cfeed.publish(1, 0)');
	ok(wait_all_stamped($n, 'postgres'), $label);
	return ($n->safe_psql('postgres', 'SELECT cfeed.head(1, 0)'), $n->safe_psql('postgres', 'SELECT cfeed.epoch()'));
}
my ($c1, $e1) = stamp_one($lone, 'lone: stamped');
$lone->restart;
my ($c2, $e2) = stamp_one($lone, 'lone: stamped after a restart');
ok($e2 > $e1, 'lone: a restart begins a new epoch');
is($lone->safe_psql('postgres', "SELECT cfeed.resume_cursor(1, 0, $c1, $e1)"), $c1,
	'lone: a cursor from before the restart resumes unchanged');

$lone->backup('lone_backup');
stamp_one($lone, 'lone: stamped after the backup') for 1 .. 3;

# A sweep waiting for an absent synchronous standby: ALTER DATABASE ...
# RENAME waits for the sweeper to leave, then fails; the stamp stays unseen.
my ($c3) = stamp_one($lone, 'lone: stamped before the synchronous standby is named');
$lone->append_conf('postgresql.conf', "synchronous_standby_names = 'nobody'\n");
$lone->reload;
$lone->safe_psql('postgres', 'INSERT INTO truth SELECT cfeed.publish(1, 0)');
ok($lone->poll_query_until('postgres', q{
	SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'cfeed sweeper' AND wait_event = 'SyncRep'}),
	'lone: the sweeper waits for the synchronous standby');
my $log_offset = -s $lone->logfile;
my ($rc, $rout, $rerr) = $lone->psql('template1', 'ALTER DATABASE postgres RENAME TO renamed');
like($rerr, qr/being accessed by other users/, 'lone: RENAME fails while the sweeper waits');
is($lone->safe_psql('postgres', 'SELECT cfeed.head(1, 0)'), $c3,
	'lone: the waiting sweep stays invisible (not interrupted)');
unlike(slurp_file($lone->logfile, $log_offset), qr/canceling the wait for synchronous replication/,
	'lone: no synchronous wait was cancelled');
$lone->append_conf('postgresql.conf', "synchronous_standby_names = ''\n");
$lone->reload;
ok(wait_all_stamped($lone, 'postgres'), 'lone: the sweep completes once no standby is named');

# A transaction that sweeps, then sets synchronous_commit = off, still
# commits its stamps at cfeed.sweep_synchronous_commit (waits for the standby).
$lone->safe_psql('postgres', 'ALTER SYSTEM SET cfeed.enable_sweeper = off');
$lone->append_conf('postgresql.conf', "synchronous_standby_names = 'nobody'\n");
$lone->reload;
$lone->poll_query_until('postgres', q{SELECT count(*) = 0 FROM pg_stat_activity WHERE backend_type = 'cfeed sweeper'})
  or die 'the sweeper did not stop';
$lone->safe_psql('postgres', 'INSERT INTO truth SELECT cfeed.publish(1, 0)');
my ($sout, $serr) = ('', '');
my $sweeping = IPC::Run::start(
	[ 'psql', '-X', '-Atq', '-h', $lone->host, '-p', $lone->port, '-d', 'postgres', '-c',
	  "BEGIN; SET LOCAL application_name = 'hand'; SELECT count(*) FROM cfeed.sweep(); SET LOCAL synchronous_commit = off; COMMIT;" ],
	'>', \$sout, '2>', \$serr);
my $hand_waits = 0;
for (1 .. 50)
{
	last if $hand_waits = $lone->safe_psql('postgres', q{
		SELECT count(*) FROM pg_stat_activity WHERE application_name = 'hand' AND wait_event = 'SyncRep'});
	usleep(100_000);
}
is($hand_waits, 1, 'lone: a sweep whose transaction then set synchronous_commit = off waits for the standby');
$lone->safe_psql('postgres', 'ALTER SYSTEM RESET cfeed.enable_sweeper');
$lone->append_conf('postgresql.conf', "synchronous_standby_names = ''\n");
$lone->reload;
$sweeping->finish;
ok(wait_all_stamped($lone, 'postgres'), 'lone: and commits once no standby is named');
my $cursor = $lone->safe_psql('postgres', 'SELECT cfeed.head(1, 0)');
my $epoch = $lone->safe_psql('postgres', 'SELECT cfeed.epoch()');
is($epoch, $e2, 'lone: no new epoch without a restart');
$lone->stop;

# The copy of the backup, without recovery.signal: crash recovery on the same
# timeline, the stamps after the backup are gone.
my $copy = PostgreSQL::Test::Cluster->new('lone_copy');
$copy->init_from_backup($lone, 'lone_backup');
$copy->start;
my ($copy_head) = stamp_one($copy, 'copy: stamped');
ok($copy_head <= $cursor, 'copy: the stamps after the backup were lost, their numbers reissued');
is($copy->safe_psql('postgres', "SELECT cfeed.resume_cursor(1, 0, $cursor, $epoch)"), $c2,
	'copy: a cursor saved beyond the backup rewinds to the head the copy began with');
# (the first epoch began before the first stamp: its head is the shard's start)
is($copy->safe_psql('postgres', "SELECT cfeed.resume_cursor(1, 0, $cursor, 9000000000000000000)"),
	$copy->safe_psql('postgres', 'SELECT start_sequence_number FROM cfeed.shard WHERE feed_id = 1 AND shard = 0'),
	'copy: under an epoch it does not know, a cursor rewinds to the lowest head of any epoch');
$copy->stop;

done_testing();
