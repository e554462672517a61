use serde_json::{Value, json};

use super::*;

/// `tools/list` as Runbyte gave it before the tools were typed values, pretty-printed: clients
/// and `scripts/token-bench` see these bytes.
const TODAY: &str = include_str!("tools_list.json");

#[test]
fn tools_list_gives_todays_bytes() {
    let listed = serde_json::to_string_pretty(&tools()).expect("tools encode");
    assert_eq!(listed, TODAY);
    let compact: Value = serde_json::from_str(TODAY).expect("the fixture is JSON");
    assert_eq!(
        serde_json::to_string(&tools()).expect("tools encode"),
        compact.to_string()
    );
}

#[test]
fn tools_list_has_all_five_once_and_the_names_come_from_it() {
    let names: Vec<String> = tools().into_iter().map(|tool| tool.name.into()).collect();
    assert_eq!(
        names,
        [
            "list_directory",
            "read_file",
            "execute_code",
            "search_tools",
            "save_skill"
        ]
    );
    assert_eq!(NAMES.to_vec(), names);
    let message = unknown_tool("nope").message;
    assert_eq!(
        message,
        "unknown tool `nope`; Runbyte's tools are list_directory, read_file, execute_code, \
         search_tools, save_skill"
    );
}

/// A value of each argument's type: the least integer, a non-empty string.
fn sample(spec: &Spec) -> Value {
    let object = spec
        .args
        .iter()
        .map(|arg| {
            let value = match arg.kind {
                Kind::String => json!(format!("{} text", arg.name)),
                Kind::Boolean => json!(true),
                Kind::Integer { minimum, .. } => json!(minimum),
                Kind::Object => json!({"type": "object"}),
            };
            (arg.name.to_owned(), value)
        })
        .collect();
    Value::Object(object)
}

/// The parsed call's arguments, encoded again under their wire names.
fn fields(tool: &OwnTool<'_>) -> Value {
    let encoded = match tool {
        OwnTool::ListDirectory(call) => serde_json::to_value(call),
        OwnTool::ReadFile(call) => serde_json::to_value(call),
        OwnTool::ExecuteCode(call) => serde_json::to_value(call),
        OwnTool::SearchTools(call) => serde_json::to_value(call),
        OwnTool::SaveSkill(call) => serde_json::to_value(call),
    };
    encoded.expect("arguments encode")
}

#[test]
fn every_schema_accepts_its_structs_fields_and_only_those() {
    for spec in &SPECS {
        let arguments = sample(spec);
        let parsed = OwnTool::parse(spec.name, &arguments)
            .unwrap_or_else(|why| panic!("{}: {why:?}", spec.name));
        // Every field of the struct is an argument of the schema, under the same name, and
        // every argument reaches a field.
        assert_eq!(fields(&parsed), arguments, "{}", spec.name);
        let schema = spec.input_schema();
        let properties = schema["properties"].as_object().expect("properties");
        let keys: Vec<&str> = properties.keys().map(String::as_str).collect();
        let args: Vec<&str> = spec.args.iter().map(|arg| arg.name).collect();
        assert_eq!(keys, args, "{}", spec.name);
    }
}

#[test]
fn a_missing_or_mistyped_required_argument_is_refused_in_todays_words() {
    let refused = |name: &str, arguments: Value| match OwnTool::parse(name, &arguments) {
        Err(NotOwn::Arguments(why)) => why.to_string(),
        other => panic!("{name} {arguments}: {other:?}"),
    };
    let required = "is required and must be a string";
    assert_eq!(
        refused("list_directory", json!({})),
        format!("`path` {required}")
    );
    assert_eq!(
        refused("read_file", json!({"path": 3})),
        format!("`path` {required}")
    );
    assert_eq!(
        refused("execute_code", json!({"code": null})),
        format!("`code` {required}")
    );
    assert_eq!(
        refused("search_tools", json!({"limit": 3})),
        format!("`query` {required}")
    );
    // save_skill names the first missing one, in the schema's order.
    assert_eq!(
        refused("save_skill", json!({})),
        format!("`name` {required}")
    );
    assert_eq!(
        refused("save_skill", json!({"name": "a", "code": "x"})),
        format!("`description` {required}")
    );
    assert_eq!(
        refused("save_skill", json!({"name": "a", "description": "d"})),
        format!("`code` {required}")
    );
}

#[test]
fn an_optional_argument_of_the_wrong_type_counts_as_absent() {
    let arguments = json!({"path": "/servers", "withDescriptions": "yes", "extra": 1});
    let Ok(OwnTool::ListDirectory(call)) = OwnTool::parse("list_directory", &arguments) else {
        panic!("list_directory refused");
    };
    assert_eq!((call.path, call.with_descriptions), ("/servers", false));

    let limit = |limit: Value| {
        let arguments = json!({"query": "q", "limit": limit});
        match OwnTool::parse("search_tools", &arguments) {
            Ok(OwnTool::SearchTools(call)) => call.limit(),
            other => panic!("{other:?}"),
        }
    };
    assert_eq!(limit(json!(7)), 7);
    assert_eq!(limit(json!(0)), 1);
    assert_eq!(limit(json!(1000)), 50);
    assert_eq!(limit(json!(-1)), 10);
    assert_eq!(limit(json!(5.0)), 10);
    assert_eq!(limit(json!("5")), 10);
    assert_eq!(limit(Value::Null), 10);

    let arguments = json!({"name": "a", "description": "d", "code": "c", "args": null,
        "overwrite": "true"});
    let Ok(OwnTool::SaveSkill(call)) = OwnTool::parse("save_skill", &arguments) else {
        panic!("save_skill refused");
    };
    assert_eq!((call.args, call.overwrite), (None, false));
}

#[test]
fn another_name_is_not_runbytes() {
    let arguments = json!({"path": "/"});
    assert!(matches!(
        OwnTool::parse("github_list_directory", &arguments),
        Err(NotOwn::Unknown)
    ));
    assert!(matches!(
        OwnTool::parse("List_Directory", &arguments),
        Err(NotOwn::Unknown)
    ));
}
