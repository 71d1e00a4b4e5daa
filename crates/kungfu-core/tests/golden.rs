//! Golden bytes: the exact encoding of every value the core persists or replicates, so that a
//! change to any encoding fails here and becomes a deliberate, versioned act (issue #12, item 6).
//!
//! Pinned: a [`Command`] for every [`Action`] (the raft log carries them, and the request digest
//! inside is stored in receipts), every [`Fact`], every [`Record`] stored in state (records, index
//! values, journaled facts, stored receipts), every variant of the enums nested in them, a
//! [`Receipt`] for every [`ActionResult`], and one key of every kind of `keys.rs` (with the family
//! bytes, the column-family names and the action-kind names that keys embed).
//!
//! Each case is a value and the hex of its bytes side by side in this file rather than in fixture
//! files: a review of a changed golden case then shows the value and its bytes in one diff hunk,
//! and there is no second place to keep in step. Every case is checked both ways: the value
//! encodes to exactly these bytes, and these bytes decode to exactly this value (so a decoder
//! change is caught too).
//!
//! The cases of an enum are listed through [`golden_cases!`], which also generates a `match` over
//! the enum from the listed variants with no wildcard arm: a new variant without a golden case does
//! not compile. Encoding is compositional (a struct is its fields in order, an enum its variant
//! index then its fields), so one case per variant and one case per struct pin everything.
//!
//! When a case fails: do not just paste the new bytes. Bytes already on disk or in a raft log keep
//! their meaning only if the decoder still reads them, so a changed encoding needs a new version of
//! the storage envelope (`kungfu_storage::envelope`) that keeps decoding the old one; update the
//! bytes here only together with that version bump. Appending a variant at the end of an enum
//! changes no existing bytes: add its case here.

use kungfu_core::action::{Addressees, ArtifactInput, BodyInput, LabeledBody, PatchOp, RankGoal};
use kungfu_core::codec;
use kungfu_core::keys::{self, Family, Key};
use kungfu_core::model::*;
use kungfu_core::state::IndexRef;
use kungfu_core::*;
use kungfu_types::*;
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::collections::BTreeSet;
use std::fmt::Debug;

// Fixed inputs: no randomness, no clock. -------------------------------------------------------

const AG: AgentId = AgentId(7);
const AG2: AgentId = AgentId(8);
const AG3: AgentId = AgentId(300);
const MEM: MemoryId = MemoryId(11);
const TH: ThreadId = ThreadId(21);
const ASG: AssignmentId = AssignmentId(31);
const TASK: TaskId = TaskId(41);
const ENG: EngagementId = EngagementId(51);
const E: EntrySeq = EntrySeq(3);
const V: Version = Version(2);
/// 2023-11-14T22:13:20Z, a u64 past 2^32 so the widest varint form is pinned.
const TS: Timestamp = Timestamp(1_700_000_000_000_000);
/// A small time, so the one-byte varint form is pinned too.
const TS0: Timestamp = Timestamp(250);
const HOUR: Micros = Micros(3_600_000_000);
const DAY: Micros = Micros(86_400_000_000);
const HASH: SecretHash = SecretHash([0xab; 32]);
const HASH2: SecretHash = SecretHash([0x12; 32]);
const PIN: Pin = Pin { memory: MEM, version: V };
/// Labels with a non-zero index in both fields, so a swapped field order shows in the bytes.
const LABELS: Labels = Labels { taint: Taint::Quarantined, scope: Scope::Tenant };
const REC: RecordId = RecordId(61);
const WT: WakeTargetId = WakeTargetId(71);

fn wake_filter() -> WakeFilter {
    WakeFilter { kinds: [ObligationKind::Response].into(), objects: [ObjectRef::Thread(TH)].into() }
}

fn wake_event() -> WakeEvent {
    WakeEvent { seq: 3, applied_index: 900, digest: [0xcd; 32], queued_at: TS0 }
}

fn wake_failure() -> WakeFailure {
    WakeFailure { seq: 3, at: TS0, error: "HTTP 500".into() }
}

fn ext() -> ExternalRef {
    ExternalRef {
        store: "s3".into(),
        digest: "sha256:ab".into(),
        bytes: 9,
        labels: LABELS,
        deletion_certificate: Some("sha256:cd".into()),
    }
}

fn item(s: &str) -> ItemId {
    ItemId(s.into())
}

fn c(s: &str) -> Content {
    Content::from(s)
}
fn fp(s: &str) -> Fingerprint {
    Fingerprint(s.to_string())
}
fn set(agents: &[AgentId]) -> BTreeSet<AgentId> {
    agents.iter().copied().collect()
}
fn key(k: &str) -> IdempotencyKey {
    IdempotencyKey::new(k).expect("a valid idempotency key")
}

// The check. -----------------------------------------------------------------------------------

/// One golden case: a value and the hex of its bytes (whitespace ignored, so long cases wrap).
#[derive(Debug)]
struct Golden<T> {
    name: String,
    value: T,
    hex: &'static str,
}

impl<T> Golden<T> {
    fn expected(&self) -> Result<Vec<u8>, String> {
        let hex: String = self.hex.chars().filter(|ch| !ch.is_whitespace()).collect();
        hex::decode(hex).map_err(|e| format!("the golden hex does not parse: {e}"))
    }
}

/// Builds the cases of one enum. From the listed variants it also generates a `match` over the enum
/// with no wildcard arm, so a variant without a case does not compile, and each case's value is
/// checked to be the variant it is listed under. `|v| expr` projects the enum out of the value when
/// the value is not the enum itself (a `Command` is listed by its `Action`).
macro_rules! golden_cases {
    ($group:literal, $enum:ident { $($variant:ident: $value:expr => $hex:literal;)* }) => {
        golden_cases!($group, $enum, |v| v, { $($variant: $value => $hex;)* })
    };
    ($group:literal, $enum:ident, |$v:ident| $project:expr, { $($variant:ident: $value:expr => $hex:literal;)* }) => {{
        let cases = vec![$(Golden {
            name: format!("{}::{}", $group, stringify!($variant)),
            value: $value,
            hex: $hex,
        }),*];
        for case in &cases {
            let $v = &case.value;
            // No wildcard arm: a new variant of the enum has no arm here until it has a case above.
            let listed = match $project {
                $($enum::$variant { .. } => stringify!($variant),)*
            };
            assert!(case.name.ends_with(&format!("::{listed}")), "{} holds a {listed}", case.name);
        }
        cases
    }};
}

/// Every case encodes (canonical codec) to its golden bytes, and its golden bytes decode back to
/// it. All failures are reported together, each with the bytes the code produces now.
fn check<T: Serialize + DeserializeOwned + PartialEq + Debug>(cases: &[Golden<T>]) {
    let mut failures = Vec::new();
    let mut names = BTreeSet::new();
    for case in cases {
        assert!(names.insert(case.name.clone()), "two cases are named {}", case.name);
        let actual = codec::encode(&case.value);
        match case.expected() {
            Ok(expected) => {
                if actual != expected {
                    failures.push(format!("GOLDEN {} {}  (encoding changed)", case.name, hex::encode(&actual)));
                }
                match codec::decode::<T>(&expected) {
                    Ok(decoded) if decoded == case.value => {}
                    Ok(decoded) => failures.push(format!("{}: the golden bytes decode to {decoded:?}", case.name)),
                    Err(e) => failures.push(format!("{}: the golden bytes no longer decode: {e}", case.name)),
                }
            }
            Err(e) => failures.push(format!("GOLDEN {} {}  ({e})", case.name, hex::encode(&actual))),
        }
    }
    report(failures);
}

/// Every case's key (built by `key_of`) is exactly its golden bytes. Keys have no decoder: their
/// order is their meaning, so only the bytes are pinned.
fn check_keys<T>(cases: &[Golden<T>], key_of: impl Fn(&T) -> Key) {
    let mut failures = Vec::new();
    let mut names = BTreeSet::new();
    for case in cases {
        assert!(names.insert(case.name.clone()), "two cases are named {}", case.name);
        let actual = key_of(&case.value);
        match case.expected() {
            Ok(expected) if expected == actual => {}
            Ok(_) => failures.push(format!("GOLDEN {} {}  (key layout changed)", case.name, hex::encode(&actual))),
            Err(e) => failures.push(format!("GOLDEN {} {}  ({e})", case.name, hex::encode(&actual))),
        }
    }
    report(failures);
}

/// Every case's golden key decodes back to the case's value (for the keys the code reads back).
fn check_key_decoder<T: PartialEq + Debug>(cases: &[Golden<T>], decode: impl Fn(&[u8]) -> Option<T>) {
    for case in cases {
        let bytes = case.expected().expect("golden hex");
        assert_eq!(decode(&bytes).as_ref(), Some(&case.value), "{}: the golden key decodes differently", case.name);
    }
}

fn report(failures: Vec<String>) {
    assert!(
        failures.is_empty(),
        "{} golden case(s) failed. A persisted encoding changed: bytes already written would be \
         misread. Do not just update the bytes: a changed format needs a new envelope version that \
         still decodes the old one (see this file's header).\n{}",
        failures.len(),
        failures.join("\n")
    );
}

// Commands: one per action. -------------------------------------------------------------------

fn draft_full() -> ContractDraft {
    ContractDraft {
        requirements: c("req"),
        output_structure: Some(c("os")),
        inputs: vec![PIN],
        references: Some(c("ref")),
        delivery_window: Some(HOUR),
        judgment_window: Some(DAY),
        on_missing_judgment: MissingJudgment::Adopted,
        acceptance: c("acc"),
        judge: Judge::Agent(AG3),
        eligibility: Eligibility { registered_before: Some(TS0), excluded: set(&[AG3]) },
        max_adoptions: Some(5),
    }
}

fn draft_bare() -> ContractDraft {
    ContractDraft {
        requirements: c("req2"),
        output_structure: None,
        inputs: vec![],
        references: None,
        delivery_window: None,
        judgment_window: None,
        on_missing_judgment: MissingJudgment::Undecided,
        acceptance: c("acc2"),
        judge: Judge::Author,
        eligibility: Eligibility { registered_before: None, excluded: BTreeSet::new() },
        max_adoptions: None,
    }
}

fn by(agent: AgentId, action: Action) -> Command {
    Command::new(Principal::Agent(agent), action, Some(key("key-1")), TS)
}

