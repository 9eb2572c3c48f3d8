# Retention on a restored range feed, before and after
# cfeed.adopt_marks().
#
# After a restore the change rows carry the restoring transaction's xid,
# the stamps the dumped cluster's.  Retention on a range shard
# (cfeed._apply_retention, run by the group-0 sweeper every
# cfeed.retention_interval, and by cfeed.apply_retention()) deletes whole
# stamps and then their changes by (writer_xid, change_id) from the
# stamps: before the adoption it would find none of the restored rows, and
# the stamps would go while their changes stayed, named by no stamp, to be
# stamped again after the head by the first sweep after the adoption
# (seen failing so: changes 1..10 read again at 21..30).  So retention
# leaves a group with a foreign mark alone (cfeed._marks_local), and after
# the adoption deletes the stamp with its changes.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use CfeedCheck;

my $old = cfeed_node('old', "cfeed.enable_sweeper = off\n");
$old->safe_psql('postgres', q{
	CREATE EXTENSION cfeed;
	SET cfeed.default_storage = ranges;
	SELECT cfeed.create_feed('ranged', 1);
	-- xids the new cluster will not have used at its restore: the mark the
	-- restore of shard_config makes (the first range shard of group 0)
	-- must not take the dumped mark's key (sweep_group, next_xid)
	DO $$ BEGIN FOR i IN 1..300 LOOP PERFORM pg_current_xact_id(); COMMIT; END LOOP; END $$;
	SELECT count(cfeed.publish(1, 0, g)) FROM generate_series(1, 10) g;
	SELECT count(*) FROM cfeed.sweep(0);
	SELECT count(cfeed.publish(1, 0, g)) FROM generate_series(11, 20) g;
	SELECT count(*) FROM cfeed.sweep(0);
	UPDATE cfeed.feed SET retention = '1 millisecond' WHERE feed_id = 1;});
my $read_old = $old->safe_psql('postgres', q{SELECT string_agg(change_id::text, ',' ORDER BY change_sequence_number) FROM cfeed.read(1, 0, NULL, 1000)});
is($read_old, join(',', 1 .. 20), 'twenty changes read before the dump');

my $new = restored_copy($old);

# the retention pass the sweeper would run, before the operator adopts
$new->safe_psql('app', 'SELECT cfeed.apply_retention(true)');
is($new->safe_psql('app', 'SELECT count(*) FROM cfeed.stamp'), '2', 'retention leaves the stamps before the adoption');
is($new->safe_psql('app', 'SELECT count(*) FROM cfeed.change'), '20', 'and their changes');

my $head = $new->safe_psql('app', 'SELECT cfeed.head(1, 0)');
$new->safe_psql('app', 'SELECT count(*) FROM cfeed.adopt_marks()');
$new->safe_psql('app', 'SELECT cfeed.apply_retention(true)');
is($new->safe_psql('app', 'SELECT count(*) FROM cfeed.stamp'), '1', 'after it, retention deletes the first stamp');
is($new->safe_psql('app', 'SELECT count(*) FROM cfeed.change'), '10', 'and its ten changes');
$new->safe_psql('app', 'SELECT count(*) FROM cfeed.sweep(0)');
is($new->safe_psql('app', q{SELECT coalesce(string_agg(change_id::text, ',' ORDER BY change_sequence_number), '') FROM cfeed.read(1, 0, NULL, 1000)}),
	join(',', 11 .. 20), 'a sweep stamps nothing again: changes 11..20 are read, at their numbers');
is($new->safe_psql('app', qq{SELECT count(*) FROM cfeed.read(1, 0, $head, 1000)}), '0',
	'nothing is read after the head of the dump');

$old->stop;
$new->stop;
done_testing();
