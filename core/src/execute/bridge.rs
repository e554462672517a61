//! The sandbox's door to the Hub: each tool call counted, passed through every policy, sent,
//! and its result turned into the value the program sees.

use std::{
    borrow::Cow,
    collections::HashMap,
    sync::{Arc, Mutex},
};

use futures::{FutureExt, future::BoxFuture};
use opentelemetry::context::FutureExt as _;
use rmcp::model::{CallToolResult, ContentBlock};
use runbyte_plugin_api::wire;
use serde_json::Value;

use crate::{
    hub::{CallOptions, Hub},
    policy::Judge,
    relay::{Asker, Origin, Point, Question, Recorded},
    sandbox::{Determinism, Observed, ToolBridge, ToolCall},
    telemetry::{CallOutcome, Telemetry},
};

/// Counts of calls so far, for the policies' budgets.
#[derive(Default)]
struct Counts {
    total: u64,
    by_server: HashMap<String, u64>,
    by_tool: HashMap<(String, String), u64>,
}

impl Counts {
    /// Counts one call to `server`/`tool`, giving the counts from before it.
    fn count(&mut self, server: &str, tool: &str) -> Position {
        let calls = self.total;
        self.total += 1;
        let to_server = self.by_server.entry(server.to_owned()).or_default();
        let calls_to_server = *to_server;
        *to_server += 1;
        let to_tool = self
            .by_tool
            .entry((server.to_owned(), tool.to_owned()))
            .or_default();
        let calls_to_tool = *to_tool;
        *to_tool += 1;
        Position {
            calls,
            calls_to_server,
            calls_to_tool,
        }
    }
}

/// Where one call stands in its execution: the calls made before it.
#[derive(Clone, Copy)]
struct Position {
    calls: u64,
    calls_to_server: u64,
    calls_to_tool: u64,
}

/// The sandbox's door: each call passes every policy, then goes to the Hub.
pub struct HubBridge {
    hub: Hub,
    policies: Vec<Judge>,
    session: String,
    execution: String,
    counts: Mutex<Counts>,
    audit: Option<crate::audit::AuditLog>,
    /// Who answers what a tool or a policy asks of the user.
    asker: Option<Arc<dyn Asker>>,
    /// The calls made, when the execution may have to resume elsewhere.
    journal: Option<Arc<Mutex<Journal>>>,
    /// The journal of an earlier run of this program, when this run is its replay.
    replay: Option<Arc<Replaying>>,
    /// Servers exposed to clients directly only (`expose = "direct"`): not to programs.
    direct_only: Vec<String>,
    /// Where each call's span and metrics go.
    telemetry: Telemetry,
    /// The execution's trace context: each call's span is its child.
    trace: opentelemetry::Context,
    /// Where the shapes of untyped tools' results are recorded.
    inferred: Option<Arc<crate::infer::Inferred>>,
    /// The tokens of the results the program read, being counted.
    tokens: Arc<crate::tokens::Pending>,
}

/// Whether (and how) an execution can resume on another process by replay.
pub enum Resumable {
    /// It cannot (its client answers questions in the same request: a legacy session).
    No,
    /// Record its calls, so that a question can carry its journal.
    Record,
    /// Replay this journal first, then record as it goes on.
    Replay(Box<Replaying>),
}

/// An earlier run's journal, being replayed.
pub struct Replaying {
    point: Point,
    /// The user's answer to the question the earlier run stopped at.
    answer: Mutex<Option<Value>>,
}

impl Replaying {
    /// A replay of the run that stopped at `point`, with the user's answer to its question.
    pub fn new(point: Point, answer: Value) -> Self {
        Replaying {
            point,
            answer: Mutex::new(Some(answer)),
        }
    }
}

/// The most a journal may hold (its calls' arguments and results, as JSON): past it, a question
/// can still be answered where the execution runs, but it cannot resume elsewhere.
const MAX_JOURNAL_BYTES: usize = 256 << 10;

/// The calls an execution made, in the order the program made them, and what else it observed
/// (its `Math.random` seed, clock readings and event-loop turns).
struct Journal {
    recorded: std::collections::BTreeMap<u64, Recorded>,
    in_flight: std::collections::BTreeSet<u64>,
    seed: u64,
    observed: Observed,
    bytes: usize,
    full: bool,
    /// A replay point was handed out and its question is not answered yet: a call made now
    /// waits (a replay elsewhere would make it again).
    paused: tokio::sync::watch::Sender<bool>,
}

