"""Writes datastore_v1.bin: the descriptors of Google's Datastore v1 messages, and of the admin
API's export and import messages with the long-running `Operation` that answers them (a
FileDescriptorSet), which the server's REST front end maps to and from JSON (proto3's JSON
mapping). Taken from Google's own Python client, so that the names, numbers and JSON names are
the service's:

    python3 -m venv venv && venv/bin/pip install google-cloud-datastore
    venv/bin/python server/rest/descriptors.py
"""

import pathlib

from google.cloud.datastore_admin_v1.types import datastore_admin
from google.cloud.datastore_v1.types import datastore
from google.longrunning import operations_pb2
from google.protobuf import descriptor_pb2

files = {}


def walk(file):
    if file.name in files:
        return
    for dependency in file.dependencies:
        walk(dependency)
    files[file.name] = file


walk(datastore.LookupRequest.pb().DESCRIPTOR.file)
walk(datastore_admin.ExportEntitiesRequest.pb().DESCRIPTOR.file)
walk(operations_pb2.Operation.DESCRIPTOR.file)
out = descriptor_pb2.FileDescriptorSet()
for file in files.values():
    out.file.append(descriptor_pb2.FileDescriptorProto.FromString(file.serialized_pb))
target = pathlib.Path(__file__).with_name("datastore_v1.bin")
target.write_bytes(out.SerializeToString())
print(f"{target}: {len(out.file)} files")
