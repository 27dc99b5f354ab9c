# test_objects.py - put/get/create/wait from Python: zero-copy (the numpy
# data pointer is the payload's address in the store, the one a C task is
# handed), lifetimes (dropping the Python objects empties the store; a view
# outlives its Ref), the GIL released while get blocks.
import gc
import pickle
import struct
import threading

import numpy as np
import pytest

import hive
from conftest import eventually


def addr_in_task(lib, arg):
    """(address, size) of arg's payload as a C task sees it"""
    out = np.frombuffer(lib.submit("py_addr", arg).get(), np.uint64)
    return int(out[0]), int(out[1])


def test_numpy_put_get_is_zero_copy(engine, lib):
    a = np.arange(12.0).reshape(3, 4)
    ref = engine.put(a)
    v = engine.get(ref)
    assert isinstance(v, np.ndarray) and v.dtype == a.dtype and v.shape == a.shape
    assert np.array_equal(v, a)
    assert not v.flags.writeable
    with pytest.raises(ValueError):
        v[0, 0] = 1
    addr, size = addr_in_task(lib, ref)
    assert v.ctypes.data == addr            # the task reads the bytes numpy points at
    assert size >= a.nbytes
    assert engine.get(ref).ctypes.data == addr   # a second get: the same bytes again


def test_repeated_typed_gets_are_the_first_ones_array(engine, lib):
    # from a Ref's second typed get on, the ObjectView is made from C with
    # the shape and dtype the first one had: the same array every time
    cases = [np.arange(12.0).reshape(3, 4), np.arange(6, dtype=">i4").reshape(2, 3),
             np.array(7.5), np.zeros((2, 0, 3), np.int16), np.ones((2, 2), np.complex64),
             np.zeros(3, dtype=[("x", np.float32), ("n", np.int16)]),     # structured: not shared
             np.array(["ab", "c"]), np.arange(8, dtype=np.uint8).reshape(2, 2, 2)]
    for a in cases:
        ref = engine.put(a)
        gets = [engine.get(ref) for _ in range(4)]
        for g in gets:
            assert type(g) is hive.ObjectView and not g.flags.writeable
            assert g.dtype == a.dtype and g.shape == a.shape and g.strides == gets[0].strides
            assert g.strides == a.strides or a.size == 0
            assert np.array_equal(g, a) and g.tobytes() == a.tobytes()
            assert g._buffer is not None and g._hive_arg is not None
        assert len({g.ctypes.data for g in gets}) == 1
        assert len({id(g) for g in gets}) == 4
        # the made-from-C ones sit straight on the Buffer (not a structured
        # dtype's, nor an empty array's, whose strides numpy makes up either way)
        assert (type(gets[-1].base) is hive.Buffer) == (a.dtype.names is None and a.size > 0)
    ref = engine.put(np.arange(6.0))
    engine.get(ref)
    second = engine.get(ref)
    second.shape = (2, 3)                     # reshaping one get's array in place
    assert engine.get(ref).shape == (6,)      # changes no other
    rec = engine.put(np.zeros(2, dtype=[("x", np.float32), ("n", np.int16)]))
    engine.get(rec)
    renamed = engine.get(rec)
    renamed.dtype.names = ("a", "b")          # a structured dtype renamed in place
    assert engine.get(rec).dtype.names == ("x", "n")
    kept = engine.get(ref)
    del ref
    gc.collect()
    assert np.array_equal(kept, np.arange(6.0))   # the view holds the count
    assert np.frombuffer(lib.submit("py_sum_f64", kept).get(timeout=30), np.float64)[0] == 15.0


