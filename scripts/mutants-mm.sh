#!/bin/sh
# Mutation testing of the page cache (src/mm/writeback.rs, vmscan.rs, filemap.rs) with
# cargo-mutants: each mutant (an operator or a function body replaced) is built and the mm unit
# tests run against it; a mutant the tests do not catch is a behaviour nothing pins down.
# Not run by CI: a full run is ~1,100 mutants, hours on a small machine. Sample with SHARD.
#
#   scripts/mutants-mm.sh                       # every mutant, in a copy of the tree
#   SHARD=0/16 scripts/mutants-mm.sh            # one mutant in sixteen (round-robin sample)
#   OUT=/tmp/mm-mutants scripts/mutants-mm.sh   # results under $OUT/mutants.out
#
# Results: mutants.out/{caught,missed,timeout,unviable}.txt. Score = caught / (caught + missed);
# timeouts count as caught (the mutant made the tests hang), unviable mutants do not compile.
# Needs `cargo install cargo-mutants --locked`.
set -eu
cd "$(dirname "$0")/.."
command -v cargo-mutants >/dev/null || {
    echo "cargo-mutants is missing: cargo install cargo-mutants --locked" >&2
    exit 2
}
SHARD=${SHARD:-}
OUT=${OUT:-target/mutants-mm}
set -- --file src/mm/writeback.rs --file src/mm/vmscan.rs --file src/mm/filemap.rs \
    --timeout 300 --build-timeout 1800 -C --lib -o "$OUT"
if [ -n "$SHARD" ]; then
    set -- "$@" --shard "$SHARD" --sharding round-robin
fi
# Only the library is built (-C --lib) and only the mm tests run: the other layers' tests
# cannot catch a page-cache mutant faster than these.
exec nice -n 19 cargo mutants "$@" -- mm::
