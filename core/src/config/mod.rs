//! `runbyte.toml`: typed, strict, and every error names the file, the line and the key.
//!
//! Loading runs in three steps: parse the text into a spanned table, expand `${VAR}` in every
//! string (the span of each string is kept, so a missing variable is reported on its line), then
//! deserialize the typed [`Config`] with `deny_unknown_fields`. Relative paths resolve against
//! the file's own folder.

mod expand;
mod private;

pub(crate) use private::rename_over;
pub use private::{create_new_private, private_dir, read_private, write_private};
mod import;
mod locate;
#[cfg(test)]
mod tests;

use std::{
    collections::BTreeMap,
    fmt,
    path::{Path, PathBuf},
};

use serde::Deserialize;
use toml::de::{DeTable, DeValue};

pub use import::{ImportedServers, import_mcp_servers, import_servers, servers_to_toml};
use locate::Locator;

/// The configuration Runbyte falls back on when no file is given or found: the repository's own
/// `runbyte.toml` (the bundled plugins and the built-in demo server).
pub const DEFAULT_CONFIG: &str = include_str!("../../../runbyte.toml");

/// The user's own `runbyte.toml` on this OS (`$XDG_CONFIG_HOME/runbyte/runbyte.toml`, else
/// `~/.config/runbyte/runbyte.toml`; `~/Library/Application Support/runbyte/runbyte.toml` on
/// macOS; `%APPDATA%\runbyte\runbyte.toml` on Windows), whether or not it exists.
pub fn user_config_file() -> Option<PathBuf> {
    crate::os_paths::user_config_file(crate::os_paths::Os::CURRENT, &crate::os_paths::process_env)
}

/// A configuration problem, located in its file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ConfigError {
    /// The file at fault.
    pub file: PathBuf,
    /// 1-based line and column, when the problem has a place in the file.
    pub position: Option<(usize, usize)>,
    /// The dotted key at fault (`servers.demo.command`), when there is one.
    pub key: Option<String>,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some((line, column)) = self.position {
            write!(f, ":{line}:{column}")?;
        }
        f.write_str(": ")?;
        if let Some(key) = &self.key {
            write!(f, "`{key}`: ")?;
        }
        f.write_str(&self.message)
    }
}

/// The whole of `runbyte.toml`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Config {
    /// How Runbyte serves its upstream clients.
    #[serde(default)]
    pub server: ServerSection,
    /// Where plugins are found.
    #[serde(default)]
    pub plugins: PluginsSection,
    /// The codegen dialect.
    #[serde(default)]
    pub codegen: CodegenSection,
    /// The sandbox policy and its tables.
    #[serde(default)]
    pub sandbox: SandboxSection,
    /// Downstream servers, by name.
    #[serde(default)]
    pub servers: BTreeMap<String, ServerConfig>,
    /// Configuration tables for transport plugins, by plugin name.
    #[serde(default)]
    pub transports: BTreeMap<String, toml::Table>,
    /// Traces and metrics; everything off when the table is absent.
    #[serde(default)]
    pub telemetry: TelemetrySection,
    /// The folder relative paths resolve against: the file's own folder.
    #[serde(skip)]
    pub base_dir: PathBuf,
    /// The file this came from (or `<built-in default>`).
    #[serde(skip)]
    pub source: PathBuf,
}

