# Dead letters under concurrency: 3 consumer processes share group "dlq"
# over a 4-shard feed while pgbench writers update keyed rows and publish
# their changes.  The consumers fail deterministically: a change whose
# change_id is a multiple of 13 always fails (poison), one that is a
# multiple of 5 fails on its first two attempts only.  The group's policy
# gives 3 attempts with a short backoff, then a dead letter.  Two consumers
# report failures in the failed transaction (after rolling back to a
# savepoint), the third rolls the whole page back and reports in a new
# transaction.  Consumers are killed and restarted, and an operator fences
# the holders with cfeed.seek (to the cursor they had) while they work.
# At the end every change was processed exactly once or set aside exactly
# once (never both, never neither), the dead letters are exactly the poison
# changes, per-key order held for everything processed, and the operator's
# replay delivers the dead letters in order, each once.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use IPC::Run;
use Cwd;
use JSON::PP;
use FindBin;
use lib $FindBin::RealBin;
use CfeedCheck;

my $NSHARDS = 4;
my $TTL_MS = 1000;
my $PAGE = 50;
my @NAMES = qw(c1 c2 c3);
my %MODE = (c1 => 'savepoint', c2 => 'savepoint', c3 => 'rollback');

my $node = cfeed_node('dead_letters', "max_worker_processes = 16\nmax_connections = 40\n");
my $db = 'postgres';
$node->safe_psql($db, 'CREATE EXTENSION cfeed');
$node->safe_psql($db, "SELECT cfeed.create_feed('orders', $NSHARDS)");
$node->safe_psql($db, q{
	SELECT cfeed.set_failure_policy('dlq', 1, max_attempts => 3, backoff_ms => 10,
	                                max_backoff_ms => 50, dead_letter => true)});

# Writers: each transaction bumps a key's version (locking its row, so the
# key's changes are numbered in version order) and publishes to the key's
# shard; truth records what was written.
$node->safe_psql($db, q{
CREATE TABLE item (key int PRIMARY KEY, version int NOT NULL);
INSERT INTO item SELECT k, 0 FROM generate_series(1, 40) k;
CREATE TABLE truth (change_id bigint PRIMARY KEY, key int NOT NULL, version int NOT NULL);
CREATE FUNCTION write_item(k int) RETURNS void LANGUAGE sql AS $$
	WITH v AS (UPDATE item SET version = version + 1 WHERE key = k RETURNING key, version)
	INSERT INTO truth SELECT cfeed.publish(1, cfeed.shard_for(1, v.key::text)), v.key, v.version FROM v $$;
});

