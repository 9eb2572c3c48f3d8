# test/t/070_soak.pl
#
# Soak: mixed load for CFEED_SOAK_SECONDS (default 60; the long soak is
# CFEED_SOAK_SECONDS=600, see docs/testing.md):
#
#   writers     pgbench, 3 clients: publish + record in truth and commit, or
#               publish and roll back (~25%), or roll back a savepoint
#   sweepers    the background sweeper, plus a session looping
#               CALL cfeed.sweep_loop(0, ...) alongside it
#   readers     2 sessions paging every shard with cfeed.read(), failing on
#               any gap (each page continues the cursor exactly)
#   waiters     2 sessions looping cfeed.wait(head) and read(wait_ms)
#   consumers   a group of 2 (acquire / read / record / checkpoint in one
#               transaction); one member's backend is terminated every ~15 s
#               and restarted
#
# Every few seconds the group-0 background sweeper's /proc/PID/status is
# sampled (VmRSS, RssAnon, RssShmem).  The test fails if its private memory
# (VmRSS - RssShmem: heap and files, not the shared buffers it touches, which
# are shared memory and bounded by shared_buffers) grows by more than 20 MB
# from the first third of the samples to the last.  At the end: every
# committed change stamped exactly once, shards gapless, the consumer group
# processed every change exactly once.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use IPC::Run;
use FindBin;
use lib $FindBin::RealBin;
use CfeedCheck;

my $SECONDS = $ENV{CFEED_SOAK_SECONDS} // 60;
my $MS = $SECONDS * 1000;
my $NSHARDS = 4;
my $LIMIT_KB = 20 * 1024;
my $db = 'postgres';

my $node = PostgreSQL::Test::Cluster->new('soak');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'cfeed'
max_worker_processes = 16
max_connections = 40
shared_buffers = 64MB
fsync = off
synchronous_commit = off
autovacuum_naptime = 5s
log_min_messages = warning
});
$node->start;
$node->safe_psql($db, 'CREATE EXTENSION cfeed');
$node->safe_psql($db, "SELECT cfeed.create_feed('soak', $NSHARDS)");
setup_truth($node, $db);
$node->safe_psql($db, q{
CREATE TABLE processed (change_id bigint NOT NULL, shard int NOT NULL, seq bigint NOT NULL,
                        consumer text NOT NULL);
CREATE TABLE ctl (stop bool NOT NULL);
INSERT INTO ctl VALUES (false);

-- a consumer: one transaction per shard page (read, record, checkpoint)
CREATE PROCEDURE consume(me text)
LANGUAGE plpgsql AS $$
DECLARE
	l record;
	v_last bigint;
BEGIN
	LOOP
		EXIT WHEN (SELECT stop FROM ctl);
		FOR l IN SELECT * FROM cfeed.acquire('soak', 1, me, 2000) LOOP
			BEGIN
				WITH b AS (SELECT r.change_id, r.change_sequence_number AS n
						   FROM cfeed.read(1, l.shard, l.cursor, 200) r),
				     i AS (INSERT INTO processed SELECT b.change_id, l.shard, b.n, me FROM b RETURNING seq)
				SELECT max(seq) INTO v_last FROM i;
				IF v_last IS NOT NULL THEN
					PERFORM cfeed.checkpoint('soak', 1, l.shard, me, l.epoch, v_last);
				END IF;
			EXCEPTION WHEN object_not_in_prerequisite_state THEN
				NULL;	-- lease lost: the page is rolled back, the new owner redoes it
			END;
			COMMIT;
		END LOOP;
		COMMIT;
		PERFORM pg_sleep(0.02);
		COMMIT;
	END LOOP;
END $$;

-- a reader: pages every shard, each page must continue the cursor exactly
CREATE PROCEDURE gap_reader(p_ms int, INOUT pages bigint DEFAULT 0)
LANGUAGE plpgsql AS $$
DECLARE
	deadline timestamptz := clock_timestamp() + p_ms * interval '1 ms';
	cur bigint[] := array_fill(2000000000000000::bigint, ARRAY[4]);
	r record;
	s int;
BEGIN
	WHILE clock_timestamp() < deadline LOOP
		s := floor(random() * 4)::int;
		FOR r IN SELECT * FROM cfeed.read(1, s, cur[s + 1], 1 + floor(random() * 500)::int) LOOP
			IF r.change_sequence_number <> cur[s + 1] + 1 THEN
				RAISE EXCEPTION 'soak reader: GAP in shard %: after % came %', s, cur[s + 1], r.change_sequence_number;
			END IF;
			cur[s + 1] := r.change_sequence_number;
		END LOOP;
		pages := pages + 1;
		COMMIT;
	END LOOP;
END $$;

-- a waiter: waits for the head to pass what it has seen, or reads with wait_ms
CREATE PROCEDURE waiter(p_ms int, INOUT wakeups bigint DEFAULT 0)
LANGUAGE plpgsql AS $$
DECLARE
	deadline timestamptz := clock_timestamp() + p_ms * interval '1 ms';
	h bigint;
	h2 bigint;
	s int;
BEGIN
	WHILE clock_timestamp() < deadline LOOP
		s := floor(random() * 4)::int;
		h := cfeed.head(1, s);
		IF random() < 0.5 THEN
			h2 := cfeed.wait(1, s, h, 500);
		ELSE
			SELECT coalesce(max(change_sequence_number), h) INTO h2 FROM cfeed.read(1, s, h, 10, 500);
		END IF;
		IF h2 < h THEN
			RAISE EXCEPTION 'soak waiter: head of shard % went back from % to %', s, h, h2;
		END IF;
		IF h2 > h THEN wakeups := wakeups + 1; END IF;
		COMMIT;
	END LOOP;
END $$;
});

