//! Hostile programs against a real gateway over streamable HTTP, while a second client keeps
//! using it: nothing a program does takes the gateway down, wedges it for others, or grows it
//! past its memory bound, and the next execution runs normally.

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use rmcp::{ServiceExt, transport::StreamableHttpClientTransport};
use runbyte_tests::{Served, call};
use serde_json::json;

/// What the gateway's resident memory stays under while the programs below run: the
/// documented bound (README, "Limits and security").
const GATEWAY_RSS_BOUND: usize = 512 << 20;

fn resident(pid: u32) -> usize {
    runbyte_tests::resident_bytes(pid).expect("the gateway's resident memory")
}

fn gateway() -> Served {
    Served::start(
        "hostile",
        "http",
        "[sandbox]\npolicy = \"limits\"\n\n[sandbox.limits]\ntimeout-ms = 3000\n",
    )
}

/// Each of these took the gateway down, wedged it or grew it by gigabytes before.
fn hostile_programs() -> Vec<(&'static str, String)> {
    vec![
        ("unbraced ifs", "if (a)\n".repeat(140_000)),
        ("for clauses", "for (;;)".repeat(120_000)),
        (
            "a thousand calls holding 1 MiB each",
            "import { echo } from './servers/demo';\n\
             const big = 'x'.repeat(1 << 20);\n\
             const all = Array.from({ length: 1000 }, () => echo({ message: big }).catch(() => 0));\n\
             await Promise.all(all);\n\
             export default 'done';"
                .to_owned(),
        ),
        (
            "a 1 MiB tool name",
            "import { callTool } from 'runbyte:bridge';\n\
             try { await callTool('demo', 'e'.repeat(1 << 20), {}); } catch (e) { }\n\
             export default 'done';"
                .to_owned(),
        ),
        (
            "20 concurrent calls of 20 KB",
            "import { echo } from './servers/demo';\n\
             const pad = 'y'.repeat(20000);\n\
             const r = await Promise.all(Array.from({ length: 20 }, (_, i) => echo({ message: pad + i })));\n\
             export default r.length;"
                .to_owned(),
        ),
    ]
}

#[tokio::test(flavor = "multi_thread")]
async fn hostile_programs_leave_the_gateway_serving_others() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let gateway = gateway();
    let url = format!("http://127.0.0.1:{}/mcp", gateway.port);
    let attacker = ().serve(StreamableHttpClientTransport::from_uri(url.clone())).await.unwrap();
    let bystander = ().serve(StreamableHttpClientTransport::from_uri(url)).await.unwrap();
    let pid = gateway.pid();

    let done = Arc::new(AtomicBool::new(false));
    let peak = Arc::new(AtomicUsize::new(0));
    let slowest = Arc::new(AtomicUsize::new(0));
    let watch = tokio::spawn({
        let (done, peak, slowest) = (done.clone(), peak.clone(), slowest.clone());
        async move {
            let mut answered = 0;
            while !done.load(Ordering::SeqCst) {
                peak.fetch_max(resident(pid), Ordering::SeqCst);
                let started = Instant::now();
                bystander.peer().list_tools(None).await.unwrap();
                let (listing, failed) = call(
                    &bystander,
                    "list_directory",
                    json!({ "path": "/servers/demo" }),
                )
                .await;
                assert!(!failed && listing.contains("echo"), "{listing}");
                slowest.fetch_max(started.elapsed().as_millis() as usize, Ordering::SeqCst);
                answered += 1;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            answered
        }
    });

    for (what, program) in hostile_programs() {
        let started = Instant::now();
        let (text, _) = call(&attacker, "execute_code", json!({ "code": program })).await;
        // The deadline is 3 s; each ends within it plus grace (and the transport's time).
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{what}: took {:?}: {text}",
            started.elapsed()
        );
        assert!(!text.contains("Sandbox crashed"), "{what}: {text}");
        let (next, failed) = call(
            &attacker,
            "execute_code",
            json!({ "code": "export default 1 + 1" }),
        )
        .await;
        assert!(!failed && next.starts_with('2'), "after {what}: {next}");
    }
    done.store(true, Ordering::SeqCst);
    let answered = watch.await.unwrap();
    assert!(answered > 5, "the bystander was answered {answered} times");
    let slowest = slowest.load(Ordering::SeqCst);
    assert!(
        slowest < 2000,
        "the bystander waited {slowest} ms for an answer"
    );
    let peak = peak.load(Ordering::SeqCst);
    eprintln!(
        "bystander answered {answered} times, slowest {slowest} ms; gateway peak RSS {} MiB",
        peak >> 20
    );
    assert!(
        peak < GATEWAY_RSS_BOUND,
        "the gateway's resident memory reached {} MiB",
        peak >> 20
    );
}
