//! Metering for the bench (docs/benchmarks.md, "Cost per delivery"): every AWS request with its
//! start and end (so the sequential round trips on the critical path are counted, not guessed), and
//! every DynamoDB call asked for `ReturnConsumedCapacity: INDEXES`, its units summed for the table
//! and each index separately, as AWS bills them.
//!
//! Limits: a refused conditional write or a cancelled transaction reports no consumed
//! capacity in its error (AWS bills it anyway: 1 write unit per item checked, 2 in a
//! transaction), so `refused` counts those calls for the reader to price.

use aws_sdk_dynamodb::operation::{
    batch_get_item::{BatchGetItemInput, BatchGetItemOutput},
    batch_write_item::{BatchWriteItemInput, BatchWriteItemOutput},
    delete_item::{DeleteItemInput, DeleteItemOutput},
    get_item::{GetItemInput, GetItemOutput},
    put_item::{PutItemInput, PutItemOutput},
    query::{QueryInput, QueryOutput},
    transact_write_items::{TransactWriteItemsInput, TransactWriteItemsOutput},
    update_item::{UpdateItemInput, UpdateItemOutput},
};
use aws_sdk_dynamodb::types::{AttributeValue, ConsumedCapacity, ReturnConsumedCapacity};
use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::interceptors::context::{
    BeforeSerializationInterceptorContextMut, BeforeSerializationInterceptorContextRef,
    FinalizerInterceptorContextRef,
};
use aws_smithy_runtime_api::client::interceptors::Intercept;
use aws_smithy_runtime_api::client::orchestrator::Metadata;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::config_bag::{ConfigBag, Storable, StoreReplace};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// One request: `Service.Operation`, when it started and ended, whether it failed.
#[derive(Debug, Clone)]
pub struct Metered {
    pub operation: String,
    pub start: Instant,
    pub end: Instant,
    pub failed: bool,
}

pub use feedsafe::aws::item_size::item_size;

/// Write units AWS bills for putting `item`: ceil(size / 1 KB) on the table (twice that inside
/// a transaction) and, for each index whose keys the item carries (`gsi1pk`, `gsi2pk`), the
/// projected size (ALL here) once more.
fn put_units(
    item: &std::collections::HashMap<String, aws_sdk_dynamodb::types::AttributeValue>,
    transactional: bool,
    units: &mut BTreeMap<String, f64>,
) {
    let kib = item_size(item).div_ceil(1024).max(1) as f64;
    *units.entry("billed table:write".into()).or_default() +=
        if transactional { 2.0 * kib } else { kib };
    for (key, index) in [("gsi1pk", "gsi1"), ("gsi2pk", "gsi2")] {
        if item.contains_key(key) {
            *units
                .entry(format!("billed index {index}:write"))
                .or_default() += kib;
        }
    }
}

/// What a stretch of work cost.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Meter {
    /// Requests by `Service.Operation`.
    pub requests: BTreeMap<String, usize>,
    /// Sequential round trips: the requests that did not overlap an earlier one in time.
    pub round_trips: usize,
    /// DynamoDB units by target (`table` or `index <name>`) and kind (`read`/`write`): as the
    /// engine reported them, and `billed ...` as AWS bills them, computed from the items'
    /// sizes (DynamoDB Local under-reports transactions).
    pub units: BTreeMap<String, f64>,
    /// DynamoDB calls refused (conditional check, cancelled transaction): billed, not reported.
    pub refused: usize,
}

impl Meter {
    pub fn total_requests(&self) -> usize {
        self.requests.values().sum()
    }
    /// Units whose key starts with `prefix` (`billed`, or a target) and ends with `kind`.
    pub fn units_of(&self, prefix: &str, kind: &str) -> f64 {
        self.units
            .iter()
            .filter(|(k, _)| k.starts_with(prefix) && k.ends_with(kind))
            .map(|(_, v)| v)
            // `sum` of no f64 is -0.0.
            .fold(0.0, |total, v| total + v)
    }
}

#[derive(Debug)]
struct StartedAt(Instant);

/// How many keys a `BatchGetItem` asked for: a key that is not found still bills a read unit.
#[derive(Debug)]
struct RequestedKeys(usize);
impl Storable for RequestedKeys {
    type Storer = StoreReplace<Self>;
}
impl Storable for StartedAt {
    type Storer = StoreReplace<Self>;
}

#[derive(Debug, Default)]
struct Log {
    requests: Vec<Metered>,
    units: BTreeMap<String, f64>,
}

/// The interceptor; clone it onto the DynamoDB and S3 clients (`crate::intercepted`).
#[derive(Debug, Clone, Default)]
pub struct Metering(Arc<Mutex<Log>>);

impl Metering {
    /// What was metered since the last `take`.
    pub fn take(&self) -> Meter {
        let log = std::mem::take(&mut *self.0.lock().unwrap());
        let mut meter = Meter {
            units: log.units,
            ..Meter::default()
        };
        let mut requests = log.requests;
        requests.sort_by_key(|r| r.start);
        let mut busy_until: Option<Instant> = None;
        for r in &requests {
            *meter.requests.entry(r.operation.clone()).or_default() += 1;
            if r.failed && r.operation.starts_with("DynamoDB.") {
                meter.refused += 1;
            }
            match busy_until {
                Some(until) if r.start < until => busy_until = Some(until.max(r.end)),
                _ => {
                    meter.round_trips += 1;
                    busy_until = Some(r.end);
                }
            }
        }
        meter
    }

