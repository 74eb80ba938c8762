#!/usr/bin/env python3
"""Answers, from a `mobistack run --perfetto` trace, "which request did APP's slowest OP wait on,
and how long did it sit in the elevator" -- the question `mobistack run` answers in its
"slowest operation" lines -- two ways:

1. decoding the trace with Perfetto's own schema (`perfetto_trace_pb2` of the `perfetto` Python
   package: an independent check that the file is a valid perfetto.protos.Trace);
2. with `--sql`, through Perfetto's trace_processor (the same package's TraceProcessor), by the SQL
   query printed below. trace_processor is a native binary the package downloads on first use,
   so this needs a machine that can reach Perfetto's download server.

Usage:
    pip install perfetto protobuf
    mobistack run bg-write-fg-read --variant cfq --perfetto trace.pftrace
    python3 scripts/perfetto_query.py trace.pftrace [--app gallery] [--op read] [--sql]
"""

import argparse
import sys

SQL = """
WITH slowest AS (
  SELECT s.id, s.dur FROM slice s
  JOIN thread_track tt ON s.track_id = tt.id
  JOIN thread USING (utid) JOIN process USING (upid)
  WHERE process.name = '{app}' AND s.name = '{op}' AND s.depth = 0
  ORDER BY s.dur DESC LIMIT 1
), wait AS (
  SELECT w.id, w.name, w.dur FROM slice w JOIN slowest ON w.parent_id = slowest.id
  WHERE w.category = 'wait' ORDER BY w.dur DESC LIMIT 1
), request AS (
  SELECT r.id, r.name FROM flow f JOIN wait ON f.slice_in = wait.id OR f.slice_out = wait.id
  JOIN slice r ON r.id = CASE WHEN f.slice_in = wait.id THEN f.slice_out ELSE f.slice_in END
)
SELECT (SELECT dur FROM slowest) / 1e6 AS op_ms, wait.name AS wait, wait.dur / 1e6 AS wait_ms,
       request.name AS request, q.name AS phase, q.dur / 1e6 AS queued_ms
FROM wait, request JOIN slice q ON q.parent_id = request.id AND q.name LIKE 'queued in %'
"""


def decode(path, app, op):
    from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import Trace

    trace = Trace()
    with open(path, "rb") as f:
        trace.ParseFromString(f.read())
    processes, threads = {}, {}
    for packet in trace.packet:
        if packet.HasField("track_descriptor"):
            d = packet.track_descriptor
            if d.HasField("process"):
                processes[d.process.pid] = d.process.process_name
            if d.HasField("thread"):
                threads[d.uuid] = d.thread.pid
    # Pair begins and ends per track into (track, start, end, depth, event).
    open_slices, slices = {}, []
    for packet in trace.packet:
        if not packet.HasField("track_event"):
            continue
        event = packet.track_event
        stack = open_slices.setdefault(event.track_uuid, [])
        if event.type == event.TYPE_SLICE_BEGIN:
            stack.append((packet.timestamp, event))
        elif event.type == event.TYPE_SLICE_END:
            start, begin = stack.pop()
            slices.append((event.track_uuid, start, packet.timestamp, len(stack), begin))
    ops = [
        s
        for s in slices
        if s[0] in threads
        and processes.get(threads[s[0]]) == app
        and s[3] == 0
        and s[4].name == op
    ]
    if not ops:
        sys.exit(f"no {op} of {app} in {path}")
    slowest = max(ops, key=lambda s: s[2] - s[1])
    children = [
        s
        for s in slices
        if s[0] == slowest[0] and s[3] == 1 and slowest[1] <= s[1] and s[2] <= slowest[2]
    ]
    waits = [
        s
        for s in children
        if "wait" in s[4].categories and (s[4].flow_ids or s[4].terminating_flow_ids)
    ]
    print(f"{app}'s slowest {op}: {(slowest[2] - slowest[1]) / 1e6:.3f} ms at {slowest[1] / 1e9:.3f} s")
    if not waits:
        print("  it waited on no request")
        return
    wait = max(waits, key=lambda s: s[2] - s[1])
    flow = (list(wait[4].flow_ids) + list(wait[4].terminating_flow_ids))[0]
    request = next(
        s
        for s in slices
        if "request" in s[4].categories
        and (flow in s[4].flow_ids or flow in s[4].terminating_flow_ids)
    )
    queued = next(
        s
        for s in slices
        if s[0] == request[0] and s[3] == 1 and s[1] == request[1] and s[4].name.startswith("queued in ")
    )
    print(f"  longest wait on a request: {wait[4].name} {(wait[2] - wait[1]) / 1e6:.3f} ms")
    print(f"  that request: {request[4].name}; {queued[4].name}: {(queued[2] - queued[1]) / 1e6:.3f} ms")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("trace")
    parser.add_argument("--app", default="gallery")
    parser.add_argument("--op", default="read")
    parser.add_argument("--sql", action="store_true", help="also ask trace_processor (downloads it)")
    args = parser.parse_args()
    decode(args.trace, args.app, args.op)
    if args.sql:
        from perfetto.trace_processor import TraceProcessor

        query = SQL.format(app=args.app, op=args.op)
        print(query)
        with TraceProcessor(trace=args.trace) as tp:
            for row in tp.query(query):
                print(
                    f"  trace_processor: {row.op_ms:.3f} ms; {row.wait} {row.wait_ms:.3f} ms; "
                    f"{row.request}; {row.phase} {row.queued_ms:.3f} ms"
                )


if __name__ == "__main__":
    main()
