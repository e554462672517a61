#![allow(clippy::unwrap_used)]

use runbyte_plugin_api::policy::Policy;
use serde_json::{Value, json};

use super::ReadOnly;
use crate::glob::Pattern;

fn open(config: Value) -> Result<ReadOnly, String> {
    ReadOnly::open(&config.to_string())
}

/// The verdict on `server/tool` with these annotations: `Ok(())` or `Err(reason)`.
fn check(policy: &ReadOnly, target: &str, annotations: Value) -> Result<(), String> {
    let (server, tool) = target.split_once('/').unwrap();
    let call = json!({
        "server": server,
        "tool": tool,
        "arguments": {},
        "annotations": annotations,
        "context": {"session": "s", "execution": "e", "calls": 0},
    });
    let verdict: Value =
        serde_json::from_str(&policy.check_call(&call.to_string()).unwrap()).unwrap();
    match verdict["allow"].as_bool().unwrap() {
        true => {
            assert_eq!(verdict, json!({"allow": true}));
            Ok(())
        }
        false => Err(verdict["reason"].as_str().unwrap().to_owned()),
    }
}

fn read_only() -> Value {
    json!({"readOnlyHint": true})
}

fn destructive() -> Value {
    json!({"readOnlyHint": false, "destructiveHint": true})
}

fn write() -> Value {
    json!({"readOnlyHint": false, "destructiveHint": false})
}

#[test]
fn the_default_allows_read_only_tools_and_nothing_else() {
    let policy = open(json!({})).unwrap();
    assert_eq!(policy.limits("{}").unwrap(), "{}");
    assert_eq!(check(&policy, "demo/get_issue", read_only()), Ok(()));
    assert_eq!(
        check(&policy, "demo/close_issue", destructive()),
        Err("`demo/close_issue` is destructive (annotations: destructiveHint)".into())
    );
    assert_eq!(
        check(&policy, "demo/create_issue", write()),
        Err(
            "`demo/create_issue` is not read-only (annotations: readOnlyHint false) and matches \
             no allow pattern"
                .into()
        )
    );
}

