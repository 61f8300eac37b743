//! Partial reads (issue #29): entities read through the service's property mask — only the
//! properties named, indexed or not, nested paths into embedded entities included — by key and
//! by query. The legacy Datastore emulator does not know property masks: it answers whole
//! entities (a superset, which the typed reads accept), recorded here.

use std::borrow::Cow;

use datastore_entity::backend::QuerySpec;
use datastore_entity::prelude::*;
use datastore_entity::{Property, PropertyMap, Value};

use crate::harness::{Backend, Ctx};

#[macro_export]
macro_rules! partial_tests {
    ($backend:expr) => {
        $crate::conformance!($backend;
            partial_a_narrower_struct_reads_only_its_properties,
            partial_paths_into_embedded_entities,
            partial_queries_return_only_the_masked_properties,
            partial_a_projection_struct_by_key,
            partial_typed_reads_reach_into_embedded_entities,
        );
    };
}

/// A large document.
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(kind = "Document", projection(DocumentCard: title, words))]
pub struct Document {
    #[key]
    pub id: KeyName,
    pub title: String,
    pub words: i64,
    #[exclude_from_index]
    pub body: String,
}

/// The same kind, without the body.
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(kind = "Document")]
pub struct DocumentTitle {
    #[key]
    pub id: KeyName,
    pub title: String,
}

fn document(id: &str) -> Document {
    Document {
        id: KeyName::new(id).unwrap(),
        title: format!("About {id}"),
        words: 3,
        body: "text ".repeat(1000),
    }
}

fn masks_honoured(t: &Ctx) -> bool {
    t.backend != Backend::Datastore
}

