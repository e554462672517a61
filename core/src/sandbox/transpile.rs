//! TypeScript to JavaScript with SWC, keeping a map from the generated code back to the source.
//!
//! SWC recurses over the syntax tree in every pass, and a stack overflow aborts the process, not
//! the call. So before any parsing: the size is capped, a cheap scan refuses sources that nest too
//! deeply or chain too many operators in one statement, and the work runs on a thread of its own
//! with a large stack.

use std::{
    panic::{AssertUnwindSafe, catch_unwind},
    thread,
};

use serde::{Deserialize, Serialize};
use swc_core::{
    common::{
        BytePos, DUMMY_SP, FileName, GLOBALS, Globals, LineCol, Mark, SourceMap, Spanned, sync::Lrc,
    },
    ecma::{
        ast::{
            Decl, ExportNamedSpecifier, ExportSpecifier, Ident, Module, ModuleDecl,
            ModuleExportName, ModuleItem, NamedExport, Pass, Pat, Program, Stmt,
        },
        codegen::{Emitter, text_writer::JsWriter},
        parser::{EsSyntax, Parser, StringInput, Syntax, TsSyntax},
        transforms::{
            base::{fixer::fixer, resolver},
            typescript::strip,
        },
    },
};

use super::{ErrorKind, ExecError};

/// The largest source accepted: 1 MiB. An agent's program is a few kilobytes.
pub const MAX_SOURCE_BYTES: usize = 1 << 20;
/// The deepest bracket nesting accepted (`(`, `[`, `{`, template literals): 256 levels.
pub const MAX_NESTING: usize = 256;
/// The most operators (and operator-like words, and `else`s) accepted along one nesting path of
/// a statement: 1,024. A chain such as `a + a + …`, `!!!…x` or `else if … else if …` is as deep
/// a tree as nested brackets are, and SWC's TypeScript pass folds `const` initializers in time
/// and memory quadratic in their depth (4,096 `+` took 1.5 GB).
pub const MAX_CHAIN: usize = 1024;
/// The stack of the thread that parses and transforms: 64 MiB (reserved, touched only as used).
pub const TRANSPILE_STACK_BYTES: usize = 256 << 20;

/// The module name of the agent's own program, in its source map, its stacks and the engine's
/// loader (its relative imports resolve from `/`).
pub(crate) const AGENT_MODULE: &str = "agent.ts";
/// The name of the export through which the engine finds a program's top-level `exec`.
pub(crate) const EXEC_EXPORT: &str = "__runbyte_exec";

/// A transpiled module: the JavaScript, and the way back to the source's lines and columns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Transpiled {
    name: String,
    code: String,
    has_exec: bool,
    /// Sorted by generated position: generated line (0-based), generated column (UTF-16,
    /// 0-based), source line (1-based), source column (characters, 1-based).
    map: Vec<[u32; 4]>,
}

impl Transpiled {
    /// The module's name, as given to [`transpile`].
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The JavaScript.
    pub fn code(&self) -> &str {
        &self.code
    }

    /// Whether the source declares a top-level `exec` (the original Runbyte contract).
    pub fn has_exec(&self) -> bool {
        self.has_exec
    }

    /// The source position (1-based line, 1-based column in characters) of a position in the
    /// generated code as QuickJS reports it (1-based line, 1-based column in UTF-8 bytes).
    pub fn original_position(&self, line: u32, column: u32) -> Option<(u32, u32)> {
        let line0 = line.checked_sub(1)?;
        let text = self.code.split('\n').nth(line0 as usize)?;
        let byte = (column.saturating_sub(1) as usize).min(text.len());
        let prefix = text.get(..byte).unwrap_or(text);
        let col16 = prefix.encode_utf16().count() as u32;
        // The last mapping at or before the position; else the first one after it.
        let index = self.map.partition_point(|m| (m[0], m[1]) <= (line0, col16));
        let found = match index.checked_sub(1).map(|i| self.map[i]) {
            Some(m) if m[0] == line0 => Some(m),
            _ => self.map.get(index).filter(|m| m[0] == line0).copied(),
        }
        .or_else(|| index.checked_sub(1).map(|i| self.map[i]))?;
        Some((found[2], found[3]))
    }
}

