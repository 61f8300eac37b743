"""What an application does with the Datastore API's REST form through Google's
google-api-python-client (its own discovery document for datastore v1), against the host
DATASTORE_EMULATOR_HOST names: every answer checked exactly. Prints "ok" at the end.

    DATASTORE_EMULATOR_HOST=127.0.0.1:8081 python rest_app.py PROJECT
"""

import base64
import json
import os
import sys

import httplib2
from googleapiclient import discovery
from googleapiclient.errors import HttpError

project = sys.argv[1] if len(sys.argv) > 1 else "rest-app"
host = os.environ.get("DATASTORE_EMULATOR_HOST", "127.0.0.1:8081")
service = discovery.build(
    "datastore",
    "v1",
    http=httplib2.Http(),
    static_discovery=True,
    client_options={"api_endpoint": f"http://{host}/"},
)
api = service.projects()


def check(actual, expected, what):
    if actual != expected:
        if isinstance(actual, dict) and isinstance(expected, dict):
            differ = {k: (expected.get(k), actual.get(k)) for k in expected.keys() | actual.keys() if expected.get(k) != actual.get(k)}
            raise AssertionError(f"{what}: (expected, got) differ at {differ!r:.600}")
        raise AssertionError(f"{what}: expected {expected!r:.300}, got {actual!r:.300}")


def key(kind, name=None, id=None, parent=None):
    element = {"kind": kind}
    if name is not None:
        element["name"] = name
    if id is not None:
        element["id"] = str(id)
    path = (parent["path"] if parent else []) + [element]
    return {"partitionId": {"projectId": project}, "path": path}


def commit(mutations, transaction=None):
    body = {"mutations": mutations}
    if transaction is None:
        body["mode"] = "NON_TRANSACTIONAL"
    else:
        body["mode"] = "TRANSACTIONAL"
        body["transaction"] = transaction
    return api.commit(projectId=project, body=body).execute()


# Every value type, as proto3's JSON mapping writes it: 64-bit integers as strings, bytes as
# base64, a timestamp in RFC 3339, null as null, a double that JSON has no number for.
properties = {
    "title": {"stringValue": "Write the report"},
    "big": {"integerValue": "9007199254740993"},
    "score": {"doubleValue": 2.5},
    "odd": {"doubleValue": "Infinity"},
    "done": {"booleanValue": False},
    "due": {"timestampValue": "2024-05-17T12:30:01.250Z"},
    "blob": {"blobValue": base64.b64encode(b"\x00\xff\x10").decode()},
    "owner": {"keyValue": key("User", id=7)},
    "place": {"geoPointValue": {"latitude": 48.85, "longitude": 2.35}},
    "nothing": {"nullValue": None},
    "tags": {"arrayValue": {"values": [{"stringValue": "work"}, {"stringValue": "urgent"}]}},
    "home": {"entityValue": {"properties": {"city": {"stringValue": "Lyon"}}}},
    "notes": {"stringValue": "x" * 2000, "excludeFromIndexes": True},
}
written = commit([{"upsert": {"key": key("Task", "write"), "properties": properties}}])
check(len(written["mutationResults"]), 1, "one mutation result")
check("commitTime" in written, True, "a commit time")

found = api.lookup(projectId=project, body={"keys": [key("Task", "write"), key("Task", "none")]}).execute()
check(len(found["found"]), 1, "one found")
entity = found["found"][0]["entity"]
check(entity["key"]["path"], [{"kind": "Task", "name": "write"}], "the key read back")
check(entity["properties"], properties, "every value read back as written")
check([m["entity"]["key"]["path"] for m in found["missing"]], [[{"kind": "Task", "name": "none"}]], "missing")
check(int(found["found"][0]["version"]) > 0, True, "a version")

# Many, then a query: a filter, an order, pages of two by cursor.
commit(
    [
        {
            "upsert": {
                "key": key("Item", f"i{i}"),
                "properties": {"n": {"integerValue": str(i)}, "even": {"booleanValue": i % 2 == 0}},
            }
        }
        for i in range(7)
    ]
)
query = {
    "kind": [{"name": "Item"}],
    "filter": {
        "propertyFilter": {
            "property": {"name": "n"},
            "op": "GREATER_THAN_OR_EQUAL",
            "value": {"integerValue": "2"},
        }
    },
    "order": [{"property": {"name": "n"}, "direction": "DESCENDING"}],
    "limit": 2,
}
seen, cursor = [], None
for _ in range(10):
    if cursor:
        query["startCursor"] = cursor
    batch = api.runQuery(projectId=project, body={"query": query}).execute()["batch"]
    check(batch["entityResultType"], "FULL", "whole entities")
    seen += [int(r["entity"]["properties"]["n"]["integerValue"]) for r in batch.get("entityResults", [])]
    # An empty last page may have no end cursor (the Firestore emulator's has none).
    if not batch.get("entityResults") or batch["moreResults"] == "NO_MORE_RESULTS":
        break
    cursor = batch["endCursor"]
