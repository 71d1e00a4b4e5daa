// The Kungfu console (docs/console.md): a read-only view of the cluster and of one agent.
//
// Rules this file keeps, because the page shows participant content (spec L6):
// - Every value from the server reaches the page through textContent (the `text` and `el`
//   helpers below); nothing here parses markup (no HTML property or insertion method is used:
//   tests/console.rs checks the served file), and nothing builds a URL from data.
// - Keys live in sessionStorage (this tab only) and leave it only as an `Authorization: Bearer`
//   header to this origin's own API. No cookie is set; no key is ever put in a URL.
// - Only read tools are called (`/ui/api/tools/<tool>`); the server refuses the others anyway.
"use strict";

const REFRESH_MS = 2000;
const AGENT_KEY = "kungfu.console.agentKey";
const OPERATOR_TOKEN = "kungfu.console.operatorToken";

// --- DOM helpers: text only -------------------------------------------------------------------

function $(id) {
  return document.getElementById(id);
}

/** An element with text content (never parsed as HTML) and optional class. */
function el(tag, textValue, className) {
  const node = document.createElement(tag);
  if (textValue !== undefined && textValue !== null) node.textContent = String(textValue);
  if (className) node.className = className;
  return node;
}

function clear(node) {
  while (node.firstChild) node.removeChild(node.firstChild);
}

function setStatus(id, message, isError) {
  const node = $(id);
  node.textContent = message;
  node.classList.toggle("error", Boolean(isError));
}

function timeOf(micros) {
  if (micros === undefined || micros === null || micros === 0) return "";
  return new Date(Number(micros) / 1000).toLocaleString();
}

/** "3m 12s left" / "late by 5s", for a due time in unix microseconds. */
function countdown(dueMicros, nowMs) {
  const leftMs = Number(dueMicros) / 1000 - nowMs;
  const abs = Math.abs(leftMs);
  const s = Math.floor(abs / 1000) % 60;
  const m = Math.floor(abs / 60000) % 60;
  const h = Math.floor(abs / 3600000);
  const span = (h ? h + "h " : "") + (h || m ? m + "m " : "") + s + "s";
  return leftMs >= 0 ? span + " left" : "late by " + span;
}

/** `OBLIGATION_KIND_RESPONSE` as `response`. */
function enumName(value, prefix) {
  if (typeof value !== "string") return value === undefined ? "" : String(value);
  return value.startsWith(prefix) ? value.slice(prefix.length).toLowerCase() : value;
}

// --- The API ----------------------------------------------------------------------------------

class Refused extends Error {
  constructor(body, status) {
    const e = (body && body.error) || {};
    super((e.code ? e.code + ": " : "") + (e.message || "HTTP " + status));
    this.code = e.code;
    this.nextStep = e.next_step;
  }
}

async function answerOf(response) {
  let body = null;
  try {
    body = await response.json();
  } catch (_) {
    body = null;
  }
  if (!response.ok || !body || body.error) throw new Refused(body, response.status);
  return body;
}

/** One read tool of the MCP registry, as the agent whose key this tab holds. */
async function tool(name, args) {
  const headers = { "Content-Type": "application/json" };
  const key = sessionStorage.getItem(AGENT_KEY);
  if (key) headers.Authorization = "Bearer " + key;
  const response = await fetch("api/tools/" + encodeURIComponent(name), {
    method: "POST",
    headers,
    body: JSON.stringify(args || {}),
    credentials: "omit",
    cache: "no-store",
  });
  return (await answerOf(response)).result;
}

async function clusterView() {
  const headers = {};
  const token = sessionStorage.getItem(OPERATOR_TOKEN);
  if (token) headers.Authorization = "Bearer " + token;
  const response = await fetch("api/cluster", { headers, credentials: "omit", cache: "no-store" });
  return answerOf(response);
}

// --- Cluster ----------------------------------------------------------------------------------

function cell(row, value, className) {
  row.appendChild(el("td", value === undefined || value === null ? "–" : value, className));
}

