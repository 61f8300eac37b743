//! App Engine's `EntityProto` (what a managed export's records hold) to and from the
//! Datastore API's `Entity`, as Google converts them (`datastore_pbs.py` of its App Engine SDK,
//! `v3_to_v1_entity` and `v1_to_v3_entity`): an array is one property per element
//! (`multiple`), the empty array a property of meaning `EMPTY_LIST`; a value excluded from
//! indexes is a `raw_property`; a timestamp is microseconds of meaning `GD_WHEN`, a blob
//! bytes of meaning `BYTESTRING` (indexed) or `BLOB`, an embedded entity an `EntityProto`'s
//! bytes of meaning `ENTITY_PROTO`, a geo point a `pointvalue` of meaning `GEORSS_POINT`, a
//! user an `uservalue`; the other meanings travel as they are.
//!
//! An entity's key takes the project it is imported into; a key value whose application
//! (`s~app`, `dev~app` or `app`) is the entity's own takes it too, another keeps its project
//! (the application without its `~` prefix).

use gcloud_sdk::google::datastore::v1 as pb;
use gcloud_sdk::prost::Message;
use pb::key::path_element::IdType;
use pb::value::ValueType;
use prost_reflect::{DynamicMessage, Value};

use super::proto::{ENTITY, Malformed, field, int, messages, new, set, text};

// `Property.Meaning`'s values, and those the API's values carry beside them.
const GD_WHEN: i32 = 7;
const GEORSS_POINT: i32 = 9;
const BLOB: i32 = 14;
const BYTESTRING: i32 = 16;
const INDEX_VALUE: i32 = 18;
const ENTITY_PROTO: i32 = 19;
const PREDEFINED_ENTITY_USER: i32 = 20;
const ZLIB: i32 = 22;
const POINT_WITHOUT_V3_MEANING: i32 = 23;
const EMPTY_LIST: i32 = 24;
const URI_ZLIB: &str = "ZLIB";

/// The microseconds RFC 3339 can write (years 1 to 9999): outside them, a `GD_WHEN` stays an
/// integer.
const RFC_3339_MICROS: std::ops::RangeInclusive<i64> =
    -62_135_596_800_000_000..=253_402_300_799_999_999;

/// How deep embedded entities go before a record is refused (the service's own limit is 20
/// levels of nesting; this leaves room, and bounds the recursion).
const MAX_DEPTH: usize = 64;

/// Where converted keys go: the project (and database) entities are imported into, and the
/// application their keys name in the file.
pub(crate) struct Target<'a> {
    pub project: &'a str,
    pub database: &'a str,
}

/// An `EntityProto`'s bytes as the API's entity, its key in `target`.
pub(crate) fn from_v3(bytes: &[u8], target: &Target<'_>) -> Result<pb::Entity, Malformed> {
    let entity = decode(bytes)?;
    let own_app = match field(&entity, "key") {
        Some(Value::Message(key)) => text(&key, "app"),
        _ => return Err(Malformed::Missing("an entity without its key")),
    };
    let reading = Reading {
        target,
        own_app: project_of(&own_app).to_owned(),
    };
    let converted = reading.entity(&entity, 0)?;
    match converted.key {
        Some(_) => Ok(converted),
        None => Err(Malformed::Missing(
            "an entity whose key names no application",
        )),
    }
}

/// The project an `EntityProto`'s key names: its application without a `s~` prefix.
pub(crate) fn application(bytes: &[u8]) -> Result<String, Malformed> {
    match field(&decode(bytes)?, "key") {
        Some(Value::Message(key)) => Ok(project_of(&text(&key, "app")).to_owned()),
        _ => Err(Malformed::Missing("an entity without its key")),
    }
}

/// The API's entity (with its key) as an `EntityProto`'s bytes, its application the key's
/// project.
pub(crate) fn to_v3(entity: &pb::Entity) -> Result<Vec<u8>, Malformed> {
    Ok(v3_entity(entity, 0)?.encode_to_vec())
}

fn decode(bytes: &[u8]) -> Result<DynamicMessage, Malformed> {
    let descriptor = super::proto::message(&format!("{ENTITY}.EntityProto"))?;
    DynamicMessage::decode(descriptor, bytes).map_err(|source| Malformed::NotA {
        expected: "an EntityProto",
        source,
    })
}

