//! Reading what the server sends: POST answers (JSON or SSE, resumed with `Last-Event-ID` when
//! they break) and the session's GET stream.

use std::{sync::Arc, time::Duration};

use reqwest::{
    Response, StatusCode,
    header::{ACCEPT, CONTENT_TYPE},
};
use runbyte_http_common::{
    client::{self, EventReader, StreamEnd},
    jsonrpc, lock,
};
use runbyte_plugin_api::{LogLevel, log};
use serde_json::Value;
use tokio::sync::oneshot;

use super::{
    DEFAULT_RETRY, GET_OPEN_TIMEOUT, Ids, LAST_EVENT_HEADER, MAX_GET_FAILURES, MAX_RESUMES,
    MAX_RETRY, MIN_RETRY, Rewrites, Shared,
};

/// How long to wait before reconnecting a stream: the server's `retry:` (in milliseconds), else
/// [`DEFAULT_RETRY`]; never less than [`MIN_RETRY`] nor more than [`MAX_RETRY`].
fn reconnection_delay(retry_ms: Option<u64>) -> Duration {
    retry_ms
        .map_or(DEFAULT_RETRY, Duration::from_millis)
        .clamp(MIN_RETRY, MAX_RETRY)
}

impl Shared {
    /// Reads a successful POST's answer and delivers its messages, the responses in `rewrites`
    /// rewritten first. A response whose id is `intercept` is returned instead of delivered.
    pub(super) async fn read_answer(
        self: &Arc<Self>,
        mut response: Response,
        ids: Ids,
        rewrites: &Rewrites,
        intercept: Option<&str>,
    ) -> Option<Value> {
        if response.status() == StatusCode::ACCEPTED
            || ids.is_empty() && response.content_length() == Some(0)
        {
            return None;
        }
        if client::content_type_is(&response, "text/event-stream") {
            return self.read_stream(response, ids, rewrites, intercept).await;
        }
        if !client::content_type_is(&response, "application/json") {
            if !ids.is_empty() {
                let kind = response
                    .headers()
                    .get(CONTENT_TYPE)
                    .and_then(|value| value.to_str().ok())
                    .unwrap_or("none")
                    .to_owned();
                self.fail(
                    &ids,
                    &format!("unexpected Content-Type `{kind}` from {}", self.url),
                );
            }
            return None;
        }
        let body = match client::read_capped(&mut response, self.max_bytes).await {
            Ok(body) => body,
            Err(error) => {
                self.fail(&ids, &format!("answer from {}: {error}", self.url));
                return None;
            }
        };
        if body.iter().all(u8::is_ascii_whitespace) {
            if !ids.is_empty() {
                self.fail(&ids, &format!("an empty answer from {}", self.url));
            }
            return None;
        }
        let value: Value = match serde_json::from_slice(&body) {
            Ok(value) => value,
            Err(error) => {
                self.fail(
                    &ids,
                    &format!(
                        "the answer from {} is not JSON ({error}): {}",
                        self.url,
                        client::excerpt(&body)
                    ),
                );
                return None;
            }
        };
        let mut waiting = ids;
        let mut intercepted = None;
        for message in jsonrpc::split(value) {
            if let Some(message) = self.deliver(message, &mut waiting, rewrites, intercept) {
                intercepted = Some(message);
            }
        }
        if !waiting.is_empty() {
            self.fail(
                &waiting,
                &format!("the answer from {} did not include this response", self.url),
            );
        }
        intercepted
    }

    /// Delivers one message to the host, noting the responses in `waiting` and rewriting those
    /// in `rewrites`. Returns it instead when it is the response to `intercept`.
    pub(super) fn deliver(
        &self,
        mut message: Value,
        waiting: &mut Ids,
        rewrites: &Rewrites,
        intercept: Option<&str>,
    ) -> Option<Value> {
        if let Some(id) = jsonrpc::response_id(&message) {
            let key = jsonrpc::id_key(id);
            waiting.remove(&key);
            if intercept == Some(key.as_str()) {
                return Some(message);
            }
            if let Some(rewrite) = rewrites.get(&key) {
                rewrite(self, &mut message);
            }
            let mut session = lock(&self.session);
            let is_initialize = session
                .initialize
                .as_ref()
                .and_then(|init| init.get("id"))
                .map(jsonrpc::id_key)
                == Some(key);
            if is_initialize && session.version.is_none() {
                session.version = message
                    .pointer("/result/protocolVersion")
                    .and_then(Value::as_str)
                    .map(str::to_owned);
            }
        }
        self.inbox.message(message.to_string());
        None
    }

