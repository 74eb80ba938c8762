#!/usr/bin/env bash
# Runs every fuzz target for at least RUNS executions (default 10 million) and prints, per
# target, the executions done and the crashes found. Outside CI's time budget: run it by hand.
#
#   fuzz/run.sh                 # every target, 10,000,000 runs each
#   RUNS=100000 fuzz/run.sh     # a quick check
#   fuzz/run.sh scenario_parse  # one target
#
# Needs the nightly toolchain and cargo-fuzz (`cargo install cargo-fuzz`). Seeds come from
# fuzz/corpus/<target>/ (the built-in scenarios and example job files); crashes are saved in
# fuzz/artifacts/<target>/ and reproduced with `cargo +nightly fuzz run <target> <file>`.
set -uo pipefail
cd "$(dirname "$0")/.."
RUNS="${RUNS:-10000000}"
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    targets=(scenario_parse fio_job_parse)
fi
status=0
for target in "${targets[@]}"; do
    log="fuzz/${target}.log"
    # No sanitizer: the code is safe Rust (panics are what we look for), and ASan halves the
    # rate. -max_len: scenario files are small; longer inputs only slow the search down.
    cargo +nightly fuzz run --sanitizer none "$target" "fuzz/corpus/$target" -- \
        -runs="$RUNS" -max_len=4096 -print_final_stats=1 > "$log" 2>&1
    code=$?
    executions=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
    crashes=$(ls "fuzz/artifacts/$target" 2>/dev/null | grep -c '^crash-\|^leak-\|^timeout-\|^oom-' || true)
    echo "$target: ${executions:-0} executions, ${crashes:-0} crashes (exit $code, log $log)"
    if [ "$code" -ne 0 ]; then
        status=1
    fi
done
exit $status