/// A project from an application id: `s~app` → `app` (App Engine's partition prefixes).
fn project_of(app: &str) -> &str {
    app.rsplit('~').next().unwrap_or(app)
}

struct Reading<'a> {
    target: &'a Target<'a>,
    /// The project of the application the entity's own key names.
    own_app: String,
}

impl Reading<'_> {
    fn entity(&self, entity: &DynamicMessage, depth: usize) -> Result<pb::Entity, Malformed> {
        if depth > MAX_DEPTH {
            return Err(Malformed::TooDeep(MAX_DEPTH));
        }
        let key = match field(entity, "key") {
            Some(Value::Message(reference)) => self.reference(
                &text(&reference, "app"),
                &text(&reference, "name_space"),
                &text(&reference, "database_id"),
                path_elements(&reference)?,
            ),
            _ => None,
        };
        let mut properties = std::collections::HashMap::new();
        for (list, indexed) in [("property", true), ("raw_property", false)] {
            for property in messages(entity, list) {
                let name = text(&property, "name");
                let value = self.value(&property, indexed, depth)?;
                let multiple = matches!(field(&property, "multiple"), Some(Value::Bool(true)));
                match multiple {
                    true => {
                        let slot = properties.entry(name).or_insert_with(|| pb::Value {
                            value_type: Some(ValueType::ArrayValue(pb::ArrayValue::default())),
                            ..pb::Value::default()
                        });
                        match &mut slot.value_type {
                            Some(ValueType::ArrayValue(array)) => array.values.push(value),
                            // A single value and then a list of the same name: the list wins.
                            _ => {
                                *slot = pb::Value {
                                    value_type: Some(ValueType::ArrayValue(pb::ArrayValue {
                                        values: vec![value],
                                    })),
                                    ..pb::Value::default()
                                }
                            }
                        }
                    }
                    false => {
                        properties.insert(name, value);
                    }
                }
            }
        }
        Ok(pb::Entity { key, properties })
    }

    /// A key: `None` for a reference without an application (an embedded entity's).
    fn reference(
        &self,
        app: &str,
        namespace: &str,
        database: &str,
        path: Vec<pb::key::PathElement>,
    ) -> Option<pb::Key> {
        if app.is_empty() {
            return None;
        }
        let project = project_of(app);
        let (project, database) = match project == self.own_app {
            true => (self.target.project, self.target.database),
            false => (project, database),
        };
        Some(pb::Key {
            partition_id: Some(pb::PartitionId {
                project_id: project.to_owned(),
                database_id: database.to_owned(),
                namespace_id: namespace.to_owned(),
            }),
            path,
        })
    }

    /// A property's value (`v3_property_to_v1_value`).
    fn value(
        &self,
        property: &DynamicMessage,
        indexed: bool,
        depth: usize,
    ) -> Result<pb::Value, Malformed> {
        let stated = i32::try_from(int(property, "meaning")).unwrap_or(0);
        let zlib_uri = text(property, "meaning_uri") == URI_ZLIB;
        let value = match field(property, "value") {
            Some(Value::Message(value)) => value,
            _ => {
                return Err(Malformed::NoValue(text(property, "name")));
            }
        };
        let set: Vec<&str> = [
            "booleanValue",
            "int64Value",
            "doubleValue",
            "referencevalue",
            "stringValue",
            "pointvalue",
            "uservalue",
        ]
        .into_iter()
        .filter(|name| value.has_field_by_name(name))
        .collect();
        // A union of several values, or a meaning its value cannot have, loses its meaning.
        let mut meaning = match set.len() > 1 || !meaning_fits(stated, set.first().copied()) {
            true => 0,
            false => stated,
        };
        let zlib = zlib_uri && set.len() <= 1 && value.has_field_by_name("stringValue");
        if zlib {
            meaning = BLOB;
        }
        let mut out_meaning = 0;
        let value_type = if stated == EMPTY_LIST {
            meaning = 0;
            ValueType::ArrayValue(pb::ArrayValue::default())
        } else {
            match set.first().map(|name| (*name, field(&value, name))) {
                Some((_, Some(Value::Bool(b)))) => ValueType::BooleanValue(b),
                Some((_, Some(Value::I64(n)))) => {
                    match meaning == GD_WHEN && RFC_3339_MICROS.contains(&n) {
                        true => {
                            meaning = 0;
                            ValueType::TimestampValue(gcloud_sdk::prost_types::Timestamp {
                                seconds: n.div_euclid(1_000_000),
                                nanos: (n.rem_euclid(1_000_000) * 1000) as i32,
                            })
                        }
                        false => ValueType::IntegerValue(n),
                    }
                }
                Some((_, Some(Value::F64(d)))) => ValueType::DoubleValue(d),
                Some(("referencevalue", Some(Value::Message(reference)))) => {
                    let path = messages(&reference, "pathelement")
                        .iter()
                        .map(element)
                        .collect::<Result<Vec<_>, _>>()?;
                    let key = self.reference(
                        &text(&reference, "app"),
                        &text(&reference, "name_space"),
                        &text(&reference, "database_id"),
                        path,
                    );
                    ValueType::KeyValue(key.unwrap_or_default())
                }
                Some((_, Some(Value::Bytes(bytes)))) => {
                    if meaning == ENTITY_PROTO {
                        meaning = 0;
                        let inner = decode(&bytes).map_err(|e| Malformed::Embedded(Box::new(e)))?;
                        ValueType::EntityValue(self.entity(&inner, depth + 1)?)
                    } else if meaning == BLOB || meaning == BYTESTRING {
                        if indexed || meaning == BLOB {
                            meaning = 0;
                        }
                        ValueType::BlobValue(bytes.to_vec())
                    } else {
                        match String::from_utf8(bytes.to_vec()) {
                            Ok(text) => ValueType::StringValue(text),
                            Err(error) => {
                                if meaning != INDEX_VALUE {
                                    meaning = 0;
                                }
                                ValueType::BlobValue(error.into_bytes())
                            }
                        }
                    }
                }
                Some(("pointvalue", Some(Value::Message(point)))) => {
                    // Google marks a point without `GEORSS_POINT` with meaning 23, which the
                    // service (and so the server) refuses on a write: it is imported as a
                    // plain geo point, and exported back with `GEORSS_POINT`.
                    meaning = 0;
                    ValueType::GeoPointValue(gcloud_sdk::google::r#type::LatLng {
                        latitude: float(&point, "x"),
                        longitude: float(&point, "y"),
                    })
                }
                Some(("uservalue", Some(Value::Message(user)))) => {
                    out_meaning = PREDEFINED_ENTITY_USER;
                    meaning = 0;
                    ValueType::EntityValue(user_entity(&user))
                }
                _ => ValueType::NullValue(0),
            }
        };
        let meaning = match (zlib, out_meaning, meaning) {
            (true, _, _) => ZLIB,
            (false, 0, meaning) => meaning,
            (false, out, _) => out,
        };
        Ok(pb::Value {
            meaning,
            exclude_from_indexes: !indexed,
            value_type: Some(value_type),
        })
    }
}

