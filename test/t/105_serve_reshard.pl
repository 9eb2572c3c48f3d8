# test/t/105_serve_reshard.pl
#
# `cfeed serve` publishes a feed's partition lifecycle as FeedAPI defines it
# while the feed is resharded under writers and readers (issue 32;
# docs/serve.md, "Partitions"):
#
#  - discovery lists a shard that ended with "closed": true and each child
#    with "startsAfterPartition": its parent; the token changes with the
#    layout, and a fetch with the old token gets 409;
#  - a fetch at the end of a closed partition answers at once, with no
#    event (stream= too): the consumer knows it is done; an SSE stream of
#    it gets 204 (EventSource stops);
#  - a FeedAPI consumer that follows the spec's rules (parents to their end
#    before their children, rediscovery on 409) and an all-shards SSE
#    stream that reconnects with its Last-Event-ID whenever it ends both
#    get every committed change exactly once, and each key's changes in
#    commit order, across two splits.

use strict;
use warnings;

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use lib 'test/t';
use ServeHelper;

plan skip_all => 'cfeed command not built' unless -x cfeed_binary();

my $node = PostgreSQL::Test::Cluster->new('serve_reshard');
$node->init;
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'cfeed'\n");
$node->start;
$node->safe_psql('postgres', q{
	create extension cfeed;
	select cfeed.create_feed('rs', 2, 1);
	create table ev (id bigserial primary key, k int not null, seq int not null);
	select cfeed.track('ev', 1, 'k');
});

my $dir = PostgreSQL::Test::Utils::tempdir();
my $token = 'reshard-0123456789abcdef';
write_tokens("$dir/tokens", "$token rs,pending t");
my $gw = start_gateway(dsn => $node->connstr('postgres'), tokens => "$dir/tokens");
my $url = "$gw->{url}/feeds/rs";

# Discovery: the decoded answer.
sub discover
{
	my $r = http_get($url, $token);
	die "discovery: $r->{status} $r->{content}" unless $r->{status} == 200;
	my ($d) = ndjson($r->{content});
	return $d;
}

# The layout a discovery shows: "id[c][<parent]" per partition.
sub layout_text
{
	my ($d) = @_;
	return join ',', map {
		$_->{id} . ($_->{closed} ? 'c' : '')
		  . (defined $_->{startsAfterPartition} ? "<$_->{startsAfterPartition}" : '')
	} @{ $d->{partitions} };
}

# Close the feed's open shards, with this many children, and wait until the
# parents ended (their last changes are stamped).
sub reshard
{
	my ($shards) = @_;
	$node->safe_psql('postgres', "select * from cfeed.reshard(1, $shards)");
	$node->poll_query_until('postgres',
		'select bool_and(ended) from cfeed.shard where feed_id = 1 and closed')
	  or die 'the closed shards did not end';
	return;
}

# --- a FeedAPI consumer that follows the spec's rules -----------------------

my %sse = (text => '', handle => undef, id => undef, got => [], connects => 0);
my %fa = (token => undef, parts => {}, cursor => {}, done => {}, got => [],
	conflicts => 0, fetches => 0, passes => 0);

# One pass over the partitions it may read: a child only once its parent
# is done (closed, and a fetch returned no event).  Passes of pages of 50
# and of short streams alternate, pages first after a discovery (a parent
# with a backlog is then read in several pages).  On 409 it discovers
# again, keeping its cursors.
sub fa_step
{
	if (!defined $fa{token})
	{
		my $d = discover();
		$fa{token} = $d->{token};
		$fa{parts} = { map { $_->{id} => $_ } @{ $d->{partitions} } };
		$fa{passes} = 0;
	}
	my $how = $fa{passes}++ % 2 ? 'stream=150' : 'pageSizeHint=50';
	for my $id (sort { $a <=> $b } keys %{ $fa{parts} })
	{
		my $p = $fa{parts}{$id};
		next if $fa{done}{$id};
		next if defined $p->{startsAfterPartition} && !$fa{done}{ $p->{startsAfterPartition} };
		my $cursor = $fa{cursor}{$id} // '_first';
		$fa{fetches}++;
		my $r = http_get("$url/events?token=$fa{token}&partition=$id&cursor=$cursor&$how", $token);
		if ($r->{status} == 409)
		{
			$fa{conflicts}++;
			$fa{token} = undef;
			return;
		}
		die "fetch: $r->{status} $r->{content}" unless $r->{status} == 200;
		my $events = 0;
		for my $line (ndjson($r->{content}))
		{
			if ($line->{data})
			{
				push @{ $fa{got} }, $line->{data};
				$events++;
			}
			$fa{cursor}{$id} = $line->{cursor} if defined $line->{cursor};
		}
		$fa{done}{$id} = 1 if $p->{closed} && $events == 0;
		sse_pump();		# the browser's stream does not wait for this consumer
	}
	return;
}

