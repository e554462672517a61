//! The codegen driver: asks the dialect plugin for each server's files, keeps them, and on a
//! tool-list change regenerates that server and swaps the whole VFS snapshot at once.
//!
//! It follows the Hub from the moment it is made, so the VFS has a folder for every server at
//! once: a server still starting has one that says so, and each server's tools appear as soon
//! as it has listed them, whatever the others are doing.

use std::{collections::BTreeMap, sync::Arc};

use rmcp::model::Tool;
use runbyte_plugin_api::wire::{
    CodegenRequest, CodegenResponse, DEFAULT_EXTENSION, RootRequest, ServerRef, ServerRequest,
};
use serde::Serialize;
use serde_json::Value;

use crate::{
    hub::{Hub, HubEvent, Status},
    infer::{INFERRED_KEY, Inferred},
    plugin::CodegenPlugin,
    vfs::{File, FolderStatus, ServerFolder, Snapshot, ToolEntry, Vfs},
};

/// What one server contributed to the VFS.
struct ServerFiles {
    files: Vec<(String, Arc<File>)>,
    folder: Arc<ServerFolder>,
    /// What they were made from (`None`: not made from a view yet).
    made: Option<Made>,
}

/// What a server's files were made from: the Hub's view of it (its lists are shared, so the
/// same list is the same `Arc`) and the tools awaiting approval.
struct Made {
    status: Status,
    tools: Arc<Vec<Tool>>,
    warnings: Arc<Vec<String>>,
    held: Arc<Vec<crate::pins::Held>>,
    asked: Vec<crate::pins::Held>,
}

impl Made {
    fn of(view: &crate::hub::ServerView, asked: Vec<crate::pins::Held>) -> Made {
        Made {
            status: view.status.clone(),
            tools: view.tools.clone(),
            warnings: view.warnings.clone(),
            held: view.held.clone(),
            asked,
        }
    }

    fn same(&self, other: &Made) -> bool {
        self.status == other.status
            && Arc::ptr_eq(&self.tools, &other.tools)
            && Arc::ptr_eq(&self.warnings, &other.warnings)
            && Arc::ptr_eq(&self.held, &other.held)
            && self.asked == other.asked
    }
}

/// Path-safe folder names for server names: letters, digits, `_`, `-` and `.` are kept, anything
/// else becomes `_`; names that then collide get `_2`, `_3`, … in name order.
pub fn folder_names<'a>(servers: impl IntoIterator<Item = &'a str>) -> BTreeMap<String, String> {
    let mut names: Vec<&str> = servers.into_iter().collect();
    names.sort_unstable();
    let mut taken: Vec<String> = Vec::new();
    let mut folders = BTreeMap::new();
    for name in names {
        let mut base: String = name
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.') {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        if base.is_empty() || base.chars().all(|c| c == '.') || base == "index" {
            base = format!("_{base}");
        }
        let mut folder = base.clone();
        let mut n = 2;
        while taken.contains(&folder) {
            folder = format!("{base}_{n}");
            n += 1;
        }
        taken.push(folder.clone());
        folders.insert(name.to_owned(), folder);
    }
    folders
}

/// Text safe inside a `//` comment: one line, no control characters.
fn comment_safe(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_control() || matches!(c, '\u{2028}' | '\u{2029}') {
                ' '
            } else {
                c
            }
        })
        .collect()
}

/// Keeps the VFS in step with the Hub.
pub struct CodegenDriver {
    dialect: CodegenPlugin,
    hub: Hub,
    vfs: Arc<Vfs>,
    folders: BTreeMap<String, String>,
    state: tokio::sync::Mutex<BTreeMap<String, ServerFiles>>,
    generation: std::sync::atomic::AtomicU64,
    /// The extension of the dialect's modules: the placeholder files of servers that are
    /// starting or down get it.
    extension: Extension,
    /// Whether a task already follows the Hub's events.
    following: std::sync::atomic::AtomicBool,
    /// What was learned of untyped tools' results, shown as their result types.
    inferred: Option<Arc<Inferred>>,
}

/// How long the driver waits after an inferred shape changed before it regenerates, so that a
/// program's burst of calls costs one regeneration (and one save).
const INFERRED_SETTLE: std::time::Duration = std::time::Duration::from_millis(50);

