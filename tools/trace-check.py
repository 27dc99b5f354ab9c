#!/usr/bin/python3
"""trace-check.py - check the structure of a hive timeline (Chrome Trace JSON).

    tools/trace-check.py TRACE.json [NAME=COUNT]... [--dropped] [--waits]

Checks, printing one line per problem and exiting 1 if there is any:
  - the file is JSON with a traceEvents list;
  - every span ("X") and instant ("i") is on a track named by a thread_name
    record, and every task or method span is on a worker track;
  - spans on one track nest: any two are disjoint or one contains the other;
  - every task/method span has a distinct id (each submitted task ran once);
  - every flow end ("f") has exactly one start ("s") with its id, every start
    one end, and each lies inside a span on its own track;
  - --expect NAME=COUNT: exactly COUNT task/method spans are named NAME, and
    as many submit/call spans;
  - --dropped: otherData.dropped must be > 0 (a test of a full ring);
    without it, it must be 0;
  - --waits: there is a "wait" span (a job waiting in hive_get/hive_wait)
    on a worker track that contains a task or method span one level deeper
    (a job it helped with), and every wait span lies inside a task or
    method span of its track (the job that waited).
Timestamps are read as exact decimals (microseconds with ns precision).
"""
import bisect
import collections
import decimal
import json
import sys


def ns(v):
    return int(decimal.Decimal(v) * 1000)


def main(argv):
    if len(argv) < 2:
        print(__doc__.strip().splitlines()[2].strip())
        return 2
    path, expect, want_dropped, want_waits = argv[1], {}, False, False
    for a in argv[2:]:
        if a == "--dropped":
            want_dropped = True
        elif a == "--waits":
            want_waits = True
        elif "=" in a:
            k, v = a.rsplit("=", 1)
            expect[k] = int(v)
        else:
            print("unknown argument %r" % a)
            return 2
    problems = []
    try:
        with open(path) as f:
            doc = json.load(f, parse_float=decimal.Decimal)
        events = doc["traceEvents"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        print("%s: not a trace: %s" % (path, e))
        return 1

    names = {}
    for e in events:
        if e.get("ph") == "M" and e.get("name") == "thread_name":
            names[(e["pid"], e["tid"])] = e["args"]["name"]
    spans = collections.defaultdict(list)      # track -> [(start, end, event)]
    runs = collections.Counter()
    submits = collections.Counter()
    run_ids = collections.Counter()
    flows = {"s": collections.defaultdict(list), "f": collections.defaultdict(list)}
    for e in events:
        ph = e.get("ph")
        if ph not in ("X", "i", "s", "f"):
            continue
        track = (e.get("pid"), e.get("tid"))
        if track not in names:
            problems.append("%s %r on track %r that has no name" % (ph, e.get("name"), track))
            continue
        if ph == "X":
            start = ns(e["ts"])
            spans[track].append((start, start + ns(e["dur"]), e))
            cat = e.get("cat")
            if cat in ("task", "method"):
                if not names[track].startswith("worker "):
                    problems.append("%s %r on track %r" % (cat, e["name"], names[track]))
                runs[e["name"]] += 1
                run_ids[e["args"]["id"]] += 1
            elif cat in ("submit", "call"):
                submits[e["name"].split(" ", 1)[1]] += 1
        elif ph in ("s", "f"):
            flows[ph][e["id"]].append((track, ns(e["ts"])))

    for track, lst in spans.items():
        lst.sort(key=lambda s: (s[0], -s[1]))
        stack = []
        for start, end, e in lst:
            while stack and stack[-1][1] <= start:
                stack.pop()
            if stack and end > stack[-1][1]:
                problems.append("on %s, %r [%d, %d] overlaps %r [%d, %d] without nesting" % (
                    names[track], e["name"], start, end, stack[-1][2]["name"],
                    stack[-1][0], stack[-1][1]))
            stack.append((start, end, e))

    for i, n in run_ids.items():
        if n != 1:
            problems.append("id %s ran %d times" % (i, n))

    # per track: span starts sorted, and the latest end among the spans
    # begun so far, so "is ts inside a span" is one bisection
    reach = {}
    for track, lst in spans.items():
        starts, ends, far = [], [], None
        for s, e, _ in sorted(lst, key=lambda x: x[0]):
            far = e if far is None or e > far else far
            starts.append(s)
            ends.append(far)
        reach[track] = (starts, ends)

    def inside(track, ts):
        starts, ends = reach.get(track, ((), ()))
        i = bisect.bisect_right(starts, ts)
        return i > 0 and ends[i - 1] >= ts

    for ph, other in (("s", "f"), ("f", "s")):
        for i, lst in flows[ph].items():
            if len(lst) != 1 or len(flows[other].get(i, ())) != 1:
                problems.append("flow %s: %d %s and %d %s" % (
                    i, len(lst), ph, len(flows[other].get(i, ())), other))
            for track, ts in lst:
                if not inside(track, ts):
                    problems.append("flow %s %s at %d on %s is in no span" % (
                        ph, i, ts, names[track]))

    for name, count in expect.items():
        if runs[name] != count:
            problems.append("%d spans named %r, expected %d" % (runs[name], name, count))
        if submits[name] != count:
            problems.append("%d submits of %r, expected %d" % (submits[name], name, count))

    if want_waits:
        helped = 0
        for track, lst in spans.items():
            waits = [(s, e, ev) for s, e, ev in lst if ev.get("cat") == "wait"]
            runs_on = [(s, e, ev) for s, e, ev in lst if ev.get("cat") in ("task", "method")]
            for ws, we, wev in waits:
                if not any(s <= ws and we <= e for s, e, _ in runs_on):
                    problems.append("wait at %d on %s is in no task or method" % (ws, names[track]))
                depth = wev["args"]["depth"]
                if any(ws <= s and e <= we and ev["args"]["depth"] == depth + 1
                       for s, e, ev in runs_on):
                    helped += 1
        if helped == 0:
            problems.append("no wait span holds a job it helped with")

    dropped = int(doc.get("otherData", {}).get("dropped", -1))
    if want_dropped != (dropped > 0):
        problems.append("dropped = %d, expected %s" % (dropped, "> 0" if want_dropped else "0"))

    for p in problems[:50]:
        print("%s: %s" % (path, p))
    if problems:
        print("%s: %d problems" % (path, len(problems)))
        return 1
    print("%s: %d events, %d tracks, %d runs, %d flows: ok" % (
        path, len(events), len(names), sum(runs.values()), len(flows["s"])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
