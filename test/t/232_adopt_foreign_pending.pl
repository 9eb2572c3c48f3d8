# test/t/232_adopt_foreign_pending.pl
#
# A data-only dump restored with --disable-triggers into another cluster,
# then cfeed.adopt_marks() (docs/operations.md, "Storage in ranges"): the
# changes of a range shard pending at the dump keep the source cluster's
# writer_xid (the guard that would give them the restoring transaction's
# did not fire).  Where that xid is at or above the target's next one, no
# mark could say whether its writer is stamped, and up to 1.8 every sweep
# stamped those changes again, without end (a review: three changes with
# six numbers each after 6 s).  adopt_marks now gives them its own writer:
# the next sweep stamps each once, after the restored head.
#
# The source cluster first uses ~20,000 transaction ids, so that its
# writers' xids are above every xid of the fresh target.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $src = PostgreSQL::Test::Cluster->new('foreign_src');
$src->init;
$src->append_conf('postgresql.conf', "shared_preload_libraries = 'cfeed'\n");
$src->start;
$src->safe_psql('postgres', q{
	DO $$ BEGIN FOR i IN 1 .. 20000 LOOP PERFORM pg_current_xact_id(); COMMIT; END LOOP; END $$;
	CREATE EXTENSION cfeed;
	SET cfeed.default_storage = 'ranges';
	SELECT cfeed.create_feed('f', 2, 1);
	SELECT cfeed.publish(1, g % 2) FROM generate_series(1, 10) g;
});
$src->poll_query_until('postgres', q{SELECT cfeed.head(1, 0) + cfeed.head(1, 1) = 4000000000000010})
  or die 'not stamped';
$src->safe_psql('postgres', q{
	ALTER SYSTEM SET cfeed.enable_sweeper = off;
	SELECT pg_reload_conf();
});
$src->poll_query_until('postgres', 'SELECT count(*) = 0 FROM cfeed.sweepers') or die 'sweepers still run';
$src->safe_psql('postgres', 'SELECT cfeed.publish(1, g % 2) FROM generate_series(1, 6) g');
my $pending_xid = $src->safe_psql('postgres',
	'SELECT max(writer_xid::text::bigint) FROM cfeed.change WHERE feed_id = 1 AND change_id > 1000000000000010');

my $dir = PostgreSQL::Test::Utils::tempdir();
$src->command_ok([ 'pg_dump', '--schema-only', '-Fc', '-f', "$dir/s.dump", $src->connstr('postgres') ],
	'schema dumped');
$src->command_ok([ 'pg_dump', '--data-only', '--disable-triggers', '-Fc', '-f', "$dir/d.dump",
		$src->connstr('postgres') ], 'data dumped with --disable-triggers');
$src->stop;

my $dst = PostgreSQL::Test::Cluster->new('foreign_dst');
$dst->init;
$dst->append_conf('postgresql.conf', "shared_preload_libraries = 'cfeed'\n");
$dst->start;
$dst->safe_psql('postgres', 'CREATE DATABASE app');
$dst->command_ok([ 'pg_restore', '-d', $dst->connstr('app'), "$dir/s.dump" ], 'schema restored');
$dst->command_ok([ 'pg_restore', '--data-only', '--disable-triggers', '-d', $dst->connstr('app'), "$dir/d.dump" ],
	'data restored with --disable-triggers');
cmp_ok($dst->safe_psql('app', 'SELECT pg_current_xact_id()::text::bigint'), '<', $pending_xid,
	"the pending changes' writer ($pending_xid) is above every xid of the target");

$dst->safe_psql('app', 'SELECT count(*) FROM cfeed.adopt_marks()');
$dst->poll_query_until('app', q{SELECT cfeed.head(1, 0) + cfeed.head(1, 1) = 4000000000000016})
  or die 'the pending changes were not stamped';
# more sweeps: writes elsewhere wake the sweeper, and it looks again
$dst->safe_psql('app', q{SELECT cfeed.create_feed('other', 1, 2); SELECT cfeed.publish(2, 0)});
$dst->poll_query_until('app', q{SELECT cfeed.head(2, 0) > 2000000000000000}) or die 'feed 2 not stamped';
sleep 1;
$dst->safe_psql('app', q{SELECT cfeed.publish(2, 0)});
$dst->poll_query_until('app', q{SELECT cfeed.head(2, 0) = 2000000000000002}) or die 'feed 2 not stamped again';
is($dst->safe_psql('app', q{
	SELECT string_agg(format('%s:%s/%s/%s', s, n, ids, gapless), ' ' ORDER BY s) FROM (
		SELECT s, count(*) AS n, count(DISTINCT r.change_id) AS ids,
			   max(r.change_sequence_number) - min(r.change_sequence_number) + 1 = count(*) AS gapless
		FROM generate_series(0, 1) s, cfeed.read(1, s, NULL, 1000) r GROUP BY s) x}),
	'0:8/8/t 1:8/8/t', 'each of the 16 changes numbered once per shard, gapless');
is($dst->safe_psql('app', q{SELECT cfeed.head(1, 0) + cfeed.head(1, 1)}), '4000000000000016',
	'the heads stay put: nothing stamped again');

# cfeed's owner that is not a superuser may not set session_replication_role,
# which adopt_marks needs: a clear refusal saying what to grant, and then it
# works
$dst->safe_psql('postgres', q{
	CREATE ROLE cfeed_owner LOGIN SUPERUSER;
	CREATE DATABASE owned OWNER cfeed_owner;
});
my $owned = $dst->connstr('owned') . ' user=cfeed_owner';
$dst->safe_psql('owned', q{
	SET ROLE cfeed_owner;
	CREATE EXTENSION cfeed;
	SET cfeed.default_storage = 'ranges';
	SELECT cfeed.create_feed('g', 1, 1);
});
$dst->safe_psql('postgres', 'ALTER ROLE cfeed_owner NOSUPERUSER');
my ($ret, $out, $err) = $dst->psql('owned', q{
	SET ROLE cfeed_owner;
	DELETE FROM cfeed.sweep_mark;
	SELECT count(*) FROM cfeed.adopt_marks();
}, extra_params => [ '-v', 'VERBOSITY=verbose' ]);
like($err, qr/42501: cfeed\.adopt_marks\(\) needs to set session_replication_role/,
	'a non-superuser owner: 42501 from adopt_marks');
like($err, qr/GRANT SET ON PARAMETER session_replication_role TO cfeed_owner/, 'with the grant it needs');
$dst->safe_psql('postgres', 'GRANT SET ON PARAMETER session_replication_role TO cfeed_owner');
is($dst->safe_psql('owned', q{
	SET ROLE cfeed_owner;
	DELETE FROM cfeed.sweep_mark;
	SELECT count(*) FROM cfeed.adopt_marks();
}), '1', 'after that grant, adopt_marks makes the mark again');

$dst->stop;
done_testing();
