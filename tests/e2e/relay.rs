//! What a tool asks of the user reaches the client of the program that called it: a downstream
//! test server's `ask` tool (an `elicitation/create` request on a 2025-11-25 connection, an
//! `input_required` result on a 2026-07-28 one), answered by a real client (the Python SDK) in
//! either era, over stdio and streamable HTTP; a policy's approval question the same way; and a
//! `requestState` that was altered is refused.

use std::time::Duration;

use runbyte_tests::{
    Background, JsonLines, Served, TempDir, config_with, python_client, runbyte, test_server_table,
};
use serde_json::{Value, json};

const ASK: &str = "import { ask } from './servers/t';\n\
                   export default await ask({ message: 'favourite colour?' });";

/// A configuration with the demo server and the test server `t` spoken to in `protocol` (its
/// tools may grow: `change_tools`).
fn config_text(protocol: &str, extra: &str) -> String {
    config_with(&format!(
        "{}{extra}",
        test_server_table(
            "t",
            &[],
            &format!("protocol = \"{protocol}\"\nnew-tools = \"allow\"")
        )
    ))
}

/// The text the program returned, parsed.
fn returned(report: &Value) -> Value {
    let text = report["result"].as_str().unwrap();
    let first = text.lines().next().unwrap_or_default();
    serde_json::from_str(first).unwrap_or(Value::String(text.to_owned()))
}

#[test]
fn a_tools_question_is_answered_by_the_client_in_every_era_pairing() {
    let dir = TempDir::new("relay");
    let program = dir.write("ask.ts", ASK);
    let program = program.to_str().unwrap();
    let exe = runbyte();
    for downstream in ["2025-11-25", "2026-07-28"] {
        let config = dir.write("runbyte.toml", &config_text(downstream, ""));
        let http = Served::with_config("relay-http", "http", &config_text(downstream, ""));
        for era in ["legacy", "2026-07-28"] {
            let stdio = [
                "--era",
                era,
                "--answer",
                "blue",
                "--program",
                program,
                "stdio",
                exe.to_str().unwrap(),
                config.to_str().unwrap(),
            ];
            let url = http.url("/mcp");
            let over_http = [
                "--era",
                era,
                "--answer",
                "blue",
                "--program",
                program,
                "http",
                &url,
            ];
            for (transport, args) in [("stdio", &stdio[..]), ("http", &over_http[..])] {
                let Some(report) = python_client(args) else {
                    return;
                };
                let case = format!("server {downstream}, client {era} over {transport}");
                assert_eq!(report["result_is_error"], false, "{case}: {report}");
                let answer = returned(&report);
                assert_eq!(
                    answer,
                    json!({"action": "accept", "content": {"answer": "blue"}}),
                    "{case}: {report}"
                );
                assert_eq!(report["asked"], json!(["favourite colour?"]), "{case}");
            }
        }
    }
}

#[test]
fn a_client_that_cannot_answer_gets_an_error_naming_the_tool() {
    let dir = TempDir::new("relay-refused");
    let program = dir.write("ask.ts", ASK);
    for downstream in ["2025-11-25", "2026-07-28"] {
        let config = dir.write("runbyte.toml", &config_text(downstream, ""));
        for era in ["legacy", "2026-07-28"] {
            let Some(report) = python_client(&[
                "--era",
                era,
                "--program",
                program.to_str().unwrap(),
                "stdio",
                runbyte().to_str().unwrap(),
                config.to_str().unwrap(),
            ]) else {
                return;
            };
            let text = report["result"].as_str().unwrap();
            assert!(
                text.contains("t/ask asked the user for input")
                    && text.contains("`elicitation` capability"),
                "server {downstream}, client {era}: {text}"
            );
        }
    }
}

#[test]
fn a_policy_asks_the_user_to_approve_a_call() {
    let dir = TempDir::new("relay-approve");
    // `slow` carries no annotations: `readonly` with `ask = true` puts it to the user.
    let program = dir.write(
        "slow.ts",
        "import { slow } from './servers/t';\nawait slow({ ms: 1 });\nexport default 'approved';",
    );
    let policy =
        "\n[sandbox]\npolicy = [\"limits\", \"readonly\"]\n[sandbox.readonly]\nask = true\n";
    let config = dir.write("runbyte.toml", &config_text("2026-07-28", policy));
    for era in ["legacy", "2026-07-28"] {
        let Some(report) = python_client(&[
            "--era",
            era,
            "--answer",
            "yes",
            "--program",
            program.to_str().unwrap(),
            "stdio",
            runbyte().to_str().unwrap(),
            config.to_str().unwrap(),
        ]) else {
            return;
        };
        assert_eq!(returned(&report), json!("approved"), "{era}: {report}");
        let asked = report["asked"][0].as_str().unwrap_or_default();
        assert!(
            asked.contains("Allow a call that may change something?") && asked.contains("`t/slow`"),
            "{era}: {report}"
        );
        // Without a way to ask, the call is denied with the policy's reason.
        let report = python_client(&[
            "--era",
            era,
            "--program",
            program.to_str().unwrap(),
            "stdio",
            runbyte().to_str().unwrap(),
            config.to_str().unwrap(),
        ])
        .unwrap();
        let text = report["result"].as_str().unwrap();
        assert!(
            text.contains("t/slow was denied by policy `readonly`")
                && text.contains("not known to be read-only"),
            "{era}: {text}"
        );
    }
}

