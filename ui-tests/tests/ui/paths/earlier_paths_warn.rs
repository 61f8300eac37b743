// The paths of earlier releases still compile, with a deprecation warning naming the one
// path each item has now (denied here, so the warnings show as errors).
#![deny(deprecated)]
use datastore_entity::prelude::*;

#[derive(Entity)]
struct Account {
    #[key]
    name: KeyName,
}

fn main() {
    let _key: datastore_entity::key::Key<Account> = Account::key(KeyName::new("ann").unwrap());
    let _max = datastore_entity::key::MAX_KEY_DEPTH;
    let _ = datastore_entity::name::validate(datastore_entity::NameRole::Kind, "Account");
    let _page: Option<datastore_entity::query::Page<Account>> = None;
    let _finding: Option<datastore_entity::diagnostics::Finding> = None;
    let _ramp = datastore_entity::scale::ramp::RampUp::new();
    let _t = datastore_entity::value::Timestamp::from_micros(0);
}
