//! The one generic gRPC call of the door: a [`DynamicMessage`] sent to a node's public API, by
//! method path, with the caller's bearer credential. The door re-implements no protocol call, so
//! authentication, the `kungfu-api` validating boundary, forwarding from followers, rate limits
//! and codes are exactly gRPC's. The API is an [`Api`]: a channel over the network (`kungfu mcp`
//! over stdio), or, for a door inside a node, the node's own gRPC service stack in the same
//! process ([`Api::in_process`]): the same layers and services, one gRPC call, no socket.

use http::uri::PathAndQuery;
use prost::Message;
use prost_reflect::{DynamicMessage, MessageDescriptor};
use std::convert::Infallible;
use std::time::Duration;
use tonic::body::Body;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::metadata::{Ascii, MetadataValue};
use tonic::transport::Channel;
use tonic::{Request, Status, Streaming};
use tower::util::BoxCloneSyncService;

/// The deadline of one unary call: sent as `grpc-timeout` and enforced here too, so a node that
/// never answers cannot hold a tool call open.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// How much later than the node's deadline the local one fires, so that the node's own answer to
/// an expired call arrives first when the node is there to give one.
const LOCAL_SLACK: Duration = Duration::from_secs(2);

/// The W3C trace context header, read from an MCP request and sent on with its gRPC call.
pub const TRACEPARENT: &str = "traceparent";

/// A bearer credential as gRPC metadata (`authorization: Bearer …`), checked once by the caller.
pub type Bearer = MetadataValue<Ascii>;

/// A node's public API as the door calls it: any gRPC service, boxed so that a channel and a
/// node's in-process stack are one type.
#[derive(Clone)]
pub struct Api(BoxCloneSyncService<http::Request<Body>, http::Response<Body>, Unreachable>);

/// Why a call could not reach the API at all: the channel's transport error (an in-process stack
/// has none). A type of its own rather than a boxed error, so the door's futures stay `Send`.
#[derive(Debug)]
pub struct Unreachable(tower::BoxError);

impl std::fmt::Display for Unreachable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for Unreachable {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&*self.0)
    }
}

impl Api {
    /// The API of a node over the network: a channel to its API address (`kungfu mcp`, tests).
    pub fn network(channel: Channel) -> Api {
        Api(BoxCloneSyncService::new(tower::ServiceExt::map_err(channel, |e| Unreachable(e.into()))))
    }

    /// The API of the node this door runs in: its gRPC service stack, called in this process with
    /// no socket between (the node's HTTP doors). The caller's address travels with each call as a
    /// request extension (`kungfu_api::ClientAddr`), which no network client can set.
    pub fn in_process<S>(stack: S) -> Api
    where
        S: tower::Service<http::Request<Body>, Response = http::Response<Body>, Error = Infallible>
            + Clone
            + Send
            + Sync
            + 'static,
        S::Future: Send + 'static,
    {
        Api(BoxCloneSyncService::new(tower::ServiceExt::map_err(stack, |e: Infallible| match e {})))
    }

    fn grpc(&self) -> tonic::client::Grpc<BoxCloneSyncService<http::Request<Body>, http::Response<Body>, Unreachable>> {
        tonic::client::Grpc::new(self.0.clone())
    }
}

impl std::fmt::Debug for Api {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Api")
    }
}

/// What one call carries of the MCP request it serves: the bearer credential and the address the
/// HTTP client connected from, which a door inside a node hands the node with the call (as
/// `kungfu_api::ClientAddr`), so the node limits registrations per client rather than per door.
/// Its `Debug` shows no secret.
#[derive(Clone, Default)]
pub struct Caller {
    pub bearer: Option<Bearer>,
    pub client: Option<std::net::IpAddr>,
    /// The HTTP request's W3C `traceparent`, passed on as it came so the node's spans continue
    /// the client's trace (issue #18); the door itself makes no span.
    pub traceparent: Option<MetadataValue<Ascii>>,
}

