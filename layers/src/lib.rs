//! Which source files of a crate use which, the circles among them, and the uses that run
//! up a declared order.
//!
//! The runtime crate is kept in layers: a file only uses files below it, so any file can be
//! read, tested and moved knowing only what is under it. This crate reads the sources (it
//! does not build them), draws the graph of uses between files, finds its circles, and
//! checks it against the order `DEVELOPERS.md`'s table writes ([`Order`]);
//! `tests/no_circles.rs` runs both on `runtime/src`.
//!
//! ```no_run
//! let graph = datastore_entity_layers::import_graph("runtime/src".as_ref()).unwrap();
//! for cycle in graph.cycles() {
//!     println!("{}", datastore_entity_layers::format_cycle(&cycle));
//! }
//! println!("{graph}"); // the files layer by layer
//! ```
//!
//! # What counts as a use
//!
//! The files are the ones the module tree reaches from `lib.rs` (`mod x;` is `x.rs` or
//! `x/mod.rs`, `#[path]` is honoured; inline `mod m { … }` belongs to its file), test
//! modules included: a test that needs a higher file belongs in a higher file. File A uses
//! file B (A ≠ B) when A:
//!
//! - has a `use` declaration (anywhere: top level, in functions, in inline modules) of a
//!   `crate::`, `self::`, `super::` path, or of a path starting with a module in scope,
//!   that names an item defined in B;
//! - has such a path in its code (`crate::db::Db::open(…)`; `$crate` paths in
//!   `macro_rules!` and paths in doc comments do not count).
//!
//! A path is followed through the module tree; an item re-exported by a module
//! (`pub use a::Thing;`, `pub use a::{Thing as Other}`, globs last) is followed to the
//! file that defines it, so `use crate::Db` is a use of `db.rs`, not of `lib.rs`. A
//! path ending at a module uses that module's file, unless the file goes on to name items
//! through it (`use crate::backend;` … `backend::Mutation`). A re-export (`pub use`) is a
//! use like any other: a public path that needs a name from a higher layer is made in the
//! crate's façade (`lib.rs`), at the top of the order.
//!
//! # Line numbers
//!
//! Outside a procedural macro `proc-macro2` only knows token positions with its
//! `span-locations` feature; rather than switch it on for the whole workspace, each
//! path gets a marker segment naming its line before it is parsed (see `lex.rs`).

mod lex;
mod order;
#[cfg(test)]
mod tests;
mod tree;

pub use order::{Departures, Order, TABLE_HEADING, Upward};

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt;
use std::path::Path;

/// One line of a file that makes it use another file.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Reason {
    /// The line number (from 1; 0 when it could not be determined).
    pub line: usize,
    /// The `use` declaration (`use crate::db::Db`) or the path in code
    /// (`crate::db::Db`), as resolved: one imported name per reason.
    pub text: String,
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            0 => write!(f, "line ?: {}", self.text),
            line => write!(f, "line {line}: {}", self.text),
        }
    }
}

/// File `from` uses items defined in file `to`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Edge {
    /// The using file, relative to the source folder (`db/mod.rs`).
    pub from: String,
    /// The file defining what is used.
    pub to: String,
    /// Every line of `from` responsible, by line number (one reason per imported name
    /// or path, so a line can appear more than once).
    pub reasons: Vec<Reason>,
}

/// How many lines an edge shows before "and N more".
const SHOWN_LINES: usize = 3;

impl fmt::Display for Edge {
    /// `a.rs -> b.rs (line 12: use crate::b::{X, Y}; line 30: crate::b::Z)`: the names a
    /// line imports from one path are shown together.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut lines: Vec<(usize, Vec<&str>)> = Vec::new();
        for reason in &self.reasons {
            match lines.last_mut() {
                Some((line, texts)) if *line == reason.line => texts.push(&reason.text),
                _ => lines.push((reason.line, vec![&reason.text])),
            }
        }
        write!(f, "{} -> {} (", self.from, self.to)?;
        for (i, (line, texts)) in lines.iter().take(SHOWN_LINES).enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            let reason = Reason {
                line: *line,
                text: join_imports(texts),
            };
            write!(f, "{reason}")?;
        }
        match lines.len().saturating_sub(SHOWN_LINES) {
            0 => {}
            1 => f.write_str("; and 1 more line")?,
            more => write!(f, "; and {more} more lines")?,
        }
        f.write_str(")")
    }
}

/// `use a::X` and `use a::Y` as `use a::{X, Y}`; anything else joined with commas.
fn join_imports(texts: &[&str]) -> String {
    if let [text] = texts {
        return text.to_string();
    }
    fn split(text: &str) -> Option<(&str, &str)> {
        let head = text.split(" as ").next().unwrap_or(text);
        let at = head.rfind("::")?;
        (text.starts_with("use ") && !text.contains('(')).then(|| (&text[..at], &text[at + 2..]))
    }
    let parts: Option<Vec<(&str, &str)>> = texts.iter().map(|t| split(t)).collect();
    match parts {
        Some(parts) if parts.iter().all(|(prefix, _)| *prefix == parts[0].0) => {
            let names: Vec<&str> = parts.iter().map(|(_, name)| *name).collect();
            format!("{}::{{{}}}", parts[0].0, names.join(", "))
        }
        _ => texts.join(", "),
    }
}

