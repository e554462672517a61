//! One server's tools, read from the request and settled: identifiers, type names, converted
//! schemas, signatures and warnings. What a dialect needs to write a module, and no more.

use serde_json::Value;

use crate::{
    names::{self, TypeNames},
    render::{DeclNames, Style},
    schema::{self, Converted},
    text::{cap, string_literal},
    types::{Doc, Role, Ty, TypeRef},
};

/// The longest tool title or description kept, in characters; the rest is cut with `…`.
pub const MAX_DESCRIPTION: usize = 16_000;

/// The longest [`ToolPlan::signature`], in characters.
pub const SIGNATURE_LIMIT: usize = 200;

/// One server's tools, ready to render.
#[derive(Debug)]
pub struct ServerPlan {
    /// The server's name in `runbyte.toml`.
    pub server: String,
    /// The folder its files lie in.
    pub folder: String,
    /// Its tools, in the server's order (a repeated name kept once).
    pub tools: Vec<ToolPlan>,
    /// What could not be typed, and tools that were left out.
    pub warnings: Vec<String>,
}

/// What became of one schema.
#[derive(Debug)]
pub enum Typed {
    /// Converted.
    Converted(Converted),
    /// The tool has no such schema (no `outputSchema`).
    Absent,
    /// It could not be converted, for this reason.
    Untyped(String),
}

impl Typed {
    /// The root type, `unknown` when there is none.
    pub fn root(&self) -> &Ty {
        match self {
            Typed::Converted(converted) => &converted.ty,
            _ => &Ty::Unknown,
        }
    }
}

/// The server's hints about a tool's behaviour.
#[derive(Debug, Default, Clone, Copy)]
pub struct Hints {
    /// `readOnlyHint`.
    pub read_only: Option<bool>,
    /// `destructiveHint`.
    pub destructive: Option<bool>,
    /// `idempotentHint`.
    pub idempotent: Option<bool>,
    /// `openWorldHint`.
    pub open_world: Option<bool>,
}

impl Hints {
    /// The hints in plain words, e.g. `read-only, idempotent, closed-world`, or `None`.
    pub fn words(&self) -> Option<String> {
        let words: Vec<&str> = [
            self.read_only
                .map(|b| if b { "read-only" } else { "modifies state" }),
            self.destructive
                .map(|b| if b { "destructive" } else { "non-destructive" }),
            self.idempotent
                .map(|b| if b { "idempotent" } else { "not idempotent" }),
            self.open_world
                .map(|b| if b { "open-world" } else { "closed-world" }),
        ]
        .into_iter()
        .flatten()
        .collect();
        (!words.is_empty()).then(|| words.join(", "))
    }
}

/// One tool, ready to render.
#[derive(Debug)]
pub struct ToolPlan {
    /// The name the server gave it, which is what the bridge sends.
    pub name: String,
    /// The function's name.
    pub identifier: String,
    /// Whether another tool's name cleaned up to the same identifier, so this one got a suffix.
    pub disambiguated: bool,
    /// `title`, or `annotations.title`.
    pub title: Option<String>,
    /// `description`.
    pub description: Option<String>,
    /// `annotations`' hints.
    pub hints: Hints,
    /// The arguments' types.
    pub args: Typed,
    /// The result's types.
    pub result: Typed,
    /// The names of its types.
    pub names: DeclNames,
    /// Whether the arguments may be left out (no required property).
    pub args_optional: bool,
    /// The host inferred the result's schema from this many calls (the tool declares none):
    /// the `outputSchema` carries [`INFERRED_KEY`].
    pub inferred: Option<u64>,
}

/// The key by which the host marks an `outputSchema` it inferred from calls, not one the server
/// declared: `{"x-runbyte-inferred": {"calls": 3}}`.
pub const INFERRED_KEY: &str = "x-runbyte-inferred";

/// How many calls a tool's `outputSchema` was inferred from, when the host inferred it.
fn inferred_calls(tool: &serde_json::Map<String, Value>) -> Option<u64> {
    let mark = tool.get("outputSchema")?.get(INFERRED_KEY)?;
    Some(mark.get("calls").and_then(Value::as_u64).unwrap_or(0))
}

/// One named type to declare.
#[derive(Debug)]
pub struct Decl<'a> {
    /// Its name.
    pub name: &'a str,
    /// Its type.
    pub ty: &'a Ty,
    /// Its schema's doc.
    pub doc: &'a Doc,
    /// Which schema it comes from.
    pub role: Role,
    /// Whether it is the schema's root (`Args` or `Result`).
    pub root: bool,
    /// Why its schema could not be converted: the arguments are then `Record<string, unknown>`,
    /// the result `unknown`.
    pub untyped: Option<&'a str>,
}

