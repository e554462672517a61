#![allow(clippy::unwrap_used)]

use serde_json::json;

use super::{shape::*, *};

fn shape(value: Value) -> Shape {
    Shape::of(&value)
}

fn merged(values: &[Value]) -> Shape {
    values.iter().map(Shape::of).reduce(Shape::merge).unwrap()
}

#[test]
fn a_shape_keeps_types_and_names_never_values() {
    let value = json!({"id": 7, "title": "secret title", "open": true, "labels": ["bug"],
                       "author": {"login": "ann", "name": null}});
    let schema = shape(value).schema();
    assert_eq!(
        schema,
        json!({"type": "object", "properties": {
            "author": {"type": "object", "properties": {"login": {"type": "string"}, "name": {"type": "null"}},
                       "required": ["login", "name"]},
            "id": {"type": "number"},
            "labels": {"type": "array", "items": {"type": "string"}},
            "open": {"type": "boolean"},
            "title": {"type": "string"}},
          "required": ["author", "id", "labels", "open", "title"]})
    );
    let text = serde_json::to_string(&shape(json!({"k": "secret title", "n": 12345}))).unwrap();
    assert!(
        !text.contains("secret") && !text.contains("12345"),
        "{text}"
    );
}

#[test]
fn a_field_missing_in_some_calls_is_optional_and_types_unite() {
    let shape = merged(&[
        json!({"a": 1, "b": "x"}),
        json!({"a": 2, "c": true}),
        json!({"a": null, "b": "y"}),
    ]);
    assert_eq!(
        shape.schema(),
        json!({"type": "object", "properties": {
            "a": {"anyOf": [{"type": "null"}, {"type": "number"}]},
            "b": {"type": "string"},
            "c": {"type": "boolean"}},
          "required": ["a"]})
    );
    // Merging is order-blind and idempotent.
    let other = merged(&[
        json!({"a": null, "b": "y"}),
        json!({"a": 2, "c": true}),
        json!({"a": 1, "b": "x"}),
    ]);
    assert_eq!(shape, other);
    assert_eq!(shape.clone().merge(shape.clone()), shape);
}

#[test]
fn arrays_merge_their_elements() {
    let shape = shape(json!([{"id": 1}, {"id": 2, "tag": "t"}, []]));
    assert_eq!(
        shape.schema(),
        json!({"type": "array", "items": {"anyOf": [
            {"type": "array"},
            {"type": "object", "properties": {"id": {"type": "number"}, "tag": {"type": "string"}},
             "required": ["id"]}]}})
    );
    assert_eq!(
        merged(&[json!([]), json!(["a"])]).schema(),
        json!({"type": "array", "items": {"type": "string"}})
    );
}

#[test]
fn too_many_kinds_are_unknown() {
    let shape = shape(json!([1, "a", true, null, [1]]));
    assert_eq!(shape.schema(), json!({"type": "array", "items": {}}));
}

#[test]
fn depth_fields_keys_and_size_are_bounded() {
    let mut deep = json!(1);
    for _ in 0..100 {
        deep = json!({ "d": deep });
    }
    let cut = shape(deep);
    assert!(cut.depth() <= MAX_DEPTH + 1, "{}", cut.depth());
    assert!(cut.within_bounds());

    // Many keys, or keys that are data: a map of the values' shape, keys not kept.
    let wide: serde_json::Map<String, Value> = (0..500)
        .map(|i| (format!("user{i}"), json!({"n": i})))
        .collect();
    let wide = shape(Value::Object(wide));
    assert_eq!(
        wide.schema(),
        json!({"type": "object", "additionalProperties":
            {"type": "object", "properties": {"n": {"type": "number"}}, "required": ["n"]}})
    );
    let long_key = "k".repeat(MAX_KEY_BYTES + 1);
    assert!(matches!(shape(json!({ long_key: 1 })), Shape::Map { .. }));

    // Objects that keep adding fields end as a map too.
    let mut so_far = shape(json!({}));
    for i in 0..(MAX_FIELDS + 5) {
        so_far = so_far.merge(shape(json!({ format!("f{i}"): i })));
    }
    assert!(matches!(so_far, Shape::Map { .. }), "{so_far:?}");

    // A megabyte answer costs what its first elements cost: the time of 200,000 elements is
    // that of 32 (a loose bound: a debug build on a loaded machine).
    let huge = Value::Array((0..200_000).map(|i| json!({"i": i, "s": "x"})).collect());
    let small = Value::Array(
        (0..MAX_SAMPLED)
            .map(|i| json!({"i": i, "s": "x"}))
            .collect(),
    );
    let time = |value: &Value| {
        let started = std::time::Instant::now();
        for _ in 0..20 {
            assert!(Shape::of(value).within_bounds());
        }
        started.elapsed()
    };
    let (huge, small) = (time(&huge), time(&small));
    assert!(
        huge < small * 20 + std::time::Duration::from_millis(20),
        "{huge:?} vs {small:?}"
    );

    // Past the node bound, the whole shape is unknown.
    let fields: serde_json::Map<String, Value> = (0..MAX_FIELDS)
        .map(|i| {
            (
                format!("f{i}"),
                json!({"a": 1, "b": 2, "c": 3, "d": 4, "e": 5}),
            )
        })
        .collect();
    assert_eq!(
        shape(json!({})).merge(shape(Value::Object(fields))),
        Shape::Unknown
    );
}

