#!/usr/bin/env bash
# Regenerates the table of docs/validation.md: runs `mobistack check-real` (3 real repetitions)
# on every validation scenario and replaces the part of docs/validation.md between the
# `<!-- last-run -->` markers with the machine, kernel, date and each scenario's comparison.
# Needs root (real mode); builds the release binary first. About 15 minutes of real runs (13 at load 2, 2026-11-29).
# check-real runs at SCHED_FIFO priority 50 (`chrt -f 50`; MOBISTACK_CHRT overrides, empty for
# none): on a machine shared with builds, a normal-priority app thread woken by its I/O's
# completion waits for a CPU for milliseconds (a QD1 read measured 4 ms at load 10 on 2 cores,
# 0.1 ms under chrt), which would be measured as I/O latency. The kernel's own threads (the
# flusher, jbd2, the loop device's workers) stay at their normal priority.
set -euo pipefail
cd "$(dirname "$0")/../.."
# MOBISTACK_BIN: an already built binary to use instead of building the release one.
bin=${MOBISTACK_BIN:-target/release/mobistack}
if [ -z "${MOBISTACK_BIN:-}" ]; then
    cargo build --release --locked
fi
chrt=${MOBISTACK_CHRT-chrt -f 50}
out=$(mktemp)
{
    echo "Load average at the start: $(cut -d' ' -f1-3 /proc/loadavg); check-real under \`${chrt:-no chrt}\`."
    echo
    echo "Machine: $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB RAM, $(lsblk -dno NAME,MODEL "$(df --output=source /tmp | tail -1)" 2>/dev/null || echo 'disk unknown') under /tmp; kernel $(uname -r); $(date -u '+%Y-%m-%d %H:%M UTC')."
    echo
    for scenario in sqlite-delete sqlite-wal fsync-new-file fsync-new-file-bg fio-rand \
        fio-randread-bg reader-under-writer filebench-varmail filebench-fileserver; do
        echo "\`mobistack check-real scenarios/validation/$scenario.toml\` (load average $(cut -d' ' -f1-3 /proc/loadavg) at its start):"
        echo
        echo '```'
        # shellcheck disable=SC2086 # $chrt is a command and its arguments
        $chrt "$bin" check-real "scenarios/validation/$scenario.toml" --reps 3 --image 8GiB
        echo '```'
        echo
    done
} > "$out"
awk -v table="$out" '
    /<!-- last-run -->/ { print; while ((getline line < table) > 0) print line; skip = 1; next }
    /<!-- \/last-run -->/ { skip = 0 }
    !skip { print }
' docs/validation.md > docs/validation.md.new
mv docs/validation.md.new docs/validation.md
rm -f "$out"
echo "docs/validation.md updated"
