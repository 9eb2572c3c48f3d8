# Through pgbouncer in transaction pooling (docs/replication.md,
# "Connection poolers").  Skipped when pgbouncer (Debian package
# pgbouncer) is not installed.
#
# pgbench publishes through the pooler while two consumers long-poll
# through it with the one-call read(..., wait_ms), each statement on
# whichever server connection the pooler hands out: each consumer gets
# every change once, in order, and every committed change is stamped once.
# Then the pooler's limit: readers waiting in read(wait_ms) hold a server
# connection each, so with as many waiters as the pool has connections a
# writer waits for a waiter to return.  Last, `cfeed tail` and `cfeed
# serve` through the pooler: they see it and wait without LISTEN.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use Time::HiRes qw(time usleep);
use FindBin;
use lib $FindBin::RealBin;
use CfeedCheck;
use ServeHelper qw(cfeed_binary start_gateway stop_gateway http_get ndjson write_tokens start_stream);
use JSON::PP;

my ($pgbouncer) = grep { -x $_ } map { "$_/pgbouncer" } split(/:/, $ENV{PATH}), '/usr/sbin';
plan skip_all => 'pgbouncer is not installed (Debian package pgbouncer)' unless $pgbouncer;

my $node = cfeed_node('pooled');
$node->safe_psql('postgres', q{
	CREATE EXTENSION cfeed;
	SELECT cfeed.create_feed('f', 1);
	SELECT cfeed.create_feed('quiet', 1);
	SELECT cfeed.create_feed('tailed', 1);});
setup_truth($node, 'postgres');

