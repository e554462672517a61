//! The virtual filesystem the client explores: `/servers/index.ts`, `/servers/<server>/…`.
//!
//! A [`Snapshot`] is immutable; the codegen driver builds a new one when a server's tools change
//! and swaps it in whole, so a reader never sees half a folder.

use std::{
    collections::{BTreeMap, BTreeSet},
    fmt::Write as _,
    sync::{Arc, OnceLock, RwLock},
    time::{Duration, Instant},
};

use tokio::sync::watch;

use crate::text;

mod search;
mod state;
mod stub;
pub use search::SearchIndex;
pub use state::{Shelf, is_state};
pub use stub::index_stub;

/// The root of everything the VFS serves.
pub const ROOT: &str = "/servers";
/// The folder of saved skills (see [`crate::skills`]).
pub const SKILLS: &str = "/skills";
/// The folder of the session's kept values and the module that keeps them (see
/// [`crate::kept`]).
pub const STATE: &str = crate::kept::FOLDER;

/// A path the VFS refuses or does not have.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VfsError {
    /// Outside `/servers`.
    #[error(
        "`{path}` is outside the virtual filesystem: every path lies under /servers, /skills or \
         /state"
    )]
    Outside { path: String },
    /// No such file or folder.
    #[error("`{path}` does not exist{hint}")]
    NotFound { path: String, hint: String },
    /// `read_file` on a folder.
    #[error("`{path}` is a folder: use list_directory to see what it holds")]
    IsFolder { path: String },
    /// `list_directory` on a file.
    #[error("`{path}` is a file: use read_file to read it")]
    IsFile { path: String },
    /// A file on disk (a saved skill) that cannot be read now.
    #[error("`{path}` cannot be read: {why}")]
    Unreadable { path: String, why: String },
}

/// One generated file.
pub struct File {
    content: Content,
    /// Its JavaScript for the sandbox, made on first use (once per tool-list change).
    pub compiled: OnceLock<Result<Arc<str>, String>>,
}

/// Where a file's text is.
enum Content {
    /// Held (a generated module).
    Held(Arc<str>),
    /// Read from disk each time it is needed (a saved skill: only what the program names is
    /// held, for [`Snapshot::starting_in`]). Reading blocks: never on an async thread.
    OnDisk {
        read: Box<dyn Fn() -> Result<Arc<str>, String> + Send + Sync>,
        names: Arc<str>,
    },
}

impl File {
    /// A file with this content.
    pub fn new(content: impl Into<Arc<str>>) -> Arc<File> {
        Arc::new(File {
            content: Content::Held(content.into()),
            compiled: OnceLock::new(),
        })
    }

    /// A file with this content whose JavaScript for the sandbox is `js` (already compiled: a
    /// module the host writes as JavaScript itself, see [`index_stub`]).
    pub fn with_js(content: impl Into<Arc<str>>, js: String) -> Arc<File> {
        let file = File {
            content: Content::Held(content.into()),
            compiled: OnceLock::new(),
        };
        let _ = file.compiled.set(Ok(Arc::from(js)));
        Arc::new(file)
    }

    /// A file whose text `read` gives when it is needed; `names` holds the module paths the text
    /// names (see [`named_modules`]).
    pub fn on_disk(
        names: String,
        read: impl Fn() -> Result<Arc<str>, String> + Send + Sync + 'static,
    ) -> Arc<File> {
        Arc::new(File {
            content: Content::OnDisk {
                read: Box::new(read),
                names: names.into(),
            },
            compiled: OnceLock::new(),
        })
    }

    /// Its text. For a file on disk this is a blocking read (see [`File::on_disk`]).
    pub fn text(&self) -> Result<Arc<str>, String> {
        match &self.content {
            Content::Held(text) => Ok(text.clone()),
            Content::OnDisk { read, .. } => read(),
        }
    }

    /// Whether [`File::text`] reads from disk.
    pub fn is_on_disk(&self) -> bool {
        matches!(self.content, Content::OnDisk { .. })
    }

