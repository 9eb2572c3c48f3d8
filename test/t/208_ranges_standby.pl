# A feed stored in ranges (docs/design.md, "Storage in ranges") on a
# streaming standby, through a failover to it, and through a crash of the
# new primary while writers write.
#
# The standby replays the stamps and the group's mark: its reads, heads and
# waits show what the primary's do, and a waiter there wakes at the replay
# of a stamp.  The promoted standby's sweeper goes on from the replayed
# mark (the same cluster, so its xids are the mark's), and so does the
# sweeper after an immediate restart amid pgbench writers: every committed
# change is read exactly once, each shard gapless from its start to its
# head, with none left unstamped.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use IPC::Run;
use FindBin;
use lib $FindBin::RealBin;
use CfeedCheck;

# Every shard's changes as read() gives them: "shard:number:change_id" lines.
my $READ_ALL = q{SELECT string_agg(format('%s:%s:%s', s.shard, r.change_sequence_number, r.change_id), E'\n'
								   ORDER BY s.shard, r.change_sequence_number)
				 FROM cfeed.shard s, cfeed.read(s.feed_id, s.shard, NULL, 1000000) r WHERE s.feed_id = 1};

# Exactly once and gapless, through read(): 0 when every truth change_id is
# read once, nothing else is, and each shard's numbers run start+1..head.
my $CHECK = q{
	WITH r AS (SELECT s.shard, s.start_sequence_number AS start, s.last_change_sequence_number AS head,
					  x.change_sequence_number AS n, x.change_id,
					  row_number() OVER (PARTITION BY s.shard ORDER BY x.change_sequence_number) AS o
			   FROM cfeed.shard s, cfeed.read(s.feed_id, s.shard, NULL, 1000000) x
			   WHERE s.feed_id = 1)
	SELECT (SELECT count(*) FROM r WHERE n <> start + o)
		 + (SELECT count(*) FROM (SELECT shard, max(n) AS mx, max(head) AS head FROM r GROUP BY shard) h
			WHERE mx <> head)
		 + (SELECT count(*) FROM (SELECT change_id FROM r GROUP BY change_id HAVING count(*) > 1) d)
		 + (SELECT count(*) FROM truth t WHERE NOT EXISTS (SELECT FROM r WHERE r.change_id = t.change_id))
		 + (SELECT count(*) FROM r WHERE NOT EXISTS (SELECT FROM truth t WHERE t.change_id = r.change_id))};
my $PENDING = q{SELECT coalesce(sum(pending), 0) FROM cfeed.stats WHERE feed_id = 1};

sub stamped_all
{
	my ($node) = @_;
	return $node->poll_query_until('postgres', "SELECT ($PENDING) = 0");
}

my $primary = cfeed_node('primary', '', allows_streaming => 1);
$primary->safe_psql('postgres', q{
	CREATE EXTENSION cfeed;
	SET cfeed.default_storage = ranges;
	SELECT cfeed.create_feed('f', 2);});
setup_truth($primary, 'postgres');
is($primary->safe_psql('postgres', q{SELECT string_agg(storage, ',') FROM cfeed.shard WHERE feed_id = 1}),
	'ranges,ranges', 'the feed is stored in ranges');
$primary->safe_psql('postgres',
	q{INSERT INTO truth SELECT cfeed.publish(1, g % 2) FROM generate_series(1, 200) g});
ok(stamped_all($primary), 'the primary stamped the first changes');
my $standby = cfeed_standby($primary, 'standby');
$primary->wait_for_catchup($standby);

my $read = $primary->safe_psql('postgres', $READ_ALL);
is(scalar(split /\n/, $read), 200, 'the primary reads its 200 changes');
is($standby->safe_psql('postgres', $READ_ALL), $read, 'the standby reads the same numbers and changes');
is($standby->safe_psql('postgres', 'SELECT cfeed.head(1, 0), cfeed.head(1, 1)'),
	$primary->safe_psql('postgres', 'SELECT cfeed.head(1, 0), cfeed.head(1, 1)'), 'and has the same heads');
is($standby->safe_psql('postgres', $CHECK), 0, 'standby: exactly once, gapless');

# A waiter on the standby wakes at the replay of the next stamp.
my $head = $standby->safe_psql('postgres', 'SELECT cfeed.head(1, 0)');
my $waiter = $standby->background_psql('postgres');
$waiter->query_until(qr/started/, "\\echo started\nSELECT cfeed.wait(1, 0, $head, 20000) AS woke \\gset\n\\echo woke :woke\n");
$standby->poll_query_until('postgres', q{
	SELECT count(*) = 1 FROM pg_stat_activity WHERE query LIKE 'SELECT cfeed.wait(%' AND wait_event IS NOT NULL})
  or die 'the waiter does not wait';
my $t0 = time;
$primary->safe_psql('postgres', 'INSERT INTO truth SELECT cfeed.publish(1, 0)');
my $out = $waiter->query_until(qr/woke \d+/, '');
my ($woke) = $out =~ /woke (\d+)/;
is($woke, $head + 1, 'standby: the waiter wakes with the new head');
cmp_ok((time - $t0) * 1000, '<', 10000, 'standby: woken within the wait');
$waiter->quit;

# Failover: the promoted standby stamps on from the replayed mark.
$primary->safe_psql('postgres',
	q{INSERT INTO truth SELECT cfeed.publish(1, g % 2) FROM generate_series(1, 100) g});
$primary->wait_for_catchup($standby);
$primary->stop('immediate');
$standby->promote;
$standby->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()') or die 'not promoted';
$standby->safe_psql('postgres',
	q{INSERT INTO truth SELECT cfeed.publish(1, g % 2) FROM generate_series(1, 100) g});
ok(stamped_all($standby), 'promoted: everything committed is stamped');
is($standby->safe_psql('postgres', $CHECK), 0, 'promoted: exactly once, gapless');

# A crash amid writers: pgbench writes for 3 s while the server is killed.
my $script = $standby->basedir . '/writer.sql';
pgbench_writer_script($script, 2);
my ($pgb_out, $pgb_err) = ('', '');
my $pgbench = IPC::Run::start(
	[ 'pgbench', '-n', '-c', '4', '-T', '3', '-f', $script, '-h', $standby->host, '-p', $standby->port, 'postgres' ],
	'>', \$pgb_out, '2>', \$pgb_err);
sleep 1;
$standby->stop('immediate');
$pgbench->finish;
$standby->start;
$standby->safe_psql('postgres',
	q{INSERT INTO truth SELECT cfeed.publish(1, g % 2) FROM generate_series(1, 50) g});
ok(stamped_all($standby), 'after the crash: everything committed is stamped');
is($standby->safe_psql('postgres', $CHECK), 0, 'after the crash: exactly once, gapless');
cmp_ok($standby->safe_psql('postgres', 'SELECT count(*) FROM truth'), '>', 451,
	'after the crash: the writers committed changes before it');

done_testing();
