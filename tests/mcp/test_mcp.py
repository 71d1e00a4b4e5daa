"""The MCP door driven by the official Python SDK (`mcp` 2.x, a client nobody here wrote) against
real `kungfud` processes, in both protocol revisions: 2025-11-25 (initialize, a session id on every
request) and 2026-07-28 (stateless: no handshake, no session). Over Streamable HTTP at each node's
`/mcp`, and over stdio through `kungfu mcp --profile NAME`.

Each test runs once per revision. Three-node clusters on free loopback ports (kungfu_cluster.py);
every call goes through `Client.call_tool` over Streamable HTTP with the agent's key in
`Authorization: Bearer`. The SDK validates every successful result's `structuredContent` against
the tool's `outputSchema` (and raises when it does not conform), so each call here also checks that
the tool's own schema describes what it answers (issue #31).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import subprocess
import time
import uuid
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator, Literal

import httpx2
import pytest
from mcp_types import CallToolResult, Request, RequestParams, Result
from mcp.client import Client
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from kungfu_cluster import BOUND_S, Cluster

REVISIONS = ["2025-11-25", "2026-07-28"]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(params=REVISIONS)
def revision(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture(scope="module")
def cluster() -> AsyncIterator[Cluster]:
    c = Cluster.start(3)
    try:
        yield c
    finally:
        c.stop()


class Rejected(Exception):
    """A tool call answered with `isError: true`; `.error` is its structured rejection."""

    def __init__(self, tool: str, error: dict[str, Any], text: str):
        super().__init__(f"{tool} was refused: {json.dumps(error)} ({text})")
        self.tool = tool
        self.error = error
        self.text = text


class Agent:
    """One MCP connection, acting as the agent whose key it sends (or as nobody)."""

    def __init__(self, client: Client, session_ids: list[str], answers: list[tuple[str, int]] | None = None):
        self.client = client
        self.session_ids = session_ids
        # (HTTP method, status) of every answer on the connection, in order.
        self.answers = answers if answers is not None else []

    async def tool_names(self) -> list[str]:
        return [t.name for t in (await self.client.list_tools()).tools]

    async def call(self, tool: str, **arguments: Any) -> dict[str, Any]:
        """The tool's structured result; a rejection raises `Rejected`."""
        result = await self.client.call_tool(tool, arguments, read_timeout_seconds=BOUND_S)
        text = " ".join(getattr(block, "text", "") for block in result.content)
        structured = result.structured_content
        if result.is_error:
            raise Rejected(tool, structured if isinstance(structured, dict) else {}, text)
        assert isinstance(structured, dict), f"{tool}: no structured result: {result!r}"
        # The text content carries the same JSON, for hosts that show only text.
        assert text, f"{tool}: no text content"
        return structured

    async def refused(self, tool: str, **arguments: Any) -> dict[str, Any]:
        """The structured rejection of a call that must be refused."""
        try:
            answer = await self.call(tool, **arguments)
        except Rejected as r:
            return r.error
        raise AssertionError(f"{tool} should have been refused, answered {answer}")


@asynccontextmanager
async def connect(
    url: str,
    revision: str,
    key: str | None = None,
    answers: list[tuple[str, int]] | None = None,
    extensions: list[ClientExtension] | None = None,
) -> AsyncIterator[Agent]:
    """An MCP client at `url` speaking `revision`, with `key` as its bearer key; the HTTP method and
    status of every answer go to `answers` (which outlives the connection); `extensions` are the
    client extensions it declares."""
    session_ids: list[str] = []
    answers = answers if answers is not None else []

    async def on_response(response: httpx2.Response) -> None:
        answers.append((response.request.method, response.status_code))
        if sid := response.headers.get("mcp-session-id"):
            session_ids.append(sid)

    headers = {"Authorization": f"Bearer {key}"} if key else {}
    http = httpx2.AsyncClient(
        headers=headers,
        timeout=httpx2.Timeout(BOUND_S, read=BOUND_S),
        event_hooks={"response": [on_response]},
    )
    # 2025-11-25 through the initialize handshake ("legacy"); 2026-07-28 adopted directly.
    mode = "legacy" if revision == "2025-11-25" else revision
    client_of = Client(streamable_http_client(url, http_client=http), mode=mode, extensions=extensions)
    async with http, client_of as client:
        assert client.protocol_version == revision, f"negotiated {client.protocol_version}, wanted {revision}"
        yield Agent(client, session_ids, answers)


