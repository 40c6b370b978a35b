//! The bench's baseline (docs/benchmarks.md, "Cost per delivery"): the same deliveries through a
//! Python Lambda handler made idempotent with AWS Lambda Powertools
//! (`tests/baseline/powertools_baseline.py`), on the same DynamoDB Local in the same run, in a
//! database of its own (its own access key).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// One delivery handed to the baseline, in order.
#[derive(Serialize)]
pub struct BaselineInput {
    pub rows: usize,
    pub kind: &'static str,
    /// The queue message body feedsafe's ingest function received.
    pub envelope: String,
}

/// What the baseline measured for one delivery.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BaselineCase {
    pub rows: usize,
    pub kind: String,
    pub outcome: String,
    pub requests: BTreeMap<String, usize>,
    /// As DynamoDB Local reported them (`ReturnConsumedCapacity: TOTAL`): for the plain
    /// PutItem, UpdateItem and BatchWriteItem calls the baseline makes, AWS's rules.
    pub write_units: f64,
    pub read_units: f64,
    pub cpu_ms: f64,
    pub wall_ms: f64,
}

impl BaselineCase {
    pub fn total_requests(&self) -> usize {
        self.requests.values().sum()
    }
}

/// The Python interpreter to run the baseline with: `FEEDSAFE_BASELINE_PYTHON` (scripts/bench
/// sets it to the engines' venv, with aws-lambda-powertools installed).
pub fn baseline_python() -> Option<PathBuf> {
    std::env::var_os("FEEDSAFE_BASELINE_PYTHON").map(PathBuf::from)
}

/// Runs the baseline over `inputs` against the DynamoDB Local the environment names. Fails
/// loudly: a bench whose baseline did not run says so instead of printing no ratio.
pub fn run_baseline(
    python: &Path,
    inputs: &[BaselineInput],
    work_dir: &Path,
) -> anyhow::Result<Vec<BaselineCase>> {
    let endpoint = std::env::var("FEEDSAFE_DYNAMODB_ENDPOINT")
        .map_err(|_| anyhow::anyhow!("FEEDSAFE_DYNAMODB_ENDPOINT is not set"))?;
    std::fs::create_dir_all(work_dir)?;
    let input = work_dir.join("baseline-input.json");
    let output = work_dir.join("baseline-output.json");
    std::fs::write(&input, serde_json::to_vec(inputs)?)?;
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("baseline/powertools_baseline.py");
    let status = Command::new(python)
        .arg(&script)
        .arg(&input)
        .arg(&output)
        .env("AWS_ENDPOINT_URL_DYNAMODB", endpoint)
        // DynamoDB Local keeps one database per access key: the baseline starts as empty as
        // feedsafe's bench database did.
        .env("AWS_ACCESS_KEY_ID", "benchbaseline")
        .env("AWS_SECRET_ACCESS_KEY", "benchbaseline")
        .env("AWS_REGION", "us-east-1")
        .env("AWS_DEFAULT_REGION", "us-east-1")
        .env("POWERTOOLS_SERVICE_NAME", "baseline")
        .status()?;
    anyhow::ensure!(
        status.success(),
        "{} exited with {status}",
        script.display()
    );
    Ok(serde_json::from_slice(&std::fs::read(&output)?)?)
}
