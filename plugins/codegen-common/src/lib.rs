//! What Runbyte's bundled codegen dialects share: reading the request, JSON Schema to types,
//! identifiers, safe text, the index modules and the response.
//!
//! A dialect implements [`Dialect`] (the file extension and how one tool's module reads) and
//! answers the plugin API's `Codegen::generate` with [`generate`]. Everything else, down
//! to the function's doc comment, is the same for both, so the two dialects never disagree on
//! a name, a type or a warning.

pub mod doc;
pub mod names;
pub mod plan;
pub mod render;
pub mod schema;
pub mod text;
pub mod types;

use runbyte_plugin_api::wire::{
    CodegenRequest, CodegenResponse, File, RootRequest, ServerRef, ServerRequest, ToolEntry,
};
use serde_json::Value;

use crate::{
    plan::{ServerPlan, ToolPlan},
    text::{Comment, string_literal},
};

/// A codegen dialect: how one tool's module is written.
pub trait Dialect {
    /// The extension of its modules, without the dot (`ts`, `js`); every response says it.
    const EXTENSION: &'static str;

    /// The module for one tool.
    fn tool_module(server: &ServerPlan, tool: &ToolPlan) -> String;
}

/// Checks a dialect's configuration table: a JSON object, and since the bundled dialects take
/// no options, an empty one.
pub fn open_config(dialect: &str, config: &str) -> Result<(), String> {
    let config: Value = serde_json::from_str(config)
        .map_err(|e| format!("codegen dialect `{dialect}`: configuration is not JSON: {e}"))?;
    let Value::Object(table) = config else {
        return Err(format!(
            "codegen dialect `{dialect}`: configuration must be a table"
        ));
    };
    match table.keys().next() {
        None => Ok(()),
        Some(key) => Err(format!(
            "codegen dialect `{dialect}`: unknown configuration key {}; this dialect takes none",
            string_literal(key)
        )),
    }
}

/// Answers a request for dialect `D`. An error means the request itself is malformed; a tool
/// that cannot be typed is a warning in the response instead.
pub fn generate<D: Dialect>(request: &str) -> Result<String, String> {
    let response = respond::<D>(request)?;
    serde_json::to_string(&response).map_err(|e| format!("cannot encode the codegen response: {e}"))
}

/// [`generate`], before encoding.
pub fn respond<D: Dialect>(request: &str) -> Result<CodegenResponse, String> {
    let request: CodegenRequest = serde_json::from_str(request)
        .map_err(|e| format!("the codegen request is malformed: {e}"))?;
    match request {
        CodegenRequest::Server(ServerRequest {
            server,
            folder,
            tools,
        }) => {
            check_folder(&folder)?;
            Ok(server_files::<D>(&plan::plan(&server, &folder, &tools)))
        }
        CodegenRequest::Root(RootRequest { servers }) => root_files::<D>(&servers),
    }
}

/// The largest module a tool's types may make: 512 KiB, half of what the host's transpiler
/// accepts. A tool whose module would be larger is written untyped instead.
pub const MAX_MODULE_BYTES: usize = 512 * 1024;

/// The files and entries for one planned server.
pub fn server_files<D: Dialect>(plan: &ServerPlan) -> CodegenResponse {
    let ext = D::EXTENSION;
    let mut files = Vec::with_capacity(plan.tools.len() + 1);
    let mut entries = Vec::with_capacity(plan.tools.len());
    let mut warnings = plan.warnings.clone();
    for tool in &plan.tools {
        let path = format!("{}/{}.{ext}", plan.folder, tool.identifier);
        let mut content = D::tool_module(plan, tool);
        let mut signature = tool.signature();
        if content.len() > MAX_MODULE_BYTES {
            let reason = format!(
                "its types would make a module of {} KiB",
                content.len() >> 10
            );
            warnings.push(format!(
                "server {}, tool {}: {reason}; its arguments and result are untyped",
                string_literal(&plan.server),
                string_literal(&tool.name)
            ));
            let untyped = tool.untyped(&reason);
            content = D::tool_module(plan, &untyped);
            signature = untyped.signature();
        }
        entries.push(ToolEntry {
            name: tool.name.clone(),
            identifier: tool.identifier.clone(),
            path: path.clone(),
            signature,
        });
        files.push(File { path, content });
    }
    let mut identifiers: Vec<&str> = plan.tools.iter().map(|t| t.identifier.as_str()).collect();
    identifiers.sort_unstable();
    let mut index = String::new();
    for identifier in &identifiers {
        index.push_str("export * from ");
        text::push_string_literal(&mut index, &format!("./{identifier}"));
        index.push_str(";\n");
    }
    if identifiers.is_empty() {
        index.push_str("export {};\n");
    }
    files.push(File {
        path: format!("{}/index.{ext}", plan.folder),
        content: index,
    });
    files.sort_by(|a, b| a.path.cmp(&b.path));
    CodegenResponse {
        files,
        tools: entries,
        warnings,
        extension: Some(D::EXTENSION.to_owned()),
    }
}

