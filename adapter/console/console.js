// The rmqkafka console: polls the broker's JSON API (adapter/console_api.py) and fills the
// page's tables and charts. Plain DOM, no framework and no build step: the broker serves this
// file as is. Charts are uPlot's (vendored: /console/vendor/, see its README.md).
"use strict";

const REFRESH_MS = 3000;
const API = ["overview", "topics", "groups", "views", "delays", "transactions", "dlq", "quotas", "history"];
const CHART_SERIES = 6; // lines per chart: the busiest series; the rest are named in the note
const COLORS = ["#2f6fdb", "#1f8a4c", "#c0392b", "#b7791f", "#7e57c2", "#00838f"];

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined) continue;
    if (name === "class") node.className = value;
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

const num = (n) => (n === null || n === undefined ? "–" : Number(n).toLocaleString("en-US"));
function bytes(n) {
  if (n === null || n === undefined) return "–";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return (i ? n.toFixed(1) : String(n)) + " " + units[i];
}
const rate = (r) => (r === null || r === undefined ? "–" : Number(r).toLocaleString("en-US", { maximumFractionDigits: 1 }) + " msg/s");
function duration(ms) {
  if (ms < 1000) return ms + " ms";
  const s = Math.round(ms / 1000);
  if (s < 60) return s + " s";
  if (s < 3600) return Math.floor(s / 60) + " min " + (s % 60 ? (s % 60) + " s" : "");
  return Math.floor(s / 3600) + " h " + Math.floor((s % 3600) / 60) + " min";
}
const when = (ms) => (ms === null || ms === undefined || ms < 0 ? "–" : new Date(ms).toISOString().replace("T", " ").slice(0, 19) + " UTC");

function fill(table, rows, columns, emptyText) {
  const body = document.querySelector(`#${table} tbody`);
  body.replaceChildren(...(rows.length ? rows : [el("tr", {}, el("td", { class: "empty", colspan: columns }, emptyText))]));
}

function renderOverview(o) {
  document.getElementById("bootstrap").textContent = o.bootstrap ? "bootstrap " + o.bootstrap : "";
  const ready = document.getElementById("ready");
  ready.textContent = o.ready ? "ready" : "not ready";
  ready.className = "badge " + (o.ready ? "ok" : "bad");
  const healthy = document.getElementById("healthy");
  healthy.textContent = o.healthy ? "healthy" : "storage failed";
  healthy.className = "badge " + (o.healthy ? "ok" : "bad");
  healthy.title = o.failure || "";
  document.getElementById("commitlog").textContent = o.commitlog_bytes !== undefined ? "commitlog " + bytes(o.commitlog_bytes) : "";
  document.getElementById("docs-link").hidden = !o.docs;
}

// One uPlot per chart, made again only when its set of lines changes (setData otherwise, so
// the cursor and legend stay put between refreshes). The container's data-points counts the
// points drawn and data-series names the lines: what the browser test reads.
const charts = {};

// Axis labels fit their 48 px: 12,500 is "12.5k".
function compact(n) {
  if (n === null || n === undefined) return "";
  for (const [size, unit] of [[1e9, "G"], [1e6, "M"], [1e3, "k"]]) {
    if (Math.abs(n) >= size) return +(n / size).toFixed(1) + unit;
  }
  return +n.toFixed(2) + "";
}

function busiest(rows, limit) {
  const peak = (values) => Math.max(0, ...values.filter((v) => v !== null));
  return Object.entries(rows).map(([name, values]) => [name, values, peak(values)])
    .sort((a, b) => b[2] - a[2] || (a[0] < b[0] ? -1 : 1)).slice(0, limit);
}

