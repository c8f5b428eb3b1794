/**
 * The dashboard page: plain HTML, CSS and JavaScript drawing SVG, no framework and no build step. It
 * polls `/api/state` every second and redraws: the lineage graph (parents → children, coloured by
 * state, outlined by lag), the workers with a throughput sparkline, each shard's lag sparkline, the
 * problems, and a timeline of lease events. Elements carry `data-*` attributes (shard, owner, state,
 * worker) for scripts and tests.
 */
export const DASHBOARD_PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>kcl dashboard</title>
<style>
  :root { color-scheme: light; --ink: #1f2933; --muted: #66788a; --line: #d9e2ec; }
  * { box-sizing: border-box; }
  body { margin: 0; font: 14px/1.4 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--ink); background: #f5f7fa; }
  header { display: flex; align-items: baseline; gap: 16px; padding: 14px 24px; background: #102a43; color: #f0f4f8; }
  header h1 { margin: 0; font-size: 20px; font-weight: 600; }
  header .meta { color: #bcccdc; font-size: 13px; }
  #error { color: #ffb4a9; font-weight: 600; }
  main { padding: 16px 24px 32px; display: grid; gap: 16px; grid-template-columns: minmax(0, 3fr) minmax(0, 2fr); }
  section { background: #fff; border: 1px solid var(--line); border-radius: 8px; padding: 12px 16px; min-width: 0; }
  section.wide { grid-column: 1 / -1; }
  h2 { margin: 0 0 8px; font-size: 14px; text-transform: uppercase; letter-spacing: .06em; color: var(--muted); }
  table { border-collapse: collapse; width: 100%; font-variant-numeric: tabular-nums; }
  th, td { text-align: left; padding: 4px 8px; border-bottom: 1px solid var(--line); white-space: nowrap; }
  th { font-weight: 600; color: var(--muted); font-size: 12px; }
  td.leases { white-space: normal; font-size: 12px; color: var(--muted); }
  .badge { display: inline-block; padding: 1px 8px; border-radius: 10px; font-size: 12px; color: #fff; }
  .legend { display: flex; flex-wrap: wrap; gap: 12px; font-size: 12px; color: var(--muted); margin-top: 6px; }
  .legend i { display: inline-block; width: 12px; height: 12px; border-radius: 3px; margin-right: 4px; vertical-align: -2px; }
  #lineage-wrap { overflow-x: auto; }
  ul.problems { margin: 0; padding-left: 18px; }
  ul.problems li { margin: 2px 0; }
  .ok { color: #2e7d32; }
  ol.events { list-style: none; margin: 8px 0 0; padding: 0; max-height: 260px; overflow-y: auto; font-size: 13px; }
  ol.events li { padding: 2px 0; border-bottom: 1px dashed var(--line); }
  ol.events time { color: var(--muted); margin-right: 8px; font-variant-numeric: tabular-nums; }
</style>
</head>
<body>
<header>
  <h1 id="title">kcl</h1>
  <span class="meta" id="meta">connecting…</span>
  <span id="error"></span>
</header>
<main>
  <section class="wide">
    <h2>Shards — lineage (parents → children)</h2>
    <div id="lineage-wrap"><svg id="lineage" width="600" height="80" role="img" aria-label="shard lineage"></svg></div>
    <div class="legend" id="legend"></div>
  </section>
  <section>
    <h2>Workers</h2>
    <table id="workers"></table>
  </section>
  <section>
    <h2>Problems</h2>
    <ul class="problems" id="problems"></ul>
  </section>
  <section>
    <h2>Shard lag</h2>
    <table id="shards"></table>
  </section>
  <section>
    <h2>Lease events</h2>
    <svg id="timeline" width="100%" height="44" role="img" aria-label="lease event timeline"></svg>
    <ol class="events" id="events"></ol>
  </section>
</main>
<script>
"use strict";
var STATE_COLORS = { owned: "#2e7d32", "handing-off": "#1565c0", expired: "#c62828", unowned: "#ef6c00", waiting: "#7b8794", finished: "#bcccdc" };
var EVENT_COLORS = { created: "#486581", taken: "#2e7d32", stolen: "#6a1b9a", "handed-off": "#1565c0", released: "#ef6c00", expired: "#c62828", ended: "#334e68", deleted: "#9fb3c8" };
var SVG = "http://www.w3.org/2000/svg";

function el(tag, attributes, children) {
  var svg = ["svg", "g", "rect", "text", "line", "path", "polyline", "circle", "title", "tspan"].indexOf(tag) >= 0;
  var node = svg ? document.createElementNS(SVG, tag) : document.createElement(tag);
  Object.keys(attributes || {}).forEach(function (name) { node.setAttribute(name, String(attributes[name])); });
  (children || []).forEach(function (child) {
    node.appendChild(typeof child === "string" ? document.createTextNode(child) : child);
  });
  return node;
}
function clear(node) { while (node.firstChild) node.removeChild(node.firstChild); return node; }
function lagText(ms) { return ms === null || ms === undefined ? "–" : ms < 1000 ? ms + " ms" : (ms / 1000).toFixed(1) + " s"; }
function lagColor(ms) { return ms === null || ms === undefined ? "#d9e2ec" : ms < 1000 ? "#8bd3a0" : ms < 10000 ? "#f7d070" : ms < 60000 ? "#f29b4b" : "#e12d39"; }
function ageText(ms) { return ms < 60000 ? Math.round(ms / 1000) + " s" : (ms / 60000).toFixed(1) + " min"; }
function shortKey(key) { var i = key.lastIndexOf(":"); return i < 0 ? key : key.slice(i + 1); }

function sparkline(values, color) {
  var width = 120, height = 24;
  var numbers = values.map(function (v) { return v === null || v === undefined ? 0 : v; });
  var max = Math.max.apply(null, numbers.concat([1]));
  var step = numbers.length > 1 ? width / (numbers.length - 1) : width;
  var points = numbers.map(function (v, i) { return (i * step).toFixed(1) + "," + (height - 2 - (v / max) * (height - 4)).toFixed(1); }).join(" ");
  return el("svg", { width: width, height: height, class: "sparkline" }, [
    el("polyline", { points: points, fill: "none", stroke: color, "stroke-width": 1.5 }),
  ]);
}

function drawLineage(status, retired) {
  var svg = clear(document.getElementById("lineage"));
  var byKey = {};
  var all = retired.map(function (s) { return Object.assign({}, s, { retired: true }); }).concat(status.shards);
  all.forEach(function (s) { byKey[s.leaseKey] = s; });
  var depth = {};
  function depthOf(key, seen) {
    if (depth[key] !== undefined) return depth[key];
    if (seen[key]) return 0;
    seen[key] = true;
    var parents = (byKey[key].parentLeaseKeys || []).filter(function (p) { return byKey[p] !== undefined; });
    var d = parents.length === 0 ? 0 : 1 + Math.max.apply(null, parents.map(function (p) { return depthOf(p, seen); }));
    depth[key] = d;
    return d;
  }
  var streams = {};
  all.forEach(function (s) {
    depthOf(s.leaseKey, {});
    var stream = s.streamIdentifier || "";
    (streams[stream] = streams[stream] || []).push(s);
  });
  var W = 200, H = 58, GX = 56, GY = 12, top = 8, maxX = 0, position = {};
  Object.keys(streams).sort().forEach(function (stream) {
    if (stream !== "") {
      svg.appendChild(el("text", { x: 4, y: top + 12, "font-size": 12, fill: "#66788a" }, [stream]));
      top += 20;
    }
    var columns = {};
    streams[stream].forEach(function (s) { (columns[depth[s.leaseKey]] = columns[depth[s.leaseKey]] || []).push(s); });
    var rows = 0;
    Object.keys(columns).forEach(function (c) {
      columns[c].forEach(function (s, i) {
        position[s.leaseKey] = { x: 4 + Number(c) * (W + GX), y: top + i * (H + GY) };
        maxX = Math.max(maxX, 4 + Number(c) * (W + GX) + W);
      });
      rows = Math.max(rows, columns[c].length);
    });
    top += rows * (H + GY) + 8;
  });
  all.forEach(function (s) {
    (s.parentLeaseKeys || []).forEach(function (p) {
      if (!position[p]) return;
      var a = position[p], b = position[s.leaseKey];
      var x1 = a.x + W, y1 = a.y + H / 2, x2 = b.x, y2 = b.y + H / 2, mx = (x1 + x2) / 2;
      svg.appendChild(el("path", { d: "M" + x1 + "," + y1 + " C" + mx + "," + y1 + " " + mx + "," + y2 + " " + x2 + "," + y2, fill: "none", stroke: "#9fb3c8", "stroke-width": 1.5, "data-edge": p + "->" + s.leaseKey }));
    });
  });
  all.forEach(function (s) {
    var p = position[s.leaseKey];
    var fill = s.retired ? "#f0f4f8" : STATE_COLORS[s.state] || "#7b8794";
    var dark = !s.retired && s.state !== "finished";
    var ink = dark ? "#ffffff" : "#486581";
    var attributes = s.retired
      ? { transform: "translate(" + p.x + "," + p.y + ")", "data-retired-shard": s.leaseKey, class: "shard retired" }
      : { transform: "translate(" + p.x + "," + p.y + ")", "data-shard": s.leaseKey, "data-owner": s.owner || "", "data-state": s.state, class: "shard" };
    var line3 = s.retired
      ? "finished · lease deleted " + new Date(s.deletedAt).toLocaleTimeString()
      : s.state + " · lag " + lagText(s.millisBehindLatest) + (s.recordsPerSecond !== null ? " · " + s.recordsPerSecond + " rec/s" : "");
    var group = el("g", attributes, [
      el("title", {}, [s.leaseKey + " — " + (s.retired ? "finished, lease deleted" : s.state) + (s.owner ? " — " + s.owner : "") + " — checkpoint " + s.checkpoint]),
      el("rect", { width: W, height: H, rx: 8, fill: fill, stroke: s.retired ? "#9fb3c8" : lagColor(s.millisBehindLatest), "stroke-width": s.retired ? 1.5 : 4, "stroke-dasharray": s.retired ? "5 4" : "none" }),
      el("text", { x: 10, y: 18, fill: ink, "font-size": 13, "font-weight": 600 }, [shortKey(s.leaseKey)]),
      el("text", { x: 10, y: 35, fill: ink, "font-size": 12, class: "owner" }, [s.owner ? s.owner : s.state === "finished" ? "finished" : "no owner"]),
      el("text", { x: 10, y: 50, fill: ink, "font-size": 11 }, [line3]),
    ]);
    svg.appendChild(group);
  });
  svg.setAttribute("width", String(Math.max(600, maxX + 8)));
  svg.setAttribute("height", String(Math.max(80, top)));
  var legend = clear(document.getElementById("legend"));
  Object.keys(STATE_COLORS).forEach(function (state) {
    legend.appendChild(el("span", {}, [el("i", { style: "background:" + STATE_COLORS[state] }), state]));
  });
  legend.appendChild(el("span", {}, [el("i", { style: "background:#f0f4f8;border:1px dashed #9fb3c8" }), "lease deleted (finished parent)"]));
  legend.appendChild(el("span", {}, ["outline: lag < 1 s · < 10 s · < 60 s · more"]));
}

function drawWorkers(status, history) {
  var table = clear(document.getElementById("workers"));
  table.appendChild(el("tr", {}, ["worker", "state", "heartbeat", "leases", "rec/s", "throughput"].map(function (h) { return el("th", {}, [h]); })));
  status.workers.forEach(function (w) {
    var values = history.map(function (sample) { return sample.throughput[w.workerId]; });
    table.appendChild(el("tr", { "data-worker": w.workerId, "data-alive": w.alive }, [
      el("td", {}, [w.workerId]),
      el("td", {}, [el("span", { class: "badge", style: "background:" + (w.alive ? "#2e7d32" : "#c62828") }, [w.alive ? "alive" : "gone"])]),
      el("td", {}, [ageText(w.heartbeatAgeMs) + " ago"]),
      el("td", { class: "leases" }, [w.leases.length + (w.leases.length ? ": " + w.leases.map(shortKey).join(", ") : "")]),
      el("td", {}, [String(w.recordsPerSecond)]),
      el("td", {}, [sparkline(values, "#1565c0")]),
    ]));
  });
  if (status.workers.length === 0) table.appendChild(el("tr", {}, [el("td", { colspan: 6 }, ["no worker registered"])]));
}

function drawShards(status, history) {
  var table = clear(document.getElementById("shards"));
  table.appendChild(el("tr", {}, ["shard", "owner", "lag", "lag history"].map(function (h) { return el("th", {}, [h]); })));
  status.shards.forEach(function (s) {
    var values = history.map(function (sample) { return sample.lag[s.leaseKey]; });
    table.appendChild(el("tr", { "data-shard-row": s.leaseKey }, [
      el("td", {}, [shortKey(s.leaseKey)]),
      el("td", {}, [s.owner || "–"]),
      el("td", {}, [lagText(s.millisBehindLatest)]),
      el("td", {}, [sparkline(values, "#c62828")]),
    ]));
  });
}

function drawProblems(status) {
  var list = clear(document.getElementById("problems"));
  if (status.problems.length === 0) list.appendChild(el("li", { class: "ok" }, ["No problems found."]));
  status.problems.forEach(function (p) { list.appendChild(el("li", { "data-problem": p.kind }, [p.message])); });
}

function drawEvents(events, readAt) {
  var list = clear(document.getElementById("events"));
  events.slice().reverse().slice(0, 200).forEach(function (e) {
    var who = e.kind === "taken" || e.kind === "stolen" || e.kind === "handed-off" ? (e.from ? e.from + " → " : "") + e.to : e.from ? e.from : "";
    list.appendChild(el("li", { "data-event": e.kind }, [
      el("time", {}, [new Date(e.at).toLocaleTimeString()]),
      el("span", { class: "badge", style: "background:" + (EVENT_COLORS[e.kind] || "#486581") }, [e.kind]),
      " " + shortKey(e.leaseKey) + (who ? " · " + who : ""),
    ]));
  });
  var svg = document.getElementById("timeline");
  clear(svg);
  var width = svg.getBoundingClientRect().width || 400;
  var end = new Date(readAt).getTime(), span = 5 * 60 * 1000;
  svg.appendChild(el("line", { x1: 0, y1: 22, x2: width, y2: 22, stroke: "#d9e2ec" }));
  events.forEach(function (e) {
    var t = new Date(e.at).getTime();
    if (t < end - span) return;
    var x = ((t - (end - span)) / span) * (width - 8) + 4;
    svg.appendChild(el("circle", { cx: x.toFixed(1), cy: 22, r: 5, fill: EVENT_COLORS[e.kind] || "#486581" }, [el("title", {}, [e.kind + " " + e.leaseKey])]));
  });
  svg.appendChild(el("text", { x: 0, y: 42, "font-size": 10, fill: "#66788a" }, ["5 min ago"]));
  svg.appendChild(el("text", { x: width - 24, y: 42, "font-size": 10, fill: "#66788a" }, ["now"]));
}

function render(state) {
  document.getElementById("error").textContent = state.error ? "store read failed: " + state.error : "";
  var status = state.status;
  if (!status) return;
  document.title = "kcl · " + status.applicationName;
  document.getElementById("title").textContent = "kcl · " + status.applicationName;
  document.getElementById("meta").textContent = status.store + " · " + status.shards.length + " shards · " +
    status.workers.filter(function (w) { return w.alive; }).length + " live workers · read " + new Date(status.readAt).toLocaleTimeString();
  document.body.setAttribute("data-read-at", status.readAt);
  drawLineage(status, state.retiredShards || []);
  drawWorkers(status, state.history);
  drawShards(status, state.history);
  drawProblems(status);
  drawEvents(state.events, status.readAt);
}

function tick() {
  fetch("/api/state", { cache: "no-store" })
    .then(function (response) { return response.json(); })
    .then(render)
    .catch(function (error) { document.getElementById("error").textContent = "dashboard unreachable: " + error; })
    .then(function () { setTimeout(tick, 1000); });
}
tick();
</script>
</body>
</html>
`;
