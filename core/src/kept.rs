//! Values a program keeps in the sandbox for the later programs of its client session
//! (`import { keep, recall, forget, kept } from './state'`): the data stays in the host, so a
//! second program computes from what the first fetched without it passing through the model.
//!
//! A program reaches the store through the bridge under a reserved server name, [`SERVER`]
//! (no configured server can take it: server names hold no `/`), so a keep or a recall is a
//! call like any other on its way: counted, judged by the policies (with [`annotations`]: a
//! keep is not read-only), audited, and recorded in the replay journal (a replayed program
//! sees the values its first run recalled).
//!
//! Each session's values sit on a shelf of their own, keyed by the session ([`Owner`]), bounded
//! in bytes per value, bytes and entries per session, sessions, and bytes in all; a shelf goes
//! when its session ends ([`Kept::end`]) or after [`IDLE_TTL`] unused. Values are held as their
//! JSON text, so what is counted is what is held.

use std::{
    collections::{BTreeMap, HashMap},
    sync::Mutex,
    time::{Duration, Instant},
};

use std::fmt::Write as _;

use serde_json::{Value, json};

/// The server name programs' keeps and recalls are called under.
pub const SERVER: &str = "runbyte/state";
/// The most one value may take, as JSON.
pub const MAX_VALUE_BYTES: usize = 1 << 20;
/// The most one session may keep, as JSON, in all its values.
pub const MAX_SESSION_BYTES: usize = 8 << 20;
/// The most values one session may keep.
pub const MAX_ENTRIES: usize = 64;
/// The most sessions that may keep values at once.
pub const MAX_SESSIONS: usize = 1024;
/// The most every session together may keep, as JSON.
pub const MAX_TOTAL_BYTES: usize = 256 << 20;
/// How long a session's values last unused (neither kept, recalled nor listed).
pub const IDLE_TTL: Duration = Duration::from_secs(3600);
/// The longest name a value may have.
pub const MAX_NAME_BYTES: usize = 64;

/// Whose values an execution keeps and recalls.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Owner {
    /// A client session that lasts across its requests (a legacy MCP session, or the one
    /// connection of a stdio client), by its key.
    Session(String),
    /// A client with no identity that lasts across its requests and that no other client can
    /// present: why it cannot keep values.
    Refused(String),
}

/// A bound a keep would pass, or a name or call the store does not take. The text names the
/// bound and its value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeepError {
    #[error(
        "keep(`{name}`): the value is {bytes} bytes as JSON, over the {} a value may take \
         (MAX_VALUE_BYTES)",
        size(MAX_VALUE_BYTES)
    )]
    ValueTooLarge { name: String, bytes: usize },
    #[error(
        "keep(`{name}`): the session would keep {bytes} bytes, over the {} a session may keep \
         (MAX_SESSION_BYTES); forget() what is no longer needed",
        size(MAX_SESSION_BYTES)
    )]
    SessionFull { name: String, bytes: usize },
    #[error(
        "keep(`{name}`): the session keeps {MAX_ENTRIES} values, the most it may (MAX_ENTRIES); \
         forget() one first"
    )]
    TooManyEntries { name: String },
    #[error(
        "keep(`{name}`): {MAX_SESSIONS} sessions keep values, the most there may be \
         (MAX_SESSIONS); try again when one has ended"
    )]
    TooManySessions { name: String },
    #[error(
        "keep(`{name}`): the gateway keeps {}, the most all sessions may (MAX_TOTAL_BYTES); try \
         again later, or forget() what is no longer needed",
        size(MAX_TOTAL_BYTES)
    )]
    GatewayFull { name: String },
    #[error(
        "`{name}` is not a name for a kept value: 1 to {MAX_NAME_BYTES} ASCII letters, digits, \
         `_` or `-`"
    )]
    BadName { name: String },
    #[error("{0}")]
    Call(String),
    #[error("values cannot be kept for this client: {0}")]
    Refused(String),
}

/// One kept value, as a listing shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    /// Its name.
    pub name: String,
    /// Its size, as JSON.
    pub bytes: usize,
    /// How long ago it was kept.
    pub age: Duration,
}

struct Entry {
    json: Box<str>,
    kept: Instant,
}