#[test]
fn every_command_encodes_to_its_golden_bytes() {
    let cases = golden_cases!("Action", Action, |v| &v.action, {
        RegisterAgent: Command::new(
            Principal::Registrar,
            Action::RegisterAgent { key_hash: HASH, key_fingerprint: fp("fp-a") },
            Some(key("reg-1")),
            TS,
        ) => "\
            0100abababababababababababababababababababababababababababababababab0466702d6101057265672d31eb14\
            2b0cae0baa72a767ebc0823d1be94e14c5bfc52d8e417fc4302fceb6240cfd00401e18240a0600";
        DeactivateAgent: Command::new(Principal::Operator, Action::DeactivateAgent { agent: AG2 }, None, TS)
            => "020108009e6282e4f25e370ce617e21d6fe265e88b9e7b8682cf00059b9d128d9381f09dfd00401e18240a0600";
        CreateMemory: by(AG, Action::CreateMemory { content: c("m") }) => "\
            000702016d01056b65792d311d1015a854df92b9139a2e25724678ba942cd3943db517232458452646414553fd00401e\
            18240a0600";
        UpdateMemory: by(AG, Action::UpdateMemory { memory: MEM, content: c("m2") }) => "\
            0007030b026d3201056b65792d31128e69eadc2e61765310642c15eee9f6c1505ae9194b090eed38300ec5ca4511fd00\
            401e18240a0600";
        PublishMemory: by(AG, Action::PublishMemory { memory: MEM }) => "\
            0007040b01056b65792d318553b42f632bfb7fa1f436ce6f697bf238fcb5c11ef90100138459639a6e57d3fd00401e18\
            240a0600";
        UnpublishMemory: by(AG, Action::UnpublishMemory { memory: MEM }) => "\
            0007050b01056b65792d312bc88c94aea0ca2beb655111843cd0b867bc219cd16afc04dc8732d84d975a34fd00401e18\
            240a0600";
        WithdrawMemory: by(AG, Action::WithdrawMemory { memory: MEM }) => "\
            0007060b01056b65792d31995f369b6790e697e0b4e94c30e3c37ba90539d5c3f37325073f09836f72cb2bfd00401e18\
            240a0600";
        CreateThread: by(AG, Action::CreateThread {
            subject: c("s"),
            grant: Some(NewGrant { role: Role::Speaker, hash: HASH2, fingerprint: fp("fp-g") }),
        }) => "\
            0007070173010112121212121212121212121212121212121212121212121212121212121212120466702d6701056b65\
            792d317ea6b10c04aec2801f2891357b605452b1d6e7227e29a4ba91af664410c78a36fd00401e18240a0600";
        IssueGrant: by(AG, Action::IssueGrant {
            thread: TH,
            grant: NewGrant { role: Role::Governor, hash: HASH2, fingerprint: fp("fp-g") },
        }) => "\
            000708150212121212121212121212121212121212121212121212121212121212121212120466702d6701056b65792d\
            3188ecf56d464e2fb96ff68c263a265e1800866a6653853c462fd75f39c9eeb2d7fd00401e18240a0600";
        VoidGrant: by(AG, Action::VoidGrant { thread: TH }) => "\
            0007091501056b65792d31d492ecb7630c16c42c164001f54b5e423af4bff589afd2850e1985a3452e2050fd00401e18\
            240a0600";
        Join: by(AG2, Action::Join { grant_hash: HASH2 }) => "\
            00080a121212121212121212121212121212121212121212121212121212121212121201056b65792d31be51bfe56bbe\
            e2c307d3bced42e754548ffd6feca2552019528bd0e4adbd6fe8fd00401e18240a0600";
        Leave: by(AG2, Action::Leave { thread: TH }) => "\
            00080b1501056b65792d31a36cc2b5c7a3836a2e96e973bc7545ad15b15e1523c5f6e6b38ffda8b86667f2fd00401e18\
            240a0600";
        Remove: by(AG, Action::Remove { thread: TH, member: AG2 }) => "\
            00070c150801056b65792d3147bdd9a48109715675553afe85e438774a2185f0fb5986dc8b81c817e2a9c057fd00401e\
            18240a0600";
        ChangeRole: by(AG, Action::ChangeRole { thread: TH, member: AG2, role: Role::Observer })
            => "\
                00070d15080001056b65792d3145272e9a61d76de557abfeb6007e19a27fe651fd4de3a925684dfa95e03c7585fd0040\
                1e18240a0600";
        Post: by(AG, Action::Post {
            thread: TH,
            body: PostBody::Pin(PIN),
            reply_to: Some(EntrySeq(2)),
            ask: Some(set(&[AG2, AG3])),
            task_ref: Some(TASK),
            assignment: Some(NewAssignment {
                addressee: AG2,
                criteria: c("crit"),
                output_structure: Some(c("os")),
                delivery_window: Some(HOUR),
                judgment_window: None,
            }),
        }) => "\
            00070e15000b020102010208fb2c0101290108046372697401026f7301fc00a493d60001056b65792d31ba2616e9e142\
            a1a58491e0ac8fbabd7216dc228dadb1dd752b5a6ee783345470fd00401e18240a0600";
        Handle: by(AG2, Action::Handle { thread: TH, entry: E, note: Some(c("n")) }) => "\
            00080f150301016e01056b65792d31da77b6d4696a643f1abefa5c33b537d533bb7bc47c7338d329b8f5faa8274b65fd\
            00401e18240a0600";
        Retract: by(AG, Action::Retract { thread: TH, entry: E }) => "\
            000710150301056b65792d3164e6bae293f356771028dc81b672d3b90729abb040784f8dd4842f105f89fab3fd00401e\
            18240a0600";
        CloseThread: by(AG, Action::CloseThread { thread: TH }) => "\
            0007111501056b65792d31d243d708714f4b44c7bcd4db8c01e45f28806d2bf4d9f722b8e0eb03db30c8c8fd00401e18\
            240a0600";
        TakeAssignment: by(AG2, Action::TakeAssignment { assignment: ASG }) => "\
            0008121f01056b65792d315997c763bd78d24edb6c453dd760606e554bdbbf3b57545d089df3aba6b90e58fd00401e18\
            240a0600";
        DeliverAssignment: by(AG2, Action::DeliverAssignment { assignment: ASG, output: c("o") })
            => "\
                0008131f016f01056b65792d3170bdd7fee651680f152e0a6a38c980374ddeb895af25ff9705f96f0f3cda14effd0040\
                1e18240a0600";
        AdoptAssignment: by(AG, Action::AdoptAssignment { assignment: ASG }) => "\
            0007141f01056b65792d3135ca2478f67de0b2fee087bafb1491944159dc8ce96bcb4ce22fd5e8e90c4a09fd00401e18\
            240a0600";
        RejectAssignment: by(AG, Action::RejectAssignment { assignment: ASG, reason: c("r") })
            => "\
                0007151f017201056b65792d316035b21b7adfd053bf38b16e6ad911f31dc1b328c99eaf16179594b4f9b936eefd0040\
                1e18240a0600";
        DropAssignment: by(AG2, Action::DropAssignment { assignment: ASG }) => "\
            0008161f01056b65792d310dd1a999b50e3409634e47cbe601feb210e29326b9ce6f028e11f585d3a5b218fd00401e18\
            240a0600";
        VoidAssignment: by(AG, Action::VoidAssignment { assignment: ASG }) => "\
            0007171f01056b65792d31f28d714f2fcaedaf89eea0b3bffc2012a4f117156c9b711a889f52c59b12a691fd00401e18\
            240a0600";
        CreateTask: by(AG, Action::CreateTask { audience: Audience::Restricted(set(&[AG2])), contract: draft_full() })
            => "\
                0007180101080372657101026f73010b02010372656601fc00a493d601fd0060d71d14000000000361636301fb2c0101\
                fa01fb2c01010501056b65792d3184408373da59eb8686ed68aba998e68b978043b0a5a0557931ad573c0c5c88eefd00\
                401e18240a0600";
        ReviseContract: by(AG, Action::ReviseContract { task: TASK, contract: draft_bare() })
            => "\
                00071929047265713200000000000104616363320000000001056b65792d31246622e977cd87fb095fd5636b27b7a063\
                30a68b37438a2c84c5b57110247d9bfd00401e18240a0600";
        PauseTask: by(AG, Action::PauseTask { task: TASK }) => "\
            00071a2901056b65792d319a30a8a0b198d98f24d69ad1a773cd29e205de77e02569b9aeed431a8cb4b704fd00401e18\
            240a0600";
        ResumeTask: by(AG, Action::ResumeTask { task: TASK }) => "\
            00071b2901056b65792d31f83b08e92997e35f8157eed8db4406bb49e81107b010976d235845665c349f66fd00401e18\
            240a0600";
        TakeTask: by(AG2, Action::TakeTask { task: TASK }) => "\
            00081c2901056b65792d31db340da493c925e277b9cfe3747d143d85a90e552db40c46fd363481868c2f73fd00401e18\
            240a0600";
        DeliverTask: by(AG2, Action::DeliverTask { task: TASK, output: c("o"), take: true })
            => "\
                00081d29016f0101056b65792d312eee8c5b4ffac185323bf67206f81ff7d4c82679a728efe029a5ae9ba297fc2efd00\
                401e18240a0600";
        DropEngagement: by(AG2, Action::DropEngagement { engagement: ENG }) => "\
            00081e3301056b65792d3125bbbd667069f8bcb56b115d03d6c48568c096598c14cdbc2c8c5dabe1fd226cfd00401e18\
            240a0600";
        AdoptEngagement: by(AG, Action::AdoptEngagement { engagement: ENG }) => "\
            00071f3301056b65792d316ece7c7cf73dbc7a0794c02989deec320a6e0775dfa3f54fee22fe9374464ae1fd00401e18\
            240a0600";
        RejectEngagement: by(AG, Action::RejectEngagement { engagement: ENG, reason: c("r") })
            => "\
                00072033017201056b65792d3105d25bbfe1155476c006ef8fa9dc3209f21a845814e256d6b36b7e3043543eadfd0040\
                1e18240a0600";
        Expire: Command::new(
            Principal::System,
            Action::Expire { obligation: ObligationId::EngagementDelivery(ENG), due_at: TS0 },
            None,
            TS,
        ) => "03210333fa00bb73b7d84a26f8af0b4303daf9764e1f04a8e2acb44cd7096eebacb9668c55b4fd00401e18240a0600";
        WriteLabeled: by(AG, Action::WriteLabeled { memory: Some(MEM), content: c("w"), labels: LABELS })
            => "\
                000722010b0177020201056b65792d31608562723c67b3f149e658a0f45b452cf10592c6f23b88e7bf0bb93459823a75\
                fd00401e18240a0600";
        WidenScope: by(AG, Action::WidenScope { pin: PIN, scope: Scope::Public })
            => "\
                0007230b020301056b65792d316191f32a03afd3af275b66679d9b13e25b7c5caa31eae2ff7ac353ad2dc75af9fd0040\
                1e18240a0600";
        Send: by(AG, Action::Send {
            thread: TH,
            body: LabeledBody::Content { content: c("b"), labels: Labels::new(Taint::Tainted, Scope::Fleet) },
            to: Addressees::Agents(set(&[AG2, AG3])),
            reply_to: Some(EntrySeq(2)),
            reply_to_latest: true,
        }) => "\
            000724150101620101010208fb2c0101020101056b65792d31de38cce90e37c4fc703c711113b494c9fc1af691bd7660\
            e90dc01bf6c5bbca02fd00401e18240a0600";
        Scatter: by(AG, Action::Scatter {
            thread: TH,
            header: LabeledBody::Pin(PIN),
            goals: vec![
                RankGoal { member: AG3, body: LabeledBody::Pin(PIN) },
                RankGoal { member: AG2, body: LabeledBody::Content { content: c("g"), labels: LABELS } },
            ],
            criteria: c("crit"),
            output_structure: Some(c("os")),
            delivery_window: Some(HOUR),
            judgment_window: None,
        }) => "\
            00072515000b0202fb2c01000b02080101670202046372697401026f7301fc00a493d60001056b65792d319df8f9706d\
            1d62cd89ed5582fb6dc1ae8651321f36c9852eb1909794c0d8c153fd00401e18240a0600";
        CreateRecord: by(AG, Action::CreateRecord {
            thread: TH,
            title: c("t"),
            state: c("s"),
            body: BodyInput::Pin(PIN),
            scope: Scope::Tenant,
            editors: Editors::Governors,
            message: LabeledBody::Pin(PIN),
            ask: Some(set(&[AG2])),
        }) => "0007261501740173000b020201000b0201010801056b65792d31ce45576992ffe9b7e630ae023b7d4bf9783686d25f206a4fdc7e5aa93efa1ad9fd00401e18240a0600";
        PatchRecord: by(AG, Action::PatchRecord {
            record: REC,
            base_rev: 2,
            ops: vec![PatchOp::ReplaceState(c("s")), PatchOp::AppendNote {
                note_id: item("n1"),
                kind: NoteKind::Progress,
                body: BodyInput::External(ext()),
            }],
            message: LabeledBody::Pin(PIN),
            ask: None,
        }) => "0007273d020201017304026e310102027333097368613235363a616209020201097368613235363a6364000b020001056b65792d31d70e77fbe68ccd33f7dcbbf81b5bd8e08926bd587f47e6292b53fecf3563d2bdfd00401e18240a0600";
        SetWakeTarget: by(AG, Action::SetWakeTarget {
            url: "https://hooks.example.com/k".into(),
            secret: WakeSecret([0x5a; 32]),
            filter: wake_filter(),
        }) => "0007281b68747470733a2f2f686f6f6b732e6578616d706c652e636f6d2f6b5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a010001021501056b65792d3128f7f46209c276b0b213dec81772c43710f919389cafe8357934a6d6f36a4ef8fd00401e18240a0600";
        RemoveWakeTarget: by(AG, Action::RemoveWakeTarget { target: WT }) => "0007294701056b65792d3189c11ce3bdd0f49e1dc449e914e4ff37da21acde0091e5d8b7170aa0f8066f2ffd00401e18240a0600";
        RecordWake: Command::new(
            Principal::System,
            Action::RecordWake {
                queued: vec![(AG, WT, wake_event())],
                delivered: vec![(AG, WT, 2)],
                gave_up: vec![(AG2, WakeTargetId(72), wake_failure())],
            },
            None,
            TS,
        ) => "032a01074703fb8403cdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdfa0107470201084803fa084854545020353030003230e994be9581ede8ba707d5cdbcdb0423730135315cd7585e41d55c7924e3efd00401e18240a0600";
    });
    assert_eq!(cases.len(), ActionKind::ALL.len(), "one command per action kind");
    check(&cases);
}

