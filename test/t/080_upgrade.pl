# Upgrades (ALTER EXTENSION cfeed UPDATE).
#
# A fresh CREATE EXTENSION runs the frozen 1.0 install script and then the
# upgrade scripts (the contrib idiom: no full script per later version), so
# the pg_regress and isolation suites already check "1.0 + updates".  What
# they cannot check is an update of a database that lived at 1.0 with data,
# served meanwhile by the current library and background sweeper.  This test
# does that, and then requires the updated extension to be identical, object
# for object, to a fresh install, and to keep every guarantee with the data
# written before the update.  It also restores a 1.0 dump into the current
# version, the other way a database moves to a new release.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Digest::SHA qw(sha256_hex);
use FindBin;
use lib $FindBin::RealBin;
use CfeedCheck;

my $node = PostgreSQL::Test::Cluster->new('upgrade');
$node->init;
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'cfeed'\n");
$node->start;

# A released install script never changes: fixes go into an upgrade script.
my $released = $node->config_data('--sharedir') . '/extension/cfeed--1.0.sql';
is(sha256_hex(slurp_file($released)),
	'd72c98de38d6c36cabeb8a1177c7450c75ad12ef86f6b4abe5d404e2030f88ea',
	'the released install script cfeed--1.0.sql is unchanged (frozen)');

is($node->safe_psql('postgres', q{
	SELECT string_agg(source || '>' || target, ',' ORDER BY source, target)
	FROM pg_extension_update_paths('cfeed') WHERE path IS NOT NULL}),
	join(',', map { my $from = $_; map { "1.$from>1.$_" } ($from + 1 .. 9) } (0 .. 8)),
	'update paths 1.0 -> 1.1 -> ... -> 1.9, each step and every longer path');
is($node->safe_psql('postgres', q{SELECT default_version FROM pg_available_extensions WHERE name = 'cfeed'}),
	'1.9', 'default version is 1.9');

# How a tracked row's change was written: from 1.2 on, directly, holding one
# lock on the feed's shards (advisory, field 4 0x6368) instead of the shard
# rows'; before, without shard_config's guard trigger, through SQL and the
# foreign key.
my $shard_locks = q{BEGIN;
	INSERT INTO items (id, v) SELECT g, 'probe' FROM generate_series(100000, 100049) g;
	SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 25448 AND pid = pg_backend_pid();
	ROLLBACK;};

# Tracked rows of a shard of feed 2 whose images read back as the rows are.
sub images_read_back
{
	my ($db, $shard) = @_;
	my $read = $node->safe_psql($db, qq{
		SELECT count(*) FROM cfeed.read_rows(2, $shard, NULL, 1000) r
		JOIN items i ON i.change_id = r.change_id WHERE r."row" ->> 'v' = i.v});
	return $read > 0 &&
	  $read eq $node->safe_psql($db, qq{SELECT count(*) FROM items WHERE cfeed.shard_for(2, id::text) = $shard});
}

