#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;

use clap::Parser as _;

use super::{ODD_NAMES, added_tool, fixed_tools};
use crate::calls::is_normal_tool;
use crate::cli::{Cli, Settings};

fn all_modes(tools: usize) -> Settings {
    let argv = [
        "runbyte-test-server",
        "--mode",
        "odd-names,hostile-metadata,complex-schemas",
        "--tools",
        &tools.to_string(),
    ];
    Settings::try_from(Cli::try_parse_from(argv).unwrap()).unwrap()
}

#[test]
fn names_are_unique_across_every_mode() {
    let tools = fixed_tools(&all_modes(30));
    let names: BTreeSet<&str> = tools.iter().map(|tool| tool.name.as_ref()).collect();
    assert_eq!(names.len(), tools.len());
    for odd in ODD_NAMES {
        assert!(names.contains(odd), "{odd} missing");
    }
    assert!(names.contains("tool_0000") && names.contains("tool_0029"));
    assert!(!names.contains("tool_0030"));
}

#[test]
fn every_normal_tool_is_listed_and_has_behaviour() {
    let tools = fixed_tools(&Settings::try_from(Cli::try_parse_from(["x"]).unwrap()).unwrap());
    assert!(tools.iter().all(|tool| is_normal_tool(&tool.name)));
    assert_eq!(tools.len(), 21);
}

#[test]
fn every_input_schema_is_an_object_schema() {
    for tool in fixed_tools(&all_modes(10)) {
        assert_eq!(
            tool.input_schema.get("type").unwrap(),
            "object",
            "{}",
            tool.name
        );
        serde_json::to_string(&tool).unwrap();
    }
}

#[test]
fn added_tools_are_numbered() {
    assert_eq!(added_tool(3).name, "added_3");
}

#[test]
fn generated_only_serves_exactly_the_generated_tools() {
    let argv = ["x", "--mode", "generated-only", "--tools", "3"];
    let settings = Settings::try_from(Cli::try_parse_from(argv).unwrap()).unwrap();
    let names: Vec<String> = fixed_tools(&settings)
        .iter()
        .map(|tool| tool.name.to_string())
        .collect();
    assert_eq!(names, ["tool_0000", "tool_0001", "tool_0002"]);
}
