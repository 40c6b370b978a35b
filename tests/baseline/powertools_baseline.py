"""The cost bench's baseline (docs/benchmarks.md): what a team would write instead of feedsafe's
ingest function.

A Python Lambda handler made idempotent with AWS Lambda Powertools (DynamoDB persistence): the
idempotency key is the delivery's identity (tenant, connector, source account, delivery id), the
payload is validated against the first one's hash (a changed payload raises instead of being
stored), and each row of the page is written as one item with `batch_writer` (BatchWriteItem,
25 items a request). No raw artifact, no replay record beyond Powertools' own, no transaction.

Run by tests/benches/bench.rs on the same engine in the same run:

    python powertools_baseline.py INPUT.json OUTPUT.json

INPUT.json is a list of cases `{"rows": N, "kind": "...", "envelope": "<queue message body>"}`,
handled in order; OUTPUT.json gets, per case, the requests by operation, the write and read
units DynamoDB Local reported (`ReturnConsumedCapacity: TOTAL` is added to every call; for
plain PutItem/UpdateItem/BatchWriteItem the engine's figures are AWS's rules, and a write whose
condition failed, which the engine reports as nothing, is billed 1 unit as AWS bills it), CPU
and wall milliseconds. Needs boto3 and aws-lambda-powertools; the endpoint and credentials come from the
environment the engines script prints (AWS_ENDPOINT_URL_DYNAMODB, AWS_ACCESS_KEY_ID, ...).
"""

import base64
import json
import os
import sys
import time
import uuid
from collections import Counter

import boto3
from aws_lambda_powertools.utilities.idempotency import (
    DynamoDBPersistenceLayer,
    IdempotencyConfig,
    idempotent,
)
from aws_lambda_powertools.utilities.idempotency.exceptions import (
    IdempotencyValidationError,
)

WRITES = ("PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem")
READS = ("GetItem", "Query", "BatchGetItem", "Scan")


class Meter:
    """Counts every DynamoDB call and the capacity the engine says it consumed."""

    def __init__(self):
        self.requests = Counter()
        self.write_units = 0.0
        self.read_units = 0.0

    def take(self):
        taken = {
            "requests": dict(self.requests),
            "write_units": self.write_units,
            "read_units": self.read_units,
        }
        self.requests = Counter()
        self.write_units = 0.0
        self.read_units = 0.0
        return taken

    def attach(self, client):
        events = client.meta.events
        events.register("provide-client-params.dynamodb.*", self._ask_for_capacity)
        events.register("after-call.dynamodb.*", self._count)

    @staticmethod
    def _ask_for_capacity(params, model, **_):
        if "ReturnConsumedCapacity" in model.input_shape.members:
            params.setdefault("ReturnConsumedCapacity", "TOTAL")

    def _count(self, parsed, model, **_):
        self.requests[model.name] += 1
        error = (parsed.get("Error") or {}).get("Code", "")
        if error.endswith("ConditionalCheckFailedException"):
            # DynamoDB Local reports nothing for a failed condition, but AWS bills the write
            # (the item's write units, at least 1; an idempotency record is far below 1 KB).
            self.write_units += 1.0
            return
        consumed = parsed.get("ConsumedCapacity") or []
        if isinstance(consumed, dict):
            consumed = [consumed]
        units = sum(float(c.get("CapacityUnits", 0)) for c in consumed)
        if model.name in WRITES:
            self.write_units += units
        elif model.name in READS:
            self.read_units += units


def create_tables(client, suffix):
    idempotency = f"baseline-idempotency-{suffix}"
    offers = f"baseline-offers-{suffix}"
    client.create_table(
        TableName=idempotency,
        AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        BillingMode="PAY_PER_REQUEST",
    )
    # Stream-enabled like feedsafe's evidence table: a projector would read it.
    client.create_table(
        TableName=offers,
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "sk", "AttributeType": "S"},
        ],
        KeySchema=[
            {"AttributeName": "pk", "KeyType": "HASH"},
            {"AttributeName": "sk", "KeyType": "RANGE"},
        ],
        BillingMode="PAY_PER_REQUEST",
        StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
    )
    for name in (idempotency, offers):
        client.get_waiter("table_exists").wait(TableName=name)
    return idempotency, offers


class Context:
    """The part of the Lambda context Powertools reads."""

    function_name = "baseline"
    aws_request_id = "bench"

    @staticmethod
    def get_remaining_time_in_millis():
        return 30_000


def build_handler(client, idempotency_table, offers_table):
    persistence = DynamoDBPersistenceLayer(
        table_name=idempotency_table, boto3_client=client
    )
    config = IdempotencyConfig(
        event_key_jmespath="[tenant, connector, source_account, delivery.id]",
        payload_validation_jmespath="body",
        expires_after_seconds=7 * 24 * 3600,
    )
    table = boto3.resource(
        "dynamodb", endpoint_url=os.environ.get("AWS_ENDPOINT_URL_DYNAMODB")
    ).Table(offers_table)
    return persistence, config, table


def main():
    source, target = sys.argv[1], sys.argv[2]
    with open(source, encoding="utf-8") as f:
        cases = json.load(f)
    endpoint = os.environ.get("AWS_ENDPOINT_URL_DYNAMODB")
    client = boto3.client("dynamodb", endpoint_url=endpoint)
    meter = Meter()
    meter.attach(client)
    idempotency_table, offers_table = create_tables(client, uuid.uuid4().hex[:10])
    persistence, config, table = build_handler(client, idempotency_table, offers_table)
    # The resource's client is another client: meter it too.
    meter.attach(table.meta.client)
    meter.take()
    ran = []

    @idempotent(config=config, persistence_store=persistence)
    def handler(event, context):
        ran.append(True)
        body = json.loads(base64.b64decode(event["body"]["inline"]["base64"]))
        key = f'{event["tenant"]}#{event["connector"]}#{event["source_account"]}#{event["delivery"]["id"]}'
        with table.batch_writer() as batch:
            for index, row in enumerate(body["offers"]):
                batch.put_item(
                    Item={
                        "pk": f'{event["tenant"]}#{row["sku"]}',
                        "sk": f"{key}#{index:05}",
                        "quantity": row["quantity"],
                        "unit": row["unit"],
                        "price": row["price"],
                        "currency": row["currency"],
                        "observed_at": row["observed_at"],
                        "retrieved_at": event["retrieved_at"],
                        "delivery_key": key,
                    }
                )
        return {"stored": len(body["offers"])}

    results = []
    for case in cases:
        event = json.loads(case["envelope"])
        cpu = time.process_time()
        wall = time.perf_counter()
        ran.clear()
        try:
            handler(event, Context())
            outcome = "stored" if ran else "replayed"
        except IdempotencyValidationError:
            outcome = "validation error"
        cpu_ms = (time.process_time() - cpu) * 1000
        wall_ms = (time.perf_counter() - wall) * 1000
        results.append(
            {
                "rows": case["rows"],
                "kind": case["kind"],
                "outcome": outcome,
                "cpu_ms": cpu_ms,
                "wall_ms": wall_ms,
                **meter.take(),
            }
        )
    with open(target, "w", encoding="utf-8") as f:
        json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
