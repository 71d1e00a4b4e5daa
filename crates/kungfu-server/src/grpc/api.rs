//! The protocol services of `proto/kungfu/v1` (the six of the base protocol and the coordination
//! layer's `CoordService` and `RecordService`) over the service layer. Each call reads its
//! credentials from the request, authenticates through the service layer, converts the request at
//! the one boundary (`kungfu-api`: malformed input is INVALID_ARGUMENT naming the field), and
//! either writes the action and answers from its receipt, or reads one consistent snapshot, in
//! that order. Nothing here decides a protocol rule: the core does, on every replica.

use super::{credentials, respond, status};
use crate::backend::Backend;
use crate::secrets;
use kungfu_api::WriteResponse;
use kungfu_api::pb;
use kungfu_api::request as rq;

use std::sync::Arc;
use tonic::{Request, Response, Status};

/// One handle shared by every service.
#[derive(Clone, Debug)]
pub struct Api {
    b: Arc<Backend>,
}

impl Api {
    pub fn new(b: Arc<Backend>) -> Api {
        Api { b }
    }
}

impl Api {
    /// A write RPC by an authenticated agent: convert, replicate, answer from the receipt.
    async fn agent_write<Q, R: WriteResponse>(
        &self,
        request: Request<Q>,
        convert: fn(Q) -> Result<kungfu_api::KeyedAction, kungfu_api::FieldError>,
    ) -> Result<Response<R>, Status> {
        let me = self.b.authenticate_writer(&credentials(&request)).await.map_err(status)?;
        // The request by value: its content moves into the action, uncopied.
        let keyed = convert(request.into_inner())?;
        // Boxed once here: the write's future (routing, the actor call, the wait) is several KiB,
        // and every layer above would otherwise move it whole (issue #30: memcpy was 18 % of a
        // post's instructions).
        let w = Box::pin(self.b.write(&me, keyed)).await.map_err(status)?;
        Ok(Response::new(R::from_receipt(&w.receipt, w.replayed)))
    }
}

#[tonic::async_trait]
impl pb::agent_service_server::AgentService for Api {
    async fn register(&self, request: Request<pb::RegisterRequest>) -> Result<Response<pb::RegisterResponse>, Status> {
        // Open registration needs no credential; closed registration needs the operator token.
        let principal = self.b.registrar(&credentials(&request)).map_err(status)?;
        let (key, material) = secrets::issue(secrets::AGENT_KEY_PREFIX).map_err(status)?;
        let keyed = rq::register_action(request.into_inner(), &material)?;
        let w = self.b.submit(principal, keyed).await.map_err(status)?;
        // L3: the key goes out with the first success only.
        Ok(Response::new(kungfu_api::response::register_response(&w.receipt, w.replayed, &key)))
    }

    async fn deactivate(
        &self,
        request: Request<pb::DeactivateAgentRequest>,
    ) -> Result<Response<pb::DeactivateAgentResponse>, Status> {
        // An agent may deactivate itself; the operator may deactivate anyone (§4: account state is
        // set by the implementation).
        let principal = self.b.agent_or_operator(&credentials(&request)).await.map_err(status)?;
        let keyed = rq::deactivate_agent_action(request.into_inner())?;
        let w = self.b.submit(principal, keyed).await.map_err(status)?;
        Ok(Response::new(pb::DeactivateAgentResponse::from_receipt(&w.receipt, w.replayed)))
    }