fn paths(names: &[&[&'static str]]) -> Vec<Vec<Cow<'static, str>>> {
    names
        .iter()
        .map(|path| path.iter().map(|n| Cow::Borrowed(*n)).collect())
        .collect()
}

pub async fn partial_a_narrower_struct_reads_only_its_properties(t: Ctx) {
    t.db.put(&document("narrow")).await.unwrap();
    let key = DocumentTitle::key(KeyName::new("narrow").unwrap());
    let read = t.db.get_partial(&key).await.unwrap().expect("there");
    assert_eq!(read.title, "About narrow");
    let many =
        t.db.get_many_partial(&[
            key.clone(),
            DocumentTitle::key(KeyName::new("none").unwrap()),
        ])
        .await
        .unwrap();
    assert_eq!(many, [Some(read), None]);
    // Under the typed read, the service sent only `title`.
    let raw = t.db.bind(&key).unwrap().into_raw();
    let found =
        t.db.backend()
            .lookup_masked(std::slice::from_ref(&raw), &paths(&[&["title"]]))
            .await
            .unwrap();
    let (properties, stamp) = found[0].as_ref().expect("there");
    assert!(stamp.version > 0);
    let names: Vec<&str> = properties.iter().map(|(n, _)| n).collect();
    match masks_honoured(&t) {
        true => assert_eq!(names, ["title"]),
        false => assert_eq!(names.len(), 3, "the legacy emulator sends everything"),
    }
}

pub async fn partial_paths_into_embedded_entities(t: Ctx) {
    let key = t.db.put(&document("nested")).await.unwrap();
    let raw = t.db.bind(&key).unwrap().into_raw();
    let inner = PropertyMap::from([
        ("x", Property::indexed(Value::Integer(5))),
        ("y", Property::excluded(Value::String("y".into()))),
    ]);
    let mut whole =
        t.db.backend()
            .lookup(std::slice::from_ref(&raw), None)
            .await
            .unwrap()[0]
            .clone()
            .unwrap();
    whole.insert("e", Property::indexed(Value::Entity(inner)));
    whole.insert(
        "list",
        Property::indexed(Value::Array(vec![Value::Entity(PropertyMap::from([(
            "z",
            Property::indexed(Value::Integer(1)),
        )]))])),
    );
    t.db.backend()
        .commit(
            vec![datastore_entity::backend::Mutation::Upsert(
                raw.clone(),
                whole,
                datastore_entity::backend::Mask::Whole,
            )],
            None,
        )
        .await
        .unwrap();
    let found =
        t.db.backend()
            .lookup_masked(
                std::slice::from_ref(&raw),
                &paths(&[
                    &["e", "y"],
                    &["words"],
                    &["list", "z"],
                    &["title", "no"],
                    &["missing"],
                ]),
            )
            .await
            .unwrap();
    let (properties, _) = found[0].as_ref().expect("there");
    if !masks_honoured(&t) {
        assert!(
            properties.get("body").is_some(),
            "the legacy emulator sends everything"
        );
        return;
    }
    // `e.y` only, with its exclusion; no path through an array or a string; nothing missing.
    let expected = PropertyMap::from([
        (
            "e",
            Property::indexed(Value::Entity(PropertyMap::from([(
                "y",
                Property::excluded(Value::String("y".into())),
            )]))),
        ),
        ("words", Property::indexed(Value::Integer(3))),
    ]);
    assert_eq!(properties, &expected);
}

pub async fn partial_queries_return_only_the_masked_properties(t: Ctx) {
    t.db.put(&document("query")).await.unwrap();
    let spec = QuerySpec {
        partition: t.db.partition().clone(),
        kind: "Document".to_owned(),
        property_mask: Some(paths(&[&["title"], &["body"]])),
        ..QuerySpec::default()
    };
    let batch = t.db.backend().run_query(&spec, None).await.unwrap();
    let result = batch
        .results
        .iter()
        .find(|r| r.key.name() == Some("query"))
        .unwrap();
    let names: Vec<&str> = result.properties.iter().map(|(n, _)| n).collect();
    match masks_honoured(&t) {
        true => assert_eq!(names, ["body", "title"], "an excluded property too"),
        false => assert_eq!(names.len(), 3),
    }
    // Typed: a narrower struct's query reads only its properties.
    let page =
        t.db.query::<DocumentTitle>()
            .filter(DocumentTitle::TITLE.eq("About query"))
            .partial()
            .fetch()
            .await
            .unwrap();
    assert_eq!(page.items.len(), 1);
    assert_eq!(page.items[0].title, "About query");
}

pub async fn partial_a_projection_struct_by_key(t: Ctx) {
    let key = t.db.put(&document("card")).await.unwrap();
    let card: DocumentCard = t.db.get_projected(&key).await.unwrap().expect("there");
    assert_eq!((card.title.as_str(), card.words), ("About card", 3));
    let missing = Document::key(KeyName::new("no-card").unwrap());
    assert!(
        t.db.get_projected::<DocumentCard>(&missing)
            .await
            .unwrap()
            .is_none()
    );
}

/// An address, as a profile stores it.
#[derive(Entity, Debug, Clone, PartialEq)]
pub struct Address {
    pub city: String,
    pub zip: String,
    #[exclude_from_index]
    pub notes: String,
}

/// A person's profile, with addresses embedded.
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(kind = "Profile")]
pub struct Profile {
    #[key]
    pub id: KeyName,
    pub name: String,
    pub home: Address,
    pub past: Vec<Address>,
    pub work: Option<Address>,
}

/// Only the city of an address.
#[derive(Entity, Debug, Clone, PartialEq)]
pub struct City {
    pub city: String,
}

/// The same kind, only the cities.
#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(kind = "Profile")]
pub struct ProfileCities {
    #[key]
    pub id: KeyName,
    pub home: City,
    pub past: Vec<City>,
    pub work: Option<City>,
}

pub async fn partial_typed_reads_reach_into_embedded_entities(t: Ctx) {
    // The mask of a narrower struct reaches into an embedded entity (`home.city`), not through
    // an array of them (`past`, whole: a path through an array reads nothing).
    assert_eq!(
        datastore_entity::backend::Mask::read_paths(ProfileCities::SCHEMA),
        paths(&[&["home", "city"], &["past"], &["work", "city"]])
    );
    let address = |city: &str| Address {
        city: city.into(),
        zip: "00000".into(),
        notes: "n".repeat(500),
    };
    for (id, work) in [("with-work", Some(address("Lyon"))), ("no-work", None)] {
        t.db.put(&Profile {
            id: KeyName::new(id).unwrap(),
            name: "Ada".into(),
            home: address("Paris"),
            past: vec![address("Rome"), address("Oslo")],
            work,
        })
        .await
        .unwrap();
    }
    let city = |c: &str| City { city: c.into() };
    let read =
        t.db.get_many_partial(&[
            ProfileCities::key(KeyName::new("with-work").unwrap()),
            ProfileCities::key(KeyName::new("no-work").unwrap()),
        ])
        .await
        .unwrap();
    let expected = |id: &str, work: Option<City>| ProfileCities {
        id: KeyName::new(id).unwrap(),
        home: city("Paris"),
        past: vec![city("Rome"), city("Oslo")],
        work,
    };
    assert_eq!(
        read,
        [
            Some(expected("with-work", Some(city("Lyon")))),
            Some(expected("no-work", None))
        ]
    );
    let mut page =
        t.db.query::<ProfileCities>()
            .partial()
            .fetch()
            .await
            .unwrap()
            .items;
    page.sort_by(|a, b| a.id.as_str().cmp(b.id.as_str()));
    assert_eq!(
        page,
        [
            expected("no-work", None),
            expected("with-work", Some(city("Lyon")))
        ]
    );
    // What the service sent for `home`: only its city.
    let raw =
        t.db.bind(&ProfileCities::key(KeyName::new("with-work").unwrap()))
            .unwrap()
            .into_raw();
    let found =
        t.db.backend()
            .lookup_masked(std::slice::from_ref(&raw), &paths(&[&["home", "city"]]))
            .await
            .unwrap();
    let (properties, _) = found[0].as_ref().expect("there");
    if masks_honoured(&t) {
        let home = properties.get("home").expect("home");
        let Value::Entity(home) = &home.value else {
            panic!("{home:?}")
        };
        assert_eq!(home.iter().map(|(n, _)| n).collect::<Vec<_>>(), ["city"]);
    }
}
