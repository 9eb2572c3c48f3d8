# test/t/090_operations.pl
#
# Operations torture test: cfeed's guarantees (README) hold
# whatever an operator does to cfeed.change while it is written, swept and
# read (docs/operations.md, "Maintenance and replication").  For
# CFEED_TORTURE_SECONDS (default 30), all at once:
#
#   writers    pgbench, 4 clients: direct INSERTs into cfeed.change and
#              cfeed.publish() (one change_id to two feeds), ~1/5 of the
#              transactions rolled back (whole or to a savepoint), some
#              committed through PREPARE TRANSACTION + COMMIT PREPARED and
#              some thrown away with ROLLBACK PREPARED.  Every committed
#              change is recorded in torture.committed in the same
#              transaction, with the writer's xid and snapshot.
#   sweepers   the background sweepers (preload; groups 0 and 1), a session
#              looping cfeed.sweep() on a random group, and a session
#              calling cfeed.sweep_loop() on each group in turn.  SQL sweep
#              errors are recorded (torture.sweep_error).
#   readers    two sessions paging every shard with cfeed.read(): each page
#              must continue the cursor (a jump is allowed only over numbers
#              the operator deleted); every (number -> change_id, stamped_at)
#              read is recorded in torture.seen.  One reader long-polls, the
#              other now and then rereads a shard from the beginning.
#   operator   one session, in a loop: VACUUM FULL, CLUSTER, a rewriting
#              ALTER TABLE, REINDEX, REINDEX CONCURRENTLY, VACUUM, ANALYZE,
#              shards moved to the other sweep group and back, DELETE of
#              stamped changes (shard heads included, recorded in
#              torture.deleted in the same statement), a publication FOR ALL
#              TABLES / FOR TABLE cfeed.change created and dropped, and
#              CREATE EXTENSION / DROP EXTENSION in a second database.
#
# At the end (writers stopped, the background sweepers given the chance to
# stamp what is left, then cfeed.sweep() until nothing is pending): every
# committed change is stamped exactly once (or was deleted by the operator),
# no rolled-back one is; each shard's numbers (present or deleted) are
# exactly start+1..head, and cfeed.head() is the highest; every number a
# reader saw still names the same change with the same stamped_at, no number
# was issued twice, no change delivered under two numbers; order
# (guarantee 4) holds for writers that had finished; amcheck finds nothing
# wrong with cfeed.change's heap or indexes; the server log has no PANIC or
# "could not read block".  Then TRUNCATE cfeed.change: new numbers continue
# above the old heads.
#
# CFEED_TORTURE_STORAGE=ranges (225_operations_ranges) runs it with every
# shard stored in ranges: the operator's commands then also rewrite, reindex
# and vacuum cfeed.stamp and cfeed.sweep_mark, moving a shard to another
# sweep group must be refused (0A000), and the checks read the numbers of
# the stamps (torture.numbered) instead of the changes' rows.
#
# cfeed 1.3 fails it.  In every run: a deleted head's number
# issued again (the quiet shard), every sweep failing while a publication
# exists, numbering restarting after TRUNCATE.  In most runs of 30 s, from a
# rewrite landing inside a sweep: stamped changes renumbered (a reader's
# number gone, the change delivered again under a new one), "could not read
# block" errors, numbers out of commit order.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use IPC::Run;
use FindBin;
use lib $FindBin::RealBin;

my $SECONDS = $ENV{CFEED_TORTURE_SECONDS} // 30;
my $STORAGE = $ENV{CFEED_TORTURE_STORAGE} // 'rows';
my $RANGES = $STORAGE eq 'ranges';
# the tables the operator rewrites, reindexes, vacuums and checks
my @TABLES = $RANGES ? ('cfeed.change', 'cfeed.stamp', 'cfeed.sweep_mark') : ('cfeed.change');
my $MS = int($SECONDS * 1000);
my $db = 'postgres';

my $node = PostgreSQL::Test::Cluster->new('torture');
$node->init;
# wal_level = logical for the publications; prepared transactions for the
# 2PC writers; enough workers for the launcher and three sweepers.
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'cfeed'
wal_level = logical
max_wal_senders = 4
max_prepared_transactions = 20
max_worker_processes = 16
max_connections = 40
shared_buffers = 64MB
fsync = off
synchronous_commit = off
autovacuum_naptime = 2s
log_statement = none
log_min_messages = warning
log_min_error_statement = error
deadlock_timeout = 100ms
cfeed.default_storage = $STORAGE
});
$node->start;

