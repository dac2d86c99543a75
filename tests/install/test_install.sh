#!/usr/bin/env bash
# `make install` as a user would consume it: install into a scratch prefix, then build the quick start
# against the installed header and library twice, through pkg-config and through CMake's find_package,
# and run the result as a single rank.
set -euo pipefail
build=$1
src=$2
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT

cmake --install "$build" --prefix "$prefix" > /dev/null
libdir=$(find "$prefix" -name chorus.pc -printf '%h\n' | head -1)
[ -n "$libdir" ] || { echo "chorus.pc was not installed"; exit 1; }
for f in include/chorus/chorus.h bin/chorusrun bin/chorus-perf; do
    [ -e "$prefix/$f" ] || { echo "missing after install: $f"; exit 1; }
done
ls "$prefix"/lib*/libchorus.a "$prefix"/lib*/libchorus.so > /dev/null

# pkg-config, static and shared.
export PKG_CONFIG_PATH=$libdir
cc -o "$prefix/qs_shared" "$src/examples/quickstart.c" $(pkg-config --cflags --libs chorus) -Wl,-rpath,"$prefix/lib"
cc -o "$prefix/qs_static" "$src/examples/quickstart.c" $(pkg-config --cflags chorus) "$libdir/../libchorus.a" \
    $(pkg-config --static --libs-only-l chorus | sed 's/-lchorus//')

# CMake package.
mkdir -p "$prefix/consumer"
cat > "$prefix/consumer/CMakeLists.txt" <<CMAKE
cmake_minimum_required(VERSION 3.18)
project(consumer C)
find_package(chorus REQUIRED)
add_executable(qs_cmake $src/examples/quickstart.c)
target_link_libraries(qs_cmake PRIVATE chorus::chorus)
CMAKE
cmake -S "$prefix/consumer" -B "$prefix/consumer/build" -DCMAKE_PREFIX_PATH="$prefix" > /dev/null
cmake --build "$prefix/consumer/build" > /dev/null

for exe in "$prefix/qs_shared" "$prefix/qs_static" "$prefix/consumer/build/qs_cmake"; do
    out=$(CHORUS_SOCKET_IFNAME=lo "$prefix/bin/chorusrun" -n 2 "$exe") || { echo "FAILED: $exe"; exit 1; }
    grep -q "rank 0 of 2: allreduce of 1048576 floats correct" <<< "$out" || { echo "FAILED: $exe: $out"; exit 1; }
done
echo "3 passed, 0 failed"
