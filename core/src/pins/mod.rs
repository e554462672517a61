//! Tool definition pins: what the model was shown is what runs. The first time Runbyte sees a
//! server's tools it records each definition (name, title, description, input and output
//! schemas, annotations) and its digest (SHA-256 of the canonical JSON: keys sorted), per server
//! in the state folder (`$XDG_STATE_HOME/runbyte/pins`, private files written atomically, as
//! the inferred shapes are). A later listing is judged against them by the server's `pin`:
//!
//! - `hold` (the default): a tool whose definition changed, and a new tool unless `new-tools =
//!   "allow"`, is held: left out of the list the Hub keeps (so absent from the VFS, search and
//!   direct tools) and refused by name with what changed and the command that approves it. The
//!   held definitions are written beside the pins (`<server>.pending.json`) so that `runbyte
//!   pins diff` and `approve` work without connecting to the server.
//! - `ask`: a changed tool stays listed under its pinned definition (a new one by name only,
//!   [`NEW_TOOL`], with a schema that takes any object), so that a program can still import it;
//!   its first call asks the user, through the execution's client, to approve the new definition
//!   ([`Pins::asking`]; the call path asks, `crate::execute`), and an approval re-pins it
//!   ([`Pins::approve`]). Unapproved, the call is refused as under `hold`.
//! - `warn`: the new definition is served, a WARN and an audit line name the change, and it is
//!   pinned.
//! - `off`: nothing is pinned.
//!
//! The CLI approves by rewriting the pins file; a running gateway sees the file change (its
//! modification time and size, polled, and checked again before a held call is refused) and
//! lists that server's tools again.

// `runbyte pins` prints its answers.
#[allow(clippy::print_stdout)]
pub mod cli;

use std::{
    collections::{BTreeMap, BTreeSet},
    path::{Path, PathBuf},
    sync::Mutex,
    time::SystemTime,
};

use rmcp::model::Tool;
use runbyte_plugin_api::wire::PinState;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{
    audit::AuditLog,
    config::{Config, NewTools, PinMode},
};

/// The fields of a tool definition that are pinned, as named in a listing, with how a change
/// of each is told.
pub const FIELDS: [(&str, &str); 6] = [
    ("name", "name"),
    ("title", "title"),
    ("description", "description"),
    ("inputSchema", "input schema"),
    ("outputSchema", "output schema"),
    ("annotations", "annotations"),
];
/// The largest pins or pending file read back.
pub const MAX_FILE_BYTES: u64 = 16 << 20;
/// The version of the files' format; a file of another version is ignored.
const FORMAT: u32 = 1;
/// What a tool new since the first listing is described as under `pin = "ask"`, until a person
/// approves its definition: none of its own text reaches the model before then.
pub const NEW_TOOL: &str = "New tool, not yet approved: calling it asks the user to approve its \
                            definition first.";

/// One pinned (or pending) definition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Pin {
    /// SHA-256 (hex) of the canonical definition.
    pub digest: String,
    /// The definition's pinned fields.
    pub definition: Value,
}

impl Pin {
    /// The pin of `tool` as listed.
    pub fn of(tool: &Tool) -> Pin {
        let definition = definition(tool);
        Pin {
            digest: digest(&definition),
            definition,
        }
    }
}

/// One server's pins file (and, of the same shape, its pending file).
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct PinFile {
    pub version: u32,
    pub server: String,
    pub tools: BTreeMap<String, Pin>,
}

/// A tool left out of a listing by its pin, with the message a call to it is refused with.
#[derive(Debug, Clone, PartialEq)]
pub struct Held {
    pub tool: String,
    pub message: String,
}

/// A tool listed under `pin = "ask"` whose definition awaits a person's approval: what was
/// pinned (`None`: it is new), what the server lists now, and the message a call is refused
/// with when nobody approves it.
#[derive(Debug, Clone, PartialEq)]
pub struct Asked {
    pub pinned: Option<Pin>,
    pub new: Pin,
    pub message: String,
}

impl Asked {
    /// What the listing shows in its place: the pinned definition, or for a new tool its name,
    /// [`NEW_TOOL`] and a schema that takes any object.
    pub fn shown(&self, name: &str) -> Value {
        match &self.pinned {
            Some(pin) => pin.definition.clone(),
            None => serde_json::json!({
                "name": name,
                "description": NEW_TOOL,
                "inputSchema": {"type": "object"},
            }),
        }
    }
}

