//! The one rule for the URIs clients see of the servers' resources, and the way back.
//!
//! A server's URI `U` reaches clients as `runbyte://<server>/U` (the server's name
//! percent-encoded), so two servers that both serve `file:///notes.md` stay apart and a read goes
//! to the server that listed it. Two kinds keep their own form:
//!
//! - An MCP Apps UI resource (SEP-1865, `ui://…`) keeps its scheme, since a host reads the
//!   `_meta.ui.resourceUri` of a tool with `resources/read` and expects a `ui://` URI: the server
//!   goes into the authority, `ui://<server>/<the rest after ui://>`. `ui://weather/dash` of
//!   server `w` is `ui://w/weather/dash`.
//! - A server exposed directly with an empty `direct-prefix` (Runbyte as a transparent gateway in
//!   front of one server) has its URIs shown as they are ("verbatim").
//!
//! [`Uris::client_uri`] is the way there and [`Uris::targets`] the way back; every place that
//! gives or takes a resource URI uses them. A URI is the same for every client revision.

use std::{borrow::Cow, collections::BTreeMap};

use rmcp::model::{CallToolResult, ContentBlock, ResourceContents, Tool};
use serde_json::Value;

use crate::{
    config::Config,
    hub::apps::{LEGACY_UI_META_RESOURCE_URI, UI_META, UI_META_RESOURCE_URI},
};

/// The scheme of the URIs Runbyte gives downstream resources.
pub(super) const SCHEME: &str = "runbyte://";

/// The scheme of MCP Apps' UI resources (SEP-1865), which clients read with it.
pub const UI_SCHEME: &str = "ui://";

/// Appends `server` percent-encoded as a URI authority: only unreserved characters stay.
fn push_server(out: &mut String, server: &str) {
    for byte in server.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.' | b'~') {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
}

/// The server name an authority of [`push_server`] stands for; `None` for one it cannot make.
fn decode_server(encoded: &str) -> Option<String> {
    let mut server = Vec::with_capacity(encoded.len());
    let bytes = encoded.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = encoded.get(i + 1..i + 3)?;
            server.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            server.push(bytes[i]);
            i += 1;
        }
    }
    let server = String::from_utf8(server).ok()?;
    (!server.is_empty()).then_some(server)
}

/// Runbyte's URI for a server's resource `uri`: `runbyte://<server>/<uri>`.
pub fn namespaced_uri(server: &str, uri: &str) -> String {
    let mut out = String::with_capacity(SCHEME.len() + server.len() + uri.len() + 1);
    out.push_str(SCHEME);
    push_server(&mut out, server);
    out.push('/');
    out.push_str(uri);
    out
}

/// The server and the server's own URI that a `runbyte://` URI stands for; `None` for a URI
/// that is not one.
pub fn split_uri(uri: &str) -> Option<(String, &str)> {
    let rest = uri.strip_prefix(SCHEME)?;
    let (encoded, original) = rest.split_once('/')?;
    let server = decode_server(encoded)?;
    (!original.is_empty()).then_some((server, original))
}

/// The URI clients see of a server's UI resource `uri` (`ui://…`, with something after the
/// scheme): `ui://<server>/<the rest>`; `None` for any other URI.
fn ui_uri(server: &str, uri: &str) -> Option<String> {
    let rest = uri
        .strip_prefix(UI_SCHEME)
        .filter(|rest| !rest.is_empty())?;
    let mut out = String::with_capacity(UI_SCHEME.len() + server.len() + uri.len() + 1);
    out.push_str(UI_SCHEME);
    push_server(&mut out, server);
    out.push('/');
    out.push_str(rest);
    Some(out)
}

/// The server and the server's own URI (`ui://<the rest>`) a UI URI of [`ui_uri`] stands for.
fn split_ui_uri(uri: &str) -> Option<(String, String)> {
    let rest = uri.strip_prefix(UI_SCHEME)?;
    let (encoded, original) = rest.split_once('/')?;
    let server = decode_server(encoded)?;
    (!original.is_empty()).then(|| (server, format!("{UI_SCHEME}{original}")))
}

/// One server a client's URI may stand for, with the server's own URI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target<'u> {
    pub server: String,
    pub uri: Cow<'u, str>,
    /// Whether the URI names the server (`runbyte://` or `ui://` with its name), rather than
    /// being a verbatim server's URI as it is.
    pub named: bool,
}

/// How the configured servers' resource URIs reach clients: the rule of this module.
#[derive(Debug, Clone, Default)]
pub struct Uris {
    /// Every enabled server, and whether clients see its URIs as they are.
    servers: BTreeMap<String, bool>,
}

impl Uris {
    /// The rule for `config`'s enabled servers: verbatim for those exposed directly
    /// (`expose = "direct"` or `"both"`, not `"auto"`, whose listing may change) with
    /// `direct-prefix = ""`.
    pub fn new(config: &Config) -> Self {
        let verbatim: Vec<String> = config
            .direct_servers()
            .into_iter()
            .filter(|(server, prefix)| {
                prefix.is_empty() && config.exposure(server) != crate::config::Expose::Auto
            })
            .map(|(server, _)| server)
            .collect();
        Uris::of(
            config.enabled_servers().map(|(name, _)| name.clone()),
            &verbatim,
        )
    }

