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
write_tokens("$dir/tokens", '# token feeds label', "$alice orders,old,plain alice", "$bob other bob");

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
ok($disc->{stream} && $disc->{exactlyOnce}, 'discovery: stream and exactlyOnce');
my $token = $disc->{token};
like($token, qr/\S/, 'discovery: a token');

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

$r = http_get("$f&partition=0&cursor=$start&pageSizeHint=1", $alice);
@lines = ndjson($r->{content});
is(scalar(grep { $_->{data} } @lines), 1, 'pageSizeHint=1: one event');
is(number_of($lines[-1]{cursor}), $start + 1, 'pageSizeHint=1: its cursor');
like($r->{headers}{'cache-control'}, qr/^private, max-age=\d+, immutable$/, 'a full page below the head is immutable');
$r = http_get("$f&partition=0&cursor=" . ($start + $n0 - 1) . "&pageSizeHint=5", $alice);
is($r->{headers}{'cache-control'}, 'no-store', 'a page reaching the head is not cached');

# --- errors
for my $case (
	[ "$f&partition=0", 'no cursor' ],
	[ "$f&cursor=_first", 'no partition' ],
	[ "$f&partition=7&cursor=_first", 'unknown partition' ],
	[ "$f&partition=0&cursor=abc", 'bad cursor' ],
	[ "$f&partition=0&cursor=_first&pageSizeHint=0", 'bad pageSizeHint' ],
	[ "$f&partition=0&cursor=_first&stream=soon", 'bad stream' ],
	[ "$f&partition=0&cursor=_first&stream=100&pageSizeHint=5", 'stream with pageSizeHint' ],
	[ "$url/orders?cursor0=1", 'FeedAPI v1 arguments' ])
{
	$r = http_get($case->[0], $alice);
	is($r->{status}, 400, "400: $case->[1]");
	ok(eval { decode_json($r->{content})->{error} }, "400 has a JSON error: $case->[1]");
}
is(http_get("$url/orders?token=stale&partition=0&cursor=_first", $alice)->{status}, 409, 'stale token: 409');
is(http_get("$url/nosuch", 'x' x 0 || $alice)->{status}, 403, 'unknown feed not granted: 403');
is(http_get("$gw->{url}/elsewhere", $alice)->{status}, 404, 'unknown path: 404');

# 404: a granted name that does not exist (a token for every feed)
append_to_file("$dir/tokens", "all-0123456789abcdefgh * ops\n");
stop_gateway($gw);
$gw = start_gateway(dsn => $dsn, tokens => "$dir/tokens", port => $gw->{port},
	args => [ '--payload', 'plain=public.event_body' ]);
is(http_get("$url/nosuch", 'all-0123456789abcdefgh')->{status}, 404, 'unknown feed: 404');

# --- 410 after retention removed changes past a cursor
$node->safe_psql('postgres', q{
	select cfeed.publish(3, 0) from generate_series(1, 5);
});
wait_stamped();
$node->safe_psql('postgres', q{
	update cfeed.feed set retention = '1 millisecond' where feed_id = 3;
	select pg_sleep(0.01);
	select cfeed.apply_retention(true);
});
my $tok3 = decode_json(http_get("$url/old", $alice)->{content})->{token};
$r = http_get("$url/old?token=$tok3&partition=0&cursor=$start", $alice);
is($r->{status}, 410, 'cursor whose next changes retention removed: 410');
$r = http_get("$url/old?token=$tok3&partition=0&cursor=" . ($start + 4), $alice);
is($r->{status}, 200, 'cursor just below the head row: 200');

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

my $writers_end = time + 4;
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
	if (!$writers_done && time > $writers_end)
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

# --- 409 after a shard is added; a stream with the old token ends with a cursor
my $old = decode_json(http_get("$url/orders", $alice)->{content})->{token};
my $sout = '';
my $stream = start_stream("$url/orders?token=$old&partition=0&cursor=_last&stream=y", $alice, \$sout);
usleep(300_000);
$node->safe_psql('postgres', 'insert into cfeed.shard (feed_id, shard) values (1, 2)');
$stream->finish;
@lines = ndjson($sout);
ok(defined $lines[-1]{cursor}, 'stream with a token made stale ends with a final cursor');
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
my $sse_deadline = time + 120;
my ($sse_seen, $sse_counted) = (0, 0);	# data lines counted in the text read so far
while ($sse_seen < $total && time < $sse_deadline)
{
	$stream->pump_nb;
	my $upto = rindex($sse_text, "\n") + 1;
	$sse_seen += () = substr($sse_text, $sse_counted, $upto - $sse_counted) =~ /^data:/mg;
	$sse_counted = $upto;
	usleep(1_000);
}
stop_gateway($gw);
$stream->finish;
my ($ev1, $last_id) = sse_events($sse_text);
is(scalar @$ev1, $total, 'SSE: every change of every shard');
like($last_id, qr/^\d+:\d+\@\d+(,\d+:\d+\@\d+)*$/, 'SSE id lists shard:number@epoch');
$node->safe_psql('postgres', 'select cfeed.publish(1, g % 3) from generate_series(1, 9) g');
wait_stamped();
$gw = start_gateway(dsn => $dsn, tokens => "$dir/tokens", port => $gw->{port});
$r = http_get("$url/orders?stream=1500", $alice, Accept => 'text/event-stream', 'Last-Event-ID' => $last_id);
is($r->{status}, 200, 'SSE resume: 200');
my ($ev2) = sse_events($r->{content});
my @all = map { "$_->{data}{shard}:$_->{data}{number}" } @$ev1, @$ev2;
my $expect = $node->safe_psql('postgres',
	"select string_agg(shard || ':' || change_sequence_number, ',' order by shard, change_sequence_number) from cfeed.change where feed_id = 1");
