"""priority.py - a HIGH call jumps the queue, from Python.

A replay-buffer actor is busy with a slow insert; four more inserts queue
behind it; then the learner asks for a sample at HIGH priority. The sample
runs right after the insert running now, ahead of the queued ones:

    PYTHONPATH=build/python /usr/bin/python3 examples/python/priority.py
    insert 0
    sample
    insert 1
    insert 2
    insert 3
    insert 4
"""
import threading

import hive


class Buffer:
    def __init__(self, running, go):
        self.running, self.go = running, go   # the driver's Events: same process, nothing pickled
        self.log = []

    def insert(self, i):
        if i == 0:                      # the slow insert: busy until the driver has queued the rest
            self.running.set()
            self.go.wait()              # (waiting lets the GIL go)
        self.log.append(f"insert {i}")

    def sample(self):
        self.log.append("sample")

    def history(self):
        return self.log


with hive.Engine(workers=2) as engine:
    running, go = threading.Event(), threading.Event()
    buf = engine.actor(Buffer)(running, go)
    first = buf.call("insert", 0)
    running.wait()                      # insert 0 is running now
    queued = [buf.call("insert", i) for i in range(1, 5)]
    high = buf.call("sample", priority=hive.HIGH)
    go.set()                            # insert 0 finishes; the HIGH sample goes next
    engine.wait([first, high] + queued, num_returns=6)
    for line in buf.call("history").get():
        print(line)
    del buf
