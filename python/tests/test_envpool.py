# test_envpool.py - engine.envpool: the C env pool's batches as numpy views
# (zero-copy), gym's reset/step, EnvPool's send/recv/async_reset, the GIL
# released while stepping, and bad inputs mapped to hive's exceptions.
import threading
import time

import numpy as np
import pytest

import hive


def addr(a):
    return a.__array_interface__["data"][0]


def test_sync_batches_are_views_of_the_pools_arrays(engine):
    p = engine.envpool("CartPole", 8, seed=3)
    obs = p.reset()
    assert obs.shape == (8, 4) and obs.dtype == np.float32
    assert addr(obs) == p._p.last_addresses()[0]
    batch = p.step(np.zeros(8, np.int32))
    assert tuple(addr(a) for a in batch) == p._p.last_addresses()
    obs, reward, done, ids = batch
    assert reward.dtype == np.float32 and done.dtype == np.uint8 and ids.dtype == np.int32
    assert list(ids) == list(range(8))
    assert np.all(reward == 1.0)
    assert not obs.flags.writeable
    p.close()


def test_seeded_pools_agree_and_episodes_auto_reset(engine):
    a, b = engine.envpool("CartPole", 4, seed=7), engine.envpool("CartPole", 4, seed=7)
    assert np.array_equal(a.reset(), b.reset())
    left = np.zeros(4, np.int64)                 # integer actions are cast to int32
    for _ in range(200):
        oa, ra, da, _ = a.step(left)
        ob, _, db, _ = b.step(left)
        assert np.array_equal(oa, ob) and np.array_equal(da, db)
        if da.any():
            break
    assert da.any(), "pushing left forever must end an episode"
    # the obs returned with done is the next episode's first: near the origin
    assert np.all(np.abs(oa[da == 1]) < 0.06)


def test_a_view_outlives_the_pool(engine):
    p = engine.envpool("CartPole", 4)
    obs, reward, done, ids = p.step(np.zeros(4, np.int32)) if p.reset() is not None else None
    keep = obs.copy()
    p.close()
    assert np.array_equal(obs, keep)             # its memory is held by the view (ASan checks)
    assert list(ids) == [0, 1, 2, 3]


