# test/t/050_client.pl
#
# The `cfeed` client command (src/client): `cfeed tail` from the beginning
# and from now, long-polling in the background; gap detection; reconnecting
# after its backend is terminated; SIGTERM; bad arguments and unknown feeds
# (exit 2); `cfeed stat`.

use strict;
use warnings;

use Cwd;
use JSON::PP;
use IPC::Run qw(start finish pump run timeout);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use lib 'test/t';
use ServeHelper qw(cfeed_binary);

# The source tree (PostgreSQL 17+ no longer sets TESTDIR; prove runs here).
my $tree = $ENV{TESTDIR} // Cwd::getcwd();

# The binary under test: the one built in this tree, else the installed one.
my $cfeed = cfeed_binary();
plan skip_all => "cfeed command not built ($cfeed)" unless -x $cfeed;

my $node = PostgreSQL::Test::Cluster->new('client');
$node->init;
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'cfeed'\n");
$node->start;
$node->safe_psql('postgres', 'create extension cfeed');
$node->safe_psql('postgres', "select cfeed.create_feed('orders', 2, 1)");
$node->safe_psql('postgres', "select cfeed.create_feed('recon', 1, 2)");
$node->safe_psql('postgres', "select cfeed.create_feed('gappy', 1, 3)");

my $dsn = $node->connstr('postgres');
my $timeout = $PostgreSQL::Test::Utils::timeout_default;
my $start = 2000000000000000;

# Publish n changes round-robin over the feed's shards and sweep them now;
# returns the change_ids.
sub publish
{
	my ($feed_id, $shards, $n) = @_;
	my $ids = $node->safe_psql('postgres',
		"select cfeed.publish($feed_id, g % $shards) from generate_series(1, $n) g");
	$node->safe_psql('postgres', 'select count(*) from cfeed.sweep()');
	return split /\n/, $ids;
}

# Parse JSON lines into a list of hashes.
sub parse_lines
{
	my ($text) = @_;
	return map { decode_json($_) } grep { /\S/ } split /\n/, $text;
}

# Check that each shard's numbers are contiguous from $from{shard} + 1.
sub check_contiguous
{
	my ($rows, $from, $what) = @_;
	my %next = map { $_ => $from->{$_} + 1 } keys %$from;
	my $ok = 1;
	for my $r (@$rows)
	{
		if (!defined $next{ $r->{shard} }
			|| $r->{change_sequence_number} != $next{ $r->{shard} })
		{
			$ok = 0;
			diag "shard $r->{shard}: got $r->{change_sequence_number}";
		}
		$next{ $r->{shard} } = $r->{change_sequence_number} + 1;
	}
	ok($ok, "$what: numbers contiguous per shard");
}

# Wait until the tail's backend sits idle after a read, or after the feed
# epoch check that follows every read (it has listened and resolved its
# start position).
sub wait_tail_idle
{
	$node->poll_query_until('postgres',
		"select count(*) > 0 from pg_stat_activity where application_name = 'cfeed'"
		  . " and state = 'idle' and (query like '%cfeed.read%' or query = 'select cfeed.epoch()')")
	  or die "cfeed tail did not start";
}

# --- tail from the beginning, long-polling in the background ---------------
{
	my ($out, $err) = ('', '');
	my $h = start [ $cfeed, 'tail', '--dbname', $dsn, '--feed', 'orders',
		'--from', 'beginning', '--max', '10' ],
	  '>', \$out, '2>', \$err, timeout($timeout);
	wait_tail_idle();
	my @ids = publish(1, 2, 6);
	push @ids, publish(1, 2, 4);
	finish $h;
	is($h->result(0), 0, 'tail --max exits 0');
	my @rows = parse_lines($out);
	is(scalar @rows, 10, 'tail printed 10 changes');
	check_contiguous(\@rows, { 0 => $start, 1 => $start }, 'from beginning');
	is_deeply([ sort map { $_->{change_id} } @rows ], [ sort @ids ],
		'the printed change_ids are the published ones');
	ok((!grep { $_->{feed_id} != 1 || !defined $_->{stamped_at} } @rows),
		'feed_id and stamped_at set');
	my %last;
	my $ordered = 1;
	for my $r (@rows)
	{
		$ordered = 0
		  if defined $last{ $r->{shard} } && $r->{change_id} <= $last{ $r->{shard} };
		$last{ $r->{shard} } = $r->{change_id};
	}
	ok($ordered, 'change_ids ascend within each shard');
	like($out, qr/^\{"feed_id":1,"shard":\d,"change_sequence_number":\d+,"change_id":\d+,"stamped_at":"[^"]+"\}$/m,
		'line format');
}

