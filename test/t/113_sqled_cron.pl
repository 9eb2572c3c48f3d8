
# test/t/113_sqled_cron.pl
#
# The SQL edition (sqled/, docs/sql-edition.md) swept by a pg_cron job
# running cfeed.sweep_loop, with Debian's postgresql-NN-cron (1.4 with
# PostgreSQL 15, 1.6 with 17 and 18; test/run-tests.sh installs it): a
# server preloading pg_cron and nothing of cfeed, cron.database_name set,
# the SQL edition installed there by a role that is not superuser, which
# schedules the job of docs/sql-edition.md ("sweep_loop with pg_cron")
# with the pg_cron it has: '1 second' from pg_cron 1.5 (1.4 refuses it),
# else a minute schedule (the run starts at the next minute: up to a
# minute's wait, on 15 only).  Writers in several sessions (pgbench, some
# transactions rolled back) commit changes while the job's loop runs, and
# a reader waits in cfeed.wait: every committed change gets stamped, per
# shard gaplessly from the shard's start, the reader is woken, and no run
# of the job failed.  Notes the commit-to-stamp latency of the polling
# loop and, with second schedules, the gap between one run and the next.

use strict;
use warnings;

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use FindBin;

my $top = "$FindBin::RealBin/../..";
open(my $fh, '<', "$top/cfeed.control") or die "cfeed.control: $!";
my ($version) = join('', <$fh>) =~ /^default_version = '([^']+)'/m;
close $fh;
my $script = "$top/sqled/cfeed-sql--$version.sql";
plan skip_all => "$script not built (make -C sqled)" unless -f $script;
my $pkglibdir = `pg_config --pkglibdir`;
chomp $pkglibdir;
plan skip_all => "pg_cron is not installed for this server ($pkglibdir/pg_cron.so)"
  unless -f "$pkglibdir/pg_cron.so";

my $node = PostgreSQL::Test::Cluster->new('sqled_cron');
$node->init;
# pg_cron runs a job in a session of its own, connecting like a client:
# through this server's socket directory (trust)
my $host = $node->host;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'pg_cron'
cron.database_name = 'app'
cron.host = '$host'
});
$node->start;
$node->safe_psql('postgres', q{
CREATE ROLE app_owner LOGIN;
CREATE DATABASE app OWNER app_owner;
});
# pg_cron's launcher looks for its database when the server starts
$node->restart;
$node->safe_psql('app', q{
CREATE EXTENSION pg_cron;
GRANT USAGE ON SCHEMA cron TO app_owner;
});
my $cron_version = $node->safe_psql('app', q{SELECT extversion FROM pg_extension WHERE extname = 'pg_cron'});
my ($cmaj, $cmin) = $cron_version =~ /^(\d+)\.(\d+)/ or die "pg_cron version $cron_version";
my $seconds = $cmaj > 1 || $cmin >= 5;
note("pg_cron $cron_version: " . ($seconds ? 'second schedules' : 'minute schedules only'));

my @conn = ('-h', $host, '-p', $node->port, '-U', 'app_owner', '-d', 'app');
$node->command_ok([ 'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', @conn, '-o', '/dev/null', '-f', $script ],
	'the SQL edition installs (as a role that is not superuser)');
is($node->safe_psql('app',
		q{SELECT count(*) FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
		  WHERE p.pronamespace = 'cfeed'::regnamespace AND l.lanname = 'c'}),
	0, 'no C function');
$node->safe_psql('app', q{SET ROLE app_owner; SELECT cfeed.create_feed('cron', 2)});

# as app_owner, in app
sub owner_psql
{
	my ($sql) = @_;
	return $node->safe_psql('app', "SET ROLE app_owner;\n$sql");
}

# Second schedules: what the installed pg_cron says of '1 second'
my ($ret, $out, $err) = $node->psql('app',
	q{SET ROLE app_owner; SELECT cron.schedule('probe', '1 second', 'SELECT 1')});
