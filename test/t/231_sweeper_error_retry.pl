# test/t/231_sweeper_error_retry.pl
#
# A background sweep that fails is tried again a second later, whatever
# commits meanwhile (docs/operations.md: "the sweeper retries after a
# second").  Up to 1.8 every committing writer's wake-up cut the second
# short, so a failing sweep ran, and logged its ERROR, at the writers'
# pace: thousands of lines a second (a review: 54,618 in 5 s with two
# pgbench writers while a restored range feed waited for adopt_marks).
#
# The failure here: the sweep mark of a group with a shard stored in ranges
# deleted by hand (55000 until cfeed.adopt_marks makes it again).  Two
# writers commit for 3 s; the sweeper may log the error about once a
# second, and stamps again once the mark is back.

use strict;
use warnings;

use IPC::Run qw(run);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('retry');
$node->init;
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'cfeed'\n");
$node->start;
$node->safe_psql('postgres', q{
	CREATE EXTENSION cfeed;
	SET cfeed.default_storage = 'ranges';
	SELECT cfeed.create_feed('r', 1, 1);
	SELECT cfeed.publish(1, 0);
});
$node->poll_query_until('postgres', 'SELECT cfeed.head(1, 0) > 2000000000000000')
  or die 'the first change was not stamped';

$node->safe_psql('postgres', 'DELETE FROM cfeed.sweep_mark');
my $offset = -s $node->logfile;
my $script = $node->basedir . '/write.sql';
PostgreSQL::Test::Utils::append_to_file($script, "SELECT cfeed.publish(1, 0);\n");
my ($out, $err) = ('', '');
run([ 'pgbench', '-n', '-c', '2', '-T', '3', '-f', $script, '-h', $node->host, '-p', $node->port,
		'postgres' ], '>', \$out, '2>', \$err)
  or die "pgbench failed: $err";
my ($written) = $out =~ /number of transactions actually processed: (\d+)/;
cmp_ok($written, '>', 100, "the writers committed $written changes meanwhile");

my $log = substr(slurp_file($node->logfile), $offset);
my $errors = () = $log =~ /ERROR:  sweep group 0 has a shard stored in ranges but no sweep mark/g;
cmp_ok($errors, '>=', 1, 'the failing sweep logged its error');
cmp_ok($errors, '<=', 6, "about once a second in 3 s, not at each commit: $errors times");

$node->safe_psql('postgres', 'SELECT count(*) FROM cfeed.adopt_marks()');
$node->poll_query_until('postgres', qq{SELECT cfeed.head(1, 0) = 2000000000000001 + $written})
  or die 'not stamped after adopt_marks';
is($node->safe_psql('postgres', q{
	SELECT count(*) = count(DISTINCT change_id)
	   AND max(change_sequence_number) - min(change_sequence_number) + 1 = count(*)
	FROM cfeed.read(1, 0, NULL, 100000)}), 't', 'every change stamped once, gapless, after the mark was made again');

$node->stop;
done_testing();
