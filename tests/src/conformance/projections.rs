//! Keys-only queries (R-Q1) and projection queries (R-Q2).

use datastore_entity::prelude::*;
use datastore_entity::{Error, Indexed, PropertyMap, PropertyPath};

use crate::harness::{Backend, Ctx};
use crate::{Account, Address, Post, PostCard, TagRow, account};

#[macro_export]
macro_rules! projections_tests {
    ($backend:expr) => {
        $crate::conformance!($backend;
            projection_keys_only_returns_typed_keys_and_streams,
            projection_structs_return_exactly_their_fields,
            projection_an_array_gives_one_row_per_element,
            projection_with_filters_orders_limits_and_cursors,
            projection_timestamps_come_back_as_timestamps,
            projection_of_every_value_type,
            projection_of_an_equality_filtered_property_is_refused,
            projection_sub_properties_of_an_excluded_embedded_entity_are_excluded,
        );
    };
}

fn post(parent: &Key<Account>, title: &str, author: &str, published: i64, tags: &[&str]) -> Post {
    Post {
        account: parent.clone(),
        id: None,
        title: title.into(),
        author: author.into(),
        published: Timestamp::from_micros(published),
        tags: tags.iter().map(|t| (*t).to_owned()).collect(),
        body: format!("the body of {title}"),
        location: Some(Address {
            city: "Paris".into(),
        }),
    }
}

fn card(title: &str, author: &str) -> PostCard {
    PostCard {
        title: title.into(),
        author: author.into(),
    }
}

/// Five posts under one account (named after the test: the legacy emulator locks entity
/// groups across namespaces).
async fn posts(t: &Ctx, owner: &str) -> (Key<Account>, Vec<Key<Post>>) {
    let parent = t.db.put(&account(owner)).await.unwrap();
    let keys =
        t.db.put_many(&[
            post(&parent, "e", "ann", 50, &["rust", "db"]),
            post(&parent, "b", "bob", 20, &["rust"]),
            post(&parent, "d", "ann", 40, &["go"]),
            post(&parent, "a", "cat", 10, &["rust", "go", "db"]),
            post(&parent, "c", "bob", 30, &["db"]),
        ])
        .await
        .unwrap();
    (parent, keys)
}

pub async fn projection_keys_only_returns_typed_keys_and_streams(t: Ctx) {
    let (parent, written) = posts(&t, "keys-owner").await;
    let mut expected = written.clone();
    expected.sort();
    let page = t.db.query::<Post>().keys_only().fetch().await.unwrap();
    assert_eq!(page.items, expected);
    assert_eq!(page.next, None);
    for key in &page.items {
        assert_eq!(key.kind(), "Post");
        assert_eq!(key.parent().as_ref(), Some(parent.raw()));
        assert_eq!(key.namespace(), t.db.partition().namespace);
    }
    let first = t.db.get(&page.items[0]).await.unwrap().unwrap();
    assert_eq!(first.id, page.items[0].id());
    // Filtered and ordered: the keys of the matching entities, in order.
    let bobs =
        t.db.query::<Post>()
            .filter(Post::AUTHOR.eq("bob"))
            .order(Post::PUBLISHED.desc())
            .keys_only()
            .fetch()
            .await
            .unwrap();
    assert_eq!(bobs.items, [written[4].clone(), written[1].clone()]);
    // Streamed page by page: the same keys; a limit caps the stream.
    let streamed: Vec<Key<Post>> =
        t.db.query::<Post>()
            .keys_only()
            .stream()
            .try_collect()
            .await
            .unwrap();
    assert_eq!(streamed, expected);
    let capped: Vec<Key<Post>> =
        t.db.query::<Post>()
            .order(Post::PUBLISHED.asc())
            .keys_only()
            .limit(3)
            .stream()
            .try_collect()
            .await
            .unwrap();
    assert_eq!(
        capped,
        [written[3].clone(), written[1].clone(), written[4].clone()]
    );
}