async def register(url: str, revision: str) -> tuple[str, str]:
    """A new agent: its id and key."""
    async with connect(url, revision) as anon:
        r = await anon.call("agent_register")
    agent = r["receipt"]["agent_registered"]["agent"]
    assert r["agent_key"].startswith("kf_ag_"), r
    assert r.get("idempotency_key"), f"a write reports the idempotency key it used: {r}"
    return agent, r["agent_key"]


async def turn_items(agent: Agent) -> list[dict[str, Any]]:
    page = await agent.call("turn_get")
    return page["items"]


def mentions(items: list[dict[str, Any]], needle: str) -> bool:
    return needle in json.dumps(items)


@pytest.mark.anyio
async def test_multi_agent_scenario(cluster: Cluster, revision: str) -> None:
    """Register, thread, post with an assignment, taken, delivered, judged: both turns empty."""
    url = cluster.nodes[cluster.wait_for_leader()].mcp_url
    lead_id, lead_key = await register(url, revision)
    worker_id, worker_key = await register(url, revision)
    async with connect(url, revision, lead_key) as lead, connect(url, revision, worker_key) as worker:
        # The legacy revision keeps a session; the stateless one never names one.
        if revision == "2025-11-25":
            assert lead.session_ids, "2025-11-25: the server assigns an Mcp-Session-Id at initialize"
        else:
            assert not lead.session_ids, f"2026-07-28 is stateless, got session ids {lead.session_ids}"

        created = await lead.call("thread_create", subject="Release notes for 1.4", grant={"role": "ROLE_SPEAKER"})
        thread = created["receipt"]["thread_created"]["thread"]
        await worker.call("thread_join", grant_secret=created["grant_secret"])

        posted = await lead.call(
            "thread_post",
            thread=thread,
            body={"content": "Draft the upgrade section, please."},
            assignment={"addressee": worker_id, "criteria": "Covers every breaking change."},
        )
        assignment = posted["receipt"]["posted"]["assignment"]
        assert assignment.startswith("asg_"), posted
        entry = posted["receipt"]["posted"]["entry"]
        read = await worker.call("entry_get", thread=thread, entry=entry)
        assert mentions([read], "Draft the upgrade section"), read

        # The worker, the other speaker, owes a response to the entry (§6.3 rule 3) and the work.
        assert mentions(await turn_items(worker), "NEXT_STEP_RESPOND"), "posted: the worker owes a response"
        await worker.call("assignment_take", assignment=assignment)
        assert mentions(await turn_items(worker), assignment), "taken: the worker owes the delivery"
        await worker.call("assignment_deliver", assignment=assignment, output="Upgrade: run the migration first.")
        # Replying ends the worker's response; it asks nobody, so the lead owes no answer to it.
        reply = await worker.call(
            "thread_post", thread=thread, body={"content": "Delivered."}, reply_to=entry, ask={"agents": []}
        )
        assert reply["receipt"]["posted"]["ended_own_response"] is True, reply
        assert mentions(await turn_items(lead), assignment), "delivered: the lead owes the judgment"
        adopted = await lead.call("assignment_adopt", assignment=assignment)
        assert adopted["replayed"] is False

        assert await turn_items(worker) == [], "the worker owes nothing"
        assert await turn_items(lead) == [], "the lead owes nothing"
        state = await lead.call("assignment_get", assignment=assignment)
        assert "ADOPTED" in json.dumps(state).upper(), state


