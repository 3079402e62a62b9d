// The connect worker's page: every connector of the cluster with its
// tasks (and what a task says of where it stands: a capture's slot and
// positions), from GET /connectors?expand=status&expand=info, every second;
// pause, resume and restart through the REST API.
"use strict";

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  for (const c of children) e.append(c);
  return e;
}

async function act(name, method, path) {
  const res = await fetch("/connectors/" + encodeURIComponent(name) + path, { method });
  if (!res.ok) {
    document.getElementById("error").textContent = method + " " + path + ": " + (await res.text());
  }
  refresh();
}

async function refresh() {
  let all;
  try {
    const res = await fetch("/connectors?expand=status&expand=info");
    all = await res.json();
    document.getElementById("error").textContent = "";
  } catch (e) {
    document.getElementById("error").textContent = "the worker does not answer: " + e;
    return;
  }
  const body = document.querySelector("#connectors tbody");
  body.replaceChildren();
  for (const name of Object.keys(all).sort()) {
    const { status, info } = all[name];
    const tasks = el("td", {});
    for (const t of status.tasks) {
      const line = el("div", { "data-task": String(t.id) }, "task " + t.id + " on " + t.worker_id + ": ",
        el("span", { class: t.state }, t.state));
      if (t.facts) {
        const facts = el("div", { class: "facts" });
        for (const k of Object.keys(t.facts).sort()) {
          facts.append(el("span", { "data-fact": k }, k + ": " + t.facts[k]), " ");
        }
        line.append(facts);
      }
      if (t.trace) line.append(el("div", { class: "trace" }, t.trace));
      tasks.append(line);
    }
    const buttons = el("td", {},
      button("pause", () => act(name, "PUT", "/pause")),
      button("resume", () => act(name, "PUT", "/resume")),
      button("restart", () => act(name, "POST", "/restart?includeTasks=true")));
    body.append(el("tr", { "data-connector": name },
      el("td", {}, name), el("td", {}, status.type), el("td", {}, info.config["connector.class"] || ""),
      el("td", {}, el("span", { class: status.connector.state + " state" }, status.connector.state)), tasks, buttons));
  }
}

function button(label, onclick) {
  const b = el("button", { "data-action": label }, label);
  b.addEventListener("click", onclick);
  return b;
}

refresh();
setInterval(refresh, 1000);
