#![allow(clippy::unwrap_used)]

mod before;

use proptest::{prelude::*, sample::select};
use serde_json::{Map, Value, json};

use super::{BUDGET, INLINE_BUDGET, Verdict, check, judge, run};

/// The most one charge may overshoot a budget in these tests (the largest `enum`, `required` or
/// `properties` list they generate).
const SLACK: u64 = 64;

/// The budget the generated cases run under: small enough that 256 cases take well under a
/// second in a debug build, large enough that the non-recursive ones are judged.
const GENERATED_BUDGET: u64 = 20_000;

fn object(schema: &Value) -> &Map<String, Value> {
    schema.as_object().unwrap()
}

fn weather() -> Value {
    json!({
        "type": "object",
        "properties": {
            "location": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
            "units": {"type": "string", "enum": ["metric", "imperial"]},
            "days": {"type": "integer", "minimum": 1, "maximum": 7},
            "tags": {"type": "array", "items": {"$ref": "#/$defs/tag"}}
        },
        "required": ["location"],
        "additionalProperties": false,
        "$defs": {"tag": {"type": "string", "maxLength": 3}}
    })
}

fn invalid(verdict: Verdict) -> String {
    match verdict {
        Verdict::Invalid(message) => message,
        other => panic!("expected Invalid, got {other:?}"),
    }
}

#[test]
fn valid_arguments_pass() {
    let verdict = check(
        object(&weather()),
        &json!({"location": {"city": "Paris"}, "units": "metric", "days": 3, "tags": ["a"]}),
    );
    assert_eq!(verdict, Verdict::Valid);
}

#[test]
fn each_violation_names_its_field() {
    let cases = [
        (json!({}), "missing required argument `location`"),
        (
            json!({"location": {}}),
            "missing required argument `location.city`",
        ),
        (
            json!({"location": {"city": 3}}),
            "argument `location.city` must be string, got an integer (3)",
        ),
        (
            json!({"location": {"city": "x"}, "units": "kelvin"}),
            "argument `units` must be one of \"metric\", \"imperial\"",
        ),
        (
            json!({"location": {"city": "x"}, "days": 9}),
            "argument `days` must be at most 7",
        ),
        (
            json!({"location": {"city": "x"}, "days": 1.5}),
            "argument `days` must be integer",
        ),
        (
            json!({"location": {"city": "x"}, "tags": ["long"]}),
            "argument `tags[0]` must be at most 3 characters",
        ),
        (
            json!({"location": {"city": "x"}, "extra": 1}),
            "unknown argument `extra` (expected location, units, days, tags)",
        ),
    ];
    for (args, expected) in cases {
        let error = invalid(check(object(&weather()), &args));
        assert!(error.starts_with(expected), "{args}: {error}");
    }
}

#[test]
fn unions_nullables_and_recursion_are_understood() {
    let schema = json!({
        "$defs": {"node": {"type": "object", "properties": {"next": {"anyOf": [{"$ref": "#/$defs/node"}, {"type": "null"}]}}}},
        "type": "object",
        "properties": {"head": {"$ref": "#/$defs/node"}, "n": {"type": "number", "nullable": true}}
    });
    assert_eq!(
        check(
            object(&schema),
            &json!({"head": {"next": {"next": null}}, "n": null})
        ),
        Verdict::Valid
    );
    invalid(check(object(&schema), &json!({"head": {"next": 5}})));
}

/// The schema from the hardening issue: before the budget this took 3^64 steps (a test binary
/// built from the old code was still running when killed after 60 s).
#[test]
fn self_referential_all_of_returns() {
    let schema = json!({
        "$defs": {"A": {"allOf": [{"$ref": "#/$defs/A"}, {"$ref": "#/$defs/A"}, {"$ref": "#/$defs/A"}]}},
        "type": "object",
        "properties": {"x": {"$ref": "#/$defs/A"}}
    });
    for args in [json!({"x": 1}), json!({"x": {"y": [1, 2]}}), json!({})] {
        let (verdict, visits) = run(object(&schema), &args, BUDGET);
        assert_eq!(verdict, Verdict::Valid, "{args}");
        assert!(visits < 100, "{args}: {visits} visits");
    }
}

