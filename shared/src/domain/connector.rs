//! Connector configuration: who a feed belongs to and the rules its deliveries are judged by.

use crate::domain::definition::{Definition, Format, Transport};
use crate::domain::fingerprint::CanonicalizationRule;
use crate::domain::ids::{ConnectorId, SourceAccount, TenantId};
use serde::{Deserialize, Serialize};

/// The supplier payload shapes the normalizer understands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PayloadFormat {
    /// `{"export_id", "page", "page_count", "offers": [row...]}` (the `acme-eu` pull export).
    AcmeExportV1,
    /// CloudEvents 1.0 structured JSON with the rows under `data.offers` (the `acme-events` push feed).
    CloudEventsOffersV1,
    /// A CSV file with a header row naming the row fields (`sku,quantity,unit,price,currency,
    /// observed_at[,revision,condition]`), as dropped under `drops/{connector}/`. Fingerprint it
    /// with `bytes-v1`.
    CsvOffersV1,
    /// Read through the connector's definition (docs/connectors.md); the replay record names
    /// the definition version it was read under.
    Defined,
}

impl PayloadFormat {
    /// Path of object keys from the document root to the rows array.
    pub fn rows_path(&self) -> &'static [&'static str] {
        match self {
            Self::AcmeExportV1 => &["offers"],
            Self::CloudEventsOffersV1 => &["data", "offers"],
            Self::CsvOffersV1 | Self::Defined => &[],
        }
    }

    /// The media type of a body in this format (a defined format's: `ConnectorConfig::content_type`).
    pub fn content_type(&self) -> &'static str {
        match self {
            Self::CsvOffersV1 => "text/csv",
            Self::Defined => "application/octet-stream",
            _ => "application/json",
        }
    }
}

/// Whether a committed page of an unfinished run is visible to readers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Publication {
    PerPage,
    OnRunComplete,
}

impl Publication {
    /// The stored and documented name (`per_page`, `on_run_complete`).
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::PerPage => "per_page",
            Self::OnRunComplete => "on_run_complete",
        }
    }

    /// The policy a stored or documented name names, if any.
    pub fn parse(name: &str) -> Option<Self> {
        [Self::PerPage, Self::OnRunComplete]
            .into_iter()
            .find(|p| p.as_str() == name)
    }
}

/// Which source field names a delivery, strongest first; used by the intake functions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IdentityRule {
    /// Export id (or snapshot token) plus page number.
    ExportPage,
    /// CloudEvents `source` + `id`, else the `webhook-id` header, else the documented fallback.
    CloudEventsSourceId,
    /// The Standard Webhooks `webhook-id` header, else the fallback.
    WebhookId,
    /// File drops: file name plus the sha256 of the content (a file too large to read: plus
    /// its object version). The name is older than the content rule;
    /// docs/adr/0026-file-drops-named-by-content.md.
    FileVersion,
    /// A snapshot id at a path in the body (webhooks and drops, by definition): the same
    /// snapshot sent again under a new message id or file name is the same delivery.
    SnapshotId,
    /// Pulls: the cursor the page was asked for.
    Cursor,
    /// Pulls from an API with no export id and no cursor: the documented fallback.
    Fallback,
    /// Drops: the file name alone; changed content under the name is a mismatch.
    FileName,
}

pub const DEFAULT_HORIZON_DAYS: u32 = 30;
/// The shortest dedup horizon a connector may have (`ConnectorConfig::validate`).
pub const MIN_HORIZON_DAYS: u32 = 1;
/// Bodies above this are refused (`payload_too_large`) unless a connector says otherwise.
pub const DEFAULT_MAX_BODY_BYTES: u64 = 5 * 1024 * 1024;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConnectorConfig {
    pub connector: ConnectorId,
    pub tenant: TenantId,
    pub source_account: SourceAccount,
    pub payload_format: PayloadFormat,
    pub identity_rule: IdentityRule,
    pub canonicalization: CanonicalizationRule,
    /// Dedup horizon; it must outlive SQS retention (14 days) and suppliers' retry schedules.
    pub horizon_days: u32,
    pub publication: Publication,
    pub max_body_bytes: u64,
    /// How far a row's `observed_at` may lie after its delivery's `retrieved_at` (supplier clocks
    /// drift); a row observed later than that is a claim from the future: stored, flagged
    /// `future_dated`, never current.
    #[serde(default = "default_clock_skew_seconds")]
    pub clock_skew_seconds: u32,
    /// For a scheduled pull connector: where and how the poller fetches exports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pull: Option<PullSettings>,
    /// The definition version this configuration was made from; absent for a connector
    /// configured before definitions (one of the first release's formats).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<u64>,
    /// The definition itself, stored as its JSON text (`definition_text`).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "definition_text"
    )]
    pub definition: Option<Box<Definition>>,
}

