#!/usr/bin/python3
"""peer_shm.py - the Python peer of bench_store.c: multiprocessing.shared_memory
with numpy doing what hive_put / hive_get do, timed here and reported to the
C benchmark on stdout as one number (seconds for all ops).

  peer_shm.py put_calls N          N puts of one int64 (create a segment, write, close, unlink)
  peer_shm.py get_calls N          N gets of one int64 (attach by name, view, read, close)
  peer_shm.py put_bytes SIZE N     N puts of a SIZE-byte int64 array (create, copy in)
  peer_shm.py get_bytes SIZE N     N gets of a SIZE-byte array (attach, zero-copy view)
"""
import sys
import time
import warnings
from multiprocessing import shared_memory

import numpy as np

warnings.simplefilter("ignore")


def put(src):
    shm = shared_memory.SharedMemory(create=True, size=max(src.nbytes, 1))
    dst = np.ndarray(src.shape, dtype=src.dtype, buffer=shm.buf)
    dst[...] = src
    return shm, dst


def main():
    mode = sys.argv[1]
    if mode == "put_calls":
        n = int(sys.argv[2])
        src = np.zeros(1, dtype=np.int64)
        t0 = time.perf_counter()
        for _ in range(n):
            shm, dst = put(src)
            del dst
            shm.close()
            shm.unlink()
        print(time.perf_counter() - t0)
    elif mode == "get_calls":
        n = int(sys.argv[2])
        shm, dst = put(np.arange(1, dtype=np.int64))
        name = shm.name
        t0 = time.perf_counter()
        for _ in range(n):
            s = shared_memory.SharedMemory(name=name)
            a = np.ndarray((1,), dtype=np.int64, buffer=s.buf)
            _ = a[0]
            del a
            s.close()
        print(time.perf_counter() - t0)
        del dst
        shm.close()
        shm.unlink()
    elif mode == "put_bytes":
        size, n = int(sys.argv[2]), int(sys.argv[3])
        src = np.arange(size // 8, dtype=np.int64)
        total = 0.0
        for _ in range(n):
            t0 = time.perf_counter()
            shm, dst = put(src)
            total += time.perf_counter() - t0
            del dst
            shm.close()
            shm.unlink()
        print(total)
    elif mode == "get_bytes":
        size, n = int(sys.argv[2]), int(sys.argv[3])
        shm, dst = put(np.arange(max(size // 8, 1), dtype=np.int64))
        name = shm.name
        t0 = time.perf_counter()
        for _ in range(n):
            s = shared_memory.SharedMemory(name=name)
            a = np.ndarray((max(size // 8, 1),), dtype=np.int64, buffer=s.buf)
            _ = a[0]
            del a
            s.close()
        print(time.perf_counter() - t0)
        del dst
        shm.close()
        shm.unlink()
    else:
        sys.exit("unknown mode " + mode)


if __name__ == "__main__":
    main()
