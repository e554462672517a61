//! `runbyte setup CLIENT`: puts Runbyte in an MCP client's configuration and, with
//! `--move-servers`, moves the servers configured there into `runbyte.toml`, so that the client
//! sees Runbyte alone.
//!
//! The client's file is edited in place ([`jsonc`]): only the `runbyte` entry and the moved
//! entries change, its other keys, order, comments and layout stay. Moved servers are appended
//! to `runbyte.toml` as `[servers.*]` tables (its own text untouched above them). A run that
//! would change nothing says so; otherwise every file it changes is first backed up
//! ([`backup`]), then written atomically (a temporary file renamed over it, keeping its mode),
//! `runbyte.toml` before the client's file. `--dry-run` prints the diffs instead;
//! `--undo` puts the last run's files back byte for byte.

mod backup;
mod jsonc;

use std::{
    path::{Path, PathBuf},
    process::ExitCode,
};

use serde_json::{Map, Value, json};

use crate::os_paths::{Client, Os};

/// The largest client file read (Claude Code's `~/.claude.json` holds its history too).
const MAX_CLIENT_FILE_BYTES: u64 = 64 << 20;

/// The name of Runbyte's own entry in a client's servers.
pub const ENTRY: &str = "runbyte";

/// What `runbyte setup` was asked.
#[derive(Debug, Default)]
pub struct Options {
    /// The client (required unless `undo`).
    pub client: Option<Client>,
    /// The client's file, instead of its usual place.
    pub config_file: Option<PathBuf>,
    /// The `runbyte.toml` the client's entry names (default: the user's own).
    pub runbyte_config: Option<PathBuf>,
    /// Move the client's servers into `runbyte.toml`.
    pub move_servers: bool,
    /// Print the diffs, change nothing.
    pub dry_run: bool,
    /// Put the last run's files back.
    pub undo: bool,
    /// With `undo`: restore files changed since setup too.
    pub force: bool,
}

/// Runs `runbyte setup`.
pub fn main(options: Options) -> ExitCode {
    let outcome = if options.undo {
        undo(options.client, options.force)
    } else {
        match options.client {
            Some(client) => setup(client, &options),
            None => Err(format!(
                "name the client: {}",
                Client::ALL.map(Client::id).join(", ")
            )),
        }
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("error: {}", crate::text::terminal(&message, true));
            ExitCode::FAILURE
        }
    }
}

fn say(line: &str) {
    println!("{}", crate::text::terminal(line, true));
}

/// The client's file on this machine (its usual place), or `None` without a home folder.
pub fn client_file(client: Client) -> Option<PathBuf> {
    client.config_file(Os::CURRENT, &crate::os_paths::process_env)
}

/// How clients should start Runbyte: a command and the arguments before `serve`.
///
/// `RUNBYTE_LAUNCH` (words separated by spaces) when set: the npm shim sets `npx -y runbyte`.
/// Else, when the binary runs from uv's cache (`uvx runbyte`), `uvx runbyte`; from npx's cache,
/// `npx -y runbyte`: those paths change with each version, the commands do not. Else the
/// binary's own absolute path.
pub fn launcher() -> Result<(String, Vec<String>), String> {
    if let Some(launch) = crate::os_paths::process_env("RUNBYTE_LAUNCH") {
        let launch = launch.to_string_lossy().into_owned();
        let mut words = launch.split_whitespace().map(str::to_owned);
        if let Some(command) = words.next() {
            return Ok((command, words.collect()));
        }
    }
    let exe =
        std::env::current_exe().map_err(|e| format!("cannot tell where this runbyte is: {e}"))?;
    let exe = exe.canonicalize().unwrap_or(exe);
    Ok(launcher_for(&exe))
}

/// [`launcher`] for a binary at `exe`, without the environment.
fn launcher_for(exe: &Path) -> (String, Vec<String>) {
    let names: Vec<String> = exe
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    let in_uv_cache = names.iter().enumerate().any(|(i, name)| {
        (name.starts_with("archive-v") || name.starts_with("builds-v"))
            && names[..i].iter().any(|n| n == "uv")
    });
    if in_uv_cache {
        return ("uvx".to_owned(), vec!["runbyte".to_owned()]);
    }
    if names.iter().any(|name| name == "_npx") {
        return (
            "npx".to_owned(),
            vec!["-y".to_owned(), "runbyte".to_owned()],
        );
    }
    (exe.display().to_string(), Vec::new())
}

