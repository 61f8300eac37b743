//! Aggregations as the service answers them: which rows a count, a sum or an average reads
//! (keys only, or the property's index values, so no entity is loaded unless the property is
//! also filtered by equality), and how a sum folds them.

use super::scan::{self, Prepared};
use datastore_entity_core::error::Error;
use datastore_entity_core::model::key::KEY_PROPERTY;
use datastore_entity_core::model::value::Value;
use datastore_entity_core::model::walk::compare_values;
use datastore_entity_core::query::spec::{
    Aggregation, Operator, QueryBatch, QuerySpec, ResultShape,
};
use datastore_entity_core::query_rule::QueryRule;

/// What an aggregation reads, and how it answers.
pub(super) enum Plan {
    /// A count of the rows of `rows`: of its keys, unless it is a projection (then one row
    /// per entity holding the projected properties indexed, per array element).
    Count { rows: QuerySpec, keys_only: bool },
    /// A sum or an average of a property over the rows of a query.
    Fold(Fold),
}

impl Plan {
    /// The rows the aggregation reads.
    pub(super) fn rows(&self) -> &QuerySpec {
        match self {
            Plan::Count { rows, .. } => rows,
            Plan::Fold(fold) => &fold.rows,
        }
    }

    /// The plan of `aggregation` over `query`, refused as the service refuses it.
    pub(super) fn new(query: &QuerySpec, aggregation: &Aggregation) -> Result<Plan, Error> {
        let query = &*query.answered();
        // The query is refused as a query would be (the service validates both alike).
        Prepared::new(query)?;
        if let Aggregation::Sum(p) | Aggregation::Avg(p) = aggregation
            && p == KEY_PROPERTY
        {
            return Err(Error::InvalidQuery {
                kind: query.kind.clone(),
                rule: QueryRule::SumOfKey,
            });
        }
        // As the Firestore emulator answers: a count runs over any query's rows, a sum or an
        // average over its entities only.
        let allowed = match (aggregation, &query.shape) {
            (Aggregation::Count { .. }, _) | (_, ResultShape::Full) => true,
            (Aggregation::Sum(p) | Aggregation::Avg(p), ResultShape::Projection(names)) => {
                names.contains(p)
            }
            _ => false,
        };
        if !allowed {
            return Err(Error::InvalidQuery {
                kind: query.kind.clone(),
                rule: QueryRule::SumOverKeys,
            });
        }
        let mut rows = query.clone();
        rows.start_cursor = None;
        rows.end_cursor = None;
        let (property, mean) = match aggregation {
            Aggregation::Count { up_to } => {
                let keys_only = !matches!(rows.shape, ResultShape::Projection(_));
                if keys_only {
                    rows.shape = ResultShape::KeysOnly;
                }
                if let Some(up_to) = up_to {
                    let up_to = usize::try_from(*up_to).unwrap_or(usize::MAX);
                    rows.limit = Some(rows.limit.map_or(up_to, |l| l.min(up_to)));
                }
                return Ok(Plan::Count { rows, keys_only });
            }
            Aggregation::Sum(p) => (p.clone(), false),
            Aggregation::Avg(p) => (p.clone(), true),
        };
        let fixing = |f: &&datastore_entity_core::query::spec::PropertyFilter| {
            f.property == property && matches!(f.op, Operator::Equal | Operator::In)
        };
        let fixed = query
            .filters
            .iter()
            .flat_map(|f| f.leaves())
            .any(|f| fixing(&f));
        rows.shape = match (&query.shape, fixed) {
            // A projection's rows: one per combination of its properties' values, only of
            // entities that hold them all (the property summed among them).
            (ResultShape::Projection(_), _) => query.shape.clone(),
            (_, true) => ResultShape::Full,
            (_, false) => ResultShape::Projection(vec![property.clone()]),
        };
        // Where an equality (or IN) filter fixes the property, each of an entity's distinct
        // values is a row of the index holding the value the filter fixed, as in Firestore
        // in Datastore mode: the first operand (IN values in their listed order) the entity
        // holds.
        let operands = fixed.then(|| {
            query
                .filters
                .iter()
                .flat_map(|f| f.leaves())
                .filter(|f| f.property == property)
                .flat_map(|f| match (&f.op, &f.value) {
                    (Operator::Equal, value) => std::slice::from_ref(value),
                    (Operator::In, Value::Array(listed)) => listed.as_slice(),
                    _ => &[],
                })
                .cloned()
                .collect()
        });
        Ok(Plan::Fold(Fold {
            rows,
            property,
            operands,
            mean,
        }))
    }
}

/// A sum or an average: the rows it reads and how each adds to it.
pub(super) struct Fold {
    /// The query whose rows are summed.
    pub(super) rows: QuerySpec,
    property: String,
    /// The values equality or IN filters fix the property to, in their order; `None` when
    /// none does (the rows are then projections of the property).
    operands: Option<Vec<Value>>,
    /// An average, not a sum.
    mean: bool,
}

impl Fold {
    /// The answer over `batch`, the rows of [`Fold::rows`].
    pub(super) fn over(&self, batch: &QueryBatch) -> Value {
        let mut sum = Sum::default();
        for row in &batch.results {
            match &self.operands {
                Some(operands) => {
                    let mut values = Vec::new();
                    scan::visit_indexed(&row.properties, &self.property, &mut |v| values.push(v));
                    values.sort_by(|a, b| compare_values(a, b));
                    values.dedup_by(|a, b| compare_values(a, b).is_eq());
                    let fixed_to = operands
                        .iter()
                        .find(|o| values.iter().any(|v| compare_values(v, o).is_eq()));
                    for value in &values {
                        sum.add(&indexed(fixed_to.unwrap_or(value)));
                    }
                }
                // A projection's row holds the one index value under the property's whole
                // (dotted) name.
                None => {
                    if let Some(p) = row.properties.get(&self.property) {
                        sum.add(&p.value);
                    }
                }
            }
        }
        match self.mean {
            true => sum.mean(),
            false => sum.total(),
        }
    }
}

/// A value as the index holds it: a timestamp as its integer of microseconds, which the
/// Firestore emulator sums (as it does in a projection's rows).
fn indexed(value: &Value) -> Value {
    match value {
        Value::Timestamp(t) => Value::Integer(t.as_micros()),
        other => other.clone(),
    }
}

/// A running sum of numeric values, as the service sums them: integers exactly while they
/// fit in an `i64`, in a double once a double is added or the integer sum overflows.
#[derive(Default)]
struct Sum {
    integer: Option<i64>,
    double: Option<f64>,
    count: u64,
}

impl Sum {
    fn add(&mut self, value: &Value) {
        let as_double = match *value {
            Value::Integer(i) => {
                self.count += 1;
                match (self.double, self.integer.unwrap_or(0).checked_add(i)) {
                    (None, Some(total)) => {
                        self.integer = Some(total);
                        return;
                    }
                    _ => i as f64,
                }
            }
            Value::Double(d) => {
                self.count += 1;
                d
            }
            _ => return,
        };
        let carried = self.integer.take().map_or(0.0, |i| i as f64);
        self.double = Some(self.double.unwrap_or(0.0) + carried + as_double);
    }

    fn total(&self) -> Value {
        match self.double {
            Some(d) => Value::Double(d),
            None => Value::Integer(self.integer.unwrap_or(0)),
        }
    }

    fn mean(&self) -> Value {
        let total = match self.total() {
            Value::Integer(i) => i as f64,
            Value::Double(d) => d,
            _ => 0.0,
        };
        match self.count {
            0 => Value::Null,
            n => Value::Double(total / n as f64),
        }
    }
}
