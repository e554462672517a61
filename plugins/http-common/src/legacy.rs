//! The 2024-11-05 HTTP+SSE client: GET the SSE URL, wait for the `endpoint` event, POST every
//! message there; `message` events are the server's messages.
//!
//! [`LegacyClient`] is the asynchronous connection (the `http` connector falls back to it);
//! [`LegacyPump`] wraps it into a blocking pump for the `sse` connector.

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use reqwest::{
    Client, Response, StatusCode, Url,
    header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderValue},
};
use runbyte_plugin_api::{
    LogLevel, Signal, log,
    transport::{Pump, Received},
};
use serde_json::Value;
use tokio::sync::mpsc::{UnboundedSender, unbounded_channel};

use crate::{
    Inbox, InboxSender, PrivateRuntime, Tasks,
    client::{self, EventReader, StreamEnd},
    inbox, jsonrpc,
    runtime::wait_for,
};

/// How long the server may take to send the `endpoint` event.
pub const ENDPOINT_TIMEOUT: Duration = Duration::from_secs(30);

/// Where and how to connect.
#[derive(Clone)]
pub struct LegacyTarget {
    /// The server's name, for messages.
    pub name: String,
    pub url: Url,
    pub headers: HeaderMap,
    pub max_message_bytes: usize,
}

/// One open 2024-11-05 session.
pub struct LegacyClient {
    client: Client,
    target: LegacyTarget,
    endpoint: Url,
    inbox: InboxSender,
}

impl LegacyClient {
    /// Opens the SSE stream, waits for the `endpoint` event and starts delivering `message`
    /// events to `inbox`. When the stream ends, `inbox` is closed with the reason.
    pub async fn connect(
        client: Client,
        target: LegacyTarget,
        inbox: InboxSender,
        tasks: &Tasks,
    ) -> Result<Arc<LegacyClient>, String> {
        let url = target.url.clone();
        let mut response = client
            .get(url.clone())
            .headers(target.headers.clone())
            .header(ACCEPT, "text/event-stream")
            .send()
            .await
            .map_err(|error| format!("GET {url} failed: {}", client::describe(&error)))?;
        if !response.status().is_success() {
            let status = response.status();
            let challenge = client::challenge_of(&response);
            let body = client::error_excerpt(&mut response).await;
            return Err(Signal::http(
                status.as_u16(),
                &format!("GET {url}"),
                &body,
                challenge.as_deref(),
            ));
        }
        if !client::content_type_is(&response, "text/event-stream") {
            return Err(format!("GET {url} did not answer with an event stream"));
        }
        let mut reader = EventReader::new(target.max_message_bytes);
        let endpoint =
            tokio::time::timeout(ENDPOINT_TIMEOUT, endpoint_event(&mut reader, &mut response))
                .await
                .map_err(|_| {
                    format!(
                        "no `endpoint` event from {url} within {}s",
                        ENDPOINT_TIMEOUT.as_secs()
                    )
                })??;
        let endpoint = response
            .url()
            .join(endpoint.trim())
            .map_err(|error| format!("the `endpoint` event from {url} is not a URL: {error}"))?;
        if endpoint.origin() != url.origin() {
            return Err(format!(
                "refused the `endpoint` {endpoint} from {url}: it is on another origin"
            ));
        }
        let legacy = Arc::new(LegacyClient {
            client,
            target,
            endpoint,
            inbox: inbox.clone(),
        });
        let reading = legacy.clone();
        tasks.spawn(async move { reading.read_events(reader, response).await });
        Ok(legacy)
    }

    /// The URL messages are posted to.
    pub fn endpoint(&self) -> &Url {
        &self.endpoint
    }

    /// Posts one message. A failed request is answered in the inbox with a JSON-RPC error for
    /// its id; an unreachable server also closes the inbox.
    pub async fn send(&self, message: &str) {
        let ids = match serde_json::from_str::<Value>(message) {
            Ok(value) => jsonrpc::request_ids(&value),
            Err(_) => Vec::new(),
        };
        let posted = self
            .client
            .post(self.endpoint.clone())
            .headers(self.target.headers.clone())
            .header(CONTENT_TYPE, HeaderValue::from_static("application/json"))
            .body(message.to_owned())
            .send()
            .await;
        let failure = match posted {
            Ok(response) if response.status().is_success() => return,
            Ok(mut response) => {
                let status = response.status();
                let challenge = client::challenge_of(&response);
                let body = client::error_excerpt(&mut response).await;
                let text = Signal::http(
                    status.as_u16(),
                    self.endpoint.as_str(),
                    &body,
                    challenge.as_deref(),
                );
                let fatal = matches!(status, StatusCode::UNAUTHORIZED | StatusCode::NOT_FOUND);
                (text, fatal)
            }
            Err(error) => {
                let text = format!(
                    "POST {} failed: {}",
                    self.endpoint,
                    client::describe(&error)
                );
                (text, client::is_unreachable(&error))
            }
        };
        let (text, fatal) = failure;
        log(
            LogLevel::Warn,
            &format!("server `{}`: {text}", self.target.name),
        );
        if fatal {
            self.inbox.ending(&text);
        }
        for id in ids {
            let error = jsonrpc::error_response(id, jsonrpc::TRANSPORT_ERROR, &text);
            self.inbox.message(error.to_string());
        }
        if fatal {
            // 404: the session behind the endpoint is gone; 401: the credentials are refused.
            self.inbox.close(text);
        }
    }

