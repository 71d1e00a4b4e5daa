//! [`BoundedSessions`]: rmcp's in-memory session manager with a bound on how many 2025-11-25
//! sessions are open at once. rmcp's own has none, so a host (or anyone who can reach the port)
//! that opens sessions in a loop would grow memory until each one idles out; past the bound a new
//! `initialize` is refused (rmcp answers it with HTTP 500) until sessions close or expire.

use futures::Stream;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_server::session::local::{LocalSessionManager, LocalSessionManagerError};
use rmcp::transport::streamable_http_server::session::{
    EventStore, RestoreOutcome, ServerSseMessage, SessionId, SessionManager,
};
use std::sync::Arc;

/// The most sessions open at once on one node.
pub const MAX_SESSIONS: usize = 1024;

/// [`LocalSessionManager`] with at most `max` sessions.
#[derive(Debug)]
pub struct BoundedSessions {
    inner: LocalSessionManager,
    max: usize,
}

impl BoundedSessions {
    pub fn new(inner: LocalSessionManager, max: usize) -> BoundedSessions {
        BoundedSessions { inner, max }
    }
}

/// A session manager's refusal.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error("{0} MCP sessions are open, the most this node keeps; close one or wait for one to idle out")]
    Full(usize),
    #[error(transparent)]
    Local(#[from] LocalSessionManagerError),
}

impl SessionManager for BoundedSessions {
    type Error = SessionError;
    type Transport = <LocalSessionManager as SessionManager>::Transport;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), SessionError> {
        // Checked before creating, so two racing creations may overshoot by one each: the bound is
        // on memory, not an exact count.
        if self.inner.sessions.read().await.len() >= self.max {
            return Err(SessionError::Full(self.max));
        }
        Ok(self.inner.create_session().await?)
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, SessionError> {
        Ok(self.inner.initialize_session(id, message).await?)
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, SessionError> {
        Ok(self.inner.has_session(id).await?)
    }

    async fn close_session(&self, id: &SessionId) -> Result<(), SessionError> {
        Ok(self.inner.close_session(id).await?)
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, SessionError> {
        Ok(self.inner.create_stream(id, message).await?)
    }

    async fn accept_message(&self, id: &SessionId, message: ClientJsonRpcMessage) -> Result<(), SessionError> {
        Ok(self.inner.accept_message(id, message).await?)
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, SessionError> {
        Ok(self.inner.create_standalone_stream(id).await?)
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, SessionError> {
        Ok(self.inner.resume(id, last_event_id).await?)
    }

    async fn restore_session(&self, id: SessionId) -> Result<RestoreOutcome<Self::Transport>, SessionError> {
        Ok(self.inner.restore_session(id).await?)
    }

    fn event_store(&self) -> Option<Arc<dyn EventStore>> {
        self.inner.event_store()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_session_past_the_bound_is_refused_until_one_closes() {
        let sessions = BoundedSessions::new(LocalSessionManager::default(), 2);
        let (first, _t1) = sessions.create_session().await.expect("first");
        let (_second, _t2) = sessions.create_session().await.expect("second");
        assert!(matches!(sessions.create_session().await, Err(SessionError::Full(2))));
        sessions.close_session(&first).await.expect("close");
        assert!(sessions.create_session().await.is_ok(), "room again");
    }
}
