# test/t/222_tail_epoch_birth.pl
#
# `cfeed tail --from now` (and --from TIME) label their start positions
# with the feed epoch they belong to, also at the database's birth of
# epochs (its first stamp).
#
# On a new connection `cfeed tail` reads the feed epoch (resume_all), then
# each shard's start position (cfeed.head for --from now), in a statement
# of its own.  When the database's first sweep, which records the first
# epoch with its stamps, committed between the two, the head past those
# stamps was labelled epoch 0, which cfeed.resume_cursor places before
# every epoch: at the first read the epoch had moved, the cursor was
# rewound to the shard's start, and the changes stamped before the tail
# began were printed.  Now the epoch is read again after the position, and
# the position read again when it moved (client epoch.c's protocol).
#
# The interleaving is made every time: the tail connects through a proxy
# (a child process of this script) that holds the tail's
# `select cfeed.head(...)` while a gate file exists; the sweeper, off
# while 6 changes are written, is turned on and stamps; then the gate goes.

use strict;
use warnings;

use IO::Select;
use IO::Socket::INET;
use IO::Socket::UNIX;
use IPC::Run qw(start timeout);
use POSIX ();
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep time);
use lib 'test/t';
use CfeedCheck;
use ServeHelper;

plan skip_all => 'cfeed command not built' unless -x cfeed_binary();

my $node = cfeed_node('tail_epoch_birth', '');
$node->safe_psql('postgres', "create extension cfeed; select cfeed.create_feed('births', 2, 1)");
is($node->safe_psql('postgres', 'select cfeed.epoch()'), '0',
	"no feed epoch before the database's first stamp");
my $start = $node->safe_psql('postgres', 'select start_sequence_number from cfeed.shard where shard = 0');

my $dir = PostgreSQL::Test::Utils::tempdir();
my $gate = "$dir/gate";
my $held = "$dir/held";
my $reading = "$dir/reading";

# Write all of buf to fh.
sub write_all
{
	my ($fh, $buf) = @_;
	while (length $buf)
	{
		my $n = syswrite($fh, $buf);
		POSIX::_exit(1) unless defined $n && $n > 0;
		substr($buf, 0, $n) = '';
	}
	return;
}

# The proxy, a child process: one TCP client (the tail) to the node's Unix
# socket; a message of the client's holding the tail's head query waits
# while $gate exists ($held says it does); $reading says that the tail sent
# a read (it has positioned every shard).  It leaves with POSIX::_exit, and
# SIGTERM ends it at once: the test modules' END blocks, which a die (their
# SIGTERM handler's) would run in this copy of the script, stop the node.
my $listen = IO::Socket::INET->new(
	Listen => 1,
	LocalAddr => '127.0.0.1',
	LocalPort => 0,
	Proto => 'tcp',
	ReuseAddr => 1) or die "proxy: $!";
my $proxy_port = $listen->sockport;
my $proxy = fork() // die "fork: $!";
if ($proxy == 0)
{
	$SIG{TERM} = $SIG{INT} = 'DEFAULT';
	my $client = $listen->accept or POSIX::_exit(1);
	close $listen;
	my $server = IO::Socket::UNIX->new(Peer => $node->host . '/.s.PGSQL.' . $node->port)
	  or POSIX::_exit(1);
	my $select = IO::Select->new($client, $server);
	for (;;)
	{
		for my $fh ($select->can_read)
		{
			my $n = sysread($fh, my $buf, 65536);
			POSIX::_exit(0) unless $n;
			if ($fh == $client)
			{
				if ($buf =~ /select cfeed\.head\(/ && -e $gate)
				{
					open my $f, '>', $held or POSIX::_exit(1);
					close $f;
					usleep(20_000) while -e $gate;
				}
				if ($buf =~ /from cfeed\.read(?:_rows)?\(\$1/ && !-e $reading)
				{
					open my $f, '>', $reading or POSIX::_exit(1);
					close $f;
				}
				write_all($server, $buf);
			}
			else
			{
				write_all($client, $buf);
			}
		}
	}
}
close $listen;

# 6 changes, 3 a shard, pending: the sweeper is off.
$node->safe_psql('postgres', 'alter system set cfeed.enable_sweeper = off; select pg_reload_conf()');
$node->poll_query_until('postgres',
	q{select count(*) = 0 from pg_stat_activity where backend_type like 'cfeed sweeper%'})
  or die 'the sweeper did not stop';
$node->safe_psql('postgres', 'select cfeed.publish(1, g % 2) from generate_series(1, 6) g');

open my $f, '>', $gate or die "$gate: $!";
close $f;
my ($out, $err) = ('', '');
my $tail = start [ cfeed_binary(), 'tail', '--dbname',
	"host=127.0.0.1 port=$proxy_port dbname=postgres sslmode=disable gssencmode=disable",
	'--feed', 'births', '--from', 'now', '--idle-exit-ms', '5000' ],
  '>', \$out, '2>', \$err, timeout(120);
my $until = time + 60;
usleep(20_000) while !-e $held && time < $until;
ok(-e $held, "the tail's head query is held (its feed epoch was read before)")
  or diag($err);
is($node->safe_psql('postgres', 'select cfeed.epoch()'), '0', 'still no feed epoch');

$node->safe_psql('postgres', 'alter system set cfeed.enable_sweeper = on; select pg_reload_conf()');
ok( $node->poll_query_until('postgres',
		'select count(*) = 0 from cfeed.change where change_sequence_number is null'),
	'the first sweep stamped meanwhile');
my $epoch = $node->safe_psql('postgres', 'select cfeed.epoch()');
cmp_ok($epoch, '>', 0, 'and began the first feed epoch');
unlink $gate;

# Once the tail reads (it has its start positions), 2 changes come.
$until = time + 60;
usleep(20_000) while !-e $reading && time < $until;
ok(-e $reading, 'the tail reads') or diag($err);
my @later = split /\n/, $node->safe_psql('postgres',
	'select cfeed.publish(1, g % 2) from generate_series(1, 2) g');
$tail->finish;
is($tail->result(0), 0, 'the tail exits 0 (--idle-exit-ms)') or diag($err);
my @printed = $out =~ /"change_id":(\d+)/g;
is_deeply([ sort @printed ], [ sort @later ],
	'--from now printed the 2 changes after it began, none of the 6 before')
  or diag("stdout:\n$out\nstderr:\n$err");
unlike($err, qr/failover lost stamps/, 'and rewound no cursor') or diag($err);

kill 'TERM', $proxy;
waitpid($proxy, 0);
$node->stop;
done_testing();