static EMPTY_DOC: Doc = Doc {
    title: None,
    description: None,
    facts: Vec::new(),
    deprecated: false,
};
impl ToolPlan {
    /// The named types to declare: `Args`, `Result`, then each schema's `$ref` targets ordered
    /// by pointer.
    pub fn decls(&self) -> Vec<Decl<'_>> {
        let mut out = Vec::new();
        for role in [Role::Args, Role::Result] {
            let typed = self.typed(role);
            let (ty, doc, untyped) = match typed {
                Typed::Converted(converted) => (&converted.ty, &converted.doc, None),
                Typed::Absent => (&Ty::Unknown, &EMPTY_DOC, None),
                Typed::Untyped(reason) => (&Ty::Unknown, &EMPTY_DOC, Some(reason.as_str())),
            };
            out.push(Decl {
                name: self.names.root(role),
                ty,
                doc,
                role,
                root: true,
                untyped,
            });
        }
        for role in [Role::Args, Role::Result] {
            if let Typed::Converted(converted) = self.typed(role) {
                let mut defs: Vec<(usize, &schema::Def)> =
                    converted.defs.iter().enumerate().collect();
                defs.sort_by(|a, b| a.1.pointer.cmp(&b.1.pointer));
                for (index, def) in defs {
                    out.push(Decl {
                        name: self.names.get(TypeRef {
                            role,
                            def: Some(index),
                        }),
                        ty: &def.ty,
                        doc: &def.doc,
                        role,
                        root: false,
                        untyped: None,
                    });
                }
            }
        }
        out
    }

    /// This tool with both schemas untyped, for `reason`.
    pub fn untyped(&self, reason: &str) -> ToolPlan {
        ToolPlan {
            name: self.name.clone(),
            identifier: self.identifier.clone(),
            disambiguated: self.disambiguated,
            title: self.title.clone(),
            description: self.description.clone(),
            hints: self.hints,
            args: Typed::Untyped(reason.to_owned()),
            result: Typed::Untyped(reason.to_owned()),
            names: self.names.clone(),
            args_optional: true,
            inferred: None,
        }
    }

    /// The schema for a role.
    pub fn typed(&self, role: Role) -> &Typed {
        match role {
            Role::Args => &self.args,
            Role::Result => &self.result,
        }
    }

    /// The type that the function's promise resolves to: the result's name, or `unknown` when
    /// nothing is known about it.
    pub fn result_type(&self) -> &str {
        match self.result.root() {
            Ty::Unknown => "unknown",
            _ => self.names.root(Role::Result),
        }
    }

    /// One line for `search_tools`: `name(args: { a: string; b?: number }): Promise<R>`,
    /// at most [`SIGNATURE_LIMIT`] characters.
    pub fn signature(&self) -> String {
        let style = Style {
            names: &self.names,
            generic_arrays: false,
            block: None,
        };
        let args = match &self.args {
            Typed::Untyped(_) => "Record<string, unknown>".to_owned(),
            typed => style.render(typed.root()),
        };
        let optional = if self.args_optional { "?" } else { "" };
        let line = format!(
            "{}(args{optional}: {args}): Promise<{}>",
            self.identifier,
            self.result_type()
        );
        cap(&line, SIGNATURE_LIMIT)
    }
}

