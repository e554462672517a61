//! What resuming a paused execution on another replica costs: the program's own work before the
//! question (its first run, on one replica) against its replay up to the same point on another
//! (the recorded results returned without reaching the server), in the same run, alternating.
//! Also the size of the `requestState` that carries the journal. Run with `scripts/bench`.
//!
//! The program makes 100 calls of 1 KB each, then asks the user; the downstream server is the
//! test server, spoken to in 2026-07-28 (so its question is an `input_required` result). The two
//! replicas share a `redis-server` as `[server] state-store`: without one, a state resumes only in
//! the process that paused it.

#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use runbyte_tests::{Background, JsonLines, config_with, test_server_table};
use serde_json::{Value, json};

const RUNS: usize = 7;

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn main() {
    let store = Background::redis().expect(
        "the replay bench needs redis-server (Debian's package; scripts/test-deps installs it)",
    );
    let config = format!(
        "[server]\nstate-key-file = \"state-key\"\nstate-store = \"redis://127.0.0.1:{}\"\n{}",
        store.port,
        config_with(&test_server_table("t", &[], "protocol = \"2026-07-28\""))
    );
    let program = "import { echo, ask } from './servers/t';\n\
                   const kb = 'x'.repeat(1024);\n\
                   let n = 0;\n\
                   for (let i = 0; i < 100; i++) { n += (await echo({ message: kb })).length; }\n\
                   const answer = await ask({ message: 'go on?' });\n\
                   export default { n, answer };";
    let (mut first, mut second) = (JsonLines::start(&config), JsonLines::start(&config));
    // Warm both: servers connected, modules generated, workers started.
    for replica in [&mut first, &mut second] {
        let warm = replica.call(
            1,
            "execute_code",
            json!({"code": "import { echo } from './servers/t';\nexport default await echo({ message: 'warm' });"}),
            json!({}),
        );
        assert_eq!(warm["result"]["resultType"], "complete", "{warm}");
    }
    let answer = json!({"runbyte_input": {"action": "accept", "content": {"answer": "yes"}}});
    let (mut before, mut replayed, mut finished_here) = (Vec::new(), Vec::new(), Vec::new());
    let mut state_bytes = 0;
    for run in 0..RUNS as u64 {
        let id = 100 + run * 10;
        // The first run, up to the question.
        let started = Instant::now();
        let asked = first.call(id, "execute_code", json!({"code": program}), json!({}));
        before.push(started.elapsed());
        assert_eq!(asked["result"]["resultType"], "input_required", "{asked}");
        let state = asked["result"]["requestState"].as_str().unwrap().to_owned();
        state_bytes = state.len();
        let retry = json!({"inputResponses": answer, "requestState": state});
        // Resumed on the other replica: the replay, the question's call, and the end.
        let started = Instant::now();
        let done = second.call(
            id + 1,
            "execute_code",
            json!({"code": program}),
            retry.clone(),
        );
        replayed.push(started.elapsed());
        check(&done);
        // Baseline for the part after the question: the same answer where it paused.
        let asked = first.call(id + 2, "execute_code", json!({"code": program}), json!({}));
        let state = asked["result"]["requestState"].as_str().unwrap().to_owned();
        let started = Instant::now();
        let done = first.call(
            id + 3,
            "execute_code",
            json!({"code": program}),
            json!({"inputResponses": answer, "requestState": state}),
        );
        finished_here.push(started.elapsed());
        check(&done);
    }
    let (before, replayed, finished_here) =
        (median(before), median(replayed), median(finished_here));
    // The replay's own cost: resuming elsewhere minus what resuming in place costs anyway.
    let replay_only = replayed.saturating_sub(finished_here);
    println!("replay of 100 recorded 1 KB calls, medians of {RUNS}:");
    println!(
        "  first run up to the question (baseline)     {:>9.3} ms",
        ms(before)
    );
    println!(
        "  resumed where it paused (answer to end)     {:>9.3} ms",
        ms(finished_here)
    );
    println!(
        "  resumed on another replica (replay to end)  {:>9.3} ms",
        ms(replayed)
    );
    println!(
        "  replay's own cost / baseline                {:>9.3}x  (target < 1.2x)",
        replay_only.as_secs_f64() / before.as_secs_f64()
    );
    println!(
        "  requestState carrying the journal           {state_bytes:>9} bytes (journal cap 262144 bytes of JSON)"
    );
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn check(done: &Value) {
    assert_eq!(done["result"]["resultType"], "complete", "{done}");
    let text = done["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains(r#""n":"#) && text.contains("yes"), "{text}");
}
