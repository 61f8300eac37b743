//! GQL's statements as the service's structured queries: `SELECT …` as a `Query`, and
//! `SELECT COUNT(*) …` or `AGGREGATE … OVER (SELECT …)` as an `AggregationQuery`.
//!
//! ```text
//! statement  := SELECT aggregates query-rest | AGGREGATE aggregates OVER ( SELECT projection query-rest ) | SELECT projection query-rest
//! projection := * | DISTINCT ON ( names ) (* | names) | DISTINCT names | names
//! query-rest := [FROM kind] [WHERE or] [ORDER BY name [ASC|DESC], …] [LIMIT limit] [OFFSET offset]
//! or         := and {OR and} ;  and := primary {AND primary} ;  primary := ( or ) | condition
//! condition  := name op value | name [NOT] IN value | name IS NULL | name HAS ANCESTOR value
//!             | value IN name | value HAS DESCENDANT name
//! limit      := position | FIRST ( position , position ) ;  offset := position [+ position]
//! aggregate  := COUNT(*) | COUNT_UP_TO(integer) | SUM(name) | AVG(name), each [AS alias]
//! ```

use gcloud_sdk::google::datastore::v1 as pb;
use tonic::Status;

use crate::serve::gql::lexer::{Pos, Symbol, Tok, error};
use crate::serve::gql::reader::{Bound, Reader};
use crate::serve::gql::values::{at_value, null, value};
use pb::aggregation_query::Aggregation;
use pb::aggregation_query::aggregation::{Avg, Count, Operator, Sum};
use pb::composite_filter::Operator as Composite;
use pb::filter::FilterType;
use pb::property_filter::Operator as Op;
use pb::property_order::Direction;

/// A GQL text, read.
pub(super) enum Statement {
    Query(pb::Query),
    Aggregation(pb::AggregationQuery),
}

/// The whole text as one statement.
pub(super) fn statement(r: &mut Reader<'_>) -> Result<Statement, Status> {
    if r.eat("aggregate") {
        let aggregations = aggregates(r)?;
        r.expect("over")?;
        r.expect_symbol(Symbol::Open)?;
        r.expect("select")?;
        let query = select(r)?;
        r.expect_symbol(Symbol::Close)?;
        return Ok(Statement::Aggregation(pb::AggregationQuery {
            aggregations,
            query_type: Some(pb::aggregation_query::QueryType::NestedQuery(query)),
        }));
    }
    r.expect("select")?;
    if AGGREGATES.iter().any(|w| r.is_call(w)) {
        let aggregations = aggregates(r)?;
        let query = rest(r, pb::Query::default())?;
        return Ok(Statement::Aggregation(pb::AggregationQuery {
            aggregations,
            query_type: Some(pb::aggregation_query::QueryType::NestedQuery(query)),
        }));
    }
    select(r).map(Statement::Query)
}

const AGGREGATES: &[&str] = &["count", "count_up_to", "sum", "avg"];

fn property(name: String) -> Option<pb::PropertyReference> {
    Some(pb::PropertyReference { name })
}

/// A projection and the clauses after it.
fn select(r: &mut Reader<'_>) -> Result<pb::Query, Status> {
    let mut query = pb::Query::default();
    if r.eat("distinct") {
        if r.eat("on") {
            r.expect_symbol(Symbol::Open)?;
            query.distinct_on = names(r)?
                .into_iter()
                .map(|name| pb::PropertyReference { name })
                .collect();
            r.expect_symbol(Symbol::Close)?;
        } else if *r.peek() == Tok::Symbol(Symbol::Star) {
            return Err(r.expected("the properties DISTINCT applies to (not `*`)"));
        } else {
            let names = names(r)?;
            query.distinct_on = names
                .iter()
                .map(|n| pb::PropertyReference { name: n.clone() })
                .collect();
            query.projection = projection(names);
            return rest(r, query);
        }
    }
    if !r.eat_symbol(Symbol::Star) {
        query.projection = projection(names(r)?);
    }
    rest(r, query)
}

fn projection(names: Vec<String>) -> Vec<pb::Projection> {
    names
        .into_iter()
        .map(|name| pb::Projection {
            property: property(name),
        })
        .collect()
}

/// Property names, separated by commas.
fn names(r: &mut Reader<'_>) -> Result<Vec<String>, Status> {
    let mut names = vec![r.name("a property name")?];
    while r.eat_symbol(Symbol::Comma) {
        names.push(r.name("a property name")?);
    }
    Ok(names)
}