#[test]
fn an_absent_read_only_hint_means_not_read_only() {
    let policy = open(json!({})).unwrap();
    for annotations in [
        Value::Null,
        json!({}),
        json!({"title": "x", "readOnlyHint": null}),
    ] {
        let reason = check(&policy, "a/b", annotations).unwrap_err();
        assert!(reason.contains("no readOnlyHint"), "{reason}");
        assert!(reason.contains("allow-unannotated is false"), "{reason}");
    }
    // A call without an `annotations` key at all is the same.
    let verdict = policy.check_call(r#"{"server":"a","tool":"b"}"#).unwrap();
    assert!(verdict.contains("no readOnlyHint"), "{verdict}");
    // A hint counts only when it is literally `true`.
    let reason = check(&policy, "a/b", json!({"readOnlyHint": "true"})).unwrap_err();
    assert!(reason.contains(r#"readOnlyHint "true""#), "{reason}");
}

#[test]
fn allow_unannotated_admits_tools_without_a_read_only_hint_but_not_destructive_ones() {
    let policy = open(json!({"allow-unannotated": true})).unwrap();
    assert_eq!(check(&policy, "a/b", Value::Null), Ok(()));
    assert_eq!(
        check(&policy, "a/b", json!({"openWorldHint": true})),
        Ok(())
    );
    // Annotated as a write: not "unannotated".
    assert!(check(&policy, "a/b", write()).is_err());
    // No readOnlyHint but destructive: still denied.
    let reason = check(&policy, "a/b", json!({"destructiveHint": true})).unwrap_err();
    assert!(reason.contains("is destructive"), "{reason}");
}

#[test]
fn deny_wins_over_allow_and_over_read_only() {
    let policy =
        open(json!({"allow": ["gh/*", "gh/delete_repo"], "deny": ["*/delete_*"]})).unwrap();
    assert_eq!(
        check(&policy, "gh/delete_repo", read_only()),
        Err("`gh/delete_repo` matches deny pattern `*/delete_*`".into())
    );
    assert_eq!(check(&policy, "gh/create_repo", write()), Ok(()));
}

#[test]
fn an_allow_glob_opens_writes_but_not_destructive_tools() {
    let policy = open(json!({"allow": ["demo/*"], "deny": ["*/delete_*"]})).unwrap();
    assert_eq!(check(&policy, "demo/create_issue", write()), Ok(()));
    assert_eq!(check(&policy, "demo/anything", Value::Null), Ok(()));
    assert_eq!(
        check(&policy, "demo/close_issue", destructive()),
        Err("`demo/close_issue` is destructive (annotations: destructiveHint)".into())
    );
    // Another server is not covered by the glob.
    assert!(check(&policy, "other/create_issue", write()).is_err());
}

#[test]
fn an_exact_allow_entry_admits_even_a_destructive_tool() {
    let policy = open(json!({"allow": ["demo/close_issue"]})).unwrap();
    assert_eq!(check(&policy, "demo/close_issue", destructive()), Ok(()));
    assert!(check(&policy, "demo/close_issue2", destructive()).is_err());
    // One wildcard makes it a glob, which does not.
    let policy = open(json!({"allow": ["demo/close_issu?"]})).unwrap();
    assert!(check(&policy, "demo/close_issue", destructive()).is_err());
    assert_eq!(check(&policy, "demo/close_issue", write()), Ok(()));
}

#[test]
fn contradictory_hints_count_as_destructive() {
    let policy = open(json!({})).unwrap();
    let reason = check(
        &policy,
        "a/b",
        json!({"readOnlyHint": true, "destructiveHint": true}),
    )
    .unwrap_err();
    assert!(reason.contains("is destructive"), "{reason}");
}

#[test]
fn globs_match_whole_names_with_star_and_question_mark() {
    let p = |text: &str| Pattern::parse(text).unwrap();
    assert!(p("*/*").matches("a/b"));
    assert!(p("*/*").matches("/"));
    assert!(p("demo/*").matches("demo/"));
    assert!(p("demo/*").matches("demo/a/b"));
    assert!(!p("demo/*").matches("demos/a"));
    assert!(!p("demo/*").matches("xdemo/a"));
    assert!(p("*/delete_*").matches("gh/delete_repo"));
    assert!(!p("*/delete_*").matches("gh/undelete_repo"));
    assert!(p("*/*_issue").matches("demo/close_issue"));
    assert!(p("a/?").matches("a/é"));
    assert!(!p("a/?").matches("a/"));
    assert!(!p("a/?").matches("a/bc"));
    assert!(p("a/b*c*d").matches("a/bxxcxxcd"));
    assert!(!p("a/b*c*d").matches("a/bxxcxxc"));
    assert!(p("A/b").matches("A/b"));
    assert!(!p("A/b").matches("a/b"));
    // A long hostile name is matched in polynomial time.
    let long = format!("s/{}", "a".repeat(5000));
    assert!(!p("s/*a*a*a*a*a*a*a*b").matches(&long));
}

#[test]
fn unknown_keys_and_bad_patterns_are_refused_by_name() {
    let error = open(json!({"alow": ["a/b"]})).unwrap_err();
    assert!(error.starts_with("[sandbox.readonly]"), "{error}");
    assert!(error.contains("unknown field `alow`"), "{error}");
    let error = open(json!({"allow-unannotated": "yes"})).unwrap_err();
    assert!(error.contains("invalid type"), "{error}");
    let error = open(json!({"allow": "demo/*"})).unwrap_err();
    assert!(error.contains("invalid type"), "{error}");

    let error = open(json!({"deny": ["a/b", "delete_*"]})).unwrap_err();
    assert_eq!(
        error,
        "[sandbox.readonly] `deny[1]` = `delete_*`: a pattern matches `server/tool` and must \
         contain a `/`"
    );
    let error = open(json!({"allow": ["gh/[ab]*"]})).unwrap_err();
    assert!(error.contains("`allow[0]` = `gh/[ab]*`"), "{error}");
    assert!(error.contains("`[` is not supported"), "{error}");
    let error = open(json!({"allow": [""]})).unwrap_err();
    assert!(error.contains("cannot be empty"), "{error}");
    let error = open(json!({"allow": ["a/{b,c}"]})).unwrap_err();
    assert!(error.contains("`{` is not supported"), "{error}");
}

#[test]
fn a_malformed_call_is_an_error_not_a_verdict() {
    let policy = open(json!({})).unwrap();
    assert!(
        policy
            .check_call("not json")
            .unwrap_err()
            .contains("bad call JSON")
    );
    let error = policy.check_call(r#"{"server":"a"}"#).unwrap_err();
    assert_eq!(error, "the call has no `tool` string");
}

#[test]
fn ask_puts_a_refused_call_to_the_user_but_never_a_denied_one() {
    let policy = open(json!({"ask": true, "deny": ["*/delete_*"]})).unwrap();
    let verdict = |target: &str, annotations: Value| -> Value {
        let (server, tool) = target.split_once('/').unwrap();
        let call = json!({"server": server, "tool": tool, "arguments": {}, "annotations": annotations,
            "context": {"session": "s", "execution": "e", "calls": 0}});
        serde_json::from_str(&policy.check_call(&call.to_string()).unwrap()).unwrap()
    };
    assert_eq!(verdict("demo/read", read_only()), json!({"allow": true}));
    let asked = verdict("demo/create", write());
    assert_eq!(asked["allow"], false);
    assert!(
        asked["ask"].as_str().unwrap().contains("`demo/create`"),
        "{asked}"
    );
    assert!(asked["reason"].as_str().unwrap().contains("not read-only"));
    let asked = verdict("demo/wipe", destructive());
    assert!(asked["ask"].is_string(), "{asked}");
    // A deny pattern is never asked.
    let denied = verdict("demo/delete_all", write());
    assert!(denied.get("ask").is_none(), "{denied}");
    assert!(denied["reason"].as_str().unwrap().contains("deny pattern"));
    // Without `ask`, the same call is denied.
    let strict = open(json!({})).unwrap();
    assert!(check(&strict, "demo/create", write()).is_err());
}

#[test]
fn require_pinned_denies_what_no_person_has_seen() {
    let policy = open(json!({"require-pinned": true})).unwrap();
    let verdict = |pin: Option<&str>| -> Value {
        let mut context = json!({"session": "s", "execution": "e", "calls": 0});
        if let Some(pin) = pin {
            context["pin"] = json!(pin);
        }
        let call = json!({"server": "demo", "tool": "read", "arguments": {},
            "annotations": read_only(), "context": context});
        serde_json::from_str(&policy.check_call(&call.to_string()).unwrap()).unwrap()
    };
    assert_eq!(verdict(Some("pinned")), json!({"allow": true}));
    assert_eq!(verdict(Some("approved")), json!({"allow": true}));
    // Unpinned, changed, not said (a host older than pins) or a state not known: denied, even
    // for a read-only tool.
    for pin in [Some("unpinned"), Some("changed"), None, Some("later")] {
        let denied = verdict(pin);
        assert_eq!(denied["allow"], false, "{pin:?}: {denied}");
        assert!(
            denied["reason"]
                .as_str()
                .unwrap()
                .contains("require-pinned"),
            "{denied}"
        );
    }
    // Off by default: the pin state is not looked at.
    assert!(check(&open(json!({})).unwrap(), "demo/read", read_only()).is_ok());
}
