//! OpenTelemetry export (issue #18, docs/operations.md "Telemetry"): when `[telemetry]
//! otlp_endpoint` is set, the node's spans (`grpc.request`, `grpc.forward`, `action`,
//! `raft.propose`, `raft.append_entries`, `raft.append`, `raft.apply`) go to an OTLP/gRPC
//! collector in batches, and the trace context travels across the doors, forwarding and the raft
//! RPCs (`kungfu_raft::trace`).
//!
//! Off (the default), nothing here runs: no exporter, no layer, and the spans, which are at DEBUG,
//! stay disabled at the default log level. On, the spans are enabled for the OpenTelemetry layer
//! alone (a per-layer filter), so the log lines do not change.

use crate::config::TelemetrySettings;
use opentelemetry::KeyValue;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::WithExportConfig;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{Sampler, SdkTracerProvider};
use std::time::Duration;
use tracing_subscriber::Layer;

/// How long one export may take before it is given up (the collector is down or slow).
const EXPORT_TIMEOUT: Duration = Duration::from_secs(5);

/// A running exporter. [`Telemetry::shutdown`] flushes what is still batched; call it before the
/// runtime it was started in stops.
#[derive(Debug)]
pub struct Telemetry {
    provider: SdkTracerProvider,
}

impl Telemetry {
    /// Starts exporting to `settings.otlp_endpoint` (None: returns None). Call inside the tokio
    /// runtime the node runs on: the gRPC client lives there.
    pub fn start(settings: &TelemetrySettings, node_id: u64, cluster_id: &str) -> anyhow::Result<Option<Telemetry>> {
        let Some(endpoint) = &settings.otlp_endpoint else { return Ok(None) };
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_tonic()
            .with_endpoint(endpoint.clone())
            .with_timeout(EXPORT_TIMEOUT)
            .build()
            .map_err(|e| crate::config::ConfigError {
                setting: "telemetry.otlp_endpoint".into(),
                message: format!("{endpoint}: {e}"),
            })?;
        // Nodes are told apart by `service.instance.id` (the node id); every node of a cluster has
        // the same `service.name`.
        let resource = Resource::builder()
            .with_service_name(settings.service_name.clone())
            .with_attributes([
                KeyValue::new("service.instance.id", node_id.to_string()),
                KeyValue::new("kungfu.node_id", node_id as i64),
                KeyValue::new("kungfu.cluster_id", cluster_id.to_string()),
            ])
            .build();
        // A trace that arrives sampled (or not) stays so; traces started here keep the ratio.
        let sampler = Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(settings.sample_ratio)));
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(resource)
            .with_sampler(sampler)
            .build();
        kungfu_raft::trace::enable();
        Ok(Some(Telemetry { provider }))
    }

    /// The layer that turns this node's spans into OpenTelemetry spans: the node's own spans (at
    /// any level down to DEBUG) and its events at INFO and above, nothing of its libraries.
    pub fn layer<S>(&self) -> impl Layer<S> + Send + Sync + 'static
    where
        S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a> + Send + Sync,
    {
        let tracer = self.provider.tracer("kungfud");
        tracing_opentelemetry::layer().with_tracer(tracer).with_filter(tracing_subscriber::filter::filter_fn(|meta| {
            meta.target().starts_with("kungfu")
                && *meta.level() <= tracing::Level::DEBUG
                && (meta.is_span() || *meta.level() <= tracing::Level::INFO)
        }))
    }

    /// Exports what is still batched and stops the exporter (on SIGTERM, after the node stopped).
    pub fn shutdown(self) {
        if let Err(e) = self.provider.shutdown_with_timeout(EXPORT_TIMEOUT * 2) {
            tracing::warn!(error = %e, "telemetry: the last spans could not be exported");
        }
    }
}