    /// The rule for `servers`, of which `verbatim` show their URIs as they are.
    pub fn of(servers: impl IntoIterator<Item = String>, verbatim: &[String]) -> Self {
        let servers = servers
            .into_iter()
            .map(|server| {
                let shown_as_is = verbatim.contains(&server);
                (server, shown_as_is)
            })
            .collect();
        Uris { servers }
    }

    /// Whether clients see `server`'s URIs as they are.
    pub fn is_verbatim(&self, server: &str) -> bool {
        self.servers.get(server).copied().unwrap_or(false)
    }

    /// Whether any server's URIs are seen as they are (only then can two servers' URIs meet).
    pub fn any_verbatim(&self) -> bool {
        self.servers.values().any(|verbatim| *verbatim)
    }

    /// The URI a client reads for `server`'s resource (or template) `uri`.
    pub fn client_uri(&self, server: &str, uri: &str) -> String {
        if self.is_verbatim(server) {
            return uri.to_owned();
        }
        ui_uri(server, uri).unwrap_or_else(|| namespaced_uri(server, uri))
    }

    /// The way back: the configured servers a client's `uri` may stand for, each with its own
    /// URI. The server the URI names (by `runbyte://` or `ui://`, one not shown verbatim) comes
    /// first; then every verbatim server, with the URI as it is. Empty when it is no server's.
    /// More than one only when a server is verbatim: which one serves it is for its listing to
    /// say (see `Hub::resource_slot`).
    pub fn targets<'u>(&self, uri: &'u str) -> Vec<Target<'u>> {
        let named = split_uri(uri)
            .map(|(server, original)| (server, Cow::Borrowed(original)))
            .or_else(|| split_ui_uri(uri).map(|(server, original)| (server, Cow::Owned(original))))
            .filter(|(server, _)| self.servers.get(server) == Some(&false))
            .map(|(server, uri)| Target {
                server,
                uri,
                named: true,
            });
        let verbatim = self
            .servers
            .iter()
            .filter(|(_, verbatim)| **verbatim)
            .map(|(server, _)| Target {
                server: server.clone(),
                uri: Cow::Borrowed(uri),
                named: false,
            });
        named.into_iter().chain(verbatim).collect()
    }

    /// The server a `runbyte://` or `ui://` URI names, configured or not (for saying which).
    pub fn named_server(uri: &str) -> Option<String> {
        split_uri(uri)
            .map(|(server, _)| server)
            .or_else(|| split_ui_uri(uri).map(|(server, _)| server))
    }

    /// `server`'s `tool` as clients see it: the URI of its UI resource (`_meta.ui.resourceUri`,
    /// and the deprecated `_meta["ui/resourceUri"]`) the one they read; every other `_meta`
    /// field (`ui.visibility`, `ui.csp`, ...) as the server gave it.
    pub fn in_tool(&self, server: &str, tool: &mut Tool) {
        let Some(meta) = tool.meta.as_mut() else {
            return;
        };
        if let Some(Value::Object(ui)) = meta.0.get_mut(UI_META)
            && let Some(Value::String(uri)) = ui.get_mut(UI_META_RESOURCE_URI)
        {
            *uri = self.client_uri(server, uri);
        }
        if let Some(Value::String(uri)) = meta.0.get_mut(LEGACY_UI_META_RESOURCE_URI) {
            *uri = self.client_uri(server, uri);
        }
    }

    /// `server`'s content block as clients see it: an embedded resource's or a resource link's
    /// URI the one they read.
    pub fn in_content(&self, server: &str, block: &mut ContentBlock) {
        match block {
            ContentBlock::Resource(embedded) => self.in_contents(server, &mut embedded.resource),
            ContentBlock::ResourceLink(link) => link.uri = self.client_uri(server, &link.uri),
            _ => {}
        }
    }

    /// `server`'s resource contents as clients see them: their URI the one they read.
    pub fn in_contents(&self, server: &str, contents: &mut ResourceContents) {
        match contents {
            ResourceContents::TextResourceContents { uri, .. }
            | ResourceContents::BlobResourceContents { uri, .. } => {
                *uri = self.client_uri(server, uri);
            }
            _ => {}
        }
    }

    /// `server`'s tool result as clients (and programs) see it: every content block by
    /// [`Uris::in_content`]. (`structuredContent` is the tool's own JSON, left as it is.)
    pub fn in_result(&self, server: &str, result: &mut CallToolResult) {
        for block in &mut result.content {
            self.in_content(server, block);
        }
    }

    /// Whether `uri` may be a URI of `server` for a client (it names it, or `server` is verbatim).
    pub fn may_be_of(&self, uri: &str, server: &str) -> bool {
        self.targets(uri)
            .iter()
            .any(|target| target.server == server)
    }
}

#[cfg(test)]
pub(super) mod tests;