def test_typed_args_leave_what_ndarray_refuses_to_the_first_way(engine, monkeypatch):
    v = engine.get(engine.put(np.arange(3.0)))
    buf = v.base.base.obj                     # the first get: ndarray -> memoryview -> Buffer
    assert type(buf) is hive.Buffer
    shape, dtype = hive._typed_args(buf)
    assert shape == (3,) and dtype == np.float64

    class Refuses(hive.ObjectView):
        def __new__(cls, *args, **kw):
            raise ValueError("this layout is not for ndarray()")

    monkeypatch.setattr(hive, "ObjectView", Refuses)
    assert hive._typed_args(buf) is None      # the Ref's gets then keep going through _view_of


def test_bytes_put_get_memoryview(engine, lib):
    ref = engine.put(b"hello hive")
    m = engine.get(ref)
    assert isinstance(m, memoryview) and m.readonly
    assert bytes(m) == b"hello hive"
    addr, size = addr_in_task(lib, ref)
    assert np.frombuffer(m, np.uint8).ctypes.data == addr and size == 10


def test_structured_and_scalar_dtypes_round_trip(engine):
    rec = np.zeros(3, dtype=[("x", np.float32), ("n", np.int16)])
    rec["x"] = [1.5, 2.5, 3.5]
    rec["n"] = [1, 2, 3]
    got = engine.get(engine.put(rec))
    assert got.dtype == rec.dtype and np.array_equal(got, rec)
    z = engine.get(engine.put(np.array(7.0)))
    assert z.shape == () and z == 7.0
    s = engine.get(engine.put(np.int8(-3)))   # a numpy scalar keeps its type too
    assert s.dtype == np.int8 and s == -3
    strided = np.arange(10)[::3]            # not contiguous: put copies it contiguous
    assert np.array_equal(engine.get(engine.put(strided)), [0, 3, 6, 9])


def test_create_then_seal(engine, lib):
    ref, mv = engine.create(16)
    assert not mv.readonly
    mv[:] = bytes(range(16))
    with pytest.raises(hive.Timeout):
        engine.get(ref, timeout=0)          # not sealed yet
    engine.seal(ref)
    got = engine.get(ref)
    assert bytes(got) == bytes(range(16))
    assert np.frombuffer(got, np.uint8).ctypes.data == np.frombuffer(mv, np.uint8).ctypes.data
    assert addr_in_task(lib, ref) == (np.frombuffer(mv, np.uint8).ctypes.data, 16)
    with pytest.raises(hive.Error):
        engine.seal(ref)                    # twice


def test_task_result_and_ref_argument(engine, lib):
    ref = engine.put(np.arange(10.0))
    fut = lib.submit("py_sum_f64", ref)
    assert isinstance(fut, hive.Future)
    assert np.frombuffer(fut.get(timeout=30), np.float64)[0] == 45.0
    inline = lib.submit("py_sum_f64", np.arange(4.0))   # a buffer goes inline (copied)
    assert np.frombuffer(engine.get(inline), np.float64)[0] == 6.0


def test_wait_like_ray(engine, lib):
    spin = lib.submit("py_spin")
    done = lib.submit("py_sum_f64", np.ones(3))
    ready, rest = engine.wait([spin, done], num_returns=1)
    assert ready == [done] and rest == [spin]
    ready, rest = engine.wait([spin, done], num_returns=2, timeout=0.01)
    assert ready == [done] and rest == [spin]   # the deadline passed: what was ready
    assert spin.cancel()
    ready, rest = engine.wait([spin, done], num_returns=2)
    assert len(ready) == 2 and rest == []


def store_empty(engine):
    s = engine.stats()
    return s["objects"] == 0 and s["used"] == 0


def test_dropping_every_python_object_empties_the_store(engine, lib):
    assert store_empty(engine)
    refs = [engine.put(np.full(1000, i)) for i in range(5)]
    views = [engine.get(r) for r in refs]
    raw = engine.get(engine.put(b"x" * 100_000))
    cref, cview = engine.create(4096)
    engine.seal(cref)
    arr = engine.array((64, 64), np.float32)
    part = arr[3:9, ::2]
    cell = engine.cell(refs[0])
    cell.publish(refs[1])
    got = cell.acquire()
    fut = lib.submit("py_sum_f64", refs[2])
    fut.get()
    rb = engine.replay(128, np.float64, (4,))
    rb.push(np.ones((8, 4)))
    actor = lib.actor("py_counter", 1)
    actor.call("add", 2).get()
    s = engine.stats()
    assert s["objects"] >= 10 and s["used"] > 100_000
    del refs, views, raw, cref, cview, arr, part, cell, got, fut, rb, actor
    assert eventually(lambda: store_empty(engine)), engine.stats()


