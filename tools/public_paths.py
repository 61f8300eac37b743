#!/usr/bin/env python3
# How many paths reach each documented public item of the runtime crate (the prelude not
# counted), from rustdoc's JSON output:
#   RUSTC_BOOTSTRAP=1 cargo rustdoc -p datastore-entity --lib -- -Z unstable-options --output-format json
#   python3 tools/public_paths.py target/doc/datastore_entity.json [list]
# Items hidden from the documentation (`__private`, `bench_hooks`, deprecated paths) are not counted.
import json, sys, collections
doc = json.load(open(sys.argv[1]))
index = doc["index"]
root = doc["root"]
paths = collections.defaultdict(set)
names = {}
def hidden(item):
    attrs = item.get("attrs", [])
    return any("doc(hidden)" in json.dumps(a) for a in attrs)
def kind(item):
    return next(iter(item["inner"])) if isinstance(item["inner"], dict) else item["inner"]
seen_mod = set()
def walk(mod_id, prefix, depth=0):
    if depth > 8: return
    item = index[str(mod_id)]
    for child in item["inner"]["module"]["items"]:
        c = index.get(str(child))
        if c is None: continue
        if c.get("visibility") != "public" or hidden(c): continue
        k = kind(c)
        if k == "use":
            u = c["inner"]["use"]
            target = u.get("id")
            if u["is_glob"]:
                if target is not None and str(target) in index and kind(index[str(target)]) == "module":
                    walk(target, prefix, depth+1)
                continue
            p = prefix + [u["name"]]
            if target is None:
                paths[("ext", u["source"])].add("::".join(p)); continue
            t = index.get(str(target))
            key = target
            paths[key].add("::".join(p))
            names[key] = u["source"]
            if t is not None and kind(t) == "module":
                walk(target, p, depth+1)
        elif k == "module":
            p = prefix + [c["name"]]
            paths[child].add("::".join(p))
            names[child] = c["name"]
            walk(child, p, depth+1)
        elif k in ("impl",):
            continue
        else:
            p = prefix + [c["name"]]
            paths[child].add("::".join(p))
            names[child] = c["name"]
walk(root, ["datastore_entity"])
items = {k: v for k, v in paths.items()}
def is_module(k):
    return not isinstance(k, tuple) and str(k) in index and kind(index[str(k)]) == "module"
nonmod = {k: v for k, v in items.items() if not is_module(k)}
def count(ps, prelude):
    return len([p for p in ps if prelude or "::prelude::" not in p])
multi = {k: v for k, v in nonmod.items() if count(v, False) > 1}
print(f"public items (not modules): {len(nonmod)}; reachable at 2+ paths (the prelude not counted): {len(multi)}; max paths: {max(len(v) for v in nonmod.values())}")
if len(sys.argv) > 2:
    for k, v in sorted(multi.items(), key=lambda kv: sorted(kv[1])[0]):
        print("  ", ", ".join(sorted(v)))
