//! The checker on small synthetic crates written to a temporary folder.

use std::fs;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::{Graph, Order, import_graph};

/// A source folder under the system's temporary folder, removed when dropped.
struct TempTree(PathBuf);

impl TempTree {
    fn new(files: &[(&str, &str)]) -> TempTree {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "datastore-entity-layers-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        for (path, text) in files {
            let path = dir.join(path);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(path, text).unwrap();
        }
        TempTree(dir)
    }
}

impl Drop for TempTree {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn graph(files: &[(&str, &str)]) -> Graph {
    let tree = TempTree::new(files);
    import_graph(&tree.0).unwrap()
}

/// Every circle, each as its edges shown as text.
fn cycles(graph: &Graph) -> Vec<Vec<String>> {
    graph
        .cycles()
        .iter()
        .map(|cycle| cycle.iter().map(ToString::to_string).collect())
        .collect()
}

fn edges(graph: &Graph) -> Vec<String> {
    graph.edges().iter().map(ToString::to_string).collect()
}

#[test]
fn two_files_in_a_circle_through_use() {
    let graph = graph(&[
        ("lib.rs", "mod a;\nmod b;\n"),
        ("a.rs", "use crate::b::Other;\npub struct Thing(Other);\n"),
        (
            "b.rs",
            "pub struct Other;\n\nuse crate::a::Thing;\npub fn take(_: Thing) {}\n",
        ),
    ]);
    assert_eq!(
        cycles(&graph),
        [[
            "a.rs -> b.rs (line 1: use crate::b::Other)",
            "b.rs -> a.rs (line 3: use crate::a::Thing)",
        ]]
    );
    assert_eq!(graph.components(), [["a.rs", "b.rs"]]);
    assert_eq!(graph.files(), ["a.rs", "b.rs", "lib.rs"]);
}

#[test]
fn three_files_in_a_circle_through_paths_in_function_bodies() {
    let graph = graph(&[
        ("lib.rs", "mod a;\nmod b;\nmod c;\n"),
        (
            "a.rs",
            "pub struct A;\n\npub fn f() {\n    let _ = crate::b::make();\n}\n",
        ),
        ("b.rs", "pub fn make() -> u8 {\n    crate::c::C\n}\n"),
        (
            "c.rs",
            "pub const C: u8 = 1;\n\npub fn g() -> crate::a::A {\n    crate::a::A\n}\n",
        ),
    ]);
    assert_eq!(
        cycles(&graph),
        [[
            "a.rs -> b.rs (line 4: crate::b::make)",
            "b.rs -> c.rs (line 2: crate::c::C)",
            "c.rs -> a.rs (line 3: crate::a::A; line 4: crate::a::A)",
        ]]
    );
}

#[test]
fn a_circle_seen_only_through_a_reexport_in_lib_rs() {
    let graph = graph(&[
        ("lib.rs", "mod a;\nmod b;\n\npub use a::Thing;\n"),
        (
            "a.rs",
            "pub struct Thing;\n\npub fn f(_: crate::b::Other) {}\n",
        ),
        ("b.rs", "use crate::Thing;\n\npub struct Other(Thing);\n"),
    ]);
    assert_eq!(
        cycles(&graph),
        [[
            "a.rs -> b.rs (line 3: crate::b::Other)",
            "b.rs -> a.rs (line 1: use crate::Thing)",
        ]]
    );
    // `pub use a::Thing;` re-exports: a use of the file that defines it.
    assert_eq!(graph.uses("lib.rs"), ["a.rs"]);
}

#[test]
fn a_circle_through_super() {
    let graph = graph(&[
        ("lib.rs", "mod outer;\n"),
        (
            "outer/mod.rs",
            "mod inner;\n\npub struct Shared;\n\npub fn run() {\n    inner::go();\n}\n",
        ),
        (
            "outer/inner.rs",
            "pub fn go() {\n    let _ = super::Shared;\n}\n",
        ),
    ]);
    assert_eq!(
        cycles(&graph),
        [[
            "outer/inner.rs -> outer/mod.rs (line 2: super::Shared)",
            "outer/mod.rs -> outer/inner.rs (line 6: inner::go)",
        ]]
    );
}

#[test]
fn test_code_counts_as_a_use() {
    let graph = graph(&[
        ("lib.rs", "mod a;\nmod b;\n"),
        (
            "a.rs",
            "pub struct A;\n\n\
             #[cfg(test)]\n\
             mod tests {\n    use super::*;\n    use crate::b::X;\n}\n",
        ),
        ("b.rs", "use crate::a::A;\n\npub struct X(pub A);\n"),
    ]);
    assert_eq!(
        cycles(&graph),
        [[
            "a.rs -> b.rs (line 6: use crate::b::X)",
            "b.rs -> a.rs (line 1: use crate::a::A)",
        ]]
    );
}

#[test]
fn a_test_module_in_its_own_file_is_read() {
    let graph = graph(&[
        ("lib.rs", "mod a;\nmod b;\n"),
        ("a.rs", "pub struct A;\n\n#[cfg(test)]\nmod tests;\n"),
        ("a/tests.rs", "use crate::b::X;\n"),
        ("b.rs", "pub struct X;\n"),
    ]);
    assert_eq!(graph.files(), ["a.rs", "a/tests.rs", "b.rs", "lib.rs"]);
    assert_eq!(
        edges(&graph),
        ["a/tests.rs -> b.rs (line 1: use crate::b::X)"]
    );
}

#[test]
fn a_reexport_is_a_use() {
    let graph = graph(&[
        ("lib.rs", "mod facade;\nmod low;\n"),
        (
            "facade/mod.rs",
            "mod inner;\n\npub use inner::Thing;\npub(crate) use crate::low::{Low, Lower as Lowest};\n",
        ),
        ("facade/inner.rs", "pub struct Thing;\n"),
        (
            "low.rs",
            "use crate::facade::Thing;\n\npub struct Low(Thing);\npub struct Lower;\n",
        ),
    ]);
    assert!(graph.cycles().is_empty());
    assert_eq!(
        edges(&graph),
        [
            "facade/mod.rs -> facade/inner.rs (line 3: use inner::Thing)",
            "facade/mod.rs -> low.rs (line 4: use crate::low::{Low, Lower as Lowest})",
            "low.rs -> facade/inner.rs (line 1: use crate::facade::Thing)",
        ]
    );
}

fn order(rows: &[(&str, &str)]) -> Order {
    let mut text = String::from("### files\n\n| layer | file | its job |\n| --- | --- | --- |\n");
    for (layer, file) in rows {
        text.push_str(&format!("| {layer} | `{file}` | a job |\n"));
    }
    Order::from_markdown(&text, "### files").unwrap()
}

#[test]
fn a_use_of_a_file_listed_later_runs_up_the_order() {
    let graph = graph(&[
        ("lib.rs", "mod high;\nmod low;\n"),
        ("high.rs", "pub struct High;\n"),
        (
            "low.rs",
            "pub struct Low;\n\npub fn f() -> crate::high::High {\n    crate::high::High\n}\n",
        ),
    ]);
    let good = order(&[
        ("`high.rs`", "high.rs"),
        ("`low.rs`", "low.rs"),
        ("façade", "lib.rs"),
    ]);
    assert!(good.check(&graph).is_empty(), "{}", good.check(&graph));
    let bad = order(&[
        ("`low.rs`", "low.rs"),
        ("`high.rs`", "high.rs"),
        ("façade", "lib.rs"),
    ]);
    let departures = bad.check(&graph);
    assert_eq!(
        departures.to_string(),
        "upward (low.rs uses high.rs, a layer above it): low.rs -> high.rs (line 3: crate::high::High; line 4: crate::high::High)\n"
    );
    // Within one layer, the table's order is the order too.
    let bad = order(&[("`both/`", "low.rs"), ("", "high.rs"), ("façade", "lib.rs")]);
    assert!(
        bad.check(&graph)
            .to_string()
            .starts_with("upward (listed later in both/): low.rs -> high.rs"),
        "{}",
        bad.check(&graph)
    );
    // A file missing from the table, and a listed file that is gone.
    let partial = order(&[
        ("`high.rs`", "high.rs"),
        ("`gone.rs`", "gone.rs"),
        ("façade", "lib.rs"),
    ]);
    assert_eq!(
        partial.check(&graph).to_string(),
        "not in the layer table: low.rs\nin the layer table but not in the crate: gone.rs\n"
    );
}
#[test]
fn a_reexport_the_file_also_uses_is_a_use() {
    let graph = graph(&[
        ("lib.rs", "mod facade;\nmod low;\n"),
        (
            "facade/mod.rs",
            "pub use crate::low::Low;\n\npub struct Thing;\n\npub fn f(_: Low) {}\n",
        ),
        (
            "low.rs",
            "use crate::facade::Thing;\n\npub struct Low(Thing);\n",
        ),
    ]);
    assert_eq!(
        cycles(&graph),
        [[
            "facade/mod.rs -> low.rs (line 1: use crate::low::Low)",
            "low.rs -> facade/mod.rs (line 1: use crate::facade::Thing)",
        ]]
    );
}

#[test]
fn uses_in_functions_and_inline_modules_but_not_in_macro_variables_docs_or_strings() {
    let graph = graph(&[
        ("lib.rs", "mod a;\nmod b;\nmod c;\n"),
        (
            "a.rs",
            "pub struct A;\n\
             /* a comment\n   /* nested */ crate::c::C\n*/\n\
             mod inner {\n\
             \x20   fn f<'a>(x: &'a str) -> char {\n\
             \x20       let _ = r#\"crate::c::C \" still\"#;\n\
             \x20       use crate::b::{B, self as bee};\n\
             \x20       let _ = (B, bee::g);\n\
             \x20       '\"'\n\
             \x20   }\n\
             }\n",
        ),
        (
            "b.rs",
            "/// Not [`crate::c::C`].\n\
             pub struct B;\n\n\
             pub fn g() -> crate::a::A {\n    crate::a::A\n}\n\n\
             macro_rules! m {\n    () => {\n        $crate::c::C\n    };\n}\n\n\
             pub const S: &str = \"crate::c::C\";\n",
        ),
        ("c.rs", "pub struct C;\n"),
    ]);
    assert_eq!(
        cycles(&graph),
        [[
            // `bee` names module b, and `bee::g` is what uses it.
            "a.rs -> b.rs (line 8: use crate::b::B; line 9: bee::g)",
            "b.rs -> a.rs (line 4: crate::a::A; line 5: crate::a::A)",
        ]]
    );
    assert!(graph.uses("b.rs") == ["a.rs"] && graph.uses("a.rs") == ["b.rs"]);
}

#[test]
fn an_acyclic_tree_passes() {
    let graph = graph(&[
        (
            "lib.rs",
            "mod error;\nmod model;\n#[path = \"api_impl.rs\"]\npub mod api;\n\n\
             pub use error::Error;\n\n\
             pub mod prelude {\n    pub use crate::api::Client;\n}\n",
        ),
        ("error.rs", "pub struct Error;\n"),
        (
            "model.rs",
            "mod value;\n\npub use self::value::{Value as Val, *};\n\n\
             pub fn check() -> Result<(), crate::Error> {\n    Ok(())\n}\n",
        ),
        ("model/value.rs", "pub struct Value;\n\npub struct Extra;\n"),
        (
            "api_impl.rs",
            "use crate::model::{self, Val};\nuse crate::model::Extra as E;\n\n\
             pub struct Client;\n\n\
             impl Client {\n\
             \x20   pub fn get(&self) -> Option<(Val, E)> {\n\
             \x20       model::check().ok()?;\n\
             \x20       None\n\
             \x20   }\n\
             }\n",
        ),
    ]);
    assert!(graph.cycles().is_empty());
    assert!(graph.components().is_empty());
    assert_eq!(
        edges(&graph),
        [
            "api_impl.rs -> model.rs (line 8: model::check)",
            "api_impl.rs -> model/value.rs (line 1: use crate::model::Val; \
             line 2: use crate::model::Extra as E)",
            "lib.rs -> api_impl.rs (line 9: use crate::api::Client)",
            "lib.rs -> error.rs (line 6: use error::Error)",
            "model.rs -> error.rs (line 5: crate::Error)",
            "model.rs -> model/value.rs (line 3: use self::value::{*, Value as Val})",
        ]
    );
    assert_eq!(
        graph.layers(),
        [
            vec!["error.rs", "model/value.rs"],
            vec!["model.rs"],
            vec!["api_impl.rs"],
            vec!["lib.rs"],
        ]
    );
    assert_eq!(
        graph.to_string(),
        "5 files, 6 uses between them (layer 0 uses no other file)\n\
         layer 0:\n    error.rs\n    model/value.rs\n\
         layer 1:\n    model.rs -> error.rs, model/value.rs\n\
         layer 2:\n    api_impl.rs -> model.rs, model/value.rs\n\
         layer 3:\n    lib.rs -> api_impl.rs, error.rs\n"
    );
}

#[test]
fn every_circle_of_a_larger_group_is_listed() {
    // a <-> b and b <-> c: one group of three files, two shortest circles.
    let graph = graph(&[
        ("lib.rs", "mod a;\nmod b;\nmod c;\n"),
        ("a.rs", "pub struct A(crate::b::B);\n"),
        ("b.rs", "pub struct B(crate::a::A, crate::c::C);\n"),
        ("c.rs", "pub struct C(crate::b::B);\n"),
    ]);
    assert_eq!(graph.components(), [["a.rs", "b.rs", "c.rs"]]);
    assert_eq!(
        cycles(&graph),
        [
            [
                "a.rs -> b.rs (line 1: crate::b::B)",
                "b.rs -> a.rs (line 1: crate::a::A)",
            ],
            [
                "b.rs -> c.rs (line 1: crate::c::C)",
                "c.rs -> b.rs (line 1: crate::b::B)",
            ],
        ]
    );
}

#[test]
fn an_exported_macro_is_defined_in_its_file() {
    let graph = graph(&[
        ("lib.rs", "mod a;\nmod b;\n"),
        (
            "a.rs",
            "pub struct A;\n\n#[macro_export]\nmacro_rules! make {\n    () => {\n        $crate::b::B\n    };\n}\n",
        ),
        (
            "b.rs",
            "pub struct B;\n\npub fn f() -> B {\n    crate::make!()\n}\n",
        ),
    ]);
    assert_eq!(edges(&graph), ["b.rs -> a.rs (line 4: crate::make)"]);
}

#[test]
fn a_missing_module_file_is_an_error() {
    let tree = TempTree::new(&[("lib.rs", "mod gone;\n")]);
    let error = import_graph(&tree.0).unwrap_err();
    assert_eq!(
        error,
        "lib.rs: `mod gone;` but neither gone.rs nor gone/mod.rs exists"
    );
}
