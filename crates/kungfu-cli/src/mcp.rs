//! `kungfu mcp`: the MCP door over stdio, for hosts that only launch stdio servers (Claude Desktop,
//! Codex, editors). It acts as the agent of a profile: the profile's agent key is the default bearer
//! key of every tool call, and its endpoints are the nodes it calls.
//!
//! Stdout is the protocol stream: nothing else is ever written there. Errors before serving go to
//! stderr like every other command's.
//!
//! The door calls over one gRPC channel balanced across the endpoints; any node serves any call (a
//! follower forwards to the leader). A balanced channel would keep sending a share of the calls to
//! a node that is down (tonic reports a failed connection only when a call is made on it), so a
//! probe takes an unreachable node out of the balance and puts it back once it answers again.

use crate::cli::{Cli, Command};
use crate::error::CliError;
use crate::profile;
use std::collections::BTreeSet;
use std::time::Duration;
use tonic::transport::{Channel, Endpoint, channel::Change};

/// How often the reachability of each endpoint is probed.
const PROBE_EVERY: Duration = Duration::from_secs(1);

/// How long a probe's TCP connect may take before the endpoint counts as unreachable.
const PROBE_TIMEOUT: Duration = Duration::from_millis(500);

/// Bound of the balancer's queue of endpoint changes (at most one insert or remove per endpoint per
/// probe round is ever pending).
const CHANGES: usize = 64;

/// Runs `kungfu mcp`.
pub async fn run(cli: &Cli, list_tools: bool) -> Result<(), CliError> {
    if list_tools {
        print!("{}", kungfu_mcp::tools_markdown());
        return Ok(());
    }
    // Checked before anything is served, so a typo stops the host's launch with a message on
    // stderr rather than a door that lists fewer tools than meant.
    let asked = match &cli.command {
        Command::Mcp { toolsets, .. } => toolsets.as_str(),
        _ => "",
    };
    let toolsets = kungfu_mcp::Toolsets::parse(asked).map_err(|e| CliError::usage(format!("--toolsets: {e}")))?;
    let profiles = profile::load()?;
    let saved = profiles.profiles.get(&cli.profile).cloned().unwrap_or_default();
    let endpoints = crate::ctx::endpoints(cli, &saved);
    let key = cli.key.clone().filter(|k| !k.is_empty()).or_else(|| saved.agent_key.clone());
    if key.is_none() {
        // Stderr: hosts keep it in their server log; stdout is the protocol.
        eprintln!(
            "kungfu mcp: profile `{}` has no agent key: every tool but agent_register will be refused \
             UNAUTHENTICATED (run `kungfu --profile {} register`, or pass --key)",
            cli.profile, cli.profile
        );
    }
    let channel = balanced(&endpoints, Duration::from_secs(cli.timeout_secs.max(1)))?;
    kungfu_mcp::serve_stdio(kungfu_mcp::Door::new(kungfu_mcp::Api::network(channel), key).with_toolsets(toolsets))
        .await
        .map_err(|e| CliError::other(format!("the MCP stdio door stopped: {e:#}")))
}

/// A channel balanced over `endpoints` (`host:port`), kept to the reachable ones by a probe task.
fn balanced(endpoints: &[String], connect_timeout: Duration) -> Result<Channel, CliError> {
    let mut parsed = Vec::new();
    for e in endpoints {
        let endpoint = Endpoint::from_shared(format!("http://{e}"))
            .map_err(|err| CliError::usage(format!("endpoint {e:?} is not host:port: {err}")))?
            .connect_timeout(connect_timeout.min(Duration::from_secs(5)))
            .tcp_nodelay(true);
        parsed.push((e.clone(), endpoint));
    }
    let (channel, changes) = Channel::balance_channel::<String>(CHANGES);
    tokio::spawn(async move {
        let mut inserted = BTreeSet::new();
        loop {
            let mut up = BTreeSet::new();
            for (addr, _) in &parsed {
                let probe = tokio::time::timeout(PROBE_TIMEOUT, tokio::net::TcpStream::connect(addr.as_str())).await;
                if matches!(probe, Ok(Ok(_))) {
                    up.insert(addr.clone());
                }
            }
            // With no node reachable every endpoint stays in: a call then fails at once as
            // unavailable instead of waiting for a node to come back.
            let wanted: BTreeSet<String> =
                if up.is_empty() { parsed.iter().map(|(a, _)| a.clone()).collect() } else { up };
            for (addr, endpoint) in &parsed {
                let change = match (wanted.contains(addr), inserted.contains(addr)) {
                    (true, false) => Change::Insert(addr.clone(), endpoint.clone()),
                    (false, true) => Change::Remove(addr.clone()),
                    _ => continue,
                };
                // The receiver is gone once the channel is dropped: the bridge is stopping.
                if changes.send(change).await.is_err() {
                    return;
                }
                if wanted.contains(addr) {
                    inserted.insert(addr.clone());
                } else {
                    inserted.remove(addr);
                }
            }
            tokio::time::sleep(PROBE_EVERY).await;
        }
    });
    Ok(channel)
}