/// A definition reached again over the same value is checked once: many `$ref`s to one
/// definition at each level of a deep value cost visits in proportion to the value.
#[test]
fn repeated_references_are_checked_once_per_value() {
    let schema = json!({
        "$defs": {"N": {"type": "object", "properties": {"n": {"allOf": [
            {"$ref": "#/$defs/N"}, {"$ref": "#/$defs/N"}, {"$ref": "#/$defs/N"}, {"$ref": "#/$defs/N"}
        ]}}}},
        "$ref": "#/$defs/N"
    });
    let mut args = json!({});
    for _ in 0..15 {
        args = json!({"n": args});
    }
    let (verdict, visits) = run(object(&schema), &args, BUDGET);
    assert_eq!(verdict, Verdict::Valid);
    assert!(visits < 500, "{visits} visits");
    args = json!({"n": {"n": 5}});
    let error = invalid(check(object(&schema), &args));
    assert!(
        error.starts_with("argument `n.n` must be object"),
        "{error}"
    );
}

/// Work that no cache can spare (many distinct branches over many values) stops at the budget,
/// as `Unjudged`.
#[test]
fn a_spent_budget_is_unjudged() {
    let forms: Vec<Value> = (0..200).map(|i| json!({ "const": i })).collect();
    let schema = json!({
        "type": "object",
        "properties": {"values": {"type": "array", "items": {"anyOf": forms}}}
    });
    let args = json!({ "values": vec![199; 10_000] });
    let (verdict, visits) = run(object(&schema), &args, BUDGET);
    assert_eq!(verdict, Verdict::Unjudged);
    assert!(visits <= BUDGET + SLACK, "{visits} visits");
    assert_eq!(
        super::check_within(object(&weather()), &json!({"location": {"city": "x"}}), 3),
        Verdict::Unjudged
    );
}

/// A cycle of definitions over one value, each naming the next twice, is checked once per
/// definition: an answer that took the cycle's start for granted is reused while it is open.
#[test]
fn a_cycle_of_definitions_is_checked_once_per_definition() {
    let mut defs = Map::new();
    for i in 0..30 {
        let next = format!("#/$defs/D{}", (i + 1) % 30);
        defs.insert(
            format!("D{i}"),
            json!({"allOf": [{"$ref": next}, {"$ref": next}], "minimum": 0}),
        );
    }
    let schema = json!({"$defs": defs, "properties": {"x": {"$ref": "#/$defs/D0"}}});
    let (verdict, visits) = run(object(&schema), &json!({"x": 1}), BUDGET);
    assert_eq!(verdict, Verdict::Valid);
    assert!(visits < 1_000, "{visits} visits");
    let error = invalid(check(object(&schema), &json!({"x": -1})));
    assert!(
        error.starts_with("argument `x` must be at least 0"),
        "{error}"
    );
}

fn many_records(count: usize) -> (Value, Value) {
    let schema = json!({
        "$defs": {"record": {
            "type": "object",
            "properties": {
                "id": {"type": "integer", "minimum": 0},
                "name": {"type": "string", "maxLength": 64},
                "kind": {"enum": ["a", "b", "c"]},
                "score": {"type": "number"},
                "tags": {"type": "array", "items": {"type": "string"}}
            },
            "required": ["id", "name"],
            "additionalProperties": false
        }},
        "type": "object",
        "properties": {"records": {"type": "array", "items": {"$ref": "#/$defs/record"}}},
        "required": ["records"]
    });
    let records: Vec<Value> = (0..count)
        .map(|i| json!({"id": i, "name": format!("record {i}"), "kind": "b", "score": 0.5, "tags": ["x"]}))
        .collect();
    (schema, json!({ "records": records }))
}

/// The budget's reason: a large legitimate call is judged, not given up on.
#[test]
fn a_large_legitimate_call_fits_the_budget() {
    let (schema, args) = many_records(10_000);
    let (verdict, visits) = run(object(&schema), &args, BUDGET);
    assert_eq!(verdict, Verdict::Valid);
    assert!(visits > INLINE_BUDGET, "{visits} visits");
    assert!(visits < BUDGET / 4, "{visits} visits");
    let (small_schema, small) = many_records(20);
    let (_, visits) = run(object(&small_schema), &small, BUDGET);
    assert!(visits < INLINE_BUDGET, "{visits} visits");
}

