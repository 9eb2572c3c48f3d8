# test/t/235_two_phase_apply_wake.pl
#
# A subscriber that numbers a feed itself (docs/replication.md, topology B:
# the publication carries the inserts only) through a subscription with
# two_phase.  Its apply worker prepares each replicated prepared
# transaction, and commits it when the publisher does (COMMIT PREPARED), in
# a transaction of its own that goes through no hook of cfeed's: up to 1.9
# the subscriber's sweeper learned of the changes only at its fallback
# poll (60 s here; seen: nothing stamped 5 s after the commit).  Now the apply worker wakes it at such a commit, and
# the changes are stamped at once; a transaction committed in one step is
# too.  The publisher's own COMMIT PREPARED wakes its sweeper as before
# (the utility hook).
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use FindBin;
use lib $FindBin::RealBin;
use CfeedCheck;

my $CONF = "max_prepared_transactions = 10\ncfeed.fallback_interval = 60000\n";
my $SETUP = q{CREATE EXTENSION cfeed; SELECT cfeed.create_feed('f', 1);};

my $pub = cfeed_node('publisher', $CONF, allows_streaming => 'logical');
my $sub = cfeed_node('subscriber', $CONF);
$_->safe_psql('postgres', $SETUP) for ($pub, $sub);
$pub->safe_psql('postgres', q{
	CREATE PUBLICATION inserts FOR TABLE cfeed.change, cfeed.tracked_table (table_no, name)
		WITH (publish = 'insert');});
my $connstr = $pub->connstr . ' dbname=postgres';
$sub->safe_psql('postgres',
	"CREATE SUBSCRIPTION s CONNECTION '$connstr' PUBLICATION inserts WITH (two_phase = true)");
$sub->poll_query_until('postgres', q{SELECT subtwophasestate = 'e' FROM pg_subscription WHERE subname = 's'})
  or die 'two_phase not enabled';
for my $node ($pub, $sub)
{
	$node->poll_query_until('postgres', 'SELECT count(*) = 1 FROM cfeed.sweepers WHERE pid IS NOT NULL')
	  or die 'no sweeper on ' . $node->name;
}

# How long after $start the node has $count stamped changes and none
# pending (at most 5 s, a twelfth of the fallback poll).
sub stamped_after
{
	my ($node, $count, $start) = @_;
	while (time - $start < 5)
	{
		return time - $start
		  if $node->safe_psql('postgres', q{
			SELECT count(change_sequence_number) || '/' || count(*) FROM cfeed.change}) eq "$count/$count";
		usleep(10_000);
	}
	return undef;
}

# A prepared transaction on the publisher, prepared on the subscriber too.
$pub->safe_psql('postgres', q{
	BEGIN;
	SELECT count(cfeed.publish(1, 0)) FROM generate_series(1, 3);
	PREPARE TRANSACTION 'w1';});
$sub->poll_query_until('postgres', 'SELECT count(*) = 1 FROM pg_prepared_xacts')
  or die 'not prepared on the subscriber';
is($sub->safe_psql('postgres', 'SELECT count(*) FROM cfeed.change'), '0',
	'the prepared changes are not visible on the subscriber');
# An idle sweeper comes back once for its statistics report, at most 10 s
# after a pass that had some to send (pgstat_report_stat); then it sleeps
# the fallback poll.
sleep 11;

my $start = time;
$pub->safe_psql('postgres', q{COMMIT PREPARED 'w1'});
my $pub_s = stamped_after($pub, 3, $start);
ok(defined $pub_s, 'the publisher stamps its changes at its COMMIT PREPARED');
my $sub_s = stamped_after($sub, 3, $start);
ok(defined $sub_s, "the subscriber stamps them at the apply's COMMIT PREPARED, not at the fallback poll");
note(sprintf('stamped after %.3f s (publisher), %.3f s (subscriber)', $pub_s // -1, $sub_s // -1));
is($sub->safe_psql('postgres', 'SELECT count(*) FROM pg_prepared_xacts'), '0',
	'nothing is left prepared on the subscriber');

# A transaction committed in one step: the apply's commit records the
# changes and wakes the sweeper, as before.
$start = time;
$pub->safe_psql('postgres', 'SELECT count(cfeed.publish(1, 0)) FROM generate_series(1, 2)');
ok(defined stamped_after($sub, 5, $start), 'a transaction committed in one step is stamped at once');

# A prepared transaction rolled back leaves nothing on either side.
$pub->safe_psql('postgres', q{
	BEGIN;
	SELECT cfeed.publish(1, 0);
	PREPARE TRANSACTION 'w2';});
$sub->poll_query_until('postgres', 'SELECT count(*) = 1 FROM pg_prepared_xacts')
  or die 'not prepared on the subscriber';
$pub->safe_psql('postgres', q{ROLLBACK PREPARED 'w2'});
$sub->poll_query_until('postgres', 'SELECT count(*) = 0 FROM pg_prepared_xacts')
  or die 'not rolled back on the subscriber';
is($sub->safe_psql('postgres', q{
	SELECT count(*) || ' ' || max(change_sequence_number) - min(change_sequence_number) + 1
	FROM cfeed.change}), '5 5', 'the subscriber numbered its 5 changes without a gap');

done_testing();
