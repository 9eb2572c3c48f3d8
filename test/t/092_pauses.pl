# test/t/092_pauses.pl
#
# Sweeper pauses (utility.c; issue 28, items 6 and 7): DROP DATABASE,
# ALTER DATABASE ... RENAME / SET TABLESPACE and CREATE DATABASE ...
# TEMPLATE pause a database's sweepers only when PostgreSQL would let the
# command go ahead, and the pause ends on every way out of it.
#
#  - a role with LOGIN only loops those commands, failing, against a
#    database with cfeed while a writer commits there: the sweeper never
#    restarts (its pid stays) and commit -> stamp keeps its p99 (against a
#    window without the loop, same run; 1.7 restarted the sweeper dozens of
#    times a second);
#  - the owner's DROP DATABASE that waits for a connected session shows in
#    cfeed.sweepers as a pause; terminated (FATAL), or failing after its
#    5 s (ERROR), it leaves the database swept again (1.7 left a terminated
#    one unswept until the server restarted, and said nothing).

use strict;
use warnings;

use IPC::Run qw(start);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

my $node = PostgreSQL::Test::Cluster->new('pauses');
$node->init;
$node->append_conf('postgresql.conf',
	"shared_preload_libraries = 'cfeed'\ncfeed.launcher_interval = 200\n");
$node->start;
$node->safe_psql('postgres', q{
	CREATE ROLE nobody LOGIN;
	CREATE ROLE dbowner LOGIN CREATEDB;
	CREATE DATABASE cf;
	CREATE DATABASE victim OWNER dbowner;
});
for my $db ('cf', 'victim')
{
	$node->safe_psql($db, q{
		CREATE EXTENSION cfeed;
		SELECT cfeed.create_feed('f', 1);
		CREATE TABLE lat (ms float8);
		CREATE PROCEDURE measure(n int) LANGUAGE plpgsql AS $$
		DECLARE
			id bigint;
			t0 timestamptz;
		BEGIN
			FOR i IN 1 .. n LOOP
				t0 := clock_timestamp();
				id := cfeed.publish(1, 0);
				COMMIT;
				WHILE NOT EXISTS (SELECT FROM cfeed.change
								  WHERE change_id = id AND change_sequence_number IS NOT NULL) LOOP
					PERFORM pg_sleep(0.0002);
				END LOOP;
				INSERT INTO lat VALUES (extract(epoch FROM clock_timestamp() - t0) * 1000);
				COMMIT;
			END LOOP;
		END $$;
	});
}

sub sweeper_pid
{
	my ($db) = @_;
	return $node->safe_psql($db, "SELECT string_agg(pid::text, ',') FROM cfeed.sweepers WHERE datname = '$db' AND pid IS NOT NULL");
}

sub p99
{
	my ($db) = @_;
	my $p = $node->safe_psql($db, q{
		SELECT percentile_cont(0.99) WITHIN GROUP (ORDER BY ms) FROM lat;
		TRUNCATE lat;});
	return $p;
}

$node->poll_query_until('cf', "SELECT count(*) = 1 FROM cfeed.sweepers WHERE datname = 'cf'")
  or die 'no sweeper for cf';

# --- a LOGIN-only role's failing commands do not pause anything
my $pid = sweeper_pid('cf');
$node->safe_psql('cf', 'CALL measure(300)');
my $base = p99('cf');

my $script = PostgreSQL::Test::Utils::tempdir() . '/attack.sql';
open my $fh, '>', $script or die;
print $fh "DROP DATABASE cf;\nALTER DATABASE cf RENAME TO cf2;\n"
  . "ALTER DATABASE cf SET TABLESPACE pg_default;\nCREATE DATABASE cf3 TEMPLATE cf;\n"
  for 1 .. 1500;
close $fh;
my $attack = start([ 'psql', '-X', '-q', '-h', $node->host, '-p', $node->port, '-U', 'nobody',
		'-d', 'postgres', '-f', $script ], '>', \my $aout, '2>', \my $aerr);
