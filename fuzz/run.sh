#!/usr/bin/env bash
# Runs fuzz targets and prints, per target, the executions done, the rate and the crashes found
# (docs/fuzzing.md). Outside CI's time budget: run it by hand.
#
#   fuzz/run.sh                          # every target, 10,000,000 runs each
#   RUNS=100000 fuzz/run.sh              # a quick check
#   SECONDS_PER_TARGET=600 fuzz/run.sh   # each target for 10 minutes of wall time instead
#   fuzz/run.sh fio_run scenario_run     # some targets
#
# Targets: scenario_parse, fio_job_parse (the parsers alone) and fio_run, filebench_run,
# replay_run, sqlite_run, scenario_run (parse AND run under mobistack::fuzzing's budget).
#
# Needs the nightly toolchain and cargo-fuzz (`cargo install cargo-fuzz`). Seeds come from
# fuzz/corpus/<target>/ (new coverage is added there: minimise with `cargo +nightly fuzz cmin`
# before committing); crashes are saved in fuzz/artifacts/<target>/ and reproduced with
# `cargo +nightly fuzz run --sanitizer none <target> <file>`. The run targets go on past a crash
# (libFuzzer's fork mode with -ignore_crashes), so that one known bug does not end the session.
set -uo pipefail
cd "$(dirname "$0")/.."
RUNS="${RUNS:-10000000}"
SECONDS_PER_TARGET="${SECONDS_PER_TARGET:-0}"
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    targets=(scenario_parse fio_job_parse fio_run filebench_run replay_run sqlite_run scenario_run)
fi
status=0
for target in "${targets[@]}"; do
    log="fuzz/${target}.log"
    mkdir -p "fuzz/artifacts/$target"
    limits=(-runs="$RUNS")
    if [ "$SECONDS_PER_TARGET" -gt 0 ]; then
        limits=(-max_total_time="$SECONDS_PER_TARGET")
    fi
    case "$target" in
        *_run) mode=(-fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1 -timeout=30) ;;
        *) mode=() ;;
    esac
    # No sanitizer: the code is safe Rust (panics are what we look for), and ASan halves the
    # rate. -a: debug assertions and overflow checks on, as in the test build (an arithmetic
    # overflow is a panic to find, not a wrapped number). -max_len: inputs are small files; longer inputs only slow the search down.
    start=$(date +%s)
    nice -n 10 cargo +nightly fuzz run --sanitizer none -a "$target" "fuzz/corpus/$target" -- \
        "${limits[@]}" "${mode[@]}" -max_len=4096 -print_final_stats=1 \
        -artifact_prefix="fuzz/artifacts/$target/" > "$log" 2>&1
    code=$?
    elapsed=$(( $(date +%s) - start ))
    # Fork mode prints "#N ... exec/s" lines; the last one counts the executions.
    executions=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
    if [ -z "$executions" ]; then
        executions=$(grep -o '^#[0-9]*' "$log" | tr -d '#' | tail -1)
    fi
    crashes=$(ls "fuzz/artifacts/$target" 2>/dev/null | grep -c '^crash-\|^leak-\|^timeout-\|^oom-' || true)
    echo "$target: ${executions:-0} executions in ${elapsed}s ($(( ${executions:-0} / (elapsed > 0 ? elapsed : 1) )) exec/s), ${crashes:-0} crashes (exit $code, log $log)"
    if [ "$code" -ne 0 ]; then
        status=1
    fi
done
exit $status
