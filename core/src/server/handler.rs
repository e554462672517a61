//! The MCP server logic every listener serves: Runbyte's own tools.

// MCP logging (`logging/setLevel`, `notifications/message`) is deprecated from the 2026-07-28
// revision (SEP-2577); legacy sessions (up to 2025-11-25) have it.
#![allow(deprecated)]

use std::sync::{Arc, Mutex};

use rmcp::{
    ErrorData, RoleServer, ServerHandler,
    model::{
        CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ErrorCode,
        GetPromptRequestParams, GetPromptResponse, Implementation, InputRequiredResult,
        InputResponses, ListToolsResult, LoggingLevel, LoggingMessageNotificationParam,
        PaginatedRequestParams, ProgressNotificationParam, ReadResourceRequestParams,
        ReadResourceResponse, ServerCapabilities, ServerConfig, SetLevelRequestParams,
        SubscriptionFilter, Tool,
    },
    service::{RequestContext, SubscriptionContext},
};
use serde_json::{Value, json};

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::{
    execute,
    execute::{Replaying, Resumable},
    gateway::Gateway,
    relay::{Asker, Event, Question, ResumeError, Resumed, RoundTrip, SessionAsker, Waiting},
};

/// How a client learns the workflow, in a few lines (kept short: every client loads it).
pub const INSTRUCTIONS: &str = "Runbyte turns the tools of many MCP servers into typed functions \
in a virtual filesystem. Explore with list_directory('/servers'), read a tool's module with \
read_file, or find tools with search_tools. Then call execute_code with a short TypeScript \
program that imports from './servers/<server>' and returns only what you need; intermediate \
data stays in the sandbox.";

/// Runbyte's own tools, as listed to clients.
fn tool_specs() -> Vec<Tool> {
    let specs = json!([
        {
            "name": "list_directory",
            "description": "List a folder of the virtual filesystem. /servers holds one folder per MCP server; each holds one module per tool.",
            "inputSchema": {"type": "object", "properties": {
                "path": {"type": "string", "description": "A folder, e.g. /servers or /servers/github"},
                "withDescriptions": {"type": "boolean", "description": "Show each tool's one-line description"}
            }, "required": ["path"]},
            "annotations": {"readOnlyHint": true, "openWorldHint": false}
        },
        {
            "name": "read_file",
            "description": "Read a module of the virtual filesystem: a tool's typed function, its argument and result types and its documentation.",
            "inputSchema": {"type": "object", "properties": {
                "path": {"type": "string", "description": "e.g. /servers/github/create_issue.ts"}
            }, "required": ["path"]},
            "annotations": {"readOnlyHint": true, "openWorldHint": false}
        },
        {
            "name": "execute_code",
            "description": "Run a TypeScript program in a sandbox. Import tools from './servers/<server>', await their calls (Promise.all runs them concurrently), and return only what you need: define async function exec() or use top-level await with export default. Returns the result as JSON, the console output and a call summary.",
            "inputSchema": {"type": "object", "properties": {
                "code": {"type": "string", "description": "The program (TypeScript or JavaScript)"}
            }, "required": ["code"]},
            "annotations": {"readOnlyHint": false, "destructiveHint": true, "openWorldHint": true}
        },
        {
            "name": "search_tools",
            "description": "Find tools by what they do, across every server. Each hit gives its import path and signature.",
            "inputSchema": {"type": "object", "properties": {
                "query": {"type": "string", "description": "Words to look for in tool names, descriptions and parameters"},
                "limit": {"type": "integer", "minimum": 1, "maximum": 50, "description": "Most hits to return (default 10)"}
            }, "required": ["query"]},
            "annotations": {"readOnlyHint": true, "openWorldHint": false}
        }
    ]);
    serde_json::from_value(specs).unwrap_or_default()
}

/// One client session's server.
#[derive(Clone)]
pub struct Session {
    gateway: Arc<Gateway>,
    session: String,
    /// The transport whose listener the client came through (`stdio`, `http`).
    listener: Arc<str>,
    log_level: Arc<Mutex<Option<LoggingLevel>>>,
}

/// The severity order of MCP log levels, lowest first.
#[allow(deprecated)]
fn severity(level: LoggingLevel) -> u8 {
    match level {
        LoggingLevel::Debug => 0,
        LoggingLevel::Info => 1,
        LoggingLevel::Notice => 2,
        LoggingLevel::Warning => 3,
        LoggingLevel::Error => 4,
        LoggingLevel::Critical => 5,
        LoggingLevel::Alert => 6,
        LoggingLevel::Emergency => 7,
    }
}