    async fn set_wake_target(
        &self,
        request: Request<pb::SetWakeTargetRequest>,
    ) -> Result<Response<pb::SetWakeTargetResponse>, Status> {
        let me = self.b.authenticate_writer(&credentials(&request)).await.map_err(status)?;
        let req = request.into_inner();
        // The operator's policy (issue #35: no private destination unless allowed), checked here
        // for a clear refusal now and again by the leader at every send.
        if let Err(message) = crate::wake::policy::check_url(&crate::wake::policy_of(&self.b.config.wake), &req.url) {
            // The policy's messages start with the field's name, which the rejection adds itself.
            let message = message.strip_prefix("url: ").unwrap_or(&message).to_string();
            return Err(Status::from(kungfu_api::FieldError::new("url", message)));
        }
        let secret = crate::wake::new_secret().map_err(status)?;
        let keyed = rq::set_wake_target_action(req, secret)?;
        let w = Box::pin(self.b.write(&me, keyed)).await.map_err(status)?;
        // L3: the secret goes out with the first success only.
        let text = crate::wake::send::secret_text(&secret.0);
        Ok(Response::new(kungfu_api::response::set_wake_target_response(&w.receipt, w.replayed, &text)))
    }

    async fn remove_wake_target(
        &self,
        request: Request<pb::RemoveWakeTargetRequest>,
    ) -> Result<Response<pb::RemoveWakeTargetResponse>, Status> {
        self.agent_write(request, rq::remove_wake_target_action).await
    }

    async fn list_wake_targets(
        &self,
        request: Request<pb::ListWakeTargetsRequest>,
    ) -> Result<Response<pb::WakeTargetList>, Status> {
        let me = self.b.authenticate(&credentials(&request)).await.map_err(status)?;
        let agent = me.agent;
        let targets = self.b.read(move |s, _, _| kungfu_core::read::wake_targets(s, agent)).await.map_err(status)?;
        Ok(Response::new(kungfu_api::response::wake_target_list(&targets)))
    }
}

#[tonic::async_trait]
impl pb::memory_service_server::MemoryService for Api {
    async fn create(
        &self,
        request: Request<pb::CreateMemoryRequest>,
    ) -> Result<Response<pb::CreateMemoryResponse>, Status> {
        self.agent_write(request, rq::create_memory_action).await
    }
    async fn update(
        &self,
        request: Request<pb::UpdateMemoryRequest>,
    ) -> Result<Response<pb::UpdateMemoryResponse>, Status> {
        self.agent_write(request, rq::update_memory_action).await
    }
    async fn publish(
        &self,
        request: Request<pb::PublishMemoryRequest>,
    ) -> Result<Response<pb::PublishMemoryResponse>, Status> {
        self.agent_write(request, rq::publish_memory_action).await
    }
    async fn unpublish(
        &self,
        request: Request<pb::UnpublishMemoryRequest>,
    ) -> Result<Response<pb::UnpublishMemoryResponse>, Status> {
        self.agent_write(request, rq::unpublish_memory_action).await
    }
    async fn withdraw(
        &self,
        request: Request<pb::WithdrawMemoryRequest>,
    ) -> Result<Response<pb::WithdrawMemoryResponse>, Status> {
        self.agent_write(request, rq::withdraw_memory_action).await
    }

    async fn get(&self, request: Request<pb::GetMemoryRequest>) -> Result<Response<pb::MemoryView>, Status> {
        let me = self.b.authenticate(&credentials(&request)).await.map_err(status)?;
        let q = rq::get_memory_query(request.get_ref())?;
        let v = self.b.get_memory(&me, q).await.map_err(status)?;
        Ok(respond(v, |v| pb::MemoryView::from(&v)))
    }
}

#[tonic::async_trait]
impl pb::thread_service_server::ThreadService for Api {
    async fn create(
        &self,
        request: Request<pb::CreateThreadRequest>,
    ) -> Result<Response<pb::CreateThreadResponse>, Status> {
        let me = self.b.authenticate_writer(&credentials(&request)).await.map_err(status)?;
        let (grant, material) = secrets::issue(secrets::GRANT_PREFIX).map_err(status)?;
        let keyed = rq::create_thread_action(request.into_inner(), &material)?;
        let w = self.b.write(&me, keyed).await.map_err(status)?;
        Ok(Response::new(kungfu_api::response::create_thread_response(&w.receipt, w.replayed, &grant)))
    }

