# test/t/060_fuzz.pl
#
# Fuzz the SQL API: for CFEED_FUZZ_SECONDS (default 45) two
# sessions call random functions of cfeed with random argument combinations
# (NULLs, zero, negative, int/bigint extremes, random ints, empty, huge,
# quoted, unicode strings) while pgbench publishes to feed 1 and the
# background sweeper runs.  A statement_timeout bounds every call (waits with
# huge timeouts are cancelled, which is fuzzed too).
#
# Afterwards: the postmaster is the same process, the log shows no crashed
# backend and no PANIC, and every invariant of CfeedCheck holds.  Every
# change a fuzzer manages to write is recorded in truth in the same
# statement, so check_invariants sees exactly the committed changes.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use IPC::Run;
use POSIX ();
use FindBin;
use lib $FindBin::RealBin;
use CfeedCheck;

my $SECONDS = $ENV{CFEED_FUZZ_SECONDS} // 45;
my $db = 'postgres';

my $node = PostgreSQL::Test::Cluster->new('fuzz');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'cfeed'
max_worker_processes = 16
max_connections = 40
cfeed.fallback_interval = 200
log_min_messages = warning
log_min_error_statement = panic
});
$node->start;
$node->safe_psql($db, 'CREATE EXTENSION cfeed');
$node->safe_psql($db, "SELECT cfeed.create_feed('truth', 4)");
$node->safe_psql($db, "SELECT cfeed.create_feed('fz', 3, 2)");
$node->safe_psql($db, "SELECT cfeed.create_feed('fz_hist', 1, 3)");
setup_truth($node, $db);
# the writer's change_ids stay above every id a fuzzer passes explicitly
$node->safe_psql($db, "SELECT setval('cfeed.change_id', 5000000000000000)");
$node->safe_psql($db, 'CREATE TABLE fz_tbl (id int PRIMARY KEY, v text)');

my $pid_file = $node->data_dir . '/postmaster.pid';
my ($pm_pid) = split /\n/, PostgreSQL::Test::Utils::slurp_file($pid_file);
note("postmaster pid $pm_pid");

# Argument generators.
my @INT_EXTREMES = ('NULL', '0', '1', '2', '3', '-1', '2147483647', '-2147483648', '65536', '65537');
my @BIG_EXTREMES = ('NULL', '0', '-1', '9223372036854775807', '-9223372036854775808',
	'2000000000000000', '2000000000000001', '1999999999999999', '1000000000000000');
my @STRINGS = (
	'NULL', q{''}, q{' '}, q{'g'}, q{'o'}, q{'fz'}, q{'it''s'}, q{E'a\\\\b'},
	q{'fëed_日本_🙂'}, q{E'a\\nb'}, q{repeat('x', 10000)},
	q{(SELECT string_agg(md5(i::text), '') FROM generate_series(1, 100) i)},
	q{'id'}, q{'v'}, q{'id; select 1'}, q{'%s%s%n'});
my @TIMES = ('NULL', 'now()', q{'infinity'}, q{'-infinity'}, q{'2000-01-01'},
	q{now() + interval '1 hour'}, q{now() - interval '1 second'});
# (never truth: tracking it would publish changes the check does not know)
my @TABLES = ('NULL', q{'fz_tbl'}, q{'pg_class'}, q{'cfeed.change'},
	q{'cfeed.shard'}, '0', '1259');

sub pick { return $_[ int(rand(@_)) ]; }

sub arg
{
	my ($type) = @_;
	if ($type eq 'feed')
	{
		return pick('1', '2', '3', '2', pick(@INT_EXTREMES), int(rand(20)));
	}
	return pick('0', '1', '2', pick(@INT_EXTREMES), int(rand(5))) if $type eq 'shard';
	return pick(@INT_EXTREMES, int(rand(2000)) - 100) if $type eq 'int';
	return pick('0', '1', '10', '50', 'NULL', '-1', '2147483647') if $type eq 'ms';
	return pick(@BIG_EXTREMES, 2000000000000000 + int(rand(50)), int(rand(1e6)) - 500) if $type eq 'big';
	return pick(@STRINGS, "'s" . int(rand(5)) . "'") if $type eq 'text';
	return pick(@TIMES) if $type eq 'time';
	return pick('NULL', 'true', 'false') if $type eq 'bool';
	return pick(@TABLES) if $type eq 'tbl';
	die "unknown type $type";
}

