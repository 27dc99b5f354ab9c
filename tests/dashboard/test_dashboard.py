"""tools/hive-dashboard tested as a person would use it.

A dashboard on a free loopback port watches a statistics directory of its
own. Into it go: nothing (the page says so), garbage and the file of a dead
process (ignored), a hand-written engine carrying every key the engines
publish (all of it rendered; it exits while a browser watches it), and the
RL demo with statistics on (its numbers move; the page in headless Chromium
has its worker rows and charts, and a screenshot that is not blank; killed,
its file stays behind and is ignored; a short run exits cleanly and leaves
its timeline). The browser parts are skipped when Chromium is missing.

    /usr/bin/python3 -m pytest tests/dashboard      (tools/dashboard-check.sh)
Environment: HIVE_BUILD (default build) for the demo, HIVE_DASH_OUT for
the screenshots (default $HIVE_BUILD/dashboard).
"""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOL = os.path.join(ROOT, "tools", "hive-dashboard")
BUILD = os.path.join(ROOT, os.environ.get("HIVE_BUILD", "build"))
DEMO = os.path.join(BUILD, "examples", "rl_sampling")
OUT = os.environ.get("HIVE_DASH_OUT", os.path.join(BUILD, "dashboard"))
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_browser = pytest.mark.skipif(CHROMIUM is None, reason="no chromium (tools/deps.sh test)")


def wait_for(pred, what, timeout=60.0):
    """Poll pred until it returns something true; fail saying what."""
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > deadline:
            pytest.fail("gave up waiting for %s" % what)
        time.sleep(0.1)


class Dashboard:
    """hive-dashboard on a free port, its request log kept."""

    def __init__(self, stats_dir):
        self.proc = subprocess.Popen(
            ["/usr/bin/python3", TOOL, "--port", "0", "--dir", stats_dir, "--interval", "0.25",
             "--verbose"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        m = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
        assert m, "hive-dashboard did not start: %r" % line
        self.base = "http://127.0.0.1:%s" % m.group(1)
        self.log = []
        threading.Thread(target=self._read_log, daemon=True).start()

    def _read_log(self):
        for line in self.proc.stderr:
            self.log.append(line)

    def get(self, path):
        """(status, JSON body) of a GET."""
        try:
            with urllib.request.urlopen(self.base + path, timeout=30) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    def engine_ids(self):
        status, body = self.get("/api/engines")
        assert status == 200
        return [e["id"] for e in body["engines"]]


@pytest.fixture(scope="module")
def stats_dir():
    d = tempfile.mkdtemp(prefix="hive-dash-test-")
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="module")
def dash(stats_dir):
    d = Dashboard(stats_dir)
    yield d
    alive = d.proc.poll() is None
    d.proc.terminate()
    d.proc.wait(10)
    assert alive, "hive-dashboard died: %s" % "".join(d.log[-20:])


def browse(url, screenshot=None, budget_ms=6000):
    """The page's DOM after budget_ms of (virtual) time in headless Chromium,
    or with screenshot, the PNG written there."""
    with tempfile.TemporaryDirectory(prefix="hive-dash-chromium-") as profile:
        cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
               "--hide-scrollbars",
               "--user-data-dir=" + profile, "--window-size=1400,1500",
               "--virtual-time-budget=%d" % budget_ms]
        cmd += ["--screenshot=" + screenshot] if screenshot else ["--dump-dom"]
        r = subprocess.run(cmd + [url], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                           text=True, timeout=300)
    assert r.returncode == 0, "chromium failed on %s" % url
    return r.stdout


def body_attr(dom, name):
    m = re.search(r"<body[^>]*\bdata-%s=\"([^\"]*)\"" % name, dom)
    return m.group(1) if m else None


def distinct_colours(png):
    import matplotlib.image
    import numpy
    img = matplotlib.image.imread(png)
    return len(numpy.unique(img.reshape(-1, img.shape[-1]), axis=0))


# ------------------------------------------------------------ a hand-written engine

