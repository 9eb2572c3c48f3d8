# test/t/219_reshard_prepared.pl
#
# cfeed.reshard of a feed stored in ranges against a prepared transaction
# (2PC) that placed a change in the parent by the old layout: PREPARE keeps
# the feed's shards lock, so the reshard waits for COMMIT PREPARED (55P03
# when wait_ms runs out first); once it closed the parent, the parent is
# not ended until the sweep after that commit stamps the change, and a
# consumer group gets the child only after the parent's last change
# (docs/design.md, "Resharding" and "Storage in ranges").  A sweep while
# it is prepared leaves its xid in the group's mark's running.

use strict;
use warnings;

use FindBin;
use lib $FindBin::RealBin;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use CfeedCheck;

my $node = cfeed_node('prepared', "max_prepared_transactions = 4\ncfeed.enable_sweeper = off\n");
my $db = 'postgres';

$node->safe_psql($db, q{
	CREATE EXTENSION cfeed;
	SET cfeed.default_storage = ranges;
	SELECT cfeed.create_feed('prepared', 1, feed_id => 1);
	SELECT cfeed.publish(1, cfeed.shard_for(1, 'k'), 1);
	SELECT cfeed.sweep();
});

# the prepared writer of the parent
$node->safe_psql($db, q{
	BEGIN;
	SELECT cfeed.publish(1, cfeed.shard_for(1, 'k'), 2);
	PREPARE TRANSACTION 'w';
});
# a sweep that stamps another change while it is prepared leaves its xid
# in the mark's running
$node->safe_psql($db, 'SELECT cfeed.publish(1, 0, 3)');
is($node->safe_psql($db, 'SELECT sum(change_count) FROM cfeed.sweep()'), '1',
   'a sweep while it is prepared stamps the other change');
ok($node->safe_psql($db, q{SELECT m.running @> ARRAY[p.transaction::text::xid8] AND p.transaction::text::xid8 < m.next_xid
	FROM cfeed.sweep_mark m, pg_catalog.pg_prepared_xacts p WHERE p.gid = 'w'}) eq 't',
   'the prepared writer is in the mark\'s running');

my ($ret, $out, $err) = $node->psql($db, "\\set VERBOSITY verbose\nSELECT * FROM cfeed.reshard(1, 2, 300)");
like($err, qr/ERROR:\s+55P03/, 'reshard waits for the prepared writer (55P03 after wait_ms)');
is($node->safe_psql($db, 'SELECT count(*) FROM cfeed.shard WHERE feed_id = 1'), '1',
   'no child while the prepared writer holds the shards lock');

# the reshard waits in the background; COMMIT PREPARED lets it through
my $bg = $node->background_psql($db);
$bg->query_until(qr/started/, q{
	\echo started
	SELECT count(*) FROM cfeed.reshard(1, 2, 60000);
});
$node->poll_query_until($db, q{
	SELECT count(*) > 0 FROM pg_catalog.pg_stat_activity WHERE query LIKE '%cfeed.reshard(1, 2, 60000)%' AND pid <> pg_backend_pid()
}) or die 'the reshard did not start';
$node->safe_psql($db, q{COMMIT PREPARED 'w'});
$bg->quit;

is($node->safe_psql($db, q{SELECT string_agg(shard || ':' || closed || ':' || ended, ',' ORDER BY shard) FROM cfeed.shard WHERE feed_id = 1}),
   '0:true:false,1:false:false,2:false:false', 'the parent is closed, not ended: the prepared writer\'s change is not stamped');
is($node->safe_psql($db, q{SELECT pending FROM cfeed.stats WHERE feed_id = 1 AND shard = 0}), '1', 'one change pending');
is($node->safe_psql($db, q{SELECT cfeed._read_to_end(1, 0, cfeed.head(1, 0))}), 'f', 'not read to its end at its head');
$node->safe_psql($db, 'SELECT cfeed.sweep()');
is($node->safe_psql($db, q{SELECT ended FROM cfeed.shard WHERE feed_id = 1 AND shard = 0}), 't', 'ended after the sweep');
is($node->safe_psql($db, q{SELECT string_agg(change_id::text, ',' ORDER BY change_sequence_number) FROM cfeed.read(1, 0)}),
   '1,3,2', 'the prepared writer\'s change is the parent\'s last');
is($node->safe_psql($db, q{SELECT cfeed._read_to_end(1, 0, cfeed.head(1, 0))}), 't', 'read to its end at its head');

$node->stop;
done_testing();
