# test/t/106_serve_old_schema.pl
#
# `cfeed serve` reads a database whose cfeed schema is not yet updated
# (docs/serve.md: "Against an older cfeed every shard is an open partition,
# as before"), here 1.8, whose cfeed.shard has neither parent nor ended:
# an all-shards SSE stream gets every change once, a FeedAPI client pages
# through a partition, and a live stream gets what comes after.  The round
# query of all-shards streams once named those columns in a subquery
# whatever the schema: on 1.8 every round failed (column s.parent does not
# exist) and every such stream ended at once.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use JSON::PP;
use Time::HiRes qw(usleep);
use lib 'test/t';
use ServeHelper;

plan skip_all => 'cfeed command not built' unless -x cfeed_binary();

my $node = PostgreSQL::Test::Cluster->new('serve_old_schema');
$node->init;
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'cfeed'\n");
$node->start;
$node->safe_psql('postgres', q{
	create extension cfeed version '1.8';
	select cfeed.create_feed('old', 3, 1);
	select cfeed.publish(1, g % 3) from generate_series(1, 30) g;
});
is($node->safe_psql('postgres', "select extversion from pg_extension where extname = 'cfeed'"),
	'1.8', 'the database is at 1.8');
$node->poll_query_until('postgres',
	'select count(*) = 0 from cfeed.change where change_sequence_number is null')
  or die 'changes not stamped';

my $dir = PostgreSQL::Test::Utils::tempdir();
my $token = 'oldschema-0123456789abcdef';
write_tokens("$dir/tokens", "$token old t");
my $gw = start_gateway(dsn => $node->connstr('postgres'), tokens => "$dir/tokens");
my $url = "$gw->{url}/feeds/old";

# The changes of the feed, as "shard:number" in shard and number order.
sub all_changes
{
	return $node->safe_psql('postgres',
		"select string_agg(shard || ':' || change_sequence_number, ',' order by shard, change_sequence_number)"
		  . ' from cfeed.change where feed_id = 1');
}

# The events of an SSE text as "shard:number", sorted the same way.
sub sorted
{
	my ($events) = @_;
	return join(',',
		sort { my @x = split /:/, $a; my @y = split /:/, $b; $x[0] <=> $y[0] || $x[1] <=> $y[1] }
		map { "$_->{data}{shard}:$_->{data}{number}" } @$events);
}

my ($events, $id) = sse_events(sse_collect($url, $token, 30));
is(sorted($events), all_changes(), 'all-shards SSE: every change once');
like($id // '', qr/\@\d+$/, 'and an id');

my $discovery = decode_json(http_get($url, $token)->{content});
is(scalar @{ $discovery->{partitions} }, 3, 'discovery: 3 partitions');
my @page = ndjson(http_get("$url?token=$discovery->{token}&partition=1&cursor=_first", $token)->{content});
is(scalar(grep { $_->{data} } @page), 10, 'FeedAPI: partition 1 from _first, its 10 changes');

# A live all-shards stream from the end gets the changes that come after.
my $text = '';
my $stream = start_stream("$url?cursor=_last", $token, \$text, Accept => 'text/event-stream');
my $until = time + 60;
$stream->pump_nb, usleep(10_000) while $stream->pumpable && $text !~ /^id:.*\n\n/m && time < $until;
$node->safe_psql('postgres', 'select cfeed.publish(1, g % 3) from generate_series(1, 6) g');
pump_events($stream, \$text, 6);
$stream->kill_kill;
($events) = sse_events($text);
is(scalar @$events, 6, 'a live all-shards stream gets the 6 new changes');

stop_gateway($gw);
done_testing();
