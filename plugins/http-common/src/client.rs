//! The HTTP client both connectors use.

use std::{collections::BTreeMap, error::Error as _, time::Duration};

use reqwest::{
    Client, Response, Url,
    header::{HeaderMap, HeaderName, HeaderValue},
    redirect,
};

use serde::Deserialize;

use crate::sse::{SseDecoder, SseEvent, TooLarge};

/// What `Transport::connect` receives for an HTTP or SSE server: its `runbyte.toml` table.
/// Keys other than these (`transport`, `share`, ...) belong to the host and are ignored.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Target {
    /// The server's name in `runbyte.toml`, for messages.
    #[serde(default)]
    pub name: Option<String>,
    pub url: String,
    /// Sent with every request (an `Authorization` header, say); `null` means none.
    #[serde(default, deserialize_with = "null_as_empty")]
    pub headers: BTreeMap<String, String>,
    /// `"sse"`: fall back to the 2024-11-05 transport when the server refuses the streamable
    /// HTTP initialize with 400, 404 or 405.
    #[serde(default)]
    pub fallback: Option<String>,
    /// The largest message accepted from the server; 16 MiB by default.
    #[serde(default)]
    pub max_message_bytes: Option<usize>,
}

fn null_as_empty<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<BTreeMap<String, String>, D::Error> {
    Ok(Option::<BTreeMap<String, String>>::deserialize(deserializer)?.unwrap_or_default())
}

impl Target {
    pub fn parse(text: &str) -> Result<Self, String> {
        let target: Target = crate::parse_json_object(text, "connection target")?;
        if target.max_message_bytes == Some(0) {
            return Err(format!(
                "server `{}`: max-message-bytes must be above 0",
                target.name()
            ));
        }
        Ok(target)
    }

    pub fn name(&self) -> &str {
        self.name.as_deref().unwrap_or("(unnamed)")
    }

    pub fn max_message_bytes(&self) -> usize {
        self.max_message_bytes
            .unwrap_or(crate::DEFAULT_MAX_MESSAGE_BYTES)
    }
}

/// How long a connection attempt may take before the server counts as unreachable.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Builds the client: rustls on the `ring` provider with the platform's certificate store,
/// HTTP/1.1, redirects followed only within the origin of the first URL (at most 10).
pub fn build_client() -> Result<Client, String> {
    // The provider is process-wide within this library's copy of rustls; installing it twice
    // is refused harmlessly.
    let _ = rustls::crypto::ring::default_provider().install_default();
    Client::builder()
        .redirect(same_origin_redirects())
        .connect_timeout(CONNECT_TIMEOUT)
        .tcp_nodelay(true)
        .build()
        .map_err(|error| format!("cannot build the HTTP client: {}", describe(&error)))
}

fn same_origin_redirects() -> redirect::Policy {
    redirect::Policy::custom(|attempt| {
        let Some(first) = attempt.previous().first() else {
            return attempt.follow();
        };
        if attempt.previous().len() > 10 {
            let error = format!("more than 10 redirects from {first}");
            return attempt.error(error);
        }
        if attempt.url().origin() == first.origin() {
            attempt.follow()
        } else {
            let error = format!(
                "refused a redirect from {first} to another origin: {}",
                attempt.url()
            );
            attempt.error(error)
        }
    })
}

/// Parses and checks a connector's `url`.
pub fn parse_url(url: &str) -> Result<Url, String> {
    let parsed = Url::parse(url).map_err(|error| format!("`{url}` is not a valid URL: {error}"))?;
    match parsed.scheme() {
        "http" | "https" => Ok(parsed),
        scheme => Err(format!(
            "`{url}`: the scheme must be http or https, not {scheme}"
        )),
    }
}

/// Turns a connector's `headers` table into a header map, naming a bad entry.
pub fn header_map(headers: &BTreeMap<String, String>) -> Result<HeaderMap, String> {
    let mut map = HeaderMap::new();
    for (name, value) in headers {
        let header = HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| format!("headers: `{name}` is not a valid header name"))?;
        let mut value = HeaderValue::from_str(value)
            .map_err(|_| format!("headers: the value of `{name}` is not a valid header value"))?;
        value.set_sensitive(true);
        map.insert(header, value);
    }
    Ok(map)
}

