//! The conformance suite (`tests/src/conformance/`) on the embedded engine persisted in a
//! file (`Db::open`).

datastore_entity_tests::all_conformance_tests!(datastore_entity_tests::harness::Backend::File);
