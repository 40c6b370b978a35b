//! The crash matrix (docs/crash-points.md): every ingest crash point x {sequential redelivery, 2
//! and 8 workers redelivering at once} x {1, 98, 99, 400 rows}. After each cell: zero duplicate and
//! zero lost observations, zero false successes (a worker told "committed" or "replayed" while the
//! record is not `COMMITTED`), and attempts counted once per delivery. The table of results is
//! written into `docs/crash-points.md` between its matrix markers (the same content on every
//! passing run, so a clean checkout stays clean).

use acceptance::*;
use feedsafe::domain::connector::ConnectorConfig;
use feedsafe::domain::model::ReplayState;
use feedsafe::protocols::ingest::{chunk_plan, IngestError, IngestOutcome};
use feedsafe::protocols::ports::{CrashPoint, NoFaults, SystemClock};
use serde_json::Value;
use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::sync::Arc;
use tokio::sync::Barrier;

const SIZES: [usize; 4] = [1, 98, 99, 400];
const MODES: [usize; 3] = [1, 2, 8];
/// Cells run at once (each on its own delivery key).
const PARALLEL_CELLS: usize = 6;

#[derive(Debug, Clone, Copy)]
struct Cell {
    point: CrashPoint,
    rows: usize,
    /// Workers redelivering at once (1: one redelivery after the crash).
    workers: usize,
}

#[derive(Debug, Default, Clone)]
struct Verdict {
    duplicates: usize,
    lost: usize,
    false_successes: usize,
    /// (expected, counted) attempts on the record.
    attempts: (u32, u32),
    /// Deliveries made after the crash (a worker told "contended" delivers again, as SQS would).
    deliveries: u32,
    note: String,
}

impl Verdict {
    fn clean(&self) -> bool {
        self.duplicates == 0
            && self.lost == 0
            && self.false_successes == 0
            && self.attempts.0 == self.attempts.1
            && self.note.is_empty()
    }
}

fn page(export: &str, rows: usize, quantity_offset: i64) -> Vec<u8> {
    let offers: Vec<Value> = (0..rows)
        .map(|i| {
            offer(
                &format!("PART-{i:04}"),
                i as i64 + quantity_offset,
                "1.00",
                "2026-11-29T08:00:00Z",
            )
        })
        .collect();
    export_page(export, 1, 1, offers)
}

/// The crash points a delivery of `rows` rows passes through, then the two of a mismatch.
fn points(rows: usize) -> Vec<CrashPoint> {
    let chunks = chunk_plan(rows).len() as u32;
    let mut points = vec![CrashPoint::BeforeArtifact, CrashPoint::AfterArtifact];
    points.extend((1..chunks).map(CrashPoint::AfterChunk));
    points.push(CrashPoint::AfterCommit);
    points.push(CrashPoint::BeforeQuarantineEntry);
    points.push(CrashPoint::AfterQuarantineEntry);
    points
}

fn is_mismatch_point(point: CrashPoint) -> bool {
    matches!(
        point,
        CrashPoint::BeforeQuarantineEntry | CrashPoint::AfterQuarantineEntry
    )
}

/// Delivers `envelope` until it settles, as the queue would redeliver a contended message.
/// Returns the outcome, how many deliveries it took, and whether a success was reported while
/// the record was not committed.
async fn deliver_until_settled(
    env: &TestEnv,
    envelope: &[u8],
    key: &str,
    barrier: &Barrier,
) -> (Option<IngestOutcome>, u32, bool) {
    let service = env.service_with(Arc::new(SystemClock), Arc::new(NoFaults));
    barrier.wait().await;
    let mut deliveries = 0;
    for _ in 0..20 {
        deliveries += 1;
        match service.ingest_message(envelope).await {
            Ok(outcome) => {
                let success = matches!(
                    outcome,
                    IngestOutcome::Committed(_) | IngestOutcome::Replayed(_)
                );
                let committed = env
                    .replay(key)
                    .await
                    .is_some_and(|r| r.state == ReplayState::Committed);
                return (Some(outcome), deliveries, success && !committed);
            }
            Err(IngestError::Contended(_)) => continue,
            Err(other) => panic!("redelivery of {key} failed: {other:?}"),
        }
    }
    (None, deliveries, false)
}

