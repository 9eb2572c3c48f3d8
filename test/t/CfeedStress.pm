
# test/t/CfeedStress.pm
#
# The concurrency stress run shared by 001_stress.pl (SQL sweepers only) and
# 002_stress_worker.pl (the background sweeper sweeping alongside them).
#
# What runs at once, for CFEED_STRESS_SECONDS (default 30):
#
#   writers   pgbench, 8 clients: 1-3 changes per transaction to random
#             shards, by direct INSERT and by cfeed.publish() (one change_id
#             to three feeds), ~20% rolled back, some with a rolled-back
#             savepoint, some sleeping inside the transaction; plus 2 clients
#             holding transactions open for seconds (one with its xid taken
#             early, one with its change_id drawn early).  Every committed
#             change is also recorded in stress.committed, in the same
#             transaction, with the writer's xid and statement snapshot.
#   sweepers  sessions looping CALL cfeed.sweep_loop(...), and procedures
#             looping cfeed.sweep() in transactions that commit, roll back,
#             or roll back a subtransaction around the sweep.
#   readers   procedures paging every shard with cfeed.read(): each page must
#             continue the cursor exactly (cursor+1, cursor+2, ...), hold at
#             least what cfeed.head() showed before the read, and name only
#             committed changes.
#   checker   one statement per pass: in its snapshot, every shard's stamped
#             numbers are exactly start+1..last_change_sequence_number.
#
# Afterwards, with everything swept: gapless numbering, exactly-once stamping
# of exactly the committed changes, last_change_sequence_number = max,
# change_id order within a sweep, and guarantee 4 checked against the
# writers' snapshots.  The run fails below 10,000 stamped changes: a floor
# that proves the races were exercised, not a speed target (speed is
# benchmarked by make bench; the rate is printed as a note).  On two cores
# running three majors' suites at once, 30 s stamp 40,000-120,000.
#
package CfeedStress;

use strict;
use warnings;

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

our $MIN_CHANGES = 10_000;

# Feeds: 7 (4 shards) and 8 (1 shard) in sweep group 0, 9 (2 shards) in
# group 1.  Writers always write feed 7; cfeed.publish() writes the same
# change_id to all three.
our $SETUP = <<'SQL';
CREATE EXTENSION cfeed;
SELECT cfeed.create_feed('stress', 4, 7);
SELECT cfeed.create_feed('stress_copy', 1, 8);
SELECT cfeed.create_feed('stress_g1', 2, 9, 1);

CREATE SCHEMA stress;
CREATE TABLE stress.shard_start AS
	SELECT feed_id, shard, last_change_sequence_number AS start FROM cfeed.shard;

-- Every stamped change with its number: from its row (storage rows), or
-- from its stamp (storage ranges, where cfeed.stamp exists).
DO $$
BEGIN
	IF to_regclass('cfeed.stamp') IS NULL THEN
		CREATE VIEW stress.numbered AS
			SELECT feed_id, shard, change_id, change_sequence_number, stamped_at
			FROM cfeed.change WHERE change_sequence_number IS NOT NULL;
	ELSE
		CREATE VIEW stress.numbered AS
			SELECT feed_id, shard, change_id, change_sequence_number, stamped_at
			FROM cfeed.change WHERE change_sequence_number IS NOT NULL
			UNION ALL
			SELECT t.feed_id, t.shard, t.first_change_id + u.d, t.first_number + u.o - 1, t.stamped_at
			FROM cfeed.stamp t, unnest(t.change_id_deltas) WITH ORDINALITY AS u(d, o);
	END IF;
END $$;
-- The committed changes no sweep has numbered yet.
CREATE VIEW stress.unstamped AS
	SELECT c.feed_id, c.shard, c.change_id FROM cfeed.change c
	WHERE NOT EXISTS (SELECT FROM stress.numbered n
					  WHERE n.change_id = c.change_id AND n.feed_id = c.feed_id AND n.shard = c.shard);

-- The truth: one row per committed change (rolled back with its writer).
-- snap is the writer's snapshot from the statement that drew the change_id
-- (or an earlier one); long marks changes of writers that kept an xid for
-- seconds.
CREATE TABLE stress.committed (
	change_id bigint NOT NULL,
	feed_id int NOT NULL,
	shard int NOT NULL,
	xid xid8 NOT NULL DEFAULT pg_current_xact_id(),
	snap pg_snapshot NOT NULL,
	long bool NOT NULL DEFAULT false
);
CREATE INDEX ON stress.committed (change_id);

