# Feeds across clusters by logical replication (docs/replication.md).
#
# A publisher and two subscribers, all with the sweeper preloaded; each
# subscriber first burns a few thousand xids, so that its xid counter is
# far ahead of the publisher's (the rows a subscriber receives carry the
# publisher's writer_xid).  pgbench writes to the publisher meanwhile.
#
# A. Portable cursors: the publication carries only stamped changes
#    (FOR TABLE cfeed.change WHERE (change_sequence_number IS NOT NULL),
#    publish insert and update: an UPDATE that stamps a change reaches the
#    subscriber as an INSERT of the stamped row).  The subscriber keeps the
#    publisher's numbers, a gap-checking reader there never sees n+1
#    without n, a waiter there is woken by the apply, and the subscriber's
#    sweeper has nothing to do.  Images the publisher clears from stamped
#    changes are cleared on the subscriber too.
# B. A subscriber that stamps: the publication carries the inserts only;
#    the subscriber's sweeper numbers every change it receives (its own
#    numbers): none is left pending (up to 1.4 the subscriber's sweeper
#    judged the publisher's writer_xid against its own xids and stranded
#    them).
# Both: a tracked table the subscribers do not have (the tracked tables
# are the user's to replicate or not) stops no subscription, the initial
# copy of a new one included: a change names its table by a number
# (cfeed.tracked_table), and read_rows there has a null tbl, the table's
# name in cfeed.tracked_table (up to 1.7 tbl was a regclass, sent by name:
# "relation ... does not exist", and every later change held back).
# Resharding a replicated feed (docs/operations.md, "Resharding a feed"),
# while pgbench writes keyed changes: each subscriber first gets the
# children with their parents left open, the publisher reshards, and once
# its parents have ended and a subscriber has applied past that point, the
# parents are closed there.  No subscriber ever applies a change for a shard
# it lacks, no apply error; the stamped-only subscribers have every change
# with the publisher's numbers and its layout; the stamping subscriber
# numbered all of them, each on the publisher's shard.  A consumer on each
# of two subscribers (one per topology), reading each parent to its end
# (ended there, read to its head) before its children, got every change
# exactly once: a parent ended there only once it had all its changes.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use Time::HiRes qw(time usleep);
use FindBin;
use lib $FindBin::RealBin;
use CfeedCheck;

my $NSHARDS = 2;
my $SETUP = qq{CREATE EXTENSION cfeed; SELECT cfeed.create_feed('f', $NSHARDS);};

my $pub = cfeed_node('publisher', '', allows_streaming => 'logical');
$pub->safe_psql('postgres', $SETUP);
setup_truth($pub, 'postgres');
$pub->safe_psql('postgres', q{
	CREATE PUBLICATION stamped FOR TABLE cfeed.change
		WHERE (change_sequence_number IS NOT NULL), cfeed.tracked_table (table_no, name)
		WITH (publish = 'insert, update');
	CREATE PUBLICATION inserts FOR TABLE cfeed.change, cfeed.tracked_table (table_no, name)
		WITH (publish = 'insert');});

my %sub;
for my $name ('stamped', 'inserts')
{
	my $n = cfeed_node("sub_$name");
	$n->safe_psql('postgres', $SETUP);
	# an xid counter far ahead of the publisher's
	burn_xids($n, 'postgres', 5000);
	$sub{$name} = $n;
}

my $script = $pub->basedir . '/writer.sql';
pgbench_writer_script($script, $NSHARDS);
my ($out, $err) = ('', '');
my $writers = IPC::Run::start(
	[ 'pgbench', '-n', '-c', '2', '-j', '2', '-R', '200', '-T', '8', '-f', $script,
	  '-h', $pub->host, '-p', $pub->port, 'postgres' ],
	'>', \$out, '2>', \$err);
sleep 1;
my $connstr = $pub->connstr . ' dbname=postgres';
for my $name (keys %sub)
{
	$sub{$name}->safe_psql('postgres',
		"CREATE SUBSCRIPTION s_$name CONNECTION '$connstr' PUBLICATION $name");
}