def snapshot(pid, step):
    """A statistics page as src/publish.c writes it, with the keys added
    since (actors_top, replay, envpools, size_classes, store high-water)."""
    workers = [{"index": i, "node": i % 2, "core": i, "pu": i, "tasks": 100 * step * (i + 1),
                "methods": 10 * step, "jobs": 0, "steals": step * i, "stolen": 0, "parks": step,
                "wakes": step, "busy_ns": 7000000 * step * (i + 1), "idle_ns": 3000000 * step,
                "help_depth_max": 0} for i in range(3)]
    return {"pid": pid, "program": "fake_engine", "time": time.time(), "workers_n": 3, "nodes": 2,
            "queued": [step % 3, step % 5, 0],
            "actors": {"created": 4, "alive": 3, "dead": 1, "restarting": 1, "restarts": 2},
            "actors_top": [{"id": "0x10", "class": "CartPoleEnv", "name": "env-0",
                            "mailbox": 12, "state": "alive"},
                           {"id": "0x11", "class": "Learner", "name": "", "mailbox": 3,
                            "state": "restarting"}],
            "store": {"capacity": 64 << 20, "used": (1 << 20) * (1 + step % 7), "objects": step,
                      "resident": 8 << 20, "used_high": 8 << 20, "efull": 0},
            "size_classes": [{"size": 64, "bytes": 6400, "objects": 100}],
            "replay": [{"id": 0, "capacity": 10000, "size": min(50 * step, 10000),
                        "inserts": 50 * step, "samples": 20 * step, "limiter_waits": 0}],
            "envpools": [{"id": 0, "num_envs": 8, "steps": 400 * step}],
            "trace": {"events": 0, "dropped": 0}, "workers": workers}


def publish(path, snap):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(snap, f)
    os.rename(tmp, path)


class FakeEngine:
    """A live process (sleep) and a statistics file in its name, rewritten
    every 100 ms as an engine would."""

    def __init__(self, stats_dir):
        self.proc = subprocess.Popen(["sleep", "600"])
        self.id = "hive-%d-0" % self.proc.pid
        self.path = os.path.join(stats_dir, self.id + ".json")
        self.stop = threading.Event()
        publish(self.path, snapshot(self.proc.pid, 1))
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        step = 1
        while not self.stop.wait(0.1):
            step += 1
            publish(self.path, snapshot(self.proc.pid, step))

    def exit(self):
        """What hive_shutdown does: the file goes, then the process."""
        self.stop.set()
        self.thread.join()
        os.unlink(self.path)
        self.proc.kill()
        self.proc.wait()


# ------------------------------------------------------------ the tests

def test_no_engines(dash):
    assert dash.engine_ids() == []
    if CHROMIUM:
        dom = browse(dash.base + "/")
        assert "no hive engines running" in dom
        assert body_attr(dom, "engines") == "0"


def test_bad_requests_get_json_errors(dash):
    for path, code in [("/api/engine/hive-1-1", 404), ("/api/engine/nonsense", 404),
                       ("/api/engine/hive-1-1?since=x", 400), ("/nope", 404),
                       ("/static/../../etc/passwd", 404), ("/trace/hive-1-1", 404),
                       ("/api/engine/%00%ff", 404), ("/engine/a/b", 404)]:
        status, body = dash.get(path)
        assert (status, "error" in body) == (code, True), path
    assert dash.engine_ids() == []              # still answering


