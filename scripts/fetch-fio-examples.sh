#!/usr/bin/env bash
# Puts fio's own example job files (axboe/fio's examples/*.fio at a pinned commit) into a cache
# directory for tests/fio_examples.rs, which runs each of them through `mobistack fio`
# unchanged. The files are fio's (GPL-2.0), so they are downloaded, never committed here.
#
#   scripts/fetch-fio-examples.sh [DIR]     (default: target/fio-examples)
#
# From a local clone when FIO_GIT names its git directory (`git archive`), else from GitHub's
# tarball of the commit (curl). Prints the directory and the number of job files; exits 1 when
# neither source is available.
set -euo pipefail
COMMIT=f5344384f7c7b6e9e6aa9336e476e8f6eb54dd3a # axboe/fio master, 2026-08-21: 107 examples/*.fio
cd "$(dirname "$0")/.."
dir=${1:-target/fio-examples}
if [ -f "$dir/.commit" ] && [ "$(cat "$dir/.commit")" = "$COMMIT" ]; then
    echo "fio examples: $dir ($(ls "$dir"/*.fio | wc -l) job files, cached)"
    exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [ -n "${FIO_GIT:-}" ]; then
    git --git-dir="$FIO_GIT" archive "$COMMIT" examples | tar -x -C "$tmp"
elif command -v curl >/dev/null 2>&1; then
    curl -fsSL "https://codeload.github.com/axboe/fio/tar.gz/$COMMIT" |
        tar -xz -C "$tmp" --strip-components=1 --wildcards "*/examples/*.fio"
else
    echo "fio examples: neither FIO_GIT nor curl; cannot fetch axboe/fio@$COMMIT" >&2
    exit 1
fi
rm -rf "$dir"
mkdir -p "$dir"
cp "$tmp"/examples/*.fio "$dir"/
echo "$COMMIT" > "$dir/.commit"
echo "fio examples: $dir ($(ls "$dir"/*.fio | wc -l) job files)"
