# test/t/205_change_ids.pl
#
# A change_id is never issued twice across a lossy failover (change_id.c,
# docs/replication.md "Change ids after a failover").  A primary with an
# asynchronous standby; a consumer following docs/replication.md (epochs,
# resume_cursor, processing idempotent by change_id) reads 100 changes;
# the standby is cut off; the primary writes and the consumer processes 100
# more, which the standby never receives; the primary dies, the standby is
# promoted, and writers there (cfeed.publish, the INSERT pattern, from a
# session connected before the promotion and from new ones) record 100 new
# changes.  The consumer must process every change of the new history
# exactly once: none of the new changes may carry an id it processed on the
# old primary.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use IPC::Run;
use lib 'test/t';
use CfeedCheck;

my $primary = cfeed_node('ids_primary', '', allows_streaming => 1);
$primary->safe_psql('postgres', q{
	create extension cfeed;
	select cfeed.create_feed('f', 1, 1);});
# a database whose cfeed never issued an id before the failover
$primary->safe_psql('postgres', 'create database fresh');
$primary->safe_psql('fresh', 'create extension cfeed');
my $standby = cfeed_standby($primary, 'ids_standby');

# Write n changes on node, half by cfeed.publish and half by the INSERT
# pattern, and wait until they are stamped.
sub write_changes
{
	my ($node, $n) = @_;
	my $half = int($n / 2);
	$node->safe_psql('postgres', qq{
		select cfeed.publish(1, 0) from generate_series(1, $half);
		insert into cfeed.change (feed_id, shard, change_id)
		  select 1, 0, nextval('cfeed.change_id') from generate_series(1, $n - $half);});
	$node->poll_query_until('postgres',
		'select count(*) = 0 from cfeed.change where change_sequence_number is null')
	  or die 'changes not stamped';
}

# The consumer of docs/replication.md: its state (cursor, epoch, the
# change_ids it processed) survives the failover, as a store outside the
# database would.
my %consumer = (cursor => undef, epoch => 0, seen => {}, processed => [], dropped => 0);

sub consume
{
	my ($node) = @_;
	my $c = \%consumer;
	while (1)
	{
		my $e1 = $node->safe_psql('postgres', 'select cfeed.epoch()');
		if ($e1 ne $c->{epoch})
		{
			my $cursor = defined $c->{cursor} ? $c->{cursor} : 'null';
			my $resumed = $node->safe_psql('postgres',
				"select cfeed.resume_cursor(1, 0, $cursor, $c->{epoch})");
			$c->{cursor} = $resumed eq '' ? undef : $resumed;
			$c->{epoch} = $e1;
		}
		my $cursor = defined $c->{cursor} ? $c->{cursor} : 'null';
		my @rows = map { [ split /\|/ ] } split /\n/, $node->safe_psql('postgres',
			"select change_sequence_number, change_id from cfeed.read(1, 0, $cursor, 1000)");
		next if $node->safe_psql('postgres', 'select cfeed.epoch()') ne $e1;
		return unless @rows;
		for my $r (@rows)
		{
			if ($c->{seen}{ $r->[1] }++)
			{
				$c->{dropped}++;	# idempotent by change_id: seen before
				next;
			}
			push @{ $c->{processed} }, $r->[1];
		}
		$c->{cursor} = $rows[-1][0];
	}
}

write_changes($primary, 100);
$primary->wait_for_catchup($standby);
consume($primary);
is(scalar @{ $consumer{processed} }, 100, 'the consumer processed the first 100 changes');

# Cut the standby off; 100 changes it never receives, which the consumer
# processes.
$standby->safe_psql('postgres', q{alter system set primary_conninfo = ''; select pg_reload_conf()});
$standby->poll_query_until('postgres', 'select count(*) = 0 from pg_stat_wal_receiver')
  or die 'the standby still receives';
write_changes($primary, 100);
consume($primary);
is(scalar @{ $consumer{processed} }, 200, 'the consumer processed the 100 changes the standby never got');
my $lost_max = $primary->safe_psql('postgres', 'select max(change_id) from cfeed.change');
my $shared_max = $standby->safe_psql('postgres', 'select max(change_id) from cfeed.change');

# A session on the standby from before the promotion writes after it.
my ($in, $out, $err) = ('', '', '');
my $session = IPC::Run::start(
	[ 'psql', '-XAtq', '-v', 'ON_ERROR_STOP=1', '-d', $standby->connstr('postgres') ],
	'<', \$in, '>', \$out, '2>', \$err);
$in .= "select 'connected';\n";
$session->pump until $out =~ /connected/;

$primary->stop('immediate');
$standby->promote;
$in .= "insert into cfeed.change (feed_id, shard, change_id) "
  . "select 1, 0, nextval('cfeed.change_id') from generate_series(1, 10);\n"
  . "select 'written';\n";
