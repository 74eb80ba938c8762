#!/usr/bin/env bash
# Mutation testing of the block layer's schedulers and request queue with cargo-mutants
# (`cargo install cargo-mutants --locked`). Not run by CI: a full run builds the crate once per
# mutant (about 900 mutants in these four files; 10-60 s each on two cores).
#
# Each mutant runs the library's block tests only (`cargo test --lib block::`), built without
# optimisation or debug info to keep the per-mutant build short.
#
# Usage: scripts/mutants.sh [SHARD] [OUTPUT_DIR]
#   SHARD       k/n: run every n-th mutant starting at k (round-robin), e.g. 0/8 for a 1-in-8
#               sample; default: all mutants.
#   OUTPUT_DIR  where cargo-mutants writes mutants.out/ (default: target/mutants).
# The counts are in OUTPUT_DIR/mutants.out/{caught,missed,timeout,unviable}.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
shard=${1:-}
out=${2:-target/mutants}
args=(
    --file src/block/elevator/cfq.rs
    --file src/block/elevator/deadline.rs
    --file src/block/elevator/mq_deadline.rs
    --file src/block/queue.rs
    --timeout 60
    --no-shuffle
    -C --lib
    -o "$out"
)
if [[ -n "$shard" ]]; then
    args+=(--shard "$shard" --sharding round-robin)
fi
export CARGO_PROFILE_TEST_OPT_LEVEL=0 CARGO_PROFILE_TEST_DEBUG=0
nice -n 19 cargo mutants "${args[@]}" -- block:: || true
for outcome in caught missed timeout unviable; do
    file="$out/mutants.out/$outcome.txt"
    printf '%-9s %s\n' "$outcome" "$( [[ -f $file ]] && wc -l < "$file" || echo 0)"
done
