# test_errors.py - every hive exception raised by a real failure, carrying
# hive's sentence and code; bad arguments raise ValueError / TypeError.
import numpy as np
import pytest

import hive

CLASSES = [hive.StoreFull, hive.Timeout, hive.Cancelled, hive.TaskFailed, hive.ActorDead,
           hive.ShutDown]


def test_hierarchy():
    for c in CLASSES:
        assert issubclass(c, hive.Error)


def check(excinfo, code):
    assert excinfo.value.code == code
    assert len(str(excinfo.value)) > 10      # hive's sentence, not just a name


def test_store_full():
    with hive.Engine(workers=1, store_bytes=1 << 20) as eng:
        with pytest.raises(hive.StoreFull) as ei:
            eng.put(np.zeros(1 << 20))       # 8 MiB into 1 MiB
        check(ei, -3)
        assert "8388608" in str(ei.value) or "1048576" in str(ei.value)


def test_timeout(engine):
    ref, _ = engine.create(8)
    with pytest.raises(hive.Timeout) as ei:
        engine.get(ref, timeout=0.01)
    check(ei, -5)


def test_cancelled(engine, lib):
    spin = lib.submit("py_spin")
    assert spin.cancel()
    with pytest.raises(hive.Cancelled) as ei:
        spin.get(timeout=30)
    check(ei, -6)
    assert spin.cancel() is False            # finished: nothing to cancel


def test_task_failed(engine, lib):
    with pytest.raises(hive.TaskFailed) as ei:
        lib.submit("py_fail").get()
    check(ei, -7)
    dep = lib.submit("py_sum_f64", lib.submit("py_fail"))   # a failed dependency
    with pytest.raises(hive.TaskFailed):
        dep.get()


def test_actor_dead(engine, lib):
    broken = lib.actor("py_broken")
    with pytest.raises(hive.ActorDead) as ei:
        broken.call("get").get(timeout=30)
    check(ei, -8)
    c = lib.actor("py_counter")
    assert np.frombuffer(c.call("add", 4).get(), np.int64)[0] == 4
    c.kill()
    with pytest.raises(hive.ActorDead):
        c.call("add", 1).get()


def test_shut_down():
    eng = hive.Engine(workers=1, store_bytes=1 << 20)
    ref = eng.put(b"x")
    eng.close()
    with pytest.raises(hive.ShutDown):
        eng.get(ref)
    with pytest.raises(hive.ShutDown):
        eng.put(b"y")
    del ref                                  # releasing after shutdown is harmless


def test_bad_arguments(engine, lib):
    with pytest.raises(TypeError):
        engine.put(object())
    with pytest.raises(TypeError):
        engine.put(np.array([object()]))
    with pytest.raises(TypeError):
        engine.get("not a ref")
    r = engine.put(b"x")
    with pytest.raises(ValueError):
        engine.get(r, timeout=-1)
    with pytest.raises(ValueError):
        engine.get(r, timeout=float("nan"))
    with pytest.raises(ValueError):
        engine.create(-1)
    with pytest.raises(ValueError):
        engine.wait([r], num_returns=2)
    with pytest.raises(TypeError):
        engine.wait([r, 3])
    with pytest.raises(TypeError):
        engine.array((2,), np.complex128)
    with pytest.raises(ValueError):
        engine.array((-1, 2), np.int32)       # hive says why
    with pytest.raises(ValueError):
        engine.array((1,) * 9, np.int8)
    with pytest.raises(ValueError):
        hive.Engine(workers=-1)
    with pytest.raises(ValueError):
        hive.Engine(store_bytes=100)          # hive's minimum is 4096
    with pytest.raises(ValueError):
        lib.submit("no_such_function")
    with pytest.raises(TypeError):
        lib.submit("py_sum_f64", object())
    with pytest.raises(TypeError):
        lib.submit("py_sum_f64", bogus=1)
    c = lib.actor("py_counter")
    with pytest.raises(ValueError):
        c.call("no_such_method")
    with pytest.raises(ValueError):
        c.call("add", 1, priority=7)
    with pytest.raises(OSError):
        engine.load("/nonexistent/libnothing.so")
    a = engine.array((3,), np.int64)
    with pytest.raises(IndexError):
        a.add(3, 1)
    with pytest.raises(TypeError):
        a.add(0, 1.5)
    with pytest.raises(TypeError):
        (a + 1).add(0, 1)                    # a ufunc result is not hive memory