def test_view_outlives_its_ref(engine):
    ref = engine.put(np.arange(1000, dtype=np.int32))
    v = engine.get(ref)
    del ref
    gc.collect()
    assert engine.stats()["objects"] == 1     # the view's count keeps it
    assert np.array_equal(v, np.arange(1000))
    slice_ = v[10:20]
    del v
    gc.collect()
    assert np.array_equal(slice_, np.arange(10, 20))   # numpy's base chain keeps the Buffer
    assert engine.stats()["objects"] == 1
    del slice_
    assert eventually(lambda: store_empty(engine)), engine.stats()


def test_close_waits_for_the_last_view():
    eng = hive.Engine(workers=1, store_bytes=1 << 20)
    v = eng.get(eng.put(np.arange(5)))
    eng.close()
    assert eng.closed
    with pytest.raises(hive.ShutDown):
        eng.put(b"x")
    assert list(v) == [0, 1, 2, 3, 4]         # still mapped: shutdown waits for it
    del v
    gc.collect()
    with pytest.raises(hive.ShutDown):
        eng.stats()


def test_get_releases_the_gil(engine):
    ref, mv = engine.create(8)
    entered = threading.Event()
    result = {}

    def getter():
        entered.set()
        try:
            result["value"] = bytes(engine.get(ref, timeout=20))
        except hive.Error as e:
            result["error"] = e

    t = threading.Thread(target=getter)
    t.start()
    entered.wait()
    # this thread needs the GIL to go on; had get kept it, the getter would
    # time out before the seal below, and result would hold a Timeout
    progress = 0
    for _ in range(100_000):
        progress += 1
    mv[:] = b"released"
    engine.seal(ref)
    t.join()
    assert progress == 100_000
    assert result == {"value": b"released"}


def test_ref_identity_and_repr(engine):
    r = engine.put(b"a")
    assert r == r and r != engine.put(b"a")
    assert hash(r) == hash(r)
    assert r.id != 0 and hex(r.id)[2:] in repr(r)
    assert bytes(r.get()) == b"a"


def test_a_ref_exports_its_payload(engine, lib):
    raw = engine.put(b"payload!")
    m = memoryview(raw)                       # the Ref itself is the exporter, read-only
    assert m.readonly and bytes(m) == b"payload!" and m.obj is raw
    assert np.frombuffer(m, np.uint8).ctypes.data == addr_in_task(lib, raw)[0]
    with pytest.raises((BufferError, TypeError)):
        struct.pack_into("B", raw, 0, 1)      # asks for a writable buffer: refused
    with pytest.raises(TypeError):
        m[0:1] = b"x"
    typed = engine.put(np.arange(4, dtype=np.int32))
    assert bytes(memoryview(typed)) == np.arange(4, dtype=np.int32).tobytes()   # less the trailer
    pickled = engine.remote(lambda: {"a": 1})()
    pickled.get(timeout=30)
    assert pickle.loads(memoryview(pickled)) == {"a": 1}
    ref, mv = engine.create(8)
    with pytest.raises(hive.Timeout):
        memoryview(ref)                       # not sealed yet
    mv[:] = b"12345678"
    engine.seal(ref)
    assert bytes(memoryview(ref)) == b"12345678"


