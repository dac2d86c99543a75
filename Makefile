# Thin wrapper over CMake. `make` builds, `make test` builds and runs the suite, `make perf` runs the
# AllReduce benchmark on 4 local ranks, `make bench` compares Chorus with Open MPI, MPICH and Gloo side by
# side (installing them first where missing; BENCH_FLAGS passes options to bench/compare, see
# `bench/compare -h`), `make bench-tcp` the same over TCP.
BUILD ?= build
JOBS ?= $(shell nproc)
PREFIX ?= /usr/local

.PHONY: all build test test-full test-asan test-asan-ci test-tsan perf install clean
.PHONY: bench bench-tcp bench-peers bench-build

all: build

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=$(PREFIX)

build: $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

test: build
	cd $(BUILD) && ctest --output-on-failure --timeout 600

# The suite with the randomised failure tests repeated more: TEST_FULL=1, read by
# tests/fault/run_fault.sh, makes each kill test run 50 times instead of 3 and each init-kill test 20.
test-full: build
	cd $(BUILD) && TEST_FULL=1 ctest --output-on-failure --timeout 600

# The suite under AddressSanitizer and UndefinedBehaviorSanitizer (any report fails the test), built at -O1
# (ASan's advice: -O0 doubles the run time for nothing it finds). Left out: the 1M-element matrices (the
# same paths run with smaller counts), and installing, whose consumers are built without the sanitizer
# runtime. test-asan-ci, which CI runs after `make test`, also leaves out the per-algorithm runs on 9, 13
# and 16 ranks and the 7-rank TCP matrix (the same algorithms run on 1 to 8 ranks, and TCP on 2 and 4):
# about 8 minutes here instead of 11.
ASAN_BUILD ?= $(BUILD)-asan
ASAN_EXCLUDE ?= ^coll\.np[0-9]+$$|^install\.|^perf\.mpi
ASAN_CI_EXCLUDE ?= ^coll\.[a-z_]+\.[a-z_]+\.np(9|13|16)$$|^coll\.np7\.tcp$$
define asan_run
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS_DEBUG='-O1 -g' -DCHORUS_SANITIZE=ON
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 LSAN_OPTIONS=suppressions=$(CURDIR)/tests/lsan.supp \
	  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ctest --output-on-failure --timeout 600 -j $(JOBS) -E '$(1)'
endef
test-asan:
	$(call asan_run,$(ASAN_EXCLUDE))
test-asan-ci:
	$(call asan_run,$(ASAN_EXCLUDE)|$(ASAN_CI_EXCLUDE))

# ThreadSanitizer (any report fails the test): the ranks-as-threads test and the unit tests. Not the
# multi-process suites: TSan sees only the threads of one process. Even in test_threads each rank maps the
# shared-memory segments at its own address, so TSan checks everything but the shm rings' and the host
# arena's protocols between ranks (those are atomics on words shared between processes).
TSAN_BUILD ?= $(BUILD)-tsan
TSAN_TESTS ?= ^threads\.|^unit\.
test-tsan:
	cmake -S . -B $(TSAN_BUILD) -DCMAKE_BUILD_TYPE=Release -DCHORUS_TSAN=ON
	cmake --build $(TSAN_BUILD) -j $(JOBS)
	cd $(TSAN_BUILD) && TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" \
	  ctest --output-on-failure --timeout 600 -R '$(TSAN_TESTS)'

perf: build
	$(BUILD)/tools/chorusrun -n 4 $(BUILD)/tools/chorus-perf allreduce -b 8 -e 256M -f 4

# The libraries bench/compare runs against, from Debian's packages.
BENCH_PACKAGES = openmpi-bin libopenmpi-dev mpich libmpich-dev libgloo-dev
SUDO = $(if $(filter 0,$(shell id -u)),,sudo)

bench-peers:
	@if ! command -v dpkg-query >/dev/null; then \
	  echo "bench: no dpkg here; install Open MPI, MPICH and Gloo by hand to compare against them"; exit 0; fi; \
	missing=; for p in $(BENCH_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -z "$$missing" ]; then echo "bench: peers installed ($(BENCH_PACKAGES))"; \
	else echo "bench: installing$$missing: apt-get install -y$$missing"; \
	  $(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y$$missing; fi

# cmake runs again so that bench/ finds the peers just installed and builds their counterparts.
bench-build: bench-peers
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=$(PREFIX)
	cmake --build $(BUILD) -j $(JOBS)

bench: bench-build
	bench/compare -B $(BUILD) $(BENCH_FLAGS)

bench-tcp: bench-build
	bench/compare -B $(BUILD) --tcp $(BENCH_FLAGS)

install: build
	cmake --install $(BUILD)

clean:
	rm -rf $(BUILD)
