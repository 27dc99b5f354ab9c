// dashboard.js - hive-dashboard's page: the list of engines (/) or one
// engine (/engine/<id>), refreshed from the JSON API about once a second
// without reloading. Charts are uPlot's; this file only feeds them.
// When every chart has been drawn, <body data-charts="N"> says how many;
// data-seen / data-gone: the engine was shown / has exited (for the
// browser test, tests/dashboard).
"use strict";

const PERIOD_MS = 1000;
const KEEP = 600;                      // points kept per chart (the server keeps its own history)
const COLORS = ["#2f80ed", "#eb5757", "#27ae60", "#f2994a", "#9b51e0", "#00a3a3", "#c2185b",
                "#6d4c41", "#7f8c8d", "#f5b301", "#1b5e20", "#283593"];
const main = document.getElementById("main");

function esc(s) {
  return String(s).replace(/[&<>"']/g, (c) => ({"&": "&amp;", "<": "&lt;", ">": "&gt;",
                                                 '"': "&quot;", "'": "&#39;"}[c]));
}
function bytes(n) {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return (i ? n.toFixed(1) : n) + " " + units[i];
}
function count(n) {
  if (typeof n !== "number") return n == null ? "-" : esc(n);
  if (n >= 1e9) return (n / 1e9).toFixed(2) + "G";
  if (n >= 1e6) return (n / 1e6).toFixed(2) + "M";
  if (n >= 1e4) return (n / 1e3).toFixed(1) + "k";
  return Number.isInteger(n) ? String(n) : n.toFixed(1);
}
function pct(f) { return f == null ? "-" : (100 * f).toFixed(0) + "%"; }
function bar(f) {
  const w = Math.max(0, Math.min(1, f || 0));
  return `<span class="bar${w > 0.9 ? " hot" : ""}"><i style="width:${(100 * w).toFixed(1)}%"></i></span>`;
}
function table(head, rows, attrs) {
  return `<table><tr>${head.map((h) => `<th>${h}</th>`).join("")}</tr>` +
    rows.map((r, i) => `<tr${attrs ? attrs(i) : ""}>${r.map((c) => `<td>${c}</td>`).join("")}</tr>`)
      .join("") + "</table>";
}
async function getJSON(url) {
  const r = await fetch(url, {cache: "no-store"});
  return {status: r.status, body: await r.json()};
}
function tickClock() {
  document.getElementById("clock").textContent = new Date().toLocaleTimeString();
}

// ------------------------------------------------------------ the engine list

async function indexTick() {
  const {body} = await getJSON("/api/engines");
  tickClock();
  let html;
  if (!body.engines.length) {
    html = `<section class="empty">no hive engines running<p class="muted">start one with ` +
      `<code>HIVE_STATS=1</code> (statistics in <code>${esc(body.dir)}</code>), e.g. ` +
      `<code>HIVE_STATS=1 make demo</code></p></section>`;
  } else {
    const rows = body.engines.map((e) => [
      `<a href="/engine/${esc(e.id)}">${esc(e.id)}</a>`, esc(e.program), e.pid, e.workers_n, count(e.nodes),
      `${bar(e.utilisation)} ${pct(e.utilisation)}`, count(e.ops_s),
      `${bar(e.store_used / (e.store_capacity || 1))} ${bytes(e.store_used)} of ${bytes(e.store_capacity)}`,
      count(e.objects), e.stale ? `<span class="stale">not updating</span>` : "live"]);
    html = `<section class="wide"><h2>Engines on this machine</h2>` +
      table(["engine", "program", "pid", "workers", "nodes", "utilisation", "tasks+methods/s",
             "store", "objects", "state"], rows, () => ` class="engine-row"`) + `</section>`;
  }
  const traces = body.exited_traces.filter((t) => t.ready);
  if (traces.length) {
    html += `<section class="wide"><h2>Timelines of engines that exited</h2>` +
      table(["engine", "program", "file", ""], traces.map((t) => [esc(t.id), esc(t.program),
        `<code>${esc(t.trace_path)}</code>`, `<a href="/trace/${esc(t.id)}">download</a>`])) +
      `<p class="muted">Open it in <a href="https://ui.perfetto.dev">ui.perfetto.dev</a> ` +
      `(Open trace file) or chrome://tracing.</p></section>`;
  }
  main.innerHTML = html;
  document.body.dataset.engines = body.engines.length;
}

