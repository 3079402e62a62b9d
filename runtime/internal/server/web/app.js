// The worker's page: the topology drawn with Mermaid, then /status every
// two seconds. Everything it needs is served by the worker itself.
"use strict";

const refreshEvery = 2000;

function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = String(text);
  if (cls) e.className = cls;
  return e;
}

function row(cells) {
  const tr = document.createElement("tr");
  for (const c of cells) {
    const td = document.createElement("td");
    if (c instanceof Node) td.appendChild(c); else td.textContent = c === undefined || c === null ? "" : String(c);
    tr.appendChild(td);
  }
  return tr;
}

function fill(tableId, rows, empty) {
  const body = document.querySelector("#" + tableId + " tbody");
  body.replaceChildren(...rows);
  if (rows.length === 0) {
    const tr = row([empty]);
    tr.firstChild.colSpan = document.querySelectorAll("#" + tableId + " thead th").length;
    tr.firstChild.className = "muted";
    body.appendChild(tr);
  }
}

// restartText says what the restart policy did for a task, and when it
// tries next.
function restartText(r) {
  if (!r) return "";
  const next = r.next_attempt ? ", next at " + new Date(r.next_attempt).toLocaleTimeString() : "";
  return r.attempts + (r.attempts === 1 ? " attempt" : " attempts") + next;
}

function restoreText(r) {
  if (!r) return "";
  const pct = r.total > 0 ? Math.floor(100 * r.records / r.total) : 0;
  const left = r.remaining_ns > 0 ? ", " + Math.ceil(r.remaining_ns / 1e9) + " s left" : "";
  return pct + "% (" + r.records + " of " + r.total + " records" + left + ")";
}

async function act(id, what) {
  const [processor, partition] = id.split("/");
  const headers = {};
  const token = document.getElementById("token").value;
  if (token) headers["Authorization"] = "Bearer " + token;
  const res = await fetch("/tasks/" + encodeURIComponent(processor) + "/" + encodeURIComponent(partition) + "/" + what,
    { method: "POST", headers });
  document.getElementById("action").textContent = (await res.text()).trim();
  refresh();
}

function actions(t) {
  const span = el("span");
  if (t.state !== "FAILED") return span;
  for (const what of ["restart", "skip"]) {
    const b = el("button", what);
    b.addEventListener("click", () => act(t.id, what));
    span.appendChild(b);
  }
  return span;
}

function render(st) {
  document.getElementById("app").textContent = st.application_id + " · worker " + st.instance_id;
  const ready = document.getElementById("ready");
  // Degraded (some tasks FAILED) is red even when /readyz is relaxed to 200.
  ready.textContent = st.degraded ? "degraded" : st.ready ? "ready" : "not ready";
  ready.className = "badge " + (st.ready && !st.degraded ? "ok" : "bad");
  ready.title = st.reason || "";
  const werr = document.getElementById("worker-error");
  const problem = st.error || (st.degraded ? st.reason : "") || st.last_commit_error || "";
  werr.hidden = problem === "";
  werr.textContent = problem;

  const tasks = st.tasks || [];
  fill("tasks", tasks.map(t => {
    const r = row([t.id, t.thread, el("span", t.state, "state-" + t.state), t.held, restoreText(t.restore), restartText(t.restarts), t.last_error || "", actions(t)]);
    r.children[2].className = "state-cell";
    return r;
  }), "no tasks assigned to this worker");

  fill("standbys", (st.standbys || []).map(c =>
    row([c.id, c.thread, el("span", c.role, "state-" + c.role), c.lag === undefined ? "" : c.lag])),
  "no copies of other workers' tasks");

  const held = [];
  const channels = [];
  for (const t of tasks) {
    for (const c of t.channels || []) {
      channels.push(row([t.id, c.channel, c.frontier, c.committed, c.lag === undefined ? "" : c.lag, c.held]));
      if (c.blocked) {
        const since = c.blocked_since ? new Date(c.blocked_since).toLocaleTimeString() : "";
        held.push(row([t.id, c.channel, c.held, c.waiting_for, c.waiting_offset, since]));
      }
    }
  }
  fill("held", held, "nothing is held");
  fill("channels", channels, "no input channels");
  document.getElementById("refreshed").textContent = "refreshed " + new Date().toLocaleTimeString();
}

