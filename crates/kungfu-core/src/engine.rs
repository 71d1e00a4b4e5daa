//! `apply`: the protocol as one pure function of (state, command). It returns the facts, the
//! changed records and the receipt, or a rejection, and touches nothing else: no IO, no clock, no
//! randomness. Storage commits the returned [`Changeset`] in one atomic batch; replicas applying
//! the same commands to the same state produce byte-identical changes.

use crate::action::{Command, Principal};
use crate::decide::{self, Cx, Fail};
use crate::fact::JournaledFact;
use crate::keys;
use crate::limits::Limits;
use crate::receipt::{Receipt, StoredReceipt};
use crate::state::{Changeset, Record, StateError, StateExt, StateRead};
use kungfu_types::{Code, Rejection};

/// The result of applying one command.
#[derive(Debug)]
pub struct Applied {
    /// The receipt of a success, or the rejection. A rejection had no effect (L2).
    pub outcome: Result<Receipt, Rejection>,
    /// True when the receipt was stored by an earlier identical request (L3).
    pub replayed: bool,
    /// Facts recorded, in order. Deadline facts settled before a rejected action stay: they are
    /// the deadline's effect, not the action's (L4: the deadline wins).
    pub facts: Vec<JournaledFact>,
    /// Every record, index, journal and receipt write, to commit atomically.
    pub changes: Changeset,
    /// What the command changed that timers and streams wake on (the deadlines it armed and
    /// ended, the turns it changed, the objects whose journals it wrote), read from `changes`.
    pub effects: crate::effects::Effects,
}

impl Applied {
    /// The receipt's canonical bytes, or None for a rejection.
    pub fn receipt_bytes(&self) -> Option<Vec<u8>> {
        self.outcome.as_ref().ok().map(Receipt::to_bytes)
    }
}

/// What the leader's pre-check decided about a command (DESIGN §3: an optimization and a fair
/// queue, never the authority).
#[derive(Debug, Clone, PartialEq)]
pub enum Precheck {
    /// Apply would refuse it with exactly this rejection on this state: no log write needed.
    Refused(Rejection),
    /// The same request was decided before (L3): its stored receipt is the answer.
    Replayed(Receipt),
    /// Nothing refused it before its first fact: it must go through the log, where apply decides.
    Proceed,
}

/// Applies one command to a state. `Err` only when the state cannot be read; then nothing may be
/// committed and the node must stop acknowledging (it cannot decide).
pub fn apply(state: &dyn StateRead, cmd: &Command, limits: &Limits) -> Result<Applied, StateError> {
    match run(state, cmd, limits, false)? {
        Some(applied) => Ok(applied),
        None => Err(StateError::Io("internal: apply stopped as a probe".into())),
    }
}

/// Decides `cmd` as [`apply`] would, as far as its first fact, and builds nothing. A refusal or
/// a replay is exactly what apply answers on the same state (the same code, field and message);
/// `Proceed` says nothing either way. Costs the action's checks, not the facts, records, indexes
/// and receipt that apply builds after them (issue #15: the pre-check ran the whole apply for
/// every accepted write).
pub fn precheck(state: &dyn StateRead, cmd: &Command, limits: &Limits) -> Result<Precheck, StateError> {
    Ok(match run(state, cmd, limits, true)? {
        None => Precheck::Proceed,
        Some(Applied { outcome: Ok(receipt), replayed: true, .. }) => Precheck::Replayed(receipt),
        Some(Applied { outcome: Err(r), .. }) if r.definite => Precheck::Refused(r),
        // An action that records no fact succeeds without one (the no-effect successes of L2):
        // apply answers it after the log.
        Some(_) => Precheck::Proceed,
    })
}

/// Applies `cmd`, or with `probe` decides it as far as the action's first fact (None once it got
/// there). The deadlines the action settles first (L4) are always settled in full: the action is
/// judged on the state they leave.
fn run(state: &dyn StateRead, cmd: &Command, limits: &Limits, probe: bool) -> Result<Option<Applied>, StateError> {
    let actor = match cmd.principal {
        Principal::Agent(a) => Some(a),
        _ => None,
    };
    // L3: one principal, one action kind and one key identify one logical request.
    let receipt_key = match (&cmd.key, cmd.principal) {
        (Some(k), p) if p != Principal::System => Some(keys::receipt(p, cmd.action.kind(), k)),
        _ => None,
    };
    if let Some(rk) = &receipt_key {
        match state.get(rk)? {
            Some(Record::Receipt(stored)) => {
                let outcome = if stored.digest == cmd.digest {
                    // The same request returns the original result, even after the state moved on.
                    Ok(stored.receipt)
                } else {
                    Err(Rejection::field(
                        Code::IdempotencyKeyReused,
                        "idempotency_key",
                        "was already used for a different request of this kind; use a new key",
                    ))
                };
                let replayed = outcome.is_ok();
                return Ok(Some(Applied {
                    outcome,
                    replayed,
                    facts: Vec::new(),
                    changes: Changeset::new(),
                    effects: Default::default(),
                }));
            }
            Some(_) => return Err(StateError::corrupt(rk, "expected a receipt")),
            None => {}
        }
    }

    let seq = state.counters()?.unwrap_or_default().seq + 1;
    // Phase 1, L4: the deadlines of the objects the action touches are settled first.
    let mut first = Cx::new(state, cmd.ts, None, seq, 0, limits);
    let mut settled = Vec::new();
    for object in decide::settle_targets(state, &cmd.action)? {
        match decide::settle_due(&mut first, object) {
            Ok(ended) => settled.extend(ended),
            Err(Fail::State(e)) => return Err(e),
            Err(Fail::Reject(r)) => {
                return Err(StateError::Io(format!("internal: settling deadlines was rejected: {r}")));
            }
            Err(Fail::Probed) => return Err(StateError::Io("internal: settling deadlines stopped as a probe".into())),
        }
    }
    // Phase 2: the action itself, in an overlay of its own so a rejection leaves no trace (L2).
    let (decided, changes2, facts2) = {
        let mut second = Cx::new(&first.tx, cmd.ts, actor, seq, first.next_idx, limits);
        second.probe = probe;
        let decided = decide::decide(&mut second, cmd, settled);
        (decided, second.tx.into_changes(), second.facts)
    };
    match decided {
        Ok(result) => {
            // The two no-effect successes of L2 record no fact, so their receipt names no seq.
            let receipt =
                Receipt { kind: cmd.action.kind(), at: cmd.ts, seq: (!facts2.is_empty()).then_some(seq), result };
            let mut changes = first.tx.into_changes();
            changes.extend(changes2);
            let mut facts = first.facts;
            facts.extend(facts2);
            if let Some(rk) = receipt_key {
                changes
                    .insert(rk, Some(Record::Receipt(StoredReceipt { digest: cmd.digest, receipt: receipt.clone() })));
            }
            let effects = crate::effects::Effects::of(&changes);
            Ok(Some(Applied { outcome: Ok(receipt), replayed: false, facts, changes, effects }))
        }
        Err(Fail::Reject(r)) => {
            // The deadlines settled before the refusal stay, and so do their effects (L4).
            let changes = first.tx.into_changes();
            let effects = crate::effects::Effects::of(&changes);
            Ok(Some(Applied { outcome: Err(r), replayed: false, facts: first.facts, changes, effects }))
        }
        Err(Fail::State(e)) => Err(e),
        Err(Fail::Probed) => Ok(None),
    }
}