/// Whether a value of the field `value` (the one set, if any) may carry `meaning`
/// (`__is_v3_property_value_meaning_valid`).
fn meaning_fits(meaning: i32, value: Option<&str>) -> bool {
    match meaning {
        0 | INDEX_VALUE | EMPTY_LIST => true,
        1..=6 | 8 | 10..=12 | BLOB | 15 | BYTESTRING | 17 | ENTITY_PROTO => {
            value == Some("stringValue")
        }
        GD_WHEN | 13 => value == Some("int64Value"),
        GEORSS_POINT => value == Some("pointvalue"),
        _ => false,
    }
}

fn float(message: &DynamicMessage, name: &str) -> f64 {
    match field(message, name) {
        Some(Value::F64(d)) => d,
        _ => 0.0,
    }
}

/// A reference's path (its `Path` of `Element` groups).
fn path_elements(reference: &DynamicMessage) -> Result<Vec<pb::key::PathElement>, Malformed> {
    match field(reference, "path") {
        Some(Value::Message(path)) => messages(&path, "element").iter().map(element).collect(),
        _ => Ok(Vec::new()),
    }
}

/// One element of a path (a `Path.Element` or a `ReferenceValue.PathElement`).
fn element(element: &DynamicMessage) -> Result<pb::key::PathElement, Malformed> {
    let id_type = match (field(element, "id"), field(element, "name")) {
        (Some(Value::I64(id)), None) => Some(IdType::Id(id)),
        (None, Some(Value::String(name))) => Some(IdType::Name(name)),
        (None, None) => None,
        _ => return Err(Malformed::IdAndName),
    };
    Ok(pb::key::PathElement {
        kind: text(element, "type"),
        id_type,
    })
}

