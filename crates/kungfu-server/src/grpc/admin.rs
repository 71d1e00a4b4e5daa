//! The operator service (`kungfu.v1.AdminService`, `proto/kungfu/v1/admin.proto`) over the
//! service layer's operator calls (`crate::admin`): the operator token first, then the request's
//! form (`kungfu_api::admin`), then the call, with the caller's `grpc-timeout` as its budget.

use super::{call_budget, credentials, status};
use crate::backend::Backend;
use kungfu_api::{admin as rq, pb};
use kungfu_storage::backup::BackupManifest;
use std::sync::Arc;
use tonic::{Request, Response, Status};

/// The operator service of one node.
#[derive(Clone, Debug)]
pub struct AdminApi {
    b: Arc<Backend>,
}

/// The admin service, ready to add to the node's server.
pub fn service(b: Arc<Backend>) -> pb::admin_service_server::AdminServiceServer<AdminApi> {
    let max = b.config.api.max_message_bytes;
    pb::admin_service_server::AdminServiceServer::new(AdminApi { b })
        .max_decoding_message_size(max)
        .max_encoding_message_size(max)
}

/// A backup's manifest on the wire.
pub fn manifest_pb(m: &BackupManifest) -> pb::BackupManifest {
    pb::BackupManifest {
        format: m.format,
        cluster_id: m.cluster_id.clone(),
        node_id: m.node_id,
        last_applied_index: m.last_applied_index,
        last_applied_term: m.last_applied_term,
        archive: m.archive.clone(),
        archive_bytes: m.archive_bytes,
        sha256: m.sha256.clone(),
        created_at_unix_micros: m.created_at_unix_micros,
    }
}

#[tonic::async_trait]
impl pb::admin_service_server::AdminService for AdminApi {
    async fn cluster_status(
        &self,
        request: Request<pb::ClusterStatusRequest>,
    ) -> Result<Response<pb::ClusterStatusResponse>, Status> {
        let op = self.b.authenticate_operator(&credentials(&request)).map_err(status)?;
        Ok(Response::new(self.b.cluster_status(&op)))
    }

    async fn add_learner(
        &self,
        request: Request<pb::AddLearnerRequest>,
    ) -> Result<Response<pb::AddLearnerResponse>, Status> {
        let op = self.b.authenticate_operator(&credentials(&request)).map_err(status)?;
        let new = rq::add_learner_request(request.get_ref())?;
        Ok(Response::new(self.b.add_learner(&op, new, call_budget(&request)).await.map_err(status)?))
    }

    async fn change_membership(
        &self,
        request: Request<pb::ChangeMembershipRequest>,
    ) -> Result<Response<pb::ChangeMembershipResponse>, Status> {
        let op = self.b.authenticate_operator(&credentials(&request)).map_err(status)?;
        let change = rq::change_membership_request(request.get_ref())?;
        Ok(Response::new(self.b.change_membership(&op, change, call_budget(&request)).await.map_err(status)?))
    }

    async fn transfer_leader(
        &self,
        request: Request<pb::TransferLeaderRequest>,
    ) -> Result<Response<pb::TransferLeaderResponse>, Status> {
        let op = self.b.authenticate_operator(&credentials(&request)).map_err(status)?;
        let to = rq::transfer_leader_request(request.get_ref())?;
        Ok(Response::new(self.b.transfer_leader(&op, to, call_budget(&request)).await.map_err(status)?))
    }

    async fn state_digest(
        &self,
        request: Request<pb::StateDigestRequest>,
    ) -> Result<Response<pb::StateDigestResponse>, Status> {
        let op = self.b.authenticate_operator(&credentials(&request)).map_err(status)?;
        Ok(Response::new(self.b.state_digest(&op).await.map_err(status)?))
    }

    async fn export_facts(
        &self,
        request: Request<pb::ExportFactsRequest>,
    ) -> Result<Response<pb::ExportFactsResponse>, Status> {
        let op = self.b.authenticate_operator(&credentials(&request)).map_err(status)?;
        let q = request.get_ref();
        Ok(Response::new(self.b.export_facts(&op, q.after_seq, q.limit).await.map_err(status)?))
    }

    async fn trigger_snapshot(
        &self,
        request: Request<pb::TriggerSnapshotRequest>,
    ) -> Result<Response<pb::TriggerSnapshotResponse>, Status> {
        let op = self.b.authenticate_operator(&credentials(&request)).map_err(status)?;
        Ok(Response::new(self.b.trigger_snapshot(&op, call_budget(&request)).await.map_err(status)?))
    }

    async fn backup(&self, request: Request<pb::BackupRequest>) -> Result<Response<pb::BackupResponse>, Status> {
        let op = self.b.authenticate_operator(&credentials(&request)).map_err(status)?;
        let target = rq::backup_request(request.get_ref())?;
        let written = self.b.backup(&op, target).await.map_err(status)?;
        Ok(Response::new(pb::BackupResponse {
            manifest: Some(manifest_pb(&written.manifest)),
            target_dir: written.target_dir.display().to_string(),
        }))
    }
}
