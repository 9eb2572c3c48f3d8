# test/t/102_serve_notify.pl
#
# `cfeed serve` takes a NOTIFY as a hint to read, never as data (issue 28,
# item 8; SPEC §6b, §8), and reads on at once after notifications libpq
# took in while the hub ran its own queries (issue 30, item 3):
#
#  - a role with LOGIN only floods the feed's channels with NOTIFYs whose
#    payloads are a huge number, a negative one and garbage, while writers
#    commit on both shards and an SSE client streams the feed: the client
#    gets every change once, in order, /metrics shows the real heads, and
#    the hub's reads stay bounded (counted by pg_stat_statements; 1.7 read
#    in a tight loop for as long as the fake head stood above its tail);
#  - back-to-back commits on the two shards, then nothing: both events
#    reach a streaming client without another commit (1.7 left the second
#    shard's notification in libpq's queue until something else woke the
#    hub, up to the 5 s safety read).

use strict;
use warnings;

use IPC::Run qw(start);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep time);
use lib 'test/t';
use ServeHelper;

plan skip_all => 'cfeed command not built' unless -x cfeed_binary();

my $node = start_counted_node('serve_notify', orders => 2);
$node->safe_psql('postgres', 'create role nobody login');

my $dir = PostgreSQL::Test::Utils::tempdir();
my $token = 'flood-0123456789abcdef';
my $all_token = 'all-0123456789abcdefgh';
write_tokens("$dir/tokens", "$token orders t", "$all_token * ops");
my $gw = start_gateway(dsn => $node->connstr('postgres'), tokens => "$dir/tokens");
my $url = "$gw->{url}/feeds/orders";

my $client;

# Wait until the SSE text holds n changes (or the deadline passes),
# collecting what the streaming client prints.
sub wait_changes
{
	my ($text, $n, $seconds) = @_;
	my $until = time + $seconds;
	while (time < $until)
	{
		$client->pump_nb;
		my @got = sse_changes($$text);
		return scalar @got if @got >= $n;
		usleep(20_000);
	}
	return scalar(my @got = sse_changes($$text));
}

# The hub's reads so far (its page query calls cfeed.read_rows).
sub hub_reads
{
	return $node->safe_psql('postgres', q{
		select coalesce(sum(calls), 0) from pg_stat_statements
		where query like '%cfeed.read_rows%' and query not like '%pg_stat_statements%'});
}

my $sse = '';
$client = start_stream("$url?cursor=_first", $token, \$sse, Accept => 'text/event-stream');
$node->safe_psql('postgres', 'select cfeed.publish(1, 0), cfeed.publish(1, 1)');
is(wait_changes(\$sse, 2, 10), 2, 'the SSE client streams the feed');

# --- a quiet window and a flood window of the same length
my $window = 2;
my $reads0 = hub_reads();
sleep $window;
my $quiet = hub_reads() - $reads0;

my $script = "$dir/flood.sql";
open my $fh, '>', $script or die;
print $fh "select pg_notify('cfeed_1_0', '9000000000000000000');\n";
print $fh "select pg_notify('cfeed_1_1', '-5');\n";
print $fh "select pg_notify('cfeed_1_0', 'garbage ' || random());\n";
close $fh;
$reads0 = hub_reads();
my $flood = start([ 'pgbench', '-n', '-c', '2', '-T', $window, '-f', $script,
		'-h', $node->host, '-p', $node->port, '-U', 'nobody', 'postgres' ],
	'>', \my $flood_out, '2>', \my $flood_err);
for my $i (1 .. 10)
{
	$node->safe_psql('postgres', "select cfeed.publish(1, $i % 2)");
	usleep(100_000);
}
$flood->finish;
my $flooded = hub_reads() - $reads0;
my ($sent) = $flood_out =~ /number of transactions actually processed: (\d+)/;
cmp_ok($sent // 0, '>', 1000, "nobody sent a flood of notifications (" . ($sent // 0) . " transactions of 3)");
# the bound: one read per shard per 20 ms of hints, besides the changes' own
cmp_ok($flooded, '<=', $quiet + 2 * 50 * $window + 40,
	"the hub's reads stay bounded under the flood ($flooded in ${window}s against $quiet quiet)");

is(wait_changes(\$sse, 12, 10), 12, 'the client got every change committed during the flood');
my @got = sse_changes($sse);
my %seen;
my $dup = grep { $seen{$_}++ } @got;
is($dup, 0, 'none twice');
my $ordered = 1;
for my $s (0, 1)
{
	my @n = map { (split /:/)[1] } grep { /^$s:/ } @got;
	$ordered &&= "@n" eq join(' ', sort { $a <=> $b } @n);
	$ordered &&= $n[-1] == $node->safe_psql('postgres', "select cfeed.head(1, $s)");
}
ok($ordered, 'each shard in order, up to its head');

my $metrics = http_get("$gw->{url}/metrics", $all_token)->{content};
my ($mhead) = $metrics =~ /cfeed_serve_shard_head\{feed="orders",shard="0"\} (\d+)/;
is($mhead, $node->safe_psql('postgres', 'select cfeed.head(1, 0)'),
	'/metrics shows the real head, not a payload');

# --- back-to-back commits on two shards, then nothing
my $late = 0;
for my $pair (1 .. 15)
{
	my $before = scalar(my @b = sse_changes($sse));
	$node->safe_psql('postgres', 'select cfeed.publish(1, 0)');
	$node->safe_psql('postgres', 'select cfeed.publish(1, 1)');
	$late++ if wait_changes(\$sse, $before + 2, 2) < $before + 2;
}
is($late, 0, 'both events of every back-to-back pair arrive without a further commit');

$client->kill_kill;

# --- a shard with longpoll = false: no notification, ever.  The hub's
# safety pass (every 5 s) reads the heads of the followed shards and reads
# the shards past their tails (1.9; every shard before): its changes
# arrive all the same, within a pass or two.
my $quiet_id = $node->safe_psql('postgres', "select cfeed.create_feed('quiet', 1, longpoll => false)");
write_tokens("$dir/tokens", "$token orders,quiet t");
stop_gateway($gw);
$gw = start_gateway(dsn => $node->connstr('postgres'), tokens => "$dir/tokens");
my $unnotified = '';
$client = start_stream("$gw->{url}/feeds/quiet?cursor=_last", $token, \$unnotified, Accept => 'text/event-stream');
my $until = time + 60;
$client->pump_nb, usleep(10_000) while $unnotified !~ /^id:.*\n\n/m && time < $until;
$node->safe_psql('postgres', "select cfeed.publish($quiet_id, 0) from generate_series(1, 3)");
is(pump_events($client, \$unnotified, 3), 3, 'a shard with longpoll = false: its changes arrive (safety pass)');
$client->kill_kill;
stop_gateway($gw);
done_testing();