# The consumer: a procedure that commits per shard and page.  Mode
# 'savepoint' processes each change in a subtransaction; on a failure it
# checkpoints the changes before it and reports the failure in the same
# transaction.  Mode 'rollback' rolls the whole page back and reports the
# failure in a transaction of its own.
$node->safe_psql($db, q{
CREATE TABLE processed (id bigserial PRIMARY KEY, change_id bigint NOT NULL, shard int NOT NULL,
                        seq bigint NOT NULL, consumer text NOT NULL);
CREATE TABLE replayed (id bigserial PRIMARY KEY, change_id bigint NOT NULL, shard int NOT NULL,
                       seq bigint NOT NULL);
CREATE TABLE reported (consumer text, change_id bigint, attempts int, dead_letter bool);
CREATE TABLE fenced (consumer text, shard int);
CREATE TABLE ctl (stop bool NOT NULL);
INSERT INTO ctl VALUES (false);

-- the application's processing: poison changes always fail, some fail twice
CREATE FUNCTION process(me text, s int, id bigint, seq bigint, attempts int) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
	IF id % 13 = 0 OR (id % 5 = 0 AND attempts < 2) THEN
		RAISE EXCEPTION 'cannot process change %', id;
	END IF;
	INSERT INTO processed (change_id, shard, seq, consumer) VALUES (id, s, seq, me);
END $$;

CREATE PROCEDURE consume(me text, mode text, ttl_ms int, page int)
LANGUAGE plpgsql AS $$
DECLARE
	l record;
	r record;
	v_last bigint;
	v_failed bigint;
	v_failed_id bigint;
	v_error text;
	v_busy bool;
	f record;
BEGIN
	LOOP
		EXIT WHEN (SELECT stop FROM ctl);
		v_busy := false;
		FOR l IN SELECT * FROM cfeed.acquire('dlq', 1, me, ttl_ms) ORDER BY shard LOOP
			COMMIT;
			v_last := NULL;
			v_failed := NULL;
			BEGIN
				FOR r IN SELECT * FROM cfeed.read_group('dlq', 1, l.shard, max_count => page) LOOP
					IF mode = 'savepoint' THEN
						BEGIN
							PERFORM process(me, l.shard, r.change_id, r.change_sequence_number, r.attempts);
						EXCEPTION WHEN raise_exception THEN
							v_failed := r.change_sequence_number;
							v_failed_id := r.change_id;
							v_error := SQLERRM;
						END;
						EXIT WHEN v_failed IS NOT NULL;
					ELSE
						v_failed := r.change_sequence_number;	-- the change in hand, if it raises
						v_failed_id := r.change_id;
						PERFORM process(me, l.shard, r.change_id, r.change_sequence_number, r.attempts);
						v_failed := NULL;
					END IF;
					v_last := r.change_sequence_number;
				END LOOP;
				IF v_last IS NOT NULL THEN
					PERFORM cfeed.checkpoint('dlq', 1, l.shard, me, l.epoch, v_last);
					v_busy := true;
				END IF;
				IF v_failed IS NOT NULL THEN
					SELECT * INTO f FROM cfeed.fail('dlq', 1, l.shard, me, l.epoch, v_failed, v_error);
					INSERT INTO reported VALUES (me, v_failed_id, f.attempts, f.dead_letter);
					v_busy := true;
				END IF;
			EXCEPTION
				WHEN object_not_in_prerequisite_state THEN
					INSERT INTO fenced VALUES (me, l.shard);
				WHEN raise_exception THEN
					v_error := SQLERRM;	-- mode 'rollback': the whole page is rolled back
			END;
			COMMIT;
			IF mode = 'rollback' AND v_failed IS NOT NULL AND v_error LIKE 'cannot process%' THEN
				BEGIN
					SELECT * INTO f FROM cfeed.fail('dlq', 1, l.shard, me, l.epoch, v_failed, v_error);
					INSERT INTO reported VALUES (me, v_failed_id, f.attempts, f.dead_letter);
					v_busy := true;
				EXCEPTION WHEN object_not_in_prerequisite_state THEN
					INSERT INTO fenced VALUES (me, l.shard);
				END;
				COMMIT;
			END IF;
			v_error := NULL;
		END LOOP;
		COMMIT;
		IF NOT v_busy THEN
			PERFORM pg_sleep(0.01);
			COMMIT;
		END IF;
	END LOOP;
END $$;
});

my %consumer;

sub start_consumer
{
	my ($name) = @_;
	start_named_call(\%consumer, $node, $db, $name, "CALL consume('$name', '$MODE{$name}', $TTL_MS, $PAGE)");
}

sub kill_consumer { kill_named_call(\%consumer, $node, $db, $_[0]) }

my $script = $node->basedir . '/writer.sql';
open my $fh, '>', $script or die "cannot write $script: $!";
print $fh "\\set k random(1, 40)\nSELECT write_item(:k);\n";
close $fh;
my ($pb_out, $pb_err) = ('', '');
my $pgbench = IPC::Run::start(
	[ 'pgbench', '-n', '-c', '4', '-j', '2', '-R', '300', '-T', '8', '-f', $script,
	  '-h', $node->host, '-p', $node->port, $db ],
	'>', \$pb_out, '2>', \$pb_err);

start_consumer($_) for @NAMES;
my $seed = $ENV{CFEED_TEST_SEED} // int(time);
srand($seed);
note("random seed $seed (set CFEED_TEST_SEED to repeat)");
for my $round (1 .. 2)
{
	usleep(1_500_000 + int(rand(500_000)));
	# an operator fences every holder: seek to the cursor each lease has
	$node->safe_psql($db, q{
		BEGIN;
		SELECT cfeed.seek(l.group_name, l.feed_id, l.shard, l.cursor)
		FROM (SELECT * FROM cfeed.lease WHERE group_name = 'dlq' ORDER BY shard FOR UPDATE) l;
		COMMIT;});
	usleep(500_000);
	my $victim = $NAMES[ int(rand(@NAMES)) ];
	kill_consumer($victim);
	note("round $round: fenced every lease with seek, killed $victim");
	usleep(int(rand(1_000_000)));
	start_consumer($victim);
}

$pgbench->finish;
like($pb_out, qr/number of transactions actually processed/, 'pgbench wrote');
ok(wait_all_stamped($node, $db), 'every change stamped');

ok($node->poll_query_until($db, q{
	SELECT count(*) = 4 AND bool_and(l.cursor = s.last_change_sequence_number)
	FROM cfeed.lease l JOIN cfeed.shard s USING (feed_id, shard)
	WHERE l.group_name = 'dlq'}), 'consumers caught up with every shard');
$node->safe_psql($db, 'UPDATE ctl SET stop = true');
$_->finish for values %consumer;

