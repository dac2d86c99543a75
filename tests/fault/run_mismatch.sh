#!/usr/bin/env bash
# Runs test_mismatch on 3 ranks: every rank must pass, and at least one must have named the field.
# usage: run_mismatch.sh CHORUSRUN TEST_MISMATCH MODE [strict]
set -u
SYNC_DIR=$(mktemp -d)
export SYNC_DIR
trap 'rm -rf "$SYNC_DIR"' EXIT
out=$(timeout 60 "$1" -n 3 "$2" "${@:3}" 2>&1)
rc=$?
echo "$out" | grep "^rank"
[ $rc = 0 ] || { echo "FAILED: exit status $rc"; echo "$out" | tail -20; exit 1; }
grep -q "named the field" <<< "$out" || { echo "FAILED: no rank named the field"; exit 1; }
