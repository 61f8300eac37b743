//! The conformance suite (`tests/src/conformance/`) on Google's Datastore emulator (legacy), started by the harness.

datastore_entity_tests::all_conformance_tests!(datastore_entity_tests::harness::Backend::Datastore);
