# test/t/110_sql_exporter.pl
#
# cfeed's collector for Debian's prometheus-sql-exporter
# (contrib/prometheus-sql-exporter/cfeed.yml): the real exporter, started on
# a free port against a cluster with feeds, a consumer group and a shard
# that has run out of numbers, is scraped, and its figures must be the
# database's: heads (and a head that moves after more writes), pending
# changes, lag per group and shard and per group, the failing sweeper and
# its error, the stamp latency; no query of the file may fail.  The file is
# used as shipped, with its connection from the environment and its
# interval shortened.  Skipped where the exporter is not installed (Debian
# package prometheus-sql-exporter; test/run-tests.sh installs it).

use strict;
use warnings;

use Cwd ();
use HTTP::Tiny;
use IPC::Run qw(start);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);

my ($exporter) = grep { -x } map { "$_/prometheus-sql-exporter" } split /:/, "$ENV{PATH}:/usr/bin";
plan skip_all => 'prometheus-sql-exporter is not installed (Debian package prometheus-sql-exporter)'
  unless $exporter;

my $collector = ($ENV{TESTDIR} // Cwd::getcwd()) . '/contrib/prometheus-sql-exporter/cfeed.yml';

my $node = PostgreSQL::Test::Cluster->new('sql_exporter');
$node->init;
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'cfeed'\n");
$node->start;
my $start = 2000000000000000;
# feed 1: two shards in sweep group 0; feed 2: shard 1 in sweep group 1,
# its head one below the last number, so that it runs out
$node->safe_psql('postgres', q{
	CREATE EXTENSION cfeed;
	SELECT cfeed.create_feed('orders', 2, 1);
	SELECT cfeed.create_feed('edge', 1, 2, sweep_group => 1);
	INSERT INTO cfeed.shard (feed_id, shard, sweep_group, last_change_sequence_number)
	VALUES (2, 1, 1, 9223372036854775806);
	SELECT cfeed.publish(1, 0) FROM generate_series(1, 5);
	SELECT cfeed.publish(1, 1) FROM generate_series(1, 2);
	SELECT cfeed.publish(2, 1) FROM generate_series(1, 3);
});
$node->poll_query_until('postgres', qq{
	SELECT cfeed.head(1, 0) = $start + 5 AND cfeed.head(1, 1) = $start + 2
	   AND cfeed.head(2, 1) = 9223372036854775807})
  or die 'the changes were not stamped';
$node->poll_query_until('postgres', q{
	SELECT count(*) = 1 FROM cfeed.sweepers WHERE sweep_group = 1 AND last_error IS NOT NULL})
  or die 'the sweeper of group 1 shows no error';
# a consumer group: its member checkpoints shard 0 two changes in
$node->safe_psql('postgres', qq{
	SELECT count(*) FROM cfeed.acquire('billing', 1, 'worker-a', 600000);
	SELECT cfeed.checkpoint('billing', 1, 0, 'worker-a', l.epoch, $start + 2)
	FROM cfeed.lease l WHERE l.group_name = 'billing' AND l.shard = 0;
});
# its first change of shard 1 fails once and becomes a dead letter
$node->safe_psql('postgres', qq{
	SELECT cfeed.set_failure_policy('billing', 1, max_attempts => 1, dead_letter => true);
	SELECT f.dead_letter FROM cfeed.lease l,
		cfeed.fail('billing', 1, 1, 'worker-a', l.epoch, $start + 1, 'poison') f
	WHERE l.group_name = 'billing' AND l.shard = 1;
});

# The shipped file, its interval shortened for the test.
my $dir = PostgreSQL::Test::Utils::tempdir();
my $config = slurp_file($collector);
$config =~ s/^(\s*interval:\s*)'15s'/$1'1s'/m or die "no interval of 15s in $collector";
open my $fh, '>', "$dir/cfeed.yml" or die "cannot write $dir/cfeed.yml: $!";
print $fh $config;
close $fh;

my $port = PostgreSQL::Test::Cluster::get_free_port();
my $log = $PostgreSQL::Test::Utils::log_path . '/sql_exporter.log';
local $ENV{CFEED_EXPORTER_DSN} =
  'postgres:///postgres?host=' . $node->host . '&port=' . $node->port . '&sslmode=disable';
my $h = start([ $exporter, '-config.file', "$dir/cfeed.yml", '-web.listen-address', "127.0.0.1:$port" ],
	'<', \undef, '>&', $log);
END { $h->kill_kill if $h && $h->pumpable; }

# The exporter's gauges as { name => [ [ {labels}, value ], ... ] }.
sub scrape
{
	my $r = HTTP::Tiny->new(timeout => 10)->get("http://127.0.0.1:$port/metrics");
	return undef unless $r->{success};
	my %m;
	for my $line (split /\n/, $r->{content})
	{
		next unless $line =~ /^(\w+)\{(.*)\} (\S+)$/;
		my ($name, $labels, $value) = ($1, $2, $3);
		my %l;
		$l{$1} = $2 =~ s/\\(.)/$1/gr while $labels =~ /(\w+)="((?:[^"\\]|\\.)*)"/g;
		push @{ $m{$name} }, [ \%l, $value ];
	}
	return \%m;
}

