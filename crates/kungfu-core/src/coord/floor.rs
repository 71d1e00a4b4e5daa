//! The capability floor (design §2.3): one check, called from every path that widens the audience
//! of labeled content (a thread entry, a Task input, publishing). Pure: labels in, a verdict out.

use kungfu_types::{Code, FakReason, Labels, Rejection, Scope, Taint};
use std::fmt;

/// Where labeled content is going, and so the narrowest scope it must carry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Context {
    /// Pinned by a thread entry: read by the thread's current and later members.
    ThreadEntry,
    /// Pinned as a Task's required input: read by agents bound only by a contract.
    TaskInput,
    /// The current version of a public Memory: read by every agent.
    Published,
    /// A body, note or artifact of a shared record of this scope (design §5.5).
    RecordItem { record_scope: Scope },
}

impl Context {
    /// The narrowest scope content may carry on this path (design §2.1 table).
    pub fn required(self) -> Scope {
        match self {
            Context::ThreadEntry | Context::RecordItem { .. } => Scope::Fleet,
            Context::TaskInput => Scope::Tenant,
            Context::Published => Scope::Public,
        }
    }
}

impl fmt::Display for Context {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Context::ThreadEntry => "a thread entry",
            Context::TaskInput => "a Task input",
            Context::Published => "a public Memory",
            Context::RecordItem { .. } => "an item of a shared record",
        })
    }
}

/// The labels the coordination actions assume: a version's own, or fak's fail-closed zero value
/// (tainted, agent) for an unlabeled one (design §2.2).
pub fn effective(labels: Option<Labels>) -> Labels {
    labels.unwrap_or(Labels::FAIL_CLOSED)
}

/// Design §2.3, in fak's order (quarantine first): quarantined content never leaves its author's
/// own Memory; content narrower than the path's audience is refused. Both are `TRUST_VIOLATION`
/// with `fak_reason = TRUST_VIOLATION`. There is no self-channel exception: every later member of
/// a thread reads every entry (§9), so no thread stays private.
pub fn floor(labels: Labels, context: Context) -> Result<(), Rejection> {
    if labels.taint == Taint::Quarantined {
        return Err(trust_violation(format!(
            "is quarantined; quarantined content never leaves its author's own Memory, so it cannot become {context}"
        )));
    }
    let required = context.required();
    if labels.scope < required {
        return Err(trust_violation(format!(
            "is {}-scoped, and {context} needs at least {required}: widen the scope with WidenScope, or keep it \
             in your own Memory",
            labels.scope
        )));
    }
    // Design §2.3 step 3: an item never declares a wider scope than its record.
    if let Context::RecordItem { record_scope } = context
        && labels.scope > record_scope
    {
        return Err(trust_violation(format!(
            "is {}-scoped, wider than its {record_scope}-scoped record; an item may not declare a wider scope \
                 than its record",
            labels.scope
        ))
        .with_fak_shared(kungfu_types::SharedReason::ScopeWidenForbidden));
    }
    Ok(())
}

fn trust_violation(message: String) -> Rejection {
    Rejection::new(Code::TrustViolation, message).with_fak(FakReason::TrustViolation)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quarantine_is_refused_on_every_path_whatever_the_scope() {
        for ctx in [Context::ThreadEntry, Context::TaskInput, Context::Published] {
            let r = floor(Labels::new(Taint::Quarantined, Scope::Public), ctx).unwrap_err();
            assert_eq!(r.code, Code::TrustViolation);
            assert!(r.message.contains("quarantined"), "{r}");
        }
    }

    #[test]
    fn each_path_needs_its_scope_and_trusted_grants_nothing() {
        let table = [
            (Context::ThreadEntry, [false, true, true, true]),
            (Context::TaskInput, [false, false, true, true]),
            (Context::Published, [false, false, false, true]),
        ];
        for (ctx, allowed) in table {
            for (scope, ok) in Scope::ALL.into_iter().zip(allowed) {
                for taint in [Taint::Trusted, Taint::Tainted] {
                    assert_eq!(floor(Labels::new(taint, scope), ctx).is_ok(), ok, "{taint}/{scope} as {ctx}");
                }
            }
        }
    }

    #[test]
    fn unlabeled_counts_as_fail_closed() {
        assert_eq!(effective(None), Labels::new(Taint::Tainted, Scope::Agent));
        assert!(floor(effective(None), Context::ThreadEntry).is_err());
    }
}