/// `[server]`: the upstream side.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct ServerSection {
    /// The transport plugin whose listener serves clients: `stdio`, `http`, `sse` or another.
    #[serde(default = "default_listen")]
    pub listen: String,
    /// The address network listeners bind; loopback by default.
    pub bind: Option<String>,
    /// The bearer-token file for network listeners; created (mode 0600) when missing. Required
    /// whenever `bind` is not a loopback address.
    pub auth_token_file: Option<PathBuf>,
    /// The key (32 bytes or more, mode 0600) that signs the `requestState` of paused
    /// executions; replicas behind one balancer share it. Without it each process signs with a
    /// random key of its own.
    pub state_key_file: Option<PathBuf>,
    /// A Redis the replicas share, `redis://[user:password@]host[:port][/db]`: it keeps the
    /// journals too large for a `requestState` (encrypted; they expire with the state) and
    /// records each replay, so that a state resumes once across the replicas. Needs
    /// `state-key-file` (without a shared key no other replica could use what it keeps). None by
    /// default: a journal travels in the state up to 64 KiB sealed (past it, the execution
    /// resumes only where it paused), and each process refuses a second replay on its own.
    pub state_store: Option<String>,
    /// The longest an `execute_code` run as a task (SEP-2663) may take, which may be longer
    /// than a request is allowed; 1 hour by default. The program inside is still bounded by
    /// its own limits (`[sandbox.limits] timeout-ms`).
    pub task_timeout_ms: Option<u64>,
    /// Extra Host names the network listeners accept (loopback names always are).
    #[serde(default)]
    pub allowed_hosts: Vec<String>,
    /// Extra Origins the network listeners accept (loopback origins always are).
    #[serde(default)]
    pub allowed_origins: Vec<String>,
    /// The largest request body a network listener accepts.
    pub max_body_bytes: Option<u64>,
    /// Where the audit log (JSON lines) goes; none by default.
    pub audit_log: Option<PathBuf>,
    /// The folder of saved skills (`save_skill`); default `$XDG_DATA_HOME/runbyte/skills`
    /// (`~/.local/share/runbyte/skills`).
    pub skills_dir: Option<PathBuf>,
    /// How servers' tools reach clients unless a server says otherwise: `code` (the default),
    /// `direct`, `both` or `auto`.
    #[serde(default)]
    pub expose: Expose,
    /// The estimated tokens (a definition's JSON bytes / 4) of the definitions that the
    /// `expose = "auto"` servers may add to `tools/list` together; [`DEFAULT_DIRECT_BUDGET`]
    /// when absent.
    pub direct_budget: Option<u64>,
    /// What `execute_code`'s answer says of the execution beside its result: `lean` (the
    /// default: the tool calls it made, the failed ones and those answered from cache, when
    /// there were any) or `full` (also its time and its token accounting). Either way the whole
    /// account is in the answer's `_meta` (`runbyte/execution`) and the audit log.
    #[serde(default)]
    pub summary: Summary,
    /// Whether the result types of tools that publish no `outputSchema` are inferred from
    /// their calls unless a server says otherwise (default: yes). Only shapes are kept (types,
    /// field names), never values, in `$XDG_STATE_HOME/runbyte/inferred`.
    #[serde(default = "default_true")]
    pub infer_results: bool,
}

fn default_true() -> bool {
    true
}

/// What `execute_code`'s answer says of the execution (see [`ServerSection::summary`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Summary {
    /// What changes the model's next step: the calls, the failed ones, those from cache.
    #[default]
    Lean,
    /// Also the time and the token accounting.
    Full,
}

/// How a server's tools reach clients.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Expose {
    /// As functions in the VFS, for programs (code mode).
    #[default]
    Code,
    /// As tools of Runbyte's own `tools/list`, `<prefix><tool>`, called straight through the
    /// Hub (same validation, policies and audit); absent from the VFS.
    Direct,
    /// Both.
    Both,
    /// In the VFS, and also directly while its definitions fit `[server] direct-budget` (with
    /// the other `auto` servers' that fit, smallest first): decided on each listing, so a
    /// catalogue that grows past the budget leaves the direct list (see
    /// `crate::gateway::auto`).
    Auto,
}

impl Expose {
    pub fn in_code(self) -> bool {
        matches!(self, Expose::Code | Expose::Both | Expose::Auto)
    }

    /// Whether its tools are, or may be (`Auto`), in Runbyte's own `tools/list`.
    pub fn direct(self) -> bool {
        matches!(self, Expose::Direct | Expose::Both | Expose::Auto)
    }
}

/// The default of `[server] direct-budget`: the estimated tokens of definitions that
/// `expose = "auto"` lists directly. Measured by `scripts/token-bench` (single lookups): with
/// Runbyte's own surface beside them, direct definitions of D tokens cost 2·D over a lookup's
/// two turns, and code mode's discovery turn about 400 more than that surface; past about 400
/// tokens code mode costs less.
pub const DEFAULT_DIRECT_BUDGET: u64 = 400;

impl Default for ServerSection {
    fn default() -> Self {
        ServerSection {
            listen: default_listen(),
            bind: None,
            auth_token_file: None,
            state_key_file: None,
            state_store: None,
            task_timeout_ms: None,
            allowed_hosts: Vec::new(),
            allowed_origins: Vec::new(),
            max_body_bytes: None,
            expose: Expose::Code,
            direct_budget: None,
            summary: Summary::Lean,
            audit_log: None,
            skills_dir: None,
            infer_results: true,
        }
    }
}

fn default_listen() -> String {
    "stdio".to_owned()
}

/// `[telemetry]`: off unless a key turns something on.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct TelemetrySection {
    /// The OTLP/HTTP collector's base URL (`http://127.0.0.1:4318`); spans are posted to its
    /// `/v1/traces`. Absent: no traces, no exporter thread.
    pub otlp_endpoint: Option<String>,
    /// The `service.name` of the exported spans (`runbyte` when absent).
    pub service_name: Option<String>,
    /// Whether network listeners serve `GET /metrics` (Prometheus text); `false` by default.
    #[serde(default)]
    pub metrics: bool,
}

