# The background sweeper when the system clock is set back (an NTP step, a
# host's clock corrected) while it pauses between sweeps (cfeed.sweep_gather,
# cfeed.sweep_delay): the pause ends when its length has passed, not when
# the clock has come back to where it was.  The server runs under
# libfaketime, whose offset file sets its clock back; skipped without it.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use CfeedCheck;

my ($faketime) = grep { -f } glob('/usr/lib/*/faketime/libfaketime.so.1');
plan skip_all => 'libfaketime is not installed' unless $faketime;

# Gathering at 100 changes a second, with pauses of up to a second: under
# the load below the sweeper is nearly always in a pause.
my $node = PostgreSQL::Test::Cluster->new('clock');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'cfeed'
cfeed.sweep_gather = '1s'
cfeed.sweep_gather_changes = 100
});
my $offset = $node->basedir . '/faketime_offset';
append_to_file($offset, "+0\n");
{
	local $ENV{LD_PRELOAD} = $faketime;
	local $ENV{FAKETIME_TIMESTAMP_FILE} = $offset;
	local $ENV{FAKETIME_CACHE_DURATION} = 1;
	local $ENV{FAKETIME_DONT_FAKE_MONOTONIC} = 1;
	$node->start;
}
$node->safe_psql('postgres', 'CREATE DATABASE app');
$node->safe_psql('app', 'CREATE EXTENSION cfeed');
$node->safe_psql('app', q{SELECT cfeed.create_feed('orders', 4)});
setup_truth($node, 'app');
my $script = $node->basedir . '/writer.sql';
pgbench_writer_script($script, 4);
$node->poll_query_until('postgres', q{
	SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'cfeed sweeper'})
  or die 'no sweeper';

my ($out, $err) = ('', '');
my $h = IPC::Run::start(
	[ 'pgbench', '-n', '-c', '4', '-j', '2', '-T', '6', '-f', $script,
	  '-h', $node->host, '-p', $node->port, 'app' ],
	'>', \$out, '2>', \$err);
sleep 2;
# The clock goes back an hour, for every process of the server at once.
open my $fh, '>', $offset or die "cannot write $offset: $!";
print $fh "-3600\n";
close $fh;
$h->finish;
note "pgbench: $out$err";
cmp_ok($node->safe_psql('app', 'SELECT count(*) FROM truth'), '>', 0, 'the load wrote changes');

# A pause of at most a second: within a few seconds everything is stamped.
my $unstamped;
for (1 .. 10)
{
	$unstamped = $node->safe_psql('app',
		'SELECT count(*) FROM cfeed.change WHERE change_sequence_number IS NULL');
	last if $unstamped == 0;
	sleep 1;
}
is($unstamped, '0', 'with the clock set back an hour under load, every change is stamped within seconds');
check_invariants($node, 'app', 'after the clock went back');
note $node->safe_psql('app', 'SELECT sweeps, changes_stamped, last_error FROM cfeed.sweepers');

$node->stop;
done_testing();
