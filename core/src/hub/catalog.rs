//! The downstream servers' resources and prompts, gathered for Runbyte's clients.
//!
//! Every server that offers resources or prompts is asked in parallel, each bounded by its
//! init timeout and by [`MAX_ITEMS`]; one that fails or is down is left out (with a WARN) and
//! never holds up the others. Resources are namespaced by server: a server's URI `U` becomes
//! `runbyte://<server>/U` (the server's name percent-encoded), so two servers that both serve
//! `file:///notes.md` stay apart and a read goes to the server that listed it. Templates are
//! prefixed the same way, which keeps them RFC 6570 templates. Prompt names are prefixed by the
//! gateway (see [`crate::gateway::Gateway::prompts`]).

use std::{sync::Arc, time::Duration};

use rmcp::{
    Peer, RoleClient,
    model::{
        GetPromptRequestParams, GetPromptResult, PaginatedRequestParams, Prompt,
        ReadResourceRequestParams, ReadResourceResult, Resource, ResourceContents,
        ResourceTemplate, SubscribeRequestParams, UnsubscribeRequestParams,
    },
    service::ServiceError,
};

use super::{Connection, DEFAULT_CALL_TIMEOUT, Hub, HubEvent, Slot, Status};

/// The scheme of the URIs Runbyte gives downstream resources.
const SCHEME: &str = "runbyte://";

/// The "tool" a program's `readResource` calls: the bridge routes it to `resources/read`. (A
/// downstream tool of this name is not reachable from programs; MCP tool names hold no `/`.)
pub const READ_RESOURCE: &str = "resources/read";

/// The most resources, templates or prompts taken from one server; the rest are left out with a
/// warning, so a server that lists without end cannot grow a client's answer without bound.
const MAX_ITEMS: usize = 10_000;

/// The most pages one listing follows.
const MAX_PAGES: usize = 100;

/// Runbyte's URI for a server's resource `uri`.
pub fn namespaced_uri(server: &str, uri: &str) -> String {
    let mut out = String::with_capacity(SCHEME.len() + server.len() + uri.len() + 1);
    out.push_str(SCHEME);
    for byte in server.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.' | b'~') {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out.push('/');
    out.push_str(uri);
    out
}

/// The server and the server's own URI that a Runbyte resource URI stands for; `None` for a URI
/// that is not one of Runbyte's.
pub fn split_uri(uri: &str) -> Option<(String, &str)> {
    let rest = uri.strip_prefix(SCHEME)?;
    let (encoded, original) = rest.split_once('/')?;
    let mut server = Vec::with_capacity(encoded.len());
    let bytes = encoded.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = encoded.get(i + 1..i + 3)?;
            server.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            server.push(bytes[i]);
            i += 1;
        }
    }
    let server = String::from_utf8(server).ok()?;
    (!server.is_empty() && !original.is_empty()).then_some((server, original))
}

/// Why a resource or prompt request failed; each message names the server (and URI or prompt).
#[derive(Debug, Clone, thiserror::Error)]
pub enum CatalogError {
    /// Not one of Runbyte's URIs, or no configured server's.
    #[error("Resource not found: `{uri}` {why}")]
    NotFound { uri: String, why: String },
    /// The server is down, or does not offer what was asked.
    #[error("server `{server}` {why}")]
    Unavailable { server: String, why: String },
    /// The server answered with an error, or not in time.
    #[error("server `{server}`: {why}")]
    Failed { server: String, why: String },
}

impl CatalogError {
    /// Whether the client asked for something that does not exist (a -32602 error), rather
    /// than something a server failed to give (-32603).
    pub fn is_not_found(&self) -> bool {
        matches!(self, CatalogError::NotFound { .. })
    }
}