impl Journal {
    fn new(seed: u64) -> Self {
        Journal {
            recorded: Default::default(),
            in_flight: Default::default(),
            seed,
            observed: Observed::default(),
            bytes: 0,
            full: false,
            paused: tokio::sync::watch::Sender::new(false),
        }
    }

    fn overflow(&mut self) {
        self.full = true;
        self.recorded.clear();
        self.observed = Observed::default();
    }

    fn observe(&mut self, observed: Observed) {
        if self.full {
            return;
        }
        if observed.overflow {
            return self.overflow();
        }
        // A reading or a turn is a number or two in the journal's JSON.
        self.bytes += observed.len() * 16;
        if self.bytes > MAX_JOURNAL_BYTES {
            return self.overflow();
        }
        self.observed.extend(observed);
    }

    fn record(&mut self, index: u64, recorded: Recorded) {
        self.in_flight.remove(&index);
        if self.full {
            return;
        }
        self.bytes += serde_json::to_string(&recorded).map_or(usize::MAX / 2, |text| text.len());
        if self.bytes > MAX_JOURNAL_BYTES {
            return self.overflow();
        }
        self.recorded.insert(index, recorded);
    }

    /// A replay point at call `index`: only when every other call has ended (a call still in
    /// flight could not be replayed without being made twice) and the journal is whole. Until
    /// the question is answered here, later calls wait ([`Journal::enter`]): the point does not
    /// hold them, so a replay elsewhere makes them, and they must not have been made here.
    fn pause_at(&mut self, index: u64, origin: Origin) -> Option<Point> {
        let alone = self.in_flight.iter().all(|other| *other == index);
        if !alone || self.full || *self.paused.borrow() {
            return None;
        }
        self.paused.send_replace(true);
        Some(Point {
            recorded: self.recorded.clone(),
            index,
            origin,
            seed: self.seed,
            observed: self.observed.clone(),
        })
    }

    /// Counts call `index` as in flight, once no question holds the execution at a replay point.
    async fn enter(journal: &Mutex<Journal>, index: u64) {
        loop {
            let mut paused = {
                let Ok(mut journal) = journal.lock() else {
                    return;
                };
                if !*journal.paused.borrow() {
                    journal.in_flight.insert(index);
                    return;
                }
                journal.paused.subscribe()
            };
            if paused.wait_for(|paused| !paused).await.is_err() {
                return;
            }
        }
    }
}

/// Lets the calls held at a replay point go on when its question is answered (or given up).
struct Unpause(Arc<Mutex<Journal>>);

impl Drop for Unpause {
    fn drop(&mut self) {
        if let Ok(journal) = self.0.lock() {
            journal.paused.send_replace(false);
        }
    }
}

/// The asker one call uses: the execution's, told where in the program the question is, so a
/// question a re-run would ask again carries the journal; in a replay, the call that asked
/// before gets the user's answer without asking again.
struct CallAsker {
    inner: Arc<dyn Asker>,
    journal: Option<Arc<Mutex<Journal>>>,
    replay: Option<Arc<Replaying>>,
    index: u64,
    /// Questions asked during this call so far.
    asked: std::sync::atomic::AtomicUsize,
}

/// The most questions one call may put to the user (a server's requests during a legacy call,
/// `input_required` rounds and their requests, a policy's approval): a server that keeps asking
/// gets refusals, and the user is not flooded.
const MAX_QUESTIONS_PER_CALL: usize = 16;

impl CallAsker {
    fn new(
        inner: Arc<dyn Asker>,
        journal: Option<Arc<Mutex<Journal>>>,
        replay: Option<Arc<Replaying>>,
        index: u64,
    ) -> Self {
        CallAsker {
            inner,
            journal,
            replay,
            index,
            asked: Default::default(),
        }
    }

    /// Counts a question; `Err` past the budget.
    fn within_budget(&self) -> Result<(), String> {
        let asked = self
            .asked
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if asked >= MAX_QUESTIONS_PER_CALL {
            return Err(format!(
                "it asked more than {MAX_QUESTIONS_PER_CALL} questions in one call; the rest \
                 were refused"
            ));
        }
        Ok(())
    }

    /// The answer a replay already has for this question.
    fn answered(&self, origin: Origin) -> Option<Value> {
        let replay = self.replay.as_ref()?;
        if replay.point.index != self.index || replay.point.origin != origin {
            return None;
        }
        replay.answer.lock().ok()?.take()
    }
}