function drawCluster(view) {
  const body = $("cluster-table").querySelector("tbody");
  clear(body);
  for (const n of view.nodes) {
    const row = document.createElement("tr");
    row.dataset.nodeId = String(n.node_id);
    row.dataset.role = n.role;
    if (view.leader !== null && n.node_id === view.leader) row.classList.add("leader");
    if (n.reachable === false) row.classList.add("unreachable");
    cell(row, n.node_id, "num");
    const roleText = n.node_id === view.leader ? "leader ★" : n.role;
    cell(row, roleText, "role role-" + n.role);
    cell(row, n.term, "num");
    cell(row, n.leader_id, "num");
    cell(row, n.last_log_index, "num");
    cell(row, n.committed_index, "num");
    cell(row, n.applied_index, "num");
    cell(row, n.snapshot_index, "num");
    cell(row, n.lag_entries, "num");
    cell(row, n.voter ? "voter" : "learner");
    const addr = el("td", n.api_addr || "");
    if (n.error) addr.title = n.error;
    row.appendChild(addr);
    body.appendChild(row);
    if (n.error) {
      const why = document.createElement("tr");
      why.className = "unreachable detail";
      const td = el("td", "node " + n.node_id + ": " + n.error);
      td.colSpan = 11;
      why.appendChild(td);
      body.appendChild(why);
    }
  }
  const m = view.membership;
  $("cluster-membership").textContent =
    "voters: " + (m.voters.join(", ") || "none") +
    " · learners: " + (m.learners.join(", ") || "none") +
    (m.joint ? " · joint configuration (a change in progress)" : "") +
    (m.committed ? "" : " · membership not yet committed");
  const leader = view.leader === null ? "no leader known" : "node " + view.leader + " leads (term " + view.leader_term + ")";
  setStatus(
    "cluster-status",
    "cluster " + view.cluster_id + " · " + leader + " · answered by node " + view.answered_by +
      " · refreshed " + new Date().toLocaleTimeString(),
    false,
  );
}

async function refreshCluster() {
  try {
    drawCluster(await clusterView());
  } catch (e) {
    setStatus("cluster-status", "cluster view refused or unavailable: " + e.message, true);
  }
}

// --- Agent ------------------------------------------------------------------------------------

function obligationText(ref) {
  if (!ref) return "";
  if (ref.response) return "response to " + ref.response.thread + " entry " + ref.response.entry;
  for (const k of ["assignment_delivery", "assignment_judgment", "engagement_delivery", "engagement_judgment"]) {
    if (ref[k]) return k.replace("_", " ") + " " + ref[k];
  }
  return JSON.stringify(ref);
}

function drawTurn(page) {
  const body = $("turn-table").querySelector("tbody");
  clear(body);
  const items = page.items || [];
  for (const item of items) {
    const row = document.createElement("tr");
    row.className = "turn-item";
    const obligation = obligationText(item.obligation);
    row.dataset.obligation = obligation;
    cell(row, obligation);
    cell(row, enumName(item.kind, "OBLIGATION_KIND_"));
    cell(row, item.object);
    cell(row, enumName(item.next, "NEXT_STEP_"));
    cell(row, timeOf(item.arose_at_unix_micros));
    cell(row, item.due_at_unix_micros ? timeOf(item.due_at_unix_micros) : "no deadline");
    const left = el("td", "", "countdown");
    if (item.due_at_unix_micros) left.dataset.due = String(item.due_at_unix_micros);
    row.appendChild(left);
    body.appendChild(row);
  }
  $("turn-empty").hidden = items.length > 0;
  tickCountdowns();
}

function tickCountdowns() {
  const now = Date.now();
  for (const node of document.querySelectorAll(".countdown")) {
    if (!node.dataset.due) {
      node.textContent = "–";
      continue;
    }
    const leftMs = Number(node.dataset.due) / 1000 - now;
    node.textContent = countdown(node.dataset.due, now);
    node.classList.toggle("late", leftMs < 0);
    node.classList.toggle("soon", leftMs >= 0 && leftMs < 60000);
  }
}

function drawOpportunities(page) {
  const body = $("opportunities-table").querySelector("tbody");
  clear(body);
  const items = page.items || [];
  for (const o of items) {
    const row = document.createElement("tr");
    cell(row, o.assignment ? "assignment" : "Task");
    cell(row, o.assignment || o.task);
    cell(row, o.object);
    cell(row, timeOf(o.arose_at_unix_micros));
    body.appendChild(row);
  }
  $("opportunities-empty").hidden = items.length > 0;
}

async function refreshAgent() {
  if (!sessionStorage.getItem(AGENT_KEY)) return;
  try {
    const [turn, opportunities] = await Promise.all([tool("turn_get", {}), tool("opportunities_get", {})]);
    drawTurn(turn);
    drawOpportunities(opportunities);
    const n = (turn.items || []).length;
    // One page of the turn (the server's default size); say so when it has more.
    const more = turn.next_cursor ? " (the oldest " + n + "; more are owed)" : "";
    setStatus("agent-status", n + " obligation(s) owed" + more + " · refreshed " + new Date().toLocaleTimeString(), false);
  } catch (e) {
    setStatus("agent-status", e.message + (e.nextStep ? " (next step: " + e.nextStep + ")" : ""), true);
  }
}

// --- Inspect: any read result as a tree of text ------------------------------------------------

