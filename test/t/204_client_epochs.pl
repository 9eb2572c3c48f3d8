# test/t/204_client_epochs.pl
#
# cfeed's own readers across a failover that lost stamps (docs/client.md
# "Reconnecting", docs/serve.md "Failover", docs/replication.md "Detecting a
# lossy failover").  A primary with an asynchronous standby; the standby is
# cut off (primary_conninfo emptied) after it has changes 1-5; the primary
# stamps 6-8, which `cfeed tail`, a `cfeed serve` SSE stream and a FeedAPI
# client read; the primary stops, the standby is promoted and stamps other
# changes with numbers 6-8.  The readers follow the promotion (a connection
# string with both hosts and target_session_attrs=read-write) and must
# deliver the new changes at the reissued numbers instead of skipping them;
# cursors without an epoch are taken as of the current one.

use strict;
use warnings;

use IPC::Run qw(start);
use JSON::PP;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep time);
use lib 'test/t';
use CfeedCheck;
use ServeHelper;

plan skip_all => 'cfeed command not built' unless -x cfeed_binary();

my $start = 2000000000000000;
my $primary = cfeed_node('epochs_primary', '', allows_streaming => 1);
$primary->safe_psql('postgres', q{
	create extension cfeed;
	select cfeed.create_feed('f', 1, 1);});
my $standby = cfeed_standby($primary, 'epochs_standby');
my $dsn = sprintf('host=%s,%s port=%d,%d dbname=postgres target_session_attrs=read-write',
	$primary->host, $standby->host, $primary->port, $standby->port);

my $dir = PostgreSQL::Test::Utils::tempdir();
my $token = 'epochs-0123456789abcdef';
write_tokens("$dir/tokens", "$token f reader");

# Publish n changes on node and stamp them; returns their change_ids.
sub publish
{
	my ($node, $n) = @_;
	my @ids = split /\n/, $node->safe_psql('postgres',
		"select cfeed.publish(1, 0) from generate_series(1, $n)");
	$node->poll_query_until('postgres',
		'select count(*) = 0 from cfeed.change where change_sequence_number is null')
	  or die 'changes not stamped';
	return @ids;
}

# Wait until text (a scalar ref, filled by a pumped IPC::Run handle) has
# at least n matches of re.
sub wait_for
{
	my ($h, $text, $re, $n, $what) = @_;
	my $deadline = time + 30;
	while ((() = $$text =~ /$re/g) < $n && time < $deadline)
	{
		$h->pump_nb;
		usleep(50_000);
	}
	ok((() = $$text =~ /$re/g) >= $n, $what);
}

