# A sweep whose commit waits for a synchronous standby does not hold up the
# cluster's NOTIFYs (src/notify.c, "A synchronous standby";
# docs/replication.md).  PostgreSQL holds its notification lock from a
# notifying commit's start to its end; before 1.9's fix the background
# sweeper's NOTIFYs were in its stamping transaction, so while it waited
# for a synchronous standby that was gone, a NOTIFY in any database of the
# cluster waited too.  Now the sweeper sends them right after the stamps
# commit, in a transaction that waits for no standby: a LISTENer is still
# notified of the new head once the stamps are committed.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run qw(start);
use Time::HiRes qw(time);
use FindBin;
use lib $FindBin::RealBin;
use CfeedCheck;
use ServeHelper qw(cfeed_binary);

# writers commit locally; the sweeper's stamps wait for standby "ghost",
# which never comes
my $node = cfeed_node('sync_notify', "synchronous_standby_names = 'ghost'\nsynchronous_commit = local\n",
	allows_streaming => 1);
$node->safe_psql('postgres', q{
	CREATE EXTENSION cfeed;
	SELECT cfeed.create_feed('f', 1);
	CREATE DATABASE other;});

# a LISTENer of the shard (cfeed tail LISTENs on a direct connection), with
# no timeout to read anyway before a minute has passed
my ($out, $err) = ('', '');
my $tail = start([ cfeed_binary(), 'tail', '--dbname', $node->connstr('postgres'), '--feed', 'f',
	'--from', 'now', '--max', '1', '--wait-ms', '60000' ], '>', \$out, '2>', \$err);
$node->poll_query_until('postgres', q{
	SELECT count(*) > 0 FROM pg_stat_activity WHERE application_name = 'cfeed' AND state = 'idle'
	AND query LIKE '%cfeed.%'}) or die 'cfeed tail did not start';

$node->safe_psql('postgres', 'SELECT cfeed.publish(1, 0)');
$node->poll_query_until('postgres', q{
	SELECT count(*) > 0 FROM pg_stat_activity WHERE backend_type LIKE 'cfeed sweeper%' AND wait_event = 'SyncRep'})
  or die 'the sweeper does not wait for the standby';

my ($rc, $stdout, $stderr) = $node->psql('other', q{SET lock_timeout = '5s'; SELECT pg_notify('elsewhere', 'x')},
	timeout => 60);
is($rc, 0, 'a NOTIFY in another database does not wait for the sweep waiting for its standby')
  or diag $stderr;
is($node->safe_psql('postgres', 'SELECT cfeed.head(1, 0)'), '2000000000000000',
	'the stamp is not visible while its commit waits for the standby');

# the standby requirement dropped: the sweep's commit ends, and the
# LISTENer is notified (not by its one-minute read)
my $released = time;
$node->safe_psql('postgres', q{ALTER SYSTEM SET synchronous_standby_names = ''; SELECT pg_reload_conf();});
$tail->finish;
my $took = time - $released;
is($tail->result(0), 0, 'cfeed tail printed the change and exited');
like($out, qr/"change_sequence_number":2000000000000001/, 'cfeed tail printed the stamped change');
ok($took < 30, sprintf('the LISTENer was notified %.1f s after the commit could end (not after its 60 s read)', $took));
unlike(slurp_file($node->logfile), qr/notification queue has room again/,
	'no LOG of a full queue for the notifications sent after the commit');

$node->stop;
done_testing();