# A waiter on the stamped subscriber, and a gap-checking reader there.
my $s = $sub{stamped};
$s->poll_query_until('postgres', 'SELECT count(*) > 0 FROM cfeed.change') or die 'nothing replicated';
my $head = $s->safe_psql('postgres', 'SELECT cfeed.head(1, 0)');
my $started = time;
my $woke = $s->safe_psql('postgres', "SELECT cfeed.wait(1, 0, $head, 5000)");
my $wait_ms = (time - $started) * 1000;
ok($woke > $head, 'a wait on the subscriber is woken by a replicated stamp');
my $gaps = 0;
my $reads = 0;
while ($writers->pumpable)
{
	for my $line (split /\n/, $s->safe_psql('postgres', q{
		SELECT shard, count(*), max(change_sequence_number) - min(change_sequence_number) + 1,
		       min(change_sequence_number) - min(s.start_sequence_number)
		FROM cfeed.read(1, 0) r, cfeed.shard s WHERE s.feed_id = 1 AND s.shard = 0 GROUP BY shard
		UNION ALL
		SELECT shard, count(*), max(change_sequence_number) - min(change_sequence_number) + 1,
		       min(change_sequence_number) - min(s.start_sequence_number)
		FROM cfeed.read(1, 1) r, cfeed.shard s WHERE s.feed_id = 1 AND s.shard = 1 GROUP BY shard}))
	{
		my ($shard, $count, $span, $first) = split /\|/, $line;
		$gaps++ if $count != $span || $first != 1;
	}
	$reads++;
	$writers->pump_nb;
	usleep(20_000);
}
$writers->finish;
is($gaps, 0, "the subscriber's reader saw gapless prefixes ($reads reads)");
ok(wait_all_stamped($pub, 'postgres'), 'the publisher stamped everything');
my $stamped = $pub->safe_psql('postgres', q{
	SELECT string_agg(format('%s:%s:%s:%s', shard, change_sequence_number, change_id, stamped_at), ','
	                  ORDER BY shard, change_sequence_number)
	FROM cfeed.change WHERE change_sequence_number IS NOT NULL});
my $total = $pub->safe_psql('postgres', 'SELECT count(*) FROM cfeed.change');

# A. the publisher's numbers, nothing pending
$pub->wait_for_catchup('s_stamped');
is($s->safe_psql('postgres', q{
	SELECT string_agg(format('%s:%s:%s:%s', shard, change_sequence_number, change_id, stamped_at), ','
	                  ORDER BY shard, change_sequence_number)
	FROM cfeed.change}), $stamped,
	'stamped-only subscriber: every change with the publisher\'s number, change_id and stamped_at');
is($s->safe_psql('postgres', 'SELECT string_agg(last_change_sequence_number::text, \',\' ORDER BY shard) FROM cfeed.shard'),
	$pub->safe_psql('postgres', 'SELECT string_agg(last_change_sequence_number::text, \',\' ORDER BY shard) FROM cfeed.shard'),
	'stamped-only subscriber: the same heads');
diag sprintf('subscriber wait woken after %.0f ms', $wait_ms);

# B. the stamping subscriber numbers everything it received
my $b = $sub{inserts};
$pub->wait_for_catchup('s_inserts');
is($b->safe_psql('postgres', 'SELECT count(*) FROM cfeed.change'), $total,
	'inserts-only subscriber: every change arrived');
ok($b->poll_query_until('postgres',
	'SELECT count(*) = 0 FROM cfeed.change WHERE change_sequence_number IS NULL'),
	'inserts-only subscriber: its sweeper stamped every change it received, none stranded');
is($b->safe_psql('postgres', q{
	SELECT count(*) FROM cfeed.shard s WHERE s.last_change_sequence_number <> s.start_sequence_number
		+ (SELECT count(*) FROM cfeed.change c WHERE c.feed_id = s.feed_id AND c.shard = s.shard)}), '0',
	'inserts-only subscriber: its numbering is gapless');

# A. an UPDATE of stamped changes on the publisher (images cleared, as
# docs/reference.md allows) reaches the subscriber: the replicated rows
# keep what the publisher's replica identity (the whole row) names.
for my $n ($pub, values %sub)
{
	$n->safe_psql('postgres', 'CREATE TABLE account (id int PRIMARY KEY, v text)');
}
$pub->safe_psql('postgres', q{
	SELECT cfeed.track('account', 1);
	INSERT INTO account SELECT i, 'v' || i FROM generate_series(1, 10) i;});
ok(wait_all_stamped($pub, 'postgres'), 'the publisher stamped the tracked inserts');
$pub->wait_for_catchup('s_stamped');
is($s->safe_psql('postgres', 'SELECT count(*) FROM cfeed.change WHERE "row" IS NOT NULL'), 10,
	'stamped-only subscriber: the tracked changes arrived with their images');
$pub->safe_psql('postgres', 'UPDATE cfeed.change SET "row" = NULL WHERE tbl IS NOT NULL');
$pub->wait_for_catchup('s_stamped');
is($s->safe_psql('postgres', 'SELECT count(*) FROM cfeed.change WHERE "row" IS NOT NULL'), 0,
	'stamped-only subscriber: images cleared on the publisher are cleared there too');
