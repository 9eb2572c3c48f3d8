# CfeedCheck: shared helpers for cfeed's TAP tests.
#
# check_invariants() asserts guarantees 1, 2 and 5 (README) on a database
# whose writers record every committed change_id in table "truth" in the
# same transaction as the change.
#
# CFEED_TEST_STORAGE=ranges (set by the tests that run another test with
# every shard stored in ranges): cfeed_node() sets cfeed.default_storage,
# and wait_all_stamped() and check_invariants() read the numbers through
# cfeed.stats and read(), since a range change's row never holds its number
# (test/gaps.sql reads a range shard's through read() anyway).
package CfeedCheck;

use strict;
use warnings;
use Test::More;
use PostgreSQL::Test::Cluster;
use Exporter 'import';
use IPC::Run;

my $RANGES = ($ENV{CFEED_TEST_STORAGE} // 'rows') eq 'ranges';

our @EXPORT = qw(setup_truth wait_all_stamped check_invariants pgbench_writer_script cfeed_node cfeed_standby
  start_named_call kill_named_call named_call_stderr restored_copy burn_xids);

# Take $n xids on $db of $node, one transaction each (an xid counter far
# from another cluster's).
sub burn_xids
{
	my ($node, $db, $n) = @_;
	$node->safe_psql($db,
		"DO \$\$ BEGIN FOR i IN 1 .. $n LOOP PERFORM pg_current_xact_id(); COMMIT; END LOOP; END \$\$");
	return;
}

# A psql in the background running one statement (a consumer's CALL) on
# $db of $node as application_name $name, its handle in $handles->{$name};
# what it printed on stderr so far: named_call_stderr($handles->{$name}).
my %call_stderr;	# handle -> its psql's stderr

sub start_named_call
{
	my ($handles, $node, $db, $name, $sql) = @_;
	my ($out, $err) = ('', '');
	my $conn = $node->connstr($db) . " application_name=$name";
	$handles->{$name} = IPC::Run::start([ 'psql', '-X', '-q', '-d', $conn, '-c', $sql ],
		'>', \$out, '2>', \$err);
	$call_stderr{ $handles->{$name} } = \$err;
	return $handles->{$name};
}

# The stderr of a named call's psql (an error that ended its statement),
# as of its last pump or finish.
sub named_call_stderr
{
	my ($handle) = @_;
	my $err = $call_stderr{$handle};
	return $err ? $$err : '';
}

# Terminate the backend of application_name $name and reap its psql.
sub kill_named_call
{
	my ($handles, $node, $db, $name) = @_;
	$node->safe_psql($db, qq{
		SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = '$name'});
	$handles->{$name}->finish;
	delete $handles->{$name};
}

# A started node with cfeed preloaded (init options as for init, extra
# postgresql.conf lines in $conf).
sub cfeed_node
{
	my ($name, $conf, %init) = @_;
	my $node = PostgreSQL::Test::Cluster->new($name);
	$node->init(%init);
	$node->append_conf('postgresql.conf', "shared_preload_libraries = 'cfeed'\n"
		  . ($RANGES ? "cfeed.default_storage = ranges\n" : '') . ($conf // ''));
	$node->start;
	return $node;
}

# A started streaming standby of $primary, from a new backup, with cfeed
# preloaded (extra postgresql.conf lines in $conf), caught up.
sub cfeed_standby
{
	my ($primary, $name, $conf) = @_;
	$primary->backup("${name}_backup");
	my $standby = PostgreSQL::Test::Cluster->new($name);
	$standby->init_from_backup($primary, "${name}_backup", has_streaming => 1);
	$standby->append_conf('postgresql.conf', "shared_preload_libraries = 'cfeed'\n" . ($conf // ''));
	$standby->start;
	$primary->wait_for_catchup($standby);
	return $standby;
}

# A new cluster, cfeed preloaded and its sweeper off, whose database app
# is $old's database postgres restored from a pg_dump (custom format) by
# pg_restore: two tests, the dump and the restore.
sub restored_copy
{
	my ($old) = @_;
	my $dump = $old->basedir . '/app.dump';
	$old->command_ok([ 'pg_dump', '-Fc', '-f', $dump, '-d', $old->connstr('postgres') ], 'pg_dump');
	my $new = cfeed_node('new', "cfeed.enable_sweeper = off\n");
	$new->safe_psql('postgres', 'CREATE DATABASE app');
	$new->command_ok([ 'pg_restore', '-d', $new->connstr('app'), $dump ], 'pg_restore');
	return $new;
}

# Create the truth table that writers fill in their own transactions.
sub setup_truth
{
	my ($node, $db) = @_;
	$node->safe_psql($db, 'CREATE TABLE IF NOT EXISTS truth (change_id bigint PRIMARY KEY)');
}

# Write a pgbench script: publish to a random shard of feed 1 and record
# the change_id, in one transaction.
sub pgbench_writer_script
{
	my ($path, $nshards) = @_;
	open my $fh, '>', $path or die "cannot write $path: $!";
	print $fh "\\set s random(0, " . ($nshards - 1) . ")\n";
	print $fh "BEGIN;\n";
	print $fh "INSERT INTO truth (change_id) SELECT cfeed.publish(1, :s);\n";
	print $fh "COMMIT;\n";
	close $fh;
}

# Wait until no committed change is left unstamped.
sub wait_all_stamped
{
	my ($node, $db) = @_;
	return $node->poll_query_until($db, $RANGES ? 'SELECT coalesce(sum(pending), 0) = 0 FROM cfeed.stats'
		: 'SELECT count(*) = 0 FROM cfeed.change WHERE change_sequence_number IS NULL');
}

# Guarantees 1 (gapless), 2 (exactly once) and 5 (last number = highest).
sub check_invariants
{
	my ($node, $db, $label) = @_;
	# in ranges, every shard checked is stored in ranges, and there are
	# stamps (not a run in rows, which the checks through read() pass too)
	is($node->safe_psql($db, q{SELECT count(*) FILTER (WHERE storage <> 'ranges') = 0
		  AND EXISTS (SELECT FROM cfeed.stamp) FROM cfeed.shard}), 't',
		"$label: every shard is stored in ranges, and stamped")
	  if $RANGES;
	my $gaps = $node->safe_psql($db,
		PostgreSQL::Test::Utils::slurp_file(($ENV{TESTDIR} // '.') . '/test/gaps.sql'));
	is($gaps, '0', "$label: every shard is gapless and its last number is its highest");
	# in ranges, the stamped changes are those read() gives, each once
	my $stamped = $RANGES ? q{(SELECT s.feed_id, r.change_id, r.change_sequence_number
						   FROM cfeed.shard s, cfeed.read(s.feed_id, s.shard, NULL, 100000000) r)}
	  : 'cfeed.change';
	my $mismatch = $node->safe_psql($db, qq{
		SELECT (SELECT count(*) FROM truth t
				FULL JOIN $stamped c ON c.change_id = t.change_id
				WHERE t.change_id IS NULL OR c.change_id IS NULL OR c.change_sequence_number IS NULL)}
		  . ($RANGES ? qq{ + (SELECT count(*) FROM (SELECT FROM $stamped c
						   GROUP BY c.feed_id, c.change_id HAVING count(*) > 1) d)} : ''));
	is($mismatch, '0', "$label: every committed change is stamped exactly once, nothing else");
	return $node->safe_psql($db, 'SELECT count(*) FROM truth');
}

1;