    fn add(&self, capacity: &ConsumedCapacity, reads: bool) {
        let mut log = self.0.lock().unwrap();
        let kind = if reads { "read" } else { "write" };
        let mut put = |target: String, c: &aws_sdk_dynamodb::types::Capacity| {
            // Reads and writes are reported apart on each target; CapacityUnits alone when
            // the call only does one of them.
            let (read, write) = (c.read_capacity_units(), c.write_capacity_units());
            if read.is_none() && write.is_none() {
                *log.units.entry(format!("{target}:{kind}")).or_default() +=
                    c.capacity_units().unwrap_or(0.0);
            }
            if let Some(r) = read {
                *log.units.entry(format!("{target}:read")).or_default() += r;
            }
            if let Some(w) = write {
                *log.units.entry(format!("{target}:write")).or_default() += w;
            }
        };
        if let Some(table) = capacity.table() {
            put("table".into(), table);
        }
        for (name, index) in capacity.global_secondary_indexes().into_iter().flatten() {
            put(format!("index {name}"), index);
        }
    }
}

macro_rules! ask_for_capacity {
    ($input:expr, $($ty:ty),*) => {
        $(if let Some(i) = $input.downcast_mut::<$ty>() {
            i.return_consumed_capacity = Some(ReturnConsumedCapacity::Indexes);
        })*
    };
}

impl Intercept for Metering {
    fn name(&self) -> &'static str {
        "Metering"
    }

    fn read_before_execution(
        &self,
        _context: &BeforeSerializationInterceptorContextRef<'_>,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        cfg.interceptor_state().store_put(StartedAt(Instant::now()));
        Ok(())
    }

    fn modify_before_serialization(
        &self,
        context: &mut BeforeSerializationInterceptorContextMut<'_>,
        _components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let input = context.input_mut();
        if let Some(i) = input.downcast_ref::<BatchGetItemInput>() {
            let keys = i
                .request_items()
                .into_iter()
                .flat_map(|m| m.values())
                .map(|k| k.keys().len())
                .sum();
            cfg.interceptor_state().store_put(RequestedKeys(keys));
        }
        {
            let mut billed = BTreeMap::new();
            if let Some(i) = input.downcast_ref::<PutItemInput>() {
                put_units(i.item().unwrap_or(&Default::default()), false, &mut billed);
            }
            if let Some(i) = input.downcast_ref::<TransactWriteItemsInput>() {
                for action in i.transact_items() {
                    if let Some(put) = action.put() {
                        put_units(put.item(), true, &mut billed);
                    } else {
                        // An update or a condition check of an item of up to 1 KB.
                        *billed.entry("billed table:write".into()).or_default() += 2.0;
                    }
                }
            }
            if input.downcast_ref::<UpdateItemInput>().is_some()
                || input.downcast_ref::<DeleteItemInput>().is_some()
            {
                *billed.entry("billed table:write".into()).or_default() += 1.0;
            }
            if let Some(i) = input.downcast_ref::<BatchWriteItemInput>() {
                for request in i
                    .request_items()
                    .into_iter()
                    .flat_map(|m| m.values())
                    .flatten()
                {
                    match request.put_request() {
                        Some(put) => put_units(put.item(), false, &mut billed),
                        None => *billed.entry("billed table:write".into()).or_default() += 1.0,
                    }
                }
            }
            let mut log = self.0.lock().unwrap();
            for (k, v) in billed {
                *log.units.entry(k).or_default() += v;
            }
        }
        ask_for_capacity!(
            input,
            PutItemInput,
            UpdateItemInput,
            DeleteItemInput,
            GetItemInput,
            QueryInput,
            BatchGetItemInput,
            BatchWriteItemInput,
            TransactWriteItemsInput
        );
        Ok(())
    }

    fn read_after_execution(
        &self,
        context: &FinalizerInterceptorContextRef<'_>,
        _components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let end = Instant::now();
        let start = cfg.load::<StartedAt>().map_or(end, |s| s.0);
        let operation = cfg
            .load::<Metadata>()
            .map(|m| format!("{}.{}", m.service(), m.name()))
            .unwrap_or_default();
        let mut failed = true;
        if let Some(Ok(output)) = context.output_or_error() {
            failed = false;
            let one = |c: Option<&ConsumedCapacity>| c.cloned().into_iter().collect::<Vec<_>>();
            let many: Vec<ConsumedCapacity> =
                if let Some(o) = output.downcast_ref::<PutItemOutput>() {
                    one(o.consumed_capacity())
                } else if let Some(o) = output.downcast_ref::<UpdateItemOutput>() {
                    one(o.consumed_capacity())
                } else if let Some(o) = output.downcast_ref::<DeleteItemOutput>() {
                    one(o.consumed_capacity())
                } else if let Some(o) = output.downcast_ref::<GetItemOutput>() {
                    one(o.consumed_capacity())
                } else if let Some(o) = output.downcast_ref::<QueryOutput>() {
                    one(o.consumed_capacity())
                } else if let Some(o) = output.downcast_ref::<BatchGetItemOutput>() {
                    o.consumed_capacity().to_vec()
                } else if let Some(o) = output.downcast_ref::<BatchWriteItemOutput>() {
                    o.consumed_capacity().to_vec()
                } else if let Some(o) = output.downcast_ref::<TransactWriteItemsOutput>() {
                    o.consumed_capacity().to_vec()
                } else {
                    Vec::new()
                };
            let reads = output.downcast_ref::<GetItemOutput>().is_some()
                || output.downcast_ref::<QueryOutput>().is_some()
                || output.downcast_ref::<BatchGetItemOutput>().is_some();
            for c in &many {
                self.add(c, reads);
            }
            // Reads are billed from what came back: 4 KB units, half for eventually
            // consistent reads (counted as strong here, the upper bound).
            let mut read_kib = 0usize;
            if let Some(o) = output.downcast_ref::<GetItemOutput>() {
                read_kib += o.item().map_or(1, |i| item_size(i).div_ceil(4096).max(1));
            }
            if let Some(o) = output.downcast_ref::<QueryOutput>() {
                read_kib += o
                    .items()
                    .iter()
                    .map(item_size)
                    .sum::<usize>()
                    .div_ceil(4096)
                    .max(1);
            }
            if let Some(o) = output.downcast_ref::<BatchGetItemOutput>() {
                let found: Vec<&HashMap<String, AttributeValue>> = o
                    .responses()
                    .into_iter()
                    .flat_map(|m| m.values())
                    .flatten()
                    .collect();
                let asked = cfg.load::<RequestedKeys>().map_or(found.len(), |k| k.0);
                // Each key is read as its own GetItem: one unit when it is not there. (A key
                // left unprocessed is asked again, and counted, by the next call.)
                let unprocessed: usize = o
                    .unprocessed_keys()
                    .into_iter()
                    .flat_map(|m| m.values())
                    .map(|k| k.keys().len())
                    .sum();
                read_kib += found
                    .iter()
                    .map(|i| item_size(i).div_ceil(4096).max(1))
                    .sum::<usize>()
                    + asked.saturating_sub(found.len() + unprocessed);
            }
            if read_kib > 0 {
                *self
                    .0
                    .lock()
                    .unwrap()
                    .units
                    .entry("billed table:read".into())
                    .or_default() += read_kib as f64;
            }
        }
        self.0.lock().unwrap().requests.push(Metered {
            operation,
            start,
            end,
            failed,
        });
        Ok(())
    }
}