-- Sweep in a loop, committing, rolling back, or rolling back a savepoint
-- around the sweep (p_abort_pct percent of the passes abort).
CREATE PROCEDURE stress.sweeper(p_group int, p_duration_ms int, p_abort_pct int,
								INOUT sweeps bigint DEFAULT 0, INOUT stamped bigint DEFAULT 0,
								INOUT aborted bigint DEFAULT 0)
LANGUAGE plpgsql AS $$
DECLARE
	deadline timestamptz := clock_timestamp() + p_duration_ms * interval '1 ms';
	n bigint;
	r float8;
BEGIN
	WHILE clock_timestamp() < deadline LOOP
		r := random() * 100;
		sweeps := sweeps + 1;
		IF r < p_abort_pct / 2.0 THEN
			BEGIN
				PERFORM * FROM cfeed.sweep(p_group);
				RAISE EXCEPTION 'stress: undo this sweep';
			EXCEPTION WHEN raise_exception THEN
				aborted := aborted + 1;
			END;
			COMMIT;
			n := 0;
		ELSE
			SELECT coalesce(sum(change_count), 0) INTO n FROM cfeed.sweep(p_group);
			IF r < p_abort_pct THEN
				ROLLBACK;
				aborted := aborted + 1;
				n := 0;
			ELSE
				COMMIT;
				stamped := stamped + n;
			END IF;
		END IF;
		-- leave the group to the other sweepers for a moment
		PERFORM pg_sleep(CASE WHEN n = 0 THEN 0.005 ELSE 0.002 END);
		COMMIT;
	END LOOP;
END $$;

-- Page through the given shards (one picked at random per page) with
-- cfeed.read(); fail on any gap, short page, or uncommitted change.
-- p_max = 0 picks a random page size per page.
CREATE PROCEDURE stress.reader(p_feeds int[], p_shards int[], p_duration_ms int,
							   p_max int, p_wait_ms int,
							   INOUT pages bigint DEFAULT 0, INOUT rows_read bigint DEFAULT 0)
LANGUAGE plpgsql AS $$
DECLARE
	deadline timestamptz := clock_timestamp() + p_duration_ms * interval '1 ms';
	nshards int := cardinality(p_feeds);
	cursors bigint[] := array_fill(NULL::bigint, ARRAY[cardinality(p_feeds)]);
	starts bigint[];
	i int;
	f int;
	s int;
	cur bigint;
	h bigint;
	m int;
	n int;
	k bigint;
	ids bigint[];
	r record;
BEGIN
	SELECT array_agg(st.start ORDER BY u.ord) INTO starts
	FROM unnest(p_feeds, p_shards) WITH ORDINALITY AS u(f, s, ord)
	JOIN stress.shard_start st ON st.feed_id = u.f AND st.shard = u.s;
	LOOP
		i := 1 + floor(random() * nshards)::int;
		f := p_feeds[i];
		s := p_shards[i];
		cur := coalesce(cursors[i], starts[i]);
		m := CASE WHEN p_max > 0 THEN p_max ELSE 1 + floor(random() * 500)::int END;
		h := cfeed.head(f, s);
		n := 0;
		ids := '{}';
		-- the first read of a shard passes cursor null (from the beginning)
		FOR r IN SELECT * FROM cfeed.read(f, s, cursors[i], m, p_wait_ms) LOOP
			IF r.change_sequence_number IS DISTINCT FROM cur + 1 THEN
				RAISE EXCEPTION 'stress reader: GAP in feed % shard %: after % came % (page of % from cursor %)',
					f, s, cur, r.change_sequence_number, m, coalesce(cursors[i]::text, 'null');
			END IF;
			cur := cur + 1;
			n := n + 1;
			ids := ids || r.change_id;
		END LOOP;
		IF n < least(h - coalesce(cursors[i], starts[i]), m) THEN
			RAISE EXCEPTION 'stress reader: PREFIX violated in feed % shard %: head was % before the read, but reading % after % returned only %',
				f, s, h, m, coalesce(cursors[i], starts[i]), n;
		END IF;
		IF n > 0 THEN
			SELECT count(*) INTO k FROM stress.committed c
			WHERE c.change_id = ANY (ids) AND c.feed_id = f AND c.shard = s;
			IF k <> n THEN
				RAISE EXCEPTION 'stress reader: feed % shard %: % of % changes read after % were never committed',
					f, s, n - k, n, coalesce(cursors[i], starts[i]);
			END IF;
		END IF;
		cursors[i] := cur;
		pages := pages + 1;
		rows_read := rows_read + n;
		COMMIT;
		IF n < m THEN
			-- caught up: let some changes gather
			PERFORM pg_sleep(0.01);
			COMMIT;
		END IF;
		EXIT WHEN clock_timestamp() >= deadline;
	END LOOP;