def test_get_views_the_ref_and_repeats_without_a_lookup(engine):
    ref = engine.put(b"abcdefgh")
    views = [engine.get(ref) for _ in range(3)] + [ref.get(), ref.get(timeout=0)]
    # the first get's view is over the Ref, later ones over the Payload the
    # Ref handed its count to; all over the same bytes, all distinct objects
    assert views[0].obj is ref
    assert all(type(v.obj) is hive._hive.Payload for v in views[1:])
    assert len({id(v) for v in views}) == 5
    assert all(bytes(v) == b"abcdefgh" and v.readonly for v in views)
    assert len({np.frombuffer(v, np.uint8).ctypes.data for v in views}) == 1
    other = hive.Engine(workers=1, store_bytes=1 << 20)
    try:
        with pytest.raises(ValueError):
            other.get(ref)                    # a Ref of another engine
    finally:
        other.close()


def test_each_get_releases_alone(engine):
    # A Ref keeps its last view for reuse once nobody holds it; a release()
    # of one get's view never touches another get's
    ref = engine.put(b"12345678")
    first, second, third = engine.get(ref), engine.get(ref), engine.get(ref)
    second.release()
    assert bytes(first) == b"12345678" and bytes(third) == b"12345678"
    with pytest.raises(ValueError):
        bytes(second)
    third.release()
    fourth = engine.get(ref)                  # the kept one is released: a new one
    assert fourth is not third and bytes(fourth) == b"12345678"
    with fourth as m:                         # `with` releases it on the way out
        assert bytes(m) == b"12345678"
    assert bytes(engine.get(ref)) == b"12345678" and bytes(first) == b"12345678"
    held = engine.get(ref)
    again = engine.get(ref)                   # held is somebody's: a new view
    assert again is not held
    held.release()
    assert bytes(again) == b"12345678"
    del held, again
    dropped_id = id(engine.get(ref))          # dropped at once: the next get may reuse it
    for _ in range(3):
        v = engine.get(ref)
        assert bytes(v) == b"12345678" and v.readonly
        del v
    assert isinstance(dropped_id, int)
    with pytest.raises(TypeError):
        engine.get(ref)[0:1] = b"x"           # read-only, reused or not
    exported = np.frombuffer(engine.get(ref), np.uint8)   # an export holds the view: not reused
    other = engine.get(ref)
    other.release()
    assert exported.tobytes() == b"12345678"


def test_kept_views_are_bounded_and_evicted_ones_stay_valid(engine):
    # an engine's Refs keep 256 views at most, the last used; a view dropped
    # from the kept set lives on while somebody holds it
    def live_views():
        return sum(isinstance(o, memoryview) for o in gc.get_objects())
    base = live_views()
    refs = [engine.put(bytes([i % 251]) * 16) for i in range(700)]
    held = {}
    for i, r in enumerate(refs):
        engine.get(r)
        v = engine.get(r)                     # kept (and, beyond 256, another dropped)
        if i % 97 == 0:
            held[i] = v
        del v
    assert live_views() - base <= 256 + len(held)
    for rnd in range(2):
        for i, r in enumerate(refs):          # evicted ones are made again
            assert bytes(engine.get(r)) == bytes([i % 251]) * 16
    assert live_views() - base <= 256 + len(held)
    hot = refs[0]
    for r in refs[1:300]:
        engine.get(hot)                       # used last again and again: never the one dropped
        engine.get(r)
    del refs, hot, r
    gc.collect()
    junk = [engine.put(b"j") for _ in range(600)]   # store churn over the freed objects' memory
    del junk
    assert all(bytes(v) == bytes([i % 251]) * 16 for i, v in held.items())   # their counts held
    del held
    assert eventually(lambda: store_empty(engine)), engine.stats()


