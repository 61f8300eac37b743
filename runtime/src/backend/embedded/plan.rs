//! The planner: how a query reads the tables. It picks what the service would: the kinds
//! table, one property's built-in index, a zigzag merge of equality filters' indexes, or a
//! declared composite index; in strict index mode a query that needs an undeclared composite
//! index is refused with the index to add. The executor (`exec.rs`) reads what the plan says;
//! `explain.rs` says it in words.

use super::index::Composite;
use super::scan::{Prepared, SCAN};
use datastore_entity_core::error::Error;
use datastore_entity_core::model::key::KEY_PROPERTY;
use datastore_entity_core::model::schema::Direction;
use datastore_entity_core::model::value::Value;
use datastore_entity_core::query::spec::{Operator, PropertyOrder, ResultShape};

/// How a query reads the tables.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Access {
    /// Every entity of the kind (under the ancestor), in key order.
    Kind,
    /// Equality filters (and an ancestor): their properties' indexes merged (a zigzag merge
    /// join), in key order.
    Zigzag,
    /// One property's built-in index, forwards or backwards.
    Property { name: String, reverse: bool },
    /// A declared composite index, forwards or backwards.
    Composite { index: Composite, reverse: bool },
    /// No index serves the query (outside strict index mode): every entity of the kind is
    /// evaluated.
    Scan,
}

const KIND: u8 = 1;
const ZIGZAG: u8 = 2;
const PROPERTY: u8 = 3;
const COMPOSITE: u8 = 4;

impl Access {
    /// The tag of this plan's cursors: a cursor resumes only the plan that made it.
    pub(super) fn tag(&self) -> u8 {
        match self {
            Access::Kind => KIND,
            Access::Zigzag => ZIGZAG,
            Access::Property { .. } => PROPERTY,
            Access::Composite { .. } => COMPOSITE,
            Access::Scan => SCAN,
        }
    }
}

/// The distinct properties of the query's equality filters, in the order they first appear.
pub(super) fn equality_properties<'p>(prepared: &'p Prepared<'_>) -> Vec<&'p str> {
    let mut names: Vec<&str> = Vec::new();
    for f in prepared
        .filters()
        .iter()
        .filter(|f| f.op == Operator::Equal)
    {
        if !names.contains(&f.property.as_str()) {
            names.push(&f.property);
        }
    }
    names
}

pub(super) fn projected<'q>(prepared: &Prepared<'q>) -> &'q [String] {
    match &prepared.query.shape {
        ResultShape::Projection(names) => names,
        _ => &[],
    }
}

