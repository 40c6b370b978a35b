#!/usr/bin/env python3
"""Least privilege checked on the template *after* the SAM transform.

The Rust template tests read template.yaml as written; SAM then adds what they cannot see:
managed policies for event sources (AWSLambdaSQSQueueExecutionRole,
AWSLambdaDynamoDBExecutionRole), tracing (AWSXrayWriteOnlyAccess) and logs
(AWSLambdaBasicExecutionRole), all with `Resource: "*"`. This script runs samtranslator (the
one SAM CLI ships; scripts/check-template installs it into .local/tools/sam-venv) offline, with
a fixed managed-policy map instead of an IAM ListPolicies call, and checks every IAM role and
role policy of the transformed template:

  (a) no managed policy attached to any role (ALLOWED_MANAGED_POLICIES is empty);
  (b) no statement on Resource "*" except for actions with no resource-level permission
      (STAR_ONLY_ACTIONS, each with its reason); no wildcard action, no NotAction/NotResource;
  (c) every granted action is one the function's code calls (FUNCTION_CALLS, itself checked
      against the SDK calls grepped from the Rust sources) or one the platform performs with
      the function's role for something the template configures (event source polling, failure
      destinations, tracing, its own log group; KMS and ListBucket implied by S3 calls), and
      every call in FUNCTION_CALLS is granted;
  (d) the query function's role is read-only;
  (e) scoping: dynamodb:LeadingKeys where LEADING_KEYS says the key design allows it, the KMS
      key policy names exactly the roles that use the key, no role writes under drops/ and the
      ingest function writes only raw/ and rejected/, s3:ListBucket (with an s3:prefix
      condition) for the ops function so a missing artifact answers 404, logs only to the
      function's own log group.

Usage: check_transformed.py [--template template.yaml] [--root REPO] [--print]
Exit status 0 when clean, 1 with one line per finding otherwise.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

# --- policy tables ---------------------------------------------------------------------------

# Managed policies a role may carry. None: every permission is an inline statement here.
ALLOWED_MANAGED_POLICIES: dict[str, str] = {}

# Actions that cannot be scoped to a resource (Service Authorization Reference: no resource
# type for the action), so `Resource: "*"` is their only form.
STAR_ONLY_ACTIONS = {
    "xray:PutTraceSegments": "X-Ray has no resource-level permissions for trace segment writes",
    "xray:PutTelemetryRecords": "X-Ray has no resource-level permissions for telemetry writes",
    "dynamodb:ListStreams": "ListStreams lists the account's streams; it has no resource type",
}

# SDK operation (snake_case, as called in Rust) -> the IAM actions it is authorised by. Only
# operations whose action is not simply service:PascalCase need an entry in IAM_OVERRIDES.
SDK_SERVICES = {
    "dynamodb": [
        "put_item", "get_item", "update_item", "delete_item", "query", "scan",
        "batch_get_item", "batch_write_item", "transact_write_items", "transact_get_items",
        "describe_table",
    ],
    "s3": [
        "put_object", "get_object", "head_object", "delete_object", "list_objects_v2",
        "copy_object",
    ],
    "sqs": [
        "send_message", "send_message_batch", "receive_message", "delete_message",
        "change_message_visibility", "get_queue_attributes",
    ],
    "secretsmanager": ["get_secret_value"],
    "lambda": ["invoke"],
}
IAM_OVERRIDES = {
    # TransactWriteItems is authorised per contained action.
    "dynamodb:transact_write_items": [
        "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem",
        "dynamodb:ConditionCheckItem",
    ],
    "dynamodb:transact_get_items": ["dynamodb:GetItem"],
    # HeadObject is authorised by s3:GetObject.
    "s3:head_object": ["s3:GetObject"],
    "s3:list_objects_v2": ["s3:ListBucket"],
    "s3:copy_object": ["s3:GetObject", "s3:PutObject"],
    "lambda:invoke": ["lambda:InvokeFunction"],
}

# What each function's code calls, by IAM action. Attributing calls to one binary from the
# shared crate by grep alone is not possible (every binary links all of shared/src), so this
# table is kept by hand and checked against the grep: every action listed here must be called
# somewhere in the Rust sources (see code_actions()).
FUNCTION_CALLS = {
    "IngestFunction": {
        "dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:PutItem", "dynamodb:UpdateItem",
        "dynamodb:ConditionCheckItem",
        "s3:PutObject", "s3:GetObject", "s3:GetObjectVersion",
    },
    "ProjectorFunction": {
        "dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:Query", "dynamodb:PutItem",
        "dynamodb:UpdateItem", "dynamodb:BatchWriteItem", "dynamodb:DeleteItem",
    },
    "QueryFunction": {"dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:Query"},
    "OpsFunction": {
        "dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:Query", "dynamodb:PutItem",
        "dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:ConditionCheckItem",
        "s3:GetObject", "s3:PutObject", "sqs:SendMessage", "lambda:InvokeFunction",
        "secretsmanager:GetSecretValue",
    },
    "SweeperFunction": {
        "dynamodb:GetItem", "dynamodb:Query", "dynamodb:PutItem", "dynamodb:UpdateItem",
        "dynamodb:DeleteItem",
    },
    "WebhookFunction": {
        "dynamodb:GetItem", "dynamodb:PutItem", "sqs:SendMessage", "s3:PutObject",
        "secretsmanager:GetSecretValue",
    },
    "PollerFunction": {
        "dynamodb:GetItem", "dynamodb:UpdateItem", "dynamodb:Query", "sqs:SendMessage",
        "s3:PutObject", "lambda:InvokeFunction",
        "secretsmanager:GetSecretValue",
    },
    "DropsFunction": {
        "dynamodb:GetItem", "sqs:SendMessage", "s3:GetObject", "s3:GetObjectVersion",
    },
}

# Partition-key prefixes (docs/item-schema.md) a function's statements on a table must be
# limited to with dynamodb:LeadingKeys (each statement to some of them). Functions not listed touch so many entity families of
# the single-table design that a prefix list would restrict nothing
# (docs/adr/0041-least-privilege-after-the-sam-transform.md).
LEADING_KEYS = {
    ("WebhookFunction", "EvidenceTable"): {"CONNECTOR#*", "SIGNING_SECRET#*"},
    ("DropsFunction", "EvidenceTable"): {"CONNECTOR#*"},
    ("PollerFunction", "EvidenceTable"): {"CONNECTOR#*", "RUN#*", "SCHEDULE#*", "HEALTH"},
    ("QueryFunction", "ProjectionTable"): {"ITEM#*"},
}

# Where each function may put objects in the raw bucket; nobody but suppliers writes drops/
# (an object there triggers the drops function).
PUT_PREFIXES = {
    "IngestFunction": {"raw/*", "rejected/*"},
    "OpsFunction": {"claims/*", "raw/verifications/*"},
    "WebhookFunction": {"claims/*"},
    "PollerFunction": {"claims/*"},
}

# Functions that must see a missing artifact as 404 (s3:ListBucket), and the prefixes.
LIST_PREFIXES = {"OpsFunction": {"raw/*", "rejected/*"}}

READ_ONLY_FUNCTIONS = {"QueryFunction"}
WRITE_VERBS = re.compile(r"^(Put|Update|Delete|Write|BatchWrite|Send|Create|Transact|Condition)")
# Telemetry of the function itself, not data writes.
TELEMETRY_ACTIONS = {
    "logs:CreateLogStream", "logs:PutLogEvents", "xray:PutTraceSegments",
    "xray:PutTelemetryRecords",
}

# Fixed answers for the managed-policy names SAM may look up (sam validate asks IAM).
MANAGED_POLICY_MAP = {
    name: f"arn:aws:iam::aws:policy/{path}{name}"
    for path, name in [
        ("service-role/", "AWSLambdaBasicExecutionRole"),
        ("service-role/", "AWSLambdaSQSQueueExecutionRole"),
        ("service-role/", "AWSLambdaDynamoDBExecutionRole"),
        ("service-role/", "AWSLambdaRole"),
        ("", "AWSXrayWriteOnlyAccess"),
        ("", "AWSLambdaExecute"),
        ("", "AmazonDynamoDBReadOnlyAccess"),
        ("", "AmazonS3ReadOnlyAccess"),
    ]
}


# --- transform -------------------------------------------------------------------------------


def transform(template_path: Path) -> dict:
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    from samtranslator.model.exceptions import InvalidDocumentException
    from samtranslator.parser import parser
    from samtranslator.translator.translator import Translator
    from samtranslator.yaml_helper import yaml_parse

    document = yaml_parse(template_path.read_text())
    # As `sam validate` does: a local CodeUri (what `sam build` uploads) becomes an S3 URI.
    for resource in document.get("Resources", {}).values():
        props = resource.get("Properties") or {}
        if resource.get("Type") == "AWS::Serverless::Function" and not str(
                props.get("CodeUri", "")).startswith("s3://"):
            props["CodeUri"] = "s3://offline-check/function.zip"
    translator = Translator(managed_policy_map=MANAGED_POLICY_MAP, sam_parser=parser.Parser())
    try:
        return translator.translate(
            sam_template=document,
            parameter_values={"AWS::Region": "us-east-1", "AWS::Partition": "aws"},
            get_managed_policy_map=lambda: MANAGED_POLICY_MAP,
        )
    except InvalidDocumentException as error:
        causes = "; ".join(str(cause) for cause in error.causes)
        raise SystemExit(f"{template_path}: SAM transform failed: {error} {causes}") from error


# --- helpers ---------------------------------------------------------------------------------


def as_list(value) -> list:
    if value is None:
        return []
    return value if isinstance(value, list) else [value]


def render(value) -> str:
    """An ARN expression as text: `${X.Arn}`, `${X}`, Sub templates kept, Joins concatenated."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and len(value) == 1:
        (key, arg), = value.items()
        if key == "Fn::GetAtt":
            parts = arg if isinstance(arg, list) else arg.split(".", 1)
            return "${" + ".".join(str(p) for p in parts) + "}"
        if key == "Ref":
            return "${" + str(arg) + "}"
        if key == "Fn::Sub":
            return arg if isinstance(arg, str) else str(arg[0])
        if key == "Fn::Join":
            return str(arg[0]).join(render(part) for part in arg[1])
        if key == "Fn::If":
            return render(arg[1])
    return repr(value)


