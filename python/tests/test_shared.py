# test_shared.py - shared arrays (a C task's write seen by the numpy view,
# atomics, write sections, snapshots), DLPack with numpy (and torch when
# installed), cells, the replay buffer and C actors.
import threading
import time

import numpy as np
import pytest

import hive


def test_c_task_write_seen_by_the_view(engine, lib):
    a = engine.array((4, 3), np.int64)
    assert isinstance(a, hive.SharedArray) and a.flags.writeable
    a[1] = 7
    lib.submit("py_bump", a, 5).get()
    assert a.tolist() == [[5] * 3, [12] * 3, [5] * 3, [5] * 3]   # the task wrote our memory
    part = a[1:, ::2]                         # a strided slice stays a view
    assert isinstance(part, hive.SharedArray)
    lib.submit("py_bump", part, 1).get()      # passes the whole array
    assert part.tolist() == [[13, 13], [6, 6], [6, 6]]


def test_atomic_add_from_two_threads(engine):
    a = engine.array((2, 5), np.int32)
    view = a[:, 1:4]

    def work():
        for _ in range(2000):
            view.add((1, -1), 1)             # a[1, 3]
            a.add(0, 2) if a.ndim == 1 else a.add((0, 0), 2)

    ts = [threading.Thread(target=work) for _ in range(3)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert a[1, 3] == 6000 and a[0, 0] == 12000
    f = engine.array(3, np.float64)
    assert f.add(2, 0.5) == 0.5 and f.add(-1, 0.25) == 0.75


def test_writing_and_snapshot(engine):
    a = engine.array((100,), np.float64)
    with a.writing():
        a[:] = np.arange(100)
    snap = a.snapshot()
    assert type(snap) is np.ndarray and np.array_equal(snap, np.arange(100))
    a[:] = -1                                 # the snapshot is a copy
    assert snap[5] == 5
    part = a[90:10:-7]
    assert np.array_equal(part.snapshot(), np.asarray(part))
    with pytest.raises(RuntimeError):
        with a.writing():
            raise RuntimeError("the section is closed on the way out")
    with a.writing():                         # so a second section can open
        a[0] = 1


def test_dlpack_round_trip_numpy(engine):
    a = engine.array((3, 4), np.float32)
    b = np.from_dlpack(a)
    assert b.ctypes.data == a.ctypes.data and b.shape == (3, 4) and b.dtype == np.float32
    a[2, 3] = 9
    assert b[2, 3] == 9                       # the same memory
    s = np.from_dlpack(a[::2, 1::2])
    assert s.shape == (2, 2) and s.strides == a[::2, 1::2].strides
    assert a.__dlpack_device__() == (1, 0)
    v = engine.get(engine.put(np.arange(6, dtype=np.int16).reshape(2, 3)))
    w = np.from_dlpack(v)
    assert w.ctypes.data == v.ctypes.data and np.array_equal(w, v)
    del v
    assert np.array_equal(w, np.arange(6).reshape(2, 3))   # the capsule holds the object


def test_dlpack_torch(engine):
    torch = pytest.importorskip("torch")
    a = engine.array((4,), np.float64)
    t = torch.from_dlpack(a)
    a[1] = 3
    assert t[1].item() == 3


def test_cells(engine):
    cell = engine.cell()
    assert cell.acquire() is None
    r1 = engine.put(np.array([1.0]))
    cell.publish(r1)
    ref, seq = cell.acquire()
    assert ref == r1 and seq == 1
    cell.publish(engine.put(np.array([2.0])))
    ref, seq = cell.acquire()
    assert seq == 2 and engine.get(ref)[0] == 2.0
    with pytest.raises(TypeError):
        cell.publish(b"not a ref")


def test_replay_uniform(engine):
    rb = engine.replay(64, np.float32, (3,), seed=1)
    rows = np.repeat(np.arange(20, dtype=np.float32)[:, None], 3, axis=1)
    rb.push(rows)
    items, keys, weights = rb.sample(10)
    assert items.shape == (10, 3) and keys.dtype == np.uint64 and np.all(weights == 1)
    assert np.array_equal(items[:, 0], keys.astype(np.float32))   # item k was pushed as key k
    with pytest.raises(ValueError):
        rb.sample(21)                         # more than held
    with pytest.raises(ValueError):
        rb.push(np.ones((2, 4)))
    with pytest.raises(hive.Error):
        rb.update_priorities(keys, np.ones(10))    # not prioritized
    assert rb.stats()["size"] == 20


def test_replay_prioritized(engine):
    rb = engine.replay(32, np.int64, prioritized=True, alpha=1.0, beta=1.0, seed=3)
    rb.push(np.arange(16))
    _, keys, _ = rb.sample(16, distinct=True)
    assert sorted(keys.tolist()) == list(range(16))
    prio = np.zeros(16)
    prio[keys == 5] = 1.0
    assert rb.update_priorities(keys, prio) == 16
    items, keys2, w = rb.sample(8)
    assert np.all(items == 5) and np.all(keys2 == 5) and np.all(w == 1.0)
    with pytest.raises(ValueError):
        rb.update_priorities(keys, -prio)


def test_replay_sample_timeout(engine):
    rb = engine.replay(8, np.float64, min_size=4)
    rb.push(np.ones(2))
    with pytest.raises(hive.Timeout):
        rb.sample(1, timeout=0.01)


def test_c_actor_calls(engine, lib):
    c = lib.actor("py_counter", 10)
    futs = [c.call("add", i) for i in range(1, 5)]
    got = [int(np.frombuffer(f.get(timeout=30), np.int64)[0]) for f in futs]
    assert got == [11, 13, 16, 20]            # one caller, one priority: in order
    hi = c.call("get", priority=hive.HIGH)
    assert int(np.frombuffer(hi.get(), np.int64)[0]) == 20
    ready, _ = engine.wait(futs, num_returns=4)
    assert len(ready) == 4


def _blocked_sampler(rb):
    """a thread sampling rb with no timeout (the rate limiter holds it); its outcome"""
    out = {}

    def run():
        try:
            rb.sample(1)
            out["result"] = "sampled"
        except BaseException as exc:          # noqa: B902 - the test reads what it was
            out["result"] = exc
    t = threading.Thread(target=run)
    t.start()
    time.sleep(0.2)                           # it is now waiting without the GIL
    assert t.is_alive() and not out
    return t, out


def test_replay_close_while_a_sample_waits():
    # close() used to free the buffer under a sampler waiting without the GIL
    with hive.Engine(workers=1, store_bytes=16 << 20) as eng:
        rb = eng.replay(8, np.float64, min_size=4)
        rb.push(np.ones(2))
        t, out = _blocked_sampler(rb)
        rb.close()
        t.join(10)
        assert not t.is_alive()
        assert isinstance(out["result"], hive.Error) and "closed" in str(out["result"])
        with pytest.raises(hive.Error):
            rb.push(np.ones(1))


def test_engine_close_while_a_sample_waits():
    eng = hive.Engine(workers=1, store_bytes=16 << 20)
    rb = eng.replay(8, np.float64, min_size=4)
    rb.push(np.ones(2))
    t, out = _blocked_sampler(rb)
    eng.close()                               # the sampler ends, then the engine stops
    t.join(10)
    assert not t.is_alive()
    assert isinstance(out["result"], hive.ShutDown)
    assert eng.closed
    with pytest.raises(hive.ShutDown):
        rb.push(np.ones(1))


def test_c_loop_times_the_same_work_from_c(engine, lib):
    # the benchmark's baseline: the C calls the binding makes, timed from C
    c = lib.actor("py_counter", 0)
    ref = engine.put(b"12345678")
    assert 0 < hive._hive._c_loop("get", ref, 100) < 1
    assert 0 < hive._hive._c_loop("call", c, 100, "add") < 1
    assert int(np.frombuffer(c.call("get").get(timeout=30), np.int64)[0]) == 100
    with pytest.raises(ValueError):
        hive._hive._c_loop("get", ref, 0)
    with pytest.raises(ValueError):
        hive._hive._c_loop("call", c, 10, "nosuch")
    with pytest.raises(TypeError):
        hive._hive._c_loop("call", ref, 10)
    with pytest.raises(TypeError):
        hive._hive._c_loop("walk", ref, 10)
