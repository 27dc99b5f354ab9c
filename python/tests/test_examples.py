# test_examples.py - examples/python/env_per_worker.py prints what the C
# example prints (examples/expected/env_per_worker.txt); worker-locals from
# Python callables; the CartPole learner learns (solved within 60 s: about
# 2-15 s in the normal build, 20 s under ASan).
import os
import subprocess
import sys

import pytest

import hive

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def run_example(name, *args, timeout=120):
    script = os.path.join(ROOT, "examples", "python", name)
    return subprocess.run([sys.executable, script, *args], capture_output=True, text=True,
                          timeout=timeout)


def test_env_per_worker_prints_what_the_c_example_prints():
    out = run_example("env_per_worker.py")
    assert out.returncode == 0, out.stderr
    with open(os.path.join(ROOT, "examples", "expected", "env_per_worker.txt")) as f:
        assert out.stdout == f.read()


def test_local_modes():
    # one worker, so every task meets the same worker's value
    with hive.Engine(workers=1, store_bytes=16 << 20) as engine:
        local_modes(engine)


def local_modes(engine):
    built = []

    def make():
        built.append(len(built) + 1)
        return {"id": built[-1], "n": 0}

    def step(local):
        v = local.get()
        v["n"] += 1
        return (v["id"], v["n"])

    task = engine.remote(step)
    keep = engine.local(make, "keep")
    assert [task(keep).get() for _ in range(3)] == [(1, 1), (1, 2), (1, 3)]
    rebuild = engine.local(make)
    assert [task(rebuild).get()[1] for _ in range(3)] == [1, 1, 1]
    def broken():
        raise RuntimeError("no simulator here")

    bad = engine.local(broken)
    with pytest.raises(hive.TaskFailed):         # the task's local.get() raised hive.Error
        task(bad).get()
    with pytest.raises(hive.Error):              # outside tasks: this thread's value, same init
        bad.get()
    with pytest.raises(TypeError):
        engine.local(42)
    with pytest.raises(TypeError):
        engine.local(make, "sometimes")


def test_cartpole_learner_solves():
    out = run_example("cartpole_learner.py", "--check", "--seconds", "60", timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "steps/s" in out.stdout and "solved in" in out.stdout