impl Session {
    /// The server for one client session.
    pub fn new(gateway: Arc<Gateway>, session: String, listener: Arc<str>) -> Self {
        Session {
            gateway,
            session,
            listener,
            log_level: Arc::new(Mutex::new(None)),
        }
    }

    /// Sends the client a log message, if it asked for messages of this level
    /// (`logging/setLevel`); nothing is sent before it asks.
    #[allow(deprecated)]
    pub async fn log(&self, peer: &rmcp::Peer<RoleServer>, level: LoggingLevel, message: String) {
        let wanted = self.log_level.lock().ok().and_then(|l| *l);
        let Some(wanted) = wanted else { return };
        if severity(level) < severity(wanted) {
            return;
        }
        let mut params = LoggingMessageNotificationParam::new(level, Value::String(message));
        params.logger = Some("runbyte".to_owned());
        let _ = peer.notify_logging_message(params).await;
    }

    async fn list_directory(&self, args: &Value) -> Result<String, String> {
        let path = required_str(args, "path")?;
        let with_descriptions = args
            .get("withDescriptions")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        self.gateway
            .vfs
            .settled(STARTUP_GRACE)
            .await
            .list(path, with_descriptions)
            .map_err(|e| e.to_string())
    }

    async fn read_file(&self, args: &Value) -> Result<String, String> {
        let path = required_str(args, "path")?;
        self.gateway
            .vfs
            .settled(STARTUP_GRACE)
            .await
            .read(path)
            .map(|content| content.to_string())
            .map_err(|e| e.to_string())
    }

    async fn search_tools(&self, args: &Value) -> Result<String, String> {
        let query = required_str(args, "query")?;
        let limit = args
            .get("limit")
            .and_then(Value::as_u64)
            .unwrap_or(10)
            .clamp(1, 50) as usize;
        let snapshot = self.gateway.vfs.settled(STARTUP_GRACE).await;
        let hits = snapshot.search(query, limit);
        if hits.is_empty() {
            return Ok(format!(
                "No tool matches `{query}`. list_directory('/servers') shows every server."
            ));
        }
        let mut out = String::new();
        for (tool, _) in hits {
            let folder = tool
                .path
                .trim_start_matches("/servers/")
                .split('/')
                .next()
                .unwrap_or_default();
            out.push_str(&format!(
                "{}/{}: {}\n  import {{ {} }} from './servers/{folder}';\n  {}\n",
                tool.server, tool.name, tool.summary, tool.identifier, tool.signature
            ));
        }
        Ok(out)
    }
}

impl Session {
    /// Runs one program: limits from the policies, the VFS's modules, the bridge to the Hub;
    /// progress while it runs when the client asked for it; stopped when the client cancels.
    ///
    /// What a tool or policy asks of the user goes to this client (see [`crate::relay`]): over
    /// a legacy session as a request; to a 2026-07-28 client as an `input_required` result,
    /// whose retry (`request_state`, `input_responses`) resumes the execution.
    async fn execute_code(
        &self,
        args: &Value,
        retry: Retry,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let code = match required_str(args, "code") {
            Ok(code) => code.to_owned(),
            Err(message) => {
                return Ok(CallToolResult::error(vec![ContentBlock::text(message)]).into());
            }
        };
        if let Some(state) = retry.state {
            return self.resume(&state, retry.answers, code, context).await;
        }
        let Some(session_asker) = SessionAsker::of(&context.peer) else {
            return Ok(self.execute_stateless(code, None, context).await);
        };
        // No waiting for servers here: `execute::run` waits for those the program imports.
        let asker: Arc<dyn Asker> = Arc::new(session_asker);
        let prepared = match execute::prepare(
            &self.gateway,
            &self.session,
            Some(&self.listener),
            Some(asker),
            Resumable::No,
        )
        .await
        {
            Ok(prepared) => prepared,
            Err(message) => {
                return Ok(CallToolResult::error(vec![ContentBlock::text(message)]).into());
            }
        };
        let progress = progress_ticker(context, &prepared);
        let result = execute::run(
            &self.gateway,
            &self.session,
            &prepared,
            code,
            context.ct.clone(),
        )
        .await;
        if let Some(progress) = progress {
            progress.abort();
        }
        Ok(result.into())
    }

