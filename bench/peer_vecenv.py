#!/usr/bin/python3
"""peer_vecenv.py - the Python peer of bench_envpool.c: the subprocess vector
env people use (gym's AsyncVectorEnv / SB3's SubprocVecEnv pattern), stepping
the same C environments as the hive rows through ctypes.

  peer_vecenv.py LIB ENV COST_NS HEAVY NUM_ENVS WORKERS SECONDS

LIB is libhive.so; ENV is cartpole or synthetic (COST_NS and HEAVY configure
the synthetic env). WORKERS multiprocessing workers each own a contiguous
slice of the envs; a step sends each worker its slice of the actions through
a pipe, the workers write observations into one shared numpy array
(multiprocessing.shared_memory) and answer rewards and dones through the pipe;
the driver waits for every worker (gym's step_async + step_wait). Prints one
line: env steps per second over about SECONDS of stepping.
"""
import ctypes
import multiprocessing as mp
import sys
import time
import warnings
from multiprocessing import shared_memory

import numpy as np

warnings.simplefilter("ignore")

RESET = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_uint64, ctypes.c_void_p)
STEP = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                        ctypes.POINTER(ctypes.c_float), ctypes.POINTER(ctypes.c_int))
INIT = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint)


class EnvClass(ctypes.Structure):       # hive_env_class_t (include/hive/envpool.h)
    _fields_ = [("name", ctypes.c_char_p), ("state_size", ctypes.c_size_t),
                ("obs_dtype", ctypes.c_int), ("obs_ndim", ctypes.c_int),
                ("obs_shape", ctypes.c_int64 * 7),
                ("act_dtype", ctypes.c_int), ("act_ndim", ctypes.c_int),
                ("act_shape", ctypes.c_int64 * 7),
                ("init", INIT), ("reset", RESET), ("step", STEP)]


class SynConfig(ctypes.Structure):      # hive_env_synthetic_config_t
    _fields_ = [("cost_ns", ctypes.c_uint64), ("episode_len", ctypes.c_uint),
                ("heavy_tail", ctypes.c_int)]


def load(libpath, env):
    lib = ctypes.CDLL(libpath)
    cls = EnvClass.in_dll(lib, "hive_env_cartpole" if env == "cartpole" else "hive_env_synthetic")
    return lib, cls


def worker(libpath, env, cost, heavy, lo, hi, n, shm_name, conn):
    lib, cls = load(libpath, env)
    cfg = SynConfig(cost, 1000, heavy)
    shm = shared_memory.SharedMemory(name=shm_name)
    obs = np.ndarray((n, 4), dtype=np.float32, buffer=shm.buf)
    states = [ctypes.create_string_buffer(max(cls.state_size, 8)) for _ in range(lo, hi)]
    episodes = [0] * (hi - lo)
    if cls.init:
        for k, st in enumerate(states):
            cls.init(st, ctypes.byref(cfg), lo + k)
    row = (ctypes.c_float * 4)()
    for k, st in enumerate(states):
        cls.reset(st, 0x5eed + lo + k, row)
        obs[lo + k] = row
    act = ctypes.c_int32()
    r = ctypes.c_float()
    d = ctypes.c_int()
    conn.send(True)
    while True:
        actions = conn.recv()
        if actions is None:
            break
        rewards = np.empty(hi - lo, dtype=np.float32)
        dones = np.empty(hi - lo, dtype=np.uint8)
        for k, st in enumerate(states):
            act.value = int(actions[k])
            cls.step(st, ctypes.byref(act), row, ctypes.byref(r), ctypes.byref(d))
            if d.value:
                episodes[k] += 1
                cls.reset(st, episodes[k], row)
            obs[lo + k] = row
            rewards[k] = r.value
            dones[k] = d.value
        conn.send((rewards, dones))
    del obs
    shm.close()


def main():
    libpath, env = sys.argv[1], sys.argv[2]
    cost, heavy, n, w = (int(x) for x in sys.argv[3:7])
    seconds = float(sys.argv[7])
    shm = shared_memory.SharedMemory(create=True, size=n * 4 * 4)
    conns, procs, bounds = [], [], []
    for t in range(w):
        lo, hi = n * t // w, n * (t + 1) // w
        a, b = mp.Pipe()
        p = mp.Process(target=worker, args=(libpath, env, cost, heavy, lo, hi, n, shm.name, b))
        p.start()
        conns.append(a)
        procs.append(p)
        bounds.append((lo, hi))
    for c in conns:
        c.recv()
    # two action tables in turn: each env's action alternates from step to
    # step, as in the C rows and the raw loop (the same trajectories)
    tables = [np.arange(n, dtype=np.int32) & 1, (np.arange(n, dtype=np.int32) + 1) & 1]
    steps = 0
    turn = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        actions = tables[turn & 1]
        turn += 1
        for c, (lo, hi) in zip(conns, bounds):
            c.send(actions[lo:hi])
        for c in conns:
            c.recv()
        steps += n
    rate = steps / (time.perf_counter() - t0)
    for c in conns:
        c.send(None)
    for p in procs:
        p.join()
    shm.close()
    shm.unlink()
    print(rate)


if __name__ == "__main__":
    main()
