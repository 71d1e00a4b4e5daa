//! The footprint of every protocol action: who issues it, which object orders it (its anchor), and
//! what else it must read or write — the input of the placement question "which groups does this
//! action touch?". One row per `kungfu_core::action::ActionKind`, in an exhaustive `match`: an
//! action added to the core does not compile here until someone has said what it touches, and
//! `docs/scaling.md` then has to say how it stays atomic (its table is checked against
//! `ActionKind::ALL` by a test).
//!
//! The rows restate `crates/kungfu-core/src/decide/` in placement terms. Time-invariant facts (an
//! agent's registration time for Task eligibility, a Memory's author) are carried in ids or copied
//! on first use and are not touches.

use kungfu_core::action::ActionKind;

/// Who issues the action (`kungfu_core::action::Principal`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Issuer {
    /// An authenticated agent: the action is keyed (L3) and the agent must be active (§4).
    Agent,
    /// Registration, before the agent exists.
    Registrar,
    /// An operator setting account state (§4).
    Operator,
    /// The deadline timer of the group that holds the obligation (L4); never keyed.
    System,
}

/// The object whose group orders the action: its serialization point (L5).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Anchor {
    /// A new agent's home (registration).
    NewAgent,
    /// An existing agent's home (deactivation).
    Agent,
    /// An existing Memory of the caller (versions, visibility, withdrawal).
    Memory,
    /// A new standalone Memory of the caller.
    NewMemory,
    /// An existing thread: its members, entries, responses, grant and assignments.
    Thread,
    /// A new thread.
    NewThread,
    /// An existing Task: its contract versions, engagements, deliveries, judgments.
    Task,
    /// A new Task.
    NewTask,
    /// The object (thread or Task) that holds the due obligation.
    Obligation,
}

/// New Memories the action creates for the caller in the same action (L2 combined actions).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NewMemories {
    None,
    /// A post or send body given as content, or a labeled write (`PostBody::Content`).
    MaybeOne,
    /// A scatter: the header and one goal per rank, each possibly new content.
    PerRank,
}

/// Existing Memory versions the action pins and must check on one consistent state (§9, §7.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pins {
    None,
    /// The body of an entry, when it is a pin: the caller's own valid Memory, or another agent's
    /// valid public Memory (§5, §9).
    Body,
    /// The required inputs of a contract: the author's own pinned versions (§7.1).
    ContractInputs,
}

/// Agents whose home group must learn the anchor's group before the action commits, so that their
/// turn (§8) and their deactivation (§4) reach it: the presence protocol of `docs/scaling.md`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Presence {
    None,
    /// The caller (it joins, creates, takes or acts where it was not yet present).
    Caller,
    /// The caller and the agents the action names: a restricted audience, a designated judge.
    CallerAndNamed,
}

/// What one action kind touches besides its anchor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Footprint {
    pub issuer: Issuer,
    pub anchor: Anchor,
    pub new_memories: NewMemories,
    pub pins: Pins,
    /// An entry that references a Task checks that the Task exists and is readable (§7.5).
    pub task_ref: bool,
    pub presence: Presence,
    /// Ends state in every group where the agent holds a membership (§4: in one fact), and turns
    /// the agent's status copy to deactivated in every other group where it is present.
    pub all_memberships: bool,
}

impl Footprint {
    const fn agent(anchor: Anchor) -> Footprint {
        Footprint {
            issuer: Issuer::Agent,
            anchor,
            new_memories: NewMemories::None,
            pins: Pins::None,
            task_ref: false,
            presence: Presence::Caller,
            all_memberships: false,
        }
    }

    /// True when the action can only ever touch its anchor's group and the caller's home (the
    /// placement decides whether those are one group).
    pub fn anchor_only(&self) -> bool {
        self.new_memories == NewMemories::None
            && self.pins == Pins::None
            && !self.task_ref
            && self.presence != Presence::CallerAndNamed
            && !self.all_memberships
    }
}