/// Transpiles one module: TypeScript (or, for a `.js`/`.mjs` name, JavaScript) to JavaScript.
///
/// Refuses, as [`ErrorKind::Syntax`], a source over [`MAX_SOURCE_BYTES`], nested deeper than
/// [`MAX_NESTING`], with more than [`MAX_CHAIN`] operators in one statement, or that does not
/// parse; the error carries the line and column. Runs on a thread with a
/// [`TRANSPILE_STACK_BYTES`] stack and blocks until it is done (about a millisecond for a few
/// hundred lines): from async code, call it through `spawn_blocking`.
pub fn transpile(source: &str, name: &str) -> Result<Transpiled, ExecError> {
    transpile_as(source, name, false)
}

/// As [`transpile`]; `entry` marks the agent's own program, whose top-level `exec` is exported
/// to the engine under [`EXEC_EXPORT`].
pub(crate) fn transpile_as(source: &str, name: &str, entry: bool) -> Result<Transpiled, ExecError> {
    check_shape(source)?;
    let source = source.to_owned();
    let name = name.to_owned();
    let worker = thread::Builder::new()
        .name("runbyte-transpile".to_owned())
        .stack_size(TRANSPILE_STACK_BYTES)
        .spawn(move || guarded(&source, &name, entry))
        .map_err(|error| syntax(format!("cannot start the transpiler thread: {error}"), None))?;
    worker.join().unwrap_or_else(|_| {
        Err(syntax(
            "the transpiler failed on this source".to_owned(),
            None,
        ))
    })
}

/// As [`transpile_as`] for the agent's program, from async code in the host. A small, shallow
/// source ([`Shape::fits_inline`]) is transpiled on the calling thread: it takes tens of
/// microseconds, less than handing it to another thread and waking this one again. Any other
/// goes to a kept thread with the [`TRANSPILE_STACK_BYTES`] stack (see [`super::threads`]),
/// where making one per program (mapping and releasing its stack) would cost more than a small
/// program takes to transpile. Not for a worker process, whose address space is capped: a kept
/// transpiler stack would take room from its engine's. `hold` is kept until the work is done,
/// even if the caller stops waiting.
pub(crate) async fn transpile_in_host(
    source: String,
    hold: impl Send + 'static,
) -> Result<Transpiled, ExecError> {
    if check_shape(&source)?.fits_inline(source.len()) {
        let _hold = hold;
        return guarded(&source, AGENT_MODULE, true);
    }
    let (done, answer) = tokio::sync::oneshot::channel();
    super::threads::run(
        TRANSPILE_STACK_BYTES,
        Box::new(move || {
            let _hold = hold;
            let _ = done.send(guarded(&source, AGENT_MODULE, true));
        }),
    )
    .map_err(|error| syntax(format!("cannot start the transpiler thread: {error}"), None))?;
    answer.await.unwrap_or_else(|_| {
        Err(syntax(
            "the transpiler failed on this source".to_owned(),
            None,
        ))
    })
}

/// [`run`], with a panic turned into a syntax error, on the calling thread.
pub(crate) fn guarded(source: &str, name: &str, entry: bool) -> Result<Transpiled, ExecError> {
    catch_unwind(AssertUnwindSafe(|| run(source, name, entry))).unwrap_or_else(|panic| {
        let what = panic
            .downcast_ref::<&str>()
            .map(|s| (*s).to_owned())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_default();
        Err(syntax(
            format!("the transpiler failed on this source: {what}"),
            None,
        ))
    })
}

fn syntax(message: String, position: Option<(u32, u32)>) -> ExecError {
    ExecError {
        kind: ErrorKind::Syntax,
        message,
        position,
        stack: None,
    }
}

/// Words that nest like an operator: each adds a level to the tree it prefixes or joins.
const NESTING_WORDS: &[&str] = &[
    "new",
    "typeof",
    "void",
    "delete",
    "await",
    "yield",
    "if",
    "while",
    "for",
    "with",
    "do",
    "in",
    "instanceof",
    "keyof",
    "infer",
    "readonly",
    "unique",
    "asserts",
    "is",
    "as",
    "satisfies",
    "extends",
];

