# test/t/051_client_splits.pl
#
# `cfeed tail` across splits (cfeed.reshard; docs/client.md "Splits"):
# writers on 8 keys, routed by cfeed.shard_for, before, between and after
# two splits (2 shards, then 4, then 8).  A tail of all shards started
# before the first split (which it must notice while it waits), a tail of
# shard 0 (which goes on with its descendants) and a consumer-group member
# (whose leases move to the children once it has read the parents) each
# print every change exactly once, and each key's changes in commit order,
# also when the last change of a parent was deleted (its head is then a
# number nobody can read).

use strict;
use warnings;

use IPC::Run qw(start finish pump run timeout);
use JSON::PP;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use lib 'test/t';
use CfeedCheck;
use ServeHelper qw(cfeed_binary);

my $cfeed = cfeed_binary();
plan skip_all => "cfeed command not built ($cfeed)" unless -x $cfeed;

my $node = cfeed_node('splits');
$node->safe_psql('postgres', q{
	create extension cfeed;
	select cfeed.create_feed('split', 2, 1);
	create table written (change_id bigint primary key, k int not null, seq int not null);
});
my $dsn = $node->connstr('postgres');
my $timeout = $PostgreSQL::Test::Utils::timeout_default;
my $keys = 8;
my $rounds = 0;

# One round of writes: one change per key, each in its own transaction,
# routed by its key; returns once every change is stamped.
sub write_round
{
	$rounds++;
	$node->safe_psql('postgres', join '',
		map { "insert into written select cfeed.publish(1, cfeed.shard_for(1, '$_')), $_, $rounds;\n" }
		  0 .. $keys - 1);
	$node->poll_query_until('postgres',
		'select count(*) = 0 from cfeed.change where change_sequence_number is null')
	  or die 'changes not stamped';
}

# Wait until the tail printed n lines.
sub wait_lines
{
	my ($h, $out, $n) = @_;
	my $deadline = time + $timeout;
	pump $h while (() = $$out =~ /\n/g) < $n && time < $deadline;
}

# The printed lines' change_ids (in print order), with every change once,
# and each key's changes in commit order: the check of one reader.
sub check_reader
{
	my ($what, $out, $expected_ids) = @_;
	my @rows = map { decode_json($_) } grep { /\S/ } split /\n/, $out;
	my @ids = map { $_->{change_id} } @rows;
	is(scalar @ids, scalar @$expected_ids, "$what: as many changes as written");
	is_deeply([ sort @ids ], [ sort @$expected_ids ], "$what: every change once");
	my %key_of = map { my ($id, $k, $seq) = split /\|/; ($id => [ $k, $seq ]) } split /\n/,
	  $node->safe_psql('postgres', 'select change_id, k, seq from written');
	my (%last, @bad);
	for my $id (@ids)
	{
		my ($k, $seq) = @{ $key_of{$id} // [ -1, -1 ] };
		push @bad, "key $k: $seq after " . ($last{$k} // 'nothing')
		  if $seq <= ($last{$k} // 0);
		$last{$k} = $seq;
	}
	is_deeply(\@bad, [], "$what: each key's changes in commit order");
	return @rows;
}

# --- a tail of all shards, started before the first split ------------------
my ($out, $err) = ('', '');
my $h = start [ $cfeed, 'tail', '--dbname', $dsn, '--feed', 'split', '--from', 'beginning',
	'--wait-ms', '200', '--max', 9 * $keys, '--idle-exit-ms', '15000' ],
  '>', \$out, '2>', \$err, timeout($timeout);
write_round() for 1 .. 3;
wait_lines($h, \$out, 3 * $keys);

# the split while the tail waits on the parents
is($node->safe_psql('postgres', 'select count(*) from cfeed.reshard(1, 4)'), 4, 'split 2 -> 4');
write_round() for 1 .. 3;
# the second split without waiting for the tail
is($node->safe_psql('postgres', 'select count(*) from cfeed.reshard(1, 8)'), 8, 'split 4 -> 8');
write_round() for 1 .. 3;
is($node->safe_psql('postgres',
		'select count(*) from cfeed.change where shard >= 6'), 3 * $keys,
	'the last rounds went to the 8 newest shards');
finish $h;
is($h->result(0), 0, 'tail of all shards: exit 0');
my @all = split /\n/, $node->safe_psql('postgres', 'select change_id from written order by change_id');
check_reader('tail of all shards', $out, \@all);
like($err, qr/shard 0 of feed 1 ended at \d+/, 'tail of all shards: says a shard ended');
like($err, qr/following shard 6 of feed 1 \(after shard 2\)/, 'tail of all shards: says it follows a child');

# --- a tail of shard 0 follows its descendants -------------------------------
my @family = split /\n/, $node->safe_psql('postgres', q{
	with recursive fam as (select 0 as shard
						   union all
						   select s.shard from cfeed.shard s join fam on s.parent = fam.shard
						   where s.feed_id = 1)
	select c.change_id from cfeed.change c join fam using (shard)
	where c.feed_id = 1 order by c.change_id});
ok(@family > 3 * $keys / 4 && @family < @all, 'shard 0 and its descendants have some of the changes, not all');
($out, $err) = ('', '');
run [ $cfeed, 'tail', '--dbname', $dsn, '--feed', 'split', '--shard', '0', '--wait-ms', '200',
	'--max', scalar @family, '--idle-exit-ms', '10000' ],
  '>', \$out, '2>', \$err, timeout($timeout);
is($? >> 8, 0, 'tail of shard 0: exit 0');
my @rows = check_reader('tail of shard 0', $out, \@family);
ok(!(grep { $_->{shard} % 2 } @rows), 'tail of shard 0: none of shard 1\'s family');

# the last change of shard 0 deleted: its head is a number without a change,
# and the tail still goes on with the children
my $deleted = $node->safe_psql('postgres', q{
	delete from cfeed.change where feed_id = 1 and shard = 0
	  and change_sequence_number = cfeed.head(1, 0) returning change_id});
($out, $err) = ('', '');
run [ $cfeed, 'tail', '--dbname', $dsn, '--feed', 'split', '--shard', '0', '--wait-ms', '200',
	'--max', @family - 1, '--idle-exit-ms', '10000' ],
  '>', \$out, '2>', \$err, timeout($timeout);
is($? >> 8, 0, 'tail of shard 0 without its last change: exit 0');
$node->safe_psql('postgres', "delete from written where change_id = $deleted");
check_reader('tail of shard 0 without its last change', $out, [ grep { $_ ne $deleted } @family ]);
@all = grep { $_ ne $deleted } @all;

# --- a group member: its leases move on to the children ----------------------
($out, $err) = ('', '');
run [ $cfeed, 'tail', '--dbname', $dsn, '--feed', 'split', '--group', 'g', '--owner', 'm',
	'--ttl-ms', '600', '--wait-ms', '200', '--max', scalar @all, '--idle-exit-ms', '10000' ],
  '>', \$out, '2>', \$err, timeout($timeout);
is($? >> 8, 0, 'group member: exit 0');
check_reader('group member', $out, \@all);
like($err, qr/holding shard 13 of feed 1/, 'group member: held a shard of the second split');
is($node->safe_psql('postgres', q{
	select count(*) from cfeed.consumer_lag l join cfeed.shard s using (feed_id, shard)
	where l.group_name = 'g' and not s.closed and l.behind <> 0}),
	0, 'group member: nothing left behind on the open shards');

done_testing();
