//! Inferred result types: for a tool that publishes no `outputSchema`, the shape of what its
//! calls returned (see [`shape`]), merged across calls, kept per server and tool in the user's
//! state folder, and shown to the dialect as a synthesized `outputSchema` marked
//! [`INFERRED_KEY`] so that the generated module declares a useful `Result` type and says it
//! was inferred.
//!
//! A call records in microseconds: the value's shape is read within [`shape::MAX_VISITS`]
//! values outside the lock, merged under it, and nothing is written on the call's path. Only a
//! shape that changed, or a call count that reached a power of two (so "inferred from N calls"
//! stays roughly true), tells the codegen driver, which regenerates and saves after a short
//! settle: a few regenerations per tool over its whole life, never one per call.
//!
//! A recorded shape belongs to one version of its tool: its fingerprint (SHA-256 of the tool's
//! description and `inputSchema`) is kept with it, and a tool that changed starts over. A shape
//! that kept changing (more than [`MAX_CHANGES`] times) is given up: the tool's result stays
//! `unknown`.

pub mod shape;

use std::{
    collections::{BTreeMap, BTreeSet},
    path::{Path, PathBuf},
    sync::Mutex,
};

use rmcp::model::Tool;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::mpsc;

pub use shape::Shape;

use crate::config::Config;

/// The key of a synthesized `outputSchema` that says it was inferred, with the number of calls
/// it was inferred from (`{"x-runbyte-inferred": {"calls": 3}}`). The bundled dialects read it;
/// a dialect that does not know it types the result all the same.
pub const INFERRED_KEY: &str = "x-runbyte-inferred";
/// The most times a tool's shape may change before it is given up as too varied.
pub const MAX_CHANGES: u32 = 16;
/// The most tools of one server whose shapes are kept.
pub const MAX_TOOLS: usize = 256;
/// The largest state file read back.
pub const MAX_FILE_BYTES: u64 = 8 << 20;
/// The version of the state file's format; a file of another version is ignored.
const FORMAT: u32 = 1;

/// What is known of one tool's results.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Learned {
    /// The tool version it belongs to: SHA-256 (hex) of its description and `inputSchema`.
    pub fingerprint: String,
    /// Calls recorded.
    pub calls: u64,
    /// Times the shape changed after the first call.
    pub changes: u32,
    /// The merged shape; `None` once given up.
    pub shape: Option<Shape>,
}

/// One server's state file.
#[derive(Debug, Serialize, Deserialize)]
struct StateFile {
    version: u32,
    server: String,
    tools: BTreeMap<String, Learned>,
}

/// One server's tools' learned shapes.
struct ServerShapes {
    /// Where they are saved, if anywhere.
    file: Option<PathBuf>,
    tools: Mutex<BTreeMap<String, Learned>>,
}

/// Every server's inferred result shapes. One per gateway.
pub struct Inferred {
    /// Only servers with inference on have an entry.
    servers: BTreeMap<String, ServerShapes>,
    changes: mpsc::UnboundedSender<String>,
    listener: Mutex<Option<mpsc::UnboundedReceiver<String>>>,
    /// The servers whose shown shapes changed since their modules were last regenerated.
    pending: Mutex<BTreeSet<String>>,
}

impl Inferred {
    /// The shapes of the configuration's servers that infer results (`infer-results`), read
    /// back from `dir` (`None`: kept in memory only). An unreadable or corrupt file is a
    /// warning, and that server starts from nothing.
    pub fn new(config: &Config, dir: Option<&Path>) -> Self {
        let servers = config
            .enabled_servers()
            .filter(|(name, _)| config.infers_results(name))
            .map(|(name, _)| {
                let file = dir.map(|dir| dir.join(file_name(name)));
                let tools = file
                    .as_deref()
                    .map(|file| load(name, file))
                    .unwrap_or_default();
                let shapes = ServerShapes {
                    file,
                    tools: Mutex::new(tools),
                };
                (name.clone(), shapes)
            })
            .collect();
        let (changes, listener) = mpsc::unbounded_channel();
        Inferred {
            servers,
            changes,
            listener: Mutex::new(Some(listener)),
            pending: Mutex::new(BTreeSet::new()),
        }
    }

