#!/usr/bin/env python3
"""make-seeds.py - write the seed corpora of the fuzz targets (tests/fuzz/corpus/).

Each seed is a small program in the byte encoding its target decodes (see the
readers in fuzz.h and each target's LLVMFuzzerTestOneInput); the helpers below
encode the values the way those readers decode them. Run it from anywhere:
it rewrites tests/fuzz/corpus/<target>/<name> next to itself.
"""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))

I64_EDGES = [0, 1, -1, 2, -2, 3, 7, 8, 63, 64, 65, 1000, -1000, 2**31 - 1, -2**31,
             2**31, 2**32, 2**48, 2**62, -2**62, 2**63 - 1, -2**63, 2**63 - 2, -2**63 + 1,
             (2**63 - 1) // 2, -2**62]


def u8(*v):
    return bytes(x & 0xFF for x in v)


def u16(v):
    return struct.pack("<H", v)


def u32(v):
    return struct.pack("<I", v)


def u64(v):
    return struct.pack("<Q", v & (2**64 - 1))


def i64(v):
    """fz_i64: -4..11 in one byte, an edge in one byte, else 9 bytes."""
    if -4 <= v <= 11:
        return u8(v + 4)
    if v in I64_EDGES:
        return u8(130 + I64_EDGES.index(v))      # 130 + k is k mod 26
    return u8(224) + u64(v)


def f64(v):
    """fz_f64: 0, 0.25 .. 3.75 in one byte, else 9 raw bytes."""
    if v * 4 == int(v * 4) and 0 <= v < 4:
        return u8(int(v * 4))
    return u8(224) + struct.pack("<d", v)


def write(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as fp:
        fp.write(data)


# ---------------------------------------------------------------- fuzz_array
# dtype byte, ndim byte (n + 1), 10 extent bytes (< 224: value % 6), then ops.
def array_head(dtype, shape, raw=None):
    ext = list(shape) + [0] * (10 - len(shape))
    body = b"".join(u8(e) if raw is None or i not in raw else u8(224) + i64(raw[i])
                    for i, e in enumerate(ext))
    return u8(dtype, len(shape) + 1) + body


def idx(k):
    """pick_index: a valid index k (u32 modulo the extent)."""
    return u8(0) + u32(k)


HIVE_U8, HIVE_I64, HIVE_F32 = 3, 8, 10
write("fuzz_array", "slice-add-read",
      array_head(HIVE_I64, [4, 5]) +
      u8(0, 0, 1) + i64(1) + i64(4) + i64(2) +          # slice view 0, dim 0, 1:4:2
      u8(2, 1) + idx(1) + i64(3) +                      # add_i64 on the slice
      u8(5, 1, 0, 0) + u8(5, 0, 0, 1))                  # read slice, read all (with a section)
write("fuzz_array", "reverse-f32",
      array_head(HIVE_F32, [2, 3, 2]) +
      u8(3, 0) + idx(5) + f64(1.5) +                    # add_f64
      u8(0, 0, 2) + i64(-1) + i64(-2**63) + i64(-1) +   # dim 1, -1:INT64_MIN:-1
      u8(1, 1) + idx(0) + idx(1) + idx(1) +             # at
      u8(5, 1, 0, 0))
write("fuzz_array", "scalar-u8", array_head(HIVE_U8, []) + u8(2, 0) + idx(0) + i64(2**63 - 1) +
      u8(4, 0) + idx(0) + u8(0x7f) + u8(5, 0, 0, 0))
write("fuzz_array", "bad-dtype", array_head(0, [3]))
write("fuzz_array", "overflowing-shape", array_head(HIVE_I64, [0, 2], raw={0: 2**62}))
write("fuzz_array", "corrupt-view", array_head(HIVE_I64, [5]) + u8(6, 0, 1, 1, 3) + u8(6, 0, 0, 0))

# ---------------------------------------------------------------- fuzz_replay
# capacity byte (< 200: 1 + v % 40), item size byte (< 200: 1 + v % 24),
# flags (1 prioritized, 2 alpha, 4 beta, 8 samples_per_insert, 16 error
# buffer, 32 min size, 64 seed) and their values, the caller's rng state
# (8 bytes), then ops: 0 push, 2 push_batch, 3 sample, 5 update, 6 stats, 7 bad.
def replay_head(cap, isz, flags=0, extra=b""):
    return u8(cap - 1, isz - 1, flags) + extra + u64(12345)


write("fuzz_replay", "uniform",
      replay_head(8, 4) + u8(0, 1, 0, 2, 0, 3) + u8(3, 1, 0x0f) + u8(6))
write("fuzz_replay", "prioritized",
      replay_head(32, 8, 1 | 2, f64(1.0)) + u8(2, 10, 5) + u8(3, 3, 0x0e) +
      u8(5, 4) + u8(0, 0) + f64(2.0) + u8(0, 1) + f64(0.5) + u8(0, 2) + f64(0.0) +
      u8(0, 3) + f64(3.0) + u8(3, 3, 0x0e) + u8(6))
write("fuzz_replay", "rate-limited",
      replay_head(8, 2, 8 | 16 | 32, f64(1.0) + f64(0.0) + u8(2)) +
      u8(3, 0, 0x10) + u8(0, 1, 0, 2) + u8(3, 1, 0x02) + u8(3, 0, 0) + u8(6))
write("fuzz_replay", "capacity-zero", u8(210, 3, 0) + u64(0))
write("fuzz_replay", "capacity-one-batch",
      replay_head(1, 1, 1) + u8(2, 200, 9) + u8(3, 0, 0x0f) + u8(5, 1, 0, 0) + f64(0.0) +
      u8(6, 7))

# ---------------------------------------------------------------- fuzz_api
# ops: 0 put, 1 get, 2 release, 3 retain, 4 create, 5 seal, 6 submit, 7 cancel,
# 8 wait, 9 actor_new, 10 call, 11 kill, 12 cell_new, 13 publish, 14 acquire,
# 15 array, 16 bad ids/arguments, 17 lookup, 18 settle (a long get).
def inline(data):
    return u8(0, len(data)) + data


write("fuzz_api", "put-get-release", u8(0, 5) + u16(0) + u8(1, 0, 3, 1) + u8(2, 0))
write("fuzz_api", "create-seal", u8(4, 10, 7) + u8(1, 0, 0, 1) + u8(5, 0) + u8(1, 0, 0, 1))
write("fuzz_api", "submit-echo", u8(6, 0, 1) + inline(b"abc") + u8(0) + u8(18, 0))
write("fuzz_api", "submit-ref-cancel-wait",
      u8(0, 8) + u16(0) + u8(6, 0, 2, 200, 0) + inline(b"xy") + u8(200) +
      u8(7, 1) + u8(8, 2, 0, 1, 1, 1) + u8(18, 1))
write("fuzz_api", "actor",
      u8(9, 0, 1) + inline(u64(5)) + u8(1, 2, 1) +
      u8(10, 0, 0, 1) + inline(u64(3)) + u8(0) +
      u8(10, 0, 3, 1) + inline(b"hi") + u8(0) +
      u8(10, 0, 1, 0, 0) + u8(18, 0) + u8(11, 0) + u8(10, 0, 0, 0, 0))
write("fuzz_api", "cell",
      u8(0, 4) + u16(0) + u8(0, 6) + u16(1) + u8(12, 0, 0) + u8(13, 2, 1, 0) + u8(14, 2, 1) +
      u8(2, 0) + u8(2, 1))
# the spinner waits for an unsealed create, so the cancel always finds it waiting
write("fuzz_api", "nested-spin-cancel",
      u8(4, 10, 7) + u8(6, 2, 1, 200, 0, 0) + u8(7, 1, 0) + u8(6, 3, 1) + inline(b"abcd") +
      u8(0) + u8(18, 2) + u8(1, 1, 0, 1))
write("fuzz_api", "array-bad-lookup",
      u8(15, 2, 3, 4, 7) + u8(16, 0, 0, 0) + u8(16, 0, 0, 11) + u8(17, 0) + u8(8, 1, 0, 0, 0))