/// A user value as the API's entity (`v3_user_value_to_v1_entity`).
fn user_entity(user: &DynamicMessage) -> pb::Entity {
    let unindexed = |value_type| pb::Value {
        exclude_from_indexes: true,
        value_type: Some(value_type),
        meaning: 0,
    };
    let mut properties = std::collections::HashMap::new();
    properties.insert(
        "email".to_owned(),
        unindexed(ValueType::StringValue(text(user, "email"))),
    );
    properties.insert(
        "auth_domain".to_owned(),
        unindexed(ValueType::StringValue(text(user, "auth_domain"))),
    );
    let gaia = int(user, "gaiaid");
    if gaia != 0 {
        properties.insert(
            "internal_id".to_owned(),
            unindexed(ValueType::IntegerValue(gaia)),
        );
    }
    for (v3, v1) in [
        ("obfuscated_gaiaid", "user_id"),
        ("federated_identity", "federated_identity"),
        ("federated_provider", "federated_provider"),
    ] {
        if let Some(Value::String(text)) = field(user, v3) {
            properties.insert(v1.to_owned(), unindexed(ValueType::StringValue(text)));
        }
    }
    pb::Entity {
        key: None,
        properties,
    }
}

/// The API's entity as an `EntityProto` (`v1_to_v3_entity`). A key-less (embedded) entity
/// has an empty reference, as the legacy emulator writes it (the message requires one).
fn v3_entity(entity: &pb::Entity, depth: usize) -> Result<DynamicMessage, Malformed> {
    if depth > MAX_DEPTH {
        return Err(Malformed::TooDeep(MAX_DEPTH));
    }
    let mut out = new(&format!("{ENTITY}.EntityProto"))?;
    let mut names: Vec<&String> = entity.properties.keys().collect();
    names.sort();
    let (mut indexed, mut raw) = (Vec::new(), Vec::new());
    for name in names {
        let value = &entity.properties[name];
        let mut push = |property: DynamicMessage, excluded: bool| match excluded {
            true => raw.push(Value::Message(property)),
            false => indexed.push(Value::Message(property)),
        };
        match &value.value_type {
            Some(ValueType::ArrayValue(array)) if array.values.is_empty() => {
                let mut property = new(&format!("{ENTITY}.Property"))?;
                set(&mut property, "name", Value::String(name.clone()))?;
                set(&mut property, "multiple", Value::Bool(false))?;
                set(&mut property, "meaning", Value::EnumNumber(EMPTY_LIST))?;
                set(
                    &mut property,
                    "value",
                    Value::Message(new(&format!("{ENTITY}.PropertyValue"))?),
                )?;
                push(property, value.exclude_from_indexes);
            }
            Some(ValueType::ArrayValue(array)) => {
                for element in &array.values {
                    let property = v3_property(name, true, element, depth)?;
                    push(property, element.exclude_from_indexes);
                }
            }
            _ => push(
                v3_property(name, false, value, depth)?,
                value.exclude_from_indexes,
            ),
        }
    }
    let (reference, group) = v3_reference(entity.key.as_ref())?;
    set(&mut out, "key", Value::Message(reference))?;
    set(&mut out, "entity_group", Value::Message(group))?;
    set(&mut out, "property", Value::List(indexed))?;
    set(&mut out, "raw_property", Value::List(raw))?;
    Ok(out)
}