/// `[plugins]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct PluginsSection {
    /// Folders searched for plugins by name, before the running binary's own folder.
    #[serde(default)]
    pub dirs: Vec<PathBuf>,
    /// Plugins loaded by path.
    #[serde(default)]
    pub load: Vec<PluginLoad>,
    /// Names of plugins to host in a child process each (see `[[plugins.load]] isolate`).
    #[serde(default)]
    pub isolate: Vec<String>,
}

/// `[[plugins.load]]`: one plugin by path.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct PluginLoad {
    /// The library file.
    pub path: PathBuf,
    /// Host this plugin in a child `runbyte` process, so that a crash takes down only itself.
    #[serde(default)]
    pub isolate: bool,
}

/// `[codegen]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct CodegenSection {
    /// The dialect plugin's name: `typescript`, `jsdoc` or a third-party one.
    #[serde(default = "default_dialect")]
    pub dialect: String,
    /// `[codegen.<dialect>]` tables: each dialect's own configuration.
    #[serde(flatten)]
    pub tables: BTreeMap<String, toml::Value>,
}

impl Default for CodegenSection {
    fn default() -> Self {
        CodegenSection {
            dialect: default_dialect(),
            tables: BTreeMap::new(),
        }
    }
}

fn default_dialect() -> String {
    "typescript".to_owned()
}

/// `[sandbox]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct SandboxSection {
    /// The policy plugins, in order: one name or a list.
    #[serde(default = "default_policy")]
    pub policy: OneOrMany,
    /// Worker processes kept ready for executions (process isolation).
    pub workers: Option<usize>,
    /// Executions that may wait for a worker before new ones are refused as busy.
    pub queue: Option<usize>,
    /// `[sandbox.<policy>]` tables: each policy's own configuration.
    #[serde(flatten)]
    pub tables: BTreeMap<String, toml::Value>,
}

impl Default for SandboxSection {
    fn default() -> Self {
        SandboxSection {
            policy: default_policy(),
            workers: None,
            queue: None,
            tables: BTreeMap::new(),
        }
    }
}

fn default_policy() -> OneOrMany {
    OneOrMany::One("limits".to_owned())
}

/// A string or a list of strings.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(untagged)]
pub enum OneOrMany {
    /// One name.
    One(String),
    /// Several names, in order.
    Many(Vec<String>),
}

impl OneOrMany {
    /// The names in order.
    pub fn names(&self) -> Vec<String> {
        match self {
            OneOrMany::One(name) => vec![name.clone()],
            OneOrMany::Many(names) => names.clone(),
        }
    }
}

/// Whether a downstream server's connection is shared by every upstream client session.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Share {
    /// One connection for all clients.
    #[default]
    Global,
    /// One connection per upstream client session, for stateful servers.
    Session,
}

/// Which MCP revision Runbyte speaks to a downstream server.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
pub enum Protocol {
    /// `auto`: ask with `server/discover` (2026-07-28) and fall back to `initialize` when the
    /// server does not know it.
    #[default]
    #[serde(rename = "auto")]
    Auto,
    /// `2026-07-28` only: `server/discover`, then stateless requests.
    #[serde(rename = "2026-07-28")]
    Stateless,
    /// `2025-11-25` (and earlier): the `initialize` handshake only, never a probe.
    #[serde(rename = "2025-11-25")]
    Handshake,
}