# Feed 1 (4 shards) in sweep group 0, feed 2 (2 shards) in group 1.  CLUSTER
# cannot use cfeed's partial indexes: a plain one is added for it (a DBA's
# own index, which the stamps must keep up to date too).
$node->safe_psql($db, q{
CREATE EXTENSION cfeed;
CREATE EXTENSION amcheck;
SELECT cfeed.create_feed('torture', 4, 1);
SELECT cfeed.create_feed('torture_g1', 2, 2, 1);
-- written by the operator only (see delete_stamped)
SELECT cfeed.create_feed('torture_quiet', 1, 3);
CREATE INDEX change_torture_idx ON cfeed.change (feed_id, shard, change_id);

CREATE SCHEMA torture;
CREATE TABLE torture.shard_start AS
	SELECT feed_id, shard, start_sequence_number AS start FROM cfeed.shard;
-- every committed change, written in the writer's transaction
CREATE TABLE torture.committed (
	feed_id int NOT NULL,
	shard int NOT NULL,
	change_id bigint NOT NULL,
	how text NOT NULL,
	xid xid8 NOT NULL DEFAULT pg_current_xact_id(),
	snap pg_snapshot NOT NULL DEFAULT pg_current_snapshot(),
	PRIMARY KEY (feed_id, change_id)
);
-- stamped changes the operator deleted (no key: 1.3 reissued numbers)
CREATE TABLE torture.deleted (
	feed_id int NOT NULL,
	shard int NOT NULL,
	n bigint NOT NULL,
	change_id bigint NOT NULL,
	stamped_at timestamptz,
	head bool NOT NULL
);
CREATE INDEX ON torture.deleted (feed_id, shard, n);
-- what the readers read
CREATE TABLE torture.seen (
	reader text NOT NULL,
	feed_id int NOT NULL,
	shard int NOT NULL,
	n bigint NOT NULL,
	change_id bigint NOT NULL,
	stamped_at timestamptz
);
-- Every stamped change with its number: numbered in its row (storage in
-- rows), or by an entry of a cfeed.stamp row (storage in ranges) whose
-- change is still there.
CREATE VIEW torture.numbered AS
	SELECT feed_id, shard, change_sequence_number AS n, change_id, writer_xid, stamped_at
	FROM cfeed.change WHERE change_sequence_number IS NOT NULL
	UNION ALL
	SELECT c.feed_id, c.shard, s.first_number + u.o - 1, c.change_id, c.writer_xid, s.stamped_at
	FROM cfeed.stamp s
	CROSS JOIN LATERAL unnest(s.change_id_deltas, s.writer_xid_deltas) WITH ORDINALITY AS u(d, x, o)
	JOIN cfeed.change c ON c.feed_id = s.feed_id AND c.shard = s.shard
		AND c.change_id = s.first_change_id + u.d
		AND c.writer_xid = ((s.first_writer_xid::text)::bigint + u.x)::text::xid8
		AND c.change_sequence_number IS NULL;
-- The committed changes no stamp numbers yet.
CREATE VIEW torture.pending AS
	SELECT c.feed_id, c.shard, c.change_id
	FROM cfeed.change c LEFT JOIN torture.numbered n USING (feed_id, shard, change_id, writer_xid)
	WHERE n.n IS NULL;
CREATE TABLE torture.violation (who text NOT NULL, what text NOT NULL,
								at timestamptz NOT NULL DEFAULT clock_timestamp());
CREATE TABLE torture.reader_error (who text NOT NULL, state text NOT NULL, message text NOT NULL);
CREATE TABLE torture.sweep_error (who text NOT NULL, state text NOT NULL, message text NOT NULL);

-- A reader: pages the shards with cfeed.read() at random, page sizes 1-300,
-- long-polling p_wait_ms when caught up; every page must continue the
-- cursor, jumping only over numbers the operator deleted; records what it
-- reads.  Every p_reread_ms (0: never) it resets a random shard's cursor to
-- null (reads it from the beginning again).  Errors are recorded and the
-- reader goes on.
CREATE PROCEDURE torture.reader(p_name text, p_ms int, p_wait_ms int, p_reread_ms int)
LANGUAGE plpgsql AS $$
DECLARE
	deadline timestamptz := clock_timestamp() + p_ms * interval '1 ms';
	feeds int[] := '{1,1,1,1,2,2,3}';
	shards int[] := '{0,1,2,3,0,1,0}';
	cursors bigint[] := array_fill(NULL::bigint, ARRAY[7]);
	next_reread timestamptz := clock_timestamp() + p_reread_ms * interval '1 ms';
	starts bigint[];
	i int;
	f int;
	s int;
	m int;
	cur bigint;
	ns bigint[];
	ids bigint[];
	ts timestamptz[];
	k int;
	nd bigint;
	st text;
	msg text;
BEGIN
	SELECT array_agg(x.start ORDER BY u.o) INTO starts
	FROM unnest(feeds, shards) WITH ORDINALITY AS u(f, s, o)
	JOIN torture.shard_start x ON x.feed_id = u.f AND x.shard = u.s;
	WHILE clock_timestamp() < deadline LOOP
		i := 1 + floor(random() * 7)::int;
		f := feeds[i];
		s := shards[i];
		m := 1 + floor(random() * 300)::int;
		IF p_reread_ms > 0 AND clock_timestamp() > next_reread THEN
			cursors[i] := NULL;
			next_reread := clock_timestamp() + p_reread_ms * interval '1 ms';
		END IF;
		cur := coalesce(cursors[i], starts[i]);
		BEGIN
			SELECT array_agg(r.change_sequence_number ORDER BY r.o),
				   array_agg(r.change_id ORDER BY r.o), array_agg(r.stamped_at ORDER BY r.o)
			INTO ns, ids, ts
			FROM cfeed.read(f, s, cursors[i], m, p_wait_ms)
				WITH ORDINALITY AS r(change_sequence_number, change_id, stamped_at, o);
			FOR k IN 1 .. coalesce(cardinality(ns), 0) LOOP
				IF ns[k] <= cur THEN
					INSERT INTO torture.violation (who, what) VALUES (p_name,
						format('feed %s shard %s: after %s came %s (page from cursor %s)',
							   f, s, cur, ns[k], coalesce(cursors[i]::text, 'null')));
				ELSIF ns[k] > cur + 1 THEN
					SELECT count(DISTINCT d.n) INTO nd FROM torture.deleted d
					WHERE d.feed_id = f AND d.shard = s AND d.n > cur AND d.n < ns[k];
					IF nd <> ns[k] - cur - 1 THEN
						INSERT INTO torture.violation (who, what) VALUES (p_name,
							format('GAP in feed %s shard %s: after %s came %s, %s of the numbers between deleted (page from cursor %s)',
								   f, s, cur, ns[k], nd, coalesce(cursors[i]::text, 'null')));
					END IF;
				END IF;
				cur := greatest(cur, ns[k]);
			END LOOP;
			IF ns IS NOT NULL THEN
				INSERT INTO torture.seen
				SELECT p_name, f, s, u.n, u.id, u.t FROM unnest(ns, ids, ts) AS u(n, id, t);
				cursors[i] := cur;
			END IF;
		EXCEPTION WHEN OTHERS THEN
			GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT;
			INSERT INTO torture.reader_error VALUES (p_name, st, msg);
		END;
		COMMIT;
		IF coalesce(cardinality(ns), 0) < m THEN
			PERFORM pg_sleep(0.01);
			COMMIT;
		END IF;
	END LOOP;
END $$;

-- A SQL sweeper: cfeed.sweep() of a random group, one transaction each;
-- errors are recorded and it goes on.
CREATE PROCEDURE torture.sweeper(p_name text, p_ms int)
LANGUAGE plpgsql AS $$
DECLARE
	deadline timestamptz := clock_timestamp() + p_ms * interval '1 ms';
	st text;
	msg text;
BEGIN
	WHILE clock_timestamp() < deadline LOOP
		BEGIN
			PERFORM * FROM cfeed.sweep(floor(random() * 2)::int);
		EXCEPTION WHEN OTHERS THEN
			GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT;
			INSERT INTO torture.sweep_error VALUES (p_name, st, msg);
		END;
		COMMIT;
		PERFORM pg_sleep(0.005);
		COMMIT;
	END LOOP;
END $$;
});