    async fn issue_grant(
        &self,
        request: Request<pb::IssueGrantRequest>,
    ) -> Result<Response<pb::IssueGrantResponse>, Status> {
        let me = self.b.authenticate_writer(&credentials(&request)).await.map_err(status)?;
        let (grant, material) = secrets::issue(secrets::GRANT_PREFIX).map_err(status)?;
        let keyed = rq::issue_grant_action(request.into_inner(), &material)?;
        let w = self.b.write(&me, keyed).await.map_err(status)?;
        Ok(Response::new(kungfu_api::response::issue_grant_response(&w.receipt, w.replayed, &grant)))
    }

    async fn void_grant(
        &self,
        request: Request<pb::VoidGrantRequest>,
    ) -> Result<Response<pb::VoidGrantResponse>, Status> {
        self.agent_write(request, rq::void_grant_action).await
    }
    async fn join(&self, request: Request<pb::JoinRequest>) -> Result<Response<pb::JoinResponse>, Status> {
        self.agent_write(request, rq::join_action).await
    }
    async fn leave(&self, request: Request<pb::LeaveRequest>) -> Result<Response<pb::LeaveResponse>, Status> {
        self.agent_write(request, rq::leave_action).await
    }
    async fn remove(
        &self,
        request: Request<pb::RemoveMemberRequest>,
    ) -> Result<Response<pb::RemoveMemberResponse>, Status> {
        self.agent_write(request, rq::remove_member_action).await
    }
    async fn change_role(
        &self,
        request: Request<pb::ChangeRoleRequest>,
    ) -> Result<Response<pb::ChangeRoleResponse>, Status> {
        self.agent_write(request, rq::change_role_action).await
    }
    async fn post(&self, request: Request<pb::PostRequest>) -> Result<Response<pb::PostResponse>, Status> {
        self.agent_write(request, rq::post_action).await
    }
    async fn handle(&self, request: Request<pb::HandleRequest>) -> Result<Response<pb::HandleResponse>, Status> {
        self.agent_write(request, rq::handle_action).await
    }
    async fn retract(&self, request: Request<pb::RetractRequest>) -> Result<Response<pb::RetractResponse>, Status> {
        self.agent_write(request, rq::retract_action).await
    }
    async fn close(
        &self,
        request: Request<pb::CloseThreadRequest>,
    ) -> Result<Response<pb::CloseThreadResponse>, Status> {
        self.agent_write(request, rq::close_thread_action).await
    }

    async fn timeline(&self, request: Request<pb::TimelineRequest>) -> Result<Response<pb::TimelineResponse>, Status> {
        let me = self.b.authenticate(&credentials(&request)).await.map_err(status)?;
        let q = rq::timeline_query(request.get_ref())?;
        let page = self.b.timeline(&me, q).await.map_err(status)?;
        Ok(respond(page, |p| kungfu_api::response::timeline_response(&p.entries, p.full)))
    }

    async fn get_entry(&self, request: Request<pb::GetEntryRequest>) -> Result<Response<pb::EntryView>, Status> {
        let me = self.b.authenticate(&credentials(&request)).await.map_err(status)?;
        let q = rq::get_entry_query(request.get_ref())?;
        let v = self.b.get_entry(&me, q).await.map_err(status)?;
        Ok(respond(v, |v| pb::EntryView::from(&v)))
    }

    async fn get_response(
        &self,
        request: Request<pb::GetResponseRequest>,
    ) -> Result<Response<pb::OwedResponse>, Status> {
        let me = self.b.authenticate(&credentials(&request)).await.map_err(status)?;
        let q = rq::get_response_query(request.get_ref())?;
        let v = self.b.get_response(&me, q).await.map_err(status)?;
        Ok(respond(v, |v| pb::OwedResponse::from(&v)))
    }

    async fn get_referenced_task(
        &self,
        request: Request<pb::GetReferencedTaskRequest>,
    ) -> Result<Response<pb::ReferencedTask>, Status> {
        let me = self.b.authenticate(&credentials(&request)).await.map_err(status)?;
        let q = rq::get_referenced_task_query(request.get_ref())?;
        let v = self.b.get_referenced_task(&me, q).await.map_err(status)?;
        Ok(respond(v, |v| pb::ReferencedTask::from(&v)))
    }
}