END $$;

-- In one snapshot per pass: every shard's stamped numbers above the last
-- verified head are exactly (verified, last_change_sequence_number].
CREATE PROCEDURE stress.prefix_checker(p_duration_ms int, INOUT checks bigint DEFAULT 0)
LANGUAGE plpgsql AS $$
DECLARE
	deadline timestamptz := clock_timestamp() + p_duration_ms * interval '1 ms';
	r record;
BEGIN
	CREATE TEMP TABLE verified AS SELECT feed_id, shard, start AS upto FROM stress.shard_start;
	LOOP
		FOR r IN
			SELECT s.feed_id, s.shard, s.last_change_sequence_number AS last, v.upto, x.n, x.mx
			FROM cfeed.shard s
			JOIN verified v USING (feed_id, shard)
			CROSS JOIN LATERAL (
				SELECT count(*) AS n, max(c.change_sequence_number) AS mx
				FROM stress.numbered c
				WHERE c.feed_id = s.feed_id AND c.shard = s.shard
				  AND c.change_sequence_number > v.upto) x
		LOOP
			IF r.n <> r.last - r.upto OR coalesce(r.mx, r.upto) <> r.last THEN
				RAISE EXCEPTION 'stress checker: feed % shard %: last_change_sequence_number % but % numbers above % (max %) in one snapshot',
					r.feed_id, r.shard, r.last, r.n, r.upto, r.mx;
			END IF;
			UPDATE verified v SET upto = r.last WHERE v.feed_id = r.feed_id AND v.shard = r.shard;
		END LOOP;
		checks := checks + 1;
		COMMIT;
		EXIT WHEN clock_timestamp() >= deadline;
		PERFORM pg_sleep(0.05);
	END LOOP;
	DROP TABLE verified;
END $$;
SQL

# pgbench scripts.  ins() is a direct INSERT of :n changes into feed 7,
# recorded in stress.committed with the statement's snapshot.
sub ins
{
	my ($n, $feed, $shards, $long) = @_;
	$long ||= 'false';
	return <<"SQL";
WITH ins AS (
	INSERT INTO cfeed.change (feed_id, shard, change_id)
	SELECT $feed, floor(random() * $shards)::int, nextval('cfeed.change_id')
	FROM generate_series(1, $n)
	RETURNING feed_id, shard, change_id)
INSERT INTO stress.committed (change_id, feed_id, shard, snap, long)
SELECT change_id, feed_id, shard, pg_current_snapshot(), $long FROM ins;
SQL
}

# One change_id published to feeds 7, 8 and 9 with cfeed.publish().
my $PUBLISH = <<'SQL';
WITH v AS MATERIALIZED (
	SELECT floor(random() * 4)::int AS s7, floor(random() * 2)::int AS s9,
		   pg_current_snapshot() AS snap),
p AS MATERIALIZED (SELECT cfeed.publish(7, s7) AS id, s7, s9, snap FROM v),
q AS MATERIALIZED (SELECT cfeed.publish(8, 0, id) AS id8, cfeed.publish(9, s9, id) AS id9 FROM p)
INSERT INTO stress.committed (change_id, feed_id, shard, snap)
SELECT p.id, x.f, x.s, p.snap
FROM p, q, LATERAL (VALUES (7, p.s7), (8, 0), (9, p.s9)) AS x(f, s)
WHERE q.id8 = p.id AND q.id9 = p.id;
SQL

