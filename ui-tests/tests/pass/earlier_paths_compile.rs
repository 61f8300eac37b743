// Every path of an earlier release still compiles (deprecated: the warnings are allowed here),
// traits included, whose old paths Rust cannot mark.
#![allow(deprecated)]
use datastore_entity::entity::{Entity, Schema};
use datastore_entity::property::{Direction, Operator, Queryable};
use datastore_entity::value::{PropertyType, Value};
use datastore_entity::prelude::KeyName;

#[derive(datastore_entity::Entity)]
struct Account {
    #[key]
    name: KeyName,
    email: String,
}

fn queryable<T: Queryable>() {}

fn main() {
    let schema: &Schema = <Account as Entity>::SCHEMA;
    assert_eq!(schema.kind, "Account");
    assert_eq!(String::from("a").to_value(), Value::String("a".into()));
    let _ = (Direction::Ascending, Operator::Equal);
    queryable::<datastore_entity::Indexed>();
    let _ = datastore_entity::scale::migrate::rollout("user-1", 50);
    let _ = datastore_entity::name::validate_bytes(datastore_entity::NameRole::Kind, b"Account");
}