struct Shelf {
    entries: BTreeMap<String, Entry>,
    bytes: usize,
    /// When it was last kept in, recalled from or listed.
    used: Instant,
}

#[derive(Default)]
struct Shelves {
    by_owner: HashMap<String, Shelf>,
    bytes: usize,
}

/// Every session's kept values.
pub struct Kept {
    shelves: Mutex<Shelves>,
    idle: Duration,
}

impl Default for Kept {
    fn default() -> Self {
        Kept::with_idle(IDLE_TTL)
    }
}

impl Kept {
    /// A store whose values last `idle` unused.
    pub fn with_idle(idle: Duration) -> Self {
        Kept {
            shelves: Mutex::default(),
            idle,
        }
    }

    /// The shelves, with those unused for longer than the idle time gone.
    fn shelves(&self) -> std::sync::MutexGuard<'_, Shelves> {
        let mut shelves = self.shelves.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        let idle = self.idle;
        let mut freed = 0;
        shelves.by_owner.retain(|_, shelf| {
            let live = now.saturating_duration_since(shelf.used) < idle;
            if !live {
                freed += shelf.bytes;
            }
            live
        });
        shelves.bytes -= freed;
        shelves
    }

    /// Keeps `value` under `name` for `owner`, replacing what was kept there; the name and size
    /// kept.
    pub fn keep(&self, owner: &str, name: &str, value: &Value) -> Result<Listed, KeepError> {
        check_name(name)?;
        let json = serde_json::to_string(value)
            .map_err(|e| KeepError::Call(format!("keep(`{name}`): not JSON: {e}")))?;
        let bytes = json.len();
        let named = || name.to_owned();
        if bytes > MAX_VALUE_BYTES {
            return Err(KeepError::ValueTooLarge {
                name: named(),
                bytes,
            });
        }
        let mut guard = self.shelves();
        let shelves = &mut *guard;
        let (held, replaced, entries) = shelves.by_owner.get(owner).map_or((0, 0, 0), |shelf| {
            let replaced = shelf.entries.get(name).map(|entry| entry.json.len());
            (shelf.bytes, replaced.unwrap_or(0), shelf.entries.len())
        });
        let new_name = shelves
            .by_owner
            .get(owner)
            .is_none_or(|shelf| !shelf.entries.contains_key(name));
        if !shelves.by_owner.contains_key(owner) && shelves.by_owner.len() >= MAX_SESSIONS {
            return Err(KeepError::TooManySessions { name: named() });
        }
        if new_name && entries >= MAX_ENTRIES {
            return Err(KeepError::TooManyEntries { name: named() });
        }
        let session_bytes = held - replaced + bytes;
        if session_bytes > MAX_SESSION_BYTES {
            return Err(KeepError::SessionFull {
                name: named(),
                bytes: session_bytes,
            });
        }
        if shelves.bytes - replaced + bytes > MAX_TOTAL_BYTES {
            return Err(KeepError::GatewayFull { name: named() });
        }
        let shelf = shelves
            .by_owner
            .entry(owner.to_owned())
            .or_insert_with(|| Shelf {
                entries: BTreeMap::new(),
                bytes: 0,
                used: Instant::now(),
            });
        shelf.used = Instant::now();
        shelf.bytes = session_bytes;
        shelf.entries.insert(
            named(),
            Entry {
                json: json.into_boxed_str(),
                kept: Instant::now(),
            },
        );
        shelves.bytes = shelves.bytes - replaced + bytes;
        Ok(Listed {
            name: named(),
            bytes,
            age: Duration::ZERO,
        })
    }

    /// The value `owner` kept under `name`, if any.
    pub fn recall(&self, owner: &str, name: &str) -> Option<Value> {
        let mut shelves = self.shelves();
        let shelf = shelves.by_owner.get_mut(owner)?;
        shelf.used = Instant::now();
        let entry = shelf.entries.get(name)?;
        serde_json::from_str(&entry.json).ok()
    }

    /// Forgets the value `owner` kept under `name`; whether there was one.
    pub fn forget(&self, owner: &str, name: &str) -> bool {
        let mut guard = self.shelves();
        let shelves = &mut *guard;
        let Some(shelf) = shelves.by_owner.get_mut(owner) else {
            return false;
        };
        shelf.used = Instant::now();
        let Some(entry) = shelf.entries.remove(name) else {
            return false;
        };
        shelf.bytes -= entry.json.len();
        shelves.bytes -= entry.json.len();
        true
    }

    /// The names and sizes of what `owner` keeps, by name (never the values).
    pub fn list(&self, owner: &str) -> Vec<Listed> {
        let mut shelves = self.shelves();
        let Some(shelf) = shelves.by_owner.get_mut(owner) else {
            return Vec::new();
        };
        shelf.used = Instant::now();
        shelf
            .entries
            .iter()
            .map(|(name, entry)| Listed {
                name: name.clone(),
                bytes: entry.json.len(),
                age: entry.kept.elapsed(),
            })
            .collect()
    }

    /// `owner`'s session ended: its values go.
    pub fn end(&self, owner: &str) {
        let mut shelves = self.shelves();
        if let Some(shelf) = shelves.by_owner.remove(owner) {
            shelves.bytes -= shelf.bytes;
        }
    }

    /// The bytes kept by every session, and the sessions keeping any (for tests and metrics).
    pub fn totals(&self) -> (usize, usize) {
        let shelves = self.shelves();
        (shelves.bytes, shelves.by_owner.len())
    }

    /// A program's call of `./state` (`tool` of [`SERVER`] with `arguments`), as the value the
    /// program gets.
    pub fn call(&self, owner: &Owner, tool: &str, arguments: &Value) -> Result<Value, KeepError> {
        let owner = match owner {
            Owner::Session(key) => key,
            Owner::Refused(why) => return Err(KeepError::Refused(why.clone())),
        };
        let name = || {
            arguments
                .get("name")
                .and_then(Value::as_str)
                .ok_or_else(|| KeepError::Call(format!("{tool}(name): the name must be a string")))
        };
        match tool {
            "keep" => {
                let name = name()?;
                let value = arguments.get("value").ok_or_else(|| {
                    KeepError::Call(format!(
                        "keep(`{name}`, value): the value is missing (undefined cannot be kept; \
                         null can)"
                    ))
                })?;
                let kept = self.keep(owner, name, value)?;
                Ok(json!({"name": kept.name, "bytes": kept.bytes}))
            }
            "recall" => Ok(match self.recall(owner, name()?) {
                Some(value) => json!({"found": true, "value": value}),
                None => json!({"found": false}),
            }),
            "forget" => Ok(Value::Bool(self.forget(owner, name()?))),
            "list" => Ok(Value::Array(
                self.list(owner)
                    .into_iter()
                    .map(|listed| json!({"name": listed.name, "bytes": listed.bytes}))
                    .collect(),
            )),
            other => Err(KeepError::Call(format!(
                "`{other}` is not one of ./state's calls (keep, recall, forget, list)"
            ))),
        }
    }
}