my $n = $node->safe_psql($db, 'SELECT count(*) FROM truth');
cmp_ok($n, '>', 500, "$n changes written");
my ($nproc, $ndead, $npoison, $nflaky) = split /\|/, $node->safe_psql($db, q{
	SELECT (SELECT count(*) FROM processed), (SELECT count(*) FROM cfeed.dead_letters),
	       (SELECT count(*) FROM truth WHERE change_id % 13 = 0),
	       (SELECT count(*) FROM truth WHERE change_id % 5 = 0 AND change_id % 13 <> 0)});
cmp_ok($npoison, '>', 10, "$npoison poison changes written");
is($node->safe_psql($db, 'SELECT count(*) - count(DISTINCT change_id) FROM processed'), '0',
	'no change processed twice');
is($node->safe_psql($db, q{
	SELECT count(*) FROM truth t
	LEFT JOIN processed p USING (change_id)
	LEFT JOIN cfeed.dead_letters d ON d.change_id = t.change_id AND d.group_name = 'dlq'
	WHERE (p.change_id IS NULL) = (d.change_id IS NULL)}), '0',
	'every change processed or a dead letter: never both, never neither');
is($node->safe_psql($db, q{
	SELECT count(*) FROM truth t
	FULL JOIN cfeed.dead_letters d ON d.change_id = t.change_id AND d.group_name = 'dlq'
	WHERE (t.change_id % 13 = 0) <> (d.change_id IS NOT NULL)}), '0',
	'the dead letters are exactly the poison changes');
is($node->safe_psql($db, q{SELECT count(*) FROM cfeed.dead_letters WHERE attempts <> 3}), '0',
	'each dead letter was set aside after its 3 attempts');
is($node->safe_psql($db, q{
	SELECT count(*) FROM truth t JOIN processed p USING (change_id)
	WHERE t.change_id % 5 = 0 AND t.change_id % 13 <> 0}), $nflaky,
	"the $nflaky changes that failed twice were processed on their third attempt");
is($node->safe_psql($db, q{
	SELECT count(*) FROM (
	  SELECT t.version - lag(t.version) OVER (PARTITION BY t.key ORDER BY p.id) AS step
	  FROM processed p JOIN truth t USING (change_id)) x
	WHERE step <= 0}), '0', 'per-key order kept for everything processed');
is($node->safe_psql($db, q{
	SELECT count(*) FROM (
	  SELECT p.seq - lag(p.seq) OVER (PARTITION BY p.shard ORDER BY p.id) AS step
	  FROM processed p) x
	WHERE step <= 0}), '0', 'each shard processed in ascending order');
is($node->safe_psql($db, q{SELECT count(DISTINCT consumer) FROM processed}), '3',
	'every consumer did some of the work');
is($node->safe_psql($db, q{SELECT count(DISTINCT consumer) FROM reported WHERE dead_letter}), '3',
	'every consumer set dead letters aside (both ways of reporting)');
is($node->safe_psql($db, q{SELECT dead_letters FROM cfeed.groups WHERE group_name = 'dlq'}), $ndead,
	'cfeed.groups counts the dead letters');
is($node->safe_psql($db, q{SELECT sum(dead_letters) FROM cfeed.consumer_lag WHERE group_name = 'dlq'}), $ndead,
	'cfeed.consumer_lag counts them per shard');