/// A client's file read as JSON with comments (an empty file is `{}`).
pub fn jsonc_value(text: &str) -> Result<Value, String> {
    let parsed = jsonc::parse(text).map_err(|e| e.to_string())?;
    Ok(parsed.root.map_or_else(|| json!({}), |root| root.value))
}

/// The entry that starts Runbyte in `client`'s format.
fn runbyte_entry(client: Client, launcher: &(String, Vec<String>), toml: &Path) -> Value {
    let mut args: Vec<Value> = launcher.1.iter().cloned().map(Value::from).collect();
    args.extend(["serve", "--config"].map(Value::from));
    args.push(Value::from(toml.display().to_string()));
    let mut entry = Map::new();
    if matches!(client, Client::ClaudeCode | Client::Vscode) {
        entry.insert("type".into(), json!("stdio"));
    }
    entry.insert("command".into(), json!(launcher.0));
    entry.insert("args".into(), Value::Array(args));
    Value::Object(entry)
}

/// Whether a client's entry starts Runbyte (by any name): its command is a `runbyte` binary, or
/// `npx`/`uvx`/`pipx` of the `runbyte` package.
pub fn starts_runbyte(entry: &Value) -> bool {
    let Some(command) = entry.get("command").and_then(Value::as_str) else {
        return false;
    };
    // Either separator: a Windows path reads the same on every OS.
    let program = command
        .rsplit(['/', '\\'])
        .next()
        .unwrap_or(command)
        .to_lowercase();
    let program = [".exe", ".cmd", ".bat"]
        .iter()
        .find_map(|ext| program.strip_suffix(ext))
        .unwrap_or(&program);
    if program == "runbyte" {
        return true;
    }
    let args = entry.get("args").and_then(Value::as_array);
    matches!(program, "npx" | "uvx" | "pipx" | "bunx" | "pnpx" | "cmd")
        && args
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .any(|arg| {
                arg == "runbyte" || arg.starts_with("runbyte@") || arg.starts_with("runbyte==")
            })
}

/// The `--config` an entry that starts Runbyte passes, if any.
pub fn entry_config(entry: &Value) -> Option<PathBuf> {
    let args: Vec<&str> = entry
        .get("args")?
        .as_array()?
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let at = args
        .iter()
        .position(|arg| *arg == "--config" || *arg == "-c")?;
    args.get(at + 1).map(PathBuf::from)
}

