//! What every dialect's output must satisfy, checked on every fixture. Shared by the dialect
//! crates' tests (`#[path]`-included), so both are held to the same rules.
//!
//! - every file parses with SWC (TypeScript for `.ts`, ES module syntax for `.js`);
//! - a tool module holds exactly: the bridge import, one exported async function that returns
//!   `callTool(<server>, <original tool name>, args)` (the literals checked by value), and, in
//!   TypeScript, exported interfaces and type aliases; nothing else is defined or runs;
//! - no two modules of a server export one name, and the index re-exports every tool;
//! - no raw control or bidi character anywhere, no description text outside a comment, and the
//!   marker `PWNED` (which hostile descriptions carry after their `*/`) never outside one;
//! - emitting twice, with shuffled object keys, or with the tools in another order gives the
//!   same files.

#![allow(clippy::unwrap_used, dead_code)]

use std::{
    collections::{BTreeMap, BTreeSet},
    path::{Path, PathBuf},
};

use serde_json::{Map, Value, json};
use swc_core::{
    common::{FileName, SourceMap, Spanned, comments::SingleThreadedComments, sync::Lrc},
    ecma::{
        ast::{
            Decl, Expr, ImportSpecifier, Module, ModuleDecl, ModuleExportName, ModuleItem, Pat,
            Stmt, Str,
        },
        parser::{EsSyntax, Parser, StringInput, Syntax, TsSyntax},
    },
};

/// One fixture: a request and what kind of input it is.
pub struct Fixture {
    /// The file's stem, which names its snapshots.
    pub name: String,
    /// The request (a bare tool list becomes a server request named after the file).
    pub request: Value,
    /// Whether it is one of the hand-written hostile fixtures.
    pub hostile: bool,
}

pub fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../codegen-common/fixtures")
}

/// Every `*.json` in the fixtures folder, sorted by name.
pub fn fixtures() -> Vec<Fixture> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(fixtures_dir())
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "json"))
        .collect();
    paths.sort();
    paths
        .into_iter()
        .map(|path| {
            let name = path.file_stem().unwrap().to_str().unwrap().to_owned();
            let value: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap())
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let request = match value {
                Value::Array(tools) => json!({
                    "kind": "server", "server": name, "folder": name, "tools": tools
                }),
                other => other,
            };
            Fixture {
                hostile: name.starts_with("hostile"),
                name,
                request,
            }
        })
        .collect()
}

/// A parsed module and its source with every comment blanked out.
pub struct Parsed {
    pub module: Module,
    pub code: String,
}

/// Parses a module as TypeScript or as JavaScript, refusing recoverable errors too.
pub fn parse(source: &str, typescript: bool) -> Result<Parsed, String> {
    let map: Lrc<SourceMap> = Lrc::default();
    let file = map.new_source_file(Lrc::new(FileName::Anon), source.to_owned());
    let comments = SingleThreadedComments::default();
    let syntax = if typescript {
        Syntax::Typescript(TsSyntax::default())
    } else {
        Syntax::Es(EsSyntax::default())
    };
    let mut parser = Parser::new(syntax, StringInput::from(&*file), Some(&comments));
    let module = parser
        .parse_module()
        .map_err(|e| format!("{:?}: {:?}", e.span(), e.kind()))?;
    let errors = parser.take_errors();
    if let Some(error) = errors.first() {
        return Err(format!("{:?}: {:?}", error.span(), error.kind()));
    }
    let mut code = source.as_bytes().to_vec();
    let (leading, trailing) = comments.take_all();
    let start = file.start_pos.0 as usize;
    for map in [leading, trailing] {
        for comment in map.borrow().values().flatten() {
            let (lo, hi) = (
                comment.span.lo.0 as usize - start,
                comment.span.hi.0 as usize - start,
            );
            code[lo..hi].fill(b' ');
        }
    }
    let code = String::from_utf8_lossy(&code).into_owned();
    Ok(Parsed { module, code })
}

fn str_value(s: &Str) -> String {
    s.value
        .as_wtf8()
        .as_str()
        .expect("string literal is valid UTF-8")
        .to_owned()
}