function drawChart(id, times, rows) {
  const box = document.getElementById(id);
  const shown = busiest(rows, CHART_SERIES);
  const points = shown.reduce((n, [, values]) => n + values.filter((v) => v !== null).length, 0);
  box.dataset.points = String(points);
  box.dataset.series = shown.map(([name]) => name).join(",");
  const key = box.dataset.series;
  if (!shown.length || times.length < 2) {
    if (charts[id]) { charts[id].plot.destroy(); delete charts[id]; }
    box.replaceChildren(el("div", { class: "empty" }, shown.length ? "waiting for a second sample…" : "nothing yet"));
    return;
  }
  const data = [times.map((ms) => ms / 1000), ...shown.map(([, values]) => values)];
  if (charts[id] && charts[id].key === key) {
    charts[id].plot.setData(data);
    return;
  }
  if (charts[id]) charts[id].plot.destroy();
  box.replaceChildren();
  const plot = new uPlot({
    width: Math.max(280, box.clientWidth || 380), height: 150,
    series: [{}, ...shown.map(([name], i) => ({ label: name, stroke: COLORS[i % COLORS.length], width: 1.5 }))],
    axes: [{ size: 30 }, { size: 48, values: (u, splits) => splits.map(compact) }],
    scales: { x: { time: true }, y: { range: (u, min, max) => [0, Math.max(1, max)] } },
  }, data, box);
  charts[id] = { key, plot };
}

function renderHistory(doc) {
  document.getElementById("history-window").textContent = duration(doc.window_s * 1000);
  drawChart("chart-produced", doc.times_ms, doc.produced);
  drawChart("chart-consumed", doc.times_ms, doc.consumed);
  drawChart("chart-lag", doc.times_ms, doc.lag);
  const omitted = doc.omitted.produced + doc.omitted.consumed + doc.omitted.lag;
  document.getElementById("history-note").textContent =
    `a sample every ${doc.interval_s} s` + (omitted ? ` · ${num(omitted)} idle series not kept (at most ${doc.max_series} of each kind)` : "");
}

function renderTopics(doc) {
  const rows = [];
  for (const t of doc.topics) {
    t.partitions.forEach((p, i) => {
      rows.push(el("tr", { "data-topic": t.name, "data-partition": p.partition, class: i === 0 ? "first" : null },
        el("td", {}, i === 0 ? t.name : ""), el("td", {}, p.partition),
        el("td", { class: "num" }, num(p.start)), el("td", { class: "num" }, num(p.end)),
        el("td", { class: "num messages" }, num(p.messages)), el("td", { class: "num" }, bytes(p.size_bytes)),
        el("td", { class: "num rate" }, i === 0 ? rate(t.rate_per_s) : "")));
    });
  }
  fill("topics", rows, 7, "no topics yet");
  // the log cleaner, once a compacted topic exists: its totals, and per partition (in the
  // row's tooltip) how far it cleaned
  const compacted = doc.topics.flatMap(t => t.partitions.filter(p => p.cleaner).map(p => [t.name, p]));
  for (const [name, p] of compacted) {
    const row = document.querySelector(`#topics tr[data-topic="${CSS.escape(name)}"][data-partition="${p.partition}"]`);
    if (row) row.title = `cleaned to ${num(p.cleaner.cleaned_to)}, dirty ratio ${p.cleaner.dirty_ratio}` +
      (p.cleaner.last_error ? `, last error: ${p.cleaner.last_error}` : "");
  }
  const c = doc.cleaner;
  document.getElementById("cleaner").textContent = c && compacted.length
    ? `log cleaner: ${num(c.runs)} runs, ${bytes(c.read_bytes)} read, ${bytes(c.written_bytes)} written, ` +
      `${bytes(c.reclaimed_bytes)} reclaimed` + (c.failures ? `, ${num(c.failures)} failures` : "")
    : "";
}

// A consumer-protocol (KIP-848) or share (KIP-932) group says so, with its group epoch,
// beside classic ones.
function groupState(g) {
  if (g.type === "consumer") return `${g.state} (consumer protocol, epoch ${g.generation})`;
  if (g.type === "share") return `${g.state} (share group, epoch ${g.generation})`;
  return g.state;
}

// A share group has no committed offsets: a row per assigned share-partition, with every
// member reading it (many members may share one partition).
// The share-partition's window: SPSO is in the committed column, lag in the lag column.
function shareWindow(p) {
  if (p.in_flight === null || p.in_flight === undefined) return "";
  let text = `in flight ${num(p.in_flight)} (acquired ${num(p.acquired)}, acknowledged ${num(p.acknowledged)}, archived ${num(p.archived)}`;
  if (p.waiting) text += `, in backoff ${num(p.waiting)}`;
  text += ")";
  if (p.dead_letters) text += `, dead letters ${num(p.dead_letters)}`;
  return text;
}