/// A client's `${…}` in a string, rewritten as `runbyte.toml` reads it: Claude Code's `${VAR}`
/// and `${VAR:-default}` are Runbyte's own; VS Code's, Cursor's and Windsurf's `${env:VAR}`
/// become `${VAR}`; Claude Desktop fills nothing in, so its `${` is kept literal (`$${`). Any
/// other variable (`${input:…}`, `${workspaceFolder}`) only the client can fill in: an error.
fn translate(client: Client, text: &str) -> Result<String, String> {
    if client == Client::ClaudeDesktop {
        return Ok(text.replace("${", "$${"));
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("${") {
        out.push_str(&rest[..at]);
        let after = &rest[at + 2..];
        let Some(close) = after.find('}') else {
            return Err(format!("`{text}` has a `${{` that is never closed"));
        };
        let inside = &after[..close];
        let name_ok = |name: &str| {
            let mut chars = name.chars();
            chars
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        };
        let kept = match client {
            Client::ClaudeCode => {
                let name = inside.split_once(":-").map_or(inside, |(name, _)| name);
                name_ok(name).then(|| inside.to_owned())
            }
            _ => inside
                .strip_prefix("env:")
                .filter(|name| name_ok(name))
                .map(str::to_owned),
        };
        let Some(kept) = kept else {
            return Err(format!(
                "uses `${{{inside}}}`, which only {} can fill in",
                client.title()
            ));
        };
        out.push_str("${");
        out.push_str(&kept);
        out.push('}');
        rest = &after[close + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// [`translate`] on every string of an entry.
fn translate_value(client: Client, value: &Value) -> Result<Value, String> {
    Ok(match value {
        Value::String(text) => Value::String(translate(client, text)?),
        Value::Array(items) => Value::Array(
            items
                .iter()
                .map(|item| translate_value(client, item))
                .collect::<Result<_, _>>()?,
        ),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(key, item)| Ok((key.clone(), translate_value(client, item)?)))
                .collect::<Result<_, String>>()?,
        ),
        other => other.clone(),
    })
}

/// A path made absolute against the current folder, a symbolic link followed to its target (so
/// that a dotfiles link stays a link).
fn absolute(path: &Path) -> Result<PathBuf, String> {
    let absolute = std::path::absolute(path).map_err(|e| format!("{}: {e}", path.display()))?;
    match std::fs::symlink_metadata(&absolute) {
        Ok(metadata) if metadata.file_type().is_symlink() => absolute.canonicalize().map_err(|e| {
            format!(
                "{} is a symbolic link that leads nowhere: {e}",
                absolute.display()
            )
        }),
        _ => Ok(absolute),
    }
}

/// A file's bytes and mode (Unix permission bits).
type Existing = (Vec<u8>, Option<u32>);

/// A file's bytes and mode, `None` when it does not exist; at most `limit` bytes.
fn read_existing(path: &Path, limit: u64) -> Result<Option<Existing>, String> {
    let metadata = match std::fs::metadata(path) {
        Ok(metadata) => metadata,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(format!("cannot read {}: {error}", path.display())),
    };
    if !metadata.is_file() {
        return Err(format!("{} is not a file", path.display()));
    }
    if metadata.len() > limit {
        return Err(format!(
            "{} is {} bytes, more than the {limit} read",
            path.display(),
            metadata.len()
        ));
    }
    #[cfg(unix)]
    let mode = Some(std::os::unix::fs::PermissionsExt::mode(&metadata.permissions()) & 0o7777);
    #[cfg(not(unix))]
    let mode = None;
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    Ok(Some((bytes, mode)))
}

/// Writes `bytes` to `path` so that no reader sees half of it: a new temporary file beside it
/// (never one that exists, never through a link), given `mode` (0600 for a new file), flushed,
/// and renamed over it. Missing folders are made.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8], mode: Option<u32>) -> std::io::Result<()> {
    use std::io::Write as _;
    let dir = path
        .parent()
        .ok_or_else(|| std::io::Error::other("the file has no folder"))?;
    std::fs::create_dir_all(dir)?;
    let mut random = [0u8; 8];
    getrandom::fill(&mut random).map_err(|error| std::io::Error::other(error.to_string()))?;
    let random: String = random.iter().map(|byte| format!("{byte:02x}")).collect();
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy())
        .unwrap_or_default();
    let temporary = dir.join(format!(".{name}.runbyte-{random}.tmp"));
    let written = (|| {
        let mut out = crate::config::create_new_private(&temporary)?;
        #[cfg(unix)]
        if let Some(mode) = mode {
            use std::os::unix::fs::PermissionsExt;
            out.set_permissions(std::fs::Permissions::from_mode(mode))?;
        }
        #[cfg(not(unix))]
        let _ = mode;
        out.write_all(bytes)?;
        out.sync_all()?;
        drop(out);
        crate::config::rename_over(&temporary, path)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&temporary);
    }
    written
}

/// The current time in UTC as `20261202T010203Z`.
fn utc_stamp() -> String {
    stamp_of(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
    )
}

/// Seconds since the Unix epoch as `20261202T010203Z`.
fn stamp_of(seconds: u64) -> String {
    let (days, rest) = (seconds / 86_400, seconds % 86_400);
    // Howard Hinnant's days-to-civil.
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}{month:02}{day:02}T{:02}{:02}{:02}Z",
        rest / 3600,
        rest / 60 % 60,
        rest % 60
    )
}

/// The `runbyte.toml` setup creates: the built-in default, without its `[plugins] dirs` of a
/// source tree's build folder (the binary's own folder and `../lib/runbyte` are searched
/// anyway). When the client's servers move in, without the demo server too (its table is the
/// default's last): an agent should see the user's tools, not the demo's among them.
fn default_user_config(servers_move_in: bool) -> String {
    let text = crate::config::DEFAULT_CONFIG.replace(
        "\ndirs = [\"target/release\"]",
        "\n# dirs = [\"/path/to/plugins\"]",
    );
    match text.find("\n[servers.demo]") {
        Some(at) if servers_move_in => format!(
            "{}\n# The built-in demo server, left out since this file has servers of its own:\n\
             # [servers.demo]\n# command = \"${{RUNBYTE_EXE}}\"\n# args = [\"demo-server\"]\n",
            &text[..at]
        ),
        _ => text,
    }
}