    /// Runs a program for a 2026-07-28 client: apart from the request, so that it can wait for
    /// an answer across `input_required` rounds.
    /// With `replay`, the program is run again from an earlier run's journal (see
    /// [`Replaying`]), to resume it here.
    async fn execute_stateless(
        &self,
        code: String,
        replay: Option<Replaying>,
        context: &RequestContext<RoleServer>,
    ) -> CallToolResponse {
        let capabilities = context.client_capabilities().unwrap_or_default();
        let (asker, events) = RoundTrip::<CallToolResult>::new(capabilities);
        let done = asker.done_sender();
        // The execution may outlive this request (and, over HTTP, its connection): it is a
        // session of its own, whose `share = "session"` connections end with it.
        let session = match random_key() {
            Ok(key) => format!("{}/{key}", self.session),
            Err(why) => return CallToolResult::error(vec![ContentBlock::text(why)]).into(),
        };
        let prepared = match execute::prepare(
            &self.gateway,
            &session,
            Some(&self.listener),
            Some(Arc::new(asker)),
            match replay {
                Some(replay) => Resumable::Replay(Box::new(replay)),
                None => Resumable::Record,
            },
        )
        .await
        {
            Ok(prepared) => prepared,
            Err(message) => return CallToolResult::error(vec![ContentBlock::text(message)]).into(),
        };
        let progress = progress_ticker(context, &prepared);
        let cancel = CancellationToken::new();
        let (gateway, running) = (self.gateway.clone(), cancel.clone());
        let program = code.clone();
        tokio::spawn(async move {
            let result = execute::run(&gateway, &session, &prepared, program, running).await;
            gateway.hub.end_session(&session).await;
            gateway.tokens.forget(&session);
            let _ = done.send(Event::Done(result)).await;
        });
        let answer = self.next_event(events, cancel, &code, context).await;
        if let Some(progress) = progress {
            progress.abort();
        }
        answer
    }

    /// What the execution does next, as this request's answer: its result, or its question
    /// (the execution then waits in [`Paused`](crate::relay::Paused) for the client's retry).
    /// The request cancelled (the client closed its stream, or sent `notifications/cancelled`)
    /// cancels the execution.
    async fn next_event(
        &self,
        mut events: mpsc::Receiver<Event<CallToolResult>>,
        cancel: CancellationToken,
        code: &str,
        context: &RequestContext<RoleServer>,
    ) -> CallToolResponse {
        let event = tokio::select! {
            event = events.recv() => event,
            () = context.ct.cancelled() => {
                cancel.cancel();
                return CallToolResult::error(vec![ContentBlock::text("Cancelled by the client")]).into();
            }
        };
        match event {
            Some(Event::Done(result)) => result.into(),
            None => CallToolResult::error(vec![ContentBlock::text(
                "the execution ended without a result",
            )])
            .into(),
            Some(Event::Asked {
                question,
                answer,
                point,
            }) => {
                let question = *question;
                let point = point.map(|point| *point);
                let waiting = Waiting::new(question.clone(), answer, events, cancel, point);
                self.pause(question, waiting, code).await
            }
        }
    }

    /// Keeps a waiting execution and asks its client with `input_required`.
    async fn pause(
        &self,
        question: Question,
        waiting: Waiting<CallToolResult>,
        code: &str,
    ) -> CallToolResponse {
        let key = match random_key() {
            Ok(key) => key,
            Err(why) => return CallToolResult::error(vec![ContentBlock::text(why)]).into(),
        };
        let paused = match self.gateway.paused() {
            Ok(paused) => paused,
            Err(why) => return CallToolResult::error(vec![ContentBlock::text(why)]).into(),
        };
        match paused.pause(key, waiting, code).await {
            Ok(state) => {
                let questions = [(INPUT_KEY.to_owned(), question)].into_iter().collect();
                InputRequiredResult::new(Some(questions), Some(state)).into()
            }
            Err(why) => CallToolResult::error(vec![ContentBlock::text(format!(
                "a tool asked for the user's input, but {why}"
            ))])
            .into(),
        }
    }

