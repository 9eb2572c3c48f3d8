# test/t/234_sweeper_pause_wakeups.pl
#
# A sweeper that pauses after a sweep (cfeed.sweep_delay, or gathering
# under sustained writes) sweeps when its pause ends whatever commits
# meanwhile, so commits leave its latch alone (src/shmem.c, the slot's
# pausing flag).  Up to 1.8 every committing writer set the latch: the
# sweeper woke, checked the clock and slept again, once per commit that
# found its latch reset: 16.8 µs of its CPU per change under 8 pgbench
# writers against 3.9 since, and publish() in ranges at 0.78× the app
# row's TPS against 0.84× since (write_overhead.sh, row 1b).
#
# Measured here by the sweeper's voluntary context switches (Linux
# /proc/PID/status) while writers commit 400 times a second through
# 100 ms pauses: about one a commit before (each commit comes after the
# sweeper slept again), a few a sweep now.  Then every change is stamped
# once and gapless soon after the writers stop, and a lone commit after
# the load is stamped at once (the flag is cleared before the next sweep,
# so no wake-up is lost; the fallback poll is 10 s here).

use strict;
use warnings;

use IPC::Run qw(run);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

plan skip_all => 'needs /proc (Linux)' unless -r "/proc/$$/status";

my $node = PostgreSQL::Test::Cluster->new('pause');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'cfeed'
cfeed.sweep_delay = 100
cfeed.fallback_interval = 10000
});
$node->start;
$node->safe_psql('postgres', q{
	CREATE EXTENSION cfeed;
	SELECT cfeed.create_feed('rows', 4);
	SET cfeed.default_storage = 'ranges';
	SELECT cfeed.create_feed('ranges', 4);
});
$node->poll_query_until('postgres', 'SELECT count(*) = 1 FROM cfeed.sweepers WHERE pid IS NOT NULL')
  or die 'no sweeper';
my $pid = $node->safe_psql('postgres', 'SELECT pid FROM cfeed.sweepers');

sub switches
{
	my $status = slurp_file("/proc/$pid/status");
	my ($n) = $status =~ /^voluntary_ctxt_switches:\s+(\d+)/m
	  or die "no voluntary_ctxt_switches in /proc/$pid/status";
	return $n;
}

my $script = $node->basedir . '/write.sql';
PostgreSQL::Test::Utils::append_to_file($script,
	"\\set s random(0, 3)\n\\set f random(1, 2)\nSELECT cfeed.publish(:f, :s);\n");
my $before = switches();
my ($out, $err) = ('', '');
run([ 'pgbench', '-n', '-c', '4', '-j', '2', '-R', '400', '-T', '4', '-f', $script,
		'-h', $node->host, '-p', $node->port, 'postgres' ], '>', \$out, '2>', \$err)
  or die "pgbench failed: $err";
my $after = switches();
my ($written) = $out =~ /number of transactions actually processed: (\d+)/;
cmp_ok($written, '>=', 800, "the writers committed $written changes");
my $woken = $after - $before;
cmp_ok($woken * 4, '<', $written,
	"the sweeper switched $woken times for $written commits: commits left its latch alone while it paused");

my $drain = time;
$node->poll_query_until('postgres', qq{
	SELECT count(*) = $written
	FROM generate_series(1, 2) f, generate_series(0, 3) sh, cfeed.read(f, sh, NULL, 100000)})
  or die 'not every change stamped';
$drain = (time - $drain) * 1000;
cmp_ok($drain, '<', 3000, sprintf('every change stamped %.0f ms after the writers stopped', $drain));
is($node->safe_psql('postgres', q{
	SELECT bool_and(n = total AND n = last - first + 1)
	FROM (SELECT f, sh, count(*) AS n, count(DISTINCT change_id) AS total,
	             min(change_sequence_number) AS first, max(change_sequence_number) AS last
	      FROM generate_series(1, 2) f, generate_series(0, 3) sh,
	           cfeed.read(f, sh, NULL, 100000) r
	      GROUP BY 1, 2) per_shard}), 't', 'every change stamped once, gapless, per shard');

# a lone commit once the load stopped: the pause after the last sweep has
# ended, and this commit's wake-up must not be skipped (else the fallback
# poll, 10 s here, would find it)
sleep 1;
my $head = $node->safe_psql('postgres', 'SELECT cfeed.head(1, 0)');
my $t0 = time;
$node->safe_psql('postgres', 'SELECT cfeed.publish(1, 0)');
$node->poll_query_until('postgres', "SELECT cfeed.head(1, 0) > $head")
  or die 'the lone change was not stamped';
my $ms = (time - $t0) * 1000;
cmp_ok($ms, '<', 3000, sprintf('a lone commit after the load stamped in %.0f ms (the fallback poll is 10 s)', $ms));

$node->stop;
done_testing();