$node->safe_psql('cf', 'CALL measure(300)');
$attack->finish;
my $attacked = p99('cf');
my $refused = () = $aerr =~ /ERROR/g;
cmp_ok($refused, '>=', 1000, "nobody's commands were refused ($refused)");
is(sweeper_pid('cf'), $pid, 'the sweeper of cf never restarted');
cmp_ok($attacked, '<=', 3 * $base + 10,
	"commit -> stamp p99 under the attack ($attacked ms) stays near the quiet one ($base ms)");
unlike(slurp_file($node->logfile), qr/sweepers of database \d+ paused/, 'and nothing was paused');

# --- the owner's DROP DATABASE waiting for a session, terminated
my $holder = start([ 'psql', '-X', '-h', $node->host, '-p', $node->port, '-d', 'victim',
		'-c', 'SELECT pg_sleep(60)' ], '>', \my $hout, '2>', \my $herr);
$node->poll_query_until('postgres', "SELECT count(*) = 1 FROM pg_stat_activity WHERE datname = 'victim' AND query LIKE 'SELECT pg_sleep%'");
my $dropper = start([ 'psql', '-X', '-h', $node->host, '-p', $node->port, '-U', 'dbowner',
		'-d', 'postgres', '-c', 'DROP DATABASE victim' ], '>', \my $dout, '2>', \my $derr);
$node->poll_query_until('postgres', q{
	SELECT count(*) = 1 FROM pg_stat_activity WHERE query = 'DROP DATABASE victim' AND pid <> pg_backend_pid()});
usleep(500_000);
is( $node->safe_psql('cf', q{
	SELECT last_error LIKE 'paused by DROP DATABASE in process %' AND pid IS NULL
	FROM cfeed.sweepers WHERE datname = 'victim'}),
	't', 'cfeed.sweepers shows the database paused by the DROP DATABASE');
is( $node->safe_psql('postgres', q{
	SELECT string_agg(pg_terminate_backend(pid)::text, ',')
	FROM pg_stat_activity WHERE query = 'DROP DATABASE victim' AND pid <> pg_backend_pid()}),
	'true', 'terminate the DROP DATABASE');
$dropper->finish;
like($derr, qr/terminat/, 'the DROP DATABASE was terminated');
# (a new connection to victim waits while the DROP DATABASE runs)
$node->safe_psql('victim', 'SELECT cfeed.publish(1, 0, 42)');
ok( $node->poll_query_until('victim', q{
	SELECT change_sequence_number IS NOT NULL FROM cfeed.change WHERE change_id = 42}),
	'after the terminated DROP DATABASE the database is swept again');
like(sweeper_pid('victim'), qr/^\d+$/, 'and has its sweeper');

# --- the same DROP DATABASE failing after its wait (ERROR)
$dropper = start([ 'psql', '-X', '-h', $node->host, '-p', $node->port, '-U', 'dbowner',
		'-d', 'postgres', '-c', 'DROP DATABASE victim' ], '>', \$dout, '2>', \$derr);
$node->poll_query_until('cf', q{
	SELECT count(*) = 1 FROM cfeed.sweepers WHERE datname = 'victim' AND pid IS NULL});
$dropper->finish;
$node->safe_psql('victim', 'SELECT cfeed.publish(1, 0, 43)');
like($derr, qr/being accessed by other users/, 'the DROP DATABASE failed after its wait');
ok( $node->poll_query_until('victim', q{
	SELECT change_sequence_number IS NOT NULL FROM cfeed.change WHERE change_id = 43}),
	'after the failed DROP DATABASE the database is swept again');
$holder->kill_kill;

# --- and the owner's DROP DATABASE that goes ahead still works
$node->safe_psql('postgres', q{SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = 'victim'});
$node->safe_psql('postgres', 'DROP DATABASE victim', extra_params => [ '-U', 'dbowner' ]);
is($node->safe_psql('postgres', q{SELECT count(*) FROM pg_database WHERE datname = 'victim'}), '0',
	'the owner drops the database');

done_testing();
