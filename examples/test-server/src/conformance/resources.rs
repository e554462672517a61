//! The fixture resources: two static ones (text and binary), one to watch, the template
//! `test://template/{id}/data`, and those `test_trigger_resource_change` adds.

use rmcp::ErrorData;
use rmcp::model::{
    ListResourceTemplatesResult, ListResourcesResult, ReadResourceRequestParams,
    ReadResourceResponse, ReadResourceResult, Resource, ResourceContents, ResourceTemplate,
};
use serde_json::json;

use super::{count, subscribed};
use crate::calls::PNG_BASE64;
use crate::server::State;

pub const STATIC_TEXT: &str = "test://static-text";
pub const STATIC_BINARY: &str = "test://static-binary";
pub const WATCHED: &str = "test://watched-resource";
pub const TEMPLATE: &str = "test://template/{id}/data";

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