    /// The servers whose shown shapes changed, as they change; given once (to the codegen
    /// driver).
    pub fn take_changes(&self) -> Option<mpsc::UnboundedReceiver<String>> {
        self.listener.lock().ok()?.take()
    }

    /// Records what one call of `tool` (as listed, without an `outputSchema`) returned, as the
    /// program sees it. Only objects and arrays are recorded: a scalar says little, and plain
    /// text is no structure.
    pub fn record(&self, server: &str, tool: &Tool, value: &Value) {
        if tool.output_schema.is_some() || !(value.is_object() || value.is_array()) {
            return;
        }
        let Some(shapes) = self.servers.get(server) else {
            return;
        };
        let seen = Shape::of(value);
        let Ok(mut tools) = shapes.tools.lock() else {
            return;
        };
        let full = tools.len() >= MAX_TOOLS;
        let tell = match tools.get_mut(tool.name.as_ref()) {
            Some(learned) => learned.add(seen),
            None if full => false,
            None => {
                let learned = Learned {
                    fingerprint: fingerprint(tool),
                    calls: 1,
                    changes: 0,
                    shape: Some(seen),
                };
                tools.insert(tool.name.to_string(), learned);
                true
            }
        };
        drop(tools);
        if tell {
            if let Ok(mut pending) = self.pending.lock() {
                pending.insert(server.to_owned());
            }
            let _ = self.changes.send(server.to_owned());
        }
    }

    /// Whether some server's shown shapes changed and its modules are not regenerated yet.
    pub fn has_pending(&self) -> bool {
        self.pending.lock().is_ok_and(|pending| !pending.is_empty())
    }

    /// The servers whose shown shapes changed since the last call, taken (whoever takes them
    /// regenerates their modules).
    pub fn take_pending(&self) -> Vec<String> {
        self.pending
            .lock()
            .map(|mut pending| std::mem::take(&mut *pending).into_iter().collect())
            .unwrap_or_default()
    }

    /// The `outputSchema` to show for `tool` of `server`: its inferred shape as a JSON Schema
    /// marked [`INFERRED_KEY`], when it has no schema of its own and something was learned. A
    /// shape learned from another version of the tool is dropped here.
    pub fn schema_for(&self, server: &str, tool: &Tool) -> Option<serde_json::Map<String, Value>> {
        if tool.output_schema.is_some() {
            return None;
        }
        let shapes = self.servers.get(server)?;
        let mut tools = shapes.tools.lock().ok()?;
        let learned = tools.get(tool.name.as_ref())?;
        if learned.fingerprint != fingerprint(tool) {
            tracing::debug!(
                server,
                tool = %tool.name,
                "the tool changed; what was inferred of its results is dropped"
            );
            tools.remove(tool.name.as_ref());
            return None;
        }
        let shape = learned.shape.as_ref()?;
        let Value::Object(mut schema) = shape.schema() else {
            return None;
        };
        schema.insert(
            INFERRED_KEY.to_owned(),
            serde_json::json!({ "calls": learned.calls }),
        );
        Some(schema)
    }

    /// What is known of `server`'s tools (for tests and the CLI).
    pub fn learned(&self, server: &str) -> BTreeMap<String, Learned> {
        self.servers
            .get(server)
            .and_then(|shapes| shapes.tools.lock().ok().map(|tools| tools.clone()))
            .unwrap_or_default()
    }

    /// Saves `server`'s shapes to its file, atomically (a temporary file renamed over it). A
    /// failure is a warning: the shapes stay in memory.
    pub fn save(&self, server: &str) {
        let Some(shapes) = self.servers.get(server) else {
            return;
        };
        let Some(file) = &shapes.file else { return };
        let tools = match shapes.tools.lock() {
            Ok(tools) => tools.clone(),
            Err(_) => return,
        };
        let state = StateFile {
            version: FORMAT,
            server: server.to_owned(),
            tools,
        };
        if let Err(error) = write_atomically(file, &state) {
            tracing::warn!(
                server,
                file = %file.display(),
                "cannot save the inferred result types: {error}"
            );
        }
    }
}