/// Words followed by parentheses and then a body that need not be braced.
const HEADER_WORDS: &[&str] = &["if", "for", "while", "with"];

/// Words that may continue an expression on the next line (so a line break before them is not
/// a statement boundary).
const CONTINUING_WORDS: &[&str] = &[
    "in",
    "instanceof",
    "as",
    "satisfies",
    "of",
    "extends",
    "implements",
    "is",
];

/// What [`check_shape`] saw of a source: the deepest bracket nesting, the longest chain, and
/// how many brackets it opened in all (each call, index or template in a chain such as
/// `f()()()` opens one and is a level of the tree, though it nests nothing).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Shape {
    pub nesting: usize,
    pub chain: usize,
    pub opened: usize,
    /// A `/` the scan could not tell a regular expression from a division by
    /// ([`Slash::Unsure`]), or a regular expression that does not end on its line: what
    /// follows may be deeper than it counted, so the source is not transpiled on the thread
    /// that asks.
    pub unsure: bool,
}

/// The most a source may be, nest, chain and open to be transpiled on the thread that asks
/// ([`transpile_in_host`]): an async thread of the host, with 2 MiB of stack (tokio's default;
/// `runbyte serve` gives its threads 8 MiB). SWC's recursion is bounded by these: the worst such
/// sources take under 768 KiB of stack even in a debug build, where SWC's frames are several
/// times larger (the test `small_shallow_sources_transpile_within_a_small_stack`). A typical
/// agent's program of a few dozen lines fits.
pub(crate) const INLINE_SOURCE_BYTES: usize = 2 << 10;
pub(crate) const INLINE_NESTING: usize = 16;
pub(crate) const INLINE_CHAIN: usize = 32;
pub(crate) const INLINE_OPENED: usize = 256;

impl Shape {
    fn opened(&mut self, depth: usize) {
        self.nesting = self.nesting.max(depth);
        self.opened += 1;
    }

    fn chained(&mut self, length: usize) {
        self.chain = self.chain.max(length);
    }

    /// Whether a source of `len` bytes and this shape may be transpiled on the calling thread.
    pub(crate) fn fits_inline(&self, len: usize) -> bool {
        len <= INLINE_SOURCE_BYTES
            && !self.unsure
            && self.nesting <= INLINE_NESTING
            && self.chain <= INLINE_CHAIN
            && self.opened <= INLINE_OPENED
    }
}