/// `tool` with its pinned fields replaced by `shown`'s: a changed tool keeps what is not pinned
/// (its icons, its `_meta`); a new one (`pinned` false) keeps nothing but what `shown` has.
fn shown_as(tool: Tool, shown: &Value, pinned: bool) -> Tool {
    let fallback = || {
        let schema = serde_json::Map::from_iter([("type".to_owned(), Value::from("object"))]);
        Tool::new(tool.name.clone(), NEW_TOOL, std::sync::Arc::new(schema))
    };
    let mut listed = match pinned {
        true => serde_json::to_value(&tool).unwrap_or_default(),
        false => Value::Object(Default::default()),
    };
    let (Value::Object(listed_fields), Value::Object(shown)) = (&mut listed, shown) else {
        return fallback();
    };
    for (field, _) in FIELDS {
        listed_fields.remove(field);
    }
    listed_fields.extend(shown.clone());
    serde_json::from_value(listed).unwrap_or_else(|_| fallback())
}

/// The pinned fields of a tool: those it has, as listed.
pub fn definition(tool: &Tool) -> Value {
    let listed = serde_json::to_value(tool).unwrap_or_default();
    let mut picked = serde_json::Map::new();
    for (field, _) in FIELDS {
        if let Some(value) = listed.get(field).filter(|value| !value.is_null()) {
            picked.insert(field.to_owned(), value.clone());
        }
    }
    Value::Object(picked)
}

/// SHA-256 (hex) of `value`'s canonical JSON: object keys sorted at every depth, no spaces.
pub fn digest(value: &Value) -> String {
    let mut text = String::new();
    canonical(value, &mut text);
    let digest = ring::digest::digest(&ring::digest::SHA256, text.as_bytes());
    crate::infer::hex(digest.as_ref())
}