# The background sweepers of both groups run before anything starts.
ok($node->poll_query_until($db,
	q{SELECT count(DISTINCT sweep_group) = 2 FROM cfeed.sweepers WHERE datname = current_database()}),
	'background sweepers of groups 0 and 1 running');

# Writers' scripts (pgbench, simple protocol: the 2PC gid is substituted
# inside its quotes).  rec() records the changes of a CTE "ins" as committed.
sub rec
{
	my ($how) = @_;
	return "INSERT INTO torture.committed (feed_id, shard, change_id, how) "
	  . "SELECT feed_id, shard, change_id, '$how' FROM ins;\n";
}
my $INSERT = <<'SQL';
WITH ins AS (
	INSERT INTO cfeed.change (feed_id, shard, change_id)
	SELECT 1, (:s + g) % 4, nextval('cfeed.change_id') FROM generate_series(1, :n) g
	RETURNING feed_id, shard, change_id)
SQL
my $PUBLISH = <<'SQL';
WITH p AS MATERIALIZED (SELECT cfeed.publish(1, :s) AS id),
q AS MATERIALIZED (SELECT cfeed.publish(2, :t, p.id) AS id FROM p),
ins AS (SELECT 1 AS feed_id, :s AS shard, id AS change_id FROM p
		UNION ALL SELECT 2, :t, id FROM q)
SQL
my $PREAMBLE = "\\set s random(0, 3)\n\\set t random(0, 1)\n\\set n random(1, 3)\n";
my %SCRIPTS = (
	'insert.sql' => $PREAMBLE . "BEGIN;\n" . $INSERT . rec('insert') . "COMMIT;\n",
	'publish.sql' => $PREAMBLE . "BEGIN;\n" . $PUBLISH . rec('publish') . "COMMIT;\n",
	'rollback.sql' => $PREAMBLE . "BEGIN;\n" . $INSERT . rec('insert')
	  . $PUBLISH . rec('publish') . "ROLLBACK;\n",
	'savepoint.sql' => $PREAMBLE . "BEGIN;\n" . $INSERT . rec('insert')
	  . "SAVEPOINT a;\n" . $PUBLISH . rec('publish') . "ROLLBACK TO SAVEPOINT a;\n"
	  . $PUBLISH . rec('publish') . "COMMIT;\n",
	# prepared, then (from the same client, a moment later) 3 in 4
	# committed, 1 in 4 rolled back
	'twophase.sql' => $PREAMBLE . <<'SQL' . $INSERT . rec('2pc') . $PUBLISH . rec('2pc') . <<'SQL2',
\set gid random(1, 2000000000)
\set pause random(0, 30)
\set c random(0, 3)
BEGIN;
SQL
PREPARE TRANSACTION 'torture-:client_id-:gid';
\sleep :pause ms
\if :c = 0
ROLLBACK PREPARED 'torture-:client_id-:gid';
\else
COMMIT PREPARED 'torture-:client_id-:gid';
\endif
SQL2
);
my $dir = PostgreSQL::Test::Utils::tempdir();
for my $f (keys %SCRIPTS)
{
	PostgreSQL::Test::Utils::append_to_file("$dir/$f", $SCRIPTS{$f});
}

my @conn = ('-h', $node->host, '-p', $node->port);
my @psql = ('psql', '-X', '-At', '-v', 'ON_ERROR_STOP=1', '-v', 'VERBOSITY=verbose', @conn, '-d', $db);
my $timeout = $SECONDS + 180;
my @procs;

# Start a background command, its output in files; see finish_bg().
sub start_bg
{
	my ($name, $cmd) = @_;
	(my $file = $name) =~ s/\W+/_/g;
	my %h = (name => $name, out => "$dir/$file.out", err => "$dir/$file.err");
	$h{run} = IPC::Run::start($cmd, '<', \undef, '>', $h{out}, '2>', $h{err},
		IPC::Run::timeout($timeout));
	push @procs, \%h;
	return \%h;
}

# Wait for a background command; true if it exited 0.
sub finish_bg
{
	my ($h) = @_;
	my $ok = eval { $h->{run}->finish; 1 };
	$h->{rc} = $ok ? $h->{run}->result(0) : -1;
	eval { $h->{run}->kill_kill } unless $ok;
	$h->{stdout} = -f $h->{out} ? PostgreSQL::Test::Utils::slurp_file($h->{out}) : '';
	$h->{stderr} = -f $h->{err} ? PostgreSQL::Test::Utils::slurp_file($h->{err}) : '';
	return $h->{rc} == 0;
}

