//! `runbyte login`: the OAuth 2.1 authorization-code flow with PKCE, run once per server by a
//! person (and again for more scopes).
//!
//! The server's 401 names its protected-resource metadata, which names the authorization
//! server. Runbyte identifies itself by a configured client id, else the client it registered
//! before, else a client ID metadata document (`client-metadata-url`, where the authorization
//! server takes them), else by registering (RFC 7591). It then prints the authorization URL,
//! opens a browser when there is one, and takes the redirect on a loopback port of its own.

use std::{path::PathBuf, time::Duration};

use reqwest::header::{ACCEPT, CONTENT_TYPE, WWW_AUTHENTICATE};
use rmcp::transport::auth::{
    AuthError, AuthorizationCallback, AuthorizationManager, StateStore, StoredAuthorizationState,
};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
};

use super::{
    Account, keep_secret,
    store::{Client, Saved, Tokens},
};

/// What oauth2 says of a token request that got no answer at all (`RequestTokenError::Request`).
const UNANSWERED: &str = "Request failed";

/// How long `runbyte login` waits for the person to finish in the browser.
const WAIT_FOR_REDIRECT: Duration = Duration::from_secs(300);

/// The largest request head the redirect listener reads.
const MAX_REQUEST_HEAD: usize = 8 * 1024;

/// What a login obtained.
#[derive(Debug)]
pub struct Granted {
    /// The scopes granted (as the authorization server said, else as asked).
    pub scopes: Vec<String>,
    /// How long the access token lives, when the server said.
    pub expires_in: Option<Duration>,
    /// Whether a refresh token came with it (else a new login when it expires).
    pub refreshable: bool,
    /// Where the credentials are kept (none: in memory).
    pub file: Option<PathBuf>,
}

/// How the authorization URL reaches a browser.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Opener {
    /// `$BROWSER` when set, else the desktop's opener (`xdg-open` with a display, `open` on
    /// macOS) when there is one; the URL is printed either way.
    System,
    /// Only print the URL.
    Never,
}

impl Opener {
    /// Opens `url`; what was run, if anything.
    fn open(self, url: &str) -> Option<String> {
        if self == Opener::Never {
            return None;
        }
        let (program, mut args) = match std::env::var("BROWSER")
            .ok()
            .and_then(|value| value.split(':').next().map(str::trim).map(str::to_owned))
            .filter(|entry| !entry.is_empty())
        {
            Some(entry) => {
                let mut words = entry.split_whitespace().map(str::to_owned);
                (words.next()?, words.collect::<Vec<_>>())
            }
            None if cfg!(target_os = "macos") => ("open".to_owned(), Vec::new()),
            None if std::env::var_os("DISPLAY").is_some()
                || std::env::var_os("WAYLAND_DISPLAY").is_some() =>
            {
                ("xdg-open".to_owned(), Vec::new())
            }
            None => return None,
        };
        if args.iter().any(|arg| arg.contains("%s")) {
            args = args.iter().map(|arg| arg.replace("%s", url)).collect();
        } else {
            args.push(url.to_owned());
        }
        let mut child = std::process::Command::new(&program)
            .args(&args)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .ok()?;
        std::thread::spawn(move || child.wait());
        Some(program)
    }
}