/// `[servers.<name>]`: one downstream MCP server.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct ServerConfig {
    /// The program to start (stdio).
    pub command: Option<String>,
    /// Its arguments.
    #[serde(default)]
    pub args: Vec<String>,
    /// Environment variables it gets on top of a short allowlist.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Its working directory.
    pub cwd: Option<PathBuf>,
    /// The server's URL (streamable HTTP, or legacy SSE).
    pub url: Option<String>,
    /// HTTP headers sent with every request.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// The connector: `stdio`, `http`, `sse` or a third-party transport's name. Inferred when
    /// absent: `stdio` for `command`, `http` falling back to `sse` for `url`.
    pub transport: Option<String>,
    /// One connection for everyone (`global`, the default) or one per client session.
    #[serde(default)]
    pub share: Share,
    /// The MCP revision to speak: `auto` (the default), `2026-07-28` or `2025-11-25`.
    #[serde(default)]
    pub protocol: Protocol,
    /// Leave the server out without deleting its table.
    #[serde(default)]
    pub disabled: bool,
    /// How its tools reach clients (default: `[server] expose`).
    pub expose: Option<Expose>,
    /// The prefix of its tools' names when exposed directly (default: `<server>_`).
    pub direct_prefix: Option<String>,
    /// Show only the tools matching one of these globs (`*`, `?`).
    pub tools: Option<Vec<String>>,
    /// Hide the tools matching one of these globs.
    #[serde(default)]
    pub exclude_tools: Vec<String>,
    /// How long `initialize` may take.
    pub init_timeout_ms: Option<u64>,
    /// How long one tool call may take.
    pub call_timeout_ms: Option<u64>,
    /// The largest message accepted from the server, in bytes (default: the transport's own,
    /// 64 MiB for stdio, 16 MiB for http and sse). A larger answer fails its call with an error
    /// naming this limit.
    pub max_message_bytes: Option<usize>,
    /// Whether its untyped tools' result types are inferred from their calls (default:
    /// `[server] infer-results`).
    pub infer_results: Option<bool>,
    /// What a tool whose definition changed since it was pinned does: `hold` (the default),
    /// `ask`, `warn` or `off` (see [`crate::pins`]).
    pub pin: Option<PinMode>,
    /// Whether a tool that appears after the server's first listing is `hold` (the default)
    /// or `allow`ed (pinned at once). The first listing is always allowed.
    pub new_tools: Option<NewTools>,
    /// How Runbyte gets its credentials (`http`/`sse` servers): `oauth` (`runbyte login`),
    /// `client-credentials` (a machine client's id and secret), or `none`. When absent,
    /// credentials stored by `runbyte login` are used, and a 401 that names protected-resource
    /// metadata says to log in.
    pub auth: Option<Auth>,
    /// A client id registered with the authorization server beforehand (else Runbyte registers
    /// itself, or identifies itself by `client-metadata-url`).
    pub client_id: Option<String>,
    /// The secret of `client-id`, for a confidential client.
    pub client_secret: Option<String>,
    /// The scopes to ask for (default: those the server names).
    pub scopes: Option<Vec<String>>,
    /// The HTTPS URL of a client ID metadata document describing Runbyte, used as its client id
    /// where the authorization server accepts them (else dynamic registration).
    pub client_metadata_url: Option<String>,
    /// The authorization server (its issuer URL) this server's credentials belong to: a client
    /// secret, a code or a token goes to no other, whatever the server's metadata names. When
    /// absent, the one of the first login (or client-credentials grant) is kept and held to.
    pub authorization_server: Option<String>,
    /// `[servers.<name>.cache]`: the results of its read-only tools kept for a while.
    pub cache: Option<ResultCache>,
}

/// The longest `[servers.<name>.cache] ttl-ms`: a day.
pub const MAX_RESULT_TTL_MS: u64 = 24 * 3600 * 1000;

/// `[servers.<name>.cache]`: the operator's opt-in to keeping tool results (MCP gives tool
/// results no caching hints). Only a tool the server marks read-only (`readOnlyHint`) is kept,
/// and only a result that is not an error; what the server says changed (its tools list
/// changed, it reconnected) is dropped. Kept in the process (each replica its own), bounded
/// like the resource reads (`crate::hub::cache`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct ResultCache {
    /// Globs (`*`, `?`) of the tools whose results are kept.
    pub tools: Vec<String>,
    /// Globs of tools never kept (over `tools`).
    #[serde(default)]
    pub exclude_tools: Vec<String>,
    /// How long a result is kept: 1 ms to a day.
    pub ttl_ms: u64,
    /// `session` (the default: for the client session that called) or `shared` (every
    /// session, for results that do not depend on who asks).
    #[serde(default)]
    pub scope: ResultScope,
}

/// Whose calls a kept result answers.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ResultScope {
    #[default]
    Session,
    Shared,
}

impl ResultCache {
    /// Whether `tool`'s results are kept (its annotations aside).
    pub fn covers(&self, tool: &str) -> bool {
        self.tools
            .iter()
            .any(|glob| crate::hub::filter::matches(glob, tool))
            && !self
                .exclude_tools
                .iter()
                .any(|glob| crate::hub::filter::matches(glob, tool))
    }
}

/// `[servers.<name>] pin`: what a changed tool definition does.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PinMode {
    /// Held (left out, calls refused) until `runbyte pins approve`.
    #[default]
    Hold,
    /// Listed as pinned (a new tool by name only); the first call asks the user through the
    /// execution's client, and the user's approval re-pins it.
    Ask,
    /// Served, with a WARN and an audit line, and pinned.
    Warn,
    /// Nothing is pinned.
    Off,
}

/// `[servers.<name>] new-tools`: what a tool new since the first listing does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NewTools {
    /// Held until approved.
    Hold,
    /// Pinned and served at once.
    Allow,
}