# --- an all-shards SSE stream that reconnects as a browser does ------------

sub sse_pump
{
	if (!$sse{handle})
	{
		my %h = (Accept => 'text/event-stream');
		$h{'Last-Event-ID'} = $sse{id} if defined $sse{id};
		$sse{text} = '';
		$sse{handle} = start_stream($url, $token, \$sse{text}, %h);
		$sse{connects}++;
	}
	$sse{handle}->pump_nb;
	sse_take() unless $sse{handle}->pumpable;
	return;
}

# Take the events of the connection (it ended, or is killed).
sub sse_take
{
	if ($sse{handle}->pumpable)
	{
		$sse{handle}->kill_kill;
	}
	else
	{
		$sse{handle}->finish;
	}
	my ($events, $last) = sse_events($sse{text});
	push @{ $sse{got} }, map { $_->{data} } @$events;
	$sse{id} = $last if defined $last;
	$sse{handle} = undef;
	return;
}

# --- the run -----------------------------------------------------------------

my $d0 = discover();
is(layout_text($d0), '0,1', 'before: two open partitions');

# One writer (so a key's seq is its commit order), one in five transactions
# rolled back.
my $script = "$dir/writer.sql";
open my $fh, '>', $script or die $!;
print $fh <<'EOS';
\set k random(0, 19)
\set a random(0, 4)
BEGIN;
INSERT INTO ev (k, seq) SELECT :k, coalesce(max(seq), 0) + 1 FROM ev WHERE k = :k;
\if :a = 0
ROLLBACK;
\else
COMMIT;
\endif
EOS
close $fh;
my ($pb_out, $pb_err) = ('', '');
my $pgbench = IPC::Run::start(
	[ 'pgbench', '-n', '-c', '1', '-R', '300', '-T', '9', '-f', $script,
	  '-h', $node->host, '-p', $node->port, 'postgres' ],
	'>', \$pb_out, '2>', \$pb_err);

my $t0 = time;
my @splits = ([ 2.5, 4 ], [ 5.5, 8 ]);
my ($d1, $d2, $stale);
while ($pgbench->pumpable)
{
	# the FeedAPI consumer falls behind before the first split: the parents
	# have a backlog when their children appear
	fa_step() unless time - $t0 > 1.2 && !defined $d1;
	sse_pump();
	if (@splits && time - $t0 > $splits[0][0])
	{
		my $split = shift @splits;
		my $old = discover()->{token};
		reshard($split->[1]);
		my $d = discover();
		if (!defined $d1)
		{
			$d1 = $d;
			my $r = http_get("$url/events?token=$old&partition=0&cursor=_first", $token);
			$stale = $r->{status};
		}
		else
		{
			$d2 = $d;
		}
		isnt($d->{token}, $old, "split " . (defined $d2 ? 2 : 1) . ': the token changed');
	}
	$pgbench->pump_nb;
	usleep(20_000);
}
$pgbench->finish;
like($pb_out, qr/number of transactions actually processed/, 'pgbench wrote')
  or diag($pb_err);

is(layout_text($d1), '0c,1c,2<0,3<1,4<0,5<1',
	'split 1: the parents are closed, each child starts after its parent');
is($stale, 409, 'a fetch with the token of before gets 409');
is(layout_text($d2), '0c,1c,2c<0,3c<1,4c<0,5c<1,6<2,7<3,8<4,9<5,10<2,11<3,12<4,13<5',
	'split 2: the children closed in turn, theirs start after them');

# The end of a closed partition: at once, no event, the cursor its head.
my $head = $node->safe_psql('postgres',
	'select last_change_sequence_number from cfeed.shard where feed_id = 1 and shard = 0');
