//! The engine's reference evaluation of a query: every candidate entity's rows, filtered
//! and sorted in memory. It is how queries without an index plan run (outside strict index
//! mode, and projections of several properties), and it checks and completes every query
//! first (validation, implied orders, fingerprint) for the index plans too.

use std::cmp::Ordering;
use std::sync::Arc;

use datastore_entity_core::error::Error;
use datastore_entity_core::format::cursor::{self, ENGINE, write_filter};
use datastore_entity_core::format::keycode::index_value;
use datastore_entity_core::hash::fnv1a;
use datastore_entity_core::model::codec::Reader;
use datastore_entity_core::model::key::{KEY_PROPERTY, RawKey};
use datastore_entity_core::model::name::{NameRole, validate};
use datastore_entity_core::model::schema::Direction;
use datastore_entity_core::model::stored::Writer;
use datastore_entity_core::model::value::{Property, PropertyMap, Value};
use datastore_entity_core::model::walk::compare_values;
use datastore_entity_core::query::spec::{
    Operator, PropertyFilter, PropertyOrder, QueryBatch, QueryResult, QuerySpec, ResultShape,
};
use datastore_entity_core::query_rule::QueryRule;
use datastore_entity_core::rules::commit::check_ancestors;
use datastore_entity_core::rules::filter::{branches, check_query};

/// The plan tag of a scan's cursors.
pub(crate) const SCAN: u8 = 0;

/// Calls `visit` with each indexed value of `path` (dotted into embedded entities), array
/// elements flattened. Nothing when the entity lacks the property or it is excluded. The
/// path is read as the index entries name values: the whole path as one top-level name
/// (python-ndb's legacy layout of structured properties, a flattened property), and each
/// split at a dot, a name then the rest of the path inside its embedded entity.
pub(crate) fn visit_indexed<'p>(
    properties: &'p PropertyMap,
    path: &str,
    visit: &mut dyn FnMut(&'p Value),
) {
    fn descend<'p>(value: &'p Value, rest: Option<&str>, visit: &mut dyn FnMut(&'p Value)) {
        match (value, rest) {
            // The elements of an array are indexed; the properties of embedded entities inside
            // an array are not (Firestore in Datastore mode finds nothing through them).
            (Value::Array(values), None) => values.iter().for_each(|v| descend(v, None, visit)),
            (Value::Array(_), Some(_)) => {}
            (Value::Entity(inner), Some(rest)) => visit_indexed(inner, rest, visit),
            (value, None) => visit(value),
            (_, Some(_)) => {}
        }
    }
    let heads = path
        .match_indices('.')
        .map(|(at, _)| (&path[..at], Some(&path[at + 1..])))
        .chain([(path, None)]);
    for (head, rest) in heads {
        let Some(property) = properties.get(head) else {
            continue;
        };
        match (&property.value, rest) {
            _ if property.excluded => {}
            // An array whose elements differ: only those indexed.
            (Value::Array(values), None) if !property.annotations.is_none() => values
                .iter()
                .enumerate()
                .filter(|(i, _)| !property.element_excluded(*i))
                .for_each(|(_, v)| descend(v, None, visit)),
            (value, rest) => descend(value, rest, visit),
        }
    }
}

/// Filters compare in the index order, across types, as the service's index scans do: a
/// range filter on a number also returns the property's booleans and strings (which sort
/// after numbers), exactly as Google's emulator does.
pub(crate) fn matches(value: &Value, op: Operator, operand: &Value) -> bool {
    let ordering = compare_values(value, operand);
    match op {
        Operator::Equal => ordering == Ordering::Equal,
        Operator::LessThan => ordering == Ordering::Less,
        Operator::LessThanOrEqual => ordering != Ordering::Greater,
        Operator::GreaterThan => ordering == Ordering::Greater,
        Operator::GreaterThanOrEqual => ordering != Ordering::Less,
        Operator::NotEqual => ordering != Ordering::Equal,
        Operator::In | Operator::NotIn => {
            let listed = match operand {
                Value::Array(values) => values.iter().any(|v| compare_values(value, v).is_eq()),
                other => compare_values(value, other).is_eq(),
            };
            listed == (op == Operator::In)
        }
    }
}