/// Picks how `prepared` reads the tables, given the kind's declared composite indexes.
pub(crate) fn choose(
    prepared: &Prepared<'_>,
    composites: &[Composite],
    strict: bool,
) -> Result<Access, Error> {
    let query = prepared.query;
    let orders = &prepared.orders;
    if prepared.needs_scan {
        return Ok(Access::Scan);
    }
    // A query without a kind reads the entities table in key order, between the keys its
    // filters name; a projection evaluates its entities one by one (no index lists every
    // kind's values of a property).
    if query.is_kindless() {
        return Ok(match projected(prepared).is_empty() && orders.is_empty() {
            true => Access::Kind,
            false => Access::Scan,
        });
    }
    // Filters on the key alone read the kinds table between the keys they name, in the key
    // order asked; beside other filters or orders, the kind is evaluated entity by entity.
    let on_key = prepared
        .filters()
        .iter()
        .any(|f| f.property == KEY_PROPERTY);
    if on_key || (orders.is_empty() && prepared.key_direction == Direction::Descending) {
        let only_keys = prepared
            .filters()
            .iter()
            .all(|f| f.property == KEY_PROPERTY && matches!(f.value, Value::Key(_)));
        return Ok(match orders.is_empty() && only_keys {
            true => Access::Kind,
            false => Access::Scan,
        });
    }
    // Without orders there are no range filters and no projection (both imply orders).
    if orders.is_empty() {
        return Ok(match prepared.filters().is_empty() {
            true => Access::Kind,
            false => Access::Zigzag,
        });
    }
    let projected = projected(prepared);
    let equalities = equality_properties(prepared);
    // An equality filter on an ordered property selects the entity; its rows are then one
    // per value of the property (every element of an array), which no index range holds:
    // the kind is evaluated entity by entity.
    if orders
        .iter()
        .any(|o| equalities.contains(&o.property.as_str()))
    {
        return Ok(Access::Scan);
    }
    // An index's ties are in its last column's direction (either way it is read): ties
    // asked the other way are sorted entity by entity.
    if orders
        .last()
        .is_some_and(|o| o.direction != prepared.key_direction)
    {
        return Ok(Access::Scan);
    }
    if let ([order], None) = (orders.as_slice(), &query.ancestor) {
        let p = &order.property;
        if prepared.filters().iter().all(|f| &f.property == p) && projected.iter().all(|q| q == p) {
            return Ok(Access::Property {
                name: p.clone(),
                reverse: order.direction == Direction::Descending,
            });
        }
    }
    let sort: Vec<&PropertyOrder> = orders.iter().collect();
    if sort.is_empty() && projected.is_empty() && prepared.key_direction == Direction::Ascending {
        return Ok(Access::Zigzag);
    }
    let serving = composites.iter().find_map(|index| {
        serves(index, prepared, &equalities, &sort, projected).map(|reverse| Access::Composite {
            index: index.clone(),
            reverse,
        })
    });
    match serving {
        Some(access) => Ok(access),
        None if !strict => Ok(Access::Scan),
        None => {
            let index = needed(prepared);
            Err(Error::MissingIndex {
                message: format!(
                    "no matching index found for this query of kind `{}` (the embedded engine \
                     refuses, in strict index mode, what the service would refuse)",
                    query.kind
                ),
                index_yaml: format!("indexes:\n{}", index.yaml()),
            })
        }
    }
}

/// The composite index the service reads for `prepared` (one branch) where no built-in one
/// serves it: its equality properties ascending, then its orders (those it implies
/// included). What strict index mode asks to declare, and what Query Explain names where the
/// engine evaluates the kind instead.
pub(super) fn needed(prepared: &Prepared<'_>) -> Composite {
    let query = prepared.query;
    let columns = equality_properties(prepared)
        .iter()
        .map(|p| ((*p).to_owned(), Direction::Ascending))
        .chain(
            prepared
                .orders
                .iter()
                .map(|o| (o.property.clone(), o.direction)),
        )
        .collect();
    Composite::new(&query.kind, query.ancestor.is_some(), columns)
}

/// Whether `index` serves the query, and if so whether it is scanned backwards: the equality
/// properties first (in any order), then exactly the orders, in their directions (or all
/// reversed, when no order was given explicitly); ties by key in the last order's direction;
/// every projected property a column.
fn serves(
    index: &Composite,
    prepared: &Prepared<'_>,
    equalities: &[&str],
    sort: &[&PropertyOrder],
    projected: &[String],
) -> Option<bool> {
    let query = prepared.query;
    if index.kind != query.kind
        || index.ancestor != query.ancestor.is_some()
        || index.columns.len() != equalities.len() + sort.len()
    {
        return None;
    }
    let (head, rest) = index.columns.split_at(equalities.len());
    if !head.iter().all(|(n, _)| equalities.contains(&n.as_str()))
        || !rest.iter().zip(sort).all(|((n, _), o)| *n == o.property)
        || !projected.iter().all(|p| rest.iter().any(|(n, _)| n == p))
    {
        return None;
    }
    let forward = rest.iter().zip(sort).all(|((_, d), o)| *d == o.direction);
    let backward =
        prepared.explicit_orders == 0 && rest.iter().zip(sort).all(|((_, d), o)| *d != o.direction);
    let reverse = match (forward, backward) {
        (true, _) => false,
        (false, true) => true,
        (false, false) => return None,
    };
    let ties = match index.path_inverted() != reverse {
        true => Direction::Descending,
        false => Direction::Ascending,
    };
    (ties == prepared.key_direction).then_some(reverse)
}
