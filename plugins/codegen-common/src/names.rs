//! Identifiers from arbitrary names: valid, ASCII, collision-free and deterministic.

use std::collections::HashSet;

/// Words that cannot name a function or a binding in a strict-mode ES module, plus the
/// TypeScript words that would read as syntax or as a type where a value is meant, plus the
/// module-level names the generated files use themselves.
const RESERVED: &[&str] = &[
    // ECMAScript reserved words and literals.
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
    "import",
    "in",
    "instanceof",
    "new",
    "null",
    "return",
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
    // Strict mode and module code.
    "await",
    "yield",
    "let",
    "static",
    "implements",
    "package",
    "protected",
    "interface",
    "private",
    "public",
    "arguments",
    "eval",
    // Global values a binding would shadow.
    "undefined",
    "NaN",
    "Infinity",
    // TypeScript: type keywords and type-level operators.
    "any",
    "unknown",
    "never",
    "string",
    "number",
    "boolean",
    "symbol",
    "object",
    "bigint",
    "type",
    "namespace",
    "module",
    "declare",
    "abstract",
    "global",
    "infer",
    "keyof",
    "readonly",
    "unique",
    "is",
    "asserts",
    "as",
    "satisfies",
    // Names the generated modules use: the bridge import and the index module's file.
    "callTool",
    "index",
    // An export named `then` makes a module namespace a thenable: `await import()` of the
    // server's index would call the tool instead of resolving.
    "then",
];

/// Type names the generated code refers to, which a generated type must never shadow.
const RESERVED_TYPES: &[&str] = &[
    "Promise",
    "Record",
    "Array",
    "Object",
    "String",
    "Number",
    "Boolean",
    "Symbol",
    "BigInt",
    "Partial",
    "Required",
    "Readonly",
    "Pick",
    "Omit",
    "Exclude",
    "Extract",
    "NonNullable",
    "Awaited",
];

/// Whether `name` is a plain ASCII identifier (`[A-Za-z_$][A-Za-z0-9_$]*`).
pub fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == '$')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$')
}

/// Whether `name` is reserved for a binding: a reserved word of strict-mode modules, a
/// TypeScript keyword, or a name the generated modules use themselves (`callTool`, `index`,
/// `then`).
pub fn is_reserved(name: &str) -> bool {
    RESERVED.contains(&name)
}

/// The identifier a name becomes before collisions are settled: unchanged when it already is a
/// valid, unreserved identifier; otherwise every other character becomes `_`, a leading digit
/// gets a `_` before it and a reserved word a `_` after it.
pub fn clean(name: &str) -> String {
    let mut out: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '$' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if out.is_empty() {
        out.push('_');
    }
    if out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert(0, '_');
    }
    if is_reserved(&out) {
        out.push('_');
    }
    out
}

/// Identifiers for `names` (in their order; the names must be distinct), unique among
/// themselves. Names that are already valid identifiers keep them first; the rest take their
/// cleaned form in sorted order of the originals, a taken one getting `_2`, `_3`... so the
/// result does not depend on the order the names came in.
pub fn assign(names: &[&str]) -> Vec<String> {
    let mut taken: HashSet<String> = HashSet::new();
    let mut out: Vec<Option<String>> = vec![None; names.len()];
    for (i, name) in names.iter().enumerate() {
        if is_identifier(name) && !is_reserved(name) {
            taken.insert((*name).to_owned());
            out[i] = Some((*name).to_owned());
        }
    }
    let mut rest: Vec<usize> = (0..names.len()).filter(|&i| out[i].is_none()).collect();
    rest.sort_by(|&a, &b| names[a].cmp(names[b]));
    for i in rest {
        let base = clean(names[i]);
        let chosen = unique(&base, |candidate| !taken.contains(candidate));
        taken.insert(chosen.clone());
        out[i] = Some(chosen);
    }
    out.into_iter().map(Option::unwrap_or_default).collect()
}

/// `base` if `free` says so, else the first free `base_2`, `base_3`, ...
pub fn unique(base: &str, mut free: impl FnMut(&str) -> bool) -> String {
    if free(base) {
        return base.to_owned();
    }
    (2u64..)
        .map(|n| format!("{base}_{n}"))
        .find(|candidate| free(candidate))
        .unwrap_or_else(|| base.to_owned())
}

/// The PascalCase form of a name, for type names: split at anything that is not an ASCII letter
/// or digit, each part's first letter upper-cased, the rest kept. Never empty, never starting
/// with a digit.
pub fn pascal(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for part in name.split(|c: char| !c.is_ascii_alphanumeric()) {
        let mut chars = part.chars();
        if let Some(first) = chars.next() {
            out.push(first.to_ascii_uppercase());
            out.extend(chars);
        }
    }
    if out.is_empty() {
        out.push_str("Type");
    }
    if out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert(0, '_');
    }
    out
}

/// The set of type names already in use across one server's modules, which hands out new ones.
#[derive(Debug)]
pub struct TypeNames {
    taken: HashSet<String>,
}

impl TypeNames {
    /// Starts with the function identifiers and the reserved names taken.
    pub fn new<'a>(identifiers: impl IntoIterator<Item = &'a str>) -> Self {
        let mut taken: HashSet<String> = identifiers.into_iter().map(str::to_owned).collect();
        taken.extend(
            RESERVED
                .iter()
                .chain(RESERVED_TYPES)
                .map(|s| (*s).to_owned()),
        );
        Self { taken }
    }

    /// A prefix `P` (from `base`, `base_2`, ...) for which every `P + suffix` is free; takes them.
    pub fn prefix(&mut self, base: &str, suffixes: &[&str]) -> String {
        let taken = &self.taken;
        let prefix = unique(base, |p| {
            suffixes
                .iter()
                .all(|suffix| !taken.contains(&format!("{p}{suffix}")))
        });
        for suffix in suffixes {
            self.taken.insert(format!("{prefix}{suffix}"));
        }
        prefix
    }

    /// `base` or the first free `base_2`, `base_3`, ...; takes it.
    pub fn take(&mut self, base: &str) -> String {
        let name = unique(base, |candidate| !self.taken.contains(candidate));
        self.taken.insert(name.clone());
        name
    }
}
