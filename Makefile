# hive - GNU make build. No configure step: each entry point installs what
# it needs and is missing from Debian (tools/deps.sh), the rest is plain rules.
#
#   make            build/libhive.a, build/libhive.so, build/hive.pc,
#                   build/hive-static.pc and the examples
#   make deps       the packages the build and the tests need (what CI runs)
#   make test       deps, then unit + stress tests in three builds:
#                   normal -O2, ThreadSanitizer, AddressSanitizer+UBSan,
#                   the fuzz targets, the examples, the README's tour and
#                   install recipes
#   make check      the tests of one build (VARIANT=normal|tsan|asan); the
#                   normal build's include a 30-second soak
#   make examples-check  run every example, compare its output with
#                   examples/expected/ (tools/examples-check.sh), any VARIANT
#   make readme-check    compile and run README.md's API tour as one program
#                   and check what it claims (tools/readme-check.sh)
#   make soak       the soak alone, SOAK_S seconds (default 600), any VARIANT
#   make fuzz       deps, then each libFuzzer target for FUZZ_S seconds (default 60)
#   make bench      bench-deps (the build's packages and the peers: TBB, CAF,
#                   ck, concurrentqueue, Google Benchmark, numpy), then every
#                   benchmark; JSON in bench/results/
#   make python     the `hive` Python module (python/) in build/python/, built
#                   against Debian's /usr/bin/python3: PYTHONPATH=build/python
#   make python-check   the pytest suite (python/tests) against that module
#   make bench-python   Python-side costs (bench/python/bench.py)
#   make demo-python    the numpy CartPole learner on hive's env pool and replay
#                   buffer (examples/python/cartpole_learner.py)
#   make demo       demo-deps (the build's packages only), then the RL
#                   sampler (examples/rl_sampling.c)
#   make dashboard  dashboard-deps (Node's npm, then uPlot into
#                   tools/dashboard/node_modules), then tools/hive-dashboard
#                   on http://127.0.0.1:8265 (DASHBOARD_ARGS=--port N ...)
#   make dashboard-check  the dashboard tested as a person would: the demo,
#                   the JSON API, the page in headless Chromium (when present)
#   make mpi-check  the MPI tests (libhive-mpi.a) under mpirun -np 2 and -np 4,
#                   any VARIANT (make check runs them too)
#   make demo-mpi   the RL pipeline on 4 MPI ranks (examples/mpi/rl_mpi.c)
#   make bench-mpi  the MPI layer beside raw MPI in one run
#   make install    PREFIX=/usr/local: headers, libraries, hive.pc (shared)
#                   and hive-static.pc (links libhive.a)

VARIANT ?= normal
NPROC   := $(shell nproc 2>/dev/null || echo 2)
PREFIX  ?= /usr/local
CC      ?= gcc
CXX     ?= g++
ifeq ($(origin CC),default)
CC := gcc
endif

PKGS      := liburcu-memb liburcu-cds hwloc numa
PKG_CFLAGS = $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   = $(shell pkg-config --libs $(PKGS) 2>/dev/null)

WARN     := -Wall -Wextra -Werror
BASEFLAGS = -std=gnu11 $(WARN) -g -pthread -fPIC -D_GNU_SOURCE -Iinclude -iquote src $(PKG_CFLAGS)

ifeq ($(VARIANT),normal)
  B        := build
  OPTFLAGS := -O2
  SANFLAGS :=
else ifeq ($(VARIANT),tsan)
  B        := build/tsan
  OPTFLAGS := -O1
  SANFLAGS := -fsanitize=thread
else ifeq ($(VARIANT),asan)
  B        := build/asan
  OPTFLAGS := -O1 -fno-omit-frame-pointer
  SANFLAGS := -fsanitize=address,undefined -fno-sanitize-recover=all
else
  $(error VARIANT must be normal, tsan or asan)
endif

