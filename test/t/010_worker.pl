# The background sweeper's lifecycle: autostart after
# CREATE EXTENSION, wake at commit, one sweeper per sweep group,
# pg_stat_activity, DROP EXTENSION / DROP DATABASE / CREATE DATABASE ...
# TEMPLATE, SIGKILL and immediate shutdown under load, idle WAL, standby
# and promotion.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use FindBin;
use lib $FindBin::RealBin;
use CfeedCheck;

my $node = PostgreSQL::Test::Cluster->new('primary');
$node->init(allows_streaming => 1);
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'cfeed'
max_worker_processes = 20
restart_after_crash = on
});
$node->start;

sub sweepers
{
	my ($db) = @_;
	return $node->safe_psql('postgres', qq{
		SELECT string_agg(application_name, ',' ORDER BY application_name)
		FROM pg_stat_activity WHERE backend_type = 'cfeed sweeper' AND datname = '$db'});
}

# A sweeper starts within about a second of CREATE EXTENSION, no restart.
$node->safe_psql('postgres', 'CREATE DATABASE app');
my $t0 = time;
$node->safe_psql('app', 'CREATE EXTENSION cfeed');
$node->poll_query_until('postgres', q{
	SELECT count(*) = 1 FROM pg_stat_activity
	WHERE backend_type = 'cfeed sweeper' AND datname = 'app'}) or die 'no sweeper';
my $started = time - $t0;
ok($started < 3, sprintf('sweeper started %.2f s after CREATE EXTENSION', $started));
is(sweepers('app'), 'cfeed sweeper group 0', 'sweeper shows in pg_stat_activity with its group');
is($node->safe_psql('app', "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'cfeed launcher'"),
	'1', 'one launcher');

# A commit wakes the sweeper: the change is stamped without any manual sweep.
$node->safe_psql('app', q{SELECT cfeed.create_feed('orders', 4)});
setup_truth($node, 'app');
$node->safe_psql('app', 'INSERT INTO truth SELECT cfeed.publish(1, 0)');
ok(wait_all_stamped($node, 'app'), 'committed change stamped by the worker');
is($node->safe_psql('app', 'SELECT cfeed.head(1, 0)'), '2000000000000001', 'head advanced');
is($node->safe_psql('app', 'SELECT sum(changes_stamped) FROM cfeed.sweepers'), '1',
	'cfeed.sweepers counts the stamp');

# A second sweep group gets its own sweeper.
$node->safe_psql('app', q{SELECT cfeed.create_feed('audit', 1, sweep_group => 7)});
$node->poll_query_until('postgres', q{
	SELECT count(*) = 1 FROM pg_stat_activity
	WHERE application_name = 'cfeed sweeper group 7' AND datname = 'app'}) or die 'no group 7';
pass('sweep group 7 has its own sweeper');
$node->safe_psql('app', 'INSERT INTO truth SELECT cfeed.publish(2, 0)');
ok(wait_all_stamped($node, 'app'), 'group 7 change stamped');

# A group below 0 is listed too (the walk of shard_config_sweep_group_idx
# starts at the lowest group), and idle sweepers do not scan every shard:
# the group-0 sweeper lists the groups every second by that index (a
# sequential scan of cfeed.shard_config made an idle sweeper's CPU grow
# with the number of shards).
$node->safe_psql('app', q{SELECT cfeed.create_feed('below', 1, sweep_group => -3)});
$node->poll_query_until('postgres', q{
	SELECT count(*) = 1 FROM pg_stat_activity
	WHERE application_name = 'cfeed sweeper group -3' AND datname = 'app'}) or die 'no group -3';
pass('sweep group -3 has its own sweeper');
my $scans = q{
	SELECT t.seq_scan || '|' || i.idx_scan
	FROM pg_stat_user_tables t, pg_stat_user_indexes i
	WHERE t.relid = 'cfeed.shard_config'::regclass
	  AND i.indexrelid = 'cfeed.shard_config_sweep_group_idx'::regclass};
