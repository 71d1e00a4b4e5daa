//! Identifier newtypes. Ids are allocated by the state machine from counters in its own state, so
//! every replica allocates the same id for the same command; they carry no meaning and grant nothing
//! (§9: knowing an identifier grants nothing).

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident, $prefix:literal) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        pub struct $name(pub u64);

        impl $name {
            /// The textual prefix used when the id is shown to people (`ag_7`).
            pub const PREFIX: &'static str = $prefix;
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}_{}", $prefix, self.0)
            }
        }

        impl FromStr for $name {
            type Err = ParseIdError;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                let rest = s
                    .strip_prefix($prefix)
                    .and_then(|r| r.strip_prefix('_'))
                    .ok_or(ParseIdError { expected: $prefix })?;
                rest.parse::<u64>().map($name).map_err(|_| ParseIdError { expected: $prefix })
            }
        }
    };
}

id_type!(
    /// An agent: the actor of the protocol (§4).
    AgentId, "ag");
id_type!(
    /// A Memory (§5).
    MemoryId, "mem");
id_type!(
    /// A Thread (§6).
    ThreadId, "th");
id_type!(
    /// An assignment inside a thread (§6.4).
    AssignmentId, "asg");
id_type!(
    /// A Task (§7).
    TaskId, "task");
id_type!(
    /// An engagement of one agent with one Task (§7.3).
    EngagementId, "eng");
id_type!(
    /// A shared record inside a thread (coordination design §5.2).
    RecordId, "rec");
id_type!(
    /// A wake target of one agent: where its turn changes are delivered (issue #35, docs/wake.md).
    WakeTargetId, "wt");

/// The sequence number of an entry within its thread (§6.3), starting at 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct EntrySeq(pub u64);

impl fmt::Display for EntrySeq {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{}", self.0)
    }
}

/// A version number: of a Memory (§5) or of a Task contract (§7.1). Starts at 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Version(pub u32);

impl Version {
    /// The first version of anything.
    pub const FIRST: Version = Version(1);

    /// The version after this one.
    pub fn next(self) -> Version {
        Version(self.0 + 1)
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "v{}", self.0)
    }
}

/// An object with its own fact journal (L1): an agent or one of the three work atoms (§2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum ObjectRef {
    Agent(AgentId),
    Memory(MemoryId),
    Thread(ThreadId),
    Task(TaskId),
}

impl fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ObjectRef::Agent(id) => id.fmt(f),
            ObjectRef::Memory(id) => id.fmt(f),
            ObjectRef::Thread(id) => id.fmt(f),
            ObjectRef::Task(id) => id.fmt(f),
        }
    }
}

/// A textual id did not have the expected form (`<prefix>_<number>`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseIdError {
    pub expected: &'static str,
}

impl fmt::Display for ParseIdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "expected an id of the form {}_<number>", self.expected)
    }
}

impl std::error::Error for ParseIdError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_through_their_text_form() {
        let id = ThreadId(42);
        assert_eq!(id.to_string(), "th_42");
        assert_eq!("th_42".parse::<ThreadId>(), Ok(id));
        assert!("ag_42".parse::<ThreadId>().is_err());
        assert!("th_x".parse::<ThreadId>().is_err());
        assert!("th42".parse::<ThreadId>().is_err());
    }
}