CFLAGS  += $(BASEFLAGS) $(OPTFLAGS) $(SANFLAGS)
LDFLAGS += -pthread $(SANFLAGS)
LIBS     = $(PKG_LIBS) -lm

SRCS := $(wildcard src/*.c src/util/*.c src/ds/*.c src/rl/*.c)
OBJS := $(patsubst src/%.c,$(B)/obj/%.o,$(SRCS))
# (the MPI layer's own header, src/mpi/world.h, rebuilds only libhive-mpi.a)
HDRS := $(filter-out src/mpi/%,$(wildcard include/*.h include/hive/*.h src/*.h src/*/*.h))

TEST_SRCS   := $(wildcard tests/test_*.c)
STRESS_SRCS := $(wildcard tests/stress/*.c)
TEST_BINS   := $(patsubst tests/%.c,$(B)/tests/%,$(TEST_SRCS)) \
               $(patsubst tests/stress/%.c,$(B)/tests/stress_%,$(STRESS_SRCS))
# the soak (tests/soak/soak.c) runs SOAK_S seconds, 30 when unset; `make check`
# runs it in the normal build only (sanitized builds: `make soak VARIANT=...`)
SOAK_BIN    := $(B)/tests/soak/soak
SOAK_S      ?= 600
ifeq ($(VARIANT),normal)
TEST_BINS   += $(SOAK_BIN)
endif

EXAMPLE_SRCS := $(wildcard examples/*.c)
EXAMPLE_BINS := $(patsubst examples/%.c,$(B)/examples/%,$(EXAMPLE_SRCS))

# the MPI layer (see "MPI" below)
MPI_CFLAGS = $(shell pkg-config --cflags ompi-c 2>/dev/null)
MPI_LIBS   = $(shell pkg-config --libs ompi-c 2>/dev/null)
MPI_SRCS  := $(wildcard src/mpi/*.c)
MPI_OBJS  := $(patsubst src/%.c,$(B)/obj/%.o,$(MPI_SRCS))
MPI_TESTS := $(patsubst tests/mpi/%.c,$(B)/tests/mpi_%,$(wildcard tests/mpi/test_*.c))

.PHONY: all lib deps test check soak bench demo install examples clean fuzz fuzz-build \
        examples-check readme-check bench-deps demo-deps python python-check bench-python demo-python \
        dashboard dashboard-deps dashboard-check \
        mpi-check bench-mpi demo-mpi
all: lib examples
lib: $(B)/libhive.a $(if $(filter normal,$(VARIANT)),$(B)/libhive.so $(B)/hive.pc $(B)/hive-static.pc)

$(B)/obj/%.o: src/%.c $(HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(B)/libhive.a: $(OBJS)
	@rm -f $@
	ar rcs $@ $^

$(B)/libhive.so: $(OBJS)
	$(CC) -shared -o $@ $^ $(LDFLAGS) $(LIBS)

# hive.pc: -lhive (the shared library when both are installed);
# hive-static.pc: libhive.a by path, whatever else is installed
PC_SUBST = sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@REQUIRES@|$(PKGS)|'
$(B)/%.pc: %.pc.in Makefile
	$(PC_SUBST) $< > $@

# ------------------------------------------------------------------ tests
# -rdynamic: the timeline names untitled tasks by their symbols (dladdr)
$(B)/tests/%: tests/%.c tests/testutil.h $(B)/libhive.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests $< -o $@ $(B)/libhive.a $(LDFLAGS) -rdynamic $(LIBS) -lcmocka

$(B)/tests/stress_%: tests/stress/%.c tests/testutil.h $(B)/libhive.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Itests $< -o $@ $(B)/libhive.a $(LDFLAGS) $(LIBS) -lcmocka

$(B)/examples/%: examples/%.c $(B)/libhive.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $< -o $@ $(B)/libhive.a $(LDFLAGS) -rdynamic $(LIBS)

examples: $(EXAMPLE_BINS)

check: lib $(TEST_BINS) $(EXAMPLE_BINS) $(MPI_TESTS)
	@tools/run-tests.sh $(VARIANT) $(TEST_BINS)
	@tools/run-mpi-tests.sh $(VARIANT) $(MPI_TESTS)

# ------------------------------------------------------------------ MPI
# libhive-mpi.a (src/mpi/, include/hive/mpi.h): the scale-out layer, built
# apart so that libhive.a keeps no MPI dependency. Its tests run under
# mpirun with 2 and 4 ranks (tools/run-mpi-tests.sh).

$(B)/obj/mpi/%.o: src/mpi/%.c src/mpi/world.h $(HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(MPI_CFLAGS) -c $< -o $@

$(B)/libhive-mpi.a: $(MPI_OBJS)
	@rm -f $@
	ar rcs $@ $^

$(B)/tests/mpi_%: tests/mpi/%.c tests/testutil.h $(B)/libhive-mpi.a $(B)/libhive.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(MPI_CFLAGS) -Itests $< -o $@ $(B)/libhive-mpi.a $(B)/libhive.a $(LDFLAGS) \
	    $(LIBS) $(MPI_LIBS) -lcmocka

mpi-check: $(MPI_TESTS)
	@tools/run-mpi-tests.sh $(VARIANT) $(MPI_TESTS)

# make bench-mpi: the layer beside raw MPI in one run (2 ranks), then an
# idle 4-rank world's CPU; JSON lines in bench/results/mpi-*.json
MPIRUN = OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun --oversubscribe
build/bench/bench-mpi: bench/mpi/bench_mpi.c build/libhive-mpi.a build/libhive.a
	@mkdir -p $(dir $@)
	$(CC) $(BASEFLAGS) -O2 $(MPI_CFLAGS) $< -o $@ build/libhive-mpi.a build/libhive.a $(LDFLAGS) \
	    $(LIBS) $(MPI_LIBS)

# make demo-mpi: the RL pipeline on 4 ranks (examples/mpi/rl_mpi.c)
build/examples/rl_mpi: examples/mpi/rl_mpi.c build/libhive-mpi.a build/libhive.a
	@mkdir -p $(dir $@)
	$(CC) $(BASEFLAGS) -O2 $(MPI_CFLAGS) $< -o $@ build/libhive-mpi.a build/libhive.a $(LDFLAGS) \
	    $(LIBS) $(MPI_LIBS)

DEMO_MPI_S ?= 5
demo-mpi: deps
	$(MAKE) --no-print-directory VARIANT=normal build/examples/rl_mpi
	$(MPIRUN) -np 4 build/examples/rl_mpi $(DEMO_MPI_S)

bench-mpi: deps
	$(MAKE) --no-print-directory VARIANT=normal build/bench/bench-mpi
	@mkdir -p bench/results
	$(MPIRUN) -np 2 build/bench/bench-mpi bench/results/mpi-2.json
	$(MPIRUN) -np 4 build/bench/bench-mpi bench/results/mpi-4.json

examples-check: $(EXAMPLE_BINS)
	@tools/examples-check.sh $(B)

readme-check: $(B)/libhive.a
	@tools/readme-check.sh $(B) "$(SANFLAGS)"

# ------------------------------------------------------------------ python
# The extension links libhive.a whole (--whole-archive) so that the C
# libraries it loads with engine.load() find hive's functions in it.
PYTHON     := /usr/bin/python3
PY_INC      = $(shell $(PYTHON)-config --includes 2>/dev/null)
PY_EXT      = $(shell $(PYTHON)-config --extension-suffix 2>/dev/null)
PY_DIR     := $(B)/python
PY_MOD      = $(PY_DIR)/hive/_hive$(PY_EXT)
PY_FILES   := $(PY_DIR)/hive/__init__.py
PY_TESTLIB := $(PY_DIR)/tests/libpytasks.so

$(PY_DIR)/hive/_hive%: python/hive/_hive.c $(B)/libhive.a $(HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(PY_INC) -shared $< -o $@ -Wl,--whole-archive $(B)/libhive.a \
	    -Wl,--no-whole-archive $(LDFLAGS) $(LIBS)

$(PY_DIR)/hive/%.py: python/hive/%.py
	@mkdir -p $(dir $@)
	cp $< $@

$(PY_TESTLIB): python/tests/pytasks.c include/hive.h
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -shared $< -o $@

python: $(PY_MOD) $(PY_FILES) $(PY_TESTLIB)

python-check: python
	@tools/python-check.sh $(VARIANT) $(B)

# the Python side's costs beside multiprocessing.shared_memory and a no-op call
demo-python:
	$(MAKE) --no-print-directory VARIANT=normal python
	PYTHONPATH=build/python $(PYTHON) examples/python/cartpole_learner.py

bench-python:
	$(MAKE) --no-print-directory VARIANT=normal python lib
	PYTHONPATH=build/python $(PYTHON) bench/python/bench.py build/python/tests/libpytasks.so

soak: lib $(SOAK_BIN)
	@SOAK_S=$(SOAK_S) tools/run-tests.sh $(VARIANT) $(SOAK_BIN)

deps:
	@tools/deps.sh test

bench-deps:
	@tools/deps.sh bench

demo-deps:
	@tools/deps.sh build

test: deps
	@rm -f build/.test-summary
	$(MAKE) --no-print-directory -j$(NPROC) VARIANT=normal check
	$(MAKE) --no-print-directory VARIANT=normal examples-check readme-check python-check
	$(MAKE) --no-print-directory VARIANT=normal dashboard-check
	$(MAKE) --no-print-directory -j$(NPROC) VARIANT=tsan check
	$(MAKE) --no-print-directory VARIANT=tsan examples-check readme-check
	$(MAKE) --no-print-directory -j$(NPROC) VARIANT=asan check
	$(MAKE) --no-print-directory VARIANT=asan examples-check readme-check python-check
	$(MAKE) --no-print-directory -j$(NPROC) fuzz-build
	@tools/run-fuzz.sh $(FUZZ_TEST_S) $(FUZZ_BINS)
	@tools/install-test.sh
	@tools/run-tests.sh --summary

# ------------------------------------------------------------------ fuzz
# libFuzzer targets (tests/fuzz/fuzz_*.c), built with clang against their
# own copy of the library in build/fuzz/: ASan+UBSan like VARIANT=asan, plus
# libFuzzer's coverage instrumentation so that the fuzzer sees inside it.
# Independent of VARIANT. `make fuzz` runs each target FUZZ_S seconds,
# `make test` FUZZ_TEST_S seconds (tools/run-fuzz.sh).
FUZZ_CC     ?= clang
FUZZ_S      ?= 60
FUZZ_TEST_S ?= 20
FUZZ_SAN    := -fsanitize=address,undefined -fno-sanitize-recover=all
FUZZ_CFLAGS  = $(BASEFLAGS) -O1 -fno-omit-frame-pointer $(FUZZ_SAN)
FUZZ_OBJS   := $(patsubst src/%.c,build/fuzz/obj/%.o,$(SRCS))
FUZZ_BINS   := $(patsubst tests/fuzz/%.c,build/fuzz/%,$(wildcard tests/fuzz/fuzz_*.c))

build/fuzz/obj/%.o: src/%.c $(HDRS)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -c $< -o $@

build/fuzz/libhive.a: $(FUZZ_OBJS)
	@rm -f $@
	ar rcs $@ $^

build/fuzz/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz.h build/fuzz/libhive.a
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer -Itests/fuzz $< -o $@ build/fuzz/libhive.a \
	    -pthread $(PKG_LIBS) -lm

fuzz-build: $(FUZZ_BINS)

fuzz: deps
	$(MAKE) --no-print-directory -j$(NPROC) fuzz-build
	@tools/run-fuzz.sh $(FUZZ_S) $(FUZZ_BINS)

# ------------------------------------------------------------------ bench
BENCH_C    := $(filter-out bench/scale_mem.c,$(wildcard bench/*.c))
BENCH_CXX  := bench/shim.cc
BENCH_OBJS := $(patsubst bench/%.c,build/bench/%.o,$(BENCH_C)) build/bench/shim.o
BENCH_PKGS := benchmark ck tbb

build/bench/%.o: bench/%.c bench/shim.h bench/benches.h bench/rcu_flavor.inc $(HDRS)
	@mkdir -p $(dir $@)
	$(CC) $(BASEFLAGS) -O2 -Ibench -c $< -o $@

build/bench/shim.o: bench/shim.cc bench/shim.h
	@mkdir -p $(dir $@)
	$(CXX) -std=c++17 -O2 -g -Wall -Wextra -Werror -Ibench -c $< -o $@

build/bench/scale-mem: bench/scale_mem.c build/libhive.a
	@mkdir -p $(dir $@)
	$(CC) $(BASEFLAGS) -O2 $< -o $@ build/libhive.a $(LDFLAGS) $(LIBS)

build/bench/hive-bench: $(BENCH_OBJS) build/libhive.a build/bench/scale-mem
	$(CXX) -o $@ $(BENCH_OBJS) build/libhive.a -pthread \
	    $(shell pkg-config --libs $(BENCH_PKGS)) $(PKG_LIBS) -lurcu-qsbr -lurcu-bp -lcaf_core -lm

bench: bench-deps
	$(MAKE) --no-print-directory VARIANT=normal build/bench/hive-bench build/libhive.so
	@mkdir -p bench/results
	build/bench/hive-bench --benchmark_out=bench/results/hive-bench.json \
	    --benchmark_out_format=json $(BENCH_ARGS)
	/usr/bin/python3 tools/bench-report.py bench/results/hive-bench.json bench/results

# ------------------------------------------------------------------ demo
demo: demo-deps
	$(MAKE) --no-print-directory VARIANT=normal examples
	build/examples/$(DEMO)

DEMO ?= rl_sampling

# ------------------------------------------------------------ dashboard
# tools/hive-dashboard (Python, standard library) serves its page's charts,
# uPlot, from tools/dashboard/node_modules: npm installs the version
# package-lock.json pins, once; nothing is fetched when the page runs.
DASH_UPLOT := tools/dashboard/node_modules/uplot/dist/uPlot.iife.min.js

$(DASH_UPLOT): tools/dashboard/package.json tools/dashboard/package-lock.json
	cd tools/dashboard && npm ci --no-audit --no-fund
	@touch $@

dashboard-deps:
	@tools/deps.sh dashboard
	@$(MAKE) --no-print-directory $(DASH_UPLOT)

dashboard: dashboard-deps
	/usr/bin/python3 tools/hive-dashboard $(DASHBOARD_ARGS)

dashboard-check: $(DASH_UPLOT)
	$(MAKE) --no-print-directory VARIANT=normal build/examples/rl_sampling
	@tools/dashboard-check.sh build

install: lib
	install -d $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/lib/pkgconfig
	install -m 644 include/hive.h $(DESTDIR)$(PREFIX)/include/
	@if [ -d include/hive ]; then install -d $(DESTDIR)$(PREFIX)/include/hive && \
	    install -m 644 include/hive/*.h $(DESTDIR)$(PREFIX)/include/hive/; fi
	install -m 644 $(B)/libhive.a $(DESTDIR)$(PREFIX)/lib/
	@if [ -f $(B)/libhive-mpi.a ]; then install -m 644 $(B)/libhive-mpi.a $(DESTDIR)$(PREFIX)/lib/; fi
	install -m 755 $(B)/libhive.so $(DESTDIR)$(PREFIX)/lib/
	$(PC_SUBST) hive.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/hive.pc
	$(PC_SUBST) hive-static.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/hive-static.pc

clean:
	rm -rf build