/// A definition travels in the connector's item as one JSON string: its nesting and optional
/// members stay exactly as read, whatever the item encoding does with maps.
mod definition_text {
    use super::Definition;
    use serde::{de::Error, Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(
        definition: &Option<Box<Definition>>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        let text = serde_json::to_string(definition).map_err(serde::ser::Error::custom)?;
        serializer.serialize_str(&text)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<Box<Definition>>, D::Error> {
        let text = String::deserialize(deserializer)?;
        serde_json::from_str(&text).map_err(D::Error::custom)
    }
}

/// How the poller reads a supplier's paginated export (`GET {export_url}?page=N`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PullSettings {
    /// Base URL of the export; the poller asks for `{export_url}?page=N`.
    pub export_url: String,
    /// A reference to the credential (e.g. a secret's name), never the credential itself.
    pub credential_ref: String,
    /// Seconds after the run starts at which the sweeper settles it.
    #[serde(default = "default_run_deadline_seconds")]
    pub run_deadline_seconds: u64,
    /// Timeout of one page request, in milliseconds.
    #[serde(default = "default_page_timeout_ms")]
    pub page_timeout_ms: u64,
    /// Attempts per page before the page is reported as failed.
    #[serde(default = "default_max_attempts")]
    pub max_attempts: u32,
    /// When not empty, the only hosts the export URL and its redirects may name (exact,
    /// case-insensitive). Every address rule of the poller holds as well.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed_hosts: Vec<String>,
}

pub const DEFAULT_RUN_DEADLINE_SECONDS: u64 = 900;
pub const DEFAULT_CLOCK_SKEW_SECONDS: u32 = 300;
/// A larger tolerance would let a claim dated a day ahead pin the current offer.
pub const MAX_CLOCK_SKEW_SECONDS: u32 = 3600;

fn default_clock_skew_seconds() -> u32 {
    DEFAULT_CLOCK_SKEW_SECONDS
}
pub const DEFAULT_PAGE_TIMEOUT_MS: u64 = 5000;
pub const DEFAULT_MAX_ATTEMPTS: u32 = 3;

fn default_run_deadline_seconds() -> u64 {
    DEFAULT_RUN_DEADLINE_SECONDS
}

fn default_page_timeout_ms() -> u64 {
    DEFAULT_PAGE_TIMEOUT_MS
}

fn default_max_attempts() -> u32 {
    DEFAULT_MAX_ATTEMPTS
}

/// A configuration the system refuses to store or ingest under: each variant names the field and
/// why its value cannot keep the invariants.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConnectorConfigError {
    #[error(
        "connector {connector}: horizon_days is {days}; the dedup horizon must be at least \
         {MIN_HORIZON_DAYS} day"
    )]
    HorizonTooShort { connector: String, days: u32 },
    #[error("connector {connector}: max_body_bytes is 0, so every delivery would be refused")]
    NoBodyAllowed { connector: String },
    #[error(
        "connector {connector}: clock_skew_seconds is {seconds}; at most {MAX_CLOCK_SKEW_SECONDS} \
         (a larger tolerance lets claims from the future become current)"
    )]
    ClockSkewTooLarge { connector: String, seconds: u32 },
    #[error(
        "connector {connector}: canonicalization {rule} cannot read {format} bodies \
         (csv-offers-v1 is fingerprinted with bytes-v1)"
    )]
    RuleCannotReadFormat {
        connector: String,
        rule: &'static str,
        format: &'static str,
    },
    #[error("connector {connector}: payload_format defined needs the definition it names")]
    DefinitionMissing { connector: String },
    #[error("connector {connector}: pull.{field} {problem}")]
    Pull {
        connector: String,
        field: &'static str,
        problem: &'static str,
    },
}