/// Logs in to `account`'s server; `say` prints a line for the person.
pub async fn login(
    account: &Account,
    opener: Opener,
    say: &mut (dyn FnMut(&str) + Send),
) -> Result<Granted, String> {
    let server = account.server();
    let failed = |what: &str, error: AuthError| format!("{server}: {what}: {error}");
    let challenge = match account.challenge() {
        Some(challenge) => Some(challenge),
        None => ask_for_challenge(account).await?,
    };
    let mut manager = super::manager_for(&account.url)
        .await
        .map_err(|error| failed("bad URL", error))?;
    let resolution = manager
        .resolve_metadata_from_challenge(challenge.as_deref())
        .await
        .map_err(|error| failed("cannot discover its authorization server", error))?;
    let metadata = resolution.metadata;
    manager.set_metadata(metadata.clone());
    let saved = account.store.load()?.unwrap_or_default();
    // The authorization server is held to the pinned one (SEP-2352 lets a server move): a
    // configured `authorization-server` admits no other; a recorded one gives way to this login
    // (a person runs it and sees where the browser goes), except that a configured client
    // secret belongs to the one it was issued by and is never sent to another.
    let named = super::authorization_server_of(&metadata);
    if let Err(refused) = account.check_authorization_server(&metadata, Some(&saved)) {
        if matches!(account.pin(Some(&saved)), Some(super::Pin::Configured(_))) {
            return Err(refused);
        }
        if account.settings.client_secret.is_some() {
            return Err(format!(
                "{server}: it now names authorization server `{named}`, but the configured \
                 `client-secret` was issued by `{}`: nothing was sent to `{named}`; if \
                 `{named}` is right, set `authorization-server = \"{named}\"` in \
                 [servers.{server}] (with the client it issued)",
                saved.pinned().unwrap_or_default()
            ));
        }
        say(&format!(
            "Note: `{server}` now names authorization server `{named}`; its old credentials were \
             issued by `{}`. Logging in trusts `{named}` from now on.",
            saved.pinned().unwrap_or_default()
        ));
    }
    // What was kept belongs to the authorization server that issued it: a server that moved to
    // another one gets a new registration and no old scopes.
    let same_issuer = saved
        .client
        .as_ref()
        .map(|client| client.issuer.clone())
        .or_else(|| saved.credentials.as_ref().map(|c| c.issuer.clone()))
        .is_none_or(|issuer| issuer == metadata.issuer)
        && saved
            .pinned()
            .is_none_or(|pinned| super::same_authorization_server(pinned, &named));

    // Scopes: as configured, else as the server asks; with those of the last login (a step-up
    // asks for more, never fewer).
    let mut scopes = account
        .settings
        .scopes
        .clone()
        .unwrap_or_else(|| manager.select_scopes(None, &[]));
    if same_issuer {
        for scope in &saved.scopes {
            if !scopes.contains(scope) {
                scopes.push(scope.clone());
            }
        }
    }
    if !scopes.is_empty()
        && !scopes.iter().any(|scope| scope == "offline_access")
        && metadata
            .scopes_supported
            .as_ref()
            .is_some_and(|supported| supported.iter().any(|scope| scope == "offline_access"))
    {
        scopes.push("offline_access".to_owned());
    }
    let scope_refs: Vec<&str> = scopes.iter().map(String::as_str).collect();

    // The client, and the loopback port its redirect URI names.
    let reusable = saved.client.clone().filter(|client| {
        same_issuer
            && account
                .settings
                .client_id
                .as_ref()
                .is_none_or(|id| *id == client.client_id)
    });
    let (listener, client) = match reusable.and_then(|client| {
        let port = port_of(&client.redirect_uri)?;
        Some((
            std::net::TcpListener::bind(("127.0.0.1", port)).ok()?,
            client,
        ))
    }) {
        Some((listener, client)) => (into_tokio(listener)?, client),
        None => {
            let listener = TcpListener::bind(("127.0.0.1", 0))
                .await
                .map_err(|error| format!("cannot listen on a loopback port: {error}"))?;
            let port = listener.local_addr().map_err(|e| e.to_string())?.port();
            let redirect_uri = format!("http://127.0.0.1:{port}/callback");
            let client =
                choose_client(account, &mut manager, &metadata, &redirect_uri, &scope_refs).await?;
            (listener, client)
        }
    };
    if let Some(secret) = &client.client_secret {
        keep_secret(secret);
    }
    let client = Client {
        issuer: metadata.issuer.clone(),
        ..client
    };
    manager
        .configure_client(client.config(&scopes))
        .map_err(|error| failed("bad client", error))?;
    manager.set_state_store(OneLogin::default());
    manager.set_credential_store(Tokens::new(
        account.store.clone(),
        Saved {
            url: account.url.clone(),
            client: Some(client),
            scopes: scopes.clone(),
            credentials: None,
            authorization_server: Some(named.clone()),
        },
    ));
    let url = manager
        .get_authorization_url(&scope_refs)
        .await
        .map_err(|error| failed("cannot make the authorization URL", error))?;

    say(&format!(
        "Open this URL to let Runbyte use `{server}` (waiting {} s for the redirect):",
        WAIT_FOR_REDIRECT.as_secs()
    ));
    say(&url);
    if let Some(program) = opener.open(&url) {
        say(&format!("(opened with {program})"));
    }
    let state = reqwest::Url::parse(&url)
        .ok()
        .and_then(|url| {
            url.query_pairs()
                .find(|(key, _)| key == "state")
                .map(|(_, value)| value.into_owned())
        })
        .ok_or_else(|| format!("{server}: the authorization URL carries no `state`"))?;
    let waiting = wait_for_redirect(&listener, server, &state);
    let redirect = tokio::time::timeout(WAIT_FOR_REDIRECT, waiting)
        .await
        .map_err(|_| {
            format!(
                "{server}: no redirect came back within {} s; run `runbyte login {server}` again",
                WAIT_FOR_REDIRECT.as_secs()
            )
        })??;
    let callback = AuthorizationCallback::from_redirect_url(&redirect)
        .map_err(|error| failed("the redirect is not an authorization response", error))?;
    // A request that failed before the authorization server answered (a pooled connection it
    // had closed while the person was in the browser) is sent once more: the code is unspent.
    // Another failure (a refusal, the code spent) is not retried.
    let mut exchanged = Err(AuthError::InternalError("not exchanged".to_owned()));
    for _ in 0..2 {
        exchanged = manager
            .exchange_code_for_token_with_issuer(
                &callback.code,
                &callback.csrf_token,
                callback.issuer.as_deref(),
            )
            .await;
        match &exchanged {
            Err(AuthError::TokenExchangeFailed(why)) if why == UNANSWERED => {
                tracing::info!(
                    server,
                    "the code exchange was not answered; sending it again"
                );
            }
            _ => break,
        }
    }
    let response =
        exchanged.map_err(|error| failed("the authorization server refused the code", error))?;
    keep_secret(oauth2::TokenResponse::access_token(&response).secret());
    if let Some(refresh) = oauth2::TokenResponse::refresh_token(&response) {
        keep_secret(refresh.secret());
    }
    account.logged_in().await;
    let stored = account.store.load()?.and_then(|saved| saved.credentials);
    Ok(Granted {
        scopes: stored
            .map(|credentials| credentials.granted_scopes)
            .filter(|granted| !granted.is_empty())
            .unwrap_or(scopes),
        expires_in: oauth2::TokenResponse::expires_in(&response),
        refreshable: oauth2::TokenResponse::refresh_token(&response).is_some(),
        file: account.store.path().map(PathBuf::from),
    })
}

