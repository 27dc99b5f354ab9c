"""hive - tasks, actors and a shared-memory object store on one machine.

This package owns the numpy side of the bindings: it turns the C
extension's Buffers (hive memory exported through the buffer protocol)
into ndarrays and memoryviews without copying, and adds the shared-array
and replay-buffer conveniences. Everything that touches hive is in _hive.c.

    with hive.Engine(workers=4) as eng:
        ref = eng.put(np.arange(10.0))
        view = eng.get(ref)            # read-only ndarray over hive's store
"""
import contextlib
import pickle

import numpy as np

from . import _hive
from ._hive import (Actor, Buffer, Cancelled, Cell, Error, Future, Library, ActorDead, Ref,
                    ShutDown, StoreFull, TaskFailed, Timeout, LOW, NORMAL, HIGH, to_dlpack)

__all__ = ["Engine", "Ref", "Future", "Cell", "Library", "Actor", "SharedArray", "ObjectView",
           "Replay", "Error", "StoreFull", "Timeout", "Cancelled", "TaskFailed", "ActorDead",
           "ShutDown", "LOW", "NORMAL", "HIGH"]

# numpy dtype -> hive_dtype_t (include/hive.h)
_DTYPES = {np.dtype(t): i + 1 for i, t in enumerate(
    [np.bool_, np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64,
     np.uint64, np.float32, np.float64])}

_KDLCPU = 1


def _owner(arr, attr):
    """the Buffer behind arr if arr's memory lies inside it, else None"""
    return _inside(arr, getattr(arr, attr, None))


def _inside(arr, buf):
    """buf if arr's memory lies inside it (or arr is empty), else None"""
    if buf is None or arr.size == 0:
        return buf
    lo = arr.__array_interface__["data"][0]
    first = lo + sum(min(0, (n - 1) * s) for n, s in zip(arr.shape, arr.strides))
    last = lo + sum(max(0, (n - 1) * s) for n, s in zip(arr.shape, arr.strides)) + arr.itemsize
    return buf if buf.address <= first and last <= buf.address + buf.nbytes else None


class ObjectView(np.ndarray):
    """A read-only ndarray over a sealed object's payload (what get returns
    for an object put from an ndarray). Holds the object's count: its base
    chain (numpy's, through slices and views) ends at the memoryview of the
    hive Buffer. No __array_finalize__: making one costs no Python call."""

    @property
    def _buffer(self):
        """the Buffer at the end of the base chain, if the memory lies inside it"""
        b = self.base
        while isinstance(b, np.ndarray):
            b = b.base
        if isinstance(b, memoryview):
            b = b.obj
        return _inside(self, b) if isinstance(b, Buffer) else None

    @property
    def _hive_arg(self):
        buf = self._buffer
        return buf.ref() if buf is not None else None

    def __dlpack__(self, stream=None):
        return to_dlpack(self)

    def __dlpack_device__(self):
        return (_KDLCPU, 0)