# --- tail of a tracked table shows what changed (1.7 printed numbers only) --
{
	$node->safe_psql('postgres', q{
		select cfeed.create_feed('items', 1, 9);
		create table item (id int primary key, name text);
		select cfeed.track('item', 9);
		insert into item values (1, 'apple'), (2, 'pear');
		update item set name = 'green apple' where id = 1;
		delete from item where id = 2;
	});
	$node->poll_query_until('postgres', 'select cfeed.head(9, 0) = 2000000000000004');
	my ($out, $err) = ('', '');
	run [ $cfeed, 'tail', '--dbname', $dsn, '--feed', 'items', '--max', '4' ],
	  '>', \$out, '2>', \$err, timeout($timeout);
	is($?, 0, 'tail of a tracked table: exit 0');
	my @rows = parse_lines($out);
	is(join(' ', map { "$_->{op}:$_->{row}{id}:" . ($_->{row}{name} // '') . ":$_->{tbl}" } @rows),
		'insert:1:apple:item insert:2:pear:item update:1:green apple:item delete:2:pear:item',
		'tail of a tracked table: inserts, updates and deletes with their rows');

	# JSON is UTF-8 whatever the client encoding the environment asks for (a
	# helper's test: under PGCLIENTENCODING=LATIN1 "caf\xe9" was printed as a
	# LATIN1 byte, and a character LATIN1 lacks ended the tail with exit 1)
	$node->safe_psql('postgres', q{insert into item values (3, 'caf' || chr(233) || ' ' || chr(128512))});
	$node->poll_query_until('postgres', 'select cfeed.head(9, 0) = 2000000000000005');
	{
		local $ENV{PGCLIENTENCODING} = 'LATIN1';
		run [ $cfeed, 'tail', '--dbname', $dsn, '--feed', 'items', '--from', '2000000000000004', '--max', '1' ],
		  '>', \$out, '2>', \$err, timeout($timeout);
	}
	is($?, 0, 'tail under PGCLIENTENCODING=LATIN1: exit 0') or diag($err);
	is(eval { (parse_lines($out))[0]{row}{name} }, "caf\x{e9} \x{1F600}", '... and its JSON is UTF-8');
	# and its arguments are read in that encoding (a review: a group named
	# in LATIN1 failed, "invalid byte sequence for encoding UTF8", or named
	# another group when its bytes were valid UTF-8)
	for my $group ("caf\xe9", "\xc3\xa9")
	{
		local $ENV{PGCLIENTENCODING} = 'LATIN1';
		run [ $cfeed, 'tail', '--dbname', $dsn, '--feed', 'items', '--group', $group, '--owner', 'enc',
			'--max', '1' ], '>', \$out, '2>', \$err, timeout($timeout);
		is($?, 0, 'a group named in LATIN1: exit 0') or diag($err);
	}
	is($node->safe_psql('postgres', q{select count(distinct group_name) from cfeed.lease
		where group_name in ('caf' || chr(233), chr(195) || chr(169))}), '2',
		'the groups are named as the environment meant (caf\x{e9}, \x{c3}\x{a9}), not as UTF-8 bytes');
}

# --- tail --from now sees only later changes -----------------------------
{
	my ($out, $err) = ('', '');
	my $h = start [ $cfeed, 'tail', '--dbname', $dsn, '--feed', '1',
		'--from', 'now', '--max', '3' ],
	  '>', \$out, '2>', \$err, timeout($timeout);
	wait_tail_idle();
	my @ids = publish(1, 2, 3);
	finish $h;
	is($h->result(0), 0, 'tail --from now exits 0');
	my @rows = parse_lines($out);
	is_deeply([ sort map { $_->{change_id} } @rows ], [ sort @ids ],
		'--from now prints only the changes published after it started');
	check_contiguous(\@rows, { 0 => $start + 5, 1 => $start + 5 }, 'from now');
}

# --- one shard, from a cursor, and --idle-exit-ms --------------------------
{
	my ($out, $err) = ('', '');
	run [ $cfeed, 'tail', '--dbname', $dsn, '--feed', 'orders', '--shard', '1',
		'--from', $start + 6, '--idle-exit-ms', '300' ],
	  '>', \$out, '2>', \$err, timeout($timeout);
	is($?, 0, 'tail --idle-exit-ms exits 0');
	my @rows = parse_lines($out);
	is(scalar @rows, 1, 'from a cursor: one change left in shard 1');
	is($rows[0]{change_sequence_number}, $start + 7, 'from a cursor: the next number');
	is($rows[0]{shard}, 1, 'only the requested shard');
}

# --- reconnect after the backend is terminated ------------------------------
{
	my ($out, $err) = ('', '');
	my $h = start [ $cfeed, 'tail', '--dbname', $dsn, '--feed', 'recon',
		'--from', 'beginning', '--max', '7', '--wait-ms', '60000' ],
	  '>', \$out, '2>', \$err, timeout($timeout);
	wait_tail_idle();
	my @ids = publish(2, 1, 3);
	pump $h until ($out =~ tr/\n//) >= 3;
	my $killed = $node->safe_psql('postgres',
		"select count(pg_terminate_backend(pid)) from pg_stat_activity where application_name = 'cfeed'");
	is($killed, 1, "terminated the tail's backend");
	push @ids, publish(2, 1, 2);
	wait_tail_idle();
	push @ids, publish(2, 1, 2);
	finish $h;
	is($h->result(0), 0, 'tail exits 0 after reconnecting');
	like($err, qr/connection lost.*reconnected/s, 'reconnect noted on stderr');
	my @rows = parse_lines($out);
	is(scalar @rows, 7, 'all changes arrived across the reconnect');
	check_contiguous(\@rows, { 0 => $start }, 'across the reconnect');
	is_deeply([ sort map { $_->{change_id} } @rows ], [ sort @ids ],
		'no change lost or repeated across the reconnect');
}

# --- SIGTERM exits cleanly -------------------------------------------------
{
	my ($out, $err) = ('', '');
	my $h = start [ $cfeed, 'tail', '--dbname', $dsn, '--feed', 'orders', '--from', 'now' ],
	  '>', \$out, '2>', \$err, timeout($timeout);
	wait_tail_idle();
	$h->signal('TERM');
	finish $h;
	is($h->result(0), 0, 'SIGTERM: exit 0');
}

# --- a gap is detected (exit 3) ---------------------------------------------
{
	publish(3, 1, 3);
	$node->safe_psql('postgres',
		"delete from cfeed.change where feed_id = 3 and change_sequence_number = $start + 2");
	my ($out, $err) = ('', '');
	run [ $cfeed, 'tail', '--dbname', $dsn, '--feed', 'gappy', '--idle-exit-ms', '300' ],
	  '>', \$out, '2>', \$err, timeout($timeout);
	is($? >> 8, 3, 'gap: exit 3');
	like($err, qr/gap in shard 0 of feed 3/, 'gap: message');
	is(scalar(parse_lines($out)), 1, 'gap: stops before the jump');
}

# --- bad arguments and unknown feeds: exit 2 ---------------------------------
sub expect_exit2
{
	my ($args, $pattern, $what) = @_;
	my ($out, $err) = ('', '');
	run [ $cfeed, @$args ], '>', \$out, '2>', \$err, timeout($timeout);
	is($? >> 8, 2, "$what: exit 2");
	like($err, $pattern, "$what: message");
}

expect_exit2([ 'tail', '--dbname', $dsn, '--feed', 'nope' ],
	qr/feed "nope" does not exist/, 'unknown feed');
expect_exit2([ 'tail', '--dbname', $dsn, '--feed', '99' ],
	qr/feed "99" does not exist/, 'unknown feed id');
expect_exit2([ 'tail', '--dbname', $dsn, '--feed', 'orders', '--shard', '7' ],
	qr/shard 7 of feed 1 does not exist/, 'unknown shard');
expect_exit2([ 'tail', '--dbname', $dsn ], qr/--feed is required/, 'missing --feed');
expect_exit2([ 'tail', '--dbname', $dsn, '--feed', 'orders', '--bogus' ],
	qr/unknown option "--bogus".*--help/s, 'unknown option');
expect_exit2([ 'tail', '--dbname', $dsn, '--feed', 'orders', '--from', 'xyz' ],
	qr/invalid --from "xyz"/, 'bad --from');
expect_exit2([ 'tail', '--dbname', $dsn, '--feed', 'orders', '--from', '2024-13-45' ],
	qr/invalid --from time/, 'bad --from time');
expect_exit2([ 'tail', '--dbname', $dsn, '--feed', 'orders', '--max', '-1' ],
	qr/invalid --max/, 'bad --max');
# a feed the role may not read: the server's 42501, exit 4 (1.7 said "feed 1
# has no shards", exit 2); the same for a feed that does not exist, whose
# existence only a reader of every feed learns
$node->safe_psql('postgres', q{
	create role tail_stranger login;
	grant select on cfeed.feed, cfeed.shard, cfeed.change to tail_stranger;
});
for my $feed ('orders', '1')
{
	my ($out, $err) = ('', '');
	run [ $cfeed, 'tail', '--dbname', $node->connstr('postgres') . ' user=tail_stranger', '--feed', $feed ],
	  '>', \$out, '2>', \$err, timeout($timeout);
	is($? >> 8, 4, "a feed the role may not read ($feed): exit 4");
	like($err, qr/permission denied for feed 1/, "a feed the role may not read ($feed): the server's message");
}
# a reader granted as docs/security.md says (no SELECT on cfeed.feed) names
# its feed by number (before 1.9's fix: "permission denied for table feed",
# exit 1) or by name, found by cfeed._feed_id (before, a helper's test: exit
# 4, "permission denied for table feed"); a role with the same table
# privileges but no read grant gets the server's 42501 by number, and by
# name exit 4 with the same words for an existing and a missing feed
$node->safe_psql('postgres', q{
	create role tail_reader login;
	create role tail_nogrant login;
	grant select on cfeed.change, cfeed.shard to tail_reader, tail_nogrant;
	select cfeed.grant_read(1, 'tail_reader');
});
{
	my ($out, $err) = ('', '');
	my $stamped = $node->safe_psql('postgres',
		'select count(*) from cfeed.change where feed_id = 1 and change_sequence_number is not null');
	run [ $cfeed, 'tail', '--dbname', $node->connstr('postgres') . ' user=tail_reader', '--feed', '1',
		'--idle-exit-ms', '300' ], '>', \$out, '2>', \$err, timeout($timeout);
	is($? >> 8, 0, 'a reader without SELECT on cfeed.feed, its feed by number: exit 0');
	is(scalar(parse_lines($out)), $stamped, 'a reader without SELECT on cfeed.feed: every change of its feed');
	run [ $cfeed, 'tail', '--dbname', $node->connstr('postgres') . ' user=tail_reader', '--feed', 'orders',
		'--idle-exit-ms', '300' ], '>', \$out, '2>', \$err, timeout($timeout);
	is($? >> 8, 0, 'a reader without SELECT on cfeed.feed, its feed by name: exit 0') or diag($err);
	is(scalar(parse_lines($out)), $stamped, '... every change of its feed');
	my %said;
	for my $name ('orders', 'no_such_feed')
	{
		run [ $cfeed, 'tail', '--dbname', $node->connstr('postgres') . ' user=tail_nogrant', '--feed', $name ],
		  '>', \$out, '2>', \$err, timeout($timeout);
		is($? >> 8, 4, "no read grant, a feed by name ($name): exit 4");
		($said{$name} = $err) =~ s/\Q$name\E/NAME/g;
	}
	is($said{orders}, $said{no_such_feed}, 'the same words whether the feed exists or not');
	like($said{orders}, qr/no feed named "NAME" that this role may read/, '... saying so');
	run [ $cfeed, 'tail', '--dbname', $node->connstr('postgres') . ' user=tail_nogrant', '--feed', '1' ],
	  '>', \$out, '2>', \$err, timeout($timeout);
	is($? >> 8, 4, 'no read grant, the feed by number: exit 4');
	like($err, qr/permission denied for feed 1/, "no read grant, the feed by number: the server's message");
}
# a closed standard output ends an idle tail at once (a helper's test: it
# waited for the feed's next change, holding its connection, and in a
# group its leases): the one change after the cursor, then nothing
{
	my $out = '';
	my $ran = eval {
		run [ $cfeed, 'tail', '--dbname', $dsn, '--feed', 'items', '--from', '2000000000000004',
			'--wait-ms', '600000' ], '|', [ 'head', '-n', '1' ], '>', \$out, timeout(60);
	};
	ok($ran, 'tail | head -n 1 on an idle feed: both exit 0') or diag($@ || "exit $?");
	is(scalar(parse_lines($out)), 1, '... once head took its line');
}
expect_exit2([ 'frobnicate' ], qr/unknown command/, 'unknown command');
expect_exit2([], qr/no command given/, 'no command');

my $have_groups = $node->safe_psql('postgres',
	"select pg_catalog.to_regprocedure('cfeed.acquire(text, integer, text, integer, timestamp with time zone)') is not null");
if ($have_groups eq 'f')
{
	expect_exit2([ 'tail', '--dbname', $dsn, '--feed', 'orders', '--group', 'g', '--owner', 'o' ],
		qr/consumer groups are not available in this cfeed version/, 'group without the API');
}
else
{
	# Consumer groups: one member reads everything once, then
	# resumes from its checkpoints.
	$node->safe_psql('postgres', "select cfeed.create_feed('grouped', 3, 4)");
	my @ids = publish(4, 3, 9);
	my ($out, $err) = ('', '');
	run [ $cfeed, 'tail', '--dbname', $dsn, '--feed', 'grouped', '--group', 'g',
		'--owner', 'a', '--idle-exit-ms', '500' ],
	  '>', \$out, '2>', \$err, timeout($timeout);
	is($?, 0, 'group member: exit 0');
	my @rows = parse_lines($out);
	is_deeply([ sort map { $_->{change_id} } @rows ], [ sort @ids ],
		'group member: every change once');
	check_contiguous(\@rows, { 0 => $start, 1 => $start, 2 => $start }, 'group member');

	my @more = publish(4, 3, 4);
	run [ $cfeed, 'tail', '--dbname', $dsn, '--feed', 'grouped', '--group', 'g',
		'--owner', 'a', '--idle-exit-ms', '500' ],
	  '>', \$out, '2>', \$err, timeout($timeout);
	is($?, 0, 'group member again: exit 0');
	is_deeply([ sort map { $_->{change_id} } parse_lines($out) ], [ sort @more ],
		'group member resumes from its checkpoints');
}
expect_exit2([ 'tail', '--dbname', $dsn, '--feed', 'orders', '--group', 'g' ],
	qr/--group and --owner go together/, '--group without --owner');

# --- help and version ---------------------------------------------------------
{
	my ($out, $err) = ('', '');
	run [ $cfeed, 'tail', '--help' ], '>', \$out, '2>', \$err;
	is($?, 0, 'tail --help: exit 0');
	like($out, qr/--from=POSITION/, 'tail --help: options');
	run [ $cfeed, '--version' ], '>', \$out, '2>', \$err;
	like($out, qr/^cfeed .* \d+\.\d+/, '--version');

	# psql's options (1.7: -h was help, so `cfeed tail -h db1 ...` printed
	# the help and exited 0; -? was unknown)
	run [ $cfeed, 'tail', '-h', $node->host, '-p', $node->port, '-d', 'postgres', '-U', 'tail_stranger',
		'--feed', 'nope' ], '>', \$out, '2>', \$err, timeout($timeout);
	is($? >> 8, 2, 'tail -h -p -d -U: connects (then the feed is unknown: exit 2)');
	like($err, qr/feed "nope" does not exist/, 'tail -h -p -d -U: the server answered');
	run [ $cfeed, 'stat', '-h', $node->host, '-p', $node->port, '-d', 'postgres', '--feed', 'orders' ],
	  '>', \$out, '2>', \$err, timeout($timeout);
	is($?, 0, 'stat -h -p -d: exit 0');
	like($out, qr/^\s+1 \| orders\s+\|\s+0 \|/m, 'stat -h -p -d: the feed');
	run [ $cfeed, 'tail', '-?' ], '>', \$out, '2>', \$err;
	is($?, 0, 'tail -?: exit 0');
	like($out, qr/-h, --host=HOSTNAME/, 'tail -?: the connection options');
	run [ $cfeed, 'stat', '-V' ], '>', \$out, '2>', \$err;
	like($out, qr/^cfeed \(cfeed client\) /, 'stat -V: the version');
	run [ $cfeed, '--version' ], '>', \$out, '2>', \$err;

	# one version everywhere: cfeed.control's, the extension's, the
	# command's, META.json's and the reference's
	my ($control) = slurp_file("$tree/cfeed.control") =~ /^default_version = '([\d.]+)'/m;
	is($out, "cfeed (cfeed client) $control\n", "--version names the extension's version ($control)");
	is($node->safe_psql('postgres', q{SELECT extversion FROM pg_extension WHERE extname = 'cfeed'}),
		$control, 'the installed extension has it');
	like(slurp_file("$tree/META.json"), qr/"version": "\Q$control\E\.0"/, 'META.json has it');
	like(slurp_file("$tree/docs/reference.md"), qr/\(version \Q$control\E\)/, 'docs/reference.md has it');

	# its first line says it documents every table, view, function and
	# procedure CREATE EXTENSION installs (before 1.9's fix twelve internal
	# functions were missing)
	my $reference = slurp_file("$tree/docs/reference.md");
	my @missing = grep { $reference !~ /[`.]\Q$_\E[`(\s]/ } split /\n/, $node->safe_psql('postgres', q{
		SELECT DISTINCT (regexp_match(pg_describe_object(classid, objid, 0),
			'^(?:function|procedure|table|view|sequence) cfeed\.([a-z_0-9]+)'))[1]
		FROM pg_depend WHERE refclassid = 'pg_extension'::regclass AND deptype = 'e'
		  AND refobjid = (SELECT oid FROM pg_extension WHERE extname = 'cfeed')
		  AND classid IN ('pg_proc'::regclass, 'pg_class'::regclass)});
	is(join(', ', @missing), '', 'docs/reference.md names every table, view, sequence and function of the extension');
}

# --- cfeed stat: one row per shard -------------------------------------------
{
	my ($out, $err) = ('', '');
	run [ $cfeed, 'stat', '--dbname', $dsn ], '>', \$out, '2>', \$err, timeout($timeout);
	is($?, 0, 'stat: exit 0');
	like($out, qr/^\s*feed_id \| feed_name \| shard \|/, 'stat: header');
	my @rows = grep { /^\s+\d+ \| \S+\s+\|\s+\d+ \|/ } split /\n/, $out;
	my $nshards = $node->safe_psql('postgres', 'select count(*) from cfeed.shard');
	is(scalar @rows, $nshards, 'stat: one row per shard');
	like($out, qr/^\s+1 \| orders\s+\|\s+1 \|/m, 'stat: shard 1 of orders');
	like($out, qr/\($nshards rows\)/, 'stat: row count');

	# PG* environment variables when --dbname is absent
	local $ENV{PGHOST} = $node->host;
	local $ENV{PGPORT} = $node->port;
	local $ENV{PGDATABASE} = 'postgres';
	run [ $cfeed, 'stat', '--feed', 'recon' ], '>', \$out, '2>', \$err, timeout($timeout);
	is($?, 0, 'stat from PG* variables: exit 0');
	like($out, qr/^\s+2 \| recon\s+\|\s+0 \|\s+0 \| +2000000000000007 \|/m, 'stat --feed: the head');
	like($out, qr/\(1 row\)/, 'stat --feed: one row');

	# an unknown feed, or one the role may not read: exit 2, no empty table
	# (before 1.9's fix: "(0 rows)", exit 0)
	run [ $cfeed, 'stat', '--feed', 'nosuch' ], '>', \$out, '2>', \$err, timeout($timeout);
	is($? >> 8, 2, 'stat --feed of an unknown feed: exit 2');
	like($err, qr/feed "nosuch" does not exist, or this role may not read it/, 'stat --feed of an unknown feed: message');
	is($out, '', 'stat --feed of an unknown feed: no table');
}

$node->stop;
done_testing();
