//! `auth = "oauth"` end to end: `runbyte login` against a real OAuth 2.1 authorization server
//! and protected MCP server (`tests/python/oauth_server.py`: discovery from the 401, dynamic
//! client registration, PKCE, access tokens that live 2 s and rotated refresh tokens), the
//! tokens then used, refreshed and forgotten by `tools`, `exec`, `call` and `logout`; a token
//! the server refuses mid-run is refreshed once and the call sent again; a refused refresh
//! token makes the server "needs login" and is never tried again; a 403 that asks for more scope
//! is answered by the next login.

use std::{
    io::{BufRead, BufReader, Read, Write},
    net::TcpStream,
    os::unix::fs::PermissionsExt,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::mpsc,
    time::{Duration, Instant},
};

use runbyte_tests::{
    Output, TempDir, call, client, config_of, repo_root, result_json, run, runbyte, test_dep,
};
use serde_json::{Value, json};

/// How long the server's access tokens live, in seconds.
const TOKEN_LIFETIME: u64 = 2;
/// A wait past [`TOKEN_LIFETIME`]: the token held before it has expired after it.
const PAST_EXPIRY: Duration = Duration::from_secs(3);

/// `oauth_server.py` on a loopback port of its choosing, killed when dropped. Its request log
/// (`--log`) goes to a file that the assertions print.
struct OAuthServer {
    child: Child,
    base: String,
    log: PathBuf,
}

impl OAuthServer {
    fn start(python: &Path, dir: &TempDir) -> OAuthServer {
        Self::with_lifetime(python, dir, TOKEN_LIFETIME)
    }

    /// With access tokens that live `lifetime` seconds.
    fn with_lifetime(python: &Path, dir: &TempDir, lifetime: u64) -> OAuthServer {
        Self::named(python, dir, "oauth-server", lifetime, &[])
    }

    /// Its log in `<label>.log`, tokens that live `lifetime` seconds, and pre-registered
    /// `clients` (`ID:SECRET`).
    fn named(
        python: &Path,
        dir: &TempDir,
        label: &str,
        lifetime: u64,
        clients: &[&str],
    ) -> OAuthServer {
        let log = dir.path().join(format!("{label}.log"));
        let mut child = Command::new(python)
            .arg(repo_root().join("tests/python/oauth_server.py"))
            .args(["--port", "0", "--token-lifetime", &lifetime.to_string()])
            .args(clients.iter().flat_map(|client| ["--client", client]))
            .arg("--log")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        // Port 0: the server picks a free port and says which (no race with another test).
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let mut server = OAuthServer {
            child,
            base: String::new(),
            log,
        };
        let line = lines
            .recv_timeout(Duration::from_secs(30))
            .unwrap_or_else(|_| panic!("oauth_server.py did not start:\n{}", server.log()));
        server.base = line
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("not its `listening` line: {line}"))
            .to_owned();
        server
    }

    fn port(&self) -> u16 {
        self.base.rsplit(':').next().unwrap().parse().unwrap()
    }

    /// Its request log so far.
    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Its counters (`/stats`).
    fn stats(&self) -> Value {
        self.get("/stats")
    }

    /// Its protected-resource metadata names `other` as its authorization server from now on.
    fn switch_to(&self, other: &OAuthServer) {
        self.get(&format!("/switch?to={}", other.base));
    }

    /// A GET of one of its unprotected paths; the JSON answer.
    fn get(&self, path: &str) -> Value {
        let mut stream = TcpStream::connect(("127.0.0.1", self.port())).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        write!(
            stream,
            "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).unwrap();
        let (head, body) = answer.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.1 200"), "{answer}");
        serde_json::from_str(body).unwrap()
    }
}

impl Drop for OAuthServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A `$BROWSER` that opens the URL it is given headlessly: a GET that follows the authorization
/// server's 302 to `runbyte login`'s loopback callback.
fn browser(dir: &TempDir, python: &Path) -> PathBuf {
    let script = dir.write(
        "browser.sh",
        &format!(
            "#!/bin/sh\nexec '{}' -c 'import sys, urllib.request; \
             print(urllib.request.urlopen(sys.argv[1], timeout=30).status, file=sys.stderr)' \"$1\"\n",
            python.display()
        ),
    );
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    script
}