/// The footprint of an action kind. No wildcard arm, on purpose.
pub fn footprint(kind: ActionKind) -> Footprint {
    use ActionKind as K;
    let a = Footprint::agent;
    match kind {
        K::RegisterAgent => Footprint { issuer: Issuer::Registrar, presence: Presence::None, ..a(Anchor::NewAgent) },
        K::DeactivateAgent => {
            Footprint { issuer: Issuer::Operator, presence: Presence::None, all_memberships: true, ..a(Anchor::Agent) }
        }
        K::CreateMemory => a(Anchor::NewMemory),
        K::UpdateMemory | K::PublishMemory | K::UnpublishMemory | K::WithdrawMemory => a(Anchor::Memory),
        K::CreateThread => a(Anchor::NewThread),
        // The grant names its thread (its secret carries the thread's partition key, deliverable 3).
        K::IssueGrant | K::VoidGrant | K::Join | K::Leave | K::Remove | K::ChangeRole => a(Anchor::Thread),
        K::Post | K::Send => Footprint {
            new_memories: NewMemories::MaybeOne,
            pins: Pins::Body,
            task_ref: kind == K::Post,
            ..a(Anchor::Thread)
        },
        K::Scatter => Footprint { new_memories: NewMemories::PerRank, pins: Pins::Body, ..a(Anchor::Thread) },
        K::Handle | K::Retract | K::CloseThread => a(Anchor::Thread),
        // Assignments live in their thread's group (§6.2 voids them with the membership).
        K::TakeAssignment
        | K::DeliverAssignment
        | K::AdoptAssignment
        | K::RejectAssignment
        | K::DropAssignment
        | K::VoidAssignment => a(Anchor::Thread),
        K::CreateTask => {
            Footprint { pins: Pins::ContractInputs, presence: Presence::CallerAndNamed, ..a(Anchor::NewTask) }
        }
        K::ReviseContract => {
            Footprint { pins: Pins::ContractInputs, presence: Presence::CallerAndNamed, ..a(Anchor::Task) }
        }
        K::PauseTask | K::ResumeTask => a(Anchor::Task),
        // An engagement binds the contract's input versions (§7.3).
        K::TakeTask | K::DeliverTask => Footprint { pins: Pins::ContractInputs, ..a(Anchor::Task) },
        K::DropEngagement | K::AdoptEngagement | K::RejectEngagement => a(Anchor::Task),
        K::Expire => Footprint { issuer: Issuer::System, presence: Presence::None, ..a(Anchor::Obligation) },
        K::WriteLabeled => Footprint { new_memories: NewMemories::MaybeOne, ..a(Anchor::Memory) },
        K::WidenScope => a(Anchor::Memory),
        // The shared record lives in its thread (COORDINATION §5): every accepted write is also an
        // entry there; its bodies are pinned labeled versions (or external refs), read at the write.
        K::CreateRecord | K::PatchRecord => Footprint { pins: Pins::Body, ..a(Anchor::Thread) },
        // Wake targets live with their agent (issue #35): its turn is derived in its home group.
        K::SetWakeTarget | K::RemoveWakeTarget => a(Anchor::Agent),
        // The deliverer's progress names targets only, in their agents' groups.
        K::RecordWake => Footprint { issuer: Issuer::System, presence: Presence::None, ..a(Anchor::Agent) },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_action_kind_has_a_footprint_that_is_consistent() {
        for &kind in ActionKind::ALL {
            let f = footprint(kind);
            match f.issuer {
                // L3 and §4 apply to agents only; an unkeyed principal needs no presence.
                Issuer::Agent => assert_ne!(f.presence, Presence::None, "{kind:?}"),
                _ => assert_eq!(f.presence, Presence::None, "{kind:?}"),
            }
            // Only a deactivation fans out to every membership.
            assert_eq!(f.all_memberships, kind == ActionKind::DeactivateAgent, "{kind:?}");
        }
    }

    #[test]
    fn classification_of_representative_actions() {
        // Single-object actions: only their anchor (and the caller's home).
        for kind in [ActionKind::Handle, ActionKind::AdoptEngagement, ActionKind::CloseThread, ActionKind::Expire] {
            assert!(footprint(kind).anchor_only(), "{kind:?}");
        }
        // §9: a post may pin another agent's Memory, which lives elsewhere.
        let post = footprint(ActionKind::Post);
        assert_eq!((post.anchor, post.pins, post.new_memories), (Anchor::Thread, Pins::Body, NewMemories::MaybeOne));
        assert!(!post.anchor_only());
        // §4: deactivation ends every membership in one fact.
        assert!(footprint(ActionKind::DeactivateAgent).all_memberships);
        assert_eq!(footprint(ActionKind::Expire).issuer, Issuer::System);
        assert_eq!(footprint(ActionKind::CreateTask).presence, Presence::CallerAndNamed);
    }
}