sleep 2;	# the new sweeper's first pass and its statistics, flushed at most once a second
my ($seq0, $idx0) = split /\|/, $node->safe_psql('app', $scans);
sleep 3;
my ($seq1, $idx1) = split /\|/, $node->safe_psql('app', $scans);
is($seq1, $seq0, 'idle sweepers scan no shard sequentially');
cmp_ok($idx1, '>', $idx0, 'the group-0 sweeper lists the groups by their index');

# cfeed.sweep_delay: after a sweep that stamped changes, the next one begins
# no sooner than the delay after it, and stamps together what was committed
# meanwhile (each of those commits would otherwise wake a sweep of its own).
$node->safe_psql('postgres', q{ALTER SYSTEM SET cfeed.sweep_delay = '2s'});
$node->reload;
sleep 1;
$node->safe_psql('app', 'INSERT INTO truth SELECT cfeed.publish(1, 1)');
ok(wait_all_stamped($node, 'app'), 'with a sweep delay, a first change is stamped at once');
$node->safe_psql('app', join("\n", ('INSERT INTO truth SELECT cfeed.publish(1, 1);') x 19));
ok(wait_all_stamped($node, 'app'), 'the changes committed during the delay are stamped after it');
my ($delayed_by, $sweeps) = split /\|/, $node->safe_psql('app', q{
	WITH last AS (
		SELECT c.stamped_at FROM cfeed.change c JOIN truth t USING (change_id)
		WHERE c.feed_id = 1 ORDER BY c.change_id DESC LIMIT 20)
	SELECT extract(epoch FROM max(stamped_at) - min(stamped_at)),
	       count(DISTINCT stamped_at) - 1
	FROM last});
ok($delayed_by >= 1.5, "the next sweep waited for the delay (${delayed_by} s)");
ok($sweeps <= 2, "the 19 later commits were stamped by $sweeps sweep(s)");
$node->safe_psql('postgres', 'ALTER SYSTEM RESET cfeed.sweep_delay');
$node->reload;