/// The cheap scan before parsing: size, bracket nesting, and the "chain": operators and
/// operator-like words along the current nesting path since the last statement boundary, plus
/// the `else`s along the path (an `else if` chain is as deep as it is long). A statement
/// boundary is a `;`, a word after a `}`, or a line break between a complete token and a word
/// (what automatic semicolon insertion splits); a `,` restarts the chain of the list it separates. Strings and
/// comments are skipped; template literals nest.
pub(crate) fn check_shape(source: &str) -> Result<Shape, ExecError> {
    if source.len() > MAX_SOURCE_BYTES {
        return Err(syntax(
            format!(
                "the source is {} bytes; the limit is {} bytes (1 MiB)",
                source.len(),
                MAX_SOURCE_BYTES
            ),
            None,
        ));
    }
    let bytes = source.as_bytes();
    let mut shape = Shape::default();
    // Open brackets; for `{` and `${`, the chain and `else` count to restore at the `}`.
    let mut stack: Vec<(u8, usize, usize)> = Vec::new();
    let (mut chain, mut elses) = (0usize, 0usize);
    let (mut line, mut line_start) = (1u32, 0usize);
    // The last significant byte, and whether a line break came after it.
    let (mut last, mut broke) = (b';', false);
    // Whether the last token was a word whose parentheses head a nested body.
    let mut header = false;
    // The last token, when it was a word (what a `/` after it is depends on the word).
    let mut last_word = "";
    let mut i = 0;
    let block_base = |stack: &[(u8, usize, usize)]| {
        stack
            .iter()
            .rev()
            .find(|(b, _, _)| *b == b'{' || *b == b'$')
            .map_or((0, 0), |(_, chain, elses)| (*chain, *elses))
    };
    let position = |i: usize, line: u32, line_start: usize| {
        let column = source
            .get(line_start..i)
            .map_or(1, |s| s.chars().count() as u32 + 1);
        Some((line, column))
    };
    let too_long = |at| {
        syntax(
            format!(
                "the source chains more than {MAX_CHAIN} operators in one nested statement; \
                 split it into several statements"
            ),
            at,
        )
    };
    while i < bytes.len() {
        let c = bytes[i];
        let next = bytes.get(i + 1).copied();
        if c == b'\n' {
            line += 1;
            line_start = i + 1;
            broke = true;
            i += 1;
            continue;
        }
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        if stack.last().is_some_and(|(b, _, _)| *b == b'`') {
            match c {
                b'\\' => i += 1,
                b'`' => {
                    stack.pop();
                }
                b'$' if next == Some(b'{') => {
                    stack.push((b'$', chain, elses));
                    shape.opened(stack.len());
                    i += 1;
                }
                _ => {}
            }
            (last, broke, last_word) = (b'`', false, "");
            i += 1;
            if stack.len() > MAX_NESTING {
                return Err(too_deep(position(i, line, line_start)));
            }
            continue;
        }
        match c {
            b'\'' | b'"' => {
                i += 1;
                while i < bytes.len() && bytes[i] != c && !matches!(bytes[i], b'\n' | b'\r') {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
            }
            // A line comment ends at any line terminator, as the parser's does: `\r`, U+2028 and
            // U+2029 too (what follows one is code, however deep).
            b'/' if next == Some(b'/') => {
                while i < bytes.len() && line_terminator_at(bytes, i) == 0 {
                    i += 1;
                }
                continue;
            }
            b'/' if next == Some(b'*') => {
                i += 2;
                while i < bytes.len() && !(bytes[i] == b'*' && bytes.get(i + 1) == Some(&b'/')) {
                    if bytes[i] == b'\n' {
                        line += 1;
                        line_start = i + 1;
                        broke = true;
                    }
                    i += 1;
                }
                i += 2;
                continue;
            }
            b'(' | b'[' | b'{' | b'`' => {
                // The parentheses of `if (…)`, `for (…)`, `while (…)`, `with (…)`: what follows
                // them is their body, nested, even on the next line.
                let kind = if c == b'(' && header { b'H' } else { c };
                stack.push((kind, chain, elses));
                shape.opened(stack.len());
                if stack.len() > MAX_NESTING {
                    return Err(too_deep(position(i, line, line_start)));
                }
            }
            b')' | b']' => {
                if let Some((b'H', _, _)) = stack.pop() {
                    (last, broke, header, last_word) = (b'=', false, false, "");
                    i += 1;
                    continue;
                }
            }
            b'}' => {
                if let Some((_, saved_chain, saved_elses)) = stack.pop() {
                    chain = saved_chain;
                    elses = saved_elses;
                }
            }
            // A `;` inside parentheses separates the clauses of a `for`: no statement ends.
            b';' if !matches!(stack.last(), Some((b'(' | b'[' | b'H', _, _))) => {
                chain = block_base(&stack).0;
            }
            // Elements of a list are siblings: the chain restarts from where the list opened.
            b',' => chain = stack.last().map_or(0, |(_, saved, _)| *saved),
            // A regular expression is skipped whole: a quote, backtick or `/*` in it opens
            // nothing. A `/` that might be either is counted as a division, the source marked
            // unsure.
            b'/' => match slash_after(bytes, i, last, last_word) {
                Slash::Regex => {
                    let end = regex_end(bytes, i);
                    shape.unsure |= end.is_err();
                    i = end.unwrap_or_else(|line_end| line_end);
                    (last, broke, header, last_word) = (b'a', false, false, "");
                    continue;
                }
                slash => {
                    shape.unsure |= matches!(slash, Slash::Unsure);
                    chain += 1;
                    shape.chained(chain + elses);
                    if chain + elses > MAX_CHAIN {
                        return Err(too_long(position(i, line, line_start)));
                    }
                }
            },
            b'+' | b'-' | b'*' | b'%' | b'&' | b'|' | b'^' | b'!' | b'~' | b'?' | b':' | b'='
            | b'<' | b'>' | b'.' | b'@' => {
                chain += 1;
                shape.chained(chain + elses);
                if chain + elses > MAX_CHAIN {
                    return Err(too_long(position(i, line, line_start)));
                }
            }
            c if c.is_ascii_alphabetic() || c == b'_' || c == b'$' => {
                let start = i;
                while i < bytes.len()
                    && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_' || bytes[i] == b'$')
                {
                    i += 1;
                }
                let word = &source[start..i];
                let previous = last;
                let complete = last.is_ascii_alphanumeric()
                    || matches!(last, b'_' | b'$' | b')' | b']' | b'}' | b'\'' | b'"' | b'`');
                let starts_statement = matches!(last, b';' | b'}') || (broke && complete);
                if starts_statement && !CONTINUING_WORDS.contains(&word) {
                    let (base_chain, base_elses) = block_base(&stack);
                    chain = base_chain;
                    if word != "else" {
                        elses = base_elses;
                    }
                }
                last = b'a';
                broke = false;
                header = HEADER_WORDS.contains(&word) || (header && word == "await");
                if word == "else" {
                    elses += 1;
                    last = b'=';
                } else if NESTING_WORDS.contains(&word) {
                    chain += 1;
                    // What follows on the next line is its operand or body, not a sibling.
                    last = b'=';
                }
                shape.chained(chain + elses);
                if chain + elses > MAX_CHAIN {
                    return Err(too_long(position(start, line, line_start)));
                }
                // A property name (`x.return`) is a name whatever it spells.
                last_word = if previous == b'.' { "" } else { word };
                continue;
            }
            _ => {}
        }
        last = c;
        broke = false;
        header = false;
        last_word = "";
        i += 1;
    }
    Ok(shape)
}

/// Words after which a `/` opens a regular expression: reserved words an expression follows.
const REGEX_AFTER_WORDS: &[&str] = &[
    "return",
    "typeof",
    "void",
    "delete",
    "new",
    "in",
    "instanceof",
    "case",
    "do",
    "else",
    "throw",
];

/// What a `/` that opens no comment is.
enum Slash {
    Regex,
    Division,
    /// Either, as far as the bytes around tell: after a `}` (a block, or an object), a word
    /// that is a keyword in one place and a name in another (`await`, `of`, `as`, ...), a
    /// postfix `++` or `!`, or a `>` that may close a type.
    Unsure,
}

/// What the `/` at `slash` is, after `last` (the last significant byte) and `word` (the last
/// token, when it was a word that is not a property name). Unsure wherever a parser could read
/// the other: it decides by grammar, this by the bytes around.
fn slash_after(bytes: &[u8], slash: usize, last: u8, word: &str) -> Slash {
    let complete = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'$' | b')' | b']');
    if !word.is_empty() {
        return if REGEX_AFTER_WORDS.contains(&word) {
            Slash::Regex
        } else if NESTING_WORDS.contains(&word) || CONTINUING_WORDS.contains(&word) {
            Slash::Unsure
        } else {
            Slash::Division
        };
    }
    if complete(last) || matches!(last, b'\'' | b'"' | b'`') {
        return Slash::Division;
    }
    // The byte `last` was, and the one before it, with only blanks between them and the `/`
    // (a comment there leaves it unsure).
    let Some(at) = bytes[..slash]
        .iter()
        .rposition(|b| !b.is_ascii_whitespace())
    else {
        return Slash::Regex;
    };
    if bytes[at] != last {
        return Slash::Unsure;
    }
    let before = at.checked_sub(1).map(|i| bytes[i]);
    let before_blank = bytes[..at]
        .iter()
        .rev()
        .find(|b| !b.is_ascii_whitespace())
        .copied();
    match last {
        // `a++ / b` divides; `a + /re/` does not.
        b'+' | b'-' if before == Some(last) => Slash::Unsure,
        // TypeScript's `a! / b` divides; `!/re/` does not.
        b'!' if before_blank.is_some_and(complete) => Slash::Unsure,
        // `=> /re/` opens one; `Array<T> / b` might divide.
        b'>' if before != Some(b'=') => Slash::Unsure,
        b'}' | b'.' => Slash::Unsure,
        _ => Slash::Regex,
    }
}