/// The values nested in actions, one case per variant.
#[test]
fn every_action_part_encodes_to_its_golden_bytes() {
    check(&golden_cases!("Principal", Principal {
        Agent: Principal::Agent(AG) => "0007";
        Registrar: Principal::Registrar => "01";
        Operator: Principal::Operator => "02";
        System: Principal::System => "03";
    }));
    check(&golden_cases!("PostBody", PostBody {
        Pin: PostBody::Pin(PIN) => "000b02";
        Content: PostBody::Content(c("body")) => "0104626f6479";
    }));
    check(&golden_cases!("Role", Role {
        Observer: Role::Observer => "00";
        Speaker: Role::Speaker => "01";
        Governor: Role::Governor => "02";
    }));
    // The coordination layer's action parts (design §2–§4).
    check(&golden_cases!("LabeledBody", LabeledBody {
        Pin: LabeledBody::Pin(PIN) => "000b02";
        Content: LabeledBody::Content { content: c("body"), labels: LABELS } => "0104626f64790202";
    }));
    check(&golden_cases!("Addressees", Addressees {
        Nobody: Addressees::Nobody => "00";
        Agents: Addressees::Agents(set(&[AG2, AG3])) => "010208fb2c01";
        AllSpeakers: Addressees::AllSpeakers => "02";
    }));
    check(&[Golden {
        name: "RankGoal".to_string(),
        value: RankGoal { member: AG3, body: LabeledBody::Content { content: c("g"), labels: LABELS } },
        hex: "fb2c010101670202",
    }]);
    check(&golden_cases!("Taint", Taint {
        Trusted: Taint::Trusted => "00";
        Tainted: Taint::Tainted => "01";
        Quarantined: Taint::Quarantined => "02";
    }));
    check(&golden_cases!("Scope", Scope {
        Agent: Scope::Agent => "00";
        Fleet: Scope::Fleet => "01";
        Tenant: Scope::Tenant => "02";
        Public: Scope::Public => "03";
    }));
    check(&[Golden { name: "Labels".to_string(), value: LABELS, hex: "0202" }]);
    // The shared record's action parts (design §5.3–§5.4).
    check(&golden_cases!("BodyInput", BodyInput {
        Pin: BodyInput::Pin(PIN) => "000b02";
        Content: BodyInput::Content { content: c("b"), labels: LABELS } => "0101620202";
        External: BodyInput::External(ext()) => "02027333097368613235363a616209020201097368613235363a6364";
    }));
    check(&golden_cases!("ArtifactInput", ArtifactInput {
        Pin: ArtifactInput::Pin(PIN) => "000b02";
        External: ArtifactInput::External(ext()) => "01027333097368613235363a616209020201097368613235363a6364";
    }));
    check(&golden_cases!("PatchOp", PatchOp {
        ReplaceTitle: PatchOp::ReplaceTitle(c("t")) => "000174";
        ReplaceState: PatchOp::ReplaceState(c("s")) => "010173";
        ReplaceBody: PatchOp::ReplaceBody(BodyInput::Pin(PIN)) => "02000b02";
        ReplaceDecisionState: PatchOp::ReplaceDecisionState { decision: item("d1"), state: c("s") } => "030264310173";
        AppendNote: PatchOp::AppendNote { note_id: item("n1"), kind: NoteKind::Comment, body: BodyInput::Pin(PIN) }
            => "04026e3100000b02";
        AppendArtifact: PatchOp::AppendArtifact {
            artifact_id: item("a1"),
            reference: ArtifactInput::Pin(PIN),
            media_type: "text/plain".into(),
        } => "05026131000b020a746578742f706c61696e";
        AppendDecision: PatchOp::AppendDecision { decision_id: item("d1"), state: c("s"), reason: c("r") } => "0602643101730172";
    }));
    check(&golden_cases!("Editors", Editors {
        Speakers: Editors::Speakers => "00";
        Governors: Editors::Governors => "01";
    }));
    check(&golden_cases!("NoteKind", NoteKind {
        Comment: NoteKind::Comment => "00";
        Progress: NoteKind::Progress => "01";
    }));
    check(&[Golden {
        name: "ExternalRef".to_string(),
        value: ext(),
        hex: "027333097368613235363a616209020201097368613235363a6364",
    }]);
}

