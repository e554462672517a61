#![allow(clippy::unwrap_used)]

use std::borrow::Cow;

use serde_json::{Value, json};

use super::*;

#[test]
fn verdicts_are_written_as_documented() {
    assert_eq!(Verdict::allow().to_json(), r#"{"allow":true}"#);
    let timed = Verdict::Allow {
        timeout_ms: Some(1500),
    };
    assert_eq!(timed.to_json(), r#"{"allow":true,"timeout-ms":1500}"#);
    assert_eq!(
        Verdict::deny("too many").to_json(),
        r#"{"allow":false,"reason":"too many"}"#
    );
    let ask = Verdict::Ask {
        question: "Delete repo x?".into(),
        reason: None,
    };
    assert_eq!(ask.to_json(), r#"{"allow":false,"ask":"Delete repo x?"}"#);
    for verdict in [Verdict::allow(), timed, Verdict::deny("no"), ask] {
        let read: Verdict = serde_json::from_str(&verdict.to_json()).unwrap();
        assert_eq!(read, verdict);
    }
}

#[test]
fn a_verdict_is_a_denial_unless_it_plainly_allows() {
    let read = |answer: Value| Verdict::from_value(&answer);
    let denied = Verdict::Deny { reason: None };
    assert_eq!(read(json!(true)), denied);
    assert_eq!(
        read(json!([true])),
        denied,
        "an array is not read by position"
    );
    assert_eq!(read(json!({})), denied);
    assert_eq!(read(json!({"allow": "yes"})), denied);
    assert_eq!(read(json!({"allow": 1})), denied);
    assert_eq!(
        read(json!({"allow": false, "reason": 5})),
        denied,
        "a reason that is not text counts as none"
    );
    assert_eq!(
        read(json!({"allow": true, "timeout-ms": "soon", "extra": 1})),
        Verdict::allow(),
        "a timeout that is not a number is ignored, and so are unknown keys"
    );
    assert_eq!(
        read(json!({"allow": true, "timeout-ms": -5})),
        Verdict::allow()
    );
    assert_eq!(
        read(json!({"allow": true, "ask": "sure?"})),
        Verdict::allow(),
        "allow wins, as on a host that predates `ask`"
    );
    assert_eq!(
        read(json!({"ask": "sure?", "reason": "needs a person"})),
        Verdict::Ask {
            question: "sure?".into(),
            reason: Some("needs a person".into())
        }
    );
}

#[test]
fn limits_read_and_write_every_documented_key() {
    let keys: Vec<&str> = Limits::keys().collect();
    assert_eq!(
        keys,
        [
            "timeout-ms",
            "memory-mb",
            "stack-kb",
            "max-tool-calls",
            "max-in-flight",
            "call-timeout-ms",
            "max-output-bytes",
            "isolation"
        ]
    );
    let written = serde_json::to_value(Limits::DEFAULTS).unwrap();
    let written_keys: Vec<&str> = written
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(written_keys, keys);
    assert_eq!(
        written,
        json!({"timeout-ms": 30000, "memory-mb": 64, "stack-kb": 1024, "max-tool-calls": 1000,
               "max-in-flight": 16, "call-timeout-ms": 30000, "max-output-bytes": 65536,
               "isolation": "process"})
    );
    let read: Limits = serde_json::from_value(written).unwrap();
    assert_eq!(read, Limits::DEFAULTS);
    assert_eq!(serde_json::to_string(&Limits::default()).unwrap(), "{}");
    assert!(Limits::is_key("stack-kb") && !Limits::is_key("memory"));
}

#[test]
fn limits_ignore_unknown_keys_and_name_a_bad_value() {
    let read: Limits =
        serde_json::from_str(r#"{"later-key": [1], "memory-mb": 8, "isolation": "thread"}"#)
            .unwrap();
    assert_eq!(
        read,
        Limits {
            memory_mb: Some(8),
            isolation: Some(Isolation::Thread),
            ..Limits::default()
        }
    );
    let error = serde_json::from_value::<Limits>(json!({"timeout-ms": "soon"})).unwrap_err();
    assert_eq!(
        error.to_string(),
        "`timeout-ms` must be a positive integer, got \"soon\""
    );
    let error = serde_json::from_value::<Limits>(json!({"isolation": "vm"})).unwrap_err();
    assert_eq!(
        error.to_string(),
        "`isolation` must be \"process\" or \"thread\", got \"vm\""
    );
    assert!(serde_json::from_value::<Limits>(json!([1])).is_err());
}

#[test]
fn the_stricter_of_two_limits_is_the_smaller_and_process_beats_thread() {
    let a = Limits {
        timeout_ms: Some(60_000),
        memory_mb: Some(128),
        isolation: Some(Isolation::Thread),
        ..Limits::default()
    };
    let b = Limits {
        timeout_ms: Some(5000),
        max_tool_calls: Some(5),
        ..Limits::default()
    };
    let both = a.stricter(&b);
    assert_eq!(both.timeout_ms, Some(5000));
    assert_eq!(both.memory_mb, Some(128));
    assert_eq!(both.max_tool_calls, Some(5));
    assert_eq!(both.isolation, Some(Isolation::Thread));
    let process = Limits {
        isolation: Some(Isolation::Process),
        ..Limits::default()
    };
    assert_eq!(both.stricter(&process).isolation, Some(Isolation::Process));
    assert_eq!(process.stricter(&both).isolation, Some(Isolation::Process));
    let filled = b.or(&Limits::DEFAULTS);
    assert_eq!(filled.timeout_ms, Some(5000));
    assert_eq!(filled.memory_mb, Limits::DEFAULTS.memory_mb);
    assert_eq!(filled.isolation, Some(Isolation::Process));
}

#[test]
fn a_call_is_written_in_the_documented_order_and_read_from_a_part() {
    let arguments = json!({"q": "x"});
    let call = Call {
        server: "gh".into(),
        tool: "search".into(),
        arguments: Cow::Borrowed(&arguments),
        annotations: None,
        context: CallContext {
            session: "s".into(),
            execution: "x1".into(),
            calls: 3,
            calls_to_server: 2,
            calls_to_tool: 1,
            pin: PinState::Approved,
        },
    };
    assert_eq!(
        serde_json::to_string(&call).unwrap(),
        r#"{"server":"gh","tool":"search","arguments":{"q":"x"},"annotations":null,"context":{"session":"s","execution":"x1","calls":3,"calls-to-server":2,"calls-to-tool":1,"pin":"approved"}}"#
    );
    let read: Call = serde_json::from_str(&serde_json::to_string(&call).unwrap()).unwrap();
    assert_eq!(read, call);
    let part: Call =
        serde_json::from_str(r#"{"server":"a","tool":"b","context":{},"later":1}"#).unwrap();
    assert_eq!((&*part.server, &*part.tool), ("a", "b"));
    assert_eq!(*part.arguments, Value::Null);
    assert_eq!(part.annotations, None);
    assert_eq!(part.context.calls_to_tool, 0);
    // A host older than pins sends no `pin`; a later one may send a state not known here: both
    // read as the state that claims least.
    assert_eq!(part.context.pin, PinState::Unpinned);
    for (text, state) in [
        ("\"pinned\"", PinState::Pinned),
        ("\"changed\"", PinState::Changed),
        ("\"approved\"", PinState::Approved),
        ("\"unpinned\"", PinState::Unpinned),
        ("\"re-pinned\"", PinState::Unpinned),
        ("true", PinState::Unpinned),
        ("null", PinState::Unpinned),
    ] {
        let context: CallContext = serde_json::from_str(&format!("{{\"pin\":{text}}}")).unwrap();
        assert_eq!(context.pin, state, "{text}");
    }
    let context: LimitsContext = serde_json::from_str(r#"{"session":"s"}"#).unwrap();
    assert_eq!(
        serde_json::to_string(&context).unwrap(),
        r#"{"session":"s"}"#
    );
}

#[test]
fn codegen_requests_are_told_apart_by_kind() {
    let server: CodegenRequest = serde_json::from_value(
        json!({"kind": "server", "server": "my server", "folder": "my_server", "tools": [{"name": "t"}]}),
    )
    .unwrap();
    let CodegenRequest::Server(request) = &server else {
        panic!("{server:?}")
    };
    assert_eq!(request.folder, "my_server");
    assert_eq!(request.tools, [json!({"name": "t"})]);
    let root = CodegenRequest::<Value>::Root(RootRequest {
        servers: vec![ServerRef {
            name: "a".into(),
            folder: "a".into(),
        }],
    });
    assert_eq!(
        serde_json::to_string(&root).unwrap(),
        r#"{"kind":"root","servers":[{"name":"a","folder":"a"}]}"#
    );
    let error = serde_json::from_str::<CodegenRequest>(r#"{"kind":"other"}"#).unwrap_err();
    assert!(error.to_string().contains("other"), "{error}");
}

#[test]
fn a_response_without_an_extension_is_typescript() {
    let old: CodegenResponse =
        serde_json::from_str(r#"{"files":[{"path":"index.ts","content":""}]}"#).unwrap();
    assert_eq!(old.extension, None);
    assert_eq!(old.extension(), "ts");
    assert!(old.tools.is_empty() && old.warnings.is_empty());
    let js = CodegenResponse {
        extension: Some("js".into()),
        ..CodegenResponse::default()
    };
    let text = serde_json::to_string(&js).unwrap();
    assert_eq!(
        text,
        r#"{"files":[],"tools":[],"warnings":[],"extension":"js"}"#
    );
    assert_eq!(
        serde_json::from_str::<CodegenResponse>(&text)
            .unwrap()
            .extension(),
        "js"
    );
}

#[test]
fn listener_options_read_what_the_host_sends() {
    let sent = json!({
        "bind": "127.0.0.1:3000",
        "auth-token": null,
        "allowed-hosts": ["example.com"],
        "allowed-origins": [],
        "max-body-bytes": 4194304,
        "path": "/mcp",
    });
    let options: ListenerOptions = serde_json::from_value(sent.clone()).unwrap();
    assert_eq!(options.bind.as_deref(), Some("127.0.0.1:3000"));
    assert_eq!(options.auth_token, None);
    assert_eq!(options.allowed_hosts, ["example.com"]);
    assert_eq!(options.max_body_bytes, Some(4 << 20));
    let mut written = serde_json::to_value(&options).unwrap();
    written["path"] = json!("/mcp");
    assert_eq!(written, sent);
    assert_eq!(
        serde_json::from_str::<ListenerOptions>("{}").unwrap(),
        ListenerOptions::default()
    );
}

#[test]
fn the_range_table_holds_every_numeric_key_and_its_default() {
    let keys: Vec<&str> = RANGES.iter().map(|range| range.key).collect();
    let numeric: Vec<&str> = Limits::DEFAULTS.counts().map(|(key, _)| key).collect();
    assert_eq!(keys, numeric);
    for (range, (_, default)) in RANGES.iter().zip(Limits::DEFAULTS.counts()) {
        assert_eq!(Some(range.default), default, "{}", range.key);
        assert_eq!(
            range.check(range.default),
            Ok(range.default),
            "{}",
            range.key
        );
    }
    assert_eq!(Limits::DEFAULTS.check(), Ok(()));
}

#[test]
fn a_value_out_of_range_names_the_key_and_the_range() {
    let stack = Limits {
        stack_kb: Some(16),
        ..Limits::default()
    };
    let error = stack.check().unwrap_err();
    assert_eq!(error.key, "stack-kb");
    assert_eq!(
        error.to_string(),
        "`stack-kb = 16` is out of range: it must be 64 to 524288 (KiB)"
    );
    assert_eq!(
        error.describe("sandbox.limits."),
        "`sandbox.limits.stack-kb = 16` is out of range: it must be 64 to 524288 (KiB)"
    );
    // Zero is a value like any other: accepted where the range starts at 0, else refused.
    let zero = |limits: Limits| limits.check().map_err(|error| error.key);
    let none = Limits::default();
    assert_eq!(
        zero(Limits {
            max_tool_calls: Some(0),
            ..none.clone()
        }),
        Ok(())
    );
    assert_eq!(
        zero(Limits {
            memory_mb: Some(0),
            ..none.clone()
        }),
        Err("memory-mb")
    );
    assert_eq!(
        zero(Limits {
            timeout_ms: Some(0),
            ..none.clone()
        }),
        Err("timeout-ms")
    );
    assert_eq!(
        zero(Limits {
            max_in_flight: Some(u64::MAX),
            ..none
        }),
        Err("max-in-flight")
    );
}

#[test]
fn judged_calls_are_read_leniently_and_written_back() {
    let read = |value: Value| {
        serde_json::from_value::<Limits>(json!({ "judged-calls": value }))
            .unwrap()
            .judged_calls
            .unwrap()
    };
    assert_eq!(read(json!("all")), JudgedCalls::All);
    assert_eq!(read(json!("none")), JudgedCalls::None);
    let servers = read(json!({"servers": ["b", "a"]}));
    assert!(servers.covers("a") && servers.covers("b") && !servers.covers("c"));
    for odd in [
        json!("some"),
        json!({"servers": [1]}),
        json!(null),
        json!([]),
    ] {
        assert_eq!(read(odd), JudgedCalls::All);
    }
    let written = serde_json::to_value(Limits {
        timeout_ms: Some(5),
        judged_calls: Some(servers.clone()),
        ..Limits::default()
    })
    .unwrap();
    assert_eq!(
        written,
        json!({"timeout-ms": 5, "judged-calls": {"servers": ["a", "b"]}})
    );
    // Merged, the calls either policy judges.
    let only = |name: &str| Limits {
        judged_calls: Some(JudgedCalls::Servers([name.to_owned()].into())),
        ..Limits::default()
    };
    let both = only("a").stricter(&only("c")).judged_calls.unwrap();
    assert!(both.covers("a") && both.covers("c") && !both.covers("b"));
    assert!(!Limits::is_key("judged-calls"));
}
