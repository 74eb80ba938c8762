#!/usr/bin/env bash
# Byte-identity check of two mobistack binaries (issue 17's rule for speed work: a change that
# makes the simulator faster must not change a single result).
#
#   scripts/same-results.sh OLD_BINARY NEW_BINARY [quick]
#
# Runs from the repository root. Compares with `cmp`, for both binaries:
#   - `run NAME --json` of 22 scenarios (every paper's main scenarios and the stack's features:
#     ext4/jbd2 with internal and external journals, CFQ/BFQ/mq-deadline, FastTrack, QASIO,
#     SQLite, F2FS, MobiFS, crash recording) and of the 2 GiB whole-stack write of
#     docs/performance.md ("The whole-stack write path");
#   - `fio --output-format json` of a 300 ms 4 KiB random-read job on five device/elevator pairs;
#   - the `--blktrace` files and the stdout of `run scenarios/fg-read-bg-write.toml`.
# `quick` skips the 2 GiB run and the 9 extra scenarios. Prints "same"/"DIFF" per item and exits
# 1 if anything differs. Takes about 6 minutes in full on two cores.
set -u
if [ $# -lt 2 ] || [ ! -x "$1" ] || [ ! -x "$2" ]; then
  echo "usage: $0 OLD_BINARY NEW_BINARY [quick]  (two executable mobistack binaries)" >&2
  exit 2
fi
OLD=$1
NEW=$2
QUICK=${3:-}
cd "$(dirname "$0")/.." || exit 2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail=0

same() { # NAME FILE_OLD FILE_NEW
  if cmp -s "$2" "$3"; then echo "same $1"; else echo "DIFF $1"; fail=1; fi
}

scenarios="scenarios/fg-read-bg-write.toml bg-write-fg-read qasio/m1 qasio/m5
  fasttrack/camera-update fasttrack/gallery-update fasttrack/game-backup fasttrack/gallery-backup
  production/fg-vs-bg demo sqlite/mobibench f2fs/fg-gc-stall mobifs/inhouse"
if [ "$QUICK" != quick ]; then
  scenarios="$scenarios joj/insert io-account qasio/m3 qasio/m4 qasio/scenario-b crash/sqlite
    mobifs/sqlite qasio/scenario-a context-aware/video-ioread"
  sed -e 's/size = "1GiB"/size = "2GiB"/' -e 's/duration = "20s"/duration = "60s"/' \
      -e 's/capacity = "8GiB"/capacity = "12GiB"/' scenarios/bg-write-fg-read.toml > "$work/w2.toml"
  scenarios="$scenarios $work/w2.toml"
fi
for s in $scenarios; do
  "$OLD" run "$s" --json > "$work/old.json" 2>/dev/null
  "$NEW" run "$s" --json > "$work/new.json" 2>/dev/null
  same "run $s" "$work/old.json" "$work/new.json"
done

printf '[randread]\ndirect=1\nsize=16g\nruntime=300ms\ntime_based\nrw=randread\nbs=4k\nioengine=libaio\niodepth=32\n' > "$work/f300.fio"
for de in ufs-3.1:noop emmc-5.0:cfq emmc-5.1:mq-deadline ufs-2.1:bfq ufs-3.1:kyber; do
  for b in OLD NEW; do
    bin=$OLD; [ $b = NEW ] && bin=$NEW
    "$bin" fio "$work/f300.fio" --device "${de%%:*}" --elevator "${de##*:}" \
        --output-format json > "$work/fio.$b" 2>/dev/null
  done
  same "fio $de" "$work/fio.OLD" "$work/fio.NEW"
done

"$OLD" run scenarios/fg-read-bg-write.toml --blktrace "$work/bt-old" > "$work/bt-old.out" 2>/dev/null
"$NEW" run scenarios/fg-read-bg-write.toml --blktrace "$work/bt-new" > "$work/bt-new.out" 2>/dev/null
for f in "$work"/bt-old*; do
  same "blktrace ${f##*/bt-old}" "$f" "${f/bt-old/bt-new}"
done
exit $fail
