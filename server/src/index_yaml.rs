//! `index.yaml`, as `gcloud datastore indexes create` takes it, read into the schemas the
//! engine declares: the composite indexes a server started with `--require-indexes` serves.

use std::path::Path;

use datastore_entity::{Direction, Error, IndexSchema, IndexedProperty, Schema, StorageSource};

/// One index as the file declares it.
#[derive(Debug, Default, PartialEq)]
struct Declared {
    kind: String,
    ancestor: bool,
    properties: Vec<(String, Direction)>,
}

/// The schemas of the kinds `path` declares indexes for, made to live as long as the server
/// (the engine keeps declared schemas by reference).
pub(crate) fn schemas(path: &Path) -> Result<Vec<&'static Schema>, Error> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::Storage {
        reason: format!("cannot read {}: {e}", path.display()),
        source: Some(StorageSource::new(e)),
    })?;
    let declared = parse(&text).map_err(|unreadable| Error::Storage {
        reason: format!("{}: {unreadable}", path.display()),
        source: Some(StorageSource::new(unreadable)),
    })?;
    let mut kinds: Vec<String> = declared.iter().map(|d| d.kind.clone()).collect();
    kinds.dedup();
    Ok(kinds
        .into_iter()
        .map(|kind| {
            let indexes: Vec<IndexSchema> = declared
                .iter()
                .filter(|d| d.kind == kind)
                .map(|d| IndexSchema {
                    ancestor: d.ancestor,
                    properties: d
                        .properties
                        .iter()
                        .map(|(name, direction)| IndexedProperty {
                            name: leak(name),
                            direction: *direction,
                        })
                        .collect::<Vec<_>>()
                        .leak(),
                })
                .collect();
            &*Box::leak(Box::new(Schema {
                kind: leak(&kind),
                embedded: false,
                properties: &[],
                indexes: indexes.leak(),
                counters: &[],
                sharded_indexes: &[],
                replicas: None,
                vector_indexes: &[],
                cache: datastore_entity::CachePolicy::DEFAULT,
            }))
        })
        .collect())
}

fn leak(text: &str) -> &'static str {
    Box::leak(text.to_owned().into_boxed_str())
}

/// Why an `index.yaml` cannot be read.
#[derive(Debug, PartialEq)]
enum Unreadable {
    /// A line that is not what an `index.yaml` holds there.
    Line {
        number: usize,
        problem: &'static str,
        text: String,
    },
    /// An index without a kind or properties.
    Incomplete { kind: String },
}

impl std::fmt::Display for Unreadable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unreadable::Line {
                number,
                problem,
                text,
            } => write!(f, "line {number}: {problem}: {text}"),
            Unreadable::Incomplete { kind } => {
                write!(f, "an index without a kind or properties (kind `{kind}`)")
            }
        }
    }
}

impl std::error::Error for Unreadable {}

/// The indexes of an `index.yaml`: `indexes:`, then `- kind:` items with `ancestor:` and
/// `properties:` (`- name:`, `direction:`), as gcloud writes and reads them.
fn parse(text: &str) -> Result<Vec<Declared>, Unreadable> {
    let mut indexes: Vec<Declared> = Vec::new();
    for (number, raw) in text.lines().enumerate() {
        let line = raw.split(" #").next().unwrap_or_default().trim_end();
        let item = line.trim_start();
        if item.is_empty() || item.starts_with('#') || item == "indexes:" || item == "indexes: []" {
            continue;
        }
        let at = |problem: &'static str| Unreadable::Line {
            number: number + 1,
            problem,
            text: raw.to_owned(),
        };
        let (entry, rest) = match item.strip_prefix("- ") {
            Some(rest) => (true, rest.trim_start()),
            None => (false, item),
        };
        let (key, value) = rest
            .split_once(':')
            .map(|(k, v)| (k.trim(), unquote(v.trim())))
            .ok_or_else(|| at("expected `key: value`"))?;
        match key {
            "kind" if entry => indexes.push(Declared {
                kind: value,
                ..Declared::default()
            }),
            "ancestor" => {
                let index = indexes.last_mut().ok_or_else(|| at("no index yet"))?;
                index.ancestor = match value.to_ascii_lowercase().as_str() {
                    "yes" | "true" => true,
                    "no" | "false" => false,
                    _ => return Err(at("ancestor is yes or no")),
                };
            }
            "properties" => {}
            "name" if entry => {
                let index = indexes.last_mut().ok_or_else(|| at("no index yet"))?;
                index.properties.push((value, Direction::Ascending));
            }
            "direction" => {
                let property = indexes
                    .last_mut()
                    .and_then(|i| i.properties.last_mut())
                    .ok_or_else(|| at("no property yet"))?;
                property.1 = match value.as_str() {
                    "asc" | "ascending" => Direction::Ascending,
                    "desc" | "descending" => Direction::Descending,
                    _ => return Err(at("direction is asc or desc")),
                };
            }
            _ => return Err(at("not part of an index.yaml")),
        }
    }
    match indexes
        .iter()
        .find(|i| i.kind.is_empty() || i.properties.is_empty())
    {
        Some(index) => Err(Unreadable::Incomplete {
            kind: index.kind.clone(),
        }),
        None => Ok(indexes),
    }
}

/// A YAML scalar: as it is, or inside double quotes (`\"` and `\\` unescaped) or single quotes.
fn unquote(value: &str) -> String {
    if let Some(inner) = value.strip_prefix('"').and_then(|v| v.strip_suffix('"')) {
        let mut out = String::with_capacity(inner.len());
        let mut chars = inner.chars();
        while let Some(c) = chars.next() {
            match c {
                '\\' => out.extend(chars.next()),
                c => out.push(c),
            }
        }
        out
    } else if let Some(inner) = value.strip_prefix('\'').and_then(|v| v.strip_suffix('\'')) {
        inner.replace("''", "'")
    } else {
        value.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gclouds_index_yaml_is_read() {
        let text = "# a comment\nindexes:\n\n- kind: Post\n  ancestor: no\n  properties:\n  \
                    - name: author\n  - name: published\n    direction: desc\n\n- kind: \"Odd.kind\"\n  \
                    ancestor: yes\n  properties:\n  - name: \"yes\"\n";
        assert_eq!(
            parse(text).unwrap(),
            [
                Declared {
                    kind: "Post".into(),
                    ancestor: false,
                    properties: vec![
                        ("author".into(), Direction::Ascending),
                        ("published".into(), Direction::Descending)
                    ],
                },
                Declared {
                    kind: "Odd.kind".into(),
                    ancestor: true,
                    properties: vec![("yes".into(), Direction::Ascending)],
                },
            ]
        );
        assert!(parse("indexes: []\n").unwrap().is_empty());
        assert!(parse("- kind: K\n  properties:\n  - name: a\n    direction: up\n").is_err());
        assert!(parse("- kind: K\n").is_err(), "an index without properties");
    }
}