# name => argument types; writes are wrapped so their change_ids land in truth.
my %API = (
	'cfeed.create_feed' => [qw(text int int int bool text)],
	'cfeed.publish' => [qw(feed shard big)],
	'cfeed.shard_for' => [qw(feed text)],
	'cfeed.sweep' => [qw(int)],
	'cfeed.read' => [qw(feed shard big int ms)],
	'cfeed.read_rows' => [qw(feed shard big int ms)],
	'cfeed.wait' => [qw(feed shard big ms)],
	'cfeed.head' => [qw(feed shard)],
	'cfeed.cursor_at' => [qw(feed shard time)],
	'cfeed.channel' => [qw(feed shard)],
	'cfeed.acquire' => [qw(text feed text int time)],
	'cfeed.checkpoint' => [qw(text feed shard text big big)],
	'cfeed.release' => [qw(text feed text)],
	'cfeed.seek' => [qw(text feed shard big)],
	'cfeed.drop_group' => [qw(text feed)],
	'cfeed.apply_retention' => [qw(bool)],
	'cfeed.track' => [qw(tbl feed text)],
	'cfeed.untrack' => [qw(tbl)],
	'cfeed.backfill' => [qw(tbl feed text)],
	'cfeed._track_key' => [qw(tbl text)],
);
my @NAMES = sort keys %API;

sub statement
{
	my $r = rand();
	if ($r < 0.05)
	{
		my @a = map { arg($_) } qw(int int int int);
		return "CALL cfeed.sweep_loop($a[0], $a[1], $a[2], $a[3], NULL, NULL, NULL);";
	}
	if ($r < 0.10)
	{
		# direct INSERT, recorded in truth when it succeeds
		my ($f, $s, $id, $n) = (arg('feed'), arg('shard'), arg('big'), pick('NULL', arg('big')));
		return "WITH c AS (INSERT INTO cfeed.change (feed_id, shard, change_id, change_sequence_number) "
		  . "VALUES ($f, $s, $id, $n) RETURNING change_id) INSERT INTO truth SELECT change_id FROM c;";
	}
	my $fn = pick(@NAMES);
	my @types = @{ $API{$fn} };
	# sometimes leave trailing defaulted arguments out
	my $n = @types;
	$n = int(rand(@types)) + 1 if rand() < 0.2;
	my @args = map { arg($types[$_]) } 0 .. $n - 1;
	$args[0] = "$args[0]::regclass" if $types[0] eq 'tbl' && $args[0] ne 'NULL';
	$args[1] = "NULL::record" if $fn eq 'cfeed._track_key';
	my $call = "$fn(" . join(', ', @args) . ')';
	return "INSERT INTO truth SELECT $call;" if $fn eq 'cfeed.publish';
	return "SELECT * FROM $call;";
}

# One fuzzer: batches of random statements through psql (errors are
# expected and ignored; a lost connection is not).
sub fuzzer
{
	my ($id, $deadline) = @_;
	my $batches = 0;
	my $stmts = 0;
	my $dir = PostgreSQL::Test::Utils::tempdir();
	srand($id * 7919 + $$);
	while (time < $deadline)
	{
		my $sql = "SET statement_timeout = '300ms';\nSET client_min_messages = error;\n";
		for (1 .. 100)
		{
			my $st = statement();
			# some statements inside a transaction that is rolled back
			$st = "BEGIN; $st ROLLBACK;" if rand() < 0.1;
			$sql .= "$st\n";
			$stmts++;
		}
		PostgreSQL::Test::Utils::append_to_file("$dir/b$batches.sql", $sql);
		my ($out, $err) = ('', '');
		IPC::Run::run(
			[ 'psql', '-X', '-q', '-h', $node->host, '-p', $node->port, '-d', $db,
			  '-f', "$dir/b$batches.sql" ],
			'>', \$out, '2>', \$err);
		if ($err =~ /server closed the connection|connection to server .* failed|terminat/)
		{
			print STDERR "fuzzer $id: connection lost in batch $batches:\n$err\n";
			POSIX::_exit(1);
		}
		$batches++;
	}
	print STDERR "fuzzer $id: $batches batches, $stmts statements\n";
	# _exit: no END blocks (they would stop the test's node)
	POSIX::_exit(0);
}