// ------------------------------------------------------------ one engine

const engine = {id: null, history: [], since: 0, charts: {}, layoutKey: null};

// chart(key, title, series, yfmt, yscale): series is [{label, values}] over
// engine.history's times, yscale uPlot's y scale options; the chart is
// rebuilt when its series change.
function chart(key, title, series, yfmt, yscale) {
  const el = document.getElementById("chart-" + key);
  if (!el || typeof uPlot === "undefined") return false;
  const data = [engine.history.map((s) => s.t), ...series.map((s) => s.values)];
  const sig = series.map((s) => s.label).join("|");
  const c = engine.charts[key];
  if (c && c.sig === sig && c.el === el) {
    c.u.setData(data);
    return true;
  }
  if (c) c.u.destroy();
  const u = new uPlot({
    title, width: Math.max(el.clientWidth, 300), height: 190,
    scales: {x: {time: true}, y: yscale || {}},
    series: [{}, ...series.map((s, i) => ({label: s.label, stroke: COLORS[i % COLORS.length],
                                             width: 1.5, value: (u, v) => v == null ? "-" : yfmt(v)}))],
    axes: [{}, {size: 76, values: (u, vals) => vals.map((v) => v == null ? "" : yfmt(v))}],
    legend: {live: true},
  }, data, el);
  engine.charts[key] = {u, sig, el};
  return true;
}

function column(f) { return engine.history.map((s) => { const v = f(s); return v == null ? null : v; }); }

// The layout: rebuilt only when what the engine has changes (a replay buffer appears...).
function layout(snap) {
  const key = [snap.workers.length, !!snap.actors_top, !!snap.replay, !!snap.envpools,
               !!snap.size_classes].join();
  if (key === engine.layoutKey) return;
  engine.layoutKey = key;
  engine.charts = {};
  const sec = (id, title, inner, wide) =>
    `<section id="${id}"${wide ? ` class="wide"` : ""}><h2>${title}</h2>${inner}</section>`;
  let html = sec("about", "Engine", `<div id="about-body"></div>`, true) +
    sec("workers", "Workers", `<div class="chart" id="chart-util"></div><div id="workers-table"></div>`,
        true) +
    sec("lanes", "Queues and steals", `<div class="chart" id="chart-queued"></div>` +
        `<div class="chart" id="chart-rates"></div>`) +
    sec("store", "Object store", `<div id="store-body"></div><div class="chart" id="chart-store"></div>` +
        `<div class="chart" id="chart-objects"></div>`) +
    sec("actors", "Actors", `<div id="actors-body"></div>`);
  if (snap.replay) html += sec("replay", "Replay buffers", `<div id="replay-body"></div>` +
                               `<div class="chart" id="chart-replay"></div>`);
  if (snap.envpools) html += sec("envpools", "Env pools", `<div id="envpools-body"></div>` +
                                 `<div class="chart" id="chart-envpools"></div>`);
  if (snap.size_classes) html += sec("sizes", "Store size classes", `<div id="sizes-body"></div>`);
  main.innerHTML = html;
}

function set(id, html) {
  const el = document.getElementById(id);
  if (el && el.innerHTML !== html) el.innerHTML = html;
}

function renderAbout(d) {
  const s = d.snapshot;
  document.getElementById("title").textContent = `${s.program || "?"} (pid ${s.pid})`;
  let trace = `timeline off (start the program with <code>HIVE_TRACE=out.json</code> to record one)`;
  if (s.trace_path) {
    trace = `timeline recording to <code>${esc(s.trace_path)}</code> (${count(s.trace && s.trace.events)} ` +
      `events so far, ${count(s.trace && s.trace.dropped)} dropped); it is written when the engine ` +
      `shuts down: then open it in <a href="https://ui.perfetto.dev">ui.perfetto.dev</a> ` +
      `(Open trace file) or chrome://tracing, or <a href="/trace/${esc(d.id)}">download it</a> ` +
      `from the engine list.`;
  }
  set("about-body", `${esc(d.id)}: <b>${esc(s.program)}</b>, pid ${s.pid}, ${s.workers.length} workers ` +
      `on ${count(s.nodes)} NUMA node(s)${d.summary.stale ? ` <span class="stale">not updating</span>` : ""}` +
      `<br><span class="muted">${trace}</span>`);
}

