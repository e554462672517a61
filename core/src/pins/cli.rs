//! `runbyte pins`: what is pinned and held, read from the state folder, where a gateway writes
//! the definitions it holds beside the pins (so nothing connects to a server, and a server that
//! is down can still be reviewed), or with `[server] state-store` from the store every replica
//! keeps them in. An approval rewrites the pins file (or the store's key, by a compare-and-set),
//! which a running gateway notices (see [`super`]).

use std::path::{Path, PathBuf};

use super::{Kind, PinSet, Tools, changes, diff, files, load};
use clap::Subcommand;

use crate::{audit::AuditLog, config::Config, state_store::StateStore};

/// Where the pins are kept: the state folder, or the state store (read and written on a
/// runtime of this thread alone).
enum Kept {
    Files(PathBuf),
    Store(StateStore, tokio::runtime::Runtime),
}

impl Kept {
    fn of(config: &Config) -> Result<Kept, String> {
        if let Some(url) = &config.server.state_store {
            let store = StateStore::open(url)?;
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|error| format!("cannot start a runtime for the state store: {error}"))?;
            return Ok(Kept::Store(store, runtime));
        }
        let dir = super::default_dir()
            .ok_or("no state folder: set XDG_STATE_HOME or HOME, where the pins are kept")?;
        Ok(Kept::Files(dir))
    }

    /// A server's pins and held definitions.
    fn read(&self, server: &str) -> Result<(PinSet, PinSet), String> {
        match self {
            Kept::Files(dir) => read(dir, server),
            Kept::Store(store, runtime) => runtime
                .block_on(super::read_store(store, server))
                .map(|(pinned, pending, _)| (pinned, pending)),
        }
    }

    /// Reads a server's pins and held definitions, lets `change` change them and writes them
    /// back, losing nothing another writer wrote meanwhile (under the server's lock, or by a
    /// compare-and-set that runs `change` again after another writer).
    fn update<R>(
        &self,
        server: &str,
        change: impl FnMut(&mut PinSet, &mut PinSet) -> R,
    ) -> Result<R, String> {
        match self {
            Kept::Files(dir) => super::update(server, &files(dir, server), change),
            Kept::Store(store, runtime) => {
                runtime.block_on(super::update_stored(store, server, change))
            }
        }
    }

    /// Forgets a server's pins.
    fn reset(&self, server: &str) -> Result<(), String> {
        match self {
            Kept::Files(dir) => {
                let files = files(dir, server);
                let _lock = super::lock(&files.0).map_err(|e| write_error(&files.0, e))?;
                for file in <[PathBuf; 2]>::from(files.clone()) {
                    match std::fs::remove_file(&file) {
                        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                            return Err(write_error(&file, e));
                        }
                        _ => {}
                    }
                }
                Ok(())
            }
            Kept::Store(store, runtime) => runtime
                .block_on(store.forget_pins(server))
                .map_err(|error| error.to_string()),
        }
    }
}

/// Prints what a server's definition may hold (escapes included) harmlessly.
fn say(text: &str) {
    println!("{}", crate::text::terminal(text, true));
}

/// What `runbyte pins` does. It reads and writes the pins in the state folder, where a
/// gateway keeps the definitions it holds: no server is connected to.
#[derive(Subcommand, Debug)]
pub enum PinsAction {
    /// Each server's pinned tools, and those held: changed or new.
    List,
    /// What changed in a held tool (every held tool of the server without TOOL).
    Diff {
        server: String,
        tool: Option<String>,
    },
    /// Pin a held tool's current definition (or every held tool's, with --all).
    Approve {
        server: String,
        tool: Option<String>,
        #[arg(long, conflicts_with = "tool")]
        all: bool,
    },
    /// Forget a server's pins: its next listing is pinned anew, as a first one.
    Reset { server: String },
}