impl Learned {
    /// Adds one call's shape; whether what is shown changed (the shape, or the call count
    /// reached a power of two).
    fn add(&mut self, seen: Shape) -> bool {
        self.calls = self.calls.saturating_add(1);
        let Some(shape) = self.shape.take() else {
            return false;
        };
        let merged = shape.clone().merge(seen);
        let changed = merged != shape;
        if changed {
            self.changes += 1;
        }
        if self.changes > MAX_CHANGES || merged == Shape::Unknown {
            // Too varied to say: given up, and the module says `unknown` again.
            self.shape = None;
            return true;
        }
        self.shape = Some(merged);
        changed || self.calls.is_power_of_two()
    }
}

/// The state folder's file for `server`: its name made path-safe, plus a hash of the real name
/// so that two names that clean up alike do not share a file.
pub(crate) fn file_name(server: &str) -> String {
    let clean: String = server
        .chars()
        .take(64)
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect();
    let digest = ring::digest::digest(&ring::digest::SHA256, server.as_bytes());
    format!("{clean}-{}.json", hex(&digest.as_ref()[..4]))
}

/// The tool version a shape belongs to: its description and `inputSchema`.
fn fingerprint(tool: &Tool) -> String {
    let mut context = ring::digest::Context::new(&ring::digest::SHA256);
    context.update(tool.description.as_deref().unwrap_or_default().as_bytes());
    context.update(&[0]);
    let schema = serde_json::to_vec(&tool.input_schema).unwrap_or_default();
    context.update(&schema);
    hex(context.finish().as_ref())
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The folder inferred shapes are kept in: `$XDG_STATE_HOME/runbyte/inferred`, else
/// `~/.local/state/runbyte/inferred`; `None` without either (they are then kept in memory).
pub fn default_dir() -> Option<PathBuf> {
    crate::dirs::user_folder(crate::dirs::Base::State, "inferred")
}

/// A server's saved shapes; nothing (with a warning) when the file is unreadable, too large,
/// corrupt, of another format or another server, or holds a shape past the bounds.
fn load(server: &str, file: &Path) -> BTreeMap<String, Learned> {
    let warn = |why: &str| {
        tracing::warn!(
            server,
            file = %file.display(),
            "ignoring the saved inferred result types: {why}"
        );
        BTreeMap::new()
    };
    let metadata = match std::fs::metadata(file) {
        Ok(metadata) => metadata,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return BTreeMap::new(),
        Err(error) => return warn(&error.to_string()),
    };
    if metadata.len() > MAX_FILE_BYTES {
        return warn(&format!(
            "it is {} bytes, over the {MAX_FILE_BYTES} read back",
            metadata.len()
        ));
    }
    let text = match std::fs::read(file) {
        Ok(text) => text,
        Err(error) => return warn(&error.to_string()),
    };
    let state: StateFile = match serde_json::from_slice(&text) {
        Ok(state) => state,
        Err(error) => return warn(&format!("not a state file: {error}")),
    };
    if state.version != FORMAT {
        return warn(&format!(
            "format {} (this Runbyte reads {FORMAT})",
            state.version
        ));
    }
    if state.server != server {
        return warn(&format!("it belongs to server `{}`", state.server));
    }
    if state.tools.len() > MAX_TOOLS {
        return warn(&format!("it has over {MAX_TOOLS} tools"));
    }
    if let Some((tool, _)) = state
        .tools
        .iter()
        .find(|(_, learned)| !learned.shape.as_ref().is_none_or(Shape::within_bounds))
    {
        return warn(&format!("the shape of tool `{tool}` is past the bounds"));
    }
    state.tools
}

fn write_atomically(file: &Path, state: &StateFile) -> std::io::Result<()> {
    let text = serde_json::to_vec(state).map_err(std::io::Error::other)?;
    crate::config::write_private(file, &text)
}

/// The servers whose tools a set of names covers, deduplicated (for the driver's settle).
pub fn drain(first: String, more: &mut mpsc::UnboundedReceiver<String>) -> BTreeSet<String> {
    let mut servers = BTreeSet::from([first]);
    while let Ok(server) = more.try_recv() {
        servers.insert(server);
    }
    servers
}

#[cfg(test)]
mod tests;