function renderWorkers(s, last) {
  const lw = last ? last.workers : [];
  const rows = s.workers.map((w, i) => {
    const x = lw[i] || {};
    return [`w${count(w.index)}`, `n${count(w.node)} c${count(w.core)} pu${count(w.pu)}`,
            `${bar(x.util)} ${pct(x.util)}`,
            count(x.ops_s), count(w.tasks), count(w.methods), count(w.steals), count(w.stolen),
            count(w.parks)];
  });
  set("workers-table", table(["worker", "node/core/pu", "utilisation", "ops/s", "tasks", "methods",
                              "steals", "stolen", "parks"], rows,
                             (i) => ` class="worker-row" data-index="${s.workers[i].index}"`));
  let series;
  if (s.workers.length <= 24) {
    series = s.workers.map((w, i) => ({label: `w${w.index} n${w.node} c${w.core}`,   // text, not HTML
                                       values: column((h) => h.workers[i] && h.workers[i].util)}));
  } else {                             // many workers: one line per node
    const nodes = [...new Set(s.workers.map((w) => w.node))];
    series = nodes.map((n) => ({label: `node ${n} (mean)`, values: column((h) => {
      const us = s.workers.map((w, i) => w.node === n && h.workers[i] ? h.workers[i].util : null)
        .filter((u) => u != null);
      return us.length ? us.reduce((a, b) => a + b, 0) / us.length : null;
    })}));
  }
  return chart("util", "utilisation per worker", series, pct, {range: [0, 1]});
}

function renderLanes() {
  const lanes = ["high", "normal", "low"];
  const a = chart("queued", "queued jobs per lane", lanes.map((l, i) =>
    ({label: l, values: column((h) => h.queued[i])})), count);
  const b = chart("rates", "per second", [
    {label: "tasks+methods/s", values: column((h) => h.ops_s)},
    {label: "steals/s", values: column((h) => h.steals_s)}], count);
  return a && b;
}

function renderStore(s) {
  const st = s.store;
  const used = st.used, cap = st.capacity || 1;
  let extra = "";
  if (st.used_high != null) extra += `, high-water ${bytes(st.used_high)}`;
  if (st.efull != null) extra += `, ${count(st.efull)} HIVE_EFULL refusals`;
  set("store-body", `${bar(used / cap)} ${bytes(used)} of ${bytes(st.capacity)} ` +
      `(${(100 * used / cap).toFixed(1)}%), ${count(st.objects)} live objects, ` +
      `${bytes(st.resident || 0)} resident${extra}`);
  const positive = (v) => v > 0 ? v : null;          // a log scale: used against capacity
  const a = chart("store", "store bytes (log scale)", [
    {label: "used", values: column((h) => positive(h.store_used))},
    {label: "capacity", values: column((h) => positive(h.store_capacity))}], bytes,
    {distr: 3, log: 2});
  const b = chart("objects", "live objects", [{label: "objects", values: column((h) => h.objects)}],
                  count);
  return a && b;
}

function renderActors(s) {
  const a = s.actors || {};
  let html = `${count(a.alive)} alive, ` +
    (a.restarting != null ? `${count(a.restarting)} restarting, ` : "") +
    `${count(a.dead)} dead (${count(a.created)} created, ${count(a.restarts)} restarts)`;
  if (Array.isArray(s.actors_top) && s.actors_top.length) {
    html += table(["actor", "class", "name", "mailbox", "state"], s.actors_top.map((x) => [
      esc(x.id), esc(x.class), esc(x.name || ""), count(x.mailbox),
      `<span class="state-${esc(x.state)}">${esc(x.state)}</span>`]),
      () => ` class="actor-row"`);
  } else if (s.actors_top) {
    html += `<p class="muted">no actor has mail waiting</p>`;
  }
  set("actors-body", html);
}

