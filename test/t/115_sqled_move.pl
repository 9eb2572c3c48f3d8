
# test/t/115_sqled_move.pl
#
# Moving a database between the editions (sqled/move/, docs/sql-edition.md,
# "Moving between the editions") on a server with cfeed.so preloaded.  The
# SQL edition, installed by a role that is no superuser, with feeds (one
# resharded with a change pending on its closed parent, one whose head
# retention deleted), a consumer group with checkpoints, a failure policy and
# a dead letter, read and write grants, a privilege granted on a function,
# stamped and pending changes, moves to the C extension, back, and again:
#
#  - a move between editions whose catalogs differ, by a role that may not
#    make the other edition, or while a view of the database's own depends
#    on the SQL edition, fails and changes nothing;
#  - a tracked table moves: its triggers call the other edition's
#    functions, enabled as they were, and its writes publish there;
#  - every row of every catalog (numbers, stamped_at, written_at, heads and
#    deleted heads, parents and closed shards, leases, failures and dead
#    letters, grants, epochs) and the change_id sequence's position are the
#    same after a move, and each role may do what it could; either
#    edition's sweeps go on in the epoch the other began on the server;
#  - the pending changes are stamped after their shards' heads, gaplessly,
#    by the extension's background sweeper, and by the SQL edition's sweep;
#  - a reader at its old cursor reads exactly the rest, the consumer group
#    resumes from its checkpoints, the write grant still writes, numbering
#    goes on above a deleted head;
#  - during a move (both ways) a writer and a sweep queue behind it: the
#    writers lose no committed change (each writes into the new edition or
#    fails and commits nothing), and a sweep of the edition left fails
#    with 55000 instead of stamping the new edition's tables.

use strict;
use warnings;

use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);
use FindBin;
use lib $FindBin::RealBin;
use CfeedCheck;

my $top = "$FindBin::RealBin/../..";
open(my $fh, '<', "$top/cfeed.control") or die "cfeed.control: $!";
my ($version) = join('', <$fh>) =~ /^default_version = '([^']+)'/m;
close $fh;
my $install = "$top/sqled/cfeed-sql--$version.sql";
my $to_ext = "$top/sqled/cfeed-sql-to-extension--$version.sql";
my $to_sql = "$top/sqled/cfeed-extension-to-sql--$version.sql";
-f $_ or die "$_ not built (make -C sqled)" for ($install, $to_ext, $to_sql);

# the background sweeper is off while a move's result is compared
my $node = cfeed_node('sqled_move', "cfeed.enable_sweeper = off\ncfeed.launcher_interval = 100\n");
$node->safe_psql('postgres', q{
	CREATE ROLE app_owner LOGIN;
	CREATE ROLE reader LOGIN;
	CREATE ROLE writer LOGIN;
	CREATE ROLE sweeper LOGIN;
	CREATE DATABASE app OWNER app_owner;
});

# psql as $role on app; dies on error
sub sql_as
{
	my ($role, $sql) = @_;
	return $node->safe_psql('app', $sql, extra_params => [ '-U', $role ]);
}

# psql on app as $role, application_name $name, with arguments @args, in
# the background: its handle, output and errors
sub start_psql
{
	my ($name, $role, @args) = @_;
	my %h = (out => '', err => '');
	$h{run} = IPC::Run::start(
		[
			'psql', '-X', '-q', '-d', $node->connstr('app') . " application_name=$name user=$role", @args
		],
		'>', \$h{out}, '2>', \$h{err}, IPC::Run::timeout(300));
	return \%h;
}

# a script file run on app as $role (psql variables %vars): (rc, stderr)
sub run_script
{
	my ($role, $file, %vars) = @_;
	my $h = start_psql('mover', $role, '-v', 'ON_ERROR_STOP=1', (map { ('-v', "$_=$vars{$_}") } sort keys %vars),
		'-o', '/dev/null', '-f', $file);
	$h->{run}->finish;
	return ($h->{run}->result(0), $h->{err});
}

