//! Thread roles (§6.1, §6.2).

use serde::{Deserialize, Serialize};
use std::fmt;

/// The role a membership holds in a thread. An admission grant binds one (default speaker, §6.1).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Role {
    Observer,
    #[default]
    Speaker,
    Governor,
}

impl Role {
    /// §6.2: "May speak means holding the speaker or governor role."
    pub fn may_speak(self) -> bool {
        matches!(self, Role::Speaker | Role::Governor)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Role::Observer => "observer",
            Role::Speaker => "speaker",
            Role::Governor => "governor",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
