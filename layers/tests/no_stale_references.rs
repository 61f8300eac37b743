//! Every file name cited in the workspace's sources and documents (`format/file.rs`,
//! `DEVELOPERS.md`, `tests/tests/formats.rs`) names a file of the repository: a file that
//! moved or went away leaves no reference behind.

use std::path::{Path, PathBuf};

/// The repository's root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Folders not read: build output, dependencies, version control, and this crate (whose
/// examples name files of made-up crates).
const SKIPPED: [&str; 5] = ["target", ".git", "node_modules", "layers", ".venv"];

/// Every file of the repository, relative to its root, with `/` separators.
fn files(dir: &Path, rel: &str, out: &mut Vec<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let path = if rel.is_empty() {
            name.clone()
        } else {
            format!("{rel}/{name}")
        };
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_dir() {
            if !SKIPPED.contains(&name.as_str()) {
                files(&entry.path(), &path, out);
            }
        } else {
            out.push(path);
        }
    }
}

/// `a/{b,c}_d.rs` as `a/b_d.rs` and `a/c_d.rs` (the first brace group; a chunk without one
/// as it is).
fn expand(chunk: &str) -> Vec<String> {
    let (Some(open), Some(close)) = (chunk.find('{'), chunk.find('}')) else {
        return vec![chunk.to_owned()];
    };
    if close < open {
        return vec![chunk.to_owned()];
    }
    let (head, tail) = (&chunk[..open], &chunk[close + 1..]);
    chunk[open + 1..close]
        .split(',')
        .flat_map(|choice| expand(&format!("{head}{choice}{tail}")))
        .collect()
}

/// The file names cited in `text`: words ending in `.rs` or `.md` (a path, `a/b.rs`, or a
/// name, `b.rs`; `a/{b,c}.rs` is both), outside URLs.
fn cited(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let chunks = line.split(|c: char| c.is_whitespace() || "`()[]|\"'<>".contains(c));
        let expanded: Vec<String> = chunks.flat_map(expand).collect();
        let words = expanded
            .iter()
            .flat_map(|c| c.split(|c: char| !(c.is_alphanumeric() || "._/-".contains(c))));
        for word in words {
            let word = word.trim_start_matches("./").trim_end_matches('.');
            let named = word.ends_with(".rs") || word.ends_with(".md");
            let url = word.starts_with("//")
                || line.contains(&format!("//{word}"))
                || line.contains(&format!("/{word}")) && line.contains("://");
            if named && !url && word.len() > 3 && !word.starts_with('.') {
                out.push((n + 1, word.to_owned()));
            }
        }
    }
    out
}

#[test]
fn every_cited_file_exists() {
    let root = root();
    let mut all = Vec::new();
    files(&root, "", &mut all);
    let readable = all.iter().filter(|f| {
        [".rs", ".md", ".toml", ".yaml", ".sh"]
            .iter()
            .any(|e| f.ends_with(e))
            || f.as_str() == ".ci/run"
    });
    let mut stale = Vec::new();
    for file in readable {
        let Ok(text) = std::fs::read_to_string(root.join(file)) else {
            continue;
        };
        for (line, name) in cited(&text) {
            let exists = all
                .iter()
                .any(|f| f == &name || f.ends_with(&format!("/{name}")));
            if !exists {
                stale.push(format!("{file}:{line}: {name}"));
            }
        }
    }
    assert!(
        stale.is_empty(),
        "{} reference(s) to files that do not exist:\n{}",
        stale.len(),
        stale.join("\n")
    );
}