is(join(',', sort { my @x = split /:/, $a; my @y = split /:/, $b; $x[0] <=> $y[0] || $x[1] <=> $y[1] } @all), $expect,
	'SSE across a restart: nothing skipped');
my %seen;
is(scalar(grep { $seen{$_}++ } @all), 0, 'SSE across a restart: nothing repeated');
is(http_get("$url/orders", $alice, Accept => 'text/event-stream', 'Last-Event-ID' => 'garbage')->{status}, 400, 'bad Last-Event-ID: 400');

# --- metrics and health
$r = http_get("$gw->{url}/metrics");
like($r->{content}, qr/^cfeed_serve_events_sent_total \d+$/m, 'metrics: events sent');
like($r->{content}, qr/^cfeed_serve_delivery_seconds_bucket\{le="\+Inf"\} \d+$/m, 'metrics: latency histogram');
# a consumer group's dead letters and failing shards (cfeed.groups), read by
# the hub every --refresh-ms; the group name escaped as a label value
$node->safe_psql('postgres', q{
	select from cfeed.acquire('dl"q\', 1, 'a');
	select from cfeed.set_failure_policy('dl"q\', 1, max_attempts => 1, dead_letter => true);
	select from cfeed.lease l
	cross join lateral cfeed.fail(l.group_name, 1, l.shard, 'a', l.epoch, l.cursor + l.shard + 1, 'poison') f
	where l.group_name = 'dl"q\' and l.shard <= 1 order by l.shard;});
my $labels = qr/\{group="dl\\"q\\\\",feed="orders"\}/;
my $deadline = time + 10;
$r = http_get("$gw->{url}/metrics");
while ($r->{content} !~ /^cfeed_serve_group_dead_letters$labels 1$/m && time < $deadline)
{
	usleep(50_000);
	$r = http_get("$gw->{url}/metrics");
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
usleep(300_000);
my $attempts = sub { scalar(() = slurp_file($gw->{log}) =~ /hub: could not connect/g) };
$stream->pump_nb;
$node->stop('fast');
my $attempts0 = $attempts->();
my $seen = length $sout;
my $down_until = time + 3;
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
$sse_deadline = time + 30;
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
usleep(500_000);
$node->stop('fast');
my $gw_cpu = sub {
	my @stat = split / /, slurp_file("/proc/$gw->{handle}{KIDS}[0]{PID}/stat") =~ s/^.*\) //sr;
	return ($stat[11] + $stat[12]) / 100;    # utime + stime, in clock ticks
};
my $cpu0 = $gw_cpu->();
$down_until = time + 4;
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
is(http_get("$url/other", 'all-0123456789abcdefgh')->{status}, 403, 'gateway role not granted feed other: 403');

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
	select pg_sleep(0.01);
	select cfeed.apply_retention(true);
});
is(http_get("$url/mixed?token=$tok5&partition=0&cursor=" . ($start + 1), $all)->{status}, 410,
	'retention removed changes after the cursor (one the gateway role may not read): 410');
is(http_get("$url/mixed?token=$tok5&partition=0&cursor=" . ($start + 2), $all)->{status}, 200,
	'a cursor at the retention floor: 200');
stop_gateway($gw);

# --- serving from a hot standby (cfeed.wait instead of LISTEN)
$node->backup('b');
my $standby = PostgreSQL::Test::Cluster->new('serve_standby');
$standby->init_from_backup($node, 'b', has_streaming => 1);
$standby->start;
$node->wait_for_catchup($standby);
my $sgw = start_gateway(dsn => $standby->connstr('postgres'), tokens => "$dir/tokens");
my $surl = "$sgw->{url}/feeds/other";
my $stok = decode_json(http_get($surl, $bob)->{content})->{token};
$sout = '';
$stream = start_stream("$surl?token=$stok&partition=0&cursor=_last&stream=4000", $bob, \$sout);
usleep(500_000);
$node->safe_psql('postgres', 'select cfeed.publish(2, 0) from generate_series(1, 3)');
$stream->finish;
@data = map { $_->{data} } grep { $_->{data} } ndjson($sout);
is(scalar @data, 3, 'standby: a stream at the head gets the new changes');
like(slurp_file($sgw->{log}), qr/hot standby/, 'standby: the hub waits with cfeed.wait');

# --- graceful shutdown: an open stream ends with a final cursor
$sout = '';
$stream = start_stream("$surl?token=$stok&partition=0&cursor=_first&stream=y", $bob, \$sout);
usleep(500_000);
stop_gateway($sgw);
like(slurp_file($sgw->{log}), qr/info: stopped$/m, 'SIGTERM: the gateway stopped cleanly');
$stream->finish;
@lines = ndjson($sout);
is(number_of($lines[-1]{cursor}), $data[-1]{number}, 'SIGTERM: the stream ended with its final cursor');

done_testing();
