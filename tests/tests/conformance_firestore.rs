//! The conformance suite (`tests/src/conformance/`) on Google's Firestore emulator in Datastore mode, started by the harness.

datastore_entity_tests::all_conformance_tests!(datastore_entity_tests::harness::Backend::Firestore);
