//! The stdio door: one MCP session over standard input and output, for hosts that start a
//! process (`kungfu mcp --profile NAME`). Calls go to the cluster over the door's channel with the
//! profile's key.

use crate::door::Door;
use crate::error::Error;
use rmcp::ServiceExt;

/// Serves one session on stdin/stdout until the host closes it.
pub async fn serve_stdio(door: Door) -> Result<(), Error> {
    let running = door.serve(rmcp::transport::stdio()).await.map_err(|e| Error::Start(e.to_string()))?;
    running.waiting().await.map_err(|e| Error::Stopped(e.to_string()))?;
    Ok(())
}