/// The action kinds: their bincode index is in every receipt, their wire name in every receipt key.
#[test]
fn every_action_kind_encodes_to_its_golden_bytes_and_name() {
    let cases = golden_cases!("ActionKind", ActionKind {
        RegisterAgent: ActionKind::RegisterAgent => "00";
        DeactivateAgent: ActionKind::DeactivateAgent => "01";
        CreateMemory: ActionKind::CreateMemory => "02";
        UpdateMemory: ActionKind::UpdateMemory => "03";
        PublishMemory: ActionKind::PublishMemory => "04";
        UnpublishMemory: ActionKind::UnpublishMemory => "05";
        WithdrawMemory: ActionKind::WithdrawMemory => "06";
        CreateThread: ActionKind::CreateThread => "07";
        IssueGrant: ActionKind::IssueGrant => "08";
        VoidGrant: ActionKind::VoidGrant => "09";
        Join: ActionKind::Join => "0a";
        Leave: ActionKind::Leave => "0b";
        Remove: ActionKind::Remove => "0c";
        ChangeRole: ActionKind::ChangeRole => "0d";
        Post: ActionKind::Post => "0e";
        Handle: ActionKind::Handle => "0f";
        Retract: ActionKind::Retract => "10";
        CloseThread: ActionKind::CloseThread => "11";
        TakeAssignment: ActionKind::TakeAssignment => "12";
        DeliverAssignment: ActionKind::DeliverAssignment => "13";
        AdoptAssignment: ActionKind::AdoptAssignment => "14";
        RejectAssignment: ActionKind::RejectAssignment => "15";
        DropAssignment: ActionKind::DropAssignment => "16";
        VoidAssignment: ActionKind::VoidAssignment => "17";
        CreateTask: ActionKind::CreateTask => "18";
        ReviseContract: ActionKind::ReviseContract => "19";
        PauseTask: ActionKind::PauseTask => "1a";
        ResumeTask: ActionKind::ResumeTask => "1b";
        TakeTask: ActionKind::TakeTask => "1c";
        DeliverTask: ActionKind::DeliverTask => "1d";
        DropEngagement: ActionKind::DropEngagement => "1e";
        AdoptEngagement: ActionKind::AdoptEngagement => "1f";
        RejectEngagement: ActionKind::RejectEngagement => "20";
        Expire: ActionKind::Expire => "21";
        WriteLabeled: ActionKind::WriteLabeled => "22";
        WidenScope: ActionKind::WidenScope => "23";
        Send: ActionKind::Send => "24";
        Scatter: ActionKind::Scatter => "25";
        CreateRecord: ActionKind::CreateRecord => "26";
        PatchRecord: ActionKind::PatchRecord => "27";
        SetWakeTarget: ActionKind::SetWakeTarget => "28";
        RemoveWakeTarget: ActionKind::RemoveWakeTarget => "29";
        RecordWake: ActionKind::RecordWake => "2a";
    });
    check(&cases);
    // The wire names are written into receipt keys: renaming one would orphan stored receipts.
    // No wildcard arm: a new kind does not compile until its name is pinned here.
    let pinned = |kind: ActionKind| match kind {
        ActionKind::RegisterAgent => "register_agent",
        ActionKind::DeactivateAgent => "deactivate_agent",
        ActionKind::CreateMemory => "create_memory",
        ActionKind::UpdateMemory => "update_memory",
        ActionKind::PublishMemory => "publish_memory",
        ActionKind::UnpublishMemory => "unpublish_memory",
        ActionKind::WithdrawMemory => "withdraw_memory",
        ActionKind::CreateThread => "create_thread",
        ActionKind::IssueGrant => "issue_grant",
        ActionKind::VoidGrant => "void_grant",
        ActionKind::Join => "join",
        ActionKind::Leave => "leave",
        ActionKind::Remove => "remove",
        ActionKind::ChangeRole => "change_role",
        ActionKind::Post => "post",
        ActionKind::Handle => "handle",
        ActionKind::Retract => "retract",
        ActionKind::CloseThread => "close_thread",
        ActionKind::TakeAssignment => "take_assignment",
        ActionKind::DeliverAssignment => "deliver_assignment",
        ActionKind::AdoptAssignment => "adopt_assignment",
        ActionKind::RejectAssignment => "reject_assignment",
        ActionKind::DropAssignment => "drop_assignment",
        ActionKind::VoidAssignment => "void_assignment",
        ActionKind::CreateTask => "create_task",
        ActionKind::ReviseContract => "revise_contract",
        ActionKind::PauseTask => "pause_task",
        ActionKind::ResumeTask => "resume_task",
        ActionKind::TakeTask => "take_task",
        ActionKind::DeliverTask => "deliver_task",
        ActionKind::DropEngagement => "drop_engagement",
        ActionKind::AdoptEngagement => "adopt_engagement",
        ActionKind::RejectEngagement => "reject_engagement",
        ActionKind::Expire => "expire",
        ActionKind::WriteLabeled => "write_labeled",
        ActionKind::WidenScope => "widen_scope",
        ActionKind::Send => "send",
        ActionKind::Scatter => "scatter",
        ActionKind::CreateRecord => "create_record",
        ActionKind::PatchRecord => "patch_record",
        ActionKind::SetWakeTarget => "set_wake_target",
        ActionKind::RemoveWakeTarget => "remove_wake_target",
        ActionKind::RecordWake => "record_wake",
    };
    for case in &cases {
        assert_eq!(case.value.as_str(), pinned(case.value), "the wire name of {:?}", case.value);
    }
}

// Facts. ---------------------------------------------------------------------------------------

fn contract() -> Contract {
    Contract {
        requirements: c("req"),
        output_structure: Some(c("os")),
        inputs: vec![PIN],
        references: Some(c("ref")),
        delivery_window: HOUR,
        judgment_window: DAY,
        on_missing_judgment: MissingJudgment::Adopted,
        acceptance: c("acc"),
        judge: Judge::Agent(AG3),
        eligibility: Eligibility { registered_before: Some(TS0), excluded: set(&[AG3]) },
        max_adoptions: Some(5),
    }
}

fn rank(member: AgentId, entry: u64, assignment: AssignmentId) -> ScatterRank {
    ScatterRank { member, entry: EntrySeq(entry), assignment }
}

fn spec() -> AssignmentSpec {
    AssignmentSpec { criteria: c("crit"), output_structure: Some(c("os")), delivery_window: HOUR, judgment_window: DAY }
}

#[test]
fn every_fact_encodes_to_its_golden_bytes() {
    check(&golden_cases!("Fact", Fact {
        AgentRegistered: Fact::AgentRegistered { agent: AG, key_hash: HASH, key_fingerprint: fp("fp-a") }
            => "0007abababababababababababababababababababababababababababababababab0466702d61";
        AgentDeactivated: Fact::AgentDeactivated {
            agent: AG2,
            memberships_ended: vec![TH, ThreadId(22)],
            threads_closed: vec![ThreadId(22)],
        } => "01080215160116";
        MemoryCreated: Fact::MemoryCreated { memory: MEM, author: AG, content: c("m") } => "020b07016d";
        MemoryUpdated: Fact::MemoryUpdated { memory: MEM, version: V, content: c("m2") } => "030b02026d32";
        MemoryPublished: Fact::MemoryPublished { memory: MEM } => "040b";
        MemoryUnpublished: Fact::MemoryUnpublished { memory: MEM } => "050b";
        MemoryWithdrawn: Fact::MemoryWithdrawn { memory: MEM } => "060b";
        ThreadCreated: Fact::ThreadCreated { thread: TH, creator: AG, subject: c("s") } => "0715070173";
        GrantIssued: Fact::GrantIssued {
            thread: TH,
            number: 2,
            role: Role::Speaker,
            hash: HASH2,
            fingerprint: fp("fp-g"),
        } => "0815020112121212121212121212121212121212121212121212121212121212121212120466702d67";
        GrantVoided: Fact::GrantVoided { thread: TH } => "0915";
        Joined: Fact::Joined { thread: TH, agent: AG2, role: Role::Speaker, via_grant: 2 } => "0a15080102";
        MembershipEnded: Fact::MembershipEnded { thread: TH, agent: AG2, reason: MembershipEnd::Removed { by: AG } }
            => "0b15080107";
        RoleChanged: Fact::RoleChanged { thread: TH, agent: AG2, from: Role::Speaker, to: Role::Observer, by: AG }
            => "0c1508010007";
        Posted: Fact::Posted {
            thread: TH,
            entry: E,
            author: AG,
            pin: PIN,
            reply_to: Some(EntrySeq(2)),
            ask: Some(set(&[AG2])),
            responders: set(&[AG2, AG3]),
            task_ref: Some(TASK),
        } => "0d1503070b0201020101080208fb2c010129";
        Handled: Fact::Handled { thread: TH, entry: E, responder: AG2, note: Some(c("n")) } => "0e15030801016e";
        Retracted: Fact::Retracted { thread: TH, entry: E } => "0f1503";
        ThreadClosed: Fact::ThreadClosed { thread: TH, by: Some(AG) } => "10150107";
        AssignmentCreated: Fact::AssignmentCreated {
            assignment: ASG,
            thread: TH,
            entry: E,
            creator: AG,
            addressee: AG2,
            spec: spec(),
        } => "111f15030708046372697401026f73fc00a493d6fd0060d71d14000000";
        AssignmentTaken: Fact::AssignmentTaken { assignment: ASG, thread: TH } => "121f15";
        AssignmentDelivered: Fact::AssignmentDelivered { assignment: ASG, thread: TH, output: c("o") }
            => "131f15016f";
        AssignmentJudged: Fact::AssignmentJudged {
            assignment: ASG,
            thread: TH,
            verdict: Verdict::Reject { reason: c("r") },
        } => "141f15010172";
        AssignmentDropped: Fact::AssignmentDropped { assignment: ASG, thread: TH } => "151f15";
        AssignmentVoided: Fact::AssignmentVoided { assignment: ASG, thread: TH } => "161f15";
        TaskCreated: Fact::TaskCreated {
            task: TASK,
            author: AG,
            audience: Audience::Restricted(set(&[AG2])),
            contract: contract(),
        } => "\
            1729070101080372657101026f73010b020103726566fc00a493d6fd0060d71d14000000000361636301fb2c0101fa01\
            fb2c010105";
        ContractRevised: Fact::ContractRevised { task: TASK, version: V, contract: contract() } => "\
            1829020372657101026f73010b020103726566fc00a493d6fd0060d71d14000000000361636301fb2c0101fa01fb2c01\
            0105";
        TaskPaused: Fact::TaskPaused { task: TASK } => "1929";
        TaskResumed: Fact::TaskResumed { task: TASK } => "1a29";
        Engaged: Fact::Engaged {
            engagement: ENG,
            task: TASK,
            agent: AG2,
            contract_version: V,
            inputs: vec![PIN],
            judge: AG3,
            on_missing_judgment: MissingJudgment::Adopted,
        } => "1b33290802010b02fb2c0100";
        EngagementDelivered: Fact::EngagementDelivered { engagement: ENG, task: TASK, output: c("o") }
            => "1c3329016f";
        EngagementJudged: Fact::EngagementJudged { engagement: ENG, task: TASK, verdict: Verdict::Adopt }
            => "1d332900";
        EngagementDropped: Fact::EngagementDropped { engagement: ENG, task: TASK } => "1e3329";
        DeadlinePassed: Fact::DeadlinePassed {
            obligation: ObligationId::AssignmentJudgment(ASG),
            object: ObjectRef::Thread(TH),
            due_at: TS,
            result: ExpiryResult::Undecided,
        } => "1f021f0215fd00401e18240a060001";
        VersionLabeled: Fact::VersionLabeled {
            memory: MEM,
            version: V,
            labels: LABELS,
            widened_from: Some(Version(1)),
        } => "200b0202020101";
        Scattered: Fact::Scattered {
            thread: TH,
            header: E,
            ranks: vec![rank(AG2, 4, ASG), rank(AG3, 5, AssignmentId(32))],
        } => "2115030208041ffb2c010520";
        RecordCreated: Fact::RecordCreated {
            record: REC,
            thread: TH,
            entry: E,
            creator: AG,
            scope: Scope::Tenant,
            editors: Editors::Speakers,
            title: c("t"),
            state: c("s"),
            body: BodyRef::Pin(PIN),
        } => "223d150307020001740173000b02";
        RecordPatched: Fact::RecordPatched {
            record: REC,
            thread: TH,
            entry: E,
            base_rev: 1,
            rev: 3,
            ops: vec![AppliedOp::ReplaceTitle(c("t")), AppliedOp::AppendDecision {
                decision_id: item("d1"),
                state: c("s"),
                reason: c("r"),
            }],
            scope: Scope::Fleet,
            taint: Taint::Tainted,
        } => "233d150301030200017406026431017301720101";
        WakeTargetSet: Fact::WakeTargetSet {
            target: WT,
            agent: AG,
            url: "https://hooks.example.com/k".into(),
            secret: WakeSecret([0x5a; 32]),
            filter: wake_filter(),
        } => "2447071b68747470733a2f2f686f6f6b732e6578616d706c652e636f6d2f6b5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a0100010215";
        WakeTargetRemoved: Fact::WakeTargetRemoved { target: WT, agent: AG } => "254707";
        WakeQueued: Fact::WakeQueued { target: WT, agent: AG, event: wake_event() } => "26470703fb8403cdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdfa";
        WakeDelivered: Fact::WakeDelivered { target: WT, agent: AG, seq: 3 } => "27470703";
        WakeGaveUp: Fact::WakeGaveUp { target: WT, agent: AG, failure: wake_failure() } => "28470703fa084854545020353030";
    }));
}