/// A client error with its causes ("error sending request: ... Connection refused (os error
/// 111)"), since reqwest's own text stops at the first layer.
pub fn describe(error: &reqwest::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

/// Whether an error means the server cannot be reached at all (the connection is dead), as
/// opposed to one request failing.
pub fn is_unreachable(error: &reqwest::Error) -> bool {
    error.is_connect()
}

/// At most 300 characters of a body, on one line, for error messages.
pub fn excerpt(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let mut out: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if out.chars().count() > 300 {
        out = out.chars().take(300).collect();
        out.push('…');
    }
    if out.is_empty() {
        "(empty body)".to_owned()
    } else {
        out
    }
}

/// Why a response body could not be read.
#[derive(Debug)]
pub enum ReadError {
    TooLarge(usize),
    Failed(String),
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadError::TooLarge(limit) => write!(f, "the response exceeds the {limit} byte limit"),
            ReadError::Failed(why) => write!(f, "the response could not be read: {why}"),
        }
    }
}

/// Reads a whole response body of at most `limit` bytes.
pub async fn read_capped(response: &mut Response, limit: usize) -> Result<Vec<u8>, ReadError> {
    if response
        .content_length()
        .is_some_and(|length| length > limit as u64)
    {
        return Err(ReadError::TooLarge(limit));
    }
    let mut body = Vec::new();
    loop {
        match response.chunk().await {
            Ok(Some(chunk)) => {
                if body.len() + chunk.len() > limit {
                    return Err(ReadError::TooLarge(limit));
                }
                body.extend_from_slice(&chunk);
            }
            Ok(None) => return Ok(body),
            Err(error) => return Err(ReadError::Failed(describe(&error))),
        }
    }
}

/// The `WWW-Authenticate` challenge of a 401 or 403, for
/// [`Signal::http`](runbyte_plugin_api::Signal::http) to quote: the host reads it from there to
/// log in or ask for more scope.
pub fn challenge_of(response: &Response) -> Option<String> {
    if !matches!(response.status().as_u16(), 401 | 403) {
        return None;
    }
    response
        .headers()
        .get(reqwest::header::WWW_AUTHENTICATE)
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned)
}

/// Reads an error response's body for a message: a short excerpt, never more than 64 KiB read.
pub async fn error_excerpt(response: &mut Response) -> String {
    match read_capped(response, 64 * 1024).await {
        Ok(body) => excerpt(&body),
        Err(ReadError::TooLarge(_)) => "(a large body)".to_owned(),
        Err(ReadError::Failed(why)) => format!("(body unreadable: {why})"),
    }
}

/// Reads an SSE response event by event.
pub struct EventReader {
    decoder: SseDecoder,
    pending: std::collections::VecDeque<SseEvent>,
}

/// Why an event stream stopped.
#[derive(Debug)]
pub enum StreamEnd {
    /// The server ended the response.
    Ended,
    TooLarge(TooLarge),
    Failed(String),
}

impl std::fmt::Display for StreamEnd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StreamEnd::Ended => write!(f, "the stream ended"),
            StreamEnd::TooLarge(error) => write!(f, "{error}"),
            StreamEnd::Failed(why) => write!(f, "the stream failed: {why}"),
        }
    }
}

impl EventReader {
    pub fn new(limit: usize) -> Self {
        Self {
            decoder: SseDecoder::new(limit),
            pending: Default::default(),
        }
    }

    /// The next event, or why there is none.
    pub async fn next(&mut self, response: &mut Response) -> Result<SseEvent, StreamEnd> {
        loop {
            if let Some(event) = self.pending.pop_front() {
                return Ok(event);
            }
            match response.chunk().await {
                Ok(Some(chunk)) => {
                    let events = self.decoder.push(&chunk).map_err(StreamEnd::TooLarge)?;
                    self.pending.extend(events);
                }
                Ok(None) => return Err(StreamEnd::Ended),
                Err(error) => return Err(StreamEnd::Failed(describe(&error))),
            }
        }
    }

    pub fn last_event_id(&self) -> Option<&str> {
        self.decoder.last_event_id()
    }

    pub fn retry_ms(&self) -> Option<u64> {
        self.decoder.retry_ms()
    }
}

/// Whether a response's content type is `media` (parameters ignored).
pub fn content_type_is(response: &Response, media: &str) -> bool {
    response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split(';').next())
        .is_some_and(|value| value.trim().eq_ignore_ascii_case(media))
}
