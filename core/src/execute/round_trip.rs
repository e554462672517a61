//! `execute_code` as a client asks it, in both eras: a legacy session's program runs in its
//! request and asks the user through the session; a 2026-07-28 client's program runs apart
//! from the request, and what it asks goes back as an `input_required` result whose retry
//! (`requestState`, `inputResponses`) resumes it: where it waits ([`Paused`]), or elsewhere by
//! replaying its journal ([`Replaying`]).

use std::{path::PathBuf, sync::Arc};

use futures::future::BoxFuture;
use rmcp::model::{
    CallToolResponse, CallToolResult, ClientCapabilities, ContentBlock, ErrorCode, ErrorData,
    InputRequiredResult, InputResponses,
};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::{Executor, Prepared, Replaying, Resumable};
use crate::{
    relay::{Asker, Event, Paused, Question, ResumeError, Resumed, RoundTrip, Waiting},
    state_store::StateStore,
    telemetry::Parent,
};

/// The key of the one question an `input_required` result of `execute_code` carries.
pub const INPUT_KEY: &str = "runbyte_input";

/// The longest a paused execution is kept for its client's answer; its own time limit ends it
/// sooner.
const PAUSED_KEEP: std::time::Duration = std::time::Duration::from_secs(24 * 3600);

/// How often a running execution tells a client that asked for progress.
const PROGRESS_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// What a 2026-07-28 client's retry of `execute_code` carries.
#[derive(Default)]
pub struct Retry {
    /// The `requestState` of the `input_required` result it answers.
    pub state: Option<String>,
    /// Its `inputResponses`.
    pub answers: Option<InputResponses>,
}

/// Where paused executions' state is signed and shared (`[server] state-key-file`,
/// `state-store`).
#[derive(Default, Clone)]
pub struct StateSettings {
    /// The file of the shared `requestState` signing key.
    pub key_file: Option<PathBuf>,
    /// The URL of the shared store of large journals and replay claims.
    pub store: Option<String>,
}

impl StateSettings {
    /// The shared signing key, when a key file is named.
    fn key(&self) -> Result<Option<Vec<u8>>, String> {
        let Some(path) = &self.key_file else {
            return Ok(None);
        };
        let text = crate::config::read_private(path, "state key file")
            .map_err(|e| format!("cannot read the state key file {}: {e}", path.display()))??;
        let key = text.trim().as_bytes().to_vec();
        if key.len() < 32 {
            return Err(format!(
                "the state key in {} is too short (at least 32 characters; make one with \
                 `head -c 32 /dev/urandom | base64 > {} && chmod 600 {}`)",
                path.display(),
                path.display(),
                path.display()
            ));
        }
        Ok(Some(key))
    }

    /// The shared store, when one is named (nothing connects yet).
    pub fn store(&self) -> Result<Option<StateStore>, String> {
        self.store.as_deref().map(StateStore::open).transpose()
    }
}

/// Where an execution's progress goes while it runs, for a client that asked for it.
pub trait Progress: Send + Sync + 'static {
    /// Tells the client that the execution has run `seconds` (whole), with `message`;
    /// resolves to `false` once the client can no longer be told.
    fn tell(&self, seconds: f64, message: String) -> BoxFuture<'static, bool>;
}

/// The client an `execute_code` request came from, as the executor needs it.
pub struct Client<'a> {
    /// The client session.
    pub session: &'a str,
    /// The transport the session came through (`stdio`, `http`).
    pub listener: Option<&'a str>,
    /// Whose turn a 2026-07-28 execution waits for in the sandbox's admission.
    pub fairness: &'a str,
    /// Whose values the program's `./state` calls keep and recall.
    pub keeps: crate::kept::Owner,
    /// A legacy session's asker (its questions go to the client as requests); `None`: a
    /// 2026-07-28 client, asked through `input_required` results.
    pub asker: Option<Arc<dyn Asker>>,
    /// What the client can answer (elicitation forms, URLs).
    pub capabilities: ClientCapabilities,
    /// Where progress goes, when the request asked for it.
    pub progress: Option<Arc<dyn Progress>>,
    /// The trace context the request carried.
    pub parent: Parent,
    /// The request's cancellation (the client closed its stream or sent
    /// `notifications/cancelled`).
    pub cancel: CancellationToken,
}