# What the foreign key of cfeed.change guaranteed, kept from 1.6 on by
# change_guard and shard_config_guard: an INSERT into a missing shard or feed
# fails with 23503, a shard with changes cannot be deleted (23503), one
# without can; and an SQL INSERT does not lock the shard's row (its xmax,
# which a locker sets to its xid).
sub check_shard_guarantees
{
	my ($db, $feed, $what) = @_;
	my ($ret, $out, $err);

	($ret, $out, $err) = $node->psql($db, "\\set VERBOSITY verbose\nINSERT INTO cfeed.change (feed_id, shard, change_id) VALUES ($feed, 99, 1)");
	like($err, qr/23503: shard 99 of feed $feed does not exist/, "$what: an INSERT into a missing shard fails with 23503");
	($ret, $out, $err) = $node->psql($db, "\\set VERBOSITY verbose\nINSERT INTO cfeed.change (feed_id, shard, change_id) VALUES (999, 0, 1)");
	like($err, qr/23503: feed 999 does not exist/, "$what: an INSERT into a missing feed fails with 23503");
	($ret, $out, $err) = $node->psql($db, "\\set VERBOSITY verbose\nDELETE FROM cfeed.shard WHERE feed_id = $feed AND shard = 0");
	like($err, qr/23503: shard 0 of feed $feed still has changes/, "$what: a shard with changes cannot be deleted (23503)");
	is($node->safe_psql($db, qq{BEGIN;
		INSERT INTO cfeed.change (feed_id, shard, change_id) VALUES ($feed, 0, 1);
		SELECT xmax <> pg_current_xact_id()::xid FROM cfeed.shard_config WHERE feed_id = $feed AND shard = 0;
		ROLLBACK;}), 't', "$what: an SQL INSERT of a change does not lock its shard's row");
	is($node->safe_psql($db, qq{INSERT INTO cfeed.shard (feed_id, shard) VALUES ($feed, 50);
		DELETE FROM cfeed.shard WHERE feed_id = $feed AND shard = 50;
		SELECT count(*) FROM cfeed.shard WHERE feed_id = $feed AND shard = 50}), '0',
		"$what: a shard without changes can be deleted");
	return;
}

# A database at 1.5 (the foreign key, change_guard's WHEN clause) with
# changes written by SQL INSERTs, updated to 1.9.
$node->safe_psql('postgres', 'CREATE DATABASE v15');
$node->safe_psql('v15', q{
	CREATE EXTENSION cfeed VERSION '1.5';
	SELECT cfeed.create_feed('seed', 2);
	CREATE TABLE truth (change_id bigint PRIMARY KEY);
	INSERT INTO truth SELECT g FROM generate_series(1, 120) g;
	INSERT INTO cfeed.change (feed_id, shard, change_id) SELECT 1, g % 2, g FROM generate_series(1, 100) g;
});
is($node->safe_psql('v15', q{BEGIN;
	INSERT INTO cfeed.change (feed_id, shard, change_id) VALUES (1, 0, 1000);
	SELECT xmax <> pg_current_xact_id()::xid FROM cfeed.shard_config WHERE feed_id = 1 AND shard = 0;
	ROLLBACK;}), 'f', '1.5: the foreign key locks the shard\'s row');
ok(wait_all_stamped($node, 'v15'), 'the background sweeper stamps a 1.5 database');
$node->safe_psql('v15', q{INSERT INTO cfeed.change (feed_id, shard, change_id) SELECT 1, g % 2, g FROM generate_series(101, 120) g});
# a consumer group of 1.5, 30 changes into shard 0
$node->safe_psql('v15', q{
	SELECT cfeed.checkpoint('g15', 1, 0, 'a', l.epoch, l.cursor + 30)
	FROM cfeed.acquire('g15', 1, 'a', 600000) l WHERE l.shard = 0});
# at 1.8, failure policies, one for a group name no lease can have (over
# 200 characters, which 1.8 stored): 1.9 drops it, so that a dump restores
# (its guard refuses the name)
$node->safe_psql('v15', q{ALTER EXTENSION cfeed UPDATE TO '1.8';
	SELECT cfeed.set_failure_policy('g15', 1, 3);
	SELECT cfeed.set_failure_policy(repeat('g', 250), 1, 3)});
$node->safe_psql('v15', 'ALTER EXTENSION cfeed UPDATE');
is($node->safe_psql('v15', q{SELECT extversion FROM pg_extension WHERE extname = 'cfeed'}), '1.9',
	'ALTER EXTENSION cfeed UPDATE takes 1.5 (by 1.8) to 1.9');
is($node->safe_psql('v15', q{SELECT string_agg(left(group_name, 10) || ':' || char_length(group_name), ',')
	FROM cfeed.failure_policy}), 'g15:3',
	'1.9: the failure policy of a name over 200 characters is gone, the other kept');