# wait until the background sessions named wait for a lock
# the background workers of cfeed and what they do (for a failure's message)
sub workers
{
	return $node->safe_psql('postgres', q{
		SELECT coalesce(string_agg(format('%s (%s): %s %s', backend_type, datname, state, wait_event), '; '), 'none')
		FROM pg_stat_activity WHERE backend_type LIKE 'cfeed%'});
}

# who waits for which lock, held by whom (for a failure's message)
sub waits
{
	return $node->safe_psql('postgres', q{
		SELECT string_agg(format('%s (%s) waits for %s %s %s held by %s', a.application_name, a.backend_type,
								 l.locktype, l.mode, coalesce(l.relation::regclass::text, l.objid::text),
								 pg_blocking_pids(a.pid)), '; ' ORDER BY a.pid)
		FROM pg_stat_activity a JOIN pg_locks l ON l.pid = a.pid AND NOT l.granted});
}

sub wait_lock_waits
{
	my @names = @_;
	my $list = join(',', map { "'$_'" } @names);
	$node->poll_query_until('postgres', qq{
		SELECT count(DISTINCT application_name) = ${\ scalar(@names)} FROM pg_stat_activity
		WHERE application_name IN ($list) AND wait_event_type = 'Lock'})
	  or die "not waiting for a lock: @names: " . waits();
}

# the background sweeper off (and gone) or on
sub sweeper
{
	my ($on) = @_;
	$node->append_conf('postgresql.conf', "cfeed.enable_sweeper = " . ($on ? 'on' : 'off') . "\n");
	$node->reload;
	$node->poll_query_until('postgres', q{
		SELECT count(*) = 0 FROM pg_stat_activity WHERE backend_type = 'cfeed sweeper'})
	  or die 'a sweeper stays'
	  unless $on;
}

my ($rc, $err) = run_script('app_owner', $install);
is($rc, 0, 'the SQL edition installs as a role that is no superuser') or diag($err);

# Feed 1 (2 shards: the group, the grants, pending changes), feed 2 in
# sweep group 1 (resharded from 1 to 2 shards, a change pending on the
# closed parent and changes pending on the children), feed 3 (retention
# deleted its changes but the head, then the head was deleted); every change_id
# written in table truth.
sql_as('app_owner', q{
	CREATE TABLE truth (change_id bigint PRIMARY KEY);
	GRANT SELECT, INSERT ON truth TO writer;
	SELECT cfeed.create_feed('orders', 2);
	SELECT cfeed.create_feed('split', 1, feed_id => 2, sweep_group => 1);
	SELECT cfeed.create_feed('old', 1, feed_id => 3);
	SELECT cfeed.grant_read(1, 'reader');
	SELECT cfeed.grant_write(1, 'writer');
	GRANT INSERT ON cfeed.change TO writer;
	GRANT USAGE ON SEQUENCE cfeed.change_id TO writer;
	GRANT SELECT ON cfeed.change, cfeed.shard TO reader;
	GRANT EXECUTE ON FUNCTION cfeed.sweep(int) TO sweeper;
	INSERT INTO truth SELECT cfeed.publish(1, g % 2) FROM generate_series(1, 10) g;
	INSERT INTO truth SELECT cfeed.publish(2, 0) FROM generate_series(1, 4) g;
	INSERT INTO truth SELECT cfeed.publish(3, 0) FROM generate_series(1, 3) g;
	SELECT count(*) FROM cfeed.sweep(0);
	SELECT count(*) FROM cfeed.sweep(1);
	INSERT INTO truth SELECT cfeed.publish(2, 0);
	SELECT count(*) FROM cfeed.reshard(2, 2);
	INSERT INTO truth SELECT cfeed.publish(2, cfeed.shard_for(2, 'k' || g)) FROM generate_series(1, 6) g;
	UPDATE cfeed.feed SET retention = '1 millisecond' WHERE feed_id = 3;
});
for (my $tries = 0; $node->safe_psql('app', q{SELECT count(*) FROM cfeed.change WHERE feed_id = 3}) > 1; $tries++)
{
	die 'retention did not delete feed 3\'s changes' if $tries > 100;
	usleep(50_000);
	$node->safe_psql('app', q{SELECT cfeed.apply_retention()});
}
sql_as('app_owner', q{
	DELETE FROM cfeed.change WHERE feed_id = 3;
	DELETE FROM truth WHERE change_id NOT IN (SELECT change_id FROM cfeed.change);
	UPDATE cfeed.feed SET retention = NULL WHERE feed_id = 3;
	SELECT cfeed.set_failure_policy('g', 1, 3, 0, 0, true);
	SELECT count(*) FROM cfeed.acquire('g', 1, 'c1', 600000);
	SELECT cfeed.checkpoint('g', 1, l.shard, 'c1', l.epoch, l.cursor + 2)
	FROM cfeed.lease l WHERE l.group_name = 'g' AND l.feed_id = 1;
	INSERT INTO cfeed.failed_change (group_name, feed_id, shard, change_sequence_number, change_id, attempts,
									 last_error, first_failed_at, failed_at, dead_lettered_at)
	SELECT 'g', 1, 0, c.change_sequence_number, c.change_id, 3, 'poison', now(), now(), now()
	FROM cfeed.change c WHERE c.feed_id = 1 AND c.shard = 0 ORDER BY c.change_sequence_number DESC LIMIT 1;
	SELECT f.attempts FROM cfeed.lease l, cfeed.fail('g', 1, 1, 'c1', l.epoch, l.cursor + 1, 'retry me') f
	WHERE l.group_name = 'g' AND l.feed_id = 1 AND l.shard = 1;
	INSERT INTO truth SELECT cfeed.publish(1, g % 2) FROM generate_series(1, 5) g;
	INSERT INTO truth SELECT cfeed.publish(2, 2);
});
is(sql_as('app_owner', q{SELECT deleted_head - start_sequence_number FROM cfeed.shard_config WHERE feed_id = 3}),
	'3', 'feed 3: its head was deleted');
