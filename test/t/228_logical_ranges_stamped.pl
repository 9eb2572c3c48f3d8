# Topology A (portable cursors) for a feed stored in ranges
# (docs/replication.md, "Feeds across clusters"): the publisher publishes
# the inserts of cfeed.change and of cfeed.stamp, and the subscriber's
# copy of the feed, stored in ranges too, is numbered by the publisher's
# stamps, never by its own sweeper (src/upstream.c).
#
# Checked: changes made before the subscription (the initial copy) and
# after it, by concurrent writers and in a streamed transaction, arrive
# once, with the publisher's numbers (read() the same, shard by shard,
# number by number, and gapless); the subscriber's sweeper numbers none of
# them (every stamp there is the publisher's, nothing counts as pending);
# read_rows, which looks each change up by its stamp's writer, finds them
# all; the subscriber's change rows stay unnumbered and unstamped, so a
# dump of it restores; a wait on the subscriber is woken at the apply's commit, not by its
# one-second safety poll, and a LISTENer of the shard's channel is
# notified.  What stops the apply rather than lose or renumber a change: a
# change for a shard the subscriber lacks (23503; it applies once the
# shard is there), a stamp that starts at or below the subscriber's head
# (55000; one above it, as without the initial copy, is applied), a
# subscriber whose copy is stored in rows (0A000); and the
# publisher refuses to move the feed into rows while its stamps are
# published (55000).
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

my $NSHARDS = 2;
my $SETUP = qq{CREATE EXTENSION cfeed; SELECT cfeed.create_feed('f', $NSHARDS);};

# A small logical_decoding_work_mem streams the large transaction below
# before its commit: applied by a parallel apply worker from PostgreSQL 16
# (streaming = parallel), spooled and applied at commit before.
my $pub = cfeed_node('publisher', "cfeed.default_storage = ranges\nlogical_decoding_work_mem = 64kB\n",
	allows_streaming => 'logical');
$pub->safe_psql('postgres', $SETUP);
setup_truth($pub, 'postgres');
$pub->safe_psql('postgres', q{
	CREATE PUBLICATION stamped FOR TABLE cfeed.change, cfeed.stamp, cfeed.tracked_table (table_no, name)
		WITH (publish = 'insert');});
# changes stamped before the subscription: the initial copy brings them
$pub->safe_psql('postgres',
	'INSERT INTO truth (change_id) SELECT cfeed.publish(1, g % 2) FROM generate_series(1, 50) g');
ok($pub->poll_query_until('postgres', 'SELECT coalesce(sum(pending), 0) = 0 FROM cfeed.stats'),
	'the publisher stamped the changes made before the subscription');

my $sub = cfeed_node('sub', "cfeed.default_storage = ranges\nwal_retrieve_retry_interval = 200ms\n");
$sub->safe_psql('postgres', $SETUP);
# the subscriber's xid counter far from the publisher's
burn_xids($sub, 'postgres', 5000);
my $connstr = $pub->connstr . ' dbname=postgres';
my $streaming = $sub->safe_psql('postgres', 'SHOW server_version_num') >= 160000 ? 'parallel' : 'on';
$sub->safe_psql('postgres',
	"CREATE SUBSCRIPTION s CONNECTION '$connstr' PUBLICATION stamped WITH (streaming = $streaming)");
$sub->wait_for_subscription_sync($pub, 's');

# Every change of feed 1 a node has numbered, as "shard:number:change_id"
# in number order, shard by shard.
sub numbered
{
	my ($node, $fn, $db) = @_;
	$fn //= 'read';
	return $node->safe_psql($db // 'postgres', qq{
		SELECT string_agg(r.shard || ':' || r.change_sequence_number || ':' || r.change_id, ','
						  ORDER BY r.shard, r.change_sequence_number)
		FROM (SELECT 0 AS shard, change_sequence_number, change_id FROM cfeed.$fn(1, 0, NULL, 100000)
			  UNION ALL
			  SELECT 1, change_sequence_number, change_id FROM cfeed.$fn(1, 1, NULL, 100000)) r});
}

is(numbered($sub), numbered($pub), 'the initial copy: the publisher\'s changes with its numbers');

