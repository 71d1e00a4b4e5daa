// The web console in a real browser (tests/console/run.sh sets the environment): Debian's
// chromium driven by playwright-core, against a three-node cluster started with `kungfu dev up`.
// Every wait is bounded; screenshots go to $KUNGFU_CONSOLE_SHOTS.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { createRequire } from "node:module";
import fs from "node:fs";
import path from "node:path";

const env = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set: run tests/console/run.sh`);
  return v;
};
const KUNGFU = env("KUNGFU");
const KUNGFUD = env("KUNGFUD");
const SHOTS = env("KUNGFU_CONSOLE_SHOTS");
const WORK = env("KUNGFU_CONSOLE_WORK");
const { chromium } = createRequire(path.join(env("PLAYWRIGHT_DIR"), "/"))("playwright-core");

const BOUND_MS = 60_000;
const DEV = path.join(WORK, "dev");
// The CLI's profiles (`dev up` saves one) stay inside the run's directory.
const CLI_ENV = { ...process.env, XDG_CONFIG_HOME: path.join(WORK, "config") };

let base = 0;
let browser;
const endpoints = () => [0, 1, 2].map((i) => `127.0.0.1:${base + i}`).join(",");
const consoleUrl = (id) => `http://127.0.0.1:${base + 200 + id - 1}/ui/`;

function kungfu(args, opts = {}) {
  return execFileSync(KUNGFU, args, { env: CLI_ENV, encoding: "utf8", timeout: BOUND_MS, ...opts });
}

/** A CLI call as `key` against the cluster, its JSON answer. */
function cli(key, ...args) {
  const out = kungfu(["--endpoint", endpoints(), "--json", ...(key ? ["--key", key] : []), ...args]);
  return JSON.parse(out);
}

/** The result a write's receipt carries (`receipt.result.<kind>`), as the CLI prints it in JSON. */
function receiptOf(answer) {
  const result = answer && answer.receipt && answer.receipt.result;
  return result ? Object.values(result)[0] : {};
}

async function shot(page, name) {
  await page.screenshot({ path: path.join(SHOTS, `${name}.png`), fullPage: true });
}

/** The node ids of the rows of the cluster table, and which are highlighted as leader. */
async function clusterRows(page) {
  return page.$$eval("#cluster-table tbody tr[data-node-id]", (rows) =>
    rows.map((r) => ({ id: Number(r.dataset.nodeId), role: r.dataset.role, leader: r.classList.contains("leader") })),
  );
}