/// Each server's items, renamed by `rename` for clients, in one list.
fn namespaced<T>(lists: Vec<(String, Vec<T>)>, rename: impl Fn(&str, &mut T)) -> Vec<T> {
    let mut all = Vec::new();
    for (server, items) in lists {
        all.extend(items.into_iter().map(|mut item| {
            rename(&server, &mut item);
            item
        }));
    }
    all
}

/// Lists every page of one kind of item, at most [`MAX_PAGES`] pages and [`MAX_ITEMS`] items.
async fn list_pages<T, F, Fut>(server: &str, what: &str, mut page: F) -> Result<Vec<T>, String>
where
    F: FnMut(Option<PaginatedRequestParams>) -> Fut,
    Fut: Future<Output = Result<(Vec<T>, Option<String>), ServiceError>>,
{
    let mut items = Vec::new();
    let mut cursor = None;
    for _ in 0..MAX_PAGES {
        let params =
            cursor.map(|cursor| PaginatedRequestParams::default().with_cursor(Some(cursor)));
        let (listed, next) = page(params).await.map_err(|e| e.to_string())?;
        items.extend(listed);
        if items.len() > MAX_ITEMS {
            tracing::warn!(
                server,
                "lists more than {MAX_ITEMS} {what}; the rest are left out"
            );
            items.truncate(MAX_ITEMS);
            return Ok(items);
        }
        cursor = next;
        if cursor.is_none() {
            return Ok(items);
        }
    }
    tracing::warn!(
        server,
        "its {what} run past {MAX_PAGES} pages; the rest are left out"
    );
    Ok(items)
}

impl Hub {
    /// A server came up: its resources and prompts may be new to clients, and the resources
    /// clients subscribed to are subscribed to again on the new connection.
    pub(super) fn came_up(&self, server: &str, connection: &Arc<Connection>) {
        let (resources, subscribes) = connection.offers_resources();
        if resources {
            let _ = self.inner.events.send(HubEvent::ResourcesChanged {
                server: server.to_owned(),
            });
        }
        if connection.offers_prompts() {
            let _ = self.inner.events.send(HubEvent::PromptsChanged {
                server: server.to_owned(),
            });
        }
        if !subscribes {
            return;
        }
        let uris: Vec<String> = self
            .inner
            .subscribed
            .lock()
            .map(|subscribed| {
                subscribed
                    .keys()
                    .filter(|(s, _)| s == server)
                    .map(|(_, uri)| uri.clone())
                    .collect()
            })
            .unwrap_or_default();
        if uris.is_empty() {
            return;
        }
        let (connection, server) = (connection.clone(), server.to_owned());
        tokio::spawn(async move {
            for uri in uris {
                #[allow(deprecated)] // resources/subscribe is how legacy servers take it.
                let sent = connection
                    .service
                    .peer()
                    .subscribe(SubscribeRequestParams::new(uri.clone()))
                    .await;
                if let Err(error) = sent {
                    tracing::warn!(server, uri, "cannot subscribe again: {error}");
                }
            }
        });
    }

    /// The live shared connections of ready servers that `offers`, with the server's name and
    /// its init timeout (which bounds a listing).
    fn offering(
        &self,
        offers: impl Fn(&Connection) -> bool,
    ) -> Vec<(String, Arc<Connection>, Duration)> {
        self.inner
            .servers
            .values()
            .filter(|slot| slot.status() == Status::Ready)
            .filter_map(|slot| {
                let connection = slot.connection()?;
                (connection.is_alive() && offers(&connection))
                    .then(|| (slot.name.clone(), connection, slot.init_timeout()))
            })
            .collect()
    }

