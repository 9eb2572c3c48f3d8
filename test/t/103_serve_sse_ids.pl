# test/t/103_serve_sse_ids.pl
#
# Server-Sent Events of a many-shard feed resume from their Last-Event-ID
# (issue 30, item 5): an all-shards SSE stream of a 1,000-shard feed reads
# changes on all 1,000 shards; its last id must stay short (at most 200 bytes)
# and, sent back as Last-Event-ID after more changes, resume every shard
# where it was: every change exactly once.
#
# Up to 1.8 the gateway listed "shard:number@epoch" for every shard with
# a position: the id was ~37 KB on this feed, and sent back it got 431
# (libmicrohttpd's limit on a request's headers).  Ids are now compact
# (docs/serve.md, "Server-Sent Events").

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);
use lib 'test/t';
use ServeHelper;

plan skip_all => 'cfeed command not built' unless -x cfeed_binary();

my $node = PostgreSQL::Test::Cluster->new('serve_sse_ids');
$node->init;
# Without autovacuum the planner keeps taking the new feed's 1,000 shards
# for none, as right after create_feed; statements of a second or more
# are logged, for the check of the gateway's rounds at the end.
$node->append_conf('postgresql.conf',
	"shared_preload_libraries = 'cfeed'\nautovacuum = off\nlog_min_duration_statement = 1000\n");
$node->start;
$node->safe_psql('postgres', q{
	create extension cfeed;
	select cfeed.create_feed('wide', 1000, 1);
});

my $dir = PostgreSQL::Test::Utils::tempdir();
my $token = 'sseids-0123456789abcdef';
write_tokens("$dir/tokens", "$token wide t");
my $gw = start_gateway(dsn => $node->connstr('postgres'), tokens => "$dir/tokens");
my $url = "$gw->{url}/feeds/wide";

# Wait until every change of the feed is stamped.
sub wait_stamped
{
	$node->poll_query_until('postgres',
		'select count(*) = 0 from cfeed.change where change_sequence_number is null')
	  or die 'changes not stamped';
}

# The changes of the feed, as "shard:number" (comma-separated).
sub all_changes
{
	return $node->safe_psql('postgres',
		"select string_agg(shard || ':' || change_sequence_number, ',' order by shard, change_sequence_number)"
		  . ' from cfeed.change where feed_id = 1');
}

# An all-shards stream from the heads (its id lists every shard at once);
# once it has sent its starting id, changes on every shard (two on 0-199,
# one on the others).
my $text = '';
my $stream = start_stream("$url?cursor=_last", $token, \$text, Accept => 'text/event-stream');
my $started = time + 60;
$stream->pump_nb, usleep(10_000) while $text !~ /^id:.*\n\n/m && time < $started;
$node->safe_psql('postgres',
	'select cfeed.publish(1, g % 200) from generate_series(1, 200) g; '
	  . 'select cfeed.publish(1, g % 1000) from generate_series(1, 1000) g');
wait_stamped();
my $total = $node->safe_psql('postgres', 'select count(*) from cfeed.change where feed_id = 1');
pump_events($stream, \$text, $total);
$stream->kill_kill;
my ($first, $last_id) = sse_events($text);
is(scalar @$first, $total, 'the stream got every change of the 1,000 shards');
ok(defined $last_id, 'and an id');
$last_id //= '';
note('last id: ' . length($last_id) . ' bytes');

# More changes, on the shards read and on others; reconnect with the id.
$node->safe_psql('postgres', 'select cfeed.publish(1, g * 7 % 1000) from generate_series(1, 300) g');
wait_stamped();
my $resumed = sse_collect($url, $token, 300, undef, 'Last-Event-ID' => $last_id);
my ($second) = sse_events($resumed);
my @got = map { "$_->{data}{shard}:$_->{data}{number}" } @$first, @$second;
my %count;
$count{$_}++ for @got;