my $t0 = time;
start_bg('writers',
	[ 'pgbench', '-n', '-M', 'simple', '-c', '4', '-j', '2', '-T', $SECONDS, @conn,
	  '-f', "$dir/insert.sql\@6", '-f', "$dir/publish.sql\@4", '-f', "$dir/rollback.sql\@2",
	  '-f', "$dir/savepoint.sql\@1", '-f', "$dir/twophase.sql\@3", $db ]);
start_bg('sweeper sweep()', [ @psql, '-c', "CALL torture.sweeper('sweep()', $MS)" ]);
# sweep_loop sessions, one group after the other; an error ends the call
# (psql prints it with its SQLSTATE) and the loop goes on
my $loop = join(' ', map { "'$_'" } @psql);
start_bg('sweeper sweep_loop()',
	[ 'bash', '-c', qq{
end=\$(( \$(date +%s) + $SECONDS ))
g=0
while [ "\$(date +%s)" -lt "\$end" ]; do
	$loop -c "CALL cfeed.sweep_loop(\$g, 100, 3000, 2, null, null, null)" >/dev/null
	g=\$(( 1 - g ))
done} ]);
start_bg('reader long-polling', [ @psql, '-c', "CALL torture.reader('r1', $MS, 50, 0)" ]);
start_bg('reader rereading', [ @psql, '-c', "CALL torture.reader('r2', $MS, 0, 3000)" ]);

# A second operator session rewrites cfeed.change over and over (VACUUM
# FULL, CLUSTER, a rewriting ALTER TABLE, a short pause after each): to hurt,
# a rewrite must land between a sweep's reading of the pending changes and
# its stamping of them, a window of a millisecond.  One psql session, going
# on after errors (printed with their SQLSTATE), until the deadline.  It
# skips its turn while the operator holds advisory lock 1709 around REINDEX
# CONCURRENTLY: that one waits for every older snapshot, among them those of
# sessions queued behind a rewrite, which waits for the REINDEX's lock (a
# deadlock of PostgreSQL's own, not cfeed's).
my $REWRITE_BLOCK = <<'SQL';
SELECT clock_timestamp() > :'deadline'::timestamptz AS done \gset
\if :done
\q
\endif
SQL
my @REWRITES = ('VACUUM FULL cfeed.change', 'CLUSTER cfeed.change USING change_torture_idx',
	'VACUUM FULL cfeed.change',
	q{ALTER TABLE cfeed.change ALTER COLUMN op TYPE text USING op || ''});
push @REWRITES, 'VACUUM FULL cfeed.stamp', 'CLUSTER cfeed.stamp USING stamp_pkey',
  'VACUUM FULL cfeed.sweep_mark'
  if $RANGES;
for my $cmd (@REWRITES)
{
	$REWRITE_BLOCK .= <<"SQL";
SELECT pg_try_advisory_lock(1709) AS got \\gset
\\if :got
$cmd;
SELECT pg_advisory_unlock(1709);
\\endif
SELECT pg_sleep(random() * 0.2);
SQL
}
PostgreSQL::Test::Utils::append_to_file("$dir/rewriter.sql",
	"SELECT (clock_timestamp() + interval '$SECONDS s')::text AS deadline \\gset\n"
	  . ($REWRITE_BLOCK x (($RANGES ? 6 : 10) * $SECONDS)));
start_bg('rewriter',
	[ 'psql', '-X', '-At', '-v', 'VERBOSITY=verbose', @conn, '-d', $db, '-f', "$dir/rewriter.sql" ]);

# The operator.  Every operation is expected to succeed (docs/operations.md,
# "Maintenance and replication": each is safe or waits); a deadlock with a sweep is retried.
# Each returns an error text, or '' when it succeeded.
my %runs;
my %failures;
my @sweeper_errors;    # background sweepers' last_error seen while operating

sub op_sql
{
	my ($sql, $dbname) = @_;
	my ($ret, $out, $err);
	for my $try (1 .. 3)
	{
		($ret, $out, $err) = (0, '', '');
		$ret = $node->psql($dbname // $db, $sql, stdout => \$out, stderr => \$err,
			on_error_stop => 1, extra_params => [ '-v', 'VERBOSITY=verbose' ],
			timeout => $PostgreSQL::Test::Utils::timeout_default);
		last unless $ret != 0 && $err =~ /ERROR:\s+40P01/;
	}
	return $ret == 0 ? '' : ($err || "psql exited with $ret");
}

# Record the background sweepers' errors (cfeed.sweepers.last_error).
sub sample_sweepers
{
	my $e = $node->safe_psql($db,
		q{SELECT format('group %s: %s', sweep_group, last_error) FROM cfeed.sweepers
		  WHERE last_error IS NOT NULL AND datname = current_database()});
	push @sweeper_errors, grep { $_ ne '' } split /\n/, $e;
}

# The shards moved: feed 1 shard 3 to group 1, feed 2 shard 1 to group 0,
# each in its own transaction, writers going on; then back.  A shard stored
# in ranges cannot move (its group's mark says which of its changes are
# stamped): each move must be refused with 0A000, and nothing else.
sub move_shards
{
	if ($RANGES)
	{
		my $e = '';
		for my $move ('UPDATE cfeed.shard SET sweep_group = 1 WHERE feed_id = 1 AND shard = 3',
			'UPDATE cfeed.shard SET sweep_group = 0 WHERE feed_id = 2 AND shard = 1')
		{
			my $r = op_sql($move);
			$e .= $r =~ /ERROR:\s+0A000:/ ? '' : "not refused with 0A000: $move: $r";
		}
		return $e;
	}
	my $e = op_sql('UPDATE cfeed.shard SET sweep_group = 1 WHERE feed_id = 1 AND shard = 3')
	  . op_sql('UPDATE cfeed.shard SET sweep_group = 0 WHERE feed_id = 2 AND shard = 1');
	usleep(500_000);
	$e .= op_sql('UPDATE cfeed.shard SET sweep_group = 0 WHERE feed_id = 1 AND shard = 3')
	  . op_sql('UPDATE cfeed.shard SET sweep_group = 1 WHERE feed_id = 2 AND shard = 1');
	return $e;
}