is($s->safe_psql('postgres',
	"SELECT count(*) FROM pg_stat_subscription_stats WHERE subname = 's_stamped' AND apply_error_count > 0"), 0,
	'stamped-only subscriber: no apply error');

# A tracked table the subscribers do not have, then a plain change: both
# subscriptions go on applying, and a new one copies it all in.
$pub->safe_psql('postgres', q{
	CREATE TABLE audit (id int PRIMARY KEY, what text);
	SELECT cfeed.track('audit', 1);
	INSERT INTO audit SELECT i, 'w' || i FROM generate_series(1, 5) i;});
my $after = $pub->safe_psql('postgres', 'SELECT cfeed.publish(1, 0)');
ok(wait_all_stamped($pub, 'postgres'), 'the publisher stamped the changes of audit');
for my $name (sort keys %sub)
{
	my $n = $sub{$name};
	ok($n->poll_query_until('postgres', "SELECT count(*) = 1 FROM cfeed.change WHERE change_id = $after"),
		"$name: the change after those of a table it does not have arrived");
	is($n->safe_psql('postgres',
		"SELECT apply_error_count FROM pg_stat_subscription_stats WHERE subname = 's_$name'"), 0,
		"$name: no apply error");
	is($n->safe_psql('postgres', q{
		SELECT count(*) FROM cfeed.change c JOIN cfeed.tracked_table t ON t.table_no = c.tbl
		WHERE t.name = 'public.audit' AND t.tbl IS NULL AND c."row" ->> 'what' LIKE 'w%'}), 5,
		"$name: the changes of audit arrived with their images, cfeed.tracked_table names the table");
}
ok(wait_all_stamped($sub{inserts}, 'postgres'), 'inserts-only subscriber: stamped them');
for my $name (sort keys %sub)
{
	is($sub{$name}->safe_psql('postgres', q{
		SELECT string_agg(format('%s:%s:%s:%s', coalesce(r.tbl::text, '-'), t.name, r.op, r."row" ->> 'id'), ','
						  ORDER BY r."row" ->> 'id')
		FROM (SELECT * FROM cfeed.read_rows(1, 0, max_count => 100000) UNION ALL SELECT * FROM cfeed.read_rows(1, 1, max_count => 100000)) r
		JOIN cfeed.change c ON c.feed_id = 1 AND c.change_id = r.change_id
		JOIN cfeed.tracked_table t ON t.table_no = c.tbl
		WHERE r.tbl IS NULL AND r."row" IS NOT NULL}),
		join(',', map { "-:public.audit:insert:$_" } 1 .. 5),
		"$name: read_rows gives the images of audit with a null tbl, cfeed.tracked_table its name");
	is($sub{$name}->safe_psql('postgres', q{
		SELECT string_agg(DISTINCT r.tbl::text, ',')
		FROM (SELECT * FROM cfeed.read_rows(1, 0, max_count => 100000) UNION ALL SELECT * FROM cfeed.read_rows(1, 1, max_count => 100000)) r}),
		'account', "$name: read_rows names account, which it has, by its own table");
}

# The initial copy of a new subscription brings the changes of audit too.
my $late = cfeed_node('sub_late');
$late->safe_psql('postgres', $SETUP);
$late->safe_psql('postgres', "CREATE SUBSCRIPTION s_late CONNECTION '$connstr' PUBLICATION stamped");
my $want = $pub->safe_psql('postgres', 'SELECT count(*) FROM cfeed.change');
ok($late->poll_query_until('postgres', "SELECT count(*) = $want FROM cfeed.change"),
	'a new subscription copies every change in, those of audit included');
is($late->safe_psql('postgres', q{
	SELECT apply_error_count + sync_error_count FROM pg_stat_subscription_stats WHERE subname = 's_late'}), 0,
	'the new subscription: no copy or apply error');
is($late->safe_psql('postgres', q{
	SELECT string_agg(DISTINCT coalesce(t.tbl::text, '-') || ' ' || t.name, ',')
	FROM cfeed.change c JOIN cfeed.tracked_table t ON t.table_no = c.tbl}),
	'- public.account,- public.audit', 'the new subscription: both tables named, neither there');

# Resharding the replicated feed while pgbench writes keyed changes.
my %all = (%sub, late => $late);
my $kscript = $pub->basedir . '/keyed.sql';
open my $kfh, '>', $kscript or die $!;
print $kfh "\\set k random(1, 500)\nINSERT INTO truth (change_id) SELECT cfeed.publish(1, cfeed.shard_for(1, 'k' || :k));\n";
close $kfh;
my ($kout, $kerr) = ('', '');
my $kwriters = IPC::Run::start(
	[ 'pgbench', '-n', '-c', '2', '-j', '2', '-R', '300', '-T', '6', '-f', $kscript,
	  '-h', $pub->host, '-p', $pub->port, 'postgres' ],
	'>', \$kout, '2>', \$kerr);