pub async fn projection_structs_return_exactly_their_fields(t: Ctx) {
    posts(&t, "cards-owner").await;
    let ordered =
        t.db.query::<Post>()
            .order(Post::TITLE.asc())
            .project::<PostCard>()
            .fetch()
            .await
            .unwrap();
    assert_eq!(
        ordered.items,
        [
            card("a", "cat"),
            card("b", "bob"),
            card("c", "bob"),
            card("d", "ann"),
            card("e", "ann"),
        ]
    );
    let by_author =
        t.db.query::<Post>()
            .order(Post::AUTHOR.desc())
            .order(Post::PUBLISHED.asc())
            .project::<PostCard>()
            .fetch()
            .await
            .unwrap();
    assert_eq!(
        by_author.items,
        [
            card("a", "cat"),
            card("b", "bob"),
            card("c", "bob"),
            card("d", "ann"),
            card("e", "ann"),
        ]
    );
    // Without an order, both emulators return the rows in the order of the projected
    // properties taken by name (author, then title), not in the order the projection lists
    // them (title, then author), nor by key.
    let unordered =
        t.db.query::<Post>()
            .project::<PostCard>()
            .fetch()
            .await
            .unwrap();
    assert_eq!(
        unordered.items,
        [
            card("d", "ann"),
            card("e", "ann"),
            card("b", "bob"),
            card("c", "bob"),
            card("a", "cat"),
        ]
    );
}

pub async fn projection_an_array_gives_one_row_per_element(t: Ctx) {
    let parent = t.db.put(&account("tags-owner")).await.unwrap();
    t.db.put_many(&[
        post(&parent, "x", "ann", 1, &["rust", "db"]),
        post(&parent, "y", "ann", 2, &["go"]),
    ])
    .await
    .unwrap();
    let row = |tags: &str, title: &str| TagRow {
        tags: tags.into(),
        title: title.into(),
    };
    let rows = || async {
        t.db.query::<Post>()
            .project::<TagRow>()
            .fetch()
            .await
            .map(|page| page.items)
    };
    // One row per element, in the order of the projected values.
    let expected = [row("db", "x"), row("go", "y"), row("rust", "x")];
    assert_eq!(rows().await.unwrap(), expected);
    let by_title =
        t.db.query::<Post>()
            .order(Post::TITLE.desc())
            .project::<TagRow>()
            .fetch()
            .await
            .unwrap()
            .items;
    match t.backend {
        // The legacy emulator breaks the tie of x's two rows ascending.
        Backend::Datastore => {
            assert_eq!(by_title, [row("go", "y"), row("db", "x"), row("rust", "x")]);
        }
        // Firestore in Datastore mode breaks it in the direction of the last order.
        _ => assert_eq!(by_title, [row("go", "y"), row("rust", "x"), row("db", "x")]),
    }
    // A post without tags has no row...
    t.db.put(&post(&parent, "z", "ann", 3, &[])).await.unwrap();
    let with_empty = rows().await;
    match t.backend {
        // ... except on the legacy emulator, which indexes the empty array as null: its row
        // holds a null `tags`, which a `String` field cannot hold.
        Backend::Datastore => assert!(
            matches!(
                &with_empty,
                Err(Error::Decode { property, found, .. }) if property == "tags" && found == "null"
            ),
            "{with_empty:?}"
        ),
        _ => assert_eq!(with_empty.unwrap(), expected),
    }
}

pub async fn projection_with_filters_orders_limits_and_cursors(t: Ctx) {
    posts(&t, "paged-owner").await;
    let query = || {
        t.db.query::<Post>()
            .filter(Post::TAGS.eq("rust"))
            .order(Post::TITLE.desc())
            .project::<PostCard>()
            .limit(2)
    };
    let first = query().fetch().await.unwrap();
    assert_eq!(first.items, [card("e", "ann"), card("b", "bob")]);
    let next = first.next.expect("a third post is tagged rust");
    let second = query().start_after(next).fetch().await.unwrap();
    assert_eq!(second.items, [card("a", "cat")]);
    assert_eq!(second.next, None);
    // With a range filter on a projected property.
    let after_b: Vec<PostCard> =
        t.db.query::<Post>()
            .filter(Post::TITLE.gt("b"))
            .project::<PostCard>()
            .stream()
            .try_collect()
            .await
            .unwrap();
    assert_eq!(
        after_b,
        [card("c", "bob"), card("d", "ann"), card("e", "ann")]
    );
}

/// An entity with an indexed timestamp, and a projection of it.
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(projection(StampAt: at, label), index(at, label))]
pub(crate) struct Stamp {
    #[key]
    id: KeyId,
    #[index(monotonic)]
    at: Timestamp,
    label: String,
}

