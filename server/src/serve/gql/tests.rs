//! The GQL reader: what each form becomes, where each mistake is reported.

use gcloud_sdk::google::datastore::v1 as pb;
use tonic::Code;

use crate::serve::gql::reader::MAX_DEPTH;
use crate::serve::gql::{aggregation, query};
use pb::filter::FilterType;
use pb::gql_query_parameter::ParameterType;
use pb::value::ValueType;

fn gql(text: &str) -> pb::GqlQuery {
    pb::GqlQuery {
        query_string: text.to_owned(),
        allow_literals: true,
        ..pb::GqlQuery::default()
    }
}

fn read(text: &str) -> pb::Query {
    query(&gql(text), None).unwrap_or_else(|e| panic!("{text}: {}", e.message()))
}

fn refused(text: &str) -> String {
    let status = query(&gql(text), None).expect_err(text);
    assert_eq!(status.code(), Code::InvalidArgument, "{text}");
    status.message().to_owned()
}

/// The filter as `name op value` lines, composites as `AND(…)`/`OR(…)`.
fn shown(filter: &pb::Filter) -> String {
    match filter.filter_type.as_ref().unwrap() {
        FilterType::CompositeFilter(c) => {
            let op = pb::composite_filter::Operator::try_from(c.op).unwrap();
            let inner: Vec<String> = c.filters.iter().map(shown).collect();
            format!("{}({})", op.as_str_name(), inner.join(", "))
        }
        FilterType::PropertyFilter(p) => {
            let op = pb::property_filter::Operator::try_from(p.op).unwrap();
            let value = p.value.as_ref().and_then(|v| v.value_type.as_ref());
            format!(
                "{} {} {value:?}",
                p.property.as_ref().unwrap().name,
                op.as_str_name()
            )
        }
    }
}

fn only_value(text: &str) -> ValueType {
    let query = read(text);
    let Some(FilterType::PropertyFilter(p)) = query.filter.unwrap().filter_type else {
        panic!("{text}: not one comparison");
    };
    p.value.unwrap().value_type.unwrap()
}

#[test]
fn and_binds_tighter_than_or() {
    let query = read("SELECT * FROM T WHERE a = 1 OR b = 2 AND c = 3 OR d = 4");
    assert_eq!(
        shown(&query.filter.unwrap()),
        "OR(a EQUAL Some(IntegerValue(1)), AND(b EQUAL Some(IntegerValue(2)), \
         c EQUAL Some(IntegerValue(3))), d EQUAL Some(IntegerValue(4)))"
    );
    let query = read("select * from T where (a = 1 or b = 2) and c = 3");
    assert_eq!(
        shown(&query.filter.unwrap()),
        "AND(OR(a EQUAL Some(IntegerValue(1)), b EQUAL Some(IntegerValue(2))), \
         c EQUAL Some(IntegerValue(3)))"
    );
}

#[test]
fn clauses() {
    let query =
        read("SELECT DISTINCT ON (a) a, `b c` FROM `my kind` ORDER BY a DESC, b LIMIT 5 OFFSET 2");
    assert_eq!(query.kind[0].name, "my kind");
    let names = |v: Vec<pb::Projection>| -> Vec<String> {
        v.into_iter().map(|p| p.property.unwrap().name).collect()
    };
    assert_eq!(names(query.projection), ["a", "b c"]);
    assert_eq!(query.distinct_on[0].name, "a");
    assert_eq!(query.order.len(), 2);
    assert_eq!(query.order[0].direction, 2);
    assert_eq!(query.order[1].direction, 1);
    assert_eq!((query.limit, query.offset), (Some(5), 2));
    let query = read("SELECT DISTINCT a, b");
    assert!(query.kind.is_empty());
    assert_eq!(query.distinct_on.len(), 2);
    let keys = read("SELECT __key__ FROM T WHERE 3 IN tags AND KEY(T, 1) HAS DESCENDANT __key__");
    assert_eq!(names(keys.projection), ["__key__"]);
    assert_eq!(
        shown(&keys.filter.unwrap()).split(", ").next(),
        Some("AND(tags EQUAL Some(IntegerValue(3))")
    );
    let filter = shown(&read("SELECT * FROM T WHERE a IS NULL").filter.unwrap());
    assert_eq!(filter, "a EQUAL Some(NullValue(NullValue))");
}