    /// The text module names are looked for in: all of it, or what a file on disk names.
    fn scanned(&self) -> Arc<str> {
        match &self.content {
            Content::Held(text) => text.clone(),
            Content::OnDisk { names, .. } => names.clone(),
        }
    }
}

/// One tool, as `search_tools` and `list_directory` show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolEntry {
    /// The server's name.
    pub server: String,
    /// The tool's original name.
    pub name: String,
    /// The function's name in the generated module.
    pub identifier: String,
    /// The module's VFS path.
    pub path: String,
    /// One-line signature.
    pub signature: String,
    /// The description's first line.
    pub summary: String,
    /// The full description, lowercased, for ranking.
    pub description: String,
    /// The names of its top-level parameters.
    pub params: Vec<String>,
}

/// Where a server stands, as its folder shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FolderStatus {
    /// Generated from its tools.
    Ready,
    /// Still connecting or listing its tools for the first time.
    Starting,
    /// Not connected; the reason.
    Down(String),
}

/// A server's folder.
#[derive(Debug, Clone)]
pub struct ServerFolder {
    /// The server's name in `runbyte.toml`.
    pub server: String,
    /// The folder under `/servers`.
    pub folder: String,
    /// Ready or down.
    pub status: FolderStatus,
    /// Its tools.
    pub tools: Vec<ToolEntry>,
}

/// One immutable state of the VFS.
#[derive(Default)]
pub struct Snapshot {
    /// Increases with every change.
    pub generation: u64,
    /// Every file by absolute path.
    pub files: BTreeMap<String, Arc<File>>,
    /// Every server folder by folder name.
    pub folders: BTreeMap<String, Arc<ServerFolder>>,
    /// The saved skills (`/skills/<name>.ts`), for listing and search.
    pub skills: Vec<ToolEntry>,
    /// The search index of the tools above (see [`Snapshot::index`]).
    pub index: OnceLock<SearchIndex>,
}

impl Snapshot {
    /// The folders directly under `dir` and the files in it.
    fn children(&self, dir: &str) -> (Vec<String>, Vec<String>) {
        let prefix = format!("{dir}/");
        let mut folders = Vec::new();
        let mut files = Vec::new();
        for path in self.files.keys() {
            let Some(rest) = path.strip_prefix(&prefix) else {
                continue;
            };
            match rest.split_once('/') {
                Some((folder, _)) => {
                    if folders.last().is_none_or(|last: &String| last != folder)
                        && !folders.iter().any(|f| f == folder)
                    {
                        folders.push(folder.to_owned());
                    }
                }
                None => files.push(rest.to_owned()),
            }
        }
        (folders, files)
    }

    fn is_dir(&self, path: &str) -> bool {
        path == ROOT || path == "/" || path == SKILLS || path == STATE || {
            let prefix = format!("{path}/");
            self.files
                .range(prefix.clone()..)
                .next()
                .is_some_and(|(p, _)| p.starts_with(&prefix))
        }
    }

    fn not_found(&self, path: &str) -> VfsError {
        let (parent, name) = path.rsplit_once('/').unwrap_or(("", path));
        let parent = if parent.is_empty() { "/" } else { parent };
        let (folders, files) = if parent == "/" {
            (
                vec![
                    "servers".to_owned(),
                    "skills".to_owned(),
                    "state".to_owned(),
                ],
                Vec::new(),
            )
        } else {
            self.children(parent)
        };
        let names: Vec<&str> = folders
            .iter()
            .chain(files.iter())
            .map(String::as_str)
            .collect();
        let hint = match text::closest(name, names.iter().copied()) {
            Some(close) => format!("; did you mean `{parent}/{close}`?").replace("//", "/"),
            None if self.is_dir(parent) => format!("; {parent} holds: {}", names.join(", ")),
            None => String::new(),
        };
        VfsError::NotFound {
            path: path.to_owned(),
            hint,
        }
    }

    /// A file's content. A saved skill's is read from disk (see [`Snapshot::reads_disk`]).
    pub fn read(&self, path: &str) -> Result<Arc<str>, VfsError> {
        let path = normalize(path)?;
        if let Some(file) = self.files.get(&path) {
            return file
                .text()
                .map_err(|why| VfsError::Unreadable { path, why });
        }
        if self.is_dir(&path) {
            return Err(VfsError::IsFolder { path });
        }
        Err(self.not_found(&path))
    }