/// A query, checked (validated, its orders completed) and ready to run.
#[derive(Clone)]
pub(crate) struct Prepared<'q> {
    pub(crate) query: &'q QuerySpec,
    /// The branches of the filter's disjunctive normal form: `=` and range filters only.
    branches: Arc<[Vec<PropertyFilter>]>,
    /// The branch this plan answers; `None`: all of them (a scan of an OR query).
    selected: Option<usize>,
    /// The orders applied: the given ones, then the range property if not among them.
    pub(crate) orders: Vec<PropertyOrder>,
    /// How many of `orders` the query gave (the others are implied).
    pub(crate) explicit_orders: usize,
    /// Ties after the last order go by key, in that order's direction (Firestore in
    /// Datastore mode; the legacy emulator always breaks them ascending).
    pub(crate) key_direction: Direction,
    /// One entity's rows (its projected array elements) go in the last order's direction,
    /// an order after the key included (Firestore in Datastore mode: ordered by `__key__`
    /// then `b` descending, the elements come in descending order).
    projected_direction: Direction,
    /// The properties whose index the query scans: the ordered ones, then the projected ones.
    /// An entity gives one row per combination of their distinct matching values, as an index
    /// scan does (Firestore in Datastore mode; the legacy emulator returned an entity once).
    scanned: Vec<String>,
    /// Whether rows need a property no order names (projected, or ordered after the key) or
    /// meet a range filter the orders do not lead with: no index plan serves them, the kind
    /// is evaluated entity by entity.
    pub(crate) needs_scan: bool,
    /// Where each order's value is in a row's scanned values.
    order_slots: Vec<usize>,
    /// Where each projected property's value is.
    projected_slots: Vec<usize>,
    /// Where the value of each order after the key's is, with its direction: such an order
    /// changes nothing, but an array there gives one row per element, as an index scan does.
    after_key_slots: Vec<(usize, Direction)>,
    pub(crate) fingerprint: u64,
}

/// One result row: an entity (or, for projections of arrays, one combination of elements).
struct Row<'s> {
    key: &'s RawKey,
    properties: &'s PropertyMap,
    sort: Vec<&'s Value>,
    projected: Vec<&'s Value>,
    /// The values of the orders after the key's (rows of one entity).
    after_key: Vec<&'s Value>,
}

impl Row<'_> {
    fn position(&self) -> Position {
        Position {
            at: Some((
                self.sort.iter().map(|v| (*v).clone()).collect(),
                self.key.clone(),
                self.projected.iter().map(|v| (*v).clone()).collect(),
            )),
        }
    }
}

/// Where a cursor points: after this row (`None`: before the first).
#[derive(Default)]
struct Position {
    at: Option<(Vec<Value>, RawKey, Vec<Value>)>,
}

