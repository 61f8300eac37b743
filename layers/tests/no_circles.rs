//! The runtime's source files form layers: no file uses, directly or not, a file that uses
//! it. `cargo test -p datastore-entity-layers -- --nocapture` also prints the layer table.

use std::path::{Path, PathBuf};

use datastore_entity_layers::{Graph, Order, TABLE_HEADING, format_cycle, import_graph};

fn runtime_src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../runtime/src")
}

fn runtime_graph() -> Graph {
    let src = runtime_src();
    import_graph(&src).unwrap_or_else(|e| panic!("reading {}: {e}", src.display()))
}

#[test]
fn no_circles() {
    let graph = runtime_graph();
    let cycles = graph.cycles();
    if !cycles.is_empty() {
        let mut message = format!(
            "{} import circle(s) between the runtime's files ({} group(s) of files that \
             use each other: {}):\n",
            cycles.len(),
            graph.components().len(),
            graph
                .components()
                .iter()
                .map(|c| format!("{{{}}}", c.join(", ")))
                .collect::<Vec<_>>()
                .join(", ")
        );
        for (i, cycle) in cycles.iter().enumerate() {
            message.push_str(&format!("\ncircle {}: {}\n", i + 1, format_cycle(cycle)));
        }
        message.push_str(
            "\nan import circle between the runtime's files: move the shared item down a \
             layer (see DEVELOPERS.md, 'Layout')",
        );
        panic!("{message}");
    }
    // Guard against checking an empty or wrong folder.
    assert!(
        graph.files().len() > 20 && graph.edge_count() > 30,
        "only {} files and {} uses found in {}: is this the runtime's source folder?",
        graph.files().len(),
        graph.edge_count(),
        runtime_src().display()
    );
}

/// Prints the files layer by layer (with `--nocapture`), for DEVELOPERS.md's layer table.
#[test]
fn layer_table() {
    let graph = runtime_graph();
    println!("{graph}");
    assert!(graph.layers().iter().map(Vec::len).sum::<usize>() == graph.files().len());
}

fn developers_md() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../DEVELOPERS.md");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every file is in `DEVELOPERS.md`'s layer table, and uses only files listed before it
/// (imports, re-exports and test modules alike): the order is the table's.
#[test]
fn every_file_uses_only_files_below_it_in_the_table() {
    let order = Order::from_markdown(&developers_md(), TABLE_HEADING)
        .unwrap_or_else(|e| panic!("DEVELOPERS.md: {e}"));
    let departures = order.check(&runtime_graph());
    assert!(
        departures.is_empty(),
        "the runtime's files depart from the layer order of DEVELOPERS.md ({TABLE_HEADING}):\n\
         {departures}\nmove the used item down (or the using file up), or put the public path \
         that needs it in lib.rs, the façade"
    );
}

/// The crate's own comment on its layers names the same layers, in the same order.
#[test]
fn lib_rs_names_the_layers_of_the_table() {
    let order = Order::from_markdown(&developers_md(), TABLE_HEADING).unwrap();
    let lib = std::fs::read_to_string(runtime_src().join("lib.rs")).unwrap();
    let line = lib
        .lines()
        .find_map(|l| l.trim().strip_prefix("// The layers, bottom up: "))
        .expect("lib.rs has a line `// The layers, bottom up: …`");
    let named: Vec<&str> = line
        .split(" (")
        .next()
        .unwrap_or(line)
        .split(", ")
        .collect();
    assert_eq!(
        named,
        order.layers(),
        "lib.rs and DEVELOPERS.md disagree on the layers"
    );
}

/// No file of a library crate (the runtime, the core, the derive, the names, the server) is
/// over 800 lines, except those `DEVELOPERS.md` names with why.
#[test]
fn no_file_is_over_800_lines_unless_developers_md_says_why() {
    let developers = developers_md();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut long = Vec::new();
    for krate in [
        "runtime/src",
        "core/src",
        "derive/src",
        "names/src",
        "server/src",
    ] {
        let src = root.join(krate);
        let graph = import_graph(&src).unwrap_or_else(|e| panic!("reading {}: {e}", src.display()));
        for file in graph.files() {
            let Ok(text) = std::fs::read_to_string(src.join(file)) else {
                continue;
            };
            let lines = text.lines().count();
            let explained = developers.contains(&format!("`{file}` ("));
            if lines > 800 && !explained {
                long.push(format!("{krate}/{file}: {lines} lines"));
            }
        }
    }
    assert!(
        long.is_empty(),
        "files over 800 lines that DEVELOPERS.md does not explain (\"`file` (why)\"):\n{}",
        long.join("\n")
    );
}

/// The other library crates (the core, the derive, the names, the server) have no import circles
/// either: each file of a crate uses, directly or not, no file that uses it.
#[test]
fn no_circles_in_the_other_library_crates() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    for krate in ["core/src", "derive/src", "names/src", "server/src"] {
        let src = root.join(krate);
        let graph = import_graph(&src).unwrap_or_else(|e| panic!("reading {}: {e}", src.display()));
        assert!(
            !graph.files().is_empty(),
            "no file found in {}",
            src.display()
        );
        let cycles = graph.cycles();
        assert!(
            cycles.is_empty(),
            "import circles in {krate}:\n{}\nmove the shared item down (see DEVELOPERS.md, \
             'Layout')",
            cycles
                .iter()
                .map(|c| format_cycle(c))
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
}

/// The core's, the derive's and the server's files follow their tables in `DEVELOPERS.md`
/// too.
#[test]
fn the_other_crates_follow_their_tables() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    for krate in ["core/src", "derive/src", "server/src"] {
        let heading = format!("### `{krate}`, bottom up");
        let order = Order::from_markdown(&developers_md(), &heading)
            .unwrap_or_else(|e| panic!("DEVELOPERS.md: {e}"));
        let src = root.join(krate);
        let graph = import_graph(&src).unwrap_or_else(|e| panic!("reading {}: {e}", src.display()));
        let departures = order.check(&graph);
        assert!(
            departures.is_empty(),
            "{krate}'s files depart from the layer order of DEVELOPERS.md ({heading}):\n\
             {departures}"
        );
    }
}
