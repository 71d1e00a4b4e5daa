// The Kungfu console (docs/console.md): a read-only view of the cluster and of one agent.
//
// Rules this file keeps, because the page shows participant content (spec L6):
// - Every value from the server reaches the page through textContent (the `text` and `el`
//   helpers below); nothing here parses markup (no HTML property or insertion method is used:
//   tests/console.rs checks the served file), and nothing builds a URL from data.
// - Keys live in sessionStorage (this tab only) and leave it only as an `Authorization: Bearer`
//   header to this origin's own API. No cookie is set; no key is ever put in a URL.
// - Only read tools are called (`/ui/api/tools/<tool>`); the server refuses the others anyway.
// - The agent view is live from the node's watch feeds (`/ui/api/watch/...`, Server-Sent Events
//   read with fetch, so the key travels as a header and never in a URL): each event makes the
//   page re-read what changed through the read tools. A dropped stream is reopened from its last
//   event id (`Last-Event-ID`), so nothing is missed; only while the turn's stream is down does
//   the page poll instead (FALLBACK_POLL_MS).
"use strict";

const REFRESH_MS = 2000; // the cluster view (no feed carries it)
const FALLBACK_POLL_MS = 10000; // the turn, only while its stream is down
const SLOW_MS = 15000; // what no feed carries to this agent: opportunities, others' assignment states
const STALE_MS = 45000; // a stream silent this long (3 keep-alives) is dead: reopen it
const RETRY_MS = [1000, 2000, 5000, 10000]; // waits before reopening a dropped stream
const PAGE = 50; // entries a thread view shows (the newest)
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

// --- Agent: turn and opportunities -----------------------------------------------------------

/** A button that opens an object's view; its label is the id, as text. */
function openButton(id, view, entry) {
  const b = el("button", id, "link");
  b.type = "button";
  b.addEventListener("click", () => openObject(view || viewOf(id), id, entry));
  return b;
}

/** The view an id opens by default. */
function viewOf(id) {
  if (/^th_/.test(id)) return "thread";
  if (/^task_/.test(id)) return "task";
  if (/^asg_/.test(id)) return "assignment";
  if (/^mem_/.test(id)) return "memory";
  if (/^rec_/.test(id)) return "record";
  return "agent";
}

function obligationText(ref) {
  if (!ref) return "";
  if (ref.response) return "response to " + ref.response.thread + " entry " + ref.response.entry;
  for (const k of ["assignment_delivery", "assignment_judgment", "engagement_delivery", "engagement_judgment"]) {
    if (ref[k]) return k.replace("_", " ") + " " + ref[k];
  }
  return JSON.stringify(ref);
}

/** A countdown cell, ticked by tickCountdowns. */
function countdownCell(dueMicros) {
  const left = el("td", "", "countdown");
  if (dueMicros) left.dataset.due = String(dueMicros);
  return left;
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
    const object = document.createElement("td");
    if (item.object) object.appendChild(openButton(item.object));
    row.appendChild(object);
    cell(row, enumName(item.next, "NEXT_STEP_"));
    cell(row, timeOf(item.arose_at_unix_micros));
    cell(row, item.due_at_unix_micros ? timeOf(item.due_at_unix_micros) : "no deadline");
    row.appendChild(countdownCell(item.due_at_unix_micros));
    body.appendChild(row);
  }
  $("turn-empty").hidden = items.length > 0;
  drawWakeFailed(page.wake_failed || []);
  tickCountdowns();
}

/** docs/wake.md: the agent's webhooks the server gave up on, shown with its turn (as text). */
function drawWakeFailed(targets) {
  const list = $("wake-failed");
  clear(list);
  for (const t of targets) {
    const f = t.failed || {};
    const item = el("li", "Wake target " + t.id + " (" + t.url + ") FAILED at #" + f.sequence + " (" +
      timeOf(f.at_unix_micros) + "): " + f.error + ". Nothing more is sent to it: set a new target and remove this one.");
    item.className = "wake-failed";
    item.dataset.target = t.id;
    list.appendChild(item);
  }
  list.hidden = targets.length === 0;
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
    const id = document.createElement("td");
    id.appendChild(openButton(o.assignment || o.task));
    row.appendChild(id);
    const object = document.createElement("td");
    if (o.object) object.appendChild(openButton(o.object));
    row.appendChild(object);
    cell(row, timeOf(o.arose_at_unix_micros));
    body.appendChild(row);
  }
  $("opportunities-empty").hidden = items.length > 0;
}

function refusalText(e) {
  return e.message + (e.nextStep ? " (next step: " + e.nextStep + ")" : "");
}

/** Re-reads the turn; `why` (stream, poll, key) is kept on the table for whoever asks. */
async function readTurn(why) {
  if (!sessionStorage.getItem(AGENT_KEY)) return;
  try {
    const turn = await tool("turn_get", {});
    drawTurn(turn);
    $("turn-table").dataset.refreshedBy = why;
    const n = (turn.items || []).length;
    // One page of the turn (the server's default size); say so when it has more.
    const more = turn.next_cursor ? " (the oldest " + n + "; more are owed)" : "";
    setStatus("agent-status", n + " obligation(s) owed" + more + " · read " + new Date().toLocaleTimeString() +
      " (" + why + ")", false);
  } catch (e) {
    setStatus("agent-status", refusalText(e), true);
  }
}