is(sql_as('app_owner', q{
	SELECT string_agg(format('%s/%s/%s/%s', shard, coalesce(parent::text, '-'), closed, ended), ',' ORDER BY shard)
	FROM cfeed.shard WHERE feed_id = 2}),
	'0/-/t/f,1/0/f/f,2/0/f/f', 'feed 2: resharded, its parent closed with a change pending');

# Everything a move keeps, one line per row (writer_xid aside).
my $STATE = q{
	SELECT string_agg(l, E'\n' ORDER BY l) FROM (
		SELECT format('feed %s', f) AS l FROM cfeed.feed f
		UNION ALL SELECT format('shard_config %s', s) FROM cfeed.shard_config s
		UNION ALL SELECT format('change %s %s %s %s %s %s', c.feed_id, c.shard, c.change_id, c.change_sequence_number,
								c.stamped_at, c.written_at) FROM cfeed.change c
		UNION ALL SELECT format('lease %s', l) FROM cfeed.lease l
		UNION ALL SELECT format('failure_policy %s', p) FROM cfeed.failure_policy p
		UNION ALL SELECT format('failed_change %s', d) FROM cfeed.failed_change d
		UNION ALL SELECT format('read_grant %s', g) FROM cfeed.read_grant g
		UNION ALL SELECT format('write_grant %s', g) FROM cfeed.write_grant g
		UNION ALL SELECT format('tracked_table %s', t) FROM cfeed.tracked_table t
		UNION ALL SELECT format('epoch %s', e) FROM cfeed.epoch e
		UNION ALL SELECT format('epoch_head %s', e) FROM cfeed.epoch_head e
		UNION ALL SELECT format('change_id %s %s', s.last_value, s.is_called) FROM cfeed.change_id s
		UNION ALL SELECT format('head %s/%s %s ended %s', s.feed_id, s.shard, s.last_change_sequence_number, s.ended)
			FROM cfeed.shard s
	) x};

# A tracked table's triggers (name, enabled, language of the function) and
# its changes (operation, table, image but its change_id).
my $TRACKED = q{
	SELECT string_agg(format('%s:%s:%s', t.tgname, t.tgenabled, l.lanname), ',' ORDER BY t.tgname)
	FROM pg_trigger t JOIN pg_proc p ON p.oid = t.tgfoid JOIN pg_language l ON l.oid = p.prolang
	WHERE t.tgrelid = 'public.items'::regclass};