#[tonic::async_trait]
impl pb::assignment_service_server::AssignmentService for Api {
    async fn take(
        &self,
        request: Request<pb::TakeAssignmentRequest>,
    ) -> Result<Response<pb::TakeAssignmentResponse>, Status> {
        self.agent_write(request, rq::take_assignment_action).await
    }
    async fn deliver(
        &self,
        request: Request<pb::DeliverAssignmentRequest>,
    ) -> Result<Response<pb::DeliverAssignmentResponse>, Status> {
        self.agent_write(request, rq::deliver_assignment_action).await
    }
    async fn adopt(
        &self,
        request: Request<pb::AdoptAssignmentRequest>,
    ) -> Result<Response<pb::AdoptAssignmentResponse>, Status> {
        self.agent_write(request, rq::adopt_assignment_action).await
    }
    async fn reject(
        &self,
        request: Request<pb::RejectAssignmentRequest>,
    ) -> Result<Response<pb::RejectAssignmentResponse>, Status> {
        self.agent_write(request, rq::reject_assignment_action).await
    }
    async fn drop(
        &self,
        request: Request<pb::DropAssignmentRequest>,
    ) -> Result<Response<pb::DropAssignmentResponse>, Status> {
        self.agent_write(request, rq::drop_assignment_action).await
    }
    async fn void(
        &self,
        request: Request<pb::VoidAssignmentRequest>,
    ) -> Result<Response<pb::VoidAssignmentResponse>, Status> {
        self.agent_write(request, rq::void_assignment_action).await
    }

    async fn get(&self, request: Request<pb::GetAssignmentRequest>) -> Result<Response<pb::Assignment>, Status> {
        let me = self.b.authenticate(&credentials(&request)).await.map_err(status)?;
        let id = rq::get_assignment_query(request.get_ref())?;
        let v = self.b.get_assignment(&me, id).await.map_err(status)?;
        Ok(respond(v, |v| pb::Assignment::from(&v)))
    }
}

#[tonic::async_trait]
impl pb::task_service_server::TaskService for Api {
    async fn create(
        &self,
        request: Request<pb::CreateTaskRequest>,
    ) -> Result<Response<pb::CreateTaskResponse>, Status> {
        self.agent_write(request, rq::create_task_action).await
    }
    async fn revise(
        &self,
        request: Request<pb::ReviseContractRequest>,
    ) -> Result<Response<pb::ReviseContractResponse>, Status> {
        self.agent_write(request, rq::revise_contract_action).await
    }
    async fn pause(&self, request: Request<pb::PauseTaskRequest>) -> Result<Response<pb::PauseTaskResponse>, Status> {
        self.agent_write(request, rq::pause_task_action).await
    }
    async fn resume(
        &self,
        request: Request<pb::ResumeTaskRequest>,
    ) -> Result<Response<pb::ResumeTaskResponse>, Status> {
        self.agent_write(request, rq::resume_task_action).await
    }
    async fn take(&self, request: Request<pb::TakeTaskRequest>) -> Result<Response<pb::TakeTaskResponse>, Status> {
        self.agent_write(request, rq::take_task_action).await
    }
    async fn deliver(
        &self,
        request: Request<pb::DeliverTaskRequest>,
    ) -> Result<Response<pb::DeliverTaskResponse>, Status> {
        self.agent_write(request, rq::deliver_task_action).await
    }
    async fn drop_engagement(
        &self,
        request: Request<pb::DropEngagementRequest>,
    ) -> Result<Response<pb::DropEngagementResponse>, Status> {
        self.agent_write(request, rq::drop_engagement_action).await
    }
    async fn adopt_engagement(
        &self,
        request: Request<pb::AdoptEngagementRequest>,
    ) -> Result<Response<pb::AdoptEngagementResponse>, Status> {
        self.agent_write(request, rq::adopt_engagement_action).await
    }
    async fn reject_engagement(
        &self,
        request: Request<pb::RejectEngagementRequest>,
    ) -> Result<Response<pb::RejectEngagementResponse>, Status> {
        self.agent_write(request, rq::reject_engagement_action).await
    }

