# test/t/101_serve_browser.pl
#
# `cfeed serve` and a real browser: headless Chromium opens a page whose
# EventSource streams a feed from the gateway (CORS with --allow-origin)
# while writers commit and abort; the gateway is restarted mid-stream, so
# the browser reconnects on its own with Last-Event-ID.  The page posts what
# it received to a small listener of this test (which also serves the
# page); the test checks that every committed change arrived once, in
# order, per shard.  Then the database goes down under a page whose
# streams end every 1.5 s: EventSource reconnects into the outage, is told
# to retry, and gets every change once the database is back.  Skipped when
# no Chromium is installed.

use strict;
use warnings;

use File::Path qw(make_path);
use IPC::Run qw(start);
use JSON::PP;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep time);
use lib 'test/t';
use ServeHelper;

my ($chromium) = grep { -x } map { my $d = $_; map { "$d/$_" } qw(chromium chromium-browser) }
  split /:/, $ENV{PATH};
plan skip_all => 'no chromium binary in PATH' unless defined $chromium;
plan skip_all => 'cfeed command not built' unless -x cfeed_binary();

my $node = PostgreSQL::Test::Cluster->new('serve_browser');
$node->init;
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'cfeed'\n");
$node->start;
$node->safe_psql('postgres', q{
	create extension cfeed;
	select cfeed.create_feed('orders', 2, 1);
	select cfeed.publish(1, g % 2) from generate_series(1, 20) g;
});

my $dir = PostgreSQL::Test::Utils::tempdir();
my $token = 'browser-0123456789abcdef';
write_tokens("$dir/tokens", "$token orders browser");