/// Where the regular expression whose opening `/` is at `start` ends: `Ok` at the byte after
/// its closing `/` (its flags are read as a word), or `Err` at the end of its line when it does
/// not close there (a parser reads it to there too, and fails).
fn regex_end(bytes: &[u8], start: usize) -> Result<usize, usize> {
    let mut i = start + 1;
    let mut class = false;
    while i < bytes.len() && line_terminator_at(bytes, i) == 0 {
        match bytes[i] {
            b'\\' if i + 1 < bytes.len() && line_terminator_at(bytes, i + 1) == 0 => i += 1,
            b'[' => class = true,
            b']' => class = false,
            b'/' if !class => return Ok(i + 1),
            _ => {}
        }
        i += 1;
    }
    Err(i)
}

/// The length of the line terminator at `i` (`\n`, `\r`, U+2028, U+2029), or 0.
fn line_terminator_at(bytes: &[u8], i: usize) -> usize {
    match bytes[i..] {
        [b'\n' | b'\r', ..] => 1,
        [0xE2, 0x80, 0xA8 | 0xA9, ..] => 3,
        _ => 0,
    }
}

fn too_deep(position: Option<(u32, u32)>) -> ExecError {
    syntax(
        format!("the source nests brackets more than {MAX_NESTING} levels deep; flatten it"),
        position,
    )
}

