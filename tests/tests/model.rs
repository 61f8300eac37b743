//! The value model: every supported field type round-trips through entity form, decoding
//! the wrong shape is a typed error, and names and ids hold only valid values.

use datastore_entity::prelude::*;
use datastore_entity::{Error, IdOrName, PropertyMap, Value};
use datastore_entity_tests::Account;
use proptest::prelude::*;

#[derive(Entity, Debug, Clone, PartialEq)]
pub struct Address {
    pub city: String,
    pub street: Option<String>,
    pub codes: Vec<i64>,
}

#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(kind = "Everything", rename_all = "camelCase")]
pub struct Everything {
    #[parent]
    pub account: Key<Account>,
    #[key]
    pub id: KeyId,
    pub flag: bool,
    pub tiny: i8,
    pub small: i16,
    pub medium: i32,
    pub large: i64,
    pub byte: u8,
    pub word: u16,
    pub dword: u32,
    pub text: String,
    pub maybe_text: Option<String>,
    pub tags: Vec<String>,
    #[index(monotonic)]
    pub when: Timestamp,
    pub blob: Blob,
    #[blob]
    pub raw_bytes: Vec<u8>,
    #[blob]
    pub maybe_bytes: Option<Vec<u8>>,
    pub place: GeoPoint,
    pub owner: Key<Account>,
    pub friends: Vec<Key<Account>>,
    pub home: Address,
    pub work: Option<Address>,
    pub past: Vec<Address>,
    pub boxed: Box<i64>,
    #[exclude_from_index]
    pub notes: String,
    #[ttl]
    pub expires: Option<Timestamp>,
}

#[derive(Entity, Debug, Clone)]
pub struct Floats {
    #[key]
    pub name: String,
    pub double: f64,
    pub single: f32,
    pub doubles: Vec<f64>,
}

/// Entity form and back again, through the public trait.
fn round_trip<E: Entity>(entity: &E) -> E {
    let key = entity.entity_key().expect("valid key");
    E::from_entity(key.raw(), entity.to_properties().unwrap()).expect("decodes")
}

fn key_name() -> impl Strategy<Value = KeyName> {
    "[a-zA-Z0-9 é日-]{1,40}".prop_filter_map("valid key name", |s| KeyName::new(s).ok())
}

fn address() -> impl Strategy<Value = Address> {
    (
        any::<String>(),
        any::<Option<String>>(),
        proptest::collection::vec(any::<i64>(), 0..4),
    )
        .prop_map(|(city, street, codes)| Address {
            city,
            street,
            codes,
        })
}

fn account_key() -> impl Strategy<Value = Key<Account>> {
    key_name().prop_map(Account::key)
}