/// `runbyte serve` over stdio in 2026-07-28, calling `execute_code`.
struct Stdio2026(JsonLines);

impl Stdio2026 {
    fn start(config: &str) -> Self {
        Stdio2026(JsonLines::start(config))
    }

    fn call(&mut self, id: u64, arguments: Value, retry: Value) -> Value {
        self.0.call(id, "execute_code", arguments, retry)
    }

    fn list(&mut self, id: u64, path: &str) -> String {
        text_of(
            &self
                .0
                .call(id, "list_directory", json!({"path": path}), json!({})),
        )
    }
}

#[test]
fn an_altered_request_state_is_refused_and_the_genuine_one_resumes_the_execution() {
    let mut served = Stdio2026::start(&config_text("2025-11-25", ""));
    let asked = served.call(1, json!({"code": ASK}), json!({}));
    let result = &asked["result"];
    assert_eq!(result["resultType"], "input_required", "{asked}");
    let question = &result["inputRequests"]["runbyte_input"];
    assert_eq!(question["method"], "elicitation/create", "{asked}");
    assert_eq!(question["params"]["message"], "favourite colour?");
    let state = result["requestState"].as_str().unwrap().to_owned();
    let answer = json!({"runbyte_input": {"action": "accept", "content": {"answer": "green"}}});

    let mut altered = state.clone().into_bytes();
    let middle = altered.len() / 2;
    altered[middle] = if altered[middle] == b'x' { b'y' } else { b'x' };
    let altered = String::from_utf8(altered).unwrap();
    let refused = served.call(
        2,
        json!({"code": ASK}),
        json!({"inputResponses": answer, "requestState": altered}),
    );
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("requestState"),
        "{refused}"
    );

    // A retry without the answer is asked again; the genuine state with it resumes the program.
    let again = served.call(3, json!({"code": ASK}), json!({"requestState": state}));
    assert_eq!(again["result"]["resultType"], "input_required", "{again}");
    let state = again["result"]["requestState"].as_str().unwrap().to_owned();
    let done = served.call(
        4,
        json!({"code": ASK}),
        json!({"inputResponses": answer, "requestState": state}),
    );
    assert_eq!(done["result"]["resultType"], "complete", "{done}");
    let text = done["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains(r#""answer":"green""#), "{text}");
    // Used once: the same state again names an execution that has ended.
    let replayed = served.call(
        5,
        json!({"code": ASK}),
        json!({"inputResponses": answer, "requestState": state}),
    );
    assert_eq!(replayed["error"]["code"], -32602, "{replayed}");
}

/// A configuration for replicas: the shared key, the state store on `store` (a port; none
/// with `None`), the test server `t` in 2026-07-28 (its questions are `input_required`
/// results, which a re-run asks again), and `extra`.
fn replica_config(store: Option<u16>, extra: &str) -> String {
    let store = store
        .map(|port| format!("state-store = \"redis://127.0.0.1:{port}\"\n"))
        .unwrap_or_default();
    format!(
        "[server]\nstate-key-file = \"state-key\"\n{store}{}",
        config_text("2026-07-28", extra)
    )
}