    /// Whether [`Snapshot::read`] of `path` reads from disk (and so belongs on a blocking
    /// thread).
    pub fn reads_disk(&self, path: &str) -> bool {
        normalize(path)
            .ok()
            .and_then(|path| self.files.get(&path))
            .is_some_and(|file| file.is_on_disk())
    }

    /// A folder's listing, as text: one entry a line, folders with a trailing `/`. With
    /// descriptions, each tool's file carries its summary and each server folder its status.
    pub fn list(&self, path: &str, with_descriptions: bool) -> Result<String, VfsError> {
        let path = normalize(path)?;
        if path == "/" {
            return Ok("/\nservers/\nskills/\nstate/\n".to_owned());
        }
        if self.files.contains_key(&path) {
            return Err(VfsError::IsFile { path });
        }
        if !self.is_dir(&path) {
            return Err(self.not_found(&path));
        }
        let (folders, files) = self.children(&path);
        let mut out = format!("{path}\n");
        let folder_of_path = path
            .strip_prefix("/servers/")
            .filter(|rest| !rest.contains('/'));
        for folder in &folders {
            let _ = write!(out, "{folder}/");
            if path == ROOT
                && let Some(server) = self.folders.get(folder)
            {
                match &server.status {
                    FolderStatus::Ready if with_descriptions => {
                        let _ = write!(
                            out,
                            "  ({} tools; server `{}`)",
                            server.tools.len(),
                            server.server
                        );
                    }
                    FolderStatus::Ready => {}
                    FolderStatus::Starting => {
                        let _ = write!(out, "  (starting)");
                    }
                    FolderStatus::Down(reason) => {
                        let _ = write!(out, "  (unavailable: {})", first_line(reason));
                    }
                }
            }
            out.push('\n');
        }
        let server = folder_of_path
            .and_then(|folder| self.folders.get(folder))
            .map(|folder| &**folder);
        if let Some(ServerFolder {
            status: FolderStatus::Starting,
            server,
            ..
        }) = server
        {
            let _ = writeln!(
                out,
                "(server `{server}` is starting; its tools appear here once it has listed them)"
            );
        }
        if let Some(ServerFolder {
            status: FolderStatus::Down(reason),
            server,
            ..
        }) = server
        {
            let _ = writeln!(
                out,
                "(server `{server}` is unavailable: {}; Runbyte retries it)",
                first_line(reason)
            );
        }
        for file in &files {
            out.push_str(file);
            let full = format!("{path}/{file}");
            let tool = server
                .and_then(|s| s.tools.iter().find(|t| t.path == full))
                .or_else(|| self.skills.iter().find(|t| t.path == full));
            if with_descriptions && tool.is_none() && file == crate::pins::NOTE {
                out.push_str("  tools held until a person approves them (what changed, untrusted)");
            }
            if with_descriptions && let Some(tool) = tool {
                let original = if tool.name != tool.identifier && tool.server != "skills" {
                    format!("[tool `{}`] ", tool.name)
                } else {
                    String::new()
                };
                let _ = write!(out, "  {original}{}", tool.summary);
            }
            out.push('\n');
        }
        Ok(out)
    }

    /// Every tool and skill, in the order [`Snapshot::index`] numbers them.
    fn tools(&self) -> impl Iterator<Item = &ToolEntry> {
        self.folders
            .values()
            .flat_map(|folder| folder.tools.iter())
            .chain(self.skills.iter())
    }

    /// The search index of this snapshot's tools, built on first use (the VFS builds it before
    /// it serves the snapshot).
    pub fn index(&self) -> &SearchIndex {
        self.index.get_or_init(|| SearchIndex::build(self.tools()))
    }