function shareGroupRows(g, rows) {
  const parts = g.share_partitions.length ? g.share_partitions : [null];
  parts.forEach((p, i) => {
    rows.push(el("tr", { "data-group": g.group, "data-topic": p ? p.topic : null, "data-partition": p ? p.partition : null, class: i === 0 ? "first" : null },
      el("td", {}, i === 0 ? g.group : ""), el("td", {}, i === 0 ? groupState(g) : ""),
      el("td", { class: "members" }, i === 0 ? g.members.length : ""),
      el("td", {}, p ? p.topic : "no assigned partitions"), el("td", {}, p ? p.partition : ""),
      el("td", { class: "num committed" }, p ? num(p.start) : ""), el("td", { class: "num" }, p ? num(p.end) : ""),
      el("td", { class: "num" }, p ? el("span", { class: "lag" + (p.lag > 1000 ? " high" : "") }, num(p.lag)) : ""),
      el("td", { class: "muted" }, p ? [p.members.map((id) => (g.members.find((m) => m.member_id === id) || {}).client_id || id).join(", "),
        shareWindow(p)].filter((s) => s).join(" · ") : "")));
  });
}

function renderGroups(doc) {
  const rows = [];
  for (const g of doc.groups) {
    if (g.type === "share") { shareGroupRows(g, rows); continue; }
    const owners = {};
    for (const m of g.members) for (const a of m.assignment) for (const p of a.partitions) owners[a.topic + "/" + p] = m.client_id || m.member_id;
    const offsets = g.offsets.length ? g.offsets : [null];
    const maxLag = Math.max(1, ...g.offsets.map((o) => o.lag || 0));
    offsets.forEach((o, i) => {
      const lag = o ? o.lag : null;
      rows.push(el("tr", { "data-group": g.group, "data-topic": o ? o.topic : null, "data-partition": o ? o.partition : null, class: i === 0 ? "first" : null },
        el("td", {}, i === 0 ? g.group : ""), el("td", {}, i === 0 ? groupState(g) : ""),
        el("td", { class: "members" }, i === 0 ? g.members.length : ""),
        el("td", {}, o ? o.topic : "no committed offsets"), el("td", {}, o ? o.partition : ""),
        el("td", { class: "num committed" }, o ? num(o.committed) : ""), el("td", { class: "num" }, o ? num(o.end) : ""),
        el("td", { class: "num" }, o ? el("span", { class: "lag" + (lag > 1000 ? " high" : "") }, num(lag)) : "",
          o && lag ? el("span", { class: "bar", style: `width:${Math.round(40 * lag / maxLag)}px` }) : null),
        el("td", { class: "muted" }, o ? owners[o.topic + "/" + o.partition] || "" : "")));
    });
  }
  fill("groups", rows, 9, "no consumer groups yet");
}

function renderViews(doc) {
  fill("views", doc.views.map((v) => el("tr", { "data-view": v.name },
    el("td", {}, v.name), el("td", {}, v.source), el("td", {}, v.kind),
    el("td", {}, el("code", {}, v.expression)), el("td", { class: "num" }, v.partitions))), 5, "no views");
}

function renderDelays(doc) {
  const now = doc.now_ms;
  const levels = doc.levels.filter((l) => l.depth > 0);
  fill("delays", levels.map((l) => el("tr", { "data-level": l.level },
    el("td", { class: "num" }, l.level), el("td", { class: "num" }, duration(l.delay_ms)),
    el("td", { class: "num depth" }, num(l.depth)),
    el("td", {}, l.next_due_ms === null ? "–" : when(l.next_due_ms) + " (in " + duration(Math.max(0, l.next_due_ms - now)) + ")"))),
    4, `no delayed records in any of the ${doc.levels.length} levels`);
  document.getElementById("timers").textContent =
    `${num(doc.timers_pending)} timer${doc.timers_pending === 1 ? "" : "s"} pending · ${num(doc.delivered)} delivered · ${num(doc.dead_lettered)} dead-lettered`;
  fill("retries", doc.retry.map((r) => el("tr", { "data-retry": r.group },
    el("td", {}, r.group), el("td", { class: "num" }, num(r.messages)), el("td", { class: "num" }, num(r.appended)))),
    3, "no retries");
}

