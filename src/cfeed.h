/*-------------------------------------------------------------------------
 *
 * cfeed.h
 *	  Declarations shared between the files of the cfeed extension, grouped
 *	  by the file that defines them (docs/design.md maps the files).
 *
 *-------------------------------------------------------------------------
 */
#ifndef CFEED_H
#define CFEED_H

#include "postgres.h"

#include "access/htup.h"
#include "access/skey.h"
#include "access/transam.h"
#include "access/xlogdefs.h"
#include "datatype/timestamp.h"
#include "executor/tuptable.h"
#include "nodes/execnodes.h"
#include "nodes/parsenodes.h"
#include "storage/lockdefs.h"
#include "utils/guc.h"
#include "utils/relcache.h"
#include "utils/snapshot.h"

#include "compat.h"

/* Names of the extension's objects (schema cfeed). */
#define CFEED_SCHEMA			"cfeed"
#define CFEED_CHANNEL_PREFIX	"cfeed_"

/* Columns of cfeed.feed. */
#define Anum_feed_feed_id			1

/* Columns of cfeed.shard_config (src/sql: the install and update scripts). */
#define Anum_shard_feed_id			1
#define Anum_shard_shard			2
#define Anum_shard_sweep_group		3
#define Anum_shard_longpoll			4
#define Anum_shard_start			5
#define Anum_shard_deleted_head		6
#define Anum_shard_parent			7	/* 1.9 */
#define Anum_shard_closed			8	/* 1.9 */
#define Anum_shard_storage			9	/* 1.9 */
#define Anum_shard_changes_deleted	10	/* 1.9 */

/* Columns of cfeed.stamp (src/sql/cfeed--1.8--1.9.sql). */
#define Anum_stamp_feed_id			1
#define Anum_stamp_shard			2
#define Anum_stamp_first_number		3
#define Anum_stamp_last_number		4
#define Anum_stamp_stamped_at		5
#define Anum_stamp_first_change_id	6
#define Anum_stamp_change_id_deltas	7
#define Anum_stamp_first_writer_xid	8
#define Anum_stamp_writer_xid_deltas 9
#define Anum_stamp_image_tables		10	/* its changes' images' tables */

/* Columns of cfeed.change (src/sql: the install and update scripts). */
#define CHANGE_NATTS				10
#define Anum_change_feed_id			1
#define Anum_change_shard			2
#define Anum_change_change_id		3
#define Anum_change_sequence		4
#define Anum_change_stamped_at		5
#define Anum_change_written_at		6
#define Anum_change_writer_xid		7
#define Anum_change_tbl				8	/* tbl, op and row: schema.c's inline images;
										 * tbl a number (table_numbers.c) */
#define Anum_change_op				9
#define Anum_change_row				10

/* A shard's row of cfeed.shard, as the C code needs it. */
typedef struct CfeedShard
{
	int32		feed_id;
	int32		shard;
	int32		sweep_group;
	bool		longpoll;
	int64		last_number;	/* head: last_change_sequence_number */
	int64		start_number;	/* start_sequence_number */
	int64		floor_number;	/* numbers are issued above it: the start, or
								 * a higher deleted head (deleted_head) */
	int32		parent;			/* the shard it continues, -1 when none */
	bool		closed;			/* receives no change any more */
	bool		ranges;			/* storage 'ranges': numbered by cfeed.stamp rows */
	bool		stamps_whole;	/* ranges: no stamp names a deleted change
								 * (changes_deleted is false) */
} CfeedShard;

/* What one sweep did to one shard. */
typedef struct CfeedSweptShard
{
	int32		feed_id;
	int32		shard;
	int32		change_count;
	int64		last_number;
	int64		lag_ms;
} CfeedSweptShard;

/* The result of one sweep of a group. */
typedef struct CfeedSweepResult
{
	int			nshards;		/* entries used in shards[] */
	CfeedSweptShard *shards;	/* palloc'd in the caller's context */
	int64		change_count;	/* changes stamped, all shards */
	bool		several_writers;	/* they are of more than one transaction */
	int64		max_lag_ms;		/* oldest stamped change's age at stamping */
	int			nexhausted;		/* entries used in exhausted[] */
	CfeedSweptShard *exhausted; /* shards out of numbers: change_count is
								 * the changes left pending, last_number
								 * the head */
} CfeedSweepResult;