my $POOL = 3;
my $port = PostgreSQL::Test::Cluster::get_free_port();
my $dir = $node->basedir;
my $ini = "$dir/pgbouncer.ini";
open my $fh, '>', $ini or die $!;
print $fh <<"INI";
[databases]
postgres = host=@{[ $node->host ]} port=@{[ $node->port ]} dbname=postgres
one = host=@{[ $node->host ]} port=@{[ $node->port ]} dbname=postgres pool_size=1
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $port
unix_socket_dir =
auth_type = trust
auth_file = $dir/userlist.txt
pool_mode = transaction
default_pool_size = $POOL
max_client_conn = 100
logfile = $dir/pgbouncer.log
pidfile = $dir/pgbouncer.pid
INI
close $fh;
open $fh, '>', "$dir/userlist.txt" or die $!;
print $fh q{"} . scalar(getpwuid($<)) . "\" \"\"\n";
close $fh;
my $bouncer = IPC::Run::start([ $pgbouncer, $ini ], '>', "$dir/pgbouncer.out", '2>&1');
my @via = ('-h', '127.0.0.1', '-p', $port, '-d', 'postgres');
my $up = 0;
for (1 .. 100)
{
	$up = 1, last if system('psql', '-X', '-At', @via, '-c', 'SELECT 1', '-o', '/dev/null') == 0;
	usleep(100_000);
}
ok($up, 'pgbouncer is up in transaction pooling');

# Two consumers through the pooler: one long-poll call per statement.
my $deadline = $node->safe_psql('postgres', "SELECT clock_timestamp() + interval '8 s'");
my @consumers;
for my $c (1 .. 2)
{
	my $file = "$dir/consumer$c.sql";
	open my $fh, '>', $file or die $!;
	print $fh "\\set cur 0\n";
	for (1 .. 5000)
	{
		print $fh "SELECT clock_timestamp() > '$deadline' AS done \\gset\n\\if :done\n\\q\n\\endif\n";
		print $fh "SELECT COALESCE(string_agg(change_sequence_number::text, ' ' ORDER BY change_sequence_number), '') AS got, "
		  . "COALESCE(max(change_sequence_number), :cur) AS cur FROM cfeed.read(1, 0, NULLIF(:cur, 0), 50, 1000) \\gset\n"
		  . "\\echo :got\n";
	}
	close $fh;
	my ($out, $err) = ('', '');
	push @consumers, [ IPC::Run::start([ 'psql', '-X', '-At', @via, '-f', $file ],
		'>', \$out, '2>', \$err), \$out, \$err ];
}
my $script = "$dir/writer.sql";
pgbench_writer_script($script, 1);
my ($wout, $werr) = ('', '');
IPC::Run::run([ 'pgbench', '-n', '-c', '2', '-j', '2', '-R', '200', '-T', '5', '-f', $script, @via ],
	'>', \$wout, '2>', \$werr);
like($wout, qr/number of failed transactions: 0|processed/, 'pgbench published through the pooler');
$_->[0]->finish for @consumers;

my $count = check_invariants($node, 'postgres', 'through pgbouncer');
ok($count > 100, "writers committed $count changes through the pooler");
my @all = split /\n/, $node->safe_psql('postgres',
	'SELECT change_sequence_number FROM cfeed.change WHERE feed_id = 1 ORDER BY 1');
for my $c (0 .. 1)
{
	my @got = map { split / / } grep { length } split /\n/, ${ $consumers[$c][1] };
	is(${ $consumers[$c][2] }, '', "consumer $c: no errors");
	is_deeply(\@got, \@all, "consumer $c: every change once, in order, through transaction pooling");
}

# As many waiters as server connections: a writer's transaction waits for
# a waiter to return (the waiters' server connections are taken).
my @waiters;
for (1 .. $POOL)
{
	push @waiters, IPC::Run::start([ 'psql', '-X', '-At', @via, '-c',
		'SELECT count(*) FROM cfeed.read(2, 0, cfeed.head(2, 0), 1, 3000)' ], '>', \my $o, '2>', \my $e);
}
$node->poll_query_until('postgres', qq{
	SELECT count(*) = $POOL FROM pg_stat_activity WHERE wait_event_type = 'Extension'
	AND query LIKE '%cfeed.read(2%'}) or die 'waiters not seen';
my $started = time;
$node->safe_psql('postgres', 'SELECT 1');	# direct: unaffected
IPC::Run::run([ 'psql', '-X', '-At', @via, '-c', 'SELECT cfeed.publish(1, 0)' ], '>', \my $o2);
my $blocked = time - $started;
$_->finish for @waiters;
ok($blocked > 2, sprintf('with %d waiters on a pool of %d, a writer waited %.1f s for a connection',
	$POOL, $POOL, $blocked));

# cfeed tail through the pooler, on a pool of one server connection: it
# tells the pooler from the server (the process id its connection announced
# is not the backend's), waits in cfeed.wait and leaves no LISTEN on the
# pooled connection (before 1.9's fix it did: other clients of the pool got
# its notifications, and it woke only every --wait-ms); directly, it LISTENs
my $cfeed = cfeed_binary();
my $tail = IPC::Run::start([ $cfeed, 'tail', '--dbname', "host=127.0.0.1 port=$port dbname=one",
	'--feed', 'tailed', '--from', 'now', '--max', '3' ], '>', \my $tout, '2>', \my $terr);
$node->poll_query_until('postgres', q{
	SELECT count(*) > 0 FROM pg_stat_activity
	WHERE query LIKE '%cfeed.wait(%' AND state = 'active' AND pid <> pg_backend_pid()})
  or die 'the tail does not wait';
$node->safe_psql('postgres', 'SELECT cfeed.publish(3, 0) FROM generate_series(1, 3)');
$tail->finish;
is($tail->result(0), 0, 'cfeed tail through the pooler: exit 0');
is(scalar(grep { /"change_sequence_number"/ } split /\n/, $tout), 3, 'cfeed tail through the pooler: the 3 changes');
like($terr, qr/goes through a pooler/, 'cfeed tail through the pooler: says it polls');
is(`psql -X -At -h 127.0.0.1 -p $port -d one -c 'SELECT count(*) FROM pg_listening_channels()'`, "0\n",
	'cfeed tail through the pooler: no LISTEN left on the pooled connection');
IPC::Run::run([ $cfeed, 'tail', '--dbname', $node->connstr('postgres'), '--feed', 'tailed',
	'--idle-exit-ms', '300' ], '>', \my $dout, '2>', \my $derr);
unlike($derr, qr/pooler/, 'cfeed tail connected directly: no pooler seen');
is(scalar(grep { /"change_sequence_number"/ } split /\n/, $dout), 3, 'cfeed tail connected directly: the 3 changes');

# cfeed serve through the pooler, on the pool of one: its hub waits in
# cfeed.wait and leaves no LISTEN behind (before 1.9's fix it LISTENed
# there); a FeedAPI stream gets changes committed while it waits
if (-x $cfeed && `$cfeed serve --help 2>&1` =~ /--tokens/)
{
	my $gw = start_gateway(dsn => "host=127.0.0.1 port=$port dbname=one",
		tokens => write_tokens("$dir/tokens", "pooled-token-0123456789 tailed pooled"), args => [ '--readers', '1' ]);
	my $disc = decode_json(http_get("$gw->{url}/feeds/tailed", 'pooled-token-0123456789')->{content});
	my $head = $node->safe_psql('postgres', 'SELECT cfeed.head(3, 0)');
	my $stream = start_stream("$gw->{url}/feeds/tailed/events?token=$disc->{token}&partition=0&cursor=$head&stream=4000",
		'pooled-token-0123456789', \my $sout);
	usleep(500_000);
	$node->safe_psql('postgres', 'SELECT cfeed.publish(3, 0) FROM generate_series(1, 3)');
	$stream->finish;
	my @events = grep { $_->{data} } ndjson($sout);
	is(scalar @events, 3, 'cfeed serve through the pooler: a stream got the 3 changes committed while it waited');
	stop_gateway($gw);
	like(slurp_file($gw->{log}), qr/goes through a pooler/, 'cfeed serve through the pooler: its log says so');
	is(`psql -X -At -h 127.0.0.1 -p $port -d one -c 'SELECT count(*) FROM pg_listening_channels()'`, "0\n",
		'cfeed serve through the pooler: no LISTEN left on the pooled connection');
}

$bouncer->kill_kill;
done_testing();
