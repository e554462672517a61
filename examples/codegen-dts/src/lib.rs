//! Build with `cargo build --release -p runbyte-codegen-dts`, load with `[codegen] dialect = "dts"` (the build folder in `[plugins] dirs`, or `[[plugins.load]] path = ".../librunbyte_codegen_dts.so"`).
//!
//! `dts`: an example third-party codegen dialect, built against `runbyte-plugin-api` alone. Each
//! tool becomes `/servers/<folder>/<identifier>.ts`, laid out declaration first, as a `.d.ts`
//! would read, with inline types only (no interfaces or aliases to chase), and a one-line body
//! that makes the module run:
//!
//! ```ts
//! import { callTool } from "runbyte:bridge";
//!
//! /**
//!  * Add two numbers.
//!  *
//!  * Hints: read-only, idempotent.
//!  * Calls tool "add-numbers" of server "demo".
//!  */
//! export async function add_numbers(args: {
//!   a: number;
//!   b: number;
//! }): Promise<unknown> {
//!   return callTool("demo", "add-numbers", args);
//! }
//! ```
//!
//! plus `/servers/<folder>/index.ts` (`export * from "./<identifier>";` per tool) and
//! `/servers/index.ts` (`export * as <server> from "./<folder>/index";` per server). The
//! request and response follow `runbyte_plugin_api::codegen` exactly, read and written as the
//! plugin API's `wire` types; the response names its extension, `ts`. Identifiers are valid
//! ASCII, never reserved words, and distinct within a server (and across servers for the
//! namespaces); every name and description reaches the code as an escaped string literal or
//! through a comment that cannot be closed early. A tool whose input schema cannot be typed
//! gets untyped arguments and a warning; the server's other tools are unaffected.
//!
//! The dialect takes no configuration: `[codegen.dts]`, if present, must be empty.

mod names;
mod text;
mod types;

use runbyte_plugin_api::{
    codegen::Codegen,
    export_plugin,
    wire::{
        CodegenRequest, CodegenResponse as Response, File, RootRequest, ServerRef, ServerRequest,
        ToolEntry,
    },
};
use serde::Deserialize;
use serde_json::Value;

use crate::{
    names::identifiers,
    text::{doc_comment, string_literal},
    types::Render,
};

/// Arguments of a tool whose input schema cannot be typed.
const UNTYPED_ARGS: &str = "{ [key: string]: unknown }";

/// `[codegen.dts]`: nothing is configurable.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Config {}

/// The extension of the modules: TypeScript, which the host transpiles.
const EXTENSION: &str = "ts";

/// The `dts` dialect.
#[derive(Debug)]
pub struct Dts;

impl Codegen for Dts {
    fn open(config: &str) -> Result<Self, String> {
        serde_json::from_str::<Config>(config).map_err(|e| format!("[codegen.dts]: {e}"))?;
        Ok(Dts)
    }

    fn generate(&self, request: &str) -> Result<String, String> {
        let request: CodegenRequest =
            serde_json::from_str(request).map_err(|e| format!("bad codegen request: {e}"))?;
        let mut response = match request {
            CodegenRequest::Server(ServerRequest {
                server,
                folder,
                tools,
            }) => server_files(&server, &folder, &tools)?,
            CodegenRequest::Root(RootRequest { servers }) => root_files(servers)?,
        };
        response.extension = Some(EXTENSION.to_owned());
        serde_json::to_string(&response).map_err(|e| format!("cannot encode the response: {e}"))
    }
}

/// The host makes folders path-safe; a request that breaks that promise is refused rather
/// than written outside `/servers`.
fn check_folder(folder: &str) -> Result<(), String> {
    if folder.is_empty() || folder.contains(['/', '\\']) || folder.chars().all(|c| c == '.') {
        return Err(format!(
            "bad folder {} in the request",
            string_literal(folder)
        ));
    }
    Ok(())
}

fn server_files(server: &str, folder: &str, tools: &[Value]) -> Result<Response, String> {
    check_folder(folder)?;
    let mut response = Response::default();
    let mut named = Vec::new();
    for (position, tool) in tools.iter().enumerate() {
        match tool.get("name").and_then(Value::as_str) {
            Some(name) => named.push((name, tool)),
            None => response
                .warnings
                .push(format!("tool #{position} has no name and was left out")),
        }
    }
    let idents = identifiers(named.iter().map(|(name, _)| *name));
    for ((name, tool), ident) in named.into_iter().zip(&idents) {
        let module = tool_module(server, name, ident, tool);
        let path = format!("{folder}/{ident}.{EXTENSION}");
        for warning in module.warnings {
            response
                .warnings
                .push(format!("tool {}: {warning}", string_literal(name)));
        }
        response.files.push(File {
            path: path.clone(),
            content: module.content,
        });
        response.tools.push(ToolEntry {
            name: name.to_owned(),
            identifier: ident.clone(),
            path,
            signature: module.signature,
        });
    }
    let mut sorted: Vec<&String> = idents.iter().collect();
    sorted.sort();
    let lines: Vec<String> = sorted
        .iter()
        .map(|ident| format!("export * from {};\n", string_literal(&format!("./{ident}"))))
        .collect();
    response.files.push(File {
        path: format!("{folder}/index.{EXTENSION}"),
        content: module_or_empty(lines),
    });
    response.files.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(response)
}