/// Parse, strip types, fix parentheses, emit. No hygiene pass: stripping types introduces no
/// names that could clash, and hygiene is quadratic in same-named declarations.
fn run(source: &str, name: &str, entry: bool) -> Result<Transpiled, ExecError> {
    let map: Lrc<SourceMap> = Lrc::default();
    let file = map.new_source_file(Lrc::new(FileName::Anon), source.to_owned());
    let lines = LineIndex::new(source, file.start_pos);
    let javascript = name.ends_with(".js") || name.ends_with(".mjs");
    let syntax_kind = if javascript {
        Syntax::Es(EsSyntax::default())
    } else {
        Syntax::Typescript(TsSyntax::default())
    };
    GLOBALS.set(&Globals::new(), || {
        let mut parser = Parser::new(syntax_kind, StringInput::from(&*file), None);
        let parsed = parser.parse_module();
        let module = match parsed {
            Ok(module) => module,
            Err(error) => {
                return Err(syntax(
                    format!("SyntaxError: {}", error.kind().msg()),
                    lines.position(error.span().lo),
                ));
            }
        };
        if let Some(error) = parser.take_errors().into_iter().next() {
            return Err(syntax(
                format!("SyntaxError: {}", error.kind().msg()),
                lines.position(error.span().lo),
            ));
        }
        let unresolved = Mark::new();
        let top_level = Mark::new();
        let mut program = Program::Module(module);
        resolver(unresolved, top_level, !javascript).process(&mut program);
        strip(unresolved, top_level).process(&mut program);
        fixer(None).process(&mut program);
        let Program::Module(mut module) = program else {
            return Err(syntax("the transpiler lost the module".to_owned(), None));
        };
        let exec = top_level_exec(&module);
        if entry && let Some(exec) = &exec {
            module.body.push(export_as(exec, EXEC_EXPORT));
        }
        let mut code = Vec::new();
        let mut entries: Vec<(BytePos, LineCol)> = Vec::new();
        {
            let mut emitter = Emitter {
                cfg: Default::default(),
                cm: map.clone(),
                comments: None,
                wr: JsWriter::new(map.clone(), "\n", &mut code, Some(&mut entries)),
            };
            emitter
                .emit_module(&module)
                .map_err(|error| syntax(format!("cannot emit JavaScript: {error}"), None))?;
        }
        // Dropping a deep tree recurses too; it happens here, on the large stack.
        drop(module);
        let code = String::from_utf8(code)
            .map_err(|_| syntax("the emitted JavaScript is not UTF-8".to_owned(), None))?;
        let mut map: Vec<[u32; 4]> = entries
            .into_iter()
            .filter_map(|(pos, gen_pos)| {
                let (line, column) = lines.position(pos)?;
                Some([gen_pos.line, gen_pos.col, line, column])
            })
            .collect();
        map.sort_unstable();
        map.dedup_by(|b, a| a[0] == b[0] && a[1] == b[1]);
        Ok(Transpiled {
            name: name.to_owned(),
            code,
            has_exec: exec.is_some(),
            map,
        })
    })
}

