"""bench.py - the Python side's costs beside Python's own tools, in one run.

    make python && PYTHONPATH=build/python /usr/bin/python3 bench/python/bench.py [libpytasks.so]

- put + get of a 1 MiB float64 array: hive (one copy in, a zero-copy view
  out) vs multiprocessing.shared_memory + numpy (create, copy in, attach a
  view, the way a second process would);
- the binding's cost per call (call_costs): get of a small object (a Ref's
  first get, which looks it up in the store, a repeat, which gets the view
  the Ref keeps, and a repeat while that view is held, which makes a new
  one on its managed buffer), a C actor call
  and the get of its result, each against a plain C-extension no-op call
  (the issue's target: within 2x of it), a C call that returns a memoryview
  (the floor of anything that returns one) and the same work done from C
  (_c_loop): the difference is what the binding adds. These are the calling
  thread's CPU time (time.thread_time; CLOCK_THREAD_CPUTIME_ID in _c_loop),
  all rows measured in each of 9 interleaved rounds, best round per row: on
  a shared machine wall time is mostly other processes' turns;
- env pool stepping from Python vs a subprocess vector env.
put+get and the env pool rows are wall time, best of 5 (3) repeats.
"""
import os
import subprocess
import sys
import time
import timeit
from multiprocessing import shared_memory

import numpy as np

import hive


def best(fn, n, repeat=5, clock=time.perf_counter):
    t = []
    for _ in range(repeat):
        t0 = clock()
        fn(n)
        t.append((clock() - t0) / n)
    return min(t)


