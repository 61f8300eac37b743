"""What an application does with Google's Python client (google-cloud-datastore), against
whatever DATASTORE_EMULATOR_HOST names: every answer checked exactly. Prints "ok" at the end.

    DATASTORE_EMULATOR_HOST=127.0.0.1:8081 python datastore_app.py PROJECT
"""

import datetime
import sys

from google.cloud import datastore
from google.cloud.datastore.query import And, Or, PropertyFilter

project = sys.argv[1] if len(sys.argv) > 1 else "datastore-app"
client = datastore.Client(project=project)


def check(actual, expected, what):
    if actual != expected:
        raise AssertionError(f"{what}: expected {expected!r:.200}, got {actual!r:.200}")


# Put and get, every value type.
when = datetime.datetime(2024, 5, 17, 12, 30, 1, 250000, tzinfo=datetime.timezone.utc)
task = datastore.Entity(client.key("Task", "write"), exclude_from_indexes=("notes",))
task.update(
    {
        "title": "Write the report",
        "done": False,
        "priority": 4,
        "score": 2.5,
        "due": when,
        "tags": ["work", "urgent"],
        "notes": "x" * 2000,
        "owner": client.key("User", 7),
        "blob": b"\x00\xff",
        "nothing": None,
        "place": datastore.helpers.GeoPoint(48.85, 2.35),
    }
)
client.put(task)
got = client.get(client.key("Task", "write"))
check(dict(got), dict(task), "a round trip")
check(got.exclude_from_indexes, {"notes"}, "exclusions")

# An embedded entity with a key of its own keeps it.
home = datastore.Entity(key=client.key("Address", "home"))
home.update({"city": "Lyon"})
holder = datastore.Entity(key=client.key("Holder", "h"))
holder["home"] = home
client.put(holder)
kept = client.get(holder.key)["home"]
check((kept.key.flat_path, dict(kept)), (("Address", "home"), {"city": "Lyon"}), "an embedded key")

# Many at once, by allocated ids.
keys = client.allocate_ids(client.key("Task"), 20)
check(len({k.id for k in keys}), 20, "20 distinct allocated ids")
tasks = []
for i, key in enumerate(keys):
    e = datastore.Entity(key)
    e.update({"title": f"task {i:02}", "done": i % 2 == 0, "priority": i % 5, "n": i})
    tasks.append(e)
client.put_multi(tasks)
got = client.get_multi(keys[:5] + [client.key("Task", "missing")])
check(sorted(e["n"] for e in got), [0, 1, 2, 3, 4], "get_multi finds five")
missing = []
client.get_multi([client.key("Task", "missing")], missing=missing)
check(len(missing), 1, "a missing key reported")

# Queries: filters, orders, limits, cursors, projections, keys only.
q = client.query(kind="Task")
q.add_filter(filter=PropertyFilter("done", "=", True))
q.order = ["n"]
check([e["n"] for e in q.fetch()], list(range(0, 20, 2)), "equality and order")
q = client.query(kind="Task")
q.add_filter(filter=PropertyFilter("n", ">=", 15))
q.order = ["-n"]
check([e["n"] for e in q.fetch(limit=3)], [19, 18, 17], "range, descending, limit")
q = client.query(kind="Task")
q.add_filter(filter=PropertyFilter("priority", "IN", [1, 3]))
check(sorted(e["n"] for e in q.fetch()), [1, 3, 6, 8, 11, 13, 16, 18], "IN")
q = client.query(kind="Task")
q.add_filter(filter=Or([PropertyFilter("n", "=", 1), PropertyFilter("n", "=", 19)]))
check(sorted(e["n"] for e in q.fetch()), [1, 19], "OR")
q = client.query(kind="Task")
q.add_filter(filter=And([PropertyFilter("n", ">", 2), PropertyFilter("n", "!=", 5)]))
q.add_filter(filter=PropertyFilter("n", "<", 8))
check(sorted(e["n"] for e in q.fetch()), [3, 4, 6, 7], "AND with !=")
pages = []
cursor = None
while True:
    q = client.query(kind="Task")
    q.add_filter(filter=PropertyFilter("n", ">=", 0))
    q.order = ["n"]
    it = q.fetch(start_cursor=cursor, limit=7)
    page = next(it.pages)
    pages.append([e["n"] for e in page])
    cursor = it.next_page_token
    if not cursor:
        break