/// One run of `runbyte setup CLIENT`.
fn setup(client: Client, options: &Options) -> Result<(), String> {
    let file = match &options.config_file {
        Some(file) => file.clone(),
        None => client_file(client).ok_or_else(|| {
            format!(
                "no home folder in the environment to find {}'s file in: give it with --config-file",
                client.title()
            )
        })?,
    };
    let file = absolute(&file)?;
    let toml_path = match &options.runbyte_config {
        Some(path) => path.clone(),
        None => crate::config::user_config_file().ok_or(
            "no home folder in the environment to keep runbyte.toml in: give it with --runbyte-config",
        )?,
    };
    let toml_path = absolute(&toml_path)?;
    let launch = launcher()?;
    let entry = runbyte_entry(client, &launch, &toml_path);

    // The client's file.
    let existing = read_existing(&file, MAX_CLIENT_FILE_BYTES)?;
    let text = match &existing {
        Some((bytes, _)) => String::from_utf8(bytes.clone())
            .map_err(|_| format!("{}: not UTF-8 text; nothing was changed", file.display()))?,
        None => String::new(),
    };
    let not_json = |error: jsonc::JsoncError| {
        format!(
            "{}: {error}: not JSON; fix it (or move it aside) and run again; nothing was changed",
            file.display()
        )
    };
    let parsed = jsonc::parse(&text).map_err(not_json)?;
    let key = client.servers_key();
    let root = parsed.root.as_ref();
    if let Some(root) = root
        && !root.value.is_object()
    {
        return Err(format!(
            "{}: the top level is not an object; nothing was changed",
            file.display()
        ));
    }
    let servers = root.and_then(|root| root.member(key)).map(|m| &m.value);
    if let Some(servers) = servers
        && !servers.value.is_object()
    {
        return Err(format!(
            "{}: `{key}` is not an object; nothing was changed",
            file.display()
        ));
    }

    // runbyte.toml.
    let toml_existing = read_existing(&toml_path, MAX_CLIENT_FILE_BYTES)?;
    let toml_text = match &toml_existing {
        Some((bytes, _)) => String::from_utf8(bytes.clone()).map_err(|_| {
            format!(
                "{}: not UTF-8 text; nothing was changed",
                toml_path.display()
            )
        })?,
        None => default_user_config(
            options.move_servers
                && servers
                    .is_some_and(|servers| servers.members.iter().any(|m| m.key != "runbyte")),
        ),
    };
    let toml_table: toml::Table = toml::from_str(&toml_text).map_err(|e| {
        format!(
            "{}: not valid TOML ({}); nothing was changed",
            toml_path.display(),
            e.message().trim_end()
        )
    })?;
    let toml_servers = toml_table
        .get("servers")
        .and_then(toml::Value::as_table)
        .cloned()
        .unwrap_or_default();

    // The servers to move.
    let mut notes = Vec::new();
    let mut moved: Vec<String> = Vec::new();
    let mut removed: Vec<String> = Vec::new();
    let mut imported = crate::config::ImportedServers::default();
    for member in servers.map_or(&[][..], |servers| &servers.members[..]) {
        if member.key != ENTRY && starts_runbyte(&member.value.value) {
            notes.push(format!(
                "`{}` in {} starts Runbyte too (left as it is): remove it, or the client runs \
                 two of them",
                member.key,
                client.title()
            ));
        }
    }
    if options.move_servers
        && let Some(servers) = servers
    {
        for member in &servers.members {
            let name = &member.key;
            if name == ENTRY || starts_runbyte(&member.value.value) {
                continue;
            }
            let translated = match translate_value(client, &member.value.value) {
                Ok(value) => value,
                Err(why) => {
                    notes.push(format!("left `{name}` in {}: it {why}", client.title()));
                    continue;
                }
            };
            let one: Map<String, Value> = [(name.clone(), translated)].into_iter().collect();
            let server = match crate::config::import_servers(&one) {
                Ok(server) => server,
                Err(why) => {
                    notes.push(format!("left `{name}` in {}: {why}", client.title()));
                    continue;
                }
            };
            if let Some(existing) = toml_servers.get(name) {
                let table: toml::Table =
                    toml::from_str(&crate::config::servers_to_toml(&server))
                        .map_err(|e| format!("server `{name}` does not convert: {e}"))?;
                let same = table
                    .get("servers")
                    .and_then(|servers| servers.get(name.as_str()))
                    == Some(existing);
                if !same {
                    return Err(format!(
                        "server `{name}` of {} is also [servers.{name}] in {}, set up differently: \
                         rename or remove one of them and run again; nothing was changed",
                        file.display(),
                        toml_path.display()
                    ));
                }
                notes.push(format!(
                    "`{name}` was in {} already, the same: removed from {}",
                    toml_path.display(),
                    client.title()
                ));
                removed.push(name.clone());
                continue;
            }
            notes.extend(server.notes);
            imported.servers.extend(server.servers);
            moved.push(name.clone());
            removed.push(name.clone());
        }
    }

    // The client's new text.
    let style = jsonc::Style::of(&text, root);
    let new_text = match root {
        None => {
            let document = json!({ key: { ENTRY: entry.clone() } });
            format!("{}{}", style.render(&document, ""), style.newline)
        }
        Some(root) => {
            let removed: Vec<&str> = removed.iter().map(String::as_str).collect();
            let edits = match servers {
                Some(servers) => {
                    jsonc::edit_object(&text, servers, Some((ENTRY, &entry)), &removed, &style)
                }
                None => {
                    let servers = json!({ ENTRY: entry.clone() });
                    jsonc::edit_object(&text, root, Some((key, &servers)), &[], &style)
                }
            };
            jsonc::apply(&text, edits)
        }
    };
    check_client_text(&file, &text, &new_text, key, &entry, &removed)?;

    // runbyte.toml's new text: the moved servers appended.
    let new_toml = if imported.servers.is_empty() {
        toml_text.clone()
    } else {
        let mut out = toml_text.clone();
        if !out.is_empty() && !out.ends_with('\n') {
            out.push('\n');
        }
        out.push_str(&format!(
            "\n# Moved from {} by `runbyte setup {}` ({}).\n",
            file.display(),
            client.id(),
            utc_stamp()
        ));
        out.push_str(&crate::config::servers_to_toml(&imported));
        let table: toml::Table = toml::from_str(&out).map_err(|e| {
            format!(
                "{} would not stay valid TOML with the moved servers ({}): move them by hand \
                 (`runbyte import {}`); nothing was changed",
                toml_path.display(),
                e.message().trim_end(),
                file.display()
            )
        })?;
        for name in &moved {
            if table
                .get("servers")
                .and_then(|servers| servers.get(name.as_str()))
                .is_none()
            {
                return Err(format!(
                    "{}: server `{name}` would not land in [servers]: move it by hand; nothing \
                     was changed",
                    toml_path.display()
                ));
            }
        }
        out
    };

    let mut changes = Vec::new();
    let toml_before = toml_existing.as_ref().map(|(bytes, _)| bytes.clone());
    if toml_before.as_deref() != Some(new_toml.as_bytes()) {
        changes.push(backup::Change {
            path: toml_path.clone(),
            before: toml_before,
            after: new_toml.clone().into_bytes(),
            mode: toml_existing.as_ref().and_then(|(_, mode)| *mode),
        });
    }
    let before = existing.as_ref().map(|(bytes, _)| bytes.clone());
    if before.as_deref() != Some(new_text.as_bytes()) {
        changes.push(backup::Change {
            path: file.clone(),
            before,
            after: new_text.clone().into_bytes(),
            mode: existing.as_ref().and_then(|(_, mode)| *mode),
        });
    }
    for note in &notes {
        say(&format!("note: {note}"));
    }
    if changes.is_empty() {
        say(&format!(
            "{}: nothing to change: {} starts Runbyte with {} already{}",
            client.title(),
            file.display(),
            toml_path.display(),
            if options.move_servers {
                ", and no other server it can move"
            } else {
                ""
            }
        ));
        return Ok(());
    }
    if options.dry_run {
        for change in &changes {
            let old = String::from_utf8_lossy(change.before.as_deref().unwrap_or_default());
            let new = String::from_utf8_lossy(&change.after);
            let shown = change.path.display().to_string();
            let old_name = if change.before.is_some() {
                shown.clone()
            } else {
                "/dev/null".to_owned()
            };
            let diff = similar::TextDiff::from_lines(old.as_ref(), new.as_ref());
            print!(
                "{}",
                crate::text::terminal(
                    &diff
                        .unified_diff()
                        .context_radius(3)
                        .header(&old_name, &shown)
                        .to_string(),
                    true
                )
            );
        }
        say("dry run: nothing was changed");
        return Ok(());
    }
    let stamp = utc_stamp();
    let folder = backup::save(client, &stamp, &changes)?;
    for change in &changes {
        // A new file may come to hold secrets (a moved server's env): only its owner reads it.
        let mode = change.mode.or(Some(0o600));
        write_atomic(&change.path, &change.after, mode).map_err(|e| {
            format!(
                "cannot write {}: {e} (what was written before it is undone by `runbyte setup \
                 --undo {}`)",
                change.path.display(),
                client.id()
            )
        })?;
    }
    if toml_existing.is_none() {
        say(&format!(
            "created {} (the default configuration)",
            toml_path.display()
        ));
    }
    if !moved.is_empty() {
        say(&format!(
            "moved {} server(s) to {}: {}",
            moved.len(),
            toml_path.display(),
            moved.join(", ")
        ));
    }
    let command = std::iter::once(launch.0.clone())
        .chain(launch.1.iter().cloned())
        .chain([
            "serve".to_owned(),
            "--config".to_owned(),
            toml_path.display().to_string(),
        ])
        .collect::<Vec<_>>()
        .join(" ");
    say(&format!(
        "{}: {} starts Runbyte as `{ENTRY}`: {command}",
        client.title(),
        file.display()
    ));
    let others = jsonc::parse(&new_text)
        .ok()
        .and_then(|parsed| parsed.root)
        .and_then(|root| root.member(key).map(|m| m.value.members.len()))
        .unwrap_or(1)
        .saturating_sub(1);
    if others > 0 {
        say(&format!(
            "{others} other server(s) there still bypass Runbyte (move them with --move-servers)"
        ));
    }
    say(&format!(
        "backup: {} (undo with `runbyte setup --undo {}`)",
        folder.display(),
        client.id()
    ));
    say(&format!("restart {} to load it", client.title()));
    Ok(())
}

