//! The service's rules for a query's filter tree, checked before anything is sent, and the
//! tree's disjunctive normal form: the branches the service (and the embedded engine) answer
//! one by one and merge.
//!
//! The rules are Firestore in Datastore mode's, as its emulator enforces them (the conformance
//! suite checks each there): IN takes 1 to 30 values and NOT_IN 1 to 10; a query holds one
//! NOT_EQUAL or NOT_IN at most; NOT_IN does not mix with IN or OR; the normal form has at most
//! 30 branches (IN values counted); AND and OR take at least one filter. [`check_query`] adds
//! the rules on the rest of a query: a filter on `__key__` compares with complete keys of the
//! query's own namespace, no operand is an incomplete key, and no property is ordered or
//! projected twice.

use std::cmp::Ordering;

use crate::model::key::KEY_PROPERTY;
use crate::model::schema::Direction;
use crate::model::value::Value;
use crate::model::walk::compare_values;
use crate::query::spec::{
    FilterNode, FindNearest, Operator, PropertyFilter, QuerySpec, ResultShape,
};
use crate::query_rule::QueryRule;

/// The most values an IN filter takes.
pub const MAX_IN_VALUES: usize = 30;
/// The most values a NOT_IN filter takes.
pub const MAX_NOT_IN_VALUES: usize = 10;
/// The most branches a filter's disjunctive normal form may have.
pub const MAX_DISJUNCTIONS: usize = 30;

/// Checks `filters` (ANDed) against the service's rules; the reason of a refusal.
pub fn check(filters: &[FilterNode]) -> Result<(), QueryRule> {
    let mut not_equal: Option<&PropertyFilter> = None;
    let mut has_in_or_or = false;
    let mut not_in = None;
    for filter in filters {
        check_node(filter, &mut has_in_or_or)?;
        for leaf in filter.leaves() {
            check_operand(leaf)?;
            match leaf.op {
                Operator::NotEqual | Operator::NotIn => {
                    if let Some(first) = not_equal {
                        return Err(QueryRule::OneNotEqual {
                            first: format!("{} {} ..", first.property, first.op.symbol()),
                            second: format!("{} {} ..", leaf.property, leaf.op.symbol()),
                        });
                    }
                    not_equal = Some(leaf);
                    if leaf.op == Operator::NotIn {
                        not_in = Some(leaf);
                    }
                }
                Operator::In => has_in_or_or = true,
                _ => {}
            }
        }
    }
    if let (Some(not_in), true) = (not_in, has_in_or_or) {
        return Err(QueryRule::NotInWithInOrOr {
            property: not_in.property.clone(),
        });
    }
    let branches = disjunctions(filters);
    if branches > MAX_DISJUNCTIONS {
        return Err(QueryRule::TooManyBranches {
            branches,
            max: MAX_DISJUNCTIONS,
        });
    }
    Ok(())
}

