//! The downstream servers' resources and prompts, gathered for Runbyte's clients.
//!
//! Every server that offers resources or prompts is asked in parallel, each bounded by its
//! init timeout and by [`MAX_ITEMS`]; one that fails or is down is left out (with a WARN) and
//! never holds up the others. Resources are namespaced by server: a server's URI `U` becomes
//! `runbyte://<server>/U` (the server's name percent-encoded), so two servers that both serve
//! `file:///notes.md` stay apart and a read goes to the server that listed it; an MCP Apps
//! `ui://` URI keeps its scheme and a verbatim server's URIs stay as they are (the one rule, both
//! ways, is [`Uris`]). Templates are given the same way, which keeps them RFC 6570 templates; a
//! URI two servers would give is listed for neither. Prompt names are prefixed by the gateway
//! (see [`crate::gateway::Gateway::prompts`]).
//!
//! What a server lists is kept (see [`Lists`]) until it says its list changed or its
//! connection changes, so concurrent and repeated lists share one listing; each server's part is
//! bounded by [`MAX_SERVER_LIST_BYTES`] and all of one kind by [`MAX_LIST_BYTES`], and Runbyte's
//! answers come in pages ([`Gathered::page`]). A subscription is made downstream only for a URI
//! its server lists, or one its resource templates expand to, and at most
//! [`MAX_SUBSCRIPTIONS`] are held in all.

use std::{
    borrow::Cow,
    collections::HashMap,
    sync::{Arc, Mutex, Weak},
    time::Duration,
};

use rmcp::{
    Peer, RoleClient,
    model::{
        ErrorCode, GetPromptRequestParams, PaginatedRequestParams, Prompt,
        ReadResourceRequestParams, ReadResourceResult, Resource, ResourceTemplate,
        SubscribeRequestParams, UnsubscribeRequestParams,
    },
    service::ServiceError,
};
use serde::Serialize;

use super::{Connection, DEFAULT_CALL_TIMEOUT, Hub, HubEvent, Slot, Status};

mod uris;

pub use uris::{Target, UI_SCHEME, Uris, namespaced_uri, split_uri};

/// The "tool" a program's `readResource` calls: the bridge routes it to `resources/read`. (A
/// downstream tool of this name is not reachable from programs; MCP tool names hold no `/`.)
pub const READ_RESOURCE: &str = "resources/read";

/// The most resources, templates or prompts taken from one server; the rest are left out with a
/// warning, so a server that lists without end cannot grow a client's answer without bound.
const MAX_ITEMS: usize = 10_000;

/// The most pages one listing follows.
const MAX_PAGES: usize = 100;

/// The most bytes (as JSON) one server's resources, resource templates or prompts take in
/// Runbyte's answers: 4 MiB. Past it the rest are left out with a WARN naming the server.
pub const MAX_SERVER_LIST_BYTES: usize = 4 * 1024 * 1024;
/// The most bytes all servers' items of one kind take together: 16 MiB. Past it the rest are
/// left out with a WARN naming the server whose items were cut.
pub const MAX_LIST_BYTES: usize = 16 * 1024 * 1024;
/// The most items in one page of Runbyte's own `resources/list`, `resources/templates/list` and
/// `prompts/list`; the client follows `nextCursor` for the rest.
pub const PAGE_ITEMS: usize = 500;
/// The most bytes in one page (a page holds one item at least).
pub const PAGE_BYTES: usize = 1024 * 1024;
/// The most downstream resource subscriptions Runbyte holds at once, over every client (each
/// distinct server and URI counts once): past it a subscription is refused naming the bound.
pub const MAX_SUBSCRIPTIONS: usize = 1024;
/// The longest URI a client may subscribe to.
const MAX_SUBSCRIBED_URI: usize = 2048;
/// How many of a server's templates a subscribed URI is matched against, and the most
/// expressions a template may have to be matched at all.
const MAX_MATCHED_TEMPLATES: usize = 1000;
const MAX_TEMPLATE_EXPRESSIONS: usize = 32;

/// Counts the bytes a value takes as JSON, without keeping them.
struct Count(usize);

impl std::io::Write for Count {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0 += bytes.len();
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn json_size(value: &impl Serialize) -> usize {
    let mut count = Count(0);
    let _ = serde_json::to_writer(&mut count, value);
    count.0
}

/// One server's items of one kind, with Runbyte's names, and the size of each as JSON.
#[derive(Debug)]
pub struct Listing<T> {
    items: Vec<T>,
    sizes: Vec<usize>,
    /// The shortest `ttlMs` above 0 of its pages (SEP-2549).
    ttl_ms: Option<u64>,
    /// When it is listed again, for a server that announces no changes of its kind and gave a
    /// `ttlMs` (see [`Listing::stale`]).
    fresh_until: Option<std::time::Instant>,
}

impl<T: Serialize> Listing<T> {
    /// Items Runbyte makes itself (its skills): measured, not cut.
    pub fn new(items: Vec<T>) -> Self {
        let sizes = items.iter().map(json_size).collect();
        Listing {
            items,
            sizes,
            ttl_ms: None,
            fresh_until: None,
        }
    }
}

impl<T> Listing<T> {
    /// Whether the server's `ttlMs` has passed since it was listed: the next request lists it
    /// again. Only a server that announces no changes of the kind has one (at least
    /// `MIN_LIST_TTL`); the others are listed again when they say so.
    fn stale(&self) -> bool {
        self.fresh_until
            .is_some_and(|until| until <= std::time::Instant::now())
    }
}

/// Every server's items of one kind, within [`MAX_LIST_BYTES`], in server order, shared (not
/// copied) with every request that asked at the same time.
#[derive(Debug)]
pub struct Gathered<T> {
    parts: Vec<(Arc<Listing<T>>, usize)>,
}

impl<T> Default for Gathered<T> {
    fn default() -> Self {
        Gathered { parts: Vec::new() }
    }
}

impl<T: Clone> Gathered<T> {
    /// Each server's listing in order, cut where the total passes [`MAX_LIST_BYTES`] (a WARN
    /// names the server cut).
    fn within_total(what: &str, lists: Vec<(String, Arc<Listing<T>>)>) -> Self {
        let mut left = MAX_LIST_BYTES;
        let mut parts = Vec::new();
        for (server, listing) in lists {
            let mut kept = 0;
            for size in &listing.sizes {
                if *size > left {
                    break;
                }
                left -= size;
                kept += 1;
            }
            if kept < listing.items.len() {
                tracing::warn!(
                    server,
                    "{} of its {what} are left out: all servers' {what} together pass                      {MAX_LIST_BYTES} bytes",
                    listing.items.len() - kept
                );
            }
            parts.push((listing, kept));
        }
        Gathered { parts }
    }