# The value of the gauge with these labels, undef if there is none.
sub value
{
	my ($m, $name, %want) = @_;
	for my $s (@{ $m->{$name} // [] })
	{
		return $s->[1] unless grep { ($s->[0]{$_} // '') ne $want{$_} } keys %want;
	}
	return undef;
}

# Scrape until $ok->($metrics) holds (the exporter runs its queries every
# second), for up to the test timeout; returns the last scrape.
sub scrape_until
{
	my ($ok) = @_;
	my $m;
	for (1 .. 10 * $PostgreSQL::Test::Utils::timeout_default)
	{
		$m = scrape();
		return $m if $m && $ok->($m);
		usleep(100_000);
	}
	return $m;
}

sub db { return $node->safe_psql('postgres', shift); }

# The exporter runs its queries one after the other: a scrape can come
# before the later ones have answered once (seen on a loaded machine), so
# wait for every gauge the checks below read.
my @gauges = qw(sql_cfeed_shard sql_cfeed_consumer_lag sql_cfeed_group sql_cfeed_sweeper
  sql_cfeed_sweepers_running sql_cfeed_sweeper_error sql_cfeed_stamp_latency);
my $m = scrape_until(sub {
	my ($m) = @_;
	return defined value($m, 'sql_cfeed_shard', feed => 'orders', shard => 0, col => 'head')
	  && !grep { !$m->{$_} } @gauges;
});
ok($m, 'the exporter answers /metrics') or diag(slurp_file($log));
my @failed = map { $_->[0]{query} } grep { $_->[1] != 0 } @{ $m->{sql_exporter_last_scrape_failed} // [] };
is("@failed", '', 'no query of the collector fails') or diag(slurp_file($log));

# heads and pending changes, per shard, as cfeed.stats has them
# (the exporter prints large numbers as 2.000000000000005e+15: compared as
# numbers, exact below 2^53)
cmp_ok(value($m, 'sql_cfeed_shard', feed => 'orders', feed_id => 1, shard => 0, sweep_group => 0, col => 'head'),
	'==', db('SELECT head FROM cfeed.stats WHERE feed_id = 1 AND shard = 0'), 'the head of a shard');
cmp_ok(value($m, 'sql_cfeed_shard', feed => 'orders', shard => 0, col => 'head'), '==', $start + 5,
	'is the fifth number');
is(value($m, 'sql_cfeed_shard', feed => 'edge', shard => 1, col => 'pending'),
	db('SELECT pending FROM cfeed.stats WHERE feed_id = 2 AND shard = 1'), 'the changes pending on the shard out of numbers');
is(value($m, 'sql_cfeed_shard', feed => 'edge', shard => 1, col => 'pending'), 2, 'are two');
ok(value($m, 'sql_cfeed_shard', feed => 'edge', shard => 1, col => 'oldest_pending_seconds') > 0,
	'and the oldest of them has an age');
is(value($m, 'sql_cfeed_shard', feed => 'orders', shard => 1, col => 'pending'), 0, 'nothing pending elsewhere');

# lag per consumer group and shard, and per group
is(value($m, 'sql_cfeed_consumer_lag', group => 'billing', feed => 'orders', shard => 0, owner => 'worker-a',
		col => 'behind'),
	db(q{SELECT behind FROM cfeed.consumer_lag WHERE group_name = 'billing' AND shard = 0}),
	'the lag of a group on a shard');
is(value($m, 'sql_cfeed_consumer_lag', group => 'billing', shard => 0, col => 'behind'), 3,
	'is the three changes after its checkpoint');
is(value($m, 'sql_cfeed_consumer_lag', group => 'billing', shard => 1, col => 'behind'),
	db(q{SELECT behind FROM cfeed.consumer_lag WHERE group_name = 'billing' AND shard = 1}),
	'and on the other shard');
ok(value($m, 'sql_cfeed_consumer_lag', group => 'billing', shard => 0, col => 'lease_seconds_left') > 500,
	'the lease\'s time left');
is(value($m, 'sql_cfeed_group', group => 'billing', feed => 'orders', col => 'behind'),
	db(q{SELECT behind FROM cfeed.groups WHERE group_name = 'billing'}), 'the lag of the group');
is(value($m, 'sql_cfeed_group', group => 'billing', feed => 'orders', col => 'held'), 2, 'its shards held');
is(value($m, 'sql_cfeed_group', group => 'billing', feed => 'orders', col => 'owners'), 1, 'its owners');
is(value($m, 'sql_cfeed_group', group => 'billing', feed => 'orders', col => 'dead_letters'), 1,
	'its dead letters');
is(value($m, 'sql_cfeed_group', group => 'billing', feed => 'orders', col => 'failing'), 0,
	'its shards held up by a failing change');

# the sweepers: the one of group 1 fails, with the error
is(value($m, 'sql_cfeed_sweeper', datname => 'postgres', sweep_group => 1, col => 'failing'), 1,
	'the sweeper of the shard out of numbers is failing');
is(value($m, 'sql_cfeed_sweeper', datname => 'postgres', sweep_group => 0, col => 'failing'), 0,
	'the other is not');
is(value($m, 'sql_cfeed_sweeper', datname => 'postgres', sweep_group => 0, col => 'changes_stamped'),
	db(q{SELECT changes_stamped FROM cfeed.sweepers WHERE datname = 'postgres' AND sweep_group = 0}),
	'changes stamped by a sweeper');
is(value($m, 'sql_cfeed_sweeper_error', datname => 'postgres', sweep_group => 1,
		error => db(q{SELECT last_error FROM cfeed.sweepers WHERE sweep_group = 1}), col => 'failing'),
	1, 'the sweeper\'s error, as in cfeed.sweepers');
like(join(' ', map { $_->[0]{error} } @{ $m->{sql_cfeed_sweeper_error} // [] }),
	qr/^shard 1 of feed 2 has run out of sequence numbers$/, 'which names the shard');
is(value($m, 'sql_cfeed_sweepers_running', sweep_group => 0, col => 'running'), 1,
	'a sweeper runs for each sweep group');

# stamp latency over the last minute
is(value($m, 'sql_cfeed_stamp_latency', feed => 'orders', shard => 0, col => 'changes'), 5,
	'the stamp latency counts the changes stamped in the last minute');
my $mean = value($m, 'sql_cfeed_stamp_latency', feed => 'orders', shard => 0, col => 'mean_seconds');
my $max = value($m, 'sql_cfeed_stamp_latency', feed => 'orders', shard => 0, col => 'max_seconds');
ok(defined $mean && $mean >= 0 && $mean <= $max && $max < 60, "mean ($mean) and highest ($max) latency");

# more writes: the figures follow
db('SELECT cfeed.publish(1, 0) FROM generate_series(1, 4)');
$node->poll_query_until('postgres', "SELECT cfeed.head(1, 0) = $start + 9") or die 'not stamped';
# (the exporter runs its queries one after another: a scrape can hold the
# new head and the lag from before the writes; wait for both, a lag that
# never follows still fails below)
$m = scrape_until(sub {
	(value($_[0], 'sql_cfeed_shard', feed => 'orders', shard => 0, col => 'head') // 0) == $start + 9
	  && (value($_[0], 'sql_cfeed_consumer_lag', group => 'billing', shard => 0, col => 'behind') // 0) == 7 });
cmp_ok(value($m, 'sql_cfeed_shard', feed => 'orders', shard => 0, col => 'head'), '==', $start + 9,
	'the head moves after more writes');
is(value($m, 'sql_cfeed_consumer_lag', group => 'billing', shard => 0, col => 'behind'), 7, 'and the lag with it');

$h->kill_kill;
done_testing();