/* How often the launcher rescans pg_database for new databases. */
#define CFEED_DB_SCAN_MS		10000

/* settings.c: the cfeed.* settings */
extern void cfeed_define_settings(bool preload);
extern int	cfeed_sweep_batch_size;
extern int	cfeed_max_workers;
extern bool cfeed_enable_sweeper;
extern int	cfeed_launcher_interval;
extern int	cfeed_fallback_interval;
extern int	cfeed_poll_interval;
extern int	cfeed_sweep_delay;
extern int	cfeed_sweep_gather;
extern int	cfeed_sweep_gather_changes;
extern int	cfeed_retention_interval;
extern int	cfeed_sweep_synchronous_commit;
extern int	cfeed_default_storage;

/* settings.c: cfeed.sweep_synchronous_commit's levels */
typedef enum CfeedSyncCommit
{
	CFEED_SYNC_LOCAL,
	CFEED_SYNC_REMOTE_WRITE,
	CFEED_SYNC_ON,
	CFEED_SYNC_REMOTE_APPLY
} CfeedSyncCommit;
extern const struct config_enum_entry cfeed_sync_commit_options[];

/* settings.c: cfeed.default_storage's values (shard_config.storage) */
typedef enum CfeedStorage
{
	CFEED_STORAGE_ROWS,
	CFEED_STORAGE_RANGES
} CfeedStorage;

/* schema.c: what this database's version of cfeed's schema has */
typedef enum CfeedSchemaFeature
{
	CFEED_SCHEMA_INLINE_IMAGES,	/* cfeed.change."row" and its image columns */
	CFEED_SCHEMA_READ_GRANTS,	/* cfeed.read_grant: per-feed read access */
	CFEED_SCHEMA_EPOCHS,		/* cfeed.epoch: feed epochs; change_guard ALWAYS */
	CFEED_SCHEMA_WRITE_GRANTS,	/* cfeed.write_grant: per-feed write access */
	CFEED_SCHEMA_CHANGE_ID_TIMELINE,	/* change ids moved on new timelines */
	CFEED_SCHEMA_TABLE_NUMBERS,	/* cfeed.tracked_table: cfeed.change.tbl a number */
	CFEED_SCHEMA_RANGES,		/* cfeed.stamp, cfeed.sweep_mark: storage in ranges */
	CFEED_SCHEMA_FEATURES
} CfeedSchemaFeature;
extern Oid	cfeed_schema_relid(CfeedSchemaFeature feature);
extern bool cfeed_schema_has(CfeedSchemaFeature feature);

/* epoch.c */
extern void cfeed_epoch_begin(void);

/* change_id.c */
extern bool cfeed_change_ids_check(void);
extern void cfeed_change_ids_guard(void);
extern void cfeed_change_ids_init(void);

/* catalog.c */
extern Oid	cfeed_schema_oid(bool missing_ok);
extern Oid	cfeed_relid(const char *relname);
extern Oid	cfeed_relid_locked(const char *relname, LOCKMODE lockmode);
extern Relation cfeed_table_open(const char *relname, LOCKMODE lockmode);
extern Relation cfeed_index_open(const char *relname, LOCKMODE lockmode);
extern Oid	cfeed_find_extension_owner(void);
extern Oid	cfeed_extension_owner(void);
extern int64 cfeed_shard_head(const CfeedShard *sh, int64 hint, Snapshot snapshot,
							  TimestampTz *head_at);
extern bool cfeed_number_probe(Relation rel, Relation index, Snapshot snapshot, int32 feed_id,
							   int32 shard, AttrNumber number_att, StrategyNumber strategy,
							   RegProcedure proc, int64 bound, ScanDirection dir, int64 *number,
							   TimestampTz *stamped_at, bool *second);
