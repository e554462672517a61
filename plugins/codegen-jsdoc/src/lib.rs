//! `jsdoc`: the codegen dialect for plain JavaScript.
//!
//! The same surface as the `typescript` dialect, as `.js` ES modules that run as they are:
//! each tool is an async function with `@param` and `@returns`, and its types are `@typedef`s
//! with `@property` lines (nested objects as `a.b` and `a[].b` so their docs survive), written
//! in the TypeScript-flavoured type expressions that editors and `checkJs` understand.

use runbyte_codegen_common::{
    Dialect, decl_doc, function_doc, generate,
    names::is_identifier,
    open_config,
    plan::{Decl, ServerPlan, ToolPlan},
    render::{Style, facts_inline, index_doc},
    text::{Comment, string_literal},
    types::{Doc, Object, Role, Ty},
};
use runbyte_plugin_api::{codegen::Codegen, export_plugin};

/// How deep `@property` paths go (`a.b.c.d`); deeper objects are written inline.
const MAX_PATH_DEPTH: usize = 4;

/// The dialect; it takes no configuration.
#[derive(Debug)]
pub struct JsDoc;

impl Codegen for JsDoc {
    fn open(config: &str) -> Result<Self, String> {
        open_config("jsdoc", config)?;
        Ok(JsDoc)
    }

    fn generate(&self, request: &str) -> Result<String, String> {
        generate::<JsDoc>(request)
    }
}

impl Dialect for JsDoc {
    const EXTENSION: &'static str = "js";

    fn tool_module(server: &ServerPlan, tool: &ToolPlan) -> String {
        let mut out = String::with_capacity(1024);
        out.push_str("import { callTool } from \"runbyte:bridge\";\n\n");

        let args = tool.names.root(Role::Args);
        let result = tool.names.root(Role::Result);
        let mut comment = function_doc(server, tool);
        comment.gap();
        if tool.args_optional {
            comment.line(&format!("@param {{{args}}} [args]"));
        } else {
            comment.line(&format!("@param {{{args}}} args"));
        }
        comment.line(&format!("@returns {{Promise<{result}>}}"));
        comment.write(&mut out, 0);
        let default = if tool.args_optional { " = {}" } else { "" };
        out.push_str(&format!(
            "export async function {}(args{default}) {{\n  return await callTool({}, {}, args);\n}}\n",
            tool.identifier,
            string_literal(&server.server),
            string_literal(&tool.name),
        ));

        for decl in tool.decls() {
            out.push('\n');
            typedef(&mut out, tool, &decl);
        }
        out
    }
}

fn typedef(out: &mut String, tool: &ToolPlan, decl: &Decl<'_>) {
    let style = Style {
        names: &tool.names,
        generic_arrays: true,
        block: None,
    };
    let mut comment = decl_doc(tool, decl, false);
    let name = decl.name;
    match decl.ty {
        _ if decl.untyped.is_some() => {
            let ty = if decl.role == Role::Args {
                "Record<string, unknown>"
            } else {
                "unknown"
            };
            comment.line(&format!("@typedef {{{ty}}} {name}"));
        }
        Ty::Object(object) => {
            if let Some(index) = &object.index {
                index_doc(&mut comment, &style, index, true);
            }
            comment.line(&format!("@typedef {{object}} {name}"));
            properties(&mut comment, &style, object, "", 0);
        }
        ty => comment.line(&format!("@typedef {{{}}} {name}", style.render(ty))),
    }
    comment.write(out, 0);
}

/// `@property` lines for an object's properties, with `prefix` (`a.` or `a[].`) before each
/// name; objects whose keys are all identifiers are opened up into their own lines.
fn properties(
    comment: &mut Comment,
    style: &Style<'_>,
    object: &Object,
    prefix: &str,
    depth: usize,
) {
    for prop in &object.props {
        let mut path = prefix.to_owned();
        runbyte_codegen_common::render::key(&mut path, &prop.key);
        let nested = if is_identifier(&prop.key) && depth < MAX_PATH_DEPTH {
            match &prop.ty {
                Ty::Object(inner) if opens_up(inner) => Some(("object".to_owned(), inner, ".")),
                Ty::Array(item) => match item.as_ref() {
                    Ty::Object(inner) if opens_up(inner) => {
                        Some(("Array<object>".to_owned(), inner, "[]."))
                    }
                    _ => None,
                },
                _ => None,
            }
        } else {
            None
        };
        let ty = match &nested {
            Some((ty, ..)) => ty.clone(),
            None => style.render(&prop.ty),
        };
        let name = if prop.optional {
            format!("[{path}]")
        } else {
            path.clone()
        };
        let description = describe(&prop.doc);
        let tag = format!(
            "@property {{{ty}}} {name}{}",
            if description.is_empty() { "" } else { " - " }
        );
        comment.tagged(&tag, &description);
        if let Some((_, inner, separator)) = nested {
            properties(
                comment,
                style,
                inner,
                &format!("{path}{separator}"),
                depth + 1,
            );
        }
    }
}

fn opens_up(object: &Object) -> bool {
    object.index.is_none()
        && !object.props.is_empty()
        && object.props.iter().all(|p| is_identifier(&p.key))
}

/// `title: description (facts)`, or nothing.
fn describe(doc: &Doc) -> String {
    let mut text = String::new();
    if let Some(title) = &doc.title {
        text.push_str(title);
        if doc.description.is_some() {
            text.push_str(": ");
        }
    }
    if let Some(description) = &doc.description {
        text.push_str(description.trim());
    }
    if let Some(facts) = facts_inline(doc) {
        if !text.is_empty() {
            text.push(' ');
        }
        text.push('(');
        text.push_str(&facts);
        text.push(')');
    }
    text
}

export_plugin! { kind: codegen, name: "jsdoc", plugin: JsDoc }

#[cfg(test)]
mod tests;
