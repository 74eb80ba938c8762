#!/usr/bin/env python3
"""The real counterpart of scenarios/desktop-fsync*.toml (docs/mm.md, "Desktop validation").

Every 25 ms: append 4 KiB to FILE and fsync it, for SECONDS; then print one line per
transaction: start time (s), fsync latency (us), write latency (us), and a summary of the
fsync latencies in [FROM, TO) on stderr.

    python3 scripts/desktop-fsync-loop.py /path/on/disk/db.log 45 5 45 > fsync.txt &
    sleep 5; dd if=/dev/zero of=/path/on/disk/big bs=1M count=3072
"""
import os
import sys
import time


def percentile(values, p):
    values = sorted(values)
    k = (len(values) - 1) * p / 100.0
    f = int(k)
    c = min(f + 1, len(values) - 1)
    return values[f] + (values[c] - values[f]) * (k - f)


def main():
    path, seconds = sys.argv[1], float(sys.argv[2])
    lo = float(sys.argv[3]) if len(sys.argv) > 3 else 0.0
    hi = float(sys.argv[4]) if len(sys.argv) > 4 else seconds
    fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
    buf = b"x" * 4096
    t0 = time.monotonic()
    due = t0
    rows = []
    while time.monotonic() - t0 < seconds:
        now = time.monotonic()
        if now < due:
            time.sleep(due - now)
        start = time.monotonic()
        os.write(fd, buf)
        written = time.monotonic()
        os.fsync(fd)
        end = time.monotonic()
        rows.append((start - t0, (end - written) * 1e6, (written - start) * 1e6))
        due = max(due + 0.025, end)
    os.close(fd)
    for t, fsync_us, write_us in rows:
        print(f"{t:.3f} {fsync_us:.0f} {write_us:.0f}")
    window = [r[1] / 1000 for r in rows if lo <= r[0] < hi]
    print(
        f"fsyncs {len(window)} in [{lo}, {hi}) s: p50 {percentile(window, 50):.2f} ms, "
        f"p99 {percentile(window, 99):.2f} ms, max {max(window):.2f} ms",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
