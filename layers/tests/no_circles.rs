//! The runtime's source files form layers: no file uses, directly or not, a file that uses
//! it. `cargo test -p datastore-entity-layers -- --nocapture` also prints the layer table.

use std::path::{Path, PathBuf};

use datastore_entity_layers::{Graph, format_cycle, import_graph};

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
