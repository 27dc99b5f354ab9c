"""env_per_worker.py - the seeds' per-worker environment, from Python: an
expensive object built once on each worker and reused by the tasks that
run there (examples/env_per_worker.c in Python). engine.local(init,
reinit, fini) is a worker-local value (hive_local); reinit says what
happens to it between two tasks on the same worker:

    rebuild each time  reinit=None: fini, then init again
    a custom reset     reinit=reset: the same env, its counter back to 0
    keep as is         reinit="keep": the same env, untouched

Each mode runs four tasks one after the other on one worker; each reads
the env's counter and steps it once. Prints what the C example prints:

    PYTHONPATH=build/python /usr/bin/python3 examples/python/env_per_worker.py
"""
import hive

TASKS = 4
builds = 0


class Env:
    def __init__(self):
        global builds
        builds += 1
        self.id, self.counter = builds, 0
        print(f"Making new env (env {self.id})", flush=True)


def reset(env):
    print(f"Resetting env {env.id}", flush=True)
    env.counter = 0


def rollout(local):
    env = local.get()
    seen = (env.id, env.counter)
    env.counter += 1
    return seen


def run_mode(eng, title, reinit):
    print(title, flush=True)
    local = eng.local(Env, reinit)
    task = eng.remote(rollout)
    for t in range(TASKS):
        env_id, counter = task(local).get()
        print(f"  task {t}: env {env_id}, counter {counter}", flush=True)


def main():
    with hive.Engine(workers=1, store_bytes=64 << 20) as eng:
        run_mode(eng, "rebuild each time (reinit = NULL):", None)
        run_mode(eng, "a custom reset (reinit = env_reset):", reset)
        run_mode(eng, "keep as is (reinit = hive_local_keep):", "keep")
    print(f"envs built: {builds}")


if __name__ == "__main__":
    main()
