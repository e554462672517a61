//! Where each OS keeps a user's configuration: Runbyte's own `runbyte.toml` and the MCP clients'
//! files that `runbyte setup` and `runbyte doctor` edit and read. A leaf.
//!
//! The rules are pure functions of an [`Os`] and the environment, so that each OS's rules are
//! unit-tested on any OS; [`Os::CURRENT`] (chosen by `cfg`) and [`process_env`] are what the
//! commands use.

use std::{ffi::OsString, path::PathBuf};

/// The operating systems whose folder conventions Runbyte knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Os {
    /// Linux and the other Unix systems that follow the XDG base-directory rules.
    Linux,
    /// macOS: `~/Library/Application Support`.
    MacOs,
    /// Windows: `%APPDATA%` (the roaming profile) and `%USERPROFILE%`.
    Windows,
}

impl Os {
    /// The OS this binary was built for.
    #[cfg(target_os = "macos")]
    pub const CURRENT: Os = Os::MacOs;
    /// The OS this binary was built for.
    #[cfg(windows)]
    pub const CURRENT: Os = Os::Windows;
    /// The OS this binary was built for.
    #[cfg(not(any(target_os = "macos", windows)))]
    pub const CURRENT: Os = Os::Linux;
}

/// The environment the rules read: a variable's value, `None` when unset or empty.
pub type Env<'a> = &'a dyn Fn(&str) -> Option<OsString>;

/// This process's environment, as [`Env`] (an empty variable counts as unset).
pub fn process_env(name: &str) -> Option<OsString> {
    std::env::var_os(name).filter(|value| !value.is_empty())
}

/// The user's home folder: `%USERPROFILE%` on Windows (else `HOME`), `HOME` elsewhere.
pub fn home(os: Os, env: Env) -> Option<PathBuf> {
    let value = match os {
        Os::Windows => env("USERPROFILE").or_else(|| env("HOME")),
        Os::Linux | Os::MacOs => env("HOME"),
    };
    value.map(PathBuf::from)
}

/// The folder applications keep per-user settings in: `$XDG_CONFIG_HOME` (absolute) else
/// `~/.config` on Linux, `~/Library/Application Support` on macOS, `%APPDATA%` on Windows.
pub fn app_config_dir(os: Os, env: Env) -> Option<PathBuf> {
    match os {
        // Absolute by Linux's rule (a leading `/`), whatever OS these rules are tested on.
        Os::Linux => env("XDG_CONFIG_HOME")
            .filter(|dir| dir.as_encoded_bytes().starts_with(b"/"))
            .map(PathBuf::from)
            .or_else(|| home(os, env).map(|home| home.join(".config"))),
        Os::MacOs => home(os, env).map(|home| home.join("Library").join("Application Support")),
        Os::Windows => env("APPDATA")
            .map(PathBuf::from)
            .or_else(|| home(os, env).map(|home| home.join("AppData").join("Roaming"))),
    }
}

/// The per-user `runbyte.toml`: `<app config dir>/runbyte/runbyte.toml`
/// (`~/.config/runbyte/runbyte.toml`, `~/Library/Application Support/runbyte/runbyte.toml`,
/// `%APPDATA%\runbyte\runbyte.toml`).
pub fn user_config_file(os: Os, env: Env) -> Option<PathBuf> {
    app_config_dir(os, env).map(|dir| dir.join("runbyte").join("runbyte.toml"))
}

/// The MCP clients `runbyte setup` knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Client {
    /// Claude Desktop: `claude_desktop_config.json`, `mcpServers`.
    ClaudeDesktop,
    /// Claude Code: `~/.claude.json`, the user scope's top-level `mcpServers`.
    ClaudeCode,
    /// Cursor: `~/.cursor/mcp.json`, `mcpServers`.
    Cursor,
    /// VS Code: the default profile's `mcp.json`, `servers`.
    Vscode,
    /// Windsurf: `~/.codeium/windsurf/mcp_config.json`, `mcpServers`.
    Windsurf,
}

impl Client {
    /// Every client, in the order `runbyte doctor` lists them.
    pub const ALL: [Client; 5] = [
        Client::ClaudeDesktop,
        Client::ClaudeCode,
        Client::Cursor,
        Client::Vscode,
        Client::Windsurf,
    ];

