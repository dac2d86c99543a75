# Thin wrapper over CMake. `make` builds, `make test` builds and runs the suite, `make perf` runs the
# AllReduce benchmark on 4 local ranks.
BUILD ?= build
JOBS ?= $(shell nproc)
PREFIX ?= /usr/local

.PHONY: all build test perf install clean bench-tcp

all: build

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=$(PREFIX)

build: $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

test: build
	cd $(BUILD) && ctest --output-on-failure --timeout 600

perf: build
	$(BUILD)/tools/chorusrun -n 4 $(BUILD)/tools/chorus-perf allreduce -b 8 -e 256M -f 4

bench-tcp: build
	bench/compare-tcp.sh

install: build
	cmake --install $(BUILD)

clean:
	rm -rf $(BUILD)