/// The values nested in facts, one case per variant.
#[test]
fn every_fact_part_encodes_to_its_golden_bytes() {
    check(&golden_cases!("Verdict", Verdict {
        Adopt: Verdict::Adopt => "00";
        Reject: Verdict::Reject { reason: c("r") } => "010172";
    }));
    check(&golden_cases!("ExpiryResult", ExpiryResult {
        TimedOut: ExpiryResult::TimedOut => "00";
        Undecided: ExpiryResult::Undecided => "01";
        Adopted: ExpiryResult::Adopted => "02";
    }));
    check(&golden_cases!("ObjectRef", ObjectRef {
        Agent: ObjectRef::Agent(AG) => "0007";
        Memory: ObjectRef::Memory(MEM) => "010b";
        Thread: ObjectRef::Thread(TH) => "0215";
        Task: ObjectRef::Task(TASK) => "0329";
    }));
    check(&golden_cases!("BodyRef", BodyRef {
        Pin: BodyRef::Pin(PIN) => "000b02";
        External: BodyRef::External(ext()) => "01027333097368613235363a616209020201097368613235363a6364";
    }));
    check(&golden_cases!("AppliedOp", AppliedOp {
        ReplaceTitle: AppliedOp::ReplaceTitle(c("t")) => "000174";
        ReplaceState: AppliedOp::ReplaceState(c("s")) => "010173";
        ReplaceBody: AppliedOp::ReplaceBody(BodyRef::Pin(PIN)) => "02000b02";
        ReplaceDecisionState: AppliedOp::ReplaceDecisionState { decision: item("d1"), state: c("s") } => "030264310173";
        AppendNote: AppliedOp::AppendNote { note_id: item("n1"), kind: NoteKind::Progress, body: BodyRef::Pin(PIN) }
            => "04026e3101000b02";
        AppendArtifact: AppliedOp::AppendArtifact {
            artifact_id: item("a1"),
            reference: BodyRef::External(ext()),
            media_type: "text/plain".into(),
        } => "0502613101027333097368613235363a616209020201097368613235363a63640a746578742f706c61696e";
        AppendDecision: AppliedOp::AppendDecision { decision_id: item("d1"), state: c("s"), reason: c("r") } => "0602643101730172";
    }));
}

// Records stored in state. ---------------------------------------------------------------------

/// Every value under a state key, as stored (storage adds only its envelope byte).
#[test]
fn every_record_encodes_to_its_golden_bytes() {
    check(&golden_cases!("Record", Record {
        Counters: Record::Counters(Counters {
            seq: 100,
            agents: 3,
            memories: 4,
            threads: 5,
            assignments: 6,
            tasks: 7,
            engagements: 8,
        }) => "0064030405060708";
        Agent: Record::Agent(Agent {
            id: AG,
            registered_at: TS0,
            key_hash: HASH,
            key_fingerprint: fp("fp-a"),
            state: AgentState::Deactivated { at: TS },
            memories: 1,
            tasks: 2,
            open_threads: 3,
        }) => "\
            0107faabababababababababababababababababababababababababababababababab0466702d6101fd00401e18240a\
            0600010203";
        Memory: Record::Memory(Memory {
            id: MEM,
            author: AG,
            created_at: TS0,
            current: V,
            visibility: Visibility::Public,
            state: MemoryState::Withdrawn { at: TS },
        }) => "020b07fa020101fd00401e18240a0600";
        MemoryVersion: Record::MemoryVersion(MemoryVersion { memory: MEM, version: V, created_at: TS, content: c("m") })
            => "030b02fd00401e18240a0600016d";
        Thread: Record::Thread(Thread {
            id: TH,
            creator: AG,
            created_at: TS0,
            subject: c("s"),
            state: ThreadState::Closed { at: TS },
            grant: Some(Grant { number: 2, role: Role::Speaker, hash: HASH2, fingerprint: fp("fp-g"), issued_at: TS0 }),
            grants_issued: 2,
            last_entry: 3,
            members: 4,
            governors: 1,
            open_assignments: 1,
        }) => "\
            041507fa017301fd00401e18240a06000102011212121212121212121212121212121212121212121212121212121212\
            1212120466702d67fa0203040101";
        Membership: Record::Membership(Membership {
            thread: TH,
            agent: AG2,
            role: Role::Speaker,
            via_grant: 2,
            joined_at: TS0,
            generation: 1,
            state: MembershipState::Ended { at: TS, reason: MembershipEnd::Removed { by: AG } },
        }) => "0515080102fa0101fd00401e18240a06000107";
        Entry: Record::Entry(Entry {
            thread: TH,
            seq: E,
            author: AG,
            posted_at: TS,
            pin: PIN,
            reply_to: Some(EntrySeq(2)),
            ask: Some(set(&[AG2])),
            responders: set(&[AG2, AG3]),
            task_ref: Some(TASK),
            assignment: Some(ASG),
        }) => "06150307fd00401e18240a06000b0201020101080208fb2c010129011f";
        Response: Record::Response(Response {
            thread: TH,
            entry: E,
            responder: AG2,
            arose_at: TS0,
            state: ResponseState::Ended { at: TS, how: ResponseEnd::Handled { note: Some(c("n")) } },
        }) => "07150308fa01fd00401e18240a06000101016e";
        Assignment: Record::Assignment(Assignment {
            id: ASG,
            thread: TH,
            entry: E,
            creator: AG,
            addressee: AG2,
            created_at: TS0,
            spec: spec(),
            state: AssignmentState::Delivered { taken_at: TS0, at: TS, judgment_due: TS.plus(DAY), output: c("o") },
            judge_forfeited: true,
        }) => "\
            081f15030708fa046372697401026f73fc00a493d6fd0060d71d1400000002fafd00401e18240a0600fd00a0f535380a\
            0600016f01";
        Task: Record::Task(Task {
            id: TASK,
            author: AG,
            created_at: TS0,
            audience: Audience::Open,
            current: V,
            paused: true,
            adopted: 1,
            open_engagements: 2,
        }) => "092907fa0002010102";
        ContractVersion: Record::ContractVersion(ContractVersion {
            task: TASK,
            version: V,
            created_at: TS,
            contract: contract(),
        }) => "\
            0a2902fd00401e18240a06000372657101026f73010b020103726566fc00a493d6fd0060d71d14000000000361636301\
            fb2c0101fa01fb2c010105";
        Engagement: Record::Engagement(Engagement {
            id: ENG,
            task: TASK,
            agent: AG2,
            contract_version: V,
            inputs: vec![PIN],
            judge: AG,
            on_missing_judgment: MissingJudgment::Undecided,
            judgment_window: DAY,
            taken_at: TS0,
            state: EngagementState::Delivered { at: TS, judgment_due: TS.plus(DAY), output: c("o") },
        }) => "0b33290802010b020701fd0060d71d14000000fa01fd00401e18240a0600fd00a0f535380a0600016f";
        Obligation: Record::Obligation(Obligation {
            id: ObligationId::Response { thread: TH, entry: E, responder: AG2 },
            holder: AG2,
            object: ObjectRef::Thread(TH),
            arose_at: TS0,
            due_at: Some(TS),
        }) => "0c00150308080215fa01fd00401e18240a0600";
        Ref: Record::Ref(IndexRef::Obligation(ObligationId::AssignmentDelivery(ASG))) => "0d00011f";
        Fact: Record::Fact(JournaledFact {
            seq: 100,
            idx: 2,
            at: TS,
            actor: Some(AG),
            fact: Fact::Retracted { thread: TH, entry: E },
        }) => "0e6402fd00401e18240a060001070f1503";
        Receipt: Record::Receipt(StoredReceipt {
            digest: RequestDigest([0xcd; 32]),
            receipt: Receipt {
                kind: ActionKind::Join,
                at: TS,
                seq: None,
                result: ActionResult::Joined {
                    thread: TH,
                    agent: AG2,
                    role: Role::Speaker,
                    joined_at: TS0,
                    existing: true,
                },
            },
        }) => "0fcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcd0afd00401e18240a0600000a150801fa01";
        Labels: Record::Labels(VersionLabels { memory: MEM, version: V, labels: LABELS, widened_from: None })
            => "100b02020200";
        Collective: Record::Collective(Collective {
            thread: TH,
            header: E,
            author: AG,
            formed_at: TS,
            ranks: vec![rank(AG2, 4, ASG), rank(AG3, 5, AssignmentId(32))],
        }) => "11150307fd00401e18240a06000208041ffb2c010520";
        SharedRecord: Record::SharedRecord(shared_record()) => "123d1507fa0304020101000208fd00401e18240a0600";
        RecordValue: Record::RecordValue(RecordValue {
            record: REC,
            field: RecordField::DecisionState(2),
            rev: 3,
            value: FieldValue::Text(c("s")),
        }) => "133d030203000173";
        RecordItem: Record::RecordItem(RecordItem {
            record: REC,
            seq: 1,
            id: item("n1"),
            author: AG2,
            added_rev: 2,
            added_at: TS0,
            body: ItemBody::Note { kind: NoteKind::Comment, body: BodyRef::Pin(PIN) },
        }) => "143d01026e310802fa0000000b02";
        RecordRevision: Record::RecordRevision(RecordRevision {
            record: REC,
            rev: 2,
            base_rev: 1,
            entry: E,
            actor: AG,
            at: TS0,
            paths: vec!["/notes".into()],
            scope: Scope::Fleet,
            taint: Taint::Tainted,
        }) => "153d02010307fa01062f6e6f7465730101";
        Counter: Record::Counter(61) => "163d";
        WakeTarget: Record::WakeTarget(WakeTarget {
            id: WT,
            agent: AG,
            url: "https://hooks.example.com/k".into(),
            secret: WakeSecret([0x5a; 32]),
            filter: wake_filter(),
            created_at: TS0,
            queued: Some(wake_event()),
            delivered: 2,
            failed: Some(wake_failure()),
        }) => "1747071b68747470733a2f2f686f6f6b732e6578616d706c652e636f6d2f6b5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a0100010215fa0103fb8403cdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdcdfa020103fa084854545020353030";
    }));
}

