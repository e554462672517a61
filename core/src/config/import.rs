//! The `mcpServers` JSON of Claude Desktop, Cursor and VS Code, read as `[servers.*]` tables.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::ServerConfig;

/// Servers read from an `mcpServers` file, and what could not be carried over.
#[derive(Debug, Default)]
pub struct ImportedServers {
    /// The servers, by name.
    pub servers: BTreeMap<String, ServerConfig>,
    /// Notes for the operator: fields that were dropped and why.
    pub notes: Vec<String>,
}

/// One entry of an `mcpServers` file, in any of the clients' spellings.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Entry {
    command: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    cwd: Option<String>,
    url: Option<String>,
    #[serde(alias = "serverUrl")]
    server_url: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    #[serde(rename = "type", alias = "transport")]
    kind: Option<String>,
    #[serde(default)]
    disabled: bool,
    #[serde(flatten)]
    other: BTreeMap<String, serde_json::Value>,
}

/// Reads the servers of a Claude Desktop / Cursor (`{"mcpServers": {...}}`) or VS Code
/// (`{"servers": {...}}`) file.
pub fn import_mcp_servers(json: &str) -> Result<ImportedServers, String> {
    let document: serde_json::Value =
        serde_json::from_str(json).map_err(|e| format!("not valid JSON: {e}"))?;
    let servers = document
        .get("mcpServers")
        .or_else(|| document.get("servers"))
        .ok_or("no `mcpServers` (Claude Desktop, Cursor) or `servers` (VS Code) object")?;
    let servers = servers
        .as_object()
        .ok_or("`mcpServers` must be an object")?;
    import_servers(servers)
}

/// Reads the servers of an `mcpServers` (or VS Code `servers`) object, by name.
pub fn import_servers(
    servers: &serde_json::Map<String, serde_json::Value>,
) -> Result<ImportedServers, String> {
    let mut imported = ImportedServers::default();
    for (name, entry) in servers {
        let mut entry: Entry =
            serde_json::from_value(entry.clone()).map_err(|e| format!("server `{name}`: {e}"))?;
        // Cursor's static OAuth client (`auth`), Claude Code's (`oauth`).
        let mut oauth = OAuthClient::default();
        for key in ["auth", "oauth"] {
            if let Some(value) = entry.other.remove(key) {
                oauth.read(&value);
            }
        }
        if let Some(remote) = remote_wrapper(&entry) {
            imported.notes.push(format!(
                "server `{name}`: ran `{}` to reach {}; Runbyte connects to it itself (if it \
                 needs OAuth: `runbyte login {name}`)",
                remote.wrapper, remote.url
            ));
            entry.command = None;
            entry.args = Vec::new();
            entry.env = BTreeMap::new();
            entry.url = Some(remote.url);
            entry.headers.extend(remote.headers);
            entry.kind = remote.transport.map(str::to_owned);
            oauth.merge(remote.oauth);
        }
        for key in entry.other.keys() {
            imported.notes.push(format!(
                "server `{name}`: dropped `{key}` (Runbyte has no such setting)"
            ));
        }
        let url = entry.url.or(entry.server_url);
        let transport = match entry.kind.as_deref() {
            None | Some("stdio") => None,
            Some("http" | "streamable-http" | "streamableHttp") => Some("http".to_owned()),
            Some("sse") => Some("sse".to_owned()),
            Some(other) => {
                return Err(format!("server `{name}`: unknown transport type `{other}`"));
            }
        };
        if entry.command.is_none() && url.is_none() {
            return Err(format!("server `{name}` has neither `command` nor `url`"));
        }
        imported.servers.insert(
            name.clone(),
            ServerConfig {
                command: entry.command,
                args: entry.args,
                env: entry.env,
                cwd: entry.cwd.map(Into::into),
                url,
                headers: entry.headers,
                transport,
                disabled: entry.disabled,
                client_id: oauth.client_id,
                client_secret: oauth.client_secret,
                scopes: oauth.scopes,
                ..ServerConfig::default()
            },
        );
    }
    Ok(imported)
}

/// A client's static OAuth client settings: an id, its secret, the scopes.
#[derive(Debug, Default)]
struct OAuthClient {
    client_id: Option<String>,
    client_secret: Option<String>,
    scopes: Option<Vec<String>>,
}

impl OAuthClient {
    /// Reads `{"CLIENT_ID"|"client_id"|"clientId", "CLIENT_SECRET"|..., "scopes"|"scope"}`
    /// (scopes as a list, or one space-separated string).
    fn read(&mut self, value: &serde_json::Value) {
        let text = |keys: &[&str]| {
            keys.iter()
                .find_map(|key| value.get(*key)?.as_str())
                .map(str::to_owned)
        };
        self.client_id = text(&["CLIENT_ID", "client_id", "clientId"]).or(self.client_id.take());
        self.client_secret =
            text(&["CLIENT_SECRET", "client_secret", "clientSecret"]).or(self.client_secret.take());
        let scopes = ["scopes", "scope"]
            .iter()
            .find_map(|key| match value.get(*key)? {
                serde_json::Value::String(list) => {
                    Some(list.split_whitespace().map(str::to_owned).collect())
                }
                serde_json::Value::Array(items) => Some(
                    items
                        .iter()
                        .filter_map(|item| item.as_str().map(str::to_owned))
                        .collect(),
                ),
                _ => None,
            });
        self.scopes = scopes.or(self.scopes.take());
    }

