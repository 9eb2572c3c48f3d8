/*-------------------------------------------------------------------------
 *
 * compat.h
 *	  Every PG_VERSION_NUM shim of cfeed, in one place (PostgreSQL 13-17).
 *
 *-------------------------------------------------------------------------
 */
#ifndef CFEED_COMPAT_H
#define CFEED_COMPAT_H

#include "access/genam.h"
#include "access/tableam.h"
#include "executor/spi.h"
#include "storage/proc.h"
#include "utils/guc.h"

/* PostgreSQL 15 starts the next transaction inside SPI_commit(). */
#if PG_VERSION_NUM >= 150000
#define cfeed_spi_commit() SPI_commit()
#else
#define cfeed_spi_commit() \
	do { SPI_commit(); SPI_start_transaction(); } while (0)
#endif

/* MarkGUCPrefixReserved replaced EmitWarningsOnPlaceholders in 15. */
#if PG_VERSION_NUM < 150000
#define MarkGUCPrefixReserved(prefix) EmitWarningsOnPlaceholders(prefix)
#endif

/* ProcessUtility_hook gained readOnlyTree in 14. */
#if PG_VERSION_NUM >= 140000
#define CFEED_UTILITY_ARGS \
	PlannedStmt *pstmt, const char *queryString, bool readOnlyTree, \
	ProcessUtilityContext context, ParamListInfo params, \
	QueryEnvironment *queryEnv, DestReceiver *dest, QueryCompletion *qc
#define CFEED_CALL_UTILITY(prev) \
	((prev) ? (prev) : standard_ProcessUtility)(pstmt, queryString, readOnlyTree, \
												context, params, queryEnv, dest, qc)
#else
#define CFEED_UTILITY_ARGS \
	PlannedStmt *pstmt, const char *queryString, \
	ProcessUtilityContext context, ParamListInfo params, \
	QueryEnvironment *queryEnv, DestReceiver *dest, QueryCompletion *qc
#define CFEED_CALL_UTILITY(prev) \
	((prev) ? (prev) : standard_ProcessUtility)(pstmt, queryString, \
												context, params, queryEnv, dest, qc)
#endif

/* Ownership checks became object_ownercheck() in 16. */
#if PG_VERSION_NUM >= 160000
#define cfeed_rel_ownercheck(relid, roleid) \
	object_ownercheck(RelationRelationId, (relid), (roleid))
#else
#define cfeed_rel_ownercheck(relid, roleid) pg_class_ownercheck((relid), (roleid))
#endif

/* index_insert gained indexUnchanged in 14. */
#if PG_VERSION_NUM >= 140000
#define cfeed_index_insert(idx, values, isnull, tid, heap, unique, info) \
	index_insert((idx), (values), (isnull), (tid), (heap), (unique), false, (info))
#else
#define cfeed_index_insert(idx, values, isnull, tid, heap, unique, info) \
	index_insert((idx), (values), (isnull), (tid), (heap), (unique), (info))
#endif

/* table_tuple_update reports the indexes to update as an enum since 16. */
#if PG_VERSION_NUM >= 160000
typedef TU_UpdateIndexes cfeed_update_indexes;
#define cfeed_indexes_to_update(u) ((u) == TU_All)
#else
typedef bool cfeed_update_indexes;
#define cfeed_indexes_to_update(u) (u)
#endif

/* PGPROC's lxid moved into vxid in 17. */
#if PG_VERSION_NUM >= 170000
#define CFEED_MY_LXID (MyProc->vxid.lxid)
#else
#define CFEED_MY_LXID (MyProc->lxid)
#endif

#endif							/* CFEED_COMPAT_H */