our %SCRIPTS = (
	'commit.sql' => "\\set n random(1, 3)\nBEGIN;\n" . ins(':n', 7, 4) . "COMMIT;\n",
	'publish.sql' => "BEGIN;\n$PUBLISH" . ins(1, 7, 4) . "COMMIT;\n",
	'slow.sql' => "\\set n random(1, 2)\nBEGIN;\n" . ins(':n', 7, 4)
	  . "SELECT pg_sleep(random() * 0.01);\n" . ins(1, 9, 2) . "COMMIT;\n",
	'rollback.sql' => "\\set n random(1, 3)\nBEGIN;\n" . ins(':n', 7, 4)
	  . $PUBLISH . "ROLLBACK;\n",
	'savepoint.sql' => "BEGIN;\n" . ins(1, 7, 4) . "SAVEPOINT a;\n"
	  . ins(2, 7, 4) . $PUBLISH . "ROLLBACK TO SAVEPOINT a;\n"
	  . ins(1, 7, 4) . "COMMIT;\n",
	# holds its xid (and so the xmin of every snapshot) for up to a second,
	# then lets the horizon move for a second
	'longxid.sql' => "\\sleep 1000 ms\nBEGIN;\n" . ins(1, 7, 4, 'true')
	  . "SELECT pg_sleep(0.2 + random() * 0.8);\n" . ins(1, 9, 2, 'true') . "COMMIT;\n",
	# draws a low change_id, then writes it seconds later
	'longid.sql' => <<'SQL',
\set shard random(0, 3)
BEGIN;
SELECT nextval('cfeed.change_id') AS id, set_config('stress.snap', pg_current_snapshot()::text, true) AS snap \gset
SELECT pg_sleep(0.2 + random() * 1.5);
INSERT INTO cfeed.change (feed_id, shard, change_id) VALUES (7, :shard, :id);
INSERT INTO stress.committed (change_id, feed_id, shard, snap)
VALUES (:id, 7, :shard, current_setting('stress.snap')::pg_snapshot);
COMMIT;
SQL
);

# Checks that return the number of violations found (0 = pass).
my @FINAL_CHECKS = (
	[
		'no change left unstamped',
		'SELECT count(*) FROM stress.unstamped'
	],
	[
		'every shard is numbered start+1..start+n, no gap, no duplicate',
		q{SELECT count(*) FROM (
			SELECT s.feed_id, s.shard
			FROM stress.shard_start s
			LEFT JOIN stress.numbered c USING (feed_id, shard)
			GROUP BY s.feed_id, s.shard, s.start
			HAVING count(c.change_sequence_number) <> count(DISTINCT c.change_sequence_number)
				OR coalesce(min(c.change_sequence_number), s.start + 1) <> s.start + 1
				OR coalesce(max(c.change_sequence_number), s.start) <> s.start + count(c.change_sequence_number)) x}
	],
	[
		'last_change_sequence_number equals the highest stamped number',
		q{SELECT count(*) FROM cfeed.shard s JOIN stress.shard_start st USING (feed_id, shard)
		  WHERE s.last_change_sequence_number <> coalesce(
			(SELECT max(change_sequence_number) FROM stress.numbered c
			 WHERE c.feed_id = s.feed_id AND c.shard = s.shard), st.start)}
	],
	[
		'stamped changes that were never committed (rolled back, or twice)',
		q{SELECT count(*) FROM (
			SELECT change_id, feed_id, shard, count(*) FROM stress.numbered GROUP BY 1, 2, 3
			EXCEPT ALL
			SELECT change_id, feed_id, shard, 1 FROM stress.committed) x}
	],
	[
		'committed changes never stamped',
		q{SELECT count(*) FROM (
			SELECT change_id, feed_id, shard FROM stress.committed
			EXCEPT ALL
			SELECT change_id, feed_id, shard FROM stress.numbered) x}
	],
	[
		'within one sweep, numbers follow change_id order',
		q{SELECT count(*) FROM (
			SELECT change_id < lag(change_id) OVER w AS inverted
			FROM stress.numbered
			WINDOW w AS (PARTITION BY feed_id, shard, stamped_at ORDER BY change_sequence_number)) x
		  WHERE inverted}
	],
	[
		'a full read from cursor null returns start+1..head in order',
		q{SELECT count(*) FROM cfeed.shard s JOIN stress.shard_start st USING (feed_id, shard)
		  CROSS JOIN LATERAL (
			SELECT count(*) AS n, bool_and(r.change_sequence_number = st.start + r.o) AS ok
			FROM cfeed.read(s.feed_id, s.shard, NULL, 100000000)
				WITH ORDINALITY AS r(change_sequence_number, change_id, stamped_at, o)) x
		  WHERE x.n <> s.last_change_sequence_number - st.start OR NOT coalesce(x.ok, true)}
	],
);

