# The plans of cfeed.read_rows (and of cfeed.read under a read policy of
# the operator's; under cfeed's own it reads the index itself): generic, made once per
# backend, an ordered scan of change_sequence_idx stopped at max_count,
# never compiled by JIT.  Before, each call near a shard's head (where the
# range left is estimated small) was planned anew (on a large shard as a
# bitmap scan of the whole range and a sort); a generic plan, whose LIMIT
# is a parameter, costs a tenth of the range, and on a large shard every
# call JIT-compiled it unless cfeed turns JIT off.  auto_explain, logging
# the statements the functions run, shows each call's plan: a generic one
# has the parameters ($3), a custom one the call's values; a compiled one a
# JIT section.  The session's settings must not matter: it forces custom
# plans and JIT for every plan.  The read policy's selectivity (1.7) is in
# sql/read_access.sql.
#
# A shard stored in ranges is read by looking its stamps' changes up in
# change_pending_idx (read_rows(), and read() when a change was deleted
# by hand; else read() answers from the stamps), one probe each, whatever the statistics of
# cfeed.change say: before it was ever analyzed, a page joined to it
# compared each of its 1,000 entries with every pending change of the
# table.  Retention finds a range shard's old changes the same way, and
# cfeed.stats does not scan the range changes for a row shard's pending
# ones when no shard is stored in rows.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('plans');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'cfeed'
cfeed.enable_sweeper = off
});
$node->start;
$node->safe_psql('postgres', q{
	CREATE EXTENSION cfeed;
	SELECT cfeed.create_feed('f', 2);
	INSERT INTO cfeed.change (feed_id, shard, change_id)
	SELECT 1, i % 2, nextval('cfeed.change_id') FROM generate_series(1, 20000) i;
	SELECT count(*) FROM cfeed.sweep();
	VACUUM ANALYZE cfeed.change;
});
my $head = $node->safe_psql('postgres', 'SELECT cfeed.head(1, 0)');

# Eight calls of each function, each a few rows short of the head (where a
# custom plan is estimated a handful of rows) or from the start, with every
# nested statement's plan logged as a NOTICE.
my $calls = join("\n", map {
	my $cursor = $_ % 2 ? $head - 5 * $_ : 'NULL';
	("SELECT count(*) FROM cfeed.read(1, 0, $cursor, 1000);",
	 "SELECT count(*) FROM cfeed.read_rows(1, 0, $cursor, 1000);")
} 1 .. 8);
my ($out, $err) = ('', '');
$node->psql('postgres', qq{
	LOAD 'auto_explain';
	SET auto_explain.log_min_duration = 0;
	SET auto_explain.log_nested_statements = on;
	SET auto_explain.log_level = notice;
	SET client_min_messages = notice;
	SET plan_cache_mode = force_custom_plan;
	SET jit = on;
	SET jit_above_cost = 0;
	$calls
}, stdout => \$out, stderr => \$err, on_error_die => 1);

# The plans of the functions' own statements, in call order (their query
# text has the parameters whatever the plan: a plan's index condition tells).
# read() runs no plan (it reads change_sequence_idx itself under cfeed's own
# read policy): only read_rows()'s eight calls log one.
my @plans = grep { /Query Text: SELECT c\.change_sequence_number/ } split(/(?=NOTICE:  duration)/, $err);
is(scalar(@plans), 8, "each read_rows() call logged the plan of its statement, read()'s none");
is(scalar(grep { /cfeed\._tracked_table/ } @plans), 8, 'the plans are all read_rows()');
is(scalar(grep { /Index Cond: .*change_sequence_number > \$3\)/ } @plans), 8,
	'every call ran the generic plan (the cursor a parameter)');
is(scalar(grep { /Index Scan using change_sequence_idx/ && !/Sort|Bitmap/ } @plans), 8,
	'every plan is an ordered scan of change_sequence_idx, no bitmap scan or sort');
