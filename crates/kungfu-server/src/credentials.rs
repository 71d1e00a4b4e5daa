//! What a door tells the service layer about a call, in domain terms: the bearer credential it
//! carried, the consistency it asked for, and the address it came from. Each door (gRPC today; MCP
//! and HTTP next) reads these from its own transport once, and the service layer authenticates
//! from them ([`Backend::authenticate`](crate::backend::Backend::authenticate)), so every door
//! gives the same answer and the same code for the same request (STYLE habit 12).

use kungfu_types::AgentId;
use std::net::IpAddr;

/// The transport facts of one call.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Credentials {
    /// The credential after `Bearer ` (an agent key or the operator token), untrimmed; None when
    /// the call carried no bearer credential.
    pub bearer: Option<String>,
    /// How the caller wants its reads served.
    pub consistency: Consistency,
    /// The client's address, when the transport knows it (registrations are limited per address).
    pub remote: Option<IpAddr>,
}

/// How a read is served (DESIGN §8).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Consistency {
    /// By the leader after a read-index round: reflects every write acknowledged before it.
    #[default]
    Linearizable,
    /// By any node from what it has applied, at once; the answer says how far behind it may be.
    Stale,
}

/// An authenticated agent, and how it wants its reads served.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Caller {
    pub agent: AgentId,
    pub consistency: Consistency,
}

/// Proof that a call carried the operator token: only
/// [`Backend::authenticate_operator`](crate::backend::Backend::authenticate_operator) makes one
/// (and, for the console's cluster view on loopback, `console.cluster_view = "loopback"`,
/// [`Backend::authenticate_cluster_viewer`](crate::backend::Backend::authenticate_cluster_viewer)),
/// and every operator call takes it.
#[derive(Debug)]
pub struct Operator(());

impl Operator {
    pub(crate) fn authenticated() -> Operator {
        Operator(())
    }
}