async fn run_cell(env: &TestEnv, acme: &ConnectorConfig, cell: Cell, index: usize) -> Verdict {
    let export = format!("EXP-M{index:03}");
    let key = format!("acme/acme-eu/ACC-1/{export}/1");
    let original = page(&export, cell.rows, 0);
    let mut verdict = Verdict::default();
    let mismatch = is_mismatch_point(cell.point);
    let received = if mismatch {
        // The original is stored first; the crash hits a changed payload under its identity.
        env.service()
            .ingest_message(&page_envelope(acme, &export, 1, 1, &original))
            .await
            .expect("the original is stored");
        page(&export, cell.rows, 1)
    } else {
        original.clone()
    };
    let envelope = page_envelope(acme, &export, 1, 1, &received);
    let crash = CrashOnce::at(cell.point);
    match env
        .service_with(Arc::new(SystemClock), crash.clone())
        .ingest_message(&envelope)
        .await
    {
        Err(IngestError::InjectedCrash(p)) if p == cell.point => {}
        other => verdict.note = format!("the crash did not happen: {other:?}"),
    }

    let barrier = Barrier::new(cell.workers);
    let runs = (0..cell.workers).map(|_| deliver_until_settled(env, &envelope, &key, &barrier));
    let results = futures_util::future::join_all(runs).await;
    let mut ids: BTreeSet<Vec<String>> = BTreeSet::new();
    for (outcome, deliveries, false_success) in &results {
        verdict.deliveries += deliveries;
        verdict.false_successes += usize::from(*false_success);
        match outcome {
            Some(IngestOutcome::Committed(r) | IngestOutcome::Replayed(r)) if !mismatch => {
                ids.insert(r.observation_ids.iter().map(|i| i.to_string()).collect());
            }
            Some(IngestOutcome::Mismatch(_)) if mismatch => {}
            other => {
                verdict.note = format!("unexpected outcome {other:?}");
            }
        }
    }
    if ids.len() > 1 {
        verdict.note = "workers were told different observation ids".into();
    }

    let record = env.replay(&key).await;
    let stored = env.observations_of(&key).await;
    let distinct: BTreeSet<String> = stored
        .iter()
        .map(|o| o.observation_id.to_string())
        .collect();
    verdict.duplicates = stored.len() - distinct.len();
    verdict.lost = cell.rows.saturating_sub(distinct.len());
    verdict.duplicates += distinct.len().saturating_sub(cell.rows);
    let Some(record) = record else {
        verdict.note = "no replay record".into();
        return verdict;
    };
    if record.state != ReplayState::Committed {
        verdict.note = format!("record left {:?}", record.state);
    }
    // The crashed attempt counted only if it got as far as creating the record.
    let crashed_counted = u32::from(matches!(
        cell.point,
        CrashPoint::AfterChunk(_) | CrashPoint::AfterCommit
    ));
    verdict.attempts = if mismatch {
        // A changed payload is quarantined, never counted on the original's record.
        let entries: Vec<_> = env
            .quarantine()
            .await
            .into_iter()
            .filter(|e| e.delivery_key.as_deref() == Some(key.as_str()))
            .collect();
        if entries.len() != 1 {
            verdict.note = format!("{} quarantine entries", entries.len());
        }
        (1, record.attempts)
    } else {
        (crashed_counted + verdict.deliveries, record.attempts)
    };
    verdict
}

fn point_name(point: CrashPoint) -> String {
    match point {
        CrashPoint::AfterChunk(n) => format!("AfterChunk({n})"),
        other => format!("{other:?}"),
    }
}