/// Checks a whole query against the service's rules (its filters by [`check`]); the reason
/// of a refusal.
pub fn check_query(query: &QuerySpec) -> Result<(), QueryRule> {
    check(&query.filters)?;
    if let Some(nearest) = &query.find_nearest {
        check_nearest(nearest)?;
    }
    if query.is_kindless() {
        check_kindless(query)?;
    }
    for leaf in query.filters.iter().flat_map(FilterNode::leaves) {
        let operands = match &leaf.value {
            Value::Array(values) if matches!(leaf.op, Operator::In | Operator::NotIn) => values,
            value => std::slice::from_ref(value),
        };
        for operand in operands {
            check_key_operand(query, leaf, operand)?;
        }
    }
    for (i, order) in query.orders.iter().enumerate() {
        if query.orders[..i]
            .iter()
            .any(|o| o.property == order.property)
        {
            return Err(QueryRule::OrderedTwice {
                property: order.property.clone(),
            });
        }
    }
    // An order after the key's orders nothing (keys are unique): the Firestore emulator
    // answers such a query, but refuses to resume it from a cursor. An inequality filter on a
    // property not ordered before the key orders by it after the key, implicitly; one on the
    // key orders by the key after the other inequality properties.
    let inequalities = || {
        query
            .filters
            .iter()
            .flat_map(FilterNode::leaves)
            .filter(|f| f.op.is_inequality())
    };
    let explicit = query.orders.iter().position(|o| o.property == KEY_PROPERTY);
    let implied = inequalities().any(|f| f.property == KEY_PROPERTY);
    let key_at = explicit.or(implied.then_some(query.orders.len()));
    if let Some(at) = key_at
        && (query.start_cursor.is_some() || query.end_cursor.is_some())
    {
        let before = &query.orders[..at];
        let projected = match &query.shape {
            ResultShape::Projection(names) => names.as_slice(),
            _ => &[],
        };
        // Before an implied key order: the other inequality properties too.
        let ordered = |p: &str| {
            before.iter().any(|o| o.property == p)
                || (explicit.is_none() && inequalities().any(|f| f.property == p))
        };
        let after = query
            .orders
            .get(at + 1)
            .map(|o| o.property.as_str())
            .or_else(|| {
                inequalities()
                    .filter(|f| f.property != KEY_PROPERTY)
                    .map(|f| f.property.as_str())
                    .chain(projected.iter().map(String::as_str))
                    .find(|p| *p != KEY_PROPERTY && !ordered(p))
            });
        if let Some(after) = after {
            return Err(QueryRule::OrderAfterKey {
                property: after.to_owned(),
            });
        }
    }
    if let ResultShape::Projection(names) = &query.shape
        && let Some((_, name)) = names
            .iter()
            .enumerate()
            .find(|(i, name)| *name != KEY_PROPERTY && names[..*i].contains(name))
    {
        return Err(QueryRule::ProjectedTwice {
            property: name.clone(),
        });
    }
    Ok(())
}

/// A nearest-neighbour search returns 1 to [`FindNearest::MAX_LIMIT`] results, within a
/// threshold that is a finite number, as the service takes it.
pub fn check_nearest(nearest: &FindNearest) -> Result<(), QueryRule> {
    if !(1..=FindNearest::MAX_LIMIT).contains(&nearest.limit) {
        return Err(QueryRule::NearestLimit {
            limit: nearest.limit,
            max: FindNearest::MAX_LIMIT,
        });
    }
    match nearest.threshold {
        Some(threshold) if !threshold.is_finite() => Err(QueryRule::NearestThreshold { threshold }),
        _ => Ok(()),
    }
}

/// A query without a kind reads the entities in key order: it filters on `__key__` (and an
/// ancestor) only and orders by the key ascending at most, as the service takes it.
fn check_kindless(query: &QuerySpec) -> Result<(), QueryRule> {
    if let Some(leaf) = query
        .filters
        .iter()
        .flat_map(FilterNode::leaves)
        .find(|f| f.property != KEY_PROPERTY)
    {
        return Err(QueryRule::KindlessFilter {
            property: leaf.property.clone(),
        });
    }
    if let Some(order) = query
        .orders
        .iter()
        .find(|o| o.property != KEY_PROPERTY || o.direction != Direction::Ascending)
    {
        return Err(QueryRule::KindlessOrder {
            property: order.property.clone(),
            direction: match order.direction {
                Direction::Ascending => "ascending",
                Direction::Descending => "descending",
            },
        });
    }
    Ok(())
}

/// A filter's operand that is a key must be complete; a filter on `__key__` compares with
/// keys only, of the query's own namespace (a key without a partition takes the query's).
fn check_key_operand(
    query: &QuerySpec,
    leaf: &PropertyFilter,
    operand: &Value,
) -> Result<(), QueryRule> {
    let on_key = leaf.property == KEY_PROPERTY;
    match operand {
        Value::Key(key) if !key.is_complete() => Err(QueryRule::IncompleteKeyOperand {
            property: leaf.property.clone(),
            kind: key.kind().to_owned(),
        }),
        Value::Key(key) if on_key => match key.partition() {
            Some(p)
                if p.namespace != query.partition.namespace
                    || p.database_id != query.partition.database_id =>
            {
                Err(QueryRule::KeyOfAnotherPartition {
                    key: p.to_string(),
                    query: query.partition.to_string(),
                })
            }
            _ => Ok(()),
        },
        Value::Key(_) => Ok(()),
        other if on_key => Err(QueryRule::KeyComparedWith {
            type_name: other.type_name(),
        }),
        _ => Ok(()),
    }
}