@pytest.mark.anyio
async def test_rejection_carries_its_code_and_next_step(cluster: Cluster, revision: str) -> None:
    url = cluster.nodes[cluster.wait_for_leader()].mcp_url
    _, owner_key = await register(url, revision)
    _, stranger_key = await register(url, revision)
    async with connect(url, revision, owner_key) as owner, connect(url, revision, stranger_key) as stranger:
        created = await owner.call("thread_create", subject="private")
        thread = created["receipt"]["thread_created"]["thread"]
        # A thread the caller cannot see is refused as unknown (§9: unknown and unreadable are one).
        error = await stranger.refused("thread_post", thread=thread, body={"content": "let me in"})
        for key in ("code", "message", "next_step", "definite"):
            assert key in error, f"a rejection carries `{key}`: {error}"
        assert error["code"] == "NOT_FOUND", error
        assert error["definite"] is True, error
        assert error["next_step"], error
        # A malformed argument names the field it is about.
        error = await owner.refused("thread_post", thread=thread, body={"content": "x"}, reply_to="not a number")
        assert error["code"] == "INVALID_ARGUMENT", error
        assert "reply_to" in (error.get("field") or ""), error
    # No key at all: the call is refused, with the step that fixes it.
    async with connect(url, revision) as anon:
        error = await anon.refused("turn_get")
        assert error["code"] == "UNAUTHENTICATED", error
        assert error["next_step"], error
    # A wrong key is the same tool error, not an HTTP 401 (which sends hosts into OAuth discovery):
    # the session stays usable, and a call that needs no key still works in it.
    async with connect(url, revision, "kf_ag_" + "0" * 64) as wrong:
        error = await wrong.refused("turn_get")
        assert error["code"] == "UNAUTHENTICATED", error
        assert error["next_step"], error
        assert await wrong.call("agent_register"), "the session outlives a refused key"


@pytest.mark.anyio
async def test_a_follower_serves_every_call(cluster: Cluster, revision: str) -> None:
    """Everything through a follower's MCP URL; the leader's URL reads the same facts."""
    follower = cluster.follower()
    leader = cluster.nodes[cluster.wait_for_leader()]
    agent_id, key = await register(follower.mcp_url, revision)
    async with connect(follower.mcp_url, revision, key) as via_follower:
        created = await via_follower.call("thread_create", subject="through a follower")
        thread = created["receipt"]["thread_created"]["thread"]
        posted = await via_follower.call("thread_post", thread=thread, body={"content": "written via a follower"})
        entry = posted["receipt"]["posted"]["entry"]
    async with connect(leader.mcp_url, revision, key) as via_leader:
        read = await via_leader.call("entry_get", thread=thread, entry=entry)
        assert mentions([read], "written via a follower"), read


@pytest.mark.anyio
async def test_a_repeated_call_after_the_leader_is_killed_has_one_effect(revision: str) -> None:
    """A post sent as the leader is SIGKILLed, then repeated with the same key until it answers:
    one entry, and every answer names the same one."""
    cluster = Cluster.start(3)
    try:
        follower = cluster.follower()
        leader = cluster.wait_for_leader()
        _, key = await register(follower.mcp_url, revision)
        async with connect(follower.mcp_url, revision, key) as agent:
            created = await agent.call("thread_create", subject="failover")
            thread = created["receipt"]["thread_created"]["thread"]
            text = f"exactly once {uuid.uuid4()}"
            idempotency_key = f"mcp-failover-{uuid.uuid4()}"
            args = {"thread": thread, "body": {"content": text}, "idempotency_key": idempotency_key}

            # The first attempt races the kill: its outcome may be known or not.
            first = asyncio.create_task(agent.call("thread_post", **args))
            await asyncio.sleep(0.005)
            cluster.nodes[leader].kill()
            answers = []
            try:
                answers.append(await first)
            except Rejected as r:
                assert r.error.get("code") in ("UNAVAILABLE", "NOT_LEADER"), r.error
            new_leader = cluster.wait_for_leader(other_than=leader)
            assert new_leader != leader
            # Repeat with the same key until it answers (bounded).
            start = time.monotonic()
            while True:
                try:
                    answers.append(await agent.call("thread_post", **args))
                    break
                except Rejected as r:
                    assert r.error.get("code") in ("UNAVAILABLE", "NOT_LEADER"), r.error
                    assert time.monotonic() - start < BOUND_S, f"never answered: {r}\n{cluster.logs()}"
                    await asyncio.sleep(0.2)
            entries = {a["receipt"]["posted"]["entry"] for a in answers}
            assert len(entries) == 1, f"every answer names the same entry: {answers}"
            assert answers[-1]["replayed"] is True or len(answers) == 1, answers
            assert all(a["idempotency_key"] == idempotency_key for a in answers), answers

            # The thread had no entry before: exactly one now, and it is this post.
            timeline = await agent.call("thread_timeline", thread=thread)
            assert [e["seq"] for e in timeline["entries"]] == list(entries), f"one effect: {timeline}"
            read = await agent.call("entry_get", thread=thread, entry=entries.pop())
            assert mentions([read], text), read

        # A stdio bridge whose profile still lists the dead node: every call is answered.
        profile = await stdio_profile(cluster, cluster.dir / "home", "failover")
        async with stdio_agent(cluster, profile, revision) as bridged:
            for _ in range(6):
                assert isinstance(await turn_items(bridged), list)
    finally:
        cluster.stop()