impl Asker for CallAsker {
    fn ask(&self, question: Question) -> BoxFuture<'static, Result<Value, String>> {
        if let Err(why) = self.within_budget() {
            return Box::pin(std::future::ready(Err(why)));
        }
        self.inner.ask(question)
    }

    fn ask_again_able(
        &self,
        question: Question,
        origin: Origin,
    ) -> BoxFuture<'static, Result<Value, String>> {
        if let Err(why) = self.within_budget() {
            return Box::pin(std::future::ready(Err(why)));
        }
        if let Some(answer) = self.answered(origin) {
            return Box::pin(std::future::ready(Ok(answer)));
        }
        let journal = self.journal.as_ref();
        let point = journal.and_then(|journal| journal.lock().ok()?.pause_at(self.index, origin));
        match (point, journal) {
            (Some(point), Some(journal)) => {
                let unpause = Unpause(journal.clone());
                let asked = self.inner.ask_at(question, point);
                Box::pin(async move {
                    let answer = asked.await;
                    drop(unpause);
                    answer
                })
            }
            _ => self.inner.ask(question),
        }
    }
}

impl HubBridge {
    /// A bridge for one execution of `session`.
    pub fn new(
        hub: Hub,
        policies: Vec<Judge>,
        session: String,
        execution: String,
        audit: Option<crate::audit::AuditLog>,
        asker: Option<Arc<dyn Asker>>,
        resumable: Resumable,
    ) -> Self {
        let (journal, replay) = match resumable {
            Resumable::No => (None, None),
            Resumable::Record => (
                Some(Arc::new(Mutex::new(Journal::new(
                    Determinism::fresh().seed,
                )))),
                None,
            ),
            Resumable::Replay(replay) => (
                Some(Arc::new(Mutex::new(Journal::new(replay.point.seed)))),
                Some(Arc::from(replay)),
            ),
        };
        HubBridge {
            hub,
            policies,
            session,
            execution,
            counts: Mutex::default(),
            audit,
            asker,
            journal,
            replay,
            direct_only: Vec::new(),
            telemetry: Telemetry::default(),
            trace: opentelemetry::Context::new(),
            inferred: None,
            tokens: Arc::default(),
        }
    }

    /// Traces each call as a child of `trace` (the execution's span) and counts it.
    pub fn with_telemetry(mut self, telemetry: Telemetry, trace: opentelemetry::Context) -> Self {
        self.telemetry = telemetry;
        self.trace = trace;
        self
    }

    /// The tokens the tool results of this execution would have cost the model through direct
    /// calls, by server, once every count is done.
    pub async fn consumed(&self) -> std::collections::BTreeMap<String, crate::tokens::Count> {
        self.tokens.by_server(crate::tokens::COUNT_WAIT).await
    }

    /// Records the shapes of untyped tools' results in `inferred`.
    pub fn with_inference(mut self, inferred: Option<Arc<crate::infer::Inferred>>) -> Self {
        self.inferred = inferred;
        self
    }

    /// Refuses programs' calls to these servers (exposed to clients directly only).
    pub fn with_direct_only(mut self, servers: Vec<String>) -> Self {
        self.direct_only = servers;
        self
    }

    /// The recorded result of call `index` when this run replays a journal that has it; an
    /// error when the program asks for another call there (it diverged from its first run).
    fn replayed(&self, index: u64, call: &ToolCall) -> Option<Result<Value, String>> {
        let replay = self.replay.as_ref()?;
        let recorded = replay.point.recorded.get(&index)?;
        if recorded.server != call.server
            || recorded.tool != call.tool
            || recorded.arguments != call.arguments
        {
            return Some(Err(format!(
                "the program took another path when it was resumed: its call #{} is now \
                 {}/{} with other arguments, where its first run called {}/{}; it stopped \
                 rather than guess (the replica that resumed it has other servers, tools or \
                 modules than the one that paused it, or runs another version of Runbyte)",
                index + 1,
                call.server,
                call.tool,
                recorded.server,
                recorded.tool
            )));
        }
        if let Some(journal) = &self.journal
            && let Ok(mut journal) = journal.lock()
        {
            journal.record(index, recorded.clone());
        }
        Some(recorded.result.clone())
    }

    /// Tool calls made so far.
    pub fn calls(&self) -> u64 {
        self.counts.lock().map(|c| c.total).unwrap_or(0)
    }

