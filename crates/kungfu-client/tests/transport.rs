//! What the SDK says when a call reaches no Kungfu API: nothing listening at the address (fast,
//! after a bounded few retries), an address that takes the connection and never answers, and a
//! gRPC server without the Kungfu services (what a node's raft port is). No node is started; every
//! address is a port the system chose.

use kungfu_client::{Client, ClientOptions, Error, RetryHook, Retrying, TransportKind, pb};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// An address where nothing listens: a port the system gave, then closed.
fn refused_addr() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr").to_string();
    drop(listener);
    addr
}

/// Options that record every retry the SDK reports.
fn recording(options: ClientOptions) -> (ClientOptions, Arc<Mutex<Vec<Retrying>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = seen.clone();
    let hook = RetryHook::new(move |r| sink.lock().expect("lock").push(r.clone()));
    (ClientOptions { on_retry: Some(hook), ..options }, seen)
}

fn transport(result: Result<impl std::fmt::Debug, Error>) -> kungfu_client::Transport {
    match result {
        Err(Error::Transport(t)) => t,
        other => panic!("expected a transport error, got {other:?}"),
    }
}

#[tokio::test]
async fn a_refused_endpoint_fails_after_a_few_quick_retries_naming_the_address() {
    let addr = refused_addr();
    let (options, seen) = recording(ClientOptions::default());
    let client = Client::connect(vec![addr.clone()], None, options).await.expect("valid endpoint");
    let t = transport(client.cluster_status(pb::ClusterStatusRequest {}).await);
    assert_eq!(t.kind, TransportKind::NothingListening);
    assert_eq!(
        t.message,
        format!("nothing listening at {addr} (connection refused): is kungfud running there? check the endpoint")
    );
    // The default budget of failed connections (2 more rounds), not the 12 retries (~15 s) a node
    // that answers gets.
    assert_eq!(client.retries(), 2);
    let seen = seen.lock().expect("lock");
    assert_eq!(seen.iter().map(|r| r.attempt).collect::<Vec<_>>(), [2, 3]);
    assert!(seen.iter().all(|r| r.cause == kungfu_client::RetryCause::Transport(TransportKind::NothingListening)));
}

#[tokio::test]
async fn a_write_to_a_refused_endpoint_is_definite_not_indeterminate() {
    let addr = refused_addr();
    let client = Client::connect(vec![addr.clone()], None, ClientOptions::default()).await.expect("valid endpoint");
    // Nothing was ever sent, so there is no outcome to learn with the idempotency key.
    let t = transport(client.register(Some("reg-refused".into())).await);
    assert_eq!(t.kind, TransportKind::NothingListening);
    assert!(t.message.contains(&addr), "{}", t.message);
}

#[tokio::test]
async fn refused_endpoints_are_tried_in_one_round_without_waiting_then_each_is_named() {
    let addrs = [refused_addr(), refused_addr(), refused_addr()];
    let (options, seen) = recording(ClientOptions { connect_retries: 1, ..ClientOptions::default() });
    let client = Client::connect(addrs.to_vec(), None, options).await.expect("valid endpoints");
    let t = transport(client.cluster_status(pb::ClusterStatusRequest {}).await);
    assert_eq!(t.kind, TransportKind::NothingListening);
    assert!(t.message.starts_with("no endpoint reachable: "), "{}", t.message);
    for a in &addrs {
        assert!(t.message.contains(&format!("nothing listening at {a} ")), "{a} not named: {}", t.message);
    }
    // Two rounds of three: the next endpoint of a round is asked at once, a new round after the
    // backoff.
    let waits: Vec<Duration> = seen.lock().expect("lock").iter().map(|r| r.wait).collect();
    let initial = ClientOptions::default().backoff.initial;
    assert_eq!(waits, [Duration::ZERO, Duration::ZERO, initial, Duration::ZERO, Duration::ZERO]);
}

#[tokio::test]
async fn an_address_that_never_answers_is_named_with_the_timeout() {
    // Takes every connection and never says a word.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr").to_string();
    let held = tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            open.push(socket);
        }
    });
    let options =
        ClientOptions { call_timeout: Duration::from_millis(300), max_retries: 1, ..ClientOptions::default() };
    let client = Client::connect(vec![addr.clone()], None, options).await.expect("valid endpoint");
    let t = transport(client.cluster_status(pb::ClusterStatusRequest {}).await);
    assert_eq!(t.kind, TransportKind::NoAnswer);
    assert_eq!(t.message, format!("{addr} did not answer within 0.3 s"));
    // A write may have arrived: its outcome is unknown, and the key to learn it is returned.
    match client.register(Some("reg-silent".into())).await {
        Err(Error::Indeterminate { key, last }) => {
            assert_eq!(key, "reg-silent");
            assert!(last.contains(&format!("{addr} did not answer within 0.3 s")), "{last}");
        }
        other => panic!("expected an indeterminate write, got {other:?}"),
    }
    held.abort();
}

#[tokio::test]
async fn a_grpc_server_without_the_kungfu_api_is_called_out_as_a_raft_port() {
    // What a node's raft port is to the SDK: gRPC, with none of the Kungfu services.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr").to_string();
    let server = tokio::spawn(
        tonic::transport::Server::builder()
            .add_routes(tonic::service::Routes::default())
            .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener)),
    );
    let client = Client::connect(vec![addr.clone()], None, ClientOptions::default()).await.expect("valid endpoint");
    let t = transport(client.cluster_status(pb::ClusterStatusRequest {}).await);
    assert_eq!(t.kind, TransportKind::NotKungfuApi);
    assert_eq!(
        t.message,
        format!(
            "{addr} answers gRPC but not the Kungfu API: is it a raft port? point the client at the node's \
             api_listen address"
        )
    );
    assert_eq!(client.retries(), 2, "a definite answer gets the short budget of unreached endpoints");
    server.abort();
}