async function readOpportunities() {
  if (!sessionStorage.getItem(AGENT_KEY)) return;
  try {
    drawOpportunities(await tool("opportunities_get", {}));
  } catch (_) {
    // The turn's status line already says why reads fail.
  }
}

// --- Live: the watch feeds as Server-Sent Events over fetch -------------------------------------

/**
 * One watch feed, kept open: reopened from its last event id when it drops, until stopped.
 * `onEvent(name, data)` runs for each event; `onState(state, detail, code)` when the connection
 * changes (connecting, live, reconnecting, refused, closed; `code` is a refusal's).
 */
class Feed {
  constructor(path, onEvent, onState) {
    this.path = path;
    this.onEvent = onEvent;
    this.onState = onState;
    this.lastId = "";
    this.stopped = false;
    this.controller = null;
    this.run();
  }

  stop() {
    this.stopped = true;
    if (this.controller) this.controller.abort();
  }

  async run() {
    let failures = 0;
    this.onState("connecting", "");
    while (!this.stopped) {
      const outcome = await this.once();
      if (this.stopped) return;
      if (outcome.final) {
        this.onState(outcome.state, outcome.detail, outcome.code);
        return;
      }
      // A stream the server ended on schedule is reopened at once; a failure after a wait.
      failures = outcome.planned ? 0 : failures + 1;
      this.onState("reconnecting", outcome.detail);
      const wait = failures === 0 ? 0 : RETRY_MS[Math.min(failures - 1, RETRY_MS.length - 1)];
      await new Promise((r) => setTimeout(r, wait));
    }
  }

  /** One connection: resolves with how it ended. */
  async once() {
    const key = sessionStorage.getItem(AGENT_KEY);
    if (!key) return { final: true, state: "off", detail: "" };
    const controller = new AbortController();
    this.controller = controller;
    const headers = { Accept: "text/event-stream", Authorization: "Bearer " + key };
    if (this.lastId) headers["Last-Event-ID"] = this.lastId;
    let stale = null;
    const watchdog = () => {
      clearTimeout(stale);
      stale = setTimeout(() => controller.abort(), STALE_MS);
    };
    try {
      watchdog();
      const response = await fetch(this.path, { headers, credentials: "omit", cache: "no-store", signal: controller.signal });
      if (!response.ok) {
        const e = await answerOf(response).catch((x) => x);
        // A refusal no retry can change (a bad key, not a member, a bad resume point) is final.
        const final = ["UNAUTHENTICATED", "AGENT_INACTIVE", "NOT_FOUND", "INVALID_ARGUMENT", "LIMIT_EXCEEDED"].includes(e.code);
        return { final, state: "refused", detail: e.message, code: e.code };
      }
      if (this.stopped) return { final: true, state: "off", detail: "" };
      this.onState("live", "");
      const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
      let buffer = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return { detail: "the stream ended" };
        watchdog();
        buffer += value;
        let end;
        while ((end = buffer.indexOf("\n\n")) >= 0) {
          const frame = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const ended = this.frame(frame);
          if (ended) return ended;
        }
      }
    } catch (e) {
      return { detail: "the stream failed: " + e.message };
    } finally {
      clearTimeout(stale);
      controller.abort();
    }
  }

  /** One SSE frame; an `end` event says how the stream ended. */
  frame(text) {
    let name = "message";
    let id = null;
    let data = "";
    for (const line of text.split("\n")) {
      if (line.startsWith(":")) continue; // a keep-alive
      const colon = line.indexOf(":");
      const field = colon < 0 ? line : line.slice(0, colon);
      const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
      if (field === "event") name = value;
      else if (field === "id") id = value;
      else if (field === "data") data += value;
    }
    if (!data) return null;
    let body;
    try {
      body = JSON.parse(data);
    } catch (_) {
      return null;
    }
    if (name === "end") {
      if (body.reason === "lifetime") return { planned: true, detail: "renewing the stream" };
      if (body.reason === "closed") return { final: true, state: "closed", detail: "the thread is closed" };
      const e = body.error || {};
      const final = ["UNAUTHENTICATED", "AGENT_INACTIVE", "NOT_FOUND", "LIMIT_EXCEEDED"].includes(e.code);
      return { final, state: "refused", detail: (e.code || "") + ": " + (e.message || ""), code: e.code };
    }
    if (this.stopped) return { final: true, state: "off", detail: "" };
    if (id !== null && id !== "") this.lastId = id;
    this.onEvent(name, body);
    return null;
  }
}

/** The page's live machinery: the turn's feed, the opened thread's feed, and the fallbacks. */
const live = {
  turn: null,
  thread: null, // { id, feed }: the opened view's thread, or record (its id says which)
  poll: null, // the fallback poll's timer, only while the turn's stream is down
  polls: 0,
};

function showLive(state, detail) {
  const node = $("agent-live");
  node.dataset.state = state;
  node.dataset.polls = String(live.polls);
  const says = {
    off: "not watching",
    connecting: "connecting to the watch feed…",
    live: "● live: updated from the watch feed",
    reconnecting: "reconnecting to the watch feed",
    refused: "the watch feed refused",
    closed: "the watch feed ended",
  };
  node.textContent = (says[state] || state) + (detail ? " — " + detail : "");
}

