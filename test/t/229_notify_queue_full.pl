# A full NOTIFY queue never fails or stalls a sweep (SPEC section 8: no
# role can stall a sweeper; src/notify.c).  PostgreSQL has one
# notification queue for the cluster, and a commit that has NOTIFYs to
# queue while it is full fails.  A role with nothing but LOGIN fills it:
# one of its sessions LISTENs and stays in a transaction, which holds the
# queue's tail back, while another NOTIFYs until PostgreSQL refuses.  From
# 17 the queue can be small (max_notify_queue_pages = 64, 512 kB); on 15 it
# is 8 GB, and this test is skipped.
#
# Checked, with the queue full: changes published to a longpoll feed, in
# several transactions, are stamped by the background sweeper (the head
# moves, read() returns them all, gapless, and cfeed.sweepers shows no
# error); the sweeper's WARNING is in the log, once; a LISTENer of the
# shard's channel hears nothing meanwhile.  Once the idle session commits
# and the queue drains: the LISTENer is notified of the head it missed
# with no new change (the notification the sweeper owed it, and a LOG line
# says so), and of new changes as before.  Seen failing before the fix:
# the sweeper's commit failed with "too many notifications in the NOTIFY
# queue" every second, and nothing was stamped.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use FindBin;

my $node = PostgreSQL::Test::Cluster->new('notify_full');
plan skip_all => 'the notification queue is 8 GB before PostgreSQL 17 (no max_notify_queue_pages)'
  if $node->pg_version < 17;
$node->init;
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'cfeed'\nmax_notify_queue_pages = 64\n");
$node->start;
$node->safe_psql('postgres', q{
	CREATE EXTENSION cfeed;
	SELECT cfeed.create_feed('f', 1);
	CREATE ROLE mallory LOGIN;
});
my $start = $node->safe_psql('postgres', 'SELECT cfeed.head(1, 0)');
my $channel = $node->safe_psql('postgres', 'SELECT cfeed.channel(1, 0)');

# A reader LISTENing on the shard's channel; everything it has heard so far
# is in $heard.
my $reader = $node->background_psql('postgres');
$reader->query_safe("LISTEN $channel");
my $heard = '';

# Probe the reader (a notification is printed after a statement) until it
# has heard $payload on the shard's channel; false at the deadline.
sub heard
{
	my ($payload) = @_;
	my $deadline = time + $PostgreSQL::Test::Utils::timeout_default;
	while (time < $deadline)
	{
		$heard .= $reader->query("SELECT 'probe'");
		return 1 if $heard =~ /notification "$channel" with payload "$payload"/;
		usleep(100_000);
	}
	return 0;
}

# Before the queue fills: a change is stamped and notified.
$node->safe_psql('postgres', 'SELECT cfeed.publish(1, 0)');
ok(heard($start + 1), 'the reader is notified of a new head');

# mallory, with LOGIN only, fills the queue: one session LISTENs and stays
# in a transaction, another NOTIFYs (a page each) until PostgreSQL refuses.
my $idle = $node->background_psql('postgres', connstr => $node->connstr('postgres') . ' user=mallory');
$idle->query_safe('LISTEN spam');
$idle->query_safe('BEGIN');
$idle->query_safe('SELECT 1');
my ($ret, $stdout, $stderr) = $node->psql('postgres', q{
	DO $$
	BEGIN
		FOR i IN 1 .. 1000 LOOP
			PERFORM pg_notify('spam', repeat('x', 7990));
			COMMIT;
		END LOOP;
	END $$},
	extra_params => [ '-U', 'mallory' ]);
like($stderr, qr/too many notifications in the NOTIFY queue/, 'a role with LOGIN only filled the NOTIFY queue');
cmp_ok($node->safe_psql('postgres', 'SELECT pg_notification_queue_usage()'), '>=', 0.95,
	'the queue is full');

# With the queue full, changes published in several transactions are stamped.
my $log_offset = -s $node->logfile;
$node->safe_psql('postgres', join('', map { "SELECT cfeed.publish(1, 0);\n" } 1 .. 10));
my $head = $start + 11;
ok($node->poll_query_until('postgres', "SELECT cfeed.head(1, 0) = $head"),
	'the sweeper stamps while the queue is full');
is($node->safe_psql('postgres', qq{
	SELECT count(*) || ' ' || bool_and(change_sequence_number = $start + n)
	FROM (SELECT change_sequence_number, row_number() OVER (ORDER BY change_sequence_number) AS n
		  FROM cfeed.read(1, 0, $start, 1000)) r}),
	'11 true', 'read() returns every change, gapless');
is($node->safe_psql('postgres', 'SELECT count(*) FROM cfeed.sweepers WHERE last_error IS NOT NULL'),
	'0', 'the sweeper reports no error');
ok($node->wait_for_log(qr/WARNING:  cfeed: PostgreSQL's notification queue is \d+% full: 1 longpoll shard is not notified/,
		$log_offset),
	'the sweeper warns that it skipped the notification');
my $log = slurp_file($node->logfile, $log_offset);
like($log, qr/HINT:  A session that LISTENs and stays in a transaction holds the queue back/,
	'the warning says what to do');
is(scalar(() = $log =~ /cfeed: PostgreSQL's notification queue is/g), 1,
	'the warning is logged once');
$heard .= $reader->query("SELECT 'probe'");
unlike($heard, qr/payload "$head"/, 'the reader was not notified while the queue was full');

# The SQL edition, in another database of the cluster (one queue for all):
# its sweep (cfeed.sweep(), SQL) stamps and skips its NOTIFY, with a
# WARNING, rather than fail its commit with the stamps.
my $sqled = "$FindBin::RealBin/../../sqled/cfeed-sql--"
  . $node->safe_psql('postgres', q{SELECT extversion FROM pg_extension WHERE extname = 'cfeed'}) . '.sql';
SKIP:
{
	skip "$sqled not built (make -C sqled)", 3 unless -f $sqled;
	$node->safe_psql('postgres', 'CREATE DATABASE sqled');
	$node->command_ok(
		[
			'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-h', $node->host, '-p', $node->port,
			'-d', 'sqled', '-o', '/dev/null', '-f', $sqled
		],
		'the SQL edition installs');
	my ($ret, $out, $err) = $node->psql('sqled', q{
		SELECT cfeed.create_feed('s', 1);
		SELECT cfeed.publish(1, 0) > 0;
		SELECT change_count FROM cfeed.sweep();
		SELECT cfeed.head(1, 0) - 2000000000000000;
	});
	is($out, "1\nt\n1\n1", 'the SQL edition sweeps and commits while the queue is full');
	like($err, qr/WARNING:  cfeed: PostgreSQL's notification queue is \d+% full/,
		'and warns that it skipped the notification');
}

# mallory's idle session commits: the queue drains, and the sweeper sends
# the notification it owes without any new change.
$log_offset = -s $node->logfile;
$idle->query_safe('COMMIT');
ok($node->poll_query_until('postgres', 'SELECT pg_notification_queue_usage() < 0.1'), 'the queue drains');
ok(heard($head), 'the reader is notified of the head it missed, with no new change');
ok($node->wait_for_log(qr/LOG:  cfeed: PostgreSQL's notification queue has room again/, $log_offset),
	'the sweeper logs that it sent what it owed');

# New changes are notified as before.
$node->safe_psql('postgres', 'SELECT cfeed.publish(1, 0)');
ok(heard($head + 1), 'a new change is notified again');

$idle->quit;
$reader->quit;
$node->stop;
done_testing();