# A wait on the subscriber is woken when the apply of a stamp commits.  Its
# condition variable's safety poll looks every second from the wait's
# start: a publish 1.5 s into the wait would be seen ~0.5 s later by the
# poll alone (the median of three rounds is judged: a round can meet a
# poll by chance).
my @woken;
for my $round (1 .. 3)
{
	my $head = $sub->safe_psql('postgres', 'SELECT cfeed.head(1, 0)');
	my ($out, $err) = ('', '');
	my $waiter = IPC::Run::start(
		[ 'psql', '-X', '-At', '-d', $sub->connstr('postgres'), '-c',
		  "SELECT cfeed.wait(1, 0, $head, 60000)" ],
		'>', \$out, '2>', \$err);
	ok($sub->poll_query_until('postgres', q{
			SELECT count(*) = 1 FROM pg_stat_activity WHERE query LIKE 'SELECT cfeed.wait(%' AND wait_event_type = 'Extension'}),
		"round $round: the wait sleeps");
	usleep(1_500_000);
	$pub->safe_psql('postgres', 'INSERT INTO truth (change_id) SELECT cfeed.publish(1, 0)');
	my $published = time;
	$waiter->finish;
	push @woken, time - $published;
	cmp_ok($out, '>', $head, "round $round: the wait returns the head past the cursor");
}
my $median = (sort { $a <=> $b } @woken)[1];
cmp_ok($median, '<', 0.4,
	sprintf('a wait on the subscriber is woken by the applied stamp (%s s after the commit)',
		join(', ', map { sprintf('%.3f', $_) } @woken)));

# A LISTENer of the shard's channel on the subscriber is notified of the
# applied stamp's head, as of a sweep's there.
{
	my ($out, $err) = ('', '');
	my $listener = IPC::Run::start(
		[ 'psql', '-X', '-At', '-d', $sub->connstr('postgres') . ' application_name=listener',
		  '-c', 'LISTEN cfeed_1_1', '-c', 'SELECT pg_sleep(3)' ],
		'>', \$out, '2>', \$err);
	ok($sub->poll_query_until('postgres', q{
			SELECT count(*) = 1 FROM pg_stat_activity WHERE application_name = 'listener' AND query LIKE '%pg_sleep%'}),
		'the listener sleeps');
	$pub->safe_psql('postgres', 'INSERT INTO truth (change_id) SELECT cfeed.publish(1, 1)');
	ok($pub->poll_query_until('postgres', 'SELECT coalesce(sum(pending), 0) = 0 FROM cfeed.stats'),
		'the publisher stamped the change');
	my $head = $pub->safe_psql('postgres', 'SELECT cfeed.head(1, 1)');
	$listener->finish;
	like($out, qr/Asynchronous notification "cfeed_1_1" with payload "$head" received/,
		'a LISTENer on the subscriber is notified of the applied stamp\'s head');
}

# concurrent writers, then one transaction of 3,000 changes (streamed)
my $script = $pub->basedir . '/writer.sql';
pgbench_writer_script($script, $NSHARDS);
my ($out, $err) = ('', '');
my $writers = IPC::Run::start(
	[ 'pgbench', '-n', '-c', '4', '-j', '2', '-R', '300', '-T', '4', '-f', $script,
	  '-h', $pub->host, '-p', $pub->port, 'postgres' ],
	'>', \$out, '2>', \$err);
$writers->finish;
$pub->safe_psql('postgres',
	'INSERT INTO truth (change_id) SELECT cfeed.publish(1, g % 2) FROM generate_series(1, 3000) g');
ok($pub->poll_query_until('postgres', 'SELECT coalesce(sum(pending), 0) = 0 FROM cfeed.stats'),
	'the publisher stamped every change');
ok($pub->poll_query_until('postgres', q{SELECT stream_txns > 0 FROM pg_stat_replication_slots WHERE slot_name = 's'}),
	'the large transaction was streamed to the subscriber');
$pub->wait_for_catchup('s');

my $truth = $pub->safe_psql('postgres', 'SELECT count(*) FROM truth');
cmp_ok($truth, '>', 3300, "the writers made $truth changes");
my $want = numbered($pub);
is(scalar(() = $want =~ /,/g) + 1, $truth, 'the publisher\'s feed holds them all');
is(numbered($sub), $want, 'the subscriber reads every change once, with the publisher\'s number');
is(numbered($sub, 'read_rows'), $want, 'read_rows on the subscriber finds each change by its stamp');
is($sub->safe_psql('postgres', 'SELECT string_agg(cfeed.head(1, s)::text, \',\' ORDER BY s) FROM generate_series(0, 1) s'),
	$pub->safe_psql('postgres', 'SELECT string_agg(cfeed.head(1, s)::text, \',\' ORDER BY s) FROM generate_series(0, 1) s'),
	'the heads are the publisher\'s');
