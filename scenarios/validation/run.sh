#!/usr/bin/env bash
# Regenerates the table of docs/validation.md: runs `mobistack check-real` (3 real repetitions)
# on every validation scenario and replaces the part of docs/validation.md between the
# `<!-- last-run -->` markers with the machine, kernel, date and each scenario's comparison.
# Needs root (real mode); builds the release binary first. About 10 minutes of real runs.
set -euo pipefail
cd "$(dirname "$0")/../.."
# MOBISTACK_BIN: an already built binary to use instead of building the release one.
bin=${MOBISTACK_BIN:-target/release/mobistack}
if [ -z "${MOBISTACK_BIN:-}" ]; then
    cargo build --release --locked
fi
out=$(mktemp)
{
    echo "Machine: $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB RAM, $(lsblk -dno NAME,MODEL "$(df --output=source /tmp | tail -1)" 2>/dev/null || echo 'disk unknown') under /tmp; kernel $(uname -r); $(date -u '+%Y-%m-%d %H:%M UTC')."
    echo
    for scenario in sqlite-delete sqlite-wal fsync-new-file fsync-new-file-bg; do
        echo "\`mobistack check-real scenarios/validation/$scenario.toml\`:"
        echo
        echo '```'
        "$bin" check-real "scenarios/validation/$scenario.toml" --reps 3 --image 8GiB
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