    /// The tools best matching `query`, best first.
    pub fn search(&self, query: &str, limit: usize) -> Vec<(&ToolEntry, u32)> {
        let hits = self.index().search(query, limit);
        if hits.is_empty() {
            return Vec::new();
        }
        let tools: Vec<&ToolEntry> = self.tools().collect();
        hits.into_iter()
            .filter_map(|(at, score)| Some((*tools.get(at)?, score)))
            .collect()
    }

    /// The module paths, for "no such module" errors.
    pub fn module_paths(&self) -> Vec<String> {
        self.files
            .keys()
            .filter(|path| !is_note(path))
            .cloned()
            .collect()
    }

    /// The servers still starting whose folders `code` names (`servers/<folder>`), or every
    /// one still starting when it imports `/servers` itself.
    pub fn starting_in(&self, code: &str) -> Vec<String> {
        let starting: Vec<&ServerFolder> = self
            .folders
            .values()
            .map(|folder| &**folder)
            .filter(|folder| folder.status == FolderStatus::Starting)
            .collect();
        if starting.is_empty() {
            return Vec::new();
        }
        // The servers its skills import count too (skills may import skills: each read once).
        let mut sources: Vec<Arc<str>> = vec![Arc::from(code)];
        let mut seen = BTreeSet::new();
        let mut next = 0;
        while next < sources.len() {
            let source = sources[next].clone();
            next += 1;
            for name in skills_named(&source) {
                let path = format!("{SKILLS}/{name}.ts");
                if let Some(file) = self.files.get(&path)
                    && seen.insert(path)
                {
                    sources.push(file.scanned());
                }
            }
        }
        let named: Vec<Named<'_>> = sources.iter().map(|source| folders_named(source)).collect();
        starting
            .into_iter()
            .filter(|folder| {
                named
                    .iter()
                    .any(|named| named.all || named.folders.contains(folder.folder.as_str()))
            })
            .map(|folder| folder.folder.clone())
            .collect()
    }
}

/// The folders a program names in module specifiers.
struct Named<'a> {
    folders: BTreeSet<&'a str>,
    /// It names `/servers` itself (or its index), which re-exports every server.
    all: bool,
}

/// Every `servers/<folder>` in `code`, wherever it appears (a string, an import, a comment):
/// waiting for a server a program does not import after all costs time, never correctness.
fn folders_named(code: &str) -> Named<'_> {
    let mut named = Named {
        folders: BTreeSet::new(),
        all: false,
    };
    for (at, _) in code.match_indices("servers") {
        let before = code[..at].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$') {
            continue;
        }
        let rest = &code[at + "servers".len()..];
        match rest.strip_prefix('/') {
            Some(rest) => {
                let folder: &str = rest
                    .split(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')))
                    .next()
                    .unwrap_or_default();
                let folder = folder.trim_end_matches(".ts").trim_end_matches(".js");
                if folder.is_empty() || folder == "index" {
                    named.all = true;
                } else {
                    named.folders.insert(folder);
                }
            }
            None if rest.starts_with(['\'', '"', '`']) => named.all = true,
            None => {}
        }
    }
    named
}

/// The module paths `code` names, as [`Snapshot::starting_in`] reads them, in a few bytes:
/// what a file on disk keeps in memory instead of its text.
pub fn named_modules(code: &str) -> String {
    let named = folders_named(code);
    let mut out = String::new();
    if named.all {
        out.push_str("servers/index\n");
    }
    for folder in named.folders {
        let _ = writeln!(out, "servers/{folder}");
    }
    for skill in skills_named(code) {
        let _ = writeln!(out, "skills/{skill}");
    }
    out
}