    /// Adds a listing after the others, whole.
    pub fn push(&mut self, listing: Listing<T>) {
        let kept = listing.items.len();
        self.parts.push((Arc::new(listing), kept));
    }

    fn iter(&self) -> impl Iterator<Item = (&T, usize)> {
        self.parts.iter().flat_map(|(listing, kept)| {
            listing.items[..*kept]
                .iter()
                .zip(listing.sizes[..*kept].iter().copied())
        })
    }

    /// How many items there are.
    pub fn len(&self) -> usize {
        self.parts.iter().map(|(_, kept)| kept).sum()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The page that starts at item `offset`: at most [`PAGE_ITEMS`] items and [`PAGE_BYTES`]
    /// (one item at least), and where the next page starts, if there is one.
    pub fn page(&self, offset: usize) -> (Vec<T>, Option<usize>) {
        let mut page = Vec::new();
        let mut bytes = 0;
        for (item, size) in self.iter().skip(offset) {
            if page.len() >= PAGE_ITEMS || (!page.is_empty() && bytes + size > PAGE_BYTES) {
                let next = offset + page.len();
                return (page, Some(next));
            }
            bytes += size;
            page.push(item.clone());
        }
        (page, None)
    }

    /// Every item.
    pub fn all(&self) -> Vec<T> {
        self.iter().map(|(item, _)| item.clone()).collect()
    }
}

/// The cursor of the page that starts at `offset` in Runbyte's own lists.
pub fn cursor(offset: usize) -> String {
    format!("runbyte-page-{offset}")
}

/// The offset a cursor of [`cursor`] stands for; `None` for one Runbyte did not give.
pub fn offset(cursor: &str) -> Option<usize> {
    cursor.strip_prefix("runbyte-page-")?.parse().ok()
}

/// Which kind of list changed.
#[derive(Debug, Clone, Copy)]
pub(super) enum Kind {
    /// Resources and resource templates.
    Resources,
    Prompts,
}

/// One server's listing of one kind, made once for the connection it was asked on: requests at
/// the same time wait for the same listing.
type Cache<T> = Mutex<
    HashMap<
        String,
        (
            Weak<Connection>,
            Arc<tokio::sync::OnceCell<Arc<Listing<T>>>>,
        ),
    >,
>;

/// What each server last listed, kept until it says its list changed (or its connection is
/// replaced).
#[derive(Default)]
pub(super) struct Lists {
    resources: Cache<Resource>,
    templates: Cache<ResourceTemplate>,
    prompts: Cache<Prompt>,
    /// The warnings of URIs left out that were said, so each is said once (at most
    /// [`MAX_WARNED`]).
    warned: Mutex<std::collections::HashSet<String>>,
}

/// The most distinct warnings of shared URIs remembered; past it, no more are said.
const MAX_WARNED: usize = 1024;

impl Lists {
    /// Says `warning` (a WARN) unless it was said before.
    fn warn_once(&self, warning: String) {
        let Ok(mut warned) = self.warned.lock() else {
            return;
        };
        if warned.len() < MAX_WARNED && warned.insert(warning.clone()) {
            tracing::warn!("{warning}");
        }
    }