/// Checks the client's new text before it is written: it parses (strict JSON when the old text
/// was), holds the entry and none of the moved servers, and every other key is unchanged.
fn check_client_text(
    file: &Path,
    old: &str,
    new: &str,
    key: &str,
    entry: &Value,
    removed: &[String],
) -> Result<(), String> {
    let bug = |what: &str| {
        Err(format!(
            "{}: the edit would {what} (a bug in runbyte setup); nothing was changed",
            file.display()
        ))
    };
    let old_value = jsonc::parse(old)
        .ok()
        .and_then(|p| p.root)
        .map(|root| root.value)
        .unwrap_or_else(|| json!({}));
    let Some(new_value) = jsonc::parse(new).ok().and_then(|p| p.root).map(|r| r.value) else {
        return bug("not parse");
    };
    if serde_json::from_str::<Value>(old).is_ok() && serde_json::from_str::<Value>(new).is_err() {
        return bug("not be strict JSON any more");
    }
    let (Some(old_map), Some(new_map)) = (old_value.as_object(), new_value.as_object()) else {
        return bug("not be an object");
    };
    let others = |map: &Map<String, Value>| -> Vec<(String, Value)> {
        map.iter()
            .filter(|(k, _)| k.as_str() != key)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    };
    if others(old_map) != others(new_map) {
        return bug("change other keys");
    }
    let empty = Map::new();
    let old_servers = old_map
        .get(key)
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let Some(new_servers) = new_map.get(key).and_then(Value::as_object) else {
        return bug("lose the servers");
    };
    if new_servers.get(ENTRY) != Some(entry) {
        return bug("not hold the runbyte entry");
    }
    let kept = |map: &Map<String, Value>| -> Vec<(String, Value)> {
        map.iter()
            .filter(|(k, _)| k.as_str() != ENTRY && !removed.contains(k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    };
    if kept(old_servers) != kept(new_servers) || removed.iter().any(|r| new_servers.contains_key(r))
    {
        return bug("change the servers it keeps");
    }
    Ok(())
}

/// `runbyte setup --undo [CLIENT]`.
fn undo(client: Option<Client>, force: bool) -> Result<(), String> {
    let Some((folder, manifest)) = backup::latest(client)? else {
        return Err(format!(
            "no `runbyte setup`{} to undo (backups are kept in {})",
            client
                .map(|c| format!(" of {}", c.id()))
                .unwrap_or_default(),
            backup::root()?.display()
        ));
    };
    for line in backup::undo(&folder, &manifest, force)? {
        say(&line);
    }
    say(&format!(
        "undid `runbyte setup {}` of {} ({})",
        manifest.client,
        manifest.stamp,
        folder.display()
    ));
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_launcher_is_stable_across_versions() {
        for (path, command, args) in [
            (
                "/home/ada/.cache/uv/archive-v0/Xy12/bin/runbyte",
                "uvx",
                vec!["runbyte"],
            ),
            (
                "/Users/ada/.cache/uv/builds-v0/.tmpab/bin/runbyte",
                "uvx",
                vec!["runbyte"],
            ),
            (
                "/home/ada/.npm/_npx/1a2b/node_modules/@runbyte/linux-x64/bin/runbyte",
                "npx",
                vec!["-y", "runbyte"],
            ),
            ("/usr/local/bin/runbyte", "/usr/local/bin/runbyte", vec![]),
            // An archive-v folder outside uv's cache is not uv's.
            ("/opt/archive-v2/runbyte", "/opt/archive-v2/runbyte", vec![]),
        ] {
            let (got_command, got_args) = launcher_for(Path::new(path));
            assert_eq!(got_command, command, "{path}");
            assert_eq!(got_args, args, "{path}");
        }
    }

    #[test]
    fn client_variables_become_runbyte_ones_or_stay_behind() {
        assert_eq!(
            translate(Client::Vscode, "Bearer ${env:TOKEN}").unwrap(),
            "Bearer ${TOKEN}"
        );
        assert!(
            translate(Client::Vscode, "${input:token}")
                .unwrap_err()
                .contains("only VS Code")
        );
        assert!(translate(Client::Cursor, "${workspaceFolder}/x").is_err());
        assert_eq!(
            translate(Client::ClaudeCode, "${HOME}/x ${A:-b}").unwrap(),
            "${HOME}/x ${A:-b}"
        );
        assert!(translate(Client::ClaudeCode, "${env:A}").is_err());
        assert_eq!(
            translate(Client::ClaudeDesktop, "a${B}").unwrap(),
            "a$${B}",
            "Claude Desktop fills nothing in: the text stays literal"
        );
        assert!(translate(Client::Windsurf, "${env:A").is_err());
        assert_eq!(
            translate(Client::Windsurf, "$5 and $x").unwrap(),
            "$5 and $x"
        );
    }

    #[test]
    fn runbyte_entries_are_recognised_by_any_name() {
        assert!(starts_runbyte(
            &json!({"command": "/opt/bin/runbyte", "args": ["serve"]})
        ));
        assert!(starts_runbyte(&json!({"command": "C:\\bin\\runbyte.exe"})));
        assert!(starts_runbyte(
            &json!({"command": "npx", "args": ["-y", "runbyte@0.2", "serve"]})
        ));
        assert!(starts_runbyte(
            &json!({"command": "uvx", "args": ["runbyte", "serve"]})
        ));
        assert!(!starts_runbyte(
            &json!({"command": "npx", "args": ["-y", "@acme/server"]})
        ));
        assert!(!starts_runbyte(&json!({"url": "https://x"})));
        assert_eq!(
            entry_config(&json!({"args": ["serve", "--config", "/a/runbyte.toml"]})),
            Some(PathBuf::from("/a/runbyte.toml"))
        );
    }

    #[test]
    fn the_user_config_is_the_default_without_a_build_folder() {
        let without_demo = default_user_config(true);
        let config = crate::config::Config::parse(
            &without_demo,
            Path::new("/u/runbyte.toml"),
            Path::new("/u"),
        )
        .unwrap();
        assert!(config.servers.is_empty(), "{:?}", config.servers.keys());
        assert!(without_demo.contains("# [servers.demo]"), "{without_demo}");
        let text = default_user_config(false);
        assert_ne!(
            text,
            crate::config::DEFAULT_CONFIG,
            "the line to drop moved"
        );
        let config =
            crate::config::Config::parse(&text, Path::new("/u/runbyte.toml"), Path::new("/u"))
                .unwrap();
        assert!(config.plugins.dirs.is_empty(), "{:?}", config.plugins.dirs);
        assert!(config.servers.contains_key("demo"));
    }

    #[test]
    fn stamps_are_utc_calendar_dates() {
        assert_eq!(stamp_of(0), "19700101T000000Z");
        assert_eq!(stamp_of(951_825_600), "20000229T120000Z");
        assert_eq!(stamp_of(1_796_173_323), "20261202T010203Z");
        assert_eq!(stamp_of(4_107_542_399), "21000228T235959Z");
    }
}
