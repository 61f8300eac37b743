"""python-ndb with its global cache in Redis, driven line by line by the Rust cache tests
(tests/tests/cache_ndb.rs): the other process on the same Redis and the same database.

    ndb_cache.py NAMESPACE

reads one JSON command per line on standard input and answers one JSON line each:

    {"op": "put", "name": "a", "v": 3}     -> {"ok": true}
    {"op": "get", "name": "a"}             -> {"v": 3} or {"v": null}
    {"op": "delete", "name": "a"}          -> {"ok": true}

An error is answered as {"error": "..."}. DATASTORE_EMULATOR_HOST, DATASTORE_PROJECT_ID and
REDIS_CACHE_URL say where the emulator and Redis are. NDB's context cache is off (one context
lives for the whole run, and would answer from memory what the Rust side changed since); its
global cache is NDB's own RedisCache, with NDB's defaults.
"""

import json
import os
import sys

from google.auth.credentials import AnonymousCredentials
from google.cloud import ndb


class Item(ndb.Model):
    v = ndb.IntegerProperty()


def main():
    namespace = sys.argv[1]
    client = ndb.Client(
        project=os.environ["DATASTORE_PROJECT_ID"],
        namespace=namespace,
        credentials=AnonymousCredentials(),
    )
    cache = ndb.RedisCache.from_environment()
    assert cache is not None, "REDIS_CACHE_URL is not set"
    with client.context(global_cache=cache, cache_policy=lambda key: False):
        for line in sys.stdin:
            command = json.loads(line)
            key = ndb.Key(Item, command["name"])
            try:
                if command["op"] == "put":
                    Item(key=key, v=command["v"]).put()
                    answer = {"ok": True}
                elif command["op"] == "get":
                    item = key.get()
                    answer = {"v": None if item is None else item.v}
                elif command["op"] == "delete":
                    key.delete()
                    answer = {"ok": True}
                else:
                    answer = {"error": "unknown op " + command["op"]}
            except Exception as error:  # reported to the Rust side, which fails the test
                answer = {"error": repr(error)}
            print(json.dumps(answer), flush=True)


if __name__ == "__main__":
    main()
