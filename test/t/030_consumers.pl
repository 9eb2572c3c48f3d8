# Consumer groups under stress: 4 consumer processes
# share group "grp" over a 6-shard feed while pgbench writes continuously;
# consumers are killed (backend terminated mid-work, leases left to expire)
# and restarted at random.  Each consumer loops: acquire, then per held
# shard read a page after the lease's cursor, insert processed markers and
# checkpoint in one transaction.  At the end every committed change was
# processed exactly once, in shard order, and the group rebalanced after
# every kill; the rebalance and rejoin times are reported with note().
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

my $NSHARDS = 6;
my $TTL_MS = 1000;
my $PAGE = 200;
my $ROUNDS = 4;
my @NAMES = map { "c$_" } 1 .. 4;

my $node = PostgreSQL::Test::Cluster->new('consumers');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'cfeed'
max_worker_processes = 16
max_connections = 40
});
$node->start;
my $db = 'postgres';
$node->safe_psql($db, 'CREATE EXTENSION cfeed');
$node->safe_psql($db, "SELECT cfeed.create_feed('orders', $NSHARDS)");
setup_truth($node, $db);

# The consumer: a procedure that commits per step, so a terminated backend
# loses at most the batch in flight (rolled back with its checkpoint).
$node->safe_psql($db, q{
CREATE TABLE processed (id bigserial PRIMARY KEY, change_id bigint NOT NULL, shard int NOT NULL,
                        seq bigint NOT NULL, consumer text NOT NULL);
CREATE TABLE fenced (consumer text, shard int);
CREATE TABLE ctl (stop bool NOT NULL);
INSERT INTO ctl VALUES (false);

CREATE PROCEDURE consume(me text, ttl_ms int, page int)
LANGUAGE plpgsql AS $$
DECLARE
	v_shards int[];
	v_cursors bigint[];
	v_epochs bigint[];
	v_last bigint;
	v_busy bool;
BEGIN
	LOOP
		EXIT WHEN (SELECT stop FROM ctl);
		SELECT array_agg(a.shard ORDER BY a.shard), array_agg(a.cursor ORDER BY a.shard),
		       array_agg(a.epoch ORDER BY a.shard)
		INTO v_shards, v_cursors, v_epochs
		FROM cfeed.acquire('grp', 1, me, ttl_ms) a;
		COMMIT;
		v_busy := false;
		FOR i IN 1 .. COALESCE(array_length(v_shards, 1), 0) LOOP
			BEGIN
				WITH batch AS (
					SELECT r.change_id, r.change_sequence_number
					FROM cfeed.read(1, v_shards[i], v_cursors[i], page) r
				), ins AS (
					INSERT INTO processed (change_id, shard, seq, consumer)
					SELECT b.change_id, v_shards[i], b.change_sequence_number, me
					FROM batch b ORDER BY b.change_sequence_number
					RETURNING seq
				)
				SELECT max(seq) INTO v_last FROM ins;
				IF v_last IS NOT NULL THEN
					PERFORM cfeed.checkpoint('grp', 1, v_shards[i], me, v_epochs[i], v_last);
					v_busy := true;
				END IF;
			EXCEPTION WHEN object_not_in_prerequisite_state THEN
				INSERT INTO fenced VALUES (me, v_shards[i]);
			END;
			COMMIT;
		END LOOP;
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
	start_named_call(\%consumer, $node, $db, $name, "CALL consume('$name', $TTL_MS, $PAGE)");
}

sub kill_consumer { kill_named_call(\%consumer, $node, $db, $_[0]) }

# Live holdings: owner => count of unexpired leases.
sub holdings
{
	my %h;
	for my $line (split /\n/, $node->safe_psql($db, q{
		SELECT owner || '=' || count(*) FROM cfeed.lease
		WHERE group_name = 'grp' AND feed_id = 1 AND owner IS NOT NULL
		  AND expires_at > clock_timestamp() GROUP BY owner}))
	{
		my ($o, $n) = split /=/, $line;
		$h{$o} = $n;
	}
	return \%h;
}

# Balanced among exactly @live: every shard held unexpired by one of them,
# each holding floor or ceil of NSHARDS / live.
sub balanced
{
	my @live = @_;
	my $h = holdings();
	my $sum = 0;
	$sum += $_ for values %$h;
	return 0 unless $sum == $NSHARDS && keys %$h == @live;
	for my $o (@live)
	{
		my $n = $h->{$o} // 0;
		return 0 if $n < int($NSHARDS / @live) || $n > int(($NSHARDS + @live - 1) / @live);
	}
	return 1;
}

sub holdings_text
{
	my $h = holdings();
	return join(' ', map { "$_=$h->{$_}" } sort keys %$h);
}

# Seconds until balanced among @live (undef after 30 s).
sub time_to_balance
{
	my ($t0, @live) = @_;
	while (time - $t0 < 30)
	{
		return time - $t0 if balanced(@live);
		usleep(20_000);
	}
	return undef;
}

# Writers: pgbench publishes to random shards of feed 1, recording truth.
my $script = $node->basedir . '/writer.sql';
pgbench_writer_script($script, $NSHARDS);
my $write_seconds = 8 + 3 * $ROUNDS;
my ($pb_out, $pb_err) = ('', '');
my $t_write = time;
my $pgbench = IPC::Run::start(
	[ 'pgbench', '-n', '-c', '4', '-j', '2', '-R', '1000', '-T', $write_seconds, '-f', $script,
	  '-h', $node->host, '-p', $node->port, $db ],
	'>', \$pb_out, '2>', \$pb_err);

start_consumer($_) for @NAMES;
my $t = time_to_balance(time, @NAMES);
ok(defined $t, 'four consumers settle on a 2/2/1/1 split: ' . holdings_text());

my $seed = $ENV{CFEED_TEST_SEED} // int(time);
srand($seed);
note("random seed $seed (set CFEED_TEST_SEED to repeat)");
my @rebalance;
for my $round (1 .. $ROUNDS)
{
	usleep(1_000_000 + int(rand(1_000_000)));
	my $victim = $NAMES[ int(rand(@NAMES)) ];
	my @live = grep { $_ ne $victim } @NAMES;
	my $t0 = time;
	kill_consumer($victim);
	my $took = time_to_balance($t0, @live);
	ok(defined $took, "round $round: killed $victim, the others rebalance: " . holdings_text());
	if (defined $took)
	{
		push @rebalance, $took;
		note(sprintf('round %d: rebalanced %.2f s after %s died (lease ttl %d ms)',
				$round, $took, $victim, $TTL_MS));
	}
	cmp_ok($took // 99, '<', $TTL_MS / 1000 + 3, "round $round: rebalance within ttl + 3 s");

	$t0 = time;
	start_consumer($victim);
	my $joined = time_to_balance($t0, @NAMES);
	ok(defined $joined, "round $round: $victim restarted and rejoined: " . holdings_text());
	note(sprintf('round %d: %s rejoined, group balanced after %.2f s', $round, $victim, $joined // -1));
}

$pgbench->finish;
my $t_written = time;
like($pb_out, qr/number of transactions actually processed/, 'pgbench wrote');
ok(wait_all_stamped($node, $db), 'every change stamped');
check_invariants($node, $db, 'after the run');

# Consumers drain the feed: every lease's cursor reaches its shard's head.
ok($node->poll_query_until($db, q{
	SELECT count(*) = 6 AND bool_and(l.cursor = s.last_change_sequence_number)
	FROM cfeed.lease l JOIN cfeed.shard s USING (feed_id, shard)
	WHERE l.group_name = 'grp'}), 'consumers caught up with every shard');
my $t_drained = time;
$node->safe_psql($db, 'UPDATE ctl SET stop = true');
$_->finish for values %consumer;

# Exactly once, complete, in shard order, gapless per shard.
my $n = $node->safe_psql($db, 'SELECT count(*) FROM truth');
cmp_ok($n, '>', 1000, "$n changes written");
is($node->safe_psql($db, 'SELECT count(*) - count(DISTINCT change_id) FROM processed'), '0',
	'no change processed twice');
is($node->safe_psql($db, q{
	SELECT count(*) FROM truth t FULL JOIN processed p USING (change_id)
	WHERE t.change_id IS NULL OR p.change_id IS NULL}), '0',
	'every committed change processed, nothing else');
is($node->safe_psql($db, q{
	SELECT count(*) FROM processed p JOIN cfeed.change c USING (change_id)
	WHERE c.shard <> p.shard OR c.change_sequence_number <> p.seq}), '0',
	'markers carry the change\'s shard and number');
is($node->safe_psql($db, q{
	SELECT count(*) FROM (
	  SELECT p.seq - COALESCE(lag(p.seq) OVER (PARTITION BY p.shard ORDER BY p.id),
	                          s.start_sequence_number) AS step
	  FROM processed p JOIN cfeed.shard s ON s.feed_id = 1 AND s.shard = p.shard) x
	WHERE step <> 1}), '0', 'each shard processed in order, one number after the other');
is($node->safe_psql($db, q{SELECT count(DISTINCT consumer) FROM processed}), '4',
	'every consumer did some of the work');

my $fenced = $node->safe_psql($db, 'SELECT count(*) FROM fenced');
my $epochs = $node->safe_psql($db, q{SELECT sum(epoch) FROM cfeed.lease WHERE group_name = 'grp'});
note("$fenced checkpoints fenced (batches rolled back and redone by the new owner); "
	  . "$epochs owner changes in all");
if (@rebalance)
{
	my @s = sort { $a <=> $b } @rebalance;
	note(sprintf('rebalance after a consumer died: min %.2f s, median %.2f s, max %.2f s (ttl %.1f s)',
			$s[0], $s[ int(@s / 2) ], $s[-1], $TTL_MS / 1000));
}
note(sprintf('%d changes written in %.1f s; consumers drained the feed %.2f s after the writers stopped',
		$n, $t_written - $t_write, $t_drained - $t_written));

done_testing();