impl CodegenDriver {
    /// A driver for the Hub's servers named in `code` (those exposed to programs), writing
    /// into `vfs`.
    pub fn new(
        dialect: CodegenPlugin,
        hub: Hub,
        vfs: Arc<Vfs>,
        code: &[String],
        inferred: Option<Arc<Inferred>>,
    ) -> Arc<Self> {
        let names: Vec<String> = hub
            .server_names()
            .into_iter()
            .filter(|name| code.contains(name))
            .collect();
        let folders = folder_names(names.iter().map(String::as_str));
        let driver = Arc::new(CodegenDriver {
            dialect,
            hub,
            vfs,
            folders,
            state: tokio::sync::Mutex::new(BTreeMap::new()),
            generation: std::sync::atomic::AtomicU64::new(0),
            extension: Extension::default(),
            following: std::sync::atomic::AtomicBool::new(false),
            inferred,
        });
        // Inside a runtime (always, but for unit tests that build one by hand), follow the Hub
        // now: the first snapshot does not wait for any server.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let events = driver.hub.subscribe();
            driver
                .following
                .store(true, std::sync::atomic::Ordering::SeqCst);
            let follower = driver.clone();
            runtime.spawn(async move {
                follower.rebuild_all().await;
                follower.follow(events).await;
            });
            if let Some(changes) = driver.inferred.as_ref().and_then(|i| i.take_changes()) {
                runtime.spawn(Self::follow_inferred(Arc::downgrade(&driver), changes));
            }
        }
        driver
    }

    /// Regenerates (and saves) the servers whose inferred result types changed, a short settle
    /// after the first change of a burst.
    async fn follow_inferred(
        driver: std::sync::Weak<Self>,
        mut changes: tokio::sync::mpsc::UnboundedReceiver<String>,
    ) {
        while let Some(first) = changes.recv().await {
            tokio::time::sleep(INFERRED_SETTLE).await;
            // Which servers is in `Inferred`'s pending set (an execution's end may have taken
            // them already, see `show_inferred`): the channel only wakes this task.
            let _ = crate::infer::drain(first, &mut changes);
            let Some(driver) = driver.upgrade() else {
                return;
            };
            if let Some(saving) = driver.show_inferred().await {
                let _ = saving.await;
            }
        }
    }

    /// Regenerates the servers whose inferred result types changed and are not shown yet, and
    /// starts saving their shapes on a blocking thread (the handle, to await it or not).
    /// Nothing to do (no shape changed) costs one lock.
    pub async fn show_inferred(&self) -> Option<tokio::task::JoinHandle<()>> {
        let inferred = self.inferred.clone()?;
        let servers = inferred.take_pending();
        if servers.is_empty() {
            return None;
        }
        self.regenerate(&servers).await;
        Some(tokio::task::spawn_blocking(move || {
            for server in &servers {
                inferred.save(server);
            }
        }))
    }

    /// The tools as the dialect sees them: an untyped tool with inferred results gets them as
    /// its `outputSchema`, marked [`INFERRED_KEY`]; a server's own schema never carries that
    /// mark (a server cannot pass its schema off as inferred).
    fn with_inferred(&self, server: &str, tools: Arc<Vec<Tool>>) -> Arc<Vec<Tool>> {
        let marked = |tool: &Tool| {
            tool.output_schema
                .as_ref()
                .is_some_and(|schema| schema.contains_key(INFERRED_KEY))
        };
        let inferred = self.inferred.as_deref();
        let shown: Vec<Option<serde_json::Map<String, Value>>> = tools
            .iter()
            .map(|tool| inferred.and_then(|inferred| inferred.schema_for(server, tool)))
            .collect();
        if shown.iter().all(Option::is_none) && !tools.iter().any(marked) {
            return tools;
        }
        let tools = tools
            .iter()
            .zip(shown)
            .map(|(tool, schema)| {
                let mut tool = tool.clone();
                if let Some(schema) = schema {
                    tool.output_schema = Some(Arc::new(schema));
                } else if marked(&tool)
                    && let Some(own) = tool.output_schema.as_mut()
                {
                    Arc::make_mut(own).remove(INFERRED_KEY);
                }
                tool
            })
            .collect();
        Arc::new(tools)
    }

    /// The dialect in use.
    pub fn dialect(&self) -> &CodegenPlugin {
        &self.dialect
    }

    /// Keeps regenerating the servers whose tools change, as `events` (subscribed before the
    /// last full rebuild, so nothing is missed) reports them. Returns at once when the driver
    /// already follows the Hub (it does from the start when made inside a runtime).
    pub async fn run(self: Arc<Self>, events: tokio::sync::broadcast::Receiver<HubEvent>) {
        if self
            .following
            .swap(true, std::sync::atomic::Ordering::SeqCst)
        {
            return;
        }
        self.follow(events).await;
    }

    async fn follow(&self, mut events: tokio::sync::broadcast::Receiver<HubEvent>) {
        use tokio::sync::broadcast::error::RecvError;
        loop {
            let first = match events.recv().await {
                Ok(HubEvent::ToolsChanged { server }) => server,
                // Resources and prompts are not part of the VFS.
                Ok(_) => continue,
                Err(RecvError::Lagged(_)) => {
                    self.rebuild_all().await;
                    continue;
                }
                Err(RecvError::Closed) => return,
            };
            // Every change already queued goes into the same snapshot: a dozen servers that
            // connect together make one or two snapshots, not one each (each builds the whole
            // snapshot and search index).
            // A server whose view is as its files were made from (an event the last snapshot
            // already took in) is not generated again.
            match queued_changes(&mut events, first) {
                Some(servers) => self.regenerate_with(&servers, true).await,
                None => self.rebuild_all().await,
            }
        }
    }

    /// Regenerates every server's files.
    pub async fn rebuild_all(&self) {
        let names = self.hub.server_names();
        self.regenerate(&names).await;
    }

    /// Regenerates the servers whose view changed since their files were made (all of them
    /// when none were made yet), and swaps in a new snapshot unless none did. After the Hub's
    /// first round: the follower has usually seen every change already, and a regeneration of
    /// every server of a large catalogue costs a few hundred milliseconds.
    pub async fn catch_up(&self) {
        let names = self.hub.server_names();
        self.regenerate_with(&names, true).await;
    }

    /// Regenerates the named servers and swaps in a new snapshot.
    pub async fn regenerate(&self, servers: &[String]) {
        self.regenerate_with(servers, false).await;
    }

    async fn regenerate_with(&self, servers: &[String], only_changed: bool) {
        let started = std::time::Instant::now();
        let mut state = self.state.lock().await;
        // Which servers to generate, with the view each is generated from.
        let mut due = Vec::new();
        for server in servers {
            let Some(folder) = self.folders.get(server) else {
                continue;
            };
            let Some(view) = self.hub.server(server).await else {
                continue;
            };
            let made = Made::of(&view, self.hub.pins().asked(server));
            let current = state
                .get(server)
                .and_then(|files| files.made.as_ref())
                .is_some_and(|old| made.same(old));
            if !(only_changed && current) {
                due.push((server, folder, view, made));
            }
        }
        if only_changed && due.is_empty() {
            return;
        }
        // The root first: its answer tells the extension down servers' placeholder files get.
        let root = self.generate_root().await;
        let changed = due.len();
        for (server, folder, view, made) in due {
            let generated = match view.status {
                Status::Ready => {
                    // An MCP App's own tools are not the model's (see `hub::is_app_only`).
                    let tools: Vec<_> = view
                        .tools
                        .iter()
                        .filter(|tool| !crate::hub::is_app_only(tool))
                        .cloned()
                        .collect();
                    let generated = self
                        .generate_server(server, folder, tools.into(), &view.warnings)
                        .await;
                    // Held tools, and those awaiting `pin = "ask"`, are told of in a note
                    // beside the modules (never a module).
                    generated.map(|mut files| {
                        if !view.held.is_empty() || !made.asked.is_empty() {
                            let note = crate::pins::note(server, &view.held, &made.asked);
                            let path = format!("/servers/{folder}/{}", crate::pins::NOTE);
                            files.files.push((path, File::new(note)));
                        }
                        files
                    })
                }
                Status::Failed { ref error, .. } => {
                    Ok(down_folder(server, folder, error, &self.extension()))
                }
                _ => Ok(starting_folder(server, folder, &self.extension())),
            };
            let mut files = generated.unwrap_or_else(|error| {
                tracing::warn!(server, "codegen failed: {error}");
                let reason = format!("codegen failed: {error}");
                down_folder(server, folder, &reason, &self.extension())
            });
            files.made = Some(made);
            state.insert(server.clone(), files);
        }
        let generation = self
            .generation
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst)
            + 1;
        let mut snapshot = Snapshot {
            generation,
            ..Snapshot::default()
        };
        for (path, content) in root {
            snapshot.files.insert(path, content);
        }
        for server_files in state.values() {
            for (path, file) in &server_files.files {
                snapshot.files.insert(path.clone(), file.clone());
            }
            snapshot.folders.insert(
                server_files.folder.folder.clone(),
                server_files.folder.clone(),
            );
        }
        self.vfs.swap(snapshot);
        tracing::debug!(
            servers = changed,
            generation,
            ms = started.elapsed().as_millis() as u64,
            "VFS regenerated"
        );
        // The last snapshot and this one's temporaries are free now: their pages go back.
        drop(state);
        let _ = tokio::task::spawn_blocking(crate::platform::memory::give_back_free_memory).await;
    }

    async fn call_dialect<T: Serialize>(
        &self,
        request: &CodegenRequest<T>,
    ) -> Result<CodegenResponse, String> {
        let request = serde_json::to_value(request)
            .map_err(|e| format!("cannot encode the codegen request: {e}"))?;
        let dialect = self.dialect.clone();
        let answer = tokio::task::spawn_blocking(move || dialect.generate(&request))
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| e.to_string())?;
        serde_json::from_value(answer)
            .map_err(|e| format!("the dialect's answer has the wrong shape: {e}"))
    }

    async fn generate_server(
        &self,
        server: &str,
        folder: &str,
        tools: Arc<Vec<Tool>>,
        warnings: &[String],
    ) -> Result<ServerFiles, String> {
        let tools = self.with_inferred(server, tools);
        let request = CodegenRequest::Server(ServerRequest {
            server: server.to_owned(),
            folder: folder.to_owned(),
            tools: tools.iter().collect::<Vec<&Tool>>(),
        });
        let response = self.call_dialect(&request).await?;
        for warning in &response.warnings {
            tracing::warn!(server, dialect = %self.dialect.info().name, "{warning}");
        }
        let prefix = format!("{folder}/");
        let extension = self.learn_extension(&response, &format!("{prefix}index."));
        let index = format!("{prefix}index.{extension}");
        let mut files = Vec::new();
        for mut file in response.files {
            if file.path == index && !warnings.is_empty() {
                file.content = format!("{}{}", warning_lines(server, warnings), file.content);
            }
            if !file.path.starts_with(&prefix)
                || file.path.split('/').any(|part| part == ".." || part == ".")
            {
                return Err(format!(
                    "the dialect wrote `{}`, outside the server's folder `{folder}`",
                    file.path
                ));
            }
            files.push((format!("/servers/{}", file.path), File::new(file.content)));
        }
        let entries: Vec<ToolEntry> = response
            .tools
            .into_iter()
            .map(|entry| {
                let spec = tools.iter().find(|t| t.name == entry.name);
                let description = spec
                    .and_then(|t| t.description.as_deref())
                    .unwrap_or_default();
                let params = spec
                    .and_then(|t| t.input_schema.get("properties"))
                    .and_then(Value::as_object)
                    .map(|p| p.keys().cloned().collect())
                    .unwrap_or_default();
                ToolEntry {
                    server: server.to_owned(),
                    path: format!("/servers/{}", entry.path),
                    name: entry.name,
                    identifier: entry.identifier,
                    signature: entry.signature,
                    summary: summary(description),
                    description: description.to_lowercase(),
                    params,
                }
            })
            .collect();
        // The sandbox runs forwarders for the index, not every module it re-exports.
        let index = format!("/servers/{index}");
        for (path, file) in files.iter_mut().filter(|(path, _)| *path == index) {
            if let Ok(text) = file.text()
                && let Some(js) = crate::vfs::index_stub(path, &text, &entries)
            {
                *file = File::with_js(text, js);
            }
        }
        let folder = ServerFolder {
            server: server.to_owned(),
            folder: folder.to_owned(),
            status: FolderStatus::Ready,
            tools: entries,
        };
        Ok(ServerFiles {
            files,
            folder: Arc::new(folder),
            made: None,
        })
    }

    fn extension(&self) -> String {
        self.extension.get()
    }

    fn learn_extension(&self, response: &CodegenResponse, index: &str) -> String {
        self.extension
            .learn(response, index, &self.dialect.info().name)
    }

    async fn generate_root(&self) -> Vec<(String, Arc<File>)> {
        let servers = self
            .folders
            .iter()
            .map(|(name, folder)| ServerRef {
                name: name.clone(),
                folder: folder.clone(),
            })
            .collect();
        let request = CodegenRequest::<Value>::Root(RootRequest { servers });
        let mut files = match self.call_dialect(&request).await {
            Ok(response) => {
                let extension = self.learn_extension(&response, "index.");
                let mut files: Vec<(String, Arc<File>)> = response
                    .files
                    .into_iter()
                    .filter(|file| {
                        !file.path.contains('/') && file.path != ".." && file.path != "."
                    })
                    .map(|file| (format!("/servers/{}", file.path), File::new(file.content)))
                    .collect();
                // A server whose folder is `resources` keeps `./servers/resources` for itself.
                if self
                    .folders
                    .values()
                    .any(|folder| folder == RESOURCES_MODULE)
                {
                    tracing::warn!(
                        "a server's folder is `{RESOURCES_MODULE}`: programs read resources \
                         with callTool(server, \"{}\", {{uri}}) instead of \
                         ./servers/{RESOURCES_MODULE}",
                        crate::hub::READ_RESOURCE
                    );
                } else {
                    files.push((
                        format!("/servers/{RESOURCES_MODULE}.{extension}"),
                        File::new(resources_module(extension == "ts")),
                    ));
                }
                files
            }
            Err(error) => {
                tracing::warn!(dialect = %self.dialect.info().name, "codegen of /servers/index failed: {error}");
                Vec::new()
            }
        };
        // `./state`, the module that keeps values between programs, in the dialect's language.
        let extension = self.extension();
        files.push((
            format!("{}/index.{extension}", crate::kept::FOLDER),
            File::new(crate::kept::module(extension == "ts")),
        ));
        files
    }
}

