//! Types as TypeScript type expressions, which both dialects use (the JSDoc dialect inside its
//! `{...}` braces), and docs as comment lines.

use std::fmt::Write as _;

use serde_json::Value;

use crate::{
    names::is_identifier,
    text::{Comment, push_string_literal},
    types::{Doc, Index, Object, Role, Ty, TypeRef},
};

/// The names of one tool's named types.
#[derive(Debug, Clone, Default)]
pub struct DeclNames {
    /// `<P>Args`, `<P>Result`.
    pub roots: [String; 2],
    /// The `$ref` targets' names, by role, by def index.
    pub defs: [Vec<String>; 2],
}

impl DeclNames {
    /// The name of a named type.
    pub fn get(&self, r: TypeRef) -> &str {
        let role = r.role as usize;
        match r.def {
            None => &self.roots[role],
            Some(def) => self.defs[role].get(def).map_or("unknown", String::as_str),
        }
    }

    /// The root name for a role.
    pub fn root(&self, role: Role) -> &str {
        &self.roots[role as usize]
    }
}

/// How types are written.
#[derive(Debug, Clone, Copy)]
pub struct Style<'a> {
    /// The named types.
    pub names: &'a DeclNames,
    /// `Array<T>` instead of `T[]`.
    pub generic_arrays: bool,
    /// Objects over several lines with a doc comment per property, at this indent; `None`
    /// keeps everything on one line.
    pub block: Option<usize>,
}

#[derive(Clone, Copy, PartialEq)]
enum Slot {
    Top,
    Union,
    Intersection,
    ArrayElement,
    OptionalElement,
}

impl Style<'_> {
    /// `ty` as a type expression.
    pub fn render(&self, ty: &Ty) -> String {
        let mut out = String::new();
        self.write(&mut out, ty, Slot::Top, self.block.unwrap_or(0));
        out
    }

    fn write(&self, out: &mut String, ty: &Ty, slot: Slot, indent: usize) {
        match ty {
            Ty::Unknown => out.push_str("unknown"),
            Ty::Never => out.push_str("never"),
            Ty::Null => out.push_str("null"),
            Ty::Undefined => out.push_str("undefined"),
            Ty::Boolean => out.push_str("boolean"),
            Ty::Number => out.push_str("number"),
            Ty::String => out.push_str("string"),
            Ty::Literal(value) => {
                let negative = value.as_f64().is_some_and(|n| n.is_sign_negative());
                let paren = negative && slot == Slot::ArrayElement;
                wrap(out, paren, |out| literal(out, value, 0));
            }
            Ty::Ref(r) => out.push_str(self.names.get(*r)),
            Ty::Array(item) => {
                if self.generic_arrays {
                    out.push_str("Array<");
                    self.write(out, item, Slot::Top, indent);
                    out.push('>');
                } else {
                    self.write(out, item, Slot::ArrayElement, indent);
                    out.push_str("[]");
                }
            }
            Ty::Tuple(tuple) => {
                out.push('[');
                for (i, item) in tuple.items.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    if i < tuple.required {
                        self.write(out, item, Slot::Top, indent);
                    } else {
                        self.write(out, item, Slot::OptionalElement, indent);
                        out.push('?');
                    }
                }
                if let Some(rest) = &tuple.rest {
                    if !tuple.items.is_empty() {
                        out.push_str(", ");
                    }
                    out.push_str("...");
                    self.write(out, &Ty::Array(rest.clone()), Slot::Top, indent);
                }
                out.push(']');
            }
            Ty::Object(object) => self.object(out, object, indent),
            Ty::Union(members) => {
                let paren = matches!(
                    slot,
                    Slot::Intersection | Slot::ArrayElement | Slot::OptionalElement
                );
                wrap(out, paren, |out| {
                    for (i, member) in members.iter().enumerate() {
                        if i > 0 {
                            out.push_str(" | ");
                        }
                        self.write(out, member, Slot::Union, indent);
                    }
                });
            }
            Ty::Intersection(members) => {
                let paren = matches!(slot, Slot::ArrayElement | Slot::OptionalElement);
                wrap(out, paren, |out| {
                    for (i, member) in members.iter().enumerate() {
                        if i > 0 {
                            out.push_str(" & ");
                        }
                        self.write(out, member, Slot::Intersection, indent);
                    }
                });
            }
        }
    }

    fn object(&self, out: &mut String, object: &Object, indent: usize) {
        if object.props.is_empty() && object.index.is_none() {
            out.push_str("{}");
            return;
        }
        let Some(_) = self.block else {
            out.push_str("{ ");
            for (i, prop) in object.props.iter().enumerate() {
                if i > 0 {
                    out.push_str("; ");
                }
                key(out, &prop.key);
                out.push_str(if prop.optional { "?: " } else { ": " });
                self.write(out, &prop.ty, Slot::Top, indent);
            }
            if let Some(index) = &object.index {
                if !object.props.is_empty() {
                    out.push_str("; ");
                }
                out.push_str("[key: string]: ");
                self.write(out, &index.ty, Slot::Top, indent);
            }
            out.push_str(" }");
            return;
        };
        let inner = indent + 2;
        let pad = " ".repeat(inner);
        out.push_str("{\n");
        for prop in &object.props {
            doc_comment(&prop.doc, true).write(out, inner);
            out.push_str(&pad);
            key(out, &prop.key);
            out.push_str(if prop.optional { "?: " } else { ": " });
            self.write(out, &prop.ty, Slot::Top, inner);
            out.push_str(";\n");
        }
        if let Some(index) = &object.index {
            let mut comment = Comment::new();
            index_doc(&mut comment, self, index, false);
            comment.write(out, inner);
            out.push_str(&pad);
            out.push_str("[key: string]: ");
            self.write(out, &index.ty, Slot::Top, inner);
            out.push_str(";\n");
        }
        out.push_str(&" ".repeat(indent));
        out.push('}');
    }
}