    /// The server's listings of `kind` are stale.
    pub(super) fn forget(&self, server: &str, kind: Kind) {
        match kind {
            Kind::Resources => {
                forget_in(&self.resources, server);
                forget_in(&self.templates, server);
            }
            Kind::Prompts => forget_in(&self.prompts, server),
        }
    }
}

fn forget_in<T>(cache: &Cache<T>, server: &str) {
    if let Ok(mut cache) = cache.lock() {
        cache.remove(server);
    }
}

/// The cell holding `server`'s listing on `connection` (a new one for a new connection).
fn cell<T>(
    cache: &Cache<T>,
    server: &str,
    connection: &Arc<Connection>,
) -> Arc<tokio::sync::OnceCell<Arc<Listing<T>>>> {
    let Ok(mut cache) = cache.lock() else {
        return Arc::default();
    };
    if let Some((on, cell)) = cache.get(server)
        && on.strong_count() > 0
        && std::ptr::eq(on.as_ptr(), Arc::as_ptr(connection))
        && !cell.get().is_some_and(|listing| listing.stale())
    {
        return cell.clone();
    }
    let cell = Arc::new(tokio::sync::OnceCell::new());
    cache.insert(
        server.to_owned(),
        (Arc::downgrade(connection), cell.clone()),
    );
    cell
}

/// One page of a list: its items, the next cursor, its `ttlMs`.
type Page<T> = (Vec<T>, Option<String>, Option<u64>);

/// One piece of a URI template: text as it is, or an expression.
enum Piece<'a> {
    Text(&'a str),
    /// `{+x}`, `{#x}`, `{?x}`, ...: any text.
    Any,
    /// `{x}`: text without `/`, `?` or `#`.
    Segment,
}

/// Whether `uri` is one `template` expands to (RFC 6570, read loosely: a simple expression
/// stands for text without `/`, `?` or `#`, one with an operator for any text). A template
/// with more than [`MAX_TEMPLATE_EXPRESSIONS`] expressions matches nothing. The work is at most
/// the template's pieces times the URI's length.
pub fn template_matches(template: &str, uri: &str) -> bool {
    let mut pieces = Vec::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        if open > 0 {
            pieces.push(Piece::Text(&rest[..open]));
        }
        let Some(close) = rest[open..].find('}') else {
            return false;
        };
        let expression = &rest[open + 1..open + close];
        pieces.push(
            if expression.starts_with(['+', '#', '?', '&', '/', ';', '.']) {
                Piece::Any
            } else {
                Piece::Segment
            },
        );
        rest = &rest[open + close + 1..];
        if pieces.len() > 2 * MAX_TEMPLATE_EXPRESSIONS + 1 {
            return false;
        }
    }
    if !rest.is_empty() {
        pieces.push(Piece::Text(rest));
    }
    // The positions in `uri` the pieces so far can end at.
    let bytes = uri.as_bytes();
    let mut at = vec![false; bytes.len() + 1];
    at[0] = true;
    for piece in &pieces {
        let mut next = vec![false; bytes.len() + 1];
        match piece {
            Piece::Text(text) => {
                // By bytes: a segment may end inside a multi-byte character, where slicing
                // the text would panic.
                for (start, _) in at.iter().enumerate().filter(|(_, on)| **on) {
                    if bytes[start..].starts_with(text.as_bytes()) {
                        next[start + text.len()] = true;
                    }
                }
            }
            Piece::Any => {
                if let Some(first) = at.iter().position(|on| *on) {
                    next[first..].fill(true);
                }
            }
            Piece::Segment => {
                let mut open = false;
                for position in 0..=bytes.len() {
                    open |= at[position];
                    if open {
                        next[position] = true;
                    }
                    if position < bytes.len() && matches!(bytes[position], b'/' | b'?' | b'#') {
                        open = false;
                    }
                }
            }
        }
        at = next;
    }
    at[bytes.len()]
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
    /// Past a bound (the subscriptions Runbyte holds).
    #[error("{why}")]
    TooMany { why: String },
}

impl CatalogError {
    /// Whether the client asked for something that does not exist, or past a bound (a -32602
    /// error), rather than something a server failed to give (-32603).
    pub fn is_not_found(&self) -> bool {
        matches!(
            self,
            CatalogError::NotFound { .. } | CatalogError::TooMany { .. }
        )
    }
}

impl Hub {
    /// Reads the pins of `lists`' servers from the state store, if they are kept there,
    /// before they are judged ([`crate::pins::Pins::fetch`]).
    async fn fetch_pins<T>(&self, lists: &[(String, Arc<Listing<T>>)]) {
        for (server, _) in lists {
            self.inner.pins.fetch(server).await;
        }
    }

