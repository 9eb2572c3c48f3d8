# Operations against a preloaded server with its background sweeper (the
# deterministic parts are sql/operations.sql and test/specs/sweep_rewrite):
# COMMIT PREPARED wakes the sweeper at once; the sweeper reports its table
# statistics, so autovacuum vacuums cfeed.change under a sweeper that never
# exits; cfeed.sweepers names its database; writers racing DROP EXTENSION
# get a clean error, never "could not open relation with OID".
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use FindBin;
use lib $FindBin::RealBin;
use CfeedCheck;

my $node = PostgreSQL::Test::Cluster->new('ops');
$node->init;
# The fallback poll is set far out: only a wake-up can stamp within seconds.
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'cfeed'
max_worker_processes = 20
max_prepared_transactions = 10
cfeed.fallback_interval = 60000
autovacuum_naptime = 1
log_autovacuum_min_duration = 0
});
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION cfeed');
$node->safe_psql('postgres', q{SELECT cfeed.create_feed('ops', 2)});
$node->poll_query_until('postgres', q{SELECT count(*) = 1 FROM cfeed.sweepers})
	or die 'no sweeper';
setup_truth($node, 'postgres');

# How long until nothing is pending (at most $limit seconds).
sub seconds_to_stamp
{
	my ($limit) = @_;
	my $t0 = time;
	while (time - $t0 < $limit)
	{
		return time - $t0 if $node->safe_psql('postgres',
			'SELECT count(*) FROM cfeed.change WHERE change_sequence_number IS NULL') eq '0';
		usleep(10_000);
	}
	return undef;
}

# A plain commit is stamped at once (the baseline of the next check).
$node->safe_psql('postgres', 'INSERT INTO truth SELECT cfeed.publish(1, 0)');
my $plain = seconds_to_stamp(10);
ok(defined $plain && $plain < 5, 'a plain commit is stamped at once');

# COMMIT PREPARED, from another session than the one that prepared, wakes
# the sweeper too (cfeed 1.3 left it to the fallback poll).
$node->safe_psql('postgres', q{
	BEGIN;
	INSERT INTO truth SELECT cfeed.publish(1, 1);
	INSERT INTO truth SELECT cfeed.publish(1, 0);
	PREPARE TRANSACTION 'ops_p1';});
usleep(300_000);
$node->safe_psql('postgres', q{COMMIT PREPARED 'ops_p1'});
my $prepared = seconds_to_stamp(10);
ok(defined $prepared && $prepared < 5,
	sprintf('COMMIT PREPARED wakes the sweeper (stamped after %s s)', $prepared // 'more than 10'));
# ROLLBACK PREPARED: nothing to stamp, nothing stamped
$node->safe_psql('postgres', q{
	BEGIN;
	SELECT cfeed.publish(1, 1);
	PREPARE TRANSACTION 'ops_p2';});
$node->safe_psql('postgres', q{ROLLBACK PREPARED 'ops_p2'});
check_invariants($node, 'postgres', 'after 2PC');

# cfeed.sweepers shows the sweeper's database by name.
is($node->safe_psql('postgres', 'SELECT datname = current_database() FROM cfeed.sweepers'),
	't', 'cfeed.sweepers.datname is the database');

# The sweeper reports the statistics of what it stamps, so autovacuum sees
# the dead versions stamping leaves in cfeed.change while the sweeper runs
# on (cfeed 1.3 reported none until the sweeper exited).
$node->safe_psql('postgres', q{
	INSERT INTO truth SELECT cfeed.publish(1, g % 2) FROM generate_series(1, 3000) g});
ok(defined seconds_to_stamp(60), '3000 changes stamped');
ok($node->poll_query_until('postgres', q{
	SELECT n_tup_upd >= 3000 FROM pg_stat_user_tables WHERE relid = 'cfeed.change'::regclass}),
	'the sweeper\'s stamps show in pg_stat_user_tables');
ok($node->poll_query_until('postgres', q{
	SELECT autovacuum_count > 0 FROM pg_stat_user_tables WHERE relid = 'cfeed.change'::regclass}),
	'autovacuum vacuums cfeed.change under a sweeper that never exits');
is($node->safe_psql('postgres', q{SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'cfeed sweeper'}),
	'1', 'the same sweeper still runs');
check_invariants($node, 'postgres', 'after autovacuum');

# Writers racing DROP EXTENSION (in a second database): a writer that was
# waiting for the drop gets a clean error; none opens a relation that is
# gone.
$node->safe_psql('postgres', 'CREATE DATABASE racing');
my $script = $node->basedir . '/publish.sql';
open my $fh, '>', $script or die $!;
print $fh "SELECT cfeed.publish(1, 0, 1);\n";
close $fh;
my $bad = 0;
my $errors = '';
for my $round (1 .. 3)
{
	$node->safe_psql('racing', q{CREATE EXTENSION cfeed; SELECT cfeed.create_feed('race', 1)});
	my ($out, $err) = ('', '');
	my $bench = IPC::Run::start(
		[ 'pgbench', '-n', '-c', '4', '-T', '3', '-f', $script,
		  '-h', $node->host, '-p', $node->port, 'racing' ],
		'>', \$out, '2>', \$err);
	usleep(800_000);
	# DROP EXTENSION locks cfeed's relations in its own order, writers in
	# theirs: PostgreSQL may break a deadlock by cancelling the drop, which
	# an operator then runs again
	my ($ret, $dropout, $droperr);
	for my $try (1 .. 5)
	{
		($ret, $dropout, $droperr) = $node->psql('racing', 'DROP EXTENSION cfeed');
		last if $ret == 0;
		die "DROP EXTENSION failed: $droperr" unless $droperr =~ /deadlock detected/;
	}
	is($ret, 0, "round $round: DROP EXTENSION done");
	$bench->finish;
	$errors .= $err;
	$bad++ if $err =~ /could not open relation|cache lookup failed|XX000/;
}
is($bad, 0, 'writers racing DROP EXTENSION get clean errors')
	or diag($errors);
like($errors, qr/extension "cfeed" is not installed|does not exist/,
	'the writers saw the extension go away');

$node->stop;
done_testing();