    /// Asks every server that `offers` for every page of its list (`page` asks one), in
    /// parallel; a server that fails or takes longer than its init timeout is left out with a
    /// warning.
    async fn gather<T, F, Fut>(
        &self,
        what: &'static str,
        offers: fn(&Connection) -> bool,
        page: F,
    ) -> Vec<(String, Vec<T>)>
    where
        F: Fn(Peer<RoleClient>, Option<PaginatedRequestParams>) -> Fut + Clone,
        Fut: Future<Output = Result<(Vec<T>, Option<String>), ServiceError>>,
    {
        let asks = self
            .offering(offers)
            .into_iter()
            .map(|(server, connection, within)| {
                let (peer, page) = (connection.service.peer().clone(), page.clone());
                async move {
                    let listing = list_pages(&server, what, |params| page(peer.clone(), params));
                    match tokio::time::timeout(within, listing).await {
                        Ok(Ok(items)) => Some((server, items)),
                        Ok(Err(error)) => {
                            tracing::warn!(server, "listing its {what} failed: {error}");
                            None
                        }
                        Err(_) => {
                            tracing::warn!(
                                server,
                                "did not list its {what} within {} ms",
                                within.as_millis()
                            );
                            None
                        }
                    }
                }
            });
        futures::future::join_all(asks)
            .await
            .into_iter()
            .flatten()
            .collect()
    }

    /// Every server's resources, with Runbyte's URIs, server by server.
    pub async fn list_resources(&self) -> Vec<Resource> {
        let offers = |c: &Connection| c.offers_resources().0;
        let lists = self
            .gather("resources", offers, |peer, params| async move {
                let page = peer.list_resources(params).await?;
                Ok((page.resources, page.next_cursor))
            })
            .await;
        namespaced(lists, |server, resource: &mut Resource| {
            resource.uri = namespaced_uri(server, &resource.uri);
        })
    }

    /// Every server's resource templates, with Runbyte's URI prefix.
    pub async fn list_resource_templates(&self) -> Vec<ResourceTemplate> {
        let offers = |c: &Connection| c.offers_resources().0;
        let lists = self
            .gather("resource templates", offers, |peer, params| async move {
                let page = peer.list_resource_templates(params).await?;
                Ok((page.resource_templates, page.next_cursor))
            })
            .await;
        namespaced(lists, |server, template: &mut ResourceTemplate| {
            template.uri_template = namespaced_uri(server, &template.uri_template);
        })
    }

    /// Every server's prompts, with the server's name (the gateway names them for clients).
    pub async fn list_prompts(&self) -> Vec<(String, Vec<Prompt>)> {
        self.gather(
            "prompts",
            Connection::offers_prompts,
            |peer, params| async move {
                let page = peer.list_prompts(params).await?;
                Ok((page.prompts, page.next_cursor))
            },
        )
        .await
    }