function renderReplay(s, last) {
  const now = last ? last.replay : {};
  set("replay-body", table(["buffer", "fill", "size", "capacity", "inserts/s", "samples/s",
                            "limiter waits"], s.replay.map((r) => {
    const x = now[String(r.id)] || {};
    return [count(r.id), bar(r.size / (r.capacity || 1)), count(r.size), count(r.capacity),
            count(x.inserts_s), count(x.samples_s), count(r.limiter_waits)];
  })));
  const series = [];
  for (const r of s.replay) {
    const k = String(r.id);
    series.push({label: `#${k} inserts/s`, values: column((h) => h.replay[k] && h.replay[k].inserts_s)});
    series.push({label: `#${k} samples/s`, values: column((h) => h.replay[k] && h.replay[k].samples_s)});
  }
  return chart("replay", "replay buffers: inserts and samples per second", series, count);
}

function renderEnvpools(s, last) {
  const now = last ? last.envpools : {};
  set("envpools-body", table(["pool", "envs", "steps", "steps/s"], s.envpools.map((e) =>
    [count(e.id), count(e.num_envs), count(e.steps), count((now[String(e.id)] || {}).steps_s)])));
  return chart("envpools", "env pools: steps per second", s.envpools.map((e) => {
    const k = String(e.id);
    return {label: `pool ${k}`, values: column((h) => h.envpools[k] && h.envpools[k].steps_s)};
  }), count);
}

function renderSizes(s) {
  set("sizes-body", table(["size class", "bytes", "objects"], s.size_classes.map((c) =>
    [bytes(c.size), bytes(c.bytes), count(c.objects)])));
}

async function engineTick() {
  const r = await getJSON(`/api/engine/${encodeURIComponent(engine.id)}?since=${engine.since}`);
  tickClock();
  if (r.status === 404) {
    for (const c of Object.values(engine.charts)) c.u.destroy();
    engine.charts = {};
    engine.layoutKey = null;
    main.innerHTML = `<section class="empty">engine ${esc(engine.id)} is not running ` +
      `(it exited, or never published statistics) <p><a href="/">all engines</a></p></section>`;
    document.body.dataset.gone = "1";
    return false;                      // ids are per process: it will not come back
  }
  const d = r.body, s = d.snapshot;
  engine.history.push(...d.history);
  if (engine.history.length > KEEP) engine.history.splice(0, engine.history.length - KEEP);
  if (d.history.length) engine.since = d.history[d.history.length - 1].t;
  const last = engine.history[engine.history.length - 1];
  layout(s);
  renderAbout(d);
  let drawn = [renderWorkers(s, last), renderLanes(), renderStore(s)];
  renderActors(s);
  if (s.replay) drawn.push(renderReplay(s, last));
  if (s.envpools) drawn.push(renderEnvpools(s, last));
  if (s.size_classes) renderSizes(s);
  document.body.dataset.seen = "1";
  if (drawn.every(Boolean) && engine.history.length)
    document.body.dataset.charts = document.querySelectorAll(".chart canvas").length;
  return true;
}

// ------------------------------------------------------------ start

// Run tick every PERIOD_MS until it returns false.
function loop(tick) {
  const run = async () => {
    let again = true;
    try {
      again = (await tick()) !== false;
    } catch (e) {                      // the server restarting, a bad answer: try again
      document.getElementById("clock").textContent = "no answer from hive-dashboard";
    }
    if (again) setTimeout(run, PERIOD_MS);
  };
  run();
}

const m = location.pathname.match(/^\/engine\/([^/]+)$/);
if (m) {
  engine.id = decodeURIComponent(m[1]);
  if (typeof uPlot === "undefined")
    document.body.insertAdjacentHTML("afterbegin", `<p class="stale">uPlot is missing: run ` +
                                     `<code>make dashboard-deps</code>; no charts until then.</p>`);
  window.addEventListener("resize", () => {
    for (const c of Object.values(engine.charts)) c.u.setSize({width: c.el.clientWidth, height: 190});
  });
  loop(engineTick);
} else {
  loop(indexTick);
}
