/*-------------------------------------------------------------------------
 *
 * track.h
 *	  Declarations shared by the files that track a table: tracked.c (what
 *	  makes a table tracked), track_ddl.c (cfeed.track, cfeed.untrack),
 *	  track_trigger.c (the triggers) and backfill.c (cfeed.backfill).
 *
 *-------------------------------------------------------------------------
 */
#ifndef CFEED_TRACK_H
#define CFEED_TRACK_H

#include "postgres.h"

#include "access/htup.h"
#include "commands/trigger.h"
#include "fmgr.h"
#include "storage/lockdefs.h"
#include "utils/relcache.h"

/* The names of the triggers track() creates, and of the change_id column. */
#define CFEED_TRACK_TRIGGER		"cfeed_track"
#define CFEED_TRACK_ID_TRIGGER	"cfeed_track_change_id"
#define CFEED_TRACK_TRUNCATE	"cfeed_track_truncate"
#define CFEED_CHANGE_ID_COLUMN	"change_id"

/* The key columns of one relation and how to print them. */
typedef struct CfeedTrackKey
{
	int			nkeys;
	AttrNumber	attnums[INDEX_MAX_KEYS];
	Oid			types[INDEX_MAX_KEYS];
	FmgrInfo	out[INDEX_MAX_KEYS];
} CfeedTrackKey;

/* tracked.c */
extern Trigger *cfeed_track_trigger(Relation rel);
extern int32 cfeed_track_feed_arg(Trigger *trig);
extern void cfeed_track_resolve_key(Relation rel, const char *keyspec,
									CfeedTrackKey *key, MemoryContext mcxt);
extern char *cfeed_track_key_text(CfeedTrackKey *key, HeapTuple tuple,
								  TupleDesc desc, int *len);
extern Relation cfeed_track_open_table(Oid relid, LOCKMODE lockmode);
extern void cfeed_track_check_owner(Relation rel);
extern void cfeed_track_check_permanent(Relation rel);
extern char *cfeed_qualified_name(Oid relid);

/* track_trigger.c: what backfill() silences (cfeed_track_silence) */
typedef struct CfeedTrackSilence
{
	Oid			relid;
	int			depth;
} CfeedTrackSilence;

extern CfeedTrackSilence cfeed_track_silence(Oid relid);
extern void cfeed_track_unsilence(CfeedTrackSilence previous);

#endif							/* CFEED_TRACK_H */
