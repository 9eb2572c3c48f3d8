# test/t/210_reshard.pl
#
# Resharding under load (issue 32): writers on many keys (cfeed.publish, the
# seed's INSERT pattern and a tracked table, one in five transactions rolled
# back) run throughout while a feed is split twice, 2 -> 4 -> 8 shards, with
# cfeed.reshard().  Three kinds of consumer read throughout: a consumer
# group of three owners (acquire, read_rows, checkpoint in one transaction),
# `cfeed tail` over all shards, and an all-shards SSE stream of `cfeed
# serve` that reconnects with Last-Event-ID when the layout changes.
#
# Every writer locks its key's row before it writes its change, so a key's
# committed changes carry the values 1, 2, 3, ... in commit order.
# Afterwards each consumer must have processed every key's changes exactly
# as 1, 2, 3, ...: every committed change exactly once, nothing rolled back,
# per-key commit order across both splits.  Writers must never see an error
# (pgbench aborts a client on one); their latency around the splits is
# reported with note() (the benchmark row is make bench's, not a timed test).
# CFEED_RESHARD_STORAGE = ranges stores every shard in ranges
# (218_reshard_ranges).  CFEED_RESHARD_MOVES = 1 moves the feed to ranges
# and back to rows with cfeed.set_storage() instead of the two splits
# (227_set_storage): 2 -> 2 -> 2 open shards, each child in the other
# storage.

use strict;
use warnings;

use IPC::Run;
use JSON::PP;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use lib 'test/t';
use CfeedCheck;
use ServeHelper;

plan skip_all => 'cfeed command not built' unless -x cfeed_binary();

my $KEYS = 200;
my $WRITE_SECONDS = $ENV{CFEED_RESHARD_SECONDS} // 18;
my $STORAGE = $ENV{CFEED_RESHARD_STORAGE} // 'rows';
my $MOVES = $ENV{CFEED_RESHARD_MOVES} // 0;
my @OWNERS = qw(o1 o2 o3);

my $node = cfeed_node('reshard',
	"max_connections = 60\nmax_worker_processes = 16\ncfeed.default_storage = $STORAGE\n");
my $db = 'postgres';
$node->safe_psql($db, qq{
CREATE EXTENSION cfeed;
SELECT cfeed.create_feed('orders', 2, 1);

-- A key's row, locked by its writers before they write its change: v is
-- the number of the key's change, 1, 2, 3, ... in commit order.
CREATE TABLE kv (k text PRIMARY KEY, v int NOT NULL DEFAULT 0);
INSERT INTO kv SELECT 'p' || g, 0 FROM generate_series(1, $KEYS) g;
-- The published changes (cfeed.publish and the INSERT pattern): change_id
-- -> key and value, written in the change's transaction.
CREATE TABLE truth (change_id bigint PRIMARY KEY, k text NOT NULL, v int NOT NULL);
-- A tracked table: its row images carry key and value.
CREATE TABLE acct (k text PRIMARY KEY, v int NOT NULL DEFAULT 0);
INSERT INTO acct SELECT 't' || g, 0 FROM generate_series(1, $KEYS) g;
SELECT cfeed.track('acct', 1);

-- The consumer group's output, in processing order (id).
CREATE TABLE processed (id bigserial PRIMARY KEY, owner text NOT NULL, change_id bigint NOT NULL,
						shard int NOT NULL, seq bigint NOT NULL, k text, v int);
CREATE TABLE ctl (stop bool NOT NULL);
INSERT INTO ctl VALUES (false);

CREATE PROCEDURE consume(me text, ttl_ms int, page int)
LANGUAGE plpgsql AS \$\$
DECLARE
	v_lease record;
	v_last bigint;
	v_busy bool;
BEGIN
	LOOP
		EXIT WHEN (SELECT stop FROM ctl);
		v_busy := false;
		FOR v_lease IN SELECT * FROM cfeed.acquire('grp', 1, me, ttl_ms) ORDER BY shard LOOP
			BEGIN
				WITH batch AS (
					SELECT r.change_id, r.change_sequence_number,
						   COALESCE(t.k, r.row ->> 'k') AS k,
						   COALESCE(t.v, (r.row ->> 'v')::int) AS v
					FROM cfeed.read_rows(1, v_lease.shard, v_lease.cursor, page) r
					LEFT JOIN truth t ON t.change_id = r.change_id
				), ins AS (
					INSERT INTO processed (owner, change_id, shard, seq, k, v)
					SELECT me, b.change_id, v_lease.shard, b.change_sequence_number, b.k, b.v
					FROM batch b ORDER BY b.change_sequence_number
					RETURNING seq
				)
				SELECT max(seq) INTO v_last FROM ins;
				IF v_last IS NOT NULL THEN
					PERFORM cfeed.checkpoint('grp', 1, v_lease.shard, me, v_lease.epoch, v_last);
					v_busy := true;
				END IF;
			EXCEPTION WHEN object_not_in_prerequisite_state THEN
				NULL;	-- fenced: the batch is rolled back, the new owner redoes it
			END;
		END LOOP;
		COMMIT;
		IF NOT v_busy THEN
			PERFORM pg_sleep(0.01);
			COMMIT;
		END IF;
	END LOOP;
END \$\$;
});

