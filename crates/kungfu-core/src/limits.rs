//! Capacity limits and deadline defaults (L4). Every cheap, repeatable action is bounded here; a
//! request past a bound is rejected with `LIMIT_EXCEEDED` (or `INVALID_ARGUMENT` for a malformed
//! size) and creates no obligation, effect or compensation. The server loads this struct from its
//! configuration; the defaults are what a single node runs with out of the box.

use kungfu_types::Micros;
use serde::{Deserialize, Serialize};

/// Capacity limits and deadline defaults, applied identically on every replica.
///
/// Changing a limit is a configuration change that must reach every node before it takes effect
/// on new commands; a limit is never applied retroactively to existing facts.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Limits {
    /// Largest Memory version, entry, delivery or contract content field, in bytes.
    pub max_content_bytes: usize,
    /// Largest thread subject, in bytes.
    pub max_subject_bytes: usize,
    /// Largest handle note (§6.3: "a one-line note"), in bytes.
    pub max_note_bytes: usize,
    /// Largest rejection reason (§6.4, §7.3), in bytes.
    pub max_reason_bytes: usize,
    /// Current members of one thread.
    pub max_members_per_thread: u32,
    /// Members named in one entry's `ask` (§6.3).
    pub max_ask: usize,
    /// Open threads one agent belongs to at once (creating and joining count).
    pub max_open_threads_per_agent: u32,
    /// Assignments of one thread that are not yet delivered or ended.
    pub max_open_assignments_per_thread: u32,
    /// Memories one agent has created.
    pub max_memories_per_agent: u32,
    /// Versions of one Memory.
    pub max_versions_per_memory: u32,
    /// Tasks one agent has created.
    pub max_tasks_per_agent: u32,
    /// Agents named by a restricted Task's audience (§7.2).
    pub max_audience: usize,
    /// Required inputs of one contract (§7.1).
    pub max_contract_inputs: usize,
    /// Agents excluded by a contract's eligibility.
    pub max_excluded_agents: usize,
    /// Open engagements of one Task.
    pub max_open_engagements_per_task: u32,
    /// The largest `max_adoptions` a contract may state.
    pub max_adoptions_cap: u32,
    /// Largest page of any paginated read (turn, opportunities, timeline).
    pub max_page_size: usize,
    /// Page size used when the caller asks for none.
    pub default_page_size: usize,
    /// Facts shown in a working set's history digest (§8: every read is bounded).
    pub history_digest_len: usize,
    /// Delivery deadline when an assignment or contract states none (L4).
    pub default_delivery_window: Micros,
    /// Judgment deadline when an assignment or contract states none (L4).
    pub default_judgment_window: Micros,
    /// Shortest delivery or judgment window a request may state.
    pub min_window: Micros,
    /// Longest delivery or judgment window a request may state.
    pub max_window: Micros,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_content_bytes: 256 * 1024,
            max_subject_bytes: 1024,
            max_note_bytes: 1000,
            max_reason_bytes: 4000,
            max_members_per_thread: 256,
            max_ask: 50,
            max_open_threads_per_agent: 1000,
            max_open_assignments_per_thread: 1000,
            max_memories_per_agent: 100_000,
            max_versions_per_memory: 10_000,
            max_tasks_per_agent: 10_000,
            max_audience: 100,
            max_contract_inputs: 16,
            max_excluded_agents: 100,
            max_open_engagements_per_task: 1000,
            max_adoptions_cap: 100_000,
            max_page_size: 100,
            default_page_size: 50,
            history_digest_len: 50,
            default_delivery_window: Micros::from_secs(24 * 3600),
            default_judgment_window: Micros::from_secs(24 * 3600),
            min_window: Micros::from_secs(1),
            max_window: Micros::from_secs(90 * 24 * 3600),
        }
    }
}

impl Limits {
    /// The page size to use for a request that asked for `requested` items (0 = default).
    pub fn page_size(&self, requested: usize) -> usize {
        if requested == 0 { self.default_page_size } else { requested.min(self.max_page_size) }
    }
}

/// Limits of the coordination layer (design §9). A struct of its own because [`Limits`] travels
/// inside the raft log (`Request::SetLimits`) and bincode encodes a struct by position, so it must
/// never gain a field (design R4). These are the same on every replica: built in, not configured
/// (a replicated `SetCoordLimits` is the way to make them configurable without a migration).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CoordLimits {
    /// Ranks of one scatter; responders of one `Send` to all speakers.
    pub max_collective_members: usize,
    /// Inline content of one `Send` or `Scatter`, in bytes (each piece is also bounded by
    /// `Limits::max_content_bytes`).
    pub max_collective_bytes: usize,
    /// Content returned inline by one mailbox page; later items are read on demand.
    pub max_mailbox_page_bytes: usize,
    /// Outputs returned inline by one gather; later ones are read on demand.
    pub max_gather_output_bytes: usize,
    /// Entries one filtered mailbox read examines per requested item (design §3.5: every call is
    /// bounded, and a full traversal still omits nothing).
    pub mailbox_scan_factor: usize,
    /// Shared records of one thread (design §9).
    pub max_records_per_thread: usize,
    /// Items of one kind (notes, artifacts, decisions) in one record.
    pub max_record_items: u32,
    /// Ops of one patch.
    pub max_patch_ops: usize,
    /// Bytes of one scalar text (title, state, decision state and reason).
    pub max_record_field_bytes: usize,
}

impl CoordLimits {
    pub const DEFAULT: CoordLimits = CoordLimits {
        max_collective_members: 64,
        max_collective_bytes: 1024 * 1024,
        max_mailbox_page_bytes: 1024 * 1024,
        max_gather_output_bytes: 2 * 1024 * 1024,
        mailbox_scan_factor: 8,
        max_records_per_thread: 100,
        max_record_items: 1000,
        max_patch_ops: 32,
        max_record_field_bytes: 4096,
    };
}

impl Default for CoordLimits {
    fn default() -> CoordLimits {
        CoordLimits::DEFAULT
    }
}

/// Limits of wake targets (issue #35), built in like [`CoordLimits`] and for the same reason.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WakeLimits {
    /// Targets one agent holds at once.
    pub max_targets_per_agent: usize,
    /// Longest target URL, in bytes.
    pub max_url_bytes: usize,
    /// Objects one target's filter names.
    pub max_filter_objects: usize,
    /// Longest give-up error kept with a target, in bytes (longer ones are cut on a char boundary).
    pub max_error_bytes: usize,
    /// Items one `RecordWake` carries, all lists together.
    pub max_record_items: usize,
}

impl WakeLimits {
    pub const DEFAULT: WakeLimits = WakeLimits {
        max_targets_per_agent: 8,
        max_url_bytes: 2048,
        max_filter_objects: 64,
        max_error_bytes: 512,
        max_record_items: 4096,
    };
}