async function refresh() {
  try {
    const res = await fetch("/status");
    render(await res.json());
  } catch (e) {
    document.getElementById("refreshed").textContent = "worker unreachable: " + e;
  }
}

// show renders a value of a store: JSON as JSON, text when it reads as
// text, a number when it is 8 bytes (a Kafka long), hex otherwise.
function show(b64, json) {
  if (json !== undefined && json !== null) return JSON.stringify(json);
  const bytes = Uint8Array.from(atob(b64 || ""), c => c.charCodeAt(0));
  if (bytes.length === 8) {
    return new DataView(bytes.buffer).getBigInt64(0).toString();
  }
  const text = new TextDecoder("utf-8", { fatal: false }).decode(bytes);
  if (/^[\x20-\x7e\u00a0-\uffff\t\n]*$/.test(text)) return text;
  return Array.from(bytes, x => x.toString(16).padStart(2, "0")).join(" ");
}

async function ask(ev) {
  ev.preventDefault();
  const select = document.getElementById("query-store");
  const store = select.value;
  // A window store answers one key's windows (by default those that
  // started in the last hour); a key-value store a get or a prefix.
  const windowed = select.selectedOptions[0]?.dataset.kind === "window";
  const versioned = select.selectedOptions[0]?.dataset.kind === "versioned";
  const kind = windowed ? "windows" : document.getElementById("query-kind").value;
  const key = document.getElementById("query-key").value;
  const ask = { get: "get?key=", range: "range?prefix=", windows: "windows?key=", versions: "versions?key=" }[kind];
  let path = ask + encodeURIComponent(key);
  const asOf = document.getElementById("query-asof").value.trim();
  if (versioned && kind === "get" && asOf !== "") path += "&as_of=" + encodeURIComponent(asOf);
  const res = await fetch("/stores/" + encodeURIComponent(store) + "/" + path);
  if (!res.ok) {
    fill("answer", [], (await res.text()).trim());
    return;
  }
  const a = await res.json();
  let rows;
  // A version is shown with when it was put and when the next took over.
  const when = v => v.timestamp ? " @ " + v.timestamp + (v.valid_to ? " to " + v.valid_to : "") : "";
  if (kind === "get") {
    rows = a.found ? [row([key + when(a), show(a.value, a.value_json), (a.partitions || []).join(", ")])] : [];
  } else if (kind === "versions") {
    rows = (a.entries || []).map(e => row([show(e.key) + when(e), show(e.value, e.value_json), e.partition]));
  } else if (kind === "windows") {
    rows = (a.entries || []).map(e => row([show(e.key) + " @ " + e.start + (e.end ? " to " + e.end : ""), show(e.value, e.value_json), e.partition]));
  } else {
    rows = (a.entries || []).map(e => row([show(e.key), show(e.value, e.value_json), e.partition]));
  }
  fill("answer", rows, { get: "no such key", range: "no keys", windows: "no windows since " + a.since, versions: "no versions" }[kind]);
}

async function drawTopology() {
  const res = await fetch("/topology");
  const topo = await res.json();
  const target = document.getElementById("diagram");
  mermaid.initialize({ startOnLoad: false, securityLevel: "strict" });
  const { svg } = await mermaid.render("topology-svg", topo.mermaid);
  target.innerHTML = svg;
  target.setAttribute("data-topology", topo.name);
  const select = document.getElementById("query-store");
  for (const st of topo.stores || []) {
    if (st.kind !== "key-value" && st.kind !== "window" && st.kind !== "versioned") continue;
    const label = { window: st.name + " (windows, last hour)", versioned: st.name + " (versioned)" }[st.kind] || st.name;
    const o = el("option", label);
    o.value = st.name;
    o.dataset.kind = st.kind;
    select.appendChild(o);
  }
}

document.getElementById("query").addEventListener("submit", e => ask(e).catch(err => fill("answer", [], String(err))));
// A window store is asked for one key's windows: the get/prefix choice
// does not apply to it.
document.getElementById("query-store").addEventListener("change", e => {
  document.getElementById("query-kind").disabled = e.target.selectedOptions[0]?.dataset.kind === "window";
});

drawTopology().catch(e => { document.getElementById("diagram").textContent = "could not draw the topology: " + e; });
refresh();
setInterval(refresh, refreshEvery);