# Guarantee 4: if writer A committed before writer B took the snapshot
# of the statement that drew B's change_id (A visible in B's recorded
# snapshot), every change of A gets a lower number than every change of B in
# the shards they share.  Checked exactly, in three parts:
#   1. A not long-running, xid below m(B) (the lowest xid B's snapshot saw
#      running, long-running writers aside): A is certainly visible; a running
#      maximum over xid finds the worst such A with one index probe per B.
#   2. A not long-running, xid in [m(B), xmax(B)): visible unless running.
#   3. A long-running (few): tested against every B.
my $ORDER_SETUP = <<'SQL';
CREATE TEMP TABLE o AS
SELECT s.feed_id, s.shard, s.change_id, s.xid::text::bigint AS xid, s.long, s.snap,
	   pg_snapshot_xmax(s.snap)::text::bigint AS sxmax,
	   c.change_sequence_number AS csn
FROM stress.committed s JOIN stress.numbered c USING (feed_id, shard, change_id);
CREATE TEMP TABLE longxid AS SELECT DISTINCT xid FROM o WHERE long;
ALTER TABLE o ADD COLUMN m bigint;
UPDATE o SET m = coalesce(
	(SELECT min(x::text::bigint) FROM pg_snapshot_xip(o.snap) x
	 WHERE x::text::bigint NOT IN (SELECT xid FROM longxid)), sxmax);
CREATE INDEX ON o (feed_id, shard, xid);
CREATE TEMP TABLE cm AS
SELECT feed_id, shard, xid,
	   max(maxcsn) OVER (PARTITION BY feed_id, shard ORDER BY xid) AS cummax
FROM (SELECT feed_id, shard, xid, max(csn) AS maxcsn FROM o WHERE NOT long GROUP BY 1, 2, 3) x;
CREATE INDEX ON cm (feed_id, shard, xid);
ANALYZE o;
ANALYZE cm;
SQL

my @ORDER_CHECKS = (
	[
		'order: writers finished before the reader\'s xmin horizon',
		q{SELECT count(*) FROM o b
		  CROSS JOIN LATERAL (
			SELECT cm.cummax FROM cm
			WHERE cm.feed_id = b.feed_id AND cm.shard = b.shard AND cm.xid < b.m
			ORDER BY cm.xid DESC LIMIT 1) a
		  WHERE a.cummax > b.csn}
	],
	[
		'order: recently finished writers',
		q{SELECT count(*) FROM o b JOIN o a
			ON a.feed_id = b.feed_id AND a.shard = b.shard
			AND a.xid >= b.m AND a.xid < b.sxmax AND a.xid <> b.xid AND NOT a.long
		  WHERE a.csn > b.csn AND pg_visible_in_snapshot(a.xid::text::xid8, b.snap)}
	],
	[
		'order: long-running writers',
		q{SELECT count(*) FROM o a JOIN o b
			ON a.feed_id = b.feed_id AND a.shard = b.shard AND a.csn > b.csn AND a.xid <> b.xid
		  WHERE a.long AND pg_visible_in_snapshot(a.xid::text::xid8, b.snap)}
	],
);

# Start a command in the background; returns a handle for finish_bg().
sub start_bg
{
	my ($name, $cmd, $timeout) = @_;
	my %h = (name => $name, out => '', err => '');
	$h{run} = IPC::Run::start($cmd, '<', \undef, '>', \$h{out}, '2>', \$h{err},
		IPC::Run::timeout($timeout));
	return \%h;
}

# Wait for a background command; returns true if it exited 0.
sub finish_bg
{
	my ($h) = @_;
	my $ok = eval { $h->{run}->finish; 1 };
	my $rc = $ok ? $h->{run}->result(0) : -1;
	if (!$ok)
	{
		$h->{err} .= "\n(timed out or failed: $@)";
		eval { $h->{run}->kill_kill };
	}
	$h->{rc} = $rc;
	return $rc == 0;
}