    async fn read_events(self: Arc<Self>, mut reader: EventReader, mut response: Response) {
        let url = &self.target.url;
        loop {
            match reader.next(&mut response).await {
                Ok(event) if event.event == "message" => {
                    deliver(&self.inbox, &self.target.name, event.data)
                }
                Ok(event) => {
                    log(
                        LogLevel::Debug,
                        &format!(
                            "server `{}`: ignored SSE event `{}`",
                            self.target.name, event.event
                        ),
                    );
                }
                Err(StreamEnd::Ended) => {
                    self.inbox.close(format!("SSE stream ended (GET {url})"));
                    return;
                }
                Err(end) => {
                    self.inbox
                        .close(format!("SSE stream from {url} broke: {end}"));
                    return;
                }
            }
        }
    }
}

async fn endpoint_event(
    reader: &mut EventReader,
    response: &mut Response,
) -> Result<String, String> {
    loop {
        match reader.next(response).await {
            Ok(event) if event.event == "endpoint" => return Ok(event.data),
            Ok(_) => continue,
            Err(end) => return Err(format!("no `endpoint` event: {end}")),
        }
    }
}

/// Hands one server message to the host, unless it is empty or not JSON.
pub fn deliver(inbox: &InboxSender, server: &str, data: String) {
    let data = data.trim();
    if data.is_empty() {
        return;
    }
    match serde_json::from_str::<Value>(data) {
        Ok(Value::Array(items)) => {
            for item in items {
                inbox.message(item.to_string());
            }
        }
        Ok(_) => {
            inbox.message(data.to_owned());
        }
        Err(error) => log(
            LogLevel::Warn,
            &format!("server `{server}` sent a message that is not JSON ({error}); ignored"),
        ),
    }
}

/// The blocking pump of the `sse` connector.
pub struct LegacyPump {
    inbox: Inbox,
    outbox: UnboundedSender<String>,
    tasks: Arc<Tasks>,
    closed: AtomicBool,
    _runtime: Arc<PrivateRuntime>,
}

impl LegacyPump {
    /// Connects (blocking until the `endpoint` event arrives or the connection fails).
    pub fn connect(
        runtime: Arc<PrivateRuntime>,
        client: Client,
        target: LegacyTarget,
    ) -> Result<Self, String> {
        let tasks = Arc::new(Tasks::new(runtime.handle().clone()));
        let (sender, inbox) = inbox::inbox();
        let connecting = {
            let tasks = tasks.clone();
            let sender = sender.clone();
            async move { LegacyClient::connect(client, target, sender, &tasks).await }
        };
        let legacy = match wait_for(
            runtime.handle(),
            connecting,
            ENDPOINT_TIMEOUT + client::CONNECT_TIMEOUT,
        ) {
            Some(Ok(legacy)) => legacy,
            Some(Err(error)) => {
                tasks.abort_all();
                return Err(error);
            }
            None => {
                tasks.abort_all();
                return Err("timed out opening the SSE stream".to_owned());
            }
        };
        let (outbox, mut queue) = unbounded_channel::<String>();
        // Posted one at a time, in order: a 2024-11-05 server answers each POST at once (202)
        // and sends the response on the stream.
        tasks.spawn(async move {
            while let Some(message) = queue.recv().await {
                legacy.send(&message).await;
            }
        });
        Ok(Self {
            inbox,
            outbox,
            tasks,
            closed: AtomicBool::new(false),
            _runtime: runtime,
        })
    }
}

impl Pump for LegacyPump {
    fn send(&self, message: &str) -> Result<(), String> {
        if self.closed.load(Ordering::SeqCst) {
            return Err("the connection is closed".to_owned());
        }
        if let Some(reason) = self.inbox.ended() {
            return Err(reason);
        }
        self.outbox
            .send(message.to_owned())
            .map_err(|_| "the connection is closed".to_owned())
    }

    fn recv(&self, timeout: Duration) -> Received {
        self.inbox.recv(timeout)
    }

    fn close(&self) {
        if self.closed.swap(true, Ordering::SeqCst) {
            return;
        }
        // Dropping the GET stream ends the session on a 2024-11-05 server.
        self.tasks.abort_all();
        self.inbox.close_now("closed by Runbyte");
    }
}

impl Drop for LegacyPump {
    fn drop(&mut self) {
        self.close();
    }
}