/// The PKCE state of this one login, kept until the login ends (rmcp deletes it before the
/// code exchange, which would make a lost exchange impossible to send again). The state is
/// still checked against the redirect's.
#[derive(Default)]
struct OneLogin(std::sync::Mutex<std::collections::HashMap<String, StoredAuthorizationState>>);

#[async_trait::async_trait]
impl StateStore for OneLogin {
    async fn save(&self, csrf: &str, state: StoredAuthorizationState) -> Result<(), AuthError> {
        super::lock(&self.0).insert(csrf.to_owned(), state);
        Ok(())
    }

    async fn load(&self, csrf: &str) -> Result<Option<StoredAuthorizationState>, AuthError> {
        Ok(super::lock(&self.0).get(csrf).cloned())
    }

    async fn delete(&self, _csrf: &str) -> Result<(), AuthError> {
        Ok(())
    }
}

/// Which client Runbyte is: the configured id, else a client ID metadata document where the
/// authorization server takes one, else one it registers now.
async fn choose_client(
    account: &Account,
    manager: &mut AuthorizationManager,
    metadata: &rmcp::transport::auth::AuthorizationMetadata,
    redirect_uri: &str,
    scopes: &[&str],
) -> Result<Client, String> {
    let server = account.server();
    if let Some(client_id) = &account.settings.client_id {
        return Ok(Client {
            client_id: client_id.clone(),
            client_secret: account.settings.client_secret.clone(),
            redirect_uri: redirect_uri.to_owned(),
            issuer: metadata.issuer.clone(),
        });
    }
    let takes_documents = metadata
        .additional_fields
        .get("client_id_metadata_document_supported")
        .and_then(serde_json::Value::as_bool)
        .unwrap_or(false);
    if let Some(document) = &account.settings.client_metadata_url
        && takes_documents
    {
        return Ok(Client {
            client_id: document.clone(),
            client_secret: None,
            redirect_uri: redirect_uri.to_owned(),
            issuer: metadata.issuer.clone(),
        });
    }
    if metadata.registration_endpoint.is_none() {
        return Err(format!(
            "{server}: its authorization server takes no client registration{}; register Runbyte \
             there and set `client-id` (and `client-secret`) in [servers.{server}]",
            if takes_documents {
                " (it takes client ID metadata documents: set `client-metadata-url`)"
            } else {
                ""
            }
        ));
    }
    let registered = manager
        .register_client("Runbyte", redirect_uri, scopes)
        .await
        .map_err(|error| format!("{server}: registering Runbyte as a client failed: {error}"))?;
    Ok(Client {
        client_id: registered.client_id,
        client_secret: registered.client_secret,
        redirect_uri: redirect_uri.to_owned(),
        issuer: metadata.issuer.clone(),
    })
}