def role_of(function: dict) -> str | None:
    role = function.get("Properties", {}).get("Role")
    if isinstance(role, dict) and "Fn::GetAtt" in role:
        target = role["Fn::GetAtt"]
        return target[0] if isinstance(target, list) else target.split(".")[0]
    return None


def code_actions(root: Path) -> dict[str, list[str]]:
    """IAM action -> where the Rust sources call an SDK operation authorised by it."""
    found: dict[str, list[str]] = {}
    sources = list((root / "shared" / "src").rglob("*.rs"))
    sources += list((root / "functions").glob("*/src/**/*.rs"))
    for path in sources:
        text = path.read_text()
        for service, operations in SDK_SERVICES.items():
            for operation in operations:
                for match in re.finditer(r"\.%s\(\)" % operation, text):
                    line = text.count("\n", 0, match.start()) + 1
                    key = f"{service}:{operation}"
                    pascal = "".join(w.capitalize() for w in operation.split("_"))
                    actions = IAM_OVERRIDES.get(key, [f"{service}:{pascal}"])
                    # A GetObject that names a version is authorised by s3:GetObjectVersion.
                    if key == "s3:get_object":
                        window = text[match.start(): match.start() + 400]
                        if "version_id(" in window:
                            actions = actions + ["s3:GetObjectVersion"]
                    where = f"{path.relative_to(root)}:{line} .{operation}()"
                    for action in actions:
                        found.setdefault(action, []).append(where)
    return found


