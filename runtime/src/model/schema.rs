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
    embedded: fn() -> Option<&'static Schema>,
}

impl PropertySchema {
    /// Describes a property; `embedded` returns the schema of an embedded entity type. Used by
    /// the derive.
    #[doc(hidden)]
    pub const fn new(
        name: &'static str,
        field: &'static str,
        excluded: bool,
        ttl: bool,
        aliases: &'static [&'static str],
        flatten: bool,
        embedded: fn() -> Option<&'static Schema>,
    ) -> PropertySchema {
        PropertySchema {
            name,
            field,
            excluded,
            ttl,
            aliases,
            flatten,
            embedded,
        }
    }

    /// The schema of an embedded entity, whose properties are indexed as `name.inner` (R-P2).
    pub fn embedded(&self) -> Option<&'static Schema> {
        (self.embedded)()
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
