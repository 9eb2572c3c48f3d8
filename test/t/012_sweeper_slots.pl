# A sweep group the launcher cannot start a sweeper for shows in
# cfeed.sweepers: a row with pid null and why (cfeed.max_workers reached,
# or no background worker slot), until one starts.  Before, only the
# server log said that a database's changes went unstamped.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('slots');
$node->init;
$node->append_conf('postgresql.conf', qq{
shared_preload_libraries = 'cfeed'
cfeed.max_workers = 2
});
$node->start;
$node->safe_psql('postgres', q{
	CREATE EXTENSION cfeed;
	SELECT cfeed.create_feed('zero', 1);
	SELECT cfeed.create_feed('one', 1, sweep_group => 1);
	SELECT cfeed.create_feed('two', 1, sweep_group => 2);
	SELECT cfeed.publish(3, 0);
});

ok( $node->poll_query_until('postgres', q{
		SELECT count(*) = 1 FROM cfeed.sweepers
		WHERE sweep_group = 2 AND pid IS NULL AND last_error LIKE '%cfeed.max_workers reached%'}),
	'a group without a sweeper shows, pid null, saying why');
is($node->safe_psql('postgres', q{
	SELECT string_agg(sweep_group::text, ',' ORDER BY sweep_group) FROM cfeed.sweepers WHERE pid IS NOT NULL}),
	'0,1', 'the two groups that got the two workers run');
is($node->safe_psql('postgres', 'SELECT cfeed.head(3, 0) = start_sequence_number FROM cfeed.shard WHERE feed_id = 3'),
	't', 'and the change of the group without one is not stamped');
like(slurp_file($node->logfile), qr/cannot start a sweeper for group 2 of database \d+: cfeed.max_workers \(2\) reached/,
	'the log says so too');

# group 1 goes away: its worker stops, group 2 gets one, and its row its pid
$node->safe_psql('postgres', 'DELETE FROM cfeed.feed WHERE feed_id = 2');
ok( $node->poll_query_until('postgres', q{
		SELECT count(*) = 1 AND bool_and(pid IS NOT NULL) FROM cfeed.sweepers WHERE sweep_group = 2}),
	'once a worker is free, the group gets its sweeper and the row its pid');
ok($node->poll_query_until('postgres',
		'SELECT cfeed.head(3, 0) > start_sequence_number FROM cfeed.shard WHERE feed_id = 3'),
	'which stamps the change');
is($node->safe_psql('postgres', 'SELECT count(*) FROM cfeed.sweepers WHERE pid IS NULL'), '0',
	'no row without a pid is left');

$node->stop;
done_testing();
