//! The local stack on free ports over a test's resources, its sample connectors seeded.

use crate::{engine_endpoints, TestEnv};
use feedsafe::aws::AwsClients;

/// The local stack on free ports over this test's resources, with the sample connectors seeded
/// and a 1-second visibility timeout so that redelivery takes seconds.
pub async fn spawn_stack(
    env: &TestEnv,
    tokens_file: Option<std::path::PathBuf>,
) -> local_stack::Stack {
    spawn_stack_with(env, |options| {
        if let Some(file) = tokens_file {
            options.tokens_file = file;
        }
    })
    .await
}

/// The stack's sample connector `id` (`acme-eu`, `beta-eu`, ...), as seeded.
pub fn sample_connector(
    stack: &local_stack::Stack,
    id: &str,
) -> feedsafe::domain::connector::ConnectorConfig {
    local_stack::sample_connectors(&stack.supplier)
        .unwrap()
        .into_iter()
        .find(|c| c.connector.as_str() == id)
        .unwrap_or_else(|| panic!("no sample connector {id}"))
}

/// The local sample tokens (`infra/local/tokens.json`): a reader and an operator of `demo`.
pub const LOCAL_READER: &str = "local-reader-demo-token";
pub const LOCAL_OPERATOR: &str = "local-operator-demo-token";

/// `spawn_stack` whose tokens are the local reader and operator of `demo` and
/// `other_operator`, an operator (and reader) of the tenant `other`: for tenant isolation.
pub async fn spawn_stack_with_other_tenant(
    env: &TestEnv,
    other_operator: &str,
) -> local_stack::Stack {
    let tokens = std::env::temp_dir().join(format!(
        "feedsafe-tokens-{}-{}.json",
        std::process::id(),
        env.table
    ));
    std::fs::write(
        &tokens,
        serde_json::json!({"tokens": {
            LOCAL_READER: {"tenant": "demo", "scopes": ["offers:read"]},
            LOCAL_OPERATOR: {"tenant": "demo", "scopes": ["offers:read", "ops:write"]},
            other_operator: {"tenant": "other", "scopes": ["offers:read", "ops:write"]},
        }})
        .to_string(),
    )
    .expect("the test's tokens file is written");
    spawn_stack(env, Some(tokens)).await
}

/// `spawn_stack` with the options changed by `adjust` first.
pub async fn spawn_stack_with(
    env: &TestEnv,
    adjust: impl FnOnce(&mut local_stack::StackOptions),
) -> local_stack::Stack {
    let (dynamodb, _) = engine_endpoints();
    let mut options = local_stack::StackOptions {
        port: 0,
        supplier_port: 0,
        pull_every: None,
        sweep_every: std::time::Duration::from_secs(3600),
        visibility_override: Some(1),
        ..local_stack::StackOptions::default()
    };
    adjust(&mut options);
    let stack = local_stack::start_stack(
        env.clients.clone(),
        &dynamodb,
        env.resources.clone(),
        options,
    )
    .await
    .expect("stack starts");
    for connector in local_stack::sample_connectors(&stack.supplier).unwrap() {
        env.seed(&connector).await;
    }
    stack
}

/// The local stack on `clients` (e.g. wrapped by a `FaultInjector`), its connectors seeded;
/// a received message not acknowledged within `visibility` seconds is received again.
pub async fn spawn_stack_on(
    env: &TestEnv,
    clients: AwsClients,
    visibility: i32,
) -> local_stack::Stack {
    let (dynamodb, _) = engine_endpoints();
    let defaults = local_stack::StackOptions::default();
    let options = local_stack::StackOptions {
        port: 0,
        supplier_port: 0,
        pull_every: None,
        sweep_every: std::time::Duration::from_secs(3600),
        visibility_override: Some(visibility),
        ..defaults
    };
    let stack = local_stack::start_stack(clients, &dynamodb, env.resources.clone(), options)
        .await
        .expect("stack starts");
    for connector in local_stack::sample_connectors(&stack.supplier).unwrap() {
        env.seed(&connector).await;
    }
    stack
}
