# A restore could lose the dumped sweep mark (seen failing so; the
# cluster's system identifier is in the marks' key now).
#
# Restoring cfeed.shard_config (extension config data, COPY) fires the
# ENABLE ALWAYS trigger shard_config_storage, which gives a group its first
# mark when its first range shard is created: the restore makes a mark of
# this cluster (next_xid = the restoring snapshot's xmax) before cfeed.
# sweep_mark's data is copied.  When that next_xid equals the dumped mark's
# (fresh clusters, test and CI databases: the two counts of xids run
# alike; a first run met it by chance at xid 743), the COPY
# of sweep_mark fails on sweep_mark_pkey and pg_restore goes on ("errors
# ignored on restore: 1"): the group is left with only the new cluster's
# mark, no sweep refuses it, adopt_marks() adopts nothing, and every
# change stamped before the dump is lost to read() (its stamp names the
# dumped writers).  Otherwise the group has two marks (harmless: adopt
# deletes both).
#
# Here the new cluster's xids are moved to meet the dumped mark's next_xid
# (an offset measured by a first restore into another database).
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
	DO $$ BEGIN FOR i IN 1..3000 LOOP PERFORM pg_current_xact_id(); COMMIT; END LOOP; END $$;
	SET cfeed.default_storage = ranges;
	SELECT cfeed.create_feed('ranged', 1);
	SELECT count(cfeed.publish(1, 0, g)) FROM generate_series(1, 5) g;
	SELECT count(*) FROM cfeed.sweep(0);});
my $old_next = $old->safe_psql('postgres', 'SELECT next_xid FROM cfeed.sweep_mark');
my $dump = $old->basedir . '/app.dump';
$old->command_ok([ 'pg_dump', '-Fc', '-f', $dump, '-d', $old->connstr('postgres') ], 'pg_dump');

my $new = cfeed_node('new', "cfeed.enable_sweeper = off\n");
$new->safe_psql('postgres', 'CREATE DATABASE probe');
$new->safe_psql('postgres', 'CREATE DATABASE app');
my $x0 = $new->safe_psql('postgres', 'SELECT pg_current_xact_id()');
$new->command_ok([ 'pg_restore', '-d', $new->connstr('probe'), $dump ], 'pg_restore into probe');
is($new->safe_psql('probe', 'SELECT count(*) FROM cfeed.sweep_mark'), '2',
	'the restore made a mark of its own beside the dumped one');
my $offset = $new->safe_psql('probe',
	q{SELECT next_xid::text::bigint FROM cfeed.sweep_mark WHERE system_identifier = (SELECT system_identifier FROM pg_control_system())}) - $x0;
my $x1 = $new->safe_psql('postgres', 'SELECT pg_current_xact_id()');
my $burn = $old_next - $offset - $x1 - 1;
ok($burn > 0, "xids to take before the restore: $burn");
burn_xids($new, 'postgres', $burn);
is($new->safe_psql('postgres', 'SELECT pg_current_xact_id()') + $offset, $old_next, 'the restore will meet the dumped next_xid');

my $rc = system('pg_restore', '-d', $new->connstr('app'), $dump);
is($rc, 0, 'pg_restore restores every table');
is($new->safe_psql('app', 'SELECT count(*) FROM cfeed.sweep_mark WHERE system_identifier <> (SELECT system_identifier FROM pg_control_system())'), '1',
	'the dumped mark is restored');
$new->psql('app', 'SELECT count(*) FROM cfeed.adopt_marks()');
$new->safe_psql('app', 'SELECT pg_current_xact_id()');
$new->psql('app', 'SELECT count(*) FROM cfeed.sweep(0)');
is($new->safe_psql('app', q{SELECT coalesce(string_agg(change_id::text, ',' ORDER BY change_sequence_number), '') FROM cfeed.read(1, 0, NULL, 100)}),
	'1,2,3,4,5', 'the changes stamped before the dump are read');

$old->stop;
$new->stop;
done_testing();