# A trigger cfeed enables ALWAYS set back to ENABLE (as a data-only restore
# with --disable-triggers leaves it): the group-0 sweeper warns once.
my $log_offset = -s $node->logfile;
$node->safe_psql('app', 'ALTER TABLE cfeed.change ENABLE TRIGGER change_guard');
ok($node->wait_for_log(qr/WARNING:  cfeed: some of cfeed's triggers are not enabled ALWAYS/, $log_offset),
	'the sweeper warns of a guard not enabled ALWAYS');
like(slurp_file($node->logfile, $log_offset), qr/ALTER TABLE cfeed\.change ENABLE ALWAYS TRIGGER change_guard;/,
	'the warning gives the command that repairs it');
sleep 2;
my $warnings = () = slurp_file($node->logfile, $log_offset) =~ /not enabled ALWAYS/g;
is($warnings, 1, 'it warns once');
$node->safe_psql('app', 'ALTER TABLE cfeed.change ENABLE ALWAYS TRIGGER change_guard');
# Every such trigger counts: those of cfeed.stamp too (the end of a
# data-only restore of it)
$log_offset = -s $node->logfile;
$node->safe_psql('app', 'ALTER TABLE cfeed.stamp ENABLE TRIGGER ALL');
ok($node->wait_for_log(qr/WARNING:  cfeed: some of cfeed's triggers are not enabled ALWAYS/, $log_offset),
	'the sweeper warns of cfeed.stamp\'s triggers');
like(slurp_file($node->logfile, $log_offset),
	qr/ALTER TABLE cfeed\.stamp ENABLE ALWAYS TRIGGER stamp_deleted; ALTER TABLE cfeed\.stamp ENABLE ALWAYS TRIGGER stamp_replicated; ALTER TABLE cfeed\.stamp ENABLE ALWAYS TRIGGER stamp_truncated;/,
	'naming each of them');
$node->safe_psql('app', q{
	ALTER TABLE cfeed.stamp ENABLE ALWAYS TRIGGER stamp_deleted;
	ALTER TABLE cfeed.stamp ENABLE ALWAYS TRIGGER stamp_replicated;
	ALTER TABLE cfeed.stamp ENABLE ALWAYS TRIGGER stamp_truncated;});

# Retention: the worker deletes stamped changes older than the feed's
# retention, never the shard's head row.
$node->safe_psql('postgres', q{ALTER SYSTEM SET cfeed.retention_interval = '200ms'});
$node->reload;
$node->safe_psql('postgres', 'CREATE DATABASE ret');
$node->safe_psql('ret', q{
	CREATE EXTENSION cfeed;
	SELECT cfeed.create_feed('short', 1);
	UPDATE cfeed.feed SET retention = '1 second';
	SELECT cfeed.publish(1, 0) FROM generate_series(1, 5);
});
ok($node->poll_query_until('ret', q{
	SELECT count(*) = 1 AND min(change_sequence_number) = 2000000000000005 FROM cfeed.change}),
	'retention deleted all but the head row');
is($node->safe_psql('ret', 'SELECT cfeed.head(1, 0)'), '2000000000000005', 'the head is kept');
$node->safe_psql('postgres', 'DROP DATABASE ret');
$node->safe_psql('postgres', 'ALTER SYSTEM RESET cfeed.retention_interval');
$node->reload;

# Idle: a sweeper that has nothing to do writes no WAL.
my $idle_ok = 0;
for my $try (1 .. 3)
{
	my $lsn1 = $node->safe_psql('postgres', 'SELECT pg_current_wal_insert_lsn()');
	sleep 3;
	my $lsn2 = $node->safe_psql('postgres', 'SELECT pg_current_wal_insert_lsn()');
	if ($lsn1 eq $lsn2) { $idle_ok = 1; last; }
}
ok($idle_ok, 'idle sweepers write no WAL over 3 s');

# CREATE DATABASE ... TEMPLATE of a swept database works, and the copy is swept.
$node->safe_psql('postgres', 'CREATE DATABASE app_copy TEMPLATE app');
pass('CREATE DATABASE ... TEMPLATE app succeeded');
$node->poll_query_until('postgres', q{
	SELECT count(*) >= 1 FROM pg_stat_activity
	WHERE backend_type = 'cfeed sweeper' AND datname = 'app_copy'}) or die 'copy not swept';
pass('the copy gets a sweeper');
$node->safe_psql('app_copy', 'INSERT INTO truth SELECT cfeed.publish(1, 1)');
ok(wait_all_stamped($node, 'app_copy'), 'the copy is swept');

# DROP DATABASE without FORCE succeeds while sweepers run.
$node->safe_psql('postgres', 'DROP DATABASE app_copy');
pass('DROP DATABASE of a swept database succeeded');

# DROP EXTENSION stops the sweepers; CREATE EXTENSION brings them back.
$node->safe_psql('postgres', 'CREATE DATABASE scratch');
$node->safe_psql('scratch', 'CREATE EXTENSION cfeed');
$node->poll_query_until('postgres', q{
	SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'cfeed sweeper' AND datname = 'scratch'})
  or die 'no scratch sweeper';
$node->safe_psql('scratch', 'DROP EXTENSION cfeed');
ok($node->poll_query_until('postgres', q{
	SELECT count(*) = 0 FROM pg_stat_activity WHERE backend_type = 'cfeed sweeper' AND datname = 'scratch'}),
	'DROP EXTENSION stops the sweeper');
is($node->safe_psql('scratch', q{SELECT count(*) FROM pg_namespace WHERE nspname = 'cfeed'}), '0',
	'DROP EXTENSION leaves no schema behind');
$node->safe_psql('scratch', 'CREATE EXTENSION cfeed');
ok($node->poll_query_until('postgres', q{
	SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'cfeed sweeper' AND datname = 'scratch'}),
	'CREATE EXTENSION again restarts it');
$node->safe_psql('postgres', 'DROP DATABASE scratch');

# Under load: SIGKILL a sweeper (the postmaster reinitializes), then an
# immediate shutdown; nothing is lost or stamped twice.
my $script = $node->basedir . '/writer.sql';
pgbench_writer_script($script, 4);
sub load
{
	my ($seconds) = @_;
	my ($out, $err) = ('', '');
	return IPC::Run::start(
		[ 'pgbench', '-n', '-c', '4', '-j', '2', '-T', $seconds, '-f', $script,
		  '-h', $node->host, '-p', $node->port, 'app' ],
		'>', \$out, '2>', \$err);
}

my $h = load(4);
sleep 1;
my $pid = $node->safe_psql('postgres', q{
	SELECT pid FROM pg_stat_activity WHERE application_name = 'cfeed sweeper group 0' AND datname = 'app'});
ok(kill('KILL', $pid), "SIGKILL sweeper $pid under load");
$h->finish;
# The server restarts after the crash.  Not poll_query_until: its psql,
# refused while the server recovers, can exit before taking the query on
# its stdin, and the write's EPIPE dies (once in CI, assert-enabled 17).
my ($back, $back_by) = (undef, time + 180);
usleep(100_000) until ($back = eval { $node->safe_psql('postgres', 'SELECT true') }) || time > $back_by;
$back or die 'server did not come back';
$h = load(3);
$h->finish;
ok(wait_all_stamped($node, 'app'), 'all stamped after the sweeper was killed');
my $n1 = check_invariants($node, 'app', 'after SIGKILL');

$h = load(4);
sleep 2;
$node->stop('immediate');
$h->finish;
$node->start;
$h = load(2);
$h->finish;
ok(wait_all_stamped($node, 'app'), 'all stamped after an immediate shutdown');
my $n2 = check_invariants($node, 'app', 'after immediate shutdown');
cmp_ok($n2, '>', $n1, "load kept writing ($n1 then $n2 changes)");

# Gathering (cfeed.sweep_gather): under sustained writes a sweep waits for
# a batch to gather, at most the setting; a writer that commits now and
# then is stamped at every wake-up.  (sweeps, changes) of the sweeper:
sub sweeper_counts
{
	return split /\|/, $node->safe_psql('app', q{
		SELECT sweeps || '|' || changes_stamped FROM cfeed.sweepers WHERE sweep_group = 0});
}
$node->safe_psql('postgres', q{ALTER SYSTEM SET cfeed.sweep_gather = '1s'});
$node->safe_psql('postgres', q{ALTER SYSTEM SET cfeed.sweep_gather_changes = 50});
$node->reload;
sleep 1;
my ($sweeps0, $changes0) = sweeper_counts();
$h = load(3);
$h->finish;
ok(wait_all_stamped($node, 'app'), 'gathering: every change of the load stamped');
my ($sweeps1, $changes1) = sweeper_counts();
my $per_sweep = ($changes1 - $changes0) / (($sweeps1 - $sweeps0) || 1);
cmp_ok($per_sweep, '>=', 25, sprintf('gathering: under 4 writers a sweep stamped %.1f changes (%d sweeps)',
		$per_sweep, $sweeps1 - $sweeps0));
check_invariants($node, 'app', 'after gathering');
sleep 0.5;
$node->safe_psql('app', 'CREATE TABLE paced (change_id bigint, written_at timestamptz)');
for (1 .. 20)
{
	$node->safe_psql('app', q{
		WITH c AS (INSERT INTO truth (change_id) SELECT cfeed.publish(1, 0) RETURNING change_id)
		INSERT INTO paced SELECT change_id, clock_timestamp() FROM c});
	usleep(50_000);
}
ok(wait_all_stamped($node, 'app'), 'gathering: the paced changes stamped');
# the longest a change of paced waited for its stamp, in ms
sub slowest_paced
{
	return $node->safe_psql('app', q{
		SELECT round(1000 * extract(epoch FROM max(c.stamped_at - p.written_at)))
		FROM paced p JOIN cfeed.change c USING (change_id)});
}
my $slowest = slowest_paced();
cmp_ok($slowest, '<', 500, "gathering: a writer committing every 50 ms is stamped at once (slowest ${slowest} ms)");
# A bulk commit now and then is no sustained load, however many changes it
# writes: after its sweep (one transaction's changes) the next commit is
# stamped at once.  At the defaults' rate (3,200 changes a second), 500
# changes in the last 100 ms would otherwise pause the next sweep ~640 ms.
$node->safe_psql('postgres', q{ALTER SYSTEM SET cfeed.sweep_gather_changes = 3200});
$node->reload;
sleep 1;
$node->safe_psql('app', 'TRUNCATE paced');
$node->safe_psql('app', q{
	INSERT INTO truth SELECT cfeed.publish(1, 0);
	DO $$ BEGIN
		WHILE EXISTS (SELECT FROM cfeed.change WHERE change_sequence_number IS NULL) LOOP
			PERFORM pg_sleep(0.005);
		END LOOP;
	END $$;
	INSERT INTO truth SELECT cfeed.publish(1, 0) FROM generate_series(1, 500);
	SELECT pg_sleep(0.1);
	WITH c AS (INSERT INTO truth (change_id) SELECT cfeed.publish(1, 1) RETURNING change_id)
	INSERT INTO paced SELECT change_id, clock_timestamp() FROM c});
ok(wait_all_stamped($node, 'app'), 'gathering: a bulk commit and the next stamped');
$slowest = slowest_paced();
cmp_ok($slowest, '<', 300, "gathering: a commit after a bulk commit of 500 changes is stamped at once (${slowest} ms)");
$node->safe_psql('postgres', 'ALTER SYSTEM RESET cfeed.sweep_gather');
$node->safe_psql('postgres', 'ALTER SYSTEM RESET cfeed.sweep_gather_changes');
$node->reload;

# The sweeper's transactions are READ COMMITTED and read-write whatever the
# database's defaults: before, a database set to REPEATABLE READ refused
# every sweep ("cfeed cannot sweep in a REPEATABLE READ ... transaction")
# until the worker restarted, even after the setting was reset.
$node->safe_psql('postgres', q{ALTER DATABASE app SET default_transaction_isolation = 'repeatable read'});
$node->safe_psql('postgres', q{ALTER DATABASE app SET default_transaction_read_only = on});
$node->safe_psql('postgres', q{SELECT pg_terminate_backend(pid) FROM pg_stat_activity
	WHERE backend_type = 'cfeed sweeper' AND datname = 'app'});
$node->safe_psql('app', q{SET default_transaction_read_only = off; INSERT INTO truth SELECT cfeed.publish(1, 2)});
ok(wait_all_stamped($node, 'app'), 'a database whose default isolation is REPEATABLE READ and read-only is swept');
$node->safe_psql('postgres', 'ALTER DATABASE app RESET default_transaction_isolation');
$node->safe_psql('postgres', 'ALTER DATABASE app RESET default_transaction_read_only');

# A hot standby runs no sweeper; reads work there; after promotion the new
# primary sweeps.
$node->backup('b1');
my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($node, 'b1', has_streaming => 1);
$standby->start;
$node->safe_psql('app', 'INSERT INTO truth SELECT cfeed.publish(1, 2)');
wait_all_stamped($node, 'app');
$node->wait_for_catchup($standby);
is($standby->safe_psql('postgres', q{
	SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'cfeed sweeper'}), '0',
	'no sweeper on the standby');
is($standby->safe_psql('app', 'SELECT cfeed.head(1, 2)'),
	$node->safe_psql('app', 'SELECT cfeed.head(1, 2)'), 'head reads the same on the standby');
$node->stop('fast');
$standby->promote;
$standby->poll_query_until('postgres', q{
	SELECT count(*) >= 1 FROM pg_stat_activity WHERE backend_type = 'cfeed sweeper' AND datname = 'app'})
  or die 'promoted standby has no sweeper';
pass('the promoted standby starts a sweeper');
$standby->safe_psql('app', 'INSERT INTO truth SELECT cfeed.publish(1, 3)');
ok(wait_all_stamped($standby, 'app'), 'the promoted standby sweeps');
check_invariants($standby, 'app', 'after promotion');

done_testing();