async function eventually(what, probe) {
  const start = Date.now();
  let last;
  for (;;) {
    last = await probe();
    if (last) return last;
    if (Date.now() - start > BOUND_MS) throw new Error(`${what}: not within ${BOUND_MS} ms`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

before(async () => {
  fs.mkdirSync(SHOTS, { recursive: true });
  // Ports BASE.., BASE+100.., BASE+200..: try a few bases (dev up refuses a taken port by name).
  let lastError;
  for (let attempt = 0; attempt < 5 && !base; attempt++) {
    const candidate = 20000 + Math.floor(Math.random() * 90) * 100 + Math.floor(Math.random() * 90);
    try {
      kungfu(["dev", "up", "--dir", DEV, "--base-port", String(candidate), "--kungfud", KUNGFUD], { stdio: "pipe" });
      base = candidate;
    } catch (e) {
      lastError = e;
    }
  }
  if (!base) throw new Error(`kungfu dev up failed: ${lastError && (lastError.stderr || lastError.message)}`);
  browser = await chromium.launch({ executablePath: env("CHROMIUM"), args: ["--no-sandbox"] });
});

after(async () => {
  if (browser) await browser.close();
  if (base) kungfu(["dev", "down", "--dir", DEV], { stdio: "pipe" });
});

test("the cluster view shows three nodes and one leader, and a new leader after the leader is killed", async () => {
  const token = fs.readFileSync(path.join(DEV, "operator-token"), "utf8").trim();
  const status = cli(token, "cluster", "status");
  const leader = status.nodes.find((n) => n.role === "leader").node_id;
  // Browse a follower: the page must outlive the leader.
  const watched = [1, 2, 3].find((id) => id !== leader);
  const context = await browser.newContext();
  const page = await context.newPage();
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  await page.goto(consoleUrl(watched));

  const rows = await eventually("three nodes and one highlighted leader", async () => {
    const r = await clusterRows(page);
    return r.length === 3 && r.filter((x) => x.leader).length === 1 ? r : null;
  });
  assert.equal(rows.find((x) => x.leader).id, leader, "the highlighted leader is the cluster's");
  assert.equal(rows.filter((x) => x.role === "leader").length, 1);
  await shot(page, "cluster-three-nodes");

  const pid = Number(fs.readFileSync(path.join(DEV, `node${leader}.pid`), "utf8").trim());
  process.kill(pid, "SIGKILL");
  // Without a reload: a new leader highlighted, the old one shown unreachable.
  const after = await eventually("a new leader, the old one unreachable", async () => {
    const r = await clusterRows(page);
    const highlighted = r.filter((x) => x.leader);
    const old = r.find((x) => x.id === leader);
    return highlighted.length === 1 && highlighted[0].id !== leader && old && old.role === "unreachable" ? r : null;
  });
  assert.equal(after.length, 3);
  await shot(page, "cluster-new-leader");
  assert.deepEqual(errors, [], "no script error on the page");
  await context.close();
});

test("an agent's page follows the watch feed: owed response, thread view, content as text, reply without a poll", async () => {
  // Two agents with the CLI (only the survivors of the first test serve; the CLI finds the leader).
  const a = cli(null, "register", "--no-save");
  const b = cli(null, "register", "--no-save");
  const [aKey, bKey] = [a.agent_key, b.agent_key];
  const aId = a.agent ?? a.agent_id ?? receiptOf(a).agent;
  const bId = b.agent ?? b.agent_id ?? receiptOf(b).agent;
  assert.ok(aKey && bKey && aId && bId, `register answers: ${JSON.stringify(b)}`);
  const created = cli(aKey, "thread", "create", "--text", "console test", "--grant", "speaker");
  const thread = receiptOf(created).thread;
  const secret = created.grant_secret;
  assert.ok(thread && secret, `thread create answers: ${JSON.stringify(created)}`);
  cli(bKey, "thread", "join", secret);
  const payload = `<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script><b>bold?</b>`;
  const posted = cli(aKey, "thread", "post", thread, "--text", payload, "--ask", bId);
  const entry = receiptOf(posted).entry;
  assert.ok(entry, `post answers: ${JSON.stringify(posted)}`);

  const context = await browser.newContext();
  const page = await context.newPage();
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  const requests = [];
  page.on("request", (r) => requests.push({ url: r.url(), auth: r.headers()["authorization"] }));
  // A node that still serves (the first test killed one).
  let live;
  for (const id of [1, 2, 3]) {
    const ok = await fetch(consoleUrl(id)).then((r) => r.ok, () => false);
    if (ok) {
      live = id;
      break;
    }
  }
  assert.ok(live, "a node serves the console");
  await page.goto(consoleUrl(live));
  await page.fill("#agent-key", bKey);
  await page.click("#agent-form button[type=submit]");

  const owed = `response to ${thread} entry ${entry}`;
  const row = `#turn-table tbody tr[data-obligation="${owed}"]`;
  await page.waitForSelector(row, { timeout: BOUND_MS });
  const countdown = await page.textContent(`${row} .countdown`);
  assert.ok(countdown && countdown.length > 0, "a countdown cell");
  // The turn follows the watch feed (a stream, not a poll).
  await page.waitForSelector("#agent-live[data-state=live]", { timeout: BOUND_MS });
  await shot(page, "agent-owed-response");

  // The thread view, opened from the turn: members, and the timeline with the owed response marked.
  await page.click(`${row} button.link`);
  const owedTag = `#object-view table.timeline tr[data-entry="${entry}"] .tag.owed[data-responder="${bId}"]`;
  await page.waitForSelector(owedTag, { timeout: BOUND_MS });
  const members = await page.$$eval("#object-view table.members tbody tr", (rows) => rows.map((r) => r.dataset.agent));
  assert.deepEqual([...members].sort(), [aId, bId].sort(), "the thread's members");
  await page.waitForSelector("#object-live[data-state=live]", { timeout: BOUND_MS });
  await shot(page, "thread-owed-response");

  // The mailbox page shows the payload as text: no element was made from it, nothing ran.
  await page.fill("#open-id", thread);
  await page.selectOption("#open-view", "mailbox");
  await page.click("#open-form button[type=submit]");
  const card = `#object-view article.mail[data-entry="${entry}"]`;
  await page.waitForSelector(card, { timeout: BOUND_MS });
  assert.equal(await page.textContent(`${card} .content`), payload, "the content, as text");
  assert.equal(await page.$$eval("#object-view img, #object-view script, #object-view b", (n) => n.length), 0);
  assert.equal(await page.evaluate(() => window.__pwned), undefined, "the payload ran nothing");
  await shot(page, "mailbox-content-as-text");
  // And read alone, as an entry.
  await page.selectOption("#open-view", "entry");
  await page.fill("#open-entry", String(entry));
  await page.click("#open-form button[type=submit]");
  await page.waitForFunction(
    (p) => document.getElementById("object-view").dataset.view === "entry" &&
      document.getElementById("object-view").textContent.includes(p),
    payload,
    { timeout: BOUND_MS },
  );
  assert.equal(await page.$$eval("#object-view img, #object-view script, #object-view b", (n) => n.length), 0);
  assert.equal(await page.evaluate(() => window.__pwned), undefined, "the payload ran nothing");

  // The key: in sessionStorage, sent only as a header, never in a URL or a cookie.
  assert.equal(await page.evaluate(() => document.cookie), "");
  assert.equal(await page.evaluate(() => sessionStorage.getItem("kungfu.console.agentKey")), bKey);
  assert.ok(requests.every((r) => !r.url.includes(bKey)), "the key is never in a URL");
  const apiCalls = requests.filter((r) => r.url.includes("/ui/api/tools/") || r.url.includes("/ui/api/watch/"));
  assert.ok(apiCalls.some((r) => r.url.includes("/ui/api/watch/turn")), "the page watches the turn");
  assert.ok(apiCalls.length > 0 && apiCalls.every((r) => r.auth === `Bearer ${bKey}`), "API calls carry the key");

  // An assignment to B shows as an opportunity; once B takes it, a delivery with a deadline and a
  // live countdown is owed, in the turn and in the thread view's assignments.
  const asg = receiptOf(
    cli(aKey, "assignment", "create", thread, "--to", bId, "--criteria", "a summary", "--delivery-window-secs", "3600", "--ask-nobody"),
  ).assignment;
  assert.ok(asg, "assignment create names the assignment");
  await page.waitForFunction(
    (id) => document.getElementById("opportunities-table").textContent.includes(id),
    asg,
    { timeout: BOUND_MS },
  );
  cli(bKey, "assignment", "take", asg);
  const delivery = `#turn-table tbody tr[data-obligation="assignment delivery ${asg}"] .countdown`;
  await page.waitForSelector(delivery, { timeout: BOUND_MS });
  const first = await page.textContent(delivery);
  assert.match(first, /^(59m|1h 0m) \d+s left$/, "about an hour left");
  await page.waitForFunction(
    ([sel, before]) => document.querySelector(sel) && document.querySelector(sel).textContent !== before,
    [delivery, first],
    { timeout: 5000 },
  );
  await shot(page, "agent-delivery-countdown");
  await page.fill("#open-id", thread);
  await page.selectOption("#open-view", "thread");
  await page.fill("#open-entry", "");
  await page.click("#open-form button[type=submit]");
  const deadline = `#object-view table.assignments tr[data-assignment="${asg}"] .countdown`;
  await page.waitForSelector(deadline, { timeout: BOUND_MS });
  await page.waitForFunction((sel) => /^(59m|1h 0m) \d+s left$/.test(document.querySelector(sel).textContent), deadline, {
    timeout: BOUND_MS,
  });
  await page.waitForSelector(owedTag, { timeout: BOUND_MS });
  await shot(page, "thread-assignment-deadline");

  // B replies with the CLI. The row leaves the turn, and the mark leaves the timeline, without a
  // reload and not by a poll: the stream stays live, the fallback poll never ran, and the turn
  // was last read because of a stream event.
  assert.equal(await page.getAttribute("#agent-live", "data-state"), "live");
  assert.equal(await page.getAttribute("#agent-live", "data-polls"), "0", "no fallback poll ran");
  const url = page.url();
  cli(bKey, "thread", "post", thread, "--text", "done", "--reply-to", String(entry), "--ask-nobody");
  const started = Date.now();
  await page.waitForSelector(row, { state: "detached", timeout: BOUND_MS });
  const tookMs = Date.now() - started;
  assert.equal(await page.getAttribute("#turn-table", "data-refreshed-by"), "stream", "a stream event re-read the turn");
  assert.equal(await page.getAttribute("#agent-live", "data-state"), "live");
  assert.equal(await page.getAttribute("#agent-live", "data-polls"), "0", "no fallback poll ran");
  assert.equal(page.url(), url, "no navigation");
  await page.waitForSelector(owedTag, { state: "detached", timeout: BOUND_MS });
  const replied = `#object-view table.timeline tr[data-entry="${entry}"] .tag[data-responder="${bId}"]`;
  assert.match(await page.textContent(replied), /replied/, "the timeline shows the reply");
  console.log(`the reply left the page ${tookMs} ms after the CLI returned`);
  await shot(page, "agent-response-gone");
  assert.deepEqual(errors, [], "no script error on the page");
  await context.close();
});

test("a webhook the server gave up on, carried by turn_get, shows on the agent's page as text", async () => {
  // The server side (a give-up recorded and carried in the turn) is tests/wake.rs; here the page's
  // part: whatever turn_get carries in wake_failed is shown, as text, beside the turn.
  const a = cli(null, "register", "--no-save");
  const context = await browser.newContext();
  const page = await context.newPage();
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  const failure = {
    id: "wt_9",
    url: "https://hooks.example.com/<b>x</b>",
    failed: { sequence: "4", at_unix_micros: "1765150000000000", error: "HTTP 500 <img src=x onerror=\"window.__pwned=1\">" },
  };
  await page.route("**/ui/api/tools/turn_get", async (route) => {
    const response = await route.fetch();
    const body = await response.json();
    assert.ok(body.result && Array.isArray(body.result.items), `turn_get answers a turn: ${JSON.stringify(body)}`);
    body.result.wake_failed = [failure];
    await route.fulfill({ response, json: body });
  });
  let live;
  for (const id of [1, 2, 3]) {
    if (await fetch(consoleUrl(id)).then((r) => r.ok, () => false)) {
      live = id;
      break;
    }
  }
  await page.goto(consoleUrl(live));
  await page.fill("#agent-key", a.agent_key);
  await page.click("#agent-form button[type=submit]");
  const item = "#wake-failed li[data-target=wt_9]";
  await page.waitForSelector(item, { timeout: BOUND_MS });
  const text = await page.textContent(item);
  assert.ok(text.includes("FAILED at #4") && text.includes("HTTP 500 <img"), `shown as text: ${text}`);
  assert.equal(await page.locator("#wake-failed img, #wake-failed b").count(), 0, "no markup from the answer");
  assert.equal(await page.evaluate(() => window.__pwned), undefined);
  await shot(page, "agent-wake-failed");
  assert.deepEqual(errors, [], "no script error on the page");
  await context.close();
});

test("the Task view shows contract versions, an engagement and adoptions against the limit; the collective view its ranks", async () => {
  const a = cli(null, "register", "--no-save");
  const b = cli(null, "register", "--no-save");
  const [aKey, bKey, bId] = [a.agent_key, b.agent_key, b.agent ?? receiptOf(b).agent];
  const contract = path.join(WORK, "contract.toml");
  const requirements = "<i>summarise</i> the incident";
  fs.writeFileSync(contract, `requirements = "${requirements}"\nacceptance = "ok"\nmax_adoptions = 2\ndelivery_window_secs = 3600\n`);
  const task = receiptOf(cli(aKey, "task", "create", "--contract", contract)).task;
  const engagement = receiptOf(cli(bKey, "task", "take", task)).engagement;
  assert.ok(task && engagement, "task create and take name the Task and the engagement");
  const created = cli(aKey, "thread", "create", "--text", "scatter here", "--grant", "speaker");
  const thread = receiptOf(created).thread;
  cli(bKey, "thread", "join", created.grant_secret);
  const scattered = receiptOf(cli(aKey, "scatter", thread, "--header", "split", "--goal", `${bId}=part one`));
  assert.ok(scattered.header && scattered.ranks.length === 1, `scatter answers: ${JSON.stringify(scattered)}`);

  const context = await browser.newContext();
  const page = await context.newPage();
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  let live;
  for (const id of [1, 2, 3]) {
    if (await fetch(consoleUrl(id)).then((r) => r.ok, () => false)) {
      live = id;
      break;
    }
  }
  await page.goto(consoleUrl(live));
  await page.fill("#agent-key", bKey);
  await page.click("#agent-form button[type=submit]");
  // The engagement's delivery is owed; its object opens the Task view.
  const row = `#turn-table tbody tr[data-obligation="engagement delivery ${engagement}"]`;
  await page.waitForSelector(row, { timeout: BOUND_MS });
  await page.click(`${row} button.link`);
  await page.waitForSelector('#object-view .contract[data-version="1"]', { timeout: BOUND_MS });
  const view = await page.textContent("#object-view");
  assert.match(view, /adoptions against the limit\s*0 of 2/, "adoptions against the limit");
  assert.ok(view.includes(requirements), "the requirements, as text");
  assert.equal(await page.$$eval("#object-view i", (n) => n.length), 0, "no element made from content");
  const eng = await page.textContent("#object-view table.engagements tbody");
  assert.ok(eng.includes(engagement) && eng.includes("open: delivery due"), eng);
  assert.match(await page.textContent("#object-view table.engagements .countdown"), /^(59m|1h 0m) \d+s left$/);
  await shot(page, "task-view");

  // The collective: one rank, B, with its assignment not yet taken.
  await page.fill("#open-id", thread);
  await page.selectOption("#open-view", "collective");
  await page.fill("#open-entry", String(scattered.header));
  await page.click("#open-form button[type=submit]");
  const rank = '#object-view table.ranks tr[data-rank="0"]';
  await page.waitForSelector(rank, { timeout: BOUND_MS });
  const text = await page.textContent(rank);
  assert.ok(text.includes(bId) && text.includes(scattered.ranks[0].assignment) && text.includes("open (not taken)"), text);
  await shot(page, "collective-view");
  assert.deepEqual(errors, [], "no script error on the page");
  await context.close();
});

test("a shared record shows in its thread, opens, follows its feed as it is patched, and shows its payload as text", async () => {
  const a = cli(null, "register", "--no-save");
  const b = cli(null, "register", "--no-save");
  const [aKey, bKey] = [a.agent_key, b.agent_key];
  const created = cli(aKey, "thread", "create", "--text", "record here", "--grant", "speaker");
  const thread = receiptOf(created).thread;
  cli(bKey, "thread", "join", created.grant_secret);
  const title = `<img src=x onerror="window.__pwned=3"><script>window.__pwned=4</script><b>Plan</b>`;
  const note = `<i>note</i><img src=x onerror="window.__pwned=5">`;
  const record = receiptOf(cli(aKey, "record", "create", thread, "--title", title, "--body", "draft 1")).record;
  assert.ok(record, "record create names the record");
  assert.equal(receiptOf(cli(aKey, "record", "patch", record, "--base-rev", "1", "--note", `n1=${note}`)).rev, 2);

  const context = await browser.newContext();
  const page = await context.newPage();
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  const streams = [];
  page.on("request", (r) => {
    if (r.url().includes("/ui/api/watch/record/")) streams.push(r.headers()["last-event-id"] || "");
  });
  let live;
  for (const id of [1, 2, 3]) {
    if (await fetch(consoleUrl(id)).then((r) => r.ok, () => false)) {
      live = id;
      break;
    }
  }
  await page.goto(consoleUrl(live));
  await page.fill("#agent-key", bKey);
  await page.click("#agent-form button[type=submit]");
  await page.waitForSelector("#agent-live[data-state=live]", { timeout: BOUND_MS });

  // The thread view lists the record, and marks the timeline's entries that are its writes.
  await page.fill("#open-id", thread);
  await page.selectOption("#open-view", "thread");
  await page.click("#open-form button[type=submit]");
  const listed = `#object-view ul.records li[data-record="${record}"] button`;
  await page.waitForSelector(listed, { timeout: BOUND_MS });
  await page.waitForSelector(`#object-view table.timeline button[data-record="${record}"][data-rev="2"]`, { timeout: BOUND_MS });
  await page.waitForSelector(`#object-view table.timeline button[data-record="${record}"][data-rev="1"]`, { timeout: BOUND_MS });

  // Opened from the list: title, state, rev, body, the note as text, the history.
  await page.click(listed);
  await page.waitForSelector('#object-view[data-view="record"] .rev[data-current-rev="2"]', { timeout: BOUND_MS });
  const facts = await page.textContent("#object-view dl.facts");
  assert.ok(facts.includes(title), "the title, as text");
  assert.ok(facts.includes("rev 2 (current)"), facts);
  assert.match(facts, /mem_\d+ v\d+ · tainted · fleet/, "the body's reference and labels");
  assert.equal(await page.textContent('#object-view table.notes tr[data-note="n1"] .content'), note, "the note, as text");
  assert.deepEqual(await page.$$eval("#object-view table.record-events tbody tr", (r) => r.map((x) => x.dataset.rev)), ["2", "1"]);
  assert.equal(await page.$$eval("#object-view img, #object-view script, #object-view b, #object-view i", (n) => n.length), 0);
  assert.equal(await page.evaluate(() => window.__pwned), undefined, "the payload ran nothing");
  await page.waitForSelector("#object-live[data-state=live]", { timeout: BOUND_MS });
  assert.deepEqual(streams, [""], "one record stream, from the creation");

  // A patch with the CLI shows without a reload, re-read because of a stream event, not a poll.
  const url = page.url();
  assert.equal(receiptOf(cli(aKey, "record", "patch", record, "--base-rev", "2", "--state", "review", "--decision", "d1=open:ship it?")).rev, 3);
  await page.waitForFunction(
    () => {
      const v = document.getElementById("object-view");
      return v.querySelector('.rev[data-current-rev="3"]') && v.dataset.refreshedBy === "stream";
    },
    null,
    { timeout: BOUND_MS },
  );
  assert.equal(page.url(), url, "no navigation");
  assert.deepEqual(streams, [""], "the same stream");
  assert.equal(await page.getAttribute("#agent-live", "data-polls"), "0", "no fallback poll ran");
  assert.ok((await page.textContent("#object-view dl.facts")).includes("review"), "the new state");
  const paths = await page.textContent('#object-view table.record-events tr[data-rev="3"]');
  assert.ok(paths.includes("/state"), paths);
  assert.ok((await page.textContent('#object-view table.decisions tr[data-decision="d1"]')).includes("ship it?"));
  await shot(page, "record");

  // As of rev 1: the record as created, no note yet.
  await page.selectOption("#record-rev", "1");
  await page.waitForSelector('#object-view .rev[data-rev="1"]', { timeout: BOUND_MS });
  assert.ok((await page.textContent("#object-view dl.facts")).includes("as of rev 1 (current: 3)"));
  assert.equal(await page.$$eval("#object-view table.notes tbody tr", (r) => r.length), 0, "no note at rev 1");
  assert.equal(await page.evaluate(() => window.__pwned), undefined, "the payload ran nothing");

  // The entry that wrote rev 3, read alone, links to the record as of that rev.
  const wrote = await page.textContent('#object-view table.record-events tr[data-rev="3"] td:nth-child(3)');
  await page.fill("#open-id", thread);
  await page.selectOption("#open-view", "entry");
  await page.fill("#open-entry", wrote.trim());
  await page.click("#open-form button[type=submit]");
  const link = `#object-view .record-link button[data-record="${record}"][data-rev="3"]`;
  await page.waitForSelector(link, { timeout: BOUND_MS });
  await page.click(link);
  await page.waitForSelector('#object-view[data-view="record"] .rev[data-rev="3"]', { timeout: BOUND_MS });
  assert.deepEqual(errors, [], "no script error on the page");
  await context.close();
});

test("when the leader behind the stream is killed, the agent view reconnects from its last event id and misses nothing", async () => {
  // Bring back the node the first test killed, so that a leader can be killed again.
  for (const id of [1, 2, 3]) {
    if (!(await fetch(consoleUrl(id)).then((r) => r.ok, () => false))) kungfu(["dev", "restart", String(id), "--dir", DEV], { stdio: "pipe" });
  }
  const token = fs.readFileSync(path.join(DEV, "operator-token"), "utf8").trim();
  const leader = await eventually("three nodes, one leader", async () => {
    try {
      const status = cli(token, "cluster", "status");
      const l = status.nodes.find((n) => n.role === "leader");
      return status.nodes.filter((n) => n.reachable !== false && n.role !== "unreachable").length === 3 && l ? l.node_id : null;
    } catch (_) {
      return null;
    }
  });
  const watched = [1, 2, 3].find((id) => id !== leader);

  const a = cli(null, "register", "--no-save");
  const b = cli(null, "register", "--no-save");
  const [aKey, bKey, bId] = [a.agent_key, b.agent_key, b.agent ?? receiptOf(b).agent];
  const created = cli(aKey, "thread", "create", "--text", "drops", "--grant", "speaker");
  const thread = receiptOf(created).thread;
  cli(bKey, "thread", "join", created.grant_secret);
  const entry = receiptOf(cli(aKey, "thread", "post", thread, "--text", "answer me", "--ask", bId)).entry;

  const context = await browser.newContext();
  const page = await context.newPage();
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  const streams = [];
  page.on("request", (r) => {
    if (r.url().includes("/ui/api/watch/turn")) streams.push(r.headers()["last-event-id"] || "");
  });
  // A follower serves the page; its stream is forwarded to the leader.
  await page.goto(consoleUrl(watched));
  await page.fill("#agent-key", bKey);
  await page.click("#agent-form button[type=submit]");
  const row = `#turn-table tbody tr[data-obligation="response to ${thread} entry ${entry}"]`;
  await page.waitForSelector(row, { timeout: BOUND_MS });
  await page.waitForSelector("#agent-live[data-state=live]", { timeout: BOUND_MS });
  assert.deepEqual(streams, [""], "one stream, started afresh");

  // The leader dies: the stream drops; the reply is posted (to the new leader) meanwhile.
  process.kill(Number(fs.readFileSync(path.join(DEV, `node${leader}.pid`), "utf8").trim()), "SIGKILL");
  cli(bKey, "thread", "post", thread, "--text", "done", "--reply-to", String(entry), "--ask-nobody");
  // The page reopens its stream from the last cursor it received, and the missed change shows.
  await page.waitForSelector(row, { state: "detached", timeout: BOUND_MS });
  await page.waitForSelector("#agent-live[data-state=live]", { timeout: BOUND_MS });
  const resumed = streams.slice(1);
  assert.ok(resumed.length > 0 && resumed.every((id) => id !== ""), `reopened with Last-Event-ID: ${JSON.stringify(streams)}`);
  await shot(page, "agent-after-leader-kill");
  assert.deepEqual(errors, [], "no script error on the page");
  await context.close();
});