impl std::fmt::Debug for Caller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Secrets: only whether there is one.
        f.debug_struct("Caller")
            .field("bearer", &self.bearer.is_some())
            .field("client", &self.client)
            .field("traceparent", &self.traceparent)
            .finish()
    }
}

/// One unary call of `path`, answering a message of type `output`.
pub async fn unary(
    api: &Api,
    path: PathAndQuery,
    output: MessageDescriptor,
    message: DynamicMessage,
    caller: &Caller,
    timeout: Duration,
) -> Result<DynamicMessage, Status> {
    let mut grpc = api.grpc();
    let request = request(message, caller, timeout);
    let call = async {
        grpc.ready().await.map_err(|e| Status::unavailable(format!("the node cannot be reached: {e}")))?;
        grpc.unary(request, path, DynamicCodec { output }).await
    };
    match tokio::time::timeout(timeout + LOCAL_SLACK, call).await {
        Ok(answer) => answer.map(tonic::Response::into_inner),
        Err(_) => Err(Status::deadline_exceeded("the node did not answer in time")),
    }
}

/// A server-streaming call of `path` (the turn's watch feed), answering messages of type
/// `output`. `timeout` bounds the whole stream on the node's side.
pub async fn server_streaming(
    api: &Api,
    path: PathAndQuery,
    output: MessageDescriptor,
    message: DynamicMessage,
    caller: &Caller,
    timeout: Duration,
) -> Result<Streaming<DynamicMessage>, Status> {
    let mut grpc = api.grpc();
    let request = request(message, caller, timeout);
    let call = async {
        grpc.ready().await.map_err(|e| Status::unavailable(format!("the node cannot be reached: {e}")))?;
        grpc.server_streaming(request, path, DynamicCodec { output }).await
    };
    match tokio::time::timeout(CALL_TIMEOUT, call).await {
        Ok(answer) => answer.map(tonic::Response::into_inner),
        Err(_) => Err(Status::deadline_exceeded("the node did not open the stream in time")),
    }
}

fn request(message: DynamicMessage, caller: &Caller, timeout: Duration) -> Request<DynamicMessage> {
    let mut request = Request::new(message);
    if let Some(b) = &caller.bearer {
        request.metadata_mut().insert("authorization", b.clone());
    }
    if let Some(ip) = caller.client {
        // An extension, not metadata: it stays in this process (a network channel drops it).
        request.extensions_mut().insert(kungfu_api::ClientAddr(ip));
    }
    if let Some(t) = &caller.traceparent {
        request.metadata_mut().insert(TRACEPARENT, t.clone());
    }
    request.set_timeout(timeout);
    request
}

/// Encodes any [`DynamicMessage`] and decodes the method's output type.
#[derive(Debug, Clone)]
struct DynamicCodec {
    output: MessageDescriptor,
}

impl Codec for DynamicCodec {
    type Encode = DynamicMessage;
    type Decode = DynamicMessage;
    type Encoder = DynamicEncoder;
    type Decoder = DynamicDecoder;

    fn encoder(&mut self) -> DynamicEncoder {
        DynamicEncoder
    }

    fn decoder(&mut self) -> DynamicDecoder {
        DynamicDecoder { output: self.output.clone() }
    }
}

#[derive(Debug)]
struct DynamicEncoder;

impl Encoder for DynamicEncoder {
    type Item = DynamicMessage;
    type Error = Status;

    fn encode(&mut self, item: DynamicMessage, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        item.encode(dst).map_err(|e| Status::internal(format!("encoding the request: {e}")))
    }
}

#[derive(Debug)]
struct DynamicDecoder {
    output: MessageDescriptor,
}

impl Decoder for DynamicDecoder {
    type Item = DynamicMessage;
    type Error = Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<DynamicMessage>, Status> {
        DynamicMessage::decode(self.output.clone(), src)
            .map(Some)
            .map_err(|e| Status::internal(format!("decoding the response: {e}")))
    }
}