/// The challenge of an unauthenticated request to the server (`None` when it took the request
/// anyway, as a server does that protects only some operations).
async fn ask_for_challenge(account: &Account) -> Result<Option<String>, String> {
    super::install_crypto();
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .map_err(|error| format!("cannot build an HTTP client: {error}"))?;
    let with_headers = |mut request: reqwest::RequestBuilder| {
        for (name, value) in &account.settings.headers {
            if !name.eq_ignore_ascii_case("authorization") {
                request = request.header(name.as_str(), value.as_str());
            }
        }
        request
    };
    let unreachable = |error: reqwest::Error| {
        format!(
            "{}: cannot reach {}: {error}",
            account.server(),
            crate::redact::redact(&account.url)
        )
    };
    let challenge_of = |response: &reqwest::Response| {
        response
            .headers()
            .get(WWW_AUTHENTICATE)
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned)
    };
    let initialize = serde_json::json!({
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "runbyte", "version": env!("CARGO_PKG_VERSION")}
        }
    });
    let posted = with_headers(client.post(account.url.as_str()))
        .header(ACCEPT, "application/json, text/event-stream")
        .header(CONTENT_TYPE, "application/json")
        .header("MCP-Protocol-Version", "2025-11-25")
        .body(initialize.to_string())
        .send()
        .await
        .map_err(unreachable)?;
    if let Some(challenge) = challenge_of(&posted) {
        return Ok(Some(challenge));
    }
    // A legacy SSE endpoint takes GET, not POST: its 401 comes to the stream's request. The
    // response is dropped unread.
    let streamed = with_headers(client.get(account.url.as_str()))
        .header(ACCEPT, "text/event-stream")
        .send()
        .await
        .map_err(unreachable)?;
    Ok(challenge_of(&streamed))
}

fn port_of(redirect_uri: &str) -> Option<u16> {
    let url = reqwest::Url::parse(redirect_uri).ok()?;
    (url.host_str() == Some("127.0.0.1")).then_some(())?;
    url.port()
}

fn into_tokio(listener: std::net::TcpListener) -> Result<TcpListener, String> {
    listener
        .set_nonblocking(true)
        .and_then(|()| TcpListener::from_std(listener))
        .map_err(|error| format!("cannot listen on a loopback port: {error}"))
}

/// How many connections the redirect listener serves at once.
const MAX_CONNECTIONS: usize = 32;

/// How long a connection has to send its request line and headers.
const REQUEST_HEAD_TIMEOUT: Duration = Duration::from_secs(2);

