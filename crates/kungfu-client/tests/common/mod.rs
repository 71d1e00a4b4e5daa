//! What the SDK's tests against a real `kungfud` share: a one-node cluster and a client of it, and
//! a registration that waits (bounded) until the node has elected itself and serves.

use kungfu_client::{Client, ClientOptions, Registered};
use kungfu_system_tests::{BOUND, Cluster};
use std::time::{Duration, Instant};

/// A client of a fresh one-node cluster.
pub async fn node() -> (Cluster, Client) {
    let cluster = Cluster::start(1, "");
    let client = Client::connect(vec![cluster.nodes[&1].api.to_string()], None, ClientOptions::default())
        .await
        .expect("valid endpoint");
    (cluster, client)
}

/// Registers an agent, waiting (bounded) until the node has elected itself and serves.
pub async fn register(cluster: &Cluster, client: &Client) -> Registered {
    let start = Instant::now();
    loop {
        match client.register(None).await {
            Ok(r) => return r,
            Err(e) => {
                assert!(start.elapsed() < BOUND, "the node never served: {e}\n{}", cluster.logs());
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}
