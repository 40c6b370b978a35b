//! Where and as whom opsctl talks: the endpoint (loopback or https), the token, and the local
//! stack file the defaults come from.

use crate::GlobalOptions;
use serde_json::Value;
use std::path::{Path, PathBuf};

pub const DEFAULT_ENDPOINT: &str = "http://127.0.0.1:8790";
/// The local stack's sample operator token (infra/local/tokens.json); never valid in AWS.
pub const LOCAL_OPERATOR_TOKEN: &str = "local-operator-demo-token";

/// Where and as whom the CLI talks, after defaults are applied.
#[derive(Debug, Clone)]
pub struct Settings {
    pub endpoint: String,
    pub token: String,
    pub json: bool,
    /// The local stack's `.local/stack.json`, when one was found.
    pub stack: Option<Value>,
}

impl Settings {
    /// Applies the defaults: flags, then the environment (`env`), then the local stack file;
    /// the token from `stdin_token` (`--token-stdin`), then `FEEDSAFE_TOKEN`, then, for a
    /// loopback endpoint only, the local sample token. Refuses plain http to anything but a
    /// loopback address (the token would cross the network in clear) and a missing token for
    /// a remote endpoint.
    pub fn resolve(
        global: &GlobalOptions,
        env: impl Fn(&str) -> Option<String>,
        stack: Option<Value>,
        stdin_token: Option<String>,
    ) -> Result<Self, String> {
        let endpoint = global
            .endpoint
            .clone()
            .or_else(|| env("FEEDSAFE_ENDPOINT"))
            .or_else(|| {
                stack
                    .as_ref()
                    .and_then(|s| s["http"].as_str())
                    .map(str::to_owned)
            })
            .unwrap_or_else(|| DEFAULT_ENDPOINT.to_owned());
        let endpoint = endpoint.trim_end_matches('/').to_owned();
        let loopback = check_endpoint(&endpoint)?;
        let token = stdin_token
            .or_else(|| env("FEEDSAFE_TOKEN"))
            .map(|t| t.trim().to_owned())
            .filter(|t| !t.is_empty());
        let token = match token {
            Some(token) => token,
            None if loopback => LOCAL_OPERATOR_TOKEN.to_owned(),
            None => {
                return Err(format!(
                    "no token for {endpoint}: set FEEDSAFE_TOKEN or pipe it to --token-stdin"
                ))
            }
        };
        Ok(Self {
            endpoint,
            token,
            json: global.json,
            stack,
        })
    }
}

/// `Ok(true)` for a loopback endpoint (`localhost`, 127.0.0.0/8, `::1`), `Ok(false)` for an
/// https one elsewhere; plain http elsewhere (or anything else) is refused.
pub fn check_endpoint(endpoint: &str) -> Result<bool, String> {
    let (scheme, rest) = endpoint
        .split_once("://")
        .ok_or_else(|| format!("endpoint {endpoint:?} is not an http(s) URL"))?;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let authority = authority.rsplit_once('@').map_or(authority, |(_, a)| a);
    let host = if let Some(bracketed) = authority.strip_prefix('[') {
        bracketed.split(']').next().unwrap_or_default()
    } else {
        authority.split(':').next().unwrap_or_default()
    };
    let loopback = host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    match scheme.to_ascii_lowercase().as_str() {
        "https" => Ok(loopback),
        "http" if loopback => Ok(true),
        "http" => Err(format!(
            "refusing plain http to {host}: the token would cross the network in clear; \
             use https (plain http is for the local stack on a loopback address only)"
        )),
        other => Err(format!("endpoint scheme {other:?} is not http(s)")),
    }
}

/// The repository this opsctl was built from (`infra/opsctl/../..`).
pub fn repository_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join("..")
}

/// `.local/stack.json` from `FEEDSAFE_STACK_FILE`, else the one in `repository` (the
/// repository opsctl was built from), if there is one. Never one found by walking up from the
/// current directory: a `.local/stack.json` planted in a parent folder would name the endpoint
/// the token is sent to.
pub fn find_stack_file(repository: &Path, env: impl Fn(&str) -> Option<String>) -> Option<PathBuf> {
    if let Some(path) = env("FEEDSAFE_STACK_FILE") {
        return Some(PathBuf::from(path));
    }
    Some(repository.join(".local").join("stack.json")).filter(|p| p.is_file())
}

pub fn read_stack_file(path: &Path) -> Option<Value> {
    serde_json::from_slice(&std::fs::read(path).ok()?).ok()
}