    /// The name on the command line (`claude-desktop`).
    pub fn id(self) -> &'static str {
        match self {
            Client::ClaudeDesktop => "claude-desktop",
            Client::ClaudeCode => "claude-code",
            Client::Cursor => "cursor",
            Client::Vscode => "vscode",
            Client::Windsurf => "windsurf",
        }
    }

    /// The name people know it by.
    pub fn title(self) -> &'static str {
        match self {
            Client::ClaudeDesktop => "Claude Desktop",
            Client::ClaudeCode => "Claude Code",
            Client::Cursor => "Cursor",
            Client::Vscode => "VS Code",
            Client::Windsurf => "Windsurf",
        }
    }

    /// The client whose [`id`](Client::id) this is.
    pub fn from_id(id: &str) -> Option<Client> {
        Client::ALL.into_iter().find(|client| client.id() == id)
    }

    /// The top-level key of its file that holds the servers.
    pub fn servers_key(self) -> &'static str {
        match self {
            Client::Vscode => "servers",
            _ => "mcpServers",
        }
    }

    /// Its user-level configuration file on `os`; `None` when the environment names no home.
    ///
    /// - Claude Desktop: `<app config dir>/Claude/claude_desktop_config.json`.
    /// - Claude Code: `$CLAUDE_CONFIG_DIR/.claude.json` when set, else `~/.claude.json`.
    /// - Cursor: `~/.cursor/mcp.json`.
    /// - VS Code: `<app config dir>/Code/User/mcp.json` (the default profile).
    /// - Windsurf: `~/.codeium/windsurf/mcp_config.json`.
    pub fn config_file(self, os: Os, env: Env) -> Option<PathBuf> {
        match self {
            Client::ClaudeDesktop => app_config_dir(os, env)
                .map(|dir| dir.join("Claude").join("claude_desktop_config.json")),
            Client::ClaudeCode => match env("CLAUDE_CONFIG_DIR") {
                Some(dir) => Some(PathBuf::from(dir).join(".claude.json")),
                None => home(os, env).map(|home| home.join(".claude.json")),
            },
            Client::Cursor => home(os, env).map(|home| home.join(".cursor").join("mcp.json")),
            Client::Vscode => {
                app_config_dir(os, env).map(|dir| dir.join("Code").join("User").join("mcp.json"))
            }
            Client::Windsurf => home(os, env).map(|home| {
                home.join(".codeium")
                    .join("windsurf")
                    .join("mcp_config.json")
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use std::path::Path;

    use super::*;

    fn env_of(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<OsString> {
        move |name| {
            pairs
                .iter()
                .find(|(key, _)| *key == name)
                .map(|(_, value)| OsString::from(value))
        }
    }

    fn path(client: Client, os: Os, env: Env) -> PathBuf {
        client.config_file(os, env).expect("a path")
    }

    #[test]
    fn linux_follows_xdg_and_home() {
        let env = env_of(&[("HOME", "/home/ada")]);
        let home = Path::new("/home/ada");
        assert_eq!(
            path(Client::ClaudeDesktop, Os::Linux, &env),
            home.join(".config/Claude/claude_desktop_config.json")
        );
        assert_eq!(
            path(Client::ClaudeCode, Os::Linux, &env),
            home.join(".claude.json")
        );
        assert_eq!(
            path(Client::Cursor, Os::Linux, &env),
            home.join(".cursor/mcp.json")
        );
        assert_eq!(
            path(Client::Vscode, Os::Linux, &env),
            home.join(".config/Code/User/mcp.json")
        );
        assert_eq!(
            path(Client::Windsurf, Os::Linux, &env),
            home.join(".codeium/windsurf/mcp_config.json")
        );
        assert_eq!(
            user_config_file(Os::Linux, &env).unwrap(),
            home.join(".config/runbyte/runbyte.toml")
        );

        // An absolute XDG_CONFIG_HOME moves the app folders; a relative one is ignored, as the
        // XDG rules say.
        let env = env_of(&[("HOME", "/home/ada"), ("XDG_CONFIG_HOME", "/cfg")]);
        assert_eq!(
            path(Client::Vscode, Os::Linux, &env),
            Path::new("/cfg/Code/User/mcp.json")
        );
        assert_eq!(
            user_config_file(Os::Linux, &env).unwrap(),
            Path::new("/cfg/runbyte/runbyte.toml")
        );
        assert_eq!(
            path(Client::Cursor, Os::Linux, &env),
            home.join(".cursor/mcp.json")
        );
        let env = env_of(&[("HOME", "/home/ada"), ("XDG_CONFIG_HOME", "cfg")]);
        assert_eq!(
            user_config_file(Os::Linux, &env).unwrap(),
            home.join(".config/runbyte/runbyte.toml")
        );

        // CLAUDE_CONFIG_DIR moves Claude Code's file.
        let env = env_of(&[("HOME", "/home/ada"), ("CLAUDE_CONFIG_DIR", "/cc")]);
        assert_eq!(
            path(Client::ClaudeCode, Os::Linux, &env),
            Path::new("/cc/.claude.json")
        );

        // No HOME: nothing to name.
        let env = env_of(&[]);
        assert!(Client::Cursor.config_file(Os::Linux, &env).is_none());
        assert!(user_config_file(Os::Linux, &env).is_none());
    }

    #[test]
    fn macos_uses_application_support() {
        // XDG_CONFIG_HOME is not a macOS convention: the apps ignore it, and so does Runbyte.
        let env = env_of(&[("HOME", "/Users/ada"), ("XDG_CONFIG_HOME", "/cfg")]);
        let support = Path::new("/Users/ada/Library/Application Support");
        assert_eq!(
            path(Client::ClaudeDesktop, Os::MacOs, &env),
            support.join("Claude/claude_desktop_config.json")
        );
        assert_eq!(
            path(Client::Vscode, Os::MacOs, &env),
            support.join("Code/User/mcp.json")
        );
        assert_eq!(
            path(Client::ClaudeCode, Os::MacOs, &env),
            Path::new("/Users/ada/.claude.json")
        );
        assert_eq!(
            path(Client::Cursor, Os::MacOs, &env),
            Path::new("/Users/ada/.cursor/mcp.json")
        );
        assert_eq!(
            path(Client::Windsurf, Os::MacOs, &env),
            Path::new("/Users/ada/.codeium/windsurf/mcp_config.json")
        );
        assert_eq!(
            user_config_file(Os::MacOs, &env).unwrap(),
            support.join("runbyte/runbyte.toml")
        );
    }

    #[test]
    fn windows_uses_appdata_and_userprofile() {
        let env = env_of(&[
            ("USERPROFILE", r"C:\Users\ada"),
            ("APPDATA", r"C:\Users\ada\AppData\Roaming"),
            ("HOME", "/ignored"),
        ]);
        let roaming = PathBuf::from(r"C:\Users\ada\AppData\Roaming");
        let profile = PathBuf::from(r"C:\Users\ada");
        assert_eq!(
            path(Client::ClaudeDesktop, Os::Windows, &env),
            roaming.join("Claude").join("claude_desktop_config.json")
        );
        assert_eq!(
            path(Client::Vscode, Os::Windows, &env),
            roaming.join("Code").join("User").join("mcp.json")
        );
        assert_eq!(
            path(Client::ClaudeCode, Os::Windows, &env),
            profile.join(".claude.json")
        );
        assert_eq!(
            path(Client::Cursor, Os::Windows, &env),
            profile.join(".cursor").join("mcp.json")
        );
        assert_eq!(
            path(Client::Windsurf, Os::Windows, &env),
            profile
                .join(".codeium")
                .join("windsurf")
                .join("mcp_config.json")
        );
        assert_eq!(
            user_config_file(Os::Windows, &env).unwrap(),
            roaming.join("runbyte").join("runbyte.toml")
        );
        // Without APPDATA, the roaming folder under the profile.
        let env = env_of(&[("USERPROFILE", r"C:\Users\ada")]);
        assert_eq!(
            user_config_file(Os::Windows, &env).unwrap(),
            profile
                .join("AppData")
                .join("Roaming")
                .join("runbyte")
                .join("runbyte.toml")
        );
    }

    #[test]
    fn ids_round_trip() {
        for client in Client::ALL {
            assert_eq!(Client::from_id(client.id()), Some(client));
        }
        assert_eq!(Client::from_id("emacs"), None);
    }
}