/// `[servers.<name>] auth`: how Runbyte gets a server's credentials.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Auth {
    /// OAuth 2.1 authorization code with PKCE, once by `runbyte login`, then refreshed.
    Oauth,
    /// OAuth client credentials: `client-id` and `client-secret`, no person involved.
    ClientCredentials,
    /// Only the static `headers`; stored credentials are ignored.
    None,
}

/// Whether a server's credential settings fit together: the field at fault and why.
fn check_auth(server: &ServerConfig) -> Result<(), (&'static str, String)> {
    let oauth_fields = [
        ("client-id", server.client_id.is_some()),
        ("client-secret", server.client_secret.is_some()),
        ("scopes", server.scopes.is_some()),
        ("client-metadata-url", server.client_metadata_url.is_some()),
        (
            "authorization-server",
            server.authorization_server.is_some(),
        ),
    ];
    let uses_oauth = server.auth != Some(Auth::None);
    if server.auth.is_some() && server.url.is_none() {
        return Err((
            "auth",
            "OAuth is for servers reached by `url` (http or sse); a stdio server takes its \
             credentials in `env`"
                .to_owned(),
        ));
    }
    if let Some((field, _)) = oauth_fields.iter().find(|(_, set)| *set)
        && (server.url.is_none() || !uses_oauth)
    {
        return Err((
            field,
            "only applies to a server with a `url` whose `auth` is `oauth` or \
             `client-credentials`"
                .to_owned(),
        ));
    }
    if server.client_secret.is_some() && server.client_id.is_none() {
        return Err((
            "client-secret",
            "needs `client-id`: a secret belongs to a client registered beforehand".to_owned(),
        ));
    }
    if server.auth == Some(Auth::ClientCredentials)
        && (server.client_id.is_none() || server.client_secret.is_none())
    {
        return Err((
            "auth",
            "`client-credentials` needs `client-id` and `client-secret`".to_owned(),
        ));
    }
    if let Some(url) = &server.authorization_server
        && !(url.starts_with("https://") || url.starts_with("http://"))
    {
        return Err((
            "authorization-server",
            format!("`{url}` must be the authorization server's issuer URL (https://…)"),
        ));
    }
    if let Some(url) = &server.client_metadata_url
        && !url.starts_with("https://")
    {
        return Err((
            "client-metadata-url",
            format!("`{url}` must be an https:// URL: it is the client's public identity"),
        ));
    }
    Ok(())
}

impl ServerConfig {
    /// The connector this server uses, and whether it may fall back to legacy SSE.
    pub fn connector(&self) -> (&str, bool) {
        match (&self.transport, &self.command) {
            (Some(transport), _) => (transport.as_str(), false),
            (None, Some(_)) => ("stdio", false),
            (None, None) => ("http", true),
        }
    }
}

impl Config {
    /// Where the configuration comes from: `--config`/`RUNBYTE_CONFIG`, else `./runbyte.toml`,
    /// else the user's own file ([`user_config_file`]: `~/.config/runbyte/runbyte.toml`, the one
    /// `runbyte setup` writes), else the built-in default (the demo server), read as if it sat
    /// beside the binary. The file chosen is logged at info.
    pub fn find(explicit: Option<&Path>) -> Result<Config, ConfigError> {
        if let Some(path) = explicit {
            tracing::info!("configuration: {} (given)", path.display());
            return Config::load(path);
        }
        let local = PathBuf::from("runbyte.toml");
        if local.is_file() {
            let absolute = std::env::current_dir()
                .map(|dir| dir.join(&local))
                .unwrap_or(local);
            tracing::info!("configuration: {} (this folder's)", absolute.display());
            return Config::load(&absolute);
        }
        if let Some(user) = user_config_file().filter(|file| file.is_file()) {
            tracing::info!("configuration: {} (the user's)", user.display());
            return Config::load(&user);
        }
        let base = std::env::current_exe()
            .ok()
            .and_then(|exe| exe.parent().map(Path::to_owned))
            .unwrap_or_default();
        tracing::info!(
            "no runbyte.toml here and none given; using the built-in default configuration"
        );
        Config::parse(
            DEFAULT_CONFIG,
            Path::new("<built-in default runbyte.toml>"),
            &base,
        )
    }

