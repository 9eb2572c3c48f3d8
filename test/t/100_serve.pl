# test/t/100_serve.pl
#
# `cfeed serve` (src/client/serve*.c): every FeedAPI v2 call and error
# (discovery, fetch with _first/_last/a number, pageSizeHint, stream, 400,
# 401, 403, 404, 409, 410), immutable pages, payload attachment, a consumer
# that follows the spec's client rules under concurrent writers with aborts,
# SSE and its resume after a gateway restart, a database restart under a
# stream (the hub reconnects with backoff), graceful shutdown with a final
# cursor, the gateway role's own read grants, serving from a hot standby,
# /healthz and /metrics.

use strict;
use warnings;

use HTTP::Tiny;
use IO::Select;
use IO::Socket::INET;
use IO::Uncompress::Gunzip ();
use JSON::PP;
use IPC::Run qw(start);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep time);
use lib 'test/t';
use ServeHelper;

plan skip_all => 'cfeed command not built' unless -x cfeed_binary();

my $node = PostgreSQL::Test::Cluster->new('serve');
$node->init(allows_streaming => 1);
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'cfeed'\n");
$node->start;
$node->safe_psql('postgres', q{
	create extension cfeed;
	select cfeed.create_feed('orders', 2, 1);
	select cfeed.create_feed('other', 1, 2);
	select cfeed.create_feed('old', 1, 3);
	select cfeed.create_feed('plain', 1, 4);
	create table item (id int primary key, name text);
	select cfeed.track('item', 1);
	create table event_body (change_id bigint primary key, body text);
});

my $dir = PostgreSQL::Test::Utils::tempdir();
my $alice = 'alice-0123456789abcdef';
my $bob = 'bob-0123456789abcdefgh';
write_tokens("$dir/tokens", '# token feeds label', "$alice orders,old,plain,gone alice", "$bob other bob");

my $dsn = $node->connstr('postgres');
my $start = 2000000000000000;
my $gw = start_gateway(dsn => $dsn, tokens => "$dir/tokens",
	args => [ '--payload', 'plain=public.event_body' ]);
my $url = "$gw->{url}/feeds";

# The number of a cursor or SSE position, number@epoch.
sub number_of
{
	my ($position) = @_;
	return $position =~ s/\@\d+$//r;
}

# Poll $cond (a sub) every 20 ms, and with $h (a streaming client) given,
# collect what it printed meanwhile, until $cond is true; die naming $what
# after $seconds.
sub wait_for
{
	my ($what, $seconds, $cond, $h) = @_;
	my $until = time + $seconds;
	while (1)
	{
		$h->pump_nb if $h;
		return if $cond->();
		die "timed out after $seconds s waiting for $what" if time >= $until;
		usleep(20_000);
	}
}

# Wait until a streaming client has its first line (its request was
# answered), collecting what it prints.
sub wait_streaming
{
	my ($h, $out) = @_;
	wait_for('a streaming client\'s first line', 30, sub { $$out =~ /\n/ }, $h);
	return;
}

# Wait until the gateway gw stalls on clients that do not read: it holds
# output for them (cfeed_serve_client_buffer_bytes above 0) and sent no
# event for 700 ms (their socket buffers are full).
sub wait_stalled
{
	my ($gw) = @_;
	my ($sent, $since) = (-1, time);
	wait_for('the gateway to stall on clients that do not read', 30, sub {
		my $m = http_get("$gw->{url}/metrics")->{content};
		my $now = $m =~ /^cfeed_serve_events_sent_total (\d+)$/m ? $1 : -1;
		my $held = $m =~ /^cfeed_serve_client_buffer_bytes (\d+)$/m ? $1 : 0;
		($sent, $since) = ($now, time) if $now != $sent;
		return $held > 0 && time - $since >= 0.7;
	});
	return;
}

# Wait until every change of feed_id is older than the feed's retention,
# so that a retention pass now deletes what it may.
sub wait_retention_due
{
	my ($feed_id) = @_;
	$node->poll_query_until('postgres', qq{
		select bool_and(c.stamped_at < now() - f.retention)
		from cfeed.change c join cfeed.feed f using (feed_id) where c.feed_id = $feed_id})
	  or die "changes of feed $feed_id not older than its retention";
	return;
}

# Wait until every committed change is stamped (the sweeper runs).
sub wait_stamped
{
	$node->poll_query_until('postgres',
		'select count(*) = 0 from cfeed.change where change_sequence_number is null')
	  or die 'changes not stamped';
}

$node->safe_psql('postgres', "insert into item select g, 'n' || g from generate_series(1, 6) g");
wait_stamped();

# --- discovery
my $r = http_get("$url/orders", $alice);
is($r->{status}, 200, 'discovery: 200');
my $disc = decode_json($r->{content});
is_deeply([ map { $_->{id} } @{ $disc->{partitions} } ], [ '0', '1' ], 'discovery: partitions are the shards');
ok($disc->{stream}, 'discovery: stream');
my $token = $disc->{token};
like($token, qr/\S/, 'discovery: a token');

# exactlyOnce only when no failover can lose a stamp a client saw: stamps
# wait for a synchronous standby (issue 30 item 9: it was always true)
ok(JSON::PP::is_bool($disc->{exactlyOnce}) && !$disc->{exactlyOnce},
	'discovery: exactlyOnce false without a synchronous standby (at least once after a failover)');
$node->safe_psql('postgres', q{
	alter system set synchronous_standby_names = 'standby1';
	select pg_reload_conf();
});
$node->poll_query_until('postgres', "select current_setting('synchronous_standby_names') = 'standby1'");
ok(decode_json(http_get("$url/orders", $alice)->{content})->{exactlyOnce},
	'discovery: exactlyOnce true when stamps wait for a synchronous standby');
$node->safe_psql('postgres', q{
	alter system reset synchronous_standby_names;
	select pg_reload_conf();
});
$node->poll_query_until('postgres', "select current_setting('synchronous_standby_names') = ''");

# --- fetch at <discovery URL>/events (FeedAPI v2, as its Go client does) and
# at the discovery URL itself (the older spec)
$r = http_get("$url/orders/events?token=$token&partition=0&cursor=_first", $alice);
is($r->{status}, 200, 'fetch at /events: 200');
is($r->{content}, http_get("$url/orders?token=$token&partition=0&cursor=_first", $alice)->{content},
	'fetch at /events: the page of a fetch at the discovery URL');
is(http_get("$url/orders/events", $alice)->{status}, 400, '/events without arguments: 400, not discovery');
is(http_get("$url/orders/events?token=$token&partition=0&cursor=_first")->{status}, 401, '/events: authorized first');

# --- FeedAPI partition ids are [0..32767]: a shard above is not a partition
$node->safe_psql('postgres', 'insert into cfeed.shard (feed_id, shard) values (4, 40000)');
$r = decode_json(http_get("$url/plain", $alice)->{content});
is_deeply([ map { $_->{id} } @{ $r->{partitions} } ], [ '0' ], 'shard 40000 is not listed as a partition');
is(http_get("$url/plain?token=$r->{token}&partition=40000&cursor=_first", $alice)->{status}, 400,
	'nor fetched');
$node->safe_psql('postgres', 'delete from cfeed.shard where feed_id = 4 and shard = 40000');