/// A key as a `Reference`, and its entity group (a `Path` of its first element).
fn v3_reference(key: Option<&pb::Key>) -> Result<(DynamicMessage, DynamicMessage), Malformed> {
    let mut reference = new(&format!("{ENTITY}.Reference"))?;
    let mut path = new(&format!("{ENTITY}.Path"))?;
    let mut group = new(&format!("{ENTITY}.Path"))?;
    let empty = pb::Key::default();
    let key = key.unwrap_or(&empty);
    set_partition(&mut reference, key)?;
    let elements = path_values(key, &format!("{ENTITY}.Path.Element"))?;
    if let Some(first) = elements.first() {
        set(&mut group, "element", Value::List(vec![first.clone()]))?;
    }
    set(&mut path, "element", Value::List(elements))?;
    set(&mut reference, "path", Value::Message(path))?;
    Ok((reference, group))
}

/// A key's partition on a `Reference` or a `ReferenceValue` (their fields are named alike):
/// the application, and the namespace and database unless they are the default ones.
fn set_partition(reference: &mut DynamicMessage, key: &pb::Key) -> Result<(), Malformed> {
    let partition = key.partition_id.clone().unwrap_or_default();
    set(reference, "app", Value::String(partition.project_id))?;
    for (field, value) in [
        ("name_space", partition.namespace_id),
        ("database_id", partition.database_id),
    ] {
        if !value.is_empty() {
            set(reference, field, Value::String(value))?;
        }
    }
    Ok(())
}

/// A key's path as messages `element` (a `Path.Element` or a `ReferenceValue.PathElement`:
/// their fields are named alike).
fn path_values(key: &pb::Key, element: &str) -> Result<Vec<Value>, Malformed> {
    key.path
        .iter()
        .map(|step| {
            let mut out = new(element)?;
            set(&mut out, "type", Value::String(step.kind.clone()))?;
            match &step.id_type {
                Some(IdType::Id(id)) => set(&mut out, "id", Value::I64(*id))?,
                Some(IdType::Name(name)) => set(&mut out, "name", Value::String(name.clone()))?,
                None => {}
            }
            Ok(Value::Message(out))
        })
        .collect()
}

/// One value as a `Property` (`v1_to_v3_property`).
fn v3_property(
    name: &str,
    multiple: bool,
    value: &pb::Value,
    depth: usize,
) -> Result<DynamicMessage, Malformed> {
    let mut property = new(&format!("{ENTITY}.Property"))?;
    let mut out = new(&format!("{ENTITY}.PropertyValue"))?;
    let mut given = (value.meaning != 0).then_some(value.meaning);
    let mut meaning = None;
    let mut uri = None;
    match &value.value_type {
        Some(ValueType::BooleanValue(b)) => set(&mut out, "booleanValue", Value::Bool(*b))?,
        Some(ValueType::IntegerValue(n)) => {
            set(&mut out, "int64Value", Value::I64(*n))?;
            if given == Some(GD_WHEN) {
                meaning = Some(GD_WHEN);
                given = None;
            }
        }
        Some(ValueType::DoubleValue(d)) => set(&mut out, "doubleValue", Value::F64(*d))?,
        Some(ValueType::TimestampValue(t)) => {
            let micros = t
                .seconds
                .checked_mul(1_000_000)
                .and_then(|s| s.checked_add(i64::from(t.nanos) / 1000))
                .ok_or_else(|| Malformed::TimestampOutOfRange(name.to_owned()))?;
            set(&mut out, "int64Value", Value::I64(micros))?;
            meaning = Some(GD_WHEN);
        }
        Some(ValueType::KeyValue(key)) => {
            let mut reference = new(&format!("{ENTITY}.PropertyValue.ReferenceValue"))?;
            set_partition(&mut reference, key)?;
            let elements = path_values(
                key,
                &format!("{ENTITY}.PropertyValue.ReferenceValue.PathElement"),
            )?;
            set(&mut reference, "pathelement", Value::List(elements))?;
            set(&mut out, "referencevalue", Value::Message(reference))?;
        }
        Some(ValueType::StringValue(s)) => {
            set(
                &mut out,
                "stringValue",
                Value::Bytes(s.clone().into_bytes().into()),
            )?;
        }
        Some(ValueType::BlobValue(b)) => {
            set(&mut out, "stringValue", Value::Bytes(b.clone().into()))?;
            if given == Some(ZLIB) {
                uri = Some(URI_ZLIB);
            }
            if given != Some(BYTESTRING) {
                meaning = Some(match value.exclude_from_indexes {
                    false => BYTESTRING,
                    true => BLOB,
                });
                given = None;
            }
        }
        Some(ValueType::EntityValue(entity)) => {
            match given == Some(PREDEFINED_ENTITY_USER) {
                true => set(&mut out, "uservalue", Value::Message(v3_user(entity)?))?,
                false => {
                    let inner = v3_entity(entity, depth + 1)?;
                    set(
                        &mut out,
                        "stringValue",
                        Value::Bytes(inner.encode_to_vec().into()),
                    )?;
                    meaning = Some(ENTITY_PROTO);
                }
            }
            given = None;
        }
        Some(ValueType::GeoPointValue(point)) => {
            let mut out_point = new(&format!("{ENTITY}.PropertyValue.PointValue"))?;
            set(&mut out_point, "x", Value::F64(point.latitude))?;
            set(&mut out_point, "y", Value::F64(point.longitude))?;
            set(&mut out, "pointvalue", Value::Message(out_point))?;
            if given != Some(POINT_WITHOUT_V3_MEANING) {
                meaning = Some(GEORSS_POINT);
            }
            given = None;
        }
        Some(ValueType::ArrayValue(_)) => {
            return Err(Malformed::ArrayInArray(name.to_owned()));
        }
        Some(ValueType::NullValue(_)) | None => {}
    }
    set(&mut property, "name", Value::String(name.to_owned()))?;
    set(&mut property, "multiple", Value::Bool(multiple))?;
    if let Some(meaning) = given.or(meaning) {
        set(&mut property, "meaning", Value::EnumNumber(meaning))?;
    }
    if let Some(uri) = uri {
        set(&mut property, "meaning_uri", Value::String(uri.to_owned()))?;
    }
    set(&mut property, "value", Value::Message(out))?;
    Ok(property)
}