impl<'q> Prepared<'q> {
    pub(crate) fn new(query: &'q QuerySpec) -> Result<Prepared<'q>, Error> {
        let invalid = |rule: QueryRule| Error::InvalidQuery {
            kind: query.kind.clone(),
            rule,
        };
        if !query.is_kindless() {
            validate(NameRole::Kind, &query.kind)?;
        }
        if let Some(ancestor) = &query.ancestor {
            if !ancestor.is_complete() || check_ancestors(ancestor).is_err() {
                return Err(invalid(QueryRule::IncompleteAncestor));
            }
            if ancestor.partition() != Some(&query.partition) {
                return Err(invalid(QueryRule::AncestorOfAnotherNamespace));
            }
        }
        check_query(query).map_err(&invalid)?;
        let leaves: Vec<&PropertyFilter> = query.filters.iter().flat_map(|f| f.leaves()).collect();
        let names = leaves
            .iter()
            .map(|f| &f.property)
            .chain(query.orders.iter().map(|o| &o.property));
        let projected: &[String] = match &query.shape {
            ResultShape::Projection(names) => names,
            _ => &[],
        };
        for name in names.chain(projected).filter(|n| *n != KEY_PROPERTY) {
            for segment in name.split('.') {
                validate(NameRole::Property, segment)?;
            }
        }
        // Firestore in Datastore mode orders the inequality properties not ordered explicitly
        // after the explicit orders, by name, in the direction of the last one. (The legacy
        // emulator took one inequality property only, and refused a first order on another.)
        let mut inequalities: Vec<&str> = leaves
            .iter()
            .filter(|f| f.op.is_inequality() && f.property != KEY_PROPERTY)
            .map(|f| f.property.as_str())
            .collect();
        inequalities.sort();
        inequalities.dedup();
        let has_range = !inequalities.is_empty();
        let mut orders = query.orders.clone();
        // An order on the key orders every result: the orders after it (Firestore in
        // Datastore mode accepts them) change nothing but still need the property, as an
        // index holding them would; and the implied orders below, which would come after the
        // key, change nothing either.
        let mut key_order = None;
        let mut after_key = Vec::new();
        if let Some(at) = orders.iter().position(|o| o.property == KEY_PROPERTY) {
            after_key = orders.split_off(at + 1);
            key_order = orders.pop().map(|o| o.direction);
        }
        let explicit_orders = orders.len();
        if let Some(direction) = key_order {
            // The inequality properties no order names are ordered after the key: they
            // change no order, but an entity needs them, as in the index the service reads
            // (even in an `OR`'s other branches), in the last order's direction (as one
            // entity's rows come in the Firestore emulator).
            let direction = after_key.last().map_or(direction, |o| o.direction);
            for property in &inequalities {
                let named = |o: &PropertyOrder| o.property == *property;
                if !orders.iter().any(named) && !after_key.iter().any(named) {
                    after_key.push(PropertyOrder {
                        property: (*property).to_owned(),
                        direction,
                    });
                }
            }
        } else {
            let direction = orders.last().map_or(Direction::Ascending, |o| o.direction);
            for property in inequalities {
                if !orders.iter().any(|o| o.property == property) {
                    orders.push(PropertyOrder {
                        property: property.to_owned(),
                        direction,
                    });
                }
            }
            // An inequality on the key orders by the key after them (as the service orders
            // every inequality property), which orders every result: a projection's rows of
            // one entity then come in the order of its values.
            let on_key = leaves
                .iter()
                .any(|f| f.op.is_inequality() && f.property == KEY_PROPERTY);
            if on_key {
                key_order = Some(direction);
            }
            // A projection reads an index holding every projected property: after the
            // orders, the projected properties not ordered, taken by name, in the direction
            // of the last order (so without an order, results come in the order of the
            // projected values), as in Firestore in Datastore mode.
            let mut by_name: Vec<&String> = projected
                .iter()
                .filter(|p| !orders.iter().any(|o| o.property == **p))
                .collect();
            by_name.sort();
            by_name.dedup();
            if on_key {
                by_name.clear();
            }
            let direction = orders.last().map_or(Direction::Ascending, |o| o.direction);
            orders.extend(by_name.into_iter().map(|p| PropertyOrder {
                property: p.clone(),
                direction,
            }));
        }
        if projected.is_empty() && matches!(query.shape, ResultShape::Projection(_)) {
            return Err(invalid(QueryRule::EmptyProjection));
        }
        if let Some(p) = projected.iter().find(|p| {
            leaves
                .iter()
                .any(|f| matches!(f.op, Operator::Equal | Operator::In) && &f.property == *p)
        }) {
            return Err(invalid(QueryRule::ProjectedAndFixed {
                property: p.clone(),
            }));
        }
        let mut w = Writer::default();
        // A cursor of one namespace's query does not resume another's.
        w.partition(Some(&query.partition));
        w.bytes.extend_from_slice(query.kind.as_bytes());
        if let Some(a) = &query.ancestor {
            w.key(a);
        }
        for f in &query.filters {
            write_filter(&mut w, f);
        }
        for o in &orders {
            w.bytes.extend_from_slice(o.property.as_bytes());
            w.u8(o.direction as u8);
        }
        w.u8(key_order.map_or(0, |d| d as u8 + 1));
        for o in &after_key {
            w.bytes.extend_from_slice(o.property.as_bytes());
        }
        // Full and keys-only queries walk the same rows, so they share cursors; a projection
        // walks one row per combination of projected array elements, so it does not.
        w.u8(u8::from(matches!(query.shape, ResultShape::Projection(_))));
        for p in projected {
            w.bytes.extend_from_slice(p.as_bytes());
        }
        let mut scanned: Vec<String> = Vec::new();
        let mut slot = |name: &String| match scanned.iter().position(|s| s == name) {
            Some(i) => i,
            None => {
                scanned.push(name.clone());
                scanned.len() - 1
            }
        };
        let order_slots = orders.iter().map(|o| slot(&o.property)).collect();
        let projected_slots = projected.iter().map(&mut slot).collect();
        let after_key_slots = after_key
            .iter()
            .map(|o| (slot(&o.property), o.direction))
            .collect();
        // Rows that need a property no order names, or a range filter the orders do not
        // lead with, are not one index range in order: no index plan serves them.
        let needs_scan = scanned.len() > orders.len() || (key_order.is_some() && has_range);
        let branches = branches(&query.filters);
        let selected = (branches.len() == 1).then_some(0);
        Ok(Prepared {
            query,
            branches: branches.into(),
            selected,
            key_direction: key_order
                .or(orders.last().map(|o| o.direction))
                .unwrap_or(Direction::Ascending),
            projected_direction: after_key
                .last()
                .map(|o| o.direction)
                .or(key_order)
                .or(orders.last().map(|o| o.direction))
                .unwrap_or(Direction::Ascending),
            orders,
            explicit_orders,
            scanned,
            needs_scan,
            order_slots,
            projected_slots,
            after_key_slots,
            fingerprint: fnv1a(&w.bytes),
        })
    }

    /// How many branches the filter has.
    pub(crate) fn branch_count(&self) -> usize {
        self.branches.len()
    }

    /// This query, answering branch `i` of its filter only.
    pub(crate) fn branch(&self, i: usize) -> Prepared<'q> {
        Prepared {
            selected: Some(i),
            ..self.clone()
        }
    }