def test_stale_and_garbage_files_ignored(dash, stats_dir):
    dead = subprocess.Popen(["true"])
    dead.wait()                                 # a pid that no longer runs
    me = os.getpid()
    files = {"hive-%d-0.json" % dead.pid: json.dumps(snapshot(dead.pid, 1)),
             "hive-%d-1.json" % me: "{not json",
             "hive-%d-2.json" % me: json.dumps(snapshot(me, 1))[:200],       # half a file
             "hive-%d-3.json" % me: "[]",
             "hive-%d-4.json" % me: json.dumps(dict(snapshot(me, 1), time="soon")),
             "hive-%d-5.json" % me: json.dumps(snapshot(me, 1)).replace('"time": ', '"time": NaN, "t": '),
             "hive-%d-6.json" % me: json.dumps(snapshot(dead.pid, 1)),        # not its pid
             "hive-%d-7.json" % me: json.dumps(dict(snapshot(me, 1), workers=[1, 2])),
             "hive-%d-8.json" % me: "[" * 100000,                             # too deep
             "hive-%d-9.json" % me: json.dumps(snapshot(me, 1)).replace('"time": ', '"time": 1e400, "t": '),
             "hive-%d.json" % me: json.dumps(snapshot(me, 1)),                # not an engine's name
             "hive-%d-10.json.tmp" % me: json.dumps(snapshot(me, 1))}
    for name, text in files.items():
        with open(os.path.join(stats_dir, name), "w") as f:
            f.write(text)
    live = FakeEngine(stats_dir)                # the scan has run once it shows up
    try:
        wait_for(lambda: live.id in dash.engine_ids(), "the live engine to be listed")
        time.sleep(0.6)                         # and a couple more scans
        assert dash.engine_ids() == [live.id]
    finally:
        live.exit()
        for name in files:
            os.unlink(os.path.join(stats_dir, name))
    wait_for(lambda: dash.engine_ids() == [], "the engine to go")


def test_every_key_rendered_and_exit_while_watched(dash, stats_dir):
    fake = FakeEngine(stats_dir)
    try:
        def rates():
            status, d = dash.get("/api/engine/" + fake.id)
            return status == 200 and d["history"] and d["history"][-1]["replay"].get("0")
        wait_for(lambda: (rates() or {}).get("inserts_s", 0) > 0, "replay rates")
        r = rates()
        assert r["capacity"] == 10000 and r["samples_s"] > 0
        _, d = dash.get("/api/engine/" + fake.id)
        assert d["history"][-1]["envpools"]["0"]["steps_s"] > 0
        assert 0 < d["history"][-1]["workers"][0]["util"] < 1
        if not CHROMIUM:
            return
        dom = browse(dash.base + "/engine/" + fake.id)
        assert int(body_attr(dom, "charts") or 0) >= 7        # + replay and env pool charts
        assert len(re.findall(r'class="worker-row"', dom)) == 3
        assert len(re.findall(r'class="actor-row"', dom)) == 2
        assert "CartPoleEnv" in dom and "state-restarting" in dom
        assert "HIVE_EFULL refusals" in dom and 'id="replay-body"><table>' in dom
        assert 'id="envpools-body"><table>' in dom and 'id="sizes-body"><table>' in dom
        # watched: the page polls; after its third request the engine exits
        asked = "GET /api/engine/%s" % fake.id
        before = sum(asked in line for line in dash.log)
        page = {}
        t = threading.Thread(target=lambda: page.update(
            dom=browse(dash.base + "/engine/" + fake.id, budget_ms=3600 * 1000)))
        t.start()
        wait_for(lambda: sum(asked in line for line in dash.log) >= before + 3,
                 "the page to poll", timeout=300)
        fake.exit()
        t.join()
        assert body_attr(page["dom"], "seen") == "1"          # it was shown live,
        assert body_attr(page["dom"], "gone") == "1"          # then went
        assert "is not running" in page["dom"]
    finally:
        if fake.proc.poll() is None:
            fake.exit()
    wait_for(lambda: fake.id not in dash.engine_ids(), "the engine to go")


def demo_env(stats_dir, **extra):
    env = dict(os.environ, HIVE_STATS="1", HIVE_STATS_DIR=stats_dir, **extra)
    env.pop("HIVE_TRACE", None)
    env.update(extra)
    return env