is($sub->safe_psql('postgres', q{
		SELECT bool_and(n.count = s.last_change_sequence_number - s.start_sequence_number
						AND n.distinct_numbers = n.count)
		FROM cfeed.shard s
		CROSS JOIN LATERAL (
			SELECT count(*), count(DISTINCT change_sequence_number) AS distinct_numbers
			FROM cfeed.read(s.feed_id, s.shard, NULL, 100000)) n
		WHERE s.feed_id = 1}), 't', 'the subscriber\'s numbers are gapless up to its heads');

# the subscriber's sweeper numbered nothing: a sweep of its own would have
# left a stamp the publisher does not have, and a pending count
$sub->safe_psql('postgres', 'SELECT cfeed.sweep()');
is($sub->safe_psql('postgres', 'SELECT coalesce(sum(pending), 0) FROM cfeed.stats'), '0',
	'nothing counts as pending on the subscriber');
is($sub->safe_psql('postgres', 'SELECT count(*) FROM cfeed.stamp'),
	$pub->safe_psql('postgres', 'SELECT count(*) FROM cfeed.stamp'),
	'every stamp on the subscriber is one the publisher made');
is($sub->safe_psql('postgres', 'SELECT count(*) FROM cfeed.change'), $truth,
	'the subscriber holds each change row once');
is($sub->safe_psql('postgres', q{SELECT apply_error_count + sync_error_count FROM pg_stat_subscription_stats WHERE subname = 's'}),
	'0', 'no apply error');
is($sub->safe_psql('postgres', 'SELECT count(*) FROM cfeed.change WHERE stamped_at IS NOT NULL OR change_sequence_number IS NOT NULL'),
	'0', 'the subscriber\'s change rows stay as the publisher wrote them: no number, no stamped_at');

# A dump of the subscriber restores into another database (as any range
# feed's: cfeed.adopt_marks() after it, operations.md), every change with
# it: a change row with a stamped_at and no number, which the subscriber
# once gave the rows it applied, is refused by the guard, and the restore
# lost them all.
my $dump = $sub->basedir . '/sub.dump';
$sub->command_ok([ 'pg_dump', '-Fc', '--no-subscriptions', '-f', $dump, '-d', $sub->connstr('postgres') ],
	'pg_dump of the subscriber');
$sub->safe_psql('postgres', 'CREATE DATABASE restored');
$sub->command_ok([ 'pg_restore', '--exit-on-error', '-d', $sub->connstr('restored'), $dump ],
	'pg_restore of the subscriber\'s dump');
$sub->safe_psql('restored', 'SELECT * FROM cfeed.adopt_marks()');
is(numbered($sub, 'read_rows', 'restored'), $want, 'the restored copy reads every change, with its row');

# A change for a shard the subscriber lacks stops the apply (23503) until
# the shard is there, then applies with the writer the publisher's stamp
# names: had it been applied with the apply's xid, the subscriber's sweeper
# would have numbered it too.
$pub->safe_psql('postgres', "SELECT cfeed.create_feed('h', 2)");
$sub->safe_psql('postgres', "SELECT cfeed.create_feed('h', 1)");
my $log_offset = -s $sub->logfile;
$pub->safe_psql('postgres', 'SELECT cfeed.publish(2, 1) FROM generate_series(1, 3)');
ok($sub->wait_for_log(qr/a replicated change names shard 1 of feed 2, which this cluster does not have/, $log_offset),
	'a change for a shard the subscriber lacks stops the apply (23503)');
$sub->safe_psql('postgres', q{
	INSERT INTO cfeed.shard_config (feed_id, shard, sweep_group, longpoll, storage)
	VALUES (2, 1, 0, true, 'ranges')});
ok($pub->poll_query_until('postgres', 'SELECT coalesce(sum(pending), 0) = 0 FROM cfeed.stats'),
	'the publisher stamped the changes of h');
