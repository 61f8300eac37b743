"""Writes export_v3.bin: the descriptors (a FileDescriptorSet) of the messages of a managed
export, which the server's exports read and write (src/export/proto.rs):

- `storage_onestore_v3_bytes.EntityProto`, the entity each record of an `output-N` file holds
  (App Engine's entity, every string as bytes), from Google's App Engine SDK for Python
  (`google.appengine.datastore.entity_bytes_pb2`, PyPI `appengine-python-standard`);
- `apphosting.client.admin_jobs_v3.OverallExportMetadata` (the `.overall_export_metadata`
  file), its `EntitySetSpec`, and `apphosting.ext.datastore_admin.Backup` (each
  `.export_metadata` file): published nowhere as `.proto` files, but compiled into Google's
  legacy Datastore emulator (`CloudDatastore.jar`, Debian's
  `google-cloud-cli-datastore-emulator`), whose Java classes hold each file's serialized
  descriptor as a string constant. They are read from there, so that the names and numbers
  are the emulator's own.

    python3 -m venv venv && venv/bin/pip install appengine-python-standard protobuf
    venv/bin/python server/export/descriptors.py \
        /usr/lib/google-cloud-sdk/platform/cloud-datastore-emulator/CloudDatastore.jar
"""

import pathlib
import struct
import sys
import zipfile

from google.appengine.datastore import entity_bytes_pb2
from google.protobuf import descriptor_pb2

# The classes of the legacy emulator that hold the metadata's descriptors, dependencies first.
CLASSES = [
    "com/google/apphosting/client/adminjobsv3/EntitySetSpecProtoInternalDescriptors.class",
    "com/google/apphosting/client/adminjobsv3/ExportMetadataProtoInternalDescriptors.class",
    "com/google/protos/apphosting/ext/datastore_admin/BackupProtosInternalDescriptors.class",
]


def string_constants(data):
    """A Java class file's string constants (CONSTANT_String's Utf8 entries), in pool order."""
    count = struct.unpack(">H", data[8:10])[0]
    pos, index, utf8, strings = 10, 1, {}, []
    while index < count:
        tag = data[pos]
        if tag == 1:  # Utf8
            length = struct.unpack(">H", data[pos + 1 : pos + 3])[0]
            utf8[index] = data[pos + 3 : pos + 3 + length]
            pos += 3 + length
        elif tag in (3, 4):  # Integer, Float
            pos += 5
        elif tag in (5, 6):  # Long, Double: two slots
            pos += 9
            index += 1
        elif tag in (7, 16, 19, 20):  # Class, MethodType, Module, Package
            pos += 3
        elif tag == 8:  # String
            strings.append(struct.unpack(">H", data[pos + 1 : pos + 3])[0])
            pos += 3
        elif tag in (9, 10, 11, 12, 17, 18):  # refs, NameAndType, dynamic
            pos += 5
        elif tag == 15:  # MethodHandle
            pos += 4
        else:
            raise ValueError(f"unknown constant pool tag {tag}")
        index += 1
    return [utf8[i] for i in strings]


def latin1(modified_utf8):
    """The bytes a Java string of chars below 256 holds (protoc writes descriptors so)."""
    out, k = bytearray(), 0
    while k < len(modified_utf8):
        b = modified_utf8[k]
        if b < 0x80:
            out.append(b)
            k += 1
        elif b & 0xE0 == 0xC0:
            out.append(((b & 0x1F) << 6) | (modified_utf8[k + 1] & 0x3F))
            k += 2
        else:
            raise ValueError("a descriptor's char above U+00FF")
    return bytes(out)


def descriptor_from_class(data):
    """The serialized FileDescriptorProto of a protoc-generated `…InternalDescriptors` class:
    its first string constants, up to the first class or file name."""
    pieces = []
    for constant in string_constants(data):
        text = latin1(constant)
        if pieces and (text.startswith(b"com.") or text.endswith(b".proto")):
            break
        pieces.append(text)
    return descriptor_pb2.FileDescriptorProto.FromString(b"".join(pieces))


out = descriptor_pb2.FileDescriptorSet()
out.file.append(
    descriptor_pb2.FileDescriptorProto.FromString(entity_bytes_pb2.DESCRIPTOR.serialized_pb)
)
with zipfile.ZipFile(sys.argv[1]) as jar:
    for name in CLASSES:
        out.file.append(descriptor_from_class(jar.read(name)))
target = pathlib.Path(__file__).with_name("export_v3.bin")
target.write_bytes(out.SerializeToString())
print(f"{target}: {', '.join(f.name for f in out.file)}")