    /// A 2026-07-28 client's retry: its answer goes to the execution its `requestState` names,
    /// which then goes on; an execution that paused in another process is resumed here by
    /// replaying its journal. A state that was altered, not issued here (nor by a replica
    /// sharing the key), or bound to another program is refused (-32602).
    async fn resume(
        &self,
        state: &str,
        answers: Option<InputResponses>,
        code: String,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let invalid = |why: String| ErrorData::new(ErrorCode::INVALID_PARAMS, why, None);
        let paused = self
            .gateway
            .paused()
            .map_err(|why| ErrorData::new(ErrorCode::INTERNAL_ERROR, why, None))?;
        let answer = answers.and_then(|mut answers| answers.remove(INPUT_KEY));
        if let Some(answer) = &answer
            && !answer.is_object()
        {
            return Err(invalid(format!(
                "inputResponses.{INPUT_KEY} must be an object (the answer's result)"
            )));
        }
        let resumed = paused
            .resume(state, &code, answer.is_some())
            .await
            .map_err(|error| match error {
                ResumeError::Refused(why) => invalid(why),
                // The store's outage is Runbyte's trouble, not the request's: the same retry may
                // succeed later.
                ResumeError::Store(why) => ErrorData::new(ErrorCode::INTERNAL_ERROR, why, None),
            })?;
        let waiting = match resumed {
            Resumed::Here { waiting, .. } => *waiting,
            Resumed::Replay(point) => {
                let Some(answer) = answer else {
                    return Err(invalid(format!(
                        "inputResponses.{INPUT_KEY} is missing: the answer is what resumes the \
                         execution"
                    )));
                };
                tracing::info!(
                    calls = point.recorded.len(),
                    "resuming an execution by replay"
                );
                let replay = Replaying::new(*point, answer);
                return Ok(self.execute_stateless(code, Some(replay), context).await);
            }
        };
        match answer {
            // No answer to the question: it is asked again, with a fresh state (the one that
            // came is used: it may have been claimed in the state store).
            None => {
                let question = waiting.question.clone();
                let internal = |why: String| ErrorData::new(ErrorCode::INTERNAL_ERROR, why, None);
                let state = paused
                    .pause(random_key().map_err(internal)?, waiting, &code)
                    .await
                    .map_err(internal)?;
                let questions = [(INPUT_KEY.to_owned(), question)].into_iter().collect();
                Ok(InputRequiredResult::new(Some(questions), Some(state)).into())
            }
            Some(answer) => {
                let Waiting {
                    answer: reply,
                    events,
                    cancel,
                    ..
                } = waiting;
                let _ = reply.send(Ok(answer));
                Ok(self.next_event(events, cancel, &code, context).await)
            }
        }
    }
}

/// The key of the one question an `input_required` result of `execute_code` carries.
const INPUT_KEY: &str = "runbyte_input";

/// What a 2026-07-28 client's retry of `execute_code` carries.
#[derive(Default)]
struct Retry {
    state: Option<String>,
    answers: Option<InputResponses>,
}

/// A fresh key for a paused execution (never reused, so an old `requestState` cannot answer a
/// later question).
fn random_key() -> Result<String, String> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(|e| format!("cannot make a key: {e}"))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Progress notifications every second while an execution runs, when the request asked.
fn progress_ticker(
    context: &RequestContext<RoleServer>,
    prepared: &execute::Prepared,
) -> Option<tokio::task::JoinHandle<()>> {
    let token = context.meta.get_progress_token()?;
    let (peer, bridge) = (context.peer.clone(), prepared.bridge.clone());
    Some(tokio::spawn(async move {
        let started = std::time::Instant::now();
        let mut tick = tokio::time::interval(PROGRESS_EVERY);
        tick.tick().await;
        loop {
            tick.tick().await;
            let elapsed = started.elapsed().as_secs_f64();
            let mut params = ProgressNotificationParam::new(token.clone(), elapsed.floor());
            params.message = Some(format!(
                "running for {elapsed:.0} s; {} tool calls so far",
                bridge.calls()
            ));
            if peer.notify_progress(params).await.is_err() {
                return;
            }
        }
    }))
}

/// How long after start the VFS tools wait for servers still starting: what is about to be
/// ready is shown ready, and a server that takes longer delays no one (its folder says
/// "starting").
const STARTUP_GRACE: std::time::Duration = std::time::Duration::from_millis(500);

/// How often a running execution tells a client that asked for progress.
const PROGRESS_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

fn required_str<'a>(args: &'a Value, key: &str) -> Result<&'a str, String> {
    args.get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| format!("`{key}` is required and must be a string"))
}