fn check_node(node: &FilterNode, has_or: &mut bool) -> Result<(), QueryRule> {
    let (nodes, name) = match node {
        FilterNode::Property(_) => return Ok(()),
        FilterNode::And(nodes) => (nodes, "an AND"),
        FilterNode::Or(nodes) => {
            *has_or = true;
            (nodes, "an OR")
        }
    };
    if nodes.is_empty() {
        return Err(QueryRule::EmptyCombination { combinator: name });
    }
    nodes.iter().try_for_each(|n| check_node(n, has_or))
}

fn check_operand(leaf: &PropertyFilter) -> Result<(), QueryRule> {
    let (max, name) = match leaf.op {
        Operator::In => (MAX_IN_VALUES, "`is_in`"),
        Operator::NotIn => (MAX_NOT_IN_VALUES, "`not_in`"),
        _ => {
            return match &leaf.value {
                Value::Array(_) | Value::Entity(_) => Err(QueryRule::ArrayOperand {
                    property: leaf.property.clone(),
                }),
                _ => Ok(()),
            };
        }
    };
    let Value::Array(values) = &leaf.value else {
        return Err(QueryRule::NoValueList {
            operator: name,
            property: leaf.property.clone(),
        });
    };
    if values.is_empty() || values.len() > max {
        return Err(QueryRule::ValueCount {
            operator: name,
            property: leaf.property.clone(),
            count: values.len(),
            max,
        });
    }
    if values
        .iter()
        .any(|v| matches!(v, Value::Array(_) | Value::Entity(_)))
    {
        return Err(QueryRule::ListedArray {
            operator: name,
            property: leaf.property.clone(),
        });
    }
    Ok(())
}

/// How many branches the service counts in the normal form of `filters` (ANDed): each IN
/// value is one; a NOT_EQUAL or NOT_IN is one.
fn disjunctions(filters: &[FilterNode]) -> usize {
    fn count(node: &FilterNode) -> usize {
        match node {
            FilterNode::Property(f) if f.op == Operator::In => match &f.value {
                Value::Array(values) => values.len().max(1),
                _ => 1,
            },
            FilterNode::Property(_) => 1,
            FilterNode::And(nodes) => nodes
                .iter()
                .map(count)
                .fold(1usize, |a, b| a.saturating_mul(b)),
            FilterNode::Or(nodes) => nodes.iter().map(count).fold(0usize, usize::saturating_add),
        }
    }
    filters
        .iter()
        .map(count)
        .fold(1usize, |a, b| a.saturating_mul(b))
}

/// The disjunctive normal form of `filters` (ANDed), with only `=` and range filters: an IN
/// is one branch per value, a `!=` the two ranges around its value, a NOT_IN the ranges
/// between its values. An entity row matches the tree when it matches a branch. Call after
/// [`check`], which bounds the number of branches.
pub fn branches(filters: &[FilterNode]) -> Vec<Vec<PropertyFilter>> {
    let mut result = vec![Vec::new()];
    for filter in filters {
        result = product(result, expand(filter));
    }
    result
}

fn product(
    left: Vec<Vec<PropertyFilter>>,
    right: Vec<Vec<PropertyFilter>>,
) -> Vec<Vec<PropertyFilter>> {
    let mut out = Vec::with_capacity(left.len() * right.len());
    for a in &left {
        for b in &right {
            out.push(a.iter().chain(b).cloned().collect());
        }
    }
    out
}

