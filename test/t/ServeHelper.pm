# test/t/ServeHelper.pm
#
# Helpers for the `cfeed serve` tests: start and stop a gateway, HTTP calls
# (HTTP::Tiny, a core module), NDJSON/SSE parsing, streaming clients run as
# child processes.

package ServeHelper;

use strict;
use warnings;

use Exporter 'import';
use HTTP::Tiny;
use IPC::Run qw(start);
use JSON::PP;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Cwd ();
use File::Basename ();
use Time::HiRes qw(usleep);

our @EXPORT = qw(cfeed_binary start_gateway stop_gateway http_get ndjson
  sse_events sse_changes start_stream pump_events sse_collect
  write_writer_script write_tokens start_counted_node);

# The binary under test: the one built in this tree, else the installed
# one: in PostgreSQL's bindir (make install), else on PATH (the Debian
# package's /usr/bin/cfeed).
sub cfeed_binary
{
	my $cfeed = ($ENV{TESTDIR} // Cwd::getcwd()) . "/src/client/cfeed";
	return $cfeed if -x $cfeed;
	my $bindir = `pg_config --bindir`;
	chomp $bindir;
	return "$bindir/cfeed" if -x "$bindir/cfeed";
	my ($on_path) = grep { -x } map { "$_/cfeed" } split /:/, $ENV{PATH} // '';
	return $on_path // "$bindir/cfeed";
}

# A started node with cfeed preloaded and pg_stat_statements counting every
# statement (the tests count the gateway's queries), both extensions
# created, and the feeds named (name => shards), numbered from 1.
sub start_counted_node
{
	my ($name, @feeds) = @_;
	my $node = PostgreSQL::Test::Cluster->new($name);
	$node->init;
	$node->append_conf('postgresql.conf',
		"shared_preload_libraries = 'cfeed,pg_stat_statements'\npg_stat_statements.track = all\n");
	$node->start;
	$node->safe_psql('postgres', 'create extension cfeed; create extension pg_stat_statements');
	my $id = 0;
	while (my ($feed, $shards) = splice(@feeds, 0, 2))
	{
		$id++;
		$node->safe_psql('postgres', "select cfeed.create_feed('$feed', $shards, $id)");
	}
	return $node;
}

my $gateways = 0;
my @started;    # every gateway's handle: stopped at exit if a test died

END
{
	$_->pumpable && $_->kill_kill for @started;
}

# Start `cfeed serve` with extra arguments; waits for /healthz.  Returns a
# hash with port, url, handle, and log (its stderr, a file in the test's
# log directory).
sub start_gateway
{
	my (%o) = @_;
	my $port = $o{port} // PostgreSQL::Test::Cluster::get_free_port();
	# Named after the test too: test files run at once share the log
	# directory (CFEED_PROVE_JOBS).
	my $log = sprintf('%s/gateway_%s_%d.log', $PostgreSQL::Test::Utils::log_path,
		File::Basename::basename($0, '.pl'), ++$gateways);
	my $out = '';
	my @cmd = (cfeed_binary(), 'serve', '--dbname', $o{dsn}, '--tokens',
		$o{tokens}, '--port', $port, '--log-level', 'debug',
		'--heartbeat-ms', 1000, '--refresh-ms', 200, @{ $o{args} // [] });
	my $h = start(\@cmd, '>', \$out, '2>', $log);
	push @started, $h;
	my $url = "http://127.0.0.1:$port";
	my $http = HTTP::Tiny->new(timeout => 5);
	for (1 .. 200)
	{
		my $r = $http->get("$url/healthz");
		return { port => $port, url => $url, handle => $h, log => $log }
		  if $r->{status} == 200;
		usleep(50_000);
	}
	die "gateway did not start: " . slurp_file($log);
}

# A gateway's token file at path, one line per token ("TOKEN FEEDS LABEL"),
# readable by its owner only as the gateway wants it.  Returns path.
sub write_tokens
{
	my ($path, @lines) = @_;
	open my $fh, '>', $path or die "could not write $path: $!";
	print $fh map { "$_\n" } @lines;
	close $fh;
	chmod 0600, $path;
	return $path;
}

# A pgbench script: publish to shard 0 or 1 of feed 1, one in four rolled back.
sub write_writer_script
{
	my ($path) = @_;
	open my $fh, '>', $path or die "could not write $path: $!";
	print $fh <<'EOS';
\set s random(0, 1)
\set a random(0, 3)
BEGIN;
SELECT cfeed.publish(1, :s);
\if :a = 0
ROLLBACK;
\else
COMMIT;
\endif
EOS
	close $fh;
	return;
}

# SIGTERM the gateway and wait for it.
sub stop_gateway
{
	my ($gw) = @_;
	$gw->{handle}->signal('TERM');
	$gw->{handle}->finish;
	return;
}

# GET with optional token and headers; returns the HTTP::Tiny response.
sub http_get
{
	my ($url, $token, %headers) = @_;
	$headers{Authorization} = "Bearer $token" if defined $token;
	return HTTP::Tiny->new(timeout => 30)->get($url, { headers => \%headers });
}

# NDJSON body into a list of hashes.
sub ndjson
{
	my ($body) = @_;
	return map { decode_json($_) } grep { /\S/ } split /\n/, $body;
}

# SSE text into a list of { id => ..., data => ... } (events with data only)
# and the last id seen (data or not).  As an EventSource does, only blocks
# ended by a blank line count: a stream cut off mid-event (killed, or read
# while the gateway writes) leaves its last block out.
sub sse_events
{
	my ($text) = @_;
	my (@events, $last_id);
	my @blocks = split /\n\n/, $text, -1;
	pop @blocks;	# "" after the last blank line, or an unfinished block
	for my $block (@blocks)
	{
		my ($id, $data);
		for my $line (split /\n/, $block)
		{
			$id = $1 if $line =~ /^id: ?(.*)$/;
			$data = $1 if $line =~ /^data: ?(.*)$/;
		}
		$last_id = $id if defined $id;
		push @events, { id => $id, data => decode_json($data) }
		  if defined $data;
	}
	return (\@events, $last_id);
}

# The changes an SSE text holds, as "shard:number" in arrival order.
sub sse_changes
{
	my ($text) = @_;
	my ($events) = sse_events($text);
	return map { "$_->{data}{shard}:$_->{data}{number}" } @$events;
}

# A streaming client in a child process: prints the body as it arrives.
# Returns the IPC::Run handle; the output goes to the scalar ref given.
sub start_stream
{
	my ($url, $token, $out, %headers) = @_;
	$headers{Authorization} = "Bearer $token" if defined $token;
	my $script = q{
		use HTTP::Tiny; use JSON::PP;
		$| = 1;
		my ($url, $h) = @ARGV;
		my $r = HTTP::Tiny->new(timeout => 60)->get($url,
			{ headers => decode_json($h), data_callback => sub { print $_[0] } });
		print STDERR "status $r->{status}\n";
	};
	return start([ $^X, '-e', $script, $url, encode_json(\%headers) ],
		'>', $out, '2>', \my $err);
}

# Pump a stream started by start_stream, whose text goes to $$out, until
# that text holds $want events with data and, given $id_re, its last id
# matches it; then 0.2 s more, for events that should not come; or until
# the stream ends (its client process exits).  At most
# 120 s: the gateway's rounds pace a stream, and a slower server (an
# assert-enabled one, TAP files run at once) takes longer, where a
# skipped change never arrives.  Returns how many events it saw.
sub pump_events
{
	my ($h, $out, $want, $id_re) = @_;
	my $start = Time::HiRes::time();
	my $deadline = $start + 120;
	my $grace;
	my ($seen, $counted) = (0, 0);	# data lines in $$out counted so far
	while (Time::HiRes::time() < ($grace // $deadline))
	{
		# a stream that ended (its client process with it): take the rest
		# (pump_nb dies if the process ends under it: seen at the next turn)
		my $ended = !$h->pumpable;
		$ended ? $h->finish : eval { $h->pump_nb };
		my $upto = rindex($$out, "\n") + 1;
		$seen += () = substr($$out, $counted, $upto - $counted) =~ /^data:/mg;
		$counted = $upto;
		$grace //= Time::HiRes::time() + 0.2
		  if $seen >= $want && (!$id_re || ((sse_events($$out))[1] // '') =~ $id_re);
		last if $ended;
		usleep(2_000);
	}
	Test::More::note(sprintf('%d events in %.1f s', $seen, Time::HiRes::time() - $start));
	return $seen;
}

# The SSE text of a stream of $url, read (pump_events) until it holds $want
# events with data (and an id matching $id_re, if given).
sub sse_collect
{
	my ($url, $token, $want, $id_re, %headers) = @_;
	my $text = '';
	my $h = start_stream($url, $token, \$text, Accept => 'text/event-stream', %headers);
	pump_events($h, \$text, $want, $id_re);
	$h->kill_kill;
	return $text;
}

1;
