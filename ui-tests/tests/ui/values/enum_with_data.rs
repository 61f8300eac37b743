// `#[derive(PropertyValue)]` stores an enum as one string: its variants carry no data.
use datastore_entity::prelude::*;

#[derive(PropertyValue)]
enum Shape {
    Dot,
    Circle(f64),
}

fn main() {}
