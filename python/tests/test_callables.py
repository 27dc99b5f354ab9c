# test_callables.py - Python functions and classes run on hive workers
# (engine.remote, engine.actor): results of every kind, Ref arguments
# resolved, failures as TaskFailed / ActorDead, two Python actors sharing
# one SharedArray, and their objects leaving the store when dropped.
import numpy as np
import pytest

import hive
from conftest import eventually


def test_remote_results(engine):
    sq = engine.remote(lambda x: x * x)
    assert sq(7).get() == 49                             # pickled
    v = sq(np.arange(4)).get()                           # typed: a read-only ndarray
    assert isinstance(v, np.ndarray) and v.tolist() == [0, 1, 4, 9] and not v.flags.writeable
    assert bytes(engine.remote(lambda: b"raw")().get()) == b"raw"
    ref = engine.put(np.arange(5.0))
    assert engine.remote(lambda a, k=0: float(a.sum()) + k)(ref, k=1).get() == 11.0
    assert engine.remote(lambda d: d["x"])({"x": [1, 2]}).get() == [1, 2]


def test_remote_failure_is_task_failed(engine):
    with pytest.raises(hive.TaskFailed):
        engine.remote(lambda: 1 / 0)().get(timeout=30)
    failed = engine.remote(lambda: 1 / 0)()
    with pytest.raises(hive.TaskFailed):                 # a failed Ref argument
        engine.remote(lambda x: x)(failed).get(timeout=30)


class Counter:
    def __init__(self, start):
        self.n = start

    def add(self, d):
        self.n += d
        return self.n


class Worker:
    """the seed's WorkerActor: holds the shared array, adds one in place"""

    def __init__(self, arr):
        self.arr = arr

    def add_one(self):
        return int(self.arr.add(0, 1))

    def read(self):
        return int(self.arr[0])

    def where(self):
        return self.arr.ctypes.data


def test_python_actor_keeps_state_in_order(engine):
    c = engine.actor(Counter)(10)
    futs = [c.call("add", i) for i in range(1, 5)]
    assert [f.get(timeout=30) for f in futs] == [11, 13, 16, 20]
    with pytest.raises(hive.TaskFailed):
        c.call("no_such_method").get()
    c.kill()
    with pytest.raises(hive.ActorDead):
        c.call("add", 1).get()


def test_two_python_actors_share_one_array(engine):
    arr = engine.array(1, np.int64)
    w1, w2 = engine.actor(Worker)(arr), engine.actor(Worker)(arr)
    assert w1.call("add_one").get() == 1
    assert w2.call("add_one").get() == 2
    assert w1.call("read").get() == 2 and arr[0] == 2
    assert w1.call("where").get() == w2.call("where").get() == arr.ctypes.data


def test_constructor_failure_is_actor_dead(engine):
    class Bad:
        def __init__(self):
            raise RuntimeError("no")

        def f(self):
            return 1

    b = engine.actor(Bad)()
    with pytest.raises(hive.ActorDead):
        b.call("f").get(timeout=30)


def test_bad_callables(engine):
    with pytest.raises(TypeError):
        engine.remote(3)
    with pytest.raises(TypeError):
        engine.actor(lambda: 0)
    with pytest.raises(ValueError):
        engine.remote(print, priority=9)()


def test_callables_leave_the_store(engine):
    arr = engine.array(4, np.float64)
    w = engine.actor(Worker)(arr)
    w.call("add_one").get()
    futs = [engine.remote(lambda i: np.full(100, i))(i) for i in range(5)]
    [f.get() for f in futs]
    assert engine.stats()["objects"] > 5
    del arr, w, futs
    assert eventually(lambda: engine.stats()["objects"] == 0 and engine.stats()["used"] == 0), \
        engine.stats()


def test_shared_array_example_prints_1_2_2():
    import os
    import subprocess
    import sys
    here = os.path.dirname(os.path.abspath(__file__))
    script = os.path.join(here, "..", "..", "examples", "python", "shared_array.py")
    out = subprocess.run([sys.executable, script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["1", "2", "2"]


def test_priority_example_high_call_jumps_the_queue():
    import os
    import subprocess
    import sys
    here = os.path.dirname(os.path.abspath(__file__))
    script = os.path.join(here, "..", "..", "examples", "python", "priority.py")
    out = subprocess.run([sys.executable, script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["insert 0", "sample"] + [f"insert {i}" for i in range(1, 5)]