class SharedArray(np.ndarray):
    """A writable ndarray over a hive shared array: every holder (Python or
    C task) sees the same bytes. Slices stay SharedArrays over the same
    memory. add() is atomic; writing() is a write section; snapshot() a
    consistent copy."""

    def __array_finalize__(self, obj):
        self._buffer = None
        if obj is not None:
            self._buffer = getattr(obj, "_buffer", None)
            self._buffer = _owner(self, "_buffer")

    def _hive(self):
        if self._buffer is None:
            raise TypeError("this array is not a view of hive memory (a copy or a ufunc result)")
        return self._buffer

    @property
    def _hive_arg(self):
        return self._hive()

    @property
    def ref(self):
        """a new Ref to the whole array (pass it to C tasks)"""
        return self._hive().ref()

    def _flat_index(self, index):
        if not isinstance(index, tuple):
            index = (index,)
        if len(index) != self.ndim:
            raise IndexError(f"add: {len(index)} indices for {self.ndim} dimensions")
        off = self.__array_interface__["data"][0] - self._hive().address
        for i, n, s in zip(index, self.shape, self.strides):
            i = int(i)
            if i < 0:
                i += n
            if not 0 <= i < n:
                raise IndexError(f"add: index {i} out of range 0 .. {n - 1}")
            off += i * s
        return off // self.itemsize

    def add(self, index, delta):
        """atomically add delta to self[index]; returns the new value"""
        return self._hive().add(self._flat_index(index), delta)

    @contextlib.contextmanager
    def writing(self):
        """a write section: writers exclude each other, snapshots never see half of one"""
        buf = self._hive()
        buf.write_lock()
        try:
            yield self
        finally:
            buf.write_unlock()

    def snapshot(self):
        """a consistent copy (a plain ndarray), never half of a write section"""
        buf = self._hive()
        full = np.empty(buf.nbytes // self.itemsize, dtype=self.dtype)
        buf.read_into(full)
        if self.size == 0:
            return np.empty(self.shape, self.dtype)
        start = (self.__array_interface__["data"][0] - buf.address) // self.itemsize
        return np.lib.stride_tricks.as_strided(full[start:], self.shape, self.strides).copy()

    def __dlpack__(self, stream=None):
        return to_dlpack(self)

    def __dlpack_device__(self):
        return (_KDLCPU, 0)

    def __reduce__(self):
        raise TypeError("a SharedArray cannot be pickled; pass its .ref to tasks")


def _view_of(buf):
    """an ndarray (typed payload) or a memoryview over a Buffer, no copy;
    a Python task's pickled result is unpickled"""
    if buf.pickled:
        return pickle.loads(memoryview(buf))
    if buf.typed:
        return np.asarray(buf).view(ObjectView)
    return memoryview(buf)


def _typed_args(buf):
    """(shape, dtype) with which ObjectView(shape, dtype, buf) is the very
    array _view_of(buf) makes, or None (a structured dtype, whose field names
    can be renamed in place, is not shared between gets). A Ref's repeated
    typed gets make their ObjectView so, from C: no np.asarray, no Python
    call."""
    a = np.asarray(buf)
    if a.dtype.names is not None:
        return None
    try:
        v = ObjectView(a.shape, a.dtype, buf)
    except (TypeError, ValueError):     # a layout ndarray() does not take: the first get's way
        return None
    same = v.dtype == a.dtype and v.shape == a.shape and v.strides == a.strides
    return (a.shape, a.dtype) if same and v.ctypes.data == a.ctypes.data else None


class Replay:
    """A replay buffer of fixed-size items (a numpy dtype and item shape)
    in hive's store. push(batch), sample(n) -> (items, keys, weights),
    update_priorities(keys, priorities)."""

    def __init__(self, engine, capacity, dtype, shape=(), *, prioritized=False, alpha=0.6,
                 beta=0.4, samples_per_insert=0.0, min_size=0, error_buffer=0.0, seed=0):
        self.dtype = np.dtype(dtype)
        if self.dtype.hasobject:
            raise TypeError("replay items cannot hold Python objects")
        self.shape = tuple(int(n) for n in shape)
        item = self.dtype.itemsize * int(np.prod(self.shape, dtype=np.int64))
        self._rb = engine._replay(int(capacity), item, bool(prioritized), float(alpha),
                                  float(beta), float(samples_per_insert), int(min_size),
                                  float(error_buffer), int(seed))

    def push(self, batch):
        """push one item (shape == item shape) or a batch (n, *item shape)"""
        a = np.ascontiguousarray(batch, dtype=self.dtype)
        if a.shape != self.shape and a.shape[1:] != self.shape:
            raise ValueError(f"push: shape {a.shape} is neither {self.shape} nor (n, *{self.shape})")
        self._rb.push(a)

    def sample(self, n, timeout=None, distinct=False):
        """(items, keys, importance weights) as numpy arrays; waits up to
        timeout for the rate limiter (Timeout after it)"""
        n = int(n)
        if n <= 0:
            raise ValueError(f"sample: n must be > 0, not {n}")
        items = np.empty((n,) + self.shape, self.dtype)
        keys = np.empty(n, np.uint64)
        weights = np.empty(n, np.float64)
        self._rb.sample_into(n, items, keys, weights, timeout, distinct)
        return items, keys, weights

    def update_priorities(self, keys, priorities):
        k = np.ascontiguousarray(keys, dtype=np.uint64)
        p = np.ascontiguousarray(priorities, dtype=np.float64)
        if k.shape != p.shape or k.ndim != 1:
            raise ValueError(f"update_priorities: keys {k.shape} and priorities {p.shape} differ")
        return self._rb.update_priorities(k, p)

    def stats(self):
        return self._rb.stats()

    def close(self):
        self._rb.close()


# ---- Python callables: what the C trampolines call on a worker, holding the GIL

def _encode(x):
    """a result as (buffer, kind): 1 typed ndarray, 0 raw bytes, 2 pickle"""
    if isinstance(x, (np.ndarray, np.generic)) and not np.asarray(x).dtype.hasobject:
        x = np.asarray(x)
        return (x if x.flags.c_contiguous else np.ascontiguousarray(x)), 1
    if isinstance(x, (bytes, bytearray)):
        return x, 0
    return pickle.dumps(x, protocol=pickle.HIGHEST_PROTOCOL), 2


def _resolve(engine, args):
    return tuple(engine.get(a) if isinstance(a, Ref) else a for a in args)


def _run_task(engine, fn, args, kwargs):
    return _encode(fn(*_resolve(engine, args), **kwargs))


def _new_actor(engine, cls, args, kwargs):
    return cls(*_resolve(engine, args), **kwargs)


def _run_method(instance, engine, name, args, kwargs):
    return _encode(getattr(instance, name)(*_resolve(engine, args), **kwargs))


def _put_other(engine, x):
    """Engine.put of what the C side leaves to numpy: a numpy scalar (a 0-d
    array) or an array that is not C-contiguous (copied contiguous)"""
    x = np.asarray(x)
    if x.dtype.hasobject:
        raise TypeError("put: an array of Python objects has no bytes to share")
    if not x.flags.c_contiguous:      # (ascontiguousarray would make a 0-d array 1-d)
        x = np.ascontiguousarray(x)
    return engine._put(x, True)


_hive._set_runners((_run_task, _new_actor, _run_method, _view_of, _put_other, np.ndarray, np.generic,
                    ObjectView, _typed_args))


class RemoteFunction:
    """engine.remote(fn): calling it (or .remote(...)) runs fn on a hive
    worker, holding the GIL, and returns a Future. Ref arguments are
    waited for and passed as their values (as Ray does)."""

    def __init__(self, engine, fn, priority=0):
        if not callable(fn):
            raise TypeError(f"remote: {fn!r} is not callable")
        self._engine, self._fn, self._priority = engine, fn, priority

    def __call__(self, *args, **kwargs):
        return self._engine._submit_py(self._fn, args, kwargs, self._priority)

    remote = __call__


class ActorClass:
    """engine.actor(Cls): calling it builds one instance on a hive worker and
    returns its Actor handle; handle.call("method", *args) -> Future"""

    def __init__(self, engine, cls, name=None, max_restarts=0, node=None, worker=None):
        if not isinstance(cls, type):
            raise TypeError(f"actor: {cls!r} is not a class")
        self._engine, self._cls, self._name, self._restarts = engine, cls, name, max_restarts
        self._node, self._worker = node, worker

    def __call__(self, *args, **kwargs):
        return self._engine._actor_py(self._cls, args, kwargs, self._name, self._restarts, self._node,
                                      self._worker)

    remote = __call__


class Engine(_hive.Engine):
    """Engine(workers=0, store_bytes=0, topology=None, trace_path=None, pin=True):
    a hive engine; a context manager that shuts it down on exit (after the
    last view of its memory is gone)."""

    # put(x) and get(ref, timeout=None) are the extension's (one C call
    # each): put copies x into a sealed object, an ndarray with its dtype
    # and shape (numpy scalars and non-contiguous arrays through _put_other);
    # get is a read-only memoryview over the payload, or the ndarray
    # (ObjectView) of one put from an ndarray, no copy; it waits up to
    # timeout seconds (None: forever) without the GIL.

    def create(self, size):
        """(Ref, writable memoryview) of a new object; seal(ref) publishes it"""
        ref, buf = self._create(size)
        return ref, memoryview(buf)

    def array(self, shape, dtype=np.float64):
        """a zero-filled SharedArray in hive's store"""
        if isinstance(shape, (int, np.integer)):
            shape = (int(shape),)
        dt = np.dtype(dtype)
        if dt not in _DTYPES:
            raise TypeError(f"array: dtype {dt} is not one of hive's "
                            f"({', '.join(str(d) for d in _DTYPES)})")
        buf = self._array(tuple(shape), _DTYPES[dt])
        arr = np.asarray(buf).view(SharedArray)
        arr._buffer = buf
        return arr

    def remote(self, fn, *, priority=0):
        """fn as a task: engine.remote(fn)(*args) -> Future (runs holding the GIL)"""
        return RemoteFunction(self, fn, priority)

    def actor(self, cls, *, name=None, max_restarts=0, node=None, worker=None):
        """cls as an actor: engine.actor(Cls)(*args) -> Actor (methods hold the GIL);
        node= or worker= places it (include/hive.h, Placement)"""
        return ActorClass(self, cls, name, max_restarts, node, worker)

    def replay(self, capacity, dtype, shape=(), **kw):
        """a Replay buffer of capacity items of dtype and shape"""
        return Replay(self, capacity, dtype, shape, **kw)


# ---- the env pool (include/hive/envpool.h): numpy views of its batch arrays

def _batch_views(bufs):
    """(obs, reward, done, env_id) read-only ndarrays over a batch's Buffers"""
    return tuple(np.asarray(buf).view(ObjectView) for buf in bufs)


def _int32_of(x, what):
    a = np.asarray(x)
    if a.dtype == np.int32:
        return np.ascontiguousarray(a)
    if a.dtype.kind not in "iu":
        raise ValueError(f"{what} must be integers (int32), not {a.dtype}")
    if a.size and (a.min() < -2**31 or a.max() >= 2**31):
        raise ValueError(f"{what}: a value outside int32")
    return np.ascontiguousarray(a, dtype=np.int32)


class EnvPool:
    """A vectorised environment pool stepped by hive's workers (EnvPool's
    model): engine.envpool("CartPole" | "Synthetic", num_envs, ...).

    Sync (gym): reset() -> obs; step(actions) -> (obs, reward, done, env_id).
    Async (EnvPool): send(actions, env_ids); recv(timeout=None) -> (obs,
    reward, done, env_id) of the first batch_size envs to finish;
    async_reset(). Episodes auto-reset (the obs returned with done is the
    next episode's first). Every array returned is a read-only numpy view of
    the pool's batch buffers, no copy; its memory stays alive while you hold
    it, but its contents are rewritten by the pool's next reset, step or
    recv: copy what you keep. Actions are int32 (integer arrays are cast)."""

    def __init__(self, engine, env, num_envs, batch_size=None, seed=0, step_ns=1000,
                 episode_len=100, heavy_tail=False, env_node=None):
        self._p = engine._envpool(str(env), int(num_envs), int(batch_size or 0), int(seed),
                                  int(step_ns), int(episode_len), bool(heavy_tail), env_node)

    num_envs = property(lambda self: self._p.num_envs)
    batch_size = property(lambda self: self._p.batch_size)

    def reset(self):
        """reset every env; their first observations [num_envs, ...]"""
        return _batch_views(self._p.reset())[0]

    def step(self, actions):
        """step env i with actions[i] -> (obs, reward, done, env_id)"""
        return _batch_views(self._p.step(_int32_of(actions, "step: actions")))

    def send(self, actions, env_ids):
        """start a step of env_ids[k] with actions[k]; returns at once"""
        self._p.send(_int32_of(actions, "send: actions"), _int32_of(env_ids, "send: env_ids"))

    def async_reset(self):
        """start a reset of every env (their first obs come from recv)"""
        self._p.async_reset()

    def recv(self, timeout=None):
        """the next batch_size envs to finish: (obs, reward, done, env_id)"""
        return _batch_views(self._p.recv(timeout))

    def close(self):
        self._p.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _engine_envpool(self, env, num_envs, batch_size=None, seed=0, step_ns=1000, episode_len=100,
                    heavy_tail=False, env_node=None):
    """an EnvPool of num_envs environments of env ("CartPole" or "Synthetic")"""
    return EnvPool(self, env, num_envs, batch_size, seed, step_ns, episode_len, heavy_tail, env_node)


Engine.envpool = _engine_envpool
__all__.append("EnvPool")


def _engine_local(self, init, reinit=None, fini=None):
    """a worker-local value (hive_local): init() builds it once on each
    worker whose Python task calls .get(); before each later task there,
    reinit=None rebuilds it (fini, then init), "keep" keeps it as is, and a
    callable reinit(value) resets it; fini(value) at shutdown."""
    return self._local(init, reinit, fini)


Engine.local = _engine_local

# the C methods (put, get, ...) as hive.Engine's own: CPython specializes their
# calls only on an object of the method's own type
_hive._own_methods(Engine)