    /// Reads an SSE answer until every request in `ids` is answered. A stream that breaks first
    /// is resumed with a GET carrying `Last-Event-ID` when the server numbered its events, after
    /// the reconnection time the server asked for with `retry:` (SEP-1699).
    pub(super) async fn read_stream(
        self: &Arc<Self>,
        mut response: Response,
        ids: Ids,
        rewrites: &Rewrites,
        intercept: Option<&str>,
    ) -> Option<Value> {
        let expected = !ids.is_empty();
        let mut waiting = ids;
        let mut intercepted = None;
        let mut reader = EventReader::new(self.max_bytes);
        // Both outlive the connection they were seen on, as in an `EventSource`.
        let mut last_id: Option<String> = None;
        let mut retry_ms: Option<u64> = None;
        // Consecutive reconnections without an event in between.
        let mut resumes = 0;
        loop {
            if expected && waiting.is_empty() {
                return intercepted;
            }
            match reader.next(&mut response).await {
                Ok(event) => {
                    resumes = 0;
                    // Priming events (an id, maybe `retry:`, and empty data) carry no message.
                    if event.event != "message" || event.data.trim().is_empty() {
                        continue;
                    }
                    match serde_json::from_str::<Value>(&event.data) {
                        Ok(value) => {
                            for message in jsonrpc::split(value) {
                                if let Some(message) =
                                    self.deliver(message, &mut waiting, rewrites, intercept)
                                {
                                    intercepted = Some(message);
                                }
                            }
                        }
                        Err(error) => log(
                            LogLevel::Warn,
                            &format!(
                                "server `{}` sent an SSE message that is not JSON ({error}); ignored",
                                self.name
                            ),
                        ),
                    }
                }
                Err(end) => {
                    if !expected || waiting.is_empty() {
                        return intercepted;
                    }
                    // The decoder's own record: it also counts an `id:` whose event had no data.
                    if let Some(id) = reader.last_event_id() {
                        last_id = Some(id.to_owned()).filter(|id| !id.is_empty());
                    }
                    retry_ms = reader.retry_ms().or(retry_ms);
                    let why = match (&end, last_id.as_deref()) {
                        (StreamEnd::TooLarge(_), _) => end.to_string(),
                        (_, None) => format!("{end}; it cannot be resumed without an event id"),
                        (_, Some(last)) => {
                            match self.resume_after(last, retry_ms, &mut resumes).await {
                                Ok(resumed) => {
                                    response = resumed;
                                    reader = EventReader::new(self.max_bytes);
                                    continue;
                                }
                                Err(why) => format!("{end}; resuming it failed: {why}"),
                            }
                        }
                    };
                    self.fail(
                        &waiting,
                        &format!(
                            "the answer stream from {} ended before the response ({why})",
                            self.url
                        ),
                    );
                    return intercepted;
                }
            }
        }
    }

    /// Reconnects a broken answer stream whose last event id was `last_id`: waits the
    /// reconnection time ([`reconnection_delay`] of `retry_ms`) before each attempt, and tries
    /// again after a failure that may pass, until `resumes` reaches [`MAX_RESUMES`].
    async fn resume_after(
        &self,
        last_id: &str,
        retry_ms: Option<u64>,
        resumes: &mut u32,
    ) -> Result<Response, String> {
        let delay = reconnection_delay(retry_ms);
        let mut why = "too many reconnections".to_owned();
        while *resumes < MAX_RESUMES {
            *resumes += 1;
            tokio::time::sleep(delay).await;
            match self.resume(last_id).await {
                Ok(response) => return Ok(response),
                Err((failure, again)) => {
                    log(
                        LogLevel::Debug,
                        &format!(
                            "server `{}`: resuming an answer stream after event `{last_id}` failed: {failure}",
                            self.name
                        ),
                    );
                    why = failure;
                    if !again {
                        break;
                    }
                }
            }
        }
        Err(why)
    }

    /// Reopens a broken stream with a GET carrying the session headers and `Last-Event-ID`.
    /// A failure says why, and whether another attempt may succeed.
    pub(super) async fn resume(&self, last_id: &str) -> Result<Response, (String, bool)> {
        let request = self
            .http
            .get(self.url.clone())
            .headers(self.headers.clone())
            .header(ACCEPT, "text/event-stream")
            .header(LAST_EVENT_HEADER, last_id);
        let mut response = self
            .session_headers(request)
            .send()
            .await
            .map_err(|error| (client::describe(&error), !client::is_unreachable(&error)))?;
        let status = response.status();
        if !status.is_success() {
            let body = client::error_excerpt(&mut response).await;
            return Err((
                format!("HTTP {}: {body}", status.as_u16()),
                status.is_server_error(),
            ));
        }
        if !client::content_type_is(&response, "text/event-stream") {
            return Err(("the answer is not an event stream".to_owned(), false));
        }
        Ok(response)
    }

