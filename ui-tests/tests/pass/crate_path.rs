//! `#[entity(crate = path)]`: the generated code reaches the runtime through the given path,
//! for crates that re-export `datastore_entity` under another name.
#![deny(warnings)]

/// The runtime under another name, as a facade crate would re-export it.
pub mod facade {
    pub use ::datastore_entity as store;
}

use facade::store::{Entity, KeyName};

#[derive(facade::store::Entity)]
#[entity(crate = crate::facade::store, kind = "Renamed")]
struct Account {
    #[key]
    name: KeyName,
    email: String,
}

fn main() {
    let account = Account { name: facade::store::key_name!("ann"), email: "a@example.com".into() };
    assert_eq!(<Account as Entity>::KIND, "Renamed");
    assert_eq!(account.entity_key().unwrap().name(), Some("ann"));
    assert_eq!(account.to_properties().unwrap().len(), 1);
    assert_eq!(account.email, "a@example.com");
}
