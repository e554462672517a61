#![allow(clippy::unwrap_used)]

use clap::Parser as _;

use super::State;
use crate::cli::{Cli, Settings};

fn state(args: &[&str]) -> std::sync::Arc<State> {
    let argv = std::iter::once("runbyte-test-server").chain(args.iter().copied());
    State::new(Settings::try_from(Cli::try_parse_from(argv).unwrap()).unwrap())
}

#[test]
fn without_a_page_size_one_page_holds_every_tool() {
    let state = state(&["--tools", "40"]);
    let page = state.page(None).unwrap();
    assert_eq!(page.tools.len(), 21 + 40);
    assert!(page.next_cursor.is_none());
}

#[test]
fn pages_follow_the_cursor_to_the_last_tool() {
    let state = state(&["--tools", "25", "--page-size", "10"]);
    let mut cursor = None;
    let mut names = Vec::new();
    let mut pages = 0;
    loop {
        let page = state.page(cursor.as_deref()).unwrap();
        assert!(page.tools.len() <= 10);
        names.extend(page.tools.into_iter().map(|tool| tool.name.to_string()));
        pages += 1;
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    assert_eq!(pages, 5);
    assert_eq!(names.len(), 46);
    assert_eq!(names.last().unwrap(), "tool_0024");
}

#[test]
fn a_bad_cursor_is_invalid_params_naming_it() {
    let state = state(&["--page-size", "5"]);
    for cursor in ["abc", "999", "-1"] {
        let error = state.page(Some(cursor)).unwrap_err();
        assert_eq!(error.code, rmcp::model::ErrorCode::INVALID_PARAMS);
        assert!(error.message.contains(cursor), "{}", error.message);
    }
}

#[test]
fn added_tools_are_listed_and_echo_while_normal_ones_do_not() {
    let state = state(&["--mode", "odd-names"]);
    assert_eq!(state.add_tool(), "added_1");
    assert_eq!(state.add_tool(), "added_2");
    assert!(state.all_tools().iter().any(|tool| tool.name == "added_2"));
    assert!(state.is_echo_tool("added_1"));
    assert!(state.is_echo_tool("with space"));
    assert!(!state.is_echo_tool("echo"));
    assert!(!state.is_echo_tool("nope"));
}
