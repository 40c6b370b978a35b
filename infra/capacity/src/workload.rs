//! The synthetic workload: tenants, suppliers with catalogues, and the deliveries of a window.
//! Every identifier is built with the product's own constructors (`DeliveryKey`,
//! `SourceDeliveryId`, `run_id_for`, `CanonicalItem::key`), so the keys the simulation counts
//! are the keys the product would write.

use crate::rng::{Rng, Zipf};
use feedsafe::domain::ids::{
    ConnectorId, DeliveryKey, IdentityStrength, RunId, SourceAccount, SourceDeliveryId, TenantId,
};
use feedsafe::domain::item::CanonicalItem;
use feedsafe::domain::model::SourceRef;
use feedsafe::intake::poller::run_id_for;
use std::collections::{HashMap, VecDeque};
use std::rc::Rc;

/// The workload's assumptions; `docs/scale.md` states them.
#[derive(Debug, Clone)]
pub struct Params {
    pub seed: u64,
    pub tenants: usize,
    pub suppliers: usize,
    /// Distinct (tenant, canonical item) pairs over all tenants.
    pub items: usize,
    /// Share of all deliveries sent by supplier 0.
    pub big_supplier_share: f64,
    /// Supplier 0's catalogue (its tenant's whole item universe).
    pub big_catalogue: usize,
    /// The other suppliers' traffic: Zipf over their ranks with this exponent.
    pub supplier_zipf_s: f64,
    /// Which catalogue items a webhook row names: Zipf over the catalogue with this exponent.
    pub item_zipf_s: f64,
    pub peak_deliveries_per_second: f64,
    pub observations_per_day: f64,
    /// Delivery mix by count: webhooks (1-10 rows), export pages (100-400 rows, one run per
    /// supplier at a time), file drops (5,000 rows); the rest of 1.0 after these two is webhooks.
    pub page_share: f64,
    pub drop_share: f64,
    pub replay_share: f64,
    pub mismatch_share: f64,
    pub reject_share: f64,
    /// Rows per export page are uniform in this range; a run's page count is its supplier's
    /// catalogue over the mean page size.
    pub page_rows: (usize, usize),
    pub webhook_rows: (usize, usize),
    pub drop_rows: usize,
    /// Bytes of one supplier row in a body (the DESIGN example row is ~110 bytes).
    pub row_bytes: usize,
    /// Reader traffic at peak: offers, history and single-observation requests per second.
    pub offers_reads_per_second: f64,
    pub history_reads_per_second: f64,
    pub observation_reads_per_second: f64,
    /// Observations in the history of the item an identity correction re-attributes.
    pub corrected_history: usize,
}

impl Default for Params {
    fn default() -> Self {
        Self {
            seed: 8,
            tenants: 1_000,
            suppliers: 10_000,
            items: 2_000_000,
            big_supplier_share: 0.30,
            big_catalogue: 200_000,
            supplier_zipf_s: 1.0,
            item_zipf_s: 1.0,
            peak_deliveries_per_second: 5_000.0,
            observations_per_day: 50_000_000.0,
            page_share: 0.0996,
            drop_share: 0.0004,
            replay_share: 0.10,
            mismatch_share: 0.0001,
            reject_share: 0.001,
            page_rows: (100, 400),
            webhook_rows: (1, 10),
            drop_rows: 5_000,
            row_bytes: 110,
            offers_reads_per_second: 1_000.0,
            history_reads_per_second: 200.0,
            observation_reads_per_second: 100.0,
            corrected_history: 10_000,
        }
    }
}

impl Params {
    /// Mean rows per delivery of the mix (replays and refusals carry rows too, but store none).
    pub fn mean_rows(&self) -> f64 {
        let webhook = (self.webhook_rows.0 + self.webhook_rows.1) as f64 / 2.0;
        let page = (self.page_rows.0 + self.page_rows.1) as f64 / 2.0;
        let webhook_share = 1.0 - self.page_share - self.drop_share;
        webhook_share * webhook + self.page_share * page + self.drop_share * self.drop_rows as f64
    }

    /// Deliveries per second on an average day: observations per day over the stored rows of
    /// a delivery (replays and refusals store none).
    pub fn average_deliveries_per_second(&self) -> f64 {
        let storing = 1.0 - self.replay_share - self.mismatch_share - self.reject_share;
        self.observations_per_day / 86_400.0 / (self.mean_rows() * storing)
    }
}

pub struct Supplier {
    pub tenant_index: usize,
    pub tenant: TenantId,
    pub connector: ConnectorId,
    pub account: SourceAccount,
    pub source: SourceRef,
    /// The catalogue is the tenant's items `offset..offset + len`; item `offset + r` has
    /// popularity rank `r` (tenant items are numbered by popularity, so suppliers of one tenant
    /// share the popular parts).
    pub offset: usize,
    pub len: usize,
    zipf: Rc<Zipf>,
}