/// Runs `runbyte pins ACTION`.
pub fn main(config: &Config, action: &PinsAction) -> Result<(), String> {
    let kept = Kept::of(config)?;
    match action {
        PinsAction::List => {
            for (server, _) in config.enabled_servers() {
                let (pinned, pending) = kept.read(server)?;
                let mode = config.servers[server].pin.unwrap_or_default();
                say(&format!(
                    "{server} (pin = \"{}\")",
                    format!("{mode:?}").to_lowercase()
                ));
                if pinned.is_empty() && pending.is_empty() {
                    say("  nothing pinned yet");
                }
                for kind in Kind::ALL {
                    let empty = Tools::new();
                    let pinned = pinned.kind(kind).unwrap_or(&empty);
                    let pending = pending.kind(kind).unwrap_or(&empty);
                    for name in pinned
                        .keys()
                        .chain(pending.keys().filter(|name| !pinned.contains_key(*name)))
                    {
                        let state = match (pinned.get(name), pending.get(name)) {
                            (Some(old), Some(new)) => format!(
                                "changed: {}",
                                changes(&old.definition, &new.definition).join(", ")
                            ),
                            (None, Some(_)) => "new".to_owned(),
                            _ => "pinned".to_owned(),
                        };
                        say(&format!("  {:<28} {state}", labelled(kind, name)));
                    }
                }
            }
            Ok(())
        }
        PinsAction::Diff { server, tool } => {
            known(config, server)?;
            let (pinned, pending) = kept.read(server)?;
            for (kind, name) in chosen(server, &pending, tool.as_deref(), true)? {
                let Some(new) = pending.kind(kind).and_then(|held| held.get(&name)) else {
                    continue;
                };
                let what = labelled(kind, &format!("{server}/{name}"));
                match pinned.kind(kind).and_then(|pins| pins.get(&name)) {
                    Some(old) => {
                        say(&format!("{what}: pinned → current"));
                        say(diff(&old.definition, &new.definition).trim_end());
                    }
                    None => {
                        say(&format!("{what}: new, not pinned; its definition:"));
                        say(&serde_json::to_string_pretty(&new.definition).unwrap_or_default());
                    }
                }
            }
            Ok(())
        }
        PinsAction::Approve { server, tool, all } => {
            known(config, server)?;
            let audit = AuditLog::from_config(config)?;
            // Under the server's lock, or by a compare-and-set: a gateway re-pinning meanwhile
            // loses nothing, nor this. (With a store, this runs again if another writer came
            // first, so it is audited once, after.)
            let approved = kept.update(server, |pinned, pending| {
                let names = chosen(server, pending, tool.as_deref(), *all)?;
                let mut approved = Vec::new();
                for (kind, name) in names {
                    let Some(pin) = pending
                        .kind_mut(kind)
                        .as_mut()
                        .and_then(|p| p.remove(&name))
                    else {
                        continue;
                    };
                    let pins = pinned.kind_mut(kind).get_or_insert_default();
                    let change = match pins.get(&name) {
                        Some(old) => changes(&old.definition, &pin.definition).join(", "),
                        None => "new".to_owned(),
                    };
                    pins.insert(name.clone(), pin);
                    approved.push((kind, name, change));
                }
                Ok::<_, String>(approved)
            })??;
            if let Some(audit) = &audit {
                let by = approver();
                for (_, name, change) in &approved {
                    audit.pin_by(server, name, "approved", change, Some(&by));
                }
            }
            let names: Vec<String> = approved
                .iter()
                .map(|(kind, name, _)| labelled(*kind, name))
                .collect();
            say(&format!("approved {}: {}", server, names.join(", ")));
            Ok(())
        }
        PinsAction::Reset { server } => {
            known(config, server)?;
            kept.reset(server)?;
            if let Some(audit) = AuditLog::from_config(config)? {
                audit.pin(server, "*", "reset", "");
            }
            say(&format!(
                "forgot the pins of {server}: its next listing is pinned anew"
            ));
            Ok(())
        }
    }
}

fn known(config: &Config, server: &str) -> Result<(), String> {
    if config.servers.contains_key(server) {
        return Ok(());
    }
    let names: Vec<&str> = config.servers.keys().map(String::as_str).collect();
    Err(format!(
        "unknown server `{server}`; the servers are: {}",
        names.join(", ")
    ))
}

/// A server's pins and held definitions.
fn read(dir: &Path, server: &str) -> Result<(PinSet, PinSet), String> {
    let (pins_file, pending_file) = files(dir, server);
    let read = |file: &Path| {
        load(server, file)
            .map(|loaded| loaded.map(PinSet::of_file).unwrap_or_default())
            .map_err(|why| format!("cannot read {}: {why}", file.display()))
    };
    Ok((read(&pins_file)?, read(&pending_file)?))
}

/// A tool's name as it is, a prompt's or template's with its kind before it.
fn labelled(kind: Kind, name: &str) -> String {
    match kind {
        Kind::Tool => name.to_owned(),
        kind => format!("{} {name}", kind.told()),
    }
}

/// The held definitions an action is about: those named `tool` (a tool, a prompt or a
/// template of that name), or all of them when `all`.
fn chosen(
    server: &str,
    pending: &PinSet,
    tool: Option<&str>,
    all: bool,
) -> Result<Vec<(Kind, String)>, String> {
    let held: Vec<(Kind, String)> = Kind::ALL
        .iter()
        .flat_map(|kind| {
            pending
                .kind(*kind)
                .into_iter()
                .flat_map(|held| held.keys().map(|name| (*kind, name.clone())))
        })
        .collect();
    match tool {
        Some(tool) => {
            let named: Vec<(Kind, String)> =
                held.into_iter().filter(|(_, name)| name == tool).collect();
            if named.is_empty() {
                return Err(format!(
                    "`{server}/{tool}` is not held (nothing to review; `runbyte pins list` shows what is)"
                ));
            }
            Ok(named)
        }
        None if all && !held.is_empty() => Ok(held),
        None if all => Err(format!("nothing of `{server}` is held")),
        None => Err("name the tool to approve, or pass --all".to_owned()),
    }
}

fn write_error(file: &Path, error: std::io::Error) -> String {
    format!("cannot write {}: {error}", file.display())
}

/// Who approves from the command line, for the audit line: the command, and the account it
/// runs as (as the environment names it: `USER`, `USERNAME` on Windows, `LOGNAME`).
fn approver() -> serde_json::Value {
    let user = ["USER", "USERNAME", "LOGNAME"]
        .iter()
        .find_map(|name| std::env::var(name).ok().filter(|user| !user.is_empty()));
    serde_json::json!({"via": "runbyte pins approve", "user": user})
}