/// Every `skills/<name>` in `code` (the skills a program may import).
fn skills_named(code: &str) -> BTreeSet<&str> {
    code.match_indices("skills/")
        .filter(|(at, _)| {
            !code[..*at]
                .chars()
                .next_back()
                .is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$')
        })
        .filter_map(|(at, _)| {
            let rest = &code[at + "skills/".len()..];
            let name = rest
                .split(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'))
                .next()?;
            (!name.is_empty()).then_some(name)
        })
        .collect()
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or_default()
}

/// Lowercased words of a name or text, split at non-alphanumerics and camelCase humps.
pub fn words(text: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut current = String::new();
    let mut previous_lower = false;
    for c in text.chars() {
        if c.is_alphanumeric() {
            if c.is_uppercase() && previous_lower && !current.is_empty() {
                words.push(std::mem::take(&mut current));
            }
            previous_lower = c.is_lowercase() || c.is_ascii_digit();
            current.extend(c.to_lowercase());
        } else {
            previous_lower = false;
            if !current.is_empty() {
                words.push(std::mem::take(&mut current));
            }
        }
    }
    if !current.is_empty() {
        words.push(current);
    }
    words
}

/// Makes a VFS path absolute and canonical: `servers/demo`, `./servers/demo/`, `/servers/x/../demo`
/// all become `/servers/demo`. A path outside `/servers`, `/skills` and `/state` (other than `/`
/// itself) is refused.
pub fn normalize(path: &str) -> Result<String, VfsError> {
    let trimmed = path.trim();
    let mut parts: Vec<&str> = Vec::new();
    for part in trimmed.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                if parts.pop().is_none() {
                    return Err(VfsError::Outside {
                        path: trimmed.to_owned(),
                    });
                }
            }
            part => parts.push(part),
        }
    }
    if parts.is_empty() {
        return Ok("/".to_owned());
    }
    if !matches!(parts[0], "servers" | "skills" | "state") {
        return Err(VfsError::Outside {
            path: trimmed.to_owned(),
        });
    }
    Ok(format!("/{}", parts.join("/")))
}

/// Whether `path` is a server folder's note of its held tools ([`crate::pins::NOTE`]).
fn is_note(path: &str) -> bool {
    path.strip_suffix(crate::pins::NOTE)
        .is_some_and(|folder| folder.starts_with("/servers/") && folder.ends_with('/'))
}

/// A snapshot's modules as the sandbox imports them: TypeScript transpiled on first use and
/// kept with the file (so once per tool-list change), JavaScript as it is.
pub struct Modules(pub Arc<Snapshot>);

impl crate::sandbox::ModuleProvider for Modules {
    fn load(&self, path: &str) -> Option<Arc<str>> {
        // A held tool's note is read, never run: what it quotes is a server's untrusted text.
        if is_note(path) {
            return None;
        }
        let file = self.0.files.get(path)?;
        let compiled = file.compiled.get_or_init(|| {
            let text = file.text()?;
            if !path.ends_with(".ts") {
                return Ok(text);
            }
            crate::sandbox::transpile(&text, path)
                .map(|transpiled| Arc::from(transpiled.code()))
                .map_err(|error| error.message)
        });
        Some(match compiled {
            Ok(js) => js.clone(),
            // A generated module that does not compile fails where it is imported, by name.
            Err(message) => {
                tracing::warn!(path, "a generated module does not compile: {message}");
                let text = serde_json::to_string(&format!("{path} does not compile: {message}"))
                    .unwrap_or_default();
                Arc::from(format!("throw new Error({text});"))
            }
        })
    }

    fn load_ready(&self, path: &str) -> Option<Option<Arc<str>>> {
        let Some(file) = self.0.files.get(path) else {
            return Some(None);
        };
        file.compiled.get()?;
        Some(self.load(path))
    }

    fn paths(&self) -> Vec<String> {
        self.0.module_paths()
    }

    fn generation(&self) -> u64 {
        self.0.generation
    }

    fn identity(&self) -> Option<std::sync::Weak<dyn std::any::Any + Send + Sync>> {
        let snapshot: Arc<dyn std::any::Any + Send + Sync> = self.0.clone();
        Some(Arc::downgrade(&snapshot))
    }
}

/// The saved skills' files and entries (see [`crate::skills::vfs_files`]).
#[derive(Default)]
pub struct SkillFiles {
    files: Vec<(String, Arc<File>)>,
    entries: Vec<ToolEntry>,
}

/// The shared, swappable VFS.
pub struct Vfs {
    current: RwLock<Arc<Snapshot>>,
    /// The saved skills' files and entries, put into every snapshot.
    skills: RwLock<Arc<SkillFiles>>,
    /// The generation of the current snapshot, for those waiting on a change.
    generation: watch::Sender<u64>,
    made: Instant,
}