# The change_id of each number in a list of events (hashes).
sub ids_by_number
{
	return { map { ($_->{change_sequence_number} // $_->{number}) => $_->{change_id} } @_ };
}

my @old = publish($primary, 5);
$primary->wait_for_catchup($standby);

# Readers: cfeed tail, an SSE stream through cfeed serve, a FeedAPI client.
my ($tail_out, $tail_err) = ('', '');
my ($tail, $gw, $stream);
END
{
	# no reader outlives a failed run
	$_ && $_->pumpable && $_->kill_kill for $tail, $stream, ($gw ? $gw->{handle} : undef);
}
$tail = start([ cfeed_binary(), 'tail', '--dbname', $dsn, '--feed', 'f', '--wait-ms', '500' ],
	'>', \$tail_out, '2>', \$tail_err);
$gw = start_gateway(dsn => $dsn, tokens => "$dir/tokens");
my $f = "$gw->{url}/feeds/f";
my $api = decode_json(http_get($f, $token)->{content})->{token};
my $sse = '';
$stream = start_stream("$f?partition=0&cursor=_first", $token, \$sse, Accept => 'text/event-stream');

# Cut the standby off, then stamp 6-8 on the primary only.
$standby->safe_psql('postgres', q{alter system set primary_conninfo = ''; select pg_reload_conf()});
$standby->poll_query_until('postgres', 'select count(*) = 0 from pg_stat_wal_receiver')
  or die 'the standby still receives';
push @old, publish($primary, 3);
wait_for($tail, \$tail_out, qr/^\{/m, 8, 'tail printed 1-8 before the failover');
wait_for($stream, \$sse, qr/^data:/m, 8, 'the SSE stream got 1-8 before the failover');
my @page = ndjson(http_get("$f?token=$api&partition=0&cursor=_first", $token)->{content});
my $cursor = $page[-1]{cursor};
is(scalar(grep { $_->{data} } @page), 8, 'FeedAPI: 1-8 before the failover');
like($cursor, qr/^\Q@{[ $start + 8 ]}\E@\d+$/, 'FeedAPI: the cursor carries the feed epoch');
my (undef, $sse_id) = sse_events($sse);
like($sse_id, qr/^\Q@{[ $start + 8 ]}\E@\d+$/, 'SSE: the id carries the feed epoch');

# Fail over: the promoted standby has 1-5 and stamps new changes as 6-8.
$primary->stop('immediate');
$standby->promote;
my @new = publish($standby, 3);
my %expect = map { ($start + $_ => ($_ <= 5 ? $old[$_ - 1] : $new[$_ - 6])) } 1 .. 8;
isnt($new[0], $old[5], 'the new primary gave number 6 to another change');

# cfeed tail reconnects to the new primary and prints the reissued numbers.
wait_for($tail, \$tail_out, qr/^\{/m, 11, 'tail printed the new changes at the reissued numbers');
my @lines = map { decode_json($_) } grep { /^\{/ } split /\n/, $tail_out;
my %got = %{ ids_by_number(@lines[8 .. $#lines]) };
is_deeply([ map { $got{ $start + $_ } } 6 .. 8 ], \@new, 'tail: numbers 6-8 are the new changes');
like($tail_err, qr/a failover lost stamps of shard 0 of feed 1 after \Q@{[ $start + 5 ]}\E/,
	'tail says that changes may be printed again');

# The SSE stream gets the new changes too: the hub reconnects; a stream
# that ends (its catch-up read met the lost connection) is reopened with
# its Last-Event-ID, as EventSource does.
my ($sse_all, $deadline) = ('', time + 30);
while ((() = ($sse_all . $sse) =~ /^data:/mg) < 11 && time < $deadline)
{
	if (!$stream->pumpable)
	{
		$stream->finish;
		$sse_all .= $sse;
		$sse = '';
		my (undef, $id) = sse_events($sse_all);
		$stream = start_stream("$f?partition=0", $token, \$sse, Accept => 'text/event-stream',
			'Last-Event-ID' => $id);
	}
	$stream->pump_nb;
	usleep(50_000);
}
$sse_all .= $sse;
my ($events) = sse_events($sse_all);
is(scalar @$events, 11, 'SSE: the stream got the reissued numbers');
%got = %{ ids_by_number(map { $_->{data} } @$events[8 .. $#$events]) };
is_deeply([ map { $got{ $start + $_ } } 6 .. 8 ], \@new, 'SSE: numbers 6-8 are the new changes');

# A FeedAPI client resumes with its cursor from before the failover, from a
# restarted gateway, and gets 6-8 again (the new changes).
stop_gateway($gw);
$gw = start_gateway(dsn => $dsn, tokens => "$dir/tokens");
$f = "$gw->{url}/feeds/f";
@page = ndjson(http_get("$f?token=$api&partition=0&cursor=$cursor", $token)->{content});
%got = %{ ids_by_number(map { $_->{data} || () } @page) };
is_deeply([ map { $got{ $start + $_ } } 6 .. 8 ], \@new,
	'FeedAPI: a cursor from before the failover resumes at the reissued numbers');
like($page[-1]{cursor}, qr/^\Q@{[ $start + 8 ]}\E@\d+$/, 'FeedAPI: the new cursor is in the new epoch');
# A Last-Event-ID from before the failover, on the restarted gateway.
($events) = sse_events(sse_collect($f, $token, 3, undef, 'Last-Event-ID' => "0:$sse_id"));
%got = %{ ids_by_number(map { $_->{data} } @$events) };
is_deeply([ map { $got{ $start + $_ } } 6 .. 8 ], \@new,
	'SSE: a Last-Event-ID from before the failover resumes at the reissued numbers');
# A bare number is taken as of the current epoch.
@page = ndjson(http_get("$f?token=$api&partition=0&cursor=" . ($start + 7), $token)->{content});
is(scalar(grep { $_->{data} } @page), 1, 'FeedAPI: a bare number is a cursor of the current epoch');

$stream->kill_kill;
stop_gateway($gw);
$tail->signal('TERM');
$tail->finish;
$standby->stop;
done_testing();