$pub->wait_for_catchup('s');
is($sub->safe_psql('postgres', 'SELECT string_agg(change_sequence_number || \':\' || change_id, \',\') FROM cfeed.read(2, 1)'),
	$pub->safe_psql('postgres', 'SELECT string_agg(change_sequence_number || \':\' || change_id, \',\') FROM cfeed.read(2, 1)'),
	'once the shard is there, its changes arrive with the publisher\'s numbers');
is($sub->safe_psql('postgres', 'SELECT count(*) FROM cfeed.stamp WHERE feed_id = 2'), '1',
	'and only the publisher\'s stamp numbers them');

# On the publisher, a move of the feed into rows is refused while a
# publication sends its stamps: the subscribers' copies would hold its
# changes unnumbered.
my ($rc, $stdout, $stderr) = $pub->psql('postgres', "SELECT cfeed.set_storage(1, 'rows')");
like($stderr, qr/ERROR:  cannot move feed 1 to storage rows while publication "stamped" sends its stamps/,
	'set_storage into rows is refused while the stamps are published (55000)');

# A subscription made without the initial copy starts at the publisher's
# head: its first stamp starts above the subscriber's head, leaving the
# numbers before it out, which is no sign of another source.
$sub->safe_psql('postgres', 'CREATE DATABASE late');
$sub->safe_psql('late', "$SETUP SELECT cfeed.create_feed('h', 2);");
$sub->safe_psql('late', "CREATE SUBSCRIPTION s_late CONNECTION '$connstr' PUBLICATION stamped WITH (copy_data = false)");
$sub->wait_for_subscription_sync($pub, 's_late', 'late');
my $late = $pub->safe_psql('postgres', 'SELECT cfeed.publish(1, 1)');
ok($pub->poll_query_until('postgres', 'SELECT coalesce(sum(pending), 0) = 0 FROM cfeed.stats'),
	'the publisher stamped the change');
$pub->wait_for_catchup('s_late');
my $pub_late = $pub->safe_psql('postgres', "SELECT change_sequence_number || ':' || change_id FROM cfeed.read(1, 1, cfeed.head(1, 1) - 1)");
like($pub_late, qr/:$late$/, 'the publisher\'s head of shard 1 is that change');
is($sub->safe_psql('late', 'SELECT string_agg(change_sequence_number || \':\' || change_id, \',\') FROM cfeed.read(1, 1)'),
	$pub_late,
	'without the initial copy, the first stamp applies above the gap, with the publisher\'s number');

# A stamp that starts at or below the subscriber's head stops the apply
# (55000): here a change written on the subscriber itself, which its own
# sweeper numbered, took the number the publisher's next stamp carries.
$sub->safe_psql('postgres', 'SELECT cfeed.publish(1, 0)');
ok($sub->poll_query_until('postgres', 'SELECT coalesce(sum(pending), 0) = 0 FROM cfeed.stats'),
	'the subscriber\'s own sweeper numbered its own change');
my $sub_head = $sub->safe_psql('postgres', 'SELECT cfeed.head(1, 0)');
$log_offset = -s $sub->logfile;
$pub->safe_psql('postgres', 'SELECT cfeed.publish(1, 0)');
ok($sub->wait_for_log(qr/a replicated stamp of shard 0 of feed 1 starts at number $sub_head, at or below the shard's head $sub_head here/,
		$log_offset),
	'a stamp that does not follow the head stops the apply (55000)');
is($sub->safe_psql('postgres', 'SELECT cfeed.head(1, 0)'), $sub_head, 'and is not applied');

# A subscriber whose copy of the feed is stored in rows: the first change
# stops the subscription (0A000), and it applies none.
my $rows = cfeed_node('sub_rows', "cfeed.default_storage = rows\n");
$rows->safe_psql('postgres', $SETUP);
$rows->safe_psql('postgres', "CREATE SUBSCRIPTION s_rows CONNECTION '$connstr' PUBLICATION stamped");
ok( $rows->poll_query_until('postgres', q{
		SELECT apply_error_count + sync_error_count > 0 FROM pg_stat_subscription_stats WHERE subname = 's_rows'}),
	'a subscriber storing the feed in rows stops at its changes');
like(slurp_file($rows->logfile),
	qr/a replicated (?:change|stamp) names shard \d of feed 1, which this cluster stores in rows/,
	'and says why (for the change or the stamp: their initial copies race)');
is($rows->safe_psql('postgres', 'SELECT count(*) FROM cfeed.change'), '0', 'no change was applied there');

done_testing();