async def stdio_profile(cluster: Cluster, home, name: str) -> dict[str, Any]:
    """Registers an agent with the CLI into profile `name` under `home` (every node's endpoint
    saved in it); its environment and agent id."""
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / "xdg"),
        "KUNGFU_LOG": "warn",
    }
    endpoints = ",".join(n.endpoint for n in cluster.nodes.values())
    registered = await asyncio.to_thread(
        subprocess.run,
        [str(cluster.kungfu), "--endpoint", endpoints, "--profile", name, "--json", "register"],
        env=env,
        capture_output=True,
        text=True,
        timeout=BOUND_S,
    )
    assert registered.returncode == 0, registered.stderr
    return {"env": env, "name": name, "agent": json.loads(registered.stdout)["agent"]}


@asynccontextmanager
async def stdio_agent(
    cluster: Cluster, profile: dict[str, Any], revision: str, extra: list[str] | None = None
) -> AsyncIterator[Agent]:
    """`kungfu mcp --profile NAME` (and `extra` arguments) launched as a host launches a stdio server."""
    params = StdioServerParameters(
        command=str(cluster.kungfu), args=["mcp", "--profile", profile["name"], *(extra or [])], env=profile["env"]
    )
    mode = "legacy" if revision == "2025-11-25" else revision
    async with Client(params, mode=mode, read_timeout_seconds=BOUND_S) as client:
        assert client.protocol_version == revision
        yield Agent(client, [])


@pytest.mark.anyio
async def test_the_stdio_bridge_acts_as_the_profiles_agent(cluster: Cluster, revision: str, tmp_path) -> None:
    """`kungfu mcp --profile alice`, launched as hosts launch stdio servers: the profile's key is
    every call's key and its endpoints are the nodes called; stdout carries only the protocol."""
    profile = await stdio_profile(cluster, tmp_path, "alice")
    alice = profile["agent"]
    async with stdio_agent(cluster, profile, revision) as agent:
        assert await turn_items(agent) == [], "the profile's key authenticates: alice owes nothing yet"
        created = await agent.call("thread_create", subject="from a stdio host")
        thread = created["receipt"]["thread_created"]["thread"]
        posted = await agent.call("thread_post", thread=thread, body={"content": "hello from stdio"})
        read = await agent.call("entry_get", thread=thread, entry=posted["receipt"]["posted"]["entry"])
        assert read["entry"]["author"] == alice, read


DEFAULT_ONLY = {"agent_register", "turn_get", "turn_wait", "thread_post", "assignment_take", "task_take", "memory_create"}
COORD = {"memory_write_labeled", "memory_widen_scope", "message_send", "work_scatter", "mailbox_get", "collective_get", "barrier_get", "barrier_wait"}
RECORDS = {"record_create", "record_patch", "record_get", "record_events_get", "record_body_get"}


