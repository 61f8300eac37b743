"""The other side of the NDB interop suite (tests/tests/ndb.rs): Google's own Python client,
google-cloud-ndb, writing and reading the entities the Rust structs share with it.

    ndb_side.py write NAMESPACE   -> prints a JSON object the Rust side reads
    ndb_side.py check NAMESPACE JSON -> exits 0 when everything the Rust side did is there

DATASTORE_EMULATOR_HOST and DATASTORE_PROJECT_ID point it at the emulator.
"""

import datetime
import json
import os
import sys

from google.auth.credentials import AnonymousCredentials
from google.cloud import ndb


class Address(ndb.Model):
    city = ndb.StringProperty()
    zip = ndb.StringProperty()


class Member(ndb.Expando):
    email = ndb.StringProperty()
    tags = ndb.StringProperty(repeated=True)
    bio = ndb.TextProperty()
    prefs = ndb.JsonProperty()
    home = ndb.GeoPtProperty()
    friend = ndb.KeyProperty()
    joined = ndb.DateTimeProperty()
    visits = ndb.IntegerProperty()
    # The legacy layout (google-cloud-ndb's default): dotted top-level properties.
    address = ndb.StructuredProperty(Address)
    addresses = ndb.StructuredProperty(Address, repeated=True)
    # Compressed (zlib, the service's meaning 22), and a user (meaning 20): properties no Rust
    # struct declares, which a Rust read-modify-write must keep with their meanings.
    notes = ndb.TextProperty(compressed=True)
    raw = ndb.BlobProperty(compressed=True)
    archive = ndb.BlobProperty(compressed=True, repeated=True)
    owner = ndb.UserProperty()


JOINED = datetime.datetime(2019, 5, 17, 8, 30, 15, 123456)
NOTES = "Compressed notes, " * 300
RAW = bytes(range(256)) * 40
ARCHIVE = [b"first " * 100, b"second " * 100]


def write(namespace):
    friend = Member(id="bob", namespace=namespace, email="bob@example.com")
    friend.put()
    ann = Member(
        id="ann",
        namespace=namespace,
        email="ann@example.com",
        tags=["admin", "early"],
        bio="Writes long " * 200,
        prefs={"theme": "dark", "langs": ["fr", "en"]},
        home=ndb.GeoPt(48.8566, 2.3522),
        friend=friend.key,
        joined=JOINED,
        visits=41,
        address=Address(city="Paris", zip="75001"),
        addresses=[Address(city="Lyon", zip="69001"), Address(city="Nice", zip="06000")],
        notes=NOTES,
        raw=RAW,
        archive=ARCHIVE,
        owner=ndb.User(email="ann@example.com", _auth_domain="example.com"),
    )
    ann.nickname = "annie"  # an Expando property no Rust struct declares
    ann.put()
    return {"ann": ann.key.urlsafe().decode(), "bob": friend.key.urlsafe().decode()}


def read_plainly(key):
    """`key` read by a model that declares the compressed byte strings uncompressed: NDB then
    decompresses a value by its meaning (22), which is all that says it is compressed. (The
    model is made here, last: NDB reads a kind with the model defined last for it.)"""

    class Plain(ndb.Expando):
        raw = ndb.BlobProperty()
        archive = ndb.BlobProperty(repeated=True)

        @classmethod
        def _get_kind(cls):
            return "Member"

    return key.get(use_cache=False)


def places(addresses):
    return [(a.city, a.zip) for a in addresses if a is not None]


def check(namespace, rust):
    problems = []

    def expect(what, found, wanted):
        if found != wanted:
            problems.append(f"{what}: found {found!r}, wanted {wanted!r}")

    ann = ndb.Key("Member", "ann", namespace=namespace).get()
    expect("ann.email (changed by Rust)", ann.email, rust["email"])
    expect("ann.visits (changed by Rust)", ann.visits, 42)
    expect("ann.tags", ann.tags, ["admin", "early"])
    expect("ann.bio", ann.bio, "Writes long " * 200)
    expect("ann.prefs", ann.prefs, {"theme": "dark", "langs": ["fr", "en"]})
    expect("ann.home", (ann.home.latitude, ann.home.longitude), (48.8566, 2.3522))
    expect("ann.friend", ann.friend, ndb.Key("Member", "bob", namespace=namespace))
    expect("ann.joined", ann.joined, JOINED)
    expect("ann.nickname (undeclared in Rust)", getattr(ann, "nickname", None), "annie")
    expect("ann.notes (compressed, undeclared in Rust)", ann.notes, NOTES)
    expect("ann.raw (compressed, undeclared in Rust)", ann.raw, RAW)
    expect("ann.archive (compressed, undeclared in Rust)", ann.archive, ARCHIVE)
    expect("ann.owner (undeclared in Rust)", ann.owner and ann.owner.email(), "ann@example.com")
    expect("ann.address (flattened by Rust)", places([ann.address]), [("Paris", "75001")])
    expect(
        "ann.addresses (flattened by Rust)",
        places(ann.addresses),
        [("Lyon", "69001"), ("Nice", "06000")],
    )
    # The entity the Rust side added, found through the URL-safe key it printed.
    cy = ndb.Key(urlsafe=rust["cy"].encode()).get()
    expect("cy (added by Rust)", cy is not None, True)
    if cy is not None:
        expect("cy.key", cy.key, ndb.Key("Member", "cy", namespace=namespace))
        expect("cy.email", cy.email, "cy@example.com")
        expect("cy.tags", cy.tags, ["new"])
        expect("cy.friend", cy.friend, ann.key)
        expect("cy.joined", cy.joined, datetime.datetime(2024, 1, 2, 3, 4, 5, 678901))
        expect("cy.prefs", cy.prefs, {"theme": "light"})
        expect("cy.home", (cy.home.latitude, cy.home.longitude), (45.764, 4.8357))
        expect("cy.address (flattened by Rust)", places([cy.address]), [("Lyon", "69002")])
        expect("cy.addresses", places(cy.addresses or []), [])
    # With the `serde` feature, an entity whose JsonProperty Rust wrote with `#[property(json)]`.
    if "dee" in rust:
        dee = ndb.Key(urlsafe=rust["dee"].encode()).get()
        expect("dee (added by Rust)", dee is not None, True)
        if dee is not None:
            expect("dee.prefs (JSON by Rust)", dee.prefs, {"theme": "Zoë ✓ 🎉", "langs": []})
    # Last (from here on NDB reads the kind with this model).
    plain = read_plainly(ndb.Key("Member", "ann", namespace=namespace))
    expect("ann.raw by its meaning", plain.raw, RAW)
    expect("ann.archive by its meanings", plain.archive, ARCHIVE)
    if problems:
        print("\n".join(problems), file=sys.stderr)
        sys.exit(1)


def main():
    client = ndb.Client(
        project=os.environ["DATASTORE_PROJECT_ID"], credentials=AnonymousCredentials()
    )
    with client.context():
        if sys.argv[1] == "write":
            print(json.dumps(write(sys.argv[2])))
        else:
            check(sys.argv[2], json.loads(sys.argv[3]))


if __name__ == "__main__":
    main()