my $epoch = $node->safe_psql('postgres', 'select cfeed.epoch()');
my $t = time;
my $r = http_get("$url/events?token=$d2->{token}&partition=0&cursor=$head\@$epoch&stream=5000", $token);
my $took = time - $t;
my @lines = ndjson($r->{content} // '');
is($r->{status} . ' ' . scalar(grep { $_->{data} } @lines) . ' ' . ($lines[-1]{cursor} // ''),
	"200 0 $head\@$epoch", 'a stream at the end of a closed partition: no event, its end as cursor');
cmp_ok($took, '<', 2, 'and it answers at once, not after stream=5000');
$r = http_get("$url/events?token=$d2->{token}&partition=0&cursor=_first&pageSizeHint=1000", $token);
@lines = ndjson($r->{content} // '');
is($lines[-1]{cursor} // '', "$head\@$epoch", 'read from _first, its last page ends at its end');
$r = http_get("$url?partition=0&stream=3000", $token, Accept => 'text/event-stream',
	'Last-Event-ID' => "$head\@$epoch");
is($r->{status}, 204, 'an SSE stream of it from its end: 204 (EventSource stops)');

# Read on until both consumers have every committed change.
$node->poll_query_until('postgres',
	'select count(*) = 0 from cfeed.change where change_sequence_number is null')
  or die 'changes not stamped';
my %truth = map { $_ => 1 } split /\n/,
  $node->safe_psql('postgres', "select k || ':' || seq from ev");
my $total = keys %truth;
my $deadline = time + 60;
while (time < $deadline)
{
	fa_step();
	sse_pump();
	my $open = () = $sse{text} =~ /^data:/mg;
	last if @{ $fa{got} } >= $total && @{ $sse{got} } + $open >= $total;
	usleep(20_000);
}
note(sprintf('drained %.1f s after the last change was stamped', time - $deadline + 60));
usleep(500_000);	# anything sent twice comes now
fa_step();
sse_take();

# Every committed change once, each key's in commit order.
for my $consumer ([ 'FeedAPI', $fa{got} ], [ 'SSE', $sse{got} ])
{
	my ($name, $got) = @$consumer;
	my (%count, %last, @disorder);
	for my $e (@$got)
	{
		my ($k, $seq) = ($e->{row}{k}, $e->{row}{seq});
		$count{"$k:$seq"}++;
		push @disorder, "$k:$seq after $k:$last{$k}" if ($last{$k} // 0) >= $seq;
		$last{$k} = $seq;
	}
	my @missing = grep { !$count{$_} } sort keys %truth;
	my @twice = grep { $count{$_} > 1 } sort keys %count;
	is(scalar(@missing) . '/' . scalar(@twice), '0/0',
		"$name: all $total committed changes, none twice")
	  or diag("missing: @missing[0 .. ($#missing < 9 ? $#missing : 9)]; twice: @twice[0 .. ($#twice < 9 ? $#twice : 9)]");
	is(scalar(@disorder), 0, "$name: each key's changes in commit order")
	  or diag("@disorder[0 .. ($#disorder < 9 ? $#disorder : 9)]");
}
cmp_ok($fa{conflicts}, '>=', 2, "the FeedAPI consumer rediscovered on 409 ($fa{conflicts} times)");
cmp_ok($sse{connects}, '>=', 3, "the SSE stream ended at each split and resumed from its id ($sse{connects} connections)");
note("$total changes; FeedAPI: $fa{fetches} fetches");

# A parent whose last changes wait for a stamp is not closed for FeedAPI
# yet: until it ended, discovery lists it open and not its children.
$node->safe_psql('postgres', q{
	select cfeed.create_feed('pending', 1, 2);
	alter system set cfeed.enable_sweeper = off;
	select pg_reload_conf();
});
$node->poll_query_until('postgres',
	"select count(*) = 0 from pg_stat_activity where backend_type like 'cfeed sweeper%'")
  or die 'the sweepers did not stop';
$node->safe_psql('postgres', 'select cfeed.publish(2, 0); select * from cfeed.reshard(2, 2)');
my $p = "$gw->{url}/feeds/pending";
my ($pd) = ndjson(http_get($p, $token)->{content});
is(layout_text($pd), '0', 'closed with a change unstamped: listed open, its children not yet');
is(http_get("$p/events?token=$pd->{token}&partition=1&cursor=_first", $token)->{status}, 400,
	'a child not listed is no partition (400)');
$node->safe_psql('postgres', q{
	alter system reset cfeed.enable_sweeper;
	select pg_reload_conf();
});
$node->poll_query_until('postgres', 'select ended from cfeed.shard where feed_id = 2 and shard = 0')
  or die 'the parent did not end';
($pd) = ndjson(http_get($p, $token)->{content});
is(layout_text($pd), '0c,1<0,2<0', 'once it ended: closed, and its children after it');

stop_gateway($gw);
done_testing();