/// Reads a server request's tools and settles everything about them.
pub fn plan(server: &str, folder: &str, tools: &[Value]) -> ServerPlan {
    let mut warnings = Vec::new();
    let who = string_literal(server);
    let mut specs: Vec<(&str, &serde_json::Map<String, Value>)> = Vec::with_capacity(tools.len());
    let mut seen = std::collections::HashSet::with_capacity(tools.len());
    for (position, tool) in tools.iter().enumerate() {
        let Some(map) = tool.as_object() else {
            warnings.push(format!(
                "server {who}: tools[{position}] is not an object; left out"
            ));
            continue;
        };
        let Some(name) = map.get("name").and_then(Value::as_str) else {
            warnings.push(format!(
                "server {who}: tools[{position}] has no name; left out"
            ));
            continue;
        };
        if !seen.insert(name) {
            warnings.push(format!(
                "server {who}: tool {} is listed more than once; the first is used",
                string_literal(name)
            ));
            continue;
        }
        specs.push((name, map));
    }

    let names: Vec<&str> = specs.iter().map(|(name, _)| *name).collect();
    let identifiers = names::assign(&names);

    let mut tools: Vec<ToolPlan> = Vec::with_capacity(specs.len());
    for ((name, map), identifier) in specs.iter().zip(identifiers) {
        let tool = string_literal(name);
        let text = |value: Option<&Value>| {
            value
                .and_then(Value::as_str)
                .filter(|s| !s.trim().is_empty())
                .map(|s| cap(s, MAX_DESCRIPTION))
        };
        let annotations = map.get("annotations").and_then(Value::as_object);
        let hint = |key: &str| {
            annotations
                .and_then(|a| a.get(key))
                .and_then(Value::as_bool)
        };
        let mut typed = |role: Role| -> Typed {
            let Some(schema) = map.get(role.field()) else {
                return match role {
                    // MCP requires `inputSchema`; without one, take no arguments to be known.
                    Role::Args => match schema::convert(role, &Value::Bool(true)) {
                        Ok(converted) => Typed::Converted(converted),
                        Err(error) => Typed::Untyped(error.0),
                    },
                    Role::Result => Typed::Absent,
                };
            };
            match schema::convert(role, schema) {
                Ok(converted) => {
                    for note in &converted.notes {
                        warnings.push(format!(
                            "server {who}, tool {tool}: {}: {note}",
                            role.field()
                        ));
                    }
                    Typed::Converted(converted)
                }
                Err(error) => {
                    let what = match role {
                        Role::Args => "its arguments are untyped (Record<string, unknown>)",
                        Role::Result => "its result is typed unknown",
                    };
                    warnings.push(format!(
                        "server {who}, tool {tool}: {} cannot be converted: {}; {what}",
                        role.field(),
                        error.0
                    ));
                    Typed::Untyped(error.0)
                }
            }
        };
        let args = typed(Role::Args);
        let result = typed(Role::Result);
        let disambiguated = names::clean(name) != identifier;
        tools.push(ToolPlan {
            name: (*name).to_owned(),
            identifier,
            disambiguated,
            title: text(map.get("title"))
                .or_else(|| text(annotations.and_then(|a| a.get("title")))),
            description: text(map.get("description")),
            hints: Hints {
                read_only: hint("readOnlyHint"),
                destructive: hint("destructiveHint"),
                idempotent: hint("idempotentHint"),
                open_world: hint("openWorldHint"),
            },
            args,
            result,
            names: DeclNames::default(),
            args_optional: false,
            inferred: inferred_calls(map),
        });
    }

    name_types(&mut tools);
    for tool in &mut tools {
        tool.args_optional = args_optional(tool);
    }
    ServerPlan {
        server: server.to_owned(),
        folder: folder.to_owned(),
        tools,
        warnings,
    }
}

/// Gives every tool's types their names, in an order that depends only on the identifiers.
fn name_types(tools: &mut [ToolPlan]) {
    let mut taken = TypeNames::new(tools.iter().map(|t| t.identifier.as_str()));
    let mut order: Vec<usize> = (0..tools.len()).collect();
    order.sort_by(|&a, &b| tools[a].identifier.cmp(&tools[b].identifier));
    let mut prefixes = vec![String::new(); tools.len()];
    for &i in &order {
        let prefix = taken.prefix(&names::pascal(&tools[i].identifier), &["Args", "Result"]);
        tools[i].names.roots = [format!("{prefix}Args"), format!("{prefix}Result")];
        prefixes[i] = prefix;
    }
    for &i in &order {
        for role in [Role::Args, Role::Result] {
            let Typed::Converted(converted) = tools[i].typed(role) else {
                continue;
            };
            let mut defs: Vec<(usize, &str, &str)> = converted
                .defs
                .iter()
                .enumerate()
                .map(|(index, def)| (index, def.pointer.as_str(), def.base.as_str()))
                .collect();
            defs.sort_by(|a, b| a.1.cmp(b.1));
            let mut names = vec![String::new(); defs.len()];
            for (index, _, base) in defs {
                names[index] = taken.take(&format!("{}{base}", prefixes[i]));
            }
            tools[i].names.defs[role as usize] = names;
        }
    }
}

/// Whether the arguments' type has no required property, following named types a few steps.
fn args_optional(tool: &ToolPlan) -> bool {
    let mut ty = match &tool.args {
        Typed::Converted(converted) => &converted.ty,
        _ => return true,
    };
    for _ in 0..8 {
        match ty {
            Ty::Unknown => return true,
            Ty::Object(object) => return object.props.iter().all(|p| p.optional),
            Ty::Ref(TypeRef {
                role: Role::Args,
                def: Some(def),
            }) => {
                let Typed::Converted(converted) = &tool.args else {
                    return false;
                };
                match converted.defs.get(*def) {
                    Some(def) => ty = &def.ty,
                    None => return false,
                }
            }
            _ => return false,
        }
    }
    false
}
