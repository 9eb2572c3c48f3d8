# test/t/223_serve_round_epoch_birth.pl
#
# The rounds of an all-shards SSE stream carry the feed epoch of the heads
# their query read, also when the database's first stamp (the birth of its
# feed epochs) becomes visible between the round query's statements.
#
# The round query read the feed epoch in a statement of its own, before the
# one that reads the heads (cfeed.stats).  When the first sweep became
# visible in between, the round sent its changes with ids of epoch 0, the
# next round found the first epoch, cfeed.resume_cursor placed the
# positions of epoch 0 before it (rewound to the shards' start), and the
# stream ended: a browser's resume sent the changes again (210_reshard's
# flake).  Now the epoch is a column of the heads' query
# (SERVE_EPOCH_COLUMN).  220_serve_epoch_birth part 2 only checks the
# outcome; here the interleaving is made every time:
#	- the sweeper is off while 6 changes are written; a stream at _first
#	  asks for rounds every few ms (none can end: changes are pending);
#	- synchronous_standby_names names a standby that does not exist, and
#	  the sweeper (cfeed.sweep_synchronous_commit on) stamps: its commit,
#	  whose clock was read before, waits for that standby, invisible;
#	- a session locks cfeed.feed, which the heads' query (cfeed.stats)
#	  reads and the statement before it does not: a round query waits there,
#	  having begun after the sweep's clock;
#	- the standby is no longer waited for (the sweep is visible), then the
#	  lock goes: the round's heads are past the first stamp, and its end
#	  (its now()) after it.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep time);
use lib 'test/t';
use CfeedCheck;
use ServeHelper;

plan skip_all => 'cfeed command not built' unless -x cfeed_binary();

# allows_streaming: wal senders, without which no commit waits for a standby
my $node = cfeed_node('serve_round_epoch_birth', '', allows_streaming => 1);
$node->safe_psql('postgres', "create extension cfeed; select cfeed.create_feed('births', 2, 1)");
is($node->safe_psql('postgres', 'select cfeed.epoch()'), '0',
	"no feed epoch before the database's first stamp");

sub reload
{
	my ($sql) = @_;
	$node->safe_psql('postgres', "$sql; select pg_reload_conf()");
	return;
}

# Wait (pumping the stream) until cond() holds; false at the deadline.
sub wait_for
{
	my ($cond, $stream) = @_;
	my $until = time + 60;
	while (time < $until)
	{
		$stream->pump_nb if $stream->pumpable;
		return 1 if $cond->();
		usleep(20_000);
	}
	return 0;
}

reload('alter system set cfeed.enable_sweeper = off');
$node->poll_query_until('postgres',
	q{select count(*) = 0 from pg_stat_activity where backend_type like 'cfeed sweeper%'})
  or die 'the sweeper did not stop';
$node->safe_psql('postgres', 'select cfeed.publish(1, g % 2) from generate_series(1, 6) g');

my $dir = PostgreSQL::Test::Utils::tempdir();
my $token = 'round-birth-0123456789abcdef';
write_tokens("$dir/tokens", "$token births t");
my $gw = start_gateway(dsn => $node->connstr('postgres'), tokens => "$dir/tokens");
my $text = '';
my $stream = start_stream("$gw->{url}/feeds/births?cursor=_first", $token, \$text,
	Accept => 'text/event-stream');
ok(wait_for(sub { $text =~ /^id: _first\@0$/m }, $stream), 'the stream began at _first@0')
  or diag($text);

# The first sweep: stamped, its commit waiting for a standby, invisible.
reload(q{alter system set synchronous_standby_names = 'nobody'});
$node->poll_query_until('postgres', q{select current_setting('synchronous_standby_names') = 'nobody'})
  or die 'synchronous_standby_names not set';
reload('alter system set cfeed.enable_sweeper = on');
ok( $node->poll_query_until('postgres',
		q{select count(*) > 0 from pg_stat_activity
		  where backend_type like 'cfeed sweeper%' and wait_event = 'SyncRep'}),
	"the first sweep's commit waits for the standby");

my $lock = $node->background_psql('postgres');
$lock->query_safe('begin; lock table cfeed.feed in access exclusive mode');
ok( $node->poll_query_until('postgres',
		q{select count(*) > 0 from pg_locks l join pg_stat_activity a using (pid)
		  where l.relation = 'cfeed.feed'::regclass and not l.granted
		    and a.query like '%from cfeed.stats t join cfeed.shard s%'}),
	"a round's heads query waits for the lock");
reload('alter system reset synchronous_standby_names');
ok( $node->poll_query_until('postgres',
		'select count(*) = 0 from cfeed.change where change_sequence_number is null'),
	'the first sweep is visible');
my $epoch = $node->safe_psql('postgres', 'select cfeed.epoch()');
cmp_ok($epoch, '>', 0, 'and began the first feed epoch');
$lock->query_safe('commit');
$lock->quit;

ok(wait_for(sub { scalar(sse_changes($text)) >= 6 || !$stream->pumpable }, $stream),
	'the stream sent the 6 changes');
my ($events) = sse_events($text);
is(scalar(@$events), 6, '6 changes') or diag($text);
is_deeply([ grep { $_->{id} !~ /\@\Q$epoch\E$/ } @$events ], [],
	"every change's id carries the first epoch ($epoch)") or diag($text);
$node->safe_psql('postgres', 'select cfeed.publish(1, 0)');
ok(wait_for(sub { scalar(sse_changes($text)) >= 7 || !$stream->pumpable }, $stream),
	'the stream goes on with the next change') or diag($text);
$stream->kill_kill;

stop_gateway($gw);
$node->stop;
done_testing();
