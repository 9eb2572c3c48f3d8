# test/t/104_serve_sse_rounds.pl
#
# The database work of all-shards SSE streams grows with the feed's
# changes, not with the number of streams (SPEC §6b; issue 30, item 5).
# Such a stream is sent in rounds, each bounded by a safe stamp time that a
# query on cfeed.stats finds (src/client/serve_sse.c).  The feed's streams
# share that query's result: a stream that asks for a round takes the
# result of a query begun after it asked, or waits for one under way.
#
# The same changes are published, one per transaction and paced, once to
# one stream and once to eight; pg_stat_statements counts the round
# queries.  Eight streams must cost well under eight times one stream's
# queries (each stream running its own query cost about eight times), and
# every stream must get every change exactly once, in order per shard.
#
# Then a stall: a feed with a shard in a second sweep group, whose sweeps
# stop with a change pending, while the first group's shard gets a new
# stamp.  Every stream then retries its round every 50 ms; the retries are
# shared too (about 20 queries a second for the feed, not per stream).

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep time);
use lib 'test/t';
use ServeHelper;

plan skip_all => 'cfeed command not built' unless -x cfeed_binary();

my $node = start_counted_node('serve_sse_rounds', rounds => 4);

my $dir = PostgreSQL::Test::Utils::tempdir();
my $token = 'rounds-0123456789abcdef';
write_tokens("$dir/tokens", "$token rounds,stall t");
my $gw = start_gateway(dsn => $node->connstr('postgres'), tokens => "$dir/tokens");
my $url = "$gw->{url}/feeds/rounds";

# The round queries the gateway has run so far.
sub round_queries
{
	return $node->safe_psql('postgres', q{
		select coalesce(sum(calls), 0) from pg_stat_statements
		where query like '%from cfeed.stats t %'
		  and query not like '%pg_stat_statements%'});
}

# n all-shards streams from the heads; publish 40 changes paced over
# about 2 s; wait until every stream has them.  Returns the round queries
# run meanwhile, and checks what each stream got.
sub run_streams
{
	my ($n) = @_;
	my @texts = ('') x $n;
	my @streams = map {
		start_stream("$url?cursor=_last", $token, \$texts[$_], Accept => 'text/event-stream')
	} 0 .. $n - 1;
	my $until = time + 30;
	while (time < $until && grep { $_ !~ /^id:.*\n\n/m } @texts)
	{
		$_->pump_nb for @streams;
		usleep(10_000);
	}
	my $before = round_queries();
	my $first = $node->safe_psql('postgres',
		'select coalesce(max(change_id), 0) from cfeed.change');
	for my $i (1 .. 40)
	{
		$node->safe_psql('postgres', "select cfeed.publish(1, $i % 4)");
		$_->pump_nb for @streams;
		usleep(50_000);
	}
	my @expected = split /,/, $node->safe_psql('postgres',
		"select string_agg(shard || ':' || change_sequence_number, ',' order by change_id)"
		  . " from cfeed.change where feed_id = 1 and change_id > $first");
	$until = time + 60;
	while (time < $until && grep { scalar(sse_changes($_)) < @expected } @texts)
	{
		$_->pump_nb for @streams;
		usleep(20_000);
	}
	my $queries = round_queries() - $before;
	$_->kill_kill for @streams;
	my %want_by_shard;
	for my $c (@expected)
	{
		my ($s) = split /:/, $c;
		push @{ $want_by_shard{$s} }, $c;
	}
	for my $k (0 .. $n - 1)
	{
		my %got_by_shard;
		for my $c (sse_changes($texts[$k]))
		{
			my ($s) = split /:/, $c;
			push @{ $got_by_shard{$s} }, $c;
		}
		is_deeply(\%got_by_shard, \%want_by_shard,
			"$n streams: stream $k got every change once, in order per shard");
	}
	return $queries;
}

my $one = run_streams(1);
my $eight = run_streams(8);
note "round queries: $one for one stream, $eight for eight";
cmp_ok($one, '>', 0, 'one stream runs round queries');
cmp_ok($eight, '<', 3 * $one + 8,
	'eight streams share the round queries (each its own would cost about 8x)');

# --- the stall: sweeps by hand, group 1's stopped with a change pending
$node->safe_psql('postgres', q{
	select cfeed.create_feed('stall', 2, 2);
	update cfeed.shard set sweep_group = 1 where feed_id = 2 and shard = 1;
	alter system set cfeed.enable_sweeper = off;
	select pg_reload_conf();
});
$node->poll_query_until('postgres',
	"select count(*) = 0 from pg_stat_activity where backend_type like 'cfeed sweeper%'")
  or die 'the sweepers did not stop';
my @texts = ('') x 8;
my @streams = map {
	start_stream("$gw->{url}/feeds/stall?cursor=_last", $token, \$texts[$_],
		Accept => 'text/event-stream')
} 0 .. 7;
my $until = time + 30;
while (time < $until && grep { $_ !~ /^id:.*\n\n/m } @texts)
{
	$_->pump_nb for @streams;
	usleep(10_000);
}
$node->safe_psql('postgres',
	'select cfeed.publish(2, 1); select cfeed.sweep(0); select cfeed.publish(2, 0); select cfeed.sweep(0)');
my $before = round_queries();
my $t0 = time;
while (time < $t0 + 2)
{
	$_->pump_nb for @streams;
	usleep(20_000);
}
my $stalled = round_queries() - $before;
my $seconds = time - $t0;
note sprintf('round queries while stalled: %d in %.1f s for eight streams', $stalled, $seconds);
cmp_ok($stalled, '<', 60 * $seconds,
	'eight stalled streams share their retries (each its own: about 160 a second)');
$node->safe_psql('postgres', 'select cfeed.sweep(1)');
$until = time + 30;
while (time < $until && grep { scalar(sse_changes($_)) < 2 } @texts)
{
	$_->pump_nb for @streams;
	usleep(20_000);
}
$_->kill_kill for @streams;
for my $k (0 .. 7)
{
	is(join(' ', sort map { (split /:/)[0] } sse_changes($texts[$k])), '0 1',
		"stalled stream $k got both changes once the group was swept");
}

stop_gateway($gw);
$node->stop;
done_testing();
