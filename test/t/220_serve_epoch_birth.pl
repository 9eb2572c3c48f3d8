# test/t/220_serve_epoch_birth.pl
#
# The positions `cfeed serve` hands out carry the feed epoch of the
# stamps they follow, also at the database's birth of epochs (its first
# stamp), so that resuming from them sends nothing again.
#
# The gateway read the feed epoch in a statement of its own before the
# query that read the heads (the feed lookup behind `_last`, the rounds of
# all-shards SSE streams, the hub's tails).  When the database's first
# sweep, which records the first epoch with its stamps, committed between
# the two, heads past those stamps were labelled epoch 0, which
# cfeed.resume_cursor places before every epoch: resuming them rewound to
# the shards' start, and the changes were sent again (seen in 210_reshard
# on a slow server: an SSE stream begun before the first stamp sent 3
# changes twice).  Now the epoch is a column of the heads' query: one
# snapshot (SERVE_EPOCH_COLUMN).
#
# Part 1 makes that interleaving happen every time, for a FeedAPI fetch at
# `_last`: the sweeper is off while changes are written; a session holds
# cfeed.feed in ACCESS EXCLUSIVE mode, which the lookup's heads query
# waits for and the sweeper does not need; the sweeper is turned on and
# stamps; then the lock goes.  Without the fix the fetch at `_last`
# returned the 3 changes before it.  Part 2, in a second database: an
# all-shards SSE stream begun before the first stamp gets each change once
# across a resume (the round's heads query takes its now() when its
# transaction begins, before such a lock, so no lock forces the race
# there: this part checks the outcome, not the interleaving).

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use JSON::PP;
use Time::HiRes qw(usleep time);
use lib 'test/t';
use ServeHelper;

plan skip_all => 'cfeed command not built' unless -x cfeed_binary();

my $node = start_counted_node('serve_epoch_birth', births => 2);
$node->safe_psql('postgres', 'create database second');
$node->safe_psql('second', "create extension cfeed; select cfeed.create_feed('births', 2, 1)");
for my $db ('postgres', 'second')
{
	is($node->safe_psql($db, 'select cfeed.epoch()'), '0',
		"$db: no feed epoch before the database's first stamp");
}

my $dir = PostgreSQL::Test::Utils::tempdir();
my $token = 'epoch-birth-0123456789abcdef';
write_tokens("$dir/tokens", "$token births t");
my $start = $node->safe_psql('postgres', 'select start_sequence_number from cfeed.shard where shard = 0');

sub set_sweeper
{
	my ($on) = @_;
	$node->safe_psql('postgres',
		"alter system set cfeed.enable_sweeper = $on; select pg_reload_conf()");
	return;
}

# Stop the sweepers and write 6 changes to db: pending, no epoch yet.
sub write_unswept
{
	my ($db) = @_;
	set_sweeper('off');
	$node->poll_query_until('postgres',
		q{select count(*) = 0 from pg_stat_activity where backend_type like 'cfeed sweeper%'})
	  or die 'the sweepers did not stop';
	$node->safe_psql($db, 'select cfeed.publish(1, g % 2) from generate_series(1, 6) g');
	return;
}

# Wait (pumping the streams) until cond() holds; false at the deadline.
sub wait_for
{
	my ($cond, @streams) = @_;
	my $until = time + 30;
	while (time < $until)
	{
		$_->pump_nb for grep { $_->pumpable } @streams;
		return 1 if $cond->();
		usleep(20_000);
	}
	return 0;
}

# --- Part 1: a FeedAPI fetch at _last while the first sweep commits
my $gw = start_gateway(dsn => $node->connstr('postgres'), tokens => "$dir/tokens");
my $feed_url = "$gw->{url}/feeds/births";
my $r = http_get($feed_url, $token);
is($r->{status}, 200, 'discovery') or diag($r->{content});
my $api_token = decode_json($r->{content})->{token};

write_unswept('postgres');
my $lock = $node->background_psql('postgres');
$lock->query_safe('begin; lock table cfeed.feed in access exclusive mode');
my $fetched = '';
my $fetch = start_stream("$feed_url?token=$api_token&partition=0&cursor=_last", $token, \$fetched);
ok( $node->poll_query_until('postgres',
		q{select count(*) > 0 from pg_locks l join pg_stat_activity a using (pid)
		  where l.relation = 'cfeed.feed'::regclass and not l.granted
		    and a.query like '%from cfeed.feed f left join lateral (select * from cfeed.shard s%'}),
	"the fetch's lookup waits for the heads");
set_sweeper('on');
ok($node->poll_query_until('postgres', 'select cfeed.head(1, 0) > start_sequence_number from cfeed.shard where shard = 0'),
	'the first sweep stamped meanwhile');
my $epoch = $node->safe_psql('postgres', 'select cfeed.epoch()');
cmp_ok($epoch, '>', 0, 'and began the first feed epoch');
$lock->query_safe('commit');
$lock->quit;
$fetch->finish;
my @lines = ndjson($fetched);
is_deeply(\@lines, [ { cursor => ($start + 3) . "\@$epoch" } ],
	'the fetch at _last: no event, the head as cursor, of the first epoch') or diag($fetched);
stop_gateway($gw);

