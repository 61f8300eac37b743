//! What is stored, bottom up: names (`name`), keys (`key`), the value types (`scalar`,
//! `value`) and what walks a value without recursion (`walk`), the stored form of values and
//! property maps (`stored`), the sink the derive writes into, in the stored form or a
//! backend's own (`sink`; the Google Cloud path defines its protocol buffers' form), the
//! operations of a property map over any of them (`map`), the Rust types that convert to values (`property_type`),
//! the Rust ecosystem's types behind Cargo features (`ecosystem`), entities with their
//! schemas (`schema`, `entity`), keys as text (`key_text`), and what the
//! derive's generated code calls (`generated`). Nothing here knows queries, backends or the `Db`.

pub mod annotations;
pub mod codec;
pub mod ecosystem;
pub mod entity;
pub mod generated;
pub mod in_order;
pub mod key;
pub mod key_text;
pub mod map;
pub mod name;
pub mod property_type;
pub mod read_in_order;
pub mod scalar;
pub mod schema;
pub mod sink;
pub mod stored;
pub mod value;
pub mod views;
pub mod walk;
