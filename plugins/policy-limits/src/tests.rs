#![allow(clippy::unwrap_used)]

use runbyte_plugin_api::policy::Policy;
use serde_json::{Value, json};

use super::Limits;

fn open(config: Value) -> Result<Limits, String> {
    Limits::open(&config.to_string())
}

#[test]
fn an_empty_table_sets_no_limits_and_allows_every_call() {
    let policy = open(json!({})).unwrap();
    // No limits, and no call it judges.
    assert_eq!(
        policy.limits("{}").unwrap(),
        r#"{"judged-calls":{"servers":[]}}"#
    );
    let verdict = policy
        .check_call(r#"{"server":"a","tool":"b","context":{}}"#)
        .unwrap();
    assert_eq!(verdict, r#"{"allow":true}"#);
}

#[test]
fn configured_limits_are_reported() {
    let policy = open(json!({"timeout-ms": 5000, "memory-mb": 32, "isolation": "thread"})).unwrap();
    let limits: Value = serde_json::from_str(&policy.limits("{}").unwrap()).unwrap();
    assert_eq!(
        limits,
        json!({"timeout-ms": 5000, "memory-mb": 32, "isolation": "thread",
               "judged-calls": {"servers": []}})
    );
}

#[test]
fn a_zero_memory_limit_is_refused_by_name() {
    let error = open(json!({"memory-mb": 0})).err().unwrap();
    assert!(error.contains("sandbox.limits.memory-mb = 0"), "{error}");
}

#[test]
fn an_unknown_key_is_refused_by_name() {
    let error = open(json!({"memory": 3})).err().unwrap();
    assert!(error.contains("unknown field `memory`"), "{error}");
    let error = open(json!({"servers": {"gh": {"max-calls": 3}}}))
        .err()
        .unwrap();
    assert!(error.contains("unknown field `max-calls`"), "{error}");
}

#[test]
fn a_bad_override_names_its_path() {
    let error = open(json!({"servers": {"gh": {"tools": {"x": {"call-timeout-ms": 0}}}}}))
        .err()
        .unwrap();
    assert!(
        error.contains("sandbox.limits.servers.gh.tools.x.call-timeout-ms = 0"),
        "{error}"
    );
}

#[test]
fn a_server_budget_denies_once_spent() {
    let policy = open(json!({"servers": {"gh": {"max-tool-calls": 2}}})).unwrap();
    let call = |n: u64| {
        let call = json!({"server": "gh", "tool": "t", "context": {"calls-to-server": n}});
        serde_json::from_str::<Value>(&policy.check_call(&call.to_string()).unwrap()).unwrap()
    };
    assert_eq!(call(1)["allow"], json!(true));
    let denied = call(2);
    assert_eq!(denied["allow"], json!(false));
    assert_eq!(
        denied["reason"],
        json!("server `gh` allows at most 2 tool calls per execution")
    );
}

#[test]
fn a_tool_override_sets_its_call_timeout() {
    let policy = open(json!({"servers": {"gh": {
        "call-timeout-ms": 1000,
        "tools": {"slow": {"call-timeout-ms": 60000}}
    }}}))
    .unwrap();
    let verdict = |tool: &str| {
        let call = json!({"server": "gh", "tool": tool, "context": {}});
        serde_json::from_str::<Value>(&policy.check_call(&call.to_string()).unwrap()).unwrap()
    };
    assert_eq!(verdict("slow")["timeout-ms"], json!(60000));
    assert_eq!(verdict("fast")["timeout-ms"], json!(1000));
}

#[test]
fn it_judges_only_the_calls_of_servers_it_has_limits_for() {
    let judged = |config: Value| -> Value {
        let answer: Value =
            serde_json::from_str(&open(config).unwrap().limits("{}").unwrap()).unwrap();
        answer["judged-calls"].clone()
    };
    assert_eq!(judged(json!({})), json!({"servers": []}));
    assert_eq!(judged(json!({"timeout-ms": 5000})), json!({"servers": []}));
    assert_eq!(
        judged(json!({"servers": {"gh": {"max-tool-calls": 2}, "db": {}}})),
        json!({"servers": ["db", "gh"]})
    );
}

#[test]
fn the_stack_range_is_the_hosts() {
    // 16 KiB and 1 GiB were accepted here once, and the host clamped them without a word.
    for stack in [16, 63, 1024 * 1024] {
        let error = open(json!({"stack-kb": stack})).err().unwrap();
        assert_eq!(
            error,
            format!(
                "`sandbox.limits.stack-kb = {stack}` is out of range: it must be 64 to 524288 (KiB)"
            )
        );
    }
    for stack in [64, 512 * 1024] {
        open(json!({"stack-kb": stack})).unwrap();
    }
}

#[test]
fn every_range_is_the_wire_table() {
    for range in runbyte_plugin_api::wire::RANGES {
        open(json!({ range.key: range.min })).unwrap();
        open(json!({ range.key: range.max })).unwrap();
        let error = open(json!({ range.key: range.max + 1 })).err().unwrap();
        assert!(
            error.contains(&format!("sandbox.limits.{}", range.key)),
            "{error}"
        );
        assert!(
            error.contains(&format!("{} to {}", range.min, range.max)),
            "{error}"
        );
        if range.min > 0 {
            assert!(
                open(json!({ range.key: range.min - 1 })).is_err(),
                "{}",
                range.key
            );
        }
    }
    let error = open(json!({"servers": {"gh": {"max-tool-calls": 20_000_000}}}))
        .err()
        .unwrap();
    assert!(
        error.contains("`sandbox.limits.servers.gh.max-tool-calls = 20000000` is out of range"),
        "{error}"
    );
}