# --- checks ----------------------------------------------------------------------------------


class Checker:
    def __init__(self, template: dict, root: Path):
        self.t = template
        self.resources = template.get("Resources", {})
        self.root = root
        self.findings: list[str] = []

    def fail(self, text: str) -> None:
        self.findings.append(text)

    def of_type(self, kind: str) -> dict[str, dict]:
        return {k: v for k, v in self.resources.items() if v.get("Type") == kind}

    def role_statements(self, role_id: str) -> list[tuple[str, dict]]:
        """(policy name, statement) of a role's inline policies and the policy resources
        attached to it."""
        out = []
        role = self.resources[role_id]["Properties"]
        for policy in as_list(role.get("Policies")):
            for statement in as_list(policy["PolicyDocument"].get("Statement")):
                out.append((f"{role_id}/{policy.get('PolicyName')}", statement))
        for pid, policy in self.resources.items():
            if policy.get("Type") not in ("AWS::IAM::Policy", "AWS::IAM::RolePolicy",
                                          "AWS::IAM::ManagedPolicy"):
                continue
            props = policy["Properties"]
            roles = as_list(props.get("Roles")) + as_list(props.get("RoleName"))
            if any(render(r) == "${%s}" % role_id for r in roles):
                for statement in as_list(props["PolicyDocument"].get("Statement")):
                    out.append((pid, statement))
        return out

    def run(self) -> list[str]:
        functions = self.of_type("AWS::Lambda::Function")
        roles = self.of_type("AWS::IAM::Role")
        called = code_actions(self.root)
        self.check_table_against_code(called)
        function_roles = {}
        for fid, function in sorted(functions.items()):
            role = role_of(function)
            if role is None or role not in roles:
                self.fail(f"{fid}: execution role is not an AWS::IAM::Role of the template")
                continue
            function_roles[fid] = role
        for rid, role in sorted(roles.items()):
            for arn in as_list(role["Properties"].get("ManagedPolicyArns")):
                if render(arn) not in ALLOWED_MANAGED_POLICIES:
                    self.fail(f"{rid}: managed policy {render(arn)} attached (grants on "
                              f"Resource \"*\"; use an inline, scoped statement)")
            for name, statement in self.role_statements(rid):
                self.check_statement(name, statement)
        for fid, rid in sorted(function_roles.items()):
            self.check_function(fid, functions[fid], rid)
        self.check_key_policy(function_roles)
        return self.findings

    def check_table_against_code(self, called: dict[str, list[str]]) -> None:
        for fid, actions in sorted(FUNCTION_CALLS.items()):
            for action in sorted(actions):
                if action not in called:
                    self.fail(f"FUNCTION_CALLS[{fid}] lists {action}, but no SDK call in "
                              f"shared/src or functions/ is authorised by it")

    def check_statement(self, name: str, statement: dict) -> None:
        if statement.get("Effect") != "Allow":
            return
        if "NotAction" in statement or "NotResource" in statement:
            self.fail(f"{name}: NotAction/NotResource grant everything else")
        actions = [str(a) for a in as_list(statement.get("Action"))]
        resources = [render(r) for r in as_list(statement.get("Resource"))]
        for action in actions:
            if "*" in action:
                self.fail(f"{name}: wildcard action {action}")
        if any(r.strip() == "*" for r in resources):
            for action in actions:
                if action not in STAR_ONLY_ACTIONS:
                    self.fail(f"{name}: {action} on Resource \"*\" (it supports resource-level "
                              f"permissions; scope it)")

    def granted(self, rid: str) -> list[tuple[str, list[str], dict]]:
        """(action, rendered resources, condition) of every Allow statement of a role."""
        out = []
        for _, statement in self.role_statements(rid):
            if statement.get("Effect") != "Allow":
                continue
            resources = [render(r) for r in as_list(statement.get("Resource"))]
            for action in as_list(statement.get("Action")):
                out.append((str(action), resources, statement.get("Condition") or {}))
        return out

    def platform_actions(self, fid: str, function: dict) -> dict[str, set[str]]:
        """Actions the Lambda service performs with the function's role, from the transformed
        template: event source mappings, failure destinations, tracing, logs."""
        allowed: dict[str, set[str]] = {}

        def add(actions, resources):
            for action in actions:
                allowed.setdefault(action, set()).update(resources)

        for mapping in self.of_type("AWS::Lambda::EventSourceMapping").values():
            props = mapping["Properties"]
            if render(props.get("FunctionName")) != "${%s}" % fid:
                continue
            source = render(props.get("EventSourceArn"))
            if source.endswith(".StreamArn}"):
                add(["dynamodb:DescribeStream", "dynamodb:GetRecords",
                     "dynamodb:GetShardIterator"], {source})
                add(["dynamodb:ListStreams"], {"*"})
            else:
                add(["sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes"],
                    {source})
            destination = props.get("DestinationConfig", {}).get("OnFailure", {})
            if destination.get("Destination"):
                add(["sqs:SendMessage"], {render(destination["Destination"])})
        for config in self.of_type("AWS::Lambda::EventInvokeConfig").values():
            props = config["Properties"]
            if render(props.get("FunctionName")) != "${%s}" % fid:
                continue
            destination = props.get("DestinationConfig", {}).get("OnFailure", {})
            if destination.get("Destination"):
                add(["sqs:SendMessage"], {render(destination["Destination"])})
        props = function["Properties"]
        if props.get("TracingConfig", {}).get("Mode") == "Active":
            add(["xray:PutTraceSegments", "xray:PutTelemetryRecords"], {"*"})
        group = props.get("LoggingConfig", {}).get("LogGroup")
        group_id = render(group)[2:-1] if group is not None else None
        if group_id in self.resources:
            add(["logs:CreateLogStream", "logs:PutLogEvents"], {"${%s.Arn}" % group_id})
        else:
            self.fail(f"{fid}: LoggingConfig.LogGroup is not a log group of the template")
        return allowed

    def check_function(self, fid: str, function: dict, rid: str) -> None:
        calls = FUNCTION_CALLS.get(fid)
        if calls is None:
            self.fail(f"{fid}: no FUNCTION_CALLS entry (what does its code call?)")
            return
        platform = self.platform_actions(fid, function)
        granted = self.granted(rid)
        granted_actions = {a for a, _, _ in granted}
        s3_reads = "s3:GetObject" in granted_actions
        s3_writes = "s3:PutObject" in granted_actions
        for action, resources, condition in granted:
            if action in calls:
                pass
            elif action in platform:
                extra = [r for r in resources if r not in platform[action]]
                if extra:
                    self.fail(f"{rid}: {action} on {extra}; the platform needs it on "
                              f"{sorted(platform[action])} only")
            elif action == "s3:ListBucket" and s3_reads and fid in LIST_PREFIXES:
                pass
            else:
                self.fail(f"{rid}: {action} is granted but {fid}'s code does not call it "
                          f"and nothing in the template needs it")
            if action.startswith("kms:") and not (s3_reads or s3_writes):
                self.fail(f"{rid}: {action} without any S3 access to an encrypted bucket")
            if fid in READ_ONLY_FUNCTIONS and action not in TELEMETRY_ACTIONS:
                verb = action.split(":", 1)[1]
                if WRITE_VERBS.match(verb):
                    self.fail(f"{rid}: {action} on the read-only path")
            if action.startswith("logs:"):
                own = platform.get(action, set())
                if not resources or any(r not in own for r in resources):
                    self.fail(f"{rid}: {action} on {resources}; only its own log group")
            if action == "s3:PutObject":
                allowed = PUT_PREFIXES.get(fid, set())
                for resource in resources:
                    prefix = resource.split("}/", 1)[-1] if "}/" in resource else resource
                    if prefix.startswith("drops/") or prefix not in allowed:
                        self.fail(f"{rid}: s3:PutObject on {resource}; {fid} writes only "
                                  f"{sorted(allowed)}")
            if action == "s3:ListBucket":
                prefixes = set(as_list(condition.get("StringLike", {}).get("s3:prefix")))
                if not prefixes or prefixes != LIST_PREFIXES.get(fid, set()):
                    self.fail(f"{rid}: s3:ListBucket must carry an s3:prefix condition "
                              f"{sorted(LIST_PREFIXES.get(fid, set()))}, has {sorted(prefixes)}")
        for action in sorted(calls - granted_actions):
            self.fail(f"{rid}: {fid}'s code calls {action} but the role does not grant it")
        for action in sorted(set(platform) - granted_actions):
            self.fail(f"{rid}: the template needs {action} for {fid} but the role lacks it")
        for fid_needed, prefixes in LIST_PREFIXES.items():
            if fid_needed == fid and "s3:ListBucket" not in granted_actions:
                self.fail(f"{rid}: no s3:ListBucket: a missing artifact answers 403 (503), "
                          f"not 404")
        self.check_leading_keys(fid, rid)

    def check_leading_keys(self, fid: str, rid: str) -> None:
        for (function, table), prefixes in LEADING_KEYS.items():
            if function != fid:
                continue
            arn = "${%s.Arn}" % table
            for action, resources, condition in self.granted(rid):
                if arn not in resources or not action.startswith("dynamodb:"):
                    continue
                keys = condition.get("ForAllValues:StringLike", {}).get("dynamodb:LeadingKeys")
                # Each statement names some of the allowed prefixes (e.g. reads of one family,
                # writes of another), never one outside them, never none.
                if not keys or not set(as_list(keys)) <= prefixes:
                    self.fail(f"{rid}: {action} on {table} must be limited with "
                              f"dynamodb:LeadingKeys within {sorted(prefixes)}, has {keys}")

    def check_key_policy(self, function_roles: dict[str, str]) -> None:
        keys = self.of_type("AWS::KMS::Key")
        buckets = self.of_type("AWS::S3::Bucket")
        for kid, key in keys.items():
            encrypted = [
                bid for bid, bucket in buckets.items()
                if any(render(rule.get("ServerSideEncryptionByDefault", {})
                              .get("KMSMasterKeyID")) == "${%s.Arn}" % kid
                       for rule in as_list(bucket.get("Properties", {})
                                           .get("BucketEncryption", {})
                                           .get("ServerSideEncryptionConfiguration")))
            ]
            users = set()
            for fid, rid in function_roles.items():
                for action, resources, _ in self.granted(rid):
                    if action.startswith("s3:") and any(
                            r.startswith("${%s.Arn}" % b) for b in encrypted for r in resources):
                        users.add(rid)
            named = set()
            for statement in as_list(key["Properties"]["KeyPolicy"].get("Statement")):
                for principal in as_list(statement.get("Principal", {}).get("AWS")):
                    text = render(principal)
                    match = re.fullmatch(r"\$\{(\w+)\.Arn\}", text)
                    if match:
                        named.add(match.group(1))
            for rid in sorted(users - named):
                self.fail(f"{kid}: key policy does not name {rid}, which reads or writes "
                          f"{encrypted}")
            for rid in sorted(named - users):
                self.fail(f"{kid}: key policy names {rid}, which has no access to {encrypted}")


def main() -> int:
    here = Path(__file__).resolve()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--template", type=Path, default=here.parents[2] / "template.yaml")
    parser.add_argument("--root", type=Path, default=here.parents[2])
    parser.add_argument("--print", action="store_true", help="print the transformed template")
    args = parser.parse_args()
    transformed = transform(args.template)
    if args.print:
        import json
        print(json.dumps(transformed, indent=2, sort_keys=True))
    findings = Checker(transformed, args.root.resolve()).run()
    roles = len([r for r in transformed["Resources"].values()
                 if r.get("Type") == "AWS::IAM::Role"])
    if findings:
        for finding in findings:
            print(f"FAIL {finding}")
        print(f"{len(findings)} finding(s) in the transformed {args.template} ({roles} roles)")
        return 1
    print(f"transformed {args.template}: {roles} roles, no managed policy, no scopable action "
          f"on \"*\", every action called by the code, query read-only: clean")
    return 0


if __name__ == "__main__":
    sys.exit(main())
