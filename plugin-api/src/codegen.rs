//! Codegen dialects: the source files the virtual filesystem shows for a server's tools.
//!
//! The host calls [`Codegen::generate`] with a JSON request and expects a JSON response. Two
//! request forms, told apart by `"kind"`:
//!
//! `{"kind": "server", "server": "github", "folder": "github", "tools": [Tool, ...]}`: the
//! files for one server. `server` is the server's name in `runbyte.toml` (any text); `folder`
//! is the path-safe folder the host keeps its files in. Each `Tool` is the MCP tool object
//! exactly as the server listed it (`name`, `description`, `inputSchema`, `outputSchema`,
//! `annotations`, `title`), in the server's order.
//!
//! `{"kind": "root", "servers": [{"name": "github", "folder": "github"}, ...]}`: the files at
//! the root of `/servers`, sorted by name.
//!
//! The response: `{"files": [File, ...], "tools": [ToolEntry, ...], "warnings": ["..."],
//! "extension": "ts"}`; every key may be left out. `extension` is the extension of the
//! dialect's modules without the dot (`"ts"` or `"js"`; `"ts"` when absent): the host gives it
//! to the placeholder `index` it shows for a server that is starting or down. A `File` is `{"path": "github/list_repos.ts", "content": "..."}`, the path relative to
//! `/servers`; a server's files all lie in its folder. For a server request, `tools` has one
//! `ToolEntry` per tool: `{"name": <original name>, "identifier": <the function's name>,
//! "path": <its file>, "signature": <one line, e.g. "listRepos(args: { owner: string }):
//! Promise<Repo[]>">}`. A server's folder holds an `index` module that re-exports its tools;
//! the root files hold an `index` module exporting each server as a namespace.
//!
//! Generated modules reach the sandbox's tool bridge by importing it:
//! `import { callTool } from "runbyte:bridge"`, where
//! `callTool(server: string, tool: string, args: object): Promise<unknown>` sends the call
//! with the tool's *original* name. Modules are ES modules; `.ts` files are transpiled by the
//! host (types stripped), `.js` files run as they are.
//!
//! With the `wire` feature these shapes are serde types: `wire::CodegenRequest` and
//! `wire::CodegenResponse`.

use abi_stable::{
    sabi_trait,
    std_types::{RBox, RResult, RStr, RString},
};

use crate::{PluginError, guard::guard};

/// What a codegen dialect plugin implements.
pub trait Codegen: Send + Sync + Sized + 'static {
    /// Builds the dialect from its configuration table (a JSON object, `{}` when absent).
    fn open(config: &str) -> Result<Self, String>;

    /// Answers one request (see the [module documentation](self)). Pure and deterministic: the
    /// same request gives byte-identical output. An error fails the whole request; a tool whose
    /// schema cannot be converted should instead become an untyped wrapper and a warning.
    fn generate(&self, request: &str) -> Result<String, String>;
}

/// The ABI form of [`Codegen`].
#[sabi_trait]
pub trait RawCodegen: Send + Sync {
    /// See [`Codegen::generate`].
    #[sabi(last_prefix_field)]
    fn generate(&self, request: RStr<'_>) -> RResult<RString, PluginError>;
}

/// A boxed [`RawCodegen`] trait object.
pub type RawCodegenBox = RawCodegen_TO<'static, RBox<()>>;

pub(crate) struct CodegenAdapter<T> {
    pub(crate) inner: T,
    pub(crate) plugin: &'static str,
}

impl<T: Codegen> RawCodegen for CodegenAdapter<T> {
    fn generate(&self, request: RStr<'_>) -> RResult<RString, PluginError> {
        guard(self.plugin, "generate", || {
            self.inner.generate(request.as_str())
        })
        .map(RString::from)
        .into()
    }
}