# The database's first feed epoch begins at its first stamp: a stream that
# began before it labels the first changes it sends with epoch 0, which
# the resume after a split rewinds (an epoch 0 orders before nothing:
# cfeed.resume_cursor), sending them again (3 changes, once in CI).  This
# test is about splits: stamp a change of another feed first.
$node->safe_psql($db, q{SELECT cfeed.create_feed('warmup', 1, 2); SELECT cfeed.publish(2, 0)});
$node->poll_query_until($db, 'SELECT cfeed.head(2, 0) > 2000000000000000')
  or die 'the warm-up change was not stamped';

# --- writers -----------------------------------------------------------------
my $dir = PostgreSQL::Test::Utils::tempdir();
# Each script: a random key, its row locked first, one in five rolled back.
my %body = (
	publish => <<'EOS',
UPDATE kv SET v = v + 1 WHERE k = 'p' || :k;
INSERT INTO truth (change_id, k, v)
SELECT cfeed.publish(1, cfeed.shard_for(1, kv.k)), kv.k, kv.v FROM kv WHERE kv.k = 'p' || :k;
EOS
	insert => <<'EOS',
UPDATE kv SET v = v + 1 WHERE k = 'p' || :k;
WITH c AS (
	INSERT INTO cfeed.change (feed_id, shard, change_id)
	SELECT 1, cfeed.shard_for(1, 'p' || :k), nextval('cfeed.change_id')
	RETURNING change_id)
INSERT INTO truth (change_id, k, v)
SELECT c.change_id, kv.k, kv.v FROM c, kv WHERE kv.k = 'p' || :k;
EOS
	tracked => <<'EOS',
UPDATE acct SET v = v + 1 WHERE k = 't' || :k;
EOS
);
my %script = map {
	$_ => "\\set k random(1, $KEYS)\n\\set a random(0, 4)\nBEGIN;\n$body{$_}"
	  . "\\if :a = 0\nROLLBACK;\n\\else\nCOMMIT;\n\\endif\n"
} keys %body;
my @pgbench_files;
for my $name (sort keys %script)
{
	open my $fh, '>', "$dir/$name.sql" or die "cannot write $dir/$name.sql: $!";
	print $fh $script{$name};
	close $fh;
	push @pgbench_files, '-f', "$dir/$name.sql";
}
$node->safe_psql($db, q{SELECT cfeed.shard_for(1, 'p1')});	# the command works before the run

# --- consumers ---------------------------------------------------------------
my %owner;
start_named_call(\%owner, $node, $db, $_, "CALL consume('$_', 2000, 200)") for @OWNERS;

# The tail and the SSE clients write to files: a pipe that the test reads
# only now and then would slow them down (backpressure), not test them.
my $tail_file = "$dir/tail.out";
my $tail_err = '';
my $tail = IPC::Run::start(
	[ cfeed_binary(), 'tail', '--dbname', $node->connstr($db), '--feed', 'orders',
	  '--from', 'beginning', '--wait-ms', 500 ],
	'>', $tail_file, '2>', \$tail_err);

my $token = 'reshard-0123456789abcdef';
write_tokens("$dir/tokens", "$token orders reader");
my $gw = start_gateway(dsn => $node->connstr($db), tokens => "$dir/tokens");
my $sse_url = "$gw->{url}/feeds/orders?cursor=_first";
my @sse_files = ("$dir/sse.0");	# each SSE connection's text, in order
my $sse = start_stream($sse_url, $token, $sse_files[-1], Accept => 'text/event-stream');
my $sse_reconnects = 0;
my $sse_last_id;	# kept across connections, as an EventSource keeps it