# `cfeed tail --dead-letters` lists them, in order (the binary built in
# this tree, else the installed one).
my $cfeed = ($ENV{TESTDIR} // Cwd::getcwd()) . '/src/client/cfeed';
if (!-x $cfeed)
{
	my $bindir = `pg_config --bindir`;
	chomp $bindir;
	$cfeed = "$bindir/cfeed";
}
SKIP:
{
	skip "cfeed command not built ($cfeed)", 4 unless -x $cfeed;
	my ($out, $err) = ('', '');
	IPC::Run::run([ $cfeed, 'tail', '--feed', 'orders', '--dead-letters', '--group', 'dlq',
			'--dbname', $node->connstr($db) ], '>', \$out, '2>', \$err);
	my @lines = map { decode_json($_) } split /\n/, $out;
	is(scalar @lines, $ndead, "cfeed tail --dead-letters prints the $ndead dead letters") or diag($err);
	is(join(',', map { "$_->{shard}:$_->{change_sequence_number}:$_->{change_id}:$_->{attempts}" } @lines),
		$node->safe_psql($db, q{
			SELECT string_agg(concat_ws(':', shard, change_sequence_number, change_id, attempts), ','
			                  ORDER BY shard, change_sequence_number)
			FROM cfeed.dead_letters WHERE group_name = 'dlq'}),
		'in order, with their numbers, change_ids and attempts');
	($out, $err) = ('', '');
	IPC::Run::run([ $cfeed, 'tail', '--feed', 'orders', '--dead-letters', '--group', 'dlq', '--shard', '1',
			'--max', '2', '--dbname', $node->connstr($db) ], '>', \$out, '2>', \$err);
	is(join(',', map { decode_json($_)->{shard} . ':' . decode_json($_)->{last_error} } split /\n/, $out),
		join(',', map { "1:$_" } split /\n/, $node->safe_psql($db, q{
			SELECT last_error FROM cfeed.dead_letters WHERE group_name = 'dlq' AND shard = 1
			ORDER BY change_sequence_number LIMIT 2})),
		'--shard and --max: the first two of shard 1, with their errors');

	# `cfeed tail --group` reads with cfeed.read_group: after a seek back
	# over the dead letters it prints the changes again, without them.
	$node->safe_psql($db, q{
		UPDATE cfeed.lease SET expires_at = now() WHERE group_name = 'dlq';
		SELECT cfeed.seek('dlq', d.feed_id, d.shard, min(d.change_sequence_number) - 1)
		FROM cfeed.dead_letters d WHERE d.group_name = 'dlq' GROUP BY d.feed_id, d.shard});
	my $expect = $node->safe_psql($db, q{
		SELECT string_agg(c.shard || ':' || c.change_sequence_number, ',' ORDER BY c.shard, c.change_sequence_number)
		FROM cfeed.change c JOIN cfeed.lease l ON l.feed_id = c.feed_id AND l.shard = c.shard
		WHERE l.group_name = 'dlq' AND c.change_sequence_number > l.cursor
		  AND NOT EXISTS (SELECT FROM cfeed.dead_letters d
		                  WHERE d.group_name = 'dlq' AND d.feed_id = c.feed_id AND d.shard = c.shard
		                    AND d.change_sequence_number = c.change_sequence_number)});
	($out, $err) = ('', '');
	IPC::Run::run([ $cfeed, 'tail', '--feed', 'orders', '--group', 'dlq', '--owner', 'tailer',
			'--idle-exit-ms', '3000', '--dbname', $node->connstr($db) ], '>', \$out, '2>', \$err);
	is(join(',', sort { (split /:/, $a)[0] <=> (split /:/, $b)[0] || (split /:/, $a)[1] <=> (split /:/, $b)[1] }
			map { my $j = decode_json($_); "$j->{shard}:$j->{change_sequence_number}" } split /\n/, $out),
		$expect, 'cfeed tail --group after a seek back: the changes again, without the dead letters')
	  or diag($err);
}

# The operator's replay: the dead letters in order, each processed and
# resolved in one transaction.
$node->safe_psql($db, q{
CREATE PROCEDURE replay() LANGUAGE plpgsql AS $$
DECLARE
	r record;
BEGIN
	LOOP
		SELECT * INTO r FROM cfeed.read_dead_letters('dlq', 1, max_count => 1);
		EXIT WHEN NOT FOUND;
		INSERT INTO replayed (change_id, shard, seq) VALUES (r.change_id, r.shard, r.change_sequence_number);
		PERFORM cfeed.resolve_dead_letter(r.group_name, r.feed_id, r.shard, r.change_sequence_number);
		COMMIT;
	END LOOP;
END $$;
CALL replay();});
my $nreplayed = $node->safe_psql($db, 'SELECT count(*) FROM replayed');
is($nreplayed, $ndead, "the replay delivered the $ndead dead letters");
is($node->safe_psql($db, 'SELECT count(*) FROM cfeed.dead_letters'), '0', 'no dead letter left');
is($node->safe_psql($db, q{
	SELECT count(*) FROM (
	  SELECT (shard, seq) < lag((shard, seq)) OVER (ORDER BY id) AS back FROM replayed) x
	WHERE back}), '0', 'the replay delivered them in order');
is($node->safe_psql($db, q{
	SELECT count(*) FROM truth t
	FULL JOIN (SELECT change_id FROM processed UNION ALL SELECT change_id FROM replayed) p USING (change_id)
	WHERE t.change_id IS NULL OR p.change_id IS NULL}), '0',
	'after the replay every change was processed, exactly once');
is($n, $nproc + $nreplayed, 'processed + replayed = written');

my $fenced = $node->safe_psql($db, 'SELECT count(*) FROM fenced');
my $reports = $node->safe_psql($db, 'SELECT count(*) FROM reported');
note("$n changes: $nproc processed, $ndead dead-lettered, $nreplayed replayed; "
	  . "$reports failures reported, $fenced calls fenced");

done_testing();
