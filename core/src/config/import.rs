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
    let mut imported = ImportedServers::default();
    for (name, entry) in servers {
        let entry: Entry =
            serde_json::from_value(entry.clone()).map_err(|e| format!("server `{name}`: {e}"))?;
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
                ..ServerConfig::default()
            },
        );
    }
    Ok(imported)
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
        servers.insert(name.clone(), toml::Value::Table(table));
    }
    let mut root = toml::Table::new();
    root.insert("servers".to_owned(), toml::Value::Table(servers));
    toml::to_string(&root).unwrap_or_default()
}
