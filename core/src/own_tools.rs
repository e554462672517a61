//! Runbyte's own tools as typed values (the upstream server, `crate::server`, serves them;
//! they sit below it and the gateway, whose direct names must not take theirs): one struct per tool, its arguments as they come over
//! the wire, with the tool's [`Spec`] (name, description, argument schema, hints) beside it;
//! [`OwnTool`] parses a `tools/call` into one of them, and [`SPECS`] is the one list from
//! which `tools/list`, the unknown-tool error and the names no direct tool may take
//! ([`NAMES`]) all come.
//!
//! Arguments are read as leniently as Runbyte always read them: a required text argument that
//! is missing or not a string is refused with "`<key>` is required and must be a string"; an
//! optional argument of the wrong type counts as absent.
//!
//! A new tool is a struct here with its `Spec`, a variant of [`OwnTool`] and an entry in
//! [`SPECS`] and [`OwnTool::parse`], and its arm and method in the handler.

use std::sync::Arc;

use rmcp::{
    ErrorData,
    model::{ErrorCode, JsonObject, Tool, ToolAnnotations},
};
use serde::{Deserialize, Deserializer, de::DeserializeOwned};
use serde_json::Value;

/// The JSON type an argument takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A string.
    String,
    /// `true` or `false`.
    Boolean,
    /// A whole number in `minimum..=maximum` (an optional one outside is brought inside).
    Integer {
        /// The least value the tool takes.
        minimum: u64,
        /// The greatest value the tool takes.
        maximum: u64,
    },
    /// Any JSON object.
    Object,
}

impl Kind {
    /// Whether `value` is of this type (a number out of range still is: the tool brings it in).
    fn admits(self, value: &Value) -> bool {
        match self {
            Kind::String => value.is_string(),
            Kind::Boolean => value.is_boolean(),
            Kind::Integer { .. } => value.is_u64(),
            Kind::Object => value.is_object(),
        }
    }

    /// The type as the refusal of a required argument names it ("a string").
    fn named(self) -> &'static str {
        match self {
            Kind::String => "a string",
            Kind::Boolean => "a boolean",
            Kind::Integer { .. } => "a whole number",
            Kind::Object => "an object",
        }
    }

    /// The argument's JSON Schema: `type`, then its bounds or description.
    fn schema(self, description: Option<&str>) -> JsonObject {
        let mut schema = JsonObject::new();
        let name = match self {
            Kind::String => "string",
            Kind::Boolean => "boolean",
            Kind::Integer { .. } => "integer",
            Kind::Object => "object",
        };
        schema.insert("type".into(), name.into());
        if let Kind::Integer { minimum, maximum } = self {
            schema.insert("minimum".into(), minimum.into());
            schema.insert("maximum".into(), maximum.into());
        }
        if let Some(description) = description {
            schema.insert("description".into(), description.into());
        }
        schema
    }
}

/// One argument of a tool.
#[derive(Debug, Clone, Copy)]
pub struct Arg {
    /// Its key in `arguments` (`withDescriptions`).
    pub name: &'static str,
    /// Its JSON type.
    pub kind: Kind,
    /// Whether a call without it is refused.
    pub required: bool,
    /// What the client is told about it, when the name does not say enough.
    pub description: Option<&'static str>,
}

impl Arg {
    /// A required argument.
    const fn required(name: &'static str, kind: Kind) -> Self {
        Arg {
            name,
            kind,
            required: true,
            description: None,
        }
    }

    /// An optional argument.
    const fn optional(name: &'static str, kind: Kind) -> Self {
        Arg {
            name,
            kind,
            required: false,
            description: None,
        }
    }

    /// The argument, with `description`.
    const fn described(self, description: &'static str) -> Self {
        Arg {
            description: Some(description),
            ..self
        }
    }
}

/// What a tool may do, as its annotations tell clients.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hint {
    /// It changes nothing (`readOnlyHint`).
    ReadOnly,
    /// It may change anything (`destructiveHint`).
    Destructive,
    /// No annotations.
    None,
}

