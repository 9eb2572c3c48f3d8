
# test/t/112_sqled_sweep.pl
#
# `cfeed sweep` against the SQL edition (sqled/, docs/sql-edition.md) on a
# server that loads no cfeed.so: --once prints the totals; the loop stamps
# what writers commit, within its poll interval without hints and at once
# with them (trigger change_sweep_hint enabled, a poll interval of a
# minute); a sweep NOTIFYs each longpoll shard's new head on its channel,
# as the C edition does; the command stops on SIGTERM with 0.  The clients
# work against it unchanged: `cfeed tail` prints every stamped change in
# shard order, and `cfeed serve` discovers the feed's partitions and pages
# its changes (FeedAPI).

use strict;
use warnings;

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use FindBin;
use lib $FindBin::RealBin;
use JSON::PP;
use ServeHelper qw(cfeed_binary start_gateway stop_gateway write_tokens http_get ndjson);

my $top = "$FindBin::RealBin/../..";
open(my $fh, '<', "$top/cfeed.control") or die "cfeed.control: $!";
my ($version) = join('', <$fh>) =~ /^default_version = '([^']+)'/m;
close $fh;
my $script = "$top/sqled/cfeed-sql--$version.sql";
plan skip_all => "$script not built (make -C sqled)" unless -f $script;
my $cfeed = cfeed_binary();

my $node = PostgreSQL::Test::Cluster->new('sqled_sweep');
$node->init;
$node->start;
$node->command_ok(
	[
		'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-h', $node->host, '-p', $node->port,
		'-d', 'postgres', '-o', '/dev/null', '-f', $script
	],
	'the SQL edition installs');
is($node->safe_psql('postgres',
		q{SELECT count(*) FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
		  WHERE p.pronamespace = 'cfeed'::regnamespace AND l.lanname = 'c'}),
	0, 'no C function');
$node->safe_psql('postgres', q{SELECT cfeed.create_feed('f', 2)});
my @conn = ('-h', $node->host, '-p', $node->port, '-d', 'postgres');

# the head of shard $s of feed 1, relative to the start
sub head
{
	my ($s) = @_;
	return $node->safe_psql('postgres', "SELECT cfeed.head(1, $s) - 2000000000000000");
}

# poll until shard $s's head is $want; the seconds it took, or undef
sub wait_head
{
	my ($s, $want, $limit) = @_;
	my $t0 = time;
	while (time - $t0 < $limit)
	{
		return time - $t0 if head($s) == $want;
		usleep(20_000);
	}
	return undef;
}

# --once: one sweep, its totals as a JSON line
$node->safe_psql('postgres', 'SELECT cfeed.publish(1, 0), cfeed.publish(1, 0), cfeed.publish(1, 1)');
my ($out, $err) = ('', '');
IPC::Run::run([ $cfeed, 'sweep', '--once', @conn ], '>', \$out, '2>', \$err);
like($out, qr/^\{"group":0,"changes":3,"shards":2,"max_lag_ms":\d+\}$/, 'sweep --once stamps and prints its totals');
is(head(0), 2, 'shard 0 stamped 1..2');

# the loop, no hints: stamped within the poll interval
my ($lout, $lerr) = ('', '');
my $loop = IPC::Run::start([ $cfeed, 'sweep', '--poll-ms', '200', '-v', @conn ],
	'>', \$lout, '2>', \$lerr, IPC::Run::timeout(120));
$node->safe_psql('postgres', 'SELECT cfeed.publish(1, 1)');
ok(defined wait_head(1, 2, 30), 'the loop stamps a commit without a hint');

# a sweep NOTIFYs the longpoll shard's new head, on cfeed.channel's channel
my $listen = $node->safe_psql('postgres',
	q{LISTEN cfeed_1_0; SELECT cfeed.publish(1, 0); SELECT count(*) FROM cfeed.sweep(); SELECT 1});
like($listen, qr/Asynchronous notification "cfeed_1_0" with payload "2000000000000003" received/,
	'the sweep notifies cfeed_1_0 with the new head');
$loop->signal('TERM');
$loop->finish;
is($loop->result(0), 0, 'sweep stops on SIGTERM with 0');
like($lout, qr/"changes":1/, '-v printed the loop\'s sweep');

# with commit hints and a poll interval of a minute: woken by the commit
$node->safe_psql('postgres', 'ALTER TABLE cfeed.change ENABLE TRIGGER change_sweep_hint');
$loop = IPC::Run::start([ $cfeed, 'sweep', '--poll-ms', '60000', @conn ],
	'>', \$lout, '2>', \$lerr, IPC::Run::timeout(120));
# the loop's first sweep and LISTEN: wait until it waits
$node->poll_query_until('postgres',
	q{SELECT count(*) > 0 FROM pg_stat_activity WHERE application_name = 'cfeed sweep' AND state = 'idle'})
  or die 'cfeed sweep did not start';
$node->safe_psql('postgres', 'SELECT cfeed.publish(1, 1)');
my $took = wait_head(1, 3, 30);
ok(defined $took && $took < 20, 'a commit hint wakes the loop long before its poll interval')
  or diag("stderr: $lerr");
note(sprintf('commit hint to stamp seen: %.3f s', $took // -1));
$loop->signal('TERM');
$loop->finish;

# the clients, unchanged: every stamped change, shard by shard in order
my $stamped = $node->safe_psql('postgres', q{
	SELECT string_agg(format('%s:%s', s.shard, r.change_sequence_number), ',' ORDER BY s.shard, r.change_sequence_number)
	FROM cfeed.shard s, cfeed.read(s.feed_id, s.shard, NULL, 1000) r WHERE s.feed_id = 1});
my ($tout, $terr) = ('', '');
IPC::Run::run([ $cfeed, 'tail', '--feed', 'f', '--idle-exit-ms', '500', '--wait-ms', '100', @conn ],
	'>', \$tout, '2>', \$terr, IPC::Run::timeout(60));
my @lines = map { decode_json($_) } grep { /\S/ } split /\n/, $tout;
is(join(',', map { "$_->{shard}:$_->{change_sequence_number}" } sort { $a->{shard} <=> $b->{shard} } @lines),
	$stamped, 'cfeed tail prints every stamped change of the SQL edition, each shard in order')
  or diag($terr);
my $dir = PostgreSQL::Test::Utils::tempdir();
my $reader = 'reader-0123456789abcdef';
write_tokens("$dir/tokens", "$reader f reader");
my $gw = start_gateway(dsn => $node->connstr('postgres'), tokens => "$dir/tokens");
my $r = http_get("$gw->{url}/feeds/f", $reader);
is($r->{status}, 200, 'cfeed serve discovers the SQL edition\'s feed');
my $disc = decode_json($r->{content});
is(join(',', map { $_->{id} } @{ $disc->{partitions} }), '0,1', 'its partitions are the shards');
my @page = ndjson(http_get("$gw->{url}/feeds/f/events?token=$disc->{token}&partition=1&cursor=_first", $reader)->{content});
is(join(',', map { $_->{data}{number} - 2000000000000000 } grep { $_->{data} } @page), join(',', 1 .. head(1)),
	'a page of shard 1 gives its changes in order')
  or diag(explain(\@page));
stop_gateway($gw);

$node->stop;
done_testing();
