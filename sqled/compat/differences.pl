# sqled/compat/differences.pl: where the extension's pg_regress output
# differs on the SQL edition by design (docs/sql-edition.md): per file, the
# expected text of the C edition and the SQL edition's in its place.  Every
# file: there is no extension to drop.
(
	'*' => [
		[ "DROP EXTENSION cfeed;\n", "DROP EXTENSION cfeed;\nERROR:  extension \"cfeed\" does not exist\n" ],
	],
	# a row that a table's trigger writes while backfill numbers its rows:
	# the C edition publishes it, the SQL edition refuses it (its tracking
	# triggers are off meanwhile: docs/sql-edition.md)
	track => [
		[ "SELECT pg_temp.err(\$\$SELECT cfeed.backfill('t_write', 611)\$\$);\n err \n-----\n ok\n",
		  "SELECT pg_temp.err(\$\$SELECT cfeed.backfill('t_write', 611)\$\$);\n                                err                                \n-------------------------------------------------------------------\n 55000: a trigger wrote the table while backfill numbered its rows\n" ],
		[ " changes_of_row_100 \n--------------------\n                  1\n",
		  " changes_of_row_100 \n--------------------\n                  0\n" ],
	],
	# no extension whose configuration tables pg_dump dumps
	leases => [
		[ "WHERE e.extname = 'cfeed' AND c = 'cfeed.lease'::regclass;\n dumped \n--------\n      1\n",
		  "WHERE e.extname = 'cfeed' AND c = 'cfeed.lease'::regclass;\n dumped \n--------\n      0\n" ],
	],
	# (nor cfeed.failed_change and cfeed.failure_policy)
	dead_letters => [
		[ " failed_change  | t              | t      | t        |             0\n failure_policy | t              | t      | t        |             0\n",
		  " failed_change  | t              | f      | t        |             0\n failure_policy | t              | f      | t        |             0\n" ],
	],
	# its advisory locks are tagged (1667655013, feed_id) (sqled.sql checks
	# them); there is no extension owner (cfeed's tables' owner has its
	# privileges: sqled.sql)
	reshard => [
		[ " locktype |      mode       | granted \n----------+-----------------+---------\n advisory | AccessShareLock | t\n(1 row)\n",
		  " locktype | mode | granted \n----------+------+---------\n(0 rows)\n" ],
		[ " shard_for_locks \n-----------------\n               1\n",
		  " shard_for_locks \n-----------------\n               0\n" ],
		[ "SELECT extowner::regrole::text AS owner FROM pg_extension WHERE extname = 'cfeed' \\gset\nGRANT :\"owner\" TO regress_rs_admin;\nSET ROLE regress_rs_admin;\nSELECT * FROM cfeed.reshard(2, 3);\n shard | parent \n-------+--------\n     1 |      0\n     2 |      0\n     3 |      0\n(3 rows)\n\n",
		  "SELECT extowner::regrole::text AS owner FROM pg_extension WHERE extname = 'cfeed' \\gset\nno rows returned for \\gset\nGRANT :\"owner\" TO regress_rs_admin;\nERROR:  syntax error at or near \":\"\nLINE 1: GRANT :\"owner\" TO regress_rs_admin;\n              ^\nSET ROLE regress_rs_admin;\nSELECT * FROM cfeed.reshard(2, 3);\nERROR:  permission denied for function reshard\n" ],
		[ " shard | parent | closed \n-------+--------+--------\n     0 |        | t\n     1 |      0 | f\n     2 |      0 | f\n     3 |      0 | f\n(4 rows)\n",
		  " shard | parent | closed \n-------+--------+--------\n     0 |        | f\n(1 row)\n" ],
		# feed 2 was not resharded (no extension owner, above): shard_for
		# routes to its shard 0, which is open; the writer's lock has the
		# SQL edition's tag
		[ " reader_shard \n--------------\n            1\n",
		  " reader_shard \n--------------\n            0\n" ],
		[ " writer_shard \n--------------\n            1\n(1 row)\n\nSELECT count(*) AS writer_locks FROM pg_locks\nWHERE locktype = 'advisory' AND objsubid = 25448 AND classid = 2 AND pid = pg_backend_pid();\n writer_locks \n--------------\n            1\n",
		  " writer_shard \n--------------\n            0\n(1 row)\n\nSELECT count(*) AS writer_locks FROM pg_locks\nWHERE locktype = 'advisory' AND objsubid = 25448 AND classid = 2 AND pid = pg_backend_pid();\n writer_locks \n--------------\n            0\n" ],
		[ " INSERT INTO cfeed.change (feed_id, shard, change_id) VALUES (2, 0, 1)                            | 55000: shard 0 of feed 2 is closed\n",
		  " INSERT INTO cfeed.change (feed_id, shard, change_id) VALUES (2, 0, 1)                            | ok\n" ],
		[ "REVOKE :\"owner\" FROM regress_rs_admin;\n",
		  "REVOKE :\"owner\" FROM regress_rs_admin;\nERROR:  syntax error at or near \":\"\nLINE 1: REVOKE :\"owner\" FROM regress_rs_admin;\n               ^\n" ],
	],
	# there is no extension whose drop and create the session's cached
	# relation OIDs follow: the table stays tracked by feed 606
	track_write => [
		[ "BEGIN;\nDROP EXTENSION cfeed CASCADE;\nROLLBACK;\nINSERT INTO w_priv VALUES (100, 'after a rolled-back drop');\nDROP EXTENSION cfeed CASCADE;\nCREATE EXTENSION cfeed;\nRESET client_min_messages;\nSELECT cfeed.create_feed('track-w2', 2, feed_id => 608);\n create_feed \n-------------\n         608\n(1 row)\n\nSELECT cfeed.track('w_priv', 608);\n track \n-------\n \n(1 row)\n\nINSERT INTO w_priv VALUES (101, 'after a new CREATE EXTENSION');\nSELECT cfeed.publish(608, 1) > 0 AS published;\n published \n-----------\n t\n(1 row)\n\nSELECT feed_id, op, \"row\" ->> 'v' AS v FROM cfeed.change WHERE \"row\" IS NOT NULL ORDER BY change_id;\n feed_id |   op   |              v               \n---------+--------+------------------------------\n     608 | insert | after a new CREATE EXTENSION\n(1 row)\n",
		  "BEGIN;\nDROP EXTENSION cfeed CASCADE;\nERROR:  extension \"cfeed\" does not exist\nROLLBACK;\nINSERT INTO w_priv VALUES (100, 'after a rolled-back drop');\nDROP EXTENSION cfeed CASCADE;\nERROR:  extension \"cfeed\" does not exist\nCREATE EXTENSION cfeed;\nERROR:  schema \"cfeed\" already exists\nRESET client_min_messages;\nSELECT cfeed.create_feed('track-w2', 2, feed_id => 608);\n create_feed \n-------------\n         608\n(1 row)\n\nSELECT cfeed.track('w_priv', 608);\nERROR:  table \"w_priv\" is already tracked by feed 606\nDETAIL:  A table publishes to one feed.\nHINT:  Run cfeed.untrack() first to track it with another feed or key.\nINSERT INTO w_priv VALUES (101, 'after a new CREATE EXTENSION');\nSELECT cfeed.publish(608, 1) > 0 AS published;\n published \n-----------\n t\n(1 row)\n\nSELECT feed_id, op, \"row\" ->> 'v' AS v FROM cfeed.change WHERE \"row\" IS NOT NULL ORDER BY change_id;\n feed_id |   op   |              v               \n---------+--------+------------------------------\n     606 | insert | \n     606 | insert | \n     606 | insert | v\n     606 | insert | \n     606 | insert | \n     606 | update | \n     606 | delete | \n     606 | insert | 10\n     606 | insert | twenty\n     606 | insert | thirty\n     606 | update | 10x!\n     606 | insert | column grant\n     606 | insert | table grants\n     606 | insert | seen\n     606 | insert | not seen\n     606 | insert | indexed\n     606 | insert | indexed\n     606 | insert | indexed\n     606 | insert | indexed\n     606 | insert | indexed\n     606 | insert | indexed\n     606 | insert | indexed\n     606 | insert | indexed\n     606 | insert | indexed\n     606 | insert | indexed\n     606 | insert | indexed\n     606 | insert | indexed\n     606 | insert | indexed\n     606 | insert | indexed\n     606 | insert | indexed\n     606 | insert | indexed\n     606 | insert | indexed\n     606 | insert | indexed\n     606 | insert | indexed\n     606 | insert | indexed\n     606 | insert | indexed too\n     606 | insert | indexed too\n     606 | insert | indexed too\n     606 | insert | indexed too\n     606 | insert | indexed too\n     606 | insert | indexed too\n     606 | insert | indexed too\n     606 | insert | indexed too\n     606 | insert | indexed too\n     606 | insert | indexed too\n     606 | insert | indexed too\n     606 | insert | indexed too\n     606 | insert | indexed too\n     606 | insert | indexed too\n     606 | insert | indexed too\n     606 | insert | indexed too\n     606 | insert | indexed too\n     606 | insert | indexed too\n     606 | insert | indexed too\n     606 | insert | indexed too\n     606 | insert | after a rolled-back drop\n     606 | insert | after a new CREATE EXTENSION\n(57 rows)\n" ],
	],
	# cfeed.reshard waits for the writers in the lock's queue (the C function
	# waits for the holders without joining it): a writer that comes while
	# it waits queues behind it, and places its change by the new layout;
	# of two writers' transactions that reshard at once, the second to ask
	# is refused at once (deadlock detected), not the first after its
	# deadlock_timeout
	# a DELETE of a referenced row in REPEATABLE READ: the C edition's
	# cascade takes the latest snapshot and fails on a row committed since
	# (40001); PL/pgSQL sees only the transaction's, so the SQL edition
	# refuses such a DELETE of a feed's, shard's or epoch's rows (25000)
	'reference_race.spec' => [
		[ "step adelshard: DELETE FROM cfeed.shard_config WHERE feed_id = 704 AND shard = 1;\nERROR:  could not serialize access due to concurrent update\n",
		  "step adelshard: DELETE FROM cfeed.shard_config WHERE feed_id = 704 AND shard = 1;\nERROR:  cannot delete rows of cfeed.shard_config in a REPEATABLE READ or SERIALIZABLE transaction\n" ],
	],
	'reshard.spec' => [
		[ "step xpub: SELECT cfeed.publish(704, cfeed.shard_for(704, 'j'), 2) AS during;\nduring\n------\n     2\n(1 row)\n\nstep wc: COMMIT;\nstep oshards: SELECT shard, parent, closed, ended FROM cfeed.shard WHERE feed_id = 704 ORDER BY shard;\nshard|parent|closed|ended\n-----+------+------+-----\n    0|      |f     |f    \n(1 row)\n\nstep xc: COMMIT;\nstep rre: <... completed>\nshard|parent\n-----+------\n    1|     0\n    2|     0\n(2 rows)\n\nstep ochanges: SELECT change_id, shard FROM cfeed.change WHERE feed_id = 704 ORDER BY change_id;\nchange_id|shard\n---------+-----\n        1|    0\n        2|    0\n(2 rows)\n",
		  "step xpub: SELECT cfeed.publish(704, cfeed.shard_for(704, 'j'), 2) AS during; <waiting ...>\nstep wc: COMMIT;\nstep rre: <... completed>\nshard|parent\n-----+------\n    1|     0\n    2|     0\n(2 rows)\n\nstep xpub: <... completed>\nduring\n------\n     2\n(1 row)\n\nstep oshards: SELECT shard, parent, closed, ended FROM cfeed.shard WHERE feed_id = 704 ORDER BY shard;\nshard|parent|closed|ended\n-----+------+------+-----\n    0|      |t     |f    \n    1|     0|f     |f    \n    2|     0|f     |f    \n(3 rows)\n\nstep xc: COMMIT;\nstep ochanges: SELECT change_id, shard FROM cfeed.change WHERE feed_id = 704 ORDER BY change_id;\nchange_id|shard\n---------+-----\n        1|    0\n        2|    2\n(2 rows)\n" ],
		[ "step wre: SELECT count(*) AS children FROM cfeed.reshard(704, 2); <waiting ...>\nstep xre: SELECT count(*) AS children FROM cfeed.reshard(704, 2); <waiting ...>\nstep wre: <... completed>\nERROR:  deadlock detected\nstep xre: <... completed>\nchildren\n--------\n       2\n(1 row)\n\nstep wc: COMMIT;\nstep xc: COMMIT;\nstep oshards: SELECT shard, parent, closed, ended FROM cfeed.shard WHERE feed_id = 704 ORDER BY shard;\nshard|parent|closed|ended\n-----+------+------+-----\n    0|      |t     |f    \n    1|     0|f     |f    \n    2|     0|f     |f    \n(3 rows)\n\nstep ochanges: SELECT change_id, shard FROM cfeed.change WHERE feed_id = 704 ORDER BY change_id;\nchange_id|shard\n---------+-----\n        2|    0\n(1 row)\n\n",
		  "step wre: SELECT count(*) AS children FROM cfeed.reshard(704, 2); <waiting ...>\nstep xre: SELECT count(*) AS children FROM cfeed.reshard(704, 2);\nERROR:  deadlock detected\nstep wre: <... completed>\nchildren\n--------\n       2\n(1 row)\n\nstep wc: COMMIT;\nstep xc: COMMIT;\nstep oshards: SELECT shard, parent, closed, ended FROM cfeed.shard WHERE feed_id = 704 ORDER BY shard;\nshard|parent|closed|ended\n-----+------+------+-----\n    0|      |t     |f    \n    1|     0|f     |f    \n    2|     0|f     |f    \n(3 rows)\n\nstep ochanges: SELECT change_id, shard FROM cfeed.change WHERE feed_id = 704 ORDER BY change_id;\nchange_id|shard\n---------+-----\n        1|    0\n(1 row)\n\n" ],
	],
);