def test_views_under_random_gets_holds_releases_and_drops():
    # a random walk over Refs, views held, released and dropped, the kept
    # set overflowing (a small one here: 300 Refs against 256 kept), then
    # close() with views still held: every held view shows its bytes until
    # released, a released one refuses, and the engine shuts down once the
    # last held view is gone
    import random
    rng = random.Random(7)
    eng = hive.Engine(workers=1, store_bytes=16 << 20)
    payload = {}
    refs = {}
    held = []                                 # (view, expected bytes)
    released = []
    for step in range(6000):
        op = rng.random()
        if op < 0.15 or not refs:
            k = rng.randrange(400)
            payload[k] = bytes([k % 256]) * (1 + k % 37)
            refs[k] = eng.put(payload[k])
        elif op < 0.55:
            k = rng.choice(list(refs))
            v = eng.get(refs[k])
            assert bytes(v) == payload[k]
            if rng.random() < 0.3:
                held.append((v, payload[k]))
        elif op < 0.65 and held:
            v, want = held.pop(rng.randrange(len(held)))
            if rng.random() < 0.5:
                v.release()
                released.append(v)
        elif op < 0.8:
            del refs[rng.choice(list(refs))]   # a held view outlives it
        else:
            k = rng.choice(list(refs))
            with eng.get(refs[k]) as v:
                assert bytes(v) == payload[k]
        if step % 500 == 0:
            assert all(bytes(v) == want for v, want in held)
            for v in released:
                with pytest.raises(ValueError):
                    bytes(v)
    eng.close()                               # views held: the shutdown waits for them
    assert eng.workers == 1
    assert all(bytes(v) == want for v, want in held)
    del held, v
    gc.collect()
    assert eng.workers == 0                   # the last held view gone: shut down, Refs alive
    del refs


def test_a_weakly_referenced_view_is_not_reused(engine):
    import weakref
    ref = engine.put(b"abc")
    engine.get(ref)
    v = engine.get(ref)                       # the kept view
    w = weakref.ref(v)
    del v
    fresh = engine.get(ref)
    assert fresh is not w() and bytes(fresh) == b"abc"


def test_a_raw_view_outlives_its_ref_and_every_count_goes(engine):
    refs = [engine.put(bytes([i]) * 64) for i in range(40)]
    views = [engine.get(r) for r in refs for _ in range(3)]    # first, kept, and a shared one
    del refs
    gc.collect()
    assert engine.stats()["objects"] == 40
    assert [bytes(v) for v in views[::3]] == [bytes([i]) * 64 for i in range(40)]
    del views
    assert eventually(lambda: store_empty(engine)), engine.stats()


def test_close_waits_for_a_memoryview_of_a_ref():
    eng = hive.Engine(workers=1, store_bytes=1 << 20)
    ref = eng.put(b"still here")
    first = eng.get(ref)                      # over the Ref
    v = eng.get(ref)                          # the view the Ref keeps, held here too
    idle = eng.put(b"idle")
    eng.get(idle)
    eng.get(idle)                             # kept by idle, held by nobody
    del first
    eng.close()
    with pytest.raises(hive.ShutDown):
        eng.get(ref)                          # no new view after close()
    with pytest.raises(hive.ShutDown):
        memoryview(ref)
    with pytest.raises(hive.ShutDown):
        memoryview(v.obj)
    assert bytes(v) == b"still here"          # still mapped: shutdown waits for it
    assert eng.workers == 1                   # not shut down yet (0 once it is)
    del v                                     # the last view: shutdown, though both Refs live on
    gc.collect()
    assert eng.workers == 0
    with pytest.raises(hive.ShutDown):
        eng.get(idle)
    del ref, idle


def test_close_with_only_kept_views_shuts_down_at_once():
    eng = hive.Engine(workers=1, store_bytes=1 << 20)
    refs = [eng.put(b"x" * 10) for _ in range(5)]
    for r in refs:
        eng.get(r)
        eng.get(r)
    eng.close()
    assert eng.workers == 0                   # shut down, the Refs and their kept views alive
    with pytest.raises(hive.ShutDown):
        eng.get(refs[0])
    del refs