# A consumer on each of two subscribers (stamped-only, stamping): reads
# each shard after its parent has ended there and been read to its head.
my %consumer = map { $_ => { node => $sub{$_}, cursor => {}, done => {}, ids => [] } } keys %sub;
sub consume_round
{
	for my $c (values %consumer)
	{
		my @shards = map { [ split /\|/ ] } split /\n/, $c->{node}->safe_psql('postgres', q{
			SELECT shard, coalesce(parent, -1), ended, last_change_sequence_number, start_sequence_number
			FROM cfeed.shard WHERE feed_id = 1 ORDER BY shard});
		for my $sh (@shards)
		{
			my ($shard, $parent, $ended, $head, $start) = @$sh;
			next if $c->{done}{$shard} || ($parent >= 0 && !$c->{done}{$parent});
			$c->{cursor}{$shard} //= $start;
			for my $row (split /\n/, $c->{node}->safe_psql('postgres',
				"SELECT change_sequence_number, change_id FROM cfeed.read(1, $shard, $c->{cursor}{$shard}, 100000)"))
			{
				my ($n, $id) = split /\|/, $row;
				push @{ $c->{ids} }, $id;
				$c->{cursor}{$shard} = $n;
			}
			$c->{done}{$shard} = 1 if $ended eq 't' && $c->{cursor}{$shard} >= $head;
		}
	}
}

# 1. On every subscriber, the children, their parents left open (as the
# publisher will create them: child n+i continues f + i mod m).
my $CHILDREN = q{
	INSERT INTO cfeed.shard_config (feed_id, shard, sweep_group, longpoll, parent)
	SELECT p.feed_id, l.n + c.i, p.sweep_group, p.longpoll, p.shard
	FROM (SELECT min(shard) FILTER (WHERE NOT closed) AS f, count(*)::int AS n
		  FROM cfeed.shard_config WHERE feed_id = 1) l
	CROSS JOIN generate_series(0, 3) c(i)
	JOIN cfeed.shard_config p ON p.feed_id = 1 AND p.shard = l.f + c.i % (l.n - l.f)};
my $LAYOUT = q{SELECT string_agg(format('%s/%s/%s', shard, coalesce(parent::text, '-'), closed), ',' ORDER BY shard)
			   FROM cfeed.shard WHERE feed_id = 1};
consume_round() for 1 .. 10;
$_->safe_psql('postgres', $CHILDREN) for values %all;
consume_round() for 1 .. 5;
# 2. The publisher reshards.
is($pub->safe_psql('postgres', q{SELECT string_agg(shard || '/' || parent, ',' ORDER BY shard) FROM cfeed.reshard(1, 4)}),
	'2/0,3/1,4/0,5/1', 'publisher: resharded into 4 children');
my $pub_layout = $pub->safe_psql('postgres', $LAYOUT);
# Writers after the split too, whenever the first ones end (the reshard
# waits for them, and a slow machine ran them out before it: 5 changes in
# the children).
my $kwriters_after = IPC::Run::start(
	[ 'pgbench', '-n', '-c', '2', '-j', '2', '-R', '300', '-T', '2', '-f', $kscript,
	  '-h', $pub->host, '-p', $pub->port, 'postgres' ],
	'>', \my $kout_after, '2>', \my $kerr_after);
is($_->safe_psql('postgres', $LAYOUT), '0/-/f,1/-/f,2/0/f,3/1/f,4/0/f,5/1/f',
	'subscriber: the same children, the parents still open') for values %all;