/// The graph of uses between the source files of a crate.
#[derive(Clone, Debug)]
pub struct Graph {
    /// The files, relative to the source folder, sorted.
    files: Vec<String>,
    /// (from, to) → the lines responsible, indexes into `files`.
    edges: BTreeMap<(usize, usize), Vec<Reason>>,
}

/// Reads the crate whose root is `src/lib.rs` and returns which of its files use which.
///
/// Fails when a file does not parse or a `mod` declaration names a file that is missing.
pub fn import_graph(src: &Path) -> Result<Graph, String> {
    let tree = tree::Tree::load(src)?;
    let names = tree.file_names();
    let mut order: Vec<usize> = (0..names.len()).collect();
    order.sort_by(|&a, &b| names[a].cmp(&names[b]));
    let mut index = vec![0; names.len()];
    for (new, &old) in order.iter().enumerate() {
        index[old] = new;
    }
    let mut edges: BTreeMap<(usize, usize), Vec<Reason>> = BTreeMap::new();
    for from in 0..names.len() {
        for (to, reason) in tree.uses_of(from) {
            edges
                .entry((index[from], index[to]))
                .or_default()
                .push(reason);
        }
    }
    for reasons in edges.values_mut() {
        reasons.sort();
        reasons.dedup();
    }
    Ok(Graph {
        files: order.into_iter().map(|i| names[i].clone()).collect(),
        edges,
    })
}

/// A circle as text: the files around it on one line, then each edge with its lines.
///
/// ```text
/// a.rs -> b.rs -> a.rs
///     a.rs -> b.rs (line 1: use crate::b::Other)
///     b.rs -> a.rs (line 3: crate::a::Thing)
/// ```
pub fn format_cycle(cycle: &[Edge]) -> String {
    let mut out = String::new();
    if let Some(first) = cycle.first() {
        out.push_str(&first.from);
        for edge in cycle {
            out.push_str(" -> ");
            out.push_str(&edge.to);
        }
    }
    for edge in cycle {
        out.push_str(&format!("\n    {edge}"));
    }
    out
}

impl Graph {
    /// The files reached from `lib.rs`, relative to the source folder, sorted.
    pub fn files(&self) -> &[String] {
        &self.files
    }

    /// Every edge, sorted by the using file then the used one.
    pub fn edges(&self) -> Vec<Edge> {
        self.edges.keys().map(|&(a, b)| self.edge(a, b)).collect()
    }

    /// How many pairs of files are connected by a use.
    pub fn edge_count(&self) -> usize {
        self.edges.len()
    }

    /// The files `file` uses directly, sorted.
    pub fn uses(&self, file: &str) -> Vec<&str> {
        let Some(from) = self.files.iter().position(|f| f == file) else {
            return Vec::new();
        };
        self.edges
            .keys()
            .filter(|&&(a, _)| a == from)
            .map(|&(_, b)| self.files[b].as_str())
            .collect()
    }

    /// The groups of files that all reach each other (strongly connected components of
    /// more than one file), each sorted, sorted by their first file.
    pub fn components(&self) -> Vec<Vec<String>> {
        self.circular_components()
            .into_iter()
            .map(|c| c.into_iter().map(|f| self.files[f].clone()).collect())
            .collect()
    }

    /// The components of more than one file, sorted.
    fn circular_components(&self) -> Vec<Vec<usize>> {
        let mut components: Vec<Vec<usize>> = self
            .strong_components()
            .into_iter()
            .filter(|c| c.len() > 1)
            .collect();
        components.sort();
        components
    }

    /// The circles: for every file in a component of [`Graph::components`], a shortest
    /// circle through it, each circle listed once (starting at its first file in sorted
    /// order). Circles of one component are together, shortest first. Empty when the
    /// files form layers.
    pub fn cycles(&self) -> Vec<Vec<Edge>> {
        let adjacency = self.adjacency();
        let mut out = Vec::new();
        for component in self.circular_components() {
            let mut inside = vec![false; self.files.len()];
            for &f in &component {
                inside[f] = true;
            }
            let mut found = BTreeSet::new();
            for &start in &component {
                if let Some(mut cycle) = shortest_cycle(&adjacency, &inside, start) {
                    let first = (0..cycle.len()).min_by_key(|&i| cycle[i]).unwrap_or(0);
                    cycle.rotate_left(first);
                    found.insert((cycle.len(), cycle));
                }
            }
            for (_, cycle) in found {
                let edges = (0..cycle.len())
                    .map(|i| self.edge(cycle[i], cycle[(i + 1) % cycle.len()]))
                    .collect();
                out.push(edges);
            }
        }
        out
    }