extern bool cfeed_shard_fetch(int32 feed_id, int32 shard, Snapshot snapshot,
							  bool with_head, CfeedShard *out);
extern void cfeed_shard_get(int32 feed_id, int32 shard, bool check_select,
							CfeedShard *out);
extern void cfeed_shard_missing(int32 feed_id, int32 shard, int sqlerrcode,
								const char *detail);
extern bool cfeed_shard_has_changes(int32 feed_id, int32 shard, Snapshot snapshot);
extern bool cfeed_shard_has_after(int32 feed_id, int32 shard, int64 bound, Snapshot snapshot,
								  int64 *first);
extern bool cfeed_ranges_has_after(int32 feed_id, int32 shard, int64 bound,
								   Snapshot snapshot, int64 *first);
extern bool cfeed_shard_pending_writer(const CfeedShard *sh, Snapshot snapshot,
									   FullTransactionId *writer);
extern bool cfeed_shard_has_pending(const CfeedShard *sh, Snapshot snapshot);
extern bool cfeed_shard_column(TupleDesc desc, HeapTuple tup, int attnum,
							   const char *attname, Datum *value);
extern bool cfeed_feed_exists(int32 feed_id);
extern bool cfeed_feed_mine(int32 feed_id);
extern bool cfeed_sweep_group_in_use(int32 sweep_group);
extern Snapshot cfeed_fresh_snapshot(void);
extern void cfeed_check_select(const char *relname);

/* One pending change found by a sweep (sweep.c), stamped by stamp.c. */
typedef struct CfeedPendingChange
{
	int32		feed_id;
	int32		shard;
	int64		change_id;
	ItemPointerData tid;
	TimestampTz written_at;
	FullTransactionId writer_xid;
	int64		number;			/* assigned sequence number */
	TimestampTz stamped_at;		/* and stamped_at (its shard's, sweep.c) */
	bool		ranges;			/* of a shard stored in ranges */
	bool		locked;			/* another transaction holds its row lock */
	bool		image;			/* it has a row image (tbl is not null) */
	int32		image_table;	/* then its table's number, tbl (any int: an
								 * OID above 2^31 kept by 1.8 is negative) */
} CfeedPendingChange;

/* sweep.c */
extern bool cfeed_sweep_group(int32 sweep_group, bool nowait, Oid owner,
							  CfeedSweepResult *result);
extern void cfeed_check_sweep_isolation(void);

/* notify.c */
extern void cfeed_notify_head(const CfeedShard *shard, int64 head);
extern void cfeed_notify_defer_sync(void);
extern void cfeed_notify_send_owed(void);

/* sweep_report.c */
extern char *cfeed_sweep_exhausted_message(CfeedSweepResult *result);
extern void cfeed_sweep_report_exhausted(CfeedSweepResult *result);

/* watermark.c: a sweep group's xid watermark */
typedef struct CfeedGroupWatermark CfeedGroupWatermark;
extern CfeedGroupWatermark *cfeed_watermark_get(int32 sweep_group);
extern void cfeed_watermark_probes(CfeedGroupWatermark *gw,
								   void (*probe) (ScanKey key, void *arg),
								   void *arg);
extern void cfeed_watermark_propose(CfeedGroupWatermark *gw, Snapshot snapshot,
									const FullTransactionId *left, int nleft);

/* A sweep group's stored mark (ranges.c): writer_xids >= xmax or in xip are unstamped. */
typedef struct CfeedMark
{
	FullTransactionId xmax;
	int			nxip;
	FullTransactionId *xip;		/* sorted, unique */
	TransactionId stored_by;	/* the (sub)transaction that stored this
								 * version of its row (its raw xmin) */
} CfeedMark;
extern void cfeed_sort_fxids(FullTransactionId *xids, int *n);
extern void cfeed_watermark_adopt(CfeedGroupWatermark *gw, const CfeedMark *mark);
extern bool cfeed_watermark_covers(CfeedGroupWatermark *gw, FullTransactionId xid);
extern void cfeed_watermark_proposal(CfeedGroupWatermark *gw, CfeedMark *mark);