/// A user entity (meaning 20) as a `UserValue` (`v1_entity_to_v3_user_value`).
fn v3_user(entity: &pb::Entity) -> Result<DynamicMessage, Malformed> {
    let mut user = new(&format!("{ENTITY}.PropertyValue.UserValue"))?;
    let string = |name: &str| match entity
        .properties
        .get(name)
        .and_then(|v| v.value_type.as_ref())
    {
        Some(ValueType::StringValue(text)) => Some(text.clone()),
        _ => None,
    };
    set(
        &mut user,
        "email",
        Value::String(string("email").unwrap_or_default()),
    )?;
    set(
        &mut user,
        "auth_domain",
        Value::String(string("auth_domain").unwrap_or_default()),
    )?;
    let gaia = match entity
        .properties
        .get("internal_id")
        .and_then(|v| v.value_type.as_ref())
    {
        Some(ValueType::IntegerValue(id)) => *id,
        _ => 0,
    };
    set(&mut user, "gaiaid", Value::I64(gaia))?;
    for (v1, v3) in [
        ("user_id", "obfuscated_gaiaid"),
        ("federated_identity", "federated_identity"),
        ("federated_provider", "federated_provider"),
    ] {
        if let Some(text) = string(v1) {
            set(&mut user, v3, Value::String(text))?;
        }
    }
    Ok(user)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TARGET: Target<'static> = Target {
        project: "p",
        database: "",
    };

    fn sample() -> pb::Entity {
        let value = |value_type| pb::Value {
            meaning: 0,
            exclude_from_indexes: false,
            value_type: Some(value_type),
        };
        let key = pb::Key {
            partition_id: Some(pb::PartitionId {
                project_id: "p".into(),
                namespace_id: "ns".into(),
                ..pb::PartitionId::default()
            }),
            path: vec![
                pb::key::PathElement {
                    kind: "A".into(),
                    id_type: Some(IdType::Name("a".into())),
                },
                pb::key::PathElement {
                    kind: "B".into(),
                    id_type: Some(IdType::Id(7)),
                },
            ],
        };
        let inner = pb::Entity {
            key: None,
            properties: [("x".to_owned(), value(ValueType::DoubleValue(0.5)))].into(),
        };
        pb::Entity {
            key: Some(key.clone()),
            properties: [
                ("k".to_owned(), value(ValueType::KeyValue(key))),
                ("e".to_owned(), value(ValueType::EntityValue(inner))),
                ("s".to_owned(), value(ValueType::StringValue("s".into()))),
                (
                    "a".to_owned(),
                    value(ValueType::ArrayValue(pb::ArrayValue {
                        values: vec![
                            value(ValueType::IntegerValue(1)),
                            value(ValueType::BlobValue(vec![1, 2])),
                        ],
                    })),
                ),
            ]
            .into(),
        }
    }

    #[test]
    fn an_entity_comes_back_as_it_went() {
        let entity = sample();
        assert_eq!(from_v3(&to_v3(&entity).unwrap(), &TARGET).unwrap(), entity);
    }

    #[test]
    fn a_point_without_its_meaning_imports_as_a_plain_geo_point() {
        let mut entity = sample();
        let point = pb::Value {
            meaning: POINT_WITHOUT_V3_MEANING,
            exclude_from_indexes: false,
            value_type: Some(ValueType::GeoPointValue(
                gcloud_sdk::google::r#type::LatLng {
                    latitude: 1.5,
                    longitude: -2.5,
                },
            )),
        };
        entity.properties.insert("pt".into(), point.clone());
        let back = from_v3(&to_v3(&entity).unwrap(), &TARGET).unwrap();
        assert_eq!(
            back.properties["pt"],
            pb::Value {
                meaning: 0,
                ..point
            }
        );
    }

    #[test]
    fn keys_of_the_exports_application_take_the_target_project_others_keep_theirs() {
        let mut entity = sample();
        let path = entity.key.clone().unwrap().path;
        let key_in = |project: &str| pb::Key {
            partition_id: Some(pb::PartitionId {
                project_id: project.into(),
                ..pb::PartitionId::default()
            }),
            path: path.clone(),
        };
        entity.key = Some(key_in("s~prod-app"));
        let value = |key| pb::Value {
            value_type: Some(ValueType::KeyValue(key)),
            ..pb::Value::default()
        };
        entity.properties = [
            ("own".to_owned(), value(key_in("s~prod-app"))),
            ("other".to_owned(), value(key_in("e~other-app"))),
        ]
        .into();
        let read = from_v3(&to_v3(&entity).unwrap(), &TARGET).unwrap();
        let project = |v: Option<&pb::Value>| match v.and_then(|v| v.value_type.as_ref()) {
            Some(ValueType::KeyValue(key)) => key.partition_id.clone().unwrap().project_id,
            other => panic!("{other:?}"),
        };
        assert_eq!(read.key.unwrap().partition_id.unwrap().project_id, "p");
        assert_eq!(project(read.properties.get("own")), "p");
        assert_eq!(project(read.properties.get("other")), "other-app");
    }

    #[test]
    fn an_application_prefix_is_not_the_project() {
        assert_eq!(project_of("s~my-app"), "my-app");
        assert_eq!(project_of("dev~my-app"), "my-app");
        assert_eq!(project_of("my-app"), "my-app");
    }

    #[test]
    fn embedded_entities_nested_too_deep_are_refused_not_followed() {
        let mut entity = pb::Entity::default();
        for _ in 0..MAX_DEPTH + 2 {
            entity = pb::Entity {
                key: None,
                properties: [(
                    "e".to_owned(),
                    pb::Value {
                        value_type: Some(ValueType::EntityValue(entity)),
                        ..pb::Value::default()
                    },
                )]
                .into(),
            };
        }
        let error = to_v3(&pb::Entity {
            key: sample().key,
            properties: entity.properties,
        })
        .unwrap_err();
        assert!(matches!(error, Malformed::TooDeep(_)), "{error}");
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2048))]

        /// Any bytes decoded as an entity: an entity or an error, never a panic.
        #[test]
        fn any_bytes_decode_without_panic(bytes in proptest::collection::vec(0u8..=255, 0..600)) {
            let _ = from_v3(&bytes, &TARGET);
        }

        /// A real record with bytes changed: an entity or an error, never a panic.
        #[test]
        fn a_changed_record_decodes_without_panic(
            flips in proptest::collection::vec((0usize..10_000, 0u8..=255), 1..6),
        ) {
            let mut bytes = to_v3(&sample()).unwrap();
            for (at, xor) in flips {
                let at = at % bytes.len();
                bytes[at] ^= xor;
            }
            let _ = from_v3(&bytes, &TARGET);
        }
    }
}