# --- authorization, before anything is read
is(http_get("$url/orders")->{status}, 401, 'no token: 401');
like(http_get("$url/orders")->{headers}{'www-authenticate'}, qr/Bearer/, '401 names the Bearer scheme');
is(http_get("$url/orders", 'not-a-token-at-all-xx')->{status}, 401, 'unknown token: 401');
is(http_get("$url/orders", $bob)->{status}, 403, 'token for feed other cannot read orders: 403');
is(http_get("$url/other", $bob)->{status}, 200, 'token for feed other reads other');
is(http_get("$url/nosuch", $bob)->{status}, 403, 'a feed not granted: 403 whether or not it exists');
unlike(slurp_file($gw->{log}), qr/\Q$alice\E|\Q$bob\E/, 'tokens never appear in the log');

# --- fetch
my $f = "$url/orders?token=$token";
$r = http_get("$f&partition=0&cursor=_first", $alice);
is($r->{status}, 200, 'fetch _first: 200');
is($r->{headers}{'content-type'}, 'application/x-ndjson', 'fetch: NDJSON');
my @lines = ndjson($r->{content});
my @data = map { $_->{data} } grep { $_->{data} } @lines;
my $n0 = scalar @data;
ok($n0 >= 1, "fetch _first: $n0 events of shard 0");
is_deeply([ map { $_->{number} } @data ], [ map { $start + $_ } 1 .. $n0 ], 'fetch: numbers in order from the start');
is($data[0]{feed}, 'orders', 'event: feed');
is($data[0]{shard}, 0, 'event: shard');
is($data[0]{op}, 'insert', 'event: op');
is($data[0]{table}, 'public.item', 'event: table');
ok(defined $data[0]{row}{id} && $data[0]{change_id} && $data[0]{stamped_at}, 'event: row, change_id, stamped_at');
like($lines[-1]{cursor}, qr/^\Q@{[ $start + $n0 ]}\E\@\d+$/, 'fetch: ends with the cursor of the last event, number@epoch');

$r = http_get("$f&partition=0&cursor=_last", $alice);
is_deeply([ map { { cursor => number_of($_->{cursor}) } } ndjson($r->{content}) ], [ { cursor => $start + $n0 } ],
	'fetch _last: no event, the head as cursor');

my ($epoch0) = $lines[-1]{cursor} =~ /\@(\d+)$/;
my $page1 = "$f&partition=0&cursor=$start\@$epoch0&pageSizeHint=1";
$r = http_get($page1, $alice);
@lines = ndjson($r->{content});
is(scalar(grep { $_->{data} } @lines), 1, 'pageSizeHint=1: one event');
is(number_of($lines[-1]{cursor}), $start + 1, 'pageSizeHint=1: its cursor');
like($r->{headers}{'cache-control'}, qr/^private, max-age=\d+, immutable$/, 'a full page below the head is immutable');
my $page1_body = $r->{content};
is(http_get("$f&partition=0&cursor=$start&pageSizeHint=1", $alice)->{headers}{'cache-control'}, 'no-store',
	'but not for a bare number (its cursor carries the epoch it is read in)');
$r = http_get("$f&partition=0&cursor=" . ($start + $n0 - 1) . "&pageSizeHint=5", $alice);
is($r->{headers}{'cache-control'}, 'no-store', 'a page reaching the head is not cached');
$r = http_get("$f&partition=0&cursor=" . ($start - 1) . "\@$epoch0&pageSizeHint=1", $alice);
is($r->{status}, 200, 'a page from a cursor in the shard\'s history');
is($r->{headers}{'cache-control'}, 'no-store', 'is not cached: a backfill may still add to the history');

# --- errors
for my $case (
	[ "$f&partition=0", 'no cursor' ],
	[ "$f&cursor=_first", 'no partition' ],
	[ "$f&partition=7&cursor=_first", 'unknown partition' ],
	[ "$f&partition=0&cursor=abc", 'bad cursor' ],
	[ "$f&partition=0&cursor=_first&pageSizeHint=0", 'bad pageSizeHint' ],
	[ "$f&partition=0&cursor=_first&stream=soon", 'bad stream' ],
	[ "$f&partition=0&cursor=_first&stream=100&pageSizeHint=5", 'stream with pageSizeHint' ],
	[ "$url/orders?cursor0=1", 'FeedAPI v1 arguments' ],
	# numbers are digits only (a review: strtoll took a sign or leading
	# spaces, "+0" and "%200" were partition 0, where "0%20" got 400)
	[ "$f&partition=%2B0&cursor=_first", 'a partition with a plus sign' ],
	[ "$f&partition=%200&cursor=_first", 'a partition with a leading space' ],
	[ "$f&partition=-0&cursor=_first", 'a partition with a minus sign' ],
	[ "$f&partition=0&cursor=%2B$start", 'a cursor with a plus sign' ],
	[ "$f&partition=0&cursor=%20$start", 'a cursor with a leading space' ],
	[ "$f&partition=0&cursor=_first&pageSizeHint=%2B5", 'a pageSizeHint with a plus sign' ])
{
	$r = http_get($case->[0], $alice);
	is($r->{status}, 400, "400: $case->[1]");
	ok(eval { decode_json($r->{content})->{error} }, "400 has a JSON error: $case->[1]");
}
is(http_get("$url/orders?token=stale&partition=0&cursor=_first", $alice)->{status}, 409, 'stale token: 409');

