//! `typescript`: Runbyte's default codegen dialect.
//!
//! Each tool becomes `/servers/<folder>/<identifier>.ts`: an async function that calls the tool
//! through the sandbox's bridge, an `<P>Args` interface from its `inputSchema`, a `<P>Result`
//! type from its `outputSchema` (`unknown` without one), and a type per `$ref` target, all
//! prefixed with the tool's PascalCase name so that a server's `export *` index never sees two
//! exports of one name. The host strips the types when it transpiles; they are there for the
//! agent that reads the file.

use runbyte_codegen_common::{
    Dialect, decl_doc, function_doc, generate, open_config,
    plan::{Decl, ServerPlan, ToolPlan},
    render::Style,
    text::string_literal,
    types::{Role, Ty},
};
use runbyte_plugin_api::{codegen::Codegen, export_plugin};

/// The dialect; it takes no configuration.
#[derive(Debug)]
pub struct TypeScript;

impl Codegen for TypeScript {
    fn open(config: &str) -> Result<Self, String> {
        open_config("typescript", config)?;
        Ok(TypeScript)
    }

    fn generate(&self, request: &str) -> Result<String, String> {
        generate::<TypeScript>(request)
    }
}

impl Dialect for TypeScript {
    const EXTENSION: &'static str = "ts";

    fn tool_module(server: &ServerPlan, tool: &ToolPlan) -> String {
        let mut out = String::with_capacity(1024);
        out.push_str("import { callTool } from \"runbyte:bridge\";\n\n");

        let args = tool.names.root(Role::Args);
        let result = tool.names.root(Role::Result);
        function_doc(server, tool).write(&mut out, 0);
        let default = if tool.args_optional { " = {}" } else { "" };
        out.push_str(&format!(
            "export async function {}(args: {args}{default}): Promise<{result}> {{\n  return (await \
             callTool({}, {}, args)) as {result};\n}}\n",
            tool.identifier,
            string_literal(&server.server),
            string_literal(&tool.name),
        ));

        for decl in tool.decls() {
            out.push('\n');
            declaration(&mut out, tool, &decl);
        }
        out
    }
}

fn declaration(out: &mut String, tool: &ToolPlan, decl: &Decl<'_>) {
    decl_doc(tool, decl, true).write(out, 0);

    let name = decl.name;
    if decl.untyped.is_some() {
        let ty = if decl.role == Role::Args {
            "Record<string, unknown>"
        } else {
            "unknown"
        };
        out.push_str(&format!("export type {name} = {ty};\n"));
        return;
    }
    let style = Style {
        names: &tool.names,
        generic_arrays: false,
        block: Some(0),
    };
    match decl.ty {
        Ty::Object(_) => out.push_str(&format!(
            "export interface {name} {}\n",
            style.render(decl.ty)
        )),
        ty => out.push_str(&format!("export type {name} = {};\n", style.render(ty))),
    }
}

export_plugin! { kind: codegen, name: "typescript", plugin: TypeScript }

#[cfg(test)]
mod tests;