#[tokio::test]
async fn judge_moves_a_large_check_off_the_runtime_and_returns_the_arguments() {
    let (schema, args) = many_records(10_000);
    let schema = std::sync::Arc::new(object(&schema).clone());
    let (verdict, back) = judge(&schema, args.clone()).await;
    assert_eq!(verdict, Verdict::Valid);
    assert_eq!(back, args);
    let mut wrong = args;
    wrong["records"][9_999]["id"] = json!(-1);
    let (verdict, _) = judge(&schema, wrong).await;
    assert!(invalid(verdict).starts_with("argument `records[9999].id` must be at least 0"));
}

#[test]
fn long_values_and_keys_are_named_briefly() {
    let key = "k".repeat(10_000);
    let schema =
        json!({"type": "object", "properties": {}, "additionalProperties": {"type": "string"}});
    let mut args = Map::new();
    args.insert(key, json!(vec![0; 10_000]));
    let error = invalid(check(object(&schema), &Value::Object(args)));
    assert!(error.len() < 120, "{error}");
    assert!(error.ends_with("must be string, got an array"), "{error}");
}

fn corpus() -> Vec<(String, Value)> {
    let folder = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/corpus/schemas");
    let mut schemas: Vec<(String, Value)> = std::fs::read_dir(folder)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "json"))
        .map(|path| {
            let text = std::fs::read_to_string(&path).unwrap();
            (
                path.display().to_string(),
                serde_json::from_str(&text).unwrap(),
            )
        })
        .collect();
    schemas.sort_by(|a, b| a.0.cmp(&b.0));
    schemas
}

/// Every schema that ever broke the validator (`tests/corpus/schemas/`) is judged within the
/// budget for a few values.
#[test]
fn corpus_schemas_return_within_budget() {
    let schemas = corpus();
    assert!(schemas.len() >= 2, "{schemas:?}");
    let mut nested = json!({"x": 1});
    for _ in 0..20 {
        nested = json!({"x": nested, "n": {"n": [1, null]}});
    }
    for (path, schema) in &schemas {
        for args in [
            json!(null),
            json!({}),
            json!({"x": {"y": {"z": [1, "a", null]}}}),
            nested.clone(),
        ] {
            let (_, visits) = run(object(schema), &args, BUDGET);
            assert!(
                visits <= BUDGET + SLACK,
                "{path} with {args}: {visits} visits"
            );
        }
    }
}

fn key() -> impl Strategy<Value = String> {
    select(vec!["a", "b", "c", "x", "n"]).prop_map(str::to_owned)
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        (-3i64..10).prop_map(Value::from),
        (-3.0f64..3.0).prop_map(Value::from),
        select(vec!["", "a", "ab", "abcd", "metric"]).prop_map(Value::from),
    ];
    leaf.prop_recursive(5, 48, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(key(), inner, 0..4)
                .prop_map(|fields| Value::Object(fields.into_iter().collect())),
        ]
    })
}

/// A schema node; `defs` is how many `$defs` a `$ref` may name (none: no `$ref`s).
fn schema_node(defs: usize) -> BoxedStrategy<Value> {
    let mut leaves = vec![
        Just(json!(true)).boxed(),
        Just(json!(false)).boxed(),
        Just(json!({})).boxed(),
        select(vec![
            "null", "boolean", "integer", "number", "string", "array", "object",
        ])
        .prop_map(|name| json!({ "type": name }))
        .boxed(),
        Just(json!({"type": ["string", "null"]})).boxed(),
        Just(json!({"enum": ["a", "metric", 1, null]})).boxed(),
        Just(json!({"const": "ab"})).boxed(),
        (-2i64..5)
            .prop_map(|n| json!({"minimum": n, "exclusiveMaximum": n + 4}))
            .boxed(),
        (0u64..4)
            .prop_map(|n| json!({"minLength": n, "maxLength": n + 1}))
            .boxed(),
        Just(json!({"type": "number", "nullable": true})).boxed(),
    ];
    if defs > 0 {
        leaves.push(
            (0..defs)
                .prop_map(|i| json!({ "$ref": format!("#/$defs/D{i}") }))
                .boxed(),
        );
    }
    let leaf = prop::strategy::Union::new(leaves);
    leaf.prop_recursive(4, 64, 8, |inner| {
        let branches = || prop::collection::vec(inner.clone(), 0..8);
        prop_oneof![
            branches().prop_map(|all| json!({ "allOf": all })),
            branches().prop_map(|any| json!({ "anyOf": any })),
            branches().prop_map(|one| json!({ "oneOf": one })),
            (
                prop::collection::btree_map(key(), inner.clone(), 0..4),
                prop::collection::vec(key(), 0..2),
                prop_oneof![
                    Just(None),
                    Just(Some(json!(false))),
                    inner.clone().prop_map(Some)
                ],
            )
                .prop_map(|(properties, required, additional)| {
                    let mut schema =
                        json!({"type": "object", "properties": properties, "required": required});
                    if let Some(additional) = additional {
                        schema["additionalProperties"] = additional;
                    }
                    schema
                }),
            (inner.clone(), 0u64..3)
                .prop_map(|(items, min)| json!({"items": items, "minItems": min})),
            prop::collection::vec(inner.clone(), 0..3)
                .prop_map(|prefix| json!({"prefixItems": prefix, "maxItems": 4})),
        ]
    })
    .boxed()
}