/// `Ok` when `name` may name a kept value: it is then a file name in `/state` that no module
/// there can have (no `.`).
pub fn check_name(name: &str) -> Result<(), KeepError> {
    let fits = !name.is_empty()
        && name.len() <= MAX_NAME_BYTES
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if fits {
        Ok(())
    } else {
        Err(KeepError::BadName {
            name: name.chars().take(MAX_NAME_BYTES * 2).collect(),
        })
    }
}

/// The annotations a policy is shown for `tool` of [`SERVER`]: a keep writes (the session's
/// store, nothing outside it), a forget removes, a recall and a list only read.
pub fn annotations(tool: &str) -> Value {
    match tool {
        "keep" => {
            json!({"readOnlyHint": false, "destructiveHint": false, "idempotentHint": true, "openWorldHint": false})
        }
        "forget" => {
            json!({"readOnlyHint": false, "destructiveHint": true, "idempotentHint": true, "openWorldHint": false})
        }
        _ => json!({"readOnlyHint": true, "openWorldHint": false}),
    }
}

/// A size in the units the bounds are written in.
pub fn size(bytes: usize) -> String {
    if bytes >= 1 << 20 && bytes.is_multiple_of(1 << 20) {
        format!("{} MiB", bytes >> 20)
    } else if bytes >= 1 << 10 && bytes.is_multiple_of(1 << 10) {
        format!("{} KiB", bytes >> 10)
    } else {
        format!("{bytes} bytes")
    }
}