/* ranges.c: storage in ranges */
extern bool cfeed_mark_load(int32 sweep_group, Snapshot snapshot, CfeedMark *mark);
extern bool cfeed_mark_load_local(int32 sweep_group, Snapshot snapshot, CfeedMark *mark);
extern bool cfeed_mark_foreign(int32 sweep_group, Snapshot snapshot);
extern bool cfeed_mark_load_any(int32 sweep_group, Snapshot snapshot, CfeedMark *mark,
								bool *foreign);
extern void cfeed_mark_store(int32 sweep_group, const CfeedMark *mark,
							 FullTransactionId prev);
extern void cfeed_ranges_stamp(const CfeedPendingChange *changes, int n);
extern int	cfeed_stamp_entries(HeapTuple tup, TupleDesc desc, int64 **ids,
								FullTransactionId **xids);
extern int64 cfeed_ranges_cursor_at(int32 feed_id, int32 shard, TimestampTz at,
									 Snapshot snapshot);

/* lock_guard.c */
extern PlannedStmt *cfeed_guard_lock_statement(PlannedStmt *pstmt, bool top_level);

/* persistence_guard.c */
extern void cfeed_guard_alter_table(AlterTableStmt *stmt);
extern void cfeed_check_logged(Oid relid);

/* stamp.c: a sweep's write step */
extern bool cfeed_stamp_would_wait(TupleTableSlot *slot);
extern int	cfeed_stamp(Relation rel, CfeedPendingChange *changes, int n,
						Snapshot snapshot);
extern void cfeed_stamp_commit_level(void);
extern bool cfeed_stamping(void);

/* The most shards (and shard numbers) a feed has. */
#define CFEED_MAX_SHARDS		65536

/*
 * shards.c: the shard of a key, the feeds' layouts, the shards lock.  A
 * feed's layout as routing sees it: shards 0..count-1, the open ones
 * first_open..count-1 (keys go to first_open + hash mod their number), the
 * closed ones below (cfeed_check_layout says when it is not so).
 */
typedef struct CfeedLayout
{
	int32		count;			/* shards, open and closed */
	int32		max_shard;		/* the highest, -1 when none */
	int32		first_open;		/* the lowest open one, -1 when none */
	int32		max_closed;		/* the highest closed one, -1 when none */
} CfeedLayout;

extern int32 cfeed_key_shard(const char *key, int len, int32 first, int32 count);
extern bool cfeed_shards_guarded(void);
extern void cfeed_feed_layout(int32 feed_id, CfeedLayout *layout);
extern void cfeed_check_layout(int32 feed_id, const CfeedLayout *layout);
extern int32 cfeed_feed_shard_count(int32 feed_id);
extern void cfeed_shard_closed(int32 feed_id, int32 shard);
extern int32 cfeed_shard_of_key(int32 feed_id, const char *key, int keylen);
extern int32 cfeed_shard_locked(int32 feed_id, const char *key, int keylen,
								int32 shard);
extern void cfeed_shard_check(int32 feed_id, int32 shard);

/* direct.c: heap and index writes of cfeed.change */
extern bool cfeed_direct_ok(Relation rel, CmdType cmd);
extern bool cfeed_insert_needs_grant(Relation rel);
extern void cfeed_direct_insert(Relation rel, TupleTableSlot *slot);
extern bool cfeed_direct_update(Relation rel, ItemPointer tid,
								TupleTableSlot *newslot, Snapshot snapshot);

/* One change to append (append.c). */
typedef struct CfeedChange
{
	int32		feed_id;
	int32		shard;			/* with key NULL: the shard the caller names */
	const char *key;			/* else the change goes to this key's shard */
	int			keylen;
	int64		change_id;
	Oid			tbl;			/* cfeed.change.tbl: the number of the tracked
								 * table (rel, or its root), or its OID in a
								 * schema without table numbers */
	const char *op;				/* 'insert', 'update' or 'delete' */
	Relation	rel;			/* with tuple, the row's image; NULL: none */
	HeapTuple	tuple;
} CfeedChange;