/// Waits for the browser's request to `/callback` carrying this login's `state`; its full URL.
/// Other requests (a favicon, a page or process that found the port and sends a made-up
/// redirect or error) are answered and the wait goes on.
///
/// Connections are served at once, at most [`MAX_CONNECTIONS`] together: one that has not sent
/// its request head ([`MAX_REQUEST_HEAD`] bytes at most) within [`REQUEST_HEAD_TIMEOUT`] is
/// dropped, and when all are busy the oldest is dropped for a new one, so idle or slow local
/// connections never keep the real redirect waiting.
async fn wait_for_redirect(
    listener: &TcpListener,
    server: &str,
    state: &str,
) -> Result<String, String> {
    let port = listener.local_addr().map_err(|e| e.to_string())?.port();
    let (done, mut finished) = tokio::sync::mpsc::channel::<Result<String, String>>(1);
    let mut serving = tokio::task::JoinSet::new();
    let mut order: std::collections::VecDeque<tokio::task::AbortHandle> =
        std::collections::VecDeque::new();
    loop {
        let (stream, _) = tokio::select! {
            accepted = listener.accept() => accepted
                .map_err(|error| format!("the redirect listener failed: {error}"))?,
            Some(outcome) = finished.recv() => return outcome,
        };
        while serving.try_join_next().is_some() {}
        order.retain(|task| !task.is_finished());
        if order.len() >= MAX_CONNECTIONS
            && let Some(oldest) = order.pop_front()
        {
            oldest.abort();
        }
        let (done, server, state) = (done.clone(), server.to_owned(), state.to_owned());
        order.push_back(serving.spawn(async move {
            if let Some(outcome) = serve_one(stream, port, &server, &state).await {
                let _ = done.send(outcome).await;
            }
        }));
    }
}

/// Serves one connection to the redirect listener: the login's outcome when it carried this
/// login's redirect.
async fn serve_one(
    mut stream: TcpStream,
    port: u16,
    server: &str,
    state: &str,
) -> Option<Result<String, String>> {
    let Ok(Ok(target)) =
        tokio::time::timeout(REQUEST_HEAD_TIMEOUT, request_target(&mut stream)).await
    else {
        return None;
    };
    if target != "/callback" && !target.starts_with("/callback?") {
        respond(
            &mut stream,
            "404 Not Found",
            "Not the authorization redirect.",
        )
        .await;
        return None;
    }
    let url = format!("http://127.0.0.1:{port}{target}");
    let query: Vec<(String, String)> = reqwest::Url::parse(&url)
        .map(|url| url.query_pairs().into_owned().collect())
        .unwrap_or_default();
    let get = |key: &str| {
        query
            .iter()
            .find(|(name, _)| name == key)
            .map(|(_, value)| value.clone())
    };
    if get("state").as_deref() != Some(state) {
        respond(
            &mut stream,
            "400 Bad Request",
            "Not the redirect of this login (its state does not match).",
        )
        .await;
        return None;
    }
    if let Some(error) = get("error") {
        let description = get("error_description").unwrap_or_default();
        respond(
            &mut stream,
            "200 OK",
            &format!("Runbyte was not authorized: {error} {description}"),
        )
        .await;
        return Some(Err(format!(
            "{server}: the authorization server answered `{error}` {description}"
        )));
    }
    respond(
        &mut stream,
        "200 OK",
        &format!("Runbyte may now use {server}. You can close this page."),
    )
    .await;
    Some(Ok(url))
}

/// The target of an HTTP request's first line (`GET <target> HTTP/1.1`).
async fn request_target(stream: &mut TcpStream) -> Result<String, String> {
    let mut head = Vec::new();
    let mut buffer = [0u8; 2048];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let read = stream.read(&mut buffer).await.map_err(|e| e.to_string())?;
        if read == 0 {
            break;
        }
        head.extend_from_slice(&buffer[..read]);
        if head.len() > MAX_REQUEST_HEAD {
            return Err("request head too large".to_owned());
        }
    }
    let text = String::from_utf8_lossy(&head);
    let mut words = text.lines().next().unwrap_or_default().split_whitespace();
    match (words.next(), words.next()) {
        (Some("GET"), Some(target)) => Ok(target.to_owned()),
        _ => Err("not a GET".to_owned()),
    }
}