impl Supplier {
    /// A webhook row's item: Zipf over the catalogue.
    pub fn popular_item(&self, rng: &mut Rng) -> usize {
        self.offset + self.zipf.sample(rng)
    }

    pub fn top_item_share(&self) -> f64 {
        self.zipf.share(0)
    }
}

pub struct World {
    pub params: Params,
    pub suppliers: Vec<Supplier>,
    /// The suppliers of each tenant.
    pub by_tenant: Vec<Vec<usize>>,
    other_suppliers: Zipf,
}

/// Part numbers are `P{tenant}-{index}`: the item key is the product's own
/// (`P0000-0000001~each~new`).
pub fn item_key(tenant_index: usize, item: usize) -> String {
    CanonicalItem::new(&format!("P{tenant_index:04}-{item:07}"), None, None, None)
        .map(|i| i.key())
        .unwrap_or_else(|e| panic!("a generated part number is valid: {e}"))
}

fn id<T>(parsed: Result<T, feedsafe::domain::ids::IdError>) -> T {
    parsed.unwrap_or_else(|e| panic!("a generated id is valid: {e}"))
}

impl World {
    pub fn new(params: Params) -> Self {
        let mut rng = Rng::new(params.seed);
        let others = params.tenants - 1;
        let rest = params.items - params.big_catalogue;
        let universes: Vec<usize> = (0..params.tenants)
            .map(|t| match t {
                0 => params.big_catalogue,
                t => rest / others + usize::from(t - 1 < rest % others),
            })
            .collect();
        let mut zipfs: HashMap<usize, Rc<Zipf>> = HashMap::new();
        let mut by_tenant = vec![Vec::new(); params.tenants];
        let suppliers = (0..params.suppliers)
            .map(|s| {
                let tenant_index = s % params.tenants;
                let universe = universes[tenant_index];
                let (offset, len) = if s == 0 {
                    (0, universe)
                } else {
                    // 30-80 % of the tenant's items, starting anywhere.
                    let len = (universe * rng.between(30, 80) / 100).max(1);
                    // Rounded so that few distinct Zipf tables are built.
                    let len = if len > 1_000 { len / 100 * 100 } else { len };
                    (rng.below(universe - len + 1), len)
                };
                let zipf = zipfs
                    .entry(len)
                    .or_insert_with(|| Rc::new(Zipf::new(len, params.item_zipf_s)))
                    .clone();
                let tenant = id(TenantId::parse(&format!("t{tenant_index:04}")));
                let connector = id(ConnectorId::parse(&format!("sup-{s:05}")));
                let account = id(SourceAccount::parse(&format!("ACC-{s:05}")));
                by_tenant[tenant_index].push(s);
                Supplier {
                    tenant_index,
                    source: SourceRef {
                        tenant: tenant.clone(),
                        connector: connector.clone(),
                        source_account: account.clone(),
                    },
                    tenant,
                    connector,
                    account,
                    offset,
                    len,
                    zipf,
                }
            })
            .collect();
        Self {
            other_suppliers: Zipf::new(params.suppliers - 1, params.supplier_zipf_s),
            params,
            suppliers,
            by_tenant,
        }
    }

    /// A sender, by traffic share.
    pub fn pick_supplier(&self, rng: &mut Rng) -> usize {
        if rng.chance(self.params.big_supplier_share) {
            0
        } else {
            1 + self.other_suppliers.sample(rng)
        }
    }

    /// The suppliers of the tenant whose catalogue holds the item: the sources of its offers.
    pub fn sources_of(&self, tenant_index: usize, item: usize) -> impl Iterator<Item = usize> + '_ {
        self.by_tenant[tenant_index]
            .iter()
            .copied()
            .filter(move |&s| {
                let supplier = &self.suppliers[s];
                (supplier.offset..supplier.offset + supplier.len).contains(&item)
            })
    }
}

#[derive(Debug, Clone)]
pub enum Kind {
    /// A push of a few rows (CloudEvents identity).
    Webhook,
    /// One page of a pull run.
    Page {
        run: RunId,
        page: u32,
        page_count: u32,
    },
    /// A dropped file, read by ingest from `drops/{connector}/{file}`.
    Drop { file: String },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Fresh,
    /// The same key and payload again (supplier retry, SQS redelivery, re-announced run).
    Replay,
    /// The same key with another payload: quarantined.
    Mismatch,
    /// Refused input (a bad row): the message is kept under `rejected/`.
    Rejected,
}

#[derive(Debug, Clone)]
pub struct Delivery {
    /// Seconds from the start of the window.
    pub at: f64,
    pub supplier: usize,
    pub kind: Kind,
    pub key: DeliveryKey,
    /// Tenant item indices, in row order.
    pub rows: Vec<usize>,
    pub outcome: Outcome,
}

