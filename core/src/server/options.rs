//! The options a network listener is started with: the bind address, the allowed hosts and
//! origins, and the bearer token (required whenever the bind is not loopback).

use std::{
    io::Write,
    net::{IpAddr, SocketAddr, ToSocketAddrs},
    path::Path,
};

use runbyte_plugin_api::wire;
use serde_json::Value;

use crate::config::Config;

/// Where network listeners bind unless told otherwise: loopback only.
pub const DEFAULT_BIND: &str = "127.0.0.1:3000";

/// Whether every address `bind` names is a loopback address.
pub fn is_loopback(bind: &str) -> bool {
    let host = bind.rsplit_once(':').map_or(bind, |(host, _)| host);
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host.eq_ignore_ascii_case("localhost") {
        return true;
    }
    match host.parse::<IpAddr>() {
        Ok(ip) => ip.is_loopback(),
        Err(_) => bind
            .to_socket_addrs()
            .map(|mut addrs| addrs.all(|addr: SocketAddr| addr.ip().is_loopback()))
            .unwrap_or(false),
    }
}

/// The bearer token in `path`, creating the file (owner-only, mode 0600) with a fresh random
/// token when it does not exist. An existing file that anyone but its owner may read or write
/// is refused: the token may already be known, and changing the mode would not unknow it.
pub fn token_from_file(path: &Path) -> Result<String, String> {
    match crate::config::read_private(path, "token file") {
        Ok(text) => {
            let text = text?;
            let token = text.trim().to_owned();
            if token.len() < 16 {
                return Err(format!(
                    "the token in {} is too short (at least 16 characters)",
                    path.display()
                ));
            }
            Ok(token)
        }
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            let mut bytes = [0u8; 32];
            getrandom::fill(&mut bytes).map_err(|e| format!("cannot make a random token: {e}"))?;
            let token: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
            // Missing folders are made 0700; the file is new (never one planted there, nor a
            // symbolic link's target), 0600.
            if let Some(parent) = path.parent() {
                let mut folders = std::fs::DirBuilder::new();
                folders.recursive(true);
                #[cfg(unix)]
                std::os::unix::fs::DirBuilderExt::mode(&mut folders, 0o700);
                folders
                    .create(parent)
                    .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
            }
            let mut file = crate::config::create_new_private(path)
                .map_err(|e| format!("cannot create {}: {e}", path.display()))?;
            file.write_all(format!("{token}\n").as_bytes())
                .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
            tracing::info!("created a new bearer token in {}", path.display());
            Ok(token)
        }
        Err(error) => Err(format!(
            "cannot read the token file {}: {error}",
            path.display()
        )),
    }
}

/// The listener options for `listen`, from the configuration and the command line's overrides.
pub fn listener_options(
    config: &Config,
    listen: &str,
    bind: Option<String>,
) -> Result<Value, String> {
    let bind = bind
        .or_else(|| config.server.bind.clone())
        .unwrap_or_else(|| DEFAULT_BIND.to_owned());
    let token = match &config.server.auth_token_file {
        Some(path) => Some(token_from_file(path)?),
        None => None,
    };
    if listen != "stdio" && token.is_none() && !is_loopback(&bind) {
        return Err(format!(
            "`{bind}` is not a loopback address: serving beyond this machine needs a bearer token; \
             set [server] auth-token-file (it is created, mode 0600, when missing)"
        ));
    }
    let options = wire::ListenerOptions {
        bind: Some(bind),
        auth_token: token,
        allowed_hosts: config.server.allowed_hosts.clone(),
        allowed_origins: config.server.allowed_origins.clone(),
        max_body_bytes: Some(config.server.max_body_bytes.unwrap_or(4 << 20)),
    };
    serde_json::to_value(options).map_err(|e| format!("cannot write the listener options: {e}"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn loopback_binds_are_told_apart() {
        assert!(is_loopback("127.0.0.1:3000"));
        assert!(is_loopback("[::1]:3000"));
        assert!(is_loopback("localhost:80"));
        assert!(!is_loopback("0.0.0.0:3000"));
        assert!(!is_loopback("192.168.1.10:3000"));
    }

    #[test]
    fn a_missing_token_file_is_created_owner_only() {
        let dir = std::env::temp_dir().join(format!("runbyte-token-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let path = dir.join("sub/token");
        let token = token_from_file(&path).unwrap();
        assert_eq!(token.len(), 64);
        assert_eq!(token_from_file(&path).unwrap(), token);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(
                std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
                0o600
            );
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[cfg(unix)]
    #[test]
    fn a_token_file_others_may_read_is_refused_with_the_fix() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("runbyte-token-open-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("token");
        std::fs::write(&path, "0123456789abcdef0123456789abcdef\n").unwrap();
        for mode in [0o644, 0o640, 0o604, 0o660] {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
            let error = token_from_file(&path).unwrap_err();
            assert!(
                error.contains(&path.display().to_string())
                    && error.contains(&format!("mode {mode:04o}"))
                    && error.contains("chmod 600"),
                "{error}"
            );
        }
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(
            token_from_file(&path).unwrap(),
            "0123456789abcdef0123456789abcdef"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_public_bind_without_a_token_is_refused() {
        let config = Config::default();
        let error = listener_options(&config, "http", Some("0.0.0.0:3000".into())).unwrap_err();
        assert!(error.contains("auth-token-file"), "{error}");
        let options = listener_options(&config, "http", None).unwrap();
        assert_eq!(options["bind"], "127.0.0.1:3000");
        assert_eq!(options["auth-token"], Value::Null);
    }
}