fn canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                canonical(&map[key], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                canonical(item, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

/// Which pinned fields differ between two definitions, as a reader names them.
pub fn changes(old: &Value, new: &Value) -> Vec<&'static str> {
    FIELDS
        .iter()
        .filter(|(field, _)| {
            let (a, b) = (old.get(field), new.get(field));
            a.map(digest) != b.map(digest)
        })
        .map(|(_, told)| *told)
        .collect()
}

/// A readable diff of two definitions: each changed field, its old and new text.
pub fn diff(old: &Value, new: &Value) -> String {
    let mut out = String::new();
    for (field, told) in FIELDS {
        let (a, b) = (old.get(field), new.get(field));
        if a.map(digest) == b.map(digest) {
            continue;
        }
        let show = |value: Option<&Value>| match value {
            None => "(absent)".to_owned(),
            Some(Value::String(text)) => text.clone(),
            Some(value) => serde_json::to_string_pretty(value).unwrap_or_default(),
        };
        out.push_str(&format!("{told} changed\n"));
        for line in show(a).lines() {
            out.push_str(&format!("  - {line}\n"));
        }
        for line in show(b).lines() {
            out.push_str(&format!("  + {line}\n"));
        }
    }
    out
}

/// The folder pins are kept in: `$XDG_STATE_HOME/runbyte/pins`, else
/// `~/.local/state/runbyte/pins`; `None` without either (they are then kept in memory).
pub fn default_dir() -> Option<PathBuf> {
    crate::dirs::user_folder(crate::dirs::Base::State, "pins")
}

/// `server`'s pins file and pending file in `dir`.
pub fn files(dir: &Path, server: &str) -> (PathBuf, PathBuf) {
    let name = crate::infer::file_name(server);
    let stem = name.trim_end_matches(".json");
    (dir.join(&name), dir.join(format!("{stem}.pending.json")))
}

/// A pins or pending file; `Ok(None)` when there is none, `Err` when it cannot be read as one
/// of `server`'s.
pub fn load(server: &str, file: &Path) -> Result<Option<PinFile>, String> {
    let metadata = match std::fs::symlink_metadata(file) {
        Ok(metadata) => metadata,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(error.to_string()),
    };
    if metadata.len() > MAX_FILE_BYTES {
        return Err(format!(
            "it is {} bytes, over the {MAX_FILE_BYTES} read back",
            metadata.len()
        ));
    }
    let text = match crate::config::read_private(file, "the pins file") {
        Ok(Ok(text)) => text,
        Ok(Err(why)) => return Err(why),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(error.to_string()),
    };
    let pins: PinFile =
        serde_json::from_str(&text).map_err(|error| format!("not a pins file: {error}"))?;
    if pins.version != FORMAT {
        return Err(format!(
            "format {} (this Runbyte reads {FORMAT})",
            pins.version
        ));
    }
    if pins.server != server {
        return Err(format!("it belongs to server `{}`", pins.server));
    }
    Ok(Some(pins))
}

/// Writes `server`'s `tools` to `file`, privately and atomically; an empty pending file is
/// removed instead.
pub fn save(server: &str, file: &Path, tools: &BTreeMap<String, Pin>) -> std::io::Result<()> {
    let pins = PinFile {
        version: FORMAT,
        server: server.to_owned(),
        tools: tools.clone(),
    };
    let text = serde_json::to_vec_pretty(&pins).map_err(std::io::Error::other)?;
    crate::config::write_private(file, &text)
}

/// What identifies a version of a file on disk: its modification time and size.
type Stamp = Option<(SystemTime, u64)>;

fn stamp(file: &Path) -> Stamp {
    let metadata = std::fs::symlink_metadata(file).ok()?;
    Some((metadata.modified().ok()?, metadata.len()))
}

/// One server's pins as the gateway holds them.
struct ServerPins {
    mode: PinMode,
    new_tools: Option<NewTools>,
    files: Option<(PathBuf, PathBuf)>,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// `None` until the server's first listing is pinned (or after `runbyte pins reset`).
    pins: Option<BTreeMap<String, Pin>>,
    /// The pins file as last read or written.
    stamp: Stamp,
    /// The held definitions already told (logged and audited), by tool and digest.
    told: BTreeMap<String, String>,
    /// Under `ask`: the tools listed as pinned whose definition awaits a person.
    asking: BTreeMap<String, Asked>,
    /// The tools whose definition a person approved while this process runs (`runbyte pins
    /// approve`, seen in the pins file, or an answer to `ask`).
    approved: BTreeSet<String>,
    /// The tools served by `warn` with a definition no person approved.
    warned: BTreeSet<String>,
}

/// Every server's pins. One per Hub.
pub struct Pins {
    servers: BTreeMap<String, ServerPins>,
    audit: Option<AuditLog>,
}

impl Pins {
    /// The pins of the configuration's servers, kept in `dir` (`None`: in memory only).
    pub fn new(config: &Config, dir: Option<&Path>, audit: Option<AuditLog>) -> Self {
        let servers = config
            .enabled_servers()
            .map(|(name, server)| {
                let pins = ServerPins {
                    mode: server.pin.unwrap_or_default(),
                    new_tools: server.new_tools,
                    files: dir.map(|dir| files(dir, name)),
                    state: Mutex::new(State::default()),
                };
                (name.clone(), pins)
            })
            .collect();
        Pins { servers, audit }
    }

    /// Whether `server`'s pins file changed on disk since it was last read or written.
    pub fn changed_on_disk(&self, server: &str) -> bool {
        let Some(pins) = self.servers.get(server) else {
            return false;
        };
        let Some((file, _)) = &pins.files else {
            return false;
        };
        let now = stamp(file);
        pins.state.lock().is_ok_and(|state| state.stamp != now)
    }

    /// Judges a listing of `server`'s `tools` against its pins: the tools served, and those held.
    pub fn judge(&self, server: &str, tools: Vec<Tool>) -> (Vec<Tool>, Vec<Held>) {
        let Some(pins) = self.servers.get(server) else {
            return (tools, Vec::new());
        };
        if pins.mode == PinMode::Off {
            return (tools, Vec::new());
        }
        let Ok(mut state) = pins.state.lock() else {
            return (tools, Vec::new());
        };
        if let Some((file, _)) = &pins.files {
            let now = stamp(file);
            if state.pins.is_none() || state.stamp != now {
                match load(server, file) {
                    Ok(loaded) => state.pins = loaded.map(|file| file.tools),
                    Err(why) => {
                        // Fail closed: every tool is held until a person approves or resets.
                        tracing::warn!(
                            server,
                            file = %file.display(),
                            "cannot read the tool pins: {why}; every tool is held until \
                             `runbyte pins approve {server} --all` or `runbyte pins reset {server}`"
                        );
                        state.pins = Some(BTreeMap::new());
                    }
                }
                state.stamp = now;
            }
        }
        let first = state.pins.is_none();
        let mut pinned = state.pins.take().unwrap_or_default();
        let mut repinned = first;
        let (mut served, mut held, mut pending) = (Vec::new(), Vec::new(), BTreeMap::new());
        let mut asking = BTreeMap::new();
        for tool in tools {
            let name = tool.name.to_string();
            let pin = Pin::of(&tool);
            let change = match pinned.get(&name) {
                Some(old) if old.digest == pin.digest => {
                    if state.told.get(&name) == Some(&pin.digest) {
                        // Held (or asked) with this definition, pinned since: a person approved.
                        state.told.remove(&name);
                        state.approved.insert(name.clone());
                    }
                    served.push(tool);
                    continue;
                }
                Some(old) => changes(&old.definition, &pin.definition).join(", "),
                None if first || pins.new_tools == Some(NewTools::Allow) => {
                    pinned.insert(name, pin);
                    repinned = true;
                    served.push(tool);
                    continue;
                }
                None => "it is new since the first listing".to_owned(),
            };
            let news = state.told.get(&name) != Some(&pin.digest);
            if pins.mode == PinMode::Warn {
                if news {
                    tracing::warn!(
                        server,
                        tool = %name,
                        "tool `{server}/{name}` changed ({change}); served all the same \
                         (`pin = \"warn\"`)"
                    );
                    self.audit(server, &name, "warned", &change);
                }
                state.approved.remove(&name);
                state.warned.insert(name.clone());
                pinned.insert(name, pin);
                repinned = true;
                served.push(tool);
                continue;
            }
            let what = if pinned.contains_key(&name) {
                format!("its {change} changed since it was pinned")
            } else {
                change.clone()
            };
            let message = format!(
                "tool `{name}` of server `{server}` is held: {what}; a person must review \
                 the change (`runbyte pins diff {server} {name}`) and approve it with \
                 `runbyte pins approve {server} {name}`"
            );
            if pins.mode == PinMode::Ask {
                if news {
                    let listed = match pinned.contains_key(&name) {
                        true => format!("its {change} changed; listed as pinned"),
                        false => format!("{change}; listed by name only"),
                    };
                    tracing::warn!(
                        server,
                        tool = %name,
                        "tool `{server}/{name}`: {listed}, its first call asks the user \
                         (`pin = \"ask\"`)"
                    );
                    self.audit(server, &name, "asking", &change);
                    state.told.insert(name.clone(), pin.digest.clone());
                }
                let asked = Asked {
                    pinned: pinned.get(&name).cloned(),
                    new: pin.clone(),
                    message,
                };
                served.push(shown_as(tool, &asked.shown(&name), asked.pinned.is_some()));
                asking.insert(name.clone(), asked);
                pending.insert(name, pin);
                continue;
            }
            if news {
                tracing::warn!(server, tool = %name, "{message}");
                self.audit(server, &name, "held", &change);
                state.told.insert(name.clone(), pin.digest.clone());
            }
            held.push(Held {
                tool: name.clone(),
                message,
            });
            pending.insert(name, pin);
        }
        if let Some((file, pending_file)) = &pins.files {
            if repinned {
                match save(server, file, &pinned) {
                    Ok(()) => state.stamp = stamp(file),
                    Err(error) => tracing::warn!(
                        server,
                        file = %file.display(),
                        "cannot save the tool pins: {error}"
                    ),
                }
            }
            let written = if pending.is_empty() {
                match std::fs::remove_file(pending_file) {
                    Err(error) if error.kind() != std::io::ErrorKind::NotFound => Err(error),
                    _ => Ok(()),
                }
            } else {
                save(server, pending_file, &pending)
            };
            if let Err(error) = written {
                tracing::warn!(
                    server,
                    file = %pending_file.display(),
                    "cannot save the held tool definitions: {error}"
                );
            }
        }
        state.pins = Some(pinned);
        state.asking = asking;
        (served, held)
    }

    /// The tool of `server` listed under `pin = "ask"` whose definition awaits a person, if
    /// `tool` is one.
    pub fn asking(&self, server: &str, tool: &str) -> Option<Asked> {
        let pins = self.servers.get(server)?;
        let state = pins.state.lock().ok()?;
        state.asking.get(tool).cloned()
    }

    /// Whether some tool of `server` awaits a person under `pin = "ask"`.
    pub fn has_asking(&self, server: &str) -> bool {
        self.servers
            .get(server)
            .and_then(|pins| pins.state.lock().ok())
            .is_some_and(|state| !state.asking.is_empty())
    }

    /// How `server`'s `tool` as last listed stands against its pin, as a policy is told. Pins
    /// kept in memory only (no state folder: `runbyte exec`) are trust on first use within one
    /// run, so they read as `Unpinned`, unless a person approved the tool in this run.
    pub fn state(&self, server: &str, tool: &str) -> PinState {
        let Some(pins) = self.servers.get(server) else {
            return PinState::Unpinned;
        };
        if pins.mode == PinMode::Off {
            return PinState::Unpinned;
        }
        let Ok(state) = pins.state.lock() else {
            return PinState::Unpinned;
        };
        let pinned = state
            .pins
            .as_ref()
            .is_some_and(|pins| pins.contains_key(tool));
        if !pinned || state.asking.contains_key(tool) {
            PinState::Unpinned
        } else if state.approved.contains(tool) {
            PinState::Approved
        } else if pins.files.is_none() {
            PinState::Unpinned
        } else if state.warned.contains(tool) {
            PinState::Changed
        } else {
            PinState::Pinned
        }
    }

    /// Re-pins `server`'s `tool` to `pin`, approved by a person: in memory and in the pins file
    /// (read again first if it changed on disk, so that an approval written there meanwhile is
    /// kept), its held definition dropped from the pending file, and the approval audited. The
    /// caller lists the server's tools again to serve it.
    pub fn approve(&self, server: &str, tool: &str, pin: &Pin) -> Result<(), String> {
        let pins = self
            .servers
            .get(server)
            .ok_or_else(|| format!("unknown server `{server}`"))?;
        let mut state = pins
            .state
            .lock()
            .map_err(|_| "the pins' lock was poisoned".to_owned())?;
        if let Some((file, _)) = &pins.files
            && state.stamp != stamp(file)
        {
            state.pins = load(server, file)?.map(|file| file.tools);
        }
        let mut pinned = state.pins.take().unwrap_or_default();
        let change = match pinned.get(tool) {
            Some(old) => changes(&old.definition, &pin.definition).join(", "),
            None => "new".to_owned(),
        };
        pinned.insert(tool.to_owned(), pin.clone());
        let saved = match &pins.files {
            Some((file, pending_file)) => {
                let saved = save(server, file, &pinned)
                    .map_err(|error| format!("cannot save {}: {error}", file.display()));
                state.stamp = stamp(file);
                if let Ok(Some(mut pending)) = load(server, pending_file)
                    && pending.tools.remove(tool).is_some()
                {
                    let written = if pending.tools.is_empty() {
                        std::fs::remove_file(pending_file)
                    } else {
                        save(server, pending_file, &pending.tools)
                    };
                    if let Err(error) = written {
                        tracing::warn!(server, "cannot update the held definitions: {error}");
                    }
                }
                saved
            }
            None => Ok(()),
        };
        state.pins = Some(pinned);
        state.asking.remove(tool);
        state.told.remove(tool);
        state.warned.remove(tool);
        state.approved.insert(tool.to_owned());
        drop(state);
        tracing::info!(
            server,
            tool,
            "a person approved the definition of `{server}/{tool}`"
        );
        self.audit(server, tool, "approved", &change);
        saved
    }

    fn audit(&self, server: &str, tool: &str, action: &str, change: &str) {
        if let Some(audit) = &self.audit {
            audit.pin(server, tool, action, change);
        }
    }
}

#[cfg(test)]
mod ask_tests;
#[cfg(test)]
mod tests;
