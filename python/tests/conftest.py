# conftest.py - fixtures of the Python suite: an engine per test and the C
# library of test tasks (python/tests/pytasks.c, built by `make python`).
import gc
import os
import time

import pytest

import hive

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture
def engine():
    with hive.Engine(workers=2, store_bytes=64 << 20) as eng:
        yield eng
    gc.collect()


@pytest.fixture
def lib(engine):
    path = os.environ.get("HIVE_PYTASKS",
                          os.path.join(HERE, "..", "..", "build", "python", "tests", "libpytasks.so"))
    return engine.load(path)


def eventually(cond, seconds=30.0):
    """cond() turns true within seconds (a deadline, not a timing claim:
    released objects leave the store once their grace period ends)"""
    end = time.monotonic() + seconds
    while True:
        gc.collect()
        if cond():
            return True
        if time.monotonic() > end:
            return False
        time.sleep(0.01)
