//! OAuth for downstream servers reached over HTTP: `runbyte login` once ([`login`]), then a
//! bearer token on every connection, refreshed before it expires and after a 401.
//!
//! The flow itself (metadata discovery from the 401's `WWW-Authenticate`, registration, PKCE,
//! the code exchange, refresh, issuer checks) is rmcp's [`AuthorizationManager`]; this module
//! decides when to use it, keeps its results ([`store`]) and says what a user must do.
//! Transport plugins see only an `Authorization` header in the connection target, so every
//! connector, bundled or third-party, carries the token without knowing about OAuth.
//!
//! Tokens never reach the VFS, a program, the logs or the audit log: each one is added to the
//! redaction layer as it is obtained.

mod failure;
mod login;
pub mod store;

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex, MutexGuard},
    time::{Duration, Instant},
};

use rmcp::transport::auth::{AuthError, AuthorizationManager, ClientCredentialsConfig};

use crate::config::{Auth, Config, ServerConfig};
pub use failure::AuthFailure;
pub use login::{Granted, Opener, login};
use store::{Store, Tokens};

/// How long before its expiry a token is replaced.
const REFRESH_AHEAD: Duration = Duration::from_secs(60);

/// The most scopes kept for a server from its challenges.
const MAX_KEPT_SCOPES: usize = 64;

/// How long the network part of getting a token (discovery, refresh) may take.
const TOKEN_TIMEOUT: Duration = Duration::from_secs(30);

/// What a server that needs a person to log in says, with the command that does it.
pub fn needs_login(server: &str) -> String {
    format!("needs login: run `runbyte login {server}`")
}

/// Who an authorization server is, for pinning: its issuer (rmcp has checked that its metadata
/// came from there, RFC 8414 §3.3), else (metadata made up from the server's URL, when it
/// publishes none) its token endpoint.
pub(crate) fn authorization_server_of(
    metadata: &rmcp::transport::auth::AuthorizationMetadata,
) -> String {
    metadata
        .issuer
        .clone()
        .unwrap_or_else(|| metadata.token_endpoint.clone())
}

/// Whether two issuer identifiers name the same authorization server (a root path's trailing
/// `/` aside).
fn same_authorization_server(a: &str, b: &str) -> bool {
    a.trim_end_matches('/') == b.trim_end_matches('/')
}

/// Where a server's pinned authorization server comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Pin {
    /// `authorization-server` in its table.
    Configured(String),
    /// Recorded in its credentials file at the first login or grant.
    Recorded(String),
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// rmcp's HTTP client is reqwest built without a default TLS provider (features unify with the
/// bundled HTTP plugins'): ring's is installed before any is built. Installing twice is harmless.
fn install_crypto() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// rmcp's authorization manager for a server's URL.
async fn manager_for(url: &str) -> Result<AuthorizationManager, AuthError> {
    install_crypto();
    AuthorizationManager::new(url).await
}

/// Adds a token (or a registered client's secret) to the redaction layer: from now on it is
/// redacted from every output and kept from programs (`crate::redact::learn`).
fn keep_secret(token: &str) {
    crate::redact::learn(token);
}

/// Adds every secret a credentials file holds (the refresh token, the client secret) to the
/// redaction layer, as the access token is when it is used.
fn keep_saved_secrets(saved: &store::Saved) {
    if let Some(secret) = saved.client.as_ref().and_then(|c| c.client_secret.as_ref()) {
        keep_secret(secret);
    }
    if let Some(response) = saved
        .credentials
        .as_ref()
        .and_then(|c| c.token_response.as_ref())
    {
        keep_secret(oauth2::TokenResponse::access_token(response).secret());
        if let Some(refresh) = oauth2::TokenResponse::refresh_token(response) {
            keep_secret(refresh.secret());
        }
    }
}