# An SSE connection that ended (the layout changed, or the gateway ended
# it) is replaced by one resuming from the last id received, as an
# EventSource does: a connection told to retry (200, `retry:` and no event,
# when the database has not reached the id's times yet) sent no id, and the
# next one resumes from the id before it.
sub file_text { return -e $_[0] ? slurp_file($_[0]) : '' }

sub pump_consumers
{
	# its stderr is a pipe: read it, or the ended client stays pumpable
	eval { $sse->pump_nb } if $sse->pumpable;
	return if $sse->pumpable;
	$sse->finish;
	my (undef, $last_id) = sse_events(file_text($sse_files[-1]));
	$sse_last_id = $last_id if defined $last_id;
	push @sse_files, "$dir/sse." . scalar(@sse_files);
	$sse = start_stream($sse_url, $token, $sse_files[-1], Accept => 'text/event-stream',
		defined $sse_last_id ? ('Last-Event-ID' => $sse_last_id) : ());
	$sse_reconnects++;
	return;
}

# --- the run: writers, and two splits while they write -----------------------
my ($pb_out, $pb_err) = ('', '');
my $t0 = time;
my $pgbench = IPC::Run::start(
	[ 'pgbench', '-n', '-c', '6', '-j', '2', '-T', $WRITE_SECONDS, '-l',
	  '--log-prefix', "$dir/latency", @pgbench_files,
	  '-h', $node->host, '-p', $node->port, $db ],
	'>', \$pb_out, '2>', \$pb_err);

my @splits;
my @steps = $MOVES
  ? ("cfeed.set_storage(1, 'ranges')", "cfeed.set_storage(1, 'rows')")
  : ('cfeed.reshard(1, 4)', 'cfeed.reshard(1, 8)');
