//! Deployable as written: required parameters, samconfig profiles, log groups, alarms.

use super::*;

/// Parameters a deploy must be given: no default, and a pattern that refuses an empty or
/// placeholder value, so CloudFormation stops with "Parameters: [...] must have values".
const REQUIRED_PARAMETERS: [&str; 2] = ["JwtIssuer", "AlarmTopicArn"];

fn samconfig() -> String {
    let path = template_spec::template_path().with_file_name("samconfig.toml");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The `parameter_overrides` entries of one `[<profile>.deploy.parameters]` table, as
/// `(name, value)` with the quotes of the value removed.
fn deploy_overrides(samconfig: &str, profile: &str) -> Vec<(String, String)> {
    let header = format!("[{profile}.deploy.parameters]");
    let table = samconfig
        .split_once(&header)
        .unwrap_or_else(|| panic!("samconfig.toml has no {header}"))
        .1;
    let table = table.split("\n[").next().unwrap_or_default();
    let Some((_, list)) = table.split_once("parameter_overrides") else {
        return Vec::new();
    };
    let list = list.split_once('[').expect("a list").1;
    let list = list.split_once(']').expect("a closed list").0;
    list.lines()
        .map(|line| line.split('#').next().unwrap_or_default().trim())
        .map(|line| {
            line.trim_end_matches(',')
                .trim_matches(|c| c == '"' || c == '\'')
        })
        .filter(|entry| !entry.is_empty())
        .map(|entry| {
            let (name, value) = entry.split_once('=').expect("Name=value");
            (
                name.to_owned(),
                value.trim_matches(|c| c == '"' || c == '\'').to_owned(),
            )
        })
        .collect()
}

#[test]
fn required_parameters_have_no_default_and_refuse_an_empty_value() {
    let document = template_document();
    for name in REQUIRED_PARAMETERS {
        let parameter = &document["Parameters"][name];
        assert!(!parameter.is_null(), "no parameter {name}");
        assert!(
            parameter.get("Default").is_none(),
            "{name} has a Default: a deploy without it would not stop"
        );
        let pattern = parameter["AllowedPattern"]
            .as_str()
            .unwrap_or_else(|| panic!("{name}: no AllowedPattern"));
        assert!(
            !pattern.contains("(|") && !pattern.contains("|)") && pattern.starts_with('^'),
            "{name}: AllowedPattern {pattern} lets an empty value through"
        );
        assert!(
            parameter["ConstraintDescription"].as_str().is_some(),
            "{name}: no ConstraintDescription (the message a wrong value gets)"
        );
    }
}

#[test]
fn the_prod_profile_has_no_placeholder_issuer_and_no_empty_alarm_topic() {
    let config = samconfig();
    for profile in ["default", "prod"] {
        for (name, value) in deploy_overrides(&config, profile) {
            assert!(
                !value.contains("example.com") && !value.contains("example.org"),
                "[{profile}] {name}={value} is a placeholder"
            );
            if REQUIRED_PARAMETERS.contains(&name.as_str()) {
                assert!(!value.is_empty(), "[{profile}] {name} is empty");
            }
        }
    }
    let prod = deploy_overrides(&config, "prod");
    for name in REQUIRED_PARAMETERS {
        assert!(
            !prod.iter().any(|(n, _)| n == name),
            "[prod] sets {name}: it is given per deploy (--parameter-overrides), never a file value"
        );
    }
    // Every override names a parameter of the template (a removed one would fail the deploy).
    let document = template_document();
    for profile in ["default", "prod"] {
        for (name, _) in deploy_overrides(&config, profile) {
            assert!(
                !document["Parameters"][name.as_str()].is_null(),
                "[{profile}] overrides {name}, which template.yaml does not declare"
            );
        }
    }
    // `sam build` must not hash target/ and .local/ (CodeUri: . is the whole repository).
    for line in config
        .lines()
        .filter(|l| l.trim_start().starts_with("cached"))
    {
        assert_eq!(
            line.replace(' ', ""),
            "cached=false",
            "samconfig.toml: {line}"
        );
    }
}

#[test]
fn the_unused_dedup_horizon_is_gone() {
    let document = template_document();
    assert!(
        document["Parameters"]["DedupHorizonDays"].is_null(),
        "DedupHorizonDays: no code reads DEDUP_HORIZON_DAYS (each connector's configuration decides)"
    );
    assert!(
        document["Globals"]["Function"]["Environment"]["Variables"]["DEDUP_HORIZON_DAYS"].is_null()
    );
}

#[test]
fn the_ingest_backlog_and_the_failure_metrics_raise_alarms() {
    let document = template_document();
    let oldest = alarms_on(&document, "AWS/SQS", "ApproximateAgeOfOldestMessage");
    assert!(
        oldest
            .iter()
            .any(|(_, a)| alarm_dimension(a, "QueueName").and_then(get_att)
                == Some(("IngestQueue".to_owned(), "QueueName".to_owned()))),
        "no ApproximateAgeOfOldestMessage alarm on IngestQueue"
    );
    // The EMF metrics: namespace Feedsafe, dimension Service (shared/src/lambda/metrics.rs),
    // ProjectionFailures from the projector (lambda/stream.rs), TransientFailures from ingest
    // (lambda/sqs.rs).
    for (metric, service) in [
        ("ProjectionFailures", "projector"),
        ("TransientFailures", "ingest"),
    ] {
        let alarms = alarms_on(&document, "Feedsafe", metric);
        assert!(
            alarms.iter().any(|(_, a)| {
                alarm_dimension(a, "Service").and_then(serde_norway::Value::as_str) == Some(service)
                    && a["Properties"]["Statistic"].as_str() == Some("Sum")
            }),
            "no Sum alarm on Feedsafe/{metric} with Service={service}"
        );
    }
    for (id, alarm) in resources_of_type(&document, "AWS::CloudWatch::Alarm") {
        for actions in ["AlarmActions", "OKActions"] {
            let targets = one_or_many(&alarm["Properties"][actions]);
            assert!(
                targets.len() == 1 && ref_target(targets[0]) == Some("AlarmTopicArn"),
                "{id}: {actions} must notify AlarmTopicArn"
            );
        }
    }
}