/** The fallback poll runs exactly while the turn's stream is not live. */
function setFallback(on) {
  if (on && !live.poll) {
    live.poll = setInterval(() => {
      live.polls += 1;
      $("agent-live").dataset.polls = String(live.polls);
      refreshTurnOnce("poll");
      refreshOpenOnce("poll");
    }, FALLBACK_POLL_MS);
  } else if (!on && live.poll) {
    clearInterval(live.poll);
    live.poll = null;
  }
}

/** `refresh(arg)` run one at a time; calls made while it runs fold into one more run after it. */
function coalesced(refresh) {
  let running = false;
  let again = null;
  const run = async (arg) => {
    if (running) {
      again = arg === undefined ? "again" : arg;
      return;
    }
    running = true;
    try {
      await refresh(arg);
    } finally {
      running = false;
      if (again !== null) {
        const next = again;
        again = null;
        run(next);
      }
    }
  };
  return run;
}

const refreshTurnOnce = coalesced(async (why) => {
  await readTurn(why || "stream");
  await readOpportunities();
});
const refreshOpenOnce = coalesced((why) => drawOpen(why || "open"));
const refreshOpportunitiesOnce = coalesced(() => readOpportunities());

function startWatching() {
  stopWatching();
  if (!sessionStorage.getItem(AGENT_KEY)) return;
  live.turn = new Feed(
    "api/watch/turn",
    () => {
      // Any change of the turn may show in the opened view too (an assignment taken, a reply).
      refreshTurnOnce("stream");
      refreshOpenOnce();
    },
    (state, detail, code) => {
      // Polling is the fallback while the stream is down, not for a key the node refuses.
      const keyRefused = ["UNAUTHENTICATED", "AGENT_INACTIVE"].includes(code);
      setFallback(state === "reconnecting" || (state === "refused" && !keyRefused));
      const polling = live.poll ? "polling every " + FALLBACK_POLL_MS / 1000 + " s meanwhile" : "";
      showLive(state, [detail, polling].filter(Boolean).join("; "));
    },
  );
  watchOpened();
}

function stopWatching() {
  if (live.turn) live.turn.stop();
  live.turn = null;
  if (live.thread) live.thread.feed.stop();
  live.thread = null;
  setFallback(false);
  showLive("off", "");
}

/** What the opened view follows while it is open: its thread's entries, or a record's revs. */
function watchedOfOpened() {
  if (!opened) return null;
  if (opened.view === "record") return { id: opened.id, path: "api/watch/record/", what: "revs" };
  if (["thread", "mailbox", "collective", "barrier", "entry"].includes(opened.view)) {
    return { id: opened.id, path: "api/watch/thread/", what: "entries" };
  }
  return null;
}

/** The opened view's thread (or record), watched while it is open; each event re-reads the view. */
function watchOpened() {
  const target = watchedOfOpened();
  const key = target ? target.path + target.id : null;
  if (live.thread && live.thread.key === key) return;
  if (live.thread) live.thread.feed.stop();
  live.thread = null;
  const indicator = $("object-live");
  indicator.dataset.state = "off";
  indicator.textContent = "";
  if (!target || !sessionStorage.getItem(AGENT_KEY)) return;
  const feed = new Feed(
    target.path + encodeURIComponent(target.id),
    (name) => {
      refreshOpenOnce("stream");
      // A new entry may carry an assignment: an opportunity for this agent.
      if (name === "thread") refreshOpportunitiesOnce();
    },
    (state, detail) => {
      const node = $("object-live");
      node.dataset.state = state;
      node.textContent = state === "live" ? "● following " + target.id + "'s " + target.what : state + (detail ? " — " + detail : "");
    },
  );
  live.thread = { id: target.id, key, feed };
}

// --- Object views: each a purpose-built page of text, from the read tools ----------------------

let opened = null; // { view, id, entry }
const finalBarriers = new Map(); // "th_1#3" -> a released or broken barrier (final: never re-read)
const finalAssignments = new Map(); // asg id -> an ended assignment (final)
const recordEvents = new Map(); // rec id -> its events read so far, in rev order (append-only)
const noteTexts = new Map(); // "rec_1#n1" -> a note's text (a note never changes)

function openObject(view, id, entry) {
  opened = { view, id, entry };
  $("open-view").value = view;
  $("open-id").value = id;
  $("open-entry").value = entry === undefined ? "" : String(entry);
  watchOpened();
  refreshOpenOnce();
}

function section(title) {
  const s = el("section", null, "panel");
  s.appendChild(el("h4", title));
  return s;
}

/** A table with a head row of `columns`; rows are appended to its tbody. */
function table(columns, className) {
  const t = el("table", null, className);
  const head = document.createElement("tr");
  for (const c of columns) head.appendChild(el("th", c));
  t.appendChild(el("thead")).appendChild(head);
  t.appendChild(el("tbody"));
  return t;
}

