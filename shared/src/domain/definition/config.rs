//! A definition becomes the configuration ingest and intake judge deliveries by: the tenant
//! from the operator's token, the version from the store, everything else from the document.

use super::{Auth, Definition, Identity, Problem, Transport};
use crate::domain::connector::{ConnectorConfig, IdentityRule, PayloadFormat, PullSettings};
use crate::domain::connector::{
    DEFAULT_MAX_ATTEMPTS, DEFAULT_PAGE_TIMEOUT_MS, DEFAULT_RUN_DEADLINE_SECONDS,
};
use crate::domain::ids::{ConnectorId, SourceAccount, TenantId};

impl Definition {
    /// The configuration of version `version` of this definition, owned by `tenant`. The
    /// connector id and source account are checked as the envelope checks them.
    pub fn to_config(
        &self,
        tenant: TenantId,
        version: u64,
    ) -> Result<ConnectorConfig, Vec<Problem>> {
        let mut problems = Vec::new();
        let connector = ConnectorId::parse(&self.connector)
            .map_err(|e| problems.push(Problem::new("/connector", e.to_string())))
            .ok();
        let account = SourceAccount::parse(&self.source_account)
            .map_err(|e| problems.push(Problem::new("/source_account", e.to_string())))
            .ok();
        let (Some(connector), Some(source_account)) = (connector, account) else {
            return Err(problems);
        };
        let config = ConnectorConfig {
            connector,
            tenant,
            source_account,
            payload_format: PayloadFormat::Defined,
            identity_rule: self.identity.rule(),
            canonicalization: self.canonicalization(),
            horizon_days: self.horizon_days,
            publication: self.publication,
            max_body_bytes: self.max_body_bytes,
            clock_skew_seconds: self.clock_skew_seconds,
            pull: self.pull_settings(),
            version: Some(version),
            definition: Some(Box::new(self.clone())),
        };
        config
            .validate()
            .map_err(|e| vec![Problem::new("", e.to_string())])?;
        Ok(config)
    }

    /// What the poller needs of a pull transport.
    fn pull_settings(&self) -> Option<PullSettings> {
        let Transport::Pull(pull) = &self.transport else {
            return None;
        };
        let credential_ref = match &pull.auth {
            Auth::None => String::new(),
            Auth::Bearer { secret_ref }
            | Auth::ApiKeyHeader { secret_ref, .. }
            | Auth::Basic { secret_ref } => secret_ref.clone(),
        };
        Some(PullSettings {
            export_url: pull.url.clone(),
            credential_ref,
            run_deadline_seconds: pull
                .run_deadline_seconds
                .unwrap_or(DEFAULT_RUN_DEADLINE_SECONDS),
            page_timeout_ms: pull.page_timeout_ms.unwrap_or(DEFAULT_PAGE_TIMEOUT_MS),
            max_attempts: pull.max_attempts.unwrap_or(DEFAULT_MAX_ATTEMPTS),
            allowed_hosts: pull.allowed_hosts.clone(),
        })
    }
}

impl Identity {
    /// For a `body` identity: the snapshot id at its path in a JSON `body` (a string, or a
    /// number as written); `None` when the body is not JSON or holds none there.
    pub fn snapshot_in(&self, body: &[u8]) -> Option<String> {
        let Identity::Body { path } = self else {
            return None;
        };
        let root = crate::domain::canonical_json::parse_node(body).ok()?;
        let path = crate::domain::mapping::json_path::JsonPath::parse(path).ok()?;
        match path.select(&root)? {
            crate::domain::canonical_json::Node::String(text) if !text.is_empty() => {
                Some(text.to_string())
            }
            crate::domain::canonical_json::Node::Number(text) => Some(text.to_string()),
            _ => None,
        }
    }

    /// The intake rule this identity asks for.
    pub fn rule(&self) -> IdentityRule {
        match self {
            Identity::WebhookId => IdentityRule::WebhookId,
            Identity::Cloudevents => IdentityRule::CloudEventsSourceId,
            Identity::Body { .. } => IdentityRule::SnapshotId,
            Identity::ExportPage { .. } => IdentityRule::ExportPage,
            Identity::Cursor => IdentityRule::Cursor,
            Identity::Fallback => IdentityRule::Fallback,
            Identity::FileName => IdentityRule::FileName,
            Identity::FileNameAndContent => IdentityRule::FileVersion,
        }
    }
}
