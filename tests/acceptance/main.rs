//! Acceptance tests against DynamoDB Local and moto. One binary, so the engines' clients and the
//! build are shared; each test creates its own resources from `template.yaml`.

mod async_invoke;
mod bad_input;
mod connector_definitions;
mod connector_previews;
mod console;
mod contract;
mod crash_matrix;
mod crash_points;
mod entry_points;
mod hardening;
mod identity_corrections;
mod ingest;
mod input_range;
mod intake;
mod isolation;
mod malformed_reads;
mod mcp;
mod mcp_client;
mod model_test;
mod onboarding;
mod openapi_bodies;
mod ops;
mod projection;
mod projection_lag;
mod projection_races;
mod projection_scale;
mod projection_ties;
mod racing_puts;
mod read_path;
mod request_budget;
mod runs;
mod soak;
mod suppliers;
mod telemetry;
mod template;
