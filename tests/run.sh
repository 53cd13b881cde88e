#!/usr/bin/env bash
# Runs every test executable given on the command line, prints their output,
# and ends with the total "N passed, N failed" line. Exit status is non-zero
# if any test failed or any executable crashed.
set -u
passed=0; failed=0; crashed=0
for t in "$@"; do
    out=$("$t" 2>&1); rc=$?
    printf '%s\n' "$out"
    line=$(printf '%s\n' "$out" | grep -E '^[^ ]+: [0-9]+ passed, [0-9]+ failed$' | tail -n 1)
    if [ -n "$line" ]; then
        p=$(echo "$line" | sed -E 's/.*: ([0-9]+) passed, ([0-9]+) failed/\1/')
        f=$(echo "$line" | sed -E 's/.*: ([0-9]+) passed, ([0-9]+) failed/\2/')
        passed=$((passed + p)); failed=$((failed + f))
    fi
    if [ $rc -ne 0 ] && { [ -z "$line" ] || [ "${f:-0}" -eq 0 ]; }; then
        echo "$t: exited with status $rc without reporting a failure (crash?)"
        crashed=$((crashed + 1)); failed=$((failed + 1))
    fi
done
echo "${passed} passed, ${failed} failed"
[ $failed -eq 0 ] && [ $crashed -eq 0 ]
