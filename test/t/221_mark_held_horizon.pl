# test/t/221_mark_held_horizon.pl
#
# A sweep group's mark under a held xmin horizon (storage in ranges).
#
# Every sweep that stamps range changes stores the group's new mark and
# deletes the one before it (src/ranges.c).  While another transaction
# holds the xmin horizon, none of those dead versions can be pruned, so the
# group's key in sweep_mark_pkey gains one entry per sweep.  The sweep's
# look at the mark (cfeed_mark_load) and its delete of the old one used to
# walk all of them: under `held_xmin.sh STORAGE=ranges` the sweeper's CPU
# per change doubled and waits woke 1.22× later over a 60 s hold.  Now
# each is a few index probes whatever the number of dead versions.
#
# The test holds the horizon, runs 300 sweeps that each stamp one range
# change, then counts the index entries of sweep_mark_pkey that one more
# sweep reads (pg_stat_user_indexes.idx_tup_read counts every entry a scan
# returns, dead versions included).  It also checks that the marks still
# do their job: every change stamped once, in order, and a restored
# foreign mark still refused.  Retention's look for other clusters' marks
# (cfeed._marks_local) is counted the same way (it read 306 entries and
# blocks), and so is ended of the feed's closed shard 0 in cfeed.shard,
# after a reshard and 2,000 more sweeps under the hold (its SQL took the
# group's highest mark: 4,658 entries and blocks; cfeed._shard_ended takes
# it as a sweep does), and so is pending of cfeed.stats (a probe per group
# and cluster from the key's end).  Autovacuum is off: its reads of sweep_mark would be
# counted.

use strict;
use warnings;

use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('mark_held');
$node->init;
$node->append_conf('postgresql.conf', <<'EOC');
shared_preload_libraries = 'cfeed'
cfeed.enable_sweeper = off
cfeed.default_storage = ranges
autovacuum = off
EOC
$node->start;
$node->safe_psql('postgres', "create extension cfeed; select cfeed.create_feed('f', 1, 1)");

# n times one range change (to shard 0, or to shards 1 and 2 in turn once
# shard 0 is closed), then a sweep of it (the next transaction's sweep, as
# a sweep leaves range changes of its own transaction to the next).
sub publish_and_sweep
{
	my ($n, $shard) = @_;
	$shard //= '0';
	$node->safe_psql('postgres', qq{
		do \$\$ begin
			for i in 1 .. $n loop
				perform cfeed.publish(1, $shard);
				commit;
				perform cfeed.sweep();
				commit;
			end loop;
		end \$\$});
	return;
}

sub mark_entries_read
{
	return $node->safe_psql('postgres', q{
		select idx_tup_read from pg_stat_user_indexes where indexrelname = 'sweep_mark_pkey'});
}

my $holder = $node->background_psql('postgres');
$holder->query_safe('begin isolation level repeatable read; select pg_current_xact_id()');
publish_and_sweep(300);
is($node->safe_psql('postgres', 'select count(*) from cfeed.sweep_mark'), '1',
	'one mark alive after 300 sweeps');

my $before = mark_entries_read();
publish_and_sweep(1);
my $read = mark_entries_read() - $before;
cmp_ok($read, '<', 20,
	"one more sweep reads a few entries of sweep_mark_pkey ($read), not the 300 dead marks");

# Retention's look for other clusters' marks (cfeed._marks_local, before
# it deletes a range shard's old changes) does not walk them either: the
# entries of sweep_mark_pkey it reads and the blocks of sweep_mark it
# visits (a sequential scan would read no index entry, but every block).
my $io = q{
	select (select idx_tup_read from pg_stat_user_indexes where indexrelname = 'sweep_mark_pkey')
		 + (select heap_blks_hit + heap_blks_read from pg_statio_user_tables where relname = 'sweep_mark')};
sub mark_reads
{
	my ($sql, $expect, $name) = @_;
	my $before = $node->safe_psql('postgres', $io);
	is($node->safe_psql('postgres', $sql), $expect, $name);
	return $node->safe_psql('postgres', $io) - $before;
}
$read = mark_reads('select cfeed._marks_local(sweep_group) from cfeed.shard where shard = 0',
	't', "the group's marks are this cluster's");
