//! The public gRPC services. Each call authenticates the caller, converts the request at the one
//! boundary (`kungfu-api`: malformed input is INVALID_ARGUMENT naming the field), and either
//! replicates the action and answers from its receipt, or reads one consistent snapshot. Nothing
//! here decides a protocol rule: the core does, on every replica.

use crate::backend::Backend;
use crate::secrets;
use kungfu_api::pb;
use kungfu_api::request as rq;
use kungfu_api::{SecretMaterial, WriteResponse};
use kungfu_core::{Principal, read};

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

fn secret(prefix: &str) -> Result<(String, SecretMaterial), Status> {
    let s = secrets::generate(prefix).map_err(|e| Status::unavailable(format!("no randomness available: {e}")))?;
    let m = SecretMaterial::of(&s);
    Ok((s, m))
}

impl Api {
    /// A write RPC by an authenticated agent: convert, replicate, answer from the receipt.
    async fn agent_write<Q, R: WriteResponse>(
        &self,
        request: Request<Q>,
        convert: fn(&Q) -> Result<kungfu_api::KeyedAction, kungfu_api::FieldError>,
    ) -> Result<Response<R>, Status> {
        let me = self.b.authenticate_writer(&request).await?;
        let keyed = convert(request.get_ref())?;
        let w = self.b.submit(Principal::Agent(me), keyed).await?;
        Ok(Response::new(R::from_receipt(&w.receipt, w.replayed)))
    }
}

#[tonic::async_trait]
impl pb::agent_service_server::AgentService for Api {
    async fn register(&self, request: Request<pb::RegisterRequest>) -> Result<Response<pb::RegisterResponse>, Status> {
        // Open registration needs no credential; closed registration needs the operator token.
        self.b.check_registration(&request)?;
        let principal = if self.b.config.registration.open {
            Principal::Registrar
        } else {
            self.b.authenticate_operator(&request)?;
            Principal::Operator
        };
        let (key, material) = secret(secrets::AGENT_KEY_PREFIX)?;
        let keyed = rq::register_action(request.get_ref(), &material)?;
        let w = self.b.submit(principal, keyed).await?;
        // L3: the key goes out with the first success only.
        Ok(Response::new(kungfu_api::response::register_response(&w.receipt, w.replayed, &key)))
    }

    async fn deactivate(
        &self,
        request: Request<pb::DeactivateAgentRequest>,
    ) -> Result<Response<pb::DeactivateAgentResponse>, Status> {
        // An agent may deactivate itself; the operator may deactivate anyone (§4: account state is
        // set by the implementation).
        let principal = match self.b.authenticate_writer(&request).await {
            Ok(me) => Principal::Agent(me),
            Err(agent_err) => match self.b.authenticate_operator(&request) {
                Ok(()) => Principal::Operator,
                Err(_) => return Err(agent_err),
            },
        };
        let keyed = rq::deactivate_agent_action(request.get_ref())?;
        let w = self.b.submit(principal, keyed).await?;
        Ok(Response::new(pb::DeactivateAgentResponse::from_receipt(&w.receipt, w.replayed)))
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
        let me = self.b.authenticate(&request).await?;
        let q = rq::get_memory_query(request.get_ref())?;
        let v = self.b.read_with(&request, |s, _, _| read::read_memory(s, me, q.memory, q.version)).await?;
        Ok(v.respond(|v| pb::MemoryView::from(&v)))
    }
}

#[tonic::async_trait]
impl pb::thread_service_server::ThreadService for Api {
    async fn create(
        &self,
        request: Request<pb::CreateThreadRequest>,
    ) -> Result<Response<pb::CreateThreadResponse>, Status> {
        let me = self.b.authenticate_writer(&request).await?;
        let (grant, material) = secret(secrets::GRANT_PREFIX)?;
        let keyed = rq::create_thread_action(request.get_ref(), &material)?;
        let w = self.b.submit(Principal::Agent(me), keyed).await?;
        Ok(Response::new(kungfu_api::response::create_thread_response(&w.receipt, w.replayed, &grant)))
    }

    async fn issue_grant(
        &self,
        request: Request<pb::IssueGrantRequest>,
    ) -> Result<Response<pb::IssueGrantResponse>, Status> {
        let me = self.b.authenticate_writer(&request).await?;
        let (grant, material) = secret(secrets::GRANT_PREFIX)?;
        let keyed = rq::issue_grant_action(request.get_ref(), &material)?;
        let w = self.b.submit(Principal::Agent(me), keyed).await?;
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
        let me = self.b.authenticate(&request).await?;
        let q = rq::timeline_query(request.get_ref())?;
        let page = self
            .b
            .read_with(&request, |s, l, _| {
                let size = l.page_size(q.page_size);
                read::timeline(s, me, q.thread, q.after, q.page_size, l).map(|e| {
                    let full = e.len() == size;
                    (e, full)
                })
            })
            .await?;
        Ok(page.respond(|(entries, full)| kungfu_api::response::timeline_response(&entries, full)))
    }