function row(tableNode, values) {
  const tr = document.createElement("tr");
  for (const v of values) {
    if (v instanceof Node) {
      const td = document.createElement("td");
      td.appendChild(v);
      tr.appendChild(td);
    } else {
      cell(tr, v);
    }
  }
  tableNode.querySelector("tbody").appendChild(tr);
  return tr;
}

/** Participant content, shown apart and as text. */
function contentNode(value) {
  if (value === undefined || value === null) return el("span", "–", "muted");
  if (typeof value === "object") return el("span", "(" + Object.keys(value).join(", ") + ": not text)", "muted");
  return el("div", value, "content");
}

function facts(pairs) {
  const dl = el("dl", null, "facts");
  for (const [k, v] of pairs) {
    dl.appendChild(el("dt", k));
    const dd = document.createElement("dd");
    if (v instanceof Node) dd.appendChild(v);
    else dd.textContent = v === undefined || v === null || v === "" ? "–" : String(v);
    dl.appendChild(dd);
  }
  return dl;
}

function microsSpan(micros) {
  if (!micros) return "–";
  const s = Number(micros) / 1e6;
  if (s % 86400 === 0) return s / 86400 + " d";
  if (s % 3600 === 0) return s / 3600 + " h";
  if (s % 60 === 0) return s / 60 + " min";
  return s + " s";
}

/** An assignment's (or engagement's) state: what it is, and its running deadline if any. */
function lifecycle(x) {
  if (x.open) return { state: "open (not taken)", due: null };
  if (x.taken) return { state: "taken: delivery due", due: x.taken.delivery_due_unix_micros };
  if (x.delivered) return { state: "delivered: judgment due", due: x.delivered.judgment_due_unix_micros };
  if (x.ended) return { state: "ended: " + enumName(x.ended.outcome, "ASSIGNMENT_OUTCOME_").replace(/^engagement_outcome_/, ""), due: null };
  return { state: "", due: null };
}

function engagementLifecycle(x) {
  const s = x.state || x;
  if (s.open) return { state: "open: delivery due", due: s.open.delivery_due_unix_micros };
  if (s.delivered) return { state: "delivered: judgment due", due: s.delivered.judgment_due_unix_micros };
  if (s.ended) return { state: "ended: " + enumName(s.ended.outcome, "ENGAGEMENT_OUTCOME_"), due: null };
  return lifecycle(x);
}

function assignmentRow(t, a) {
  const { state, due } = lifecycle(a);
  const tr = row(t, [openButton(a.id, "assignment"), a.entry, a.creator, a.addressee, state, due ? timeOf(due) : "–"]);
  tr.appendChild(countdownCell(due));
  tr.dataset.assignment = a.id;
  return tr;
}

/** Reads the barrier of every entry that owes responses (final ones once), in parallel. */
async function barriersOf(thread, entries) {
  const asked = entries.filter((e) => (e.responders || []).length > 0);
  const out = new Map();
  await Promise.all(asked.map(async (e) => {
    const k = thread + "#" + e.seq;
    let b = finalBarriers.get(k);
    if (!b) {
      try {
        b = await tool("barrier_get", { thread, entry: e.seq });
      } catch (_) {
        return;
      }
      if (b.state !== "BARRIER_STATE_WAITING") finalBarriers.set(k, b);
    }
    out.set(e.seq, b);
  }));
  return out;
}

async function assignmentsOf(ids) {
  const out = new Map();
  await Promise.all(ids.map(async (id) => {
    let a = finalAssignments.get(id);
    if (!a) {
      try {
        a = await tool("assignment_get", { assignment: id });
      } catch (_) {
        return;
      }
      if (a.ended) finalAssignments.set(id, a);
    }
    out.set(id, a);
  }));
  return out;
}

/** The responses owed to one entry, from its barrier: each responder, marked by how it stands. */
function responsesNode(entry, barrier) {
  const span = el("span");
  const responders = entry.responders || [];
  if (responders.length === 0) return el("span", "–", "muted");
  for (const agent of responders) {
    const rank = barrier && (barrier.ranks || []).find((r) => r.member === agent);
    const arrival = rank ? enumName(rank.arrival, "BARRIER_ARRIVAL_") : "unknown";
    const owed = arrival === "pending";
    const text = agent + ": " + (owed ? "owed" : arrival + (rank && rank.replied_by_entry ? " by #" + rank.replied_by_entry : ""));
    const tag = el("span", text, owed ? "tag owed" : "tag");
    tag.dataset.responder = agent;
    span.appendChild(tag);
  }
  return span;
}