/// The module that reads the downstream servers' resources: `/servers/resources.<ext>`.
const RESOURCES_MODULE: &str = "resources";

/// The source of `/servers/resources.<ext>`, typed for TypeScript or with JSDoc for JavaScript.
/// Its one function takes Runbyte's resource URIs, the ones `resources/list` gives clients.
fn resources_module(typescript: bool) -> String {
    let read = crate::hub::READ_RESOURCE;
    let (contents, signature, cast) = if typescript {
        (
            "export interface ResourceContents {\n  /** Runbyte's URI of what was read. */\n  uri: string;\n  mimeType?: string;\n  /** The contents, for text. */\n  text?: string;\n  /** The contents, base64, for binary data. */\n  blob?: string;\n}\n\n",
            "export async function readResource(uri: string): Promise<ResourceContents[]>",
            " as Promise<ResourceContents[]>",
        )
    } else {
        (
            "/**\n * @typedef {object} ResourceContents\n * @property {string} uri Runbyte's URI of what was read.\n * @property {string} [mimeType]\n * @property {string} [text] The contents, for text.\n * @property {string} [blob] The contents, base64, for binary data.\n */\n\n",
            "/**\n * @param {string} uri\n * @returns {Promise<ResourceContents[]>}\n */\nexport async function readResource(uri)",
            "",
        )
    };
    format!(
        "/**\n * The downstream servers' resources (MCP resources), read from a program.\n * A URI is Runbyte's: runbyte://<server>/<the server's own URI>, or for a UI resource\n * (MCP Apps) ui://<server>/<the rest of its ui:// URI>, as the client's resources/list\n * gives it (a template's, filled in, likewise).\n */\nimport {{ callTool }} from \"runbyte:bridge\";\n\n{contents}/** Reads a resource; throws if the URI names no server or its server cannot read it. */\n{signature} {{\n  const match = /^(?:runbyte|ui):\\/\\/([^/]+)\\//.exec(uri);\n  if (!match) {{\n    throw new Error(`readResource: \\`${{uri}}\\` is not one of Runbyte's resource URIs (runbyte://<server>/<uri>, ui://<server>/<rest>)`);\n  }}\n  return callTool(decodeURIComponent(match[1]), \"{read}\", {{ uri }}){cast};\n}}\n"
    )
}