/// Generates with `generate` and checks everything above; returns the response.
pub fn check_fixture(
    fixture: &Fixture,
    typescript: bool,
    generate: &dyn Fn(&str) -> Result<String, String>,
) -> Value {
    let request = fixture.request.to_string();
    let output = generate(&request).unwrap_or_else(|e| panic!("{}: {e}", fixture.name));
    assert_eq!(
        output,
        generate(&request).unwrap(),
        "{}: emitting twice differs",
        fixture.name
    );
    let response: Value = serde_json::from_str(&output).unwrap();
    check_response(fixture, &response, typescript);

    // The same request with every object's keys in another order. This can only catch
    // anything when parsed objects keep their key order (serde_json `preserve_order`, on in the
    // workspace).
    for seed in 1..=3u64 {
        let shuffled = shuffled_json(&fixture.request, seed);
        assert_ne!(
            shuffled, request,
            "{}: shuffling changed nothing",
            fixture.name
        );
        let other = generate(&shuffled).unwrap();
        if other != output {
            let a: Value = serde_json::from_str(&output).unwrap();
            let b: Value = serde_json::from_str(&other).unwrap();
            for (a, b) in a["files"]
                .as_array()
                .unwrap()
                .iter()
                .zip(b["files"].as_array().unwrap())
            {
                assert_eq!(
                    a, b,
                    "{}: shuffling object keys (seed {seed}) changed a file",
                    fixture.name
                );
            }
            panic!(
                "{}: shuffling object keys (seed {seed}) changed the output",
                fixture.name
            );
        }
    }
    // The same tools in another order: the same files (unless a name is listed twice, when
    // the first listing wins).
    if let Some(tools) = fixture.request["tools"].as_array() {
        let mut names: Vec<&Value> = tools.iter().map(|t| &t["name"]).collect();
        names.sort_by_key(|n| n.to_string());
        names.dedup();
        if tools.len() > 1 && names.len() == tools.len() {
            let mut reordered = fixture.request.clone();
            reordered["tools"].as_array_mut().unwrap().reverse();
            let other: Value =
                serde_json::from_str(&generate(&reordered.to_string()).unwrap()).unwrap();
            for (a, b) in response["files"]
                .as_array()
                .unwrap()
                .iter()
                .zip(other["files"].as_array().unwrap())
            {
                assert_eq!(a, b, "{}: tool order changed a file", fixture.name);
            }
            assert_eq!(
                other["files"].as_array().unwrap().len(),
                response["files"].as_array().unwrap().len()
            );
        }
    }
    response
}