impl Executor {
    /// Runs one program for `client`: limits from the policies, the VFS's modules, the bridge
    /// to the Hub; progress while it runs when the client asked for it; stopped when the client
    /// cancels. A retry with `requestState` resumes the execution it names instead.
    pub async fn execute_code(
        self: &Arc<Self>,
        code: String,
        retry: Retry,
        client: Client<'_>,
    ) -> Result<CallToolResponse, ErrorData> {
        if let Some(state) = retry.state {
            return self.resume(&state, retry.answers, code, &client).await;
        }
        let Some(asker) = client.asker.clone() else {
            return Ok(self.execute_stateless(code, None, &client).await);
        };
        // No waiting for servers here: `run` waits for those the program imports.
        let prepared = match self
            .prepare(
                (client.session, client.keeps.clone()),
                client.listener,
                Some(asker),
                Resumable::No,
                client.parent.clone(),
            )
            .await
        {
            Ok(prepared) => prepared,
            Err(message) => return Ok(error(message)),
        };
        let progress = progress_ticker(client.progress.clone(), &prepared);
        let result = self
            .run(client.session, &prepared, code, client.cancel.clone())
            .await;
        if let Some(progress) = progress {
            progress.abort();
        }
        Ok(result.into())
    }

    /// The executions of 2026-07-28 clients that wait for the user's answer (see
    /// [`crate::relay`]), made on first use.
    pub fn paused(&self) -> Result<&Paused<CallToolResult>, String> {
        self.paused
            .get_or_init(|| Paused::new(PAUSED_KEEP, self.state.key()?, self.state.store()?))
            .as_ref()
            .map_err(Clone::clone)
    }

    /// Runs a program for a 2026-07-28 client: apart from the request, so that it can wait for
    /// an answer across `input_required` rounds.
    /// With `replay`, the program is run again from an earlier run's journal (see
    /// [`Replaying`]), to resume it here.
    async fn execute_stateless(
        self: &Arc<Self>,
        code: String,
        replay: Option<Replaying>,
        client: &Client<'_>,
    ) -> CallToolResponse {
        let (asker, events) = RoundTrip::<CallToolResult>::new(client.capabilities.clone());
        let done = asker.done_sender();
        // The execution may outlive this request (and, over HTTP, its connection): it is a
        // session of its own, whose `share = "session"` connections end with it.
        let session = match random_key() {
            Ok(key) => format!("{}/{key}", client.session),
            Err(why) => return error(why),
        };
        // A replay ends when the execution it resumes would have: its state expires then.
        let resumed_deadline = replay.as_ref().map(Replaying::deadline);
        let mut prepared = match self
            .prepare(
                (&session, client.keeps.clone()),
                client.listener,
                Some(Arc::new(asker)),
                match replay {
                    Some(replay) => Resumable::Replay(Box::new(replay)),
                    None => Resumable::Record,
                },
                client.parent.clone(),
            )
            .await
        {
            Ok(prepared) => prepared.admitted_as(client.fairness),
            Err(message) => return error(message),
        };
        let mut deadline = std::time::SystemTime::now() + prepared.limits.timeout;
        if let Some(resumed) = resumed_deadline
            && resumed < deadline
        {
            let left = resumed
                .duration_since(std::time::SystemTime::now())
                .unwrap_or_default();
            prepared.limits.timeout = left;
            deadline = resumed;
        }
        let progress = progress_ticker(client.progress.clone(), &prepared);
        let cancel = CancellationToken::new();
        let (executor, running) = (self.clone(), cancel.clone());
        let program = code.clone();
        tokio::spawn(async move {
            let result = executor.run(&session, &prepared, program, running).await;
            executor.gate.hub().end_session(&session).await;
            executor.tokens.forget(&session);
            let _ = done.send(Event::Done(result)).await;
        });
        let answer = self
            .next_event(events, (cancel, deadline), &code, &client.cancel)
            .await;
        if let Some(progress) = progress {
            progress.abort();
        }
        answer
    }

