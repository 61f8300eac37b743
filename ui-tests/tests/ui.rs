//! Compile-fail and compile-pass cases for `#[derive(Entity)]` and the typed API.
//! Regenerate snapshots with `TRYBUILD=overwrite cargo test -p datastore-entity-ui-tests`,
//! then read every changed `.stderr`.

#[test]
fn ui() {
    let cases = trybuild::TestCases::new();
    cases.compile_fail("tests/ui/*/*.rs");
    cases.pass("tests/pass/*.rs");
}
