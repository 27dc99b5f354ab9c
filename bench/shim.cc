/*
 * shim.cc - the C API of shim.h over Google Benchmark (1.7), and main().
 *
 * hb_state is a benchmark::State seen through an opaque pointer; every hb_
 * call is one forward to the State method of the same meaning.
 *
 * main() runs the registered benchmarks with a display reporter that
 * forwards everything to the library's usual one (console unless
 * --benchmark_format says otherwise) and keeps a copy of each run. The file
 * reporter of --benchmark_out is left to the library, which makes one in the
 * --benchmark_out_format requested. After the run main() prints the ratio
 * table described in shim.h: to stdout under the console format, to stderr
 * otherwise so that a json or csv stdout stays machine-readable.
 */
#include "shim.h"

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <map>
#include <string>
#include <vector>

namespace {

benchmark::State &st(hb_state *s)
{
    return *reinterpret_cast<benchmark::State *>(s);
}

} // namespace

extern "C" {

int hb_keep_running(hb_state *s) { return st(s).KeepRunning() ? 1 : 0; }
void hb_pause(hb_state *s) { st(s).PauseTiming(); }
void hb_resume(hb_state *s) { st(s).ResumeTiming(); }
void hb_set_iteration_time(hb_state *s, double seconds) { st(s).SetIterationTime(seconds); }
void hb_set_items_processed(hb_state *s, int64_t n) { st(s).SetItemsProcessed(n); }
void hb_set_bytes_processed(hb_state *s, int64_t n) { st(s).SetBytesProcessed(n); }
int hb_threads(hb_state *s) { return st(s).threads(); }
int hb_thread_index(hb_state *s) { return st(s).thread_index(); }
int64_t hb_range(hb_state *s, int i) { return st(s).range(static_cast<std::size_t>(i)); }
int64_t hb_iterations(hb_state *s) { return st(s).max_iterations; }
void hb_set_label(hb_state *s, const char *label) { st(s).SetLabel(label); }
void hb_skip_with_error(hb_state *s, const char *msg) { st(s).SkipWithError(msg); }

void hb_counter(hb_state *s, const char *name, double value, int flags)
{
    int f = benchmark::Counter::kDefaults;
    if (flags & HB_RATE)
        f |= benchmark::Counter::kIsRate;
    if (flags & HB_AVG_THREADS)
        f |= benchmark::Counter::kAvgThreads;
    st(s).counters[name] = benchmark::Counter(value, static_cast<benchmark::Counter::Flags>(f));
}

void hb_register(const hb_bench *table, size_t n)
{
    static const benchmark::TimeUnit units[] = {benchmark::kNanosecond, benchmark::kMicrosecond,
                                                benchmark::kMillisecond};
    for (size_t i = 0; i < n; i++) {
        const hb_bench &b = table[i];
        hb_fn fn = b.fn;
        benchmark::internal::Benchmark *r = benchmark::RegisterBenchmark(
            b.name, [fn](benchmark::State &s) { fn(reinterpret_cast<hb_state *>(&s)); });
        if (b.threads > 1)
            r->Threads(b.threads);
        /* A row of several threads is timed by the wall clock: with CPU time
         * the library divides the items by the threads' summed CPU seconds,
         * a rate per CPU that stays flat for a row that scales perfectly
         * (8-byte memcpy on 2 threads read 0.78 of its 1-thread rate), and
         * leaves out whatever the row's other threads (workers, the call_rcu
         * thread, a peer's scheduler) spend. Wall time counts the calls all
         * the threads finish per second. */
        if (b.use_manual_time)
            r->UseManualTime();
        else if (b.threads > 1)
            r->UseRealTime();
        for (int a = 0; a < b.nargs; a++)
            r->Arg(b.args[a]);
        if (b.arg_name != nullptr)
            r->ArgName(b.arg_name);
        if (b.unit >= HB_NS && b.unit <= HB_MS)
            r->Unit(units[b.unit]);
        if (b.iterations > 0)
            r->Iterations(b.iterations);
    }
}

} // extern "C"

