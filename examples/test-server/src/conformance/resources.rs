//! The fixture resources: two static ones (text and binary), one to watch, the template
//! `test://template/{id}/data`, those `test_trigger_resource_change` adds, and two that may be
//! kept (SEP-2549 hints; not the suite's, for Runbyte's cache tests): `test://cached` (public,
//! `ttlMs` [`CACHED_TTL_MS`]) and `test://cached-private` (private, a minute). Each says how
//! many times it has been read, this read counted, so a kept answer shows as a repeated count.

use rmcp::ErrorData;
use rmcp::model::{
    CacheScope, ListResourceTemplatesResult, ListResourcesResult, ReadResourceRequestParams,
    ReadResourceResponse, ReadResourceResult, Resource, ResourceContents, ResourceTemplate,
};
use serde_json::json;

use super::{bump, count, subscribed};
use crate::calls::PNG_BASE64;
use crate::server::State;

pub const STATIC_TEXT: &str = "test://static-text";
pub const STATIC_BINARY: &str = "test://static-binary";
pub const WATCHED: &str = "test://watched-resource";
pub const TEMPLATE: &str = "test://template/{id}/data";
pub const CACHED: &str = "test://cached";
pub const CACHED_PRIVATE: &str = "test://cached-private";
/// How long `test://cached` may be kept.
pub const CACHED_TTL_MS: u64 = 1500;

/// The URI of the `k`-th resource that `test_trigger_resource_change` adds.
pub fn added_uri(k: usize) -> String {
    format!("test://added-resource/{k}")
}

pub fn list(state: &State) -> ListResourcesResult {
    let mut resources = vec![
        Resource::new(STATIC_TEXT, "static-text")
            .with_description("A static text resource")
            .with_mime_type("text/plain"),
        Resource::new(STATIC_BINARY, "static-binary")
            .with_description("A static binary resource: a 1x1 PNG")
            .with_mime_type("image/png"),
        Resource::new(WATCHED, "watched-resource")
            .with_description("A resource to subscribe to")
            .with_mime_type("text/plain"),
        Resource::new(CACHED, "cached")
            .with_description("May be kept 1.5 s by anyone (public); says how often it was read")
            .with_mime_type("text/plain"),
        Resource::new(CACHED_PRIVATE, "cached-private")
            .with_description(
                "May be kept a minute per session (private); says how often it was read",
            )
            .with_mime_type("text/plain"),
    ];
    resources.extend((1..=count(&state.fixture.added_resources)).map(|k| {
        Resource::new(added_uri(k), format!("added-resource-{k}"))
            .with_description("Added by test_trigger_resource_change")
            .with_mime_type("text/plain")
    }));
    ListResourcesResult::with_all_items(resources)
}

pub fn templates() -> ListResourceTemplatesResult {
    ListResourceTemplatesResult::with_all_items(vec![
        ResourceTemplate::new(TEMPLATE, "template-data")
            .with_description("Data for any id, substituted into the text")
            .with_mime_type("application/json"),
    ])
}

/// The `{id}` of a URI the template matches.
fn template_id(uri: &str) -> Option<&str> {
    uri.strip_prefix("test://template/")?
        .strip_suffix("/data")
        .filter(|id| !id.is_empty() && !id.contains('/'))
}

/// Reads `uri`; an unknown one is `resource_not_found` with the URI in `data` (rmcp sends
/// it as -32602 to 2026-07-28 clients, SEP-2164).
pub fn read(
    state: &State,
    request: &ReadResourceRequestParams,
) -> Result<ReadResourceResponse, ErrorData> {
    let uri = request.uri.as_str();
    if let Some((reads, ttl, scope)) = match uri {
        CACHED => Some((
            &state.fixture.cached_reads,
            CACHED_TTL_MS,
            CacheScope::Public,
        )),
        CACHED_PRIVATE => Some((&state.fixture.private_reads, 60_000, CacheScope::Private)),
        _ => None,
    } {
        let n = bump(reads);
        let contents =
            ResourceContents::text(format!("read {n}"), uri).with_mime_type("text/plain");
        let mut result = ReadResourceResult::new(vec![contents]);
        result.ttl_ms = Some(ttl);
        result.cache_scope = Some(scope);
        return Ok(result.into());
    }
    let added = (1..=count(&state.fixture.added_resources)).any(|k| added_uri(k) == uri);
    let contents = match uri {
        STATIC_TEXT => {
            ResourceContents::text("This is the content of the static text resource.", uri)
                .with_mime_type("text/plain")
        }
        STATIC_BINARY => ResourceContents::blob(PNG_BASE64, uri).with_mime_type("image/png"),
        WATCHED => ResourceContents::text("The content of the watched resource.", uri)
            .with_mime_type("text/plain"),
        _ if added => ResourceContents::text(format!("Added resource {uri}"), uri)
            .with_mime_type("text/plain"),
        _ => match template_id(uri) {
            Some(id) => ResourceContents::text(
                json!({"id": id, "templateTest": true, "data": format!("Data for ID: {id}")})
                    .to_string(),
                uri,
            )
            .with_mime_type("application/json"),
            None => {
                return Err(ErrorData::resource_not_found(
                    "Resource not found",
                    Some(json!({ "uri": uri })),
                ));
            }
        },
    };
    Ok(ReadResourceResult::new(vec![contents]).into())
}

pub fn subscribe(state: &State, uri: &str) {
    subscribed(&state.fixture).insert(uri.to_owned());
}

pub fn unsubscribe(state: &State, uri: &str) {
    subscribed(&state.fixture).remove(uri);
}