async fn respond(stream: &mut TcpStream, status: &str, text: &str) {
    let body = format!(
        "<!doctype html><meta charset=utf-8><title>Runbyte</title><p>{}</p>",
        text.replace('&', "&amp;").replace('<', "&lt;")
    );
    let answer = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: {}\r\n\
         Cache-Control: no-store\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let sending = async {
        let _ = stream.write_all(answer.as_bytes()).await;
        let _ = stream.shutdown().await;
    };
    let _ = tokio::time::timeout(REQUEST_HEAD_TIMEOUT, sending).await;
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::{
        io::{Read, Write},
        time::Instant,
    };

    use super::*;

    /// One GET to the listener; the status line of its answer.
    fn get(port: u16, target: &str) -> String {
        let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        write!(stream, "GET {target} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).unwrap();
        answer.lines().next().unwrap_or_default().to_owned()
    }

    /// Only the redirect that carries this login's state ends the wait: a made-up error or code
    /// (from a web page or a local process that found the port), another path, a request that
    /// is not HTTP, or a connection that sends nothing does not.
    #[tokio::test]
    async fn only_this_logins_redirect_ends_the_wait() {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let waiting =
            tokio::spawn(async move { wait_for_redirect(&listener, "s", "the-state").await });
        let statuses = tokio::task::spawn_blocking(move || {
            let silent = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
            drop(silent);
            let mut garbage = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
            garbage.write_all(&[0xff; 40_000]).ok();
            drop(garbage);
            [
                get(port, "/callback?error=access_denied"),
                get(port, "/callback?error=access_denied&state=guess"),
                get(port, "/callback?code=forged&state=guess"),
                get(port, "/favicon.ico"),
                get(port, "/callback?code=real&state=the-state"),
            ]
        })
        .await
        .unwrap();
        assert!(
            statuses[..3].iter().all(|s| s.contains("400")),
            "{statuses:?}"
        );
        assert!(statuses[3].contains("404"), "{statuses:?}");
        assert!(statuses[4].contains("200"), "{statuses:?}");
        let url = waiting.await.unwrap().unwrap();
        assert_eq!(
            url,
            format!("http://127.0.0.1:{port}/callback?code=real&state=the-state")
        );
    }

    /// Idle local connections (more than the listener serves at once, none sending a byte) do
    /// not keep the real redirect waiting: it is answered at once, and a connection that
    /// sends half a request head is dropped after 2 s. (Before: one connection at a time,
    /// 10 s each, so 40 idle ones held the redirect 400 s.)
    #[tokio::test]
    async fn idle_connections_do_not_delay_the_redirect() {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let waiting =
            tokio::spawn(async move { wait_for_redirect(&listener, "s", "the-state").await });
        let idle: Vec<_> = (0..2 * MAX_CONNECTIONS + 8)
            .map(|_| std::net::TcpStream::connect(("127.0.0.1", port)).unwrap())
            .collect();
        let mut half = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        half.write_all(b"GET /callback?code=x").unwrap();
        let started = Instant::now();
        let status =
            tokio::task::spawn_blocking(move || get(port, "/callback?code=real&state=the-state"));
        let url = tokio::time::timeout(Duration::from_secs(30), waiting)
            .await
            .expect("the redirect waited behind idle connections")
            .unwrap()
            .unwrap();
        let elapsed = started.elapsed();
        assert!(status.await.unwrap().contains("200"));
        assert!(url.ends_with("code=real&state=the-state"), "{url}");
        // Far above the figure (a few ms), only to catch the old behaviour's waits.
        assert!(elapsed < Duration::from_secs(20), "{elapsed:?}");
        drop(idle);

        // A connection that sends half a head and stops is closed by the listener in 2 s.
        let listener = TcpListener::bind(("127.0.0.1", 0)).await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let _waiting =
            tokio::spawn(async move { wait_for_redirect(&listener, "s", "the-state").await });
        let closed = tokio::task::spawn_blocking(move || {
            let mut half = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
            half.write_all(b"GET /callback HTTP/1.1\r\n").unwrap();
            half.set_read_timeout(Some(Duration::from_secs(30)))
                .unwrap();
            let started = Instant::now();
            let mut rest = Vec::new();
            let read = half.read_to_end(&mut rest);
            (read.is_ok(), started.elapsed())
        })
        .await
        .unwrap();
        assert!(
            closed.0,
            "the listener should close it, not the read timeout"
        );
        assert!(closed.1 < Duration::from_secs(10), "{:?}", closed.1);
        drop(half);
    }
}
