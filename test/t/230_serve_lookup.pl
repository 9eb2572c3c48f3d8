# test/t/230_serve_lookup.pl
#
# `cfeed serve` looks a feed up by its own shards only: the lookup of a
# feed's partitions and heads probes cfeed.shard for that feed, whatever
# the database holds besides (SPEC §6b: "a token learns nothing of feeds it
# may not read", "database work grows with changes, not clients"; §9: 1,000
# feeds within 2× of one).  1.8 joined cfeed.feed with the whole view, so
# every request computed the head of every shard the gateway's role may
# read (a `*` token timed a feed it may not read apart from a missing one,
# and a discovery took 12 ms among 1,000 feeds × 4 shards).  Counted in
# buffers (pg_stat_statements), not timed: among 1,000 feeds of 4 shards,
# the lookup of a readable feed, of one the gateway may not read and of a
# missing one each reads a few dozen buffers, not thousands.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use JSON::PP;
use lib 'test/t';
use ServeHelper;

plan skip_all => 'cfeed command not built' unless -x cfeed_binary();

my $node = start_counted_node('serve_lookup', orders => 2);
$node->safe_psql('postgres', q{
	select count(cfeed.create_feed('other' || g, 4)) from generate_series(1, 1000) g;
	select cfeed.publish(f, s) from generate_series(1, 1001) f, generate_series(0, 1) s
	where f = 1 or f % 100 = 0;
	create role gateway login;
	grant select on cfeed.feed, cfeed.shard, cfeed.change, cfeed.row_image, cfeed.stats to gateway;
	select cfeed.grant_read(f, 'gateway') from generate_series(1, 1001) f where f <> 500;
});
$node->poll_query_until('postgres', 'select count(*) = 0 from cfeed.change where change_sequence_number is null')
  or die 'changes not stamped';

my $dir = PostgreSQL::Test::Utils::tempdir();
my $token = 'lookup-0123456789abcdef';
write_tokens("$dir/tokens", "$token * all");
my $gw = start_gateway(dsn => $node->connstr('postgres') . ' user=gateway', tokens => "$dir/tokens");

# The most buffers one lookup read so far, and the lookups counted.
sub lookup_buffers
{
	return split /\|/, $node->safe_psql('postgres', q{
		select coalesce(max((shared_blks_hit + shared_blks_read) / calls), 0), coalesce(sum(calls), 0)
		from pg_stat_statements
		where query like '%from cfeed.feed f left join%' and query not like '%pg_stat_statements%'});
}

$node->safe_psql('postgres', 'select pg_stat_statements_reset()');
my $r = http_get("$gw->{url}/feeds/orders", $token);
is($r->{status}, 200, 'discovery of a readable feed among 1,000 others');
is(scalar @{ decode_json($r->{content})->{partitions} }, 2, 'with its two partitions');
my ($readable, $calls) = lookup_buffers();
cmp_ok($calls, '>=', 1, 'the lookup was counted');
cmp_ok($readable, '<', 200, "its lookup read $readable buffers, not every shard's head (1.8: thousands)");

$node->safe_psql('postgres', 'select pg_stat_statements_reset()');
is(http_get("$gw->{url}/feeds/other499", $token)->{status}, 403, 'a feed the gateway may not read: 403');
my ($hidden) = lookup_buffers();
is(http_get("$gw->{url}/feeds/nosuchfeed", $token)->{status}, 403, 'a missing feed: 403 alike');
my ($missing) = lookup_buffers();
cmp_ok($hidden, '<', 200, "the lookup of a feed it may not read read $hidden buffers");
cmp_ok($missing, '<', 200, "and that of a missing one $missing");

stop_gateway($gw);
$node->stop;
done_testing();
