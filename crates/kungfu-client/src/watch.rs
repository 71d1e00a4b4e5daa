//! Watch streams (§8: notifications may speed recovery up; recovery never depends on them). A
//! stream is opened on the first endpoint that accepts it (followers forward it to the leader) and
//! has no deadline of its own: it lives until the server ends it or the caller drops it. A stream
//! that ends is reopened by the caller from what it last saw: the last entry's sequence number for
//! a thread, the last rev for a record, the last cursor for a turn — no gap and no duplicate.

use crate::client::Client;
use crate::error::Error;
use kungfu_api::pb;
use kungfu_api::pb::watch_service_client::WatchServiceClient;
use kungfu_types::Code;
use tonic::metadata::MetadataValue;
use tonic::transport::Endpoint;

impl Client {
    /// The entries of `thread` with sequence numbers after `after_entry`: the backlog first, then
    /// new ones as they are applied.
    pub async fn watch_thread(
        &self,
        thread: &str,
        after_entry: u64,
    ) -> Result<tonic::Streaming<pb::ThreadEvent>, Error> {
        let msg = pb::WatchThreadRequest { thread: thread.to_string(), after_entry, page_size: 0 };
        self.open(msg, |mut c, r| async move { c.watch_thread(r).await }).await
    }

    /// The accepted writes of a shared record with a rev after `after_rev`, for `audience`
    /// (unspecified: fleet): the backlog first, then each new rev as it is applied. Resume with the
    /// last event's `rev`.
    pub async fn watch_record(
        &self,
        record: &str,
        after_rev: u32,
        audience: pb::Scope,
    ) -> Result<tonic::Streaming<pb::RecordEventBatch>, Error> {
        let msg =
            pb::WatchRecordRequest { record: record.to_string(), after_rev, audience: audience as i32, page_size: 0 };
        self.open(msg, |mut c, r| async move { c.watch_record(r).await }).await
    }

    /// Changes of this agent's turn, from `cursor` (empty: the whole turn first).
    pub async fn watch_turn(&self, cursor: &str) -> Result<tonic::Streaming<pb::TurnEvent>, Error> {
        let msg = pb::WatchTurnRequest { cursor: cursor.to_string() };
        self.open(msg, |mut c, r| async move { c.watch_turn(r).await }).await
    }

    async fn open<Req, Ev, F, Fut>(&self, msg: Req, rpc: F) -> Result<tonic::Streaming<Ev>, Error>
    where
        Req: Clone,
        F: Fn(WatchServiceClient<tonic::transport::Channel>, tonic::Request<Req>) -> Fut,
        Fut: std::future::Future<Output = Result<tonic::Response<tonic::Streaming<Ev>>, tonic::Status>>,
    {
        let mut last = String::from("no endpoint accepted the stream");
        for addr in self.endpoints() {
            // A channel of its own, without the per-call deadline of the other calls.
            let endpoint = Endpoint::from_shared(format!("http://{addr}"))
                .map_err(|e| Error::InvalidEndpoint { endpoint: addr.clone(), reason: e.to_string() })?
                .connect_timeout(self.options().connect_timeout);
            let channel = match endpoint.connect().await {
                Ok(c) => c,
                Err(e) => {
                    last = format!("{addr}: {e}");
                    continue;
                }
            };
            let mut r = tonic::Request::new(msg.clone());
            if let Some(k) = self.key() {
                let v: MetadataValue<_> =
                    format!("Bearer {k}").parse().map_err(|_| Error::InvalidKey("not a valid header value".into()))?;
                r.metadata_mut().insert("authorization", v);
            }
            match rpc(WatchServiceClient::new(channel), r).await {
                Ok(stream) => return Ok(stream.into_inner()),
                Err(s) => match kungfu_api::status_rejection(&s) {
                    // A definite refusal (not found, unauthenticated, too many streams) is final.
                    Some(r) if r.definite && r.code != Code::NotLeader => return Err(Error::Rejected(r)),
                    _ => last = format!("{addr}: {s}"),
                },
            }
        }
        Err(Error::Transport(last.into()))
    }
}
