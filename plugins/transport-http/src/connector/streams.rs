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

use super::{Ids, LAST_EVENT_HEADER, MAX_GET_FAILURES, MAX_RESUMES, Shared};

impl Shared {
    /// Reads a successful POST's answer and delivers its messages. A response whose id is
    /// `intercept` is returned instead of delivered.
    pub(super) async fn read_answer(
        self: &Arc<Self>,
        mut response: Response,
        ids: Ids,
        intercept: Option<&str>,
    ) -> Option<Value> {
        if response.status() == StatusCode::ACCEPTED
            || ids.is_empty() && response.content_length() == Some(0)
        {
            return None;
        }
        if client::content_type_is(&response, "text/event-stream") {
            return self.read_stream(response, ids, intercept).await;
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
            if let Some(message) = self.deliver(message, &mut waiting, intercept) {
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

    /// Delivers one message to the host, noting the responses in `waiting`. Returns it instead
    /// when it is the response to `intercept`.
    pub(super) fn deliver(
        &self,
        message: Value,
        waiting: &mut Ids,
        intercept: Option<&str>,
    ) -> Option<Value> {
        if let Some(id) = jsonrpc::response_id(&message) {
            let key = jsonrpc::id_key(id);
            waiting.remove(&key);
            if intercept == Some(key.as_str()) {
                return Some(message);
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
    /// is resumed with `Last-Event-ID` when the server numbered its events.
    pub(super) async fn read_stream(
        self: &Arc<Self>,
        mut response: Response,
        ids: Ids,
        intercept: Option<&str>,
    ) -> Option<Value> {
        let expected = !ids.is_empty();
        let mut waiting = ids;
        let mut intercepted = None;
        let mut reader = EventReader::new(self.max_bytes);
        let mut last_id: Option<String> = None;
        let mut resumes = 0;
        loop {
            if expected && waiting.is_empty() {
                return intercepted;
            }
            match reader.next(&mut response).await {
                Ok(event) => {
                    if event.id.is_some() {
                        last_id = event.id.clone();
                    }
                    if event.event != "message" || event.data.trim().is_empty() {
                        continue;
                    }
                    match serde_json::from_str::<Value>(&event.data) {
                        Ok(value) => {
                            for message in jsonrpc::split(value) {
                                if let Some(message) =
                                    self.deliver(message, &mut waiting, intercept)
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
                    let resumable = !matches!(end, StreamEnd::TooLarge(_));
                    if let Some(last) = last_id
                        .clone()
                        .filter(|_| resumable && resumes < MAX_RESUMES)
                    {
                        resumes += 1;
                        let delay = reader.retry_ms().unwrap_or(500).min(30_000);
                        tokio::time::sleep(Duration::from_millis(delay)).await;
                        if let Some(resumed) = self.resume(&last).await {
                            response = resumed;
                            reader = EventReader::new(self.max_bytes);
                            continue;
                        }
                    }
                    self.fail(
                        &waiting,
                        &format!(
                            "the answer stream from {} ended before the response ({end})",
                            self.url
                        ),
                    );
                    return intercepted;
                }
            }
        }
    }

    /// Reopens a broken stream with a GET carrying `Last-Event-ID`.
    pub(super) async fn resume(&self, last_id: &str) -> Option<Response> {
        let request = self
            .http
            .get(self.url.clone())
            .headers(self.headers.clone())
            .header(ACCEPT, "text/event-stream")
            .header(LAST_EVENT_HEADER, last_id);
        let response = self.session_headers(request).send().await.ok()?;
        (response.status().is_success() && client::content_type_is(&response, "text/event-stream"))
            .then_some(response)
    }

    /// Opens (or reopens) the GET stream for server-initiated messages.
    pub(super) fn start_get_stream(self: &Arc<Self>) {
        if lock(&self.legacy).is_some() {
            return;
        }
        let shared = self.clone();
        let handle = self.tasks.spawn(async move { shared.get_stream().await });
        if let Some(previous) = std::mem::replace(&mut *lock(&self.get_stream), handle) {
            previous.abort();
        }
    }

    pub(super) async fn get_stream(self: Arc<Self>) {
        let mut failures = 0;
        let mut last_id: Option<String> = None;
        loop {
            let mut request = self
                .http
                .get(self.url.clone())
                .headers(self.headers.clone())
                .header(ACCEPT, "text/event-stream");
            if let Some(last) = &last_id {
                request = request.header(LAST_EVENT_HEADER, last.as_str());
            }
            let mut delay_ms = 1000;
            match self.session_headers(request).send().await {
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
                                if event.id.is_some() {
                                    last_id = event.id.clone();
                                }
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
                    delay_ms = reader.retry_ms().unwrap_or(1000).min(30_000);
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
                delay_ms = (1000u64 << failures.min(5)).min(30_000);
            }
            tokio::time::sleep(Duration::from_millis(delay_ms)).await;
        }
    }
}
