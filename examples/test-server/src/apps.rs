//! `--mode apps`: an MCP Apps server (SEP-1865, extension `io.modelcontextprotocol/ui`), so that
//! a gateway's tests can check that a host reaches its UI through it.
//!
//! | what | name or URI | has |
//! |---|---|---|
//! | tool | `show_dashboard` | `_meta.ui.resourceUri` [`DASHBOARD`], the deprecated `_meta["ui/resourceUri"]` likewise, `_meta.ui.visibility` `["model", "app"]`; a call gives a text block (saying whether the client declared the `io.modelcontextprotocol/ui` extension: `the client declares MCP Apps` or `... does not ...`), a `resource_link` to [`DASHBOARD`] and [`README`] embedded |
//! | tool | `refresh_dashboard` | app-only: `_meta.ui` `{"resourceUri": DASHBOARD, "visibility": ["app"]}`; a call gives text `refreshed` |
//! | resource | [`DASHBOARD`] | `text/html;profile=mcp-app`, an HTML5 document, `_meta.ui` with `csp` (`connectDomains`, `resourceDomains`) and `prefersBorder` (in the listing and in `resources/read`) |
//! | resource | [`README`] | `text/plain`, text [`README_TEXT`] |
//! | template | `ui://dashboard/{view}` | reads as [`DASHBOARD`] with the view in the page's title |
//!
//! The server lists its UI tools whatever the client declares (the SEP lets a server check the
//! client's `io.modelcontextprotocol/ui` capability first; this one does not, so a gateway that
//! does not pass it on still gets them).

use rmcp::model::{
    CallToolResult, ContentBlock, ListResourceTemplatesResult, ListResourcesResult, MetaObject,
    ReadResourceRequestParams, ReadResourceResult, Resource, ResourceContents, ResourceTemplate,
    Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};
use serde_json::{Value, json};

/// The UI resource of `show_dashboard`.
pub const DASHBOARD: &str = "ui://dashboard/main.html";
/// A plain resource beside it.
pub const README: &str = "test://apps/readme.txt";
pub const README_TEXT: &str = "the dashboard shows the weather";
/// MCP Apps' MIME type of an HTML view.
pub const MIME: &str = "text/html;profile=mcp-app";

const TEMPLATE: &str = "ui://dashboard/{view}";

fn meta(value: Value) -> MetaObject {
    match value {
        Value::Object(map) => MetaObject(map),
        _ => MetaObject::default(),
    }
}

/// The resource `_meta.ui` of the dashboard.
fn dashboard_meta() -> MetaObject {
    meta(json!({"ui": {
        "csp": {
            "connectDomains": ["https://api.example.com"],
            "resourceDomains": ["https://cdn.example.com"]
        },
        "prefersBorder": true
    }}))
}

fn page(title: &str) -> String {
    format!(
        "<!DOCTYPE html><html><head><title>{title}</title></head>\
         <body><h1>{title}</h1><script>window.parent.postMessage({{jsonrpc: \"2.0\", id: 1, \
         method: \"ui/initialize\", params: {{}}}}, \"*\");</script></body></html>"
    )
}

/// The tools of the mode.
pub fn tools() -> Vec<Tool> {
    let object = |value: Value| match value {
        Value::Object(map) => std::sync::Arc::new(map),
        _ => std::sync::Arc::default(),
    };
    let mut show = Tool::new(
        "show_dashboard",
        "Shows the weather dashboard (an MCP App).",
        object(json!({"type": "object", "properties": {"city": {"type": "string"}}})),
    );
    show.meta = Some(meta(json!({
        "ui": {"resourceUri": DASHBOARD, "visibility": ["model", "app"]},
        "ui/resourceUri": DASHBOARD
    })));
    let mut refresh = Tool::new(
        "refresh_dashboard",
        "Refreshes the dashboard's data; for the app only.",
        object(json!({"type": "object"})),
    );
    refresh.meta = Some(meta(json!({
        "ui": {"resourceUri": DASHBOARD, "visibility": ["app"]}
    })));
    vec![show, refresh]
}

/// The MCP Apps extension's identifier.
const EXTENSION: &str = "io.modelcontextprotocol/ui";

/// The result of the mode's tool `name`; `None` for a tool not of the mode.
pub fn call(name: &str, context: &RequestContext<RoleServer>) -> Option<CallToolResult> {
    let declared = context
        .client_capabilities()
        .and_then(|capabilities| capabilities.extensions)
        .and_then(|extensions| extensions.get(EXTENSION).cloned())
        .and_then(|settings| settings.get("mimeTypes").cloned())
        .is_some_and(|types| {
            types
                .as_array()
                .is_some_and(|t| t.iter().any(|m| m == MIME))
        });
    let told = if declared {
        "the dashboard is ready; the client declares MCP Apps"
    } else {
        "the dashboard is ready; the client does not declare MCP Apps"
    };
    match name {
        "show_dashboard" => Some(CallToolResult::success(vec![
            ContentBlock::text(told),
            ContentBlock::ResourceLink(Resource::new(DASHBOARD, "dashboard").with_mime_type(MIME)),
            ContentBlock::embedded_text(README, README_TEXT),
        ])),
        "refresh_dashboard" => Some(CallToolResult::success(vec![ContentBlock::text(
            "refreshed",
        )])),
        _ => None,
    }
}

/// `resources/list`: the dashboard and the readme.
pub fn resources() -> ListResourcesResult {
    let mut dashboard = Resource::new(DASHBOARD, "dashboard")
        .with_description("the weather dashboard")
        .with_mime_type(MIME);
    dashboard.meta = Some(dashboard_meta());
    let readme = Resource::new(README, "readme").with_mime_type("text/plain");
    ListResourcesResult::with_all_items(vec![dashboard, readme])
}

/// `resources/templates/list`: one view of the dashboard per name.
pub fn templates() -> ListResourceTemplatesResult {
    ListResourceTemplatesResult::with_all_items(vec![
        ResourceTemplate::new(TEMPLATE, "dashboard view").with_mime_type(MIME),
    ])
}

/// `resources/read`: the HTML of the dashboard (or one of its views) with its MIME type and
/// `_meta.ui`, the readme's text, or -32602 naming the URI.
pub fn read(request: &ReadResourceRequestParams) -> Result<ReadResourceResult, ErrorData> {
    let uri = request.uri.as_str();
    let contents = if uri == README {
        ResourceContents::text(README_TEXT, uri)
    } else if let Some(view) = uri
        .strip_prefix("ui://dashboard/")
        .filter(|view| !view.is_empty() && !view.contains(['/', '?', '#']))
    {
        let title = if uri == DASHBOARD { "dashboard" } else { view };
        ResourceContents::TextResourceContents {
            uri: uri.to_owned(),
            mime_type: Some(MIME.to_owned()),
            text: page(title),
            meta: Some(dashboard_meta()),
        }
    } else {
        return Err(ErrorData::invalid_params(
            format!("Resource not found: `{uri}`"),
            Some(json!({"uri": uri})),
        ));
    };
    Ok(ReadResourceResult::new(vec![contents]))
}
