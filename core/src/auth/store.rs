//! Where a server's OAuth credentials are kept: one private file per server under the user's
//! state folder (`$XDG_STATE_HOME/runbyte/oauth/<server>.json`, mode 0600), or memory (for
//! `runbyte probe`, which keeps nothing).
//!
//! A file holds the client Runbyte is to the authorization server (its id, the secret a
//! registration gave it, its redirect URI), the scopes asked for at the last login, and rmcp's
//! [`StoredCredentials`] (the token response). It is bound to the server's URL: credentials
//! granted for another URL are not used.

use std::{
    path::{Path, PathBuf},
    sync::{Arc, Mutex},
};

use rmcp::transport::auth::{
    AuthError, CredentialRefreshGuard, CredentialStore, OAuthClientConfig, StoredCredentials,
};
use serde::{Deserialize, Serialize};

/// The largest credentials file read.
const MAX_FILE_BYTES: u64 = 1024 * 1024;

/// What is kept for one server.
#[derive(Clone, Default, Serialize, Deserialize)]
pub struct Saved {
    /// The server's URL when these were granted.
    pub url: String,
    /// The client Runbyte registered as (or was configured as).
    #[serde(default)]
    pub client: Option<Client>,
    /// The scopes asked for at the last login; a step-up asks for these and more.
    #[serde(default)]
    pub scopes: Vec<String>,
    /// The token response and what rmcp keeps with it.
    #[serde(default)]
    pub credentials: Option<StoredCredentials>,
    /// The authorization server (its issuer, else its token endpoint) these were issued by, as
    /// recorded at the first login or client-credentials grant: secrets and tokens go to no
    /// other until a login trusts another.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authorization_server: Option<String>,
}

impl Saved {
    /// The authorization server these credentials are pinned to: as recorded, else (a file
    /// from before the pin was recorded) the issuer of the client or of the tokens.
    pub fn pinned(&self) -> Option<&str> {
        self.authorization_server
            .as_deref()
            .or_else(|| self.client.as_ref().and_then(|c| c.issuer.as_deref()))
            .or_else(|| self.credentials.as_ref().and_then(|c| c.issuer.as_deref()))
    }
}

/// The OAuth client Runbyte is, for one authorization server.
#[derive(Clone, Serialize, Deserialize)]
pub struct Client {
    pub client_id: String,
    #[serde(default)]
    pub client_secret: Option<String>,
    pub redirect_uri: String,
    /// The authorization server it is registered with (its issuer), when it said.
    #[serde(default)]
    pub issuer: Option<String>,
}

impl Client {
    /// rmcp's view of this client, asking for `scopes`.
    pub fn config(&self, scopes: &[String]) -> OAuthClientConfig {
        let config = OAuthClientConfig::new(&self.client_id, &self.redirect_uri)
            .with_scopes(scopes.to_vec());
        match &self.client_secret {
            Some(secret) => config.with_client_secret(secret),
            None => config,
        }
    }
}

/// Where credentials live.
#[derive(Clone)]
enum Place {
    File(PathBuf),
    Memory(Arc<Mutex<Option<Saved>>>),
}

/// One server's credentials.
#[derive(Clone)]
pub struct Store {
    place: Place,
    url: String,
}

impl Store {
    /// The file of server `name` under the user's state folder; memory when there is no such
    /// folder (no `HOME`).
    pub fn for_server(name: &str, url: &str) -> Store {
        match crate::dirs::user_folder(crate::dirs::Base::State, "oauth") {
            Some(folder) => Store::file(folder.join(file_name(name)), url),
            None => Store::memory(url),
        }
    }

    pub fn file(path: PathBuf, url: &str) -> Store {
        Store {
            place: Place::File(path),
            url: url.to_owned(),
        }
    }

    pub fn memory(url: &str) -> Store {
        Store {
            place: Place::Memory(Arc::default()),
            url: url.to_owned(),
        }
    }