my $IMAGES = q{
	SELECT string_agg(format('%s %s %s', c.op, cfeed._tracked_table(c.tbl), c."row" - 'change_id'), E'\n' ORDER BY c.change_id)
	FROM cfeed.change c JOIN public.items i ON i.change_id = c.change_id};

# psql as $role on app: the result, or "denied"
sub try_as
{
	my ($role, $sql) = @_;
	my ($rc, $out, $err) = $node->psql('app', $sql, extra_params => [ '-U', $role ]);
	return $rc == 0 ? $out : 'denied';
}

# What the roles may do: read feed 1 (by function and by table), write it,
# sweep.
sub access
{
	return join(';',
		try_as('reader', q{SELECT count(*) FROM cfeed.read(1, 0, 0, 1000)}),
		try_as('reader', q{SELECT count(*) FROM cfeed.change}),
		try_as('reader', q{SELECT count(*) FROM cfeed.change WHERE feed_id = 2}),
		try_as('writer', q{SELECT cfeed._may_write(1), cfeed._may_write(2)}),
		try_as('sweeper', q{SELECT has_function_privilege('cfeed.sweep(int)', 'EXECUTE')}),
		try_as('reader', q{SELECT has_function_privilege('cfeed.sweep(int)', 'EXECUTE')}));
}

# The gap check of test/gaps.sql but for feed 3, whose head was deleted.
my $GAPS = q{
	SELECT count(*) FROM (
		SELECT s.start_sequence_number AS st, s.last_change_sequence_number AS last,
			   count(c.change_sequence_number) AS n, count(DISTINCT c.change_sequence_number) AS nd,
			   COALESCE(min(c.change_sequence_number), s.start_sequence_number + 1) AS lo,
			   COALESCE(max(c.change_sequence_number), s.start_sequence_number) AS hi
		FROM cfeed.shard s
		LEFT JOIN cfeed.change c ON c.feed_id = s.feed_id AND c.shard = s.shard
			 AND c.change_sequence_number > s.start_sequence_number
		WHERE s.feed_id <> 3
		GROUP BY s.feed_id, s.shard, s.start_sequence_number, s.last_change_sequence_number) x
	WHERE n <> nd OR lo <> st + 1 OR hi <> st + n OR last <> hi};
my $UNSTAMPED = q{SELECT count(*) FROM cfeed.change WHERE change_sequence_number IS NULL};
# every change written is in truth and the other way round
my $TRUTH = q{
	SELECT count(*) FROM truth t FULL JOIN cfeed.change c ON c.change_id = t.change_id
	WHERE t.change_id IS NULL OR c.change_id IS NULL};

# The pending changes: per shard, their change_ids in order and the head.
sub pending
{
	my %p;
	for (split /\n/, $node->safe_psql('app', q{
		SELECT format('%s/%s %s %s', s.feed_id, s.shard, s.last_change_sequence_number,
					  string_agg(c.change_id::text, ',' ORDER BY c.change_id))
		FROM cfeed.change c JOIN cfeed.shard s USING (feed_id, shard)
		WHERE c.change_sequence_number IS NULL GROUP BY s.feed_id, s.shard, s.last_change_sequence_number}))
	{
		my ($fs, $head, $ids) = split / /;
		$p{$fs} = [ $head, $ids ];
	}
	return \%p;
}

# Whether the changes pending before are stamped on from their shards'
# heads, in change_id order, gaplessly: "feed/shard:1,2,3 ..."
sub numbered_after
{
	my ($p) = @_;
	my (@got, @want);
	for my $fs (sort keys %$p)
	{
		my ($head, $ids) = @{ $p->{$fs} };
		push @got, "$fs:" . $node->safe_psql('app', qq{
			SELECT string_agg((change_sequence_number - $head)::text, ',' ORDER BY change_id)
			FROM cfeed.change WHERE change_id IN ($ids)});
		push @want, "$fs:" . join(',', 1 .. scalar(my @n = split /,/, $ids));
	}
	return (join(' ', @got), join(' ', @want));
}