# DELETE of stamped changes, recorded in torture.deleted in the same
# statement: the head rows of two random shards, one change a little below
# the head of another, and the head of the quiet shard (feed 3, written by
# this operator only), which then gets a new change at once: with no writer
# racing the DELETE there, its head row is surely the one deleted, and the
# new change must not get its number.
sub delete_stamped
{
	my $quiet = q{INSERT INTO torture.committed (feed_id, shard, change_id, how)
				  SELECT 3, 0, cfeed.publish(3, 0), 'operator'};
	my $e = op_sql("$quiet FROM generate_series(1, 3)");
	for (1 .. 100)
	{
		last if $node->safe_psql($db, q{SELECT count(*) FROM torture.pending
			WHERE feed_id = 3}) eq '0';
		usleep(100_000);
	}
	$e .= op_sql(q{
WITH h AS (
	SELECT c.feed_id, c.shard, max(c.n) AS n, true AS head
	FROM torture.numbered c
	WHERE (c.feed_id, c.shard) IN (SELECT feed_id, shard FROM torture.shard_start
								   ORDER BY random() LIMIT 2)
		   OR c.feed_id = 3
	GROUP BY 1, 2),
b AS (
	SELECT c.feed_id, c.shard, c.n, false AS head
	FROM torture.numbered c
	WHERE (c.feed_id, c.shard) = (SELECT feed_id, shard FROM torture.shard_start
								  ORDER BY random() LIMIT 1)
	ORDER BY c.n DESC OFFSET 3 + floor(random() * 20)::int LIMIT 1),
t AS (
	SELECT x.*, n.change_id, n.writer_xid, n.stamped_at
	FROM (SELECT * FROM h UNION ALL SELECT * FROM b) x
	JOIN torture.numbered n USING (feed_id, shard, n)),
d AS (
	DELETE FROM cfeed.change c USING t
	WHERE c.feed_id = t.feed_id AND c.shard = t.shard AND c.change_id = t.change_id
	  AND c.writer_xid = t.writer_xid
	RETURNING c.feed_id, c.shard, t.n, c.change_id, t.stamped_at, t.head)
INSERT INTO torture.deleted SELECT * FROM d});
	return $e . op_sql($quiet);
}

# A publication that replicates UPDATEs and DELETEs exists for a second,
# writers and sweepers going on (FOR ALL TABLES, or FOR TABLE cfeed.change).
my $pub_round = 0;
sub publication
{
	my $what = $pub_round++ % 2 ? 'FOR TABLE cfeed.change' : 'FOR ALL TABLES';
	my $e = op_sql("CREATE PUBLICATION torture_pub $what");
	usleep(1_000_000);
	sample_sweepers();
	$e .= op_sql('DROP PUBLICATION IF EXISTS torture_pub');
	return $e;
}

# A second database: CREATE EXTENSION, a change the background sweeper must
# stamp, DROP EXTENSION (never blocked by its sweeper).
$node->safe_psql($db, 'CREATE DATABASE other');
my %other = (stamped => 0, unstamped => 0);
sub second_database
{
	my $e = op_sql(q{BEGIN; CREATE EXTENSION cfeed; SELECT cfeed.create_feed('other', 1);
					 SELECT cfeed.publish(1, 0); COMMIT;}, 'other');
	return $e if $e;
	my $stamped = 0;
	for (1 .. 100)
	{
		$stamped = $node->safe_psql('other',
			'SELECT count(*) = 1 FROM cfeed.read(1, 0, NULL, 10)') eq 't';
		last if $stamped;
		usleep(100_000);
	}
	$other{ $stamped ? 'stamped' : 'unstamped' }++;
	return op_sql('DROP EXTENSION cfeed', 'other');
}

# each of @TABLES, one statement each
sub each_table
{
	my ($cmd) = @_;
	return join('', map { op_sql(sprintf($cmd, $_)) } @TABLES);
}

my @OPS = (
	[ 'VACUUM FULL', sub { each_table('VACUUM FULL %s') } ],
	[ 'move shards', \&move_shards ],
	[ 'CLUSTER', sub { op_sql('CLUSTER cfeed.change USING change_torture_idx')
		  . ($RANGES ? op_sql('CLUSTER cfeed.stamp USING stamp_pkey') : '') } ],
	[ 'DELETE stamped', \&delete_stamped ],
	# ALTER COLUMN ... TYPE with a USING expression rewrites the table
	[ 'rewriting ALTER TABLE',
		sub { op_sql(q{ALTER TABLE cfeed.change ALTER COLUMN op TYPE text USING op || ''}) } ],
	[ 'publication', \&publication ],
	[ 'REINDEX', sub { each_table('REINDEX TABLE %s') } ],
	[ 'VACUUM FULL', sub { each_table('VACUUM FULL %s') } ],
	[ 'REINDEX CONCURRENTLY', sub { each_table(q{SELECT pg_advisory_lock(1709);
		REINDEX TABLE CONCURRENTLY %s;
		SELECT pg_advisory_unlock(1709);}) } ],
	[ 'DELETE stamped', \&delete_stamped ],
	[ 'VACUUM', sub { each_table('VACUUM %s') } ],
	[ 'second database', \&second_database ],
	[ 'ANALYZE', sub { each_table('ANALYZE %s') } ],
);
my $round = 0;
my $t_end = $t0 + $SECONDS - 1;
OPERATOR: while (1)
{
	$round++;
	for my $op (@OPS)
	{
		# every operation runs at least once
		last OPERATOR if $round > 1 && time >= $t_end;
		my $e = $op->[1]->();
		$runs{ $op->[0] }++;
		push @{ $failures{ $op->[0] } }, $e if $e ne '';
		sample_sweepers();
		usleep(100_000);
	}
}
note(sprintf('operator: %d rounds in %.1f s', $round, time - $t0));