/// What `tools/list` says of one tool.
#[derive(Debug, Clone, Copy)]
pub struct Spec {
    /// The tool's name.
    pub name: &'static str,
    /// What it does, for the agent (every client loads it: kept short).
    pub description: &'static str,
    /// Its arguments, in the order the schema lists them.
    pub args: &'static [Arg],
    /// Its annotations.
    pub hint: Hint,
}

impl Spec {
    /// The tool's `inputSchema`: an object of [`Spec::args`], the required ones listed.
    pub fn input_schema(&self) -> JsonObject {
        let properties: JsonObject = self
            .args
            .iter()
            .map(|arg| {
                let schema = arg.kind.schema(arg.description);
                (arg.name.to_owned(), Value::Object(schema))
            })
            .collect();
        let required: Vec<Value> = self
            .args
            .iter()
            .filter(|arg| arg.required)
            .map(|arg| arg.name.into())
            .collect();
        let mut schema = JsonObject::new();
        schema.insert("type".into(), "object".into());
        schema.insert("properties".into(), Value::Object(properties));
        schema.insert("required".into(), Value::Array(required));
        schema
    }

    /// The tool as `tools/list` gives it.
    pub fn tool(&self) -> Tool {
        let tool = Tool::new(self.name, self.description, Arc::new(self.input_schema()));
        match self.hint {
            Hint::ReadOnly => tool.annotate(ToolAnnotations::new().read_only(true)),
            Hint::Destructive => tool.annotate(ToolAnnotations::new().destructive(true)),
            Hint::None => tool,
        }
    }

    /// The first required argument that `arguments` lacks or has of another type, refused.
    fn check(&self, arguments: &Value) -> Result<(), ArgumentError> {
        for arg in self.args.iter().filter(|arg| arg.required) {
            if !arguments.get(arg.name).is_some_and(|v| arg.kind.admits(v)) {
                return Err(ArgumentError::Required {
                    key: arg.name,
                    kind: arg.kind.named(),
                });
            }
        }
        Ok(())
    }
}

/// One of Runbyte's tools: its arguments, read from a call's `arguments`.
pub trait Own<'a>: Deserialize<'a> {
    /// What `tools/list` says of it.
    const SPEC: Spec;
    /// Its name, a constant for [`OwnTool::parse`]'s patterns.
    const NAME: &'static str = Self::SPEC.name;
}

/// A call's arguments that Runbyte's tool refuses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArgumentError {
    /// A required argument is missing or of another type.
    #[error("`{key}` is required and must be {kind}")]
    Required {
        /// The argument's key.
        key: &'static str,
        /// Its type, named ("a string").
        kind: &'static str,
    },
    /// The arguments passed the schema but not the tool's type (a spec and its struct
    /// disagree: the tests keep them together).
    #[error("the arguments of `{tool}` do not fit: {message}")]
    Shape {
        /// The tool's name.
        tool: &'static str,
        /// What did not fit.
        message: String,
    },
}

/// Reads `arguments` as tool `T`'s: first the schema's required arguments, then the type.
fn read<'a, T: Own<'a>>(arguments: &'a Value) -> Result<T, ArgumentError> {
    T::SPEC.check(arguments)?;
    T::deserialize(arguments).map_err(|e| ArgumentError::Shape {
        tool: T::SPEC.name,
        message: e.to_string(),
    })
}

/// An optional argument: of the wrong type it counts as absent (as Runbyte always read them).
fn lenient<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: DeserializeOwned + Default,
{
    let value = Value::deserialize(deserializer)?;
    Ok(serde_json::from_value(value).unwrap_or_default())
}

/// `list_directory`: a folder's entries.
#[derive(Debug, Deserialize)]
#[cfg_attr(test, derive(serde::Serialize))]
pub struct ListDirectory<'a> {
    /// The folder (`/servers`, `/skills/…`).
    pub path: &'a str,
    /// Whether each tool's entry gives its description too.
    #[serde(rename = "withDescriptions", default, deserialize_with = "lenient")]
    pub with_descriptions: bool,
}