/// CPU time of this process (user + system), in milliseconds, from /proc/self/stat: the
/// functions' own work, not the engines' (they are other processes).
pub fn cpu_ms() -> u128 {
    cpu_us() / 1000
}

/// This process's CPU time (all threads, user and system) in microseconds, from
/// `CLOCK_PROCESS_CPUTIME_ID`.
pub fn cpu_us() -> u128 {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `now` is a valid, writable timespec; the clock id is a constant Linux defines.
    let ok = unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut now) } == 0;
    assert!(ok, "clock_gettime(CLOCK_PROCESS_CPUTIME_ID) failed");
    now.tv_sec as u128 * 1_000_000 + now.tv_nsec as u128 / 1000
}

/// utime + stime of process `pid` (a number, or `self`) in milliseconds; 0 when it is gone.
pub fn cpu_ms_of(pid: &str) -> u128 {
    stat_fields(pid).map_or(0, |fields| {
        let ticks = |i: usize| {
            fields
                .get(i)
                .and_then(|f| f.parse::<u128>().ok())
                .unwrap_or(0)
        };
        (ticks(11) + ticks(12)) * 10 // USER_HZ is 100 on Linux
    })
}

/// CPU milliseconds of `pid` and every process descending from it (an engine's launcher and
/// the JVM or Python process it started).
pub fn cpu_ms_of_tree(pid: u32) -> u128 {
    let mut parents = std::collections::BTreeMap::<u32, Vec<u32>>::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(child) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        // The parent is the 2nd field after the command.
        if let Some(parent) = stat_fields(&child.to_string())
            .and_then(|f| f.get(1).and_then(|p| p.parse::<u32>().ok()))
        {
            parents.entry(parent).or_default().push(child);
        }
    }
    let mut total = 0;
    let mut stack = vec![pid];
    while let Some(next) = stack.pop() {
        total += cpu_ms_of(&next.to_string());
        stack.extend(parents.get(&next).into_iter().flatten());
    }
    total
}

/// The fields of /proc/{pid}/stat after the command's closing parenthesis (state first;
/// utime and stime are the 12th and 13th).
fn stat_fields(pid: &str) -> Option<Vec<String>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    Some(
        stat.rsplit_once(')')?
            .1
            .split_whitespace()
            .map(str::to_owned)
            .collect(),
    )
}