# 3. Once the publisher's parents ended, each subscriber that applied past
# that point closes its parents.
my $lsn;
my %closed;
my $give_up = time + 180;
while ($kwriters->pumpable || $kwriters_after->pumpable || keys %closed < keys %all)
{
	die 'the subscribers did not catch up with the reshard' if time > $give_up;
	consume_round();
	if (!defined $lsn && $pub->safe_psql('postgres',
			'SELECT bool_and(ended) FROM cfeed.shard WHERE feed_id = 1 AND closed') eq 't')
	{
		$lsn = $pub->safe_psql('postgres', 'SELECT pg_current_wal_lsn()');
	}
	for my $name (sort keys %all)
	{
		next if $closed{$name} || !defined $lsn;
		next unless $pub->safe_psql('postgres',
			"SELECT replay_lsn >= '$lsn' FROM pg_stat_replication WHERE application_name = 's_$name'") eq 't';
		if ($name ne 'inserts')
		{
			is($all{$name}->safe_psql('postgres',
				'SELECT string_agg(last_change_sequence_number::text, \',\' ORDER BY shard) FROM cfeed.shard WHERE feed_id = 1 AND shard < 2'),
				$pub->safe_psql('postgres',
				'SELECT string_agg(last_change_sequence_number::text, \',\' ORDER BY shard) FROM cfeed.shard WHERE feed_id = 1 AND shard < 2'),
				"$name: caught up, the parents' heads are the publisher's final ones");
		}
		$all{$name}->safe_psql('postgres',
			'UPDATE cfeed.shard_config SET closed = true WHERE feed_id = 1 AND shard < 2');
		$closed{$name} = 1;
	}
	$_->pump_nb for grep { $_->pumpable } $kwriters, $kwriters_after;
	usleep(20_000);
}
$_->finish for $kwriters, $kwriters_after;
ok(wait_all_stamped($pub, 'postgres'), 'publisher: stamped everything written across the reshard');
cmp_ok($pub->safe_psql('postgres', 'SELECT count(*) FROM cfeed.change WHERE feed_id = 1 AND shard >= 2'), '>', 100,
	'publisher: the children got changes');
$pub->wait_for_catchup("s_$_") for sort keys %all;
my $pub_numbers = $pub->safe_psql('postgres', q{
	SELECT string_agg(format('%s:%s:%s', shard, change_sequence_number, change_id), ',' ORDER BY shard, change_sequence_number)
	FROM cfeed.change WHERE feed_id = 1});
for my $name ('stamped', 'late')
{
	is($all{$name}->safe_psql('postgres', q{
		SELECT string_agg(format('%s:%s:%s', shard, change_sequence_number, change_id), ',' ORDER BY shard, change_sequence_number)
		FROM cfeed.change WHERE feed_id = 1}), $pub_numbers,
		"$name: after the reshard every change with the publisher's shard, number and change_id");
	is($all{$name}->safe_psql('postgres', $LAYOUT), $pub_layout, "$name: the publisher's layout");
}
for my $name (sort keys %all)
{
	is($all{$name}->safe_psql('postgres', q{
		SELECT count(*) FROM cfeed.change c
		WHERE NOT EXISTS (SELECT FROM cfeed.shard_config s WHERE s.feed_id = c.feed_id AND s.shard = c.shard)}), 0,
		"$name: no change for a shard it lacks");
	is($all{$name}->safe_psql('postgres', "SELECT apply_error_count FROM pg_stat_subscription_stats WHERE subname = 's_$name'"),
		0, "$name: no apply error across the reshard");
}
ok(wait_all_stamped($b, 'postgres'), 'inserts-only subscriber: stamped everything written across the reshard');
is($b->safe_psql('postgres', q{
	SELECT string_agg(format('%s:%s', shard, change_id), ',' ORDER BY shard, change_id) FROM cfeed.change WHERE feed_id = 1}),
	$pub->safe_psql('postgres', q{
	SELECT string_agg(format('%s:%s', shard, change_id), ',' ORDER BY shard, change_id) FROM cfeed.change WHERE feed_id = 1}),
	'inserts-only subscriber: every change on the publisher\'s shard');
is($b->safe_psql('postgres', q{SELECT count(*) FROM cfeed.shard WHERE feed_id = 1 AND closed AND NOT ended}), 0,
	'inserts-only subscriber: its parents ended');
is($b->safe_psql('postgres', q{
	SELECT count(*) FROM cfeed.shard s WHERE s.last_change_sequence_number <> s.start_sequence_number
		+ (SELECT count(*) FROM cfeed.change c WHERE c.feed_id = s.feed_id AND c.shard = s.shard)}), '0',
	'inserts-only subscriber: its numbering is gapless');
consume_round() for 1 .. 3;
my $pub_count = $pub->safe_psql('postgres', 'SELECT count(*) FROM cfeed.change WHERE feed_id = 1');
for my $name (sort keys %consumer)
{
	my $c = $consumer{$name};
	my %seen;
	my $twice = grep { $seen{$_}++ } @{ $c->{ids} };
	is($twice, 0, "$name: its consumer read nothing twice");
	is(scalar(@{ $c->{ids} }), $pub_count,
		"$name: its consumer read every change, each parent to its end before its children");
	is(join(',', sort keys %{ $c->{done} }), '0,1', "$name: its consumer finished both parents");
}

done_testing();
