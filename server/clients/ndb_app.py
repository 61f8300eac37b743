"""What an application does with Google's NDB (google-cloud-ndb), against whatever
DATASTORE_EMULATOR_HOST names: every answer checked exactly. Prints "ok" at the end.

    DATASTORE_EMULATOR_HOST=127.0.0.1:8081 python ndb_app.py PROJECT
"""

import datetime
import sys

from google.cloud import ndb

project = sys.argv[1] if len(sys.argv) > 1 else "ndb-app"
client = ndb.Client(project=project)


def check(actual, expected, what):
    if actual != expected:
        raise AssertionError(f"{what}: expected {expected!r:.200}, got {actual!r:.200}")


class Address(ndb.Model):
    city = ndb.StringProperty()
    zip = ndb.StringProperty()


class Author(ndb.Model):
    name = ndb.StringProperty()
    born = ndb.DateTimeProperty()
    karma = ndb.IntegerProperty(default=0)
    home = ndb.StructuredProperty(Address)
    tags = ndb.StringProperty(repeated=True)
    bio = ndb.TextProperty()
    prefs = ndb.JsonProperty()


class Post(ndb.Model):
    title = ndb.StringProperty()
    words = ndb.IntegerProperty()
    published = ndb.BooleanProperty()


with client.context(cache_policy=False, global_cache_policy=False):
    # Put and get, the properties NDB lays out its own way.
    ada = Author(
        id="ada",
        name="Ada",
        born=datetime.datetime(1815, 12, 10, 8, 0, 0),
        home=Address(city="London", zip="W1"),
        tags=["math", "engines"],
        bio="x" * 3000,
        prefs={"theme": "dark", "n": [1, 2]},
    )
    key = ada.put()
    got = key.get()
    for name in ("name", "born", "karma", "tags", "bio", "prefs"):
        check(getattr(got, name), getattr(ada, name), f"a round trip of {name}")
    check((got.home.city, got.home.zip), ("London", "W1"), "a round trip of home")
    check(Author.get_by_id("ada").home.city, "London", "a structured property")

    # Allocated ids, many at once.
    allocated = Post.allocate_ids(10)
    check(len({k.id() for k in allocated}), 10, "ten distinct ids")
    posts = [
        Post(parent=key, title=f"post {i:02}", words=i * 100, published=i % 3 != 0)
        for i in range(12)
    ]
    keys = ndb.put_multi(posts)
    check(len(set(keys)), 12, "twelve keys")
    check([p.words for p in ndb.get_multi(keys[:3])], [0, 100, 200], "get_multi")

    # Queries: filters, orders, ancestors, projections, keys, counts, pages.
    q = Post.query(ancestor=key).filter(Post.published == True).order(-Post.words)
    check([p.words for p in q.fetch(3)], [1100, 1000, 800], "filter, order, limit")
    q = Post.query(Post.words >= 500, Post.words < 900).order(Post.words)
    check([p.words for p in q], [500, 600, 700, 800], "a range")
    q = Post.query(Post.words.IN([100, 300, 5000]))
    check(sorted(p.words for p in q), [100, 300], "IN")
    q = Post.query(ndb.OR(Post.words == 0, Post.title == "post 11"))
    check(sorted(p.words for p in q), [0, 1100], "OR")
    check(Post.query(ancestor=key).count(), 12, "count")
    check(
        sorted(k.id() for k in Post.query().fetch(keys_only=True)) == sorted(k.id() for k in keys),
        True,
        "keys only",
    )
    titles = Post.query(Post.published == False).fetch(projection=[Post.title])
    check(sorted(p.title for p in titles), ["post 00", "post 03", "post 06", "post 09"], "projection")
    seen, cursor, more = [], None, True
    while more:
        page, cursor, more = (
            Post.query(ancestor=key).order(Post.words).fetch_page(5, start_cursor=cursor)
        )
        seen.append([p.words for p in page])
    check([w for page in seen for w in page], [i * 100 for i in range(12)], "pages")
    check([len(page) for page in seen][:3], [5, 5, 2], "pages of five")
    check(Author.query(Author.home.city == "London").get().name, "Ada", "a structured filter")
    check(Author.query(Author.tags == "engines").count(), 1, "a repeated property")

    # Transactions.
    @ndb.transactional()
    def bump(author_key, by):
        author = author_key.get()
        author.karma += by
        author.put()
        return author.karma

    check(bump(key, 5), 5, "a transaction")
    check(bump(key, 2), 7, "another")

    @ndb.transactional()
    def fail(author_key):
        author = author_key.get()
        author.karma = -100
        author.put()
        raise ValueError("rolled back")

    try:
        fail(key)
    except ValueError:
        pass
    check(key.get().karma, 7, "a failed transaction wrote nothing")

    # Deletes.
    ndb.delete_multi(keys[:6])
    check(Post.query(ancestor=key).count(), 6, "six left")

    # Namespaces.
    other = Author(id="ada", name="Another Ada", namespace="other")
    other.put()
    check(ndb.Key(Author, "ada", namespace="other").get().name, "Another Ada", "a namespace")
    check(key.get().name, "Ada", "the default namespace untouched")

print("ok")