$session->pump until $out =~ /written/ || $err ne '';
is($err, '', 'a session from before the promotion writes without an error');
$in .= "\\q\n";
$session->finish;
write_changes($standby, 90);

my $new = $standby->safe_psql('postgres', qq{
	select count(*), count(*) filter (where change_id <= $lost_max)
	from cfeed.change where change_id > $shared_max});
is($new, '100|0', 'the new primary issued 100 ids, all above every id the lost primary issued');

consume($standby);
is($consumer{dropped}, 0, 'the consumer dropped no new change as seen before');
is(scalar @{ $consumer{processed} }, 300, 'the consumer processed every change of the new history');
my %count;
$count{$_}++ for @{ $consumer{processed} };
is(scalar(grep { $count{$_} > 1 } keys %count), 0, 'no change_id was processed twice');

cmp_ok($standby->safe_psql('fresh', "select nextval('cfeed.change_id')"), '>',
	1000000000000000 + 2**40 - 1,
	'a database that had issued no id continues above its start value plus the gap');

ok($standby->log_contains(qr/cfeed: timeline 2: change ids continue above/),
	'the new primary logged where its change ids continue');

# A restart on the same timeline moves nothing.
my $before = $standby->safe_psql('postgres', 'select last_value from cfeed.change_id');
$standby->restart;
write_changes($standby, 2);
cmp_ok($standby->safe_psql('postgres', 'select last_value from cfeed.change_id'), '<', $before + 100,
	'a restart on the same timeline continues the ids (no move)');

# Two backends whose first statements on a new timeline come at once both
# secure it: each reads the marker (a sequence read holds ROW EXCLUSIVE
# until its transaction ends), then takes the securers' lock.  Up to 1.8
# that lock was EXCLUSIVE on the marker, which conflicts with the other's
# read: a deadlock (40P01) that failed one of them, a writer or the
# sweeper, right after a promotion (226_failover_ranges died of it once).
# Here the marker is set back to another timeline and an ALTER SEQUENCE
# holds both writers' reads until it commits, so that they read together.
# Every process is bounded by the suite's timeout.
my $limit = $PostgreSQL::Test::Utils::timeout_default;
my ($hin, $hout, $herr) = ('', '', '');
my $holder = IPC::Run::start(
	[ 'psql', '-XAtq', '-v', 'ON_ERROR_STOP=1', '-d', $standby->connstr('postgres') ],
	'<', \$hin, '>', \$hout, '2>', \$herr, IPC::Run::timeout($limit));
# (its first statement secures its own backend: it checks no more)
$hin .= "select 'connected';\n";
$holder->pump until $hout =~ /connected/;
$standby->safe_psql('postgres', "select setval('cfeed.change_id_timeline', 99)");
$hin .= "begin;\nalter sequence cfeed.change_id_timeline cache 1;\nselect 'held';\n";
$holder->pump until $hout =~ /held/ || $herr ne '';
my @writers = map {
	my %w = (out => '', err => '');
	$w{h} = IPC::Run::start(
		[ 'psql', '-XAtq', '-v', 'ON_ERROR_STOP=1', '-d', $standby->connstr('postgres'),
		  '-c', 'select cfeed.publish(1, 0) > 0' ],
		'>', \$w{out}, '2>', \$w{err}, IPC::Run::timeout($limit));
	\%w;
} 1 .. 2;
# both wait for the ALTER SEQUENCE (asked in the holder, which is secured);
# a writer that ended before it waited fails the test at once
my $deadline = time + $limit;
for (my $waiting = 0; $waiting < 2; )
{
	for my $w (@writers)
	{
		$w->{h}->pump_nb;
		die "a writer ended before it waited for the marker: $w->{out}$w->{err}"
		  unless $w->{h}->pumpable;
	}
	die 'the writers did not both wait for the marker' if time > $deadline;
	$hout = '';
	$hin .= "select 'waiting ' || count(*) from pg_locks "
	  . "where relation = 'cfeed.change_id_timeline'::regclass and not granted;\n";
	$holder->pump until $hout =~ /waiting (\d+)/;
	$waiting = $1;
	usleep(20_000) if $waiting < 2;
}
$hin .= "commit;\n\\q\n";
$holder->finish;
$_->{h}->finish for @writers;
is(join('|', map { "$_->{out}$_->{err}" } @writers), "t\n|t\n",
	'two first statements on a new timeline both secure it, without a deadlock');
is($standby->safe_psql('postgres', 'select last_value from cfeed.change_id_timeline'), '2',
	'the marker holds the timeline again');

$standby->stop;
done_testing();
