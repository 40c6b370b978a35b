//! Execution roles and their policies.

use super::*;

#[test]
fn query_function_is_read_only_in_the_template() {
    let document = template_document();
    let functions = serverless_functions(&document);
    let (id, query) = functions
        .iter()
        .find(|(id, _)| id == "QueryFunction")
        .expect("QueryFunction in template.yaml");
    let actions = allowed_actions(&document, id, query);
    assert!(!actions.is_empty(), "{id}: no policy statements found");
    for action in actions
        .iter()
        .filter(|a| !TELEMETRY_ACTIONS.contains(&a.as_str()))
    {
        assert!(
            !action.starts_with("s3:") && !action.starts_with("sqs:") && !action.contains('*'),
            "{id}: {action} is not allowed on the read path"
        );
        assert!(
            QUERY_READ_ACTIONS.contains(&action.as_str()),
            "{id}: {action} is not one of {QUERY_READ_ACTIONS:?}"
        );
    }
    for statement in policy_statements(&document, id, query) {
        assert_eq!(
            statement["Effect"].as_str(),
            Some("Allow"),
            "{id}: unexpected statement {statement:?}"
        );
        assert!(
            statement.get("NotResource").is_none(),
            "{id}: NotResource grants everything else"
        );
        let resources = one_or_many(&statement["Resource"]);
        assert!(!resources.is_empty(), "{id}: statement without Resource");
        let star_only = one_or_many(&statement["Action"])
            .iter()
            .all(|a| a.as_str().is_some_and(|a| STAR_ONLY_ACTIONS.contains(&a)));
        assert!(
            star_only || !resources.iter().any(|r| is_wildcard_resource(r)),
            "{id}: Resource \"*\" in {statement:?}"
        );
    }

    // Every function is a cargo-lambda build of a workspace binary on the Globals runtime.
    let globals = &document["Globals"]["Function"];
    assert_eq!(globals["Runtime"].as_str(), Some("provided.al2023"));
    assert_eq!(
        one_or_many(&globals["Architectures"])
            .iter()
            .map(|a| a.as_str())
            .collect::<Vec<_>>(),
        vec![Some("arm64")]
    );
    assert!(functions.len() >= 4, "{functions:?}");
    let root = template_spec::template_path()
        .parent()
        .expect("template directory")
        .to_path_buf();
    for (id, function) in &functions {
        assert_eq!(
            function["Metadata"]["BuildMethod"].as_str(),
            Some("rust-cargolambda"),
            "{id}: BuildMethod"
        );
        let binary = function["Metadata"]["BuildProperties"]["Binary"]
            .as_str()
            .unwrap_or_else(|| panic!("{id}: BuildProperties.Binary missing"));
        assert!(
            root.join("functions")
                .join(binary)
                .join("Cargo.toml")
                .is_file(),
            "{id}: no crate functions/{binary}"
        );
        for inherited in ["Runtime", "Architectures"] {
            assert!(
                function["Properties"].get(inherited).is_none(),
                "{id}: {inherited} must come from Globals"
            );
        }
    }
}

/// The permissions after the SAM transform (what SAM adds for event sources, tracing and logs
/// is invisible above): `infra/template/check_transformed.py` with the `samtranslator` of
/// `.local/tools/sam-venv`, which `scripts/check-template` installs (and CI runs). Skipped, with
/// a message, when the venv is missing.
#[test]
fn transformed_template_grants_only_what_the_code_calls() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let python = root.join(".local/tools/sam-venv/bin/python");
    if !python.is_file() {
        eprintln!(
            "skipped: {} is missing (scripts/check-template --no-build installs it)",
            python.display()
        );
        return;
    }
    let output = std::process::Command::new(&python)
        .arg(root.join("infra/template/check_transformed.py"))
        .arg("--template")
        .arg(template_spec::template_path())
        .arg("--root")
        .arg(&root)
        .output()
        .expect("run check_transformed.py");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(output.status.success(), "{text}");
}