/// `runbyte --config <config> login secure` with `BROWSER` set; should `BROWSER` not have
/// opened the authorization URL 5 s after it was printed (no authorization at the server), the
/// test opens it itself. At most a minute.
fn login(dir: &TempDir, config: &str, browser: &Path, server: &OAuthServer) -> Output {
    let mut child = Command::new(runbyte())
        .args(["--config", config, "login", "secure"])
        .current_dir(dir.path())
        .env_remove("RUNBYTE_CONFIG")
        .env("RUNBYTE_LOG", "warn")
        .env("XDG_STATE_HOME", dir.path().join("state"))
        .env("BROWSER", browser)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, lines) = mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let mut stderr = child.stderr.take().unwrap();
    let stderr = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    let (mut stdout, mut printed, mut opened) = (String::new(), None, false);
    loop {
        match lines.recv_timeout(Duration::from_millis(100)) {
            Ok(line) => {
                if printed.is_none() && line.starts_with("http") {
                    printed = Some((line.trim().to_owned(), Instant::now()));
                }
                stdout.push_str(&line);
                stdout.push('\n');
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
        if let Some((url, at)) = &printed
            && !opened
            && at.elapsed() > Duration::from_secs(5)
            && server.stats()["authorizations"] == 0
        {
            eprintln!("BROWSER did not open the authorization URL within 5 s: opening it");
            let _ = Command::new(browser).arg(url).status();
            opened = true;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "`runbyte login secure` did not end within a minute\nstdout:\n{stdout}\nstderr:\n{}\nserver:\n{}",
                stderr.join().unwrap(),
                server.log()
            );
        }
    }
    let status = child.wait().unwrap();
    Output {
        code: status.code(),
        stdout,
        stderr: stderr.join().unwrap(),
    }
}

/// Every file under `dir` (none when it does not exist).
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            files.extend(files_under(&path));
        } else {
            files.push(path);
        }
    }
    files
}

/// Every string value of a `key` member anywhere in `value`.
fn strings_of(value: &Value, key: &str, found: &mut Vec<String>) {
    match value {
        Value::Object(members) => {
            for (name, member) in members {
                match member {
                    Value::String(text) if name == key => found.push(text.clone()),
                    _ => strings_of(member, key, found),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|item| strings_of(item, key, found)),
        _ => {}
    }
}

/// The stored token files (`<state>/runbyte/oauth/*.json`; the `.lock` files beside them are
/// empty) and the access and refresh tokens they hold.
fn stored_tokens(dir: &TempDir) -> (Vec<PathBuf>, Vec<String>, Vec<String>) {
    let mut files = files_under(&dir.path().join("state/runbyte/oauth"));
    files.retain(|file| file.extension().is_some_and(|ext| ext == "json"));
    let (mut access, mut refresh) = (Vec::new(), Vec::new());
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        let value: Value = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("{} is not JSON ({e}):\n{text}", file.display()));
        strings_of(&value, "access_token", &mut access);
        strings_of(&value, "refresh_token", &mut refresh);
    }
    (files, access, refresh)
}

/// The `token_serial` in a `whoami` answer, however it was printed.
fn serial_in(text: &str) -> u64 {
    let after = text
        .split("token_serial")
        .nth(1)
        .unwrap_or_else(|| panic!("no token_serial in {text}"));
    let digits: String = after
        .trim_start_matches(|c: char| c == '"' || c == '\\' || c == ':' || c.is_whitespace())
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits
        .parse()
        .unwrap_or_else(|e| panic!("token_serial is not a number ({e}) in {text}"))
}

/// Neither token appears in anything a command printed.
fn assert_secret(secrets: &[String], outputs: &[(&str, &Output)]) {
    for (what, output) in outputs {
        for secret in secrets {
            assert!(
                !output.stdout.contains(secret.as_str())
                    && !output.stderr.contains(secret.as_str()),
                "`runbyte {what}` printed a token:\n{output:?}"
            );
        }
    }
}