prop_compose! {
    fn everything()(
        account in account_key(),
        id in 1..=i64::MAX,
        (flag, tiny, small, medium, large) in (any::<bool>(), any::<i8>(), any::<i16>(), any::<i32>(), any::<i64>()),
        (byte, word, dword) in (any::<u8>(), any::<u16>(), any::<u32>()),
        (text, maybe_text, tags) in (any::<String>(), any::<Option<String>>(), proptest::collection::vec(any::<String>(), 0..5)),
        when in any::<i64>(),
        (blob, raw_bytes, maybe_bytes) in (any::<Vec<u8>>(), any::<Vec<u8>>(), any::<Option<Vec<u8>>>()),
        (lat, lng) in (-90.0..=90.0f64, -180.0..=180.0f64),
        owner in account_key(),
        friends in proptest::collection::vec(account_key(), 0..3),
        (home, work, past) in (address(), proptest::option::of(address()), proptest::collection::vec(address(), 0..3)),
        (boxed, notes, expires) in (any::<i64>(), any::<String>(), any::<Option<i64>>()),
    ) -> Everything {
        Everything {
            account,
            id: KeyId::new(id).unwrap(),
            flag, tiny, small, medium, large, byte, word, dword,
            text, maybe_text, tags,
            when: Timestamp::from_micros(when),
            blob: Blob::from(blob),
            raw_bytes, maybe_bytes,
            place: GeoPoint::new(lat, lng).unwrap(),
            owner, friends, home, work, past,
            boxed: Box::new(boxed),
            notes,
            expires: expires.map(Timestamp::from_micros),
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    // R-P1, R-P2: every field type, nested and optional values included, comes back unchanged.
    #[test]
    fn every_field_type_round_trips(entity in everything()) {
        prop_assert_eq!(round_trip(&entity), entity);
    }

    // Floats compare by bit pattern, so NaN and the infinities are checked too.
    #[test]
    fn floats_round_trip_bit_for_bit(
        double in prop_oneof![any::<f64>(), Just(f64::NAN), Just(f64::INFINITY), Just(f64::NEG_INFINITY), Just(-0.0)],
        single in prop_oneof![any::<f32>(), Just(f32::NAN), Just(f32::INFINITY), Just(f32::NEG_INFINITY)],
        doubles in proptest::collection::vec(any::<f64>(), 0..5),
    ) {
        let entity = Floats { name: "f".into(), double, single, doubles };
        let back = round_trip(&entity);
        prop_assert_eq!(back.double.to_bits(), double.to_bits());
        prop_assert_eq!(back.single.to_bits(), single.to_bits());
        let bits = |v: &[f64]| v.iter().map(|d| d.to_bits()).collect::<Vec<_>>();
        prop_assert_eq!(bits(&back.doubles), bits(&entity.doubles));
    }

    // R-N2, R-N5, R-N6, R-N7: KeyName accepts exactly the names the rules allow.
    #[test]
    fn key_name_accepts_exactly_the_valid_names(name in "(__)?[a-z./é_]{0,6}(__)?") {
        let valid = !name.is_empty()
            && name.len() <= 1500
            && !name.contains('/')
            && name != "."
            && name != ".."
            && !(name.len() >= 4 && name.starts_with("__") && name.ends_with("__"));
        prop_assert_eq!(KeyName::new(name.clone()).is_ok(), valid, "{:?}", name);
    }

    // R-K2: KeyId holds exactly 1..=i64::MAX.
    #[test]
    fn key_id_accepts_exactly_positive_ids(id in any::<i64>()) {
        prop_assert_eq!(KeyId::new(id).is_ok(), id > 0);
        if let Ok(key_id) = KeyId::new(id) {
            prop_assert_eq!(key_id.get(), id);
        }
    }
}

#[test]
fn key_name_edges() {
    // R-N7: exactly 1,500 bytes is fine, in ASCII and in multi-byte UTF-8; one more is not.
    assert!(KeyName::new("a".repeat(1500)).is_ok());
    assert!(KeyName::new("é".repeat(750)).is_ok());
    assert!(KeyName::new("日".repeat(500)).is_ok());
    let too_long = KeyName::new("日".repeat(500) + "a").unwrap_err();
    assert!(matches!(
        too_long,
        Error::InvalidName {
            violation: datastore_entity::NameViolation::TooLong { len: 1501, .. },
            ..
        }
    ));
    assert!(KeyName::new("").is_err()); // R-N7
    assert!(KeyName::new("a/b").is_err()); // R-N2
    assert!(KeyName::new("/").is_err()); // R-N2
    assert!(KeyName::new(".").is_err()); // R-N6
    assert!(KeyName::new("..").is_err()); // R-N6
    assert!(KeyName::new("...").is_ok()); // R-N6 only forbids exactly `.` and `..`
    assert!(KeyName::new("__key__").is_err()); // R-N5
    assert!(KeyName::new("__").is_ok()); // too short to match `__.*__`
    assert!(KeyName::new("ann.smith").is_ok()); // dots are fine in key names
    // R-N1: bytes must be UTF-8.
    assert!(KeyName::from_bytes(b"caf\xc3\xa9").is_ok());
    assert!(KeyName::from_bytes(b"caf\xc3").is_err());
}

#[test]
fn key_name_errors_say_what_and_how_to_fix() {
    let message = KeyName::new("orders/2024").unwrap_err().to_string();
    assert!(message.contains("orders/2024"), "{message}");
    assert!(message.contains("R-N2"), "{message}");
    assert!(message.contains("orders_2024"), "{message}");
}

#[test]
fn key_id_edges() {
    // R-K2
    assert!(KeyId::new(0).is_err());
    assert!(KeyId::new(-1).is_err());
    assert!(KeyId::new(i64::MIN).is_err());
    assert_eq!(KeyId::new(1).unwrap().get(), 1);
    assert_eq!(KeyId::new(i64::MAX).unwrap().get(), i64::MAX);
    assert!(KeyId::from_u64(u64::MAX).is_err());
    assert!(KeyId::from_u64(0).is_err());
    assert_eq!(KeyId::from_u64(9).unwrap().get(), 9);
}

#[test]
fn scattered_names_are_stable_and_spread() {
    // R-K4: sequential natural names get unrelated prefixes.
    let a = KeyName::scattered("Customer1").unwrap();
    let b = KeyName::scattered("Customer2").unwrap();
    assert_eq!(a, KeyName::scattered("Customer1").unwrap());
    assert_ne!(a.as_str()[..6], b.as_str()[..6]);
    assert!(KeyName::scattered("a/b").is_err());
}

#[test]
fn wrong_shape_is_a_typed_error_naming_kind_property_and_types() {
    let account = Account::key(KeyName::new("ann").unwrap());
    let mut properties = PropertyMap::new();
    properties.insert(
        "email",
        datastore_entity::Property::indexed(Value::Integer(7)),
    );
    let error = Account::from_entity(account.raw(), properties).unwrap_err();
    assert_eq!(
        error,
        Error::Decode {
            key: Some(format!("{:?}", account.raw()).into()),
            kind: "Account".into(),
            property: "email".into(),
            expected: "string".into(),
            found: "integer".into(),
        }
    );
}

#[test]
fn nested_decode_errors_name_the_dotted_path() {
    let entity = sample();
    let key = entity.entity_key().unwrap();
    let mut properties = entity.to_properties().unwrap();
    // home.codes[1] holds a string instead of an integer.
    let Value::Entity(home) = &mut properties.get_mut("home").unwrap().value else {
        panic!("home is an embedded entity");
    };
    home.get_mut("codes").unwrap().value =
        Value::Array(vec![Value::Integer(1), Value::String("two".into())]);
    let error = Everything::from_entity(key.raw(), properties).unwrap_err();
    let Error::Decode {
        kind,
        property,
        expected,
        found,
        ..
    } = error
    else {
        panic!("expected a decode error, got {error:?}");
    };
    assert_eq!(
        (kind.as_str(), property.as_str()),
        ("Everything", "home.codes[1]")
    );
    assert_eq!((expected.as_str(), found.as_str()), ("integer", "string"));
}

#[test]
fn out_of_range_integers_and_missing_properties_are_errors() {
    let key = Account::key(KeyName::new("ann").unwrap());
    let error = Account::from_entity(key.raw(), PropertyMap::new()).unwrap_err();
    assert!(
        matches!(&error, Error::Decode { property, found, .. } if property == "email" && found == "no such property")
    );

    let entity = sample();
    let mut properties = entity.to_properties().unwrap();
    properties.get_mut("tiny").unwrap().value = Value::Integer(1000);
    let error =
        Everything::from_entity(entity.entity_key().unwrap().raw(), properties).unwrap_err();
    assert!(
        matches!(&error, Error::Decode { property, .. } if property == "tiny"),
        "{error:?}"
    );
}

#[test]
fn keys_of_the_wrong_kind_are_rejected() {
    let entity = sample();
    let mut properties = entity.to_properties().unwrap();
    properties.get_mut("owner").unwrap().value =
        Value::Key(entity.entity_key().unwrap().into_raw());
    let error =
        Everything::from_entity(entity.entity_key().unwrap().raw(), properties).unwrap_err();
    assert!(
        matches!(&error, Error::Decode { property, expected, .. } if property == "owner" && expected.contains("Account")),
        "{error:?}"
    );
}

#[test]
fn entity_form_has_names_exclusions_and_no_key_fields() {
    let properties = sample().to_properties().unwrap();
    // rename_all = "camelCase"; key and parent are not properties.
    assert!(properties.contains_key("maybeText"));
    assert!(!properties.contains_key("id") && !properties.contains_key("account"));
    // R-I1: #[exclude_from_index]; R-I4: #[ttl] implies exclusion.
    assert!(properties["notes"].excluded);
    assert!(properties["expires"].excluded);
    assert!(!properties["text"].excluded);
    // R-P1: a #[blob] Vec<u8> is a byte string, not an array.
    assert!(matches!(properties["rawBytes"].value, Value::Blob(_)));
    // R-P2: nested structs are embedded entities.
    assert!(matches!(properties["home"].value, Value::Entity(_)));
    assert_eq!(properties["work"].value, Value::Null);
}

#[test]
fn schema_describes_the_kind() {
    let schema = Everything::SCHEMA;
    assert_eq!(schema.kind, "Everything");
    assert!(!schema.embedded);
    assert_eq!(schema.ttl().map(|p| p.name), Some("expires"));
    assert!(schema.property("notes").unwrap().excluded);
    let home = schema
        .property("home")
        .unwrap()
        .embedded()
        .expect("embedded schema");
    assert!(home.embedded);
    assert_eq!(
        home.properties.iter().map(|p| p.name).collect::<Vec<_>>(),
        ["city", "street", "codes"]
    );
    assert_eq!(schema.property("maybeText").unwrap().field, "maybe_text");
    assert!(schema.property("id").is_none());
}

#[test]
fn key_builders_are_typed_and_nest_under_the_parent() {
    // R-E1, R-K5
    let account = Account::key(KeyName::new("ann").unwrap());
    let key = Everything::key(&account, KeyId::new(5).unwrap());
    assert_eq!(key.kind(), "Everything");
    assert_eq!(key.id().map(KeyId::get), Some(5));
    assert_eq!(key.parent().as_ref(), Some(account.raw()));
    assert_eq!(account.name(), Some("ann"));
    assert_eq!(key.raw().path().len(), 2);
    assert_eq!(
        key.raw().path()[0].id_or_name(),
        Some(&IdOrName::Name(KeyName::new("ann").unwrap()))
    );
    // Loading fills the key and parent fields from the key.
    assert_eq!(round_trip(&sample()).account, sample().account);
}

#[test]
fn string_and_u64_keys_are_validated_when_the_key_is_built() {
    #[derive(Entity, Debug)]
    struct ByName {
        #[key]
        name: String,
    }
    #[derive(Entity, Debug)]
    struct ById {
        #[key]
        id: u64,
    }
    assert!(ByName { name: "a/b".into() }.entity_key().is_err()); // R-N2
    assert!(ByName { name: "ok".into() }.entity_key().is_ok());
    assert!(matches!(
        ById { id: 0 }.entity_key(),
        Err(Error::InvalidId { value: 0 })
    )); // R-K2
    assert!(ById { id: u64::MAX }.entity_key().is_err());
    assert_eq!(
        ById { id: 3 }.entity_key().unwrap().id().map(KeyId::get),
        Some(3)
    );
}

#[test]
fn timestamps_and_geo_points() {
    let t = Timestamp::from_micros(-1);
    assert_eq!(t.to_string(), "1969-12-31T23:59:59.999999Z");
    let now = std::time::SystemTime::now();
    assert_eq!(
        std::time::SystemTime::from(Timestamp::from(now))
            .duration_since(now)
            .map(|d| d.as_micros())
            .unwrap_or(0),
        0
    );
    assert!(GeoPoint::new(f64::NAN, 0.0).is_err());
    assert!(GeoPoint::new(0.0, 180.5).is_err());
    assert!(GeoPoint::new(-90.0, -180.0).is_ok());
}

fn sample() -> Everything {
    let account = Account::key(KeyName::new("ann").unwrap());
    Everything {
        account: account.clone(),
        id: KeyId::new(5).unwrap(),
        flag: true,
        tiny: -3,
        small: 300,
        medium: 70_000,
        large: i64::MIN,
        byte: 255,
        word: 65_535,
        dword: u32::MAX,
        text: "héllo".into(),
        maybe_text: None,
        tags: vec!["a".into(), "b".into()],
        when: Timestamp::from_micros(1_700_000_000_000_000),
        blob: Blob::from(vec![0, 159, 146, 150]),
        raw_bytes: vec![0xff, 0xfe],
        maybe_bytes: Some(vec![1]),
        place: GeoPoint::new(48.85, 2.35).unwrap(),
        owner: account.clone(),
        friends: vec![account],
        home: Address {
            city: "Paris".into(),
            street: None,
            codes: vec![1, 2],
        },
        work: None,
        past: vec![],
        boxed: Box::new(9),
        notes: "private".into(),
        expires: Some(Timestamp::from_micros(5)),
    }
}

/// Issue #26: a value nested far past the limit (which no write accepts, but a caller can
/// build) is dropped, cloned, compared and shown without overflowing the stack: on a thread
/// with 256 KiB of stack, a hundred thousand levels of arrays directly in arrays, and of
/// entities in arrays, each go through every walk.
#[test]
fn values_nested_a_hundred_thousand_levels_are_walked_without_recursion() {
    const LEVELS: usize = 100_000;
    let walk = || {
        let arrays = (0..LEVELS).fold(Value::Integer(1), |v, _| Value::Array(vec![v]));
        let entities = (0..LEVELS).fold(Value::Integer(1), |v, _| {
            Value::Array(vec![Value::Entity(PropertyMap::from([(
                "n",
                datastore_entity::Property::indexed(v),
            )]))])
        });
        for value in [arrays, entities] {
            let copy = value.clone();
            assert!(copy == value);
            assert_eq!(
                datastore_entity::compare_values(&copy, &value),
                std::cmp::Ordering::Equal
            );
            let other = Value::Array(vec![Value::Null]);
            assert!(copy != other);
            let shown = format!("{value:?}");
            assert!(
                shown.contains('…') && shown.len() < 10_000,
                "{}",
                shown.len()
            );
            drop(copy);
            drop(value);
        }
    };
    std::thread::Builder::new()
        .stack_size(256 * 1024)
        .spawn(walk)
        .unwrap()
        .join()
        .expect("walked within 256 KiB of stack");
}

/// A value whose hand-written `write_value` announces an array of `announced` values and
/// writes `written`.
#[derive(Debug, Clone, PartialEq)]
struct Miscounted {
    announced: usize,
    written: usize,
}

impl PropertyType for Miscounted {
    type Operand = Miscounted;
    type Growth = datastore_entity::Steady;
    fn to_value(&self) -> Value {
        Value::Array(vec![Value::Integer(1)])
    }
    fn from_value(_: Value) -> Result<Self, datastore_entity::DecodeError> {
        Ok(Miscounted {
            announced: 1,
            written: 1,
        })
    }
    fn write_value(&self, w: &mut datastore_entity::__private::ValueWriter<'_>) {
        w.array(self.announced);
        for i in 0..self.written {
            w.integer(i as i64);
        }
    }
}

#[derive(Entity, Debug, Clone, PartialEq)]
#[entity(kind = "Miscounting")]
struct Miscounting {
    #[key]
    id: KeyId,
    #[exclude_from_index]
    v: Miscounted,
    after: i64,
}

/// What the embedded engine keeps reads back: an entity whose stored form does not (a
/// `write_value` that miscounts its array) is refused with the property named, nothing
/// written, on the memory store (which reads its entities back unchecked) and on a file.
#[tokio::test]
async fn a_stored_form_that_does_not_read_back_is_refused_and_nothing_is_written() {
    let path = std::env::temp_dir().join(format!("miscounted-{}.redb", std::process::id()));
    let _ = std::fs::remove_file(&path);
    // Fewer values than announced, more, and one after an empty array.
    let cases = [(3, 1), (1, 2), (0, 1)];
    let dbs = [Db::in_memory(), Db::open(&path).unwrap()];
    for (db, (announced, written)) in dbs.iter().flat_map(|db| cases.map(|case| (db, case))) {
        let entity = Miscounting {
            id: KeyId::new(1).unwrap(),
            v: Miscounted { announced, written },
            after: 2,
        };
        match db.put(&entity).await {
            Err(Error::InvalidValue {
                property, reason, ..
            }) => {
                assert_eq!(property, "v");
                assert!(reason.contains("does not read back"), "{reason}");
            }
            other => panic!("expected InvalidValue, got {other:?}"),
        }
        assert_eq!(db.get(&Miscounting::key(entity.id)).await.unwrap(), None);
        assert_eq!(db.query::<Miscounting>().count().await.unwrap(), 0);
    }
    let _ = std::fs::remove_file(&path);
}
