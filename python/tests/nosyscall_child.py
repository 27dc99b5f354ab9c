"""nosyscall_child.py - run by test_hotpath.py in a process of its own.

Warms up the Python side's hot paths, then installs a seccomp filter on
this (the only Python) thread that kills the process at any system call but
a process-private futex (hive's documented sleeps and wakes: a get that
waits, a call that wakes a parked worker) and exit_group, and runs them
again: put of bytes and of an ndarray, engine.get of sealed objects (a Ref's
first get, which looks it up in the store, and repeats: the kept view, a
view beside a held one; an ndarray's view, first and repeated),
Ref.get, and C actor calls with their Future.get. Exit status 0 means no other system call was made (the
filter cannot be removed, so the process ends with os._exit); a kill by
SIGSYS names a path that made one.

    python3 nosyscall_child.py libpytasks.so [canary]

With "canary" it makes one system call (getppid) after installing the
filter, which must kill it: the test's proof that the filter works.
"""
import ctypes
import os
import struct
import sys
import time

import numpy as np

import hive

ROUNDS = 2000
AUDIT_ARCH_X86_64 = 0xC000003E
NR_FUTEX, NR_EXIT_GROUP = 202, 231
FUTEX_PRIVATE_FLAG = 128
# HIVE_SECCOMP_TRAP=1: SIGSYS instead of a kill, for gdb to show where
RET_KILL = 0x00030000 if os.environ.get("HIVE_SECCOMP_TRAP") else 0x80000000
RET_ALLOW = 0x7FFF0000
LD_W_ABS, JEQ_K, JSET_K, RET_K = 0x20, 0x15, 0x45, 0x06


def install_filter(gp_futex):
    """this thread only (no TSYNC): allow exit_group, futex with
    FUTEX_PRIVATE_FLAG, and liburcu's grace-period wake (a read-side unlock
    wakes a writer waiting for this very reader, on a shared futex at
    gp_futex); kill the process at anything else"""
    prog = [
        ("ld", 4), ("jeq", AUDIT_ARCH_X86_64, None, "kill"),
        ("ld", 0), ("jeq", NR_EXIT_GROUP, "allow", None), ("jeq", NR_FUTEX, None, "kill"),
        ("ld", 24), ("jset", FUTEX_PRIVATE_FLAG, "allow", None),           # args[1]: the op
        ("ld", 16), ("jeq", gp_futex & 0xFFFFFFFF, None, "kill"),          # args[0]: the address
        ("ld", 20), ("jeq", gp_futex >> 32, "allow", "kill"),
        ("allow", RET_ALLOW), ("kill", RET_KILL),
    ]
    labels = {ins[0]: i for i, ins in enumerate(prog) if ins[0] in ("allow", "kill")}

    def target(i, label):
        return 0 if label is None else labels[label] - i - 1

    code = b""
    for i, ins in enumerate(prog):
        if ins[0] == "ld":
            code += struct.pack("HBBI", LD_W_ABS, 0, 0, ins[1])
        elif ins[0] in ("jeq", "jset"):
            op = JEQ_K if ins[0] == "jeq" else JSET_K
            code += struct.pack("HBBI", op, target(i, ins[2]), target(i, ins[3]), ins[1])
        else:
            code += struct.pack("HBBI", RET_K, 0, 0, ins[1])
    buf = ctypes.create_string_buffer(code)
    fprog = ctypes.create_string_buffer(struct.pack("HxxxxxxQ", len(prog), ctypes.addressof(buf)))
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong, ctypes.c_ulong]
    if libc.prctl(38, 1, None, 0, 0) != 0:                                   # PR_SET_NO_NEW_PRIVS
        raise OSError(ctypes.get_errno(), "PR_SET_NO_NEW_PRIVS")
    if libc.prctl(22, 2, ctypes.addressof(fprog), 0, 0) != 0:                # PR_SET_SECCOMP, FILTER
        raise OSError(ctypes.get_errno(), "PR_SET_SECCOMP")


def rounds(eng, actor, payload, fresh):
    arr = np.arange(4.0)
    for _ in range(ROUNDS):
        r = eng.put(payload)
        eng.get(r)
        eng.get(r, timeout=0)
        r.get()
        t = eng.put(arr)                # an ndarray: typed, and back as an ObjectView
        eng.get(t)
        eng.get(t)                      # a repeat: its shape and dtype kept,
        eng.get(t)                      # then the ObjectView made from C
        held = eng.get(r)               # a raw view somebody holds: a new one beside it
        eng.get(r)
        del held
    for r in fresh:                     # first gets: the lookup in the store
        eng.get(r)
    for _ in range(ROUNDS // 4):
        actor.call("add", 1).get()
    futs = [actor.call("add", 1) for _ in range(ROUNDS)]
    for f in futs:
        f.get()


def main():
    eng = hive.Engine(workers=2, store_bytes=64 << 20)
    lib = eng.load(sys.argv[1])
    actor = lib.actor("py_counter", 0)
    payload = b"12345678"
    # warm up until hive's block pool has not grown for 5 rounds (frees come
    # back a grace period late, so it grows to one grace period's working set
    # first), at most 50 rounds: as tests/test_syscalls.c does
    so = ctypes.CDLL(hive._hive.__file__)
    so.hive__pool_mapped_bytes.restype = ctypes.c_size_t
    mapped, stable = so.hive__pool_mapped_bytes(), 0
    for _ in range(50):
        rounds(eng, actor, payload, [eng.put(payload) for _ in range(ROUNDS)])
        stable = stable + 1 if so.hive__pool_mapped_bytes() == mapped else 0
        mapped = so.hive__pool_mapped_bytes()
        if stable == 5:
            break
    # headroom: a burst of eight rounds' objects and calls at once, dropped,
    # and waited for until the store has freed them (a grace period late):
    # their blocks are then free in the pool, so the filtered rounds do not
    # find it empty when frees lag behind under load
    base = eng.stats()["objects"]
    burst = [eng.put(payload) for _ in range(8 * ROUNDS)] + [eng.put(np.arange(4.0)) for _ in range(8 * ROUNDS)]
    burst += [actor.call("add", 1) for _ in range(8 * ROUNDS)]
    burst[-1].get()
    del burst
    deadline = time.monotonic() + 30
    while eng.stats()["objects"] > base and time.monotonic() < deadline:
        time.sleep(0.01)
    fresh = [eng.put(payload) for _ in range(ROUNDS)]
    gp = ctypes.addressof(ctypes.c_long.in_dll(so, "urcu_memb_gp")) + 8   # struct urcu_gp: ctr, futex
    install_filter(gp)
    if sys.argv[2:] == ["canary"]:      # the filter's own check: this must be killed
        os.getppid()
    rounds(eng, actor, payload, fresh)
    os._exit(0)


if __name__ == "__main__":
    main()