check(seen, [6, 5, 4, 3, 2], "every page, in order")

keys_only = dict(query, projection=[{"property": {"name": "__key__"}}], limit=3)
keys_only.pop("startCursor")
batch = api.runQuery(projectId=project, body={"query": keys_only}).execute()["batch"]
check(batch["entityResultType"], "KEY_ONLY", "keys only")
check(batch["moreResults"], "MORE_RESULTS_AFTER_LIMIT", "more after the limit")
check([r["entity"]["key"]["path"][0]["name"] for r in batch["entityResults"]], ["i6", "i5", "i4"], "keys")

# A count, with an alias.
counted = api.runAggregationQuery(
    projectId=project,
    body={
        "aggregationQuery": {
            "nestedQuery": {
                "kind": [{"name": "Item"}],
                "filter": {
                    "propertyFilter": {
                        "property": {"name": "even"},
                        "op": "EQUAL",
                        "value": {"booleanValue": True},
                    }
                },
            },
            "aggregations": [{"count": {}, "alias": "evens"}],
        }
    },
).execute()
values = counted["batch"]["aggregationResults"][0]["aggregateProperties"]
check(values, {"evens": {"integerValue": "4"}}, "a count")

# A transaction: read, then write what was read, then commit.
transaction = api.beginTransaction(projectId=project, body={}).execute()["transaction"]
read = api.lookup(
    projectId=project,
    body={"keys": [key("Item", "i3")], "readOptions": {"transaction": transaction}},
).execute()
n = int(read["found"][0]["entity"]["properties"]["n"]["integerValue"])
commit(
    [{"update": {"key": key("Item", "i3"), "properties": {"n": {"integerValue": str(n + 100)}}}}],
    transaction,
)
after = api.lookup(projectId=project, body={"keys": [key("Item", "i3")]}).execute()
check(after["found"][0]["entity"]["properties"], {"n": {"integerValue": "103"}}, "the transaction's write")

# A transaction rolled back writes nothing.
transaction = api.beginTransaction(projectId=project, body={}).execute()["transaction"]
api.rollback(projectId=project, body={"transaction": transaction}).execute()
try:
    commit([{"delete": key("Item", "i3")}], transaction)
    raise AssertionError("a commit of a rolled-back transaction was accepted")
except HttpError as e:
    check(e.resp.status in (400, 409), True, f"a rolled-back transaction's commit ({e.resp.status})")

# Ids: allocated (as strings: 64-bit), and reserved.
allocated = api.allocateIds(projectId=project, body={"keys": [key("Item"), key("Item")]}).execute()
ids = [int(k["path"][0]["id"]) for k in allocated["keys"]]
check(len(set(ids)), 2, "two distinct ids")
check(all(i > 0 for i in ids), True, "positive ids")
api.reserveIds(projectId=project, body={"keys": [key("Item", id=123)]}).execute()

# Deletes, and an insert of an existing entity refused as the service refuses it.
commit([{"delete": key("Item", "i0")}])
check("found" in api.lookup(projectId=project, body={"keys": [key("Item", "i0")]}).execute(), False, "deleted")
try:
    commit([{"insert": {"key": key("Item", "i1"), "properties": {}}}])
    raise AssertionError("an insert of an existing entity was accepted")
except HttpError as e:
    check(e.resp.status, 409, "an insert of an existing entity")

# A malformed request: the error in Google's shape.
try:
    api.lookup(projectId=project, body={"keys": [{"path": [{"kind": "Task", "id": "not a number"}]}]}).execute()
    raise AssertionError("a malformed id was accepted")
except HttpError as e:
    check(e.resp.status, 400, "a malformed request")
    error = json.loads(e.content)["error"]
    check((error["code"], error["status"]), (400, "INVALID_ARGUMENT"), "the error's shape")

print("ok")