def test_demo_live(dash, stats_dir):
    demo = subprocess.Popen([DEMO, "--duration", "3600", "--baseline", "0.1", "--buffer", "20000"],
                            env=demo_env(stats_dir), stdout=subprocess.DEVNULL)
    # the demo may make more than one engine (a calibration first, then a
    # round's): watch the newest that lives long enough to be sampled
    prefix = "hive-%d-" % demo.pid
    eid = None

    def history_of(e, n):
        status, d = dash.get("/api/engine/" + e)
        return d if status == 200 and len(d["history"]) >= n else None
    try:
        def newest():
            ids = [e for e in dash.engine_ids() if e.startswith(prefix)]
            return max(ids, key=lambda e: int(e.rsplit("-", 1)[1])) if ids else None
        # work done: jobs run, transitions inserted, env steps (the demo's
        # sampler and learner may each sit in one long method for seconds)
        ops = lambda d: (sum(w["tasks"] + w["methods"] + w.get("jobs", 0)
                             for w in d["snapshot"]["workers"]) +
                         sum(r.get("inserts", 0) for r in d["snapshot"].get("replay", [])) +
                         sum(p.get("steps", 0) for p in d["snapshot"].get("envpools", [])))
        # follow the newest engine with two samples: a short-lived one (the
        # calibration's, slow on a busy machine) may be seen first and go
        first = second = None
        deadline = time.monotonic() + 120
        while second is None and time.monotonic() < deadline:
            e = newest()
            d = history_of(e, 2) if e else None
            if d is not None and e != eid:
                eid, first = e, d
            elif d is not None and ops(d) > ops(first):
                second = d
            time.sleep(0.2)
        assert second is not None, "the demo's counts never moved (engine %s)" % eid
        path = os.path.join(stats_dir, eid + ".json")
        assert second["history"][-1]["t"] > first["history"][-1]["t"]
        assert all(0 <= w["util"] <= 1 for s in second["history"] for w in s["workers"])
        assert second["snapshot"]["program"] == "rl_sampling"
        since = second["history"][-1]["t"]
        later = wait_for(lambda: dash.get("/api/engine/%s?since=%r" % (eid, since))[1]["history"],
                         "samples after ?since")
        assert all(s["t"] > since for s in later)
        if CHROMIUM:
            os.makedirs(OUT, exist_ok=True)
            dom = browse(dash.base + "/engine/" + eid)
            assert int(body_attr(dom, "charts") or 0) >= 5
            nw = second["snapshot"]["workers_n"]
            assert len(re.findall(r'class="worker-row"', dom)) == nw
            assert len(re.findall(r"<canvas", dom)) >= 5
            png = os.path.join(OUT, "engine.png")
            browse(dash.base + "/engine/" + eid, screenshot=png)
            assert distinct_colours(png) > 50, "the screenshot looks blank"
            index = browse(dash.base + "/")
            assert eid in index and body_attr(index, "engines") == "1"
    finally:
        demo.send_signal(signal.SIGKILL)        # a crash: its file stays behind
        demo.wait()
    assert eid is not None and os.path.exists(path)
    wait_for(lambda: eid not in dash.engine_ids(), "the dead demo's file to be ignored")
    os.unlink(path)


def test_demo_exits_and_leaves_its_timeline(dash, stats_dir):
    trace = os.path.join(stats_dir, "..", os.path.basename(stats_dir) + "-trace.json")
    demo = subprocess.Popen([DEMO, "--rounds", "1", "--duration", "2", "--baseline", "0.1",
                             "--buffer", "20000"],
                            env=demo_env(stats_dir, HIVE_TRACE=trace), stdout=subprocess.DEVNULL)
    eid = "hive-%d-0" % demo.pid
    try:
        wait_for(lambda: eid in dash.engine_ids(), "the demo to be listed")
        _, d = dash.get("/api/engine/" + eid)
        assert d["summary"]["trace_path"] == os.path.realpath(trace)
        assert demo.wait(300) == 0
        wait_for(lambda: eid not in dash.engine_ids(), "the demo to go when it exits")
        assert dash.get("/api/engine/" + eid)[0] == 404
        _, index = dash.get("/api/engines")
        # every engine of the demo (calibration, rounds) wrote the same path
        assert eid in [t["id"] for t in index["exited_traces"] if t["ready"]]
        with urllib.request.urlopen(dash.base + "/trace/" + eid, timeout=60) as r:
            assert "traceEvents" in json.loads(r.read())
        if CHROMIUM:
            dom = browse(dash.base + "/")
            assert "Timelines of engines that exited" in dom and "/trace/" + eid in dom
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.wait()
        if os.path.exists(trace):
            os.unlink(trace)


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