async function threadView(id) {
  const ws = await tool("working_set_get", { object: id });
  const t = ws.thread || {};
  const last = Number(t.last_entry || 0);
  const after = Math.max(0, last - PAGE);
  const timeline = await tool("thread_timeline", { thread: id, after, page_size: PAGE });
  const entries = timeline.entries || [];
  const records = t.records || [];
  const [barriers, assignments, writes] = await Promise.all([
    barriersOf(id, entries),
    assignmentsOf(entries.filter((e) => e.assignment).map((e) => e.assignment)),
    recordWritesOf(records),
  ]);
  const out = [];
  out.push(facts([
    ["thread", id],
    ["state", t.open ? "open" : "closed"],
    ["your role", enumName(ws.role, "ROLE_")],
    ["entries", last],
    ["open assignments", t.open_assignments],
    ["you may", (ws.available_actions || []).join(", ")],
  ]));

  const members = section("Members");
  const mt = table(["agent", "role"], "members");
  for (const m of t.members || []) row(mt, [m.agent, enumName(m.role, "ROLE_")]).dataset.agent = m.agent;
  members.appendChild(mt);
  out.push(members);

  const mine = section("Your obligations here");
  if ((ws.obligations || []).length === 0) mine.appendChild(el("p", "None.", "empty"));
  else {
    const ot = table(["obligation", "next step", "due", "left"]);
    for (const o of ws.obligations) {
      const tr = row(ot, [obligationText(o.obligation), enumName(o.next, "NEXT_STEP_"), o.due_at_unix_micros ? timeOf(o.due_at_unix_micros) : "no deadline"]);
      tr.appendChild(countdownCell(o.due_at_unix_micros));
    }
    mine.appendChild(ot);
  }
  out.push(mine);

  const rs = section("Shared records");
  if (records.length === 0) rs.appendChild(el("p", "None.", "empty"));
  else {
    const list = el("ul", null, "records");
    for (const r of records) {
      const li = el("li");
      li.dataset.record = r;
      li.appendChild(openButton(r, "record"));
      const last = (recordEvents.get(r) || []).slice(-1)[0];
      if (last) li.appendChild(el("span", " rev " + last.rev, "muted"));
      list.appendChild(li);
    }
    rs.appendChild(list);
  }
  out.push(rs);

  const tl = section("Timeline" + (after > 0 ? " (entries " + (after + 1) + "–" + last + ")" : ""));
  const tt = table(["#", "author", "posted", "reply to", "responses", "assignment", "record write", "pins"], "timeline");
  for (const e of entries) {
    const asg = e.assignment ? openButton(e.assignment, "assignment") : "–";
    const w = writes.get(Number(e.seq));
    const rec = w ? recordButton(w.record, w.rev) : "–";
    const tr = row(tt, [e.seq, e.author, timeOf(e.posted_at_unix_micros), e.reply_to || "–",
      responsesNode(e, barriers.get(e.seq)), asg, rec, e.pin ? e.pin.memory + " v" + e.pin.version : "–"]);
    tr.dataset.entry = String(e.seq);
    if (tr.querySelector(".owed")) tr.classList.add("owes");
  }
  tl.appendChild(tt);
  if (entries.length === 0) tl.appendChild(el("p", "No entries.", "empty"));
  out.push(tl);

  const as = section("Assignments (of the entries shown)");
  const at = table(["assignment", "entry", "creator", "addressee", "state", "due", "left"], "assignments");
  for (const e of entries) {
    const a = e.assignment && assignments.get(e.assignment);
    if (a) assignmentRow(at, a);
  }
  as.appendChild(at);
  if (!entries.some((e) => e.assignment)) as.appendChild(el("p", "None.", "empty"));
  out.push(as);
  return out;
}

async function mailboxView(id) {
  const ws = await tool("working_set_get", { object: id });
  const last = Number((ws.thread || {}).last_entry || 0);
  const after = Math.max(0, last - PAGE);
  const box = await tool("mailbox_get", { thread: id, after, page_size: PAGE });
  const out = [facts([["mailbox of", id], ["entries", last], ["shown", after > 0 ? "the newest " + PAGE : "all"]])];
  const list = el("div", null, "mailbox");
  for (const item of box.items || []) {
    const e = item.entry || {};
    const card = el("article", null, "mail");
    card.dataset.entry = String(e.seq);
    const labels = item.labels ? enumName(item.labels.taint, "TAINT_") + " · " + enumName(item.labels.scope, "SCOPE_") : "unlabeled";
    let mine = "";
    if (item.my_response) mine = item.my_response.ending ? "your response: ended" : "your response: owed";
    card.appendChild(el("p", "#" + e.seq + " · " + e.author + " · " + timeOf(e.posted_at_unix_micros) +
      (e.reply_to ? " · reply to #" + e.reply_to : "") + " · " + labels + (mine ? " · " + mine : ""), "meta"));
    if (item.held) card.appendChild(el("p", "held: the pinned version is quarantined", "muted"));
    else if (item.content_omitted) card.appendChild(el("p", "content over the page's bytes: open the entry to read it", "muted"));
    else card.appendChild(contentNode(item.content));
    if (item.my_response && !item.my_response.ending) card.classList.add("owes");
    list.appendChild(card);
  }
  if ((box.items || []).length === 0) list.appendChild(el("p", "No entries.", "empty"));
  out.push(list);
  return out;
}

