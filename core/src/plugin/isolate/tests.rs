#![allow(clippy::unwrap_used)]

use std::path::Path;
#[cfg(unix)]
use std::path::PathBuf;

use runbyte_plugin_api::PluginKind;
use serde_json::json;

use super::{
    IsolatedHost,
    protocol::{
        AcceptedPump, Answer, FromChild, Kind, Op, Received, RemoteError, RemoteErrorKind, ToChild,
    },
};
use crate::plugin::{PluginError, PluginInfo};

/// The lines in `protocol.rs`'s header are what the types write.
#[test]
fn messages_have_the_documented_shapes() {
    let lines = [
        (
            serde_json::to_value(FromChild::Ready { version: 1 }).unwrap(),
            json!({"t": "ready", "version": 1}),
        ),
        (
            serde_json::to_value(ToChild::Open {
                kind: Kind::Policy,
                config: json!({}),
            })
            .unwrap(),
            json!({"t": "open", "kind": "policy", "config": {}}),
        ),
        (
            serde_json::to_value(FromChild::Opened).unwrap(),
            json!({"t": "opened"}),
        ),
        (
            serde_json::to_value(ToChild::Call {
                id: 7,
                op: Op::CheckCall { call: json!({}) },
            })
            .unwrap(),
            json!({"t": "call", "id": 7, "op": {"name": "check_call", "call": {}}}),
        ),
        (
            serde_json::to_value(FromChild::Reply {
                id: 7,
                result: Ok(Answer::Json(json!({"allow": true}))),
            })
            .unwrap(),
            json!({"t": "reply", "id": 7, "result": {"Ok": {"json": {"allow": true}}}}),
        ),
        (
            serde_json::to_value(ToChild::Call {
                id: 8,
                op: Op::PumpRecv {
                    pump: 3,
                    timeout_ms: 1000,
                },
            })
            .unwrap(),
            json!({"t": "call", "id": 8, "op": {"name": "pump_recv", "pump": 3, "timeout_ms": 1000}}),
        ),
        (
            serde_json::to_value(FromChild::Reply {
                id: 8,
                result: Ok(Answer::Received(Received::Message("…".to_owned()))),
            })
            .unwrap(),
            json!({"t": "reply", "id": 8, "result": {"Ok": {"received": {"message": "…"}}}}),
        ),
        (
            serde_json::to_value(FromChild::Reply {
                id: 9,
                result: Err(RemoteError {
                    kind: RemoteErrorKind::Panicked,
                    message: "…".to_owned(),
                }),
            })
            .unwrap(),
            json!({"t": "reply", "id": 9, "result": {"Err": {"kind": "panicked", "message": "…"}}}),
        ),
    ];
    for (written, documented) in lines {
        assert_eq!(written, documented);
    }
}

#[test]
fn every_message_reads_back_as_written() {
    let calls = [
        Op::Generate {
            request: json!({"server": "demo"}),
        },
        Op::Limits { context: json!({}) },
        Op::CheckCall {
            call: json!({"tool": "echo"}),
        },
        Op::Connect {
            target: json!({"url": "tcp://127.0.0.1:1"}),
        },
        Op::Listen { options: json!({}) },
        Op::PumpSend {
            pump: 1,
            message: "{}".to_owned(),
        },
        Op::PumpRecv {
            pump: 1,
            timeout_ms: 5,
        },
        Op::PumpClose { pump: 1 },
        Op::ListenerAccept {
            listener: 2,
            timeout_ms: 5,
        },
        Op::ListenerAddress { listener: 2 },
        Op::ListenerClose { listener: 2 },
    ];
    for (id, op) in calls.into_iter().enumerate() {
        let message = ToChild::Call { id: id as u64, op };
        let line = serde_json::to_string(&message).unwrap();
        assert_eq!(serde_json::from_str::<ToChild>(&line).unwrap(), message);
    }
    let answers = [
        Answer::Json(json!([1, "two"])),
        Answer::Pump(3),
        Answer::Listener(4),
        Answer::Received(Received::Timeout),
        Answer::Received(Received::Closed("eof".to_owned())),
        Answer::Accepted(None),
        Answer::Accepted(Some(AcceptedPump {
            pump: 5,
            peer: "127.0.0.1:9".to_owned(),
            session: "s".to_owned(),
        })),
        Answer::Address("tcp://127.0.0.1:9".to_owned()),
        Answer::Done,
    ];
    for answer in answers {
        let message = FromChild::Reply {
            id: 1,
            result: Ok(answer),
        };
        let line = serde_json::to_string(&message).unwrap();
        assert_eq!(serde_json::from_str::<FromChild>(&line).unwrap(), message);
    }
    for kind in [
        PluginKind::Transport,
        PluginKind::Codegen,
        PluginKind::Policy,
    ] {
        assert_eq!(PluginKind::from(Kind::from(kind)), kind);
        let wire = serde_json::to_value(Kind::from(kind)).unwrap();
        assert_eq!(wire, json!(kind.as_str()));
    }
}

