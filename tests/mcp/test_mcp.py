"""The MCP door driven by the official Python SDK (`mcp` 2.x, a client nobody here wrote) against
real `kungfud` processes, in both protocol revisions: 2025-11-25 (initialize, a session id on every
request) and 2026-07-28 (stateless: no handshake, no session). Over Streamable HTTP at each node's
`/mcp`, and over stdio through `kungfu mcp --profile NAME`.

Each test runs once per revision. Three-node clusters on free loopback ports (kungfu_cluster.py);
every call goes through `Client.call_tool` over Streamable HTTP with the agent's key in
`Authorization: Bearer`.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import time
import uuid
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator

import httpx2
import pytest
from mcp.client import Client
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

    def __init__(self, client: Client, session_ids: list[str]):
        self.client = client
        self.session_ids = session_ids

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
async def connect(url: str, revision: str, key: str | None = None) -> AsyncIterator[Agent]:
    """An MCP client at `url` speaking `revision`, with `key` as its bearer key."""
    session_ids: list[str] = []

    async def on_response(response: httpx2.Response) -> None:
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
    async with http, Client(streamable_http_client(url, http_client=http), mode=mode) as client:
        assert client.protocol_version == revision, f"negotiated {client.protocol_version}, wanted {revision}"
        yield Agent(client, session_ids)


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
async def stdio_agent(cluster: Cluster, profile: dict[str, Any], revision: str) -> AsyncIterator[Agent]:
    """`kungfu mcp --profile NAME` launched as a host launches a stdio server."""
    params = StdioServerParameters(
        command=str(cluster.kungfu), args=["mcp", "--profile", profile["name"]], env=profile["env"]
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