def test_many_refs_and_futures_come_and_go(engine, lib):
    # Refs and Futures are recycled through a free list: each keeps its own
    # object and count, never another's
    c = lib.actor("py_counter", 0)
    for rnd in range(3):
        refs = [engine.put(bytes([i % 256]) * 3) for i in range(200)]
        futs = [c.call("add", 1) for _ in range(100)]
        assert [bytes(engine.get(r)) for r in refs] == [bytes([i % 256]) * 3 for i in range(200)]
        got = [int(np.frombuffer(f.get(timeout=30), np.int64)[0]) for f in futs]
        assert got == list(range(rnd * 100 + 1, rnd * 100 + 101))
        del refs, futs
    assert eventually(lambda: engine.stats()["objects"] == 0), engine.stats()


def test_put_in_one_c_call_and_its_fallbacks(engine):
    # bytes-likes and C-contiguous arrays are put by the C method alone; numpy
    # scalars and other arrays go through numpy first (hive._put_other)
    assert bytes(engine.get(engine.put(bytearray(b"ba")))) == b"ba"
    assert bytes(engine.get(engine.put(memoryview(b"xyz")[1:]))) == b"yz"
    f = np.asfortranarray(np.arange(6).reshape(2, 3))
    got = engine.get(engine.put(f))
    assert got.flags.c_contiguous and np.array_equal(got, f)
    named = np.zeros(2, dtype=[("O", np.int32), ("Obj", np.float64)])   # 'O' only as names
    named["O"] = [4, 5]
    got = engine.get(engine.put(named))
    assert got.dtype == named.dtype and got["O"].tolist() == [4, 5]
    with pytest.raises(TypeError):
        engine.put(np.zeros(2, dtype=[("a", object), ("b", np.float64)]))
    with pytest.raises(TypeError):
        engine.put(np.array([1, "x"], dtype=object)[::2])   # not contiguous, then objects
    s = engine.get(engine.put(np.float32(1.5)))
    assert s.dtype == np.float32 and s.shape == () and s == 1.5
    shared = engine.array((2, 3), np.int16)
    shared[1, 2] = 9
    assert engine.get(engine.put(shared))[1, 2] == 9          # a copy of a shared array's bytes
    assert engine.get(engine.put(shared[:, 1]))[1] == 0      # a strided slice, copied contiguous
    with pytest.raises(BufferError):
        engine.put(memoryview(b"abcdef")[::2])                # a raw buffer must be contiguous


# ---- recycled memoryviews: a get's view whose last reference went is kept
# (with its managed buffer) and rebuilt for a later get; anything that still
# holds it or its managed buffer keeps it from reuse

def first_views(engine, payloads):
    """(refs, view ids) of a first get of each payload, views dropped as they come"""
    refs = [engine.put(p) for p in payloads]
    return refs, [id(engine.get(r)) for r in refs]


def fill_free_list(engine, n=32):
    """n first-get views made and held at once, then dropped: to the free list"""
    views = [engine.get(engine.put(b"f")) for _ in range(n)]
    del views


def check_view(v, ref, want):
    assert type(v) is memoryview and v.obj is ref and bytes(v) == want
    assert v.readonly and v.format == "B" and v.itemsize == 1 and v.ndim == 1
    assert v.shape == (len(want),) and v.strides == (1,) and v.suboffsets == ()
    assert v.c_contiguous and v.f_contiguous and v.contiguous and v.nbytes == len(want)
    assert hash(v) == hash(want) and v == want and v.tolist() == list(want)
    assert v.cast("c").tobytes() == want and bytes(v[1:]) == want[1:]


