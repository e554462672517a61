//! HTTPS downstream: rustls on `ring` with the platform's trust store, against a local Node
//! HTTPS server whose certificate comes from a throwaway CA made with the `openssl` command.
//! Skipped, with a message, when `openssl` or `node` is missing.

use std::{
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::Duration,
};

use runbyte_http_common::testing::{Driver, free_port};
use runbyte_plugin_api::transport::Transport;
use serde_json::json;

use crate::HttpTransport;

const CHILD_URL: &str = "RUNBYTE_TLS_CHILD_URL";

fn run(command: &mut Command) -> bool {
    command
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
}

/// A CA and a `localhost` certificate it signed, in `dir`; `false` without `openssl`.
fn make_certificates(dir: &Path) -> bool {
    let at = |name: &str| dir.join(name).to_string_lossy().into_owned();
    std::fs::write(
        dir.join("leaf.ext"),
        "subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\n",
    )
    .unwrap();
    run(Command::new("openssl")
        .args([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
        ])
        .args([
            "-subj",
            "/CN=runbyte test CA",
            "-keyout",
            &at("ca.key"),
            "-out",
            &at("ca.pem"),
        ]))
        && run(Command::new("openssl")
            .args([
                "req",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-subj",
                "/CN=localhost",
            ])
            .args(["-keyout", &at("leaf.key"), "-out", &at("leaf.csr")]))
        && run(Command::new("openssl")
            .args(["x509", "-req", "-days", "1", "-CAcreateserial"])
            .args([
                "-in",
                &at("leaf.csr"),
                "-CA",
                &at("ca.pem"),
                "-CAkey",
                &at("ca.key"),
                "-extfile",
                &at("leaf.ext"),
                "-out",
                &at("leaf.pem"),
            ]))
}

/// A Node HTTPS server that answers every POST with an initialize result.
fn https_server(dir: &Path, port: u16) -> Option<Child> {
    let script = format!(
        r#"require('https').createServer({{key: require('fs').readFileSync('{key}'), cert: require('fs').readFileSync('{cert}')}}, (req, res) => {{
            let body = ''; req.on('data', c => body += c); req.on('end', () => {{
              const id = JSON.parse(body).id;
              if (id === undefined) {{ res.writeHead(202); res.end(); return; }}
              res.writeHead(200, {{'content-type': 'application/json'}});
              res.end(JSON.stringify({{jsonrpc: '2.0', id, result: {{protocolVersion: '2025-06-18', capabilities: {{}}, serverInfo: {{name: 'tls', version: '1'}}}}}}));
            }});
          }}).listen({port}, '127.0.0.1');"#,
        key = dir.join("leaf.key").display(),
        cert = dir.join("leaf.pem").display(),
    );
    let child = Command::new("node")
        .args(["-e", &script])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        if std::time::Instant::now() > deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Some(child)
}

fn initialize(url: &str) -> (Driver, Result<serde_json::Value, String>) {
    let pump = HttpTransport::open("{}")
        .unwrap()
        .connect(&json!({"name": "tls", "url": url}).to_string())
        .unwrap();
    let mut client = Driver::new(pump);
    let id = client.send_request(
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {}}),
    );
    let answer = client.response(&id, Duration::from_secs(10));
    (client, answer)
}

#[test]
fn https_servers_are_verified_against_the_trust_store() {
    let dir: PathBuf = std::env::temp_dir().join(format!("runbyte-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    if !make_certificates(&dir) {
        runbyte_http_common::testing::skip(
            "the `openssl` command is needed to make test certificates",
        );
        return;
    }
    let port = free_port();
    let Some(mut server) = https_server(&dir, port) else {
        runbyte_http_common::testing::skip("`node` is needed for the HTTPS test server");
        return;
    };
    let url = format!("https://localhost:{port}/mcp");

    // Not trusted: the handshake fails with a certificate error, the request fails with it.
    let (mut client, answer) = initialize(&url);
    let message = answer.unwrap()["error"]["message"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        message.contains("certificate") || message.contains("UnknownIssuer"),
        "{message}"
    );
    assert!(client.wait_closed(Duration::from_secs(5)).is_some());

    // Trusted through SSL_CERT_FILE, in a child process so the variable stays there.
    let child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "tests::tls::trusted_https_child",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env(CHILD_URL, &url)
        .env("SSL_CERT_FILE", dir.join("ca.pem"))
        .output()
        .unwrap();
    let _ = server.kill();
    let _ = server.wait();
    let _ = std::fs::remove_dir_all(&dir);
    let stdout = String::from_utf8_lossy(&child.stdout);
    assert!(
        child.status.success() && stdout.contains("1 passed"),
        "{stdout}{}",
        String::from_utf8_lossy(&child.stderr)
    );
}

/// Runs only when started by the test above (which sets the URL and the trust store).
#[test]
fn trusted_https_child() {
    let Ok(url) = std::env::var(CHILD_URL) else {
        return;
    };
    let (_client, answer) = initialize(&url);
    let answer = answer.unwrap();
    assert_eq!(answer["result"]["serverInfo"]["name"], "tls", "{answer}");
}
