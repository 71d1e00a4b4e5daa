//! Requests over `api.max_message_bytes` (L4: every limit is enforced with a stable code and the
//! field named). tonic refuses such a message while decoding it, before any handler runs, with a
//! bare `OUT_OF_RANGE` status that carries none of our error details. This layer, in front of every
//! service, turns exactly that refusal into a `LIMIT_EXCEEDED` rejection naming `request`, with its
//! next step, so a client sees the same error shape as for every other limit. Nothing was applied:
//! the call never reached a handler.
//!
//! The same holds for a request body that does not decode as the method's message: tonic answers
//! it `INTERNAL` with prost's words, as if the server had failed; this layer answers
//! `INVALID_ARGUMENT` naming `request` and the method instead (issue #16), since the fault and its
//! fix are the client's.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use tonic::body::Body;
use tower::{Layer, Service};

/// tonic's message for a request over the decoding limit (tonic 0.14 `codec/decode.rs`).
const TOO_LARGE: &str = "Error, decoded message length too large";

/// The start of prost's message for a body that does not decode (prost 0.14 `DecodeError`), which
/// tonic answers `INTERNAL` (tonic-prost 0.14 `codec.rs`).
const UNDECODABLE: &str = "failed to decode Protobuf message";

/// The layer; one per server.
#[derive(Clone, Debug)]
pub struct OversizeLayer {
    /// The configured `api.max_message_bytes`, named in the message.
    pub max_message_bytes: usize,
}

impl<S> Layer<S> for OversizeLayer {
    type Service = Oversize<S>;
    fn layer(&self, inner: S) -> Oversize<S> {
        Oversize { inner, max: self.max_message_bytes }
    }
}

/// The service the layer wraps around the routes.
#[derive(Clone, Debug)]
pub struct Oversize<S> {
    inner: S,
    max: usize,
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

impl<S> Service<http::Request<Body>> for Oversize<S>
where
    S: Service<http::Request<Body>, Response = http::Response<Body>, Error = Infallible> + Send + 'static,
    S::Future: Send + 'static,
{
    type Response = http::Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<Result<http::Response<Body>, Infallible>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<Body>) -> Self::Future {
        let method = req.uri().path().trim_start_matches('/').to_string();
        let fut = self.inner.call(req);
        let max = self.max;
        Box::pin(async move {
            let resp = fut.await?;
            Ok(explain(resp, max, &method))
        })
    }
}

/// The response, or, when it is tonic's refusal of an oversize or undecodable request, our
/// rejection instead. `method` is the call's `package.Service/Method`.
fn explain(resp: http::Response<Body>, max: usize, method: &str) -> http::Response<Body> {
    let Some(status) = tonic::Status::from_header_map(resp.headers()) else { return resp };
    if status.code() == tonic::Code::Internal && status.message().starts_with(UNDECODABLE) {
        let r = kungfu_types::Rejection::field(
            kungfu_types::Code::InvalidArgument,
            "request",
            format!(
                "the request body is not a valid message of {method} ({}); send the request message this \
                 method takes, encoded as protobuf, e.g. with the SDK or code generated from proto/ (nothing was applied)",
                status.message()
            ),
        );
        return kungfu_api::rejection_status(&r).into_http();
    }
    if status.code() != tonic::Code::OutOfRange || !status.message().starts_with(TOO_LARGE) {
        return resp;
    }
    // L4: a limit is refused with LIMIT_EXCEEDED, naming what was over it.
    let found = status.message().split("found ").nth(1).and_then(|s| s.split(' ').next()).unwrap_or("?");
    let r = kungfu_types::Rejection::field(
        kungfu_types::Code::LimitExceeded,
        "request",
        format!(
            "the message is {found} bytes, over this node's api.max_message_bytes of {max}; send less content per call (nothing was applied)"
        ),
    );
    kungfu_api::rejection_status(&r).into_http()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_oversize_refusal_is_rewritten() {
        let over = tonic::Status::out_of_range(format!("{TOO_LARGE}: found 70000 bytes, the limit is: 65536 bytes"));
        let s = tonic::Status::from_header_map(explain(over.into_http(), 65536, "m").headers()).expect("status");
        let r = kungfu_api::status_rejection(&s).expect("a rejection with details");
        assert_eq!(r.code, kungfu_types::Code::LimitExceeded);
        assert_eq!(r.field.as_deref(), Some("request"));
        assert!(r.message.contains("70000 bytes") && r.message.contains("api.max_message_bytes of 65536"), "{r:?}");

        // Any other status passes unchanged, including another OUT_OF_RANGE.
        let other = tonic::Status::out_of_range("cursor past the end");
        let s = tonic::Status::from_header_map(explain(other.into_http(), 65536, "m").headers()).expect("status");
        assert_eq!((s.code(), s.message()), (tonic::Code::OutOfRange, "cursor past the end"));
        assert!(kungfu_api::status_rejection(&s).is_none());
    }

    #[test]
    fn an_undecodable_body_is_the_callers_invalid_argument_naming_the_method() {
        let bad =
            tonic::Status::internal(format!("{UNDECODABLE}: invalid wire type: LengthDelimited (expected Varint)"));
        let method = "kungfu.v1.ThreadService/Post";
        let s = tonic::Status::from_header_map(explain(bad.into_http(), 65536, method).headers()).expect("status");
        assert_eq!(s.code(), tonic::Code::InvalidArgument);
        let r = kungfu_api::status_rejection(&s).expect("a rejection with details");
        assert_eq!(r.code, kungfu_types::Code::InvalidArgument);
        assert_eq!(r.field.as_deref(), Some("request"));
        assert!(r.message.contains(method) && r.message.contains("invalid wire type"), "{r:?}");

        // Any other INTERNAL passes unchanged.
        let other = tonic::Status::internal("the store failed");
        let s = tonic::Status::from_header_map(explain(other.into_http(), 65536, method).headers()).expect("status");
        assert_eq!((s.code(), s.message()), (tonic::Code::Internal, "the store failed"));
    }
}