pub async fn projection_timestamps_come_back_as_timestamps(t: Ctx) {
    let micros = [
        1_700_000_000_123_456,
        -1,
        0,
        253_402_300_799_999_999,
        -62_135_596_800_000_000,
    ];
    let stamps: Vec<Stamp> = micros
        .iter()
        .enumerate()
        .map(|(i, m)| Stamp {
            id: KeyId::new(i as i64 + 1).unwrap(),
            at: Timestamp::from_micros(*m),
            label: format!("s{i}"),
        })
        .collect();
    t.db.put_many(&stamps).await.unwrap();
    let rows =
        t.db.query::<Stamp>()
            .order(Stamp::AT.asc())
            .project::<StampAt>()
            .fetch()
            .await
            .unwrap();
    let mut expected: Vec<StampAt> = stamps
        .iter()
        .map(|s| StampAt {
            at: s.at,
            label: s.label.clone(),
        })
        .collect();
    expected.sort_by_key(|s| s.at);
    assert_eq!(rows.items, expected);
    let after_epoch =
        t.db.query::<Stamp>()
            .filter(Stamp::AT.ge(Timestamp::from_micros(0)))
            .project::<StampAt>()
            .fetch()
            .await
            .unwrap();
    assert_eq!(
        after_epoch
            .items
            .iter()
            .map(|s| s.at.as_micros())
            .collect::<Vec<_>>(),
        [0, 1_700_000_000_123_456, 253_402_300_799_999_999]
    );
}

pub async fn projection_of_an_equality_filtered_property_is_refused(t: Ctx) {
    posts(&t, "refused-owner").await;
    let result =
        t.db.query::<Post>()
            .filter(Post::AUTHOR.eq("ann"))
            .project::<PostCard>()
            .fetch()
            .await;
    // INVALID_ARGUMENT "Cannot use projection on a property with an equality filter." from
    // the Firestore emulator, the same in lower case without the period from the legacy one.
    assert!(
        matches!(result, Err(Error::InvalidQuery { .. })),
        "{:?}: {result:?}",
        t.backend
    );
    // An equality filter on another property is fine.
    let tagged_go =
        t.db.query::<Post>()
            .filter(Post::TAGS.eq("go"))
            .order(Post::TITLE.asc())
            .project::<PostCard>()
            .fetch()
            .await
            .unwrap();
    assert_eq!(tagged_go.items, [card("a", "cat"), card("d", "ann")]);
}

/// An entity with the same embedded type twice: once excluded, once indexed.
#[derive(Entity, Debug, Clone, PartialEq)]
struct Profile {
    #[key]
    id: KeyId,
    #[exclude_from_index]
    secret: Address,
    public: Address,
}

/// A projection of one dotted property, written by hand: the derive refuses to project an
/// excluded path, and this checks what the backends find there.
macro_rules! city_projection {
    ($name:ident, $path:literal) => {
        #[derive(Debug, Clone, PartialEq)]
        struct $name(String);
        impl Projection for $name {
            type Entity = Profile;
            const PROPERTIES: &'static [&'static str] = &[$path];
            fn from_properties(mut properties: PropertyMap) -> Result<Self, Error> {
                let value = properties.remove($path).map(|p| p.value);
                String::from_value(value.unwrap_or(datastore_entity::Value::Null))
                    .map($name)
                    .map_err(|e| e.into_error("Profile", $path))
            }
        }
    };
}

city_projection!(SecretCity, "secret.city");
city_projection!(PublicCity, "public.city");