/// The text of a `tools/call` answer.
fn text_of(answer: &Value) -> String {
    answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// Two replicas sharing the state key and a state store (a real Redis: a replay needs one to
/// be claimed once), each with `extra` in its configuration; `None` without `redis-server`.
fn replicas(extra: &str) -> Option<(Stdio2026, Stdio2026, Background)> {
    let store = Background::redis()?;
    let config = replica_config(Some(store.port), extra);
    Some((Stdio2026::start(&config), Stdio2026::start(&config), store))
}

impl Stdio2026 {
    /// Runs `program`, which must stop at a question: the answer, and its `requestState`.
    fn ask(&mut self, id: u64, program: &str) -> (Value, String) {
        let asked = self.call(id, json!({"code": program}), json!({}));
        assert_eq!(asked["result"]["resultType"], "input_required", "{asked}");
        let state = asked["result"]["requestState"].as_str().unwrap().to_owned();
        (asked, state)
    }

    /// The retry of `program` with `state` and the user's `content` as an accepted answer.
    fn answer(&mut self, id: u64, program: &str, state: &str, content: Value) -> Value {
        let answer = json!({"runbyte_input": {"action": "accept", "content": content}});
        self.call(
            id,
            json!({"code": program}),
            json!({"inputResponses": answer, "requestState": state}),
        )
    }
}

#[test]
fn a_paused_execution_resumes_on_another_replica_by_replay_without_calling_twice() {
    let program = "import { change_tools, ask } from './servers/t';\n\
                   const changed = await change_tools({});\n\
                   const answer = await ask({ message: 'favourite colour?' });\n\
                   export default { changed, answer };";
    let Some((mut first, mut second, _store)) = replicas("") else {
        return;
    };
    let (_, state) = first.ask(1, program);
    // The retry reaches the other replica, as a round-robin balancer may send it.
    let done = second.answer(2, program, &state, json!({"answer": "teal"}));
    assert_eq!(done["result"]["resultType"], "complete", "{done}");
    let text = text_of(&done);
    assert!(
        text.contains(r#""answer":"teal""#) && text.contains("added_1"),
        "{text}"
    );
    // The call made before the question ran once, on the first replica: the second replica's
    // server never saw it (it lists no added tool), the first one's did.
    assert!(
        !second.list(10, "/servers/t").contains("added_1"),
        "the second replica's server was called"
    );
    assert!(first.list(11, "/servers/t").contains("added_1"));
    // The same answer again, on the same replica: refused, never a second run.
    let again = second.answer(12, program, &state, json!({"answer": "teal"}));
    assert_eq!(again["error"]["code"], -32602, "{again}");
}

#[test]
fn a_program_that_reads_the_clock_and_randomness_resumes_on_another_replica() {
    // Its first call's argument is the time, a random number and the order of a timer against
    // a slow call: the replay is served the first run's clock, seed and turns, so it makes the
    // same call (returned from the journal) and carries on.
    let program = "import { echo, slow, ask } from './servers/t';\n\
                   const order: string[] = [];\n\
                   setTimeout(() => order.push('timer'), 20);\n\
                   await slow({ ms: 150 });\n\
                   order.push('reply');\n\
                   const message = [Date.now(), Math.random(), ...order].join(' ');\n\
                   await echo({ message });\n\
                   const answer = await ask({ message: 'now?' });\n\
                   export default { message, answer };";
    let Some((mut first, mut second, _store)) = replicas("") else {
        return;
    };
    let (_, state) = first.ask(1, program);
    std::thread::sleep(Duration::from_millis(5));
    let done = second.answer(2, program, &state, json!({"answer": "x"}));
    assert_eq!(done["result"]["resultType"], "complete", "{done}");
    let text = text_of(&done);
    assert!(
        text.contains(" timer reply") && text.contains(r#""answer":"x""#),
        "{text}"
    );
}

#[test]
fn a_call_made_while_a_question_waits_is_held_so_that_a_replay_elsewhere_makes_it_once() {
    // `change_tools` starts after the question was asked: the state does not hold it, so the
    // replay on the second replica makes it; the first replica must not have made it too. (Its
    // 400 ms wait is there so that the question comes first even on a loaded machine: with
    // 50 ms, a slow `ask` once had `change_tools` in flight when it asked.)
    let program = "import { change_tools, ask } from './servers/t';\n\
                   const later = async () => {\n\
                     await new Promise((done) => setTimeout(done, 400));\n\
                     return change_tools({});\n\
                   };\n\
                   const [answer, changed] = await Promise.all([ask({ message: 'go?' }), later()]);\n\
                   export default { answer, changed };";
    let Some((mut first, mut second, _store)) = replicas("") else {
        return;
    };
    let (_, state) = first.ask(1, program);
    // Time for the held call to have been made, had it not been held.
    std::thread::sleep(Duration::from_millis(1500));
    let done = second.answer(2, program, &state, json!({"answer": "y"}));
    assert_eq!(done["result"]["resultType"], "complete", "{done}");
    assert!(text_of(&done).contains("added_1"), "{done}");
    assert!(
        !first.list(3, "/servers/t").contains("added_1"),
        "the first replica made the call that the replay made"
    );
}

#[test]
fn a_program_that_diverges_when_replayed_stops_with_a_clear_error() {
    // Its first call's argument is how many tools `t` has, and the first replica's `t` gained
    // one (a call of `change_tools` before): a replay there makes another call than the journal
    // has.
    let program = "import * as t from './servers/t';\n\
                   await t.echo({ message: String(Object.keys(t).length) });\n\
                   export default await t.ask({ message: 'now?' });";
    let Some((mut first, mut second, _store)) = replicas("") else {
        return;
    };
    let grow =
        "import { change_tools } from './servers/t';\nexport default await change_tools({});";
    let grown = first.call(1, json!({"code": grow}), json!({}));
    assert_eq!(grown["result"]["resultType"], "complete", "{grown}");
    // The server's list change reaches the VFS shortly after.
    let grew = (0..50).any(|attempt| {
        std::thread::sleep(Duration::from_millis(100));
        first.list(100 + attempt, "/servers/t").contains("added_1")
    });
    assert!(grew, "the first replica's `t` never listed `added_1`");
    let (_, state) = first.ask(3, program);
    let done = second.answer(4, program, &state, json!({"answer": "x"}));
    let text = text_of(&done);
    assert!(
        text.contains("took another path when it was resumed") && text.contains("t/echo"),
        "{done}"
    );
}

#[test]
fn an_approval_asked_on_one_replica_is_answered_on_another() {
    let policy =
        "\n[sandbox]\npolicy = [\"limits\", \"readonly\"]\n[sandbox.readonly]\nask = true\n";
    let program =
        "import { slow } from './servers/t';\nawait slow({ ms: 1 });\nexport default 'approved';";
    let Some((mut first, mut second, _store)) = replicas(policy) else {
        return;
    };
    let (asked, state) = first.ask(1, program);
    let message = asked["result"]["inputRequests"]["runbyte_input"]["params"]["message"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(message.contains("`t/slow`"), "{message}");
    let done = second.answer(2, program, &state, json!({"approve": true}));
    assert_eq!(done["result"]["resultType"], "complete", "{done}");
    assert!(text_of(&done).starts_with("\"approved\""), "{done}");
}

/// A policy that asks the user before any call not known to be read-only (`t/slow` is one).
const ASK_POLICY: &str =
    "\n[sandbox]\npolicy = [\"limits\", \"readonly\"]\n[sandbox.readonly]\nask = true\n";

/// Grows the test server `t` of `served` by one tool (`added_1`), and waits until its VFS lists
/// it.
fn grow(served: &mut Stdio2026, id: u64) {
    let grow =
        "import { change_tools } from './servers/t';\nexport default await change_tools({});";
    let mut grown = served.call(id, json!({"code": grow}), json!({}));
    if grown["result"]["resultType"] == "input_required" {
        // The policy asks for `change_tools` too: approved, where it paused.
        let state = grown["result"]["requestState"].as_str().unwrap().to_owned();
        grown = served.answer(id + 1, grow, &state, json!({"approve": true}));
    }
    assert_eq!(grown["result"]["resultType"], "complete", "{grown}");
    let grew = (0..50).any(|attempt| {
        std::thread::sleep(Duration::from_millis(100));
        served
            .list(id + 100 + attempt, "/servers/t")
            .contains("added_1")
    });
    assert!(grew, "`t` never listed `added_1`");
}

#[test]
fn an_approval_given_on_one_replica_goes_only_to_the_call_the_user_saw() {
    // The argument of the call that asks depends on the modules the replica has: the first
    // replica's `t` has one tool more. The user approves `t/slow` with the first replica's
    // argument; the second replica's replay reaches `t/slow` with another: it must stop, not
    // spend the approval on a call the user never saw.
    let program = "import * as t from './servers/t';\n\
                   const ms = Object.keys(t).length;\n\
                   await t.slow({ ms });\n\
                   export default `ran slow with ${ms}`;";
    let Some(store) = Background::redis() else {
        return;
    };
    let config = replica_config(Some(store.port), ASK_POLICY);
    let (mut first, mut second) = (Stdio2026::start(&config), Stdio2026::start(&config));
    grow(&mut first, 1);
    let (asked, state) = first.ask(3, program);
    let message = asked["result"]["inputRequests"]["runbyte_input"]["params"]["message"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(message.contains("`t/slow`"), "{message}");
    let done = second.answer(4, program, &state, json!({"approve": true}));
    let text = text_of(&done);
    assert_eq!(done["result"]["isError"], true, "{done}");
    assert!(
        text.contains("took another path when it was resumed")
            && text.contains("the user's answer was for call #1 to `t/slow` (a policy's approval)")
            && text.contains("that call is now `t/slow` with other arguments")
            && !text.contains("ran slow"),
        "{done}"
    );
    // Where the modules agree (a third replica, as the second), the approval reaches its call.
    let mut third = Stdio2026::start(&config);
    let (_, state) = second.ask(5, program);
    let done = third.answer(6, program, &state, json!({"approve": true}));
    assert_eq!(done["result"]["resultType"], "complete", "{done}");
    assert!(text_of(&done).starts_with("\"ran slow with"), "{done}");
}

#[test]
fn without_a_state_store_an_answer_resumes_only_on_the_replica_that_paused() {
    // The deploy/ default: replicas share the key, not a store. Nothing could tell one replica
    // (or a restarted process) that another already replayed the state: a retry elsewhere is
    // refused, never a second run of the approved call.
    let program =
        "import { slow } from './servers/t';\nawait slow({ ms: 1 });\nexport default 'approved';";
    let config = replica_config(None, ASK_POLICY);
    let (mut first, mut second) = (Stdio2026::start(&config), Stdio2026::start(&config));
    let (_, state) = first.ask(1, program);
    let refused = second.answer(2, program, &state, json!({"approve": true}));
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    let why = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(
        why.contains("resumes only in the process that paused it") && why.contains("state-store"),
        "{why}"
    );
    // A process started since (a restarted replica): the same.
    drop(second);
    let mut restarted = Stdio2026::start(&config);
    let refused = restarted.answer(3, program, &state, json!({"approve": true}));
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    // Where it paused, it resumes, once.
    let done = first.answer(4, program, &state, json!({"approve": true}));
    assert_eq!(done["result"]["resultType"], "complete", "{done}");
    assert!(text_of(&done).starts_with("\"approved\""), "{done}");
    let again = first.answer(5, program, &state, json!({"approve": true}));
    assert_eq!(again["error"]["code"], -32602, "{again}");
}

#[test]
fn a_request_state_expires_with_its_execution() {
    // An execution of one second: its state is refused everywhere once that second and the
    // slack (5 s) are over, saying so; the replay never makes the call after the time limit.
    let limits = format!("{ASK_POLICY}[sandbox.limits]\ntimeout-ms = 1000\n");
    let program =
        "import { slow } from './servers/t';\nawait slow({ ms: 1 });\nexport default 'approved';";
    let Some((mut first, mut second, _store)) = replicas(&limits) else {
        return;
    };
    let (_, state) = first.ask(1, program);
    std::thread::sleep(Duration::from_millis(6_500));
    for (n, replica) in [&mut second, &mut first].into_iter().enumerate() {
        let refused = replica.answer(2 + n as u64, program, &state, json!({"approve": true}));
        assert_eq!(refused["error"]["code"], -32602, "{refused}");
        let why = refused["error"]["message"].as_str().unwrap_or_default();
        assert!(why.contains("has expired"), "{why}");
    }
    // Within its time, the same replay goes through.
    let (_, state) = first.ask(4, program);
    let done = second.answer(5, program, &state, json!({"approve": true}));
    assert_eq!(done["result"]["resultType"], "complete", "{done}");
}

#[test]
fn only_an_explicit_true_approves_a_call() {
    let program =
        "import { slow } from './servers/t';\nawait slow({ ms: 1 });\nexport default 'approved';";
    let mut served = Stdio2026::start(&replica_config(None, ASK_POLICY));
    let mut id = 0;
    for content in [
        json!({}),
        json!({"approve": "false"}),
        json!({"approve": "true"}),
        json!({"approve": 0}),
        json!({"approve": 1}),
        json!({"approve": null}),
        json!({"approve": false}),
    ] {
        id += 2;
        let (_, state) = served.ask(id, program);
        let done = served.answer(id + 1, program, &state, content.clone());
        let text = text_of(&done);
        assert!(
            text.contains("t/slow was denied by policy `readonly`: the user did not approve it")
                && !text.starts_with("\"approved\""),
            "{content}: {done}"
        );
    }
    // Declined, even with `approve: true`: refused.
    let (_, state) = served.ask(100, program);
    let answer = json!({"runbyte_input": {"action": "decline", "content": {"approve": true}}});
    let done = served.call(
        101,
        json!({"code": program}),
        json!({"inputResponses": answer, "requestState": state}),
    );
    assert!(text_of(&done).contains("did not approve"), "{done}");
    let (_, state) = served.ask(102, program);
    let done = served.answer(103, program, &state, json!({"approve": true}));
    assert!(text_of(&done).starts_with("\"approved\""), "{done}");
}