def test_a_recycled_view_reads_its_new_payload(engine):
    payloads = [bytes([i]) * (1 + i % 13) for i in range(200)]
    refs = [engine.put(p) for p in payloads]
    ids, recycled = set(), 0
    for r, p in zip(refs, payloads):
        v = engine.get(r)                     # a first get: over the Ref, in a recycled view
        ids.add(id(v))
        recycled += not gc.is_tracked(v)      # (the free list's views are left untracked)
        check_view(v, r, p)
        del v
    assert len(ids) < len(refs) and recycled >= len(refs) - 1   # the views were reused
    futs = [engine.remote(lambda i=i: bytes([i]) * 5)() for i in range(50)]
    for i, f in enumerate(futs):              # a Future's get likewise
        check_view(f.get(timeout=30), f, bytes([i]) * 5)
    for rnd in range(2):                      # kept views (over Payloads) come and go among them
        for r, p in zip(refs, payloads):
            v = engine.get(r)
            assert type(v.obj) is hive._hive.Payload
            check_view(v, v.obj, p)
            del v


def test_what_holds_a_view_keeps_it_from_reuse(engine):
    import weakref
    a, b = engine.put(b"abcdefgh"), engine.put(b"ABCDEFGH")
    holders = {}
    v = engine.get(a)
    holders["slice"] = (v[2:5], b"cde")       # another view on its managed buffer
    del v
    v = engine.get(engine.put(b"abcdefgh"))
    holders["ndarray"] = (np.frombuffer(v, np.uint8), b"abcdefgh")   # an export of the view
    del v
    v = engine.get(engine.put(b"abcdefgh"))
    holders["cast"] = (v.cast("c"), b"abcdefgh")
    del v
    v = engine.get(engine.put(b"abcdefgh"))
    w = weakref.ref(v)                        # a weak reference: CPython's own dealloc clears it
    del v
    assert w() is None
    v = engine.get(engine.put(b"abcdefgh"))
    h = hash(v)                               # the cached hash of a read-only view
    kept_obj = v.obj
    del v
    released = engine.get(engine.put(b"released"))
    released.release()
    got = [engine.get(b) for _ in range(1)] + [engine.get(engine.put(b"12345678")) for _ in range(40)]
    assert all(bytes(x) in (b"ABCDEFGH", b"12345678") for x in got)
    for name, (x, want) in holders.items():
        assert bytes(x) == want, name
        assert all(x is not g for g in got)
    assert kept_obj.__class__ is hive.Ref and bytes(kept_obj) == b"abcdefgh"
    assert h == hash(b"abcdefgh") and hash(got[1]) == hash(b"12345678")
    with pytest.raises(ValueError):
        bytes(released)                       # a released view stays released
    assert all(released is not g for g in got)
    with pytest.raises(TypeError):
        got[0][0:1] = b"x"                    # still read-only


def test_held_views_are_never_shared_and_the_counts_are_exact(engine):
    payloads = [bytes([i % 256]) * 32 for i in range(300)]
    fill_free_list(engine)
    refs, _ = first_views(engine, payloads)
    views = [engine.get(r) for r in refs]     # second gets (over Payloads, 256 of them kept)
    views += [engine.get(engine.put(p)) for p in payloads]   # first gets, all held
    assert len({id(v) for v in views}) == len(views)
    assert [bytes(v) for v in views] == payloads + payloads
    del refs
    gc.collect()
    assert eventually(lambda: engine.stats()["objects"] == 600), engine.stats()   # each view's count
    del views
    assert eventually(lambda: store_empty(engine)), engine.stats()
    for _ in range(3):                        # gets and drops over the free list leave nothing
        refs, _ = first_views(engine, payloads)
        del refs
        assert eventually(lambda: store_empty(engine)), engine.stats()


def test_recycled_views_and_the_garbage_collector(engine):
    # a view from the free list is left untracked (it can be in no cycle);
    # one that then goes to CPython's own dealloc is tracked again first
    import weakref
    for holder in ("weakref", "slice", "collect", "cycle"):
        fill_free_list(engine)
        refs = [engine.put(b"x" * 8) for _ in range(20)]
        for r in refs:
            v = engine.get(r)                 # a first get, in a recycled view
            assert not gc.is_tracked(v)
            if holder == "weakref":
                w = weakref.ref(v, lambda _: None)
                del v
                assert w() is None
            elif holder == "slice":
                s = v[1:]
                del v
                assert bytes(s) == b"x" * 7
                del s
            elif holder == "collect":
                gc.collect()
                assert bytes(v) == b"x" * 8
                del v
            else:
                cyc = [v]
                cyc.append(cyc)               # a cycle holding the view: the collector frees it
                del v, cyc
                gc.collect()
        del refs, r
    assert eventually(lambda: store_empty(engine)), engine.stats()


