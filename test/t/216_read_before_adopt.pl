# Reading a restored range feed between the restore and
# cfeed.adopt_marks(): the restored rows carry the restoring transaction's
# xid, the stamps the dumped writers', so read() would find none of the
# stamped changes, and a consumer group whose first acquire came then
# would start at the head and never read the feed's history (seen failing
# so: 0 of 5).  read() of a range shard whose group has a foreign mark is
# refused (55000), and so is that acquire; after the adoption both give
# the five.
#
# The old cluster takes xids first, so that the restoring transaction's
# xid is none of the dumped writers' (two fresh clusters count xids alike:
# then read() finds, by chance, the changes of the writer whose xid the
# restore has).
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use CfeedCheck;

my $old = cfeed_node('old', "cfeed.enable_sweeper = off\n");
$old->safe_psql('postgres', q{
	CREATE EXTENSION cfeed;
	DO $$ BEGIN FOR i IN 1..300 LOOP PERFORM pg_current_xact_id(); COMMIT; END LOOP; END $$;
	SET cfeed.default_storage = ranges;
	SELECT cfeed.create_feed('ranged', 1);
	SELECT count(cfeed.publish(1, 0, g)) FROM generate_series(1, 5) g;
	SELECT count(*) FROM cfeed.sweep(0);});
is($old->safe_psql('postgres', q{SELECT count(*) FROM cfeed.read(1, 0)}), '5', 'five stamped changes');
my $new = restored_copy($old);

my ($rc, $out, $err) = $new->psql('app', q{SELECT count(*) FROM cfeed.read(1, 0)});
like($err, qr/a sweep mark of sweep group 0 was made in another database cluster/, 'read() before the adoption is refused');
($rc, $out, $err) = $new->psql('app', q{SELECT count(*) FROM cfeed.acquire('late', 1, 'm')});
like($err, qr/made in another database cluster/, 'and so is a group\'s first acquire');
$new->safe_psql('app', 'SELECT count(*) FROM cfeed.adopt_marks()');
is($new->safe_psql('app', q{SELECT count(*) FROM cfeed.read(1, 0)}), '5', 'read() after the adoption gives the five');
$new->safe_psql('app', q{SELECT count(*) FROM cfeed.acquire('late', 1, 'm')});
is($new->safe_psql('app', q{SELECT count(r.*) FROM cfeed.lease l, cfeed.read(1, 0, l.cursor) r WHERE l.group_name = 'late'}), '5',
	'a group whose first acquire comes after it reads the five from its cursor, as in the dumped cluster');

$old->stop;
$new->stop;
done_testing();
