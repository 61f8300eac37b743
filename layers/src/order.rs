//! The layer order, as `DEVELOPERS.md` writes it, and the arrows of a graph that run up it.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use crate::{Edge, Graph};

/// The files of a crate from the bottom up, each in its layer: a file may use only the
/// files listed before it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Order {
    /// (layer, file) from the bottom up; files relative to the source folder.
    rows: Vec<(String, String)>,
}

/// The title of the table [`Order::from_markdown`] reads.
pub const TABLE_HEADING: &str = "### `runtime/src`, bottom up";

impl Order {
    /// Reads the first table after `heading`: its rows are `| layer | file | job |`, bottom
    /// up, the layer cell empty where it is the row above's, names in backticks.
    ///
    /// ```
    /// let text = "### files\n\n| layer | file | its job |\n| --- | --- | --- |\n\
    ///             | errors | `error.rs` | the errors |\n| `model/` | `model/key.rs` | keys |\n\
    ///             | | `model/value.rs` | values |\n";
    /// let order = datastore_entity_layers::Order::from_markdown(text, "### files").unwrap();
    /// assert_eq!(order.layers(), ["errors", "model/"]);
    /// assert_eq!(order.files().collect::<Vec<_>>(), ["error.rs", "model/key.rs", "model/value.rs"]);
    /// ```
    pub fn from_markdown(text: &str, heading: &str) -> Result<Order, String> {
        let after = text
            .find(heading)
            .map(|at| &text[at + heading.len()..])
            .ok_or_else(|| format!("no heading {heading:?}"))?;
        let mut rows = Vec::new();
        let mut layer = String::new();
        let mut in_table = false;
        for line in after.lines() {
            let line = line.trim();
            if !line.starts_with('|') {
                if in_table {
                    break;
                }
                continue;
            }
            in_table = true;
            let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
            if cells[0].starts_with("---") || cells[0] == "layer" {
                continue;
            }
            let [named, file, ..] = cells.as_slice() else {
                return Err(format!("a row of the layer table has no file cell: {line}"));
            };
            if !named.is_empty() {
                layer = named.trim_matches('`').to_string();
            }
            if layer.is_empty() {
                return Err(format!(
                    "the layer table's first row names no layer: {line}"
                ));
            }
            let file = file.trim_matches('`');
            if !file.ends_with(".rs") {
                return Err(format!(
                    "the layer table names {file:?}, not a file: {line}"
                ));
            }
            rows.push((layer.clone(), file.to_string()));
        }
        if rows.is_empty() {
            return Err(format!("no table after {heading:?}"));
        }
        let mut seen = BTreeSet::new();
        if let Some((_, twice)) = rows.iter().find(|(_, f)| !seen.insert(f.clone())) {
            return Err(format!("the layer table lists {twice} twice"));
        }
        Ok(Order { rows })
    }

    /// The layers' names, bottom up.
    pub fn layers(&self) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        for (layer, _) in &self.rows {
            if out.last() != Some(&layer.as_str()) {
                out.push(layer);
            }
        }
        out
    }

    /// The files, bottom up.
    pub fn files(&self) -> impl Iterator<Item = &str> {
        self.rows.iter().map(|(_, f)| f.as_str())
    }

    /// Where `graph` departs from the order: files it has that the order does not list
    /// (and the reverse), and every use of a file listed at or above the using one.
    pub fn check(&self, graph: &Graph) -> Departures {
        let rank: BTreeMap<&str, usize> = self.files().enumerate().map(|(i, f)| (f, i)).collect();
        let layer_of: BTreeMap<&str, &str> = self
            .rows
            .iter()
            .map(|(l, f)| (f.as_str(), l.as_str()))
            .collect();
        let present: BTreeSet<&str> = graph.files().iter().map(String::as_str).collect();
        let unlisted = graph
            .files()
            .iter()
            .filter(|f| !rank.contains_key(f.as_str()))
            .cloned()
            .collect();
        let missing = self
            .files()
            .filter(|f| !present.contains(f))
            .map(str::to_string)
            .collect();
        let upward = graph
            .edges()
            .into_iter()
            .filter_map(|edge| {
                let from = *rank.get(edge.from.as_str())?;
                let to = *rank.get(edge.to.as_str())?;
                (to > from).then(|| Upward {
                    from_layer: layer_of[edge.from.as_str()].to_string(),
                    to_layer: layer_of[edge.to.as_str()].to_string(),
                    edge,
                })
            })
            .collect();
        Departures {
            unlisted,
            missing,
            upward,
        }
    }
}

/// A use of a file the order lists above the using file.
#[derive(Clone, Debug)]
pub struct Upward {
    /// The use, with its lines.
    pub edge: Edge,
    /// The using file's layer.
    pub from_layer: String,
    /// The used file's layer.
    pub to_layer: String,
}

/// What [`Order::check`] found.
#[derive(Clone, Debug, Default)]
pub struct Departures {
    /// Files of the crate that the order does not list.
    pub unlisted: Vec<String>,
    /// Files the order lists that the crate does not have.
    pub missing: Vec<String>,
    /// Uses that run up the order.
    pub upward: Vec<Upward>,
}

impl Departures {
    /// Nothing found.
    pub fn is_empty(&self) -> bool {
        self.unlisted.is_empty() && self.missing.is_empty() && self.upward.is_empty()
    }
}

impl fmt::Display for Departures {
    /// One line per finding: `upward: db/query.rs (db/) -> query/spec.rs … (line 9: use …)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for file in &self.unlisted {
            writeln!(f, "not in the layer table: {file}")?;
        }
        for file in &self.missing {
            writeln!(f, "in the layer table but not in the crate: {file}")?;
        }
        for up in &self.upward {
            let layers = if up.from_layer == up.to_layer {
                format!("listed later in {}", up.to_layer)
            } else {
                format!("{} uses {}, a layer above it", up.from_layer, up.to_layer)
            };
            writeln!(f, "upward ({layers}): {}", up.edge)?;
        }
        Ok(())
    }
}
