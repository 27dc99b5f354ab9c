"""bench.py - the Python side's costs beside Python's own tools, in one run.

    make python && PYTHONPATH=build/python /usr/bin/python3 bench/python/bench.py [libpytasks.so]

- put + get of a 1 MiB float64 array: hive (one copy in, a zero-copy view
  out) vs multiprocessing.shared_memory + numpy (create, copy in, attach a
  view, the way a second process would);
- get of a small object (a Ref's first get, which looks it up in the store,
  and a repeat), and a C actor call (sync round trip, and async: many calls
  then the results), each against a plain C-extension no-op call (the
  target: within 2x of it), a C call that returns a memoryview (the floor of
  anything that returns one), and the same work done from C (_c_loop): the
  difference is what the binding adds.
Prints one line per measurement; best of 5 repeats.
"""
import os
import subprocess
import sys
import time
import timeit
from multiprocessing import shared_memory

import numpy as np

import hive


def best(fn, n, repeat=5):
    t = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn(n)
        t.append((time.perf_counter() - t0) / n)
    return min(t)


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

        noop, noop_view = hive._hive._noop, hive._hive._noop_view
        c_loop = hive._hive._c_loop                            # the same work done from C
        payload = b"12345678"

        def noops(n):
            for _ in range(n):
                noop()

        def noop_views(n):
            for _ in range(n):
                noop_view(payload)

        small = eng.put(payload)

        def gets_again(n):
            for _ in range(n):
                eng.get(small)

        t_n, t_nv, t_ga = best(noops, 200_000), best(noop_views, 200_000), best(gets_again, 200_000)
        t_gc = min(c_loop("get", small, 200_000) for _ in range(5))

        # a Ref's first get (its lookup in the store) over fresh refs, and the same from C
        t_gf = t_gfc = float("inf")
        for _ in range(5):
            refs = [eng.put(payload) for _ in range(50_000)]
            t0 = time.perf_counter()
            for r in refs:
                eng.get(r)
            t_gf = min(t_gf, (time.perf_counter() - t0) / len(refs))
            t_gfc = min(t_gfc, c_loop("get", [eng.put(payload) for _ in range(50_000)], 0))
            del refs
        arr = eng.put(np.arange(16.0))

        def gets_typed(n):
            for _ in range(n):
                eng.get(arr)

        t_gt = best(gets_typed, 20_000)
        print(f"no-op C-extension call: {t_n * 1e9:.0f} ns; a C call returning memoryview(bytes): "
              f"{t_nv * 1e9:.0f} ns ({t_nv / t_n:.1f}x)")
        print(f"engine.get -> memoryview, a Ref's first get: {t_gf * 1e9:.0f} ns ({t_gf / t_n:.1f}x the no-op, "
              f"{t_gf / t_nv:.1f}x the memoryview call); hive_get from C {t_gfc * 1e9:.0f} ns: binding "
              f"overhead {(t_gf - t_gfc) * 1e9:.0f} ns ({(t_gf - t_gfc) / t_n:.1f}x the no-op)")
        print(f"engine.get -> memoryview, again (no store lookup): {t_ga * 1e9:.0f} ns ({t_ga / t_n:.1f}x "
              f"the no-op, {t_ga / t_nv:.1f}x the memoryview call; hive_get from C {t_gc * 1e9:.0f} ns)")
        print(f"engine.get -> ndarray (16 float64, through numpy): {t_gt * 1e9:.0f} ns ({t_gt / t_n:.0f}x)")
        mv = min(timeit.repeat("memoryview(b)", globals={"b": payload}, number=200_000,
                               repeat=5)) / 200_000
        print(f"  (CPython's own memoryview(bytes) from Python: {mv * 1e9:.0f} ns)")

        lib = eng.load(lib_path)
        actor = lib.actor("py_counter", 0)

        def calls_sync(n):
            for _ in range(n):
                actor.call("add", 1).get()

        def calls_async(n):
            futs = [actor.call("add", 1) for _ in range(n)]
            for f in futs:
                f.get()

        t_cs, t_ca = best(calls_sync, 20_000), best(calls_async, 20_000)
        t_cc = min(c_loop("call", actor, 20_000) for _ in range(5))
        t_ccs = min(c_loop("call_sync", actor, 20_000) for _ in range(5))
        print(f"C actor call + get, async (many calls, then the results): {t_ca * 1e6:.2f} us a call "
              f"({t_ca / t_n:.0f}x the no-op); the same from C {t_cc * 1e6:.2f} us: binding overhead "
              f"{(t_ca - t_cc) * 1e9:.0f} ns a call + get ({(t_ca - t_cc) / (2 * t_n):.1f}x two no-ops: "
              f"two Python calls)")
        print(f"C actor call + get, sync (call(...).get()): {t_cs * 1e6:.2f} us; the same from C "
              f"{t_ccs * 1e6:.2f} us: binding overhead {(t_cs - t_ccs) * 1e9:.0f} ns "
              f"({(t_cs - t_ccs) / (2 * t_n):.1f}x two no-ops)")
        del actor, small, arr

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
