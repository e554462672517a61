//! Identifiers from arbitrary names: valid, ASCII, collision-free, deterministic.

use std::collections::BTreeSet;

/// Names a generated function or namespace must not take: reserved words of strict-mode
/// modules, globals a binding would shadow, and names the generated modules use themselves.
const RESERVED: &[&str] = &[
    "await",
    "break",
    "case",
    "catch",
    "class",
    "const",
    "continue",
    "debugger",
    "default",
    "delete",
    "do",
    "else",
    "enum",
    "export",
    "extends",
    "false",
    "finally",
    "for",
    "function",
    "if",
    "implements",
    "import",
    "in",
    "instanceof",
    "interface",
    "let",
    "new",
    "null",
    "package",
    "private",
    "protected",
    "public",
    "return",
    "static",
    "super",
    "switch",
    "this",
    "throw",
    "true",
    "try",
    "typeof",
    "var",
    "void",
    "while",
    "with",
    "yield",
    "arguments",
    "eval",
    "undefined",
    "NaN",
    "Infinity",
    // TypeScript words that read as syntax or as a type where a value is meant.
    "any",
    "as",
    "declare",
    "keyof",
    "module",
    "namespace",
    "never",
    "readonly",
    "type",
    "unknown",
    // The bridge import, the index module's file name, and `then`: an export named `then`
    // would make the module namespace a thenable, so `await import(...)` would call the tool.
    "callTool",
    "index",
    "then",
];

fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == '$')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$')
}

/// Whether `name` can stand as an object type's key without quotes.
pub(crate) fn is_property_name(name: &str) -> bool {
    is_identifier(name)
}

/// The identifier `name` becomes before collisions are settled: itself when it already is a
/// valid, unreserved ASCII identifier; otherwise each other character becomes `_`, a leading
/// digit gets a `_` before it, a reserved word a `_` after it.
fn base(name: &str) -> String {
    let mut out: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '$' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if out.is_empty() || out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert(0, '_');
    }
    if RESERVED.contains(&out.as_str()) {
        out.push('_');
    }
    out
}

/// Identifiers for `names`, in their order, distinct from each other.
///
/// A name that is already its own identifier keeps it, whatever its position; the others take
/// their cleaned form, or the first free `<form>_2`, `<form>_3`, … in the order given.
pub(crate) fn identifiers<'a>(names: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let names: Vec<&str> = names.into_iter().collect();
    let mut taken = BTreeSet::new();
    let mut out: Vec<Option<String>> = vec![None; names.len()];
    // First pass: names that need no change claim themselves (the first of duplicates wins).
    for (slot, name) in out.iter_mut().zip(&names) {
        if base(name) == *name && taken.insert(name.to_string()) {
            *slot = Some(name.to_string());
        }
    }
    out.iter()
        .zip(&names)
        .map(|(slot, name)| {
            if let Some(ident) = slot {
                return ident.clone();
            }
            let base = base(name);
            let mut candidate = base.clone();
            let mut n = 2;
            while !taken.insert(candidate.clone()) {
                candidate = format!("{base}_{n}");
                n += 1;
            }
            candidate
        })
        .collect()
}
