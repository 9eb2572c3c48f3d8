# cfeed: PGXS build.  See README.md for the commands that build, install and test.

EXTENSION = cfeed
MODULE_big = cfeed
OBJS = \
	src/cfeed.o \
	src/settings.o \
	src/catalog.o \
	src/schema.o \
	src/guard.o \
	src/upstream.o \
	src/feed.o \
	src/reference.o \
	src/sweep.o \
	src/sweep_sql.o \
	src/sweep_report.o \
	src/notify.o \
	src/stamp.o \
	src/ranges.o \
	src/watermark.o \
	src/read.o \
	src/wait.o \
	src/shmem.o \
	src/launcher.o \
	src/standby_waker.o \
	src/utility.o \
	src/sweeper.o \
	src/tracked.o \
	src/track_ddl.o \
	src/track_trigger.o \
	src/backfill.o \
	src/order_by.o \
	src/append.o \
	src/shards.o \
	src/shard_guard.o \
	src/direct.o \
	src/row_image.o \
	src/table_numbers.o \
	src/read_access.o \
	src/cache.o \
	src/spi.o \
	src/locks.o \
	src/epoch.o \
	src/change_id.o \
	src/dead_letters.o \
	src/reshard.o \
	src/splits.o \
	src/pending.o \
	src/lock_guard.o \
	src/persistence_guard.o

DATA = $(wildcard src/sql/cfeed--*.sql)

REGRESS = catalogs publish sweep read errors security leases track track_write operations read_access hardening_input hardening_privileges hardening_path hardening_rls hardening_locks write_access numbers learn dead_letters reshard groups_reshard ranges
REGRESS_OPTS = --inputdir=. --temp-instance=tmp_regress --temp-config=test/cfeed.conf --port=$(CFEED_TEST_PORT)

ISOLATION = skip_uncommitted aborted_never_stamped double_sweep commit_order sweep_isolation sweep_notify acquire_race steal_vs_checkpoint expiry_vs_renew track_same_key track_fk sweep_moved_shard sweep_rewrite read_revoke read_truncate sweep_own_xact head_snapshot insert_fk fail_vs_steal resolve_vs_seek seek_dead_letters table_number reshard consume_vs_acquire acquire_vs_split adopt_marks_writers ranges ranges_first_mark ranges_delete reshard_ranges update_vs_sweep locked_pending locked_race lock_guard lease_forged_feed acquire_new_group_split reference_race
ISOLATION_OPTS = --inputdir=test --outputdir=output_iso --temp-instance=tmp_iso --temp-config=test/cfeed.conf --port=$(CFEED_TEST_PORT)

TAP_TESTS = 1
# CFEED_QUICK=1 leaves out the slow TAP tests (stress, fuzz, soak and the
# operations torture test: about 4 of the suite's 9 minutes on 2 cores); CI
# runs them on 15, 17 and 18.
CFEED_SLOW_TESTS = test/t/001_stress.pl test/t/002_stress_worker.pl test/t/003_stress_ranges.pl test/t/060_fuzz.pl \
	test/t/070_soak.pl test/t/090_operations.pl test/t/225_operations_ranges.pl