impl Delivery {
    pub fn body_bytes(&self, params: &Params) -> usize {
        200 + self.rows.len() * params.row_bytes
    }
}

/// Per-supplier state that carries from one window to the next: the run being paged through,
/// and recent keys that replays repeat.
#[derive(Default)]
pub struct Cursor {
    runs: HashMap<usize, (u32, u32, u32)>,
    recent: HashMap<usize, VecDeque<Delivery>>,
    serial: u64,
}

/// The deliveries of one window of `seconds` at `rate` deliveries a second, in time order.
pub fn deliveries(
    world: &World,
    rng: &mut Rng,
    cursor: &mut Cursor,
    rate: f64,
    seconds: f64,
) -> Vec<Delivery> {
    let p = &world.params;
    let count = (rate * seconds).round() as usize;
    let mut times: Vec<f64> = (0..count).map(|_| rng.unit() * seconds).collect();
    times.sort_by(f64::total_cmp);
    let mut out = Vec::with_capacity(count);
    for at in times {
        let supplier = world.pick_supplier(rng);
        let draw = rng.unit();
        let outcome = if draw < p.replay_share {
            Outcome::Replay
        } else if draw < p.replay_share + p.mismatch_share {
            Outcome::Mismatch
        } else if draw < p.replay_share + p.mismatch_share + p.reject_share {
            Outcome::Rejected
        } else {
            Outcome::Fresh
        };
        if matches!(outcome, Outcome::Replay | Outcome::Mismatch) {
            if let Some(earlier) = cursor
                .recent
                .get(&supplier)
                .and_then(|r| r.get(rng.below(r.len().max(1))))
            {
                out.push(Delivery {
                    at,
                    outcome,
                    ..earlier.clone()
                });
                continue;
            }
        }
        let delivery = new_delivery(world, rng, cursor, supplier, at, outcome);
        if outcome == Outcome::Fresh {
            let recent = cursor.recent.entry(supplier).or_default();
            recent.push_back(delivery.clone());
            if recent.len() > 8 {
                recent.pop_front();
            }
        }
        out.push(delivery);
    }
    out
}

fn new_delivery(
    world: &World,
    rng: &mut Rng,
    cursor: &mut Cursor,
    supplier_index: usize,
    at: f64,
    outcome: Outcome,
) -> Delivery {
    let p = &world.params;
    let supplier = &world.suppliers[supplier_index];
    cursor.serial += 1;
    let serial = cursor.serial;
    let draw = rng.unit();
    let (kind, id, rows) = if draw < p.drop_share {
        let file = format!("prices-{serial}.csv");
        let start = rng.below(supplier.len);
        let rows = (0..p.drop_rows.min(supplier.len))
            .map(|r| supplier.offset + (start + r) % supplier.len)
            .collect();
        // Named by file name and content; each generated file has content of its own.
        let content = feedsafe::domain::hashing::sha256(format!("v{serial}").as_bytes());
        let id = SourceDeliveryId::file_content(&file, &content);
        (Kind::Drop { file }, id, rows)
    } else if draw < p.drop_share + p.page_share {
        let mean = (p.page_rows.0 + p.page_rows.1) / 2;
        let page_count = (supplier.len.div_ceil(mean) as u32).clamp(1, 10_000);
        let (export, page, _) = cursor
            .runs
            .entry(supplier_index)
            .or_insert((1, 0, page_count));
        *page += 1;
        if *page > page_count {
            *export += 1;
            *page = 1;
        }
        let (export, page) = (*export, *page);
        let export_id = format!("EXP-{export}");
        let size = rng.between(p.page_rows.0, p.page_rows.1).min(supplier.len);
        let start = (page as usize - 1) * mean;
        let rows = (0..size)
            .map(|r| supplier.offset + (start + r) % supplier.len)
            .collect();
        let id = id(SourceDeliveryId::export_page(&export_id, page));
        let run = run_id_for(&supplier.connector, &export_id);
        (
            Kind::Page {
                run,
                page,
                page_count,
            },
            id,
            rows,
        )
    } else {
        let count = rng
            .between(p.webhook_rows.0, p.webhook_rows.1)
            .min(supplier.len);
        let mut rows: Vec<usize> = Vec::with_capacity(count);
        while rows.len() < count {
            let item = supplier.popular_item(rng);
            if !rows.contains(&item) {
                rows.push(item);
            }
        }
        let id = SourceDeliveryId::cloud_event(
            &format!("urn:{}:offers", supplier.connector),
            &format!("evt-{serial}"),
        );
        (Kind::Webhook, id, rows)
    };
    let key = DeliveryKey::new(
        supplier.tenant.clone(),
        supplier.connector.clone(),
        supplier.account.clone(),
        id,
        IdentityStrength::Source,
    );
    Delivery {
        at,
        supplier: supplier_index,
        kind,
        key,
        rows,
        outcome,
    }
}