    async fn call_tool(
        hub: Hub,
        policies: Vec<Judge>,
        asker: Option<Arc<dyn Asker>>,
        (session, execution): (&str, &str),
        position: Position,
        call: ToolCall,
        (watch, outcome): (Watch, &mut CallOutcome),
    ) -> Result<Value, String> {
        let Watch {
            inferred,
            tokens,
            trace,
        } = watch;
        // A program's `readResource` (./servers/resources): judged as a call of this name.
        let reads_resource = call.tool == crate::hub::READ_RESOURCE;
        let spec = if reads_resource {
            None
        } else {
            Some(
                hub.tool(&call.server, &call.tool)
                    .await
                    .map_err(|e| e.to_string())?,
            )
        };
        let granted = if !policies
            .iter()
            .any(|judge| judge.judged.covers(&call.server))
        {
            None
        } else {
            let annotations = spec
                .as_ref()
                .and_then(|spec| spec.annotations.as_ref())
                .map(|a| Cow::Owned(serde_json::to_value(a).unwrap_or(Value::Null)));
            let asked = wire::Call {
                server: Cow::Borrowed(&call.server),
                tool: Cow::Borrowed(&call.tool),
                arguments: Cow::Borrowed(&call.arguments),
                annotations,
                context: wire::CallContext {
                    session: Cow::Borrowed(session),
                    execution: Cow::Borrowed(execution),
                    calls: position.calls,
                    calls_to_server: position.calls_to_server,
                    calls_to_tool: position.calls_to_tool,
                },
            };
            crate::policy::check_call(&policies, &asked, call.time_left, asker.as_deref())
                .await
                .inspect_err(|_| *outcome = CallOutcome::Denied)?
        };
        if reads_resource {
            return Self::read_resource(&hub, session, &call).await;
        }
        let options = CallOptions {
            session: Some(session.to_owned()),
            timeout: Some(granted.unwrap_or(call.timeout)),
            asker,
        };
        // The span's context is current while the Hub sends: its `traceparent` goes downstream.
        let answer = hub
            .call(&call.server, &call.tool, call.arguments, options)
            .with_context(trace)
            .await;
        *outcome = super::call_outcome(&answer);
        let result = answer.map_err(|e| e.to_string())?;
        tokens.add(&call.server, &result);
        let value = map_result(&call.server, &call.tool, result)?;
        if let (Some(inferred), Some(spec)) = (inferred, &spec) {
            inferred.record(&call.server, spec, &value);
        }
        Ok(value)
    }
}

/// What watches one call besides the audit log: the shapes of untyped results, the tokens of
/// every result, and the trace the call's span belongs to.
struct Watch {
    inferred: Option<Arc<crate::infer::Inferred>>,
    tokens: Arc<crate::tokens::Pending>,
    trace: opentelemetry::Context,
}

impl HubBridge {
    /// Reads a resource for a program: `arguments.uri` is Runbyte's URI, of the call's server.
    /// The program gets the contents as the client would (`uri`, `mimeType`, `text` or `blob`).
    async fn read_resource(hub: &Hub, session: &str, call: &ToolCall) -> Result<Value, String> {
        let uri = call
            .arguments
            .get("uri")
            .and_then(Value::as_str)
            .ok_or("readResource(uri): the URI must be a string")?;
        match crate::hub::split_uri(uri) {
            Some((server, _)) if server == call.server => {}
            _ => {
                return Err(format!(
                    "readResource: `{uri}` is not a resource URI of server `{}` \
                     (runbyte://{}/<uri>)",
                    call.server, call.server
                ));
            }
        }
        let result = hub
            .read_resource(uri, Some(session))
            .await
            .map_err(|e| e.to_string())?;
        Ok(serde_json::to_value(result.contents).unwrap_or(Value::Null))
    }
}

impl ToolBridge for HubBridge {
    /// The Hub bounds each call (and cancels it downstream when it runs out).
    fn enforces_timeouts(&self) -> bool {
        true
    }

    /// A recording run's seed is the journal's; a replay serves its first run's observations.
    fn determinism(&self) -> Determinism {
        let Some(journal) = &self.journal else {
            return Determinism::fresh();
        };
        Determinism {
            seed: journal.lock().map_or(0, |journal| journal.seed),
            record: true,
            replay: self
                .replay
                .as_ref()
                .map(|replay| replay.point.observed.clone())
                .unwrap_or_default(),
        }
    }

    fn observe(&self, observed: Observed) {
        if let Some(journal) = &self.journal
            && let Ok(mut journal) = journal.lock()
        {
            journal.observe(observed);
        }
    }