/// The binding of a top-level `exec`: a function, class or variable declaration, exported or not.
fn top_level_exec(module: &Module) -> Option<Ident> {
    module.body.iter().find_map(|item| {
        let decl = match item {
            ModuleItem::Stmt(Stmt::Decl(decl)) => decl,
            ModuleItem::ModuleDecl(ModuleDecl::ExportDecl(export)) => &export.decl,
            _ => return None,
        };
        match decl {
            Decl::Fn(f) if f.ident.sym == "exec" => Some(f.ident.clone()),
            Decl::Class(c) if c.ident.sym == "exec" => Some(c.ident.clone()),
            Decl::Var(var) => var.decls.iter().find_map(|d| match &d.name {
                Pat::Ident(binding) if binding.id.sym == "exec" => Some(binding.id.clone()),
                _ => None,
            }),
            _ => None,
        }
    })
}

fn export_as(local: &Ident, exported: &str) -> ModuleItem {
    ModuleItem::ModuleDecl(ModuleDecl::ExportNamed(NamedExport {
        span: DUMMY_SP,
        specifiers: vec![ExportSpecifier::Named(ExportNamedSpecifier {
            span: DUMMY_SP,
            orig: ModuleExportName::Ident(local.clone()),
            exported: Some(ModuleExportName::Ident(Ident::new_no_ctxt(
                exported.into(),
                DUMMY_SP,
            ))),
            is_type_only: false,
        })],
        src: None,
        type_only: false,
        with: None,
    }))
}

/// Byte positions of the one source file to 1-based lines and character columns.
struct LineIndex<'a> {
    source: &'a str,
    start: u32,
    line_starts: Vec<usize>,
    /// For a source that is not ASCII: the characters before each byte offset.
    chars_before: Option<Vec<u32>>,
}

impl<'a> LineIndex<'a> {
    fn new(source: &'a str, start: BytePos) -> Self {
        let mut line_starts = vec![0];
        line_starts.extend(
            source
                .bytes()
                .enumerate()
                .filter(|(_, b)| *b == b'\n')
                .map(|(i, _)| i + 1),
        );
        let chars_before = (!source.is_ascii()).then(|| {
            let mut counts = Vec::with_capacity(source.len() + 1);
            let mut chars = 0u32;
            for byte in source.bytes() {
                counts.push(chars);
                // Count each character at its first byte (not a UTF-8 continuation byte).
                if byte & 0xC0 != 0x80 {
                    chars += 1;
                }
            }
            counts.push(chars);
            counts
        });
        LineIndex {
            source,
            start: start.0,
            line_starts,
            chars_before,
        }
    }

    fn position(&self, pos: BytePos) -> Option<(u32, u32)> {
        let offset = pos.0.checked_sub(self.start)? as usize;
        if offset > self.source.len() {
            return None;
        }
        let line = self.line_starts.partition_point(|&s| s <= offset);
        let line_start = self.line_starts[line.checked_sub(1)?];
        let column = match &self.chars_before {
            None => (offset - line_start) as u32,
            Some(counts) => counts.get(offset)? - counts.get(line_start)?,
        };
        Some((line as u32, column + 1))
    }
}
