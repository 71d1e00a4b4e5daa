//! Labels of one immutable Memory version (design §2.1): how trusted its author says it is
//! ([`Taint`]) and how far it may be shared ([`Scope`]). Labels are structure, never content (L6):
//! the runtime reads them, it never reads the bytes they describe.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Provenance of a version, declared in lattice order so the derived `Ord` is the lattice
/// (trusted < tainted < quarantined). `Trusted` is the author's assertion and grants nothing (L6):
/// every rule treats it like `Tainted`; only `Quarantined` is gated.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Taint {
    Trusted,
    Tainted,
    Quarantined,
}

/// A share bound: the widest audience the content may reach, ordered agent < fleet < tenant <
/// public (design §2.1). Agent: the author only. Fleet: a thread's members. Tenant: also agents
/// bound only by a contract. Public: every agent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Scope {
    Agent,
    Fleet,
    Tenant,
    Public,
}

/// The labels of one Memory version, fixed when the version is written and never changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Labels {
    pub taint: Taint,
    pub scope: Scope,
}

impl Labels {
    /// fak's zero value: what the coordination actions assume for a version without labels.
    pub const FAIL_CLOSED: Labels = Labels { taint: Taint::Tainted, scope: Scope::Agent };

    pub fn new(taint: Taint, scope: Scope) -> Labels {
        Labels { taint, scope }
    }
}

impl Taint {
    pub const ALL: [Taint; 3] = [Taint::Trusted, Taint::Tainted, Taint::Quarantined];

    pub fn as_str(self) -> &'static str {
        match self {
            Taint::Trusted => "trusted",
            Taint::Tainted => "tainted",
            Taint::Quarantined => "quarantined",
        }
    }

    pub fn parse(s: &str) -> Option<Taint> {
        Taint::ALL.into_iter().find(|t| t.as_str() == s)
    }
}

impl Scope {
    pub const ALL: [Scope; 4] = [Scope::Agent, Scope::Fleet, Scope::Tenant, Scope::Public];

    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Agent => "agent",
            Scope::Fleet => "fleet",
            Scope::Tenant => "tenant",
            Scope::Public => "public",
        }
    }

    pub fn parse(s: &str) -> Option<Scope> {
        Scope::ALL.into_iter().find(|t| t.as_str() == s)
    }
}

impl fmt::Display for Taint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Display for Labels {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.taint, self.scope)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_derived_orders_are_the_lattices() {
        assert!(Taint::Trusted < Taint::Tainted && Taint::Tainted < Taint::Quarantined);
        assert!(Scope::Agent < Scope::Fleet && Scope::Fleet < Scope::Tenant && Scope::Tenant < Scope::Public);
    }

    #[test]
    fn names_round_trip() {
        for t in Taint::ALL {
            assert_eq!(Taint::parse(t.as_str()), Some(t));
        }
        for s in Scope::ALL {
            assert_eq!(Scope::parse(s.as_str()), Some(s));
        }
        assert_eq!(Scope::parse("tenant "), None);
    }
}