    fn merge(&mut self, other: OAuthClient) {
        self.client_id = other.client_id.or(self.client_id.take());
        self.client_secret = other.client_secret.or(self.client_secret.take());
        self.scopes = other.scopes.or(self.scopes.take());
    }
}

/// What a `mcp-remote` wrapper (`npx -y mcp-remote <url> --header K:V …`) stood for.
struct Remote {
    wrapper: &'static str,
    url: String,
    headers: BTreeMap<String, String>,
    transport: Option<&'static str>,
    oauth: OAuthClient,
}

/// The remote server a stdio entry only wraps (`mcp-remote`, `mcp-remote-static`), if it is one.
/// `${VAR}` in its arguments is filled from the entry's own `env`, as the wrapper would.
fn remote_wrapper(entry: &Entry) -> Option<Remote> {
    let command = entry.command.as_deref()?;
    let mut args: Vec<&str> = std::iter::once(command)
        .chain(entry.args.iter().map(String::as_str))
        .collect();
    let at = args.iter().position(|arg| {
        let program = arg.rsplit('/').next().unwrap_or(arg);
        let program = program.split('@').next().unwrap_or(program);
        matches!(program, "mcp-remote" | "mcp-remote-static")
    })?;
    let wrapper = if args[at].contains("mcp-remote-static") {
        "mcp-remote-static"
    } else {
        "mcp-remote"
    };
    args.drain(..=at);
    let fill = |text: &str| {
        let mut filled = text.to_owned();
        for (name, value) in &entry.env {
            filled = filled.replace(&format!("${{{name}}}"), value);
        }
        filled
    };
    let mut remote = Remote {
        wrapper,
        url: String::new(),
        headers: BTreeMap::new(),
        transport: None,
        oauth: OAuthClient::default(),
    };
    let mut rest = args.into_iter();
    while let Some(arg) = rest.next() {
        match arg {
            "--header" => {
                if let Some((name, value)) = rest.next().and_then(|h| h.split_once(':')) {
                    remote
                        .headers
                        .insert(name.trim().to_owned(), fill(value.trim()));
                }
            }
            "--transport" => {
                remote.transport = match rest.next() {
                    Some("sse-only") => Some("sse"),
                    Some("http-only") => Some("http"),
                    _ => None,
                };
            }
            "--static-oauth-client-info" | "--static-oauth-client-metadata" => {
                if let Some(Ok(value)) = rest
                    .next()
                    .map(|json| serde_json::from_str::<serde_json::Value>(&fill(json)))
                {
                    remote.oauth.read(&value);
                }
            }
            url if remote.url.is_empty() && url.starts_with("http") => remote.url = fill(url),
            _ => {}
        }
    }
    (!remote.url.is_empty()).then_some(remote)
}

/// The imported servers as `runbyte.toml` text: one `[servers.<name>]` table each.
pub fn servers_to_toml(imported: &ImportedServers) -> String {
    let mut servers = toml::Table::new();
    for (name, server) in &imported.servers {
        let mut table = toml::Table::new();
        let mut put = |key: &str, value: toml::Value| {
            table.insert(key.to_owned(), value);
        };
        if let Some(command) = &server.command {
            put("command", command.clone().into());
        }
        if !server.args.is_empty() {
            put(
                "args",
                server
                    .args
                    .iter()
                    .cloned()
                    .map(toml::Value::from)
                    .collect::<Vec<_>>()
                    .into(),
            );
        }
        if let Some(cwd) = &server.cwd {
            put("cwd", cwd.display().to_string().into());
        }
        if let Some(url) = &server.url {
            put("url", url.clone().into());
        }
        if let Some(transport) = &server.transport {
            put("transport", transport.clone().into());
        }
        if server.disabled {
            put("disabled", true.into());
        }
        let map = |entries: &BTreeMap<String, String>| {
            let mut inline = toml::Table::new();
            for (k, v) in entries {
                inline.insert(k.clone(), v.clone().into());
            }
            toml::Value::Table(inline)
        };
        if !server.env.is_empty() {
            put("env", map(&server.env));
        }
        if !server.headers.is_empty() {
            put("headers", map(&server.headers));
        }
        if let Some(client_id) = &server.client_id {
            table.insert("client-id".to_owned(), client_id.clone().into());
        }
        if let Some(secret) = &server.client_secret {
            table.insert("client-secret".to_owned(), secret.clone().into());
        }
        if let Some(scopes) = &server.scopes {
            let list: Vec<toml::Value> = scopes.iter().cloned().map(toml::Value::from).collect();
            table.insert("scopes".to_owned(), list.into());
        }
        servers.insert(name.clone(), toml::Value::Table(table));
    }
    let mut root = toml::Table::new();
    root.insert("servers".to_owned(), toml::Value::Table(servers));
    toml::to_string(&root).unwrap_or_default()
}
