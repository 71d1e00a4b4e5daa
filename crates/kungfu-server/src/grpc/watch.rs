//! The watch streams on gRPC (`kungfu.v1.WatchService`, `proto/kungfu/v1/watch.proto`) over the
//! service layer's [`Watches`]: authenticate, convert the request, open the stream, and relay its
//! domain events as messages (`kungfu_api::watch`: a large turn change in several), ending with
//! the status of its refusal when it ends with one.

use super::{credentials, status};
use crate::watch::{Events, Watches};
use kungfu_api::pb;
use kungfu_api::watch as wire;
use std::pin::Pin;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};

type EventStream<T> = Pin<Box<dyn tokio_stream::Stream<Item = Result<T, Status>> + Send>>;

/// The watch service of one node.
#[derive(Clone, Debug)]
pub struct WatchApi {
    w: Watches,
}

/// The watch service with the API's message size bounds.
pub fn service(w: Watches, max_message_bytes: usize) -> pb::watch_service_server::WatchServiceServer<WatchApi> {
    pb::watch_service_server::WatchServiceServer::new(WatchApi { w })
        .max_decoding_message_size(max_message_bytes)
        .max_encoding_message_size(max_message_bytes)
}

/// The stream of messages of a watch: each domain event becomes one message or more (`to_wire`),
/// and a final refusal its status.
fn stream<T: Send + 'static, M: Send + 'static>(events: Events<T>, to_wire: fn(T) -> Vec<M>) -> EventStream<M> {
    Box::pin(futures::StreamExt::flat_map(ReceiverStream::new(events), move |event| {
        let messages: Vec<Result<M, Status>> = match event {
            Ok(e) => to_wire(e).into_iter().map(Ok).collect(),
            Err(refusal) => vec![Err(status(refusal))],
        };
        futures::stream::iter(messages)
    }))
}

fn turn_messages(change: kungfu_core::watch::TurnChange) -> Vec<pb::TurnEvent> {
    wire::turn_events(change, wire::TURN_EVENT_ITEMS)
}

fn thread_messages(batch: kungfu_core::watch::ThreadBatch) -> Vec<pb::ThreadEvent> {
    vec![wire::thread_event(&batch)]
}

fn record_messages(batch: kungfu_core::watch::RecordBatch) -> Vec<pb::RecordEventBatch> {
    vec![wire::record_event_batch(&batch)]
}

#[tonic::async_trait]
impl pb::watch_service_server::WatchService for WatchApi {
    type WatchTurnStream = EventStream<pb::TurnEvent>;

    async fn watch_turn(
        &self,
        request: Request<pb::WatchTurnRequest>,
    ) -> Result<Response<Self::WatchTurnStream>, Status> {
        let me = self.w.backend().authenticate(&credentials(&request)).await.map_err(status)?;
        let resume = wire::watch_turn_query(request.get_ref())?;
        let events = self.w.watch_turn(&me, resume).await.map_err(status)?;
        Ok(Response::new(stream(events, turn_messages)))
    }

    type WatchThreadStream = EventStream<pb::ThreadEvent>;

    async fn watch_thread(
        &self,
        request: Request<pb::WatchThreadRequest>,
    ) -> Result<Response<Self::WatchThreadStream>, Status> {
        let me = self.w.backend().authenticate(&credentials(&request)).await.map_err(status)?;
        let q = wire::watch_thread_query(request.get_ref())?;
        let events = self.w.watch_thread(&me, q).await.map_err(status)?;
        Ok(Response::new(stream(events, thread_messages)))
    }

    type WatchRecordStream = EventStream<pb::RecordEventBatch>;

    async fn watch_record(
        &self,
        request: Request<pb::WatchRecordRequest>,
    ) -> Result<Response<Self::WatchRecordStream>, Status> {
        let me = self.w.backend().authenticate(&credentials(&request)).await.map_err(status)?;
        let q = kungfu_api::request::watch_record_query(request.get_ref())?;
        let events = self.w.watch_record(&me, q).await.map_err(status)?;
        Ok(Response::new(stream(events, record_messages)))
    }
}