fn expand(node: &FilterNode) -> Vec<Vec<PropertyFilter>> {
    match node {
        FilterNode::Property(f) => leaf(f),
        FilterNode::And(nodes) => nodes
            .iter()
            .fold(vec![Vec::new()], |acc, n| product(acc, expand(n))),
        FilterNode::Or(nodes) => nodes.iter().flat_map(expand).collect(),
    }
}

fn leaf(f: &PropertyFilter) -> Vec<Vec<PropertyFilter>> {
    let at = |op, value: &Value| PropertyFilter {
        property: f.property.clone(),
        op,
        value: value.clone(),
    };
    let listed = || -> Vec<Value> {
        let mut values = match &f.value {
            Value::Array(values) => values.clone(),
            other => vec![other.clone()],
        };
        values.sort_by(compare_values);
        values.dedup_by(|a, b| compare_values(a, b) == Ordering::Equal);
        values
    };
    match f.op {
        Operator::In => listed()
            .iter()
            .map(|v| vec![at(Operator::Equal, v)])
            .collect(),
        Operator::NotEqual | Operator::NotIn => {
            let values = listed();
            let mut out = Vec::with_capacity(values.len() + 1);
            out.push(vec![at(Operator::LessThan, &values[0])]);
            for pair in values.windows(2) {
                out.push(vec![
                    at(Operator::GreaterThan, &pair[0]),
                    at(Operator::LessThan, &pair[1]),
                ]);
            }
            out.push(vec![at(Operator::GreaterThan, &values[values.len() - 1])]);
            out
        }
        _ => vec![vec![f.clone()]],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(property: &str, op: Operator, value: Value) -> FilterNode {
        FilterNode::Property(PropertyFilter {
            property: property.to_owned(),
            op,
            value,
        })
    }

    fn ints(values: impl IntoIterator<Item = i64>) -> Value {
        Value::Array(values.into_iter().map(Value::Integer).collect())
    }

    #[test]
    fn in_values_are_branches_and_count_toward_the_limit() {
        let six = |p| f(p, Operator::In, ints(0..6));
        let five = f("b", Operator::In, ints(0..5));
        assert_eq!(branches(&[six("a"), five.clone()]).len(), 30);
        assert!(check(&[six("a"), five]).is_ok());
        let refused = check(&[six("a"), six("b")]).unwrap_err();
        assert_eq!(
            refused,
            QueryRule::TooManyBranches {
                branches: 36,
                max: 30
            }
        );
    }

    #[test]
    fn not_in_is_the_ranges_between_its_values() {
        let b = branches(&[f("a", Operator::NotIn, ints([3, 1, 3]))]);
        let ops: Vec<Vec<(Operator, Value)>> = b
            .iter()
            .map(|c| c.iter().map(|f| (f.op, f.value.clone())).collect())
            .collect();
        use Operator::*;
        use Value::Integer as I;
        assert_eq!(
            ops,
            [
                vec![(LessThan, I(1))],
                vec![(GreaterThan, I(1)), (LessThan, I(3))],
                vec![(GreaterThan, I(3))],
            ]
        );
    }

    #[test]
    fn the_combination_rules() {
        let ne = f("a", Operator::NotEqual, Value::Integer(1));
        let not_in = f("b", Operator::NotIn, ints([1]));
        let is_in = f("c", Operator::In, ints([1]));
        let eq = f("d", Operator::Equal, Value::Integer(1));
        assert!(check(&[ne.clone(), not_in.clone()]).is_err());
        assert!(check(&[not_in.clone(), is_in.clone()]).is_err());
        assert!(check(&[FilterNode::Or(vec![not_in.clone(), eq.clone()])]).is_err());
        assert!(check(&[FilterNode::Or(vec![ne.clone(), is_in.clone()])]).is_ok());
        assert!(check(&[FilterNode::Or(Vec::new())]).is_err());
        assert!(check(&[f("a", Operator::In, ints(0..31))]).is_err());
        assert!(check(&[f("a", Operator::NotIn, ints(0..11))]).is_err());
        assert!(check(&[f("a", Operator::In, ints([]))]).is_err());
        assert!(check(&[f("a", Operator::Equal, ints([1]))]).is_err());
    }
}