/// One server's credentials at run time.
pub struct Account {
    server: String,
    url: String,
    mode: Option<Auth>,
    settings: ServerConfig,
    store: Store,
    live: tokio::sync::Mutex<Live>,
    /// The last challenge the server sent (from a refused connection or call).
    challenge: Mutex<Option<String>>,
    /// Set by a login in this process: connections opened before it (without a token, or with
    /// the old one) are to be replaced.
    logged_in: std::sync::atomic::AtomicBool,
    /// Why the server needs a login, while it does and nothing is stored.
    waiting: Mutex<Option<String>>,
}

/// What an account holds in memory between calls.
#[derive(Default)]
struct Live {
    manager: Option<AuthorizationManager>,
    token: Option<String>,
    /// When `token` is to be replaced (its expiry less [`REFRESH_AHEAD`]).
    renew_at: Option<Instant>,
    /// When `token` was obtained by a refresh after a refusal: calls refused with the token
    /// before it share that refresh rather than each making one.
    refreshed_at: Option<Instant>,
}

/// How long a refresh after a refusal answers for every call refused with the token before it.
const REFRESH_SHARED_FOR: Duration = Duration::from_secs(5);

/// Why there is no token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NoToken {
    /// A person must log in (again): the message names the command.
    NeedsLogin(String),
    /// The server now names another authorization server than the one its tokens came from:
    /// nothing was sent to it; a login (after the user checks it) trusts the new one.
    Untrusted(String),
    /// Something failed that may work later (the authorization server is unreachable).
    Failed(String),
}

impl std::fmt::Display for NoToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NoToken::NeedsLogin(message)
            | NoToken::Untrusted(message)
            | NoToken::Failed(message) => f.write_str(message),
        }
    }
}

impl Account {
    /// The account of a server with a `url`, its credentials in the user's state folder.
    pub fn new(server: &str, settings: &ServerConfig) -> Option<Account> {
        let url = settings.url.as_deref()?;
        Some(Account::with_store(
            server,
            settings,
            Store::for_server(server, url),
        ))
    }

    pub fn with_store(server: &str, settings: &ServerConfig, store: Store) -> Account {
        Account {
            server: server.to_owned(),
            url: settings.url.clone().unwrap_or_default(),
            mode: settings.auth,
            settings: settings.clone(),
            store,
            live: Default::default(),
            challenge: Mutex::new(None),
            logged_in: Default::default(),
            waiting: Mutex::new(None),
        }
    }

