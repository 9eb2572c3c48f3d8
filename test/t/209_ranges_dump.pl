# A database with a feed stored in ranges (docs/design.md, "Storage in
# ranges"), dumped with pg_dump and restored with pg_restore into another
# cluster (docs/operations.md, "Storage in ranges").
#
# The restore gives the change rows the restoring transaction's xid, while
# the stamps and the group's mark name the dumped cluster's writers: the
# group's sweeps refuse the mark (55000) until cfeed.adopt_marks(), after
# which every change stamped before the dump is read with its number, the
# changes pending at the dump (of the range feed and of a row feed in the
# same sweep group) are stamped after the heads, gaplessly, each once (a
# change_id written twice by one writer included), a consumer group
# resumes at its checkpoint, and new writes are numbered on; the background
# sweeper too.  Seen failing before adopt_marks: read() left out the
# change_id written twice (its stamp names the dumped cluster's writer),
# and the sweep refused the mark.  Then the same dump restored into another
# database of the dumped cluster, which must be adopted the same way.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use CfeedCheck;

# Every shard's changes as read() gives them: "feed:shard:number:change_id" lines.
my $READ_ALL = q{SELECT string_agg(format('%s:%s:%s:%s', s.feed_id, s.shard, r.change_sequence_number, r.change_id), E'\n'
								   ORDER BY s.feed_id, s.shard, r.change_sequence_number)
				 FROM cfeed.shard s, cfeed.read(s.feed_id, s.shard, NULL, 1000000) r};

# 0 when every shard's numbers run start+1..head, each truth row is read as
# often as it was written, and nothing else is read
my $CHECK = q{
	WITH r AS (SELECT s.feed_id, s.shard, s.start_sequence_number AS start, s.last_change_sequence_number AS head,
					  x.change_sequence_number AS n, x.change_id,
					  row_number() OVER (PARTITION BY s.feed_id, s.shard ORDER BY x.change_sequence_number) AS o
			   FROM cfeed.shard s, cfeed.read(s.feed_id, s.shard, NULL, 1000000) x)
	SELECT (SELECT count(*) FROM r WHERE n <> start + o)
		 + (SELECT count(*) FROM (SELECT feed_id, shard, max(n) AS mx, max(head) AS head FROM r GROUP BY 1, 2) h
			WHERE mx <> head)
		 + (SELECT count(*) FROM (SELECT change_id, count(*) AS c FROM r GROUP BY 1) a
			FULL JOIN (SELECT change_id, count(*) AS c FROM truth GROUP BY 1) t USING (change_id)
			WHERE a.c IS DISTINCT FROM t.c)};

my $old = cfeed_node('old', "cfeed.enable_sweeper = off\n");
$old->safe_psql('postgres', q{
	CREATE EXTENSION cfeed;
	CREATE TABLE truth (change_id bigint NOT NULL);
	SET cfeed.default_storage = ranges;
	SELECT cfeed.create_feed('ranged', 2);
	RESET cfeed.default_storage;
	SELECT cfeed.create_feed('rowed', 1);
	INSERT INTO truth SELECT cfeed.publish(1, g % 2) FROM generate_series(1, 40) g;
	INSERT INTO truth SELECT cfeed.publish(2, 0) FROM generate_series(1, 5) g;
	BEGIN;
	SELECT cfeed.publish(1, 0, 777) AS twice;
	SELECT cfeed.publish(1, 0, 777) AS twice;
	INSERT INTO truth VALUES (777), (777);
	COMMIT;
	SELECT count(*) FROM cfeed.sweep(0);
	SELECT count(*) FROM cfeed.acquire('g', 1, 'member');
	SELECT cfeed.checkpoint('g', 1, 0, 'member', 1, cfeed.head(1, 0) - 5);
	-- pending at the dump: range changes and row changes of the same group
	INSERT INTO truth SELECT cfeed.publish(1, g % 2) FROM generate_series(1, 7) g;
	INSERT INTO truth SELECT cfeed.publish(2, 0) FROM generate_series(1, 3) g;});
my $stamped_old = $old->safe_psql('postgres', $READ_ALL);
my $heads_old = $old->safe_psql('postgres',
	q{SELECT string_agg(format('%s:%s:%s', feed_id, shard, last_change_sequence_number), ',' ORDER BY feed_id, shard) FROM cfeed.shard});
my $cursor_old = $old->safe_psql('postgres', q{SELECT cursor FROM cfeed.lease WHERE group_name = 'g' AND shard = 0});
is($old->safe_psql('postgres', q{SELECT sum(pending) FROM cfeed.stats}), '10', 'ten changes pending at the dump');

my $new = restored_copy($old);
isnt($new->safe_psql('app', q{SELECT system_identifier FROM pg_control_system()}),
	$old->safe_psql('postgres', q{SELECT system_identifier FROM pg_control_system()}), 'another cluster');

my ($rc, $out, $err) = $new->psql('app', 'SELECT count(*) FROM cfeed.sweep(0)');
like($err, qr/a sweep mark of sweep group 0 was made in another database cluster/,
	'the restored group\'s sweep refuses the dumped cluster\'s mark');