impl ConnectorConfig {
    /// The media type of this connector's bodies.
    pub fn content_type(&self) -> &'static str {
        match self.definition.as_deref().map(|d| &d.format) {
            Some(Format::Csv(_)) => "text/csv",
            Some(Format::Json(_)) => "application/json",
            Some(Format::Xml(_)) => "application/xml",
            None => self.payload_format.content_type(),
        }
    }

    /// The transport the connector declares; a first-release connector's follows from its
    /// identity rule.
    pub fn transport_kind(&self) -> &'static str {
        match (
            self.definition.as_deref().map(|d| &d.transport),
            self.identity_rule,
        ) {
            (Some(Transport::Webhook), _) => "webhook",
            (Some(Transport::Drop), _) => "drop",
            (Some(Transport::Pull(_)), _) => "pull",
            (None, IdentityRule::FileVersion) => "drop",
            (None, IdentityRule::ExportPage) => "pull",
            (None, _) => "webhook",
        }
    }

    pub fn horizon_seconds(&self) -> i64 {
        i64::from(self.horizon_days) * 86_400
    }

    /// Refuses a configuration under which deliveries could not be judged safely. Every path
    /// that stores a connector calls it, and ingest calls it again on what it reads (an item
    /// may have been written by hand).
    pub fn validate(&self) -> Result<(), ConnectorConfigError> {
        let connector = || self.connector.to_string();
        if self.horizon_days < MIN_HORIZON_DAYS {
            return Err(ConnectorConfigError::HorizonTooShort {
                connector: connector(),
                days: self.horizon_days,
            });
        }
        if self.max_body_bytes == 0 {
            return Err(ConnectorConfigError::NoBodyAllowed {
                connector: connector(),
            });
        }
        if self.clock_skew_seconds > MAX_CLOCK_SKEW_SECONDS {
            return Err(ConnectorConfigError::ClockSkewTooLarge {
                connector: connector(),
                seconds: self.clock_skew_seconds,
            });
        }
        if self.payload_format == PayloadFormat::CsvOffersV1
            && self.canonicalization != CanonicalizationRule::BytesV1
        {
            return Err(ConnectorConfigError::RuleCannotReadFormat {
                connector: connector(),
                rule: self.canonicalization.as_str(),
                format: "csv-offers-v1",
            });
        }
        if self.payload_format == PayloadFormat::Defined && self.definition.is_none() {
            return Err(ConnectorConfigError::DefinitionMissing {
                connector: connector(),
            });
        }
        if let Some(pull) = &self.pull {
            let problem = pull_problem(pull, self.definition.is_some());
            if let Some((field, problem)) = problem {
                return Err(ConnectorConfigError::Pull {
                    connector: connector(),
                    field,
                    problem,
                });
            }
        }
        Ok(())
    }
}

