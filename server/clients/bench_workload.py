"""A test suite's workload through Google's Python client, against whatever
DATASTORE_EMULATOR_HOST names: 1,000 puts, 1,000 gets, 100 queries (an equality filter, a
page of 10). The benchmark `server_vs_emulators` times it, start-up included.

    DATASTORE_EMULATOR_HOST=127.0.0.1:8081 python bench_workload.py PROJECT
"""

import sys

from google.cloud import datastore
from google.cloud.datastore.query import PropertyFilter

client = datastore.Client(project=sys.argv[1])
statuses = ["new", "paid", "shipped"]
keys = []
for i in range(1, 1001):
    entity = datastore.Entity(client.key("Order", i))
    entity.update({"customer": f"c{i % 50}", "status": statuses[i % 3], "total": i * 3})
    client.put(entity)
    keys.append(entity.key)
for key in keys:
    assert client.get(key) is not None
for i in range(100):
    query = client.query(kind="Order")
    query.add_filter(filter=PropertyFilter("status", "=", statuses[i % 3]))
    assert len(list(query.fetch(limit=10))) == 10
print("ok")