function renderTransactions(doc) {
  const h = doc.half_messages;
  document.getElementById("half-summary").textContent =
    `${num(h.pending)} half message${h.pending === 1 ? "" : "s"} pending · ${num(h.committed)} committed · ${num(h.rolled_back)} rolled back · ${num(h.checks_sent)} back-checks sent · ${num(doc.kafka_open.length)} open Kafka transaction${doc.kafka_open.length === 1 ? "" : "s"}`;
  fill("half-messages", h.oldest.map((m) => el("tr", { "data-half": m.uniq_key },
    el("td", {}, m.group), el("td", {}, m.uniq_key), el("td", {}, m.topic), el("td", { class: "num" }, m.partition),
    el("td", { class: "num" }, duration(m.age_ms)), el("td", { class: "num" }, m.checks))), 6, "no pending half messages");
  fill("kafka-transactions", doc.kafka_open.map((t) => el("tr", { "data-txn": t.transactional_id },
    el("td", {}, t.transactional_id), el("td", {}, t.state), el("td", { class: "num" }, t.producer_id),
    el("td", {}, when(t.start_ms)), el("td", {}, t.partitions.map((p) => p.topic + " [" + p.partitions.join(",") + "]").join("; ")))),
    5, "no open Kafka transactions");
}

const resendResults = {};

async function resend(group, button) {
  button.disabled = true;
  resendResults[group] = "resending…";
  try {
    const response = await fetch("/api/dlq/resend", {
      method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ group }),
    });
    const doc = await response.json();
    resendResults[group] = response.ok ? `resent ${doc.resent}` : "failed: " + (doc.error || doc.message || response.status);
  } catch (err) {
    resendResults[group] = "failed: " + err;
  }
  refresh();
}

function renderDlq(doc) {
  fill("dlq", doc.groups.map((d) => el("tr", { "data-dlq": d.group },
    el("td", {}, d.group), el("td", {}, d.topic), el("td", { class: "num held" }, num(d.messages)),
    el("td", { class: "num not-resent" }, num(d.not_resent)),
    el("td", {}, el("button", {
      disabled: !doc.resend_available || d.not_resent === 0 ? "" : null,
      title: doc.resend_available ? "rmqk dlq resend " + d.group : "needs a PLAINTEXT listener",
      onclick: (event) => resend(d.group, event.target),
    }, "Resend")),
    el("td", { class: "muted result" }, resendResults[d.group] || ""))), 6, "no dead letters");
}

function renderQuotas(doc) {
  const entity = (e) => Object.entries(e).map(([k, v]) => k + "=" + (v === null ? "<default>" : v)).join(", ");
  fill("quota-entities", doc.entities.map((q) => el("tr", {},
    el("td", {}, entity(q.entity)),
    el("td", {}, Object.entries(q.quotas).map(([k, v]) => k + "=" + v).join(", ")))),
    2, "no client quotas");
  fill("quota-throttled", doc.throttled.map((t) => el("tr", {},
    el("td", {}, t.quota), el("td", {}, t.user), el("td", {}, t.client_id),
    el("td", { class: "num" }, num(t.responses)), el("td", { class: "num" }, duration(t.throttle_ms)))),
    5, "no client throttled");
}

async function getJSON(name) {
  const response = await fetch("/api/" + name, { cache: "no-store" });
  if (!response.ok && response.status !== 503) throw new Error(`/api/${name}: HTTP ${response.status}`);
  return response.json();
}

let timer = null;
async function refresh() {
  clearTimeout(timer);
  const error = document.getElementById("error");
  try {
    const [overview, topics, groups, views, delays, transactions, dlq, quotas, history] = await Promise.all(API.map(getJSON));
    renderOverview(overview);
    if (overview.ready) {
      renderHistory(history);
      renderTopics(topics);
      renderGroups(groups);
      renderViews(views);
      renderDelays(delays);
      renderTransactions(transactions);
      renderDlq(dlq);
      renderQuotas(quotas);
    }
    error.hidden = true;
    document.getElementById("updated").textContent = "updated " + new Date().toLocaleTimeString("en-GB");
    document.body.dataset.loaded = "true";
  } catch (err) {
    error.textContent = "cannot reach the broker: " + err.message;
    error.hidden = false;
  }
  timer = setTimeout(refresh, REFRESH_MS);
}

refresh();