/// The coordination layer's records as structs (design §8.1), so a field moved inside one shows
/// here by its own name and not only inside the record that holds it.
#[test]
fn every_coordination_record_struct_encodes_to_its_golden_bytes() {
    check(&[Golden {
        name: "VersionLabels".to_string(),
        value: VersionLabels { memory: MEM, version: V, labels: LABELS, widened_from: Some(Version(1)) },
        hex: "0b0202020101",
    }]);
    check(&[Golden { name: "ScatterRank".to_string(), value: rank(AG3, 5, ASG), hex: "fb2c01051f" }]);
    check(&[Golden {
        name: "Collective".to_string(),
        value: Collective { thread: TH, header: E, author: AG, formed_at: TS0, ranks: vec![rank(AG2, 4, ASG)] },
        hex: "150307fa0108041f",
    }]);
    check(&[Golden {
        name: "SharedRecord".to_string(),
        value: shared_record(),
        hex: "3d1507fa0304020101000208fd00401e18240a0600",
    }]);
    check(&[Golden {
        name: "RecordCounts".to_string(),
        value: RecordCounts { notes: 1, artifacts: 2, decisions: 3 },
        hex: "010203",
    }]);
}

fn shared_record() -> SharedRecord {
    SharedRecord {
        id: REC,
        thread: TH,
        creator: AG,
        created_at: TS0,
        entry: E,
        rev: 4,
        scope: Scope::Tenant,
        editors: Editors::Governors,
        counts: RecordCounts { notes: 1, artifacts: 0, decisions: 2 },
        updated_by: AG2,
        updated_at: TS,
    }
}

/// The enums nested in records and index values, one case per variant.
#[test]
fn every_record_part_encodes_to_its_golden_bytes() {
    check(&golden_cases!("AgentState", AgentState {
        Active: AgentState::Active => "00";
        Deactivated: AgentState::Deactivated { at: TS } => "01fd00401e18240a0600";
    }));
    check(&golden_cases!("Visibility", Visibility {
        Private: Visibility::Private => "00";
        Public: Visibility::Public => "01";
    }));
    check(&golden_cases!("MemoryState", MemoryState {
        Valid: MemoryState::Valid => "00";
        Withdrawn: MemoryState::Withdrawn { at: TS } => "01fd00401e18240a0600";
    }));
    check(&golden_cases!("ThreadState", ThreadState {
        Open: ThreadState::Open => "00";
        Closed: ThreadState::Closed { at: TS } => "01fd00401e18240a0600";
    }));
    check(&golden_cases!("MembershipState", MembershipState {
        Current: MembershipState::Current => "00";
        Ended: MembershipState::Ended { at: TS, reason: MembershipEnd::Left } => "01fd00401e18240a060000";
    }));
    check(&golden_cases!("MembershipEnd", MembershipEnd {
        Left: MembershipEnd::Left => "00";
        Removed: MembershipEnd::Removed { by: AG } => "0107";
        Deactivated: MembershipEnd::Deactivated => "02";
    }));
    check(&golden_cases!("ResponseState", ResponseState {
        Pending: ResponseState::Pending => "00";
        Ended: ResponseState::Ended { at: TS, how: ResponseEnd::Retracted } => "01fd00401e18240a060002";
    }));
    check(&golden_cases!("ResponseEnd", ResponseEnd {
        Replied: ResponseEnd::Replied { by_entry: EntrySeq(4) } => "0004";
        Handled: ResponseEnd::Handled { note: None } => "0100";
        Retracted: ResponseEnd::Retracted => "02";
        MembershipEnded: ResponseEnd::MembershipEnded => "03";
        Demoted: ResponseEnd::Demoted => "04";
        ThreadClosed: ResponseEnd::ThreadClosed => "05";
    }));
    check(&golden_cases!("AssignmentState", AssignmentState {
        Open: AssignmentState::Open => "00";
        Taken: AssignmentState::Taken { at: TS0, delivery_due: TS } => "01fafd00401e18240a0600";
        Delivered: AssignmentState::Delivered { taken_at: TS0, at: TS, judgment_due: TS.plus(DAY), output: c("o") }
            => "02fafd00401e18240a0600fd00a0f535380a0600016f";
        Ended: AssignmentState::Ended { at: TS, outcome: AssignmentOutcome::Adopted, delivered: Some(c("o")) }
            => "03fd00401e18240a06000001016f";
    }));
    check(&golden_cases!("AssignmentOutcome", AssignmentOutcome {
        Adopted: AssignmentOutcome::Adopted => "00";
        Rejected: AssignmentOutcome::Rejected { reason: c("r") } => "010172";
        Undecided: AssignmentOutcome::Undecided => "02";
        Dropped: AssignmentOutcome::Dropped => "03";
        TimedOut: AssignmentOutcome::TimedOut => "04";
        Voided: AssignmentOutcome::Voided => "05";
    }));
    check(&golden_cases!("MissingJudgment", MissingJudgment {
        Adopted: MissingJudgment::Adopted => "00";
        Undecided: MissingJudgment::Undecided => "01";
    }));
    check(&golden_cases!("Judge", Judge {
        Author: Judge::Author => "00";
        Agent: Judge::Agent(AG3) => "01fb2c01";
    }));
    check(&golden_cases!("Audience", Audience {
        Open: Audience::Open => "00";
        Restricted: Audience::Restricted(set(&[AG2, AG3])) => "010208fb2c01";
    }));
    check(&golden_cases!("EngagementState", EngagementState {
        Open: EngagementState::Open { delivery_due: TS } => "00fd00401e18240a0600";
        Delivered: EngagementState::Delivered { at: TS, judgment_due: TS.plus(DAY), output: c("o") }
            => "01fd00401e18240a0600fd00a0f535380a0600016f";
        Ended: EngagementState::Ended { at: TS, outcome: EngagementOutcome::TimedOut, delivered: None }
            => "02fd00401e18240a06000400";
    }));
    check(&golden_cases!("EngagementOutcome", EngagementOutcome {
        Adopted: EngagementOutcome::Adopted => "00";
        Rejected: EngagementOutcome::Rejected { reason: c("r") } => "010172";
        Undecided: EngagementOutcome::Undecided => "02";
        Dropped: EngagementOutcome::Dropped => "03";
        TimedOut: EngagementOutcome::TimedOut => "04";
    }));
    check(&golden_cases!("ObligationId", ObligationId {
        Response: ObligationId::Response { thread: TH, entry: E, responder: AG2 } => "00150308";
        AssignmentDelivery: ObligationId::AssignmentDelivery(ASG) => "011f";
        AssignmentJudgment: ObligationId::AssignmentJudgment(ASG) => "021f";
        EngagementDelivery: ObligationId::EngagementDelivery(ENG) => "0333";
        EngagementJudgment: ObligationId::EngagementJudgment(ENG) => "0433";
    }));
    check(&golden_cases!("OpportunityId", OpportunityId {
        Assignment: OpportunityId::Assignment(ASG) => "001f";
        Task: OpportunityId::Task(TASK) => "0129";
    }));
    check(&golden_cases!("IndexRef", IndexRef {
        Obligation: IndexRef::Obligation(ObligationId::EngagementJudgment(ENG)) => "000433";
        Opportunity: IndexRef::Opportunity(OpportunityId::Task(TASK)) => "010129";
        Agent: IndexRef::Agent(AG) => "0207";
        Thread: IndexRef::Thread(TH) => "0315";
        Assignment: IndexRef::Assignment(ASG) => "041f";
        Engagement: IndexRef::Engagement(ENG) => "0533";
        Record: IndexRef::Record(REC) => "063d";
        Item: IndexRef::Item(2) => "0702";
        RecordRev: IndexRef::RecordRev { record: REC, rev: 3 } => "083d03";
    }));
    check(&golden_cases!("RecordField", RecordField {
        Title: RecordField::Title => "00";
        State: RecordField::State => "01";
        Body: RecordField::Body => "02";
        DecisionState: RecordField::DecisionState(2) => "0302";
    }));
    check(&golden_cases!("FieldValue", FieldValue {
        Text: FieldValue::Text(c("s")) => "000173";
        Body: FieldValue::Body(BodyRef::Pin(PIN)) => "01000b02";
    }));
    check(&golden_cases!("ItemBody", ItemBody {
        Note: ItemBody::Note { kind: NoteKind::Progress, body: BodyRef::Pin(PIN) } => "0001000b02";
        Artifact: ItemBody::Artifact { reference: BodyRef::Pin(PIN), media_type: "text/plain".into() } => "01000b020a746578742f706c61696e";
        Decision: ItemBody::Decision { reason: c("r") } => "020172";
    }));
    check(&golden_cases!("ItemKind", ItemKind {
        Note: ItemKind::Note => "00";
        Artifact: ItemKind::Artifact => "01";
        Decision: ItemKind::Decision => "02";
    }));
}

// Receipts. ------------------------------------------------------------------------------------

fn receipt(kind: ActionKind, result: ActionResult) -> Receipt {
    Receipt { kind, at: TS, seq: Some(100), result }
}