@pytest.mark.anyio
async def test_toolsets_choose_the_tools_listed(cluster: Cluster, revision: str) -> None:
    """The URL's `toolsets` parameter adds the opt-in sets to the default one; every selection is
    listed as asked, in both revisions."""
    url = cluster.nodes[cluster.wait_for_leader()].mcp_url
    _, key = await register(url, revision)
    expected = {
        "": set(),
        "?toolsets=coord": COORD,
        "?toolsets=records": RECORDS,
        "?toolsets=coord,records": COORD | RECORDS,
        "?toolsets=all": COORD | RECORDS,
    }
    default: set[str] = set()
    for query, extra in expected.items():
        async with connect(url + query, revision, key) as agent:
            names = set(await agent.tool_names())
        assert DEFAULT_ONLY <= names, f"{query or 'no query'}: the default set is always served: {sorted(names)}"
        assert names & (COORD | RECORDS) == extra, f"{query or 'no query'}: {sorted(names)}"
        if not query:
            default = names
        else:
            assert names == default | extra, f"{query}: the default set plus {sorted(extra)}"


@pytest.mark.anyio
async def test_an_unknown_toolset_is_refused_naming_the_known_ones(cluster: Cluster, revision: str) -> None:
    url = cluster.nodes[cluster.wait_for_leader()].mcp_url
    async with connect(url + "?toolsets=coord,admin", revision) as agent:
        with pytest.raises(Exception) as refused:
            await agent.client.list_tools()
    text = str(refused.value)
    assert "admin" in text and "default, coord, records" in text, text


@pytest.mark.anyio
async def test_a_tool_outside_the_connections_toolsets_is_refused_naming_its_set(cluster: Cluster, revision: str) -> None:
    url = cluster.nodes[cluster.wait_for_leader()].mcp_url
    _, key = await register(url, revision)
    async with connect(url, revision, key) as agent:
        with pytest.raises(Exception) as refused:
            await agent.client.call_tool("record_get", {"record": "rec_1"}, read_timeout_seconds=BOUND_S)
    text = str(refused.value)
    assert "records" in text and "toolsets=records" in text, text


def labeled(text: str) -> dict[str, Any]:
    """New labeled content a thread entry may pin (at least fleet, not quarantined)."""
    return {"content": {"content": text, "labels": {"taint": "TAINT_TAINTED", "scope": "SCOPE_FLEET"}}}


@pytest.mark.anyio
async def test_opt_in_writes_answer_their_own_receipt(cluster: Cluster, revision: str) -> None:
    """A coordination send and a record creation through `?toolsets=all`: each result conforms to
    its tool's narrowed output schema (the SDK validates) and carries its own receipt case; a
    refusal still carries its code and next step."""
    url = cluster.nodes[cluster.wait_for_leader()].mcp_url + "?toolsets=all"
    _, key = await register(url, revision)
    async with connect(url, revision, key) as agent:
        created = await agent.call("thread_create", subject="opt-in toolsets")
        thread = created["receipt"]["thread_created"]["thread"]
        sent = await agent.call("message_send", thread=thread, body=labeled("status: green"))
        assert set(sent["receipt"]) == {"kind", "at_unix_micros", "seq", "sent"}, sent
        record = await agent.call(
            "record_create",
            thread=thread,
            title="Release 1.4",
            state="drafting",
            body=labeled("The plan."),
            scope="SCOPE_FLEET",
            editors="RECORD_EDITORS_SPEAKERS",
            message=labeled("A record for the release."),
        )
        assert "record_created" in record["receipt"], record
        error = await agent.refused("record_get", record="rec_999999")
        assert error["code"] == "NOT_FOUND" and error["next_step"], error


@pytest.mark.anyio
async def test_ending_a_session_is_a_success_the_sdk_accepts(cluster: Cluster, caplog: pytest.LogCaptureFixture) -> None:
    """2025-11-25: the SDK ends its session with DELETE on close and logs "Session termination
    failed: <status>" for anything but 200 or 204 (it did for the 202 the door used to answer)."""
    url = cluster.nodes[cluster.wait_for_leader()].mcp_url
    answers: list[tuple[str, int]] = []
    with caplog.at_level(logging.DEBUG, logger="mcp"):
        async with connect(url, "2025-11-25", answers=answers) as agent:
            assert agent.session_ids, "a session to end"
            await agent.tool_names()
    deletes = [status for method, status in answers if method == "DELETE"]
    assert deletes and all(s in (200, 204) for s in deletes), answers
    assert "Session termination failed" not in caplog.text, caplog.text