/* append.c */
extern void cfeed_append(const CfeedChange *change);

/* order_by.c: backfill's order_by */
extern char *cfeed_order_by_clause(Oid relid, const char *given);

/* row_image.c */
extern Datum cfeed_row_image(Oid relid, HeapTuple tuple, TupleDesc desc);

/* table_numbers.c: the numbers cfeed.change.tbl holds */
extern int32 cfeed_table_number(Oid relid, bool *settled);
extern void cfeed_table_number_refresh(Oid relid);
extern Oid	cfeed_table_of_number(FmgrInfo *flinfo, int32 tbl);

/* wait.c */
extern int64 cfeed_wait_for_head(int32 feed_id, int32 shard, int64 cursor,
								 int timeout_ms);

/* read_access.c */
extern bool cfeed_may_read_feed(int32 feed_id);
extern bool cfeed_may_read_every_feed(void);
extern bool cfeed_may_read_table(Oid relid);
extern void cfeed_check_read(int32 feed_id);
extern bool cfeed_may_write_feed(int32 feed_id);
extern void cfeed_check_write(int32 feed_id);

/* guard.c: the trigger functions' check of how they are fired */
extern struct TriggerData *cfeed_trigger_get(FunctionCallInfo fcinfo, const char *name,
											 const char *relname);
extern void cfeed_trigger_on(struct TriggerData *trigdata, const char *name, const char *relname);

/* upstream.c: range shards numbered by a publisher (topology A in ranges) */
#define CFEED_UPSTREAM_WRITER	FullTransactionIdFromEpochAndXid(0, FrozenTransactionId)
extern bool cfeed_applying_stamps(void);
extern FullTransactionId cfeed_upstream_writer(int32 feed_id, int32 shard);

/* guard.c: the row images a statement of cfeed's own may write */
typedef struct CfeedImageScope
{
	Oid			tbl;			/* a cfeed.change.tbl; InvalidOid: none */
	int32		feed_id;
} CfeedImageScope;
extern CfeedImageScope cfeed_image_scope_enter(Oid tbl, int32 feed_id);
extern void cfeed_image_scope_leave(CfeedImageScope previous);

/* spi.c: arguments' checks (22004, 22023), SPI with search_path pinned, as the owner */
typedef struct CfeedSavedUser
{
	Oid			userid;
	int			sec_context;
} CfeedSavedUser;

extern CfeedSavedUser cfeed_become_user(Oid userid);
extern CfeedSavedUser cfeed_become_owner(void);
extern void cfeed_restore_user(CfeedSavedUser saved);
extern void cfeed_check_nonnegative(int32 value, const char *argname);
extern void cfeed_check_wait(const char *fn, int32 ms, const char *argname);
extern void cfeed_require_arg(FunctionCallInfo fcinfo, int argno,
							  const char *argname);
extern int	cfeed_spi_connect(void);
extern void cfeed_spi_finish(int nestlevel);
extern int	cfeed_plan_settings_off(const char *const *settings, int n);
extern SPIPlanPtr cfeed_spi_plan(SPIPlanPtr *plan, const char *sql, int nargs,
								 Oid *types);
extern bool cfeed_spi_run(SPIPlanPtr *plan, Datum *values, int expected,
						  const char *what);
extern void cfeed_spi_exec(const char *sql, int nargs, Oid *types, Datum *values,
						   const char *nulls, int expected);

/* locks.c: cfeed's advisory locks */
extern bool cfeed_sweep_lock(int32 sweep_group, bool nowait);
extern bool cfeed_sweep_lock_held(int32 sweep_group);
extern bool cfeed_leader_lock(int32 sweep_group);
extern void cfeed_leader_unlock(int32 sweep_group);
extern bool cfeed_shards_lock(int32 feed_id, LOCKMODE lockmode);
extern bool cfeed_shards_lock_exclusive(int32 feed_id, TimestampTz deadline);
extern bool cfeed_shards_lock_held(int32 feed_id, LOCKMODE lockmode);
extern void cfeed_number_lock(Oid relid);

#endif							/* CFEED_H */