fn root_files<D: Dialect>(servers: &[ServerRef]) -> Result<CodegenResponse, String> {
    let mut names: Vec<&str> = Vec::with_capacity(servers.len());
    for server in servers {
        check_folder(&server.folder)?;
        if names.contains(&server.name.as_str()) {
            return Err(format!(
                "the codegen request lists server {} twice",
                string_literal(&server.name)
            ));
        }
        names.push(&server.name);
    }
    let identifiers = names::assign(&names);
    let mut lines: Vec<String> = servers
        .iter()
        .zip(&identifiers)
        .map(|(server, identifier)| {
            format!(
                "export * as {identifier} from {};\n",
                string_literal(&format!("./{}/index", server.folder))
            )
        })
        .collect();
    lines.sort_unstable();
    let mut content = lines.concat();
    if content.is_empty() {
        content.push_str("export {};\n");
    }
    let path = format!("index.{}", D::EXTENSION);
    Ok(CodegenResponse {
        files: vec![File { path, content }],
        tools: Vec::new(),
        warnings: Vec::new(),
        extension: Some(D::EXTENSION.to_owned()),
    })
}

/// A folder must be one plain path segment: the host promises so, and a file outside
/// `/servers/<folder>` would be worse than a failed request.
fn check_folder(folder: &str) -> Result<(), String> {
    let bad = folder.is_empty()
        || folder == "."
        || folder == ".."
        || folder
            .chars()
            .any(|c| matches!(c, '/' | '\\') || c.is_control());
    if bad {
        return Err(format!(
            "the codegen request names folder {}, which is not one plain path segment",
            string_literal(folder)
        ));
    }
    Ok(())
}

/// The doc comment both dialects put on a tool's function, before their own tags: the title,
/// the description, the hints in plain words, and which tool it calls when its name differs.
pub fn function_doc(server: &ServerPlan, tool: &ToolPlan) -> Comment {
    let mut comment = Comment::new();
    if let Some(title) = &tool.title {
        comment.text(title);
        comment.gap();
    }
    if let Some(description) = &tool.description {
        comment.text(description);
        comment.gap();
    }
    if let Some(words) = tool.hints.words() {
        comment.line(&format!("Hints: {words}."));
    }
    if tool.identifier != tool.name {
        comment.line(&format!(
            "Calls tool {} of server {}.",
            string_literal(&tool.name),
            string_literal(&server.server)
        ));
    }
    if tool.disambiguated {
        comment.line(&format!(
            "Named {} because another tool's name also becomes {}.",
            tool.identifier,
            names::clean(&tool.name)
        ));
    }
    for (what, typed) in [("Arguments", &tool.args), ("Result", &tool.result)] {
        if let plan::Typed::Untyped(reason) = typed {
            comment.line(&format!("{what} untyped: {reason}."));
        }
    }
    comment
}

/// The doc comment on a named type: what it is for a root (`Arguments of x.`), then its
/// schema's title, description and facts (as `@tags` when `tags`, else on one line).
pub fn decl_doc(tool: &ToolPlan, decl: &plan::Decl<'_>, tags: bool) -> Comment {
    let mut comment = Comment::new();
    match (decl.root, decl.role) {
        (true, types::Role::Args) => comment.line(&format!("Arguments of {}.", tool.identifier)),
        (true, types::Role::Result) if matches!(tool.result, plan::Typed::Absent) => {
            comment.line(&format!(
                "Result of {}: the server declares no output schema.",
                tool.identifier
            ))
        }
        (true, types::Role::Result) => match tool.inferred {
            Some(calls) if matches!(tool.result, plan::Typed::Converted(_)) => {
                comment.line(&format!(
                    "Result of {}: the server declares no output schema; this type is inferred \
                     from {calls} call{} and may be incomplete.",
                    tool.identifier,
                    if calls == 1 { "" } else { "s" }
                ))
            }
            _ => comment.line(&format!("Result of {}.", tool.identifier)),
        },
        (false, _) => {}
    }
    let own = render::doc_comment(decl.doc, tags);
    if !own.is_empty() {
        comment.gap();
        comment.append(own);
    }
    comment
}

#[cfg(test)]
mod tests;
