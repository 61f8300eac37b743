//! The [`Schema`] of a kind as declared in Rust: its properties, exclusions, TTL, declared
//! composite indexes and scale helpers — what indexes, tools and the `Db` need to know.

/// A sort direction: of a composite index's column, or of a query's order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    /// Smallest first.
    Ascending,
    /// Largest first.
    Descending,
}

/// A kind (or embedded entity type) as declared in Rust: what indexes, tools and the `Db`
/// need to know about it.
#[derive(Debug)]
pub struct Schema {
    /// The kind, or the struct name of an embedded entity.
    pub kind: &'static str,
    /// Whether this is an embedded entity (no `#[key]`).
    pub embedded: bool,
    /// The stored properties, in declaration order (a `#[sharded_index]` field's companion
    /// property included; `#[sharded]` counters, which live in their own entities, not).
    pub properties: &'static [PropertySchema],
    /// The composite indexes declared with `#[entity(index(...), ancestor_index(...))]` (R-I2).
    pub indexes: &'static [IndexSchema],
    /// The `#[sharded(n)]` counters (R-S1).
    pub counters: &'static [CounterSchema],
    /// The `#[sharded_index(n)]` fields (R-S3).
    pub sharded_indexes: &'static [ShardedIndexSchema],
    /// The read replicas of `#[replicated(n)]` (R-S2).
    pub replicas: Option<ReplicaSchema>,
    /// The vector indexes: `#[vector_index(n)]` on a `Vector` field, and each
    /// `#[entity(index(...))]` that ends with such a field (a search pre-filtered on the
    /// properties before it).
    pub vector_indexes: &'static [VectorIndexSchema],
    /// How the caches treat the kind (`#[entity(global_cache = false)]`,
    /// `#[entity(global_cache_timeout = 600)]`).
    pub cache: CachePolicy,
}

/// How the global cache treats an entity kind: NDB's `_use_global_cache` and
/// `_global_cache_timeout`, which python-ndb reads for the same kind on the same Redis.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CachePolicy {
    /// Whether the global cache holds entities of the kind (NDB's default: yes). A kind that
    /// opts out is neither read from the cache nor locked in it by writes: every process on
    /// the same Redis (NDB's too) must opt it out alike.
    pub global: bool,
    /// How long, in seconds, the global cache keeps an entity of the kind once read (`None`,
    /// NDB's default: until a write replaces it).
    pub global_timeout: Option<u32>,
}

impl CachePolicy {
    /// Cached, with no expiry: NDB's default.
    pub const DEFAULT: CachePolicy = CachePolicy {
        global: true,
        global_timeout: None,
    };
}

impl Default for CachePolicy {
    fn default() -> CachePolicy {
        CachePolicy::DEFAULT
    }
}

impl Schema {
    /// The stored property with that name.
    pub fn property(&self, name: &str) -> Option<&PropertySchema> {
        self.properties.iter().find(|p| p.name == name)
    }

    /// The TTL property, if one is declared with `#[ttl]`.
    pub fn ttl(&self) -> Option<&PropertySchema> {
        self.properties.iter().find(|p| p.ttl)
    }

    /// The vector index a nearest-neighbour search of `property` with filters on exactly the
    /// properties `filtered` (in any order, each once) needs, if declared.
    pub fn vector_index(&self, property: &str, filtered: &[&str]) -> Option<&VectorIndexSchema> {
        self.vector_indexes.iter().find(|index| {
            index.property == property
                && index.filters.len() == filtered.len()
                && index.filters.iter().all(|f| filtered.contains(&f.name))
        })
    }

    /// The counter of the Rust field `field`.
    pub fn counter(&self, field: &str) -> Option<&CounterSchema> {
        self.counters.iter().find(|c| c.field == field)
    }
}

/// One stored property of a [`Schema`].
pub struct PropertySchema {
    /// The stored name (after `rename` / `rename_all`).
    pub name: &'static str,
    /// The Rust field name.
    pub field: &'static str,
    /// Excluded from indexes (`#[exclude_from_index]`, `#[ttl]`, or the plain value of a
    /// `#[sharded_index]` field).
    pub excluded: bool,
    /// The TTL property (`#[ttl]`).
    pub ttl: bool,
    /// Former names (`#[property(alias = "...")]`): read when the property is absent, removed
    /// when the entity is written.
    pub aliases: &'static [&'static str],
    /// `#[property(flatten)]`: the embedded entity is stored as top-level `name.sub`
    /// properties (a `Vec` of them as one array per sub-property).
    pub flatten: bool,
    /// The schema of an embedded entity type, and whether the value is an array.
    nested: fn() -> (Option<&'static Schema>, bool),
}

impl PropertySchema {
    /// Describes a property; `nested` returns the schema of an embedded entity type and
    /// whether the value is an array. Used by the derive.
    #[doc(hidden)]
    pub const fn new(
        name: &'static str,
        field: &'static str,
        excluded: bool,
        ttl: bool,
        aliases: &'static [&'static str],
        flatten: bool,
        nested: fn() -> (Option<&'static Schema>, bool),
    ) -> PropertySchema {
        PropertySchema {
            name,
            field,
            excluded,
            ttl,
            aliases,
            flatten,
            nested,
        }
    }