    pub fn server(&self) -> &str {
        &self.server
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    fn needs_login(&self) -> NoToken {
        NoToken::NeedsLogin(needs_login(&self.server))
    }

    /// The authorization server this server's secrets and tokens may go to: the configured
    /// `authorization-server`, else the one recorded in `saved`; none before the first login.
    pub(crate) fn pin(&self, saved: Option<&store::Saved>) -> Option<Pin> {
        if let Some(configured) = &self.settings.authorization_server {
            return Some(Pin::Configured(configured.clone()));
        }
        saved
            .and_then(store::Saved::pinned)
            .map(|recorded| Pin::Recorded(recorded.to_owned()))
    }

    /// Refuses, by name, an authorization server other than the pinned one, before anything
    /// (a client secret, a code, a refresh token) is sent to it.
    pub(crate) fn check_authorization_server(
        &self,
        metadata: &rmcp::transport::auth::AuthorizationMetadata,
        saved: Option<&store::Saved>,
    ) -> Result<(), String> {
        let named = authorization_server_of(metadata);
        let server = &self.server;
        match self.pin(saved) {
            None => Ok(()),
            Some(Pin::Configured(pinned) | Pin::Recorded(pinned))
                if same_authorization_server(&pinned, &named) =>
            {
                Ok(())
            }
            Some(Pin::Configured(pinned)) => Err(format!(
                "server `{server}` names authorization server `{named}`, but `authorization-server` \
                 in [servers.{server}] is `{pinned}`: nothing was sent to `{named}`"
            )),
            Some(Pin::Recorded(pinned)) => Err(format!(
                "server `{server}` now names authorization server `{named}`, but its credentials \
                 were issued by `{pinned}`: nothing was sent to `{named}`; if `{named}` is right, {}",
                if self.mode == Some(Auth::ClientCredentials) {
                    format!(
                        "set `authorization-server = \"{named}\"` in [servers.{server}] (or run \
                         `runbyte logout {server}` to forget `{pinned}`)"
                    )
                } else {
                    format!("run `runbyte login {server}` to trust it")
                }
            )),
        }
    }

    /// Records the challenge of a refused connection or call.
    pub fn note_challenge(&self, failure: &AuthFailure) {
        if let Some(challenge) = failure.challenge() {
            *lock(&self.challenge) = Some(challenge.to_owned());
        }
    }

    /// Adds the scopes the last challenge asked for (a 403 `insufficient_scope`) to those kept
    /// for the server, so that the next `runbyte login`, in any process, asks for them too.
    pub fn want_challenged_scopes(&self) {
        let Some(challenge) = self.challenge() else {
            return;
        };
        let Ok(base) = reqwest::Url::parse(&self.url) else {
            return;
        };
        let Some(scope) =
            rmcp::transport::auth::WWWAuthenticateParams::parse(&challenge, &base).scope
        else {
            return;
        };
        let Ok(Some(mut saved)) = self.store.load() else {
            return;
        };
        let before = saved.scopes.len();
        // A server may ask for anything: at most MAX_KEPT_SCOPES of at most 256 bytes are kept.
        for wanted in scope.split_whitespace() {
            if saved.scopes.len() >= MAX_KEPT_SCOPES {
                tracing::warn!(
                    server = %self.server,
                    "it asks for more than {MAX_KEPT_SCOPES} scopes; the rest are not kept"
                );
                break;
            }
            if wanted.len() <= 256 && !saved.scopes.iter().any(|kept| kept == wanted) {
                saved.scopes.push(wanted.to_owned());
            }
        }
        if saved.scopes.len() != before
            && let Err(error) = self.store.save(&saved)
        {
            tracing::warn!(server = %self.server, "cannot keep the scopes it asked for: {error}");
        }
    }

    /// The last challenge recorded.
    pub fn challenge(&self) -> Option<String> {
        lock(&self.challenge).clone()
    }

    /// While the server needs a login and none happened (no tokens are stored): why. A login in
    /// another process (a file appearing) ends the wait.
    pub fn awaiting_login(&self) -> Option<String> {
        let waiting = lock(&self.waiting).clone()?;
        let stored = matches!(self.store.load(), Ok(Some(saved)) if saved.credentials.is_some());
        if stored {
            *lock(&self.waiting) = None;
            return None;
        }
        Some(waiting)
    }

    /// Whether this server uses OAuth: configured so, or credentials are stored for it.
    pub fn uses_oauth(&self) -> bool {
        match self.mode {
            Some(Auth::None) => false,
            Some(Auth::Oauth | Auth::ClientCredentials) => true,
            None => matches!(self.store.load(), Ok(Some(saved)) if saved.credentials.is_some()),
        }
    }

    /// What a connection refused with `failure` means for the user: `needs login` when the
    /// server refused its credentials (HTTP 401), asks for OAuth (a Bearer challenge) and there
    /// is nothing to refresh.
    pub fn explain_refusal(&self, failure: &AuthFailure) -> Option<String> {
        if !matches!(failure, AuthFailure::Unauthorized { .. }) || self.mode == Some(Auth::None) {
            return None;
        }
        self.note_challenge(failure);
        // A Bearer challenge means OAuth (its metadata at the challenge's `resource_metadata`,
        // else at the well-known places); a 401 without one is about the static headers. The
        // last challenge kept counts when this refusal quoted none.
        let bearer = self
            .challenge()
            .is_some_and(|challenge| failure::is_bearer(&challenge));
        let explained = (self.uses_oauth() || bearer).then(|| {
            format!(
                "{} (it answered HTTP 401{})",
                needs_login(&self.server),
                if bearer {
                    " with a Bearer challenge"
                } else {
                    ""
                }
            )
        });
        if let Some(why) = &explained {
            *lock(&self.waiting) = Some(why.clone());
        }
        explained
    }

    /// The bearer token to connect with: `None` when the server uses no OAuth. A token that
    /// expires within a minute is refreshed first.
    pub async fn bearer(&self) -> Result<Option<String>, NoToken> {
        if !self.uses_oauth() {
            return Ok(None);
        }
        let mut live = self.live.lock().await;
        if let (Some(token), Some(renew_at)) = (&live.token, live.renew_at)
            && Instant::now() < renew_at
        {
            return Ok(Some(token.clone()));
        }
        let token = self.fetch_within(&mut live, false).await?;
        Ok(Some(token))
    }

    /// A new token after the server refused the last one (HTTP 401): refreshed, else
    /// [`NoToken::NeedsLogin`].
    pub async fn refreshed(&self) -> Result<String, NoToken> {
        let mut live = self.live.lock().await;
        if let (Some(token), Some(at)) = (&live.token, live.refreshed_at)
            && at.elapsed() < REFRESH_SHARED_FOR
        {
            return Ok(token.clone());
        }
        let token = self.fetch_within(&mut live, true).await?;
        live.refreshed_at = Some(Instant::now());
        Ok(token)
    }

    /// Whether a connection opened with `token` (`None`: without one) is due for replacement:
    /// its token expires within a minute, or a login here replaced it.
    pub async fn is_due(&self, token: Option<&str>) -> bool {
        let logged_in = self.logged_in.load(std::sync::atomic::Ordering::Relaxed);
        let Some(token) = token else {
            return logged_in;
        };
        let live = self.live.lock().await;
        live.token.as_deref() != Some(token)
            || live
                .renew_at
                .is_some_and(|renew_at| Instant::now() >= renew_at)
    }

    /// Forgets the token held in memory after a login: the next connection uses the new one.
    async fn logged_in(&self) {
        *self.live.lock().await = Live::default();
        *lock(&self.challenge) = None;
        *lock(&self.waiting) = None;
        self.logged_in
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// [`Account::fetch`] within [`TOKEN_TIMEOUT`].
    async fn fetch_within(&self, live: &mut Live, force_refresh: bool) -> Result<String, NoToken> {
        tokio::time::timeout(TOKEN_TIMEOUT, self.fetch(live, force_refresh))
            .await
            .unwrap_or_else(|_| {
                Err(NoToken::Failed(format!(
                    "getting a token for `{}` took longer than {} s",
                    self.server,
                    TOKEN_TIMEOUT.as_secs()
                )))
            })
    }

    async fn fetch(&self, live: &mut Live, force_refresh: bool) -> Result<String, NoToken> {
        if self.mode == Some(Auth::ClientCredentials) {
            return self.client_credentials(live).await;
        }
        if live.manager.is_none() {
            live.manager = Some(self.manager_from_store().await?);
        }
        let manager = live.manager.as_ref().expect("set above");
        // Due (within a minute of expiry) and refreshable: refreshed now, ahead of rmcp's own
        // 30 s margin, so that a connection replaced for being due gets a new token.
        let (renew_at, refreshable) = self.stored_expiry().unwrap_or((None, false));
        let due = renew_at.is_some_and(|renew_at| Instant::now() >= renew_at);
        let result = if force_refresh || (due && refreshable) {
            match manager.refresh_token().await {
                Ok(_) => manager.get_access_token().await,
                Err(error) => Err(error),
            }
        } else {
            manager.get_access_token().await
        };
        let token = match result {
            Ok(token) => token,
            Err(
                AuthError::AuthorizationRequired
                | AuthError::TokenRefreshRejected(_)
                | AuthError::InvalidScope(_),
            ) => {
                *live = Live::default();
                tracing::warn!(
                    server = %self.server,
                    "its token cannot be refreshed: {}",
                    needs_login(&self.server)
                );
                *lock(&self.waiting) = Some(needs_login(&self.server));
                return Err(self.needs_login());
            }
            Err(error) => {
                live.manager = None;
                return Err(NoToken::Failed(format!(
                    "cannot get a token for `{}`: {error}",
                    self.server
                )));
            }
        };
        keep_secret(&token);
        if let Ok(Some(saved)) = self.store.load() {
            keep_saved_secrets(&saved);
        }
        let (renew_at, refreshable) = self.stored_expiry().unwrap_or((None, false));
        // A token that cannot be refreshed is used until it expires.
        live.renew_at = if refreshable {
            renew_at
        } else {
            self.stored_expiry_at()
        };
        live.token = Some(token.clone());
        Ok(token)
    }

    /// When the stored token is to be replaced (its expiry less a minute, or half its life),
    /// if the server said when it expires; and whether it can be refreshed.
    fn stored_expiry(&self) -> Option<(Option<Instant>, bool)> {
        let saved = self.store.load().ok()??;
        let credentials = saved.credentials?;
        let response = credentials.token_response.as_ref()?;
        let refreshable = oauth2::TokenResponse::refresh_token(response).is_some();
        let Some((lifetime, left)) = lifetime_left(&credentials) else {
            return Some((None, refreshable));
        };
        let ahead = REFRESH_AHEAD.as_secs().min(lifetime / 2);
        Some((Some(after(left.saturating_sub(ahead))), refreshable))
    }

    /// When the stored token expires, if the server said.
    fn stored_expiry_at(&self) -> Option<Instant> {
        let credentials = self.store.load().ok()??.credentials?;
        let (_, left) = lifetime_left(&credentials)?;
        Some(after(left))
    }

    /// rmcp's manager for the stored credentials, with the stored client (and its secret).
    async fn manager_from_store(&self) -> Result<AuthorizationManager, NoToken> {
        let saved = match self.store.load() {
            Ok(Some(saved)) if saved.credentials.is_some() => saved,
            Ok(_) => return Err(self.needs_login()),
            Err(error) => return Err(NoToken::Failed(error)),
        };
        let failed = |error: AuthError| {
            NoToken::Failed(format!(
                "cannot reach the authorization server of `{}`: {error}",
                self.server
            ))
        };
        let mut manager = manager_for(&self.url).await.map_err(failed)?;
        // The authorization server is checked against the pinned one before the stored client
        // or tokens are handed to it (rmcp would drop the tokens of another one, saying only
        // that a login is needed).
        let resolution = manager
            .resolve_metadata_from_challenge(self.challenge().as_deref())
            .await
            .map_err(failed)?;
        if let Err(refused) = self.check_authorization_server(&resolution.metadata, Some(&saved)) {
            tracing::warn!(server = %self.server, "{refused}");
            return Err(match self.pin(Some(&saved)) {
                Some(Pin::Configured(_)) => NoToken::Failed(refused),
                _ => NoToken::Untrusted(refused),
            });
        }
        manager.set_metadata(resolution.metadata);
        manager.set_credential_store(Tokens::new(self.store.clone(), saved.clone()));
        if !manager.initialize_from_store().await.map_err(failed)? {
            // Its authorization server changed: the old tokens were dropped.
            return Err(self.needs_login());
        }
        if let Some(client) = &saved.client {
            manager
                .configure_client(client.config(&saved.scopes))
                .map_err(failed)?;
        }
        Ok(manager)
    }

    /// A client-credentials token: asked for again when the last one is due.
    async fn client_credentials(&self, live: &mut Live) -> Result<String, NoToken> {
        let failed = |error: AuthError| {
            NoToken::Failed(format!(
                "`{}`: the client-credentials grant failed: {error}",
                self.server
            ))
        };
        let mut manager = manager_for(&self.url).await.map_err(failed)?;
        let challenge = self.challenge();
        let resolution = manager
            .resolve_metadata_from_challenge(challenge.as_deref())
            .await
            .map_err(failed)?;
        let saved = self.store.load().map_err(NoToken::Failed)?;
        self.check_authorization_server(&resolution.metadata, saved.as_ref())
            .map_err(|refused| {
                tracing::warn!(server = %self.server, "{refused}");
                NoToken::Failed(refused)
            })?;
        let issuer = authorization_server_of(&resolution.metadata);
        manager.set_metadata(resolution.metadata);
        let grant = ClientCredentialsConfig::ClientSecret {
            client_id: self.settings.client_id.clone().unwrap_or_default(),
            client_secret: self.settings.client_secret.clone().unwrap_or_default(),
            scopes: self.settings.scopes.clone().unwrap_or_default(),
            resource: Some(self.url.clone()),
        };
        manager
            .configure_client_credentials(&grant)
            .map_err(failed)?;
        let response = manager
            .exchange_client_credentials(&grant)
            .await
            .map_err(failed)?;
        let token = oauth2::TokenResponse::access_token(&response)
            .secret()
            .clone();
        keep_secret(&token);
        // The first grant's authorization server is the one later grants are held to.
        if saved.as_ref().and_then(store::Saved::pinned).is_none() {
            let pinned = store::Saved {
                url: self.url.clone(),
                authorization_server: Some(issuer),
                ..saved.unwrap_or_default()
            };
            if let Err(error) = self.store.save(&pinned) {
                tracing::warn!(server = %self.server, "cannot record its authorization server: {error}");
            }
        }
        let lifetime = oauth2::TokenResponse::expires_in(&response)
            .map_or(3600, |lifetime| lifetime.as_secs());
        live.renew_at = Some(after(lifetime - REFRESH_AHEAD.as_secs().min(lifetime / 2)));
        live.token = Some(token.clone());
        Ok(token)
    }
}

/// The instant `seconds` from now, capped at a year: an authorization server's `expires_in`
/// may be any number, and `Instant` arithmetic past its range panics.
fn after(seconds: u64) -> Instant {
    Instant::now() + Duration::from_secs(seconds.min(MAX_LIFETIME_SECS))
}

/// The longest lifetime a token is taken to have (a year).
const MAX_LIFETIME_SECS: u64 = 365 * 24 * 3600;

/// A stored token's lifetime and what is left of it, in seconds, if the server said.
fn lifetime_left(credentials: &rmcp::transport::auth::StoredCredentials) -> Option<(u64, u64)> {
    let response = credentials.token_response.as_ref()?;
    let lifetime = oauth2::TokenResponse::expires_in(response)?.as_secs();
    let received = credentials.token_received_at?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .ok()?
        .as_secs();
    Some((
        lifetime,
        lifetime.saturating_sub(now.saturating_sub(received)),
    ))
}

/// Every HTTP server's account, by server name.
#[derive(Default)]
pub struct Accounts {
    accounts: BTreeMap<String, Arc<Account>>,
}

impl Accounts {
    pub fn new(config: &Config) -> Accounts {
        Accounts {
            accounts: config
                .servers
                .iter()
                .filter_map(|(name, server)| {
                    Some((name.clone(), Arc::new(Account::new(name, server)?)))
                })
                .collect(),
        }
    }

    /// Accounts whose credentials are kept in memory only (`runbyte probe`).
    pub fn in_memory(config: &Config) -> Accounts {
        Accounts {
            accounts: config
                .servers
                .iter()
                .filter_map(|(name, server)| {
                    let url = server.url.as_deref()?;
                    let account = Account::with_store(name, server, Store::memory(url));
                    Some((name.clone(), Arc::new(account)))
                })
                .collect(),
        }
    }

    pub fn get(&self, server: &str) -> Option<&Arc<Account>> {
        self.accounts.get(server)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// An authorization server may say a token lives for u64::MAX seconds: that is read as a
    /// year, not a panic; and a server that keeps asking for new scopes gets at most 64 kept.
    #[test]
    fn hostile_lifetimes_and_scopes_are_bounded() {
        let url = "https://h.example/mcp";
        let settings = ServerConfig {
            url: Some(url.to_owned()),
            ..ServerConfig::default()
        };
        let account = Account::with_store("s", &settings, Store::memory(url));
        let response: rmcp::transport::auth::OAuthTokenResponse = serde_json::from_value(
            serde_json::json!({"access_token": "a", "token_type": "bearer", "expires_in": u64::MAX}),
        )
        .unwrap();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        let credentials = rmcp::transport::auth::StoredCredentials::new(
            "c".to_owned(),
            Some(response),
            vec![],
            Some(now),
        );
        account
            .store
            .save(&store::Saved {
                url: url.to_owned(),
                credentials: Some(credentials),
                ..store::Saved::default()
            })
            .unwrap();
        let (renew_at, refreshable) = account.stored_expiry().unwrap();
        let renew_at = renew_at.unwrap();
        assert!(!refreshable);
        assert!(renew_at > Instant::now() + Duration::from_secs(300 * 24 * 3600));
        assert!(account.stored_expiry_at().is_some());

        for round in 0..100 {
            let scopes: Vec<String> = (0..10).map(|i| format!("s{round}-{i}")).collect();
            let challenge = format!(
                "HTTP 403 from {url}: no (WWW-Authenticate: Bearer error=\"insufficient_scope\", \
                 scope=\"{} {}\")",
                scopes.join(" "),
                "x".repeat(300)
            );
            account.note_challenge(&AuthFailure::of(&challenge).unwrap());
            account.want_challenged_scopes();
        }
        let kept = account.store.load().unwrap().unwrap().scopes;
        assert_eq!(kept.len(), MAX_KEPT_SCOPES);
        assert!(kept.iter().all(|scope| scope.len() <= 256));
    }

    /// The pinned authorization server: none before the first login; the recorded one (or, in
    /// an older file, the client's issuer); a configured one over both. Another is refused by
    /// name, with what to do; a root path's trailing `/` is the same server.
    #[test]
    fn another_authorization_server_is_refused_by_name() {
        let url = "https://h.example/mcp";
        let metadata = |issuer: &str| {
            serde_json::from_value::<rmcp::transport::auth::AuthorizationMetadata>(
                serde_json::json!({
                    "authorization_endpoint": format!("{issuer}/authorize"),
                    "token_endpoint": format!("{issuer}/token"),
                    "issuer": issuer,
                }),
            )
            .unwrap()
        };
        let settings = ServerConfig {
            url: Some(url.to_owned()),
            auth: Some(Auth::Oauth),
            ..ServerConfig::default()
        };
        let account = Account::with_store("s", &settings, Store::memory(url));
        let (a, b) = ("https://a.example", "https://b.example");
        assert!(
            account
                .check_authorization_server(&metadata(b), None)
                .is_ok()
        );
        let recorded = store::Saved {
            url: url.to_owned(),
            authorization_server: Some(a.to_owned()),
            ..store::Saved::default()
        };
        assert!(
            account
                .check_authorization_server(&metadata("https://a.example/"), Some(&recorded))
                .is_ok()
        );
        let refused = account
            .check_authorization_server(&metadata(b), Some(&recorded))
            .unwrap_err();
        assert!(
            refused.contains("now names authorization server `https://b.example`")
                && refused.contains("issued by `https://a.example`")
                && refused.contains("run `runbyte login s` to trust it"),
            "{refused}"
        );
        // A file from before the pin was recorded: the client's issuer.
        let older = store::Saved {
            url: url.to_owned(),
            client: Some(store::Client {
                client_id: "c".to_owned(),
                client_secret: None,
                redirect_uri: "http://127.0.0.1:1/callback".to_owned(),
                issuer: Some(a.to_owned()),
            }),
            ..store::Saved::default()
        };
        assert!(
            account
                .check_authorization_server(&metadata(b), Some(&older))
                .is_err()
        );
        // Configured: over the recorded one, for client credentials too.
        let configured = ServerConfig {
            auth: Some(Auth::ClientCredentials),
            authorization_server: Some(b.to_owned()),
            ..settings
        };
        let account = Account::with_store("s", &configured, Store::memory(url));
        assert!(
            account
                .check_authorization_server(&metadata(b), Some(&recorded))
                .is_ok()
        );
        let refused = account
            .check_authorization_server(&metadata(a), None)
            .unwrap_err();
        assert!(
            refused.contains("`authorization-server` in [servers.s] is `https://b.example`"),
            "{refused}"
        );
    }
}
