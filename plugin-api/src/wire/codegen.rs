//! A codegen dialect's request and response (see [`crate::codegen`] for what they mean).

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The extension a dialect's modules have when its response names none: `ts`.
pub const DEFAULT_EXTENSION: &str = "ts";

/// One `generate` request, told apart by its `"kind"`: `"server"` or `"root"`.
///
/// `T` is how a tool is held: a [`Value`] (the MCP tool object exactly as the server listed it)
/// for a plugin reading the request; the host writes its own tool type, which serialises to
/// the same object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum CodegenRequest<T = Value> {
    /// `{"kind": "server", ...}`: the files for one server.
    Server(ServerRequest<T>),
    /// `{"kind": "root", ...}`: the files at the root of `/servers`.
    Root(RootRequest),
}

/// The files for one server: `{"kind": "server", "server", "folder", "tools"}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServerRequest<T = Value> {
    /// The server's name in `runbyte.toml` (any text).
    pub server: String,
    /// The path-safe folder the host keeps the server's files in: one plain path segment.
    pub folder: String,
    /// The server's tools, in the server's order, each the MCP tool object as listed (`name`,
    /// `description`, `inputSchema`, `outputSchema`, `annotations`, `title`).
    pub tools: Vec<T>,
}

/// The files at the root of `/servers`: `{"kind": "root", "servers"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RootRequest {
    /// Every configured server, sorted by name.
    pub servers: Vec<ServerRef>,
}

/// One server in a [`RootRequest`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerRef {
    /// The server's name in `runbyte.toml`.
    pub name: String,
    /// Its folder (as in [`ServerRequest::folder`]).
    pub folder: String,
}

/// The answer to one request: `{"files", "tools", "warnings", "extension"}`.
///
/// Every key may be left out: the lists default to empty and the extension to
/// [`DEFAULT_EXTENSION`], so an answer written before `extension` existed still reads.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CodegenResponse {
    /// The generated files. For a server request they all lie in its folder; for a root
    /// request they lie at the root (`index.ts`).
    #[serde(default)]
    pub files: Vec<File>,
    /// For a server request, one entry per tool, in the server's order; empty for a root
    /// request.
    #[serde(default)]
    pub tools: Vec<ToolEntry>,
    /// What could not be typed or was left out, one line each, for the operator's log.
    #[serde(default)]
    pub warnings: Vec<String>,
    /// The extension of the dialect's modules, without the dot: `"ts"` (transpiled by the
    /// host) or `"js"` (run as written). The host names the placeholder files of servers that
    /// are starting or down with it. `None` (the key absent) means [`DEFAULT_EXTENSION`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extension: Option<String>,
}

impl CodegenResponse {
    /// The extension the dialect's modules have: [`CodegenResponse::extension`], or
    /// [`DEFAULT_EXTENSION`] when the answer names none.
    pub fn extension(&self) -> &str {
        self.extension.as_deref().unwrap_or(DEFAULT_EXTENSION)
    }
}

/// One generated file: `{"path", "content"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct File {
    /// Relative to `/servers`, with `/` between segments: `github/list_repos.ts`.
    pub path: String,
    /// The module's source.
    pub content: String,
}

/// What the host shows for one tool (in `search_tools` and `list_directory`):
/// `{"name", "identifier", "path", "signature"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolEntry {
    /// The tool's original name, as the server listed it.
    pub name: String,
    /// The name of the function that calls it.
    pub identifier: String,
    /// Its module, relative to `/servers`.
    pub path: String,
    /// One line, e.g. `listRepos(args: { owner: string }): Promise<Repo[]>`.
    pub signature: String,
}