    /// Reads and validates the file at `path`.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
            file: path.to_owned(),
            position: None,
            key: None,
            message: format!("cannot read the file: {e}"),
        })?;
        let base = path.parent().map(Path::to_owned).unwrap_or_default();
        Config::parse(&text, path, &base)
    }

    /// Parses `text` as if read from `file`, resolving relative paths against `base_dir`.
    pub fn parse(text: &str, file: &Path, base_dir: &Path) -> Result<Config, ConfigError> {
        let locator = Locator::new(text, file);
        let mut root = DeTable::parse(text).map_err(|e| locator.toml_error(&e))?;
        expand::expand_table(root.get_mut(), &mut Vec::new(), &locator)?;
        let include = take_include(root.get_mut(), &locator)?;
        let deserializer = toml::de::Deserializer::from(root);
        let mut config = Config::deserialize(deserializer).map_err(|e| locator.toml_error(&e))?;
        config.base_dir = base_dir.to_owned();
        config.source = file.to_owned();
        for (path, span) in include {
            config.include(&path, span, &locator)?;
        }
        config.resolve_paths();
        config.validate(&locator)?;
        Ok(config)
    }

    /// Reads an `mcpServers` JSON file named by `[servers] include` into `servers`.
    fn include(
        &mut self,
        path: &str,
        span: std::ops::Range<usize>,
        locator: &Locator,
    ) -> Result<(), ConfigError> {
        let resolved = resolve(&self.base_dir, Path::new(path));
        let at_include =
            |message: String| locator.error_at(span.clone(), "servers.include", message);
        let text = std::fs::read_to_string(&resolved)
            .map_err(|e| at_include(format!("cannot read {}: {e}", resolved.display())))?;
        let imported = import_mcp_servers(&text)
            .map_err(|e| at_include(format!("{}: {e}", resolved.display())))?;
        for (name, server) in imported.servers {
            if self.servers.contains_key(&name) {
                return Err(at_include(format!(
                    "{} defines server `{name}`, which this file defines too",
                    resolved.display()
                )));
            }
            self.servers.insert(name, server);
        }
        Ok(())
    }

    fn resolve_paths(&mut self) {
        let base = self.base_dir.clone();
        for dir in &mut self.plugins.dirs {
            *dir = resolve(&base, dir);
        }
        for load in &mut self.plugins.load {
            load.path = resolve(&base, &load.path);
        }
        if let Some(file) = &mut self.server.auth_token_file {
            *file = resolve(&base, file);
        }
        if let Some(file) = &mut self.server.state_key_file {
            *file = resolve(&base, file);
        }
        if let Some(file) = &mut self.server.audit_log {
            *file = resolve(&base, file);
        }
        if let Some(dir) = &mut self.server.skills_dir {
            *dir = resolve(&base, dir);
        }
        for server in self.servers.values_mut() {
            if let Some(cwd) = &mut server.cwd {
                *cwd = resolve(&base, cwd);
            }
            // A command given as a relative path (`./bin/server`) is relative to the file, as a
            // bare name (`npx`) is looked up on PATH.
            if let Some(command) = &mut server.command
                && (command.starts_with("./") || command.starts_with("../"))
            {
                *command = resolve(&base, Path::new(command.as_str()))
                    .display()
                    .to_string();
            }
        }
    }

    fn validate(&self, locator: &Locator) -> Result<(), ConfigError> {
        for (name, server) in &self.servers {
            let key = format!("servers.{}", locate::key_segment(name));
            let error = |message: &str| locator.error_at_key(&key, message.to_owned());
            if let Some(cache) = &server.cache {
                if !(1..=MAX_RESULT_TTL_MS).contains(&cache.ttl_ms) {
                    return Err(locator.error_at_key(
                        &format!("{key}.cache.ttl-ms"),
                        format!("must be 1 to {MAX_RESULT_TTL_MS} (a day), in milliseconds"),
                    ));
                }
                if cache.tools.is_empty() {
                    return Err(locator.error_at_key(
                        &format!("{key}.cache.tools"),
                        "names no tool: give the globs of the tools whose results are kept"
                            .to_owned(),
                    ));
                }
            }
            match (&server.command, &server.url) {
                (Some(_), Some(_)) => {
                    return Err(error(
                        "give either `command` (stdio) or `url` (HTTP), not both",
                    ));
                }
                (None, None) if server.transport.is_none() => {
                    return Err(error("a server needs `command` (stdio) or `url` (HTTP)"));
                }
                _ => {}
            }
            // A third-party connector may take any URL (`tcp://…`); http and sse need HTTP.
            if let Some(url) = &server.url
                && matches!(server.connector().0, "http" | "sse")
                && !(url.starts_with("http://") || url.starts_with("https://"))
            {
                return Err(locator.error_at_key(
                    &format!("{key}.url"),
                    format!("`{url}` is not an http:// or https:// URL"),
                ));
            }
            if name.is_empty() || name.contains('/') || name == "." || name == ".." {
                return Err(error("a server name must be non-empty and contain no `/`"));
            }
            check_auth(server).map_err(|(field, message)| {
                locator.error_at_key(&format!("{key}.{field}"), message)
            })?;
        }
        // Directly exposed tools share Runbyte's own `tools/list`: each server's prefix must
        // keep its names apart from Runbyte's tools and from every other server's. An empty
        // prefix is Runbyte as a transparent gateway (the server's tools, prompts and resource
        // URIs as they are): a name it shares with Runbyte's own tools or another server's is
        // left out at listing time, with a WARN naming both (`crate::gateway::names`).
        let direct = self.direct_servers();
        for (name, prefix) in direct.iter().filter(|(_, prefix)| !prefix.is_empty()) {
            let key = format!("servers.{}.direct-prefix", locate::key_segment(name));
            if let Some((other, other_prefix)) = direct.iter().find(|(other, other_prefix)| {
                other != name
                    && !other_prefix.is_empty()
                    && (other_prefix.starts_with(prefix.as_str())
                        || prefix.starts_with(other_prefix.as_str()))
            }) {
                return Err(locator.error_at_key(
                    &key,
                    format!(
                        "`{prefix}` overlaps server `{other}`'s direct prefix `{other_prefix}`: \
                         a tool name could mean either server"
                    ),
                ));
            }
        }
        if let Some(url) = &self.server.state_store {
            let error = |message: String| locator.error_at_key("server.state-store", message);
            crate::state_store::check_url(url).map_err(error)?;
            if self.server.state_key_file.is_none() {
                return Err(error(
                    "needs `state-key-file` too: without a key the replicas share, no replica \
                     can open another's requestState, and nothing the store keeps would be used"
                        .to_owned(),
                ));
            }
        }
        if let Some(endpoint) = &self.telemetry.otlp_endpoint {
            check_endpoint(endpoint)
                .map_err(|message| locator.error_at_key("telemetry.otlp-endpoint", message))?;
        }
        if self
            .telemetry
            .service_name
            .as_deref()
            .is_some_and(|name| name.trim().is_empty())
        {
            return Err(locator.error_at_key(
                "telemetry.service-name",
                "must not be empty: it is how a trace backend tells Runbyte's spans apart"
                    .to_owned(),
            ));
        }
        let policies = self.sandbox.policy.names();
        if policies.is_empty() {
            return Err(
                locator.error_at_key("sandbox.policy", "name at least one policy".to_owned())
            );
        }
        for (key, value) in &self.sandbox.tables {
            if !policies.contains(key) {
                return Err(locator.error_at_key(
                    &format!("sandbox.{key}"),
                    format!(
                        "unknown key: not a [sandbox] setting (policy, workers, queue) and no \
                         policy named `{key}` is configured (policy = {policies:?})"
                    ),
                ));
            }
            if !value.is_table() {
                return Err(locator.error_at_key(
                    &format!("sandbox.{key}"),
                    "a policy's configuration must be a table".to_owned(),
                ));
            }
        }
        for (key, value) in &self.codegen.tables {
            if !value.is_table() {
                return Err(locator.error_at_key(
                    &format!("codegen.{key}"),
                    "unknown key: [codegen] has `dialect` and one table per dialect".to_owned(),
                ));
            }
        }
        Ok(())
    }

    /// The configuration table of the named policy (`{}` when the file has none).
    pub fn policy_table(&self, name: &str) -> serde_json::Value {
        table_json(self.sandbox.tables.get(name))
    }

    /// The configuration table of the named dialect (`{}` when the file has none).
    pub fn dialect_table(&self, name: &str) -> serde_json::Value {
        table_json(self.codegen.tables.get(name))
    }

    /// The configuration table of the named transport (`{}` when the file has none).
    pub fn transport_table(&self, name: &str) -> serde_json::Value {
        self.transports
            .get(name)
            .and_then(|table| serde_json::to_value(table).ok())
            .unwrap_or_else(|| serde_json::json!({}))
    }

    /// The servers that are not disabled.
    pub fn enabled_servers(&self) -> impl Iterator<Item = (&String, &ServerConfig)> {
        self.servers.iter().filter(|(_, server)| !server.disabled)
    }

    /// How server `name`'s tools reach clients (`Code` for an unknown server).
    pub fn exposure(&self, name: &str) -> Expose {
        self.servers
            .get(name)
            .and_then(|server| server.expose)
            .unwrap_or(self.server.expose)
    }

    /// The estimated tokens of definitions the `expose = "auto"` servers may list directly.
    pub fn direct_budget(&self) -> u64 {
        self.server.direct_budget.unwrap_or(DEFAULT_DIRECT_BUDGET)
    }

    /// Whether server `name`'s untyped tools get result types inferred from their calls.
    pub fn infers_results(&self, name: &str) -> bool {
        self.servers
            .get(name)
            .and_then(|server| server.infer_results)
            .unwrap_or(self.server.infer_results)
    }

    /// Whether clients could see direct tools alone, without Runbyte's own: every enabled
    /// server is `auto` or `direct`, and one is `auto` (see `crate::gateway::auto`).
    pub fn may_list_alone(&self) -> bool {
        let exposures: Vec<Expose> = self
            .enabled_servers()
            .map(|(name, _)| self.exposure(name))
            .collect();
        exposures
            .iter()
            .all(|expose| matches!(expose, Expose::Auto | Expose::Direct))
            && exposures.contains(&Expose::Auto)
    }

    /// The enabled servers whose tools are exposed directly, with the prefix of their names.
    /// The only enabled server, `auto` and without a `direct-prefix`, lists its tools under
    /// their own names: it is listed directly only alone (see `crate::gateway::auto`), where
    /// clients then see what the server itself lists.
    pub fn direct_servers(&self) -> Vec<(String, String)> {
        let lone_auto = self.enabled_servers().count() == 1;
        self.enabled_servers()
            .filter(|(name, _)| self.exposure(name).direct())
            .map(|(name, server)| {
                let own_names = lone_auto
                    && server.direct_prefix.is_none()
                    && self.exposure(name) == Expose::Auto;
                let prefix = match own_names {
                    true => String::new(),
                    false => Self::prefix_of(name, server),
                };
                (name.clone(), prefix)
            })
            .collect()
    }

    /// Every enabled server with the prefix of the names clients see of its things (direct
    /// tools, prompts): `direct-prefix`, else `<server>_`.
    pub fn prefixes(&self) -> Vec<(String, String)> {
        self.enabled_servers()
            .map(|(name, server)| (name.clone(), Self::prefix_of(name, server)))
            .collect()
    }

    fn prefix_of(name: &str, server: &ServerConfig) -> String {
        server
            .direct_prefix
            .clone()
            .unwrap_or_else(|| format!("{name}_"))
    }
}