my $dir = PostgreSQL::Test::Utils::tempdir();
PostgreSQL::Test::Utils::append_to_file("$dir/commit.sql", <<"SQL");
\\set s random(0, @{[ $NSHARDS - 1 ]})
\\set n random(1, 3)
BEGIN;
INSERT INTO truth (change_id) SELECT cfeed.publish(1, :s) FROM generate_series(1, :n);
COMMIT;
SQL
PostgreSQL::Test::Utils::append_to_file("$dir/rollback.sql", <<"SQL");
\\set s random(0, @{[ $NSHARDS - 1 ]})
BEGIN;
INSERT INTO truth (change_id) SELECT cfeed.publish(1, :s);
ROLLBACK;
SQL
PostgreSQL::Test::Utils::append_to_file("$dir/savepoint.sql", <<"SQL");
\\set s random(0, @{[ $NSHARDS - 1 ]})
BEGIN;
INSERT INTO truth (change_id) SELECT cfeed.publish(1, :s);
SAVEPOINT a;
INSERT INTO truth (change_id) SELECT cfeed.publish(1, (:s + 1) % $NSHARDS);
ROLLBACK TO SAVEPOINT a;
COMMIT;
SQL

my @conn = ('-h', $node->host, '-p', $node->port);
my @psql = ('psql', '-X', '-At', '-v', 'ON_ERROR_STOP=1', @conn, '-d', $db);
my $timeout = $SECONDS + 300;
my @procs;

sub start_bg
{
	my ($name, $cmd) = @_;
	my %h = (name => $name, out => '', err => '');
	$h{run} = IPC::Run::start($cmd, '<', \undef, '>', \$h{out}, '2>', \$h{err},
		IPC::Run::timeout($timeout));
	push @procs, \%h;
	return \%h;
}

# the group-0 background sweeper
ok($node->poll_query_until($db, 'SELECT count(*) > 0 FROM cfeed.sweepers WHERE sweep_group = 0'),
	'background sweeper running');
my $sweeper_pid = $node->safe_psql($db, 'SELECT pid FROM cfeed.sweepers WHERE sweep_group = 0');
note("sweeper pid $sweeper_pid");

start_bg('writers',
	[ 'pgbench', '-n', '-c', '3', '-j', '1', '-T', $SECONDS, @conn,
	  '-f', "$dir/commit.sql\@6", '-f', "$dir/rollback.sql\@2", '-f', "$dir/savepoint.sql\@1", $db ]);
my $loop = join(' ', map { "'$_'" } @psql);
start_bg('sweep_loop',
	[ 'bash', '-c', qq{
end=\$(( \$(date +%s) + $SECONDS ))
while [ "\$(date +%s)" -lt "\$end" ]; do
	$loop -c "CALL cfeed.sweep_loop(0, 100, 2000, 5, null, null, null)" >/dev/null || exit 1
done} ]);
start_bg("reader $_", [ @psql, '-c', "CALL gap_reader($MS)" ]) for 1 .. 2;
start_bg("waiter $_", [ @psql, '-c', "CALL waiter($MS)" ]) for 1 .. 2;

# consumers: c1 runs throughout; c2 is killed and restarted
my %consumer;
sub start_consumer
{
	my ($name) = @_;
	my %h = (name => "consumer $name", out => '', err => '');
	# two -c: one string would be one implicit transaction, where CALL cannot COMMIT
	$h{run} = IPC::Run::start([ @psql, '-c', "SET application_name = 'soak_$name'", '-c', "CALL consume('$name')" ],
		'<', \undef, '>', \$h{out}, '2>', \$h{err}, IPC::Run::timeout($timeout + 120));
	$consumer{$name} = \%h;
}
start_consumer('c1');
start_consumer('c2');

