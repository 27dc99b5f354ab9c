#!/usr/bin/python3
"""bench-report.py JSON OUTDIR - turn one `make bench` run into OUTDIR/REPORT.md
and one PNG chart per family group (queue, store, tasks, actors, replay, scale).

Reads Google Benchmark's JSON (bench/results/hive-bench.json). A benchmark is
named "<family>/<impl>[/<rest>]": rows with the same family and rest are
compared, hive against every other impl of that row (the peers, all measured
in the same run). The ratio is hive's speed over the peer's (> 1: hive is
faster). Some rows also carry:
  - the machine's limit measured in the same run (bench/bench_limits.c), as
    limit / hive (1.0 would be hive at the machine's floor);
  - Ray's published figure for the rows that carry a Ray microbenchmark
    name (Ray 2.48 on m5.16xlarge, from Ray's release notes; quoted, not
    re-run), as hive / Ray.
Needs matplotlib (Debian: python3-matplotlib) for the charts; without it the
report is still written, with a note instead of the pictures.
"""
import json
import os
import sys

# Ray 2.48 microbenchmark, m5.16xlarge (published figures, per second)
RAY = {
    "single_client_tasks_sync": (980.7, "tasks_sync"),
    "single_client_tasks_async": (8040.0, "tasks_async"),
    "1_1_actor_calls_sync": (2012.0, "1_1_actor_calls_sync"),
    "1_1_actor_calls_async": (8664.0, "1_1_actor_calls_async"),
    "n_n_actor_calls_async": (27376.0, "n_n_actor_calls_async"),
    "single_client_get_calls": (10620.0, "get_calls"),
    "single_client_put_calls": (5173.0, "put_calls"),
    "single_client_put_gigabytes": (19.86e9, "put_gigabytes (bytes/s)"),
}

# rows whose floor is a round trip between two threads, or (scale_get) one
# random load from memory of the footprint of hive's records, measured at
# the same size (a limit row with the same rest, e.g. objects:N)
LIMIT_OF = {
    "single_client_tasks_sync": "roundtrip/cacheline",
    "1_1_actor_calls_sync": "roundtrip/cacheline",
    "actor_pingpong": "roundtrip/cacheline",
    "scale_get": "scale_limit/load",
}

GROUPS = [  # first match wins: scale rows also contain "get", "put", "actor"
    ("limits", lambda f: f.startswith("roundtrip") or f == "scale_limit"),
    ("scale", lambda f: f.startswith("scale")),
    ("queue", lambda f: f.startswith("mpsc")),
    ("store", lambda f: any(k in f for k in ("put", "get", "lookup", "create"))),
    ("tasks", lambda f: "task" in f or f in ("fib30", "spawn_wait")),
    ("actors", lambda f: "actor" in f),
    ("replay", lambda f: f.startswith("replay")),
    ("envpool", lambda f: f.startswith("envpool")),
]


def group_of(family):
    for name, test in GROUPS:
        if test(family):
            return name
    return "other"


def parse(name):
    parts = name.split("/")
    family, impl = parts[0], parts[1] if len(parts) > 1 else "?"
    rest = [p for p in parts[2:] if not p.startswith("iterations:")
            and p not in ("manual_time", "real_time", "process_time")]
    return family, impl, "/".join(rest)