ifeq ($(CFEED_QUICK),1)
PROVE_TESTS = $(filter-out $(CFEED_SLOW_TESTS),$(sort $(wildcard test/t/*.pl)))
else
PROVE_TESTS = test/t/*.pl
endif

# The port of the pg_regress and isolation servers: CFEED_TEST_PORT, else a
# free one (test/free-port.pl), looked up once, when a suite starts.  (The
# TAP tests pick their own.)
CFEED_TEST_PORT ?= $(eval CFEED_TEST_PORT := $(shell perl test/free-port.pl))$(CFEED_TEST_PORT)

EXTRA_CLEAN = tmp_check tmp_regress tmp_iso output_iso ranges-run results regression.diffs regression.out tmp_valgrind output_valgrind output_valgrind_iso

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# After the include: Makefile.global resets PROVE_FLAGS.  CFEED_PROVE_JOBS=N
# runs N TAP files at once (prove -jN; run-tests.sh --all gives 2 to the
# suites that run alone: this machine's major and the assert-enabled one).
PROVE_FLAGS += -I ./test/t $(if $(CFEED_PROVE_JOBS),-j$(CFEED_PROVE_JOBS))

# The `cfeed` command (src/client) has its own Makefile: PGXS builds one
# MODULE_big or one PROGRAM per Makefile, not both.  Its HTTP gateway
# (src/serve) has one too; src/client/Makefile builds it and links it in.  CLIENT=no leaves it out
# of make, make install and make clean (debian/rules builds the extension once per
# PostgreSQL major and the command once, into a package of its own).
CLIENT ?= yes
ifeq ($(CLIENT),yes)
all: client
install: install-client
clean: clean-client
endif
client:
	$(MAKE) -C src/client
install-client: client
	$(MAKE) -C src/client install
clean-client:
	$(MAKE) -C src/client clean
.PHONY: client install-client clean-client

# The SQL edition (sqled/, docs/sql-edition.md): its install script, built
# with the extension, and its regression test on a server that loads no
# cfeed.so, run by installcheck before the extension's suites.  SQLED=no
# leaves both out.
SQLED ?= yes
ifeq ($(SQLED),yes)
all: sqled
installcheck: installcheck-sqled
clean: clean-sqled
endif
sqled:
	$(MAKE) -C sqled
installcheck-sqled:
	$(MAKE) -C sqled check-sqled
clean-sqled:
	$(MAKE) -C sqled clean
.PHONY: sqled installcheck-sqled clean-sqled

# The range-storage pass: the pg_regress and isolation files whose output
# does not depend on how shards are stored, run again with every shard in
# storage 'ranges' (test/ranges.conf), against the same expected files.  The
# others read cfeed.change's numbers directly, sweep in the writers' own
# transaction or move shards between sweep groups (docs/design.md, "Storage
# in ranges", says why those differ).  RANGES=no leaves it out.
RANGES_REGRESS = publish track track_write write_access hardening_privileges groups_reshard
RANGES_ISOLATION = skip_uncommitted sweep_notify acquire_race steal_vs_checkpoint expiry_vs_renew \
	track_same_key track_fk insert_fk fail_vs_steal resolve_vs_seek seek_dead_letters table_number reshard
RANGES ?= yes
ifeq ($(RANGES),yes)
installcheck: installcheck-ranges
endif
installcheck-ranges:
	@echo "+++ ranges install-check +++"
	$(pg_regress_installcheck) --inputdir=. --outputdir=ranges-run --temp-instance=ranges-run/tmp \
		--temp-config=test/cfeed.conf --temp-config=test/ranges.conf --port=$(CFEED_TEST_PORT) $(RANGES_REGRESS)
	@echo "+++ ranges isolation install-check +++"
	$(pg_isolation_regress_installcheck) --inputdir=test --outputdir=ranges-run/iso --temp-instance=ranges-run/tmp_iso \
		--temp-config=test/cfeed.conf --temp-config=test/ranges.conf --port=$(CFEED_TEST_PORT) $(RANGES_ISOLATION)
.PHONY: installcheck-ranges

# make valgrind-check: the pg_regress and isolation suites against a server
# run under valgrind memcheck (PostgreSQL's suppressions when the build tree
# has them, else test/valgrind.supp); prints every error with its stack and
# fails on any.  Slow (~20-50x): VALGRIND_SUITES=regress runs pg_regress only.
# Run as the postgres user after `make install`; see test/valgrind-check.sh.
valgrind-check:
	REGRESS="$(REGRESS)" ISOLATION="$(ISOLATION)" \
	PG_REGRESS="$(top_builddir)/src/test/regress/pg_regress" \
	PG_ISOLATION_REGRESS="$(top_builddir)/src/test/isolation/pg_isolation_regress" \
	bash test/valgrind-check.sh
.PHONY: valgrind-check

# make bench: the benchmark suite (test/bench/run-all.sh), a row per
# performance goal of test/bench/README.md against its same-run baseline and
# the peers, ~15-18 minutes on 2 cores.  Run as root.  With
# BENCH_PREFIX=DIR it builds this tree and measures it in a private copy of
# the PostgreSQL whose pg_config is first in PATH (test/bench/prefix.sh);
# else, after make install, the cfeed installed in that PostgreSQL, the
# peers installed from Debian.  It starts (and removes) its own throwaway
# clusters.
bench:
	bash test/bench/run-all.sh
.PHONY: bench