    async fn get_entry(&self, request: Request<pb::GetEntryRequest>) -> Result<Response<pb::EntryView>, Status> {
        let me = self.b.authenticate(&request).await?;
        let q = rq::get_entry_query(request.get_ref())?;
        let v = self.b.read_with(&request, |s, _, _| read::read_entry(s, me, q.thread, q.entry)).await?;
        Ok(v.respond(|v| pb::EntryView::from(&v)))
    }

    async fn get_response(
        &self,
        request: Request<pb::GetResponseRequest>,
    ) -> Result<Response<pb::OwedResponse>, Status> {
        let me = self.b.authenticate(&request).await?;
        let q = rq::get_response_query(request.get_ref())?;
        let v =
            self.b.read_with(&request, |s, _, _| read::read_response(s, me, q.thread, q.entry, q.responder)).await?;
        Ok(v.respond(|v| pb::OwedResponse::from(&v)))
    }

    async fn get_referenced_task(
        &self,
        request: Request<pb::GetReferencedTaskRequest>,
    ) -> Result<Response<pb::ReferencedTask>, Status> {
        let me = self.b.authenticate(&request).await?;
        let q = rq::get_referenced_task_query(request.get_ref())?;
        let v = self.b.read_with(&request, |s, _, _| read::read_referenced_task(s, me, q.thread, q.entry)).await?;
        Ok(v.respond(|v| pb::ReferencedTask::from(&v)))
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
        let me = self.b.authenticate(&request).await?;
        let id = rq::get_assignment_query(request.get_ref())?;
        let v = self.b.read_with(&request, |s, _, _| read::read_assignment(s, me, id)).await?;
        Ok(v.respond(|v| pb::Assignment::from(&v)))
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
        let me = self.b.authenticate(&request).await?;
        let q = rq::get_task_query(request.get_ref())?;
        let v = self.b.read_with(&request, |s, _, _| read::read_task(s, me, q.task, q.version)).await?;
        Ok(v.respond(|v| pb::TaskView::from(&v)))
    }

    async fn get_engagement(
        &self,
        request: Request<pb::GetEngagementRequest>,
    ) -> Result<Response<pb::Engagement>, Status> {
        let me = self.b.authenticate(&request).await?;
        let id = rq::get_engagement_query(request.get_ref())?;
        let v = self.b.read_with(&request, |s, _, _| read::read_engagement(s, me, id)).await?;
        Ok(v.respond(|v| pb::Engagement::from(&v)))
    }

    async fn get_engagement_input(
        &self,
        request: Request<pb::GetEngagementInputRequest>,
    ) -> Result<Response<pb::MemoryView>, Status> {
        let me = self.b.authenticate(&request).await?;
        let q = rq::get_engagement_input_query(request.get_ref())?;
        let v = self.b.read_with(&request, |s, _, _| read::read_engagement_input(s, me, q.engagement, q.index)).await?;
        Ok(v.respond(|v| pb::MemoryView::from(&v)))
    }
}

#[tonic::async_trait]
impl pb::turn_service_server::TurnService for Api {
    async fn get_turn(&self, request: Request<pb::GetTurnRequest>) -> Result<Response<pb::TurnPage>, Status> {
        let me = self.b.authenticate(&request).await?;
        let q = rq::turn_query(request.get_ref())?;
        // The page and the sequence number it is exact at come from one snapshot.
        let page = self
            .b
            .read_with(&request, |s, l, now| {
                let page = read::turn(s, me, q.cursor.as_ref(), q.page_size, now, l)?;
                let seq = kungfu_core::StateExt::counters(s)?.unwrap_or_default().seq;
                Ok((page, seq))
            })
            .await?;
        Ok(page.respond(|(v, seq)| pb::TurnPage { as_of_seq: seq, ..pb::TurnPage::from(&v) }))
    }

    async fn get_opportunities(
        &self,
        request: Request<pb::GetOpportunitiesRequest>,
    ) -> Result<Response<pb::OpportunityPage>, Status> {
        let me = self.b.authenticate(&request).await?;
        let q = rq::opportunities_query(request.get_ref())?;
        let page =
            self.b.read_with(&request, |s, l, _| read::opportunities(s, me, q.cursor.as_ref(), q.page_size, l)).await?;
        Ok(page.respond(|v| pb::OpportunityPage::from(&v)))
    }

    async fn get_working_set(
        &self,
        request: Request<pb::GetWorkingSetRequest>,
    ) -> Result<Response<pb::WorkingSet>, Status> {
        let me = self.b.authenticate(&request).await?;
        let object = rq::working_set_query(request.get_ref())?;
        let ws = self.b.read_with(&request, |s, l, now| read::working_set(s, me, object, now, l)).await?;
        Ok(ws.respond(|v| pb::WorkingSet::from(&v)))
    }
}