impl<'a> Own<'a> for ListDirectory<'a> {
    const SPEC: Spec = Spec {
        name: "list_directory",
        description: "List a folder: /servers has a folder per server, a module per tool; /skills has saved skills.",
        args: &[
            Arg::required("path", Kind::String),
            Arg::optional("withDescriptions", Kind::Boolean),
        ],
        hint: Hint::ReadOnly,
    };
}

/// `read_file`: one module of the VFS.
#[derive(Debug, Deserialize)]
#[cfg_attr(test, derive(serde::Serialize))]
pub struct ReadFile<'a> {
    /// The module (`/servers/github/create_issue.ts`).
    pub path: &'a str,
}

impl<'a> Own<'a> for ReadFile<'a> {
    const SPEC: Spec = Spec {
        name: "read_file",
        description: "Read a module: a tool's typed function and docs, e.g. /servers/github/create_issue.ts",
        args: &[Arg::required("path", Kind::String)],
        hint: Hint::ReadOnly,
    };
}

/// The name of the tool that runs a program.
pub const EXECUTE_CODE: &str = "execute_code";

/// `execute_code`: one program to run.
#[derive(Debug, Deserialize)]
#[cfg_attr(test, derive(serde::Serialize))]
pub struct ExecuteCode<'a> {
    /// The TypeScript program.
    pub code: &'a str,
}

impl<'a> Own<'a> for ExecuteCode<'a> {
    const SPEC: Spec = Spec {
        name: EXECUTE_CODE,
        description: "Run a TypeScript program in a sandbox: import tools from './servers/<server>', await them, export default only what you need. Returns it as JSON with console output and a call summary.",
        args: &[Arg::required("code", Kind::String)],
        hint: Hint::Destructive,
    };
}

/// `search_tools`: tools and skills that match a query.
#[derive(Debug, Deserialize)]
#[cfg_attr(test, derive(serde::Serialize))]
pub struct SearchTools<'a> {
    /// What the tools should do.
    pub query: &'a str,
    /// The most hits wanted (see [`SearchTools::limit`]).
    #[serde(default, deserialize_with = "lenient")]
    pub limit: Option<u64>,
}

impl SearchTools<'_> {
    /// The hits given when the call names no limit.
    const DEFAULT_LIMIT: u64 = 10;
    /// The fewest hits a call may ask for.
    const MIN_LIMIT: u64 = 1;
    /// The most hits a call may ask for.
    const MAX_LIMIT: u64 = 50;

    /// The most hits to give: the call's `limit` within the schema's bounds, else 10.
    pub fn limit(&self) -> usize {
        let limit = self.limit.unwrap_or(Self::DEFAULT_LIMIT);
        usize::try_from(limit.clamp(Self::MIN_LIMIT, Self::MAX_LIMIT)).unwrap_or(usize::MAX)
    }
}

impl<'a> Own<'a> for SearchTools<'a> {
    const SPEC: Spec = Spec {
        name: "search_tools",
        description: "Find tools and skills by what they do; each hit gives its import and signature.",
        args: &[
            Arg::required("query", Kind::String),
            Arg::optional(
                "limit",
                Kind::Integer {
                    minimum: Self::MIN_LIMIT,
                    maximum: Self::MAX_LIMIT,
                },
            ),
        ],
        hint: Hint::ReadOnly,
    };
}

/// `save_skill`: a program to keep under `/skills`.
#[derive(Debug, Deserialize)]
#[cfg_attr(test, derive(serde::Serialize))]
pub struct SaveSkill<'a> {
    /// The skill's name, lowercase-hyphenated.
    pub name: &'a str,
    /// What it does.
    pub description: &'a str,
    /// The program.
    pub code: &'a str,
    /// The JSON Schema of its argument object (`null` is none).
    #[serde(default)]
    pub args: Option<Value>,
    /// Whether a skill of that name is replaced.
    #[serde(default, deserialize_with = "lenient")]
    pub overwrite: bool,
}