# a position beyond the head was never sent: 400, not an empty page whose
# cursor skips every change up to it (item 8 of issue 30: 200)
my $beyond = $start + $n0 + 1;
$r = http_get("$f&partition=0&cursor=$beyond", $alice);
is($r->{status}, 400, 'a cursor beyond the head: 400');
like(eval { decode_json($r->{content})->{detail} } // '', qr/beyond its head/, 'and says so');
is(http_get("$f&partition=0&cursor=$beyond&stream=100", $alice)->{status}, 400, 'a stream from beyond the head: 400');
is(http_get("$url/orders?stream=100", $alice, Accept => 'text/event-stream',
	'Last-Event-ID' => "0:$beyond")->{status}, 400, 'a Last-Event-ID beyond the head: 400');
is(http_get("$url/orders?stream=100&cursor=$beyond", $alice, Accept => 'text/event-stream')->{status}, 400,
	'an SSE cursor beyond the head: 400');
is(http_get("$f&partition=0&cursor=" . ($beyond - 1), $alice)->{status}, 200, 'a cursor at the head: 200');

# the compact id of an all-shards stream names one position too, within a
# round (LO.HI.SHARD:NUMBER@EPOCH): beyond its head it gets 400 as well (a
# review: 200, and the stream skipped every change up to it)
my $epoch_now = $node->safe_psql('postgres', 'select cfeed.epoch()');
$r = http_get("$url/orders?stream=100", $alice, Accept => 'text/event-stream',
	'Last-Event-ID' => "1.2.0:$beyond\@$epoch_now");
is($r->{status}, 400, 'a compact Last-Event-ID whose position is beyond the head: 400');
like(eval { decode_json($r->{content})->{detail} } // '', qr/beyond its head/, 'and says so');
# a position below the shard's start value is in its migration range (0 is
# below every number): taken by every form, as it is by cfeed.read
is(http_get("$f&partition=0&cursor=1", $alice)->{status}, 200, 'a cursor below the start value: 200');
is(http_get("$url/orders?stream=100&partition=0", $alice, Accept => 'text/event-stream',
	'Last-Event-ID' => "1\@$epoch_now")->{status}, 200, 'a Last-Event-ID below the start value: 200');
is(http_get("$url/orders?stream=100", $alice, Accept => 'text/event-stream',
	'Last-Event-ID' => "1.2.0:1\@$epoch_now")->{status}, 200, 'and a compact one: 200');
# (a shard made before 1.8 may start below 0: the gateway sends negative
# positions in compact ids, and takes them back)
is(http_get("$url/orders?stream=100", $alice, Accept => 'text/event-stream',
	'Last-Event-ID' => "1.2.0:-1\@$epoch_now")->{status}, 200,
	'a compact Last-Event-ID with a negative position: 200');

# a position of an epoch a day or more ahead of every clock was never sent:
# 400 (a review: cfeed.resume_cursor took it for an epoch a failover lost,
# and the shard was sent again from its start, with a false warning in the
# log); one just after the current epoch may be a lost epoch (a lossy
# failover, a restored backup), which epoch numbers cannot order: resumed
{
	my $warnings = () = slurp_file($gw->{log}) =~ /a failover lost stamps/g;
	my $ahead = $epoch_now + 2 * 86400 * 1000000;
	my $pos = $start + 1;	# above the epoch's first head: a rewind would show
	for my $case (
		[ "$f&partition=0&cursor=$pos\@$ahead", {}, 'a cursor of an epoch days ahead' ],
		[ "$f&partition=0&cursor=$pos\@99999999999999999", {}, 'a cursor of an epoch far ahead' ],
		[ "$url/orders?stream=100&partition=0&cursor=$pos\@$ahead", { Accept => 'text/event-stream' },
			'an SSE cursor of an epoch days ahead' ],
		[ "$url/orders?stream=100&partition=0", { Accept => 'text/event-stream', 'Last-Event-ID' => "$pos\@$ahead" },
			'a Last-Event-ID of an epoch days ahead' ],
		[ "$url/orders?stream=100", { Accept => 'text/event-stream', 'Last-Event-ID' => "0:$pos\@$ahead" },
			'a listed Last-Event-ID of an epoch days ahead' ],
		[ "$url/orders?stream=100", { Accept => 'text/event-stream', 'Last-Event-ID' => "1\@$ahead" },
			'a compact Last-Event-ID of an epoch days ahead' ],
		[ "$url/orders?stream=100", { Accept => 'text/event-stream', 'Last-Event-ID' => "1.2.0:$pos\@$ahead" },
			'a compact mid-round Last-Event-ID of an epoch days ahead' ])
	{
		$r = http_get($case->[0], $alice, %{ $case->[1] });
		is($r->{status}, 400, "$case->[2]: 400");
		like(eval { decode_json($r->{content})->{detail} } // '', qr/a cursor this feed did not send/,
			"$case->[2]: says so");
	}
	is(scalar(() = slurp_file($gw->{log}) =~ /a failover lost stamps/g), $warnings,
		'positions of an epoch days ahead are not taken for rewound ones in the log');
	my $next = $epoch_now + 1;
	is(http_get("$f&partition=0&cursor=$pos\@$next", $alice)->{status}, 200,
		'a cursor of an epoch just after the current one (a lost one?): resumed, 200');
	is(http_get("$f&partition=0&cursor=$pos\@1", $alice)->{status}, 200, 'a cursor of an older epoch: 200');
}

# a single-partition stream from _first starts with the id _first, which
# a reconnect sends back (a review: an empty id, "id: ")
$r = http_get("$url/orders?stream=100&partition=0", $alice, Accept => 'text/event-stream');
like($r->{content}, qr/^retry: \d+\nid: _first\n\n/, 'an SSE stream of a partition from _first: id _first first');
$r = http_get("$url/orders?stream=500&partition=0&cursor=_last", $alice, Accept => 'text/event-stream',
	'Last-Event-ID' => '_first');
is($r->{status}, 200, 'Last-Event-ID _first: 200');
is((sse_changes($r->{content}))[0], "0:" . ($start + 1), 'Last-Event-ID _first: from the beginning');

is(http_get("$url/nosuch", 'x' x 0 || $alice)->{status}, 403, 'unknown feed not granted: 403');
is(http_get("$gw->{url}/elsewhere", $alice)->{status}, 404, 'unknown path: 404');

# --- HTTP as clients expect (issue 30 item 9): keep-alive (every answer had
# Connection: close), Allow with 405, and %00 does not cut a path short
# (/feeds/orders%00x was /feeds/orders)
{
	my $sock = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $gw->{port}, Timeout => 10)
	  or die "connect: $!";
	my @status;
	for my $path ('/feeds/orders', '/feeds/other', '/healthz', "/feeds/orders?token=$token&partition=0&cursor=_first")
	{
		print $sock "GET $path HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer $alice\r\n\r\n";
		my $head = '';
		sysread($sock, $head, 1, length $head) || last while $head !~ /\r\n\r\n/;
		push @status, $head =~ m{^HTTP/1\.1 (\d+)} ? $1 : 'closed';
		my ($len) = $head =~ /^Content-Length: *(\d+)/mi;
		my $body = '';
		sysread($sock, $body, $len - length $body, length $body) || last while defined $len && length $body < $len;
	}
	is("@status", '200 403 200 200', 'keep-alive: four answers on one connection');

	# HEAD of a stream: its headers and no body, not even a last chunk, so
	# the next answer on the connection is read as one
	for my $head ("/feeds/orders?token=$token&partition=0&cursor=_last&stream=300", '/feeds/orders?cursor=_last')
	{
		print $sock "HEAD $head HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer $alice\r\nAccept: "
		  . ($head =~ /stream=/ ? 'application/x-ndjson' : 'text/event-stream') . "\r\n\r\n";
		my $got = '';
		sysread($sock, $got, 1, length $got) || last while $got !~ /\r\n\r\n/;
		like($got, qr{^HTTP/1\.1 200}, 'HEAD of a stream: 200');
		print $sock "GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n";
		my $next = '';
		sysread($sock, $next, 9, length $next) || last while length $next < 9;
		is($next, 'HTTP/1.1 ', 'HEAD of a stream sends no body: the next answer follows it');
		$got = '';
		sysread($sock, $got, 1, length $got) || last while $got !~ /\r\n\r\n/;
		my ($len) = $got =~ /^Content-Length: *(\d+)/mi;
		my $body = '';
		sysread($sock, $body, $len - length $body, length $body) || last while defined $len && length $body < $len;
	}
}
$r = HTTP::Tiny->new->request('POST', "$gw->{url}/healthz");
is($r->{status}, 405, 'POST: 405');
is($r->{headers}{allow}, 'GET, HEAD', '405 names the allowed methods');
is(http_get("$url/orders%00x", $alice)->{status}, 404, '%00 in a path: no such feed');

# --- SIGHUP reloads the token file, and open streams go on (issue 30 item
# 9: SIGHUP killed the gateway); a bad file leaves the tokens as they were
{
	my $carol = 'carol-0123456789abcdef';
	my $tokens = slurp_file("$dir/tokens");
	my $hout = '';
	my $hup = start_stream("$url/orders?token=$token&partition=0&cursor=_last&stream=y", $alice, \$hout);
	my $until = time + 10;
	$hup->pump_nb, usleep(20_000) while $hout !~ /cursor/ && time < $until;
	is(http_get("$url/orders", $carol)->{status}, 401, 'a token not in the file: 401');
	write_tokens("$dir/tokens", $tokens . "$carol orders carol");
	$gw->{handle}->signal('HUP');
	$until = time + 10;
	usleep(50_000) while http_get("$url/orders", $carol)->{status} != 200 && time < $until;
	is(http_get("$url/orders", $carol)->{status}, 200, 'SIGHUP: the token file is reloaded');
	$node->safe_psql('postgres', 'select cfeed.publish(1, 0)');
	$until = time + 10;
	$hup->pump_nb, usleep(20_000) while $hout !~ /"data"/ && time < $until;
	like($hout, qr/"data"/, 'a stream open across the reload goes on');
	write_tokens("$dir/tokens", $tokens . "$carol orders carol extra");
	$gw->{handle}->signal('HUP');
	$until = time + 10;
	usleep(50_000) while slurp_file($gw->{log}) !~ /token file not reloaded/ && time < $until;
	like(slurp_file($gw->{log}), qr/error: token file not reloaded, the tokens loaded before stay: .*:\d+: expected TOKEN FEEDS/,
		'a bad token file is logged');
	is(http_get("$url/orders", $carol)->{status}, 200, 'and the tokens loaded before stay');
	write_tokens("$dir/tokens", $tokens);
	$gw->{handle}->signal('HUP');
	$hup->kill_kill;
	wait_stamped();
}

# --- an anonymous line ("-"): its feeds need no token, and any valid token
# reads them too; a request without a token for another feed gets 401 with
# WWW-Authenticate, as without the line (a review: 403 without it, and a
# valid token that did not list the public feed got 403 where no token got
# 200)
{
	my $tokens = slurp_file("$dir/tokens");
	write_tokens("$dir/tokens", $tokens . "- other public");
	$gw->{handle}->signal('HUP');
	my $until = time + 10;
	usleep(50_000) while http_get("$url/other")->{status} != 200 && time < $until;
	is(http_get("$url/other")->{status}, 200, 'anonymous: a public feed without a token');
	my $r = http_get("$url/orders");
	is($r->{status}, 401, 'anonymous line: no token for a feed not public is 401');
	like($r->{headers}{'www-authenticate'}, qr/Bearer/, 'with WWW-Authenticate');
	is(http_get("$url/other", $alice)->{status}, 200, 'a valid token that does not list the public feed reads it');
	is(http_get("$url/other", 'not-a-token-at-all-xx')->{status}, 401, 'an unknown token is still 401 there');
	write_tokens("$dir/tokens", $tokens);
	$gw->{handle}->signal('HUP');
	$until = time + 10;
	usleep(50_000) while http_get("$url/other")->{status} != 401 && time < $until;
}

# --- a feed name of 200 characters, the longest cfeed.feed takes: listed in
# the token file and served (a helper's test: names of 64 characters and
# more got 404, and a token file listing one was refused), last of a
# token's 25 such names: its line of over 5,000 bytes is read whole (a
# review: lines were read 4,095 bytes at a time, and the rest taken for a
# line of its own, a token made of the end of the feed list)
{
	my $long = 'L' x 200;
	$node->safe_psql('postgres', "select cfeed.create_feed('$long', 1, 8); select cfeed.publish(8, 0)");
	my $tokens = slurp_file("$dir/tokens");
	my $dave = 'dave-0123456789abcdef';
	my $names = join(',', (map { chr(ord('a') + $_) x 200 } 0 .. 23), $long);
	write_tokens("$dir/tokens", $tokens . "$dave $names " . ('d' x 200));
	$gw->{handle}->signal('HUP');
	my $until = time + 10;
	usleep(50_000) while http_get("$url/$long", $dave)->{status} != 200 && time < $until;
	my $r = http_get("$url/$long", $dave);
	is($r->{status}, 200, 'a feed named with 200 characters: discovery') or diag($r->{content});
	wait_stamped();
	my $api = decode_json($r->{content})->{token};
	$r = http_get("$url/$long?token=$api&partition=0&cursor=_first", $dave);
	is(scalar(grep { $_->{data} && $_->{data}{feed} eq $long } ndjson($r->{content})), 1,
		'and its event, named by the feed') or diag($r->{content});
	write_tokens("$dir/tokens", $tokens);
	$gw->{handle}->signal('HUP');
	$until = time + 10;
	usleep(50_000) while http_get("$url/$long", $dave)->{status} != 401 && time < $until;
	$node->safe_psql('postgres', "delete from cfeed.change where feed_id = 8; delete from cfeed.feed where feed_id = 8");
}

is(http_get("$url/gone", $alice)->{status}, 404, 'a feed the token lists that does not exist: 404');

# a token for every feed (*) may read the feeds the gateway's role may read:
# a missing one is as forbidden as any other (item 7 of issue 30: it got 404)
append_to_file("$dir/tokens", "all-0123456789abcdefgh * ops\n");
stop_gateway($gw);
$gw = start_gateway(dsn => $dsn, tokens => "$dir/tokens", port => $gw->{port},
	args => [ '--payload', 'plain=public.event_body' ]);
$r = http_get("$url/nosuch", 'all-0123456789abcdefgh');
is($r->{status}, 403, 'a * token, a missing feed: 403');
is($r->{content}, http_get("$url/nosuch", $bob)->{content}, 'the answer of a feed the token does not list');

# --- a client that never reads holds a bounded buffer, shown in /metrics
# (issue 30 item 9: it held a whole 1000-event page, ~2.35 MB with 2 KB rows)
{
	my $all = 'all-0123456789abcdefgh';
	$node->safe_psql('postgres', q{
		select cfeed.create_feed('wide', 1, 6);
		create table wide (id int primary key, pad text);
		select cfeed.track('wide', 6);
		insert into wide select g, repeat('x', 2000) from generate_series(1, 6000) g;
	});
	wait_stamped();
	my $pid = $gw->{handle}{KIDS}[0]{PID};
	my $rss = sub { slurp_file("/proc/$pid/status") =~ /^VmRSS:\s*(\d+)/m ? $1 : 0 };
	my $buffered = sub {
		http_get("$gw->{url}/metrics")->{content} =~ /^cfeed_serve_client_buffer_bytes (\d+)$/m ? $1 : -1;
	};
	my $rss0 = $rss->();
	my @idle;
	for (1 .. 10)
	{
		my $sock = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $gw->{port}) or die "connect: $!";
		print $sock "GET /feeds/wide?stream=y HTTP/1.1\r\nHost: t\r\nAccept: text/event-stream\r\n"
		  . "Authorization: Bearer $all\r\n\r\n";
		push @idle, $sock;
	}
	# until the streams stall: the socket buffers are full, nothing more is sent
	wait_stalled($gw);
	my $grew = $rss->() - $rss0;
	my $held = $buffered->();
	ok($held > 0 && $held <= 10 * 256 * 1024, "10 clients that do not read: $held bytes buffered, at most 256 KB each");
	ok($grew < 12 * 1024, "and the gateway grew by $grew kB (a page each: ~23 MB)");
	close $_ for @idle;
	my $until = time + 10;
	usleep(100_000) while $buffered->() != 0 && time < $until;
	is($buffered->(), 0, 'nothing buffered once they are gone');
}

