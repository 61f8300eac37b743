//! The conformance suite (`tests/src/conformance/`) on the cloud backend talking to
//! `datastore-entity-server`: the embedded engine behind Google's gRPC API, the fifth runner.

datastore_entity_tests::all_conformance_tests!(datastore_entity_tests::harness::Backend::Server);
