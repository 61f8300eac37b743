// R-N5: the default kind is the struct's name, which must not be reserved either.
#![allow(non_camel_case_types)]
use datastore_entity::prelude::*;

#[derive(Entity)]
struct __Meta__ {
    #[key]
    name: KeyName,
}

fn main() {}