    /// The file, when there is one.
    pub fn path(&self) -> Option<&Path> {
        match &self.place {
            Place::File(path) => Some(path),
            Place::Memory(_) => None,
        }
    }

    /// What is kept for this server's URL; `None` when nothing is, or it was for another URL.
    pub fn load(&self) -> Result<Option<Saved>, String> {
        let saved = match &self.place {
            Place::Memory(saved) => super::lock(saved).clone(),
            Place::File(path) => read(path)?,
        };
        Ok(saved.filter(|saved| saved.url == self.url))
    }

    pub fn save(&self, saved: &Saved) -> Result<(), String> {
        match &self.place {
            Place::Memory(slot) => {
                *super::lock(slot) = Some(saved.clone());
                Ok(())
            }
            Place::File(path) => {
                let text = serde_json::to_vec_pretty(saved).map_err(|e| e.to_string())?;
                crate::config::write_private(path, &text)
                    .map_err(|error| format!("cannot write {}: {error}", path.display()))
            }
        }
    }

    /// Forgets everything; whether there was something.
    pub fn clear(&self) -> Result<bool, String> {
        match &self.place {
            Place::Memory(slot) => Ok(super::lock(slot).take().is_some()),
            Place::File(path) => match std::fs::remove_file(path) {
                Ok(()) => Ok(true),
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(false),
                Err(error) => Err(format!("cannot delete {}: {error}", path.display())),
            },
        }
    }

    /// Holds the file's lock (`<file>.lock`, `flock`) while it lives: two processes that share
    /// the file (two gateways, or a gateway and `runbyte login`) refresh one at a time, so a
    /// rotated refresh token is never used twice.
    fn lock(&self) -> Result<Option<std::fs::File>, String> {
        let Place::File(path) = &self.place else {
            return Ok(None);
        };
        let lock_path = path.with_extension("lock");
        if let Some(dir) = lock_path.parent() {
            crate::config::private_dir(dir)
                .map_err(|error| format!("cannot create {}: {error}", dir.display()))?;
        }
        // Never through a symbolic link planted at its (predictable) name.
        let mut options = std::fs::OpenOptions::new();
        options.create(true).truncate(false).write(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(0o600).custom_flags(libc::O_NOFOLLOW);
        }
        let file = options
            .open(&lock_path)
            .map_err(|error| format!("cannot open {}: {error}", lock_path.display()))?;
        #[cfg(unix)]
        {
            use std::os::fd::AsRawFd;
            // SAFETY: flock on a descriptor this function owns; it blocks until the lock is free.
            if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } != 0 {
                let error = std::io::Error::last_os_error();
                return Err(format!("cannot lock {}: {error}", lock_path.display()));
            }
        }
        Ok(Some(file))
    }
}

fn read(path: &Path) -> Result<Option<Saved>, String> {
    // Looked at before anything is read: a file too large to be ours is never read whole.
    match std::fs::metadata(path) {
        Ok(metadata) if metadata.len() > MAX_FILE_BYTES => {
            return Err(format!(
                "{} is larger than {MAX_FILE_BYTES} bytes: not a credentials file; delete it \
                 with `runbyte logout`",
                path.display()
            ));
        }
        _ => {}
    }
    let text = match crate::config::read_private(path, "credentials file") {
        Ok(Ok(text)) => text,
        Ok(Err(open_to_others)) => return Err(open_to_others),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(format!("cannot read {}: {error}", path.display())),
    };
    serde_json::from_str(&text).map(Some).map_err(|error| {
        format!(
            "{} is not a Runbyte credentials file ({error}); delete it with `runbyte logout`",
            path.display()
        )
    })
}

/// A server name as a file name: letters, digits, `-`, `_` and `.` as they are, anything else
/// as `%XX`.
fn file_name(server: &str) -> String {
    let mut name = String::new();
    for byte in server.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_') {
            name.push(byte as char);
        } else {
            name.push_str(&format!("%{byte:02X}"));
        }
    }
    name.push_str(".json");
    name
}