impl Default for Vfs {
    fn default() -> Self {
        Vfs {
            current: RwLock::default(),
            skills: RwLock::default(),
            generation: watch::Sender::new(0),
            made: Instant::now(),
        }
    }
}

impl Vfs {
    /// The current snapshot; readers keep it as long as they need it.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.current.read().map(|s| s.clone()).unwrap_or_default()
    }

    /// Replaces the whole snapshot at once, with the saved skills put in. Generations only grow
    /// (the sandbox keys its module cache on them).
    pub fn swap(&self, mut snapshot: Snapshot) {
        let skills = self.skills.read().map(|s| s.clone()).unwrap_or_default();
        snapshot
            .files
            .retain(|path, _| !path.starts_with("/skills/"));
        for (path, file) in &skills.files {
            snapshot.files.insert(path.clone(), file.clone());
        }
        snapshot.skills = skills.entries.clone();
        // Built here, once per catalogue change, so that no search pays for it.
        snapshot.index();
        let generation = if let Ok(mut current) = self.current.write() {
            snapshot.generation = snapshot.generation.max(current.generation + 1);
            let generation = snapshot.generation;
            *current = Arc::new(snapshot);
            generation
        } else {
            return;
        };
        self.generation.send_replace(generation);
    }

    /// Serves these skills from now on (the current snapshot is replaced with them in).
    pub fn set_skills(&self, files: Vec<(String, Arc<File>)>, entries: Vec<ToolEntry>) {
        if let Ok(mut skills) = self.skills.write() {
            *skills = Arc::new(SkillFiles { files, entries });
        }
        let current = self.snapshot();
        // Before the first snapshot there is nothing to replace: the first one takes them in.
        if current.generation == 0 {
            return;
        }
        self.swap(Snapshot {
            generation: current.generation + 1,
            files: current.files.clone(),
            folders: current.folders.clone(),
            ..Snapshot::default()
        });
    }

    /// The first snapshot, once there is one: every server has a folder then, ready, starting
    /// or down.
    pub async fn first(&self) -> Arc<Snapshot> {
        let mut generation = self.generation.subscribe();
        let _ = generation.wait_for(|generation| *generation > 0).await;
        self.snapshot()
    }

    /// The snapshot once no server is starting, or once `grace` has passed since the VFS was
    /// made, whichever is first: right after start, what is about to be ready is shown ready,
    /// and a server that takes longer holds up no one.
    pub async fn settled(&self, grace: Duration) -> Arc<Snapshot> {
        self.first().await;
        let until = (self.made + grace).into();
        self.until(until, |snapshot| {
            snapshot
                .folders
                .values()
                .all(|folder| folder.status != FolderStatus::Starting)
        })
        .await
        .unwrap_or_else(|| self.snapshot())
    }

    /// The snapshot in which none of the servers `code` imports is starting, waiting for them
    /// until `deadline`; `Err` with the folders still starting then.
    pub async fn ready_for(
        &self,
        code: &str,
        deadline: tokio::time::Instant,
    ) -> Result<Arc<Snapshot>, Vec<String>> {
        let first = self.first().await;
        if first.starting_in(code).is_empty() {
            return Ok(first);
        }
        self.until(deadline, |snapshot| snapshot.starting_in(code).is_empty())
            .await
            .ok_or_else(|| self.snapshot().starting_in(code))
    }

    /// The first snapshot (from now on) for which `done` holds, or `None` at `deadline`.
    async fn until(
        &self,
        deadline: tokio::time::Instant,
        done: impl Fn(&Snapshot) -> bool,
    ) -> Option<Arc<Snapshot>> {
        let mut changes = self.generation.subscribe();
        loop {
            let snapshot = self.snapshot();
            if done(&snapshot) {
                return Some(snapshot);
            }
            match tokio::time::timeout_at(deadline, changes.changed()).await {
                Ok(Ok(())) => {}
                _ => return None,
            }
        }
    }
}

#[cfg(test)]
mod tests;
