//! What is stored, bottom up: names (`name`), keys (`key`), the value types (`scalar`,
//! `value`) and what walks a value without recursion (`walk`), the stored form of values and
//! property maps (`stored`), the sink the derive writes into, in the stored form or a
//! backend's own (`sink`; the Google Cloud path defines its protocol buffers' form), the
//! operations of a property map over any of them (`map`), the Rust types that convert to values (`property_type`),
//! the Rust ecosystem's types behind Cargo features (`ecosystem`), entities with their
//! schemas (`schema`, `entity`), keys as text (`key_text`), and what the
//! derive's generated code calls (`generated`). Nothing here knows queries, backends or the `Db`.

pub(crate) mod annotations;
pub(crate) mod codec;
pub(crate) mod ecosystem;
pub(crate) mod entity;
pub(crate) mod generated;
pub(crate) mod in_order;
pub(crate) mod key;
pub(crate) mod key_text;
pub(crate) mod map;
pub(crate) mod name;
pub(crate) mod property_type;
pub(crate) mod read_in_order;
pub(crate) mod scalar;
pub(crate) mod schema;
pub(crate) mod sink;
pub(crate) mod stored;
pub(crate) mod value;
pub(crate) mod views;
pub(crate) mod walk;