# --- Part 2: an all-shards SSE stream begun before the first stamp
write_unswept('second');
my $db2 = $node->connstr('second');
$gw = start_gateway(dsn => $db2, tokens => "$dir/tokens");
my $url = "$gw->{url}/feeds/births?cursor=_first";
my $text = '';
my $stream = start_stream($url, $token, \$text, Accept => 'text/event-stream');
ok(wait_for(sub { $text =~ /^id: _first\@0$/m }, $stream), 'the stream began at _first@0')
  or diag($text);
set_sweeper('on');
$node->poll_query_until('second', 'select cfeed.head(1, 0) > start_sequence_number and cfeed.head(1, 1) > start_sequence_number from cfeed.shard where shard = 0')
  or die 'the second database was not swept';
my $epoch2 = $node->safe_psql('second', 'select cfeed.epoch()');
ok(wait_for(sub { scalar(sse_changes($text)) >= 6 }, $stream), 'the stream sent the first 6 changes');
$node->safe_psql('second', 'select cfeed.publish(1, g % 2) from generate_series(1, 2) g');
ok(wait_for(sub { scalar(sse_changes($text)) >= 8 || !$stream->pumpable }, $stream),
	'and the 2 after them');
my ($events, $last_id) = sse_events($text);
is(scalar(@$events), 8, 'the stream sent 8 changes') or diag($text);
is_deeply([ grep { $_->{id} !~ /\@\Q$epoch2\E$/ } @$events ], [],
	"every change's id carries the first epoch ($epoch2)") or diag($text);
$stream->kill_kill;

# A browser's resume from the last id sends nothing again.
my $again = '';
my $resumed = start_stream($url, $token, \$again, Accept => 'text/event-stream',
	'Last-Event-ID' => $last_id);
$node->safe_psql('second', 'select cfeed.publish(1, 0)');
ok(wait_for(sub { scalar(sse_changes($again)) >= 1 }, $resumed), 'the resumed stream sends the next change');
usleep(500_000);
$resumed->pump_nb;
my @expected = split /,/, $node->safe_psql('second',
	q{select string_agg(shard || ':' || change_sequence_number, ',' order by change_id)
	  from cfeed.change where change_id = (select max(change_id) from cfeed.change)});
is_deeply([ sse_changes($again) ], \@expected,
	'a resume from the last id sends that change only') or diag($again);
$resumed->kill_kill;
stop_gateway($gw);

# --- Part 3: a page that straddles a restart.  A full page below the head
# is cacheable and its cursor carried the epoch of the request's cursor,
# also when part of the page was stamped after a restart: that cursor,
# resumed, was rewound to the head the new epoch recorded, and the changes
# above it were sent again (a helper's black-box test: 51..60 twice).  Now
# such a page carries the epoch it was read in and is not cacheable; a
# page wholly below that head keeps the asked epoch and stays immutable.
sub fetch_page
{
	my ($gw, $cursor, $size) = @_;
	my $url = "$gw->{url}/feeds/births";
	my $api = decode_json(http_get($url, $token)->{content})->{token};
	my $r = http_get("$url?token=$api&partition=0&cursor=$cursor&pageSizeHint=$size", $token);
	my @lines = ndjson($r->{content});
	return ($r, [ map { $_->{cursor} } @lines ]);
}
$gw = start_gateway(dsn => $node->connstr('postgres'), tokens => "$dir/tokens");
$node->safe_psql('postgres', 'select cfeed.publish(1, 0) from generate_series(1, 4)');
$node->poll_query_until('postgres', 'select count(*) = 0 from cfeed.change where change_sequence_number is null')
  or die 'not swept';
my $old_epoch = $node->safe_psql('postgres', 'select cfeed.epoch()');
my $old_head = $node->safe_psql('postgres', 'select cfeed.head(1, 0)');
stop_gateway($gw);
$node->restart;
$node->safe_psql('postgres', 'select cfeed.publish(1, 0) from generate_series(1, 4)');
$node->poll_query_until('postgres', 'select count(*) = 0 from cfeed.change where change_sequence_number is null')
  or die 'not swept after the restart';
my $new_epoch = $node->safe_psql('postgres', 'select cfeed.epoch()');
cmp_ok($new_epoch, '>', $old_epoch, 'the restart began a feed epoch');
$gw = start_gateway(dsn => $node->connstr('postgres'), tokens => "$dir/tokens");

my ($page, $cursors) = fetch_page($gw, ($old_head - 2) . "\@$old_epoch", 4);
is($page->{status}, 200, 'a page across the restart') or diag($page->{content});
is($cursors->[-1], ($old_head + 2) . "\@$new_epoch",
	'its cursor carries the epoch it was read in') or diag($page->{content});
like($page->{headers}{'cache-control'}, qr/no-store/, 'and it is not cacheable');
my ($next, $after) = fetch_page($gw, $cursors->[-1], 4);
my @sent = grep { $_->{data} } ndjson($next->{content});
is_deeply([ map { $_->{data}{number} } @sent ], [ $old_head + 3, $old_head + 4 ],
	'the next page goes on after it: nothing sent again') or diag($next->{content});

($page, $cursors) = fetch_page($gw, ($old_head - 4) . "\@$old_epoch", 4);
is($cursors->[-1], "$old_head\@$old_epoch", 'a page below the new epoch\'s head keeps the asked epoch');
like($page->{headers}{'cache-control'}, qr/immutable/, 'and stays immutable');

stop_gateway($gw);
$node->stop;
done_testing();
