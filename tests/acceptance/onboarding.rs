//! `docs/onboarding.md`, followed literally: every command of its `sh` blocks is run as written,
//! in order, against a local stack (`opsctl` through its library, `local-stack drop` through
//! the function the command calls, `curl` as an HTTP request). A command the test does not know
//! fails it, so the guide cannot drift from what works.

use acceptance::*;
use serde_json::{json, Value};
use std::path::PathBuf;

/// The commands of the guide's `sh` blocks, in order.
fn commands() -> Vec<String> {
    let guide = std::fs::read_to_string(local_stack::repo_root().join("docs/onboarding.md"))
        .expect("docs/onboarding.md");
    let mut inside = false;
    let mut out = Vec::new();
    for line in guide.lines() {
        match line.trim() {
            "```sh" => inside = true,
            "```" => inside = false,
            command if inside && !command.is_empty() => out.push(command.to_owned()),
            _ => {}
        }
    }
    out
}

/// Words as a shell splits them (single quotes only; the guide uses no other quoting).
fn words(command: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut quoted = false;
    for c in command.chars() {
        match c {
            '\'' => quoted = !quoted,
            ' ' if !quoted => {
                if !word.is_empty() {
                    out.push(std::mem::take(&mut word));
                }
            }
            other => word.push(other),
        }
    }
    if !word.is_empty() {
        out.push(word);
    }
    out
}

/// A path of the repository, as the guide's commands name them from its root.
fn in_repo(word: &str) -> String {
    let path: PathBuf = local_stack::repo_root().join(word);
    if word.starts_with("tests/") && path.exists() {
        path.display().to_string()
    } else {
        word.to_owned()
    }
}

async fn opsctl(stack: &local_stack::Stack, args: &[String]) -> String {
    let args: Vec<String> = args.iter().map(|a| in_repo(a)).collect();
    let invocation = opsctl::parse_args(&args).unwrap_or_else(|e| panic!("{args:?}: {e}"));
    let settings = opsctl::Settings {
        endpoint: stack.base_url(),
        token: LOCAL_OPERATOR.to_owned(),
        json: false,
        stack: None,
    };
    tokio::task::spawn_blocking(move || {
        let mut out = Vec::new();
        opsctl::run(&invocation.command, &settings, &mut out)
            .unwrap_or_else(|e| panic!("opsctl {args:?}: {e}"));
        String::from_utf8(out).unwrap()
    })
    .await
    .unwrap()
}

/// `curl -s -H 'Authorization: Bearer TOKEN' URL` against the test's stack, once the offers
/// route has an offer to show (the drop before it is ingested asynchronously).
async fn curl(stack: &local_stack::Stack, args: &[String]) -> Value {
    let [silent, h, header, url] = args else {
        panic!("curl {args:?}: the test knows `curl -s -H HEADER URL` only")
    };
    assert_eq!((silent.as_str(), h.as_str()), ("-s", "-H"));
    let token = header
        .strip_prefix("Authorization: Bearer ")
        .expect("a bearer token");
    let url = url.replace("http://127.0.0.1:8790", &stack.base_url());
    for _ in 0..300 {
        let (status, body) = call("GET", url.clone(), Some(token), Value::Null).await;
        assert_eq!(status, 200, "{body}");
        if body["offers"].as_array().is_some_and(|o| !o.is_empty()) {
            return body;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    panic!("{url} showed no offer within 60 s");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_onboarding_guide_works_as_written() {
    let env = spawn_env(true).await;
    let stack = spawn_stack(&env, None).await;
    let stack_file = json!({
        "dynamodb_endpoint": engine_endpoints().0,
        "moto_endpoint": engine_endpoints().1,
        "buckets": { "RawBucket": env.bucket },
    });
    let mut offers = Value::Null;
    let mut outputs = Vec::new();
    for command in commands() {
        let words = words(&command);
        let output = match words
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>()
            .as_slice()
        {
            // The test runs its own stack.
            ["infra/local.sh"] => String::new(),
            ["cargo", "run", "-q", "-p", "opsctl", "--", ..] => opsctl(&stack, &words[6..]).await,
            ["cargo", "run", "-q", "-p", "local-stack", "--", "drop", connector, file] => {
                local_stack::definitions::drop_file(
                    &stack_file,
                    connector,
                    &PathBuf::from(in_repo(file)),
                )
                .await
                .unwrap()
            }
            ["curl", ..] => {
                offers = curl(&stack, &words[1..]).await;
                offers.to_string()
            }
            _ => panic!("docs/onboarding.md runs {command:?}, which this test does not follow"),
        };
        outputs.push((command, output));
    }
    let ran: Vec<&str> = outputs.iter().map(|(c, _)| c.as_str()).collect();
    assert_eq!(ran.len(), 7, "{ran:#?}");
    let said = |needle: &str| outputs.iter().any(|(_, out)| out.contains(needle));
    assert!(
        said("outcome      stored"),
        "the preview stores the sample: {outputs:#?}"
    );
    assert!(
        said("outcome    created"),
        "the put creates the connector: {outputs:#?}"
    );
    assert!(
        said("version         1"),
        "get shows version 1: {outputs:#?}"
    );
    let offer = &offers["offers"][0];
    assert_eq!(offer["connector"], "lieferant-de");
    assert_eq!(offer["quantity"], 1500);
    assert_eq!(offer["price"], "0.42");
    assert_eq!(offer["currency"], "EUR");
    assert_eq!(offer["observed_at"], "2026-11-29T07:00:00Z");
}
