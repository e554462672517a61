//! MCP Apps (SEP-1865) as Runbyte passes them on: the extension it declares, and which tools
//! are for an app only. Where their UI resources' URIs go is the URI rule's
//! ([`crate::hub::Uris`]).

use rmcp::model::Tool;
use serde_json::Value;

/// The `_meta` keys of a tool that hold the URI of its UI resource (SEP-1865): `ui.resourceUri`,
/// and the deprecated flat `ui/resourceUri` the SEP still names.
pub(super) const UI_META: &str = "ui";
pub(super) const UI_META_RESOURCE_URI: &str = "resourceUri";
pub(super) const LEGACY_UI_META_RESOURCE_URI: &str = "ui/resourceUri";
const UI_META_VISIBILITY: &str = "visibility";

/// Whether `tool` is for its MCP App only (SEP-1865: `_meta.ui.visibility` without `"model"`),
/// which a host must keep out of its model's tools. A client that sees it directly is the host
/// and gets it (its app calls it through Runbyte); a program is the model's, so the code mode
/// neither shows nor calls it.
pub fn is_app_only(tool: &Tool) -> bool {
    let visibility = tool
        .meta
        .as_ref()
        .and_then(|meta| meta.0.get(UI_META))
        .and_then(|ui| ui.get(UI_META_VISIBILITY))
        .and_then(Value::as_array);
    visibility.is_some_and(|who| !who.iter().any(|one| one == "model"))
}

/// The MCP Apps extension's identifier (SEP-1865, negotiated as SEP-1724 says).
pub const APPS_EXTENSION: &str = "io.modelcontextprotocol/ui";

/// The MIME type of an MCP App's HTML view.
const APP_MIME_TYPE: &str = "text/html;profile=mcp-app";

/// The settings Runbyte declares the MCP Apps extension with, to servers (so that one which
/// checks its client's capability before offering its UI tools offers them) and to clients
/// (it passes UI resources and their tools' `_meta` on): the HTML views' MIME type. A client
/// that renders no UI gets the tools as plain tools, which SEP-1865 asks every such tool to be.
pub fn apps_capability() -> rmcp::model::JsonObject {
    let mut settings = rmcp::model::JsonObject::new();
    settings.insert("mimeTypes".to_owned(), Value::from(vec![APP_MIME_TYPE]));
    settings
}