/// Whether parsed JSON objects keep their key order (serde_json's `preserve_order`).
pub fn keys_keep_their_order() -> bool {
    let probe: Value = serde_json::from_str(r#"{"b": 1, "a": 2}"#).unwrap();
    probe.as_object().unwrap().keys().next().map(String::as_str) == Some("b")
}

/// Checks one response against its request.
pub fn check_response(fixture: &Fixture, response: &Value, typescript: bool) {
    let name = &fixture.name;
    let ext = if typescript { "ts" } else { "js" };
    let files: BTreeMap<&str, &str> = response["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["path"].as_str().unwrap(), f["content"].as_str().unwrap()))
        .collect();
    let paths: Vec<&str> = response["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap())
        .collect();
    let mut sorted = paths.clone();
    sorted.sort_unstable();
    assert_eq!(paths, sorted, "{name}: files are not sorted by path");
    assert_eq!(files.len(), paths.len(), "{name}: two files share a path");

    let prose = prose(&fixture.request);
    let mut parsed = BTreeMap::new();
    for (path, content) in &files {
        assert!(
            path.ends_with(&format!(".{ext}")),
            "{name}: {path} has the wrong extension"
        );
        for c in content.chars() {
            assert!(
                c == '\n' || !(c.is_control() || is_invisible(c)),
                "{name}: {path} holds the raw character U+{:04X}",
                c as u32
            );
        }
        let module = parse(content, typescript)
            .unwrap_or_else(|e| panic!("{name}: {path} does not parse: {e}\n{content}"));
        assert!(
            content.len() <= 1 << 20,
            "{name}: {path} is over 1 MiB, which the host refuses"
        );
        check_host_limits(&module.code).unwrap_or_else(|e| panic!("{name}: {path}: {e}"));
        assert!(
            !module.code.contains("PWNED"),
            "{name}: {path}: PWNED outside a comment:\n{}",
            module.code
        );
        for text in &prose {
            assert!(
                !module.code.contains(text.as_str()),
                "{name}: {path}: description text {text:?} outside a comment"
            );
        }
        parsed.insert(*path, module);
    }

    if fixture.request["kind"] == "root" {
        check_root(fixture, &files, &parsed, ext);
        return;
    }
    let server = fixture.request["server"].as_str().unwrap();
    let folder = fixture.request["folder"].as_str().unwrap();
    let entries = response["tools"].as_array().unwrap();
    let mut exported: BTreeMap<String, String> = BTreeMap::new();
    let mut identifiers = BTreeSet::new();
    for entry in entries {
        let tool = entry["name"].as_str().unwrap();
        let identifier = entry["identifier"].as_str().unwrap();
        let path = entry["path"].as_str().unwrap();
        assert_eq!(
            path,
            format!("{folder}/{identifier}.{ext}"),
            "{name}: path of {tool:?}"
        );
        assert!(
            identifiers.insert(identifier.to_owned()),
            "{name}: identifier {identifier} twice"
        );
        let signature = entry["signature"].as_str().unwrap();
        assert!(
            signature.chars().count() <= 200,
            "{name}: signature too long: {signature}"
        );
        assert!(
            signature.starts_with(&format!("{identifier}(args")),
            "{name}: {signature}"
        );
        assert!(
            !signature.chars().any(|c| c.is_control() || is_invisible(c)),
            "{name}: {signature:?}"
        );
        let module = parsed
            .get(path)
            .unwrap_or_else(|| panic!("{name}: no file {path}"));
        let names = check_tool_module(&module.module, typescript, server, tool, identifier)
            .unwrap_or_else(|e| panic!("{name}: {path}: {e}\n{}", files[path]));
        for export in names {
            if let Some(other) = exported.insert(export.clone(), path.to_owned()) {
                panic!("{name}: {export} is exported by both {other} and {path}");
            }
        }
        if typescript {
            check_args_keys(fixture, tool, &module.module, entry);
        }
    }
    // Every tool the request lists by a unique string name has an entry.
    let mut listed: Vec<&str> = fixture.request["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    listed.sort_unstable();
    listed.dedup();
    assert_eq!(listed.len(), entries.len(), "{name}: tools went missing");

    let index = &parsed[format!("{folder}/index.{ext}").as_str()].module;
    let mut reexports = Vec::new();
    for item in &index.body {
        match item {
            ModuleItem::ModuleDecl(ModuleDecl::ExportAll(all)) if !all.type_only => {
                reexports.push(str_value(&all.src))
            }
            ModuleItem::ModuleDecl(ModuleDecl::ExportNamed(named))
                if named.specifiers.is_empty() && named.src.is_none() && identifiers.is_empty() => {
            }
            other => panic!("{name}: unexpected item in the index: {other:?}"),
        }
    }
    let expected: Vec<String> = identifiers.iter().map(|i| format!("./{i}")).collect();
    assert_eq!(
        reexports, expected,
        "{name}: the index does not re-export each tool once, sorted"
    );
}

fn check_root(
    fixture: &Fixture,
    files: &BTreeMap<&str, &str>,
    parsed: &BTreeMap<&str, Parsed>,
    ext: &str,
) {
    let name = &fixture.name;
    assert_eq!(files.len(), 1, "{name}: the root has one file");
    let module = &parsed[format!("index.{ext}").as_str()].module;
    let mut folders = BTreeSet::new();
    let mut namespaces = BTreeSet::new();
    for item in &module.body {
        let ModuleItem::ModuleDecl(ModuleDecl::ExportNamed(named)) = item else {
            panic!("{name}: unexpected item in the root index: {item:?}");
        };
        let [swc_core::ecma::ast::ExportSpecifier::Namespace(ns)] = named.specifiers.as_slice()
        else {
            panic!("{name}: not `export * as`: {item:?}");
        };
        let ModuleExportName::Ident(ident) = &ns.name else {
            panic!("{name}: namespace not an identifier")
        };
        assert!(
            namespaces.insert(ident.sym.to_string()),
            "{name}: namespace {} twice",
            ident.sym
        );
        folders.insert(str_value(named.src.as_ref().unwrap()));
    }
    let expected: BTreeSet<String> = fixture.request["servers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| format!("./{}/index", s["folder"].as_str().unwrap()))
        .collect();
    assert_eq!(
        folders, expected,
        "{name}: the root does not export each server"
    );
}

/// What the host's transpiler accepts (core's `sandbox::transpile::check_shape`) besides the
/// 1 MiB limit: brackets nested at most 256 deep, at most 4,096 operators in one statement.
/// `code` has its comments blanked; string literals do not count either.
pub fn check_host_limits(code: &str) -> Result<(), String> {
    let (mut depth, mut chain, mut in_string, mut escaped) = (0usize, 0usize, false, false);
    for c in code.chars() {
        if in_string {
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => in_string = true,
            '(' | '[' | '{' => {
                depth += 1;
                if c == '{' {
                    chain = 0;
                }
                if depth > 256 {
                    return Err("brackets nested over 256 deep".into());
                }
            }
            ')' | ']' => depth = depth.saturating_sub(1),
            '}' => {
                depth = depth.saturating_sub(1);
                chain = 0;
            }
            ';' => chain = 0,
            '+' | '-' | '*' | '/' | '%' | '&' | '|' | '^' | '!' | '~' | '?' | ':' | '=' | '<'
            | '>' | '.' => {
                chain += 1;
                if chain > 4096 {
                    return Err("a statement chains over 4,096 operators".into());
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// Checks a tool module's shape; returns the names it exports.
pub fn check_tool_module(
    module: &Module,
    typescript: bool,
    server: &str,
    tool: &str,
    identifier: &str,
) -> Result<Vec<String>, String> {
    let mut items = module.body.iter();
    match items.next() {
        Some(ModuleItem::ModuleDecl(ModuleDecl::Import(import)))
            if str_value(&import.src) == "runbyte:bridge"
                && !import.type_only
                && matches!(import.specifiers.as_slice(),
                    [ImportSpecifier::Named(s)] if s.local.sym == "callTool" && s.imported.is_none()) =>
            {}
        other => {
            return Err(format!(
                "the first item is not the bridge import: {other:?}"
            ));
        }
    }
    let mut names = Vec::new();
    let mut functions = 0;
    for item in items {
        let ModuleItem::ModuleDecl(ModuleDecl::ExportDecl(export)) = item else {
            return Err(format!("unexpected top-level item: {item:?}"));
        };
        match &export.decl {
            Decl::Fn(function) => {
                functions += 1;
                if function.ident.sym != identifier {
                    return Err(format!(
                        "function {} is not {identifier}",
                        function.ident.sym
                    ));
                }
                check_function(&function.function, server, tool)?;
                names.push(identifier.to_owned());
            }
            Decl::TsInterface(decl) if typescript => names.push(decl.id.sym.to_string()),
            Decl::TsTypeAlias(decl) if typescript => names.push(decl.id.sym.to_string()),
            other => return Err(format!("unexpected declaration: {other:?}")),
        }
    }
    if functions != 1 {
        return Err(format!("{functions} functions instead of one"));
    }
    Ok(names)
}

/// The function is `async (args | args = {}) => { return (await callTool(S, T, args)) [as R]; }`.
fn check_function(
    function: &swc_core::ecma::ast::Function,
    server: &str,
    tool: &str,
) -> Result<(), String> {
    if !function.is_async || function.is_generator || !function.decorators.is_empty() {
        return Err("the function is not a plain async function".into());
    }
    let [param] = function.params.as_slice() else {
        return Err("not exactly one parameter".into());
    };
    let is_args = |pat: &Pat| matches!(pat, Pat::Ident(id) if id.id.sym == "args");
    match &param.pat {
        pat if is_args(pat) => {}
        Pat::Assign(assign)
            if is_args(&assign.left)
                && matches!(&*assign.right, Expr::Object(o) if o.props.is_empty()) => {}
        other => return Err(format!("unexpected parameter {other:?}")),
    }
    let body = function.body.as_ref().ok_or("no body")?;
    let [Stmt::Return(ret)] = body.stmts.as_slice() else {
        return Err(format!("the body is not one return: {:?}", body.stmts));
    };
    let mut expr = ret.arg.as_deref().ok_or("empty return")?;
    loop {
        expr = match expr {
            Expr::Paren(inner) => &inner.expr,
            Expr::TsAs(inner) => &inner.expr,
            _ => break,
        };
    }
    let Expr::Await(awaited) = expr else {
        return Err(format!("not an await: {expr:?}"));
    };
    let Expr::Call(call) = &*awaited.arg else {
        return Err("not a call".into());
    };
    let callee = call.callee.as_expr().ok_or("bad callee")?;
    if !matches!(&**callee, Expr::Ident(id) if id.sym == "callTool") {
        return Err(format!("calls {callee:?}"));
    }
    let [s, t, a] = call.args.as_slice() else {
        return Err("not three arguments".into());
    };
    if s.spread.is_some() || t.spread.is_some() || a.spread.is_some() {
        return Err("spread argument".into());
    }
    let literal = |e: &Expr| match e {
        Expr::Lit(swc_core::ecma::ast::Lit::Str(s)) => Some(str_value(s)),
        _ => None,
    };
    if literal(&s.expr).as_deref() != Some(server) {
        return Err(format!("server literal {:?} is not {server:?}", s.expr));
    }
    if literal(&t.expr).as_deref() != Some(tool) {
        return Err(format!("tool literal {:?} is not {tool:?}", t.expr));
    }
    if !matches!(&*a.expr, Expr::Ident(id) if id.sym == "args") {
        return Err("the third argument is not args".into());
    }
    Ok(())
}

/// In TypeScript, the Args interface's keys, read back from the AST, are the schema's
/// property names (and required names), however odd.
fn check_args_keys(fixture: &Fixture, tool: &str, module: &Module, entry: &Value) {
    let spec = fixture.request["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == tool)
        .unwrap();
    let schema = &spec["inputSchema"];
    if schema.get("type") != Some(&json!("object")) || schema.get("$ref").is_some() {
        return;
    }
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        return;
    };
    let mut expected: BTreeSet<String> = properties.keys().cloned().collect();
    if let Some(required) = schema["required"].as_array() {
        expected.extend(required.iter().filter_map(Value::as_str).map(str::to_owned));
    }
    // Args is the first type declared; only an interface has keys to compare.
    let first = module.body.iter().find_map(|item| match item {
        ModuleItem::ModuleDecl(ModuleDecl::ExportDecl(export)) if !export.decl.is_fn_decl() => {
            Some(&export.decl)
        }
        _ => None,
    });
    let Some(Decl::TsInterface(decl)) = first else {
        return;
    };
    let mut keys = BTreeSet::new();
    for member in &decl.body.body {
        if let swc_core::ecma::ast::TsTypeElement::TsPropertySignature(p) = member {
            keys.insert(match &*p.key {
                Expr::Ident(id) => id.sym.to_string(),
                Expr::Lit(swc_core::ecma::ast::Lit::Str(s)) => str_value(s),
                other => panic!("{}: odd key {other:?}", fixture.name),
            });
        }
    }
    assert_eq!(
        keys, expected,
        "{}: {tool:?} ({}): the Args keys read back differ",
        fixture.name, entry["identifier"]
    );
}

/// Characters the generated files must never hold raw (besides controls).
pub fn is_invisible(c: char) -> bool {
    matches!(c,
        '\u{ad}' | '\u{61c}' | '\u{180e}' | '\u{200b}'..='\u{200f}' | '\u{2028}' | '\u{2029}'
        | '\u{202a}'..='\u{202e}' | '\u{2060}'..='\u{206f}' | '\u{feff}' | '\u{e0000}'..='\u{e007f}')
}

/// Descriptions and titles in a request (tools' and schemas'), at least 12 characters, cut at
/// their first line: text that must only ever appear inside comments.
fn prose(request: &Value) -> BTreeSet<String> {
    fn walk(value: &Value, out: &mut BTreeSet<String>) {
        match value {
            Value::Object(map) => {
                for (key, item) in map {
                    if matches!(key.as_str(), "description" | "title")
                        && let Some(text) = item.as_str()
                    {
                        let first = text.lines().next().unwrap_or("").trim();
                        if first.chars().count() >= 12 {
                            out.insert(first.to_owned());
                        }
                    }
                    walk(item, out);
                }
            }
            Value::Array(items) => items.iter().for_each(|item| walk(item, out)),
            _ => {}
        }
    }
    let mut out = BTreeSet::new();
    walk(request, &mut out);
    out
}

/// `value` as JSON text with every object's keys in a pseudo-random order from `seed`.
pub fn shuffled_json(value: &Value, seed: u64) -> String {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    fn write(value: &Value, out: &mut String, next: &mut dyn FnMut() -> u64) {
        match value {
            Value::Object(map) => {
                let mut entries: Vec<(&String, &Value)> = map.iter().collect();
                for i in (1..entries.len()).rev() {
                    entries.swap(i, (next() % (i as u64 + 1)) as usize);
                }
                out.push('{');
                for (i, (key, item)) in entries.into_iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(&Value::String(key.clone()).to_string());
                    out.push(':');
                    write(item, out, next);
                }
                out.push('}');
            }
            Value::Array(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    write(item, out, next);
                }
                out.push(']');
            }
            other => out.push_str(&other.to_string()),
        }
    }
    let mut out = String::new();
    write(value, &mut out, &mut next);
    out
}

/// A response as one readable text for a snapshot.
pub fn snapshot_text(response: &Value) -> String {
    let mut out = String::new();
    out.push_str("== tools ==\n");
    for entry in response["tools"].as_array().unwrap() {
        out.push_str(&format!(
            "{} -> {} ({})\n    {}\n",
            ascii(entry["name"].as_str().unwrap()),
            entry["identifier"].as_str().unwrap(),
            entry["path"].as_str().unwrap(),
            entry["signature"].as_str().unwrap()
        ));
    }
    out.push_str("== warnings ==\n");
    for warning in response["warnings"].as_array().unwrap() {
        out.push_str(warning.as_str().unwrap());
        out.push('\n');
    }
    for file in response["files"].as_array().unwrap() {
        out.push_str(&format!("== {} ==\n", file["path"].as_str().unwrap()));
        out.push_str(file["content"].as_str().unwrap());
    }
    out
}

/// Strips a TypeScript module's types the way the host does (SWC's resolver and `strip`).
pub fn strip_types(source: &str) -> String {
    use swc_core::{
        common::{GLOBALS, Globals, Mark},
        ecma::{
            ast::Program,
            codegen::to_code,
            transforms::{base::resolver, typescript::strip},
        },
    };
    GLOBALS.set(&Globals::new(), || {
        let module = parse(source, true).unwrap().module;
        let (unresolved, top_level) = (Mark::new(), Mark::new());
        let program = Program::Module(module)
            .apply(resolver(unresolved, top_level, true))
            .apply(strip(unresolved, top_level));
        to_code(&program)
    })
}

const NODE_HOOKS: &str = r#"
export async function resolve(specifier, context, next) {
  if (specifier === "runbyte:bridge") {
    return { url: new URL("./bridge.js", import.meta.url).href, shortCircuit: true };
  }
  if (specifier.startsWith(".") && !specifier.endsWith(".js")) {
    return next(specifier + ".js", context);
  }
  return next(specifier, context);
}
"#;

const NODE_BRIDGE: &str = r#"
export async function callTool(server, tool, args) {
  globalThis.__calls.push([server, tool, args]);
  return { echoed: tool };
}
"#;

const NODE_MAIN: &str = r#"
const before = new Set(Object.getOwnPropertyNames(globalThis));
globalThis.__calls = [];
const root = await import("./servers/index.js");
// A server's own index, imported on its own, must not be a thenable.
const direct = await import(`./servers/${process.argv[2]}/index.js`);
const out = {
  sameModule: Object.keys(direct).join() === Object.keys(Object.values(root)[0]).join(),
  importCalls: globalThis.__calls.length,
  leaked: Object.getOwnPropertyNames(globalThis).filter((k) => !before.has(k) && k !== "__calls"),
  exports: [],
};
for (const [namespace, module] of Object.entries(root)) {
  for (const [name, value] of Object.entries(module)) {
    if (typeof value !== "function") {
      out.exports.push({ namespace, name, type: typeof value });
      continue;
    }
    globalThis.__calls = [];
    const result = await value({ probe: 1 });
    out.exports.push({ namespace, name, calls: globalThis.__calls, result });
  }
}
process.stdout.write(JSON.stringify(out));
"#;

/// Runs a server fixture's modules in Node (types stripped by SWC for TypeScript) under a root
/// index, with a bridge that records calls: importing runs nothing, and every export is a
/// function that calls its own tool with the server's and the tool's original names. Returns
/// `false` when there is no `node` to run.
pub fn runs_in_node(
    fixture: &Fixture,
    typescript: bool,
    generate: &dyn Fn(&str) -> Result<String, String>,
) -> bool {
    use std::process::Command;
    let Ok(version) = Command::new("node").arg("--version").output() else {
        return false;
    };
    assert!(version.status.success());
    let server = fixture.request["server"].as_str().unwrap();
    let folder = fixture.request["folder"].as_str().unwrap();
    let response: Value =
        serde_json::from_str(&generate(&fixture.request.to_string()).unwrap()).unwrap();
    let root_request = json!({"kind": "root", "servers": [{"name": server, "folder": folder}]});
    let root: Value = serde_json::from_str(&generate(&root_request.to_string()).unwrap()).unwrap();

    let dir = std::env::temp_dir().join(format!(
        "runbyte-codegen-{}-{}-{}",
        std::process::id(),
        if typescript { "ts" } else { "js" },
        fixture.name
    ));
    let _ = std::fs::remove_dir_all(&dir);
    for file in response["files"]
        .as_array()
        .unwrap()
        .iter()
        .chain(root["files"].as_array().unwrap())
    {
        let path = file["path"].as_str().unwrap();
        let content = file["content"].as_str().unwrap();
        let (path, content) = match path.strip_suffix(".ts") {
            Some(stem) => (format!("{stem}.js"), strip_types(content)),
            None => (path.to_owned(), content.to_owned()),
        };
        let target = dir.join("servers").join(path);
        std::fs::create_dir_all(target.parent().unwrap()).unwrap();
        std::fs::write(target, content).unwrap();
    }
    std::fs::write(dir.join("package.json"), r#"{"type": "module"}"#).unwrap();
    std::fs::write(dir.join("hooks.js"), NODE_HOOKS).unwrap();
    std::fs::write(
        dir.join("register.js"),
        "import { register } from \"node:module\";\nregister(\"./hooks.js\", import.meta.url);\n",
    )
    .unwrap();
    std::fs::write(dir.join("bridge.js"), NODE_BRIDGE).unwrap();
    std::fs::write(dir.join("main.js"), NODE_MAIN).unwrap();
    let output = Command::new("node")
        .args(["--import", "./register.js", "main.js", folder])
        .current_dir(&dir)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}: node failed ({}): {}",
        fixture.name,
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    let out: Value = serde_json::from_slice(&output.stdout).unwrap();
    let _ = std::fs::remove_dir_all(&dir);

    let name = &fixture.name;
    assert_eq!(
        out["sameModule"], true,
        "{name}: the server's index differs from its namespace"
    );
    assert_eq!(out["importCalls"], 0, "{name}: importing called a tool");
    assert_eq!(out["leaked"], json!([]), "{name}: importing set globals");
    let namespace = runbyte_codegen_common::names::assign(&[server]).remove(0);
    let entries = response["tools"].as_array().unwrap();
    let exports = out["exports"].as_array().unwrap();
    assert_eq!(
        exports.len(),
        entries.len(),
        "{name}: not one export per tool: {exports:?}"
    );
    for entry in entries {
        let identifier = entry["identifier"].as_str().unwrap();
        let export = exports
            .iter()
            .find(|e| e["name"] == identifier)
            .unwrap_or_else(|| panic!("{name}: {identifier} is not exported"));
        assert_eq!(
            export["namespace"],
            namespace.as_str(),
            "{name}: {identifier}"
        );
        assert_eq!(
            export["calls"],
            json!([[server, entry["name"], {"probe": 1}]]),
            "{name}: {identifier} did not call its tool once with its original name"
        );
        assert_eq!(
            export["result"],
            json!({"echoed": entry["name"]}),
            "{name}: {identifier}"
        );
    }
    true
}

/// A fixture, what a mutation does, and how it changes a module's source.
type Mutation<'a> = (&'a Fixture, &'a str, &'a dyn Fn(&str) -> String);

/// Breaks a good response in ways a regression could, and requires [`check_response`] to
/// notice each: the test suite must be able to fail.
pub fn mutations_are_caught(typescript: bool, generate: &dyn Fn(&str) -> Result<String, String>) {
    let all = fixtures();
    let text = all.iter().find(|f| f.name == "hostile-text").unwrap();
    let names = all.iter().find(|f| f.name == "hostile-names").unwrap();
    let mutations: [Mutation<'_>; 7] = [
        (text, "a comment escape undone", &|c| {
            c.replace("*\\/", "*/")
        }),
        (text, "a bidi escape undone in a comment", &|c| {
            c.replace("\\u202e", "\u{202e}")
        }),
        (names, "a line separator escape undone in a literal", &|c| {
            c.replace("\\u2028", "\u{2028}")
        }),
        (names, "an extra binding", &|c| {
            format!("{c}export const PWNED = 1;\n")
        }),
        (names, "an extra statement", &|c| {
            c.replace("\n}\n", "\n}\nglobalThis.x = 1;\n")
        }),
        (
            names,
            "the original name replaced by the identifier",
            &|c| c.replace("\"list-repos\", args", "\"list_repos\", args"),
        ),
        (text, "a description outside its comment", &|c| {
            c.replace("\n * cr\n * PWNED\n", "\n */\nPWNED;\n/**\n")
        }),
    ];
    for (fixture, what, mutate) in mutations {
        let mut response: Value =
            serde_json::from_str(&generate(&fixture.request.to_string()).unwrap()).unwrap();
        let mut changed = false;
        for file in response["files"].as_array_mut().unwrap() {
            let content = file["content"].as_str().unwrap();
            if content.starts_with("import") {
                let mutated = mutate(content);
                changed |= mutated != content;
                file["content"] = Value::String(mutated);
            }
        }
        assert!(changed, "{what}: the mutation found nothing to change");
        let caught = std::panic::catch_unwind(|| check_response(fixture, &response, typescript));
        assert!(caught.is_err(), "{what}: the invariants did not notice");
    }
}

/// A name as an ASCII, JSON-style quoted string, so snapshots hold no bidi or control character.
fn ascii(text: &str) -> String {
    let mut out = String::from("\"");
    for c in text.chars() {
        match c {
            '"' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            ' '..='~' => out.push(c),
            c => out.push_str(&format!("\\u{{{:04x}}}", c as u32)),
        }
    }
    out.push('"');
    out
}

/// `n` realistic tools for one server, made from the recorded fixtures with numbered names.
pub fn synthetic_server(n: usize) -> String {
    let mut pool: Vec<Value> = Vec::new();
    for fixture in fixtures()
        .into_iter()
        .filter(|f| !f.hostile && f.request["kind"] == "server")
    {
        pool.extend(fixture.request["tools"].as_array().unwrap().iter().cloned());
    }
    let tools: Vec<Value> = (0..n)
        .map(|i| {
            let mut tool = pool[i % pool.len()].clone();
            let name = format!("{}-{i}", tool["name"].as_str().unwrap());
            tool["name"] = Value::String(name);
            tool
        })
        .collect();
    let mut request = Map::new();
    request.insert("kind".into(), json!("server"));
    request.insert("server".into(), json!("bench"));
    request.insert("folder".into(), json!("bench"));
    request.insert("tools".into(), Value::Array(tools));
    Value::Object(request).to_string()
}