impl<'a> Own<'a> for SaveSkill<'a> {
    const SPEC: Spec = Spec {
        name: "save_skill",
        description: "Save a program that worked as /skills/<name>.ts for later programs to import. Its default export is an async function of one argument object.",
        args: &[
            Arg::required("name", Kind::String).described("lowercase-hyphenated"),
            Arg::required("description", Kind::String),
            Arg::required("code", Kind::String),
            Arg::optional("args", Kind::Object).described("JSON Schema of the argument"),
            Arg::optional("overwrite", Kind::Boolean),
        ],
        hint: Hint::None,
    };
}

/// How a client learns the workflow, in a few lines (kept short: every client loads it).
pub const INSTRUCTIONS: &str = "Runbyte turns MCP servers' tools into typed functions. Explore \
with list_directory('/servers'), read_file or search_tools, then execute_code a short TypeScript \
program that imports from './servers/<server>' and returns only what you need; intermediate data \
stays in the sandbox. save_skill keeps a program for later.";

/// The estimated tokens (JSON bytes / 4, as [`crate::gateway::auto`] weighs a server's) of
/// Runbyte's own surface: its tools and [`INSTRUCTIONS`], which every client loads with each
/// conversation.
pub fn surface_tokens() -> u64 {
    static TOKENS: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *TOKENS.get_or_init(|| {
        crate::gateway::auto::estimated_tokens(&tools()) + (INSTRUCTIONS.len() as u64).div_ceil(4)
    })
}

/// Runbyte's tools, in the order `tools/list` gives them. Every client loads these with each
/// conversation: kept short (with the instructions, under 2 KB; `scripts/token-bench`
/// measures it).
pub const SPECS: [Spec; 5] = [
    ListDirectory::SPEC,
    ReadFile::SPEC,
    ExecuteCode::SPEC,
    SearchTools::SPEC,
    SaveSkill::SPEC,
];

/// The names of Runbyte's tools, which no directly exposed tool may take.
pub const NAMES: [&str; SPECS.len()] = {
    let mut names = [""; SPECS.len()];
    let mut at = 0;
    while at < SPECS.len() {
        names[at] = SPECS[at].name;
        at += 1;
    }
    names
};

/// Runbyte's tools as `tools/list` gives them.
pub fn tools() -> Vec<Tool> {
    SPECS.iter().map(Spec::tool).collect()
}

/// A call of one of Runbyte's tools, with its arguments read.
#[derive(Debug)]
pub enum OwnTool<'a> {
    /// `list_directory`.
    ListDirectory(ListDirectory<'a>),
    /// `read_file`.
    ReadFile(ReadFile<'a>),
    /// `execute_code`.
    ExecuteCode(ExecuteCode<'a>),
    /// `search_tools`.
    SearchTools(SearchTools<'a>),
    /// `save_skill`.
    SaveSkill(SaveSkill<'a>),
}

/// Why a call is not one of Runbyte's tools.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotOwn {
    /// No tool of Runbyte's has the name (it may be a directly exposed tool).
    Unknown,
    /// The tool is Runbyte's, and its arguments are refused: a result the agent reads.
    Arguments(ArgumentError),
}

impl<'a> OwnTool<'a> {
    /// The call of tool `name` with `arguments`, or why it is none of Runbyte's.
    pub fn parse(name: &str, arguments: &'a Value) -> Result<Self, NotOwn> {
        let parsed = match name {
            ListDirectory::NAME => read(arguments).map(OwnTool::ListDirectory),
            ReadFile::NAME => read(arguments).map(OwnTool::ReadFile),
            ExecuteCode::NAME => read(arguments).map(OwnTool::ExecuteCode),
            SearchTools::NAME => read(arguments).map(OwnTool::SearchTools),
            SaveSkill::NAME => read(arguments).map(OwnTool::SaveSkill),
            _ => return Err(NotOwn::Unknown),
        };
        parsed.map_err(NotOwn::Arguments)
    }
}

/// The error for a tool that is neither Runbyte's nor a directly exposed one: -32602, naming
/// Runbyte's tools.
pub fn unknown_tool(name: &str) -> ErrorData {
    ErrorData::new(
        ErrorCode::INVALID_PARAMS,
        format!(
            "unknown tool `{name}`; Runbyte's tools are {}",
            NAMES.join(", ")
        ),
        None,
    )
}

#[cfg(test)]
mod tests;