like($new->safe_psql('app', q{SELECT string_agg(format('%s:%s', sweep_group, changes), ',') FROM cfeed.adopt_marks()}),
	qr/^0:\d+$/, 'adopt_marks adopts group 0');
is($new->safe_psql('app', 'SELECT count(*) FROM cfeed.adopt_marks()'), '0', 'and nothing is left to adopt');
is($new->safe_psql('app', $READ_ALL), $stamped_old, 'every change stamped before the dump is read with its number');
is($new->safe_psql('app',
	q{SELECT string_agg(format('%s:%s:%s', feed_id, shard, last_change_sequence_number), ',' ORDER BY feed_id, shard) FROM cfeed.shard}),
	$heads_old, 'and every head is the same');
is($new->safe_psql('app', q{SELECT sum(pending) FROM cfeed.stats}), '10', 'the changes pending at the dump are pending');
is($new->safe_psql('app', q{SELECT sum(change_count) FROM cfeed.sweep(0)}), '10', 'the sweep stamps them');
is($new->safe_psql('app', q{SELECT count(*) FROM cfeed.sweep(0)}), '0', 'once');
is($new->safe_psql('app', $CHECK), '0', 'every change read as often as written, each shard gapless');
my %now = map { $_ => 1 } split /\n/, $new->safe_psql('app', $READ_ALL);
is(scalar(grep { !$now{$_} } split /\n/, $stamped_old), 0, 'the changes stamped before keep their numbers');
is($new->safe_psql('app', q{SELECT cursor FROM cfeed.lease WHERE group_name = 'g' AND shard = 0}), $cursor_old,
	'the consumer group\'s checkpoint is kept');
is($new->safe_psql('app', q{
	SELECT count(*) = cfeed.head(1, 0) - min(l.cursor) AND count(*) > 5
	FROM cfeed.lease l, cfeed.read(1, 0, l.cursor, 1000) r
	WHERE l.group_name = 'g' AND l.shard = 0}), 't',
	'the member reads on from its checkpoint: the five it had not read and those stamped since');

# new writes on the restored database, stamped by the background sweeper
$new->safe_psql('app', q{INSERT INTO truth SELECT cfeed.publish(1 + g % 2, 0) FROM generate_series(1, 20) g});
$new->append_conf('postgresql.conf', "cfeed.enable_sweeper = on\n");
$new->reload;
ok($new->poll_query_until('app', q{SELECT sum(pending) = 0 FROM cfeed.stats}), 'the background sweeper stamps new writes');
is($new->safe_psql('app', $CHECK), '0', 'every change read as often as written, each shard gapless');

# The same dump restored into another database of the same cluster, by
# one pg_restore per database (options @opts).  Its marks carry this
# cluster's identifier, yet the restore gave the changes the restoring
# transaction's xid all the same: the restored mark is taken for another
# cluster's (cfeed._sweep_mark_restored) and adopted as one.  Seen failing
# before: the sweep took the restored mark, the changes pending at the dump
# were never stamped (pending 0) and read_rows found none of the stamped
# ones; with -1, when the first mark's cfeed_mark.maker (the restore of
# shard_config makes it before the dumped marks come) lasted to the end of
# the transaction.
sub restore_here
{
	my ($db, $label, @opts) = @_;
	$old->safe_psql('postgres', "CREATE DATABASE $db");
	$old->command_ok([ 'pg_restore', @opts, '-d', $old->connstr($db), $old->basedir . '/app.dump' ],
		"$label: pg_restore into another database of the same cluster");
	my ($rc, $out, $err) = $old->psql($db, 'SELECT count(*) FROM cfeed.sweep(0)');
	like($err, qr/a sweep mark of sweep group 0 was made in another database cluster or restored from a dump/,
		"$label: the sweep refuses the restored mark");
	like($old->safe_psql($db, q{SELECT string_agg(format('%s:%s', sweep_group, changes), ',') FROM cfeed.adopt_marks()}),
		qr/^0:\d+$/, "$label: adopt_marks adopts group 0");
	is($old->safe_psql($db, $READ_ALL), $stamped_old, "$label: every change stamped before the dump is read with its number");
	is($old->safe_psql($db, q{SELECT sum(pending) FROM cfeed.stats}), '10', "$label: the changes pending at the dump are pending");
	is($old->safe_psql($db, q{SELECT sum(change_count) FROM cfeed.sweep(0)}), '10', "$label: the sweep stamps them");
	is($old->safe_psql($db, $CHECK), '0', "$label: every change read as often as written, each shard gapless");
	is($old->safe_psql($db, q{
		SELECT (SELECT count(*) FROM cfeed.read_rows(1, 0, NULL, 1000000)) = (SELECT count(*) FROM cfeed.read(1, 0, NULL, 1000000))}),
		't', "$label: read_rows finds every change read() gives");
}
restore_here('copy', 'same cluster');
restore_here('copy1', 'one transaction', '--single-transaction');
is($old->safe_psql('postgres', q{SELECT sum(pending) FROM cfeed.stats}), '10', 'the dumped database is untouched');

$old->stop;
$new->stop;
done_testing();