#[test]
fn hostile_keys_stay_keys() {
    let value: Value =
        serde_json::from_str(r#"{"__proto__": {"x": 1}, "constructor": 1, "a b\"*/": 2, "": 3}"#)
            .unwrap();
    let schema = shape(value).schema();
    let properties = schema["properties"].as_object().unwrap();
    let keys: Vec<&str> = properties.keys().map(String::as_str).collect();
    assert_eq!(keys, ["", "__proto__", "a b\"*/", "constructor"]);
}

fn tool(name: &str, description: &str) -> Tool {
    let schema = json!({"type": "object", "properties": {"id": {"type": "number"}}});
    Tool::new(
        name.to_owned(),
        description.to_owned(),
        Arc::new(schema.as_object().unwrap().clone()),
    )
}

use std::sync::Arc;

fn config(extra: &str) -> Config {
    let text = format!(
        "[servers.demo]\ncommand = \"x\"\n[servers.off]\ncommand = \"x\"\ninfer-results = false\n{extra}"
    );
    Config::parse(&text, Path::new("t.toml"), Path::new("/")).unwrap()
}

#[tokio::test]
async fn a_call_is_recorded_shown_and_saved_and_a_changed_tool_starts_over() {
    let dir = std::env::temp_dir().join(format!("runbyte-infer-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let inferred = Inferred::new(&config(""), Some(&dir));
    let mut changes = inferred.take_changes().unwrap();
    let get = tool("get", "Get one.");

    inferred.record("demo", &get, &json!({"id": 1, "title": "t"}));
    inferred.record("off", &get, &json!({"id": 1}));
    inferred.record("demo", &get, &json!("plain text"));
    assert_eq!(changes.try_recv().unwrap(), "demo");
    assert!(changes.try_recv().is_err(), "opted out, or not structured");
    let schema = inferred.schema_for("demo", &get).unwrap();
    assert_eq!(schema[INFERRED_KEY], json!({"calls": 1}));
    assert_eq!(schema["required"], json!(["id", "title"]));
    assert!(inferred.schema_for("off", &get).is_none());

    // The same shape again: told only when the count reaches a power of two.
    inferred.record("demo", &get, &json!({"id": 2, "title": "u"}));
    assert!(changes.try_recv().is_ok());
    inferred.record("demo", &get, &json!({"id": 3, "title": "v"}));
    assert!(changes.try_recv().is_err());
    inferred.record("demo", &get, &json!({"id": 4}));
    assert!(changes.try_recv().is_ok(), "the shape changed");

    inferred.save("demo");
    let again = Inferred::new(&config(""), Some(&dir));
    assert_eq!(again.learned("demo"), inferred.learned("demo"));
    assert_eq!(again.learned("demo")["get"].calls, 4);

    // Another description (or input schema) is another tool.
    let changed = tool("get", "Get one issue.");
    assert!(again.schema_for("demo", &changed).is_none());
    assert!(again.learned("demo").is_empty());

    // A corrupt file is ignored.
    let file = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .find(|e| e.file_name().to_string_lossy().starts_with("demo-"))
        .unwrap()
        .path();
    std::fs::write(&file, "{not json").unwrap();
    assert!(
        Inferred::new(&config(""), Some(&dir))
            .learned("demo")
            .is_empty()
    );
    std::fs::write(&file, r#"{"version":1,"server":"other","tools":{}}"#).unwrap();
    assert!(
        Inferred::new(&config(""), Some(&dir))
            .learned("demo")
            .is_empty()
    );

    // A default of `false` is turned back on per server.
    let off = Inferred::new(
        &config(
            "[server]\ninfer-results = false\n[servers.on]\ncommand = \"x\"\ninfer-results = true\n",
        ),
        None,
    );
    off.record("demo", &get, &json!({"a": 1}));
    off.record("on", &get, &json!({"a": 1}));
    assert!(off.learned("demo").is_empty());
    assert_eq!(off.learned("on").len(), 1);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_shape_that_keeps_changing_is_given_up() {
    let inferred = Inferred::new(&config(""), None);
    let get = tool("get", "Get one.");
    for i in 0..=MAX_CHANGES + 1 {
        inferred.record("demo", &get, &json!({ format!("f{}", i % 60): i, "k": i }));
    }
    assert!(inferred.learned("demo")["get"].shape.is_none());
    assert!(inferred.schema_for("demo", &get).is_none());
}

#[test]
fn a_tool_with_its_own_schema_is_not_recorded() {
    let inferred = Inferred::new(&config(""), None);
    let mut typed = tool("typed", "Typed.");
    typed.output_schema = Some(Arc::new(serde_json::Map::new()));
    inferred.record("demo", &typed, &json!({"a": 1}));
    assert!(inferred.learned("demo").is_empty());
}