    /// Keeps what judging `lists` pinned and held in the state store, if pins are kept there.
    async fn push_pins<T>(&self, lists: &[(String, Arc<Listing<T>>)]) {
        for (server, _) in lists {
            self.inner.pins.push(server).await;
        }
    }
}

/// `lists` with each server's items judged by `judge` (its pins): those it serves.
fn judged<T: Clone + Serialize>(
    lists: Vec<(String, Arc<Listing<T>>)>,
    judge: impl Fn(&str, Vec<T>) -> Vec<T>,
) -> Vec<(String, Arc<Listing<T>>)> {
    lists
        .into_iter()
        .map(|(server, listing)| {
            let served = judge(&server, listing.items.clone());
            if served.len() == listing.items.len() {
                return (server, listing);
            }
            (server, Arc::new(Listing::new(served)))
        })
        .collect()
}

/// Lists every page of one kind of item, at most [`MAX_PAGES`] pages, [`MAX_ITEMS`] items and
/// [`MAX_SERVER_LIST_BYTES`] (as JSON, after `rename`), and measures each.
async fn list_pages<T, F, Fut>(
    server: &str,
    what: &str,
    (uris, rename): (&Uris, fn(&Uris, &str, &mut T)),
    mut page: F,
) -> Result<Listing<T>, String>
where
    T: Serialize,
    F: FnMut(Option<PaginatedRequestParams>) -> Fut,
    Fut: Future<Output = Result<Page<T>, ServiceError>>,
{
    let mut listing = Listing {
        items: Vec::new(),
        sizes: Vec::new(),
        ttl_ms: None,
        fresh_until: None,
    };
    let mut bytes = 0;
    let mut cursor = None;
    for _ in 0..MAX_PAGES {
        let params =
            cursor.map(|cursor| PaginatedRequestParams::default().with_cursor(Some(cursor)));
        let (listed, next, ttl) = page(params).await.map_err(|e| e.to_string())?;
        if let Some(ttl) = ttl.filter(|ttl| *ttl > 0) {
            listing.ttl_ms = Some(listing.ttl_ms.map_or(ttl, |shortest| shortest.min(ttl)));
        }
        for mut item in listed {
            if listing.items.len() >= MAX_ITEMS {
                tracing::warn!(
                    server,
                    "lists more than {MAX_ITEMS} {what}; the rest are left out"
                );
                return Ok(listing);
            }
            rename(uris, server, &mut item);
            let size = json_size(&item);
            if bytes + size > MAX_SERVER_LIST_BYTES {
                tracing::warn!(
                    server,
                    "its {what} pass {MAX_SERVER_LIST_BYTES} bytes after {} of them; the rest \
                     are left out",
                    listing.items.len()
                );
                return Ok(listing);
            }
            bytes += size;
            listing.items.push(item);
            listing.sizes.push(size);
        }
        cursor = next;
        if cursor.is_none() {
            return Ok(listing);
        }
    }
    tracing::warn!(
        server,
        "its {what} run past {MAX_PAGES} pages; the rest are left out"
    );
    Ok(listing)
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

    /// Every server's listing of one kind (only `only`'s when given): kept from before in
    /// `cache` while its connection lasts and it has not said its list changed, else asked for
    /// every page (`page` asks one), in parallel. A server that fails or takes longer than its
    /// init timeout is left out with a warning (and asked again next time).
    #[allow(clippy::too_many_arguments)]
    async fn gather<T, F, Fut>(
        &self,
        what: &'static str,
        kind: Kind,
        offers: fn(&Connection) -> bool,
        cache: &Cache<T>,
        only: Option<&str>,
        rename: fn(&Uris, &str, &mut T),
        page: F,
    ) -> Vec<(String, Arc<Listing<T>>)>
    where
        T: Serialize,
        F: Fn(Peer<RoleClient>, Option<PaginatedRequestParams>) -> Fut + Clone,
        Fut: Future<Output = Result<Page<T>, ServiceError>>,
    {
        let asks = self
            .offering(offers)
            .into_iter()
            .filter(|(server, ..)| only.is_none_or(|only| only == server))
            .map(|(server, connection, within)| {
                let page = page.clone();
                async move {
                    let cell = cell(cache, &server, &connection);
                    let peer = connection.service.peer().clone();
                    let filled = cell
                        .get_or_try_init(|| async {
                            let rename = (&self.inner.uris, rename);
                            let listing = list_pages(&server, what, rename, |params| {
                                page(peer.clone(), params)
                            });
                            match tokio::time::timeout(within, listing).await {
                                Ok(Ok(mut listing)) => {
                                    if !connection.announces(kind) {
                                        listing.fresh_until = listing.ttl_ms.map(|ttl| {
                                            let ttl = std::time::Duration::from_millis(ttl)
                                                .max(super::client::MIN_LIST_TTL);
                                            std::time::Instant::now() + ttl
                                        });
                                    }
                                    Ok(Arc::new(listing))
                                }
                                Ok(Err(error)) => {
                                    tracing::warn!(server, "listing its {what} failed: {error}");
                                    Err(())
                                }
                                Err(_) => {
                                    tracing::warn!(
                                        server,
                                        "did not list its {what} within {} ms",
                                        within.as_millis()
                                    );
                                    Err(())
                                }
                            }
                        })
                        .await;
                    filled.ok().map(|listing| (server, listing.clone()))
                }
            });
        futures::future::join_all(asks)
            .await
            .into_iter()
            .flatten()
            .collect()
    }

    async fn resources_of(&self, only: Option<&str>) -> Vec<(String, Arc<Listing<Resource>>)> {
        let offers = |c: &Connection| c.offers_resources().0;
        let rename = |uris: &Uris, server: &str, resource: &mut Resource| {
            resource.uri = uris.client_uri(server, &resource.uri);
        };
        self.gather(
            "resources",
            Kind::Resources,
            offers,
            &self.inner.lists.resources,
            only,
            rename,
            |peer, params| async move {
                let page = peer.list_resources(params).await?;
                Ok((page.resources, page.next_cursor, page.ttl_ms))
            },
        )
        .await
    }

    async fn templates_of(
        &self,
        only: Option<&str>,
    ) -> Vec<(String, Arc<Listing<ResourceTemplate>>)> {
        let offers = |c: &Connection| c.offers_resources().0;
        let rename = |uris: &Uris, server: &str, template: &mut ResourceTemplate| {
            template.uri_template = uris.client_uri(server, &template.uri_template);
        };
        self.gather(
            "resource templates",
            Kind::Resources,
            offers,
            &self.inner.lists.templates,
            only,
            rename,
            |peer, params| async move {
                let page = peer.list_resource_templates(params).await?;
                Ok((page.resource_templates, page.next_cursor, page.ttl_ms))
            },
        )
        .await
    }

    /// How the servers' resource URIs reach clients, and back.
    pub fn uris(&self) -> &Uris {
        &self.inner.uris
    }

    /// Every server's resources, with the URIs clients read ([`Uris`]), server by server,
    /// within the bounds; a URI two servers would share is given to neither (a WARN, once,
    /// names both).
    pub async fn list_resources(&self) -> Gathered<Resource> {
        let lists = self.resources_of(None).await;
        let lists = self.without_shared("resource", lists, |r: &Resource| &r.uri);
        Gathered::within_total("resources", lists)
    }

    /// Every server's resource templates, with the URIs clients read, within the bounds; a
    /// template two servers would share is given to neither.
    pub async fn list_resource_templates(&self) -> Gathered<ResourceTemplate> {
        let lists = self.templates_of(None).await;
        // A template held by its pin is left out (see `crate::pins`).
        self.fetch_pins(&lists).await;
        let lists = judged(lists, |server, items| {
            self.inner.pins.judge_templates(server, items).0
        });
        self.push_pins(&lists).await;
        let lists = self.without_shared("resource template", lists, |t: &ResourceTemplate| {
            &t.uri_template
        });
        Gathered::within_total("resource templates", lists)
    }

    /// `lists` without the items whose client URI (`uri_of`) more than one server lists. Only
    /// verbatim servers' URIs can meet another's (see [`Uris`]); without one, `lists` as they
    /// are.
    fn without_shared<T: Clone + Serialize>(
        &self,
        what: &str,
        lists: Vec<(String, Arc<Listing<T>>)>,
        uri_of: fn(&T) -> &String,
    ) -> Vec<(String, Arc<Listing<T>>)> {
        if !self.inner.uris.any_verbatim() {
            return lists;
        }
        let mut listed_by: HashMap<&str, Vec<&str>> = HashMap::new();
        for (server, listing) in &lists {
            for item in &listing.items {
                let servers = listed_by.entry(uri_of(item).as_str()).or_default();
                if !servers.contains(&server.as_str()) {
                    servers.push(server);
                }
            }
        }
        let shared: HashMap<String, String> = listed_by
            .into_iter()
            .filter(|(_, servers)| servers.len() > 1)
            .map(|(uri, servers)| {
                let who: Vec<String> = servers.iter().map(|s| format!("`{s}`")).collect();
                (uri.to_owned(), who.join(" and "))
            })
            .collect();
        if shared.is_empty() {
            return lists;
        }
        for (uri, who) in &shared {
            self.inner.lists.warn_once(format!(
                "servers {who} would all give the {what} `{}`; none of them is listed under \
                 it (give one server a `direct-prefix`)",
                uri.escape_debug()
            ));
        }
        lists
            .into_iter()
            .map(|(server, listing)| {
                if !listing
                    .items
                    .iter()
                    .any(|item| shared.contains_key(uri_of(item)))
                {
                    return (server, listing);
                }
                let kept: Vec<T> = listing
                    .items
                    .iter()
                    .filter(|item| !shared.contains_key(uri_of(item)))
                    .cloned()
                    .collect();
                (server, Arc::new(Listing::new(kept)))
            })
            .collect()
    }

    /// Every server's prompts, with the server's name (the gateway names them for clients),
    /// within the bounds.
    pub async fn list_prompts(&self) -> Vec<(String, Vec<Prompt>)> {
        let lists = self.prompts_of(None).await;
        // A prompt held by its pin is left out (and refused by `get_prompt`).
        self.fetch_pins(&lists).await;
        let lists = judged(lists, |server, items| {
            self.inner.pins.judge_prompts(server, items).0
        });
        self.push_pins(&lists).await;
        let servers: Vec<String> = lists.iter().map(|(server, _)| server.clone()).collect();
        let gathered = Gathered::within_total("prompts", lists);
        servers
            .into_iter()
            .zip(gathered.parts)
            .map(|(server, (listing, kept))| (server, listing.items[..kept].to_vec()))
            .collect()
    }

    async fn prompts_of(&self, only: Option<&str>) -> Vec<(String, Arc<Listing<Prompt>>)> {
        self.gather(
            "prompts",
            Kind::Prompts,
            Connection::offers_prompts,
            &self.inner.lists.prompts,
            only,
            |_, _, _| {},
            |peer, params| async move {
                let page = peer.list_prompts(params).await?;
                Ok((page.prompts, page.next_cursor, page.ttl_ms))
            },
        )
        .await
    }

    /// Whether a client may subscribe to Runbyte's `uri` of `server`: a resource the server
    /// lists, or one its resource templates expand to.
    async fn check_subscribable(&self, server: &str, uri: &str) -> Result<(), CatalogError> {
        if uri.len() > MAX_SUBSCRIBED_URI {
            return Err(CatalogError::NotFound {
                uri: format!("{}...", uri.chars().take(64).collect::<String>()),
                why: format!("is longer than {MAX_SUBSCRIBED_URI} bytes"),
            });
        }
        if self.gives(server, uri).await {
            return Ok(());
        }
        Err(CatalogError::NotFound {
            uri: uri.to_owned(),
            why: format!(
                "is neither a resource server `{server}` lists (resources/list) nor one of its \
                 resource templates (resources/templates/list) expands to; only those can be \
                 subscribed to"
            ),
        })
    }

    /// The slot of the server a client's resource URI stands for ([`Uris::targets`]), and the
    /// server's own URI. Where the URI may be more than one server's (a verbatim server's, see
    /// [`Uris`]), the one whose resources or templates give it; none doing so, the server the URI
    /// names; two doing so, neither (the URI is shared, as [`Hub::list_resources`] says).
    async fn resource_slot<'u>(
        &self,
        uri: &'u str,
    ) -> Result<(&Arc<Slot>, Cow<'u, str>), CatalogError> {
        let mut targets = self.inner.uris.targets(uri);
        if targets.len() > 1 {
            let mut serving = Vec::new();
            for target in &targets {
                if self.gives(&target.server, uri).await {
                    serving.push(target.clone());
                }
            }
            targets = match serving.len() {
                0 => targets.into_iter().filter(|t| t.named).collect(),
                1 => serving,
                _ => {
                    let who: Vec<String> =
                        serving.iter().map(|t| format!("`{}`", t.server)).collect();
                    return Err(CatalogError::NotFound {
                        uri: uri.to_owned(),
                        why: format!(
                            "is given by servers {}; it stands for none of them",
                            who.join(" and ")
                        ),
                    });
                }
            };
        }
        if let Some(target) = targets.into_iter().next()
            && let Some(slot) = self.inner.servers.get(&target.server)
        {
            return Ok((slot, target.uri));
        }
        if let Some(server) = Uris::named_server(uri).filter(|s| !self.inner.uris.is_verbatim(s)) {
            return Err(CatalogError::NotFound {
                uri: uri.to_owned(),
                why: format!(
                    "names server `{server}`, which is not configured; the servers are: {}",
                    self.server_names().join(", ")
                ),
            });
        }
        let why = if self.inner.uris.any_verbatim() {
            "is neither one of Runbyte's resource URIs (runbyte://<server>/<uri>, or \
             ui://<server>/<rest> for a UI resource, as resources/list gives them) nor one a \
             server shown as it is gives"
        } else {
            "is not one of Runbyte's resource URIs (runbyte://<server>/<uri>, or \
             ui://<server>/<rest> for a UI resource, as resources/list gives them)"
        };
        Err(CatalogError::NotFound {
            uri: uri.to_owned(),
            why: why.to_owned(),
        })
    }