/// A root schema whose `$defs` may refer to each other and to themselves.
fn recursive_schema() -> impl Strategy<Value = Value> {
    (1usize..4).prop_flat_map(|defs| {
        (
            prop::collection::vec(schema_node(defs), defs),
            schema_node(defs),
        )
            .prop_map(|(bodies, root)| {
                let defs: Map<String, Value> = bodies
                    .into_iter()
                    .enumerate()
                    .map(|(i, body)| (format!("D{i}"), body))
                    .collect();
                json!({"$defs": defs, "allOf": [root]})
            })
    })
}

/// The shapes that broke it: a definition that is `allOf`/`anyOf` of `width` `$ref`s to itself
/// or to its neighbours, and a chain of `depth` definitions, each reached through a property.
fn adversarial_schema() -> impl Strategy<Value = Value> {
    (
        select(vec!["allOf", "anyOf", "oneOf"]),
        1usize..12,
        1usize..40,
        any::<bool>(),
    )
        .prop_map(|(combinator, width, depth, through_property)| {
            let mut defs = Map::new();
            for i in 0..depth {
                let next = format!("#/$defs/D{}", (i + 1) % depth);
                let same = format!("#/$defs/D{i}");
                let refs: Vec<Value> = (0..width)
                    .map(|w| json!({ "$ref": if w % 2 == 0 { &same } else { &next } }))
                    .collect();
                let mut body = json!({ combinator: refs });
                if through_property {
                    body["properties"] = json!({"x": {"$ref": next}, "n": {combinator: [{"$ref": same}, {"$ref": next}]}});
                }
                defs.insert(format!("D{i}"), body);
            }
            json!({"$defs": defs, "type": "object", "properties": {"x": {"$ref": "#/$defs/D0"}, "n": {"$ref": "#/$defs/D0"}}})
        })
}

fn nested_value() -> impl Strategy<Value = Value> {
    (0usize..60, json_value()).prop_map(|(depth, leaf)| {
        let mut value = leaf;
        for i in 0..depth {
            value = if i % 3 == 0 {
                json!({"x": value, "n": [1]})
            } else {
                json!({"n": value})
            };
        }
        value
    })
}

/// A schema node without `$ref`s, as the root of a schema.
fn simple_schema() -> impl Strategy<Value = Value> {
    schema_node(0).prop_map(|schema| match schema {
        Value::Object(_) => schema,
        other => json!({ "allOf": [other] }),
    })
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 256,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// Any schema, recursive or not, over any value: the check returns, within the budget.
    #[test]
    fn generated_schemas_return_within_budget(schema in recursive_schema(), args in json_value()) {
        let (_, visits) = run(object(&schema), &args, GENERATED_BUDGET);
        prop_assert!(visits <= GENERATED_BUDGET + SLACK, "{} visits", visits);
    }

    /// Self-referential, wide and deep schemas over deep values: within the budget, and
    /// judged (not given up on) thanks to the once-per-pair cache.
    #[test]
    fn adversarial_schemas_are_judged_within_budget(schema in adversarial_schema(), args in nested_value()) {
        let (verdict, visits) = run(object(&schema), &args, BUDGET);
        prop_assert!(visits <= BUDGET + SLACK, "{} visits", visits);
        prop_assert_ne!(verdict, Verdict::Unjudged);
    }

    /// Without `$ref` cycles, the budgeted validator says exactly what the old one said.
    #[test]
    fn simple_schemas_are_judged_as_before(schema in simple_schema(), args in json_value()) {
        let expected = match before::check(object(&schema), &args) {
            Ok(()) => Verdict::Valid,
            Err(message) => Verdict::Invalid(message),
        };
        prop_assert_eq!(check(object(&schema), &args), expected);
    }
}