    /// The schema of an embedded entity, whose properties are indexed as `name.inner` (R-P2).
    pub fn embedded(&self) -> Option<&'static Schema> {
        (self.nested)().0
    }

    /// Whether the property is stored as an array (a `Vec` field).
    pub fn repeated(&self) -> bool {
        (self.nested)().1
    }
}

impl std::fmt::Debug for PropertySchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PropertySchema")
            .field("name", &self.name)
            .field("field", &self.field)
            .field("excluded", &self.excluded)
            .field("ttl", &self.ttl)
            .field("aliases", &self.aliases)
            .field("flatten", &self.flatten)
            .field("embedded", &self.embedded().map(|s| s.kind))
            .field("repeated", &self.repeated())
            .finish()
    }
}

/// A composite index declared on a kind (R-I2).
#[derive(Debug, PartialEq, Eq)]
pub struct IndexSchema {
    /// Whether the index serves ancestor queries (`ancestor_index(...)`, `ancestor: yes`).
    pub ancestor: bool,
    /// The indexed properties, most significant first.
    pub properties: &'static [IndexedProperty],
}

/// One property of a composite index.
#[derive(Debug, PartialEq, Eq)]
pub struct IndexedProperty {
    /// The stored name.
    pub name: &'static str,
    /// The index's direction on it (`-name` in the declaration: descending).
    pub direction: Direction,
}

/// A vector index: what the service needs to answer a nearest-neighbour search of `property`
/// (a flat index of vectors of `dimension` numbers), pre-filtered on the `filters` properties.
#[derive(Debug, PartialEq, Eq)]
pub struct VectorIndexSchema {
    /// The stored name of the vector property.
    pub property: &'static str,
    /// The number of dimensions of the vectors the index holds.
    pub dimension: u32,
    /// The properties a search may filter on first, most significant first (none for
    /// `#[vector_index(n)]` alone).
    pub filters: &'static [IndexedProperty],
}

/// A `#[sharded(n)]` counter (R-S1): its value lives in `shards` entities of kind `kind`, root
/// entities with scattered names derived from the owner's key.
#[derive(Debug, PartialEq, Eq)]
pub struct CounterSchema {
    /// The Rust field name.
    pub field: &'static str,
    /// The property name the field would have (the shards' kind is derived from it).
    pub name: &'static str,
    /// The number of shards.
    pub shards: u32,
    /// The kind of the shard entities: `{Kind}.{name}.shard`.
    pub kind: &'static str,
}

/// `#[replicated(n)]` (R-S2): `copies` read replicas of each entity, of kind `kind`, root
/// entities with scattered names derived from the entity's key.
#[derive(Debug, PartialEq, Eq)]
pub struct ReplicaSchema {
    /// The number of replicas (besides the entity itself).
    pub copies: u32,
    /// The kind of the replicas: `{Kind}.replica`.
    pub kind: &'static str,
    /// `#[replicated(n, unchecked)]`: reads go to a random replica alone, trusting every
    /// writer of the kind to write the replicas; otherwise reads go to the entity itself.
    pub unchecked: bool,
}

/// A `#[sharded_index(n)]` field (R-S3): the plain value is stored excluded from indexes, and
/// `companion` holds it behind a fixed-width shard prefix.
#[derive(Debug, PartialEq, Eq)]
pub struct ShardedIndexSchema {
    /// The Rust field name.
    pub field: &'static str,
    /// The stored name of the plain (excluded) value.
    pub name: &'static str,
    /// The stored name of the indexed companion property.
    pub companion: &'static str,
    /// The number of shards.
    pub shards: u32,
}

/// A Firestore field path: segments joined by `.`, each in backticks unless it is a simple
/// name (`[A-Za-z_][A-Za-z_0-9]*`).
pub fn field_path(segments: &[&str]) -> String {
    segments
        .iter()
        .map(|s| {
            let simple = s.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
                && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if simple {
                (*s).to_owned()
            } else {
                format!("`{}`", s.replace('\\', "\\\\"))
            }
        })
        .collect::<Vec<_>>()
        .join(".")
}

/// The `gcloud` command that creates a vector index of `dimension` numbers on `property` of
/// `kind`, pre-filtered on `filters` (`index.yaml` cannot hold one).
pub fn vector_index_command(
    kind: &str,
    property: &str,
    dimension: u64,
    filters: &[(&str, Direction)],
) -> String {
    let quoted = |text: &str| format!("'{}'", text.replace('\'', r"'\''"));
    let mut command = format!(
        "gcloud firestore indexes composite create --database='(default)' --collection-group={} \
         --query-scope=collection --api-scope=datastore-mode-api",
        quoted(kind)
    );
    for (name, direction) in filters {
        let order = match direction {
            Direction::Ascending => "ascending",
            Direction::Descending => "descending",
        };
        let config = format!("field-path={},order={order}", field_path(&[name]));
        command.push_str(&format!(" --field-config={}", quoted(&config)));
    }
    let config = format!(
        "field-path={},vector-config={{\"dimension\":\"{dimension}\",\"flat\":\"{{}}\"}}",
        field_path(&[property])
    );
    command.push_str(&format!(" --field-config={}", quoted(&config)));
    command
}

impl VectorIndexSchema {
    /// The `gcloud` command that creates this index on `kind`.
    pub fn gcloud_command(&self, kind: &str) -> String {
        let filters: Vec<(&str, Direction)> =
            self.filters.iter().map(|f| (f.name, f.direction)).collect();
        vector_index_command(kind, self.property, self.dimension.into(), &filters)
    }
}
