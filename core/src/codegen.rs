//! The codegen driver: asks the dialect plugin for each server's files, keeps them, and on a
//! tool-list change regenerates that server and swaps the whole VFS snapshot at once.
//!
//! It follows the Hub from the moment it is made, so the VFS has a folder for every server at
//! once: a server still starting has one that says so, and each server's tools appear as soon
//! as it has listed them, whatever the others are doing.

use std::{collections::BTreeMap, sync::Arc};

use rmcp::model::Tool;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::{
    hub::{Hub, HubEvent, Status},
    plugin::CodegenPlugin,
    vfs::{File, FolderStatus, ServerFolder, Snapshot, ToolEntry, Vfs},
};

#[derive(Debug, Deserialize)]
struct Response {
    #[serde(default)]
    files: Vec<GeneratedFile>,
    #[serde(default)]
    tools: Vec<GeneratedTool>,
    #[serde(default)]
    warnings: Vec<String>,
}

#[derive(Debug, Deserialize)]
struct GeneratedFile {
    path: String,
    content: String,
}

#[derive(Debug, Deserialize)]
struct GeneratedTool {
    name: String,
    identifier: String,
    path: String,
    signature: String,
}

/// What one server contributed to the VFS.
struct ServerFiles {
    files: Vec<(String, Arc<File>)>,
    folder: ServerFolder,
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
    extension: std::sync::Mutex<String>,
    /// Whether a task already follows the Hub's events.
    following: std::sync::atomic::AtomicBool,
}

impl CodegenDriver {
    /// A driver for the Hub's servers, writing into `vfs`.
    pub fn new(dialect: CodegenPlugin, hub: Hub, vfs: Arc<Vfs>) -> Arc<Self> {
        let names = hub.server_names();
        let folders = folder_names(names.iter().map(String::as_str));
        let driver = Arc::new(CodegenDriver {
            dialect,
            hub,
            vfs,
            folders,
            state: tokio::sync::Mutex::new(BTreeMap::new()),
            generation: std::sync::atomic::AtomicU64::new(0),
            extension: std::sync::Mutex::new("ts".to_owned()),
            following: std::sync::atomic::AtomicBool::new(false),
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
        }
        driver
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
        loop {
            match events.recv().await {
                Ok(HubEvent::ToolsChanged { server }) => self.regenerate(&[server]).await,
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                    self.rebuild_all().await
                }
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
            }
        }
    }

    /// Regenerates every server's files.
    pub async fn rebuild_all(&self) {
        let names = self.hub.server_names();
        self.regenerate(&names).await;
    }

    /// Regenerates the named servers and swaps in a new snapshot.
    pub async fn regenerate(&self, servers: &[String]) {
        let mut state = self.state.lock().await;
        // The root first: its index tells the extension down servers' placeholder files get.
        let root = self.generate_root().await;
        for server in servers {
            let Some(folder) = self.folders.get(server) else {
                continue;
            };
            let view = self.hub.server(server).await;
            let generated = match view {
                Some(view) if view.status == Status::Ready => {
                    self.generate_server(server, folder, view.tools.clone(), &view.warnings)
                        .await
                }
                Some(view) => Ok(match view.status {
                    Status::Failed { error, .. } => self.down_folder(server, folder, &error),
                    _ => self.starting_folder(server, folder),
                }),
                None => continue,
            };
            let files = generated.unwrap_or_else(|error| {
                tracing::warn!(server, "codegen failed: {error}");
                self.down_folder(server, folder, &format!("codegen failed: {error}"))
            });
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
    }

    async fn call_dialect(&self, request: Value) -> Result<Response, String> {
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
        let request =
            json!({"kind": "server", "server": server, "folder": folder, "tools": tools.as_ref()});
        let response = self.call_dialect(request).await?;
        for warning in &response.warnings {
            tracing::warn!(server, dialect = %self.dialect.info().name, "{warning}");
        }
        let prefix = format!("{folder}/");
        let index = format!("{folder}/index.{}", self.extension());
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
        let entries = response
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
        let folder = ServerFolder {
            server: server.to_owned(),
            folder: folder.to_owned(),
            status: FolderStatus::Ready,
            tools: entries,
        };
        Ok(ServerFiles { files, folder })
    }

    fn starting_folder(&self, server: &str, folder: &str) -> ServerFiles {
        let content = format!(
            "// Server `{}` is starting: its tools appear here once it has listed them.\n// A program that imports it waits for it (within the program's time limit).\nexport {{}};\n",
            comment_safe(server)
        );
        let path = format!("/servers/{folder}/index.{}", self.extension());
        ServerFiles {
            files: vec![(path, File::new(content))],
            folder: ServerFolder {
                server: server.to_owned(),
                folder: folder.to_owned(),
                status: FolderStatus::Starting,
                tools: Vec::new(),
            },
        }
    }

    fn down_folder(&self, server: &str, folder: &str, reason: &str) -> ServerFiles {
        let content = format!(
            "// Server `{}` is unavailable: {}\n// Runbyte retries it; its tools appear here when it is back.\nexport {{}};\n",
            comment_safe(server),
            comment_safe(reason)
        );
        let path = format!("/servers/{folder}/index.{}", self.extension());
        ServerFiles {
            files: vec![(path, File::new(content))],
            folder: ServerFolder {
                server: server.to_owned(),
                folder: folder.to_owned(),
                status: FolderStatus::Down(reason.to_owned()),
                tools: Vec::new(),
            },
        }
    }

    /// The extension the dialect's modules have, learned from its root index.
    fn extension(&self) -> &'static str {
        if self.dialect.info().name == "jsdoc" {
            "js"
        } else {
            "ts"
        }
    }

    async fn generate_root(&self) -> Vec<(String, Arc<File>)> {
        let servers: Vec<Value> = self
            .folders
            .iter()
            .map(|(name, folder)| json!({"name": name, "folder": folder}))
            .collect();
        match self
            .call_dialect(json!({"kind": "root", "servers": servers}))
            .await
        {
            Ok(response) => {
                let index_ext = response
                    .files
                    .iter()
                    .find_map(|f| f.path.strip_prefix("index.").map(str::to_owned));
                if let (Some(ext), Ok(mut slot)) = (index_ext, self.extension.lock()) {
                    *slot = ext;
                }
                response
                    .files
                    .into_iter()
                    .filter(|file| {
                        !file.path.contains('/') && file.path != ".." && file.path != "."
                    })
                    .map(|file| (format!("/servers/{}", file.path), File::new(file.content)))
                    .collect()
            }
            Err(error) => {
                tracing::warn!(dialect = %self.dialect.info().name, "codegen of /servers/index failed: {error}");
                Vec::new()
            }
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
    use super::*;

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
}