namespace {

using Run = benchmark::BenchmarkReporter::Run;

/* The display reporter: the library's own, plus a copy of every run. */
class Collector : public benchmark::BenchmarkReporter {
public:
    explicit Collector(benchmark::BenchmarkReporter *inner) : inner_(inner) {}

    bool ReportContext(const Context &c) override { return inner_->ReportContext(c); }
    void ReportRuns(const std::vector<Run> &r) override
    {
        inner_->ReportRuns(r);
        runs_.insert(runs_.end(), r.begin(), r.end());
    }
    void Finalize() override { inner_->Finalize(); }

    const std::vector<Run> &runs() const { return runs_; }

private:
    benchmark::BenchmarkReporter *inner_;   // owned by the library
    std::vector<Run> runs_;
};

/* One benchmark instance's figure for the ratio table. */
struct Figure {
    bool error = false;
    bool has_ips = false;
    double ips = 0;        // items per second
    double ns = 0;         // real (or manual) time per iteration, ns
    int nruns = 0;         // iteration runs averaged when there is no median
    bool median = false;
};

double to_ns(const Run &r)
{
    static const double per_unit[] = {1.0, 1e3, 1e6, 1e9};   // kNanosecond .. kSecond
    return r.GetAdjustedRealTime() * per_unit[r.time_unit];
}

void take(Figure &f, const Run &r)
{
    auto it = r.counters.find("items_per_second");
    f.has_ips = it != r.counters.end();
    f.ips = f.has_ips ? it->second.value : 0;
    f.ns = to_ns(r);
}

/* Split "family/impl/more" and the instance's arguments into three keys. */
struct Key {
    std::string family, impl, rest;
};

Key key_of(const Run &r)
{
    const std::string &fn = r.run_name.function_name;
    Key k;
    size_t a = fn.find('/');
    k.family = fn.substr(0, a);
    if (a != std::string::npos) {
        size_t b = fn.find('/', a + 1);
        k.impl = fn.substr(a + 1, b == std::string::npos ? std::string::npos : b - a - 1);
        if (b != std::string::npos)
            k.rest = fn.substr(b + 1);
    }
    for (const std::string *part : {&r.run_name.args, &r.run_name.threads}) {
        if (part->empty())
            continue;
        if (!k.rest.empty())
            k.rest += '/';
        k.rest += *part;
    }
    return k;
}

std::string show(const Figure &f, bool ips)
{
    char buf[64];
    if (f.error)
        return "error";
    if (ips) {
        double v = f.ips;
        const char *u = "";
        if (v >= 1e9) { v /= 1e9; u = "G"; }
        else if (v >= 1e6) { v /= 1e6; u = "M"; }
        else if (v >= 1e3) { v /= 1e3; u = "k"; }
        snprintf(buf, sizeof buf, "%.3g%s items/s", v, u);
    } else {
        double v = f.ns;
        const char *u = "ns";
        if (v >= 1e9) { v /= 1e9; u = "s"; }
        else if (v >= 1e6) { v /= 1e6; u = "ms"; }
        else if (v >= 1e4) { v /= 1e3; u = "us"; }
        snprintf(buf, sizeof buf, "%.4g %s", v, u);
    }
    return buf;
}

void print_ratios(const std::vector<Run> &runs, FILE *out)
{
    // Figures per group (family + rest) and impl, in the order first seen.
    std::vector<std::string> groups;
    std::map<std::string, Key> group_key;
    std::map<std::string, std::vector<std::string>> impls;   // group -> impls in order
    std::map<std::string, std::map<std::string, Figure>> fig;

    for (const Run &r : runs) {
        Key k = key_of(r);
        std::string g = k.family + '\x1f' + k.rest;
        if (group_key.emplace(g, k).second)
            groups.push_back(g);
        auto &byimpl = fig[g];
        if (byimpl.find(k.impl) == byimpl.end())
            impls[g].push_back(k.impl);
        Figure &f = byimpl[k.impl];
        if (r.error_occurred) {
            f.error = true;
            continue;
        }
        if (r.run_type == Run::RT_Aggregate) {
            if (r.aggregate_name == "median") {
                take(f, r);
                f.median = true;
            }
        } else if (!f.median) {
            // Several repetitions and no median reported: average them.
            Figure one;
            take(one, r);
            f.has_ips = one.has_ips;
            f.ips = (f.ips * f.nruns + one.ips) / (f.nruns + 1);
            f.ns = (f.ns * f.nruns + one.ns) / (f.nruns + 1);
            f.nruns++;
        }
    }

    struct Line {
        std::string family, rest, peer, hive, other, ratio;
    };
    std::vector<Line> lines;
    for (const std::string &g : groups) {
        auto &byimpl = fig[g];
        auto h = byimpl.find("hive");
        if (h == byimpl.end())
            continue;
        for (const std::string &impl : impls[g]) {
            if (impl == "hive")
                continue;
            const Figure &hf = h->second, &pf = byimpl[impl];
            // Compare items/s when both have it; a failed side shows "error".
            bool ips = (hf.error || hf.has_ips) && (pf.error || pf.has_ips);
            Line l{group_key[g].family, group_key[g].rest, impl, show(hf, ips), show(pf, ips), "-"};
            if (!hf.error && !pf.error) {
                double ratio = ips ? (pf.ips > 0 ? hf.ips / pf.ips : 0)
                                   : (hf.ns > 0 ? pf.ns / hf.ns : 0);
                char buf[32];
                snprintf(buf, sizeof buf, "%.2f", ratio);
                l.ratio = buf;
            }
            lines.push_back(l);
        }
    }
    if (lines.empty())
        return;

    lines.insert(lines.begin(), Line{"family", "rest", "peer", "hive", "peer figure", "ratio"});
    size_t w[5] = {0, 0, 0, 0, 0};
    for (const Line &l : lines) {
        w[0] = std::max(w[0], l.family.size());
        w[1] = std::max(w[1], l.rest.size());
        w[2] = std::max(w[2], l.peer.size());
        w[3] = std::max(w[3], l.hive.size());
        w[4] = std::max(w[4], l.other.size());
    }
    auto print = [&](const Line &l) {
        fprintf(out, "%-*s  %-*s  %-*s  %*s  %*s  %6s\n", (int)w[0], l.family.c_str(), (int)w[1],
                l.rest.c_str(), (int)w[2], l.peer.c_str(), (int)w[3], l.hive.c_str(), (int)w[4],
                l.other.c_str(), l.ratio.c_str());
    };
    size_t width = w[0] + w[1] + w[2] + w[3] + w[4] + 6 + 10;
    fprintf(out, "\n%s\n", std::string(width, '-').c_str());
    fprintf(out, "hive vs peers: ratio = hive speed / peer speed (> 1: hive is faster)\n");
    fprintf(out, "%s\n", std::string(width, '-').c_str());
    for (const Line &l : lines)
        print(l);
    fflush(out);
}

/* True unless --benchmark_format asks for something other than console. */
bool console_format(int argc, char **argv)
{
    static const char flag[] = "--benchmark_format=";
    bool console = true;
    for (int i = 1; i < argc; i++)
        if (strncmp(argv[i], flag, sizeof flag - 1) == 0)
            console = strcmp(argv[i] + sizeof flag - 1, "console") == 0;
    return console;
}

} // namespace