async function taskView(id, version) {
  const ws = await tool("working_set_get", { object: id });
  const t = ws.task || {};
  const current = Number(t.current_version || 0);
  const out = [];
  const limit = t.max_adoptions === undefined ? "no limit" : t.adopted + " of " + t.max_adoptions;
  out.push(facts([
    ["Task", id],
    ["author", t.author],
    ["audience", t.restricted ? "restricted to named agents" : "open"],
    ["state", t.paused ? "paused (takes no new engagements)" : "accepting engagements"],
    ["contract", "version " + current],
    ["adoptions against the limit", limit],
    ["open engagements", t.open_engagements],
    ["you may", (ws.available_actions || []).join(", ")],
  ]));
  if (t.max_adoptions) {
    const meter = el("meter");
    meter.max = Number(t.max_adoptions);
    meter.value = Number(t.adopted || 0);
    meter.title = limit;
    out.push(meter);
  }
  // Contract versions: the one asked for, else the newest few.
  const versions = version ? [version] : Array.from({ length: Math.min(current, 5) }, (_, i) => current - i);
  const views = await Promise.all(versions.map((v) => tool("task_get", { task: id, version: v }).catch(() => null)));
  const cs = section("Contract versions");
  for (const view of views) {
    if (!view || !view.contract) continue;
    const c = view.contract.contract || {};
    const box = el("div", null, "contract");
    box.dataset.version = String(view.contract.version);
    box.appendChild(el("h5", "version " + view.contract.version + " · " + timeOf(view.contract.created_at_unix_micros)));
    box.appendChild(facts([
      ["delivery window", microsSpan(c.delivery_window_micros)],
      ["judgment window", microsSpan(c.judgment_window_micros)],
      ["judge", c.judge || "the author"],
      ["max adoptions", c.max_adoptions === undefined ? "no limit" : c.max_adoptions],
      ["on missing judgment", enumName(c.on_missing_judgment, "MISSING_JUDGMENT_")],
      ["inputs", (c.inputs || []).map((p) => p.memory + " v" + p.version).join(", ") || "none"],
      ["requirements", contentNode(c.requirements)],
      ["output structure", contentNode(c.output_structure)],
      ["acceptance", contentNode(c.acceptance)],
    ]));
    cs.appendChild(box);
  }
  out.push(cs);
  // Engagements this agent is party to with something owed (the read tools list no others).
  const ids = [...new Set((ws.obligations || []).map((o) => o.obligation && (o.obligation.engagement_delivery || o.obligation.engagement_judgment)).filter(Boolean))];
  const es = section("Your engagements with something owed");
  const et = table(["engagement", "agent", "contract", "judge", "state", "due", "left"], "engagements");
  for (const eid of ids) {
    try {
      const e = await tool("engagement_get", { engagement: eid });
      const { state, due } = engagementLifecycle(e);
      const tr = row(et, [eid, e.agent, "v" + e.contract_version, e.judge, state, due ? timeOf(due) : "–"]);
      tr.appendChild(countdownCell(due));
    } catch (_) {
      row(et, [eid, "", "", "", "not readable", "", ""]);
    }
  }
  es.appendChild(et);
  if (ids.length === 0) es.appendChild(el("p", "None.", "empty"));
  out.push(es);
  const hs = section("History (newest first)");
  const ht = table(["seq", "fact", "actor", "at"]);
  for (const h of ws.history || []) row(ht, [h.seq, h.fact, h.actor || "server", timeOf(h.at_unix_micros)]);
  hs.appendChild(ht);
  out.push(hs);
  return out;
}

/** A button that opens a record as of one rev: "rec_1 rev 3". */
function recordButton(record, rev) {
  const b = el("button", record + " rev " + rev, "link");
  b.type = "button";
  b.dataset.record = record;
  b.dataset.rev = String(rev);
  b.addEventListener("click", () => openObject("record", record, rev));
  return b;
}

/** A record's events, read on from the last one cached (revs are dense and never change). */
async function eventsOf(record) {
  const known = recordEvents.get(record) || [];
  let after = known.length ? Number(known[known.length - 1].rev) : 0;
  const got = [];
  for (let pages = 0; pages < 20; pages++) {
    const page = await tool("record_events_get", { record, after_rev: after, page_size: 100 });
    const events = page.events || [];
    got.push(...events);
    const next = Number(page.next_after_rev || 0);
    if (events.length === 0 || !next || next <= after) break;
    after = next;
  }
  const all = known.concat(got);
  recordEvents.set(record, all);
  return all;
}

/** The thread entries that are record writes: entry number -> { record, rev }. */
async function recordWritesOf(records) {
  const out = new Map();
  await Promise.all(records.map(async (r) => {
    try {
      for (const e of await eventsOf(r)) if (e.entry) out.set(Number(e.entry), { record: r, rev: e.rev });
    } catch (_) {
      // Not readable by this agent: its writes show as plain entries.
    }
  }));
  return out;
}

/** A body reference as text: "mem_4 v2", or an external store's digest. */
function referenceText(ref) {
  if (!ref) return "–";
  if (ref.pin) return ref.pin.memory + " v" + ref.pin.version;
  if (ref.external) return ref.external.store + ":" + ref.external.digest + " (" + ref.external.bytes + " bytes)";
  return "–";
}

function labelsText(labels) {
  if (!labels) return "–";
  return enumName(labels.taint, "TAINT_") + " · " + enumName(labels.scope, "SCOPE_");
}

/** A note's text (its pinned body), read once; null when it is not readable here. */
async function noteText(record, note) {
  const k = record + "#" + note.id;
  if (noteTexts.has(k)) return noteTexts.get(k);
  let text = null;
  try {
    const body = await tool("record_body_get", { record, note_id: note.id });
    text = body.pin ? body.pin.content : null;
  } catch (_) {
    return null;
  }
  noteTexts.set(k, text);
  return text;
}

