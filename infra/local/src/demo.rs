//! The essay's scenario, driven through the real HTTP and queue paths of a running local stack
//! (`local-stack up`), one readable table per step.

use anyhow::{anyhow, bail, Context, Result};
use local_stack::fake_supplier::FakeSupplierHandle;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

const READER: &str = "local-reader-demo-token";
const OPERATOR: &str = "local-operator-demo-token";

fn offer(sku: &str, quantity: u64, price: &str, at: &str) -> Value {
    json!({"sku": sku, "quantity": quantity, "unit": "each", "price": price, "currency": "EUR", "observed_at": at})
}

fn export_8821(page2_quantity: u64) -> Vec<Vec<Value>> {
    vec![
        vec![offer("BX-100", 10, "12.50", "2026-11-29T08:00:00Z")],
        vec![offer(
            "AX-440-R2",
            page2_quantity,
            "820.00",
            "2026-11-29T08:00:00Z",
        )],
        vec![offer("CX-7", 1, "99.00", "2026-11-29T08:00:00Z")],
    ]
}

/// The export the stack starts with.
pub fn seed_first_export(supplier: &FakeSupplierHandle) {
    supplier.set_export("acme-eu", "EXP-8821", export_8821(6));
}

struct Client {
    agent: ureq::Agent,
    api: String,
    supplier: String,
}

impl Client {
    fn call(
        &self,
        method: &str,
        url: &str,
        token: Option<&str>,
        body: Option<&Value>,
    ) -> Result<(u16, Value)> {
        let mut response = match (method, body) {
            ("GET", _) => {
                let mut request = self.agent.get(url);
                if let Some(t) = token {
                    request = request.header("Authorization", &format!("Bearer {t}"));
                }
                request.call()
            }
            (_, body) => {
                let mut request = self
                    .agent
                    .post(url)
                    .header("content-type", "application/json");
                if let Some(t) = token {
                    request = request.header("Authorization", &format!("Bearer {t}"));
                }
                request.send(body.map(Value::to_string).unwrap_or_default())
            }
        }
        .with_context(|| {
            format!("{method} {url}: is the local stack running (`infra/local.sh`)?")
        })?;
        let status = response.status().as_u16();
        let text = response.body_mut().read_to_string().unwrap_or_default();
        Ok((
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        ))
    }

    /// Starts a pull run (202: the run is named, the pull runs asynchronously).
    fn start_pull(&self) -> Result<Value> {
        let (status, body) = self.call(
            "POST",
            &format!("{}/v1/connectors/acme-eu/runs", self.api),
            Some(OPERATOR),
            None,
        )?;
        if status != 202 {
            bail!("starting the pull run answered {status}: {body}");
        }
        Ok(body)
    }

    /// Starts a pull run and waits until every page of it is committed; the run record.
    fn run_pull(&self) -> Result<Value> {
        let started = self.start_pull()?;
        let url = format!("{}/v1/runs/{}", self.api, s(&started["run_id"]));
        wait_for("the pull run's pages to commit", || {
            let (status, run) = self.call("GET", &url, Some(OPERATOR), None)?;
            Ok((status == 200 && run["all_pages_committed"] == true).then_some(run))
        })
    }

    /// A signed webhook of the sample connector `acme-events` (its local sample secret).
    fn webhook(&self, event_id: &str, quantity: u64, at: &str) -> Result<()> {
        let secrets: Value = serde_json::from_slice(&std::fs::read(
            crate::repo_root().join("infra/local/secrets.json"),
        )?)?;
        let secret =
            feedsafe::intake::webhook::SigningSecret::parse(&s(&secrets["acme-events"][0]))
                .map_err(|e| anyhow!("the sample secret: {e:?}"))?;
        let body = json!({
            "specversion": "1.0", "id": event_id, "source": "urn:acme:events", "type": "offer.snapshot",
            "data": {"offers": [offer("AX-440-R2", quantity, "820.00", at)]}
        })
        .to_string();
        let now = feedsafe::domain::timestamp::Timestamp::now().unix_seconds();
        let webhook_id = format!("msg-{event_id}-{quantity}");
        let signature = feedsafe::intake::webhook::sign(&secret, &webhook_id, now, body.as_bytes());
        let url = format!("{}/v1/webhooks/acme-events", self.api);
        let mut response = self
            .agent
            .post(&url)
            .header("content-type", "application/json")
            .header("webhook-id", &webhook_id)
            .header("webhook-timestamp", &now.to_string())
            .header("webhook-signature", &signature)
            .send(body)
            .with_context(|| format!("POST {url}"))?;
        let status = response.status().as_u16();
        if status != 202 {
            let text = response.body_mut().read_to_string().unwrap_or_default();
            bail!("the webhook answered {status}: {text}");
        }
        Ok(())
    }