/// A stand-in for `runbyte plugin-host`: a shell script that writes `first_line` and then waits
/// for its stdin to close (Unix only: the tests that use it are).
#[cfg(unix)]
fn fake_child(label: &str, first_line: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;

    let dir = std::env::temp_dir().join(format!("runbyte-isolate-{label}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let script = dir.join("runbyte");
    std::fs::write(
        &script,
        format!("#!/bin/sh\necho '{first_line}'\nexec cat >/dev/null\n"),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    script
}

fn info(path: &Path) -> PluginInfo {
    PluginInfo {
        name: "stand-in".to_owned(),
        kind: Some(PluginKind::Policy),
        raw_kind: 3,
        version: "0".to_owned(),
        api_version: runbyte_plugin_api::PLUGIN_API_VERSION,
        path: path.to_owned(),
    }
}

/// Starts a host on `exe`, trying again while the script just written is still busy (another
/// test's fork may briefly hold it open for writing).
fn start(exe: &Path) -> Result<IsolatedHost, PluginError> {
    for _ in 0..20 {
        let started = IsolatedHost::start(info(exe), PluginKind::Policy, json!({}), exe.to_owned());
        if !matches!(&started, Err(error) if error.to_string().contains("busy")) {
            return started;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    IsolatedHost::start(info(exe), PluginKind::Policy, json!({}), exe.to_owned())
}

#[cfg(unix)]
#[test]
fn a_child_of_another_protocol_version_is_refused_naming_both() {
    use super::protocol::PROTOCOL_VERSION;
    let other = PROTOCOL_VERSION + 1;
    let exe = fake_child("version", &format!(r#"{{"t":"ready","version":{other}}}"#));
    let error = start(&exe).err().expect("refused");
    let message = error.to_string();
    assert!(
        matches!(error, PluginError::Failed { .. })
            && message.contains("plugin `stand-in`")
            && message.contains(&format!(
                "speaks version {other} of the isolated-plugin protocol, this Runbyte version \
                 {PROTOCOL_VERSION}"
            ))
            && message.contains(&exe.display().to_string()),
        "{message}"
    );
    let _ = std::fs::remove_dir_all(exe.parent().unwrap());
}

/// A child from before the protocol had a version (it answered `{"ready": true}`), or anything
/// else that is not a runbyte binary, is refused at its first line rather than misread.
#[cfg(unix)]
#[test]
fn a_child_that_does_not_greet_with_a_version_is_refused() {
    let exe = fake_child("unversioned", r#"{"ready":true}"#);
    let error = start(&exe).err().expect("refused");
    let message = error.to_string();
    assert!(
        message.contains("did not greet with an isolated-plugin protocol version")
            && message.contains(r#"{"ready":true}"#),
        "{message}"
    );
    let _ = std::fs::remove_dir_all(exe.parent().unwrap());
}

/// A host that cannot start its child says which binary it tried.
#[test]
fn a_missing_host_binary_is_named() {
    let exe = std::env::temp_dir().join("runbyte-isolate-no-such-binary");
    let error = start(&exe).err().expect("refused");
    let message = error.to_string();
    assert!(
        message.contains("cannot start") && message.contains(&exe.display().to_string()),
        "{message}"
    );
}