ok(wait_all_stamped($node, 'v15'), 'the changes written at 1.5 are stamped at 1.9');
check_shard_guarantees('v15', 1, '1.5 updated to 1.9');
check_invariants($node, 'v15', '1.5 updated to 1.9');

# 1.9: the feed of 1.5 moves to storage in ranges (cfeed.set_storage); its
# numbers stay, its new changes are stamped in ranges, and the group of 1.5
# reads on from its checkpoint: the rest of each old shard, then its child,
# every change once
is($node->safe_psql('v15', q{
	SELECT string_agg(shard || '<' || parent, ' ' ORDER BY shard) FROM cfeed.set_storage(1, 'ranges');
	SELECT string_agg(shard || ':' || storage || ':' || closed, ' ' ORDER BY shard) FROM cfeed.shard WHERE feed_id = 1}),
	"2<0 3<1\n0:rows:true 1:rows:true 2:ranges:false 3:ranges:false",
	'1.9: the feed of 1.5 moves to ranges, one child per shard');
$node->safe_psql('v15', q{
	CREATE TABLE moved (change_id bigint PRIMARY KEY);
	INSERT INTO moved SELECT cfeed.publish(1, cfeed.shard_for(1, 'k' || g)) FROM generate_series(1, 40) g;
	CREATE TABLE got (change_id bigint, shard int, n bigint);});
ok($node->poll_query_until('v15', q{SELECT coalesce(sum(pending), 0) = 0 FROM cfeed.stats WHERE feed_id = 1}),
	'the changes after the move are stamped');
$node->safe_psql('v15', q{
	DO $$
	DECLARE
		l record;
		v_last bigint;
	BEGIN
		FOR i IN 1 .. 6 LOOP
			FOR l IN SELECT * FROM cfeed.acquire('g15', 1, 'a', 600000) LOOP
				WITH r AS (INSERT INTO got SELECT change_id, l.shard, change_sequence_number
						   FROM cfeed.read(1, l.shard, l.cursor, 1000) RETURNING n)
				SELECT max(n) INTO v_last FROM r;
				IF v_last IS NOT NULL THEN
					PERFORM cfeed.checkpoint('g15', 1, l.shard, 'a', l.epoch, v_last);
				END IF;
			END LOOP;
		END LOOP;
	END $$;});
is($node->safe_psql('v15', q{
	SELECT string_agg(shard || ':' || n, ' ' ORDER BY shard)
	FROM (SELECT shard, count(*) AS n FROM got GROUP BY shard) s}),
	'0:30 1:60 2:' . $node->safe_psql('v15', 'SELECT count(*) FROM cfeed.change WHERE feed_id = 1 AND shard = 2')
	  . ' 3:' . $node->safe_psql('v15', 'SELECT count(*) FROM cfeed.change WHERE feed_id = 1 AND shard = 3'),
	'the group of 1.5 read the rest of the old shards from its checkpoint, then their children');
is($node->safe_psql('v15', q{
	SELECT (SELECT count(*) FROM moved m WHERE NOT EXISTS (SELECT FROM got g WHERE g.change_id = m.change_id))
		 + (SELECT count(*) FROM (SELECT change_id FROM got GROUP BY change_id HAVING count(*) > 1) d)}),
	'0', 'every change written after the move was read, and every change once');

# A database that lives at 1.0: changes, a tracked table, a consumer group,
# swept by the current library's background sweeper.
$node->safe_psql('postgres', 'CREATE DATABASE old');
$node->safe_psql('old', q{
	CREATE EXTENSION cfeed VERSION '1.0';
	SELECT cfeed.create_feed('orders', 3);
	SELECT cfeed.create_feed('items', 2);
	CREATE TABLE truth (change_id bigint PRIMARY KEY);
	INSERT INTO truth SELECT cfeed.publish(1, g % 3) FROM generate_series(1, 300) g;
	CREATE TABLE items (id int PRIMARY KEY, v text, change_id bigint);
	SELECT cfeed.track('items', 2);
	INSERT INTO items (id, v) SELECT g, 'v' || g FROM generate_series(1, 50) g;
	INSERT INTO truth SELECT change_id FROM items;
	SELECT cfeed.create_feed('hist', 1);
	CREATE TABLE hist (id int PRIMARY KEY, v text, change_id bigint);
	INSERT INTO hist (id, v) SELECT g, 'h' || g FROM generate_series(1, 5) g;
	SELECT cfeed.track('hist', 3);
	SELECT cfeed.backfill('hist', 3);
	INSERT INTO truth SELECT change_id FROM hist;
});
is($node->safe_psql('old', q{SELECT extversion FROM pg_extension WHERE extname = 'cfeed'}), '1.0',
	'installed at 1.0');