/// `FROM`, `WHERE`, `ORDER BY`, `LIMIT`, `OFFSET`, each optional, in that order.
fn rest(r: &mut Reader<'_>, mut query: pb::Query) -> Result<pb::Query, Status> {
    if r.eat("from") {
        query.kind = vec![pb::KindExpression {
            name: r.name("a kind")?,
        }];
    }
    if r.eat("where") {
        query.filter = Some(or(r)?);
    }
    if r.eat("order") {
        r.expect("by")?;
        loop {
            let name = r.name("a property name")?;
            let direction = match r.eat("desc") {
                true => Direction::Descending,
                false => {
                    r.eat("asc");
                    Direction::Ascending
                }
            };
            query.order.push(pb::PropertyOrder {
                property: property(name),
                direction: direction as i32,
            });
            if !r.eat_symbol(Symbol::Comma) {
                break;
            }
        }
    }
    if r.eat("limit") {
        limit(r, &mut query)?;
    }
    if r.eat("offset") {
        offset(r, &mut query)?;
    }
    Ok(query)
}

/// Conditions joined by `op`, as one filter (one condition stands alone).
fn joined(op: Composite, mut filters: Vec<pb::Filter>) -> pb::Filter {
    match filters.len() {
        1 => filters.remove(0),
        _ => pb::Filter {
            filter_type: Some(FilterType::CompositeFilter(pb::CompositeFilter {
                op: op as i32,
                filters,
            })),
        },
    }
}

fn or(r: &mut Reader<'_>) -> Result<pb::Filter, Status> {
    let mut filters = vec![and(r)?];
    while r.eat("or") {
        filters.push(and(r)?);
    }
    Ok(joined(Composite::Or, filters))
}

fn and(r: &mut Reader<'_>) -> Result<pb::Filter, Status> {
    let mut filters = vec![primary(r)?];
    while r.eat("and") {
        filters.push(primary(r)?);
    }
    Ok(joined(Composite::And, filters))
}

fn primary(r: &mut Reader<'_>) -> Result<pb::Filter, Status> {
    if !r.eat_symbol(Symbol::Open) {
        return condition(r);
    }
    r.deeper()?;
    let filter = or(r)?;
    r.expect_symbol(Symbol::Close)?;
    r.shallower();
    Ok(filter)
}

fn compare(name: String, op: Op, value: pb::Value) -> pb::Filter {
    pb::Filter {
        filter_type: Some(FilterType::PropertyFilter(pb::PropertyFilter {
            property: property(name),
            op: op as i32,
            value: Some(value),
        })),
    }
}

/// One comparison.
fn condition(r: &mut Reader<'_>) -> Result<pb::Filter, Status> {
    if at_value(r) {
        // `value IN name` (the value among a property's) or `value HAS DESCENDANT name`.
        let value = value(r)?;
        let op = match r.eat("in") {
            true => Op::Equal,
            false if r.eat("has") => {
                r.expect("descendant")?;
                Op::HasAncestor
            }
            false => return Err(r.expected("IN or HAS DESCENDANT after a value")),
        };
        return Ok(compare(r.name("a property name")?, op, value));
    }
    let name = r.name("a property name or `(`")?;
    let symbols = [
        (Symbol::Equal, Op::Equal),
        (Symbol::NotEqual, Op::NotEqual),
        (Symbol::Less, Op::LessThan),
        (Symbol::LessOrEqual, Op::LessThanOrEqual),
        (Symbol::Greater, Op::GreaterThan),
        (Symbol::GreaterOrEqual, Op::GreaterThanOrEqual),
    ];
    if let Some(&(_, op)) = symbols.iter().find(|(s, _)| *r.peek() == Tok::Symbol(*s)) {
        r.bump();
        return Ok(compare(name, op, value(r)?));
    }
    let op = if r.eat("in") {
        Op::In
    } else if r.eat("not") {
        r.expect("in")?;
        Op::NotIn
    } else if r.eat("has") {
        r.expect("ancestor")?;
        Op::HasAncestor
    } else if r.is("is") {
        r.bump();
        let at = r.at();
        r.expect("null")?;
        r.literal(at, "NULL")?;
        return Ok(compare(name, Op::Equal, null()));
    } else {
        return Err(
            r.expected("an operator (=, !=, <, <=, >, >=, IN, NOT IN, IS NULL, HAS ANCESTOR)")
        );
    };
    Ok(compare(name, op, value(r)?))
}

/// A result position: a count (an integer, written or bound) or a cursor (bound).
enum Position {
    Count(i64, Pos),
    Cursor(Vec<u8>),
}