    /// What the execution does next, as this request's answer: its result, or its question
    /// (the execution then waits in [`Paused`] for the client's retry). The request cancelled
    /// (`request`) cancels the execution.
    async fn next_event(
        &self,
        mut events: mpsc::Receiver<Event<CallToolResult>>,
        (cancel, deadline): (CancellationToken, std::time::SystemTime),
        code: &str,
        request: &CancellationToken,
    ) -> CallToolResponse {
        let event = tokio::select! {
            event = events.recv() => event,
            () = request.cancelled() => {
                cancel.cancel();
                return error("Cancelled by the client".to_owned());
            }
        };
        match event {
            Some(Event::Done(result)) => result.into(),
            None => error("the execution ended without a result".to_owned()),
            Some(Event::Asked {
                question,
                answer,
                point,
            }) => {
                let question = *question;
                let point = point.map(|point| *point);
                let waiting =
                    Waiting::new(question.clone(), answer, events, cancel, point, deadline);
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
            Err(why) => return error(why),
        };
        let paused = match self.paused() {
            Ok(paused) => paused,
            Err(why) => return error(why),
        };
        match paused.pause(key, waiting, code).await {
            Ok(state) => input_required(question, state),
            Err(why) => error(format!("a tool asked for the user's input, but {why}")),
        }
    }

    /// A 2026-07-28 client's retry: its answer goes to the execution its `requestState` names,
    /// which then goes on; an execution that paused in another process is resumed here by
    /// replaying its journal. A state that was altered, not issued here (nor by a replica
    /// sharing the key), or bound to another program is refused (-32602).
    async fn resume(
        self: &Arc<Self>,
        state: &str,
        answers: Option<InputResponses>,
        code: String,
        client: &Client<'_>,
    ) -> Result<CallToolResponse, ErrorData> {
        let invalid = |why: String| ErrorData::new(ErrorCode::INVALID_PARAMS, why, None);
        let internal = |why: String| ErrorData::new(ErrorCode::INTERNAL_ERROR, why, None);
        let paused = self.paused().map_err(internal)?;
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
                ResumeError::Store(why) => internal(why),
            })?;
        let waiting = match resumed {
            Resumed::Here { waiting, .. } => *waiting,
            Resumed::Replay { point, deadline } => {
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
                let replay = Replaying::new(*point, answer, deadline);
                return Ok(self.execute_stateless(code, Some(replay), client).await);
            }
        };
        match answer {
            // No answer to the question: it is asked again, with a fresh state (the one that
            // came is used: it may have been claimed in the state store).
            None => {
                let question = waiting.question.clone();
                let state = paused
                    .pause(random_key().map_err(internal)?, waiting, &code)
                    .await
                    .map_err(internal)?;
                Ok(input_required(question, state))
            }
            Some(answer) => {
                let Waiting {
                    answer: reply,
                    events,
                    cancel,
                    deadline,
                    ..
                } = waiting;
                let _ = reply.send(Ok(answer));
                Ok(self
                    .next_event(events, (cancel, deadline), &code, &client.cancel)
                    .await)
            }
        }
    }
}

/// An error result with `message`.
fn error(message: String) -> CallToolResponse {
    CallToolResult::error(vec![ContentBlock::text(message)]).into()
}

/// The `input_required` result that asks `question`, resumed by `state`.
fn input_required(question: Question, state: String) -> CallToolResponse {
    let questions = [(INPUT_KEY.to_owned(), question)].into_iter().collect();
    InputRequiredResult::new(Some(questions), Some(state)).into()
}

/// A fresh key for a paused execution (never reused, so an old `requestState` cannot answer a
/// later question).
fn random_key() -> Result<String, String> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(|e| format!("cannot make a key: {e}"))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Progress every [`PROGRESS_EVERY`] while an execution runs, when the request asked.
fn progress_ticker(
    progress: Option<Arc<dyn Progress>>,
    prepared: &Prepared,
) -> Option<tokio::task::JoinHandle<()>> {
    let progress = progress?;
    let bridge = prepared.bridge.clone();
    Some(tokio::spawn(async move {
        let started = std::time::Instant::now();
        let mut tick = tokio::time::interval(PROGRESS_EVERY);
        tick.tick().await;
        loop {
            tick.tick().await;
            let elapsed = started.elapsed().as_secs_f64();
            let message = format!(
                "running for {elapsed:.0} s; {} tool calls so far",
                bridge.calls()
            );
            if !progress.tell(elapsed.floor(), message).await {
                return;
            }
        }
    }))
}
