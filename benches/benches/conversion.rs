//! Entity conversion: a 12-field struct to the embedded engine's stored form and back (what
//! every put and get converts), against `serde_json::to_vec` + `from_slice` of the same struct.
//!
//! `cargo bench -p datastore-entity-benches --bench conversion`
#![allow(missing_docs)]

use datastore_entity::Entity as _;
use datastore_entity::bench_hooks::{from_stored_form, stored_form};
use datastore_entity_benches::{Order, order};
use divan::{Bencher, black_box};

fn main() {
    divan::main();
}

mod round_trip {
    use super::*;

    #[divan::bench]
    fn engine(bencher: Bencher) {
        let o = order(42);
        let key = o.entity_key().expect("a key").into_raw();
        bencher.bench(|| {
            let bytes = stored_form(black_box(&o)).expect("encodes");
            from_stored_form::<Order>(&key, black_box(&bytes)).expect("decodes")
        });
    }

    #[divan::bench]
    fn serde_json(bencher: Bencher) {
        let o = order(42);
        bencher.bench(|| {
            let bytes = serde_json::to_vec(black_box(&o)).expect("encodes");
            serde_json::from_slice::<Order>(black_box(&bytes)).expect("decodes")
        });
    }
}

mod encode {
    use super::*;

    #[divan::bench]
    fn engine(bencher: Bencher) {
        let o = order(42);
        bencher.bench(|| stored_form(black_box(&o)).expect("encodes"));
    }

    #[divan::bench]
    fn serde_json(bencher: Bencher) {
        let o = order(42);
        bencher.bench(|| serde_json::to_vec(black_box(&o)).expect("encodes"));
    }
}

mod decode {
    use super::*;

    #[divan::bench]
    fn engine(bencher: Bencher) {
        let o = order(42);
        let key = o.entity_key().expect("a key").into_raw();
        let bytes = stored_form(&o).expect("encodes");
        bencher.bench(|| from_stored_form::<Order>(&key, black_box(&bytes)).expect("decodes"));
    }

    #[divan::bench]
    fn serde_json(bencher: Bencher) {
        let bytes = serde_json::to_vec(&order(42)).expect("encodes");
        bencher.bench(|| serde_json::from_slice::<Order>(black_box(&bytes)).expect("decodes"));
    }
}