# run(%opts): the whole stress run.  Options: name, worker (expect the
# background sweeper: on/off), seconds, sqled (the path of the SQL edition's
# install script: a server without cfeed.so, the script instead of CREATE
# EXTENSION), min_changes (the floor, default $MIN_CHANGES).
sub run
{
	my (%opts) = @_;
	my $seconds = $opts{seconds} // $ENV{CFEED_STRESS_SECONDS} // 30;
	my $worker = $opts{worker} ? 'on' : 'off';
	my $ms = int($seconds * 1000);
	my $timeout = $seconds + 300;
	my $min_changes = $opts{min_changes} // $MIN_CHANGES;
	my $preload = $opts{sqled} ? '' : qq{shared_preload_libraries = 'cfeed'
cfeed.enable_sweeper = $worker};
	$preload .= "\ncfeed.default_storage = $opts{storage}" if $opts{storage};

	my $node = PostgreSQL::Test::Cluster->new($opts{name});
	$node->init;
	$node->append_conf(
		'postgresql.conf', qq{
$preload
max_connections = 60
max_worker_processes = 16
shared_buffers = 128MB
fsync = off
full_page_writes = off
synchronous_commit = off
autovacuum_naptime = 1s
max_locks_per_transaction = 256
log_statement = none
log_min_messages = warning
log_min_error_statement = error
});
	$node->start;
	my $setup = $SETUP;
	if ($opts{sqled})
	{
		$node->command_ok(
			[
				'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-h', $node->host,
				'-p', $node->port, '-d', 'postgres', '-o', '/dev/null', '-f', $opts{sqled}
			],
			'the SQL edition installs');
		$setup =~ s/^CREATE EXTENSION cfeed;\n//m;
	}
	$node->safe_psql('postgres', $setup);

	my $dir = PostgreSQL::Test::Utils::tempdir();
	for my $f (keys %SCRIPTS)
	{
		PostgreSQL::Test::Utils::append_to_file("$dir/$f", $SCRIPTS{$f});
	}
	my @conn = ('-h', $node->host, '-p', $node->port);
	my @psql = ('psql', '-X', '-At', '-v', 'ON_ERROR_STOP=1', @conn, '-d', 'postgres');

	my @procs;
	my $t0 = time;

	# writers
	push @procs, start_bg('pgbench writers',
		[
			'pgbench', '-n', '-M', 'prepared', '-c', '8', '-j', '2', '-T', $seconds, @conn,
			'-f', "$dir/commit.sql\@10", '-f', "$dir/publish.sql\@4",
			'-f', "$dir/slow.sql\@2", '-f', "$dir/savepoint.sql\@2",
			'-f', "$dir/rollback.sql\@4", 'postgres'
		],
		$timeout);
	push @procs, start_bg('pgbench long transactions',
		[
			'pgbench', '-n', '-c', '2', '-j', '1', '-T', $seconds, @conn,
			'-f', "$dir/longxid.sql", '-f', "$dir/longid.sql", 'postgres'
		],
		$timeout);

	# sweepers: sweep_loop sessions (a new backend per call) ...
	# (with the background sweeper, one manual sweeper fewer per kind)
	for my $g ($opts{worker} ? (0, 1) : (0, 0, 1))
	{
		my $loop = join(' ', map { "'$_'" } @psql);
		push @procs, start_bg("sweep_loop group $g",
			[
				'bash', '-c', qq{
end=\$(( \$(date +%s) + $seconds ))
while [ "\$(date +%s)" -lt "\$end" ]; do
	$loop -c "CALL cfeed.sweep_loop($g, 100, 2000, 1, null, null, null)" || exit 1
done}
			],
			$timeout);
	}
	# ... and cfeed.sweep() in committed, rolled back and half-undone
	# transactions
	push @procs, start_bg('sweep() group 0, 20% aborted',
		[ @psql, '-c', "CALL stress.sweeper(0, $ms, 20)" ], $timeout);
	push @procs, start_bg('sweep() group 0',
		[ @psql, '-c', "CALL stress.sweeper(0, $ms, 0)" ], $timeout)
	  unless $opts{worker};
	push @procs, start_bg('sweep() group 1, 10% aborted',
		[ @psql, '-c', "CALL stress.sweeper(1, $ms, 10)" ], $timeout);

	# readers: one per shard of feed 7, one roaming over all shards with
	# random page sizes, one long-polling feed 9
	for my $s (0 .. 3)
	{
		push @procs, start_bg("reader feed 7 shard $s",
			[ @psql, '-c', "CALL stress.reader('{7}', '{$s}', $ms, 500, 20)" ],
			$timeout);
	}
	push @procs, start_bg('reader all shards',
		[
			@psql, '-c',
			"CALL stress.reader('{7,7,7,7,8,9,9}', '{0,1,2,3,0,0,1}', $ms, 0, 5)"
		],
		$timeout);
	push @procs, start_bg('long-polling reader feed 9',
		[ @psql, '-c', "CALL stress.reader('{9,9}', '{0,1}', $ms, 500, 1000)" ],
		$timeout);
	push @procs, start_bg('snapshot checker',
		[ @psql, '-c', "CALL stress.prefix_checker($ms)" ], $timeout);

	# wait for everyone
	for my $p (@procs)
	{
		my $ok = finish_bg($p);
		ok($ok, "$p->{name} finished cleanly")
		  or diag("$p->{name}: exit $p->{rc}\nstdout:\n$p->{out}\nstderr:\n$p->{err}");
		unlike($p->{out} . $p->{err}, qr/GAP|PREFIX|never committed|aborted/,
			"$p->{name} saw no violation");
	}
	my $elapsed = time - $t0;
	for my $p (@procs)
	{
		my $summary = $p->{out};
		if ($p->{name} =~ /^pgbench/)
		{
			($summary) = $p->{out} =~ /(number of transactions actually processed: \d+.*?)$/m;
			my ($tps) = $p->{out} =~ /^(tps = [\d.]+)/m;
			$summary = ($summary // '?') . ', ' . ($tps // '?');
		}
		$summary =~ s/\n/ /g;
		note("$p->{name}: $summary");
	}

	# final sweeps, until nothing is pending (a worker may sweep too)
	my $pending;
	for my $i (1 .. 200)
	{
		$node->safe_psql('postgres',
			'CALL cfeed.sweep_loop(0, 1000, 0, 0, null, null, null)');
		$node->safe_psql('postgres',
			'CALL cfeed.sweep_loop(1, 1000, 0, 0, null, null, null)');
		$pending = $node->safe_psql('postgres', 'SELECT count(*) FROM stress.unstamped');
		last if $pending == 0;
		usleep(50_000);
	}
	is($pending, 0, 'final sweeps stamped everything');

	my $workers = $node->safe_psql('postgres',
		q{SELECT coalesce(string_agg(format('group %s: %s sweeps, %s stamped, error %s',
			sweep_group, sweeps, changes_stamped, coalesce(last_error, 'none')), '; '), 'none')
		  FROM cfeed.sweepers});
	note("background sweepers: $workers");

	for my $c (@FINAL_CHECKS)
	{
		is($node->safe_psql('postgres', $c->[1]), 0, $c->[0]);
	}
	my $t1 = time;
	my @order = map { $_->[1] } @ORDER_CHECKS;
	my @res = split /\n/,
	  $node->safe_psql('postgres', join(";\n", $ORDER_SETUP, @order) . ';');
	for my $i (0 .. $#ORDER_CHECKS)
	{
		is($res[ $#res - $#ORDER_CHECKS + $i ], 0, $ORDER_CHECKS[$i][0]);
	}
	note(sprintf('order checks took %.1f s', time - $t1));

	my $stats = $node->safe_psql('postgres',
		q{SELECT string_agg(format('feed %s shard %s: %s', s.feed_id, s.shard,
			s.last_change_sequence_number - st.start), ', ' ORDER BY s.feed_id, s.shard)
		  FROM cfeed.shard s JOIN stress.shard_start st USING (feed_id, shard)});
	my $total = $node->safe_psql('postgres', 'SELECT count(*) FROM stress.numbered');
	my $writer_tx = $node->safe_psql('postgres',
		'SELECT count(DISTINCT xid) FROM stress.committed');
	note("stamped per shard: $stats");
	note(sprintf('%d changes stamped from %d committed writer transactions in %.1f s: %.0f changes/s',
		$total, $writer_tx, $elapsed, $total / $elapsed));
	cmp_ok($total, '>=', $min_changes, "at least $min_changes changes stamped");

	$node->stop;
	return $total;
}

sub usleep { Time::HiRes::usleep(@_) }

1;