/** A JSON value as nested definition lists; strings (participant content included) as text. */
function tree(value, key) {
  if (value === null || value === undefined) return el("span", "–");
  if (Array.isArray(value)) {
    if (value.length === 0) return el("span", "none");
    const list = document.createElement("dl");
    value.forEach((v, i) => {
      list.appendChild(el("dt", "#" + (i + 1)));
      const dd = document.createElement("dd");
      dd.appendChild(tree(v, key));
      list.appendChild(dd);
    });
    return list;
  }
  if (typeof value === "object") {
    const list = document.createElement("dl");
    for (const [k, v] of Object.entries(value)) {
      list.appendChild(el("dt", k));
      const dd = document.createElement("dd");
      dd.appendChild(tree(v, k));
      list.appendChild(dd);
    }
    return list;
  }
  if (typeof value === "number" && /_unix_micros$/.test(key || "") && value > 0) {
    return el("span", value + " (" + timeOf(value) + ")");
  }
  // Content fields hold participant text: shown apart, and as text.
  const isContent = key === "content" || key === "body" || key === "text";
  return el("span", value, isContent ? "content" : undefined);
}

const INSPECT_ARGS = {
  working_set_get: (id) => ({ object: id }),
  thread_timeline: (id) => ({ thread: id }),
  mailbox_get: (id) => ({ thread: id }),
  task_get: (id, version) => ({ task: id, version }),
  collective_get: (id, entry) => ({ thread: id, header: entry, include_outputs: true }),
  barrier_get: (id, entry) => ({ thread: id, entry }),
  entry_get: (id, entry) => ({ thread: id, entry }),
  assignment_get: (id) => ({ assignment: id }),
  memory_get: (id) => ({ memory: id }),
};

let inspecting = null;

async function refreshInspect() {
  if (!inspecting || !sessionStorage.getItem(AGENT_KEY)) return;
  const { view, id, entry } = inspecting;
  try {
    const result = await tool(view, INSPECT_ARGS[view](id, entry));
    const target = $("inspect-result");
    clear(target);
    target.appendChild(tree(result, view));
    setStatus("inspect-status", view + " " + id + (entry ? " entry " + entry : "") + " · refreshed " +
      new Date().toLocaleTimeString(), false);
  } catch (e) {
    clear($("inspect-result"));
    setStatus("inspect-status", e.message + (e.nextStep ? " (next step: " + e.nextStep + ")" : ""), true);
  }
}

// --- Wiring -----------------------------------------------------------------------------------

/** `refresh` run at most once at a time: a slow answer is not overtaken by the next tick. */
function oneAtATime(refresh) {
  let running = false;
  return async () => {
    if (running) return;
    running = true;
    try {
      await refresh();
    } finally {
      running = false;
    }
  };
}

function keyForm(formId, inputId, forgetId, storageKey, after) {
  const input = $(inputId);
  $(formId).addEventListener("submit", (event) => {
    event.preventDefault();
    const value = input.value.trim();
    if (value) sessionStorage.setItem(storageKey, value);
    input.value = "";
    input.placeholder = value ? "(in use; stored in this tab only)" : input.placeholder;
    after();
  });
  $(forgetId).addEventListener("click", () => {
    sessionStorage.removeItem(storageKey);
    input.value = "";
    after();
  });
  if (sessionStorage.getItem(storageKey)) input.placeholder = "(in use; stored in this tab only)";
}

function start() {
  keyForm("operator-form", "operator-token", "operator-forget", OPERATOR_TOKEN, refreshCluster);
  keyForm("agent-form", "agent-key", "agent-forget", AGENT_KEY, () => {
    if (!sessionStorage.getItem(AGENT_KEY)) {
      clear($("turn-table").querySelector("tbody"));
      clear($("opportunities-table").querySelector("tbody"));
      clear($("inspect-result"));
      setStatus("agent-status", "Enter an agent key to see its turn.", false);
      return;
    }
    setStatus("agent-status", "Loading…", false);
    refreshAgent();
    refreshInspect();
  });
  $("inspect-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const id = $("inspect-id").value.trim();
    const entryText = $("inspect-entry").value.trim();
    inspecting = id ? { view: $("inspect-view").value, id, entry: entryText ? Number(entryText) : undefined } : null;
    if (!sessionStorage.getItem(AGENT_KEY)) setStatus("inspect-status", "Enter an agent key first.", true);
    refreshInspect();
  });
  refreshCluster();
  refreshAgent();
  // Live: every view re-reads on a timer (each read is one bounded call); countdowns tick locally.
  setInterval(oneAtATime(refreshCluster), REFRESH_MS);
  setInterval(oneAtATime(refreshAgent), REFRESH_MS);
  setInterval(oneAtATime(refreshInspect), 2 * REFRESH_MS);
  setInterval(tickCountdowns, 1000);
}

document.addEventListener("DOMContentLoaded", start);