    /// The files in layers: layer 0 uses no other file, each file in layer n uses at least
    /// one in layer n - 1 and none above. The files of a circle share a layer (the
    /// layers of the graph whose components are collapsed into single nodes).
    pub fn layers(&self) -> Vec<Vec<String>> {
        let components = self.strong_components();
        let mut component_of = vec![0; self.files.len()];
        for (c, files) in components.iter().enumerate() {
            for &f in files {
                component_of[f] = c;
            }
        }
        // Tarjan's algorithm lists a component after every component it reaches, so one
        // pass in that order sees each component's dependencies first.
        let mut layer = vec![0; components.len()];
        for (c, files) in components.iter().enumerate() {
            layer[c] = self
                .edges
                .keys()
                .filter(|(a, b)| files.contains(a) && component_of[*b] != c)
                .map(|&(_, b)| layer[component_of[b]] + 1)
                .max()
                .unwrap_or(0);
        }
        let height = layer.iter().max().map_or(0, |&h| h + 1);
        let mut out = vec![Vec::new(); height];
        for (f, name) in self.files.iter().enumerate() {
            out[layer[component_of[f]]].push(name.clone());
        }
        out
    }

    fn edge(&self, from: usize, to: usize) -> Edge {
        Edge {
            from: self.files[from].clone(),
            to: self.files[to].clone(),
            reasons: self.edges.get(&(from, to)).cloned().unwrap_or_default(),
        }
    }

    fn adjacency(&self) -> Vec<Vec<usize>> {
        let mut adjacency = vec![Vec::new(); self.files.len()];
        for &(a, b) in self.edges.keys() {
            adjacency[a].push(b);
        }
        adjacency
    }

    /// Tarjan's strongly connected components, each sorted, every component listed after
    /// the ones it reaches.
    fn strong_components(&self) -> Vec<Vec<usize>> {
        struct Tarjan<'a> {
            adjacency: &'a [Vec<usize>],
            index: Vec<Option<usize>>,
            low: Vec<usize>,
            on_stack: Vec<bool>,
            stack: Vec<usize>,
            next: usize,
            out: Vec<Vec<usize>>,
        }
        impl Tarjan<'_> {
            fn visit(&mut self, v: usize) {
                self.index[v] = Some(self.next);
                self.low[v] = self.next;
                self.next += 1;
                self.stack.push(v);
                self.on_stack[v] = true;
                for &w in &self.adjacency[v] {
                    match self.index[w] {
                        None => {
                            self.visit(w);
                            self.low[v] = self.low[v].min(self.low[w]);
                        }
                        Some(i) if self.on_stack[w] => self.low[v] = self.low[v].min(i),
                        Some(_) => {}
                    }
                }
                if Some(self.low[v]) == self.index[v] {
                    let mut component = Vec::new();
                    while let Some(w) = self.stack.pop() {
                        self.on_stack[w] = false;
                        component.push(w);
                        if w == v {
                            break;
                        }
                    }
                    component.sort_unstable();
                    self.out.push(component);
                }
            }
        }
        let adjacency = self.adjacency();
        let n = self.files.len();
        let mut tarjan = Tarjan {
            adjacency: &adjacency,
            index: vec![None; n],
            low: vec![0; n],
            on_stack: vec![false; n],
            stack: Vec::new(),
            next: 0,
            out: Vec::new(),
        };
        for v in 0..n {
            if tarjan.index[v].is_none() {
                tarjan.visit(v);
            }
        }
        tarjan.out
    }
}

/// A shortest circle through `start` that stays inside the component, as its files
/// (`start` first), by breadth-first search.
fn shortest_cycle(adjacency: &[Vec<usize>], inside: &[bool], start: usize) -> Option<Vec<usize>> {
    let mut previous = vec![None; adjacency.len()];
    let mut seen = vec![false; adjacency.len()];
    let mut queue = VecDeque::from([start]);
    seen[start] = true;
    while let Some(u) = queue.pop_front() {
        for &v in &adjacency[u] {
            if !inside[v] {
                continue;
            }
            if v == start {
                let mut path = vec![u];
                let mut at = u;
                while let Some(p) = previous[at] {
                    path.push(p);
                    at = p;
                }
                path.reverse();
                return Some(path);
            }
            if !seen[v] {
                seen[v] = true;
                previous[v] = Some(u);
                queue.push_back(v);
            }
        }
    }
    None
}

impl fmt::Display for Graph {
    /// The layer table: each layer's files with the files each one uses; the files of a
    /// circle are marked.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let in_circle: BTreeSet<String> = self.components().into_iter().flatten().collect();
        writeln!(
            f,
            "{} files, {} uses between them (layer 0 uses no other file)",
            self.files.len(),
            self.edges.len()
        )?;
        for (n, files) in self.layers().iter().enumerate() {
            writeln!(f, "layer {n}:")?;
            for file in files {
                let mark = if in_circle.contains(file) {
                    " [in a circle]"
                } else {
                    ""
                };
                let uses = self.uses(file);
                if uses.is_empty() {
                    writeln!(f, "    {file}{mark}")?;
                } else {
                    writeln!(f, "    {file}{mark} -> {}", uses.join(", "))?;
                }
            }
        }
        Ok(())
    }
}
