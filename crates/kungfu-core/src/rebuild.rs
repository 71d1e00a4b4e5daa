//! L1: rebuilds the whole state from the fact journals alone. Used by tests to prove that state
//! follows from facts, and by operators to audit a store.

use crate::evolve::evolve;
use crate::fact::JournaledFact;
use crate::keys::{self, Family};
use crate::state::{MemState, Record, StateError, StateExt, StateRead, Tx};
use std::collections::BTreeMap;

/// Every fact in the journals, deduplicated (a fact that names several objects is journaled in
/// each) and in global order.
pub fn all_facts(state: &dyn StateRead) -> Result<Vec<JournaledFact>, StateError> {
    let mut facts: BTreeMap<(u64, u32), JournaledFact> = BTreeMap::new();
    for (k, r) in state.scan_all(&keys::journal_prefix())? {
        match r {
            Record::Fact(f) => {
                facts.insert((f.seq, f.idx), f);
            }
            _ => return Err(StateError::corrupt(&k, "journal entry is not a fact")),
        }
    }
    Ok(facts.into_values().collect())
}

/// Folds every journaled fact, in order, into an empty state.
pub fn rebuild(state: &dyn StateRead) -> Result<MemState, StateError> {
    let empty = MemState::new();
    let mut tx = Tx::new(&empty);
    for f in all_facts(state)? {
        evolve(&mut tx, &f)?;
    }
    let changes = tx.into_changes();
    let mut out = MemState::new();
    out.commit(&changes);
    Ok(out)
}

/// The state without receipts: receipts are what requests were told, not protocol state, and are
/// the one family that facts do not rebuild (they are kept as they were written, L3).
pub fn without_receipts(state: &MemState) -> MemState {
    MemState {
        map: state
            .map
            .iter()
            .filter(|(k, _)| Family::of(k) != Some(Family::Receipts))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
    }
}