def test_async_every_result_once_to_its_id(engine):
    n, bs, length = 16, 4, 5
    p = engine.envpool("Synthetic", n, batch_size=bs, step_ns=2000, episode_len=length, seed=1)
    p.async_reset()
    in_flight = set(range(n))
    t = np.full(n, -1)                           # each env's step count in its episode
    delivered = np.zeros(n, np.int64)
    sent = np.zeros(n, np.int64)
    for _ in range(300):
        obs, reward, done, ids = p.recv(timeout=30)
        assert len(ids) == bs and len(set(ids.tolist())) == bs
        for k, i in enumerate(ids.tolist()):
            assert i in in_flight, f"env {i} delivered without being sent"
            in_flight.remove(i)
            delivered[i] += 1
            t[i] = 0 if t[i] < 0 or done[k] else t[i] + 1
            assert obs[k, 0] == t[i], f"env {i}: obs of step {obs[k, 0]}, expected {t[i]}"
        p.send(np.ones(bs, np.int32), ids.copy())
        in_flight.update(ids.tolist())
        sent[ids] += 1
    for _ in range(len(in_flight) // bs):
        _, _, _, ids = p.recv(timeout=30)
        for i in ids.tolist():
            in_flight.remove(i)
            delivered[i] += 1
    assert not in_flight
    assert np.array_equal(delivered, sent + 1)   # + 1: the reset
    assert sent.sum() == 300 * bs


@pytest.mark.parametrize("call", ["step", "recv"])
def test_gil_released_while_stepping(engine, call):
    # a helper thread steps (1 s of spinning per env step) or waits in recv
    # for such a step; this thread, needing the GIL, must find the pool busy
    # inside that call. Had the call kept the GIL, the pool would be idle
    # whenever this thread runs.
    p = engine.envpool("Synthetic", 2, step_ns=1_000_000_000, episode_len=1000)
    if call == "step":
        p.reset()
        work = lambda: p.step(np.zeros(2, np.int32))
    else:
        p.async_reset()
        p.recv(timeout=30)
        p.send(np.zeros(2, np.int32), [0, 1])    # 1 s of stepping on its way
        work = lambda: p.recv()
    entered = threading.Event()
    th = threading.Thread(target=lambda: (entered.set(), work()))
    th.start()
    entered.wait()
    seen_inside = False
    while th.is_alive() and not seen_inside:
        try:
            p._p.recv(0)
        except hive.Error as e:
            seen_inside = "another thread" in str(e)
    th.join()
    assert seen_inside


def test_sync_views_show_the_latest_batch(engine):
    # the contract: a batch is valid until the pool's next call; in sync mode
    # the pool rewrites the same arrays, so an old view shows the new batch
    p = engine.envpool("CartPole", 4, seed=5)
    first = p.reset()
    kept = first.copy()
    obs, _, _, _ = p.step(np.ones(4, np.int32))
    assert addr(first) == addr(obs)
    assert np.array_equal(first, obs) and not np.array_equal(first, kept)


def test_bad_inputs(engine):
    with pytest.raises(ValueError):
        engine.envpool("Pong", 4)
    with pytest.raises(ValueError):
        engine.envpool("CartPole", 0)
    with pytest.raises(ValueError):
        engine.envpool("CartPole", 4, batch_size=5)
    with pytest.raises(ValueError):
        engine.envpool("CartPole", 2, env_node=[0])
    with pytest.raises(ValueError):
        engine.envpool("CartPole", 2, env_node=[0, 99])
    p = engine.envpool("CartPole", 4, batch_size=2)
    p.reset()
    with pytest.raises(ValueError):
        p.step(np.zeros(4, np.float32))          # wrong dtype
    with pytest.raises(ValueError):
        p.step(np.zeros(3, np.int32))            # wrong rows
    with pytest.raises(ValueError):
        p.step(np.zeros((4, 2), np.int32))       # wrong action shape
    with pytest.raises(ValueError):
        p._p.step(np.zeros(8, np.int32)[::2])    # not contiguous (the wrapper would copy)
    with pytest.raises(ValueError):
        p._p.step(np.zeros(4, np.float32))       # the C layer checks the dtype too
    with pytest.raises(ValueError):
        p._p.send(np.zeros(1, np.int32), np.zeros(1, np.int64))
    with pytest.raises(ValueError):
        p.step(np.full(4, 2**40))                # outside int32
    with pytest.raises(ValueError):
        p.send(np.zeros(1, np.int32), [4])       # id out of range
    with pytest.raises(ValueError):
        p.send(np.zeros(1, np.int32), [-1])
    with pytest.raises(ValueError):
        p.send(np.zeros(2, np.int32), [1, 1])    # named twice
    with pytest.raises(ValueError):
        p.send(np.zeros(2, np.int32), [0])       # rows != ids
    with pytest.raises(hive.Error):
        p.recv(timeout=0)                        # nothing on its way: would wait forever
    p.send(np.zeros(2, np.int32), [0, 1])
    with pytest.raises(hive.Error):
        p.send(np.zeros(1, np.int32), [1])       # busy
    with pytest.raises(hive.Error):
        p.step(np.zeros(4, np.int32))            # sync while async steps are out
    _, _, _, ids = p.recv(timeout=30)
    assert sorted(ids.tolist()) == [0, 1]
    with pytest.raises(TypeError):
        p.recv(1, 2)
    with pytest.raises(ValueError):
        p.recv(timeout=-1)
    p.close()
    with pytest.raises(hive.ShutDown):
        p.reset()
    assert p.num_envs == 0


def test_recv_timeout(engine):
    p = engine.envpool("Synthetic", 1, step_ns=200_000_000)
    p.async_reset()
    p.recv(timeout=30)
    p.send(np.zeros(1, np.int32), [0])
    with pytest.raises(hive.Timeout):
        p.recv(timeout=0)
    assert p.recv(timeout=30)[3].tolist() == [0]


def test_engine_close_frees_pools():
    eng = hive.Engine(workers=1, store_bytes=16 << 20)
    p = eng.envpool("CartPole", 4)
    obs = p.reset()
    eng.close()
    assert obs.shape == (4, 4)                   # the view still holds its memory
    with pytest.raises(hive.ShutDown):
        p.reset()
    del obs
    assert eng.closed


def test_engine_close_while_another_thread_frees_a_pool():
    # pool.close() frees without the GIL, waiting for the steps in flight; an
    # engine.close() meanwhile used to shut the engine down under it (with
    # one worker the second step was then never run: the free waited forever)
    eng = hive.Engine(workers=1, store_bytes=16 << 20)
    p = eng.envpool("Synthetic", 2, step_ns=200_000_000)
    p.async_reset()
    p.recv(timeout=30)
    p.send(np.zeros(2, np.int32), [0, 1])        # two 200 ms steps, one worker
    t = threading.Thread(target=p.close)
    t.start()
    time.sleep(0.05)
    eng.close()
    t.join(20)
    assert not t.is_alive() and eng.closed
    with pytest.raises(hive.ShutDown):
        eng.put(b"x")