    async fn get(&self, request: Request<pb::GetTaskRequest>) -> Result<Response<pb::TaskView>, Status> {
        let me = self.b.authenticate(&credentials(&request)).await.map_err(status)?;
        let q = rq::get_task_query(request.get_ref())?;
        let v = self.b.get_task(&me, q).await.map_err(status)?;
        Ok(respond(v, |v| pb::TaskView::from(&v)))
    }

    async fn get_engagement(
        &self,
        request: Request<pb::GetEngagementRequest>,
    ) -> Result<Response<pb::Engagement>, Status> {
        let me = self.b.authenticate(&credentials(&request)).await.map_err(status)?;
        let id = rq::get_engagement_query(request.get_ref())?;
        let v = self.b.get_engagement(&me, id).await.map_err(status)?;
        Ok(respond(v, |v| pb::Engagement::from(&v)))
    }

    async fn get_engagement_input(
        &self,
        request: Request<pb::GetEngagementInputRequest>,
    ) -> Result<Response<pb::MemoryView>, Status> {
        let me = self.b.authenticate(&credentials(&request)).await.map_err(status)?;
        let q = rq::get_engagement_input_query(request.get_ref())?;
        let v = self.b.get_engagement_input(&me, q).await.map_err(status)?;
        Ok(respond(v, |v| pb::MemoryView::from(&v)))
    }
}

#[tonic::async_trait]
impl pb::turn_service_server::TurnService for Api {
    async fn get_turn(&self, request: Request<pb::GetTurnRequest>) -> Result<Response<pb::TurnPage>, Status> {
        let me = self.b.authenticate(&credentials(&request)).await.map_err(status)?;
        let q = rq::turn_query(request.get_ref())?;
        // The page and the sequence number it is exact at come from one snapshot.
        let turn = self.b.turn(&me, q).await.map_err(status)?;
        Ok(respond(turn, |t| pb::TurnPage {
            as_of_seq: t.as_of_seq,
            wake_failed: t.wake_failed.iter().map(kungfu_api::response::wake_target).collect(),
            ..pb::TurnPage::from(&t.page)
        }))
    }

    async fn get_opportunities(
        &self,
        request: Request<pb::GetOpportunitiesRequest>,
    ) -> Result<Response<pb::OpportunityPage>, Status> {
        let me = self.b.authenticate(&credentials(&request)).await.map_err(status)?;
        let q = rq::opportunities_query(request.get_ref())?;
        let page = self.b.opportunities(&me, q).await.map_err(status)?;
        Ok(respond(page, |v| pb::OpportunityPage::from(&v)))
    }

    async fn get_working_set(
        &self,
        request: Request<pb::GetWorkingSetRequest>,
    ) -> Result<Response<pb::WorkingSet>, Status> {
        let me = self.b.authenticate(&credentials(&request)).await.map_err(status)?;
        let object = rq::working_set_query(request.get_ref())?;
        let ws = self.b.working_set(&me, object).await.map_err(status)?;
        Ok(respond(ws, |v| pb::WorkingSet::from(&v)))
    }
}