SKIP:
{
	skip 'this server has no JIT', 1
	  unless $node->safe_psql('postgres', 'SELECT pg_jit_available()') eq 't';
	is(scalar(grep { /JIT:/ } @plans), 0, 'no plan was compiled by JIT');
}
my @counts = split(/\n/, $out);
is_deeply(\@counts, [ map { $_ % 2 ? (5 * $_, 5 * $_) : (1000, 1000) } 1 .. 8 ],
	'each call read the rows after its cursor, at most max_count');

# A feed stored in ranges in a database whose cfeed.change is never analyzed
# (autovacuum off for it): 7,000 changes written by big transactions, of
# which a page of 1,000 is read.  Each entry costs one probe of
# change_pending_idx: the index tuples read stay near the page's 1,000, not
# the 7,000 pending entries of the table (the joined page read them all).

# A new database $db with cfeed, whose cfeed.change autovacuum leaves alone
# (its statistics are the test's), and a feed 'f' of $shards shards stored
# in ranges; then $sql.
sub range_database
{
	my ($db, $shards, $sql) = @_;
	$node->safe_psql('postgres', "CREATE DATABASE $db");
	$node->safe_psql($db, qq{
		CREATE EXTENSION cfeed;
		ALTER TABLE cfeed.change SET (autovacuum_enabled = off);
		SET cfeed.default_storage = ranges;
		SELECT cfeed.create_feed('f', $shards);
		$sql
	});
	return;
}
range_database('r', 2, '');
# each transaction swept on its own: 7 stamps of 500 changes a shard
$node->safe_psql('r', 'SELECT cfeed.publish(1, g % 2) FROM generate_series(1, 1000) g;
	SELECT count(*) FROM cfeed.sweep()') for 1 .. 7;
is($node->safe_psql('r', q{SELECT last_analyze IS NULL AND last_autoanalyze IS NULL
	FROM pg_stat_user_tables WHERE relid = 'cfeed.change'::regclass}), 't',
	'ranges: cfeed.change was never analyzed');
my $tuples_read = q{SELECT pg_stat_force_next_flush();
	SELECT idx_tup_read FROM pg_stat_user_indexes WHERE indexrelid = 'cfeed.change_pending_idx'::regclass};
# the tuples of cfeed.change a read looks at: a sequential scan's too
my $lookup_tuples = q{SELECT t.seq_tup_read + i.idx_tup_read AS n
	FROM pg_stat_user_tables t, pg_stat_user_indexes i
	WHERE t.relid = 'cfeed.change'::regclass AND i.indexrelid = 'cfeed.change_pending_idx'::regclass};
# the tuples of cfeed.change one call looks at
# (as $role, when given)
sub lookups
{
	my ($db, $call, $role) = @_;
	my $as = $role ? "SET ROLE $role;" : '';
	my ($before) = reverse split /\n/, $node->safe_psql($db, "SELECT pg_stat_force_next_flush(); $lookup_tuples");
	my $rows = $node->safe_psql($db, "$as SELECT count(*) FROM $call");
	my ($after) = reverse split /\n/, $node->safe_psql($db, "SELECT pg_stat_force_next_flush(); $lookup_tuples");
	return ($rows, $after - $before);
}
# read_rows() looks every change up (it reads the row images)
my ($rows, $looked) = lookups('r', 'cfeed.read_rows(1, 0, NULL, 1000)');
is($rows, '1000', 'ranges: a page of 1,000 read with read_rows()');
cmp_ok($looked, '<=', 2000,
	"ranges: the page read about one index tuple per change, not every pending one ($looked)");

# read() answers from the stamps alone (no change deleted, none with a row
# image, a caller the read policy shows every change): seen failing before
# it did, 1,000 index tuples.  Once a change of the shard was deleted by
# hand, it looks each change up, as above.
($rows, $looked) = lookups('r', 'cfeed.read(1, 0, NULL, 1000)');
is($rows, '1000', 'ranges: a page of 1,000 read with read()');
cmp_ok($looked, '<', 10, "ranges: read() looked no change up ($looked tuples)");
$node->safe_psql('r', q{DELETE FROM cfeed.change WHERE change_id =
	(SELECT max(change_id) FROM cfeed.change WHERE feed_id = 1 AND shard = 0)});
($rows, $looked) = lookups('r', 'cfeed.read(1, 0, NULL, 1000)');
is($rows, '1000', 'ranges: a page of 1,000 read with read() after a delete');
cmp_ok($looked, '>=', 1000, "ranges: after a delete, read() looked each change up ($looked tuples)");
cmp_ok($looked, '<=', 2000, "ranges: ... one probe each ($looked tuples)");

# A tracked table's changes in a range feed, read by a role the read policy
# applies to: looked up (and left out) while it may not SELECT the table;
# answered from the stamps, which name the tables of their changes' images
# (image_tables), once it may (seen failing before: 1,000 index tuples).
range_database('t', 1, q{
	CREATE TABLE public.item (id int PRIMARY KEY);
	SELECT cfeed.track('public.item', 1);
	CREATE ROLE item_reader;
	GRANT SELECT ON cfeed.change TO item_reader;
	SELECT cfeed.grant_read(1, 'item_reader');
	INSERT INTO public.item SELECT g FROM generate_series(1, 1000) g;
	SELECT count(*) FROM cfeed.sweep();
});
($rows, $looked) = lookups('t', 'cfeed.read(1, 0, NULL, 1000)', 'item_reader');
is($rows, '0', 'ranges, tracked: a reader without SELECT on the table reads none of its changes');
cmp_ok($looked, '>=', 1000, "ranges, tracked: ... each looked up ($looked tuples)");
$node->safe_psql('t', 'GRANT SELECT ON public.item TO item_reader');
($rows, $looked) = lookups('t', 'cfeed.read(1, 0, NULL, 1000)', 'item_reader');
is($rows, '1000', 'ranges, tracked: with SELECT on the table, a page of 1,000');
cmp_ok($looked, '<', 10, "ranges, tracked: ... answered from the stamps ($looked tuples)");

# A backend that made its read plans while cfeed.change was analyzed small
# (autovacuum analyzes it after its first 50 changes) keeps those generic
# plans as the table grows, until the table is analyzed again: a range
# page's lookups must still be probes of change_pending_idx, not a
# sequential scan of the table per change (1.27 s for a page of 1,000 among
# 20,000 changes, not 3 ms), and a row shard's read_rows() a range of
# change_sequence_idx, not a scan and sort of the table.  A change of the
# range shard deleted by hand first: read() looks its changes up.
range_database('a', 1, q{
	SET cfeed.default_storage = rows;
	SELECT cfeed.create_feed('g', 1);
	SELECT count(cfeed.publish(1 + g % 2, 0)) FROM generate_series(1, 20) g;
	DELETE FROM cfeed.change WHERE change_id = (SELECT min(change_id) FROM cfeed.change WHERE feed_id = 1);
});
$node->safe_psql('a', 'SELECT count(*) FROM cfeed.sweep()');
$node->safe_psql('a', 'ANALYZE cfeed.change');
my $read_ranges = q{cfeed.read(1, 0, (SELECT start_sequence_number FROM cfeed.shard WHERE feed_id = 1), 1000)};
my $grown = $node->safe_psql('a', qq{
	SELECT 'first ' || count(*) FROM $read_ranges;
	SELECT 'first ' || count(*) FROM cfeed.read_rows(2, 0, NULL, 1000);
	@{[ join('', map { "SELECT count(cfeed.publish(1 + g % 2, 0)) FROM generate_series(1, 2000) g;\n" } 1 .. 10) ]}
	DO \$\$ BEGIN LOOP EXIT WHEN (SELECT coalesce(sum(change_count), 0) FROM cfeed.sweep()) = 0; COMMIT; END LOOP; END \$\$;
	SELECT pg_stat_force_next_flush();
	$lookup_tuples \\gset before_
	SELECT 'page ' || count(*) FROM $read_ranges;
	SELECT pg_stat_force_next_flush();
	SELECT 'ranges ' || (($lookup_tuples) - :before_n);
	$lookup_tuples \\gset before_
	SELECT 'page ' || count(*) FROM cfeed.read_rows(2, 0, NULL, 1000);
	SELECT pg_stat_force_next_flush();
	SELECT 'rows ' || (($lookup_tuples) - :before_n);
});
is(join(',', $grown =~ /^((?:first|page) \d+)$/mg), 'first 9,first 10,page 1000,page 1000',
	'analyzed small: the plans made with 10 changes a feed (one deleted), then pages of 1,000 read among 10,010');
my ($ranges_tuples) = $grown =~ /^ranges (\d+)$/m;
my ($rows_tuples) = $grown =~ /^rows (\d+)$/m;
cmp_ok($ranges_tuples, '<=', 2000,
	"analyzed small: the range page probed the index per change, not the table per change ($ranges_tuples tuples)");
cmp_ok($rows_tuples, '<', 100,
	"analyzed small: the row shard's page read an index range, not the table ($rows_tuples tuples)");

# Retention of that shard (its stamps made two hours old): the changes its
# stamps name are found the same way, one probe each, and deleted.
my $change_tuples = q{SELECT pg_stat_force_next_flush();
	SELECT seq_tup_read + coalesce(idx_tup_fetch, 0) FROM pg_stat_user_tables WHERE relid = 'cfeed.change'::regclass};
$node->safe_psql('r', q{UPDATE cfeed.feed SET retention = '1 hour' WHERE feed_id = 1;
	UPDATE cfeed.stamp SET stamped_at = stamped_at - interval '2 hours' WHERE feed_id = 1 AND shard = 0});
my ($before, $after);
($before) = reverse split /\n/, $node->safe_psql('r', $change_tuples);
my $deleted = $node->safe_psql('r', 'SELECT cfeed.apply_retention()');
($after) = reverse split /\n/, $node->safe_psql('r', $change_tuples);
cmp_ok($deleted, '>=', 3000, "ranges: retention deleted the shard's old changes ($deleted)");
cmp_ok($after - $before, '<=', 2 * $deleted,
	'ranges: retention read about one row of cfeed.change per change it deleted, not every pending one ('
	  . ($after - $before) . ')');

# Retention as the group-0 sweeper runs it (generic plans, kept), its plan
# made while cfeed.change was analyzed small: after the table grew, the
# changes of the old stamps are still found by a probe each (seen failing:
# 50 million tuples and 11 s to delete 5,000 changes among 5,000).
my $sweep_all = q{DO $$ BEGIN LOOP EXIT WHEN (SELECT coalesce(sum(change_count), 0) FROM cfeed.sweep()) = 0; COMMIT; END LOOP; END $$;};
range_database('b', 1, q{
	UPDATE cfeed.feed SET retention = '1 hour' WHERE feed_id = 1;
	SELECT count(cfeed.publish(1, 0)) FROM generate_series(1, 10);
});
$node->safe_psql('b', $sweep_all);
$node->safe_psql('b', 'SELECT cfeed.publish(1, 0)');
$node->safe_psql('b', $sweep_all);
$node->safe_psql('b', 'ANALYZE cfeed.change');
my $fetched = q{SELECT t.seq_tup_read + coalesce(t.idx_tup_fetch, 0) AS n
	FROM pg_stat_user_tables t WHERE t.relid = 'cfeed.change'::regclass};
my $retained = $node->safe_psql('b', qq{
	SET plan_cache_mode = force_generic_plan;
	UPDATE cfeed.stamp SET stamped_at = stamped_at - interval '2 hours';
	SELECT 'deleted ' || cfeed.apply_retention();
	@{[ join('', map { "SELECT count(cfeed.publish(1, 0)) FROM generate_series(1, 1000);\n" } 1 .. 3) ]}
	$sweep_all
	SELECT cfeed.publish(1, 0);
	$sweep_all
	UPDATE cfeed.stamp SET stamped_at = stamped_at - interval '2 hours';
	SELECT pg_stat_force_next_flush();
	$fetched \\gset before_
	SELECT 'deleted ' || cfeed.apply_retention();
	SELECT pg_stat_force_next_flush();
	SELECT 'tuples ' || (($fetched) - :before_n);
});
is(join(',', $retained =~ /^deleted (\d+)$/mg), '10,3001',
	'retention planned small: 10 changes deleted, then 3,001 after the table grew');
my ($retained_tuples) = $retained =~ /^tuples (\d+)$/m;
cmp_ok($retained_tuples, '<=', 2 * 3001,
	"retention planned small: a probe per change deleted, not a scan of the table ($retained_tuples tuples)");

# cfeed.stats, with every shard of the database stored in ranges: a row
# shard's pending changes are not looked for among the range changes, all
# of which stay in change_pending_idx.
($before) = reverse split /\n/, $node->safe_psql('r', $tuples_read);
is($node->safe_psql('r', 'SELECT sum(pending) FROM cfeed.stats'), '0', 'ranges: cfeed.stats, nothing pending');
($after) = reverse split /\n/, $node->safe_psql('r', $tuples_read);
cmp_ok($after - $before, '<', 100,
	'ranges: cfeed.stats read no index tuple of the range changes (' . ($after - $before) . ')');

# cfeed.stats after bulk writes: few writers, many changes each, so that
# cfeed.change's statistics make a probe by writer_xid look unselective.
# As a query, the view's probe of the group's running writers (writer_xid
# = ANY (running)) was then planned as a sequential scan of the table for
# each range shard (seen failing: 80,000 tuples read here, 0.4 s a read of
# the view over 600,000 changes); cfeed._pending probes change_pending_idx
# whatever the statistics.  A writer in the mark's running (open while a
# sweep ran, committed after it) is counted until the next sweep.
range_database('k', 4, '');
$node->safe_psql('k', "INSERT INTO cfeed.change (feed_id, shard, change_id)
	SELECT 1, g % 4, nextval('cfeed.change_id') FROM generate_series(1, 20000) g;
	SELECT count(*) FROM cfeed.sweep();") for 1 .. 2;
$node->safe_psql('k', 'ANALYZE cfeed.change');
my $open = $node->background_psql('k');
$open->query_safe('BEGIN; SELECT cfeed.publish(1, g % 4) FROM generate_series(1, 3) g');
$node->safe_psql('k', 'SELECT count(*) FROM cfeed.sweep()');
$open->query_safe('COMMIT');
$open->quit;
($before) = reverse split /\n/, $node->safe_psql('k', $change_tuples);
is($node->safe_psql('k', q{SELECT string_agg(shard || ':' || pending, ',' ORDER BY shard) FROM cfeed.stats}),
	'0:0,1:1,2:1,3:1', 'bulk writes: cfeed.stats counts the changes of a writer the last sweep saw running');
($after) = reverse split /\n/, $node->safe_psql('k', $change_tuples);
cmp_ok($after - $before, '<', 100,
	'bulk writes: cfeed.stats read a few rows of cfeed.change, not the table (' . ($after - $before) . ')');
$node->safe_psql('k', 'SELECT count(*) FROM cfeed.sweep()');
is($node->safe_psql('k', 'SELECT sum(pending) FROM cfeed.stats'), '0', 'bulk writes: none pending once swept');
# Two sweep groups, one walk: each range change is counted by its own
# group's mark (feed 2 in group 1, its first change stamped).
$node->safe_psql('k', q{SET cfeed.default_storage = ranges;
	SELECT cfeed.create_feed('g1', 1, sweep_group => 1);
	SELECT cfeed.publish(2, 0); SELECT count(*) FROM cfeed.sweep(1);
	SELECT cfeed.publish(2, 0); SELECT cfeed.publish(2, 0); SELECT cfeed.publish(1, 3);});
is($node->safe_psql('k', q{SELECT string_agg(feed_id || '.' || shard || ':' || pending, ',' ORDER BY feed_id, shard)
	FROM cfeed.stats}), '1.0:0,1.1:0,1.2:0,1.3:1,2.0:2', 'two sweep groups: each change counted by its group\'s mark');
$node->safe_psql('k', 'SELECT count(*) FROM cfeed.sweep(0)');
is($node->safe_psql('k', q{SELECT string_agg(feed_id || '.' || shard || ':' || pending, ',' ORDER BY feed_id, shard)
	FROM cfeed.stats WHERE pending > 0}), '2.0:2', 'two sweep groups: one swept, the other still pending');

# A feed moved to ranges (cfeed.set_storage) keeps its old row shards,
# closed, in its sweep group, which now has a mark: whether they have ended
# (the view cfeed.shard, a wait at their head) and their pending changes
# (cfeed.stats) are looked for where the mark points, not among every range
# change in change_pending_idx or the table (seen failing: 40,000, 20,001
# and 20,000 tuples read over the children's 20,000 changes).  A change of an old row
# shard left unstamped at the move keeps it from ending until swept.
$node->safe_psql('postgres', 'CREATE DATABASE m');
$node->safe_psql('m', q{CREATE EXTENSION cfeed;
	ALTER TABLE cfeed.change SET (autovacuum_enabled = off);
	SELECT cfeed.create_feed('moved', 2);
	SELECT count(cfeed.publish(1, g % 2)) FROM generate_series(1, 10) g;
	SELECT count(*) FROM cfeed.sweep();
	SELECT cfeed.publish(1, 1);
	SELECT count(*) FROM cfeed.set_storage(1, 'ranges');});
my $ended = q{SELECT string_agg(shard || ':' || ended, ',' ORDER BY shard) FROM cfeed.shard};
is($node->safe_psql('m', $ended), '0:true,1:false,2:false,3:false',
	'moved feed: an old row shard with a change left unstamped has not ended');
is($node->safe_psql('m', q{SELECT string_agg(shard || ':' || pending, ',' ORDER BY shard) FROM cfeed.stats}),
	'0:0,1:1,2:0,3:0', 'moved feed: cfeed.stats counts it');
$node->safe_psql('m', q{INSERT INTO cfeed.change (feed_id, shard, change_id)
	SELECT 1, 2 + g % 2, nextval('cfeed.change_id') FROM generate_series(1, 20000) g;
	SELECT count(*) FROM cfeed.sweep();
	ANALYZE cfeed.change;});
is($node->safe_psql('m', $ended), '0:true,1:true,2:false,3:false', 'moved feed: swept, both old shards have ended');
for my $look (['the view cfeed.shard', $ended],
	['cfeed.stats', 'SELECT sum(pending) FROM cfeed.stats'],
	['a wait at an old shard\'s head', 'SELECT cfeed.wait(1, 0, cfeed.head(1, 0), 60000) = cfeed.head(1, 0)'])
{
	($before) = reverse split /\n/, $node->safe_psql('m', "SELECT pg_stat_force_next_flush(); $lookup_tuples");
	$node->safe_psql('m', $look->[1]);
	($after) = reverse split /\n/, $node->safe_psql('m', "SELECT pg_stat_force_next_flush(); $lookup_tuples");
	cmp_ok($after - $before, '<', 100,
		"moved feed: $look->[0] read a few rows of cfeed.change, not the range changes ("
		  . ($after - $before) . ')');
}

done_testing();