/// The first pull setting under which the poller could never fetch a page, if any. A defined
/// connector may pull without a credential (its `auth` is `none`).
fn pull_problem(pull: &PullSettings, defined: bool) -> Option<(&'static str, &'static str)> {
    let url = pull.export_url.trim();
    if !(url.starts_with("https://") || url.starts_with("http://")) {
        return Some(("export_url", "must be an http(s) URL"));
    }
    if pull.credential_ref.trim().is_empty() && !defined {
        return Some(("credential_ref", "must name the credential"));
    }
    if pull.max_attempts == 0 {
        return Some(("max_attempts", "must be at least 1"));
    }
    if pull.page_timeout_ms == 0 {
        return Some(("page_timeout_ms", "must be at least 1"));
    }
    if pull.run_deadline_seconds == 0 {
        return Some(("run_deadline_seconds", "must be at least 1"));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_publication_policy_round_trips_its_stored_name() {
        for policy in [Publication::PerPage, Publication::OnRunComplete] {
            let serialized = serde_json::to_value(policy).unwrap();
            assert_eq!(serialized, serde_json::json!(policy.as_str()));
            assert_eq!(Publication::parse(policy.as_str()), Some(policy));
        }
        for other in ["", "PER_PAGE", "per_page ", "on-run-complete", "\u{0}"] {
            assert_eq!(Publication::parse(other), None, "{other:?}");
        }
    }

    fn acme_eu() -> ConnectorConfig {
        ConnectorConfig {
            connector: ConnectorId::parse("acme-eu").unwrap(),
            tenant: TenantId::parse("demo").unwrap(),
            source_account: SourceAccount::parse("ACC-1").unwrap(),
            payload_format: PayloadFormat::AcmeExportV1,
            identity_rule: IdentityRule::ExportPage,
            canonicalization: CanonicalizationRule::JsonV1,
            horizon_days: DEFAULT_HORIZON_DAYS,
            publication: Publication::PerPage,
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            clock_skew_seconds: DEFAULT_CLOCK_SKEW_SECONDS,
            pull: Some(PullSettings {
                export_url: "https://supplier.example/exports/acme-eu".into(),
                credential_ref: "acme-eu/export-token".into(),
                run_deadline_seconds: DEFAULT_RUN_DEADLINE_SECONDS,
                page_timeout_ms: DEFAULT_PAGE_TIMEOUT_MS,
                max_attempts: DEFAULT_MAX_ATTEMPTS,
                allowed_hosts: Vec::new(),
            }),
            version: None,
            definition: None,
        }
    }

    fn refusal(config: &ConnectorConfig) -> String {
        config
            .validate()
            .expect_err("the configuration must be refused")
            .to_string()
    }

    #[test]
    fn the_sample_configuration_is_valid() {
        assert_eq!(acme_eu().validate(), Ok(()));
        let one_day = ConnectorConfig {
            horizon_days: MIN_HORIZON_DAYS,
            ..acme_eu()
        };
        assert_eq!(
            one_day.validate(),
            Ok(()),
            "one day is the shortest horizon"
        );
    }

    #[test]
    fn a_horizon_below_one_day_is_refused() {
        let zero = ConnectorConfig {
            horizon_days: 0,
            ..acme_eu()
        };
        assert_eq!(
            zero.validate(),
            Err(ConnectorConfigError::HorizonTooShort {
                connector: "acme-eu".into(),
                days: 0
            })
        );
        assert!(
            refusal(&zero).contains("horizon_days"),
            "{}",
            refusal(&zero)
        );
    }

    #[test]
    fn a_clock_skew_tolerance_over_an_hour_is_refused() {
        let lax = ConnectorConfig {
            clock_skew_seconds: MAX_CLOCK_SKEW_SECONDS + 1,
            ..acme_eu()
        };
        assert!(
            refusal(&lax).contains("clock_skew_seconds"),
            "{}",
            refusal(&lax)
        );
        let strict = ConnectorConfig {
            clock_skew_seconds: 0,
            ..acme_eu()
        };
        assert_eq!(strict.validate(), Ok(()));
    }

    #[test]
    fn a_size_limit_of_zero_is_refused() {
        let zero = ConnectorConfig {
            max_body_bytes: 0,
            ..acme_eu()
        };
        assert!(
            refusal(&zero).contains("max_body_bytes"),
            "{}",
            refusal(&zero)
        );
    }

    #[test]
    fn a_csv_connector_must_fingerprint_the_bytes() {
        // json-v1 cannot parse a CSV body: every delivery would be refused as invalid_payload.
        for rule in [
            CanonicalizationRule::JsonV1,
            CanonicalizationRule::JsonUnorderedRowsV1,
        ] {
            let csv = ConnectorConfig {
                payload_format: PayloadFormat::CsvOffersV1,
                identity_rule: IdentityRule::FileVersion,
                canonicalization: rule,
                pull: None,
                ..acme_eu()
            };
            assert!(
                refusal(&csv).contains("canonicalization"),
                "{}",
                refusal(&csv)
            );
        }
        let csv = ConnectorConfig {
            payload_format: PayloadFormat::CsvOffersV1,
            identity_rule: IdentityRule::FileVersion,
            canonicalization: CanonicalizationRule::BytesV1,
            pull: None,
            ..acme_eu()
        };
        assert_eq!(csv.validate(), Ok(()));
    }

    #[test]
    fn pull_settings_that_could_never_fetch_a_page_are_refused() {
        type Edit = fn(&mut PullSettings);
        let cases: [(&str, Edit); 6] = [
            ("max_attempts", |p| p.max_attempts = 0),
            ("page_timeout_ms", |p| p.page_timeout_ms = 0),
            ("run_deadline_seconds", |p| p.run_deadline_seconds = 0),
            ("export_url", |p| p.export_url = String::new()),
            ("export_url", |p| {
                p.export_url = "ftp://supplier.example/x".into()
            }),
            ("credential_ref", |p| p.credential_ref = " ".into()),
        ];
        for (field, edit) in cases {
            let mut config = acme_eu();
            if let Some(pull) = config.pull.as_mut() {
                edit(pull);
            }
            let message = refusal(&config);
            assert!(message.contains(field), "{field}: {message}");
        }
    }

    #[test]
    fn a_stored_configuration_still_decodes_when_invalid_so_ingest_can_refuse_it_loudly() {
        // Decoding never validates: readers that do not use the horizon (projector, ops) keep
        // working, and ingest names the problem instead of failing to decode.
        let mut value = serde_json::to_value(acme_eu()).unwrap();
        value["horizon_days"] = serde_json::json!(0);
        let decoded: ConnectorConfig = serde_json::from_value(value).unwrap();
        assert!(decoded.validate().is_err());
    }
}