#[test]
fn every_literal() {
    assert_eq!(
        only_value("SELECT * FROM T WHERE a = 'it''s'"),
        ValueType::StringValue("it's".into())
    );
    assert_eq!(
        only_value(r#"SELECT * FROM T WHERE a = "say ""x"" \n""#),
        ValueType::StringValue("say \"x\" \n".into())
    );
    assert_eq!(
        only_value("SELECT * FROM T WHERE a = -9223372036854775808"),
        ValueType::IntegerValue(i64::MIN)
    );
    assert_eq!(
        only_value("SELECT * FROM T WHERE a = +3"),
        ValueType::IntegerValue(3)
    );
    assert_eq!(
        only_value("SELECT * FROM T WHERE a = -1.5e-3"),
        ValueType::DoubleValue(-0.0015)
    );
    assert_eq!(
        only_value("SELECT * FROM T WHERE a = .5"),
        ValueType::DoubleValue(0.5)
    );
    assert_eq!(
        only_value("SELECT * FROM T WHERE a = tRuE"),
        ValueType::BooleanValue(true)
    );
    assert_eq!(
        only_value("SELECT * FROM T WHERE a = FALSE"),
        ValueType::BooleanValue(false)
    );
    assert_eq!(
        only_value("SELECT * FROM T WHERE a = NULL"),
        ValueType::NullValue(0)
    );
    assert_eq!(
        only_value("SELECT * FROM T WHERE a = BLOB('aGVsbG8_-w')"),
        ValueType::BlobValue(b"hello?\xfb".to_vec())
    );
    let ValueType::TimestampValue(t) =
        only_value("SELECT * FROM T WHERE a = DATETIME('2013-09-29T09:30:20.00002Z')")
    else {
        panic!("not a timestamp");
    };
    assert_eq!((t.seconds, t.nanos), (1_380_447_020, 20_000));
    let ValueType::KeyValue(key) =
        only_value("SELECT * FROM T WHERE a = KEY(PROJECT('p'), NAMESPACE('n'), A, 'x', B, 2)")
    else {
        panic!("not a key");
    };
    let partition = key.partition_id.unwrap();
    assert_eq!(
        (
            partition.project_id.as_str(),
            partition.namespace_id.as_str()
        ),
        ("p", "n")
    );
    assert_eq!(key.path.len(), 2);
    assert_eq!(
        key.path[1].id_type,
        Some(pb::key::path_element::IdType::Id(2))
    );
    let ValueType::ArrayValue(array) = only_value("SELECT * FROM T WHERE a IN ARRAY(1, 'b', NULL)")
    else {
        panic!("not an array");
    };
    assert_eq!(array.values.len(), 3);
}

#[test]
fn a_key_without_a_partition_is_in_the_requests() {
    let request = pb::PartitionId {
        project_id: "p".into(),
        namespace_id: "ns".into(),
        ..pb::PartitionId::default()
    };
    let partition = |text: &str| {
        let read = query(&gql(text), Some(&request)).unwrap();
        let Some(FilterType::PropertyFilter(p)) = read.filter.unwrap().filter_type else {
            panic!("not one comparison");
        };
        let Some(ValueType::KeyValue(key)) = p.value.unwrap().value_type else {
            panic!("not a key");
        };
        let partition = key.partition_id.unwrap();
        (partition.project_id, partition.namespace_id)
    };
    let pair = |project: &str, namespace: &str| (project.to_owned(), namespace.to_owned());
    let ancestor = partition("SELECT * WHERE __key__ HAS ANCESTOR KEY(A, 'x')");
    assert_eq!(ancestor, pair("p", "ns"));
    // PROJECT alone is that project's default namespace; NAMESPACE alone keeps the project.
    let project = partition("SELECT * FROM A WHERE k = KEY(PROJECT('q'), A, 1)");
    assert_eq!(project, pair("q", ""));
    let namespace = partition("SELECT * FROM A WHERE k = KEY(NAMESPACE('m'), A, 1)");
    assert_eq!(namespace, pair("p", "m"));
}

#[test]
fn bindings_and_positions() {
    let mut text =
        gql("SELECT * FROM T WHERE a = @x AND b = @1 LIMIT FIRST(@c, @2) OFFSET @c + @x");
    let value = |v| pb::GqlQueryParameter {
        parameter_type: Some(ParameterType::Value(pb::Value {
            value_type: Some(v),
            ..pb::Value::default()
        })),
    };
    let cursor = pb::GqlQueryParameter {
        parameter_type: Some(ParameterType::Cursor(vec![7])),
    };
    text.named_bindings
        .insert("x".into(), value(ValueType::IntegerValue(3)));
    text.named_bindings.insert("c".into(), cursor);
    text.positional_bindings = vec![
        value(ValueType::StringValue("s".into())),
        value(ValueType::IntegerValue(4)),
    ];
    text.allow_literals = false;
    let read = query(&text, None).unwrap();
    assert_eq!((read.limit, read.offset), (Some(4), 3));
    assert_eq!((read.start_cursor, read.end_cursor), (vec![7], vec![7]));
    // An unused positional binding is refused; an unused named one passes, as the service
    // takes them.
    text.query_string = "SELECT * FROM T WHERE a = @x AND b = @1".into();
    let unused = query(&text, None).unwrap_err();
    assert!(
        unused
            .message()
            .contains("the positional binding @2 is not used"),
        "{}",
        unused.message()
    );
    text.query_string = "SELECT * FROM T WHERE a = @x AND b = @1 LIMIT 5 OFFSET @c".into();
    let literal = query(&text, None).unwrap_err();
    assert!(
        literal
            .message()
            .starts_with("GQL query error at 1:47: the literal 5 is not allowed"),
        "{}",
        literal.message()
    );
    text.query_string = "SELECT * FROM T WHERE a = @c".into();
    assert!(
        query(&text, None)
            .unwrap_err()
            .message()
            .contains("is a cursor")
    );
}

#[test]
fn mistakes_name_their_place() {
    let cases = [
        ("SELECT FROM T", "at 1:8: expected a property name"),
        (
            "SELECT * FROM T WHERE",
            "at 1:22: expected a property name or `(`",
        ),
        ("SELECT * FROM T WHERE a == 1", "at 1:26: expected a value"),
        (
            "SELECT *\nFROM T\n  WHERE a = 'open",
            "at 3:13: no closing '",
        ),
        (
            "SELECT * FROM T LIMIT 2, 5",
            "at 1:24: expected the end of the query",
        ),
        ("SELECT * FROM T OFFSET 1 + 2", "at 1:26: expected no `+`"),
        (
            "SELECT * FROM T LIMIT FIRST(2, 5)",
            "at 1:32: FIRST takes a cursor and a count",
        ),
        (
            "SELECT DISTINCT * FROM T",
            "at 1:17: expected the properties DISTINCT applies to",
        ),
        ("SELECT * FROM 'T'", "at 1:15: expected a kind"),
        (
            "SELECT * FROM T WHERE a = KEY(T, 0)",
            "at 1:34: a key's id is never 0",
        ),
        (
            "SELECT * FROM T WHERE a = 9223372036854775808",
            "at 1:27: invalid number",
        ),
        (
            "SELECT * FROM T WHERE a = 1 -- no",
            "at 1:29: expected a number after `-`",
        ),
        (
            "SELECT * FROM T LIMIT -1",
            "at 1:23: the limit -1 is negative",
        ),
        (
            "SELECT * FROM T LIMIT 2147483648",
            "the limit 2147483648 is too large",
        ),
        (
            "SELECT * FROM T WHERE a = @0",
            "at 1:27: a positional binding counts from @1",
        ),
        (
            "SELECT * FROM T WHERE a = @b",
            "at 1:27: no named binding @b",
        ),
        ("SELECT * FROM T WHERE a = BLOB('aGVsbG8=')", "invalid BLOB"),
        (
            "SELECT * FROM T WHERE a = DATETIME('2013-09-29')",
            "invalid DATETIME",
        ),
        (
            "SELECT * FROM T WHERE a ~ 1",
            "at 1:25: unexpected character '~'",
        ),
        ("SELECT COUNT(*) FROM T", "run by RunAggregationQuery"),
    ];
    for (text, expected) in cases {
        let message = refused(text);
        assert!(message.starts_with("GQL query error"), "{text}: {message}");
        assert!(
            message.contains(expected),
            "{text}: {message} lacks {expected:?}"
        );
    }
}

#[test]
fn nesting_is_bounded() {
    let deep = |n: usize| {
        format!(
            "SELECT * FROM T WHERE {}a = 1{}",
            "(".repeat(n),
            ")".repeat(n)
        )
    };
    read(&deep(MAX_DEPTH));
    assert!(refused(&deep(MAX_DEPTH + 1)).contains("nested more than"));
    let arrays = format!(
        "SELECT * FROM T WHERE a IN {}1{}",
        "ARRAY(".repeat(100_000),
        ")".repeat(100_000)
    );
    assert!(refused(&arrays).contains("nested more than"));
}

#[test]
fn aggregations_and_their_aliases() {
    let read = aggregation(
        &gql("AGGREGATE COUNT(*) AS c, SUM(n), COUNT_UP_TO(4), AVG(n) AS a OVER (SELECT * FROM T WHERE n > 1)"),
        None,
    )
    .unwrap();
    let aliases: Vec<&str> = read.aggregations.iter().map(|a| a.alias.as_str()).collect();
    assert_eq!(aliases, ["c", "property_1", "property_2", "a"]);
    let Some(pb::aggregation_query::QueryType::NestedQuery(nested)) = read.query_type else {
        panic!("no nested query");
    };
    assert_eq!(nested.kind[0].name, "T");
    let read = aggregation(&gql("select count(*) from T"), None).unwrap();
    assert_eq!(read.aggregations[0].alias, "property_1");
    let refused = aggregation(&gql("SELECT * FROM T"), None).unwrap_err();
    assert_eq!(refused.code(), Code::InvalidArgument);
}