fn root_files(mut servers: Vec<ServerRef>) -> Result<Response, String> {
    servers.sort_by(|a, b| a.name.cmp(&b.name));
    for server in &servers {
        check_folder(&server.folder)?;
    }
    let namespaces = identifiers(servers.iter().map(|s| s.name.as_str()));
    let lines = servers
        .iter()
        .zip(&namespaces)
        .map(|(server, namespace)| {
            let from = string_literal(&format!("./{}/index", server.folder));
            format!("export * as {namespace} from {from};\n")
        })
        .collect();
    Ok(Response {
        files: vec![File {
            path: format!("index.{EXTENSION}"),
            content: module_or_empty(lines),
        }],
        ..Response::default()
    })
}

/// The lines as a module; a module with nothing to export still has to be one.
fn module_or_empty(lines: Vec<String>) -> String {
    if lines.is_empty() {
        "export {};\n".to_owned()
    } else {
        lines.concat()
    }
}

struct Module {
    content: String,
    signature: String,
    warnings: Vec<String>,
}

/// The arguments' type for the file and for the one-line signature, and whether the arguments
/// may be left out.
struct Args {
    file: String,
    line: String,
    optional: bool,
}

fn args(schema: Option<&Value>, warnings: &mut Vec<String>) -> Args {
    let untyped = |warnings: &mut Vec<String>, why: String| {
        warnings.push(format!("{why}; its arguments are untyped"));
        Args {
            file: UNTYPED_ARGS.to_owned(),
            line: UNTYPED_ARGS.to_owned(),
            optional: true,
        }
    };
    let Some(schema) = schema else {
        return untyped(warnings, "it has no inputSchema".to_owned());
    };
    let mut file = Render::new(schema, true);
    let typed = file.render(schema);
    let line = Render::new(schema, false).render(schema);
    if !line.starts_with('{') {
        return untyped(
            warnings,
            format!("its inputSchema does not describe an object (it reads `{line}`)"),
        );
    }
    warnings.extend(file.warnings);
    let composite = ["$ref", "allOf", "anyOf", "oneOf"]
        .iter()
        .any(|key| schema.get(key).is_some());
    let required = schema
        .get("required")
        .and_then(Value::as_array)
        .is_some_and(|names| !names.is_empty());
    Args {
        file: typed,
        line,
        optional: !composite && !required,
    }
}

fn tool_module(server: &str, name: &str, ident: &str, tool: &Value) -> Module {
    let mut warnings = Vec::new();
    let args = args(tool.get("inputSchema"), &mut warnings);
    let (result_file, result_line) = match tool.get("outputSchema") {
        Some(schema) => {
            let mut file = Render::new(schema, true);
            let typed = file.render(schema);
            warnings.extend(file.warnings);
            (typed, Render::new(schema, false).render(schema))
        }
        None => ("unknown".to_owned(), "unknown".to_owned()),
    };

    let text = |key: &str| tool.get(key).and_then(Value::as_str).unwrap_or_default();
    let description = text("description");
    let mut paragraphs = Vec::new();
    let title = tool
        .get("annotations")
        .and_then(|a| a.get("title"))
        .and_then(Value::as_str)
        .unwrap_or(text("title"));
    if !title.is_empty() && title != description {
        paragraphs.push(title.to_owned());
    }
    paragraphs.push(description.to_owned());
    let mut notes = Vec::new();
    if let Some(hints) = hints(tool.get("annotations")) {
        notes.push(hints);
    }
    if ident != name {
        notes.push(format!(
            "Calls tool {} of server {}.",
            string_literal(name),
            string_literal(server)
        ));
    }
    paragraphs.push(notes.join("\n"));

    let call = format!(
        "callTool({}, {}, args)",
        string_literal(server),
        string_literal(name)
    );
    // `callTool` resolves to `unknown`; the declared result type is the server's promise,
    // so the value is passed through `never`, which every type accepts.
    let body = if result_line == "unknown" {
        call
    } else {
        format!("(await {call}) as never")
    };
    let default = if args.optional { " = {}" } else { "" };
    let content = format!(
        "import {{ callTool }} from \"runbyte:bridge\";\n\n{}export async function \
         {ident}(args: {}{default}): Promise<{result_file}> {{\n  return {body};\n}}\n",
        doc_comment(&paragraphs, 0),
        args.file,
    );
    let optional = if args.optional { "?" } else { "" };
    Module {
        content,
        signature: format!(
            "{ident}(args{optional}: {}): Promise<{result_line}>",
            args.line
        ),
        warnings,
    }
}

/// The tool's annotations in words: "Hints: read-only, idempotent, closed-world."
fn hints(annotations: Option<&Value>) -> Option<String> {
    let annotations = annotations?;
    let flag = |key: &str| annotations.get(key).and_then(Value::as_bool);
    let mut words = Vec::new();
    match flag("readOnlyHint") {
        Some(true) => words.push("read-only"),
        Some(false) => words.push("writes"),
        None => {}
    }
    if flag("destructiveHint") == Some(true) {
        words.push("destructive");
    }
    if flag("idempotentHint") == Some(true) {
        words.push("idempotent");
    }
    match flag("openWorldHint") {
        Some(true) => words.push("open-world"),
        Some(false) => words.push("closed-world"),
        None => {}
    }
    (!words.is_empty()).then(|| format!("Hints: {}.", words.join(", ")))
}

export_plugin! { kind: codegen, name: "dts", plugin: Dts }

#[cfg(test)]
mod tests;