    fn call(&self, call: ToolCall) -> BoxFuture<'static, Result<Value, String>> {
        if self.direct_only.contains(&call.server) {
            let refused = format!(
                "server `{}` is exposed to clients directly (`expose = \"direct\"`), not to \
                 programs",
                call.server
            );
            return Box::pin(std::future::ready(Err(refused)));
        }
        let position = self
            .counts
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .count(&call.server, &call.tool);
        let (hub, policies, session) = (
            self.hub.clone(),
            self.policies.clone(),
            self.session.clone(),
        );
        let index = position.calls;
        if let Some(replayed) = self.replayed(index, &call) {
            return Box::pin(std::future::ready(replayed));
        }
        let audit = self.audit.clone();
        let telemetry = self.telemetry.clone();
        let span = telemetry.tool_call(&self.trace, &call.server, &call.tool);
        let inferred = self.inferred.clone();
        let tokens = self.tokens.clone();
        let execution = self.execution.clone();
        let journal = self.journal.clone();
        let asker = self.asker.clone().map(|inner| -> Arc<dyn Asker> {
            Arc::new(CallAsker::new(
                inner,
                journal.clone(),
                self.replay.clone(),
                index,
            ))
        });
        let recording = journal.as_ref().map(|journal| {
            (
                journal.clone(),
                call.server.clone(),
                call.tool.clone(),
                call.arguments.clone(),
            )
        });
        async move {
            if let Some((journal, ..)) = &recording {
                Journal::enter(journal, index).await;
            }
            let started = std::time::Instant::now();
            let (server, tool) = (call.server.clone(), call.tool.clone());
            let mut outcome = CallOutcome::Failed;
            // An error may quote a server's URL or what it answered: redacted before the
            // program (or the audit log) sees it.
            let watch = Watch {
                inferred,
                tokens,
                trace: span.context(),
            };
            let result = Self::call_tool(
                hub,
                policies,
                asker,
                (session.as_str(), execution.as_str()),
                position,
                call,
                (watch, &mut outcome),
            )
            .await
            .map_err(|error| crate::redact::redact(&error).into_owned());
            telemetry.call_done(span, (&server, &tool), outcome);
            if let Some((journal, server, tool, arguments)) = recording
                && let Ok(mut journal) = journal.lock()
            {
                let result = result.clone();
                journal.record(
                    index,
                    Recorded {
                        server,
                        tool,
                        arguments,
                        result,
                    },
                );
            }
            if let Some(audit) = audit {
                audit.tool_call(
                    &session,
                    &execution,
                    &server,
                    &tool,
                    started.elapsed(),
                    result.as_ref().err(),
                );
            }
            result
        }
        .boxed()
    }
}

/// A tool's result as the program sees it: `structuredContent` as it is; otherwise each content
/// block, text parsed as JSON when it is JSON, images, audio and resources as content objects;
/// one block is the value itself, several an array. `isError` becomes the call's error.
pub fn map_result(server: &str, tool: &str, result: CallToolResult) -> Result<Value, String> {
    if result.is_error == Some(true) {
        let message: Vec<String> = result
            .content
            .iter()
            .filter_map(|c| c.as_text())
            .map(|t| t.text.clone())
            .collect();
        let message = if message.is_empty() {
            "the tool reported an error".to_owned()
        } else {
            message.join("\n")
        };
        return Err(format!("{server}/{tool}: {message}"));
    }
    if let Some(structured) = result.structured_content {
        return Ok(structured);
    }
    let mut values: Vec<Value> = result.content.iter().map(block_value).collect();
    Ok(match values.len() {
        0 => Value::Null,
        1 => values.remove(0),
        _ => Value::Array(values),
    })
}

fn block_value(block: &ContentBlock) -> Value {
    if let Some(text) = block.as_text() {
        // Only text that looks like JSON is tried: most plain text fails fast either way, but
        // this keeps a long message from being scanned by the parser at all.
        let trimmed = text.text.trim();
        let looks_like_json = trimmed.starts_with(['{', '[', '"'])
            || matches!(trimmed, "null" | "true" | "false")
            || trimmed.parse::<f64>().is_ok();
        if looks_like_json && let Ok(value) = serde_json::from_str(&text.text) {
            return value;
        }
        return Value::String(text.text.clone());
    }
    serde_json::to_value(block).unwrap_or(Value::Null)
}

#[cfg(test)]
mod asker_tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[tokio::test]
    async fn one_call_may_ask_only_so_many_questions() {
        let asker = CallAsker::new(Arc::new(crate::relay::Unattended), None, None, 0);
        let question = || crate::relay::approval("q", "s", "t", &Value::Null);
        for _ in 0..MAX_QUESTIONS_PER_CALL / 2 {
            asker.ask(question()).await.unwrap();
            asker
                .ask_again_able(question(), Origin::InputRequired)
                .await
                .unwrap();
        }
        let refused = asker.ask(question()).await.unwrap_err();
        assert!(refused.contains("more than 16 questions"), "{refused}");
        assert!(
            asker
                .ask_again_able(question(), Origin::Approval)
                .await
                .is_err()
        );
    }
}