/// rmcp's view of a [`Store`]: only the token part, with the client part kept as it was set
/// (`keeping`), so that what rmcp saves after a login or refresh lands beside the client.
pub struct Tokens {
    store: Store,
    keeping: Mutex<Saved>,
}

impl Tokens {
    pub fn new(store: Store, keeping: Saved) -> Tokens {
        Tokens {
            store,
            keeping: Mutex::new(keeping),
        }
    }
}

fn store_error(message: String) -> AuthError {
    AuthError::CredentialStoreError(message)
}

#[async_trait::async_trait]
impl CredentialStore for Tokens {
    async fn load(&self) -> Result<Option<StoredCredentials>, AuthError> {
        let loaded = self.store.load().map_err(store_error)?;
        Ok(loaded.and_then(|saved| saved.credentials))
    }

    async fn save(&self, credentials: StoredCredentials) -> Result<(), AuthError> {
        let saved = {
            let mut keeping = super::lock(&self.keeping);
            keeping.credentials = Some(credentials);
            keeping.clone()
        };
        self.store.save(&saved).map_err(store_error)
    }

    async fn clear(&self) -> Result<(), AuthError> {
        let saved = {
            let mut keeping = super::lock(&self.keeping);
            keeping.credentials = None;
            keeping.clone()
        };
        self.store.save(&saved).map_err(store_error)
    }

    /// The authorization server refused the refresh token for good: the tokens are dropped
    /// (the client is kept), so that nothing tries it again until someone logs in.
    async fn on_refresh_token_rejected(
        &self,
        rejected: &StoredCredentials,
    ) -> Result<(), AuthError> {
        let refresh_of = |credentials: &StoredCredentials| {
            credentials
                .token_response
                .as_ref()
                .and_then(oauth2::TokenResponse::refresh_token)
                .map(|token| token.secret().clone())
        };
        let Some(mut saved) = self.store.load().map_err(store_error)? else {
            return Ok(());
        };
        // Only if they are still the ones refused (another process may have logged in since).
        if saved.credentials.as_ref().and_then(refresh_of) != refresh_of(rejected) {
            return Ok(());
        }
        saved.credentials = None;
        super::lock(&self.keeping).credentials = None;
        self.store.save(&saved).map_err(store_error)
    }

    async fn acquire_refresh_guard(&self) -> Result<Option<CredentialRefreshGuard>, AuthError> {
        let store = self.store.clone();
        let file = tokio::task::spawn_blocking(move || store.lock())
            .await
            .map_err(|error| store_error(error.to_string()))?
            .map_err(store_error)?;
        Ok(file.map(CredentialRefreshGuard::new))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_file_is_private_bound_to_its_url_and_cleared_by_logout() {
        let dir = std::env::temp_dir().join(format!("runbyte-oauth-store-{}", std::process::id()));
        let path = dir.join(file_name("my server/1"));
        assert!(path.ends_with("my%20server%2F1.json"), "{}", path.display());
        let store = Store::file(path.clone(), "https://a.example/mcp");
        assert!(store.load().unwrap().is_none());
        let saved = Saved {
            url: "https://a.example/mcp".to_owned(),
            scopes: vec!["read".to_owned()],
            ..Saved::default()
        };
        store.save(&saved).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600);
        }
        assert_eq!(store.load().unwrap().unwrap().scopes, ["read"]);
        let elsewhere = Store::file(path.clone(), "https://b.example/mcp");
        assert!(
            elsewhere.load().unwrap().is_none(),
            "another URL's credentials"
        );
        assert!(store.clear().unwrap());
        assert!(!store.clear().unwrap());
        // A file too large to be one is refused unread, by name, and logout still removes it.
        let big = std::fs::File::create(&path).unwrap();
        big.set_len(MAX_FILE_BYTES + 1).unwrap();
        drop(big);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        }
        let error = store.load().err().unwrap();
        assert!(
            error.contains("larger than") && error.contains("my%20server"),
            "{error}"
        );
        assert!(store.clear().unwrap());
        let _ = std::fs::remove_dir_all(dir);
    }
}