if ($seconds)
{
	is($ret, 0, "pg_cron $cron_version takes '1 second'");
	owner_psql(q{SELECT cron.unschedule('probe')});
}
else
{
	like($err, qr/invalid schedule/, "pg_cron $cron_version refuses '1 second'");
}

# The job of docs/sql-edition.md, with a shorter loop: from pg_cron 1.5,
# every second, each run sweeping for 2 s (pg_cron queues one run of an
# interval job while another runs, and starts it when that one ends); with
# 1.4, every minute, sweeping for 12 s (the test's writes fit in one run)
my ($schedule, $duration) = $seconds ? ('1 second', 2000) : ('* * * * *', 12000);
my $jobid = owner_psql(qq{SELECT cron.schedule('cfeed-sweep-0', '$schedule',
	\$\$CALL cfeed.sweep_loop(0, 1000, $duration, 100, null, null, null)\$\$)});
is(owner_psql(qq{SELECT username FROM cron.job WHERE jobid = $jobid}), 'app_owner', 'the job runs as its owner');

# wait for the job's loop to run
my $t0 = time;
$node->poll_query_until('app',
	qq{SELECT EXISTS (SELECT FROM cron.job_run_details WHERE jobid = $jobid AND status = 'running')
	   AND EXISTS (SELECT FROM pg_locks WHERE locktype = 'advisory' AND classid = 1667655014 AND granted)})
  or die 'the job did not start';
note(sprintf('the job\'s loop ran %.1f s after it was scheduled', time - $t0));

# a reader waiting for shard 0's next change
my $start = owner_psql(q{SELECT start_sequence_number FROM cfeed.shard_config WHERE feed_id = 1 AND shard = 0});
my $waited = time;
my ($wout, $werr) = ('', '');
my $waiter = IPC::Run::start(
	[ 'psql', '-X', '-A', '-t', '-q', @conn, '-c',
		"SELECT cfeed.wait(1, 0, $start, 30000), EXTRACT(epoch FROM clock_timestamp())" ],
	'>', \$wout, '2>', \$werr, IPC::Run::timeout(60));

# writers: 4 sessions for 2 s, one transaction in ten rolled back
my $bench = PostgreSQL::Test::Utils::tempdir() . '/write.sql';
open(my $bf, '>', $bench) or die "$bench: $!";
print $bf <<'EOS';
\set s random(0, 1)
\set r random(0, 9)
BEGIN;
SELECT cfeed.publish(1, :s);
SELECT cfeed.publish(1, 1 - :s);
\if :r = 0
ROLLBACK;
\else
COMMIT;
\endif
EOS
close $bf;
my ($bout, $berr) = ('', '');
my $ok = IPC::Run::run([ 'pgbench', '-n', '-c', '4', '-j', '2', '-T', '2', '-f', $bench, @conn ],
	'>', \$bout, '2>', \$berr);
