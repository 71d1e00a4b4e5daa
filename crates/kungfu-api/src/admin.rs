//! The conversion boundary of the operator service (`proto/kungfu/v1/admin.proto`): each request
//! of `AdminService` checked for form and turned into plain values, or refused with a
//! [`FieldError`] naming the field (`node_id`, `raft_addr`, `voters[1]`, `to`, `target_dir`).
//! Whether the cluster allows the request (is the node already a voter, is this node the leader)
//! is decided by the server against the raft state, not here.

use crate::FieldError;
use crate::pb;
use std::collections::BTreeSet;
use std::path::PathBuf;

/// A node to add as a learner.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewLearner {
    pub node_id: u64,
    /// `host:port` of its raft service.
    pub raft_addr: String,
    /// `host:port` of its public API.
    pub api_addr: String,
}

/// A new set of voters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewVoters {
    pub voters: BTreeSet<u64>,
    /// The voters in the order the request listed them, so a refusal can name `voters[i]`.
    pub listed: Vec<u64>,
    /// Voters left out stay as learners.
    pub retain_learners: bool,
}

/// The longest address accepted (a DNS name is at most 253 characters, plus `:port`).
const MAX_ADDR: usize = 260;
/// The longest backup path accepted.
const MAX_PATH: usize = 4096;

fn node_id(field: &str, id: u64) -> Result<u64, FieldError> {
    if id == 0 { Err(FieldError::new(field, "must be a node id of at least 1")) } else { Ok(id) }
}

/// A `host:port` address: a non-empty host without spaces or a scheme, and a port from 1 to 65535.
fn address(field: &str, text: &str) -> Result<String, FieldError> {
    if text.is_empty() {
        return Err(FieldError::missing(field));
    }
    let bad = || FieldError::new(field, "must be `host:port` (such as `10.0.0.4:7500`), with no scheme or path");
    if text.len() > MAX_ADDR || text.contains("://") || text.chars().any(|c| c.is_whitespace() || c == '/') {
        return Err(bad());
    }
    let Some((host, port)) = text.rsplit_once(':') else { return Err(bad()) };
    let host_ok = !host.is_empty() && (!host.contains(':') || (host.starts_with('[') && host.ends_with(']')));
    match port.parse::<u16>() {
        Ok(p) if p > 0 && host_ok => Ok(text.to_string()),
        _ => Err(bad()),
    }
}

pub fn add_learner_request(req: &pb::AddLearnerRequest) -> Result<NewLearner, FieldError> {
    Ok(NewLearner {
        node_id: node_id("node_id", req.node_id)?,
        raft_addr: address("raft_addr", &req.raft_addr)?,
        api_addr: address("api_addr", &req.api_addr)?,
    })
}

pub fn change_membership_request(req: &pb::ChangeMembershipRequest) -> Result<NewVoters, FieldError> {
    if req.voters.is_empty() {
        return Err(FieldError::new("voters", "must name at least one voter"));
    }
    let mut voters = BTreeSet::new();
    for (i, id) in req.voters.iter().enumerate() {
        let field = format!("voters[{i}]");
        if !voters.insert(node_id(&field, *id)?) {
            return Err(FieldError::new(field, format!("node {id} is named twice")));
        }
    }
    Ok(NewVoters { voters, listed: req.voters.clone(), retain_learners: req.retain_learners })
}

pub fn transfer_leader_request(req: &pb::TransferLeaderRequest) -> Result<u64, FieldError> {
    node_id("to", req.to)
}

/// The backup directory: an absolute path with no `..` component (checked for existence by the
/// server, on its own machine).
pub fn backup_request(req: &pb::BackupRequest) -> Result<PathBuf, FieldError> {
    const FIELD: &str = "target_dir";
    let text = req.target_dir.as_str();
    if text.is_empty() {
        return Err(FieldError::missing(FIELD));
    }
    if text.len() > MAX_PATH || text.contains('\0') {
        return Err(FieldError::new(FIELD, "is not a usable path"));
    }
    let path = PathBuf::from(text);
    if !path.is_absolute() {
        return Err(FieldError::new(FIELD, "must be an absolute path on the node's machine"));
    }
    if path.components().any(|c| matches!(c, std::path::Component::ParentDir)) || path.parent().is_none() {
        return Err(FieldError::new(FIELD, "must be a new directory under an existing one, without `..`"));
    }
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn learner(id: u64, raft: &str, api: &str) -> Result<NewLearner, FieldError> {
        add_learner_request(&pb::AddLearnerRequest { node_id: id, raft_addr: raft.into(), api_addr: api.into() })
    }

    #[test]
    fn a_learner_needs_an_id_and_two_host_port_addresses() {
        let ok = learner(4, "10.0.0.4:7500", "node4.example:7400").expect("valid");
        assert_eq!(
            ok,
            NewLearner { node_id: 4, raft_addr: "10.0.0.4:7500".into(), api_addr: "node4.example:7400".into() }
        );
        assert!(learner(4, "[::1]:7500", "127.0.0.1:7400").is_ok(), "bracketed IPv6");
        assert_eq!(learner(0, "a:1", "b:2").expect_err("refused").field, "node_id");
        assert_eq!(learner(4, "", "b:2").expect_err("refused"), FieldError::missing("raft_addr"));
        for bad in ["host", "host:0", "host:99999", ":7500", "http://h:7500", "h :1", "::1:7500", "h:1/x"] {
            assert_eq!(learner(4, bad, "b:2").expect_err("refused").field, "raft_addr", "{bad}");
            assert_eq!(learner(4, "a:1", bad).expect_err("refused").field, "api_addr", "{bad}");
        }
    }

    #[test]
    fn voters_are_a_non_empty_set_of_ids_and_the_bad_one_is_named_by_position() {
        let req = |voters: Vec<u64>| pb::ChangeMembershipRequest { voters, retain_learners: true };
        let ok = change_membership_request(&req(vec![3, 1, 2])).expect("valid");
        assert_eq!(ok.voters, BTreeSet::from([1, 2, 3]));
        assert!(ok.retain_learners);
        assert_eq!(change_membership_request(&req(vec![])).expect_err("refused").field, "voters");
        assert_eq!(change_membership_request(&req(vec![1, 0])).expect_err("refused").field, "voters[1]");
        assert_eq!(change_membership_request(&req(vec![1, 2, 1])).expect_err("refused").field, "voters[2]");
    }

    #[test]
    fn transfer_needs_a_target() {
        assert_eq!(transfer_leader_request(&pb::TransferLeaderRequest { to: 2 }), Ok(2));
        assert_eq!(transfer_leader_request(&pb::TransferLeaderRequest { to: 0 }).expect_err("refused").field, "to");
    }

    #[test]
    fn a_backup_goes_to_an_absolute_path() {
        let req = |p: &str| backup_request(&pb::BackupRequest { target_dir: p.into() });
        assert_eq!(req("/var/backups/kf-1"), Ok(PathBuf::from("/var/backups/kf-1")));
        for bad in ["", "backups/kf", "/", "/var/../etc/kf", "/a\0b"] {
            let e = req(bad).expect_err("refused");
            assert_eq!(e.field, "target_dir", "{bad:?}");
            assert_eq!(e.to_rejection().code, kungfu_types::Code::InvalidArgument);
        }
    }
}