cmp_ok(length($last_id), '<=', 200, 'the id of a 1,000-shard stream is at most 200 bytes');
like($resumed, qr/^retry: \d+\nid: /, 'resumed with it as Last-Event-ID: a stream (not 431)');
my @missing = grep { !$count{$_} } split /,/, all_changes();
is(scalar @missing, 0, 'resumed: every change of every shard, none skipped')
  or diag(scalar(@missing) . ' missing, the first: ' . join(',', @missing[0 .. ($#missing < 9 ? $#missing : 9)]));
is(scalar(grep { $_ > 1 } values %count), 0, 'resumed: none repeated');

# An id of 1.8, listing shard:number@epoch, is still taken: the listed
# shards resume after their numbers, the others from the beginning; the
# stream's ids are compact again once its first round ends.
my $listed = $node->safe_psql('postgres',
	"select string_agg(shard || ':' || last_change_sequence_number || '\@' || cfeed.epoch(), ',' order by shard)"
	  . ' from cfeed.shard where feed_id = 1 and shard < 10');
my $rest = $node->safe_psql('postgres', 'select count(*) from cfeed.change where feed_id = 1 and shard >= 10');
my ($third, $third_id) = sse_events(sse_collect($url, $token, $rest, qr/^\d+(\.\d+\.\d+:\d+)?\@\d+$/,
	'Last-Event-ID' => $listed));
is(scalar(grep { $_->{data}{shard} >= 10 } @$third) . '/' . scalar(@$third), "$rest/$rest",
	'an id listing shards (1.8): every change of the shards it does not list, none of those it lists');
like($third_id // '', qr/^\d+(\.\d+\.\d+:\d+)?\@\d+$/, 'and compact ids after its first round');

# The hub's work for a 1,000-shard stream, on a new gateway: following its
# shards takes two statements for each batch of shards the stream has
# registered by then (a few), and the safety pass (every 5 s) reads
# their heads in one query and only the shards past their tails.  Up to
# 1.9 the hub ran a LISTEN and a head query per shard to follow them, and
# read every shard at every safety pass (2,000 statements a pass), while
# every other followed shard waited.
stop_gateway($gw);
$gw = start_gateway(dsn => $node->connstr('postgres'), tokens => "$dir/tokens");
$url = "$gw->{url}/feeds/wide";
my $from = -s $node->logfile;
my $idle = '';
$stream = start_stream("$url?cursor=_last", $token, \$idle, Accept => 'text/event-stream');
$started = time + 60;
$stream->pump_nb, usleep(10_000) while $idle !~ /^id:.*\n\n/m && time < $started;
my $quiet = time + 6;	# a safety pass and more
$stream->pump_nb, usleep(100_000) while time < $quiet;
$stream->kill_kill;
my ($hub) = slurp_file($gw->{log}) =~ /hub: connected to the database \(backend (\d+)\)/;
my @hub = grep { /\[\Q$hub\E\].*(?:statement|execute [^:]*): / } split /\n/, slurp_file($node->logfile, $from);
my $follow = grep { /: LISTEN |last_change_sequence_number/ } @hub;
my $reads = grep { /select r\.change_sequence_number/ } @hub;
cmp_ok($follow, '<', 100, "following 1,000 shards and a safety pass: $follow LISTEN and head statements (2,000 before)");
is($reads, 0, 'an idle stream over a safety pass: no shard read');

# Each round's query found the safe end in one probe per shard: before
# 1.9, joined to cfeed.shard as a view, it computed all 1,000 heads for
# each shard while the feed was not analyzed yet, 3-4 s a round, and these
# streams took 7-30 s to deliver what they now deliver in about one.
# (Every statement is logged when it starts, its duration when it ends.)
my (%last, @slow);	# the last statement of each backend; the slow rounds
for (split /\n/, slurp_file($node->logfile))
{
	next unless /^\S+ \S+ \S+ \[(\d+)\]/;
	my $pid = $1;
	$last{$pid} = $1 if /(?:statement|execute [^:]*): (.*)/;
	push @slow, "$_ ($last{$pid})"
	  if /duration: [\d.]+ ms$/ && ($last{$pid} // '') =~ /from cfeed\.stats t /;
}
is(scalar @slow, 0, 'no round query of the gateway ran for a second or more')
  or diag(substr($slow[0], 0, 300));

stop_gateway($gw);
done_testing();