my $deadline = time + $SECONDS;
my @kids;
for my $id (1, 2)
{
	my $pid = fork();
	die "fork: $!" unless defined $pid;
	if ($pid == 0) { fuzzer($id, $deadline); }
	push @kids, $pid;
}

# the writer: publishes to feed 1, recording in truth
my $script = PostgreSQL::Test::Utils::tempdir() . '/writer.sql';
pgbench_writer_script($script, 4);
my ($wout, $werr) = ('', '');
my $writer = IPC::Run::start(
	[ 'pgbench', '-n', '-c', '2', '-j', '1', '-T', $SECONDS, '-h', $node->host,
	  '-p', $node->port, '-f', $script, $db ],
	'>', \$wout, '2>', \$werr);

for my $pid (@kids)
{
	waitpid($pid, 0);
	is($? >> 8, 0, "fuzzer process $pid kept its connection");
}
$writer->finish;
my ($tx) = $wout =~ /number of transactions actually processed: (\d+)/;
note("writer: " . ($tx // '?') . " transactions");

# the server survived: same postmaster, no crashed backend, no PANIC
my ($pm_pid2) = split /\n/, PostgreSQL::Test::Utils::slurp_file($pid_file);
is($pm_pid2, $pm_pid, 'postmaster is the same process');
is($node->safe_psql($db, 'SELECT 1'), '1', 'server still answers');
my $log = PostgreSQL::Test::Utils::slurp_file($node->logfile);
unlike($log, qr/terminated by signal|PANIC|was terminated by exception/,
	'no backend crashed and nothing panicked');
my %internal;
for my $line ($log =~ /^.*(?:XX000|internal error|unexpected|cache lookup failed|could not open relation with OID)[^\n]*$/mg)
{
	(my $msg = $line) =~ s/^.*?(ERROR|WARNING|LOG):/$1:/;
	$internal{$msg}++;
}
note("errors without a proper SQLSTATE in the log:\n"
	  . join("\n", map { "$internal{$_} x $_" } sort keys %internal))
  if %internal;

# everything swept: the background sweeper for group 0, by hand for every
# group a fuzzed create_feed may have used
my $groups = $node->safe_psql($db, 'SELECT string_agg(DISTINCT sweep_group::text, \' \') FROM cfeed.shard_config');
for my $i (1 .. 50)
{
	for my $g (split / /, $groups)
	{
		$node->safe_psql($db, "SELECT count(*) FROM cfeed.sweep($g)");
	}
	last if $node->safe_psql($db,
		'SELECT count(*) = 0 FROM cfeed.change WHERE change_sequence_number IS NULL') eq 't';
}
ok(wait_all_stamped($node, $db), 'every committed change was stamped');
my $n = check_invariants($node, $db, 'after fuzzing');
diag($node->safe_psql($db, q{
	SELECT string_agg(format('feed %s shard %s: %s in truth only, %s in change only, %s unstamped',
		f, s, t_only, c_only, unstamped), E'\n')
	FROM (SELECT c.feed_id AS f, c.shard AS s,
				 count(*) FILTER (WHERE c.change_id IS NULL) AS t_only,
				 count(*) FILTER (WHERE t.change_id IS NULL) AS c_only,
				 count(*) FILTER (WHERE c.change_sequence_number IS NULL) AS unstamped
		  FROM truth t FULL JOIN cfeed.change c ON c.change_id = t.change_id
		  WHERE t.change_id IS NULL OR c.change_id IS NULL OR c.change_sequence_number IS NULL
		  GROUP BY 1, 2) x}))
  unless Test::More->builder->is_passing;
note("truth: $n changes; sweep groups: $groups; feeds: "
	  . $node->safe_psql($db, 'SELECT count(*) FROM cfeed.feed'));
cmp_ok($n, '>', 0, 'the writer and fuzzers published');

$node->stop;
done_testing();