check([n for p in pages for n in p], list(range(20)), "pages by cursor")
check([len(p) for p in pages[:3]], [7, 7, 6], "pages of seven")
q = client.query(kind="Task")
q.add_filter(filter=PropertyFilter("n", ">=", 0))
q.order = ["n"]
check([e["n"] for e in q.fetch(offset=17)], [17, 18, 19], "an offset")
q = client.query(kind="Task")
q.keys_only()
check(len(list(q.fetch())), 21, "keys only")
q = client.query(kind="Task", projection=["priority"])
q.add_filter(filter=PropertyFilter("priority", ">", 3))
projected = list(q.fetch())
check(sorted(set(e["priority"] for e in projected)), [4], "a projection")
check(all(set(e.keys()) == {"priority"} for e in projected), True, "only the projected")
q = client.query(kind="Task", ancestor=None)
q.add_filter(filter=PropertyFilter("__key__", "=", client.key("Task", "write")))
check([e.key.name for e in q.fetch()], ["write"], "a key filter")

# Ancestors: a strongly consistent query of a group.
parent = client.key("User", 7)
for i in range(3):
    e = datastore.Entity(client.key("Note", i + 1, parent=parent))
    e["i"] = i
    client.put(e)
q = client.query(kind="Note", ancestor=parent)
check(sorted(e["i"] for e in q.fetch()), [0, 1, 2], "an ancestor query")

# Aggregations.
agg = client.aggregation_query(client.query(kind="Task"))
agg.count(alias="all")
check({r.alias: r.value for r in next(iter(agg.fetch()))}, {"all": 21}, "COUNT")
q = client.query(kind="Task")
q.add_filter(filter=PropertyFilter("done", "=", True))
agg = client.aggregation_query(q)
agg.sum("n", alias="total")
agg.avg("n", alias="mean")
agg.count(alias="count")
got = {r.alias: r.value for r in next(iter(agg.fetch()))}
check(got, {"total": 90, "mean": 9.0, "count": 10}, "SUM, AVG, COUNT together")

# Transactions: a transfer, a rollback, a read-only one.
a, b = client.key("Account", "a"), client.key("Account", "b")
for key, balance in ((a, 100), (b, 0)):
    e = datastore.Entity(key)
    e["balance"] = balance
    client.put(e)
with client.transaction():
    x, y = client.get(a), client.get(b)
    x["balance"] -= 30
    y["balance"] += 30
    client.put_multi([x, y])
check([client.get(k)["balance"] for k in (a, b)], [70, 30], "a transfer")
try:
    with client.transaction():
        x = client.get(a)
        x["balance"] = -1
        client.put(x)
        raise RuntimeError("changed my mind")
except RuntimeError:
    pass
check(client.get(a)["balance"], 70, "a rolled back transaction wrote nothing")
# (Ended by a rollback: the Firestore emulator refuses the commit the client's `with` sends.)
snapshot = client.transaction(read_only=True)
snapshot.begin()
check(client.get(b, transaction=snapshot)["balance"], 30, "a read-only transaction reads")
snapshot.rollback()
# Deletes, and an insert of an existing key refused.
client.delete(client.key("Task", "write"))
check(client.get(client.key("Task", "write")), None, "deleted")
client.delete_multi(keys[:10])
q = client.query(kind="Task")
q.keys_only()
check(len(list(q.fetch())), 10, "ten left")

# Namespaces keep their own entities.
other = datastore.Client(project=project, namespace="other")
e = datastore.Entity(other.key("Task", "write"))
e["title"] = "elsewhere"
other.put(e)
check(other.get(other.key("Task", "write"))["title"], "elsewhere", "another namespace")
check(client.get(client.key("Task", "write")), None, "the default namespace untouched")

# Reserved ids are never allocated.
client.reserve_ids_sequential(client.key("Reserved", 1), 5)
fresh = client.allocate_ids(client.key("Reserved"), 10)
check(all(k.id > 5 for k in fresh), True, "no reserved id allocated")

print("ok")