ok(wait_all_stamped($node, 'old'), 'the background sweeper stamps a 1.0 database');
is($node->safe_psql('old', $shard_locks), '0', '1.0: tracked changes are written through SQL (no guard)');
is($node->safe_psql('old', q{SELECT count(*) FROM cfeed.row_image WHERE feed_id = 2}), '50',
	'1.0: the images of tracked changes are written to cfeed.row_image');
is($node->safe_psql('old', q{SELECT count(*) FROM cfeed.row_image WHERE feed_id = 3 AND op = 'insert'}), '5',
	'1.0: so are the images of a backfill');
my (undef, $cursor, $epoch) = split /\|/, $node->safe_psql('old', q{
	SELECT shard, cursor, epoch FROM cfeed.acquire('g', 1, 'a', 60000) WHERE shard = 0});
$node->safe_psql('old', qq{SELECT cfeed.checkpoint('g', 1, 0, 'a', $epoch, $cursor + 20)});

my $dump = $node->basedir . '/old-1.0.dump';
$node->command_ok([ 'pg_dump', '-Fc', '-h', $node->host, '-p', $node->port, '-f', $dump, 'old' ],
	'pg_dump of a 1.0 database');

$node->safe_psql('old', 'ALTER EXTENSION cfeed UPDATE');
is($node->safe_psql('old', q{SELECT extversion FROM pg_extension WHERE extname = 'cfeed'}), '1.9',
	'ALTER EXTENSION cfeed UPDATE reaches 1.9');
is($node->safe_psql('old', $shard_locks), '1', '1.3: tracked changes are written directly, under one lock for the feed\'s shards (both shards written)');