/// A receipt for every result: stored under its receipt key and returned byte for byte on replay.
#[test]
fn every_receipt_encodes_to_its_golden_bytes() {
    use ActionKind as K;
    use ActionResult as R;
    let grant = GrantReceipt { role: Role::Speaker, fingerprint: fp("fp-g") };
    let cases = golden_cases!("ActionResult", ActionResult, |v| &v.result, {
        AgentRegistered: receipt(K::RegisterAgent, R::AgentRegistered { agent: AG, key_fingerprint: fp("fp-a") })
            => "00fd00401e18240a0600016400070466702d61";
        AgentDeactivated: receipt(K::DeactivateAgent, R::AgentDeactivated {
            agent: AG2,
            memberships_ended: vec![TH, ThreadId(22)],
            threads_closed: vec![ThreadId(22)],
        }) => "01fd00401e18240a0600016401080215160116";
        MemoryCreated: receipt(K::CreateMemory, R::MemoryCreated { memory: MEM, version: Version(1) })
            => "02fd00401e18240a06000164020b01";
        MemoryUpdated: receipt(K::UpdateMemory, R::MemoryUpdated { memory: MEM, version: V })
            => "03fd00401e18240a06000164030b02";
        MemoryPublished: receipt(K::PublishMemory, R::MemoryPublished { memory: MEM })
            => "04fd00401e18240a06000164040b";
        MemoryUnpublished: receipt(K::UnpublishMemory, R::MemoryUnpublished { memory: MEM })
            => "05fd00401e18240a06000164050b";
        MemoryWithdrawn: receipt(K::WithdrawMemory, R::MemoryWithdrawn { memory: MEM })
            => "06fd00401e18240a06000164060b";
        ThreadCreated: receipt(K::CreateThread, R::ThreadCreated { thread: TH, grant: Some(grant.clone()) })
            => "07fd00401e18240a06000164071501010466702d67";
        GrantIssued: receipt(K::IssueGrant, R::GrantIssued { thread: TH, grant: grant.clone(), voided_previous: true })
            => "08fd00401e18240a060001640815010466702d6701";
        GrantVoided: receipt(K::VoidGrant, R::GrantVoided { thread: TH }) => "09fd00401e18240a060001640915";
        Joined: receipt(K::Join, R::Joined {
            thread: TH,
            agent: AG2,
            role: Role::Speaker,
            joined_at: TS,
            existing: false,
        }) => "0afd00401e18240a060001640a150801fd00401e18240a060000";
        Left: receipt(K::Leave, R::Left { thread: TH }) => "0bfd00401e18240a060001640b15";
        Removed: receipt(K::Remove, R::Removed { thread: TH, member: AG2 }) => "0cfd00401e18240a060001640c1508";
        RoleChanged: receipt(K::ChangeRole, R::RoleChanged {
            thread: TH,
            member: AG2,
            from: Role::Speaker,
            to: Role::Governor,
        }) => "0dfd00401e18240a060001640d15080102";
        Posted: receipt(K::Post, R::Posted {
            thread: TH,
            entry: E,
            pin: PIN,
            responders: set(&[AG2, AG3]),
            ended_own_response: true,
            assignment: Some(ASG),
        }) => "0efd00401e18240a060001640e15030b020208fb2c0101011f";
        Handled: receipt(K::Handle, R::Handled { thread: TH, entry: E }) => "0ffd00401e18240a060001640f1503";
        Retracted: receipt(K::Retract, R::Retracted { thread: TH, entry: E, responses_ended: 2 })
            => "10fd00401e18240a0600016410150302";
        ThreadClosed: receipt(K::CloseThread, R::ThreadClosed { thread: TH }) => "11fd00401e18240a060001641115";
        AssignmentTaken: receipt(K::TakeAssignment, R::AssignmentTaken { assignment: ASG, delivery_due: TS.plus(HOUR) })
            => "12fd00401e18240a06000164121ffd00e4b1ee240a0600";
        AssignmentDelivered: receipt(K::DeliverAssignment, R::AssignmentDelivered {
            assignment: ASG,
            judgment_due: TS.plus(DAY),
        }) => "13fd00401e18240a06000164131ffd00a0f535380a0600";
        AssignmentAdopted: receipt(K::AdoptAssignment, R::AssignmentAdopted { assignment: ASG })
            => "14fd00401e18240a06000164141f";
        AssignmentRejected: receipt(K::RejectAssignment, R::AssignmentRejected { assignment: ASG })
            => "15fd00401e18240a06000164151f";
        AssignmentDropped: receipt(K::DropAssignment, R::AssignmentDropped { assignment: ASG })
            => "16fd00401e18240a06000164161f";
        AssignmentVoided: receipt(K::VoidAssignment, R::AssignmentVoided { assignment: ASG })
            => "17fd00401e18240a06000164171f";
        TaskCreated: receipt(K::CreateTask, R::TaskCreated { task: TASK, version: Version(1) })
            => "18fd00401e18240a06000164182901";
        ContractRevised: receipt(K::ReviseContract, R::ContractRevised { task: TASK, version: V })
            => "19fd00401e18240a06000164192902";
        TaskPaused: receipt(K::PauseTask, R::TaskPaused { task: TASK }) => "1afd00401e18240a060001641a29";
        TaskResumed: receipt(K::ResumeTask, R::TaskResumed { task: TASK }) => "1bfd00401e18240a060001641b29";
        Engaged: receipt(K::TakeTask, R::Engaged {
            task: TASK,
            engagement: ENG,
            contract_version: V,
            delivery_due: TS.plus(HOUR),
            existing: false,
        }) => "1cfd00401e18240a060001641c293302fd00e4b1ee240a060000";
        EngagementDelivered: receipt(K::DeliverTask, R::EngagementDelivered {
            task: TASK,
            engagement: ENG,
            judgment_due: TS.plus(DAY),
        }) => "1dfd00401e18240a060001641d2933fd00a0f535380a0600";
        EngagementAdopted: receipt(K::AdoptEngagement, R::EngagementAdopted { task: TASK, engagement: ENG })
            => "1ffd00401e18240a060001641e2933";
        EngagementRejected: receipt(K::RejectEngagement, R::EngagementRejected { task: TASK, engagement: ENG })
            => "20fd00401e18240a060001641f2933";
        EngagementDropped: receipt(K::DropEngagement, R::EngagementDropped { task: TASK, engagement: ENG })
            => "1efd00401e18240a06000164202933";
        Expired: receipt(K::Expire, R::Expired {
            ended: vec![ObligationId::AssignmentDelivery(ASG), ObligationId::EngagementJudgment(ENG)],
        }) => "21fd00401e18240a060001642102011f0433";
        Sent: receipt(K::Send, R::Sent { thread: TH, entry: E, pin: PIN, responders: set(&[AG2, AG3]), readers: 4 })
            => "24fd00401e18240a060001642215030b020208fb2c0104";
        LabeledWritten: receipt(K::WriteLabeled, R::LabeledWritten { pin: PIN, labels: LABELS })
            => "22fd00401e18240a06000164230b020202";
        ScopeWidened: receipt(K::WidenScope, R::ScopeWidened {
            from: PIN,
            to: Pin { memory: MEM, version: Version(3) },
            scope: Scope::Public,
        }) => "23fd00401e18240a06000164240b020b0303";
        Scattered: receipt(K::Scatter, R::Scattered {
            thread: TH,
            header: E,
            ranks: vec![rank(AG2, 4, ASG), rank(AG3, 5, AssignmentId(32))],
        }) => "25fd00401e18240a060001642515030208041ffb2c010520";
        RecordCreated: receipt(K::CreateRecord, R::RecordCreated { record: REC, thread: TH, entry: E, rev: 1 }) => "26fd00401e18240a06000164263d150301";
        RecordPatched: receipt(K::PatchRecord, R::RecordPatched {
            record: REC,
            entry: E,
            base_rev: 1,
            rev: 3,
            merged: true,
        }) => "27fd00401e18240a06000164273d03010301";
        WakeTargetSet: receipt(K::SetWakeTarget, R::WakeTargetSet { target: WT }) => "28fd00401e18240a060001642847";
        WakeTargetRemoved: receipt(K::RemoveWakeTarget, R::WakeTargetRemoved { target: WT }) => "29fd00401e18240a060001642947";
        WakeRecorded: receipt(K::RecordWake, R::WakeRecorded { queued: 1, delivered: 2, gave_up: 0 }) => "2afd00401e18240a060001642a010200";
    });
    check(&cases);
    // `Receipt::to_bytes` is what a replay returns: the same canonical bytes.
    for case in &cases {
        assert_eq!(case.value.to_bytes(), codec::encode(&case.value), "{}", case.name);
    }
}

// Keys. ----------------------------------------------------------------------------------------

/// The family bytes and names: the first byte of every key, and the RocksDB column family each
/// family is stored in. Renaming a family would leave its column family unopened.
#[test]
fn the_key_families_keep_their_bytes_and_names() {
    // No wildcard arm: a new family does not compile until its byte and name are pinned here.
    let pinned = |f: Family| match f {
        Family::Meta => (0u8, "meta"),
        Family::Records => (1, "records"),
        Family::Indexes => (2, "indexes"),
        Family::Journal => (3, "journal"),
        Family::Receipts => (4, "receipts"),
    };
    for f in Family::ALL {
        assert_eq!((f as u8, f.name()), pinned(f), "{f:?}");
    }
}