def to_ns(v, unit):
    return v * {"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9}[unit]


class Fig:
    """One impl's figure for a row: a rate (items or bytes per second)
    when the benchmark counted items, else the time per iteration."""

    def __init__(self, b):
        self.error = bool(b.get("error_occurred"))
        self.ns = to_ns(b.get("real_time", 0.0), b.get("time_unit", "ns"))
        # item_ns: the time of one item (a round trip, a task, a call),
        # which is what the cell shows and the limit is set against; an
        # iteration may hold many items (actor_pingpong: 1000 round trips,
        # so its iteration takes ms while a round trip takes ns)
        self.item_ns = self.ns
        if "bytes_per_second" in b:
            self.rate, self.unit = b["bytes_per_second"], "B/s"
        elif "items_per_second" in b:
            self.rate, self.unit = b["items_per_second"], "/s"
            if self.rate > 0:
                self.item_ns = 1e9 / self.rate
        else:
            self.rate, self.unit = (1e9 / self.ns if self.ns > 0 else 0.0), "/s (1/time)"
        # the rate over wall time: Google Benchmark divides a row's items by
        # its CPU time unless the row is timed by the wall or by hand, and
        # a row of N threads sums their CPU seconds
        self.wall_rate = self.rate
        timed = any(t in b.get("name", "") for t in ("/real_time", "/manual_time"))
        cpu = to_ns(b.get("cpu_time", 0.0), b.get("time_unit", "ns"))
        if not timed and self.unit != "/s (1/time)" and self.ns > 0:
            self.wall_rate = self.rate * cpu / self.ns
        self.extra = ", ".join("%s %.4g" % (c, b[c]) for c in ("bytes_per_item", "shutdown_s")
                               if c in b)

    def show(self):
        if self.error:
            return "error"
        if self.unit == "/s":          # a count of items: the time of one
            out = "%s (%s each)" % (human(self.rate, self.unit), human_ns(self.item_ns))
        else:
            out = "%s (%s)" % (human(self.rate, self.unit), human_ns(self.ns))
        return out + ("; " + self.extra if self.extra else "")


def human(v, unit):
    for div, suf in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if v >= div:
            return "%.3g %s%s" % (v / div, suf, unit)
    return "%.3g %s" % (v, unit)


def human_ns(ns):
    for div, suf in ((1e9, "s"), (1e6, "ms"), (1e3, "µs")):
        if ns >= div:
            return "%.3g %s" % (ns / div, suf)
    return "%.3g ns" % ns


def load(path):
    with open(path) as f:
        d = json.load(f)
    rows, order = {}, []
    for b in d["benchmarks"]:
        if b.get("run_type") == "aggregate" and b.get("aggregate_name") != "median":
            continue
        family, impl, rest = parse(b.get("run_name", b["name"]))
        key = (family, rest)
        if key not in rows:
            rows[key] = {}
            order.append(key)
        rows[key][impl] = Fig(b)
    return d.get("context", {}), rows, order


def limit_fig(rows, family, rest=""):
    """The limit row measured for family's row rest (the limit's own row of
    the same rest, else its only row), or None."""
    if family not in LIMIT_OF:
        return None
    lfam, limpl = LIMIT_OF[family].split("/", 1)
    f = rows.get((lfam, rest), {}).get(limpl) or rows.get((lfam, ""), {}).get(limpl)
    return f if f is not None and not f.error else None


def ratio(h, p):
    if h.error or p.error or p.rate <= 0:
        return None
    return h.rate / p.rate


def report(ctx, rows, order, outdir, charts):
    lines = ["# hive benchmark report", ""]
    lines.append("One `make bench` run; every peer and limit was measured in the same process and run.")
    lines.append("")
    lines.append("- machine: %s, %s CPUs at %s MHz; load average at start %s" % (
        ctx.get("host_name", "?"), ctx.get("num_cpus", "?"), ctx.get("mhz_per_cpu", "?"),
        ", ".join("%.2f" % x for x in ctx.get("load_avg", []))))
    lines.append("- date: %s" % ctx.get("date", "?"))
    lines.append("- ratio = hive's speed / the peer's (> 1: hive is faster); limit = the machine's floor "
                 "measured in the same run / hive (1.0: hive at the floor); Ray = hive / Ray 2.48's "
                 "published figure (m5.16xlarge, quoted from Ray's release notes, not re-run).")
    lines.append("")
    for gname, _ in GROUPS + [("other", None)]:
        keys = [k for k in order if group_of(k[0]) == gname]
        if not keys:
            continue
        lines.append("## %s" % gname)
        lines.append("")
        if gname in charts:
            lines.append("![%s](%s)" % (gname, charts[gname]))
            lines.append("")
        lines.append("| row | hive | peer | peer figure | ratio | limit | Ray (published) |")
        lines.append("|---|---|---|---|---|---|---|")
        for key in keys:
            impls = rows[key]
            row = key[0] + ("/" + key[1] if key[1] else "")
            h = impls.get("hive")
            lim = ""
            lfig = limit_fig(rows, key[0], key[1])
            if h is not None and lfig is not None and not h.error and h.item_ns > 0:
                lim = "%.2f (%s: %s)" % (lfig.item_ns / h.item_ns, LIMIT_OF[key[0]],
                                         human_ns(lfig.item_ns))
            ray = ""
            if h is not None and key[0] in RAY and not h.error:
                rv, rname = RAY[key[0]]
                ray = "%s: %s → %.3g×" % (rname, human(rv, h.unit.split(" ")[0]), h.rate / rv)
            peers = [i for i in impls if i != "hive"]
            if h is None:
                for p in peers:
                    lines.append("| %s | — | %s | %s | — | | |" % (row, p, impls[p].show()))
                continue
            if not peers:
                lines.append("| %s | %s | — | — | — | %s | %s |" % (row, h.show(), lim, ray))
            for i, p in enumerate(peers):
                r = ratio(h, impls[p])
                lines.append("| %s | %s | %s | %s | %s | %s | %s |" % (
                    row if i == 0 else "", h.show() if i == 0 else "", p, impls[p].show(),
                    "**%.2f**" % r if r is not None else "—", lim if i == 0 else "",
                    ray if i == 0 else ""))
        lines.append("")
    lines += scaling(rows, order)
    with open(os.path.join(outdir, "REPORT.md"), "w") as f:
        f.write("\n".join(lines))


# multi-thread families and the one-thread family they scale from (same
# body, same items per iteration)
ONE_THREAD_OF = {"multi_client": "single_client", "n_n_actor": "1_1_actor"}


def one_thread_row(fam, rest):
    for many, one in ONE_THREAD_OF.items():
        if fam.startswith(many):
            fam = fam.replace(many, one, 1)
            break
    return fam, "/".join(p for p in rest.split("/") if not p.startswith("threads:"))


def speedup(many, one):
    """Calls all threads finish per wall second over one thread's, so the
    time a peer's or hive's other threads take counts, and a row that
    scales perfectly on N idle cores reads N."""
    if many is None or one is None or many.error or one.error or one.wall_rate <= 0:
        return None
    return many.wall_rate / one.wall_rate


def scaling(rows, order):
    """Multi-thread rows beside their one-thread row: hive's speedup, and
    the same speedup of each peer measured in the same run (for a peer that
    shares nothing, such as memcpy into a thread's own buffer, it is the
    machine's: what two cores give two independent loops)."""
    out = []
    for fam, rest in order:
        h = rows[(fam, rest)].get("hive")
        if h is None or h.error or "threads:" not in rest:
            continue
        key1 = one_thread_row(fam, rest)
        if key1 == (fam, rest) or key1 not in rows:
            continue
        s = speedup(h, rows[key1].get("hive"))
        if s is None:
            continue
        threads = [p for p in rest.split("/") if p.startswith("threads:")][0].split(":")[1]
        peers = []
        for impl, f in rows[(fam, rest)].items():
            ps = speedup(f, rows[key1].get(impl)) if impl != "hive" else None
            if ps is not None:
                peers.append("%s %.2f" % (impl, ps))
        out.append("| %s/%s | %s | %s | **%.2f** | %s |" % (
            fam, rest, threads, human(h.wall_rate, h.unit), s, ", ".join(peers) if peers else "—"))
    if not out:
        return []
    return ["## multi-thread scaling", "",
            "hive's rows with several client threads against the same row on one thread: the "
            "speedup is the calls all threads finish per wall second over one thread's "
            "(a row that scales perfectly on N idle cores reads N). Beside it, the same speedup "
            "of the row's peers in the same run; for memcpy into each thread's own buffer it is "
            "what this machine gives two loops that share nothing.", "",
            "| row | threads | all threads | speedup | peers' speedup |",
            "|---|---|---|---|---|"] + out + [""]


def draw(rows, order, outdir):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return {}
    charts = {}
    for gname, _ in GROUPS:
        keys = [k for k in order if group_of(k[0]) == gname]
        if not keys:
            continue
        if gname == "scale":
            charts[gname] = draw_scale(plt, rows, keys, outdir)
            continue
        impls = []
        for k in keys:
            for i in rows[k]:
                if i not in impls:
                    impls.append(i)
        impls.sort(key=lambda i: (i != "hive", i))
        if any(limit_fig(rows, k[0]) is not None for k in keys):
            impls.append("limit")
        labels = [k[0] + ("/" + k[1] if k[1] else "") for k in keys]
        height = 0.8 / max(len(impls), 1)
        fig, ax = plt.subplots(figsize=(10, 0.5 + 0.45 * len(keys) * max(1, len(impls) / 2)))
        for j, impl in enumerate(impls):
            ys, xs = [], []
            for y, k in enumerate(keys):
                f = rows[k].get(impl) if impl != "limit" else limit_fig(rows, k[0], k[1])
                if f is not None and not f.error and f.rate > 0:
                    ys.append(y + j * height)
                    xs.append(f.rate)
            ax.barh(ys, xs, height=height, label=impl)
        ax.set_yticks([y + 0.4 - height / 2 for y in range(len(keys))])
        ax.set_yticklabels(labels, fontsize=8)
        ax.invert_yaxis()
        ax.set_xscale("log")
        ax.set_xlabel("operations (or bytes) per second, log scale: longer is faster")
        ax.set_title("hive vs peers: %s" % gname)
        ax.legend(fontsize=8, loc="lower right")
        ax.grid(axis="x", which="both", alpha=0.3)
        fig.tight_layout()
        name = "%s.png" % gname
        fig.savefig(os.path.join(outdir, name), dpi=90)
        plt.close(fig)
        charts[gname] = name
    return charts


def draw_scale(plt, rows, keys, outdir):
    """Cost per operation against the work held, log-log: one line per
    family (a flat line is the goal)."""
    fig, ax = plt.subplots(figsize=(8, 5))
    fams = []
    for k in keys:
        if k[0] not in fams and k[0] != "scale_all":   # scale_all: one whole run, not per operation
            fams.append(k[0])
    for fam in fams:
        pts = []
        for k in keys:
            f = rows[k].get("hive")
            if k[0] != fam or f is None or f.error or ":" not in k[1]:
                continue
            pts.append((float(k[1].split(":")[1]), f.ns))
        pts.sort()
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=fam)
        lim = [(float(k[1].split(":")[1]), limit_fig(rows, fam, k[1])) for k in keys
               if k[0] == fam and ":" in k[1]]
        lim = sorted((x, f.ns) for x, f in lim if f is not None)
        if lim:
            ax.plot([p[0] for p in lim], [p[1] for p in lim], linestyle="--", marker=".",
                    label="%s limit (%s)" % (fam, LIMIT_OF[fam]))
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("work held (live objects, queued tasks, actors)")
    ax.set_ylabel("ns per operation (log)")
    ax.set_title("hive: cost against the work held (flat is the goal)")
    ax.legend(fontsize=8)
    ax.grid(which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(os.path.join(outdir, "scale.png"), dpi=90)
    plt.close(fig)
    return "scale.png"


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: bench-report.py JSON OUTDIR")
    ctx, rows, order = load(sys.argv[1])
    charts = draw(rows, order, sys.argv[2])
    report(ctx, rows, order, sys.argv[2], charts)
    print("bench: wrote %s/REPORT.md and %d charts" % (sys.argv[2], len(charts)))


if __name__ == "__main__":
    main()