for my $i (0, 1)
{
	my $at = ($i + 1) * $WRITE_SECONDS / 3;
	while (time - $t0 < $at) { usleep(50_000); pump_consumers(); }
	my $before = time;
	my $children = $node->safe_psql($db, "SELECT string_agg(shard || '<' || parent, ' ' ORDER BY shard)
		FROM $steps[$i]");
	push @splits, [ $before, time ];
	note(sprintf('%s at %.1f s took %.0f ms: %s',
			$steps[$i], $before - $t0, 1000 * (time - $before), $children));
}
while ($pgbench->pumpable) { $pgbench->pump_nb; usleep(100_000); pump_consumers(); }
$pgbench->finish;
is($? >> 8, 0, 'pgbench: every writer ran to the end');
unlike($pb_out . $pb_err, qr/aborted|ERROR/, 'no writer saw an error across the splits');

# The layout: the two original shards, their four children closed; eight open
# (moved: their two children in ranges closed, and two open in rows).
my $layout = q{SELECT string_agg(shard || ':' || COALESCE(parent::text, '-') || ':' || closed
					|| ':' || storage, ' ' ORDER BY shard)
			   FROM cfeed.shard WHERE feed_id = 1};
if ($MOVES)
{
	is($node->safe_psql($db, $layout),
		'0:-:true:rows 1:-:true:rows 2:0:true:ranges 3:1:true:ranges 4:2:false:rows 5:3:false:rows',
		'two moves: rows -> ranges -> rows, each child under its parent');
}
else
{
	is($node->safe_psql($db, $layout),
		join(' ', map { "$_:$STORAGE" }
			qw(0:-:true 1:-:true 2:0:true 3:1:true 4:0:true 5:1:true 6:2:false 7:3:false 8:4:false
			   9:5:false 10:2:false 11:3:false 12:4:false 13:5:false)),
		"two splits: 2 -> 4 -> 8 shards, each child under its parent, every shard stored in $STORAGE");
}
# (under load a split may come late, even after the writers stopped: its
# children then have no change)
note('changes per shard: ' . $node->safe_psql($db, q{
	SELECT string_agg(shard || ':' || (last_change_sequence_number - start_sequence_number), ' ' ORDER BY shard)
	FROM cfeed.shard WHERE feed_id = 1}));
# (cfeed.stats: a range change keeps no number in its row)
ok($node->poll_query_until($db, 'SELECT coalesce(sum(pending), 0) = 0 FROM cfeed.stats'),
	'every change stamped');
ok($node->poll_query_until($db, q{SELECT bool_and(ended) FROM cfeed.shard WHERE feed_id = 1 AND closed}),
	'every closed shard has ended');

# --- what each consumer saw --------------------------------------------------
# change_id -> "key v", for every committed change (the truth and the
# tracked table's images).
my %kv_of;
for my $line (split /\n/, $node->safe_psql($db, q{
	SELECT change_id || ' ' || k || ' ' || v FROM truth
	UNION ALL
	SELECT r.change_id || ' ' || (r.row ->> 'k') || ' ' || (r.row ->> 'v')
	FROM cfeed.shard s, cfeed.read_rows(1, s.shard, NULL, 1000000) r
	WHERE s.feed_id = 1 AND r.tbl IS NOT NULL}))
{
	my ($id, $k, $v) = split / /, $line;
	$kv_of{$id} = [ $k, $v ];
}
my %final;	# key -> its last committed value
for my $line (split /\n/, $node->safe_psql($db,
		q{SELECT k || ' ' || v FROM kv UNION ALL SELECT k || ' ' || v FROM acct}))
{
	my ($k, $v) = split / /, $line;
	$final{$k} = $v;
}
my $committed = 0;
$committed += $_ for values %final;
is(scalar(keys %kv_of), $committed, "$committed committed changes, each known by its change_id");
is($node->safe_psql($db, 'SELECT count(*) FROM cfeed.change WHERE feed_id = 1'), $committed,
	'the feed holds exactly the committed changes');

# Each consumer's change_ids in processing order: every key's values must be
# 1, 2, 3, ... up to its last committed one.
sub check_consumer
{
	my ($label, @ids) = @_;
	my (%seen_v, %dup, $unknown);
	for my $id (@ids)
	{
		my $kv = $kv_of{$id};
		if (!$kv) { $unknown++; next; }
		push @{ $seen_v{ $kv->[0] } }, $kv->[1];
	}
	my ($ok_keys, @bad) = (0);
	for my $k (sort keys %final)
	{
		my $got = join ',', @{ $seen_v{$k} // [] };
		my $want = join ',', 1 .. $final{$k};
		if ($got eq $want) { $ok_keys++ } else { push @bad, "$k: got [$got] want [$want]" }
	}
	is($unknown // 0, 0, "$label: no change that was not committed");
	is(scalar(@ids), $committed, "$label: " . scalar(@ids) . " changes processed, the committed $committed");
	my $in_order = is(scalar(@bad), 0, "$label: every key's changes exactly once and in commit order ($ok_keys keys)")
	  or diag(join "\n", @bad[ 0 .. ($#bad < 4 ? $#bad : 4) ]);
	return $in_order && @ids == $committed;
}

# Each SSE connection: its first and last ids, its events, and how many of
# its change_ids an earlier connection had sent.
sub sse_diag
{
	my %sent;
	for my $file (@sse_files)
	{
		my ($events, $last_id) = sse_events(file_text($file));
		my $again = grep { $sent{ $_->{data}{change_id} } } @$events;
		my $twice = 0;
		my %here;
		$here{ $_->{data}{change_id} }++ and $twice++ for @$events;
		$sent{ $_->{data}{change_id} } = 1 for @$events;
		diag(sprintf('%s: %d events, %d sent before, %d twice in it%s; first id %s, last id %s; first %s',
				$file =~ s{.*/}{}r, scalar(@$events), $again, $twice,
				file_text($file) =~ /; reconnect$/m ? ', told to retry' : '',
				@$events ? $events->[0]{id} // '-' : '-', $last_id // '-',
				@$events ? encode_json($events->[0]{data}) : '-'));
	}
	return;
}

# The group: its owners read every shard to its head, the closed ones
# too, and a closed shard read to its end holds no lease (the next
# acquire frees it).  Not only the open shards: a split that comes after
# the writers stopped (the test's own timing slips under load) leaves
# children with no change, at their head from the start, while the group
# may still be reading their parents (CI, PostgreSQL 18: the open shards
# "caught up", four closed parents held, 8,641 of 14,546 changes read).
# Each shard's lease on a failure; an owner whose CALL ended on an error
# (anything but the 55000 it catches) did no more work: its psql's error
# is shown once the owners are stopped.
sub group_diag
{
	diag($node->safe_psql($db, q{
	SELECT string_agg(pg_catalog.format('shard %s (parent %s%s): owner %s, epoch %s, cursor +%s, head +%s, '
										'read to end %s, ended %s; %s processed, up to +%s',
										s.shard, COALESCE(s.parent::text, '-'), CASE WHEN s.closed THEN ', closed' ELSE '' END,
										COALESCE(l.owner, '-'), l.epoch, l.cursor - s.start_sequence_number,
										s.last_change_sequence_number - s.start_sequence_number,
										cfeed._read_to_end(s.feed_id, s.shard, l.cursor), s.ended,
										(SELECT count(*) FROM processed p WHERE p.shard = s.shard),
										(SELECT max(p.seq) - s.start_sequence_number FROM processed p WHERE p.shard = s.shard)),
					  e'\n' ORDER BY s.shard)
	FROM cfeed.shard s LEFT JOIN cfeed.lease l ON l.group_name = 'grp' AND l.feed_id = s.feed_id AND l.shard = s.shard
	WHERE s.feed_id = 1}));
	return;
}
ok($node->poll_query_until($db, q{
	SELECT count(*) = (SELECT count(*) FROM cfeed.shard WHERE feed_id = 1)
	   AND bool_and(l.cursor = s.last_change_sequence_number)
	FROM cfeed.lease l JOIN cfeed.shard s USING (feed_id, shard)
	WHERE l.group_name = 'grp'}), 'the group read every shard to its head, closed ones included')
  or group_diag();
ok($node->poll_query_until($db, q{
	SELECT count(*) = 0 FROM cfeed.lease l JOIN cfeed.shard s USING (feed_id, shard)
	WHERE l.group_name = 'grp' AND s.closed AND l.owner IS NOT NULL}),
	'closed, consumed shards hold no lease')
  or group_diag();
$node->safe_psql($db, 'UPDATE ctl SET stop = true');
$_->finish for values %owner;
is(join("\n", map { my $err = named_call_stderr($owner{$_}); $owner{$_}->result || $err =~ /ERROR|FATAL/
						  ? sprintf('%s: exit %d: %s', $_, $owner{$_}->result, $err) : () } @OWNERS),
	'', 'every owner ran until told to stop');
check_consumer('consumer group',
	split /\n/, $node->safe_psql($db, 'SELECT change_id FROM processed ORDER BY id'));
# (moved, the feed keeps 2 open shards for 3 owners: one may hold none of
# them, and of the closed ones only what it took before they were consumed)
cmp_ok($node->safe_psql($db, 'SELECT count(DISTINCT owner) FROM processed'), '>=',
	$MOVES ? 2 : scalar(@OWNERS), 'every owner that could hold a shard did some of the work');

# cfeed tail: every line printed once the head is reached.
my $want_lines = $committed;
my $deadline = time + 60;
my $tail_lines = sub { scalar(() = file_text($tail_file) =~ /\n/g) };
while (time < $deadline && $tail_lines->() < $want_lines)
{
	pump_consumers();
	usleep(300_000);
}
$tail->kill_kill;
is($tail_err =~ /error|gap/i ? $tail_err : '', '', 'cfeed tail: no error, no gap');
check_consumer('cfeed tail', map { decode_json($_)->{change_id} } grep { /\S/ } split /\n/, file_text($tail_file));

# SSE: every change once, across its reconnections.
$deadline = time + 60;
my $sse_count = sub { scalar(() = join('', map { file_text($_) } @sse_files) =~ /^data:/mg) };
while (time < $deadline && $sse_count->() < $committed)
{
	usleep(300_000);
	pump_consumers();
}
$sse->kill_kill;
my @sse_ids;
for my $file (@sse_files)
{
	my ($events) = sse_events(file_text($file));
	push @sse_ids, map { $_->{data}{change_id} } @$events;
}
check_consumer("SSE all-shards stream ($sse_reconnects reconnections)", @sse_ids)
  or sse_diag();
stop_gateway($gw);

# Writers' latency (pgbench -l: client, tx, latency us, script, epoch s,
# epoch us): p99 and max inside a second after each split began vs the rest.
my (@near, @far);
for my $log (glob "$dir/latency*")
{
	open my $fh, '<', $log or die;
	while (<$fh>)
	{
		my @f = split;
		my $end = $f[4] + $f[5] / 1e6;
		my $start = $end - $f[2] / 1e6;
		my $near = grep { $start < $_->[1] + 1 && $end > $_->[0] } @splits;
		push @{ $near ? \@near : \@far }, $f[2] / 1000;
	}
}
my $pct = sub {
	my ($p, @v) = @_;
	@v = sort { $a <=> $b } @v;
	return @v ? $v[ int($p * $#v) ] : 0;
};
note(sprintf('writer latency (ms): across the splits (%d tx) p50 %.2f p99 %.2f max %.2f; '
		. 'elsewhere (%d tx) p50 %.2f p99 %.2f max %.2f',
		scalar(@near), $pct->(0.5, @near), $pct->(0.99, @near), $pct->(1, @near),
		scalar(@far), $pct->(0.5, @far), $pct->(0.99, @far), $pct->(1, @far)));

done_testing();