fn table(results: &[(Cell, Verdict)]) -> String {
    let mut out = String::new();
    writeln!(
        out,
        "| crash point | rows | redelivery | duplicates | lost | false successes | attempts (expected = counted) | result |"
    )
    .unwrap();
    writeln!(out, "|---|---:|---|---:|---:|---:|---|---|").unwrap();
    for (cell, v) in results {
        let mode = match cell.workers {
            1 => "sequential".to_owned(),
            n => format!("{n} workers at once"),
        };
        let attempts = if v.attempts.0 == v.attempts.1 {
            "yes".to_owned()
        } else {
            format!("no: {} expected, {} counted", v.attempts.0, v.attempts.1)
        };
        let result = if v.clean() {
            "pass".to_owned()
        } else {
            format!("**FAIL** {}", v.note)
        };
        writeln!(
            out,
            "| `{}` | {} | {mode} | {} | {} | {} | {attempts} | {result} |",
            point_name(cell.point),
            cell.rows,
            v.duplicates,
            v.lost,
            v.false_successes
        )
        .unwrap();
    }
    out
}

const BEGIN: &str = "<!-- crash-matrix:begin (generated by crash_matrix::every_crash_point_by_redelivery_mode_by_size) -->";
const END: &str = "<!-- crash-matrix:end -->";

/// Replaces the generated section of `docs/crash-points.md` (appends it the first time).
fn write_doc(section: &str) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/crash-points.md");
    let text = std::fs::read_to_string(&path).expect("docs/crash-points.md");
    let block = format!("{BEGIN}\n{section}{END}");
    let updated = match (text.find(BEGIN), text.find(END)) {
        (Some(begin), Some(end)) => {
            format!("{}{block}{}", &text[..begin], &text[end + END.len()..])
        }
        _ => format!(
            "{}\n## The crash matrix\n\nEvery ingest crash point x redelivery mode x delivery size, as \
             the last passing run of `crash_matrix::every_crash_point_by_redelivery_mode_by_size` \
             found it. Mismatch points crash while quarantining a changed payload under a stored \
             delivery's identity; their attempts are the original record's (a mismatch is never \
             counted on it).\n\n{block}\n",
            text.trim_end()
        ),
    };
    if updated != text {
        std::fs::write(&path, updated).expect("write docs/crash-points.md");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn every_crash_point_by_redelivery_mode_by_size() {
    use futures_util::StreamExt;
    let acme = acme_eu();
    let mut cells = Vec::new();
    for rows in SIZES {
        for point in points(rows) {
            for workers in MODES {
                cells.push(Cell {
                    point,
                    rows,
                    workers,
                });
            }
        }
    }
    let started = std::time::Instant::now();
    let mut results: Vec<(usize, Cell, Verdict)> =
        futures_util::stream::iter(cells.iter().copied().enumerate())
            .map(|(index, cell)| {
                let acme = &acme;
                async move {
                    // A DynamoDB Local database per cell: its transactions slow down as a
                    // database fills (docs/ci.md), and one per size (27 cells of up to 800
                    // observations each in the 400-row one) cost the matrix a third more CPU
                    // and 40 % more time (docs/ci.md).
                    let env = spawn_heavy_env(true, &format!("crashmatrix{index}")).await;
                    env.seed(acme).await;
                    let verdict = run_cell(&env, acme, cell, index).await;
                    // A failing cell's tables are kept to look at.
                    if verdict.clean() {
                        env.delete_tables().await;
                    }
                    (index, cell, verdict)
                }
            })
            .buffer_unordered(PARALLEL_CELLS)
            .collect()
            .await;
    results.sort_by_key(|(index, _, _)| *index);
    let results: Vec<(Cell, Verdict)> = results.into_iter().map(|(_, c, v)| (c, v)).collect();
    let failed: Vec<&(Cell, Verdict)> = results.iter().filter(|(_, v)| !v.clean()).collect();
    println!(
        "crash matrix: {} cells, {} failed, {:.1} s",
        results.len(),
        failed.len(),
        started.elapsed().as_secs_f64()
    );
    let section = table(&results);
    if failed.is_empty() {
        write_doc(&section);
    } else {
        println!("{section}");
    }
    assert!(failed.is_empty(), "failing cells: {failed:#?}");
}