/// The extension of a dialect's modules, as its last answer told it ([`DEFAULT_EXTENSION`]
/// until one does).
struct Extension(std::sync::Mutex<String>);

impl Default for Extension {
    fn default() -> Self {
        Extension(std::sync::Mutex::new(DEFAULT_EXTENSION.to_owned()))
    }
}

impl Extension {
    fn get(&self) -> String {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Records the extension that `response` (from `dialect`) tells and returns the one in use.
    /// The response's `extension` says it; a dialect older than that key says it with the name
    /// of its `index` module (`index` is that module's path up to the extension: `index.` or
    /// `<folder>/index.`). An extension that is not 1 to 16 ASCII letters and digits is not put
    /// in a path: it is ignored, with a warning.
    fn learn(&self, response: &CodegenResponse, index: &str, dialect: &str) -> String {
        let told = response.extension.as_deref().or_else(|| {
            response
                .files
                .iter()
                .find_map(|file| file.path.strip_prefix(index))
        });
        let mut slot = self.0.lock().unwrap_or_else(|p| p.into_inner());
        match told {
            Some(extension)
                if !extension.is_empty()
                    && extension.len() <= 16
                    && extension.bytes().all(|b| b.is_ascii_alphanumeric()) =>
            {
                extension.clone_into(&mut slot);
            }
            Some(bad) => tracing::warn!(
                dialect,
                "ignoring the extension `{}` the dialect gave: not a plain file extension",
                comment_safe(bad)
            ),
            None => {}
        }
        slot.clone()
    }
}

/// The folder of a server that is still starting: a placeholder `index` module.
fn starting_folder(server: &str, folder: &str, extension: &str) -> ServerFiles {
    let content = format!(
        "// Server `{}` is starting: its tools appear here once it has listed them.\n// A program that imports it waits for it (within the program's time limit).\nexport {{}};\n",
        comment_safe(server)
    );
    ServerFiles {
        files: vec![(
            format!("/servers/{folder}/index.{extension}"),
            File::new(content),
        )],
        folder: Arc::new(ServerFolder {
            server: server.to_owned(),
            folder: folder.to_owned(),
            status: FolderStatus::Starting,
            tools: Vec::new(),
        }),
        made: None,
    }
}

/// The folder of a server that is down: a placeholder `index` module that says why.
fn down_folder(server: &str, folder: &str, reason: &str, extension: &str) -> ServerFiles {
    let content = format!(
        "// Server `{}` is unavailable: {}\n// Runbyte retries it; its tools appear here when it is back.\nexport {{}};\n",
        comment_safe(server),
        comment_safe(reason)
    );
    ServerFiles {
        files: vec![(
            format!("/servers/{folder}/index.{extension}"),
            File::new(content),
        )],
        folder: Arc::new(ServerFolder {
            server: server.to_owned(),
            folder: folder.to_owned(),
            status: FolderStatus::Down(reason.to_owned()),
            tools: Vec::new(),
        }),
        made: None,
    }
}

/// `first` and the servers of every tools change already waiting in `events`, each once, in
/// order; `None` when changes were lost (the receiver lagged), so that everything is rebuilt.
fn queued_changes(
    events: &mut tokio::sync::broadcast::Receiver<HubEvent>,
    first: String,
) -> Option<Vec<String>> {
    use tokio::sync::broadcast::error::TryRecvError;
    let mut servers = vec![first];
    loop {
        match events.try_recv() {
            Ok(HubEvent::ToolsChanged { server }) => {
                if !servers.contains(&server) {
                    servers.push(server);
                }
            }
            Ok(_) => {}
            Err(TryRecvError::Lagged(_)) => return None,
            // Closed: the next `recv` says so.
            Err(TryRecvError::Empty | TryRecvError::Closed) => return Some(servers),
        }
    }
}

/// The comment a server's index opens with when some of its tools were mended or left out.
fn warning_lines(server: &str, warnings: &[String]) -> String {
    let mut out = format!(
        "// Warning: some tools of server `{}` are not as it lists them:\n",
        comment_safe(server)
    );
    for warning in warnings {
        out.push_str("//   ");
        out.push_str(&comment_safe(warning));
        out.push('\n');
    }
    out
}

/// A description's first sentence or line, at most 160 characters.
fn summary(description: &str) -> String {
    let line = description.trim().lines().next().unwrap_or_default().trim();
    let mut out: String = line.chars().take(160).collect();
    if out.len() < line.len() {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn changes_already_queued_are_taken_together_once_each() {
        let (events, mut receiver) = tokio::sync::broadcast::channel(4);
        let changed = |server: &str| HubEvent::ToolsChanged {
            server: server.to_owned(),
        };
        for server in ["b", "a", "b", "c"] {
            events.send(changed(server)).unwrap();
        }
        assert_eq!(
            queued_changes(&mut receiver, "a".to_owned()),
            Some(vec!["a".to_owned(), "b".to_owned(), "c".to_owned()])
        );
        assert_eq!(
            queued_changes(&mut receiver, "d".to_owned()),
            Some(vec!["d".to_owned()])
        );
        // More than the channel holds: some were lost, so everything is regenerated.
        for server in ["a", "b", "c", "d", "e", "f"] {
            events.send(changed(server)).unwrap();
        }
        assert_eq!(queued_changes(&mut receiver, "a".to_owned()), None);
    }

    #[test]
    fn folder_names_are_path_safe_and_distinct() {
        let folders = folder_names(["github", "my server", "my_server", "..", "a/b", "index"]);
        assert_eq!(folders["github"], "github");
        assert_eq!(folders["my server"], "my_server");
        assert_eq!(folders["my_server"], "my_server_2");
        assert_eq!(folders[".."], "_..");
        assert_eq!(folders["a/b"], "a_b");
        assert_eq!(folders["index"], "_index");
    }

    fn answer(text: &str) -> CodegenResponse {
        serde_json::from_str(text).unwrap()
    }

    #[test]
    fn a_js_dialect_s_placeholder_files_carry_js() {
        // A third-party dialect that writes `.js` modules, as its root answer says.
        let extension = Extension::default();
        let root = answer(
            r#"{"files": [{"path": "index.js", "content": "export * as demo from \"./demo/index.js\";\n"}],
                "tools": [], "warnings": [], "extension": "js"}"#,
        );
        assert_eq!(extension.learn(&root, "index.", "acme-js"), "js");
        let starting = starting_folder("demo", "demo", &extension.get());
        let down = down_folder("demo", "demo", "connection refused", &extension.get());
        assert_eq!(starting.files[0].0, "/servers/demo/index.js");
        assert_eq!(down.files[0].0, "/servers/demo/index.js");
        assert_eq!(
            down.folder.status,
            FolderStatus::Down("connection refused".into())
        );

        // An answer that names no extension leaves it as it was.
        assert_eq!(extension.learn(&answer("{}"), "index.", "acme-js"), "js");
        // One that would put a path in a file name is ignored.
        let bad = answer(r#"{"extension": "js/../../x"}"#);
        assert_eq!(extension.learn(&bad, "index.", "acme-js"), "js");
    }

    #[test]
    fn a_dialect_older_than_the_extension_key_is_known_by_its_index() {
        let extension = Extension::default();
        assert_eq!(extension.get(), "ts");
        let server = answer(
            r#"{"files": [{"path": "demo/echo.js", "content": ""}, {"path": "demo/index.js", "content": ""}]}"#,
        );
        assert_eq!(extension.learn(&server, "demo/index.", "old-js"), "js");
        assert_eq!(
            starting_folder("demo", "demo", &extension.get()).files[0].0,
            "/servers/demo/index.js"
        );
        let typescript = answer(r#"{"files": [{"path": "index.ts", "content": ""}]}"#);
        assert_eq!(
            Extension::default().learn(&typescript, "index.", "ts"),
            "ts"
        );
    }
}