impl ServerHandler for Session {
    // Logging is deprecated from 2026-07-28 (SEP-2577); the revisions Runbyte serves have it.
    #[allow(deprecated)]
    fn get_info(&self) -> ServerConfig {
        // `listChanged`: the session forwards a downstream server's tool changes, so a client
        // knows to look at /servers again. Resources and prompts: none of Runbyte's own yet, so
        // their lists are empty (a client may still ask, in either era).
        let mut info = ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .enable_logging()
                .enable_resources()
                .enable_prompts()
                .build(),
        );
        info.server_info = Implementation::new("runbyte", env!("CARGO_PKG_VERSION"));
        info.instructions = Some(INSTRUCTIONS.to_owned());
        info
    }

    /// Tool-list changes are what Runbyte has to tell: `subscriptions/listen` (2026-07-28)
    /// delivers those, as the legacy revisions' unsolicited notifications do.
    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        let mut accepted = SubscriptionFilter::new();
        accepted.tools_list_changed = requested.tools_list_changed.filter(|wanted| *wanted);
        Some(accepted)
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        let mut events = self.gateway.hub.subscribe();
        loop {
            tokio::select! {
                () = context.cancelled() => return Ok(()),
                event = events.recv() => match event {
                    Ok(crate::hub::HubEvent::ToolsChanged { .. })
                    | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                        if context.sink().notify_tool_list_changed().await.is_err() {
                            return Ok(());
                        }
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return Ok(()),
                },
            }
        }
    }

    /// Runbyte serves no resources of its own: every URI is unknown (-32602 with the URI, as
    /// 2026-07-28 asks; never an empty `contents`).
    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        Err(ErrorData::new(
            ErrorCode::INVALID_PARAMS,
            format!(
                "Resource not found: Runbyte serves no resource `{}`",
                request.uri
            ),
            Some(json!({"uri": request.uri})),
        ))
    }

    /// Runbyte serves no prompts of its own.
    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        Err(ErrorData::new(
            ErrorCode::INVALID_PARAMS,
            format!(
                "unknown prompt `{}`: Runbyte serves no prompts",
                request.name
            ),
            None,
        ))
    }

    // `logging/setLevel` belongs to the revisions Runbyte serves (deprecated only from 2026-07-28).
    #[allow(deprecated)]
    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        // A 2026-07-28 client (no handshake) asks per request (`_meta` logLevel) instead.
        if context.peer.peer_info().is_none() {
            return Err(ErrorData::new(
                ErrorCode::METHOD_NOT_FOUND,
                "Method not found: logging/setLevel is not part of MCP 2026-07-28",
                None,
            ));
        }
        if let Ok(mut level) = self.log_level.lock() {
            *level = Some(request.level);
        }
        Ok(())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let mut tools = tool_specs();
        tools.extend(self.gateway.direct_tools().await);
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let retry = Retry {
            state: request.request_state,
            answers: request.input_responses,
        };
        let args = Value::Object(request.arguments.unwrap_or_default());
        let answer = match request.name.as_ref() {
            "list_directory" => self.list_directory(&args).await,
            "read_file" => self.read_file(&args).await,
            "search_tools" => self.search_tools(&args).await,
            "execute_code" => return self.execute_code(&args, retry, &context).await,
            other if let Some(target) = self.gateway.direct_target(other).await => {
                let asker = SessionAsker::of(&context.peer).map(|a| Arc::new(a) as Arc<dyn Asker>);
                let called = execute::direct(
                    &self.gateway,
                    &self.session,
                    Some(&self.listener),
                    asker,
                    (&target.0, &target.1),
                    args,
                )
                .await;
                return Ok(match called {
                    Ok(result) => result,
                    Err(message) => CallToolResult::error(vec![ContentBlock::text(message)]),
                }
                .into());
            }
            other => {
                return Err(ErrorData::new(
                    ErrorCode::INVALID_PARAMS,
                    format!(
                        "unknown tool `{other}`; Runbyte's tools are list_directory, read_file, search_tools, execute_code"
                    ),
                    None,
                ));
            }
        };
        Ok(match answer {
            Ok(text) => CallToolResult::success(vec![ContentBlock::text(text)]),
            Err(message) => CallToolResult::error(vec![ContentBlock::text(message)]),
        }
        .into())
    }
}