    /// The slot of the server a Runbyte resource URI names, and the server's own URI.
    fn resource_slot<'u>(&self, uri: &'u str) -> Result<(&Arc<Slot>, &'u str), CatalogError> {
        let Some((server, original)) = split_uri(uri) else {
            return Err(CatalogError::NotFound {
                uri: uri.to_owned(),
                why: "is not one of Runbyte's resource URIs (runbyte://<server>/<uri>, as \
                      resources/list gives them)"
                    .to_owned(),
            });
        };
        match self.inner.servers.get(&server) {
            Some(slot) => Ok((slot, original)),
            None => Err(CatalogError::NotFound {
                uri: uri.to_owned(),
                why: format!(
                    "names server `{server}`, which is not configured; the servers are: {}",
                    self.server_names().join(", ")
                ),
            }),
        }
    }

    /// Reads a resource by Runbyte's URI from the server that serves it (through the session's
    /// own connection for `share = "session"` servers), bounded by the server's call timeout.
    /// The contents carry Runbyte's URIs.
    pub async fn read_resource(
        &self,
        uri: &str,
        session: Option<&str>,
    ) -> Result<ReadResourceResult, CatalogError> {
        let (slot, original) = self.resource_slot(uri)?;
        let server = slot.name.clone();
        let unavailable = |why: String| CatalogError::Unavailable {
            server: server.clone(),
            why,
        };
        let connection = self
            .connection_for(slot, session)
            .await
            .map_err(|reason| unavailable(format!("is unavailable: {reason}")))?;
        if !connection.offers_resources().0 {
            return Err(unavailable("offers no resources".to_owned()));
        }
        let within = slot
            .config
            .call_timeout_ms
            .map(Duration::from_millis)
            .unwrap_or(DEFAULT_CALL_TIMEOUT);
        let reading = connection
            .service
            .peer()
            .read_resource(ReadResourceRequestParams::new(original));
        let mut result = match tokio::time::timeout(within, reading).await {
            Ok(Ok(result)) => result,
            Ok(Err(ServiceError::McpError(error))) => {
                return Err(CatalogError::Failed {
                    server,
                    why: format!(
                        "reading `{original}` failed: {} (JSON-RPC error {})",
                        error.message, error.code.0
                    ),
                });
            }
            Ok(Err(error)) => {
                return Err(CatalogError::Failed {
                    server,
                    why: format!("reading `{original}` failed: {error}"),
                });
            }
            Err(_) => {
                return Err(CatalogError::Failed {
                    server,
                    why: format!(
                        "did not answer reading `{original}` within {} ms",
                        within.as_millis()
                    ),
                });
            }
        };
        for contents in &mut result.contents {
            let uri = match contents {
                ResourceContents::TextResourceContents { uri, .. }
                | ResourceContents::BlobResourceContents { uri, .. } => uri,
                _ => continue,
            };
            *uri = namespaced_uri(&server, uri);
        }
        crate::redact::guard_result(&mut result);
        Ok(result)
    }

    /// Gets a prompt (by the server's own name for it), bounded by the server's call timeout.
    pub async fn get_prompt(
        &self,
        server: &str,
        params: GetPromptRequestParams,
        session: Option<&str>,
    ) -> Result<GetPromptResult, CatalogError> {
        let unavailable = |why: String| CatalogError::Unavailable {
            server: server.to_owned(),
            why,
        };
        let slot = self
            .slot(server)
            .map_err(|error| unavailable(error.to_string()))?;
        let connection = self
            .connection_for(slot, session)
            .await
            .map_err(|reason| unavailable(format!("is unavailable: {reason}")))?;
        if !connection.offers_prompts() {
            return Err(unavailable("offers no prompts".to_owned()));
        }
        let within = slot
            .config
            .call_timeout_ms
            .map(Duration::from_millis)
            .unwrap_or(DEFAULT_CALL_TIMEOUT);
        let name = params.name.clone();
        let getting = connection.service.peer().get_prompt(params);
        let failed = |why: String| CatalogError::Failed {
            server: server.to_owned(),
            why,
        };
        match tokio::time::timeout(within, getting).await {
            Ok(Ok(result)) => Ok(result),
            Ok(Err(ServiceError::McpError(error))) => Err(failed(format!(
                "getting prompt `{name}` failed: {} (JSON-RPC error {})",
                error.message, error.code.0
            ))),
            Ok(Err(error)) => Err(failed(format!("getting prompt `{name}` failed: {error}"))),
            Err(_) => Err(failed(format!(
                "did not answer getting prompt `{name}` within {} ms",
                within.as_millis()
            ))),
        }
    }

    /// Subscribes a client to a resource by Runbyte's URI: the first subscription to a URI
    /// subscribes downstream (`resources/subscribe`, the legacy revisions' way), later ones only
    /// count. Its updates arrive as [`HubEvent::ResourceUpdated`].
    pub async fn subscribe_resource(&self, uri: &str) -> Result<(), CatalogError> {
        let (slot, original) = self.resource_slot(uri)?;
        let server = slot.name.clone();
        let key = (server.clone(), original.to_owned());
        let first = self.hold(&key, 1) == 1;
        if !first {
            return Ok(());
        }
        let unavailable = |why: String| CatalogError::Unavailable {
            server: server.clone(),
            why,
        };
        let subscribed = async {
            let connection = self
                .ensure_connected(slot)
                .await
                .map_err(|reason| unavailable(format!("is unavailable: {reason}")))?;
            match connection.offers_resources() {
                (false, _) => return Err(unavailable("offers no resources".to_owned())),
                (true, false) => {
                    return Err(unavailable(
                        "does not take resource subscriptions (its `resources` capability has \
                         no `subscribe`)"
                            .to_owned(),
                    ));
                }
                (true, true) => {}
            }
            #[allow(deprecated)] // resources/subscribe is how legacy servers take it.
            let sent = connection
                .service
                .peer()
                .subscribe(SubscribeRequestParams::new(original));
            match tokio::time::timeout(slot.init_timeout(), sent).await {
                Ok(Ok(())) => Ok(()),
                Ok(Err(error)) => Err(CatalogError::Failed {
                    server: server.clone(),
                    why: format!("subscribing to `{original}` failed: {error}"),
                }),
                Err(_) => Err(CatalogError::Failed {
                    server: server.clone(),
                    why: format!("did not answer subscribing to `{original}` in time"),
                }),
            }
        }
        .await;
        if subscribed.is_err() {
            self.hold(&key, -1);
        }
        subscribed
    }

    /// Ends one client subscription to a resource; the last one unsubscribes downstream.
    pub async fn unsubscribe_resource(&self, uri: &str) -> Result<(), CatalogError> {
        let (slot, original) = self.resource_slot(uri)?;
        let key = (slot.name.clone(), original.to_owned());
        if self.hold(&key, -1) != 0 {
            return Ok(());
        }
        if let Some(connection) = slot.connection().filter(|c| c.is_alive()) {
            #[allow(deprecated)] // resources/unsubscribe is how legacy servers take it.
            let sent = connection
                .service
                .peer()
                .unsubscribe(UnsubscribeRequestParams::new(original));
            if let Ok(Err(error)) = tokio::time::timeout(slot.init_timeout(), sent).await {
                tracing::debug!(server = %slot.name, uri = original, "unsubscribe failed: {error}");
            }
        }
        Ok(())
    }

    /// Changes how many client subscriptions hold `key` by `by` (never below zero) and returns
    /// the new count; a count of zero is forgotten.
    fn hold(&self, key: &(String, String), by: isize) -> usize {
        let Ok(mut subscribed) = self.inner.subscribed.lock() else {
            return 0;
        };
        let count = subscribed.get(key).copied().unwrap_or(0);
        let count = count.saturating_add_signed(by);
        if count == 0 {
            subscribed.remove(key);
        } else {
            subscribed.insert(key.clone(), count);
        }
        count
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_uri_is_namespaced_by_its_server_and_read_back() {
        let uri = namespaced_uri("everything", "test://static/resource/1");
        assert_eq!(uri, "runbyte://everything/test://static/resource/1");
        assert_eq!(
            split_uri(&uri),
            Some(("everything".to_owned(), "test://static/resource/1"))
        );
        // A name with characters a URI host cannot hold is percent-encoded, and comes back.
        let odd = namespaced_uri("my server:1%", "file:///a b.md");
        assert_eq!(odd, "runbyte://my%20server%3A1%25/file:///a b.md");
        assert_eq!(
            split_uri(&odd),
            Some(("my server:1%".to_owned(), "file:///a b.md"))
        );
        // A template stays a template.
        assert_eq!(
            namespaced_uri("fs", "file:///{path}"),
            "runbyte://fs/file:///{path}"
        );
    }

    #[test]
    fn uris_that_are_not_runbytes_are_refused() {
        for uri in [
            "test://static/resource/1",
            "runbyte://",
            "runbyte://everything",
            "runbyte://everything/",
            "runbyte:///test://x",
            "runbyte://%zz/x",
            "runbyte://%FF/x",
        ] {
            assert_eq!(split_uri(uri), None, "{uri}");
        }
    }
}