@pytest.mark.anyio
async def test_the_stdio_bridge_serves_the_toolsets_it_is_given(cluster: Cluster, revision: str, tmp_path) -> None:
    """`kungfu mcp --toolsets records` adds the records set; an unknown set stops it before it
    serves, naming the known ones on stderr (stdout is the protocol)."""
    profile = await stdio_profile(cluster, tmp_path, "bob")
    async with stdio_agent(cluster, profile, revision) as agent:
        names = set(await agent.tool_names())
    assert DEFAULT_ONLY <= names and not names & (COORD | RECORDS), sorted(names)
    async with stdio_agent(cluster, profile, revision, ["--toolsets", "records"]) as agent:
        names = set(await agent.tool_names())
        assert names & (COORD | RECORDS) == RECORDS, sorted(names)
        error = await agent.refused("record_get", record="rec_999999")
        assert error["code"] == "NOT_FOUND" and error["next_step"], error
    refused = await asyncio.to_thread(
        subprocess.run,
        [str(cluster.kungfu), "mcp", "--profile", profile["name"], "--toolsets", "records,admin"],
        env=profile["env"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=BOUND_S,
    )
    assert refused.returncode != 0, refused
    assert refused.stdout == "", "nothing but the protocol on stdout"
    assert "admin" in refused.stderr and "default, coord, records" in refused.stderr, refused.stderr


# --- turn_wait as an MCP Task (issue #31): the `io.modelcontextprotocol/tasks` extension ---

TASKS_EXTENSION = "io.modelcontextprotocol/tasks"


class TaskHandle(Result):
    """`CreateTaskResult` (SEP-2663): a task handle in lieu of the tool's result."""

    result_type: Literal["task"]
    task_id: str
    status: str
    ttl_ms: int | None
    poll_interval_ms: int | None = None


class TaskIdParams(RequestParams):
    task_id: str


class GetTask(Request[TaskIdParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    name_param = "taskId"


class DetailedTask(Result):
    """`tasks/get`'s answer: the task, with its result or error inlined once terminal."""

    result_type: str | None = None
    task_id: str
    status: str
    status_message: str | None = None
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None


class Tasks(ClientExtension):
    """A host's side of the Tasks extension, as the SDK lets a client build one: it declares the
    extension, claims the `task` result of `tools/call` and resolves it by polling `tasks/get`
    until the task is terminal; the terminal task's result is what `call_tool` returns. It keeps
    every status it saw."""

    identifier = TASKS_EXTENSION

    def __init__(self) -> None:
        self.handles: list[TaskHandle] = []
        self.statuses: list[str] = []

    def claims(self) -> list[ResultClaim[Any]]:
        return [ResultClaim(result_type="task", model=TaskHandle, resolve=self.resolve)]

    async def resolve(self, handle: TaskHandle, ctx: ClaimContext) -> CallToolResult:
        self.handles.append(handle)
        deadline = time.monotonic() + BOUND_S
        while True:
            task = await ctx.session.send_request(GetTask(params=TaskIdParams(task_id=handle.task_id)), DetailedTask)
            assert task.task_id == handle.task_id, task
            self.statuses.append(task.status)
            if task.status in ("completed", "failed", "cancelled"):
                break
            assert time.monotonic() < deadline, f"task {handle.task_id} never ended: {self.statuses}"
            # A tenth of the suggested interval: the test wants the end soon after it happens.
            await asyncio.sleep((handle.poll_interval_ms or 1000) / 10_000)
        assert task.status == "completed" and task.result is not None, task
        return CallToolResult.model_validate(task.result)


@pytest.mark.anyio
async def test_turn_wait_is_a_task_for_a_host_that_declares_the_extension(cluster: Cluster) -> None:
    """2026-07-28 (the SDK resolves claimed results on that wire only): with nothing owed, the
    worker's turn_wait is a task, working until the lead's post makes it owe a response; the
    SDK's call then returns the task's result, validated against turn_wait's output schema."""
    revision = "2026-07-28"
    url = cluster.nodes[cluster.wait_for_leader()].mcp_url
    _, lead_key = await register(url, revision)
    _, worker_key = await register(url, revision)
    tasks = Tasks()
    async with (
        connect(url, revision, lead_key) as lead,
        connect(url, revision, worker_key, extensions=[tasks]) as worker,
    ):
        created = await lead.call("thread_create", subject="tasks", grant={"role": "ROLE_SPEAKER"})
        thread = created["receipt"]["thread_created"]["thread"]
        await worker.call("thread_join", grant_secret=created["grant_secret"])

        waiting = asyncio.create_task(worker.call("turn_wait", timeout_secs=60))
        deadline = time.monotonic() + BOUND_S
        while not tasks.statuses:
            assert time.monotonic() < deadline and not waiting.done(), "turn_wait never became a task"
            await asyncio.sleep(0.05)
        handle = tasks.handles[0]
        assert handle.task_id.startswith("kt_") and handle.status == "working", handle
        assert handle.ttl_ms and handle.ttl_ms > 60_000, handle
        assert tasks.statuses[0] == "working", tasks.statuses

        await lead.call("thread_post", thread=thread, body={"content": "ready?"})
        answer = await asyncio.wait_for(waiting, BOUND_S)
        assert mentions(answer["owed"], "NEXT_STEP_RESPOND"), answer
        assert tasks.statuses[-1] == "completed", tasks.statuses
        # Owed now: the next turn_wait answers inline, no task.
        again = await worker.call("turn_wait")
        assert mentions(again["owed"], "NEXT_STEP_RESPOND") and len(tasks.handles) == 1


@pytest.mark.anyio
async def test_barrier_wait_is_a_task_for_a_host_that_declares_the_extension(cluster: Cluster) -> None:
    """2026-07-28, as above: the lead's post asks two members; read as a barrier it waits, so the
    lead's barrier_wait (toolset coord) is a task, working until the last member replies; the SDK's
    call then returns the barrier released, validated against barrier_get's output schema."""
    revision = "2026-07-28"
    url = cluster.nodes[cluster.wait_for_leader()].mcp_url
    _, lead_key = await register(url, revision)
    first_id, first_key = await register(url, revision)
    last_id, last_key = await register(url, revision)
    tasks = Tasks()
    async with (
        connect(url + "?toolsets=coord", revision, lead_key, extensions=[tasks]) as lead,
        connect(url, revision, first_key) as first,
        connect(url, revision, last_key) as last,
    ):
        created = await lead.call("thread_create", subject="barrier", grant={"role": "ROLE_SPEAKER"})
        thread = created["receipt"]["thread_created"]["thread"]
        for member in (first, last):
            await member.call("thread_join", grant_secret=created["grant_secret"])
        ask = {"agents": [first_id, last_id]}
        posted = await lead.call("thread_post", thread=thread, body={"content": "ready?"}, ask=ask)
        entry = posted["receipt"]["posted"]["entry"]

        waiting = asyncio.create_task(lead.call("barrier_wait", thread=thread, entry=entry, timeout_secs=60))
        deadline = time.monotonic() + BOUND_S
        while not tasks.statuses:
            assert time.monotonic() < deadline and not waiting.done(), "barrier_wait never became a task"
            await asyncio.sleep(0.05)
        assert tasks.handles[0].status == "working" and tasks.statuses[0] == "working", tasks.statuses

        await first.call("thread_post", thread=thread, body={"content": "ready"}, reply_to=entry)
        assert not waiting.done(), "one member has not replied: the barrier waits"
        await last.call("thread_post", thread=thread, body={"content": "ready"}, reply_to=entry)
        barrier = await asyncio.wait_for(waiting, BOUND_S)
        assert barrier["state"] == "BARRIER_STATE_RELEASED" and barrier["pending"] == 0, barrier
        assert tasks.statuses[-1] == "completed", tasks.statuses
        # Released now: a further wait answers inline, no task.
        again = await lead.call("barrier_wait", thread=thread, entry=entry)
        assert again == barrier and len(tasks.handles) == 1, again