pub async fn projection_sub_properties_of_an_excluded_embedded_entity_are_excluded(t: Ctx) {
    let profile = |id: i64, secret: &str, public: &str| Profile {
        id: KeyId::new(id).unwrap(),
        secret: Address {
            city: secret.into(),
        },
        public: Address {
            city: public.into(),
        },
    };
    t.db.put_many(&[profile(1, "Oslo", "Rome"), profile(2, "Lima", "Oslo")])
        .await
        .unwrap();
    // The typed API has no descriptor for `secret.city` (it is excluded): a raw one.
    let secret: PropertyPath<Profile, String, Indexed> = PropertyPath::new("secret.city");
    let ids = |items: Vec<Profile>| items.iter().map(|p| p.id.get()).collect::<Vec<_>>();
    let filtered = ids(t
        .db
        .query::<Profile>()
        .filter(secret.eq("Oslo"))
        .fetch()
        .await
        .unwrap()
        .items);
    let ordered = ids(t
        .db
        .query::<Profile>()
        .order(secret.asc())
        .fetch()
        .await
        .unwrap()
        .items);
    let projected =
        t.db.query::<Profile>()
            .project::<SecretCity>()
            .fetch()
            .await
            .unwrap()
            .items;
    // R-I1: excluding an embedded entity excludes everything in it, on every backend. (The
    // Firestore emulator would index `secret.city` if only the entity value carried the
    // exclusion; the crate sends it on every value inside, as the legacy emulator implied.)
    assert_eq!(filtered, Vec::<i64>::new());
    assert_eq!(ordered, Vec::<i64>::new());
    assert_eq!(projected, Vec::<SecretCity>::new());
    // The indexed embedded entity is visible everywhere.
    let public = Profile::PUBLIC.dot(Address::CITY);
    let by_public =
        t.db.query::<Profile>()
            .filter(public.eq("Oslo"))
            .fetch()
            .await
            .unwrap();
    assert_eq!(ids(by_public.items), [2]);
    let public_rows =
        t.db.query::<Profile>()
            .project::<PublicCity>()
            .fetch()
            .await
            .unwrap();
    assert_eq!(
        public_rows.items,
        [PublicCity("Oslo".into()), PublicCity("Rome".into())]
    );
    // Whole entities read the excluded values back.
    let loaded =
        t.db.get(&Profile::key(KeyId::new(1).unwrap()))
            .await
            .unwrap();
    assert_eq!(loaded.unwrap().secret.city, "Oslo");
}

/// One property of every type, each projected on its own.
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(
    projection(FlagOnly: flag),
    projection(CountOnly: count),
    projection(RatioOnly: ratio),
    projection(LabelOnly: label),
    projection(BytesOnly: bytes),
    projection(PlaceOnly: place),
    projection(OwnerOnly: owner),
    projection(MaybeOnly: maybe),
    projection(BlobOnly: raw)
)]
struct Typed {
    #[key]
    id: KeyId,
    flag: bool,
    count: i64,
    ratio: f64,
    label: String,
    bytes: Blob,
    place: GeoPoint,
    owner: Key<Account>,
    maybe: Option<i32>,
    #[blob]
    raw: Vec<u8>,
}

pub async fn projection_of_every_value_type(t: Ctx) {
    // A projection returns index values (timestamps as integers, bytes as strings, with
    // meaning 18 on the service): each comes back in its field's type.
    let owner = t.db.put(&account("typed-owner")).await.unwrap();
    let typed = Typed {
        id: KeyId::new(1).unwrap(),
        flag: true,
        count: -42,
        ratio: 2.5,
        label: "é".into(),
        bytes: Blob::from(b"bytes".to_vec()),
        place: GeoPoint::new(1.5, -2.5).unwrap(),
        owner: owner.clone(),
        maybe: None,
        raw: b"raw".to_vec(),
    };
    t.db.put(&typed).await.unwrap();
    macro_rules! one {
        ($projection:ident) => {
            t.db.query::<Typed>()
                .project::<$projection>()
                .fetch()
                .await
                .unwrap()
                .items
        };
    }
    assert_eq!(one!(FlagOnly), [FlagOnly { flag: true }]);
    assert_eq!(one!(CountOnly), [CountOnly { count: -42 }]);
    assert_eq!(one!(RatioOnly), [RatioOnly { ratio: 2.5 }]);
    assert_eq!(one!(LabelOnly), [LabelOnly { label: "é".into() }]);
    assert_eq!(
        one!(BytesOnly),
        [BytesOnly {
            bytes: typed.bytes.clone()
        }]
    );
    assert_eq!(one!(PlaceOnly), [PlaceOnly { place: typed.place }]);
    assert_eq!(one!(OwnerOnly), [OwnerOnly { owner }]);
    assert_eq!(one!(MaybeOnly), [MaybeOnly { maybe: None }]);
    assert_eq!(
        one!(BlobOnly),
        [BlobOnly {
            raw: b"raw".to_vec()
        }]
    );
}