# Object for object the same as a fresh install: members, definitions,
# privileges, comments, columns in order, constraints, indexes, triggers,
# views, dump registrations.
my $fingerprint = q{
	WITH m AS (
		SELECT d.classid, d.objid FROM pg_depend d JOIN pg_extension e ON e.oid = d.refobjid
		WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e' AND e.extname = 'cfeed'),
	r AS (SELECT c.oid FROM m JOIN pg_class c ON m.classid = 'pg_class'::regclass AND c.oid = m.objid)
	SELECT x FROM (
		SELECT 'member ' || pg_describe_object(classid, objid, 0) || ' comment=' ||
			coalesce(obj_description(objid, (SELECT relname FROM pg_class WHERE oid = classid)), '') AS x FROM m
		UNION ALL
		SELECT 'function ' || pg_get_functiondef(p.oid) || ' acl=' || coalesce(p.proacl::text, '')
		FROM m JOIN pg_proc p ON m.classid = 'pg_proc'::regclass AND p.oid = m.objid
		UNION ALL
		SELECT format('relation %s kind=%s acl=%s options=%s rls=%s', c.oid::regclass, c.relkind, c.relacl,
			c.reloptions, c.relrowsecurity) FROM r JOIN pg_class c USING (oid)
		UNION ALL
		SELECT format('column %s #%s %s %s notnull=%s default=%s acl=%s comment=%s', a.attrelid::regclass,
			row_number() OVER (PARTITION BY a.attrelid ORDER BY a.attnum), a.attname,
			format_type(a.atttypid, a.atttypmod), a.attnotnull, pg_get_expr(ad.adbin, ad.adrelid), a.attacl,
			col_description(a.attrelid, a.attnum))
		FROM r JOIN pg_attribute a ON a.attrelid = r.oid
		LEFT JOIN pg_attrdef ad ON ad.adrelid = a.attrelid AND ad.adnum = a.attnum
		WHERE a.attnum > 0 AND NOT a.attisdropped
		UNION ALL
		SELECT format('constraint %s %s %s', conrelid::regclass, conname, pg_get_constraintdef(k.oid))
		FROM r JOIN pg_constraint k ON k.conrelid = r.oid
		UNION ALL
		SELECT 'index ' || pg_get_indexdef(i.indexrelid) FROM r JOIN pg_index i ON i.indrelid = r.oid
		UNION ALL
		SELECT 'trigger ' || pg_get_triggerdef(t.oid) || ' enabled=' || t.tgenabled::text
		FROM r JOIN pg_trigger t ON t.tgrelid = r.oid WHERE NOT t.tgisinternal
		UNION ALL
		SELECT format('view %s %s', r.oid::regclass, pg_get_viewdef(r.oid))
		FROM r JOIN pg_class c USING (oid) WHERE c.relkind = 'v'
		UNION ALL
		SELECT format('sequence %s %s %s %s %s', seqrelid::regclass, seqstart, seqincrement, seqcache, seqcycle)
		FROM r JOIN pg_sequence s ON s.seqrelid = r.oid
		UNION ALL
		SELECT format('dumped %s where %L', c::regclass, w)
		FROM pg_extension e, unnest(e.extconfig, e.extcondition) AS u(c, w) WHERE e.extname = 'cfeed'
	) s ORDER BY x};
$node->safe_psql('postgres', 'CREATE DATABASE fresh');
$node->safe_psql('fresh', 'CREATE EXTENSION cfeed');
my @fresh = split /\n/, $node->safe_psql('fresh', $fingerprint);
my @updated = split /\n/, $node->safe_psql('old', $fingerprint);
cmp_ok(scalar @fresh, '>', 100, 'the fingerprint describes the extension (' . scalar(@fresh) . ' lines)');
is_deeply(\@updated, \@fresh, 'the updated extension is identical to a fresh install');
is_deeply([ split /\n/, $node->safe_psql('v15', $fingerprint) ], \@fresh,
	'1.5 updated to 1.9 is identical to a fresh install');

# The data of 1.0 lives on: the sweeper continues every shard gaplessly,
# readers and tracked rows read on, the group checkpoints on, and 1.1's
# behaviour is in force.
$node->safe_psql('old', q{
	INSERT INTO truth SELECT cfeed.publish(1, g % 3) FROM generate_series(1, 300) g;
	INSERT INTO items (id, v) SELECT g, 'v' || g FROM generate_series(51, 80) g;
	INSERT INTO truth SELECT change_id FROM items WHERE id > 50;
});
ok(wait_all_stamped($node, 'old'), 'the background sweeper stamps after the update');
is($node->safe_psql('old', q{
	SELECT (SELECT count(*) FROM cfeed.row_image WHERE feed_id = 2) || ' ' ||
		   (SELECT count(*) FROM cfeed.change WHERE feed_id = 2 AND "row" IS NOT NULL)}),
	'50 30', '1.3: images of new tracked changes are in their change rows, the old ones stay where they were');
check_invariants($node, 'old', 'updated database');
is($node->safe_psql('old', q{SELECT count(*) FROM cfeed.read(1, 0, NULL, 1000)}), '200',
	'a reader from the beginning reads across the update');
ok(images_read_back('old', 0), 'tracked rows from before and after the update read back');
is($node->safe_psql('old', q{
	SELECT string_agg(r."row" ->> 'v', ',' ORDER BY r.change_sequence_number) FROM cfeed.read_rows(3, 0) r}),
	'h1,h2,h3,h4,h5', 'the history backfilled at 1.0 reads back');
is($node->safe_psql('old', qq{SELECT FROM cfeed.checkpoint('g', 1, 0, 'a', $epoch, $cursor + 120);
	SELECT cursor FROM cfeed.lease WHERE group_name = 'g' AND feed_id = 1 AND shard = 0}), $cursor + 120,
	'the consumer group checkpoints on with its epoch');
$node->psql('old', "\\set VERBOSITY verbose\nSELECT * FROM cfeed.acquire(repeat('g', 201), 1, 'b')",
	stderr => \my $err);
like($err, qr/22023: group_name must be at most 200 characters, got 201/,
	'1.1: long group names refused with 22023');

# 1.8: the group of 1.0 reports a failure; its policy sets the change
# aside as a dead letter; a dump of the updated database keeps the policy,
# the dead letter and the cursor past it.
is($node->safe_psql('old', qq{
	SELECT FROM cfeed.set_failure_policy('g', 1, max_attempts => 1, dead_letter => true);
	SELECT dead_letter FROM cfeed.fail('g', 1, 0, 'a', $epoch, $cursor + 121, 'poison')}), 't',
	'1.8: a change of the group of 1.0 is set aside as a dead letter');
my $dump18 = $node->basedir . '/old-1.8.dump';
$node->command_ok([ 'pg_dump', '-Fc', '-h', $node->host, '-p', $node->port, '-f', $dump18, 'old' ],
	'pg_dump of the updated database');
$node->safe_psql('postgres', 'CREATE DATABASE restored18');
$node->command_ok([ 'pg_restore', '--exit-on-error', '-h', $node->host, '-p', $node->port, '-d', 'restored18', $dump18 ],
	'pg_restore of it');
is($node->safe_psql('restored18', q{
	SELECT (SELECT count(*) FROM cfeed.failure_policy) || ' '
	    || (SELECT string_agg(change_sequence_number || ':' || last_error, ',') FROM cfeed.dead_letters) || ' '
	    || (SELECT cursor FROM cfeed.lease WHERE group_name = 'g' AND feed_id = 1 AND shard = 0)}),
	'1 ' . ($cursor + 121) . ':poison ' . ($cursor + 121),
	'the restored database keeps the policy, the dead letter and the cursor past it');

# 1.6: no foreign key on cfeed.change; its shard check (change_guard) and
# shard_config's guard keep what it guaranteed, without a lock on the
# shard's row.
check_shard_guarantees('old', 1, '1.0 updated to 1.9');

# 1.7: the read policy's function tells the planner every row passes.
is($node->safe_psql('old', q{
	SELECT string_agg(p.oid::regprocedure || ' ' || p.prosupport, ', ' ORDER BY p.oid::regprocedure::text)
	FROM pg_proc p WHERE p.proname = '_may_read' AND p.pronamespace = 'cfeed'::regnamespace}),
	'cfeed._may_read(integer) cfeed._may_read_support, cfeed._may_read(integer,regclass) cfeed._may_read_support',
	'1.7: both cfeed._may_read have the planner support function');

# A 1.0 dump restores into the current version.
$node->safe_psql('postgres', 'CREATE DATABASE restored');
$node->command_ok([ 'pg_restore', '--exit-on-error', '-h', $node->host, '-p', $node->port, '-d', 'restored', $dump ],
	'pg_restore of the 1.0 dump');
is($node->safe_psql('restored', q{SELECT extversion FROM pg_extension WHERE extname = 'cfeed'}), '1.9',
	'the restored database runs 1.9');
ok(images_read_back('restored', 1), 'the restored images of 1.0 read back');
$node->safe_psql('restored', q{INSERT INTO truth SELECT cfeed.publish(1, g % 3) FROM generate_series(1, 30) g});
ok(wait_all_stamped($node, 'restored'), 'the restored database sweeps on');
check_invariants($node, 'restored', 'restored 1.0 dump');
is_deeply([ split /\n/, $node->safe_psql('restored', $fingerprint) ], \@fresh,
	'the restored extension is identical to a fresh install');

done_testing();