# The listener: serves the page at / and appends every POST body to a file,
# one line each (a process per connection: the browser may open sockets it
# never uses).
my $lport = PostgreSQL::Test::Cluster::get_free_port();
my $origin = "http://127.0.0.1:$lport";
my $received = "$dir/received";
my $listener_script = q{
	use IO::Socket::INET; use Fcntl qw(:flock);
	my ($port, $page, $out) = @ARGV;
	my $srv = IO::Socket::INET->new(LocalAddr => '127.0.0.1', LocalPort => $port,
		Listen => 32, ReuseAddr => 1) or die "listen: $!";
	$SIG{CHLD} = 'IGNORE';
	while (1)
	{
		my $c = $srv->accept or next;
		if (fork) { close $c; next; }
		my ($line, %h, $body) = (scalar <$c>);
		exit 0 unless defined $line;
		while (my $hl = <$c>)
		{
			last if $hl =~ /^\r?\n$/;
			$h{lc $1} = $2 if $hl =~ /^([^:]+):\s*(.*?)\r?$/;
		}
		read($c, $body, $h{'content-length'} // 0);
		if ($line =~ /^POST /)
		{
			open my $o, '>>', $out or die;
			flock $o, LOCK_EX;
			print $o "$body\n";
			close $o;
			print $c "HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n";
		}
		else
		{
			open my $p, '<', $page or die;
			local $/;
			my $html = <$p>;
			print $c "HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\n"
			  . "Cache-Control: no-store\r\nContent-Length: " . length($html)
			  . "\r\nConnection: close\r\n\r\n$html";
		}
		exit 0;
	}
};

my $dsn = $node->connstr('postgres');
my $gw = start_gateway(dsn => $dsn, tokens => "$dir/tokens", args => [ '--allow-origin', $origin ]);

# The page: an EventSource on every shard of the feed from the beginning
# (a reconnect that did not resume from Last-Event-ID would repeat them),
# with extra arguments; what it receives goes to the listener in batches,
# each with the index of its first entry, one POST at a time.
sub write_page
{
	my ($args) = @_;
	open my $fh, '>', "$dir/page.html" or die;
	print $fh <<"EOS";
<!doctype html>
<meta charset="utf-8">
<title>cfeed serve in a browser</title>
<script>
const got = [];
let sent = 0, posting = false;
setInterval(() => {
	if (posting || sent === got.length) return;
	posting = true;
	const from = sent, items = got.slice(from);
	fetch('/received', {method: 'POST', body: JSON.stringify({from: from, items: items})})
		.then(() => { sent = from + items.length; }, () => {})
		.finally(() => { posting = false; });
}, 100);
const es = new EventSource('$gw->{url}/feeds/orders?cursor=_first$args&access_token=$token');
es.onopen = () => got.push({open: true});
es.onerror = () => got.push({error: es.readyState});
es.onmessage = (e) => {
	const d = JSON.parse(e.data);
	got.push({id: e.lastEventId, shard: d.shard, number: d.number, change_id: d.change_id});
};
</script>
EOS
	close $fh;
	return;
}
write_page('');

my $listener = start([ $^X, '-e', $listener_script, $lport, "$dir/page.html", $received ],
	'>', \my $lout, '2>', \my $lerr);

# The browser, with a private profile and a hard time limit.
my $home = "$dir/home";
make_path($home);
my ($bout, $berr);
sub start_browser
{
	my ($profile) = @_;
	return start(
		[ 'timeout', '-k', '5', '90', $chromium, '--headless', '--no-sandbox',
			'--disable-gpu', '--disable-dev-shm-usage', '--no-first-run',
			'--disable-background-networking', "--user-data-dir=$dir/$profile",
			"$origin/" ],
		'>', \$bout, '2>', \$berr,
		init => sub { $ENV{HOME} = $home; $ENV{XDG_CONFIG_HOME} = $ENV{XDG_CACHE_HOME} = $home; });
}
my $browser = start_browser('profile');

# What the page posted so far: the entries in the order it received them.
sub page_log
{
	my @log;
	return \@log unless -e $received;
	for my $line (split /\n/, slurp_file($received))
	{
		my $batch = decode_json($line);
		@log[ $batch->{from} .. $batch->{from} + $#{ $batch->{items} } ] = @{ $batch->{items} };
	}
	return \@log;
}

sub events_seen { return scalar grep { defined $_ && defined $_->{number} } @{ page_log() }; }

# Wait until the page has n events (or the deadline).
sub wait_events
{
	my ($n, $deadline) = @_;
	usleep(100_000) while events_seen() < $n && time < $deadline;
	return events_seen();
}

sub wait_stamped
{
	$node->poll_query_until('postgres',
		'select count(*) = 0 from cfeed.change where change_sequence_number is null')
	  or die 'changes not stamped';
}

my $deadline = time + 50;
ok(wait_events(20, $deadline) >= 20, 'the page received the history through EventSource')
  or diag("browser stderr: $berr");

# Writers: 4 clients, ~300 transactions/s for 6 s, one in four rolled back.
write_writer_script("$dir/writer.sql");
my $writers = start([ 'pgbench', '-n', '-c', '4', '-R', '300', '-T', '6', '-f', "$dir/writer.sql",
	  '-h', $node->host, '-p', $node->port, 'postgres' ], '>', \my $wout, '2>', \my $werr);

# Restart the gateway mid-stream, while the writers commit.
my $before = wait_events(200, $deadline);
stop_gateway($gw);
usleep(500_000);
$gw = start_gateway(dsn => $dsn, tokens => "$dir/tokens", port => $gw->{port},
	args => [ '--allow-origin', $origin ]);
$writers->finish;
wait_stamped();
my $total = $node->safe_psql('postgres', 'select count(*) from cfeed.change where feed_id = 1');
wait_events($total, $deadline);
$browser->signal('TERM');
$browser->finish;

my $log = page_log();
my @events = grep { defined $_->{number} } @$log;
my @opens = grep { $_->{open} } @$log;
ok($before >= 200 && $before < $total, "restarted mid-stream (after $before of $total events)");
is(scalar(grep { !defined } @$log), 0, 'the page posted back everything it noted');
is(scalar @opens, 2, 'EventSource opened once and reconnected once (after the restart)');
ok((grep { defined $_->{error} } @$log) >= 1
	  && !(grep { defined $_->{error} && $_->{error} == 2 } @$log),
	'the restart was an error event, and EventSource never gave up');
my $after = grep { defined $_->{number} } @$log[ (grep { $log->[$_]{open} } 0 .. $#$log)[-1] .. $#$log ];
ok($after > 0, "events arrived after the reconnect ($after)");

# Whether the events of a page's log are every committed change once, in
# order, per shard, with ids naming their shard and number.
sub check_delivery
{
	my ($events, $what) = @_;
	for my $s (0, 1)
	{
		my $expect = $node->safe_psql('postgres',
			"select string_agg(change_sequence_number || '/' || change_id, ',' order by change_sequence_number)"
			  . " from cfeed.change where feed_id = 1 and shard = $s");
		is(join(',', map { "$_->{number}/$_->{change_id}" } grep { $_->{shard} == $s } @$events), $expect,
			"$what: shard $s: every committed change once, in order");
	}
	my @bad = grep { $_->{id} !~ /\.$_->{shard}:$_->{number}\@\d+$/ } @$events;
	is(scalar @bad, 0, "$what: every event id names its shard and number (what Last-Event-ID resumes from)");
	return;
}
check_delivery(\@events, 'gateway restart');

# --- the database goes down (issue 30 item 6): streams ending meanwhile
# (stream=1500: every 1.5 s) make EventSource reconnect into the outage. The
# gateway answered 503, and a browser never retries an answer that is not a
# 200 event stream: Chromium closed the EventSource for good and got none of
# the changes after the outage. It is now told to retry, and resumes from
# its Last-Event-ID once the database is back.
unlink $received;
write_page('&stream=1500');
$browser = start_browser('profile2');
$deadline = time + 60;
ok(wait_events($total, $deadline) >= $total, 'outage: the second page received the history')
  or diag("browser stderr: $berr");
my $requests = sub { scalar(() = slurp_file($gw->{log}) =~ m{GET /feeds/orders sse}g) };
$node->stop('fast');
my $down = $requests->();
usleep(100_000) while $requests->() < $down + 3 && time < $deadline;
ok($requests->() >= $down + 3, 'outage: EventSource reconnected during the outage (' . ($requests->() - $down) . ' times)');
like(slurp_file($gw->{log}), qr{GET /feeds/orders sse 200 .*told to retry}, 'outage: and was told to retry');
$node->start;
$node->safe_psql('postgres', 'select cfeed.publish(1, g % 2) from generate_series(1, 100) g');
wait_stamped();
$total = $node->safe_psql('postgres', 'select count(*) from cfeed.change where feed_id = 1');
wait_events($total, $deadline);
$browser->signal('TERM');
$browser->finish;
$listener->kill_kill;
stop_gateway($gw);

$log = page_log();
ok(!(grep { defined $_->{error} && $_->{error} == 2 } @$log), 'outage: EventSource never gave up');
check_delivery([ grep { defined $_->{number} } @$log ], 'outage');

done_testing();