# --- a shard's in-memory tail is bounded in bytes, not only in events: 24
# rows of 512 kB (12 MB) leave at most 8 MB in it (1.8: 4,096 events
# whatever their size, 64 MB a shard of 16 kB rows), and a stream that
# follows the shard still gets every change
{
	my $all = 'all-0123456789abcdefgh';
	$node->safe_psql('postgres', q{
		select cfeed.create_feed('huge', 1, 7);
		create table huge (id int primary key, pad text);
		select cfeed.track('huge', 7);
	});
	my $metric = sub {
		my ($name) = @_;
		http_get("$gw->{url}/metrics", $all)->{content} =~ /^cfeed_serve_shard_${name}\{feed="huge",shard="0"\} (\d+)$/m ? $1 : -1;
	};
	my $sse = '';
	my $client = start_stream("$url/huge?cursor=_last", $all, \$sse, Accept => 'text/event-stream');
	my $until = time + 30;
	$client->pump_nb, usleep(50_000) while $metric->('followers') < 1 && time < $until;
	is($metric->('followers'), 1, 'a stream follows the shard');
	$node->safe_psql('postgres', "insert into huge select g, repeat(md5(g::text), 16384) from generate_series(1, 24) g");
	wait_stamped();
	is(pump_events($client, \$sse, 24), 24, 'the stream got the 24 wide changes');
	$client->kill_kill;
	my $held = $metric->('tail_bytes');
	ok($held > 512 * 1024 && $held <= 8 * 1024 * 1024, "the tail holds $held bytes of 12 MB of events: at most 8 MB");
	is($metric->('tail'), $node->safe_psql('postgres', 'select cfeed.head(7, 0)'), 'up to the head');
}