    fn history(&self, item: &str) -> Result<Vec<Value>> {
        let (_, body) = self.call(
            "GET",
            &format!("{}/v1/items/{item}/observations", self.api),
            Some(READER),
            None,
        )?;
        Ok(body["observations"].as_array().cloned().unwrap_or_default())
    }

    fn offers(&self, item: &str) -> Result<Vec<Value>> {
        let (_, body) = self.call(
            "GET",
            &format!("{}/v1/items/{item}/offers", self.api),
            Some(READER),
            None,
        )?;
        Ok(body["offers"].as_array().cloned().unwrap_or_default())
    }

    fn set_export(&self, export_id: &str, pages: Vec<Vec<Value>>) -> Result<()> {
        let (status, body) = self.call(
            "POST",
            &format!("{}/control/acme-eu/export", self.supplier),
            None,
            Some(&json!({"export_id": export_id, "pages": pages})),
        )?;
        if status >= 300 {
            bail!("fake supplier refused the export: {status} {body}");
        }
        Ok(())
    }
}

fn wait_for<T>(what: &str, mut probe: impl FnMut() -> Result<Option<T>>) -> Result<T> {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(30) {
        if let Some(value) = probe()? {
            return Ok(value);
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    Err(anyhow!("timed out waiting for {what}"))
}

fn table(title: &str, header: &[&str], rows: Vec<Vec<String>>) {
    println!("\n== {title}");
    let widths: Vec<usize> = (0..header.len())
        .map(|i| {
            rows.iter()
                .map(|r| r.get(i).map_or(0, String::len))
                .max()
                .unwrap_or(0)
                .max(header[i].len())
        })
        .collect();
    let line = |cells: Vec<String>| {
        cells
            .iter()
            .enumerate()
            .map(|(i, c)| format!("{c:<w$}", w = widths[i]))
            .collect::<Vec<_>>()
            .join(" | ")
    };
    println!("{}", line(header.iter().map(|h| h.to_string()).collect()));
    println!(
        "{}",
        widths
            .iter()
            .map(|w| "-".repeat(*w))
            .collect::<Vec<_>>()
            .join("-+-")
    );
    for row in rows {
        println!("{}", line(row));
    }
}

fn s(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "-".into(),
        other => other.to_string(),
    }
}

fn observation_rows(observations: &[Value]) -> Vec<Vec<String>> {
    observations
        .iter()
        .map(|o| {
            vec![
                s(&o["observation_id"]),
                s(&o["delivery_key"]),
                s(&o["quantity"]),
                format!("{} {}", s(&o["price"]), s(&o["currency"])),
                s(&o["observed_at"]),
                s(&o["claim"]),
            ]
        })
        .collect()
}

const OBS_HEADER: [&str; 6] = [
    "observation",
    "delivery key",
    "qty",
    "price",
    "observed_at",
    "claim",
];

/// Page 2 of export EXP-8821: the delivery the demo replays and mutates.
const PAGE2: &str = "demo/acme-eu/ACC-1/EXP-8821/2";

/// What every step of the demo reaches: the running stack's API, fake supplier and engines.
struct Demo {
    stack: Value,
    client: std::sync::Arc<Client>,
    clients: feedsafe::aws::AwsClients,
    evidence: feedsafe::aws::dynamo::DynamoEvidenceStore,
    bucket: String,
}

/// The demo: five steps against the running local stack, each printed as a table.
pub async fn run() -> Result<()> {
    let demo = Demo::connect()?;
    let first_id = demo.first_export().await?;
    let record = demo.export_announced_again(&first_id).await?;
    demo.newer_export().await?;
    demo.late_and_mutated_webhook(&first_id).await?;
    demo.changed_replay_of_page_2(&first_id, &record).await?;
    println!("\nOutcome: the quantity-6 observation kept once, quantity 4 current, the late quantity 5 kept in history; quantity 7 (webhook) and the changed page 2 (quantity 5) quarantined as replay_payload_mismatch.");
    Ok(())
}

impl Demo {
    /// The stack `.local/stack.json` describes, and clients of it.
    fn connect() -> Result<Self> {
        let stack: Value = serde_json::from_slice(
            &std::fs::read(crate::repo_root().join(".local/stack.json"))
                .context("no .local/stack.json: start the stack with infra/local.sh")?,
        )?;
        let api = s(&stack["http"]);
        let supplier = s(&stack["fake_supplier"]);
        let clients = feedsafe::aws::AwsClients::local(
            &s(&stack["dynamodb_endpoint"]),
            &s(&stack["moto_endpoint"]),
        );
        let evidence = feedsafe::aws::dynamo::DynamoEvidenceStore::new(
            clients.dynamodb.clone(),
            s(&stack["tables"]["EvidenceTable"]),
        );
        let bucket = s(&stack["buckets"]["RawBucket"]);
        let client = Client {
            agent: ureq::Agent::config_builder()
                .http_status_as_error(false)
                .build()
                .into(),
            api,
            supplier,
        };
        let client = std::sync::Arc::new(client);

        Ok(Self {
            stack,
            client,
            clients,
            evidence,
            bucket,
        })
    }

    /// Step 1: The three-page export; page 2 carries AX-440-R2, quantity 6, 08:00Z. The stored
    /// observation's id.
    async fn first_export(&self) -> Result<String> {
        let client = &self.client;
        // 1. The three-page export; page 2 carries AX-440-R2, quantity 6, 08:00Z.
        let c = client.clone();
        let report = tokio::task::spawn_blocking(move || {
            c.set_export("EXP-8821", export_8821(6))?;
            c.run_pull()
        })
        .await??;
        let c = client.clone();
        let history = tokio::task::spawn_blocking(move || {
            wait_for("the page-2 observation", || {
                Ok(Some(c.history("AX-440-R2")?).filter(|h| !h.is_empty()))
            })
        })
        .await??;
        table(
            &format!(
                "1. Pull run {} of export EXP-8821 ({} pages committed) -> page 2 stored once",
                s(&report["run_id"]),
                report["pages_committed"].as_array().map_or(0, Vec::len)
            ),
            &OBS_HEADER,
            observation_rows(&history),
        );
        Ok(s(&history[0]["observation_id"]))
    }

    /// Step 2: The acknowledgement is lost; the scheduler announces the same export again. Page 2's
    /// replay record.
    async fn export_announced_again(
        &self,
        first_id: &str,
    ) -> Result<feedsafe::domain::model::ReplayRecord> {
        let (client, evidence, page2) = (&self.client, &self.evidence, PAGE2);
        // 2. The acknowledgement is lost; the scheduler announces the same export again.
        let c = client.clone();
        let rerun = tokio::task::spawn_blocking(move || c.start_pull()).await??;
        let record = evidence
            .replay_record(page2)
            .await?
            .ok_or_else(|| anyhow!("no replay record for {page2}"))?;
        let c = client.clone();
        let history = tokio::task::spawn_blocking(move || c.history("AX-440-R2")).await??;
        table(
        "2. The same export announced again (lost acknowledgement) -> the closed run is not reopened, its pages replay, no new observation",
        &[
            "run",
            "run was",
            "page 2 state",
            "observation ids",
            "observations in history",
        ],
        vec![vec![
            s(&rerun["run_id"]),
            s(&rerun["run_status"]),
            format!("{:?}", record.state),
            record
                .observation_ids
                .iter()
                .map(|i| i.to_string())
                .collect::<Vec<_>>()
                .join(","),
            history.len().to_string(),
        ]],
    );
        if record.observation_ids.first().map(|i| i.to_string()) != Some(first_id.to_owned())
            || history.len() != 1
        {
            bail!("the repeated run created or changed an observation");
        }

        Ok(record)
    }

    /// Step 3: 09:00: a new export reports quantity 4.
    async fn newer_export(&self) -> Result<()> {
        let client = &self.client;
        // 3. 09:00: a new export reports quantity 4.
        let c = client.clone();
        let (offers, history) =
            tokio::task::spawn_blocking(move || -> Result<(Vec<Value>, Vec<Value>)> {
                c.set_export(
                    "EXP-8822",
                    vec![
                        vec![],
                        vec![offer("AX-440-R2", 4, "820.00", "2026-11-29T09:00:00Z")],
                        vec![],
                    ],
                )?;
                c.run_pull()?;
                let offers = wait_for("quantity 4 to be current", || {
                    let offers = c.offers("AX-440-R2")?;
                    Ok(offers.iter().any(|o| o["quantity"] == 4).then_some(offers))
                })?;
                Ok((offers, c.history("AX-440-R2")?))
            })
            .await??;
        table(
            "3. Export EXP-8822 (quantity 4, 09:00Z) -> current offer",
            &[
                "connector",
                "qty",
                "observed_at",
                "retrieved_at",
                "verification",
                "age (s)",
            ],
            offers
                .iter()
                .map(|o| {
                    vec![
                        s(&o["connector"]),
                        s(&o["quantity"]),
                        s(&o["observed_at"]),
                        s(&o["retrieved_at"]),
                        s(&o["verification"]["state"]),
                        s(&o["freshness"]["age_seconds"]),
                    ]
                })
                .collect(),
        );
        table(
            "   History of AX-440-R2 (newest first): both claims kept",
            &OBS_HEADER,
            observation_rows(&history),
        );

        Ok(())
    }

    /// Step 4: The supplier's webhook reports an older reading (08:30Z, quantity 5), then sends the
    /// same event again claiming quantity 7 under the same identity.
    async fn late_and_mutated_webhook(&self, first_id: &str) -> Result<()> {
        let (client, evidence, bucket) = (&self.client, &self.evidence, &self.bucket);
        // 4. The supplier's webhook reports an older reading (08:30Z, quantity 5), then sends the same
        //    event again claiming quantity 7 under the same identity.
        let event_id = "evt-ax440-0830";
        let event_key = format!("demo/acme-events/ACME-EVT/urn:acme:events/{event_id}");
        let c = client.clone();
        tokio::task::spawn_blocking(move || -> Result<()> {
            c.webhook(event_id, 5, "2026-11-29T08:30:00Z")?;
            wait_for("the 08:30 webhook observation", || {
                Ok(Some(()).filter(|_| c.history("AX-440-R2").is_ok_and(|h| h.len() == 3)))
            })?;
            c.webhook(event_id, 7, "2026-11-29T08:30:00Z")?;
            Ok(())
        })
        .await??;
        let tenant = feedsafe::domain::ids::TenantId::parse("demo")?;
        let entry = quarantine_entry_of(evidence, &tenant, &event_key).await?;
        let (offers, history) = offers_and_history(client).await?;
        table(
        "4. Webhook evt-ax440-0830 (08:30Z, quantity 5) stored; sent again with quantity 7 -> replay_payload_mismatch, quarantined",
        &MISMATCH_HEADER,
        vec![mismatch_row(&entry)],
    );
        println!(
            "   quarantined evidence (its own raw artifact): s3://{bucket}/{} (sha256 {})",
            entry.evidence_key, entry.evidence_sha256
        );
        println!(
            "   the stored observation is untouched: {}",
            history
                .iter()
                .any(|o| s(&o["observation_id"]) == first_id && o["quantity"] == 6)
        );
        println!(
        "   current offer: quantity {}, the late 08:30 reading did not roll it back  (history: {} claims)",
        offers
            .first()
            .map(|o| s(&o["quantity"]))
            .unwrap_or_default(),
        history.len()
    );
        Ok(())
    }

    /// Step 5: The essay's changed replay: page 2 of EXP-8821 arrives again under its key, now
    /// claiming quantity 5 (a mutated export, or a reused page cursor).
    async fn changed_replay_of_page_2(
        &self,
        first_id: &str,
        record: &feedsafe::domain::model::ReplayRecord,
    ) -> Result<()> {
        let (client, evidence, bucket, stack) =
            (&self.client, &self.evidence, &self.bucket, &self.stack);
        let (clients, page2) = (&self.clients, PAGE2);
        let tenant = feedsafe::domain::ids::TenantId::parse("demo")?;
        // 5. The essay's changed replay: page 2 of EXP-8821 arrives again under its key, now claiming
        //    quantity 5 (a mutated export, or a reused page cursor).
        let mutated = mutated_page(clients, bucket, &record.artifact_key).await?;
        let queue = feedsafe::aws::sqs::SqsDeliveryQueue::new(
            clients.sqs.clone(),
            s(&stack["queues"]["IngestQueue"]["url"]),
        );
        let claims = feedsafe::aws::claims::S3ClaimStore::new(clients.s3.clone(), bucket.as_str());
        let key = feedsafe::domain::ids::DeliveryKey::new(
            record.tenant.clone(),
            record.connector.clone(),
            record.source_account.clone(),
            record.source_delivery_id.clone(),
            record.identity_strength,
        );
        let envelope = feedsafe::intake::envelope_for(
            &key,
            feedsafe::intake::poller::EXPORT_PAGE_BASIS,
            feedsafe::domain::timestamp::Timestamp::now(),
            "application/json",
            record.run.clone(),
            &mutated,
            &claims,
        )
        .await
        .map_err(|e| anyhow!("building the repeated page's envelope: {e}"))?;
        feedsafe::intake::DeliveryQueue::enqueue(&queue, &envelope)
            .await
            .map_err(|e| anyhow!("enqueueing the repeated page: {e}"))?;
        let page_entry = quarantine_entry_of(evidence, &tenant, page2).await?;
        let (offers, history) = offers_and_history(client).await?;
        table(
        "5. Page 2 of EXP-8821 delivered again under its key, now claiming quantity 5 -> replay_payload_mismatch, quarantined",
        &MISMATCH_HEADER,
        vec![mismatch_row(&page_entry)],
    );
        let kept = history
            .iter()
            .any(|o| s(&o["observation_id"]) == first_id && o["quantity"] == 6);
        println!("   the quantity-6 observation is untouched: {kept}; history still {} claims, current quantity {}",
        history.len(),
        offers.first().map(|o| s(&o["quantity"])).unwrap_or_default());
        if !kept || history.len() != 3 {
            bail!("the changed replay of page 2 altered the stored history");
        }
        println!(
            "   review it: http://{}/console (operator token), or opsctl quarantine show {}",
            s(&stack["http"]).trim_start_matches("http://"),
            page_entry.quarantine_id
        );
        Ok(())
    }
}

/// AX-440-R2's current offers and history, read through the read routes.
async fn offers_and_history(client: &std::sync::Arc<Client>) -> Result<(Vec<Value>, Vec<Value>)> {
    let c = client.clone();
    tokio::task::spawn_blocking(move || -> Result<(Vec<Value>, Vec<Value>)> {
        Ok((c.offers("AX-440-R2")?, c.history("AX-440-R2")?))
    })
    .await?
}

const MISMATCH_HEADER: [&str; 4] = [
    "outcome",
    "quarantine id",
    "stored fingerprint",
    "received fingerprint",
];

fn mismatch_row(entry: &feedsafe::domain::model::QuarantineEntry) -> Vec<String> {
    let shown = |f: &Option<feedsafe::domain::fingerprint::Fingerprint>| {
        f.as_ref().map(|f| f.to_string()).unwrap_or_default()
    };
    vec![
        entry.reason_code.clone(),
        entry.quarantine_id.clone(),
        shown(&entry.stored_fingerprint),
        shown(&entry.received_fingerprint),
    ]
}

/// The quarantine entry under `delivery_key`, once the ingest function has written it.
async fn quarantine_entry_of(
    evidence: &feedsafe::aws::dynamo::DynamoEvidenceStore,
    tenant: &feedsafe::domain::ids::TenantId,
    delivery_key: &str,
) -> Result<feedsafe::domain::model::QuarantineEntry> {
    let start = Instant::now();
    loop {
        let entries = evidence.quarantine_list(tenant).await?;
        if let Some(entry) = entries
            .into_iter()
            .find(|e| e.delivery_key.as_deref() == Some(delivery_key))
        {
            return Ok(entry);
        }
        if start.elapsed() > Duration::from_secs(30) {
            bail!("no quarantine entry appeared for {delivery_key}");
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// The stored page-2 payload with AX-440-R2's quantity 6 changed to 5, nothing else: what a
/// supplier that mutated its export would send again under the same key.
async fn mutated_page(
    clients: &feedsafe::aws::AwsClients,
    bucket: &str,
    artifact_key: &str,
) -> Result<Vec<u8>> {
    let archive = feedsafe::ops::RawArchive::new(std::sync::Arc::new(
        feedsafe::aws::s3::S3ArtifactStore::new(clients.s3.clone(), bucket),
    ));
    let stored = archive
        .read(artifact_key, 1024 * 1024)
        .await
        .map_err(|e| anyhow!("reading the stored page 2 ({artifact_key}): {e}"))?;
    let mut page: Value =
        serde_json::from_slice(&stored).context("the stored page 2 is not JSON")?;
    fn change(value: &mut Value) -> usize {
        match value {
            Value::Object(m)
                if m.get("sku").and_then(Value::as_str) == Some("AX-440-R2")
                    && m.get("quantity") == Some(&json!(6)) =>
            {
                m.insert("quantity".into(), json!(5));
                1
            }
            Value::Object(m) => m.values_mut().map(change).sum(),
            Value::Array(a) => a.iter_mut().map(change).sum(),
            _ => 0,
        }
    }
    if change(&mut page) != 1 {
        bail!("the stored page 2 does not hold AX-440-R2 with quantity 6 once");
    }
    Ok(serde_json::to_vec(&page)?)
}