/// Describes an index signature: its patterns and its declared type, when it comes from
/// patterns, was widened over the named properties, or `always`.
pub fn index_doc(comment: &mut Comment, style: &Style<'_>, index: &Index, always: bool) {
    let inline = Style {
        block: None,
        ..*style
    };
    let declared = inline.render(&index.declared);
    if !index.patterns.is_empty() {
        let mut patterns = String::new();
        for (i, pattern) in index.patterns.iter().enumerate() {
            if i > 0 {
                patterns.push_str(", ");
            }
            push_string_literal(&mut patterns, pattern);
        }
        comment.line(&format!("Other keys (patterns {patterns}): {declared}."));
    } else if always || index.ty != index.declared {
        comment.line(&format!("Other keys: {declared}."));
    }
}

fn wrap(out: &mut String, paren: bool, body: impl FnOnce(&mut String)) {
    if paren {
        out.push('(');
    }
    body(out);
    if paren {
        out.push(')');
    }
}

/// A property key: bare when it is an identifier, else a string literal.
pub fn key(out: &mut String, key: &str) {
    if is_identifier(key) {
        out.push_str(key);
    } else {
        push_string_literal(out, key);
    }
}

/// A JSON value as a literal type; objects and arrays as object and tuple types.
fn literal(out: &mut String, value: &Value, depth: usize) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => {
            let _ = write!(out, "{n}");
        }
        Value::String(s) => push_string_literal(out, s),
        Value::Array(_) | Value::Object(_) if depth >= crate::schema::MAX_DEPTH => {
            out.push_str("unknown")
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                literal(out, item, depth + 1);
            }
            out.push(']');
        }
        Value::Object(map) => {
            if map.is_empty() {
                out.push_str("{}");
                return;
            }
            let mut entries: Vec<_> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            out.push_str("{ ");
            for (i, (k, item)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push_str("; ");
                }
                key(out, k);
                out.push_str(": ");
                literal(out, item, depth + 1);
            }
            out.push_str(" }");
        }
    }
}

/// A doc as comment lines: the title, the description, then each fact as a `@tag` line
/// (`tags`) or as one `keyword: value` line.
pub fn doc_comment(doc: &Doc, tags: bool) -> Comment {
    let mut comment = Comment::new();
    if let Some(title) = &doc.title {
        comment.text(title);
    }
    if let Some(description) = &doc.description {
        if doc.title.is_some() {
            comment.gap();
        }
        comment.text(description);
    }
    if tags {
        for (keyword, value) in &doc.facts {
            if value == "true" && matches!(*keyword, "uniqueItems" | "readOnly" | "writeOnly") {
                comment.line(&format!("@{keyword}"));
            } else {
                comment.line(&format!("@{keyword} {value}"));
            }
        }
        if doc.deprecated {
            comment.line("@deprecated");
        }
    } else if let Some(facts) = facts_inline(doc) {
        comment.line(&facts);
    }
    comment
}

/// The facts of a doc on one line, `format: uri; default: "x"`, or `None` when there are none.
pub fn facts_inline(doc: &Doc) -> Option<String> {
    let mut parts: Vec<String> = Vec::with_capacity(doc.facts.len() + 1);
    if doc.deprecated {
        parts.push("deprecated".to_owned());
    }
    for (keyword, value) in &doc.facts {
        if value == "true" && matches!(*keyword, "uniqueItems" | "readOnly" | "writeOnly") {
            parts.push((*keyword).to_owned());
        } else {
            parts.push(format!("{keyword}: {value}"));
        }
    }
    (!parts.is_empty()).then(|| parts.join("; "))
}