async function recordView(id, rev) {
  const args = rev ? { record: id, rev } : { record: id };
  const [r, events] = await Promise.all([tool("record_get", args), eventsOf(id)]);
  const current = Number(r.current_rev || r.rev || 0);
  const shown = Number(r.rev || 0);
  const out = [];
  // The rev picker: the current rev, or any earlier one as it was.
  const picker = el("select", null, "rev-picker");
  picker.id = "record-rev";
  picker.setAttribute("aria-label", "show the record as of rev");
  for (let n = current; n >= 1; n--) {
    const o = el("option", n === current ? "rev " + n + " (current)" : "rev " + n);
    o.value = String(n);
    if (n === shown) o.selected = true;
    picker.appendChild(o);
  }
  picker.addEventListener("change", () => {
    const n = Number(picker.value);
    openObject("record", id, n === current ? undefined : n);
  });
  const asOf = el("span", null, "rev");
  asOf.dataset.rev = String(shown);
  asOf.dataset.currentRev = String(current);
  asOf.appendChild(el("span", shown === current ? "rev " + shown + " (current) " : "as of rev " + shown + " (current: " + current + ") "));
  asOf.appendChild(picker);
  const body = r.body || {};
  const bodyText = body.redacted ? el("span", "redacted (narrower than the audience)", "muted")
    : el("span", referenceText(body.reference) + " · " + labelsText(body.labels));
  out.push(facts([
    ["record", id],
    ["thread", r.thread ? openButton(r.thread, "thread") : "–"],
    ["title", contentNode(r.title)],
    ["state", contentNode(r.state)],
    ["rev", asOf],
    ["body", bodyText],
    ["creator", r.creator],
    ["created", timeOf(r.created_at_unix_micros) + (r.entry ? " (entry #" + r.entry + ")" : "")],
    ["scope", enumName(r.scope, "SCOPE_")],
    ["editors", enumName(r.editors, "RECORD_EDITORS_")],
    ["audience", enumName(r.audience, "SCOPE_")],
  ]));

  const notes = r.notes || [];
  const texts = await Promise.all(notes.map((n) => noteText(id, n)));
  const ns = section("Notes" + (r.redacted_notes ? " (" + r.redacted_notes + " redacted)" : ""));
  const nt = table(["note", "kind", "text", "body", "labels", "author", "rev", "added"], "notes");
  notes.forEach((n, i) => {
    const text = texts[i] === null ? el("span", "not readable here", "muted") : contentNode(texts[i]);
    row(nt, [n.id, enumName(n.kind, "NOTE_KIND_"), text, referenceText(n.body), labelsText(n.labels), n.author,
      n.added_rev, timeOf(n.added_at_unix_micros)]).dataset.note = n.id;
  });
  ns.appendChild(nt);
  if (notes.length === 0) ns.appendChild(el("p", "None.", "empty"));
  out.push(ns);

  const artifacts = r.artifacts || [];
  const as = section("Artifacts" + (r.redacted_artifacts ? " (" + r.redacted_artifacts + " redacted)" : ""));
  const at = table(["artifact", "media type", "reference", "labels", "author", "rev", "added"], "artifacts");
  for (const a of artifacts) {
    row(at, [a.id, a.media_type, referenceText(a.reference), labelsText(a.labels), a.author, a.added_rev,
      timeOf(a.added_at_unix_micros)]).dataset.artifact = a.id;
  }
  as.appendChild(at);
  if (artifacts.length === 0) as.appendChild(el("p", "None.", "empty"));
  out.push(as);

  const decisions = r.decisions || [];
  const ds = section("Decisions");
  const dt = table(["decision", "state", "reason", "author", "rev", "added"], "decisions");
  for (const d of decisions) {
    row(dt, [d.id, contentNode(d.state), contentNode(d.reason), d.author, d.added_rev,
      timeOf(d.added_at_unix_micros)]).dataset.decision = d.id;
  }
  ds.appendChild(dt);
  if (decisions.length === 0) ds.appendChild(el("p", "None.", "empty"));
  out.push(ds);

  const hs = section("History (every accepted write, newest first)");
  const ht = table(["rev", "base rev", "entry", "actor", "at", "paths", "labels", "redacted"], "record-events");
  for (const e of events.slice().reverse()) {
    const open = recordButton(id, e.rev);
    open.textContent = String(e.rev);
    const tr = row(ht, [open, e.base_rev || "–", e.entry || "–", e.actor || "–", timeOf(e.at_unix_micros),
      (e.paths || []).join(", ") || "–", e.redacted ? "–" : enumName(e.taint, "TAINT_") + " · " + enumName(e.scope, "SCOPE_"),
      e.redacted ? "redacted" : "no"]);
    tr.dataset.rev = String(e.rev);
    if (Number(e.rev) === shown) tr.classList.add("shown");
  }
  hs.appendChild(ht);
  out.push(hs);
  return out;
}