ok($ok, 'writers in 4 sessions') or diag($berr);
my ($txs) = $bout =~ /number of transactions actually processed: (\d+)/;
note("pgbench: " . ($txs // '?') . ' transactions');

$waiter->finish;
my ($whead, $wepoch) = $wout =~ /^(\d+)\|([\d.]+)$/;
ok(defined $whead && $whead > $start && time - $waited < 25,
	'the waiting reader returned a head past its cursor, long before its timeout')
  or diag("output $wout, start $start; $werr");
# woken how long after the stamp of the change it waited for
my $stamped = $node->safe_psql('app',
	"SELECT EXTRACT(epoch FROM stamped_at) FROM cfeed.read(1, 0, $start, 1)");
ok(defined $wepoch && $wepoch >= $stamped && $wepoch - $stamped < 5, 'the reader was woken after the stamp');
note(sprintf('the reader returned %.0f ms after the stamp\'s transaction began', 1000 * (($wepoch // 0) - $stamped)));

# every committed change stamped, within the loop
ok($node->poll_query_until('app', q{SELECT count(*) = 0 FROM cfeed.change WHERE change_sequence_number IS NULL}),
	'every committed change is stamped');
my $changes = $node->safe_psql('app', q{SELECT count(*) FROM cfeed.change});
ok($changes > 0, "changes written ($changes)");

# per shard: the numbers are start+1 .. head, each once
is($node->safe_psql('app', q{
SELECT string_agg(format('%s:%s', shard, ok), ',' ORDER BY shard)
FROM (SELECT s.shard,
			 count(c.change_id) = max(c.change_sequence_number) - s.start_sequence_number
			 AND count(DISTINCT c.change_sequence_number) = count(c.change_id)
			 AND min(c.change_sequence_number) = s.start_sequence_number + 1
			 AND max(c.change_sequence_number) = cfeed.head(1, s.shard) AS ok
	  FROM cfeed.shard_config s JOIN cfeed.change c ON c.feed_id = s.feed_id AND c.shard = s.shard
	  WHERE s.feed_id = 1
	  GROUP BY s.shard, s.start_sequence_number) g}), '0:t,1:t', 'each shard is numbered gaplessly from its start to its head');

# the polling loop's latency: 20 changes, one a transaction at random
# moments, each from its commit (written_at, the start of its one-statement
# transaction) to its stamp (stamped_at, the sweep's clock reading)
my $first = owner_psql(q{SELECT COALESCE(max(change_id), 0) FROM cfeed.change});
owner_psql(join('', map { "SELECT cfeed.publish(1, 1); SELECT pg_sleep(random() * 0.2);\n" } 1 .. 20));
ok($node->poll_query_until('app', qq{SELECT count(*) = 0 FROM cfeed.change WHERE change_id > $first AND stamped_at IS NULL}),
	'20 more commits stamped');
my ($n, $median, $max) = split /\|/, $node->safe_psql('app', qq{
SELECT count(stamped_at),
	   round(1000 * EXTRACT(epoch FROM percentile_cont(0.5) WITHIN GROUP (ORDER BY stamped_at - written_at))),
	   round(1000 * EXTRACT(epoch FROM max(stamped_at - written_at)))
FROM cfeed.change WHERE change_id > $first});
is($n, 20, '20 samples, each stamped');
ok($max < 5000, 'each was stamped within the loop\'s polling');
note("commit to stamp (sleep_ms 100, 20 samples): median $median ms, max $max ms");

# runs that end (a run of a minute schedule: once its loop is over)
my $runs = $seconds ? 3 : 1;
ok($node->poll_query_until('app',
		qq{SELECT count(*) >= $runs FROM cron.job_run_details WHERE jobid = $jobid AND status = 'succeeded'}),
	"$runs run(s) of the job ended");
if ($seconds)
{
	# the loops follow each other
	my $gap = $node->safe_psql('app', qq{
SELECT round(max(EXTRACT(epoch FROM next_start - end_time)) * 1000)
FROM (SELECT end_time, lead(start_time) OVER (ORDER BY start_time) AS next_start
	  FROM cron.job_run_details WHERE jobid = $jobid AND status = 'succeeded') r
WHERE next_start IS NOT NULL});
	note("longest gap between one run's end and the next run's start: $gap ms");
	ok($gap ne '' && $gap < 3000, 'a queued run starts as the running one ends');
}
is($node->safe_psql('app', qq{SELECT count(*) FROM cron.job_run_details WHERE jobid = $jobid AND status = 'failed'}),
	0, 'no run of the job failed');
like($node->safe_psql('app', qq{SELECT string_agg(DISTINCT return_message, ',') FROM cron.job_run_details
								  WHERE jobid = $jobid AND status = 'succeeded'}),
	qr/^(?:CALL|1 row)$/, 'the runs that ended ended with CALL\'s result');

owner_psql(qq{SELECT cron.unschedule($jobid)});
$node->stop;
done_testing();
