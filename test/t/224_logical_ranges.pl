# A feed stored in ranges, carried to other clusters by logical replication
# (docs/replication.md, "Feeds across clusters"): topology B, a subscriber
# that numbers the changes itself.
#
# A range change's row is never updated (its number is in a cfeed.stamp
# row of the publisher), so a publication of cfeed.change's inserts sends
# each change once, unstamped.  On the subscriber the guard trigger (enabled
# ALWAYS) gives the replicated row the apply transaction's xid, and the
# subscriber's sweeper numbers it in its own feed, stored in ranges or in
# rows as the subscriber's shards are.  Each subscriber first burns a few
# thousand xids: a row that kept the publisher's writer_xid would be below
# its group's mark, taken for stamped and never numbered (what the guard
# enabled for origin only does: checked at the end, where such a change
# stays unread).  Topology A (stamped changes with the publisher's
# numbers) into a subscriber whose shards are stored in ranges is refused
# by its guard (0A000): the apply stops with an error, where it used to
# hold rows that no read of the subscriber would see.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use Time::HiRes qw(time);
use FindBin;
use lib $FindBin::RealBin;
use CfeedCheck;

my $NSHARDS = 2;
my $SETUP = qq{CREATE EXTENSION cfeed; SELECT cfeed.create_feed('f', $NSHARDS);};

my $pub = cfeed_node('publisher', "cfeed.default_storage = ranges\n", allows_streaming => 'logical');
$pub->safe_psql('postgres', $SETUP);
setup_truth($pub, 'postgres');
$pub->safe_psql('postgres', q{
	CREATE PUBLICATION inserts FOR TABLE cfeed.change, cfeed.tracked_table (table_no, name)
		WITH (publish = 'insert');});

my %sub;
for my $storage ('ranges', 'rows')
{
	my $n = cfeed_node("sub_$storage", "cfeed.default_storage = $storage\n");
	$n->safe_psql('postgres', $SETUP);
	burn_xids($n, 'postgres', 5000);
	is($n->safe_psql('postgres', 'SELECT string_agg(DISTINCT storage, \',\') FROM cfeed.shard'),
		$storage, "the $storage subscriber's shards are stored in $storage");
	$sub{$storage} = $n;
}

# Every change of feed 1 a node has numbered, shard by shard, as
# "shard:change_id" sorted; and whether each shard's numbers run gapless
# from its start to its head.
sub numbered
{
	my ($node) = @_;
	return $node->safe_psql('postgres', q{
		SELECT string_agg(r.shard || ':' || r.change_id, ',' ORDER BY r.shard, r.change_id)
		FROM (SELECT 0 AS shard, * FROM cfeed.read(1, 0, NULL, 100000)
			  UNION ALL SELECT 1, * FROM cfeed.read(1, 1, NULL, 100000)) r});
}
sub gapless
{
	my ($node) = @_;
	return $node->safe_psql('postgres', q{
		SELECT bool_and(n.count = n.last - s.start_sequence_number
						AND n.last = s.last_change_sequence_number AND n.distinct_numbers = n.count)
		FROM cfeed.shard s
		CROSS JOIN LATERAL (
			SELECT count(*), count(DISTINCT change_sequence_number) AS distinct_numbers,
				   coalesce(max(change_sequence_number), s.start_sequence_number) AS last
			FROM cfeed.read(s.feed_id, s.shard, NULL, 100000)) n
		WHERE s.feed_id = 1});
}
sub all_stamped
{
	my ($node) = @_;
	return $node->poll_query_until('postgres', 'SELECT coalesce(sum(pending), 0) = 0 FROM cfeed.stats');
}

my $connstr = $pub->connstr . ' dbname=postgres';
for my $storage (sort keys %sub)
{
	$sub{$storage}->safe_psql('postgres',
		"CREATE SUBSCRIPTION s_$storage CONNECTION '$connstr' PUBLICATION inserts");
}

for my $storage (sort keys %sub)
{
	$sub{$storage}->wait_for_subscription_sync($pub, "s_$storage");
}

my $r = $sub{ranges};
my $head = $r->safe_psql('postgres', 'SELECT cfeed.head(1, 0)');
my $script = $pub->basedir . '/writer.sql';
pgbench_writer_script($script, $NSHARDS);
my ($out, $err) = ('', '');
my $writers = IPC::Run::start(
	[ 'pgbench', '-n', '-c', '2', '-j', '2', '-R', '200', '-T', '5', '-f', $script,
	  '-h', $pub->host, '-p', $pub->port, 'postgres' ],
	'>', \$out, '2>', \$err);
# A wait on the range subscriber returns once its sweeper has numbered a
# replicated change, well before its 60 s timeout.
my $began = time;
my $woke = $r->safe_psql('postgres', "SELECT cfeed.wait(1, 0, $head, 60000)");
my $waited = time - $began;
ok($woke > $head && $waited < 30,
	sprintf('a wait on the range subscriber returns a replicated change it numbered (%.1f s)', $waited));
# a transaction of 200 changes too
$pub->safe_psql('postgres',
	'INSERT INTO truth (change_id) SELECT cfeed.publish(1, g % 2) FROM generate_series(1, 200) g');