# ---- refused moves change nothing ----
my $before = $node->safe_psql('app', $STATE);
like($before, qr/^epoch_head \(\d+,1,0,\d+\)$/m, 'the SQL edition\'s sweeps recorded a feed epoch and its heads');
like($before, qr/^failed_change \(g,1,1,.*,"retry me",/m, 'cfeed.fail recorded a failure');
my $epochs = $node->safe_psql('app', q{SELECT string_agg(epoch::text, ',' ORDER BY epoch) FROM cfeed.epoch});
my $access = access();
$node->safe_psql('app', q{ALTER TABLE cfeed.lease ADD COLUMN note text});
($rc, $err) = run_script('postgres', $to_ext);
isnt($rc, 0, 'a move between editions whose catalogs differ fails');
like($err, qr/cfeed\.lease is not the same in both editions/, '... naming the table');
$node->safe_psql('app', q{ALTER TABLE cfeed.lease DROP COLUMN note});
is($node->safe_psql('app', q{SELECT count(*) FROM pg_extension WHERE extname = 'cfeed'}), '0',
	'... and leaves no extension');
($rc, $err) = run_script('app_owner', $to_ext);
isnt($rc, 0, 'a role that is no superuser cannot move to the extension');
like($err, qr/only a superuser may move cfeed to the C extension/, '... and is told so');
$node->safe_psql('app', q{CREATE VIEW public.my_changes AS SELECT change_id FROM cfeed.change});
($rc, $err) = run_script('postgres', $to_ext);
isnt($rc, 0, 'a move fails while an object of the database\'s own depends on the SQL edition');
like($err, qr/objects outside the SQL edition depend on it\nDETAIL:  Dependent objects: view public\.my_changes\./,
	'... naming it');
$node->safe_psql('app', q{DROP VIEW public.my_changes});
is($node->safe_psql('app', $STATE), $before, 'the refused moves changed nothing');

# ---- SQL edition -> C extension ----
my $pending = pending();
my $cursor = $node->safe_psql('app', q{SELECT cfeed.head(1, 0)});
($rc, $err) = run_script('postgres', $to_ext);
is($rc, 0, 'SQL edition -> C extension') or diag($err);
is($node->safe_psql('app', q{SELECT extversion FROM pg_extension WHERE extname = 'cfeed'}), $version,
	'the extension is installed');
is($node->safe_psql('app', q{SELECT string_agg(nspname, ',') FROM pg_namespace WHERE nspname LIKE 'cfeed%'}),
	'cfeed', 'the SQL edition\'s schema is gone');
is($node->safe_psql('app', $STATE), $before, 'every row, head and deleted head, and the sequence position kept');
is(access(), $access, 'each role may read, write and sweep what it could');

# the background sweeper stamps the pending changes on from the heads
sweeper(1);
$node->poll_query_until('app', "SELECT ($UNSTAMPED) = 0") or die 'the C sweeper did not stamp: ' . workers() . '; ' . waits();
my ($got, $want) = numbered_after($pending);
is($got, $want, 'the C sweeper stamps the pending changes after the heads, gaplessly');
is($node->safe_psql('app', $GAPS), '0', 'every shard is gapless');
is($node->safe_psql('app', $TRUTH), '0', 'every change written is there, and nothing else');
is($node->safe_psql('app', q{SELECT ended FROM cfeed.shard WHERE feed_id = 2 AND shard = 0}), 't',
	'the closed parent ends once its pending change is stamped');
is($node->safe_psql('app', q{SELECT string_agg(epoch::text, ',' ORDER BY epoch) FROM cfeed.epoch}), $epochs,
	'the C sweeper stamps in the epoch the SQL edition began on this server');

# clients go on: a reader from its cursor, the group from its checkpoints
is(sql_as('reader', qq{
	SELECT string_agg((change_sequence_number - $cursor)::text, ',' ORDER BY change_sequence_number)
	FROM cfeed.read(1, 0, $cursor, 1000)}),
	join(',', 1 .. scalar(my @n = split /,/, $pending->{'1/0'}[1])), 'a reader at its old cursor reads exactly the rest');
is(sql_as('postgres', q{
	SELECT string_agg(format('%s:%s', a.shard, a.cursor - s.start_sequence_number), ',' ORDER BY a.shard)
	FROM cfeed.acquire('g', 1, 'c1', 600000) a JOIN cfeed.shard s ON s.feed_id = 1 AND s.shard = a.shard}),
	'0:2,1:2', 'the consumer group resumes from its checkpoints');
my $c3 = $node->safe_psql('app', q{INSERT INTO truth SELECT cfeed.publish(3, 0) RETURNING change_id});
sql_as('writer', q{INSERT INTO truth SELECT cfeed.publish(1, 1)});
$node->poll_query_until('app', "SELECT ($UNSTAMPED) = 0") or die 'not stamped';
is($node->safe_psql('app', qq{
	SELECT c.change_sequence_number - s.deleted_head FROM cfeed.change c JOIN cfeed.shard_config s USING (feed_id, shard)
	WHERE c.change_id = $c3}), '1', 'numbering goes on above the deleted head');

# ---- C extension -> SQL edition, owned by app_owner ----
sweeper(0);
# a tracked table moves with the database: its triggers are made again on
# the other edition's functions, enabled as they were, its number moves
# with cfeed.tracked_table, and its writes go on publishing
$node->safe_psql('app', q{
	CREATE TABLE public.items (id int PRIMARY KEY, v text, change_id bigint);
	SELECT cfeed.track('public.items', 1);
	ALTER TABLE public.items ENABLE ALWAYS TRIGGER cfeed_track;
	INSERT INTO public.items (id, v) VALUES (1, 'in C');
	INSERT INTO truth SELECT change_id FROM public.items;
});
sql_as('writer', q{INSERT INTO truth SELECT cfeed.publish(1, g % 2) FROM generate_series(1, 3) g});
$node->safe_psql('app', q{INSERT INTO truth SELECT cfeed.publish(2, 1)});
# a feed stored in ranges made and dropped leaves its sweep group's mark,
# which moves as it is (before, the move's copy was taken for a restore's:
# "cfeed.sweep_mark did not move whole")
$node->safe_psql('app', q{
	SET cfeed.default_storage = ranges;
	SELECT cfeed.create_feed('gone', 1, feed_id => 77, sweep_group => 5);
	DELETE FROM cfeed.feed WHERE feed_id = 77;});
is($node->safe_psql('app', q{SELECT count(*) FROM cfeed.sweep_mark WHERE sweep_group = 5}), '1', 'a dropped range feed left a mark');
$before = $node->safe_psql('app', $STATE);
$access = access();
$pending = pending();
$cursor = $node->safe_psql('app', q{SELECT cfeed.head(1, 1)});
($rc, $err) = run_script('postgres', $to_sql, owner => 'app_owner');
is($rc, 0, 'C extension -> SQL edition') or diag($err);
is($node->safe_psql('app', q{SELECT count(*) FROM pg_extension WHERE extname = 'cfeed'}), '0', 'the extension is gone');
is($node->safe_psql('app', q{
	SELECT count(*) FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
	WHERE p.pronamespace = 'cfeed'::regnamespace AND l.lanname = 'c'}), '0', 'no function of cfeed is in C');
is($node->safe_psql('app', q{SELECT DISTINCT relowner::regrole FROM pg_class WHERE relnamespace = 'cfeed'::regnamespace}),
	'app_owner', 'app_owner owns the SQL edition');
is($node->safe_psql('app', $STATE), $before, 'every row, head and deleted head, and the sequence position kept');
is(access(), $access, 'each role may read, write and sweep what it could');
sql_as('sweeper', q{SELECT count(*) FROM cfeed.sweep(0)});
sql_as('app_owner', q{SELECT count(*) FROM cfeed.sweep(1)});
($got, $want) = numbered_after($pending);
is($got, $want, 'the SQL edition\'s sweep stamps the pending changes after the heads, gaplessly');
is($node->safe_psql('app', q{SELECT string_agg(epoch::text, ',' ORDER BY epoch) FROM cfeed.epoch}), $epochs,
	'... in the same epoch');
is(sql_as('reader', qq{SELECT count(*) FROM cfeed.read(1, 1, $cursor, 1000)}),
	scalar(my @m = split /,/, $pending->{'1/1'}[1]), 'a reader at its old cursor reads exactly the rest');
is($node->safe_psql('app', $GAPS), '0', 'every shard is gapless');
is($node->safe_psql('app', $TRUTH), '0', 'every change written is there, and nothing else');
is($node->safe_psql('app', $TRACKED), 'cfeed_track:A:plpgsql,cfeed_track_change_id:O:plpgsql,cfeed_track_truncate:O:plpgsql',
	'the tracked table\'s triggers call the SQL edition\'s functions, enabled as they were');
$node->safe_psql('app', q{INSERT INTO public.items (id, v) VALUES (2, 'in SQL'); INSERT INTO truth SELECT change_id FROM public.items WHERE id = 2});
is($node->safe_psql('app', $IMAGES), "insert items {\"v\": \"in C\", \"id\": 1}\ninsert items {\"v\": \"in SQL\", \"id\": 2}",
	'its writes publish in the SQL edition, numbered as before');

# ---- moves while writers write and a sweep comes: both ways ----
# A session holding a lock on cfeed.lease stops the move after it locked
# shard_config, change and the sequences; a writer publishing in autocommit
# statements and a sweep of the edition being left then queue behind the
# move.  The sweep's session has run a statement before the move (the C
# library's first statement in a session reads cfeed.change_id_timeline,
# which the move locks too), and is let go, by a gate holding an advisory
# lock, once the move holds its locks.
sub move_while_busy
{
	my ($label, $script, $sweep_role, $sweep_error, %vars) = @_;
	my $writes = $node->basedir . '/writes.sql';
	append_to_file($writes, join('', map { "INSERT INTO truth SELECT cfeed.publish(1, $_ % 2);\n" } 1 .. 100_000))
	  unless -f $writes;
	my $log_offset = -s $node->logfile;
	my $writer = start_psql('busy_writer', 'writer', '-f', $writes);
	my $start = $node->safe_psql('app', 'SELECT count(*) FROM truth');
	$node->poll_query_until('app', "SELECT count(*) > $start + 50 FROM truth") or die 'the writer does not write: ' . waits();
	my $gate = start_psql('gate', 'postgres', '-c', 'SELECT pg_advisory_lock(4242)', '-c', 'SELECT pg_sleep(300)');
	my $blocker = start_psql('blocker', 'postgres', '-c', 'BEGIN', '-c', 'LOCK TABLE cfeed.lease IN ACCESS SHARE MODE',
		'-c', 'SELECT pg_sleep(300)');
	$node->poll_query_until('postgres', q{
		SELECT count(*) = 2 FROM pg_stat_activity WHERE application_name IN ('gate', 'blocker') AND wait_event = 'PgSleep'})
	  or die 'no gate or blocker: ' . waits();
	my $sweep = start_psql('queued_sweep', $sweep_role, '-c', 'SELECT 1', '-c', 'SELECT pg_advisory_lock_shared(4242)',
		'-c', 'SELECT count(*) FROM cfeed.sweep(0)');
	wait_lock_waits('queued_sweep');
	my $mover = start_psql('mover', 'postgres', '-v', 'ON_ERROR_STOP=1', (map { ('-v', "$_=$vars{$_}") } sort keys %vars),
		'-o', '/dev/null', '-f', $script);
	wait_lock_waits('mover', 'busy_writer');
	# leaving the C extension: its background sweeper of group 0, woken at
	# its fallback interval at the latest, takes its group's sweep lock and
	# waits for the move too; the queued sweep then waits for that lock
	if ($script eq $to_sql)
	{
		$node->poll_query_until('postgres', q{
			SELECT count(*) > 0 FROM pg_stat_activity
			WHERE application_name = 'cfeed sweeper group 0' AND wait_event_type = 'Lock'})
		  or die 'the background sweeper does not wait for the move: ' . waits();
	}
	$node->safe_psql('postgres', q{SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'gate'});
	$gate->{run}->finish;
	# the sweep waits for the move's locks now (not for the gate's): for a
	# relation the move locked, or for its group's sweep lock, held by a
	# background sweeper that waits for the move
	$node->poll_query_until('postgres', q{
		WITH RECURSIVE blockers(pid) AS (
			SELECT pid FROM pg_stat_activity WHERE application_name = 'queued_sweep'
			UNION
			SELECT b.pid FROM blockers, unnest(pg_blocking_pids(blockers.pid)) AS b(pid))
		SELECT count(*) > 0 FROM blockers JOIN pg_stat_activity a USING (pid)
		WHERE a.application_name = 'mover'})
	  or die 'the sweep does not wait for the move: ' . waits();
	note("$label: " . waits());
	$node->safe_psql('postgres', q{SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'blocker'});
	$blocker->{run}->finish;
	$mover->{run}->finish;
	is($mover->{run}->result(0), 0, "$label with a writer and a sweep queued") or diag($mover->{err});
	$sweep->{run}->finish;
	like($sweep->{err}, $sweep_error, "$label: the queued sweep of the edition left fails");
	my $moved = $node->safe_psql('app', 'SELECT count(*) FROM truth');
	$node->poll_query_until('app', "SELECT count(*) > $moved + 50 FROM truth")
	  or die 'the writer does not write after the move';
	$writer->{run}->kill_kill;
	$node->poll_query_until('postgres', q{SELECT count(*) = 0 FROM pg_stat_activity WHERE application_name = 'busy_writer'})
	  or die 'the writer stays';
	my %errors;
	my $log = substr(slurp_file($node->logfile), $log_offset);
	$errors{$1}++ while $log =~ /^[^\n]*busy_writer ERROR:\s+([^\n]*)/mg;
	note("$label: the writer's errors: " . (join('; ', map { "$_ ($errors{$_}x)" } sort keys %errors) || 'none'));
	is($node->safe_psql('app', $TRUTH), '0', "$label: every change the writer committed is there, and nothing else");
}

sweeper(1);
# the SQL edition's sweep runs as its owner, app_owner, who has no rights
# on the extension's tables: it fails as documented, not on their
# privileges (before 1.9's fix: permission denied for table shard_config)
move_while_busy('SQL edition -> C extension', $to_ext, 'app_owner',
	qr/ERROR:\s+cfeed is not the SQL edition any more/);
$node->poll_query_until('app', "SELECT ($UNSTAMPED) = 0") or die 'the C sweeper did not stamp: ' . workers() . '; ' . waits();
is($node->safe_psql('app', $GAPS), '0', 'every shard is gapless');
# the SQL edition owned by postgres from here
move_while_busy('C extension -> SQL edition', $to_sql, 'postgres',
	qr/ERROR:\s+cfeed\.change is not a table of extension cfeed/);
sql_as('postgres', q{SELECT count(*) FROM cfeed.sweep(0)});
sql_as('postgres', q{SELECT count(*) FROM cfeed.sweep(1)});
is($node->safe_psql('app', $UNSTAMPED), '0', 'the SQL edition stamps the rest');
is($node->safe_psql('app', $GAPS), '0', 'every shard is gapless');
move_while_busy('SQL edition -> C extension, again', $to_ext, 'postgres',
	qr/ERROR:\s+cfeed is not the SQL edition any more/);
$node->poll_query_until('app', "SELECT ($UNSTAMPED) = 0") or die 'the C sweeper did not stamp: ' . workers() . '; ' . waits();
is($node->safe_psql('app', $GAPS), '0', 'every shard is gapless');
is($node->safe_psql('app', $TRUTH), '0', 'every change written is there, and nothing else');
cmp_ok($node->safe_psql('app', q{SELECT cfeed.publish(1, 0)}), '>', $node->safe_psql('app', q{SELECT max(change_id) FROM truth}),
	'change_ids go on above every one issued');
is($node->safe_psql('app', $TRACKED), 'cfeed_track:A:c,cfeed_track_change_id:O:c,cfeed_track_truncate:O:c',
	'the tracked table\'s triggers call the extension\'s functions again, enabled as they were');
$node->safe_psql('app', q{INSERT INTO public.items (id, v) VALUES (3, 'in C again')});
is($node->safe_psql('app', $IMAGES),
	"insert items {\"v\": \"in C\", \"id\": 1}\ninsert items {\"v\": \"in SQL\", \"id\": 2}\ninsert items {\"v\": \"in C again\", \"id\": 3}",
	'its writes publish in the extension again');

$node->stop;
done_testing();