/// A position, and whether it was written as an integer (not bound).
fn position(r: &mut Reader<'_>) -> Result<(Position, bool), Status> {
    let at = r.at();
    match r.bump().tok {
        Tok::Int(n) => {
            r.literal(at, &n.to_string())?;
            Ok((Position::Count(n, at), true))
        }
        tok @ (Tok::Named(_) | Tok::Positional(_)) => match r.bound(&tok, at)? {
            Bound::Cursor(cursor) => Ok((Position::Cursor(cursor), false)),
            Bound::Value(pb::Value {
                value_type: Some(pb::value::ValueType::IntegerValue(n)),
                ..
            }) => Ok((Position::Count(n, at), false)),
            Bound::Value(_) => Err(error(
                at,
                format_args!("{tok} holds neither an integer nor a cursor"),
            )),
        },
        tok => Err(error(
            at,
            format_args!("expected an integer or a binding, found {tok}"),
        )),
    }
}

/// A count as the service's `int32`, `what` (limit or offset) naming it.
fn count(n: i64, at: Pos, what: &str) -> Result<i32, Status> {
    match i32::try_from(n) {
        Ok(n) if n >= 0 => Ok(n),
        _ if n < 0 => Err(error(at, format_args!("the {what} {n} is negative"))),
        _ => Err(error(at, format_args!("the {what} {n} is too large"))),
    }
}

/// `LIMIT n`, `LIMIT @cursor` (where the results end), or `LIMIT FIRST(p, q)`: a cursor and
/// a count, in either order.
fn limit(r: &mut Reader<'_>, query: &mut pb::Query) -> Result<(), Status> {
    let positions = match r.is_call("first") {
        false => vec![position(r)?.0],
        true => {
            r.bump();
            r.expect_symbol(Symbol::Open)?;
            let first = position(r)?.0;
            r.expect_symbol(Symbol::Comma)?;
            let at = r.at();
            let second = position(r)?.0;
            r.expect_symbol(Symbol::Close)?;
            if matches!(
                (&first, &second),
                (Position::Count(..), Position::Count(..))
                    | (Position::Cursor(_), Position::Cursor(_))
            ) {
                return Err(error(at, "FIRST takes a cursor and a count"));
            }
            vec![first, second]
        }
    };
    for p in positions {
        match p {
            Position::Count(n, at) => query.limit = Some(count(n, at, "limit")?),
            Position::Cursor(cursor) => query.end_cursor = cursor,
        }
    }
    Ok(())
}

/// `OFFSET n`, `OFFSET @cursor` (where the results start), or `OFFSET @cursor + n`.
fn offset(r: &mut Reader<'_>, query: &mut pb::Query) -> Result<(), Status> {
    let at = r.at();
    let mut n = match position(r)?.0 {
        Position::Count(n, at) => {
            if *r.peek() == Tok::Symbol(Symbol::Plus) {
                return Err(r.expected("no `+` after an integer offset (`OFFSET @cursor + n`)"));
            }
            (n, at)
        }
        Position::Cursor(cursor) => {
            query.start_cursor = cursor;
            (0, at)
        }
    };
    if r.eat_symbol(Symbol::Plus) {
        n = match position(r)? {
            (Position::Count(n, at), _) => (n, at),
            (Position::Cursor(_), _) => return Err(error(at, "expected a count after `+`")),
        };
    }
    query.offset = count(n.0, n.1, "offset")?;
    Ok(())
}

/// Aggregations separated by commas, each with its alias; those without one are named
/// `property_1`, `property_2`, … in order, as the service names them.
fn aggregates(r: &mut Reader<'_>) -> Result<Vec<Aggregation>, Status> {
    let mut aggregations = Vec::new();
    let mut unnamed = 0;
    loop {
        let at = r.at();
        let function = r
            .name("COUNT, COUNT_UP_TO, SUM or AVG")?
            .to_ascii_lowercase();
        r.expect_symbol(Symbol::Open)?;
        let operator = match function.as_str() {
            "count" => {
                r.expect_symbol(Symbol::Star)?;
                Operator::Count(Count { up_to: None })
            }
            // An integer written out, as the service takes it (not a binding).
            "count_up_to" => {
                let at = r.at();
                let Tok::Int(n) = *r.peek() else {
                    return Err(r.expected("an integer"));
                };
                r.literal(at, &n.to_string())?;
                r.bump();
                Operator::Count(Count { up_to: Some(n) })
            }
            "sum" => Operator::Sum(Sum {
                property: property(r.name("a property name")?),
            }),
            "avg" => Operator::Avg(Avg {
                property: property(r.name("a property name")?),
            }),
            _ => return Err(error(at, "expected COUNT, COUNT_UP_TO, SUM or AVG")),
        };
        r.expect_symbol(Symbol::Close)?;
        let alias = match r.eat("as") {
            true => r.name("an alias")?,
            false => {
                unnamed += 1;
                format!("property_{unnamed}")
            }
        };
        aggregations.push(Aggregation {
            alias,
            operator: Some(operator),
        });
        if !r.eat_symbol(Symbol::Comma) {
            return Ok(aggregations);
        }
    }
}