/// The folder of kept values in the VFS, and the module that keeps and recalls them.
pub const FOLDER: &str = "/state";

/// The source of `/state/index.<ext>`, typed for TypeScript or with JSDoc for JavaScript.
pub fn module(typescript: bool) -> String {
    // Each function: its doc, its JSDoc tags, its TypeScript and JavaScript heads, its body.
    let functions: [(&str, &[&str], &str, &str, &str); 4] = [
        (
            "Keeps `value` (JSON) under `name` (1 to 64 letters, digits, `_`, `-`), replacing \
             what was there; throws over a bound.",
            &[
                "@param {string} name",
                "@param {unknown} value",
                "@returns {Promise<Kept>}",
            ],
            "keep(name: string, value: unknown): Promise<Kept>",
            "keep(name, value)",
            "  return (await callTool(STATE, \"keep\", { name, value }))%Kept%;",
        ),
        (
            "The value kept under `name`, or `undefined` when nothing is.",
            &[
                "@template [T=unknown]",
                "@param {string} name",
                "@returns {Promise<T | undefined>}",
            ],
            "recall<T = unknown>(name: string): Promise<T | undefined>",
            "recall(name)",
            "  const got = (await callTool(STATE, \"recall\", { name }))%{ found: boolean; value?: T }%;\n  \
             return got.found ? got.value : undefined;",
        ),
        (
            "Forgets the value kept under `name`; whether there was one.",
            &["@param {string} name", "@returns {Promise<boolean>}"],
            "forget(name: string): Promise<boolean>",
            "forget(name)",
            "  return (await callTool(STATE, \"forget\", { name })) === true;",
        ),
        (
            "The names and sizes of the values kept (never the values).",
            &["@returns {Promise<Kept[]>}"],
            "kept(): Promise<Kept[]>",
            "kept()",
            "  return (await callTool(STATE, \"list\", {}))%Kept[]%;",
        ),
    ];
    let mut out = format!(
        "/**\n * Values kept in the sandbox for this client session's later programs: what one \
         execute_code\n * keeps, a later one recalls, without the data passing through the \
         model. Keep a large\n * result here and return only what you need to see.\n *\n * \
         Values are JSON (what JSON.stringify keeps). Bounds: {} a value, {} and\n * \
         {MAX_ENTRIES} values a session; a keep over a bound throws, naming it. Values last \
         as long as the\n * session, and {} unused. list_directory('/state') shows names \
         and sizes.\n */\nimport {{ callTool }} from \"runbyte:bridge\";\n\nconst STATE = \
         \"{SERVER}\";\n\n",
        size(MAX_VALUE_BYTES),
        size(MAX_SESSION_BYTES),
        idle_text(),
    );
    out.push_str(if typescript {
        "/** A kept value's name and size (its JSON's bytes). */\nexport interface Kept {\n  \
         name: string;\n  bytes: number;\n}\n"
    } else {
        "/**\n * A kept value's name and size (its JSON's bytes).\n * @typedef {object} Kept\n * \
         @property {string} name\n * @property {number} bytes\n */\n"
    });
    for (doc, tags, typed, plain, body) in functions {
        // A cast is `%type%` in the body: ` as type` in TypeScript, nothing in JavaScript.
        let mut parts = body.split('%');
        let mut body = String::new();
        let mut cast = false;
        for part in parts.by_ref() {
            match (cast, typescript) {
                (false, _) => body.push_str(part),
                (true, true) => {
                    body.push_str(" as ");
                    body.push_str(part);
                }
                (true, false) => {}
            }
            cast = !cast;
        }
        if typescript {
            let _ = write!(
                out,
                "\n/** {doc} */\nexport async function {typed} {{\n{body}\n}}\n"
            );
        } else {
            let tags: String = tags.iter().map(|tag| format!(" * {tag}\n")).collect();
            let _ = write!(
                out,
                "\n/**\n * {doc}\n{tags} */\nexport async function {plain} {{\n{body}\n}}\n"
            );
        }
    }
    out
}

fn idle_text() -> String {
    let secs = IDLE_TTL.as_secs();
    if secs.is_multiple_of(3600) {
        format!("{} h", secs / 3600)
    } else {
        format!("{} min", secs / 60)
    }
}

#[cfg(test)]
mod tests;