def test_call_and_submit_keywords(engine, lib):
    c = lib.actor("py_counter", 0)
    assert np.frombuffer(c.call("add", 2, priority=None).get(), np.int64)[0] == 2
    assert np.frombuffer(c.call("add", 3, priority=hive.HIGH).get(), np.int64)[0] == 5
    with pytest.raises(TypeError):
        c.call("add", 1, bogus=1)
    with pytest.raises(TypeError):
        c.call(priority=hive.LOW)             # no method name
    with pytest.raises(TypeError):
        c.call(7)
    with pytest.raises(TypeError):
        c.call("add", object())
    assert np.frombuffer(c.call("add", True).get(), np.int64)[0] == 6   # a bool is an int
    f = lib.submit("py_sum_f64", np.ones(3), priority=hive.LOW, retries=2)
    assert np.frombuffer(f.get(timeout=30), np.float64)[0] == 3.0
    with pytest.raises(ValueError):
        lib.submit("py_sum_f64", np.ones(3), retries=-1)
    with pytest.raises(ValueError):
        lib.submit("py_sum_f64", np.ones(3), priority=5)
    with pytest.raises(TypeError):
        lib.submit()
    with pytest.raises(TypeError):
        lib.submit("py_sum_f64", np.ones(3), retries="x")
    p = engine.actor(PyCounter)(1)
    assert p.call("add", 2, by=10).get(timeout=30) == 21     # keywords go to the method
    assert p.call("add", 1, priority=hive.HIGH).get(timeout=30) == 22
    with pytest.raises(ValueError):
        p.call("add", 1, priority=3)


class PyCounter:
    def __init__(self, n):
        self.n = n

    def add(self, d, by=1):
        self.n += d * by
        return self.n


def test_bench_helpers(engine, lib):
    # the benchmark's C-side loops and the memoryview floor (bench/python/bench.py)
    assert bytes(hive._hive._noop_view(b"xy")) == b"xy"
    ref = engine.put(b"12345678")
    assert hive._hive._c_loop("get", ref, 10) > 0
    assert hive._hive._c_loop("get", [ref, engine.put(b"x")], 0) > 0
    c = lib.actor("py_counter", 0)
    assert hive._hive._c_loop("call", c, 10) > 0
    assert hive._hive._c_loop("call_sync", c, 10) > 0
    assert hive._hive._c_loop("put", engine, 10) > 0
    assert min(hive._hive._c_loop("call_split", c, 10)) > 0
    assert np.frombuffer(c.call("get").get(), np.int64)[0] == 30   # every call ran once
    with pytest.raises(TypeError):
        hive._hive._c_loop("get", c, 10)
    with pytest.raises(TypeError):
        hive._hive._c_loop("get", [ref, 3], 0)
    with pytest.raises(ValueError):
        hive._hive._c_loop("get", [], 0)
    with pytest.raises(ValueError):
        hive._hive._c_loop("call", c, 10, "nope")


def test_argument_kinds(engine, lib):
    def addr(*args):
        out = np.frombuffer(lib.submit("py_addr", *args).get(timeout=30), np.uint64)
        return int(out[0]), int(out[1])

    assert addr(2.5)[1] == 8                  # a float: a double
    assert addr(-3)[1] == 8                   # an int: an int64
    c = lib.actor("py_counter", 0)
    assert addr(c)[1] == 8                    # an actor: its handle's 8 bytes
    assert addr(np.arange(3.0), 1, 2, 3, 4)[1] == 24   # past the 4 inline argument slots
    assert np.frombuffer(lib.submit("py_sum_f64", np.ones(5), 1, 2.0, b"x", 4, 5).get(timeout=30),
                         np.float64)[0] == 5.0
    with pytest.raises(OverflowError):
        lib.submit("py_addr", 2 ** 70)
    with pytest.raises(OverflowError):
        c.call("add", 1, 2, 3, 4, 2 ** 70)
    with pytest.raises(UnicodeEncodeError):
        c.call("\ud800")                      # a method name that is no UTF-8
    with pytest.raises(TypeError):
        engine.put(b"x").get(1, 2)


def test_placement_keywords(engine, lib):
    # node= / worker= are hive's placement (include/hive.h "Placement"); the
    # suite's engine has one node and two workers
    a = lib.actor("py_counter", 5, node=0)
    assert np.frombuffer(a.call("add", 1).get(timeout=30), np.int64)[0] == 6
    w = lib.actor("py_counter", 1, worker=1)
    assert np.frombuffer(w.call("get").get(timeout=30), np.int64)[0] == 1
    assert np.frombuffer(lib.submit("py_sum_f64", np.ones(2), node=0).get(timeout=30), np.float64)[0] == 2
    p = engine.actor(PyCounter, worker=0)(3)
    assert p.call("add", 1).get(timeout=30) == 4
    with pytest.raises(ValueError):
        lib.actor("py_counter", node=7)         # no such node: hive says why
    with pytest.raises(ValueError):
        lib.actor("py_counter", worker=99)
    with pytest.raises(ValueError):
        lib.actor("py_counter", node=0, worker=0)
    with pytest.raises(ValueError):
        lib.actor("py_counter", node=-1)
    with pytest.raises(TypeError):
        lib.submit("py_sum_f64", np.ones(2), worker=0)   # worker= places actors only
    with pytest.raises(ValueError):
        lib.submit("py_sum_f64", np.ones(2), node=5)
    with pytest.raises(ValueError):
        engine.actor(PyCounter, node=9)(1)
    with pytest.raises(TypeError):
        lib.actor("py_counter", node="x")