def test_other_memoryviews_are_cpythons(engine):
    fill_free_list(engine)
    for i in range(200):
        v = memoryview(bytes([i % 256]) * 9)
        assert v.obj == bytes([i % 256]) * 9 and bytes(v[2:4]) == bytes([i % 256]) * 2
        nd = memoryview(np.arange(6, dtype=np.int32).reshape(2, 3))
        assert nd.shape == (2, 3) and nd.format == "i" and nd.tolist() == [[0, 1, 2], [3, 4, 5]]
        del v, nd
    r = engine.put(b"again")
    assert bytes(engine.get(r)) == b"again" and engine.get(r).obj is not r   # kept: over a Payload


def test_a_recycled_view_counts_for_its_own_engine():
    a = hive.Engine(workers=1, store_bytes=1 << 20)
    b = hive.Engine(workers=1, store_bytes=1 << 20)
    fill_free_list(a)                         # a's views to the free list
    held = a.get(a.put(b"held by a"))
    a.close()
    assert a.workers == 1                     # held: a waits for it
    v = b.get(b.put(b"from b"))               # a view once a's, now b's
    assert bytes(v) == b"from b"
    del held
    gc.collect()
    assert a.workers == 0                     # a's last view gone: a is down, b is not
    b.close()
    assert b.workers == 1 and bytes(v) == b"from b"
    with pytest.raises(hive.ShutDown):
        b.get(b.put(b"x"))
    del v
    gc.collect()
    assert b.workers == 0


def test_the_engines_c_methods_are_its_own_and_a_subclass_keeps_them():
    # hive.Engine carries _hive.Engine's C methods as its own (CPython
    # specializes a call only on the method's own type); what it defines in
    # Python stays, and a subclass of it inherits them
    assert type(hive.Engine.__dict__["get"]).__name__ == "method_descriptor"
    assert hive.Engine.__dict__["get"].__objclass__ is hive.Engine
    assert hive.Engine.__dict__["put"].__objclass__ is hive.Engine
    assert "create" in hive.Engine.__dict__ and callable(hive.Engine.create)

    class Mine(hive.Engine):
        def put(self, x):
            return super().put(bytes(x) + b"!")

    with Mine(workers=1, store_bytes=1 << 20) as eng:
        r = eng.put(b"mine")
        assert bytes(eng.get(r)) == b"mine!" and bytes(eng.get(r, timeout=1)) == b"mine!"
        assert eng.stats()["objects"] == 1
    with pytest.raises(TypeError):
        hive.Engine.get(object(), r)          # still checks its self
    with pytest.raises(TypeError):
        hive._hive._own_methods(int)


def test_a_c_call_packs_ints_and_floats_as_before(engine, lib):
    # int and float arguments (exact types) are packed by call itself, the
    # rest (bools, int subclasses, buffers, more than four) by the general way
    c = lib.actor("py_counter", 0)
    total = 0
    for x in (1, 2**40, -5, True, 0):
        total += int(x)
        assert int(np.frombuffer(c.call("add", x).get(timeout=30), np.int64)[0]) == total

    class Int(int):
        pass

    total += 7
    assert int(np.frombuffer(c.call("add", Int(7)).get(timeout=30), np.int64)[0]) == total
    with pytest.raises(OverflowError):
        c.call("add", 2**70)
    with pytest.raises(TypeError):
        c.call("add", object())
    f = np.frombuffer(c.call("add", 1.5).get(timeout=30), np.int64)[0]   # a double's 8 bytes
    assert f == total + np.array(1.5).view(np.int64)