    /// The filters of the selected branch (ANDed): `=` and ranges.
    pub(crate) fn filters(&self) -> &[PropertyFilter] {
        &self.branches[self.selected.unwrap_or(0)]
    }

    /// The distinct indexed values of `property` that pass every range filter of `filters` on
    /// it. (An equality filter selects the entity, not the values: an entity whose array holds
    /// the value has an index entry for each of its values, as in Firestore in Datastore mode.)
    fn candidates<'s>(
        &self,
        filters: &[PropertyFilter],
        properties: &'s PropertyMap,
        property: &str,
    ) -> Vec<&'s Value> {
        let mut values = Vec::new();
        visit_indexed(properties, property, &mut |v| {
            if filters
                .iter()
                .filter(|f| f.property == property && f.op.is_range())
                .all(|f| matches(v, f.op, &f.value))
            {
                values.push(v);
            }
        });
        values.sort_by(|a, b| compare_values(a, b));
        values.dedup_by(|a, b| compare_values(a, b) == Ordering::Equal);
        values
    }

    /// The rows of one entity, none if it does not match: the rows of each branch it
    /// matches, each row once.
    fn rows<'s>(&self, key: &'s RawKey, properties: &'s PropertyMap, rows: &mut Vec<Row<'s>>) {
        let first = rows.len();
        let branches = match self.selected {
            Some(i) => &self.branches[i..=i],
            None => &self.branches[..],
        };
        let mut found = Vec::new();
        for filters in branches {
            self.branch_rows(filters, key, properties, &mut found);
            for row in found.drain(..) {
                let seen = rows[first..]
                    .iter()
                    .any(|r| self.compare_rows(r, &row) == Ordering::Equal);
                if !seen {
                    rows.push(row);
                }
            }
        }
    }

    /// The rows of one entity for one branch (filters ANDed), none if it does not match.
    fn branch_rows<'s>(
        &self,
        filters: &[PropertyFilter],
        key: &'s RawKey,
        properties: &'s PropertyMap,
        rows: &mut Vec<Row<'s>>,
    ) {
        // Every filter must hold for some indexed value. Equality filters on an array may be
        // met by different elements; the range filters on one property by one element, which
        // also meets each equality filter on that property (Firestore in Datastore mode reads
        // them from one range of the property's index).
        for filter in filters {
            if filter.property == KEY_PROPERTY {
                if !matches(&Value::Key(key.clone()), filter.op, &filter.value) {
                    return;
                }
                continue;
            }
            let mut found = false;
            visit_indexed(properties, &filter.property, &mut |v| {
                found = found
                    || ((filter.op != Operator::Equal || matches(v, filter.op, &filter.value))
                        && filters
                            .iter()
                            .filter(|f| f.property == filter.property && f.op.is_range())
                            .all(|f| matches(v, f.op, &f.value)));
            });
            if !found {
                return;
            }
        }
        // One row per combination of the scanned properties' matching values (an entity
        // without one of them has no index entry there, so no row).
        let mut combinations: Vec<Vec<&'s Value>> = vec![Vec::new()];
        for property in &self.scanned {
            let values = self.candidates(filters, properties, property);
            if values.is_empty() {
                return;
            }
            combinations = combinations
                .into_iter()
                .flat_map(|prefix| {
                    values.iter().map(move |v| {
                        let mut c = prefix.clone();
                        c.push(*v);
                        c
                    })
                })
                .collect();
        }
        for values in combinations {
            rows.push(Row {
                key,
                properties,
                sort: self.order_slots.iter().map(|&i| values[i]).collect(),
                projected: self.projected_slots.iter().map(|&i| values[i]).collect(),
                after_key: self
                    .after_key_slots
                    .iter()
                    .map(|&(i, _)| values[i])
                    .collect(),
            });
        }
    }

    /// The order of rows: sort values in their directions, then key, then projected values.
    fn compare(&self, row: &Row<'_>, position: &Position) -> Ordering {
        match &position.at {
            None => Ordering::Greater,
            Some((sort, key, projected)) => self.compare_parts(
                &row.sort,
                row.key,
                &row.projected,
                sort.iter(),
                key,
                projected.iter(),
            ),
        }
    }

    fn compare_rows(&self, a: &Row<'_>, b: &Row<'_>) -> Ordering {
        let directed = |o: Ordering, direction: Direction| match direction {
            Direction::Ascending => o,
            Direction::Descending => o.reverse(),
        };
        let sort = a
            .sort
            .iter()
            .zip(&b.sort)
            .zip(&self.orders)
            .map(|((x, y), order)| directed(compare_values(x, y), order.direction))
            .find(|o| o.is_ne());
        // Rows of one entity: by the orders after the key, then the projected values in the
        // key's direction. (No cursor resumes among rows ordered after the key:
        // `check_query` refuses it, as the service does.)
        sort.unwrap_or_else(|| {
            directed(a.key.cmp(b.key), self.key_direction)
                .then_with(|| {
                    a.after_key
                        .iter()
                        .zip(&b.after_key)
                        .zip(&self.after_key_slots)
                        .map(|((x, y), (_, direction))| directed(compare_values(x, y), *direction))
                        .find(|o| o.is_ne())
                        .unwrap_or(Ordering::Equal)
                })
                .then_with(|| {
                    let projected = a
                        .projected
                        .iter()
                        .zip(&b.projected)
                        .map(|(x, y)| compare_values(x, y))
                        .find(|o| o.is_ne())
                        .unwrap_or(Ordering::Equal);
                    directed(projected, self.projected_direction)
                })
        })
    }

    fn compare_parts<'a>(
        &self,
        sort: &[&Value],
        key: &RawKey,
        projected: &[&Value],
        other_sort: impl Iterator<Item = &'a Value>,
        other_key: &RawKey,
        other_projected: impl Iterator<Item = &'a Value>,
    ) -> Ordering {
        for ((a, b), order) in sort.iter().zip(other_sort).zip(&self.orders) {
            let o = compare_values(a, b);
            let o = match order.direction {
                Direction::Ascending => o,
                Direction::Descending => o.reverse(),
            };
            if o.is_ne() {
                return o;
            }
        }
        // The key, then the projected values (rows of one entity), each in its direction.
        let directed = |o: Ordering, direction: Direction| match direction {
            Direction::Ascending => o,
            Direction::Descending => o.reverse(),
        };
        directed(key.cmp(other_key), self.key_direction).then_with(|| {
            let projected = projected
                .iter()
                .zip(other_projected)
                .map(|(a, b)| compare_values(a, b))
                .find(|o| o.is_ne())
                .unwrap_or(Ordering::Equal);
            directed(projected, self.projected_direction)
        })
    }

    /// A cursor of this query: `tag` says which plan made `position`.
    pub(crate) fn encode_cursor(&self, tag: u8, position: &[u8]) -> Vec<u8> {
        cursor::seal(ENGINE, self.fingerprint, &[&[tag], position].concat())
    }

    /// The plan tag and position of a cursor of this query.
    pub(crate) fn decode_cursor<'b>(&self, bytes: &'b [u8]) -> Result<(u8, &'b [u8]), Error> {
        let body = cursor::open(ENGINE, self.fingerprint, bytes, "this engine")?;
        match body.split_first() {
            Some((tag, position)) => Ok((*tag, position)),
            None => Err(Error::InvalidCursor {
                reason: "it is corrupt".to_owned(),
            }),
        }
    }

    /// A scan's position, as cursor bytes.
    fn encode_position(position: &Position) -> Vec<u8> {
        let mut w = Writer::default();
        match &position.at {
            None => w.u8(0),
            Some((sort, key, projected)) => {
                w.u8(1);
                w.value(&Value::Array(sort.clone()));
                w.key(key);
                w.value(&Value::Array(projected.clone()));
            }
        }
        w.bytes
    }

    fn decode_position(&self, bytes: &[u8]) -> Result<Position, Error> {
        let invalid = || Error::InvalidCursor {
            reason: "it is corrupt".to_owned(),
        };
        let mut r = Reader::new(bytes);
        let position = match r.u8().map_err(|_| invalid())? {
            0 => Position::default(),
            1 => {
                let sort = r.value().map_err(|_| invalid())?;
                let key = r.key().map_err(|_| invalid())?;
                let projected = r.value().map_err(|_| invalid())?;
                match (sort.into_array(), projected.into_array()) {
                    (Some(sort), Some(projected)) if sort.len() == self.orders.len() => Position {
                        at: Some((sort, key, projected)),
                    },
                    _ => return Err(invalid()),
                }
            }
            _ => return Err(invalid()),
        };
        if !r.is_empty() {
            return Err(invalid());
        }
        Ok(position)
    }

    /// The query's answer, from all the candidates (the entities of its kind, under its
    /// ancestor): every row, sorted, then the page between the cursors.
    pub(crate) fn scan(
        &self,
        candidates: &[(RawKey, PropertyMap)],
        start: Option<&[u8]>,
        end: Option<&[u8]>,
    ) -> Result<QueryBatch, Error> {
        let start = start.map(|b| self.decode_position(b)).transpose()?;
        let end = end.map(|b| self.decode_position(b)).transpose()?;
        let mut rows: Vec<Row<'_>> = Vec::new();
        for (key, properties) in candidates {
            self.rows(key, properties, &mut rows);
        }
        rows.retain(|row| {
            start
                .as_ref()
                .is_none_or(|s| self.compare(row, s) == Ordering::Greater)
                && end
                    .as_ref()
                    .is_none_or(|e| self.compare(row, e) != Ordering::Greater)
        });
        let limit = self.query.limit.unwrap_or(usize::MAX);
        let more_results = rows.len() > limit;
        if more_results {
            // Only the first `limit` rows are needed: select them, then sort only those.
            rows.select_nth_unstable_by(limit, |a, b| self.compare_rows(a, b));
            rows.truncate(limit);
        }
        rows.sort_by(|a, b| self.compare_rows(a, b));
        let cursor =
            |position: &Position| self.encode_cursor(SCAN, &Self::encode_position(position));
        let end_cursor = match rows.last() {
            Some(last) => cursor(&last.position()),
            None => match (&start, self.query.start_cursor.as_ref()) {
                (Some(_), Some(bytes)) => bytes.clone(),
                _ => cursor(&Position::default()),
            },
        };
        let shape = &self.query.shape;
        let results = rows
            .into_iter()
            .map(|row| QueryResult {
                cursor: cursor(&row.position()),
                key: row.key.clone(),
                properties: match shape {
                    ResultShape::Full => row.properties.clone(),
                    ResultShape::KeysOnly => PropertyMap::new(),
                    ResultShape::Projection(names) => names
                        .iter()
                        .cloned()
                        .zip(
                            row.projected
                                .iter()
                                .map(|v| Property::projected(index_value(v))),
                        )
                        .collect(),
                },
                stamp: None,
            })
            .collect();
        Ok(QueryBatch {
            results,
            end_cursor,
            more_results,
        })
    }
}