async function collectiveView(id, header) {
  if (!header) throw new Error("a collective is read by its header entry: give the entry number");
  const c = await tool("collective_get", { thread: id, header, include_outputs: true });
  const out = [facts([
    ["collective", id + " #" + c.header],
    ["scattered by", c.author],
    ["ranks", c.size],
    ["formed", timeOf(c.formed_at_unix_micros)],
    ["complete", c.complete ? "yes: every rank delivered or ended" : "no"],
    ["all delivered", c.all_delivered ? "yes" : "no"],
  ])];
  const rt = table(["rank", "member", "entry", "assignment", "state", "due", "left", "output"], "ranks");
  for (const r of c.ranks || []) {
    const a = r.assignment || {};
    const { state, due } = lifecycle(a);
    const output = (a.delivered && a.delivered.output) || (a.ended && a.ended.delivered);
    const tr = row(rt, [r.rank, r.member, r.entry, a.id ? openButton(a.id, "assignment") : "–", state, due ? timeOf(due) : "–"]);
    tr.appendChild(countdownCell(due));
    const td = document.createElement("td");
    td.appendChild(r.output_omitted ? el("span", "not inline: open the assignment", "muted") : contentNode(output));
    tr.appendChild(td);
    tr.dataset.rank = String(r.rank);
  }
  out.push(rt);
  return out;
}

/** The other reads (an entry, an assignment, a barrier, a Memory, an agent) as a tree of text. */
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
  const isContent = ["content", "body", "text", "criteria", "output", "requirements"].includes(key);
  return el("span", value, isContent ? "content" : undefined);
}

const OTHER_READS = {
  entry: (id, n) => ["entry_get", { thread: id, entry: n }],
  assignment: (id) => ["assignment_get", { assignment: id }],
  barrier: (id, n) => ["barrier_get", { thread: id, entry: n }],
  memory: (id) => ["memory_get", { memory: id }],
  agent: (id) => ["working_set_get", { object: id }],
};

/** Draws the opened view; `why` (open, stream, slow, poll) is kept on it for whoever asks. */
async function drawOpen(why) {
  if (!opened || !sessionStorage.getItem(AGENT_KEY)) return;
  const { view, id, entry } = opened;
  const target = $("object-view");
  try {
    let nodes;
    if (view === "thread") nodes = await threadView(id);
    else if (view === "mailbox") nodes = await mailboxView(id);
    else if (view === "task") nodes = await taskView(id, entry);
    else if (view === "collective") nodes = await collectiveView(id, entry);
    else if (view === "record") nodes = await recordView(id, entry);
    else {
      const [name, args] = OTHER_READS[view](id, entry);
      const answer = await tool(name, args);
      nodes = [];
      // An entry that is a record's write links to the record as of that rev.
      if (answer && answer.record && answer.record.record) {
        const p = el("p", "a write of the shared record ", "record-link");
        p.appendChild(recordButton(answer.record.record, answer.record.rev));
        nodes.push(p);
      }
      const t = el("div", null, "tree");
      t.appendChild(tree(answer, name));
      nodes.push(t);
    }
    // Still the view asked for (another may have been opened meanwhile).
    if (opened !== null && opened.view === view && opened.id === id) {
      clear(target);
      for (const n of nodes) target.appendChild(n);
      target.dataset.view = view;
      target.dataset.object = id;
      target.dataset.refreshedBy = why;
      tickCountdowns();
      setStatus("object-status", view + " " + id + (entry ? " #" + entry : "") + " · read " + new Date().toLocaleTimeString(), false);
    }
  } catch (e) {
    clear(target);
    setStatus("object-status", refusalText(e), true);
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

function agentKeyChanged() {
  finalBarriers.clear();
  finalAssignments.clear();
  recordEvents.clear();
  noteTexts.clear();
  if (!sessionStorage.getItem(AGENT_KEY)) {
    stopWatching();
    clear($("turn-table").querySelector("tbody"));
    clear($("opportunities-table").querySelector("tbody"));
    clear($("object-view"));
    setStatus("agent-status", "Enter an agent key to see its turn.", false);
    return;
  }
  setStatus("agent-status", "Loading…", false);
  refreshTurnOnce("key");
  refreshOpenOnce();
  startWatching();
}

function start() {
  keyForm("operator-form", "operator-token", "operator-forget", OPERATOR_TOKEN, refreshCluster);
  keyForm("agent-form", "agent-key", "agent-forget", AGENT_KEY, agentKeyChanged);
  $("open-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const id = $("open-id").value.trim();
    const entryText = $("open-entry").value.trim();
    if (!sessionStorage.getItem(AGENT_KEY)) setStatus("object-status", "Enter an agent key first.", true);
    if (id) openObject($("open-view").value, id, entryText ? Number(entryText) : undefined);
  });
  refreshCluster();
  agentKeyChanged();
  // The cluster view polls (no feed carries it); the agent view follows its feeds, and re-reads
  // slowly only what no feed carries to it. Countdowns tick locally.
  setInterval(oneAtATime(refreshCluster), REFRESH_MS);
  setInterval(() => {
    refreshOpportunitiesOnce();
    refreshOpenOnce("slow");
  }, SLOW_MS);
  setInterval(tickCountdowns, 1000);
}

document.addEventListener("DOMContentLoaded", start);
