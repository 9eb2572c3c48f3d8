/*-------------------------------------------------------------------------
 *
 * compat.h
 *	  Every PG_VERSION_NUM shim of cfeed, in one place (PostgreSQL 13-17).
 *
 *-------------------------------------------------------------------------
 */
#ifndef CFEED_COMPAT_H
#define CFEED_COMPAT_H

#include "executor/spi.h"
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

#endif							/* CFEED_COMPAT_H */
