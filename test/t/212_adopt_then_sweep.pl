# The first sweep after cfeed.adopt_marks() failed with
# 23505 (duplicate key value violates unique constraint "sweep_mark_pkey")
# when it stamps something and no xid was assigned between the adoption's
# commit and the sweep's snapshot (seen failing so; the mark store now
# replaces a mark with the same next_xid).
#
# adopt_marks() stores next_xid = its snapshot's xmax, which is T + 1 (T,
# its own xid, is the latest assigned).  The next sweep's snapshot has the
# same xmax; it proposes it as the group's new mark, and cfeed_mark_store's
# "WITH gone AS (DELETE ...) INSERT ..." inserts before the unreferenced
# DELETE runs (data-modifying CTEs not read by the main query run after
# it), so the key (sweep_group, next_xid) is there twice.  Ordinary sweeps
# never meet it: a sweep that stores a mark has an xid, so the next one's
# xmax is above it.  ranges.sql and 209_ranges_dump.pl do not see it only
# because their second adopt_marks() call, which adopts nothing, still
# takes an xid before the sweep.
#
# The foreign mark is made as after pg_upgrade (another
# system_identifier), as sql/ranges.sql does; a restored dump is the same.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use CfeedCheck;

my $node = cfeed_node('then_sweep', "cfeed.enable_sweeper = off\n");
$node->safe_psql('postgres', q{
	CREATE EXTENSION cfeed;
	SET cfeed.default_storage = ranges;
	SELECT cfeed.create_feed('ranged', 1);
	SELECT cfeed.publish(1, 0, 1);
	SELECT count(*) FROM cfeed.sweep(0);
	SELECT cfeed.publish(1, 0, 2);
	UPDATE cfeed.sweep_mark SET system_identifier = 1;});
is($node->safe_psql('postgres', 'SELECT count(*) FROM cfeed.adopt_marks()'), '1', 'group 0 adopted');
my ($rc, $out, $err) = $node->psql('postgres', 'SELECT sum(change_count) FROM cfeed.sweep(0)');
is($err, '', 'the sweep right after the adoption succeeds');
is($out, '1', 'and stamps the pending change');

$node->stop;
done_testing();