# --- 410 after retention removed changes past a cursor
$node->safe_psql('postgres', q{
	select cfeed.publish(3, 0) from generate_series(1, 5);
});
wait_stamped();
# with retention that has removed nothing, a position below the start value
# (0, in the migration range) misses nothing: 200 (a review: 410, the floor
# of a shard without history being its start value)
$node->safe_psql('postgres', q{
	update cfeed.feed set retention = '1 day' where feed_id = 3;
});
is(http_get("$url/old?stream=100&partition=0&cursor=0", $alice, Accept => 'text/event-stream')->{status},
	200, 'an SSE cursor 0 of a feed with retention that removed nothing: 200');
$node->safe_psql('postgres', q{
	update cfeed.feed set retention = '1 millisecond' where feed_id = 3;
});
wait_retention_due(3);
$node->safe_psql('postgres', 'select cfeed.apply_retention(true)');
my $tok3 = decode_json(http_get("$url/old", $alice)->{content})->{token};
$r = http_get("$url/old?token=$tok3&partition=0&cursor=$start", $alice);
is($r->{status}, 410, 'cursor whose next changes retention removed: 410');
$r = http_get("$url/old?token=$tok3&partition=0&cursor=" . ($start + 4), $alice);
is($r->{status}, 200, 'cursor just below the head row: 200');
# so does an SSE stream from there, before it starts: a 410 closes an
# EventSource (a review: 200 with retry: and the same id, the stream ended
# at its first read, and the browser reconnected every second, for ever)
{
	my $epoch = $node->safe_psql('postgres', 'select cfeed.epoch()');
	for my $case (
		[ "partition=0&cursor=$start", undef, 'an SSE cursor' ],
		[ 'partition=0', "$start\@$epoch", 'a Last-Event-ID' ],
		[ "cursor=$start", undef, 'an all-shards SSE cursor' ],
		[ '', "0:$start\@$epoch", 'a listed Last-Event-ID' ],
		[ '', "1.2.0:$start\@$epoch", 'a compact Last-Event-ID' ])
	{
		my ($query, $id, $what) = @$case;
		$r = http_get("$url/old?stream=2000&$query", $alice, Accept => 'text/event-stream',
			defined $id ? ('Last-Event-ID' => $id) : ());
		is($r->{status}, 410, "$what whose next changes retention removed: 410");
	}
	is(http_get("$url/old?stream=100&partition=0&cursor=" . ($start + 4), $alice,
		Accept => 'text/event-stream')->{status}, 200, 'an SSE cursor just below the head row: 200');
}

# --- payload attachment
$node->safe_psql('postgres', q{
	insert into event_body values (cfeed.publish(4, 0), 'hello');
});
wait_stamped();
my $tok4 = decode_json(http_get("$url/plain", $alice)->{content})->{token};
@data = map { $_->{data} } grep { $_->{data} } ndjson(http_get("$url/plain?token=$tok4&partition=0&cursor=_first", $alice)->{content});
is($data[0]{payload}{body}, 'hello', 'payload from the configured relation, joined on change_id');

# --- a spec-following consumer under concurrent writers with aborts
write_writer_script("$dir/writer.sql");
my $writers = start([ 'pgbench', '-n', '-c', '4', '-T', '4', '-f', "$dir/writer.sql",
	  '-h', $node->host, '-p', $node->port, 'postgres' ], '>', \my $wout, '2>', \my $werr);

my %cursor = (0 => '_first', 1 => '_first');
my %got = (0 => [], 1 => []);
my $deadline = time + 60;
my $writers_done = 0;
while (time < $deadline)
{
	my $d = decode_json(http_get("$url/orders", $alice)->{content});
	my $conflict = 0;
	for my $p (map { $_->{id} } @{ $d->{partitions} })
	{
		my $resp = http_get("$url/orders?token=$d->{token}&partition=$p&cursor=$cursor{$p}&stream=300", $alice);
		if ($resp->{status} == 409) { $conflict = 1; last; }
		die "fetch failed: $resp->{status} $resp->{content}" unless $resp->{status} == 200;
		for my $line (ndjson($resp->{content}))
		{
			push @{ $got{$p} }, $line->{data}{change_id} if $line->{data};
			$cursor{$p} = $line->{cursor} if defined $line->{cursor};
		}
	}
	next if $conflict;
	$writers->pump_nb if !$writers_done && $writers->pumpable;
	if (!$writers_done && !$writers->pumpable)    # pgbench has ended
	{
		$writers->finish;
		$writers_done = 1;
		wait_stamped();
		next;
	}
	last if $writers_done && $node->safe_psql('postgres',
		"select string_agg(cfeed.head(1, s)::text, ',' order by s) from generate_series(0, 1) s")
	  eq number_of($cursor{0}) . ',' . number_of($cursor{1});
}
for my $p (0, 1)
{
	my $expect = $node->safe_psql('postgres',
		"select string_agg(change_id::text, ',' order by change_sequence_number) from cfeed.change where feed_id = 1 and shard = $p");
	is(join(',', @{ $got{$p} }), $expect, "consumer under writers with aborts: shard $p complete, once, in order");
}

# --- gzip when Accept-Encoding allows it (issue 30 item 9: never)
{
	my $page = "$url/orders?token=$token&partition=0&cursor=_first&pageSizeHint=500";
	my $plain = http_get($page, $alice);
	my $gz = http_get($page, $alice, 'Accept-Encoding' => 'gzip, deflate');
	is($gz->{headers}{'content-encoding'}, 'gzip', 'Accept-Encoding: gzip: a gzip page');
	like($gz->{headers}{vary}, qr/Accept-Encoding/, 'which varies with Accept-Encoding');
	like($gz->{headers}{vary}, qr/\bAccept\b(?!-)/, 'and with Accept (the same URL answers Server-Sent Events)');
	IO::Uncompress::Gunzip::gunzip(\$gz->{content}, \my $unzipped);
	is($unzipped, $plain->{content}, 'and unzips to the plain page');
	ok(length $gz->{content} < length($plain->{content}) / 4,
		'and is smaller (' . length($gz->{content}) . ' bytes, plain ' . length($plain->{content}) . ')');
	ok(!defined $plain->{headers}{'content-encoding'}, 'no Accept-Encoding: no gzip');
	ok(!defined http_get($page, $alice, 'Accept-Encoding' => 'gzip;q=0, *')->{headers}{'content-encoding'},
		'gzip;q=0: no gzip');
}