    /// Opens (or reopens) the GET stream for server-initiated messages, and waits until the
    /// server answered its first request (whatever the answer) or [`GET_OPEN_TIMEOUT`] passed.
    /// Some servers send the requests that belong to no call (an `elicitation/create` without a
    /// related request) only on an open GET stream, and drop them when there is none: the
    /// messages after `notifications/initialized` must not overtake the stream.
    pub(super) async fn open_get_stream(self: &Arc<Self>) {
        if lock(&self.legacy).is_some() {
            return;
        }
        let (opened, answered) = oneshot::channel();
        let shared = self.clone();
        let handle = self
            .tasks
            .spawn(async move { shared.get_stream(Some(opened)).await });
        if let Some(previous) = std::mem::replace(&mut *lock(&self.get_stream), handle) {
            previous.abort();
        }
        // An error means the task ended (or never ran) without answering: nothing to wait for.
        if tokio::time::timeout(GET_OPEN_TIMEOUT, answered)
            .await
            .is_err()
        {
            log(
                LogLevel::Debug,
                &format!(
                    "server `{}`: no answer to the GET stream within {GET_OPEN_TIMEOUT:?}; going on",
                    self.name
                ),
            );
        }
    }

    /// The GET stream's task; `opened` is told when the first request was answered (or failed).
    pub(super) async fn get_stream(self: Arc<Self>, mut opened: Option<oneshot::Sender<()>>) {
        let mut failures = 0;
        let mut last_id: Option<String> = None;
        let mut retry_ms: Option<u64> = None;
        loop {
            let mut request = self
                .http
                .get(self.url.clone())
                .headers(self.headers.clone())
                .header(ACCEPT, "text/event-stream");
            if let Some(last) = &last_id {
                request = request.header(LAST_EVENT_HEADER, last.as_str());
            }
            let mut delay = DEFAULT_RETRY;
            let answer = self.session_headers(request).send().await;
            if let Some(opened) = opened.take() {
                let _ = opened.send(());
            }
            match answer {
                Ok(response) if response.status() == StatusCode::METHOD_NOT_ALLOWED => {
                    log(
                        LogLevel::Debug,
                        &format!("server `{}` offers no GET stream (HTTP 405)", self.name),
                    );
                    return;
                }
                // The session expired; a re-initialization starts a new stream.
                Ok(response) if response.status() == StatusCode::NOT_FOUND => return,
                Ok(mut response)
                    if response.status().is_success()
                        && client::content_type_is(&response, "text/event-stream") =>
                {
                    failures = 0;
                    let mut reader = EventReader::new(self.max_bytes);
                    let end = loop {
                        match reader.next(&mut response).await {
                            Ok(event) => {
                                if event.event == "message" && !event.data.trim().is_empty() {
                                    runbyte_http_common::legacy::deliver(
                                        &self.inbox,
                                        &self.name,
                                        event.data,
                                    );
                                }
                            }
                            Err(end) => break end,
                        }
                    };
                    if let Some(id) = reader.last_event_id() {
                        last_id = Some(id.to_owned()).filter(|id| !id.is_empty());
                    }
                    retry_ms = reader.retry_ms().or(retry_ms);
                    log(
                        // An oversized event is worth the operator's attention; a stream
                        // the server ended is routine.
                        match end {
                            StreamEnd::TooLarge(_) => LogLevel::Warn,
                            _ => LogLevel::Debug,
                        },
                        &format!(
                            "server `{}`: GET stream ended ({end}); reconnecting",
                            self.name
                        ),
                    );
                    delay = reconnection_delay(retry_ms);
                }
                Ok(response) => {
                    failures += 1;
                    log(
                        LogLevel::Debug,
                        &format!(
                            "server `{}`: GET stream refused (HTTP {})",
                            self.name,
                            response.status().as_u16()
                        ),
                    );
                }
                Err(error) => {
                    failures += 1;
                    log(
                        LogLevel::Debug,
                        &format!(
                            "server `{}`: GET stream failed: {}",
                            self.name,
                            client::describe(&error)
                        ),
                    );
                }
            }
            if failures >= MAX_GET_FAILURES {
                log(
                    LogLevel::Warn,
                    &format!(
                        "server `{}`: gave up the GET stream after {failures} failures",
                        self.name
                    ),
                );
                return;
            }
            if failures > 0 {
                delay = (DEFAULT_RETRY * (1 << failures.min(5))).min(MAX_RETRY);
            }
            tokio::time::sleep(delay).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reconnection_delay_is_the_servers_retry_within_bounds() {
        assert_eq!(reconnection_delay(Some(500)), Duration::from_millis(500));
        assert_eq!(reconnection_delay(None), Duration::from_secs(1));
        assert_eq!(reconnection_delay(Some(0)), Duration::from_millis(100));
        assert_eq!(reconnection_delay(Some(u64::MAX)), Duration::from_secs(30));
    }
}