$writers->finish;

ok(all_stamped($pub), 'the publisher stamped every change');
my $truth = $pub->safe_psql('postgres', 'SELECT count(*) FROM truth');
cmp_ok($truth, '>', 500, "the writers made $truth changes");
my $want = numbered($pub);
is(scalar(() = $want =~ /,/g) + 1, $truth, "the publisher's feed holds them all");
for my $storage (sort keys %sub)
{
	my $n = $sub{$storage};
	$pub->wait_for_catchup("s_$storage");
	ok(all_stamped($n), "$storage subscriber: its sweeper numbered every change it received");
	is(numbered($n), $want, "$storage subscriber: every change once, on the publisher's shard");
	is(gapless($n), 't', "$storage subscriber: its numbers are gapless, up to its heads");
	is($n->safe_psql('postgres',
		"SELECT apply_error_count FROM pg_stat_subscription_stats WHERE subname = 's_$storage'"), 0,
		"$storage subscriber: no apply error");
}

# A subscriber's database not yet updated to 1.9 (no cfeed.stamp there),
# under the 1.9 library: the guard applies the changes as before, and its
# sweeper numbers them (the guard's look for a subscription that carries
# cfeed.stamp failed on the missing table once).
$r->safe_psql('postgres', 'CREATE DATABASE old');
$r->safe_psql('old', "CREATE EXTENSION cfeed VERSION '1.8'; SELECT cfeed.create_feed('f', $NSHARDS);");
$r->safe_psql('old', "CREATE SUBSCRIPTION s_old CONNECTION '$connstr' PUBLICATION inserts");
$r->wait_for_subscription_sync($pub, 's_old', 'old');
$pub->safe_psql('postgres', 'INSERT INTO truth (change_id) SELECT cfeed.publish(1, g % 2) FROM generate_series(1, 10) g');
$pub->wait_for_catchup('s_old');
ok($r->poll_query_until('old', 'SELECT count(*) = 0 FROM cfeed.change WHERE change_sequence_number IS NULL'),
	'a 1.8 database subscribed: its sweeper numbered every change it received');
is($r->safe_psql('old', 'SELECT count(*) FROM cfeed.change'), $pub->safe_psql('postgres', 'SELECT count(*) FROM truth'),
	'a 1.8 database subscribed: every change arrived');
is($r->safe_psql('old', "SELECT apply_error_count + sync_error_count FROM pg_stat_subscription_stats WHERE subname = 's_old'"),
	'0', 'a 1.8 database subscribed: no apply error');
$r->safe_psql('old', 'DROP SUBSCRIPTION s_old');

# The guard enabled for origin only (not ALWAYS) leaves a replicated row
# the publisher's writer_xid, below the range subscriber's mark: the change
# is taken for stamped and never numbered (up to 1.4, with stamps in rows,
# such changes were stranded pending).
$r->safe_psql('postgres', 'ALTER TABLE cfeed.change ENABLE TRIGGER change_guard');
my $late = $pub->safe_psql('postgres', 'SELECT cfeed.publish(1, 0)');
$pub->wait_for_catchup('s_ranges');
is($r->safe_psql('postgres', "SELECT count(*) FROM cfeed.change WHERE change_id = $late"), '1',
	'range subscriber, guard for origin only: the change arrived');
ok(all_stamped($r), 'and nothing counts as pending');
is($r->safe_psql('postgres', "SELECT count(*) FROM cfeed.read(1, 0, NULL, 100000) WHERE change_id = $late"),
	'0', 'and the change that kept the publisher\'s writer_xid is never numbered');

# Topology A (stamped changes, the publisher's numbers) needs the
# subscriber's shards stored in rows: one stored in ranges refuses a
# change that comes numbered (0A000), and the subscription stops there,
# rather than hold rows that no read, head or wait of it would ever see.
$pub->safe_psql('postgres', q{
	SET cfeed.default_storage = rows;
	SELECT cfeed.create_feed('g', 1);
	CREATE PUBLICATION stamped FOR TABLE cfeed.change
		WHERE (change_sequence_number IS NOT NULL AND feed_id = 2)
		WITH (publish = 'insert, update');});
my $suba = cfeed_node('sub_a', "cfeed.default_storage = ranges\n");
$suba->safe_psql('postgres', "$SETUP SELECT cfeed.create_feed('g', 1);");
$suba->safe_psql('postgres', "CREATE SUBSCRIPTION s_a CONNECTION '$connstr' PUBLICATION stamped");
$pub->safe_psql('postgres', 'SELECT cfeed.publish(2, 0)');
ok(all_stamped($pub), 'the publisher stamped the change of g (in rows)');
ok( $suba->poll_query_until('postgres', q{
		SELECT apply_error_count + sync_error_count > 0 FROM pg_stat_subscription_stats WHERE subname = 's_a'}),
	'a topology-A subscription into shards stored in ranges stops with an error');
like(slurp_file($suba->logfile),
	qr/change_sequence_number \d+ is above the start value of shard 0 of feed 2, which is stored in ranges/,
	'the guard says why (0A000)');
is($suba->safe_psql('postgres', 'SELECT count(*) FROM cfeed.change'), '0', 'nothing was applied there');

done_testing();