int main(int argc, char **argv)
{
    bool console = console_format(argc, argv);
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv))
        return 1;
    hb_register_all();

    Collector display(benchmark::CreateDefaultDisplayReporter());
    benchmark::RunSpecifiedBenchmarks(&display, nullptr);
    std::cout.flush();
    print_ratios(display.runs(), console ? stdout : stderr);
    benchmark::Shutdown();
    return 0;
}

/* ======================================================================
 * Peers with only a C++ API
 *
 * Intel TBB is a C++ template library with no C interface, and bench/ keeps
 * every benchmark in C against shim.h. Rather than a second C++ file, its
 * peer code lives here, at the end of the one C++ file, behind extern "C"
 * functions declared in shim.h. They do the same work as the hive side in
 * bench/bench_task.c, structure included, so the ratio table compares the
 * schedulers and not the algorithms.
 * ====================================================================== */

#include <tbb/task_group.h>

namespace {

/* Fork fib(n-1) and fib(n-2) as two tasks and join both, as the hive task
 * does with two hive_submit and two hive_get. */
uint64_t tbb_fib(int n, int cutoff)
{
    if (n < cutoff)
        return hb_fib_serial(n);   // bench_task.c's, the same code as the hive side
    uint64_t a = 0, b = 0;
    tbb::task_group g;
    g.run([&] { a = tbb_fib(n - 1, cutoff); });
    g.run([&] { b = tbb_fib(n - 2, cutoff); });
    g.wait();
    return a + b;
}

} // namespace