# --- 409 after a shard is added; a stream with the old token ends with a
# cursor, an SSE stream with a final id (issue 30 item 4: it went on, and
# never got the new shard's changes)
my $old = decode_json(http_get("$url/orders", $alice)->{content})->{token};
my $sout = '';
my $stream = start_stream("$url/orders?token=$old&partition=0&cursor=_last&stream=y", $alice, \$sout);
wait_streaming($stream, \$sout);
my $sse_out = '';
my $sse = start_stream("$url/orders?cursor=_last", $alice, \$sse_out, Accept => 'text/event-stream');
wait_streaming($sse, \$sse_out);
$node->safe_psql('postgres', 'insert into cfeed.shard (feed_id, shard) values (1, 2)');
$stream->finish;
@lines = ndjson($sout);
ok(defined $lines[-1]{cursor}, 'stream with a token made stale ends with a final cursor');
my $sse_until = time + 20;
$sse->pump_nb, usleep(20_000) while $sse->pumpable && time < $sse_until;
ok(!$sse->pumpable, 'an SSE stream ends when the shards change');
$sse->kill_kill if $sse->pumpable;
my (undef, $sse_id) = sse_events($sse_out);
like($sse_id // '', qr/^(\d+|_first)(\.\d+\.\d+:\d+)?\@\d+$/, 'with a final id (compact: docs/serve.md)');
$node->safe_psql('postgres', 'select cfeed.publish(1, 2)');
wait_stamped();
my ($sse_new) = sse_events(sse_collect("$url/orders", $alice, 1, undef, 'Last-Event-ID' => $sse_id // ''));
is(join(',', map { $_->{data}{shard} } @$sse_new), '2', 'reconnected from that id, it gets the new shard');
is(http_get("$url/orders?token=$old&partition=0&cursor=_first", $alice)->{status}, 409, 'fetch after shards were added: 409');
$disc = decode_json(http_get("$url/orders", $alice)->{content});
is(scalar @{ $disc->{partitions} }, 3, 'discovery shows the new partition');
isnt($disc->{token}, $old, 'and a new token');

# --- SSE, resumed after a gateway restart with Last-Event-ID
my $sse_text = '';
$stream = start_stream("$url/orders?cursor=_first", $alice, \$sse_text, Accept => 'text/event-stream');
$node->safe_psql('postgres', 'select cfeed.publish(1, g % 3) from generate_series(1, 30) g');
wait_stamped();
my $total = $node->safe_psql('postgres', 'select count(*) from cfeed.change where feed_id = 1');
pump_events($stream, \$sse_text, $total);
stop_gateway($gw);
$stream->finish;
my ($ev1, $last_id) = sse_events($sse_text);
is(scalar @$ev1, $total, 'SSE: every change of every shard');
like($last_id, qr/^\d+(\.\d+\.\d+:\d+)?\@\d+$/, 'SSE id is compact: LO[.HI.SHARD:NUMBER]\@EPOCH');
$node->safe_psql('postgres', 'select cfeed.publish(1, g % 3) from generate_series(1, 9) g');
wait_stamped();
$gw = start_gateway(dsn => $dsn, tokens => "$dir/tokens", port => $gw->{port});
my $resumed = sse_collect("$url/orders", $alice, 9, undef, 'Last-Event-ID' => $last_id);
like($resumed, qr/^retry: \d+\nid: /, 'SSE resume: a stream');
my ($ev2) = sse_events($resumed);
my @all = map { "$_->{data}{shard}:$_->{data}{number}" } @$ev1, @$ev2;
my $expect = $node->safe_psql('postgres',
	"select string_agg(shard || ':' || change_sequence_number, ',' order by shard, change_sequence_number) from cfeed.change where feed_id = 1");
is(join(',', sort { my @x = split /:/, $a; my @y = split /:/, $b; $x[0] <=> $y[0] || $x[1] <=> $y[1] } @all), $expect,
	'SSE across a restart: nothing skipped');
my %seen;
is(scalar(grep { $seen{$_}++ } @all), 0, 'SSE across a restart: nothing repeated');
is(http_get("$url/orders", $alice, Accept => 'text/event-stream', 'Last-Event-ID' => 'garbage')->{status}, 400, 'bad Last-Event-ID: 400');
# an id of the stream's form whose time is years ahead: no database of this
# feed is that far behind, so it was never sent (a review: 200 and "retry"
# for ever, the EventSource reconnecting every second)
{
	my (undef, $real_id) = sse_events($resumed);
	my ($epoch) = ($real_id // '') =~ /@(\d+)$/;
	(my $inverted = $real_id // '') =~ s/^\d+/9999999999999999/;
	note("id $real_id, made up 9999999999999999\@$epoch and $inverted");
	is(http_get("$url/orders", $alice, Accept => 'text/event-stream', 'Last-Event-ID' => "9999999999999999\@$epoch")->{status},
		400, 'a Last-Event-ID with a time far ahead: 400');
	is(http_get("$url/orders", $alice, Accept => 'text/event-stream', 'Last-Event-ID' => $inverted)->{status},
		400, 'a mid-round Last-Event-ID whose round ends before it begins: 400');
}

# --- metrics and health: the gateway's own series to anyone (--metrics
# open), the series that name feeds to a token of every feed only
my $all_token = 'all-0123456789abcdefgh';
$r = http_get("$gw->{url}/metrics");
like($r->{content}, qr/^cfeed_serve_events_sent_total \d+$/m, 'metrics: events sent');
like($r->{content}, qr/^cfeed_serve_delivery_seconds_bucket\{le="\+Inf"\} \d+$/m, 'metrics: latency histogram');
unlike($r->{content}, qr/feed=/, 'metrics without a token: no series names a feed');
unlike(http_get("$gw->{url}/metrics", $alice)->{content}, qr/feed=/,
	'metrics for a token of some feeds: no series names a feed');
like(http_get("$gw->{url}/metrics", $all_token)->{content}, qr/^cfeed_serve_shard_head\{feed="orders",shard="0"\} \d+$/m,
	'metrics for a token of every feed: the shards\' series');
# a consumer group's dead letters and failing shards (cfeed.groups), read by
# the hub every --refresh-ms; the group name escaped as a label value
$node->safe_psql('postgres', q{
	select from cfeed.acquire('dl"q\', 1, 'a');
	select from cfeed.set_failure_policy('dl"q\', 1, max_attempts => 1, dead_letter => true);
	select from cfeed.lease l
	cross join lateral cfeed.fail(l.group_name, 1, l.shard, 'a', l.epoch, l.cursor + l.shard + 1, 'poison') f
	where l.group_name = 'dl"q\' and l.shard <= 1 order by l.shard;});
my $labels = qr/\{group="dl\\"q\\\\",feed="orders"\}/;
$deadline = time + 10;
$r = http_get("$gw->{url}/metrics", $all_token);
while ($r->{content} !~ /^cfeed_serve_group_dead_letters$labels 1$/m && time < $deadline)
{
	usleep(50_000);
	$r = http_get("$gw->{url}/metrics", $all_token);
}
like($r->{content}, qr/^cfeed_serve_group_dead_letters$labels 1$/m,
	'metrics: a group\'s dead letters (shard 0: its next change, set aside)');
like($r->{content}, qr/^cfeed_serve_group_failing_shards$labels 1$/m,
	'metrics: its shards retrying a failed change (shard 1: not its next change)');
is(http_get("$gw->{url}/healthz")->{status}, 200, 'healthz: 200');

# --- the database restarts under an open stream: 503 meanwhile, the hub
# reconnects with backoff (heartbeats do not hurry it), the stream goes on
my $tokr = decode_json(http_get("$url/orders", $alice)->{content})->{token};
my $headr = $node->safe_psql('postgres', 'select cfeed.head(1, 0)');
$sout = '';
$stream = start_stream("$url/orders?token=$tokr&partition=0&cursor=$headr&stream=y", $alice, \$sout);
wait_streaming($stream, \$sout);
my $attempts = sub { scalar(() = slurp_file($gw->{log}) =~ /hub: could not connect/g) };
$stream->pump_nb;
$node->stop('fast');
my $attempts0 = $attempts->();
my $seen = length $sout;
my $down_until = time + 3;    # a window to count retries and heartbeats in, not a wait
while (time < $down_until)
{
	$stream->pump_nb;
	usleep(50_000);
}
my $tried = $attempts->() - $attempts0;
ok($tried >= 2 && $tried <= 8, "database down: the hub retries with backoff ($tried attempts in 3 s)");
my $beats = () = substr($sout, $seen) =~ /^\{"cursor":"$headr\@\d+"\}$/mg;
ok($beats >= 2, "database down: the stream still gets its heartbeats ($beats in 3 s)");
is(http_get("$gw->{url}/healthz")->{status}, 503, 'healthz: 503 while the database is down');
$node->start;
$node->safe_psql('postgres', 'select cfeed.publish(1, 0) from generate_series(1, 3)');
my $sse_deadline = time + 30;
while ((() = $sout =~ /"data"/g) < 3 && time < $sse_deadline)
{
	$stream->pump_nb;
	usleep(50_000);
}
$stream->kill_kill;
@data = map { $_->{data} } grep { $_->{data} } ndjson($sout =~ s/[^\n]*\z//r);
is_deeply([ map { $_->{number} } @data ], [ $headr + 1 .. $headr + 3 ],
	'a stream open across the database restart gets the changes after it');
is(http_get("$gw->{url}/healthz")->{status}, 200, 'healthz: 200 after the hub reconnected');

# an immutable page is the same after the restart began a new epoch (issue
# 30 item 9: its cursor line carried the new epoch)
isnt($node->safe_psql('postgres', 'select cfeed.epoch()'), $epoch0, 'the restart began a new epoch');
$r = http_get($page1 =~ s/token=[^&]+/token=$tokr/r, $alice);    # a shard was added since
is($r->{content}, $page1_body, 'an immutable page is the same in the new epoch');
like($r->{headers}{'cache-control'}, qr/immutable/, 'and still immutable');

# --- a stream still catching up when the database goes down waits for its
# retry, 500 ms later, instead of spinning the one HTTP thread until then.
# Its client reads nothing until the database is down (the gateway stops
# when the socket buffers are full, ~18 MB short of the head), then reads
# as fast as it can: the gateway sends what the buffers held and needs its
# next page from the database.
$node->safe_psql('postgres', 'select cfeed.publish(1, 1) from generate_series(1, 100000)');
wait_stamped();
my $head1 = $node->safe_psql('postgres', 'select cfeed.head(1, 1)');
my $tokc = decode_json(http_get("$url/orders", $alice)->{content})->{token};
my $cout = '';
my $catching = start_stream("$url/orders?token=$tokc&partition=1&cursor=_first&stream=y", $alice, \$cout);
wait_stalled($gw);
$node->stop('fast');
my $gw_cpu = sub {
	my @stat = split / /, slurp_file("/proc/$gw->{handle}{KIDS}[0]{PID}/stat") =~ s/^.*\) //sr;
	return ($stat[11] + $stat[12]) / 100;    # utime + stime, in clock ticks
};
my $cpu0 = $gw_cpu->();
$down_until = time + 4;    # a window to measure the gateway's CPU in, not a wait
while (time < $down_until)
{
	$catching->pump_nb;
	usleep(1_000);
}
my $spent = $gw_cpu->() - $cpu0;
my $got = length $cout;
ok($spent < 1, "a stream catching up while the database is down waits for its retry (gateway CPU $spent s in 4 s, $got bytes sent)");
$node->start;
$sse_deadline = time + 60;
while (substr($cout, -4096) !~ /"number"\s*:\s*$head1\b/ && time < $sse_deadline)
{
	$catching->pump_nb;
	usleep(1_000);
}
$catching->kill_kill;
my @caught = $cout =~ /"number"\s*:\s*(\d+)/g;
my $first1 = $node->safe_psql('postgres',
	'select min(change_sequence_number) from cfeed.change where feed_id = 1 and shard = 1');
ok(@caught == $head1 - $first1 + 1 && !grep({ $caught[$_] != $first1 + $_ } 0 .. $#caught),
	'and it catches up, once and in order, after the database is back (' . scalar(@caught) . ' events)');

# --- the gateway's role needs cfeed's read grant too
$node->safe_psql('postgres', q{
	create role gw login;
	grant select on cfeed.feed, cfeed.change, cfeed.shard to gw;
	select cfeed.grant_read(1, 'gw');
});
stop_gateway($gw);
$gw = start_gateway(dsn => $node->connstr('postgres') . ' user=gw', tokens => "$dir/tokens", port => $gw->{port});
is(http_get("$url/orders", 'all-0123456789abcdefgh')->{status}, 200, 'gateway role granted feed orders: 200');
$r = http_get("$url/other", 'all-0123456789abcdefgh');
is($r->{status}, 403, 'gateway role not granted feed other: 403');
is($r->{content}, http_get("$url/nosuch", 'all-0123456789abcdefgh')->{content},
	'a * token cannot tell a feed the role may not read from a missing one');

# --- 410 is decided by the shard's retention floor: changes the gateway's
# role is not shown (of a tracked table it may not SELECT) are no gap
$node->safe_psql('postgres', q{
	select cfeed.create_feed('mixed', 1, 5);
	update cfeed.feed set retention = '1 day' where feed_id = 5;
	create table open_t (id int primary key);
	create table secret_t (id int primary key);
	select cfeed.track('open_t', 5);
	select cfeed.track('secret_t', 5);
	grant select on open_t, cfeed.row_image to gw;
	select cfeed.grant_read(5, 'gw');
	insert into open_t values (1);
	insert into secret_t values (1);
	insert into open_t values (2);
});
wait_stamped();
my $all = 'all-0123456789abcdefgh';
my $tok5 = decode_json(http_get("$url/mixed", $all)->{content})->{token};
$r = http_get("$url/mixed?token=$tok5&partition=0&cursor=" . ($start + 1), $all);
is($r->{status}, 200, 'a change the gateway role may not read is not taken for a retention gap');
is_deeply([ map { $_->{data}{number} } grep { $_->{data} } ndjson($r->{content}) ], [ $start + 3 ],
	'the page passes the change the gateway role may not read');
$node->safe_psql('postgres', q{
	update cfeed.feed set retention = '1 millisecond' where feed_id = 5;
});
wait_retention_due(5);
$node->safe_psql('postgres', 'select cfeed.apply_retention(true)');
is(http_get("$url/mixed?token=$tok5&partition=0&cursor=" . ($start + 1), $all)->{status}, 410,
	'retention removed changes after the cursor (one the gateway role may not read): 410');
is(http_get("$url/mixed?token=$tok5&partition=0&cursor=" . ($start + 2), $all)->{status}, 200,
	'a cursor at the retention floor: 200');
stop_gateway($gw);

# --- --idle-timeout-s: a connection that sends nothing, or stops halfway
# through its request's headers, is closed after it (they held one of
# --max-clients for 120 s, and could keep everyone out, /healthz included);
# a stream waiting for changes is not, though its heartbeats are further apart
$gw = start_gateway(dsn => $dsn, tokens => "$dir/tokens", port => $gw->{port},
	args => [ '--idle-timeout-s', '2', '--heartbeat-ms', '8000' ]);
{
	my @socks = map {
		IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $gw->{port}, Timeout => 10) or die "connect: $!"
	} 1 .. 2;
	print { $socks[1] } "GET /healthz HTTP/1.1\r\nHost: t\r\n";
	my $stream_out = '';
	my $stream = start_stream("$url/orders?cursor=_last", $alice, \$stream_out, Accept => 'text/event-stream');
	sleep 4;
	for my $i (0, 1)
	{
		my $sel = IO::Select->new($socks[$i]);
		my $got = '';
		my $closed = $sel->can_read(5) && !sysread($socks[$i], $got, 4096);
		ok($closed, ('a connection that sent nothing', 'a connection that stopped within its headers')[$i]
			  . ' is closed after --idle-timeout-s');
	}
	ok($stream->pumpable, 'a stream waiting longer than --idle-timeout-s is still open');
	$node->safe_psql('postgres', 'select cfeed.publish(1, 0)');
	is(pump_events($stream, \$stream_out, 1), 1, 'and gets the next change');
	$stream->kill_kill;
	close $_ for @socks;
}
stop_gateway($gw);

# --- --metrics token: /metrics, which names every feed the gateway follows,
# only for a token of every feed (*); --metrics off: 404
$gw = start_gateway(dsn => $dsn, tokens => "$dir/tokens", port => $gw->{port}, args => [ '--metrics', 'token' ]);
$r = http_get("$gw->{url}/metrics");
is($r->{status}, 401, '--metrics token: no token, 401');
is($r->{headers}{'www-authenticate'}, 'Bearer realm="cfeed"', '--metrics token: 401 asks for a bearer token');
is(http_get("$gw->{url}/metrics", 'nosuch-0123456789abcdef')->{status}, 401, '--metrics token: an unknown token, 401');
$r = http_get("$gw->{url}/metrics", $alice);
is($r->{status}, 403, '--metrics token: a token of some feeds, 403');
unlike($r->{content}, qr/cfeed_serve_/, '--metrics token: a 403 shows no metric');
$r = http_get("$gw->{url}/metrics", $all);
is($r->{status}, 200, '--metrics token: a * token, 200');
like($r->{content}, qr/^cfeed_serve_requests_total \d+$/m, '--metrics token: the * token gets the metrics');
is(http_get("$url/orders", $alice)->{status}, 200, '--metrics token: feed requests as before');
stop_gateway($gw);
$gw = start_gateway(dsn => $dsn, tokens => "$dir/tokens", port => $gw->{port}, args => [ '--metrics', 'off' ]);
is(http_get("$gw->{url}/metrics", $all)->{status}, 404, '--metrics off: 404, even for a * token');
stop_gateway($gw);
{
	my ($out, $err) = ('', '');
	IPC::Run::run([ cfeed_binary(), 'serve', '--tokens', "$dir/tokens", '--metrics', 'sometimes' ],
		'>', \$out, '2>', \$err);
	is($? >> 8, 2, '--metrics sometimes: exit 2');
	like($err, qr/--metrics must be open, token or off/, '--metrics sometimes: the message says why');
}

# --- serving from a hot standby (cfeed.wait instead of LISTEN)
$node->backup('b');
my $standby = PostgreSQL::Test::Cluster->new('serve_standby');
$standby->init_from_backup($node, 'b', has_streaming => 1);
$standby->append_conf('postgresql.conf', "log_statement = 'all'\n");
$standby->start;
$node->wait_for_catchup($standby);
my $sgw = start_gateway(dsn => $standby->connstr('postgres'), tokens => "$dir/tokens");
my $surl = "$sgw->{url}/feeds/other";
my $stok = decode_json(http_get($surl, $bob)->{content})->{token};
$sout = '';
$stream = start_stream("$surl?token=$stok&partition=0&cursor=_last&stream=y", $bob, \$sout);
wait_streaming($stream, \$sout);
$node->safe_psql('postgres', 'select cfeed.publish(2, 0) from generate_series(1, 3)');
wait_for('3 changes on the standby\'s stream', 30, sub { (() = $sout =~ /"data".*\n/g) >= 3 }, $stream);
$stream->kill_kill;
@data = map { $_->{data} } grep { $_->{data} } ndjson($sout =~ s/[^\n]*\z//r);
is(scalar @data, 3, 'standby: a stream at the head gets the new changes');
like(slurp_file($sgw->{log}), qr/hot standby/, 'standby: the hub waits with cfeed.wait');

# An all-shards stream on the standby: the hub follows two shards, so it
# polls, every 50 ms, with one query of their heads, and reads only a
# shard past its tail.  Up to 1.9 it read every followed shard at every
# poll (40 reads a second here, 20,000 for a 1,000-shard stream).
my $ssse = '';
$stream = start_stream("$sgw->{url}/feeds/orders?cursor=_last", $alice, \$ssse, Accept => 'text/event-stream');
my $sready = time + 60;
$stream->pump_nb, usleep(10_000) while $ssse !~ /^id:.*\n\n/m && time < $sready;
$node->safe_psql('postgres', 'select cfeed.publish(1, s) from generate_series(0, 1) s');
pump_events($stream, \$ssse, 2);
my ($sev) = sse_events($ssse);
is(scalar(@$sev), 2, 'standby: an all-shards stream gets the new change of each shard');
# the hub's backend (its last connection: the checks below would count
# nothing of an earlier one)
my ($shub) = (slurp_file($sgw->{log}) =~ /hub: connected to the database \(backend (\d+)\)/g)[-1];
my $slog = -s $standby->logfile;
my $squiet = time + 1.5;
$stream->pump_nb, usleep(50_000) while time < $squiet;
my @spolls = grep { /\[\Q$shub\E\].*(?:statement|execute [^:]*): / } split /\n/, slurp_file($standby->logfile, $slog);
cmp_ok(scalar(grep { /ordinality/ } @spolls), '>', 5, 'standby: the idle stream\'s hub polls the heads');
is(scalar(grep { /select r\.change_sequence_number/ } @spolls), 0, 'standby: ... and reads no shard while none moves');
$node->safe_psql('postgres', 'select cfeed.publish(1, 1)');
pump_events($stream, \$ssse, 3);
($sev) = sse_events($ssse);
is(scalar(@$sev), 3, 'standby: ... and the next change comes');

# The standby promoted under the gateway: the hub's session lives on; it
# asks once a second whether the server is still in recovery, then
# LISTENs and stops polling.  Up to 1.9 it polled for the rest of the
# session.
$standby->promote;
wait_for('the hub to notice the promotion', 30, sub { slurp_file($sgw->{log}) =~ /standby was promoted/ }, $stream);
$slog = -s $standby->logfile;
$squiet = time + 1.5;
$stream->pump_nb, usleep(50_000) while time < $squiet;
@spolls = grep { /\[\Q$shub\E\].*(?:statement|execute [^:]*): / } split /\n/, slurp_file($standby->logfile, $slog);
is($standby->safe_psql('postgres', "select count(*) from pg_stat_activity where pid = $shub"), '1',
	'promoted: the hub kept its session');
cmp_ok(scalar(grep { /ordinality/ } @spolls), '<=', 1, 'promoted: the hub stops polling the heads (a safety pass at most)');
my $pid_change = $standby->safe_psql('postgres', 'select cfeed.publish(1, 0)');
pump_events($stream, \$ssse, 4);
($sev) = sse_events($ssse);
is($sev->[-1]{data}{change_id}, $pid_change,
	'promoted: a change published there comes through LISTEN');
$stream->kill_kill;

# --- graceful shutdown: an open stream ends with a final cursor
$sout = '';
$stream = start_stream("$surl?token=$stok&partition=0&cursor=_first&stream=y", $bob, \$sout);
wait_streaming($stream, \$sout);
stop_gateway($sgw);
like(slurp_file($sgw->{log}), qr/info: stopped$/m, 'SIGTERM: the gateway stopped cleanly');
$stream->finish;
@lines = ndjson($sout);
is(number_of($lines[-1]{cursor}), $data[-1]{number}, 'SIGTERM: the stream ended with its final cursor');

done_testing();