#[test]
fn login_stores_tokens_that_commands_use_and_refresh_and_logout_forgets_them() {
    let Some(python) = test_dep("venv/bin/python") else {
        return;
    };
    let dir = TempDir::new("oauth");
    let server = OAuthServer::start(&python, &dir);
    let config = dir.write(
        "runbyte.toml",
        &config_of(&[format!(
            "[servers.secure]\ntransport = \"http\"\nurl = \"{}/mcp\"\nauth = \"oauth\"\n",
            server.base
        )]),
    );
    let config = config.to_str().unwrap();
    let runbyte = |args: &[&str]| {
        let mut all = vec!["--config", config];
        all.extend_from_slice(args);
        run(dir.path(), &all)
    };
    let needs_login = |output: &Output, when: &str| {
        let said = format!("{}{}", output.stdout, output.stderr);
        assert!(
            said.contains("secure") && said.contains("runbyte login secure"),
            "{when}, `runbyte tools` should say `secure` needs `runbyte login secure`:\n{output:?}\nserver:\n{}",
            server.log()
        );
    };

    // Before any login: the server needs one, and asking never starts a flow of its own.
    let before = runbyte(&["tools"]);
    needs_login(&before, "before login");
    let stats = server.stats();
    assert_eq!(stats["registrations"], 0, "{stats}\n{before:?}");
    assert_eq!(stats["authorizations"], 0, "{stats}\n{before:?}");

    // Login: discovery, registration, the browser, the callback, the code grant.
    let browser = browser(&dir, &python);
    let logged_in = login(&dir, config, &browser, &server);
    assert_eq!(
        logged_in.code,
        Some(0),
        "{logged_in:?}\nserver:\n{}",
        server.log()
    );
    assert!(logged_in.stdout.contains("Logged in to"), "{logged_in:?}");
    let stats = server.stats();
    assert_eq!(stats["registrations"], 1, "{stats}\n{logged_in:?}");
    assert_eq!(stats["authorizations"], 1, "{stats}\n{logged_in:?}");
    assert_eq!(stats["code_grants"], 1, "{stats}\n{logged_in:?}");
    let (files, access, refresh) = stored_tokens(&dir);
    assert!(
        !files.is_empty(),
        "no token file under state/runbyte/oauth/\n{logged_in:?}"
    );
    for file in &files {
        let mode = std::fs::metadata(file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{} has mode {mode:o}", file.display());
    }
    assert!(
        !access.is_empty() && !refresh.is_empty(),
        "no access_token and refresh_token in {files:?}"
    );
    let mut secrets: Vec<String> = access.into_iter().chain(refresh.clone()).collect();

    // The tokens are used, never shown.
    let listed = runbyte(&["tools"]);
    assert!(
        listed.stdout.contains("secure") && listed.stdout.contains("whoami"),
        "{listed:?}\nserver:\n{}",
        server.log()
    );
    assert!(
        !listed.stdout.contains("runbyte login secure"),
        "{listed:?}"
    );

    // One execution outlives its access token: the second call refreshes (a new serial).
    dir.write(
        "outlives.ts",
        "import { whoami } from './servers/secure';\n\
         const first = await whoami({});\n\
         await new Promise((done) => setTimeout(done, 3000));\n\
         const second = await whoami({});\n\
         export default { first, second };\n",
    );
    let outlived = runbyte(&["exec", "outlives.ts"]);
    assert_eq!(
        outlived.code,
        Some(0),
        "{outlived:?}\nserver:\n{}",
        server.log()
    );
    let result = result_json(&outlived.stdout);
    let (first, second) = (&result["first"], &result["second"]);
    let serials = [first, second].map(|answer| {
        answer["token_serial"]
            .as_u64()
            .unwrap_or_else(|| panic!("not `whoami`'s answers: {result}"))
    });
    assert!(
        serials[0] < serials[1],
        "the second call should carry a refreshed token: {result}\nserver:\n{}",
        server.log()
    );
    assert!(first["client_id"].is_string(), "{result}");
    assert_eq!(first["client_id"], second["client_id"], "{result}");
    let mut serial = serials[1];

    // A command started after its stored token expired refreshes before (or on the 401 of) its
    // first request, with the refresh token the last process stored (the server rotates them:
    // the one from `login` is spent).
    std::thread::sleep(PAST_EXPIRY);
    let called = runbyte(&["call", "secure", "whoami", "{}"]);
    assert_eq!(
        called.code,
        Some(0),
        "{called:?}\nserver:\n{}",
        server.log()
    );
    assert!(serial_in(&called.stdout) > serial, "{called:?}");
    serial = serial_in(&called.stdout);

    std::thread::sleep(PAST_EXPIRY);
    dir.write(
        "expired.ts",
        "import { whoami } from './servers/secure';\nexport default await whoami({});\n",
    );
    let expired = runbyte(&["exec", "expired.ts"]);
    assert_eq!(
        expired.code,
        Some(0),
        "{expired:?}\nserver:\n{}",
        server.log()
    );
    let result = result_json(&expired.stdout);
    assert!(
        result["token_serial"].as_u64() > Some(serial),
        "{result} after serial {serial}"
    );
    assert_eq!(result["client_id"], first["client_id"], "{result}");

    // Every new token came from a refresh with the stored client: four strictly increasing
    // serials after a single code grant are at least three refreshes.
    let stats = server.stats();
    assert_eq!(stats["registrations"], 1, "{stats}");
    assert_eq!(stats["authorizations"], 1, "{stats}");
    assert_eq!(stats["code_grants"], 1, "{stats}");
    assert!(stats["refresh_grants"].as_u64() >= Some(3), "{stats}");
    let (_, access, refresh_now) = stored_tokens(&dir);
    assert!(
        !refresh_now.is_empty() && refresh_now.iter().all(|t| !refresh.contains(t)),
        "the rotated refresh token should have been stored: {refresh_now:?} (at login: {refresh:?})"
    );
    secrets.extend(access.into_iter().chain(refresh_now));
    assert_secret(
        &secrets,
        &[
            ("login", &logged_in),
            ("tools", &listed),
            ("exec", &outlived),
            ("call", &called),
            ("exec", &expired),
        ],
    );

    // Logout forgets the tokens; the server needs a login again.
    let logged_out = runbyte(&["logout", "secure"]);
    assert_eq!(logged_out.code, Some(0), "{logged_out:?}");
    let (files, access, refresh) = stored_tokens(&dir);
    assert!(
        access.is_empty() && refresh.is_empty(),
        "tokens left after logout in {files:?}"
    );
    let after = runbyte(&["tools"]);
    needs_login(&after, "after logout");
    let stats = server.stats();
    assert_eq!(stats["registrations"], 1, "{stats}\n{after:?}");
    assert_eq!(stats["authorizations"], 1, "{stats}\n{after:?}");
}

#[test]
fn a_refused_token_is_refreshed_once_and_a_refused_refresh_needs_a_login() {
    let Some(python) = test_dep("venv/bin/python") else {
        return;
    };
    let dir = TempDir::new("oauth-refused");
    // Tokens that would live an hour: only the server's refusal makes Runbyte refresh.
    let server = OAuthServer::with_lifetime(&python, &dir, 3600);
    let config = dir.write(
        "runbyte.toml",
        &config_of(&[
            "[server]\naudit-log = \"audit.jsonl\"\n".to_owned(),
            format!("[servers.secure]\nurl = \"{}/mcp\"\n", server.base),
        ]),
    );
    let config = config.to_str().unwrap();
    let runbyte = |args: &[&str]| {
        let mut all = vec!["--config", config];
        all.extend_from_slice(args);
        run(dir.path(), &all)
    };
    // No `auth` in the table: the 401's Bearer challenge says a login is needed.
    let before = runbyte(&["tools"]);
    assert!(
        before
            .stdout
            .contains("needs login: run `runbyte login secure`"),
        "{before:?}"
    );
    let logged_in = login(&dir, config, &browser(&dir, &python), &server);
    assert_eq!(logged_in.code, Some(0), "{logged_in:?}\n{}", server.log());

    // The server forgets every access token between two calls of one program: the second call
    // is refused (401), the token refreshed, and the call sent again: the program never knows.
    dir.write(
        "refused.ts",
        "import { whoami, revoke } from './servers/secure';\n\
         const before = await whoami({});\n\
         await revoke({});\n\
         const after = await whoami({});\n\
         export default { before, after };\n",
    );
    let refused = runbyte(&["exec", "refused.ts"]);
    assert_eq!(refused.code, Some(0), "{refused:?}\n{}", server.log());
    let result = result_json(&refused.stdout);
    assert!(
        result["after"]["token_serial"].as_u64() > result["before"]["token_serial"].as_u64(),
        "{result}"
    );
    let stats = server.stats();
    assert_eq!(stats["refresh_grants"], 1, "{stats}\n{}", server.log());
    assert!(stats["rejected_unknown"].as_u64() >= Some(1), "{stats}");
    assert_eq!(stats["token_errors"], 0, "{stats}");

    // The grant is revoked too: the refresh is refused, the call fails saying what to do, the
    // tokens are dropped, and nothing tries that refresh token again.
    dir.write(
        "revoked.ts",
        "import { whoami, revoke } from './servers/secure';\n\
         await revoke({ refresh: true });\n\
         let error = 'no error';\n\
         try { await whoami({}); } catch (e) { error = String(e); }\n\
         export default error;\n",
    );
    let revoked = runbyte(&["exec", "revoked.ts"]);
    assert!(
        revoked
            .stdout
            .contains("needs login: run `runbyte login secure`"),
        "{revoked:?}\n{}",
        server.log()
    );
    assert_eq!(server.stats()["token_errors"], 1, "{}", server.log());
    let (files, access, refresh) = stored_tokens(&dir);
    assert!(
        access.is_empty() && refresh.is_empty(),
        "the refused tokens should be dropped from {files:?}"
    );
    let after = runbyte(&["tools"]);
    assert!(
        after
            .stdout
            .contains("needs login: run `runbyte login secure`"),
        "{after:?}"
    );
    let stats = server.stats();
    assert_eq!(
        stats["token_errors"], 1,
        "a refused refresh token was tried again: {stats}"
    );
    assert_eq!(stats["registrations"], 1, "{stats}");

    // Logging in again reuses the registered client.
    let again = login(&dir, config, &browser(&dir, &python), &server);
    assert_eq!(again.code, Some(0), "{again:?}\n{}", server.log());
    let called = runbyte(&["call", "secure", "whoami", "{}"]);
    assert_eq!(called.code, Some(0), "{called:?}\n{}", server.log());
    let stats = server.stats();
    assert_eq!(stats["registrations"], 1, "{stats}");
    assert_eq!(stats["authorizations"], 2, "{stats}");

    // A tool that needs more scope is refused (403 insufficient_scope) with what to do; the
    // scope it asked for is kept, so the next login (another process) asks for it too.
    let short = runbyte(&["call", "secure", "admin", "{}"]);
    let said = format!("{}{}", short.stdout, short.stderr);
    assert!(
        short.code != Some(0)
            && said.contains("insufficient_scope")
            && said.contains("runbyte login secure"),
        "{short:?}"
    );
    let stepped_up = login(&dir, config, &browser(&dir, &python), &server);
    assert_eq!(stepped_up.code, Some(0), "{stepped_up:?}\n{}", server.log());
    assert!(
        stepped_up.stdout.contains("mcp:admin") && stepped_up.stdout.contains("mcp:tools"),
        "the step-up asks for the old scope and the new one: {stepped_up:?}"
    );
    let allowed = runbyte(&["call", "secure", "admin", "{}"]);
    assert_eq!(allowed.code, Some(0), "{allowed:?}\n{}", server.log());
    assert_eq!(server.stats()["registrations"], 1, "{}", server.log());

    // A server that sends the token back (in a result, in an error) does not get it to the
    // program's answer or the audit log: the token is a secret from the moment it is obtained.
    dir.write(
        "leak.ts",
        "import { leak } from './servers/secure';\n\
         const shown = await leak({});\n\
         let thrown = 'no error';\n\
         try { await leak({ fail: true }); } catch (e) { thrown = String(e); }\n\
         export default { shown, thrown };\n",
    );
    let leaked = runbyte(&["exec", "leak.ts"]);
    assert_eq!(leaked.code, Some(0), "{leaked:?}\n{}", server.log());
    let (_, access, _) = stored_tokens(&dir);
    assert!(!access.is_empty());
    let audit = std::fs::read_to_string(dir.path().join("audit.jsonl")).unwrap();
    assert!(audit.contains("\"tool\":\"leak\""), "{audit}");
    for token in &access {
        assert!(!leaked.stdout.contains(token.as_str()), "{leaked:?}");
        assert!(
            !audit.contains(token.as_str()),
            "the audit log holds the token:\n{audit}"
        );
    }
    let result = result_json(&leaked.stdout);
    for what in ["shown", "thrown"] {
        let text = result[what].as_str().unwrap_or_default();
        assert!(
            text.contains("your token is [REDACTED]"),
            "{what}: {result}"
        );
    }
}

/// `execute_code` of `program` through a real MCP client connected to `runbyte serve` (its
/// state folder `dir/state`, where `login` keeps the tokens); the answer's text.
async fn execute(dir: &TempDir, program: &str) -> String {
    let client = client(dir).await;
    let (text, _) = call(&client, "execute_code", json!({ "code": program })).await;
    client.cancel().await.unwrap();
    text
}

/// The value a credentials file records as its authorization server.
fn recorded_authorization_server(dir: &TempDir) -> Vec<String> {
    let (files, _, _) = stored_tokens(dir);
    let mut found = Vec::new();
    for file in files {
        let value: Value = serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
        if let Some(pinned) = value["authorization_server"].as_str() {
            found.push(pinned.to_owned());
        }
    }
    found
}

/// A client-credentials server whose protected-resource metadata switches to another
/// authorization server while Runbyte runs: the configured client secret never reaches it. The
/// first grant pins the authorization server in the credentials file; the next grant (after the
/// server refused the token) is refused by name, saying which server is named and which issued
/// the credentials. A configured `authorization-server` is held to the same way, from the first
/// grant on.
#[tokio::test(flavor = "multi_thread")]
async fn a_client_secret_goes_only_to_the_pinned_authorization_server() {
    let Some(python) = test_dep("venv/bin/python") else {
        return;
    };
    const SECRET: &str = "cc-secret-5566778899";
    let dir = TempDir::new("oauth-pinned-cc");
    let client_arg = format!("cc-client:{SECRET}");
    let server = OAuthServer::named(&python, &dir, "resource", 3600, &[&client_arg]);
    let hostile = OAuthServer::named(&python, &dir, "hostile", 3600, &[&client_arg]);
    let table = |name: &str, extra: &str| {
        format!(
            "[servers.{name}]\nurl = \"{}/mcp\"\nauth = \"client-credentials\"\n\
             client-id = \"cc-client\"\nclient-secret = \"{SECRET}\"\n{extra}",
            server.base
        )
    };
    dir.write(
        "runbyte.toml",
        &config_of(&[
            table("secure", ""),
            table(
                "pinned",
                &format!("authorization-server = \"{}\"\n", server.base),
            ),
        ]),
    );
    let client = client(&dir).await;
    let first = call(
        &client,
        "execute_code",
        json!({ "code": "import { callTool } from 'runbyte:bridge';\n\
                 export default await callTool('secure', 'whoami', {});" }),
    )
    .await
    .0;
    assert!(first.contains("cc-client"), "{first}\n{}", server.log());
    assert!(
        server.stats()["client_credentials_grants"].as_u64() >= Some(1),
        "{}",
        server.log()
    );
    let recorded = recorded_authorization_server(&dir);
    assert!(
        !recorded.is_empty() && recorded.iter().all(|pinned| *pinned == server.base),
        "the first grant's authorization server is recorded: {recorded:?}"
    );

    // The server now names another authorization server, and forgets its tokens.
    server.switch_to(&hostile);
    let (after, _) = call(
        &client,
        "execute_code",
        json!({ "code": "import { callTool } from 'runbyte:bridge';\n\
                 await callTool('secure', 'revoke', {});\n\
                 const out = {};\n\
                 for (const s of ['secure', 'pinned']) {\n\
                   try { out[s] = await callTool(s, 'whoami', {}); }\n\
                   catch (e) { out[s] = String(e.message ?? e); }\n\
                 }\n\
                 export default out;" }),
    )
    .await;
    client.cancel().await.unwrap();
    let result = result_json(&after);
    let secure = result["secure"].as_str().unwrap_or_default();
    assert!(
        secure.contains(&format!(
            "now names authorization server `{}`, but its credentials were issued by `{}`",
            hostile.base, server.base
        )) && secure.contains("nothing was sent"),
        "{result}\n{}",
        server.log()
    );
    let pinned = result["pinned"].as_str().unwrap_or_default();
    assert!(
        pinned.contains(&format!(
            "names authorization server `{}`, but `authorization-server` in [servers.pinned] is `{}`",
            hostile.base, server.base
        )),
        "{result}"
    );
    let stats = hostile.stats();
    assert_eq!(
        stats["token_requests"],
        0,
        "the secret went to it: {stats}\n{}",
        hostile.log()
    );
    assert_eq!(stats["client_secrets_received"], 0, "{stats}");
    assert_eq!(stats["registrations"], 0, "{stats}");
    assert!(!after.contains(SECRET), "{after}");
}

/// `runbyte login` with a configured client and secret pins the authorization server that
/// issued them; when the server names another, a fresh gateway refuses to hand the stored
/// client or tokens to it (by name, saying how to trust it), and a new `runbyte login` refuses
/// to send the configured secret there. The other server gets nothing.
#[tokio::test(flavor = "multi_thread")]
async fn a_login_and_its_tokens_stay_with_the_authorization_server_that_issued_them() {
    let Some(python) = test_dep("venv/bin/python") else {
        return;
    };
    const SECRET: &str = "web-secret-1122334455";
    let dir = TempDir::new("oauth-pinned-login");
    let client_arg = format!("web-client:{SECRET}");
    let server = OAuthServer::named(&python, &dir, "resource", 3600, &[&client_arg]);
    let hostile = OAuthServer::named(&python, &dir, "hostile", 3600, &[&client_arg]);
    let config = dir.write(
        "runbyte.toml",
        &config_of(&[format!(
            "[servers.secure]\nurl = \"{}/mcp\"\nauth = \"oauth\"\nclient-id = \"web-client\"\n\
             client-secret = \"{SECRET}\"\n",
            server.base
        )]),
    );
    let config = config.to_str().unwrap().to_owned();
    let browser = browser(&dir, &python);
    let logged_in = login(&dir, &config, &browser, &server);
    assert_eq!(logged_in.code, Some(0), "{logged_in:?}\n{}", server.log());
    assert_eq!(
        recorded_authorization_server(&dir),
        std::slice::from_ref(&server.base)
    );
    let whoami = "import { whoami } from './servers/secure';\nexport default await whoami({});";
    let before = execute(&dir, whoami).await;
    assert!(before.contains("web-client"), "{before}\n{}", server.log());

    server.switch_to(&hostile);
    let after = execute(
        &dir,
        "import { callTool } from 'runbyte:bridge';\n\
         try { await callTool('secure', 'whoami', {}); }\n\
         catch (e) { console.log('ERR ' + String(e.message ?? e)); }\n\
         export default 'done';",
    )
    .await;
    assert!(
        after.contains(&format!(
            "now names authorization server `{}`, but its credentials were issued by `{}`",
            hostile.base, server.base
        )) && after.contains("run `runbyte login secure` to trust it"),
        "{after}\n{}",
        server.log()
    );
    // The credentials are kept (the server may switch back), not dropped.
    let (_, access, refresh) = stored_tokens(&dir);
    assert!(!access.is_empty() && !refresh.is_empty());

    let again = login(&dir, &config, &browser, &hostile);
    let said = format!("{}{}", again.stdout, again.stderr);
    assert!(
        again.code != Some(0)
            && said.contains(&format!(
                "the configured `client-secret` was issued by `{}`",
                server.base
            ))
            && said.contains("authorization-server"),
        "{again:?}"
    );
    let stats = hostile.stats();
    for counter in [
        "token_requests",
        "client_secrets_received",
        "registrations",
        "authorizations",
    ] {
        assert_eq!(stats[counter], 0, "{counter}: {stats}\n{}", hostile.log());
    }
}

/// A server that echoes the token it was sent (as text, inside JSON text and structured
/// content, in an embedded resource, in an error result and a JSON-RPC error) never gets it to
/// the program: every string of the result is redacted at the Hub, so the program cannot
/// return it reversed or as character codes either; and a call whose arguments hold a known
/// secret (a configured credential header) is refused, naming the server and tool.
#[tokio::test(flavor = "multi_thread")]
async fn a_token_a_server_echoes_never_reaches_the_program() {
    let Some(python) = test_dep("venv/bin/python") else {
        return;
    };
    const HEADER_SECRET: &str = "hdr-key-7788990011";
    let dir = TempDir::new("oauth-echo");
    let server = OAuthServer::with_lifetime(&python, &dir, 3600);
    let config = dir.write(
        "runbyte.toml",
        &config_of(&[format!(
            "[servers.secure]\nurl = \"{}/mcp\"\nauth = \"oauth\"\n\
             headers = {{ X-Api-Key = \"{HEADER_SECRET}\" }}\n",
            server.base
        )]),
    );
    let logged_in = login(
        &dir,
        config.to_str().unwrap(),
        &browser(&dir, &python),
        &server,
    );
    assert_eq!(logged_in.code, Some(0), "{logged_in:?}\n{}", server.log());
    let program = format!(
        "import {{ leak, echo }} from './servers/secure';\n\
         const got = {{}};\n\
         got.text = await leak({{}});\n\
         got.json = await leak({{ mode: 'json' }});\n\
         got.resource = await leak({{ mode: 'resource' }});\n\
         for (const [name, args] of [['failed', {{ fail: true }}], ['rpc', {{ mode: 'rpc' }}]]) {{\n\
           try {{ got[name] = await leak(args); }} catch (e) {{ got[name] = String(e.message ?? e); }}\n\
         }}\n\
         const all = JSON.stringify(got);\n\
         const reversed = all.split('').reverse().join('');\n\
         const codes = Array.from(all).map((c) => c.charCodeAt(0)).join(',');\n\
         let refused = 'sent';\n\
         try {{ await echo({{ text: 'key ' + '{HEADER_SECRET}' }}); }}\n\
         catch (e) {{ refused = String(e.message ?? e); }}\n\
         export default {{ all, reversed, codes, refused }};"
    );
    let calls_before = server.stats()["tool_calls"].as_u64().unwrap();
    let answer = execute(&dir, &program).await;
    let result = result_json(&answer);
    let (_, access, refresh) = stored_tokens(&dir);
    assert!(!access.is_empty());
    let all = result["all"].as_str().unwrap_or_default();
    assert!(
        all.matches("[REDACTED]").count() >= 5 && all.contains("your token is [REDACTED]"),
        "{result}"
    );
    for token in access.iter().chain(&refresh) {
        let reversed: String = token.chars().rev().collect();
        let codes = token
            .chars()
            .map(|c| (c as u32).to_string())
            .collect::<Vec<_>>()
            .join(",");
        for (form, text) in [
            ("as is", token),
            ("reversed", &reversed),
            ("as codes", &codes),
        ] {
            assert!(
                !answer.contains(text.as_str()),
                "the token {form} in {answer}"
            );
        }
    }
    let refused = result["refused"].as_str().unwrap_or_default();
    assert!(
        refused.contains("secure/echo") && refused.contains("hold a secret"),
        "{result}"
    );
    assert!(!answer.contains(HEADER_SECRET), "{answer}");
    // leak ×5 reached the server; echo did not.
    let calls = server.stats()["tool_calls"].as_u64().unwrap() - calls_before;
    assert_eq!(calls, 5, "{}", server.log());
}

/// A `$BROWSER` that first opens `idle` connections to `runbyte login`'s redirect listener (its
/// port is in the authorization URL's `redirect_uri`) and keeps them open, silent, while it
/// follows the authorization server's redirect to the listener.
fn crowded_browser(dir: &TempDir, python: &Path, idle: usize) -> PathBuf {
    let script = dir.write(
        "crowded.py",
        &format!(
            "import socket, sys, urllib.parse, urllib.request\n\
             url = sys.argv[1]\n\
             query = urllib.parse.parse_qs(urllib.parse.urlparse(url).query)\n\
             port = urllib.parse.urlparse(query['redirect_uri'][0]).port\n\
             idle = [socket.create_connection(('127.0.0.1', port)) for _ in range({idle})]\n\
             print(urllib.request.urlopen(url, timeout=60).status, file=sys.stderr)\n"
        ),
    );
    let shell = dir.write(
        "crowded.sh",
        &format!(
            "#!/bin/sh\nexec '{}' '{}' \"$1\"\n",
            python.display(),
            script.display()
        ),
    );
    std::fs::set_permissions(&shell, std::fs::Permissions::from_mode(0o755)).unwrap();
    shell
}

/// Idle local connections to the login's redirect listener (more than it serves at once) do
/// not hold up the real redirect: the login completes while they stay open. (It served one
/// connection at a time, 10 s each: 40 idle ones held the redirect 400 s.)
#[test]
fn a_login_completes_while_idle_connections_crowd_its_listener() {
    let Some(python) = test_dep("venv/bin/python") else {
        return;
    };
    let dir = TempDir::new("oauth-crowded");
    let server = OAuthServer::with_lifetime(&python, &dir, 3600);
    let config = dir.write(
        "runbyte.toml",
        &config_of(&[format!(
            "[servers.secure]\nurl = \"{}/mcp\"\nauth = \"oauth\"\n",
            server.base
        )]),
    );
    let started = Instant::now();
    let logged_in = login(
        &dir,
        config.to_str().unwrap(),
        &crowded_browser(&dir, &python, 40),
        &server,
    );
    assert_eq!(logged_in.code, Some(0), "{logged_in:?}\n{}", server.log());
    // The figure is about a second; the bound only catches the old waits.
    assert!(
        started.elapsed() < Duration::from_secs(45),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(server.stats()["code_grants"], 1);
}