cmp_ok($read, '<', 20, "retention's look at them reads a few entries and blocks ($read)");

# ended of a closed range shard: not while a change of it is unstamped,
# then once a sweep stamped it.  The feed is resharded (shard 0 closed,
# children 1 and 2), 2,000 more sweeps of the children's changes leave
# their dead marks in the group's key, and ended of shard 0 still reads a
# few entries and blocks of the marks.
$node->safe_psql('postgres', 'select cfeed.publish(1, 0); select cfeed.reshard(1, 2)');
is($node->safe_psql('postgres', 'select ended from cfeed.shard where shard = 0'), 'f',
	'the closed range shard has not ended while a change of it is unstamped');
$node->safe_psql('postgres', 'select cfeed.sweep()');
is($node->safe_psql('postgres', 'select ended from cfeed.shard where shard = 0'), 't',
	'it has ended once the change is stamped');
publish_and_sweep(2000, '1 + i % 2');
$read = mark_reads('select ended from cfeed.shard where shard = 0', 't',
	'it has still ended after 2,000 sweeps of its children');
cmp_ok($read, '<', 10,
	"its ended reads a few entries and blocks of the marks ($read), not 2,000 dead ones");

# cfeed.stats takes each group's highest mark the same way: its pending
# read all the group's marks, dead ones included, for the one with the
# highest next_xid (a sequential scan of the 2,000 dead marks' 27 blocks
# here).
$read = mark_reads('select sum(pending) from cfeed.stats', '0',
	'nothing is pending after the 2,000 sweeps');
cmp_ok($read, '<', 10,
	"cfeed.stats reads a few entries and blocks of the marks ($read), not 2,000 dead ones");
$holder->quit;

is( $node->safe_psql('postgres', q{
		select count(*) = 302 and count(distinct change_sequence_number) = 302
		   and max(change_sequence_number) - min(change_sequence_number) = 301
		from cfeed.read(1, 0, null, 1000)}),
	't', 'the 302 changes are stamped once each, gapless');
is( $node->safe_psql('postgres', q{
		select count(*) || ' ' || count(distinct (shard, change_sequence_number))
		from (select 1 shard, * from cfeed.read(1, 1, null, 1000)
			  union all select 2, * from cfeed.read(1, 2, null, 1000)) r}),
	'2000 2000', "the 2,000 changes of the children too");
is($node->safe_psql('postgres', 'select count(*) from cfeed.stats where pending > 0'), '0',
	'nothing is left pending');

# A mark of another cluster (as a restore brings one) is still refused,
# from either side of this cluster's identifier; the closed shard has not
# ended then (which of its changes are stamped is unknown until
# cfeed.adopt_marks()), and the view raises nothing.
for my $delta ('- 1', '+ 1')
{
	$node->safe_psql('postgres', qq{
		insert into cfeed.sweep_mark (sweep_group, next_xid, running, system_identifier)
		select (select sweep_group from cfeed.shard where feed_id = 1 and shard = 0), '1'::xid8, '{}', system_identifier $delta
		from pg_control_system()});
	my ($ret, $out, $err) = $node->psql('postgres', 'select * from cfeed.read(1, 0, null, 1)');
	like($err, qr/was made in another database cluster/,
		"a foreign mark (identifier $delta) is refused");
	is($node->safe_psql('postgres', 'select cfeed._marks_local(sweep_group) from cfeed.shard where shard = 0'),
		'f', 'and retention sees it');
	is($node->safe_psql('postgres', 'select ended from cfeed.shard where shard = 0'), 'f',
		'the closed shard has not ended meanwhile');
	$node->safe_psql('postgres', qq{
		delete from cfeed.sweep_mark
		where system_identifier = (select system_identifier $delta from pg_control_system())});
	is($node->safe_psql('postgres', 'select ended from cfeed.shard where shard = 0'), 't',
		'and has ended again once the mark is gone');
}

$node->stop;
done_testing();