    /// Whether `server` lists the client URI `uri` or one of its templates expands to it.
    async fn gives(&self, server: &str, uri: &str) -> bool {
        let listed = self.resources_of(Some(server)).await;
        if listed
            .iter()
            .any(|(_, listing)| listing.items.iter().any(|resource| resource.uri == uri))
        {
            return true;
        }
        let templates = self.templates_of(Some(server)).await;
        templates.iter().any(|(_, listing)| {
            listing
                .items
                .iter()
                .take(MAX_MATCHED_TEMPLATES)
                .any(|template| template_matches(&template.uri_template, uri))
        })
    }

    /// Reads a resource by Runbyte's URI from the server that serves it (through the session's
    /// own connection for `share = "session"` servers), bounded by the server's call timeout.
    /// The contents carry Runbyte's URIs.
    pub async fn read_resource(
        &self,
        uri: &str,
        session: Option<&str>,
    ) -> Result<ReadResourceResult, CatalogError> {
        self.read_resource_kept(uri, session)
            .await
            .map(|(result, _)| result)
    }

    /// [`Hub::read_resource`], answered from the reads kept by the server's caching hints
    /// (`ttlMs`, `cacheScope`; see [`super::cache`]) while they are fresh; whether it was.
    pub async fn read_resource_kept(
        &self,
        uri: &str,
        session: Option<&str>,
    ) -> Result<(ReadResourceResult, bool), CatalogError> {
        let (slot, original) = self.resource_slot(uri).await?;
        let original: &str = &original;
        let server = slot.name.clone();
        if let Some(kept) = self.inner.reads.read(&server, original, session) {
            return Ok((kept, true));
        }
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
            // The server has no such resource: the client asked for one that does not exist
            // (-32602 to it, as for a URI of no server), not a failure of the server.
            Ok(Err(ServiceError::McpError(error)))
                if matches!(
                    error.code,
                    ErrorCode::INVALID_PARAMS | ErrorCode::RESOURCE_NOT_FOUND
                ) =>
            {
                return Err(CatalogError::NotFound {
                    uri: uri.to_owned(),
                    why: format!(
                        "is not a resource of server `{server}`: it answered reading \
                         `{original}` with {} (JSON-RPC error {})",
                        error.message, error.code.0
                    ),
                });
            }
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
            self.inner.uris.in_contents(&server, contents);
        }
        crate::redact::guard_result(&mut result);
        self.inner.reads.put(&server, original, session, &result);
        Ok((result, false))
    }

    /// Gets a prompt (by the server's own name for it), bounded by the server's call timeout;
    /// its messages' embedded resources carry the URIs clients read.
    pub async fn get_prompt(
        &self,
        server: &str,
        mut params: GetPromptRequestParams,
        session: Option<&str>,
        asker: Option<Arc<dyn crate::relay::Asker>>,
        through: Option<&super::PassThrough>,
    ) -> Result<rmcp::model::GetPromptResponse, CatalogError> {
        let (connection, within) = self.answering(server, session).await?;
        if !connection.offers_prompts() {
            return Err(CatalogError::Unavailable {
                server: server.to_owned(),
                why: "offers no prompts".to_owned(),
            });
        }
        let name = params.name.clone();
        // A prompt its pin holds is refused by name, as a held tool is called.
        for (_, listing) in self.prompts_of(Some(server)).await {
            self.inner.pins.fetch(server).await;
            let (_, held) = self.inner.pins.judge_prompts(server, listing.items.clone());
            self.inner.pins.push(server).await;
            if let Some(held) = held.iter().find(|held| held.tool == name) {
                return Err(CatalogError::Failed {
                    server: server.to_owned(),
                    why: held.message.clone(),
                });
            }
        }
        // A 2026-07-28 client in front of a 2026-07-28 server answers the server's questions
        // itself ([`super::PassThrough`]); a legacy client is asked by `asker`, as for a call; a
        // legacy server asks during the request, as for a call.
        let stateless = connection.is_stateless();
        let through = through.filter(|_| stateless);
        if let Some(through) = through {
            params.input_responses = through.answers.clone();
            params.request_state = through.state.clone();
        }
        let peer = connection.service.peer();
        let getting = async {
            if !stateless {
                let _in_flight = connection.callers.enter(asker.clone(), None);
                return peer
                    .get_prompt(params)
                    .await
                    .map(rmcp::model::GetPromptResponse::Complete)
                    .map_err(|error| error.to_string());
            }
            for _ in 0..super::MAX_INPUT_ROUNDS {
                let answer =
                    peer.get_prompt_once(params.clone())
                        .await
                        .map_err(|error| match error {
                            ServiceError::McpError(error) => {
                                format!("{} (JSON-RPC error {})", error.message, error.code.0)
                            }
                            error => error.to_string(),
                        })?;
                let asked = match answer {
                    rmcp::model::GetPromptResponse::InputRequired(asked) if through.is_none() => {
                        asked
                    }
                    answer => return Ok(answer),
                };
                params.input_responses =
                    Some(super::answer_questions(asked.input_requests, asker.as_deref()).await?);
                params.request_state = asked.request_state;
            }
            Err(format!(
                "it kept asking for input past {} rounds",
                super::MAX_INPUT_ROUNDS
            ))
        };
        let failed = |why: String| CatalogError::Failed {
            server: server.to_owned(),
            why,
        };
        match tokio::time::timeout(within, getting).await {
            Ok(Ok(rmcp::model::GetPromptResponse::Complete(mut result))) => {
                // An embedded resource of a message is given with the URI clients read.
                for message in &mut result.messages {
                    self.inner.uris.in_content(server, &mut message.content);
                }
                Ok(result.into())
            }
            Ok(Ok(asked)) => Ok(asked),
            Ok(Err(error)) => Err(failed(format!("getting prompt `{name}` failed: {error}"))),
            Err(_) => Err(failed(format!(
                "did not answer getting prompt `{name}` within {} ms",
                within.as_millis()
            ))),
        }
    }

    /// The connection a request of `session` to `server` goes on (opened if need be), and how
    /// long the server may take to answer it (its `call-timeout-ms`).
    pub(super) async fn answering(
        &self,
        server: &str,
        session: Option<&str>,
    ) -> Result<(Arc<Connection>, Duration), CatalogError> {
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
        let within = slot
            .config
            .call_timeout_ms
            .map(Duration::from_millis)
            .unwrap_or(DEFAULT_CALL_TIMEOUT);
        Ok((connection, within))
    }

    /// Subscribes a client to a resource by Runbyte's URI: the first subscription to a URI
    /// subscribes downstream (`resources/subscribe`, the legacy revisions' way), later ones only
    /// count. Its updates arrive as [`HubEvent::ResourceUpdated`].
    ///
    /// Only a URI the server lists, or one its templates expand to, is subscribed to (else
    /// -32602 saying so), and at most [`MAX_SUBSCRIPTIONS`] distinct ones are held downstream.
    pub async fn subscribe_resource(&self, uri: &str) -> Result<(), CatalogError> {
        let (slot, original) = self.resource_slot(uri).await?;
        let original: &str = &original;
        let server = slot.name.clone();
        let key = (server.clone(), original.to_owned());
        if !self.is_held(&key) {
            // A server still starting is waited for (bounded by its init timeout), so what it
            // lists can be checked.
            if let Err(reason) = self.ensure_connected(slot).await {
                return Err(CatalogError::Unavailable {
                    server,
                    why: format!("is unavailable: {reason}"),
                });
            }
            self.check_subscribable(&server, uri).await?;
        }
        let first = self.reserve(&key)? == 1;
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
            if connection.is_stateless() {
                return self.listen_to_resource(&connection, slot, &key).await;
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
        let (slot, original) = self.resource_slot(uri).await?;
        let original: &str = &original;
        let key = (slot.name.clone(), original.to_owned());
        if self.hold(&key, -1) != 0 {
            return Ok(());
        }
        let listening = self
            .inner
            .listening
            .lock()
            .ok()
            .and_then(|mut listening| listening.remove(&key));
        if let Some(listening) = listening {
            listening.cancel();
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

    /// Whether some client subscription holds `key` now.
    /// Subscribes to resource `key` of a 2026-07-28 server, which takes subscriptions by
    /// `subscriptions/listen` (it has no `resources/subscribe`): one listen per resource, whose
    /// updates arrive as the legacy ones do, until it is unsubscribed or the connection ends.
    async fn listen_to_resource(
        &self,
        connection: &Arc<super::Connection>,
        slot: &super::Slot,
        key: &(String, String),
    ) -> Result<(), CatalogError> {
        let (server, uri) = key.clone();
        let filter = rmcp::model::SubscriptionFilter::builder()
            .resource_subscription(uri.clone())
            .build();
        let listening = connection.service.peer().listen(filter);
        let mut subscription = match tokio::time::timeout(slot.init_timeout(), listening).await {
            Ok(Ok(subscription)) => subscription,
            Ok(Err(error)) => {
                return Err(CatalogError::Failed {
                    server,
                    why: format!("subscribing to `{uri}` (subscriptions/listen) failed: {error}"),
                });
            }
            Err(_) => {
                return Err(CatalogError::Failed {
                    server,
                    why: format!("did not acknowledge subscribing to `{uri}` in time"),
                });
            }
        };
        let stop = tokio_util::sync::CancellationToken::new();
        if let Ok(mut listening) = self.inner.listening.lock() {
            listening.insert(key.clone(), stop.clone());
        }
        let ended = connection.ended.clone();
        let changes = self.inner.changes.clone();
        tokio::spawn(async move {
            loop {
                let next = tokio::select! {
                    () = stop.cancelled() => return,
                    () = ended.cancelled() => return,
                    next = subscription.next() => next,
                };
                match next {
                    Ok(Some(rmcp::model::ServerNotification::ResourceUpdatedNotification(
                        updated,
                    ))) => {
                        let change = super::client::Change::ResourceUpdated(
                            server.clone(),
                            updated.params.uri,
                        );
                        if changes.send(change).is_err() {
                            return;
                        }
                    }
                    Ok(Some(_)) => {}
                    Ok(None) | Err(_) => {
                        tracing::debug!(server, uri, "the resource's subscription ended");
                        return;
                    }
                }
            }
        });
        Ok(())
    }

    fn is_held(&self, key: &(String, String)) -> bool {
        self.inner
            .subscribed
            .lock()
            .is_ok_and(|subscribed| subscribed.contains_key(key))
    }

    /// One more client subscription holds `key`: the new count, or an error when `key` is new
    /// and [`MAX_SUBSCRIPTIONS`] are held already.
    fn reserve(&self, key: &(String, String)) -> Result<usize, CatalogError> {
        let Ok(mut subscribed) = self.inner.subscribed.lock() else {
            return Ok(0);
        };
        if !subscribed.contains_key(key) && subscribed.len() >= MAX_SUBSCRIPTIONS {
            return Err(CatalogError::TooMany {
                why: format!(
                    "Runbyte holds {MAX_SUBSCRIPTIONS} resource subscriptions for its clients, the \
                     most it may; `{}` of server `{}` was not subscribed to",
                    key.1, key.0
                ),
            });
        }
        let count = subscribed.entry(key.clone()).or_insert(0);
        *count += 1;
        Ok(*count)
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
    #![allow(clippy::unwrap_used)]

    use super::{
        uris::tests::{corpus, strings},
        *,
    };

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

    #[test]
    fn hostile_names_round_trip_and_templates_match_only_their_expansions() {
        let corpus = corpus();
        for server in strings(&corpus["servers"]) {
            for uri in strings(&corpus["uris"]) {
                let namespaced = namespaced_uri(&server, &uri);
                let back = split_uri(&namespaced);
                if server.is_empty() || uri.is_empty() {
                    assert_eq!(back, None, "{server:?} {uri:?}");
                } else {
                    assert_eq!(back, Some((server.clone(), uri.as_str())), "{namespaced:?}");
                }
            }
        }
        for case in corpus["templates"].as_array().unwrap() {
            let template = case[0].as_str().unwrap();
            for uri in strings(&case[1]) {
                assert!(template_matches(template, &uri), "{template} {uri}");
                // Namespaced the same way, they still match.
                assert!(
                    template_matches(&namespaced_uri("s", template), &namespaced_uri("s", &uri)),
                    "{template} {uri}"
                );
            }
            for uri in strings(&case[2]) {
                assert!(!template_matches(template, &uri), "{template} {uri}");
            }
        }
        // A template of many expressions matches nothing, and costs little.
        let wide = "{a}".repeat(10_000);
        let started = std::time::Instant::now();
        assert!(!template_matches(&wide, &"x".repeat(2048)));
        assert!(started.elapsed() < Duration::from_secs(5));
    }

    fn resource(server: &str, n: usize, description: usize) -> Resource {
        Resource::new(
            namespaced_uri(server, &format!("test://{n}")),
            format!("r{n}"),
        )
        .with_description("d".repeat(description))
    }

    #[test]
    fn generated_resource_lists_page_to_the_whole_within_the_bounds() {
        let servers = strings(&corpus()["servers"]);
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = |below: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % below.max(1)
        };
        for round in 0..40 {
            let mut lists = Vec::new();
            for server in servers.iter().take(1 + next(6) as usize) {
                let count = next(if round % 10 == 0 { 3000 } else { 200 }) as usize;
                // Now and then an item larger than a page.
                let items: Vec<Resource> = (0..count)
                    .map(|n| {
                        let size = if next(500) == 0 {
                            PAGE_BYTES + 10
                        } else {
                            next(if round % 10 == 0 { 8000 } else { 300 }) as usize
                        };
                        resource(server, n, size)
                    })
                    .collect();
                lists.push((server.clone(), Arc::new(Listing::new(items))));
            }
            let gathered = Gathered::within_total("resources", lists);
            let all = gathered.all();
            let total: usize = all.iter().map(json_size).sum();
            assert!(total <= MAX_LIST_BYTES, "round {round}: {total}");
            let mut paged = Vec::new();
            let mut offset = 0;
            loop {
                let (page, next_offset) = gathered.page(offset);
                let bytes: usize = page.iter().map(json_size).sum();
                assert!(page.len() <= PAGE_ITEMS, "round {round}");
                assert!(
                    page.len() == 1 || bytes <= PAGE_BYTES,
                    "round {round}: {bytes}"
                );
                paged.extend(page);
                match next_offset {
                    Some(at) => {
                        assert_eq!(super::offset(&cursor(at)), Some(at));
                        offset = at;
                    }
                    None => break,
                }
            }
            assert_eq!(paged, all, "round {round}");
            assert_eq!(gathered.len(), all.len());
        }
        assert_eq!(super::offset("runbyte-page-x"), None);
        assert_eq!(super::offset("42"), None);
    }

    #[test]
    fn lists_past_the_total_are_cut_at_the_server_that_passes_it() {
        // Five servers of 4 MiB less a little each: the fifth is cut.
        let per = MAX_SERVER_LIST_BYTES / 1000 - 200;
        let lists: Vec<(String, Arc<Listing<Resource>>)> = (0..5)
            .map(|s| {
                let server = format!("s{s}");
                let items = (0..1000).map(|n| resource(&server, n, per)).collect();
                (server, Arc::new(Listing::new(items)))
            })
            .collect();
        let gathered = Gathered::within_total("resources", lists);
        let kept: Vec<usize> = gathered.parts.iter().map(|(_, kept)| *kept).collect();
        assert_eq!(&kept[..4], &[1000, 1000, 1000, 1000], "{kept:?}");
        assert!(kept[4] > 0 && kept[4] < 1000, "{kept:?}");
        // As many as fit: one more would pass the total.
        let total: usize = gathered.iter().map(|(_, size)| size).sum();
        let next = gathered.parts[4].0.sizes[kept[4]];
        assert!(
            total <= MAX_LIST_BYTES && total + next > MAX_LIST_BYTES,
            "{total}"
        );
    }
}