/// COORDINATION §7.2: the coordination layer. Its writes are ordinary actions (each a base
/// sequence the core checks and applies atomically), so they take the same path as every other
/// write; its reads are ordinary reads on one snapshot.
#[tonic::async_trait]
impl pb::coord_service_server::CoordService for Api {
    async fn write_labeled(
        &self,
        request: Request<pb::WriteLabeledRequest>,
    ) -> Result<Response<pb::WriteLabeledResponse>, Status> {
        self.agent_write(request, rq::write_labeled_action).await
    }
    async fn widen_scope(
        &self,
        request: Request<pb::WidenScopeRequest>,
    ) -> Result<Response<pb::WidenScopeResponse>, Status> {
        self.agent_write(request, rq::widen_scope_action).await
    }
    async fn send(&self, request: Request<pb::SendRequest>) -> Result<Response<pb::SendResponse>, Status> {
        self.agent_write(request, rq::send_action).await
    }
    async fn scatter(&self, request: Request<pb::ScatterRequest>) -> Result<Response<pb::ScatterResponse>, Status> {
        self.agent_write(request, rq::scatter_action).await
    }

    async fn get_mailbox(&self, request: Request<pb::GetMailboxRequest>) -> Result<Response<pb::Mailbox>, Status> {
        let me = self.b.authenticate(&credentials(&request)).await.map_err(status)?;
        let q = rq::mailbox_query(request.get_ref())?;
        let page = self.b.mailbox(&me, q).await.map_err(status)?;
        Ok(respond(page, |p| pb::Mailbox::from(&p)))
    }

    async fn get_collective(
        &self,
        request: Request<pb::GetCollectiveRequest>,
    ) -> Result<Response<pb::Collective>, Status> {
        let me = self.b.authenticate(&credentials(&request)).await.map_err(status)?;
        let q = rq::collective_query(request.get_ref())?;
        let v = self.b.collective(&me, q).await.map_err(status)?;
        Ok(respond(v, |v| pb::Collective::from(&v)))
    }

    async fn get_barrier(&self, request: Request<pb::GetBarrierRequest>) -> Result<Response<pb::Barrier>, Status> {
        let me = self.b.authenticate(&credentials(&request)).await.map_err(status)?;
        let q = rq::barrier_query(request.get_ref())?;
        let v = self.b.barrier(&me, q).await.map_err(status)?;
        Ok(respond(v, |v| pb::Barrier::from(&v)))
    }
}

/// COORDINATION §5: the shared record. Its writes are ordinary actions (a `Post` of the record's
/// thread with the record's fact), routed to the thread's actor like a post; its reads are ordinary
/// reads on one snapshot.
#[tonic::async_trait]
impl pb::record_service_server::RecordService for Api {
    async fn create(
        &self,
        request: Request<pb::CreateRecordRequest>,
    ) -> Result<Response<pb::CreateRecordResponse>, Status> {
        self.agent_write(request, rq::create_record_action).await
    }
    async fn patch(
        &self,
        request: Request<pb::PatchRecordRequest>,
    ) -> Result<Response<pb::PatchRecordResponse>, Status> {
        self.agent_write(request, rq::patch_record_action).await
    }

    async fn get(&self, request: Request<pb::GetRecordRequest>) -> Result<Response<pb::RecordView>, Status> {
        let me = self.b.authenticate(&credentials(&request)).await.map_err(status)?;
        let q = rq::record_query(request.get_ref())?;
        let v = self.b.record(&me, q).await.map_err(status)?;
        Ok(respond(v, |v| pb::RecordView::from(&v)))
    }

    async fn get_events(
        &self,
        request: Request<pb::GetRecordEventsRequest>,
    ) -> Result<Response<pb::RecordEventPage>, Status> {
        let me = self.b.authenticate(&credentials(&request)).await.map_err(status)?;
        let q = rq::record_events_query(request.get_ref())?;
        let v = self.b.record_events(&me, q).await.map_err(status)?;
        Ok(respond(v, |v| pb::RecordEventPage::from(&v)))
    }

    async fn get_body(
        &self,
        request: Request<pb::GetRecordBodyRequest>,
    ) -> Result<Response<pb::RecordBodyContent>, Status> {
        let me = self.b.authenticate(&credentials(&request)).await.map_err(status)?;
        let q = rq::record_body_query(request.get_ref())?;
        let v = self.b.record_body(&me, q).await.map_err(status)?;
        Ok(respond(v, |v| pb::RecordBodyContent::from(&v)))
    }
}