/// One key of every kind, built with fixed ids.
#[test]
fn every_key_kind_has_its_golden_layout() {
    let kv = |name: &str, key: Key, hex: &'static str| Golden { name: format!("key::{name}"), value: key, hex };
    let cases = vec![
        kv("counters", keys::counters(GroupId::ZERO), "0001"),
        // Issue #19, deliverable 3: one counter per group; group 0's is the key of before groups.
        kv("counters_group_5", keys::counters(GroupId(5)), "00010005"),
        kv("agent", keys::agent(AG), "01010000000000000007"),
        kv("memory", keys::memory(MEM), "0102000000000000000b"),
        kv("memory_version", keys::memory_version(MEM, V), "0103000000000000000b00000002"),
        kv("thread", keys::thread(TH), "01040000000000000015"),
        kv("membership", keys::membership(TH, AG2), "010500000000000000150000000000000008"),
        kv("entry", keys::entry(TH, E), "010600000000000000150000000000000003"),
        kv("response", keys::response(TH, E, AG2), "0107000000000000001500000000000000030000000000000008"),
        kv("assignment", keys::assignment(ASG), "0108000000000000001f"),
        kv("task", keys::task(TASK), "01090000000000000029"),
        kv("contract_version", keys::contract_version(TASK, V), "010a000000000000002900000002"),
        kv("engagement", keys::engagement(ENG), "010b0000000000000033"),
        kv(
            "obligation",
            keys::obligation(ObligationId::Response { thread: TH, entry: E, responder: AG2 }),
            "010c01000000000000001500000000000000030000000000000008",
        ),
        kv("version_labels", keys::version_labels(MEM, V), "010d000000000000000b00000002"),
        kv("collective", keys::collective(TH, E), "011200000000000000150000000000000003"),
        kv("record_counter", keys::record_counter(GroupId::ZERO), "0002"),
        kv("record_counter_group_5", keys::record_counter(GroupId(5)), "00020005"),
        kv("shared_record", keys::shared_record(REC), "010e000000000000003d"),
        kv("wake_counter", keys::wake_counter(GroupId::ZERO), "0003"),
        kv("wake_counter_group_5", keys::wake_counter(GroupId(5)), "00030005"),
        kv("wake_target", keys::wake_target(AG, WT), "011300000000000000070000000000000047"),
        kv("record_value", keys::record_value(REC, RecordField::Title, 3), "010f000000000000003d0100000003"),
        kv("record_item", keys::record_item(REC, ItemKind::Artifact, 2), "0110000000000000003d0200000002"),
        kv("record_revision", keys::record_revision(REC, 3), "0111000000000000003d00000003"),
        kv("thread_record", keys::thread_record(TH, REC), "020e0000000000000015000000000000003d"),
        kv("record_item_id", keys::record_item_id(REC, ItemKind::Note, "n1"), "020f000000000000003d016e31"),
        kv("entry_record", keys::entry_record(TH, E), "021000000000000000150000000000000003"),
        kv(
            "turn",
            keys::turn(AG2, TS, ObligationId::AssignmentDelivery(ASG)),
            "0201000000000000000800060a24181e400002000000000000001f",
        ),
        kv(
            "object_obligation",
            keys::object_obligation(ObjectRef::Task(TASK), AG2, ObligationId::EngagementDelivery(ENG)),
            "02020400000000000000290000000000000008040000000000000033",
        ),
        kv("due", keys::due(TS, ObligationId::AssignmentJudgment(ASG)), "020300060a24181e400003000000000000001f"),
        kv(
            "object_due",
            keys::object_due(ObjectRef::Thread(TH), TS, ObligationId::AssignmentJudgment(ASG)),
            "020403000000000000001500060a24181e400003000000000000001f",
        ),
        kv("agent_thread", keys::agent_thread(AG2, TH), "020600000000000000080000000000000015"),
        kv(
            "live_assignment",
            keys::live_assignment(TH, AG2, ASG),
            "020700000000000000150000000000000008000000000000001f",
        ),
        kv("thread_assignment", keys::thread_assignment(TH, ASG), "02080000000000000015000000000000001f"),
        kv("task_engagement", keys::task_engagement(TASK, ENG), "020900000000000000290000000000000033"),
        kv("open_engagement", keys::open_engagement(TASK, AG2), "020a00000000000000290000000000000008"),
        kv(
            "grant_by_hash",
            keys::grant_by_hash(&HASH2),
            "020b1212121212121212121212121212121212121212121212121212121212121212",
        ),
        kv(
            "agent_by_key",
            keys::agent_by_key(&HASH),
            "020cabababababababababababababababababababababababababababababababab",
        ),
        kv("agent_engagement", keys::agent_engagement(AG2, ENG), "020d00000000000000080000000000000033"),
        kv("journal", keys::journal(ObjectRef::Thread(TH), 100, 2), "0301030000000000000015000000000000006400000002"),
        kv(
            "receipt",
            keys::receipt(Principal::Agent(AG), ActionKind::Post, &key("key-1")),
            "0401010000000000000007706f7374006b65792d31",
        ),
    ];
    check_keys(&cases, Key::clone);
    // Every family has at least one pinned key.
    for f in Family::ALL {
        assert!(cases.iter().any(|case| Family::of(&case.value) == Some(f)), "no key of family {f:?} is pinned");
    }
    // Some keys are read back (timers and the fact feed decode them): the golden bytes decode to
    // the fields they were built from.
    let golden = |name: &str| {
        let case = cases.iter().find(|case| case.name == format!("key::{name}")).expect("a pinned key");
        case.expected().expect("golden hex")
    };
    assert_eq!(keys::due_time_of(&golden("due")), Some(TS));
    assert_eq!(keys::due_entry_of(&golden("due")), Some((TS, ObligationId::AssignmentJudgment(ASG))));
    assert_eq!(keys::turn_agent_of(&golden("turn")), Some(AG2));
    assert_eq!(keys::journal_object_of(&golden("journal")), Some(ObjectRef::Thread(TH)));
}

/// The parts of keys that vary by enum variant, one case per variant.
#[test]
fn every_key_part_has_its_golden_layout() {
    // Obligations as keyed in the due index (the same bytes follow the prefix of the turn, object
    // and record keys); timers decode them.
    let due = golden_cases!("due key", ObligationId {
        Response: ObligationId::Response { thread: TH, entry: E, responder: AG2 }
            => "020300060a24181e400001000000000000001500000000000000030000000000000008";
        AssignmentDelivery: ObligationId::AssignmentDelivery(ASG) => "020300060a24181e400002000000000000001f";
        AssignmentJudgment: ObligationId::AssignmentJudgment(ASG) => "020300060a24181e400003000000000000001f";
        EngagementDelivery: ObligationId::EngagementDelivery(ENG) => "020300060a24181e4000040000000000000033";
        EngagementJudgment: ObligationId::EngagementJudgment(ENG) => "020300060a24181e4000050000000000000033";
    });
    check_keys(&due, |o| keys::due(TS, *o));
    check_key_decoder(&due, |k| keys::due_entry_of(k).and_then(|(at, o)| (at == TS).then_some(o)));
    // Objects as keyed in journals (and in object obligation and object due indexes).
    let journal = golden_cases!("journal key", ObjectRef {
        Agent: ObjectRef::Agent(AG) => "0301010000000000000007000000000000006400000002";
        Memory: ObjectRef::Memory(MEM) => "030102000000000000000b000000000000006400000002";
        Thread: ObjectRef::Thread(TH) => "0301030000000000000015000000000000006400000002";
        Task: ObjectRef::Task(TASK) => "0301040000000000000029000000000000006400000002";
    });
    check_keys(&journal, |o| keys::journal(*o, 100, 2));
    check_key_decoder(&journal, keys::journal_object_of);
    check_keys(
        &golden_cases!("opportunity key", OpportunityId {
            Assignment: OpportunityId::Assignment(ASG) => "0205000000000000000800060a24181e400001000000000000001f";
            Task: OpportunityId::Task(TASK) => "0205000000000000000800060a24181e4000020000000000000029";
        }),
        |o| keys::opportunity(AG2, TS, *o),
    );
    check_keys(
        &golden_cases!("receipt key", Principal {
            Agent: Principal::Agent(AG) => "040101000000000000000772656769737465725f6167656e74006b65792d31";
            Registrar: Principal::Registrar => "040102000000000000000072656769737465725f6167656e74006b65792d31";
            Operator: Principal::Operator => "040103000000000000000072656769737465725f6167656e74006b65792d31";
            System: Principal::System => "040104000000000000000072656769737465725f6167656e74006b65792d31";
        }),
        |p| keys::receipt(*p, ActionKind::RegisterAgent, &key("key-1")),
    );
    // The scalar fields and item kinds of a record as keyed in its history and items.
    check_keys(
        &golden_cases!("record value key", RecordField {
            Title: RecordField::Title => "010f000000000000003d0100000003";
            State: RecordField::State => "010f000000000000003d0200000003";
            Body: RecordField::Body => "010f000000000000003d0300000003";
            DecisionState: RecordField::DecisionState(2) => "010f000000000000003d040000000200000003";
        }),
        |f| keys::record_value(REC, *f, 3),
    );
    check_keys(
        &golden_cases!("record item key", ItemKind {
            Note: ItemKind::Note => "0110000000000000003d0100000002";
            Artifact: ItemKind::Artifact => "0110000000000000003d0200000002";
            Decision: ItemKind::Decision => "0110000000000000003d0300000002";
        }),
        |k| keys::record_item(REC, *k, 2),
    );
}

// Groups (issue #19, deliverable 3). ---------------------------------------------------------

/// Ids are allocated per group, with the allocating group in their high 16 bits
/// (`kungfu_types::group`): group 0 allocates exactly the ids it allocated before groups existed
/// (`ag_1`, the varint `01`), group 5 its own partition's (`0x0005_0000_0000_0001`). Pinned for
/// each group: the allocated id, its text, and the counter record under the group's counter key.
#[test]
fn ids_allocated_in_a_group_carry_its_partition() {
    let cmd = Command::new(
        Principal::Registrar,
        Action::RegisterAgent { key_hash: HASH, key_fingerprint: fp("fp-a") },
        None,
        TS,
    );
    let cases = [
        (GroupId::ZERO, "01", "ag_1", "0001", "0001010000000000"),
        (GroupId(5), "fd0100000000000500", "ag_1407374883553281", "00010005", "0001fd01000000000005000000000000"),
    ];
    let mut ids = Vec::new();
    let mut counters = Vec::new();
    for (group, id_hex, text, key_hex, counters_hex) in cases {
        let state = InGroup { group, state: MemState::new() };
        let applied = apply(&state, &cmd, &Limits::default()).expect("applies");
        let Ok(Receipt { result: ActionResult::AgentRegistered { agent, .. }, .. }) = applied.outcome else {
            panic!("{group}: the registration was refused: {:?}", applied.outcome);
        };
        assert_eq!(agent.to_string(), text, "{group}: the id's text");
        assert_eq!(kungfu_types::group::id_group(agent.0), group);
        assert_eq!(hex::encode(keys::counters(group)), key_hex, "{group}: the counter key");
        let Some(Some(record)) = applied.changes.get(&keys::counters(group)) else {
            panic!("{group}: no counters written under the group's key");
        };
        assert_eq!(applied.changes.keys().filter(|k| k.first() == Some(&(Family::Meta as u8))).count(), 1);
        ids.push(Golden { name: format!("agent id allocated in {group}"), value: agent, hex: id_hex });
        counters.push(Golden { name: format!("counters of {group}"), value: record.clone(), hex: counters_hex });
    }
    check(&ids);
    check(&counters);
}
