"""shared_array.py - the seed's two actors sharing one numpy array, in Python.

Two WorkerActors hold the same hive SharedArray (a numpy ndarray over hive's
store, nothing copied) and add one to it atomically; worker 1 then reads the
sum, and so does the driver, through its own view of the same bytes:

    PYTHONPATH=build/python /usr/bin/python3 examples/python/shared_array.py
    1
    2
    2
"""
import numpy as np

import hive


class WorkerActor:
    def __init__(self, counter):
        self.counter = counter          # a view of the shared array, not a copy

    def add_one(self):
        return int(self.counter.add(0, 1))   # atomic, returns the new value

    def read(self):
        return int(self.counter[0])


with hive.Engine(workers=2) as engine:
    counter = engine.array(1, np.int64)
    worker1 = engine.actor(WorkerActor)(counter)
    worker2 = engine.actor(WorkerActor)(counter)
    print(worker1.call("add_one").get())   # 1
    print(worker2.call("add_one").get())   # 2
    print(worker1.call("read").get())      # 2
    assert counter[0] == 2                 # the driver's view sees the same bytes
    del worker1, worker2, counter