# sample the sweeper's memory, and kill c2 now and then
sub status_kb
{
	my ($pid) = @_;
	open my $fh, '<', "/proc/$pid/status" or return undef;
	my %v;
	while (<$fh>) { $v{$1} = $2 if /^(VmRSS|RssAnon|RssFile|RssShmem):\s+(\d+) kB/; }
	close $fh;
	return \%v;
}
my @samples;
my $kills = 0;
my $t0 = time;
my $next_kill = $t0 + 15;
while (time < $t0 + $SECONDS)
{
	my $v = status_kb($sweeper_pid);
	push @samples, $v if $v;
	if (time >= $next_kill)
	{
		my $n = $node->safe_psql($db,
			"SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = 'soak_c2'");
		$consumer{c2}{run}->finish if $n;	# psql exits with an error: fine
		$kills += $n;
		start_consumer('c2');
		$next_kill = time + 15;
	}
	usleep(3_000_000);
}

for my $p (@procs)
{
	my $ok = eval { $p->{run}->finish; 1 } && $p->{run}->result(0) == 0;
	ok($ok, "$p->{name} finished cleanly") or diag("$p->{name}: $p->{out}\n$p->{err}");
	unlike($p->{err}, qr/GAP|went back/, "$p->{name} saw no gap");
	note("$p->{name}: " . ($p->{out} =~ s/\n/ /gr));
}
cmp_ok($kills, '>=', 1, 'a consumer was killed and restarted');

# everything stamped, then the group catches up
ok(wait_all_stamped($node, $db), 'every committed change was stamped');
my $n = check_invariants($node, $db, 'after the soak');
ok($node->poll_query_until($db,
		"SELECT (SELECT count(*) FROM processed) >= (SELECT count(*) FROM truth)"),
	'the consumer group caught up');
$node->safe_psql($db, 'UPDATE ctl SET stop = true');
for my $c (values %consumer)
{
	my $ok = eval { $c->{run}->finish; 1 } && $c->{run}->result(0) == 0;
	ok($ok, "$c->{name} finished cleanly") or diag("$c->{name}: $c->{out}\n$c->{err}");
}
is($node->safe_psql($db, q{
	SELECT count(*) FROM truth t FULL JOIN
		(SELECT change_id, count(*) AS k FROM processed GROUP BY 1) p USING (change_id)
	WHERE p.k IS DISTINCT FROM 1}), '0', 'the consumer group processed every change exactly once');
is($node->safe_psql($db, q{
	SELECT count(*) FROM (SELECT seq - lag(seq) OVER (PARTITION BY shard ORDER BY seq) AS d
						  FROM processed) x WHERE d <> 1}), '0', 'and in shard order without a hole');

# the sweeper's memory
is($node->safe_psql($db, 'SELECT pid FROM cfeed.sweepers WHERE sweep_group = 0'), $sweeper_pid,
	'the background sweeper ran the whole soak in one process');
my $k = int(@samples / 3);
SKIP:
{
	skip 'too few memory samples', 1 if $k < 1;
	my $avg = sub {
		my ($key, @s) = @_;
		my $t = 0;
		$t += $_->{$key} // 0 for @s;
		return $t / @s;
	};
	my @first = @samples[ 0 .. $k - 1 ];
	my @last = @samples[ @samples - $k .. $#samples ];
	my %d;
	for my $key (qw(VmRSS RssAnon RssShmem))
	{
		$d{$key} = [ $avg->($key, @first), $avg->($key, @last) ];
	}
	my $private_growth = ($d{VmRSS}[1] - $d{RssShmem}[1]) - ($d{VmRSS}[0] - $d{RssShmem}[0]);
	my $summary = sprintf(
		'sweeper memory over %d samples in %d s (first third -> last third, kB): VmRSS %.0f -> %.0f, RssAnon %.0f -> %.0f, RssShmem %.0f -> %.0f; private growth %.0f kB; max VmRSS %d kB',
		scalar(@samples), $SECONDS, map({ @{ $d{$_} } } qw(VmRSS RssAnon RssShmem)),
		$private_growth, (sort { $b <=> $a } map { $_->{VmRSS} } @samples)[0]);
	note($summary);
	print STDERR "# $summary\n";
	cmp_ok($private_growth, '<=', $LIMIT_KB, 'the sweeper\'s private memory grew by at most 20 MB');
}
note("soak: $n changes committed and stamped, $kills consumer kills");
$node->stop;
done_testing();