/// Checks `[telemetry] otlp-endpoint`: an `http://` base URL that spans are posted under.
fn check_endpoint(endpoint: &str) -> Result<(), String> {
    let Some(rest) = endpoint.strip_prefix("http://") else {
        return Err(if endpoint.starts_with("https://") {
            format!(
                "`{endpoint}`: only http:// collectors are supported (the exporter is built \
                 without TLS); send to a collector or agent on this host or network"
            )
        } else {
            format!(
                "`{endpoint}` is not an http:// URL; give the collector's OTLP/HTTP base URL, \
                 e.g. http://127.0.0.1:4318"
            )
        });
    };
    let host = rest.split('/').next().unwrap_or_default();
    if host.is_empty() || rest.contains(['?', '#']) || rest.contains(char::is_whitespace) {
        return Err(format!(
            "`{endpoint}` is not a base URL: give scheme, host and port (and a path prefix if \
             the collector has one), e.g. http://127.0.0.1:4318"
        ));
    }
    Ok(())
}

fn table_json(value: Option<&toml::Value>) -> serde_json::Value {
    value
        .and_then(|value| serde_json::to_value(value).ok())
        .unwrap_or_else(|| serde_json::json!({}))
}

/// Takes `servers.include` out of the document (it is not a server), returning each file named
/// with the span of its string.
fn take_include(
    root: &mut DeTable<'_>,
    locator: &Locator,
) -> Result<Vec<(String, std::ops::Range<usize>)>, ConfigError> {
    let Some(servers) = root.get_mut("servers") else {
        return Ok(Vec::new());
    };
    let span = servers.span();
    let DeValue::Table(servers) = servers.get_mut() else {
        return Err(locator.error_at(span, "servers", "must be a table".to_owned()));
    };
    let Some(include) = servers.remove("include") else {
        return Ok(Vec::new());
    };
    let span = include.span();
    let not_a_file = || {
        locator.error_at(
            span.clone(),
            "servers.include",
            "must be a file name or a list of them".to_owned(),
        )
    };
    match include.into_inner() {
        DeValue::String(path) => Ok(vec![(path.into_owned(), span.clone())]),
        DeValue::Array(items) => items
            .into_iter()
            .map(|item| {
                let item_span = item.span();
                match item.into_inner() {
                    DeValue::String(path) => Ok((path.into_owned(), item_span)),
                    _ => Err(not_a_file()),
                }
            })
            .collect(),
        _ => Err(not_a_file()),
    }
}

/// `path` made absolute against `base`, with a leading `~/` meaning the home folder.
pub fn resolve(base: &Path, path: &Path) -> PathBuf {
    if let Ok(rest) = path.strip_prefix("~")
        && let Some(home) = std::env::var_os("HOME")
    {
        return PathBuf::from(home).join(rest);
    }
    if path.is_absolute() {
        path.to_owned()
    } else {
        base.join(path)
    }
}