extern "C" {

uint64_t hb_tbb_fib(int n, int cutoff) { return tbb_fib(n, cutoff); }

void hb_tbb_spawn_wait(int n)
{
    tbb::task_group g;
    for (int i = 0; i < n; i++)
        g.run([] {});
    g.wait();
}

} // extern "C"

/* ======================================================================
 * CAF, the C++ Actor Framework (0.17), the peer of bench/bench_actor.c
 *
 * The same actors as the hive side: a counter whose methods answer the new
 * value, and a pinger that bounces messages off a counter of its own. One
 * actor_system, made on first use, serves every benchmark; its scheduler
 * gets one thread per core of the cpuset, as hive's workers = 0 does (CAF's
 * own default is max(cores, 4)). The client side is a caf::scoped_actor
 * (a blocking actor): request(...).receive(...) for a synchronous call; for
 * a batch, all requests first, then each response handle's receive in the
 * order sent - the futures pattern of hive_call then hive_get.
 * ====================================================================== */

#include <caf/all.hpp>

#include <array>
#include <memory>
#include <mutex>
#include <sched.h>

namespace {

/* The 64-byte argument: the eight words are summed into the counter. */
struct hb_blob64 {
    std::array<int64_t, 8> w;
};
static_assert(sizeof(hb_blob64) == 64, "the CAF argument must be 64 bytes, as the hive one");

} // namespace

/* Local messages only: no serialisation (and so no inspect) is needed. */
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(hb_blob64)

namespace {

using inc_atom = caf::atom_constant<caf::atom("inc")>;
using add_atom = caf::atom_constant<caf::atom("add")>;
using start_atom = caf::atom_constant<caf::atom("start")>;

struct counter_state {
    int64_t count = 0;
};

caf::behavior counter_actor(caf::stateful_actor<counter_state> *self)
{
    return {
        [=](inc_atom) -> int64_t { return ++self->state.count; },
        [=](add_atom, const hb_blob64 &b) -> int64_t {
            int64_t d = 0;
            for (int64_t x : b.w)
                d += x;
            return self->state.count += d;
        },
    };
}

struct pinger_state {
    caf::actor counter;
    int64_t expect = 0;        // the counter's value as the pinger knows it
    int64_t left = 0;          // round trips still to make
    bool bad = false;
    caf::response_promise rp;  // the answer to "start"
};

/* "start n": send inc to the counter; every answer (the counter's result,
 * which CAF sends back to the sender of an asynchronous message) is checked
 * and bounced back as the next inc, n times in all. */
caf::behavior pinger_actor(caf::stateful_actor<pinger_state> *self, caf::actor counter)
{
    self->state.counter = std::move(counter);
    return {
        [=](start_atom, int64_t n) -> caf::response_promise {
            auto &st = self->state;
            st.rp = self->make_response_promise();
            st.left = n;
            st.bad = false;
            if (n <= 0)
                st.rp.deliver(st.expect);
            else
                self->send(st.counter, inc_atom::value);
            return st.rp;
        },
        [=](int64_t v) {
            auto &st = self->state;
            if (v != ++st.expect)
                st.bad = true;
            if (--st.left > 0)
                self->send(st.counter, inc_atom::value);
            else
                st.rp.deliver(st.bad ? int64_t{-1} : v);
        },
    };
}

unsigned cpuset_cores()
{
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) != 0 || CPU_COUNT(&set) < 1)
        return 1;
    return static_cast<unsigned>(CPU_COUNT(&set));
}

