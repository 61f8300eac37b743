"""Writes a managed export of about BYTES bytes, to measure an import's time and memory
(server/README.md's numbers): N entities of kind Big in application s~memproj, each with an
indexed integer, an indexed short string and an excluded ~1 KB text (meaning TEXT), in the
legacy emulator's layout and LevelDB's log format, the metadata from export_v3.bin.

    python3 -m venv venv && venv/bin/pip install appengine-python-standard protobuf
    venv/bin/python server/export/big_export.py /tmp/big 1000000000 server/export/export_v3.bin
    /usr/bin/time -v target/release/datastore-entity-server --port 0 --data /tmp/big.db \
        --import /tmp/big/2026-01-01T00:00:00_000     # then POST /shutdown once it says
                                                      # "imported 851730 entities"
"""
import os, struct, sys
from google.appengine.datastore import entity_bytes_pb2 as e

def crc32c_table():
    t = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        t.append(c)
    return t
T = crc32c_table()
def crc32c(data, crc=0):
    crc ^= 0xFFFFFFFF
    for b in data:
        crc = T[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF
def masked(kind, data):
    c = crc32c(bytes([kind]) + data)
    return (((c >> 15) | (c << 17)) + 0xa282ead8) & 0xFFFFFFFF

class Log:
    def __init__(self, f): self.f, self.at, self.n = f, 0, 0
    def put(self, b): self.f.write(b); self.n += len(b)
    def append(self, rec):
        first = True
        while True:
            left = 32768 - self.at
            if left < 7:
                self.put(b"\0" * left); self.at = 0; continue
            room = left - 7
            data, rec = rec[:room], rec[room:]
            last = not rec
            kind = 1 if first and last else 2 if first else 4 if last else 3
            self.put(struct.pack("<IHB", masked(kind, data), len(data), kind) + data)
            self.at += 7 + len(data)
            if last: return
            first = False

out, target = sys.argv[1], int(sys.argv[2])
name = "2026-01-01T00:00:00_000"
folder = os.path.join(out, name, "all_namespaces", "all_kinds")
os.makedirs(folder, exist_ok=True)
pad = ("lorem ipsum dolor sit amet " * 40).encode()
n = 0
with open(os.path.join(folder, "output-0"), "wb") as f:
    log = Log(f)
    while log.n < target:
        n += 1
        ent = e.EntityProto()
        ent.key.app = "s~memproj"
        el = ent.key.path.element.add(); el.type = "Big"; el.id = n
        g = ent.entity_group.element.add(); g.type = "Big"; g.id = n
        p = ent.property.add(); p.name = "i"; p.multiple = False; p.value.int64Value = n
        p = ent.property.add(); p.name = "s"; p.multiple = False; p.value.stringValue = b"s%d" % (n % 1000)
        p = ent.raw_property.add(); p.name = "text"; p.multiple = False; p.meaning = 15; p.value.stringValue = pad
        log.append(ent.SerializeToString())
size = os.path.getsize(os.path.join(folder, "output-0"))
# The metadata, from the server's descriptors of the legacy emulator's messages.
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
fds = descriptor_pb2.FileDescriptorSet.FromString(open(sys.argv[3], "rb").read())
pool = descriptor_pool.DescriptorPool()
for fd in fds.file:
    pool.Add(fd)
msg = lambda n: message_factory.GetMessageClass(pool.FindMessageTypeByName(n))()
backup = msg("apphosting.ext.datastore_admin.Backup")
backup.backup_info.backup_name = name
ki = backup.kind_info.add(); ki.kind = ""; ki.file.append("output-0")
open(os.path.join(folder, "all_namespaces_all_kinds.export_metadata"), "wb").write(backup.SerializeToString())
overall = msg("apphosting.client.admin_jobs_v3.OverallExportMetadata")
ptr = overall.export_pointers.add()
ptr.entity_set_spec.kind_type = 2; ptr.entity_set_spec.kind = ""
ptr.entity_set_spec.namespace_type = 3; ptr.entity_set_spec.namespace = ""
ptr.export_metadata_file = "all_namespaces/all_kinds/all_namespaces_all_kinds.export_metadata"
ptr.num_entities = n; ptr.num_bytes = size
with open(os.path.join(out, name, name + ".overall_export_metadata"), "wb") as f:
    log = Log(f); log.append(b"3"); log.append(overall.SerializeToString())
print(n, size)
open(os.path.join(out, "count"), "w").write(f"{n} {size}\n")