def call_costs(eng, lib_path, rounds=9):
    """The binding's cost per call, each row beside a no-op C-extension call
    and the same work done from C (_c_loop), all measured in every one of
    rounds interleaved rounds (a burst of load hits all rows alike), best
    round per row, the calling thread's CPU time."""
    noop, noop_view, c_loop = hive._hive._noop, hive._hive._noop_view, hive._hive._c_loop
    payload = b"12345678"
    nd = np.arange(16.0)
    small, arr = eng.put(payload), eng.put(nd)
    lib = eng.load(lib_path)
    actor = lib.actor("py_counter", 0)
    T, N, NC = time.thread_time, 100_000, 20_000
    t = {}

    def keep(name, value):
        t[name] = min(t.get(name, float("inf")), value)

    for _ in range(rounds):
        t0 = T()
        for _ in range(N):
            noop()
        keep("noop", (T() - t0) / N)
        t0 = T()
        for _ in range(N):
            noop_view(payload)
        keep("noop_view", (T() - t0) / N)
        t0 = T()
        for _ in range(N):
            eng.get(small)
        keep("get_again", (T() - t0) / N)
        held = eng.get(small)             # the view small keeps, held: each get a new view beside it
        t0 = T()
        for _ in range(N):
            eng.get(small)
        keep("get_held", (T() - t0) / N)
        del held
        keep("c_get", c_loop("get", small, N))
        refs = [eng.put(payload) for _ in range(N // 2)]   # a Ref's first get: its lookup
        t0 = T()
        for r in refs:
            eng.get(r)
        keep("get_first", (T() - t0) / len(refs))
        for row in ("get_set_second", "get_set_third"):   # the set is far beyond the views kept
            t0 = T()
            for r in refs:
                eng.get(r)
            keep(row, (T() - t0) / len(refs))
        keep("c_get_first", c_loop("get", [eng.put(payload) for _ in range(N // 2)], 0))
        del refs
        t0 = T()
        for _ in range(NC // 10):
            eng.get(arr)
        keep("get_typed", (T() - t0) / (NC // 10))
        t0 = T()
        for _ in range(NC):
            eng.put(payload)
        keep("put", (T() - t0) / NC)
        keep("c_put", c_loop("put", eng, NC))
        t0 = T()
        for _ in range(NC):
            eng.put(nd)
        keep("put_typed", (T() - t0) / NC)
        # calls and gets apart: NC calls, (untimed) until the last result is
        # in, then the NC gets of sealed results and the Futures' release
        t0 = T()
        futs = [actor.call("add", 1) for _ in range(NC)]
        t1 = T()
        futs[-1].get()
        t2 = T()
        for f in futs:
            f.get()
        del futs
        t3 = T()
        keep("call", (t1 - t0) / NC)
        keep("get_result", (t3 - t2) / NC)
        c_call, c_result = c_loop("call_split", actor, NC)
        keep("c_call", c_call)
        keep("c_get_result", c_result)
        t0 = T()
        for _ in range(NC // 10):
            actor.call("add", 1).get()
        keep("sync", (T() - t0) / (NC // 10))
        keep("c_sync", c_loop("call_sync", actor, NC // 10))

    n, nv = t["noop"], t["noop_view"]

    def ns(x):
        return f"{x * 1e9:.0f} ns"

    print(f"no-op C-extension call: {ns(n)}; a C call returning memoryview(bytes): {ns(nv)} ({nv / n:.1f}x)")
    for row, c_row, what in (("get_first", "c_get_first", "engine.get -> memoryview, a Ref's first get"),
                             ("get_again", "c_get", "engine.get -> memoryview, again (no store lookup)"),
                             ("get_held", "c_get", "engine.get -> memoryview, again while its last view is held"),
                             ("get_result", "c_get_result", "Future.get of a sealed result, and its release")):
        x, c = t[row], t[c_row]
        print(f"{what}: {ns(x)} ({x / n:.1f}x the no-op, {x / nv:.1f}x the memoryview call); from C "
              f"{ns(c)}: binding overhead {ns(x - c)} ({(x - c) / n:.1f}x the no-op, {(x - c) / nv:.1f}x "
              f"the memoryview call)")
    print(f"engine.get -> memoryview, a Ref's second / third get, {N // 2:,} live: "
          f"{ns(t['get_set_second'])} / {ns(t['get_set_third'])}")
    x, c = t["call"], t["c_call"]
    print(f"actor.call (C actor, one int argument): {ns(x)} ({x / n:.1f}x the no-op); hive_call from C "
          f"{ns(c)}: binding overhead {ns(x - c)} ({(x - c) / n:.1f}x the no-op)")
    x, c = t["put"], t["c_put"]
    print(f"engine.put of 8 bytes (the Ref dropped): {ns(x)} ({x / n:.1f}x the no-op); from C {ns(c)}: "
          f"binding overhead {ns(x - c)} ({(x - c) / n:.1f}x the no-op); of a 16-float64 ndarray "
          f"{ns(t['put_typed'])}")
    x, c = t["sync"], t["c_sync"]
    print(f"actor.call(...).get() in turn (the caller's CPU, spinning for the result included): "
          f"{x * 1e6:.2f} us; from C {c * 1e6:.2f} us")
    print(f"engine.get -> ndarray (16 float64, through numpy): {ns(t['get_typed'])} "
          f"({t['get_typed'] / n:.0f}x the no-op)")
    mv = min(timeit.repeat("memoryview(b)", globals={"b": payload}, number=N, repeat=5,
                           timer=time.thread_time)) / N
    print(f"  (CPython's own memoryview(bytes) from Python: {ns(mv)})")
    del actor, small, arr
    return t


def main():
    lib_path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(__file__), "..", "..", "build", "python", "tests", "libpytasks.so")
    data = np.random.default_rng(0).random(1 << 17)          # 1 MiB
    with hive.Engine(workers=2, store_bytes=1 << 28) as eng:
        def hive_put_get(n):
            for _ in range(n):
                v = eng.get(eng.put(data))
                assert v.shape == data.shape

        def shm_put_get(n):
            for _ in range(n):
                shm = shared_memory.SharedMemory(create=True, size=data.nbytes)
                np.ndarray(data.shape, data.dtype, buffer=shm.buf)[:] = data
                peer = shared_memory.SharedMemory(name=shm.name)
                v = np.ndarray(data.shape, data.dtype, buffer=peer.buf)
                assert v.shape == data.shape
                del v
                peer.close()
                shm.close()
                shm.unlink()

        t_h, t_s = best(hive_put_get, 200), best(shm_put_get, 200)
        print(f"put+get 1 MiB ndarray: hive {t_h * 1e6:.1f} us, shared_memory+numpy {t_s * 1e6:.1f} us "
              f"({t_s / t_h:.1f}x)")

        call_costs(eng, lib_path)

        # env pool stepping from Python vs the subprocess vector env (bench/peer_vecenv.py)
        libso = os.path.join(os.path.dirname(os.path.abspath(lib_path)), "..", "..", "libhive.so")
        peer = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "peer_vecenv.py")
        for env, cost, num in (("CartPole", 0, 32), ("Synthetic", 10_000, 32)):
            pool = eng.envpool(env, num, step_ns=cost)
            pool.reset()
            acts = np.zeros(num, np.int32)

            def steps(n):
                for _ in range(n):
                    pool.step(acts)

            t_e = best(steps, 200 if cost else 2000, repeat=3)
            pool.close()
            rate = num / t_e
            line = f"env pool {env} ({cost} ns/step, {num} envs): hive {rate:,.0f} steps/s"
            if os.path.exists(libso):
                out = subprocess.run([sys.executable, peer, libso, env.lower(), str(cost), "0",
                                      str(num), str(eng.workers), "2"],
                                     capture_output=True, text=True, timeout=120)
                try:
                    prate = float(out.stdout.split()[0])
                    line += f", subprocess vector env {prate:,.0f} steps/s ({rate / prate:.1f}x)"
                except (IndexError, ValueError):
                    line += f", subprocess vector env failed: {out.stderr.strip()[-200:]}"
            print(line, flush=True)


if __name__ == "__main__":
    main()