# Every operation ran and succeeded each time.
for my $name (sort keys %runs)
{
	my $f = $failures{$name} // [];
	is(scalar @$f, 0, "operation $name succeeded ($runs{$name} runs)")
	  or diag(join("\n", @$f[ 0 .. ($#$f < 2 ? $#$f : 2) ]));
}

# The background processes finished cleanly.
for my $p (@procs)
{
	ok(finish_bg($p), "$p->{name} finished cleanly")
	  or diag("$p->{name}: exit $p->{rc}\n$p->{stderr}");
}
my ($writer_summary) = ($procs[0]{stdout} =~ /(number of transactions actually processed: \d+)/);
note('writers: ' . ($writer_summary // '?'));

# The rewriter's commands all succeeded (a deadlock aside).
my ($rewriter) = grep { $_->{name} eq 'rewriter' } @procs;
my @rewrite_errors = grep { /ERROR:/ && !/ERROR:\s+40P01:/ } split /\n/, $rewriter->{stderr};
is(scalar @rewrite_errors, 0, 'the rewriter\'s VACUUM FULL, CLUSTER and ALTER TABLE succeeded')
  or diag(join("\n", @rewrite_errors[ 0 .. ($#rewrite_errors < 4 ? $#rewrite_errors : 4) ]));
note('rewrites: ' . scalar(() = $rewriter->{stdout} =~ /^(VACUUM|CLUSTER|ALTER TABLE)$/mg)
	. ', deadlocks: ' . scalar(() = $rewriter->{stderr} =~ /40P01/g));

# The SQL sweepers' errors: a sweep may only be refused as a serialization
# failure, a deadlock, or by the unique index on numbers (each changes
# nothing); anything else (say, "does not have a replica identity") stopped
# stamping.
my @sweep_errors = split /\n/, $node->safe_psql($db,
	q{SELECT format('%s: %s %s (%s times)', who, state, message, count(*))
	  FROM torture.sweep_error WHERE state NOT IN ('40001', '40P01', '23505')
	  GROUP BY who, state, message});
my ($loop_out) = grep { $_->{name} eq 'sweeper sweep_loop()' } @procs;
push @sweep_errors, grep { !/ERROR:\s+(40001|40P01|23505):/ }
  grep { /ERROR:/ } split /\n/, $loop_out->{stderr};
is(scalar @sweep_errors, 0, 'SQL sweeps failed only with serialization failures')
  or diag(join("\n", @sweep_errors[ 0 .. ($#sweep_errors < 9 ? $#sweep_errors : 9) ]));
my %seen_last;
my @bad_last = grep { !$seen_last{$_}++ }
  grep { !/could not serialize|deadlock detected|duplicate key|concurrent sweep/ } @sweeper_errors;
is(scalar @bad_last, 0, 'the background sweepers failed only with serialization failures')
  or diag(join("\n", @bad_last[ 0 .. ($#bad_last < 4 ? $#bad_last : 4) ]));
note('SQL sweep errors allowed: ' . $node->safe_psql($db,
	q{SELECT count(*) FROM torture.sweep_error WHERE state IN ('40001', '40P01', '23505')}));

# The readers read without errors (but a deadlock victim's, when a
# rewrite queued behind a REINDEX) and saw no gap.
is($node->safe_psql($db,
	q{SELECT coalesce(string_agg(format('%s: %s %s', who, state, message), E'\n'), '')
	  FROM (SELECT DISTINCT * FROM torture.reader_error WHERE state <> '40P01' LIMIT 10) e}),
	'', 'readers got no errors');
note('reader deadlocks: ' . $node->safe_psql($db,
	q{SELECT count(*) FROM torture.reader_error WHERE state = '40P01'}));
is($node->safe_psql($db,
	q{SELECT coalesce(string_agg(format('%s: %s', who, what), E'\n' ORDER BY at), '')
	  FROM (SELECT * FROM torture.violation ORDER BY at LIMIT 10) v}),
	'', 'readers saw every page continue its cursor (gaps only over deleted numbers)');

# The second database's background sweeper stamped its change each time.
is($other{unstamped}, 0,
	"second database: the background sweeper stamped within 10 s after CREATE EXTENSION ($other{stamped} times)");

# Left-over prepared transactions (a writer stopped between PREPARE and
# COMMIT PREPARED) are rolled back: their changes and records go together.
my @left = split /\n/, $node->safe_psql($db, 'SELECT gid FROM pg_prepared_xacts');
$node->safe_psql($db, "ROLLBACK PREPARED '$_'") for @left;
note('prepared transactions left by the writers: ' . scalar @left);

# What is still pending is stamped by the background sweepers alone, soon
# (a change left behind by a moved shard would wait for a restart).
my $pending_sql = 'SELECT count(*) FROM torture.pending';
my $drained = $node->poll_query_until($db, "SELECT ($pending_sql) = 0", 't');
ok($drained, 'the background sweepers stamp every committed change after the run')
  or diag($node->safe_psql($db,
	  q{SELECT string_agg(format('feed %s shard %s: %s pending', feed_id, shard, n), ', ')
		FROM (SELECT feed_id, shard, count(*) AS n FROM torture.pending GROUP BY 1, 2) x}));

# Then every sweep a SQL session can do, until nothing is pending.
my $pending;
for (1 .. 100)
{
	$node->psql($db, 'SELECT * FROM cfeed.sweep(0); SELECT * FROM cfeed.sweep(1)');
	$pending = $node->safe_psql($db, $pending_sql);
	last if $pending == 0;
	usleep(100_000);
}
is($pending, 0, 'no committed change left pending');

my $counts = $node->safe_psql($db, q{
	SELECT format('%s committed (%s in 2PC), %s deleted (%s heads), %s read (%s distinct)',
		(SELECT count(*) FROM torture.committed),
		(SELECT count(*) FROM torture.committed WHERE how = '2pc'),
		(SELECT count(*) FROM torture.deleted),
		(SELECT count(*) FROM torture.deleted WHERE head),
		(SELECT count(*) FROM torture.seen),
		(SELECT count(*) FROM (SELECT DISTINCT feed_id, shard, n FROM torture.seen) x))});
note("changes: $counts");

# The run did what it says: changes written, some through 2PC, some
# deleted, many read.
ok($node->safe_psql($db, q{SELECT count(*) >= 1000 FROM torture.committed}) eq 't',
	'at least 1000 changes committed');
ok($node->safe_psql($db, q{SELECT count(*) > 0 FROM torture.committed WHERE how = '2pc'}) eq 't',
	'changes committed through PREPARE TRANSACTION');
ok($node->safe_psql($db, q{SELECT count(*) > 0 FROM torture.deleted WHERE head}) eq 't',
	'shard heads deleted');
ok($node->safe_psql($db, q{SELECT count(*) > 0 FROM torture.seen}) eq 't', 'readers read');

# The final checks, each counting violations.  "issued" is every number a
# shard has given out: the stamped changes and the ones the operator deleted.
my $ISSUED = q{
	(SELECT feed_id, shard, n, change_id, stamped_at FROM torture.numbered
	 UNION ALL
	 SELECT feed_id, shard, n, change_id, stamped_at FROM torture.deleted)};
my @CHECKS = (
	[
		'every committed change is stamped (or was deleted by the operator)',
		qq{SELECT count(*) FROM (
			SELECT feed_id, shard, change_id FROM torture.committed
			EXCEPT ALL SELECT feed_id, shard, change_id FROM $ISSUED i) x}
	],
	[
		'no change stamped twice, none that was rolled back',
		qq{SELECT count(*) FROM (
			SELECT feed_id, shard, change_id FROM $ISSUED i
			EXCEPT ALL SELECT feed_id, shard, change_id FROM torture.committed) x}
	],
	[
		'no number issued twice (a deleted number is never reissued)',
		qq{SELECT count(*) FROM (SELECT feed_id, shard, n FROM $ISSUED i
			GROUP BY 1, 2, 3 HAVING count(*) > 1) x},
		qq{SELECT string_agg(format('feed %s shard %s number %s: change %s stamped at %s', feed_id, shard, n, change_id, stamped_at), E'\\n')
		   FROM (SELECT i.* FROM $ISSUED i JOIN (SELECT feed_id, shard, n FROM $ISSUED i2
				 GROUP BY 1, 2, 3 HAVING count(*) > 1 LIMIT 3) d USING (feed_id, shard, n)) x}
	],
	[
		'every shard\'s numbers (stamped or deleted) are exactly start+1..highest',
		qq{SELECT count(*) FROM (
			SELECT s.feed_id, s.shard
			FROM torture.shard_start s LEFT JOIN $ISSUED i USING (feed_id, shard)
			GROUP BY s.feed_id, s.shard, s.start
			HAVING coalesce(min(i.n), s.start + 1) <> s.start + 1
				OR coalesce(max(i.n), s.start) <> s.start + count(DISTINCT i.n)) x}
	],
	[
		'every shard\'s head is the highest number it issued',
		qq{SELECT count(*) FROM torture.shard_start s
		  JOIN cfeed.shard c USING (feed_id, shard)
		  CROSS JOIN LATERAL (SELECT coalesce(max(i.n), s.start) AS hi FROM $ISSUED i
							  WHERE i.feed_id = s.feed_id AND i.shard = s.shard) x
		  WHERE cfeed.head(s.feed_id, s.shard) <> x.hi OR c.last_change_sequence_number <> x.hi}
	],
	[
		'every number a reader saw still names the same change, stamped at the same time',
		qq{SELECT count(*) FROM (SELECT DISTINCT feed_id, shard, n, change_id, stamped_at FROM torture.seen) r
		  WHERE NOT EXISTS (SELECT FROM $ISSUED i
			WHERE i.feed_id = r.feed_id AND i.shard = r.shard AND i.n = r.n
			  AND i.change_id = r.change_id AND i.stamped_at IS NOT DISTINCT FROM r.stamped_at)},
		qq{SELECT string_agg(format('feed %s shard %s: %s read as change %s stamped at %s; now change %s is %s',
			r.feed_id, r.shard, r.n, r.change_id, r.stamped_at,
			r.change_id, coalesce((SELECT string_agg(format('number %s stamped at %s', c.n, c.stamped_at), ', ')
					FROM torture.numbered c WHERE c.feed_id = r.feed_id AND c.change_id = r.change_id), 'gone')), E'\\n')
		   FROM (SELECT DISTINCT feed_id, shard, n, change_id, stamped_at FROM torture.seen r
				 WHERE NOT EXISTS (SELECT FROM $ISSUED i
					WHERE i.feed_id = r.feed_id AND i.shard = r.shard AND i.n = r.n
					  AND i.change_id = r.change_id AND i.stamped_at IS NOT DISTINCT FROM r.stamped_at)
				 LIMIT 3) r}
	],
	[
		'readers never saw one number name two changes',
		q{SELECT count(*) FROM (SELECT feed_id, shard, n FROM torture.seen GROUP BY 1, 2, 3
			HAVING count(DISTINCT (change_id, stamped_at)) > 1) x}
	],
	[
		'readers never saw one change under two numbers',
		q{SELECT count(*) FROM (SELECT feed_id, change_id FROM torture.seen GROUP BY 1, 2
			HAVING count(DISTINCT (shard, n)) > 1) x},
		q{SELECT string_agg(format('feed %s change %s read as %s', feed_id, change_id, ns), E'\\n')
		   FROM (SELECT feed_id, change_id, string_agg(DISTINCT format('shard %s number %s', shard, n), ', ') AS ns
				 FROM torture.seen GROUP BY 1, 2 HAVING count(DISTINCT (shard, n)) > 1 LIMIT 3) x}
	],
	[
		'a full read of every shard returns its stamped changes in order',
		q{SELECT count(*) FROM torture.shard_start s
		  CROSS JOIN LATERAL (
			SELECT array_agg(r.change_sequence_number ORDER BY r.o) AS got
			FROM cfeed.read(s.feed_id, s.shard, NULL, 100000000)
				WITH ORDINALITY AS r(change_sequence_number, change_id, stamped_at, o)) r
		  CROSS JOIN LATERAL (
			SELECT array_agg(c.n ORDER BY c.n) AS want
			FROM torture.numbered c WHERE c.feed_id = s.feed_id AND c.shard = s.shard) c
		  WHERE r.got IS DISTINCT FROM c.want}
	],
);
for my $c (@CHECKS)
{
	is($node->safe_psql($db, $c->[1]), '0', $c->[0])
	  or $c->[2] && diag($node->safe_psql($db, $c->[2]));
}

# Guarantee 4, for writers that had finished: if A's xid is below the
# xmin of the snapshot in which B drew its change_id, A committed before and
# every change of A has a lower number than every change of B in a shard
# they share (a running maximum over xid, one probe per change).
my $order = $node->safe_psql($db, q{
CREATE TEMP TABLE o AS
SELECT t.feed_id, t.shard, t.xid::text::bigint AS xid,
	   pg_snapshot_xmin(t.snap)::text::bigint AS sxmin, c.n
FROM torture.committed t JOIN torture.numbered c USING (feed_id, shard, change_id);
CREATE TEMP TABLE cm AS
SELECT feed_id, shard, xid, max(maxn) OVER (PARTITION BY feed_id, shard ORDER BY xid) AS cummax
FROM (SELECT feed_id, shard, xid, max(n) AS maxn FROM o GROUP BY 1, 2, 3) x;
CREATE INDEX ON cm (feed_id, shard, xid);
ANALYZE cm;
SELECT count(*) FROM o b
CROSS JOIN LATERAL (SELECT cm.cummax FROM cm
					WHERE cm.feed_id = b.feed_id AND cm.shard = b.shard AND cm.xid < b.sxmin
					ORDER BY cm.xid DESC LIMIT 1) a
WHERE a.cummax > b.n});
is($order, '0', 'a change committed before another was drawn has the lower number');

# amcheck: the heap of each of @TABLES and every index of it (with all heap
# tuples indexed) are consistent.
for my $table (@TABLES)
{
	is($node->safe_psql($db, qq{SELECT count(*) FROM verify_heapam('$table')}),
		'0', "amcheck: $table\'s heap is consistent");
	my ($amret, $amout, $amerr) = (0, '', '');
	$amret = $node->psql($db, qq{
		SELECT bt_index_parent_check(i.indexrelid, true, true)
		FROM pg_index i WHERE i.indrelid = '$table'::regclass AND i.indisvalid},
		stdout => \$amout, stderr => \$amerr);
	is($amret, 0, "amcheck: every index of $table is consistent with its heap")
	  or diag($amerr);
}

# The server never lost its way: no PANIC, no crashed process, no read of a
# block that is not there (a sweep stamping through stale addresses).
my $log = PostgreSQL::Test::Utils::slurp_file($node->logfile);
my $log_offset = length $log;
my @bad = grep { /PANIC|TRAP:|terminated by signal|could not read block|could not open relation with OID|cache lookup failed|invalid page/ }
  split /\n/, $log;
is(scalar @bad, 0, 'server log: no PANIC, crash or unreadable block')
  or diag(join("\n", @bad[ 0 .. ($#bad < 9 ? $#bad : 9) ]));

# TRUNCATE (not in the loop: it deletes everything; in ranges the stamps
# too): numbering goes on above every shard's head.
my $heads = $node->safe_psql($db,
	q{SELECT string_agg(cfeed.head(feed_id, shard)::text, ',' ORDER BY feed_id, shard) FROM torture.shard_start});
$node->safe_psql($db, $RANGES ? 'TRUNCATE cfeed.change, cfeed.stamp' : 'TRUNCATE cfeed.change');
$node->safe_psql($db,
	q{SELECT cfeed.publish(feed_id, shard) FROM torture.shard_start});
$node->poll_query_until($db, "SELECT ($pending_sql) = 0", 't');
my $after = $node->safe_psql($db, q{
	SELECT string_agg(format('%s/%s', cfeed.head(s.feed_id, s.shard),
		(SELECT min(c.n) FROM torture.numbered c
		 WHERE c.feed_id = s.feed_id AND c.shard = s.shard)), ',' ORDER BY feed_id, shard)
	FROM torture.shard_start s});
my $want = join(',', map { ($_ + 1) . '/' . ($_ + 1) } split /,/, $heads);
is($after, $want, 'after TRUNCATE, every shard numbers on above its old head');
my @bad_truncate = grep { /PANIC|TRAP:|terminated by signal|could not read block/ }
  split /\n/, substr(PostgreSQL::Test::Utils::slurp_file($node->logfile), $log_offset);
is(scalar @bad_truncate, 0, 'server log: no PANIC, crash or unreadable block after TRUNCATE')
  or diag(join("\n", @bad_truncate[ 0 .. ($#bad_truncate < 9 ? $#bad_truncate : 9) ]));

note(sprintf('total %.1f s', time - $t0));
$node->stop;
done_testing();