/* The one actor system, and every actor handed out to C. It is never
 * destroyed: an actor_system destroyed during exit() (a static's destructor
 * or an atexit handler) frees one of its ref-counted members twice, since
 * exit() runs the main thread's thread_local destructors first and CAF
 * keeps a counted pointer to its logger in one (seen with 0.17.6: "free():
 * corrupted unsorted chunks" in ~actor_system). Its scheduler threads sleep
 * in their idle loop when the process exits. */
struct CafWorld {
    caf::actor_system_config cfg;
    std::unique_ptr<caf::actor_system> sys;
    std::mutex lock;
    std::vector<std::unique_ptr<hb_caf_actor>> actors;

    CafWorld()
    {
        cfg.set("scheduler.max-threads", static_cast<size_t>(cpuset_cores()));
        sys.reset(new caf::actor_system(cfg));
    }
};

CafWorld &world()
{
    static CafWorld *w = new CafWorld;   // deliberately never deleted, see above
    return *w;
}

} // namespace

struct hb_caf_actor {
    caf::actor a;
};

struct hb_caf_caller {
    caf::scoped_actor self;
    explicit hb_caf_caller(caf::actor_system &sys) : self(sys) {}
};

namespace {

hb_caf_actor *keep(caf::actor a)
{
    CafWorld &w = world();
    std::lock_guard<std::mutex> g(w.lock);
    w.actors.emplace_back(new hb_caf_actor{std::move(a)});
    return w.actors.back().get();
}

} // namespace

extern "C" {

hb_caf_actor *hb_caf_counter_new(void)
{
    try {
        return keep(world().sys->spawn(counter_actor));
    } catch (...) {
        return nullptr;
    }
}

hb_caf_actor *hb_caf_pinger_new(void)
{
    try {
        caf::actor_system &sys = *world().sys;
        return keep(sys.spawn(pinger_actor, sys.spawn(counter_actor)));
    } catch (...) {
        return nullptr;
    }
}

hb_caf_caller *hb_caf_caller_new(void)
{
    try {
        return new hb_caf_caller(*world().sys);
    } catch (...) {
        return nullptr;
    }
}

void hb_caf_caller_free(hb_caf_caller *c) { delete c; }

int64_t hb_caf_call_sync(hb_caf_caller *c, hb_caf_actor *a)
{
    int64_t out = -1;
    c->self->request(a->a, caf::infinite, inc_atom::value)
        .receive([&](int64_t v) { out = v; }, [&](caf::error &) { out = -1; });
    return out;
}

int hb_caf_call_batch(hb_caf_caller *c, hb_caf_actor *const *actors, int nactors, int n,
                      const void *arg64, int64_t *out)
{
    using handle = decltype(c->self->request(actors[0]->a, caf::infinite, inc_atom::value));
    thread_local std::vector<handle> hs;
    hs.clear();
    hs.reserve(static_cast<size_t>(n));
    if (arg64 != nullptr) {
        hb_blob64 b;
        memcpy(b.w.data(), arg64, sizeof b);
        for (int i = 0; i < n; i++)
            hs.push_back(c->self->request(actors[i % nactors]->a, caf::infinite, add_atom::value, b));
    } else {
        for (int i = 0; i < n; i++)
            hs.push_back(c->self->request(actors[i % nactors]->a, caf::infinite, inc_atom::value));
    }
    int rc = 0;
    for (int i = 0; i < n; i++)
        hs[static_cast<size_t>(i)].receive([&](int64_t v) { out[i] = v; },
                                           [&](caf::error &) { out[i] = -1; rc = -1; });
    return rc;
}

int64_t hb_caf_pingpong(hb_caf_caller *c, hb_caf_actor *pinger, int64_t n)
{
    int64_t out = -1;
    c->self->request(pinger->a, caf::infinite, start_atom::value, n)
        .receive([&](int64_t v) { out = v; }, [&](caf::error &) { out = -1; });
    return out;
}

} // extern "C"
