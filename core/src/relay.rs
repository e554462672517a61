//! Relaying what a tool (or a policy) asks of the user to the client of the execution that made
//! the call, in either protocol era.
//!
//! A downstream server asks with `elicitation/create`, `sampling/createMessage` or `roots/list`:
//! as a request on its connection during the call (2025-11-25 and earlier; the Hub's client
//! handler receives it), or as an `input_required` result of `tools/call` (2026-07-28; the Hub
//! answers and retries). A policy asks for approval (`{"allow": false, "ask": "..."}`). Either
//! way the question reaches the execution's [`Asker`]:
//! - a legacy client session: [`SessionAsker`] sends it as a server-to-client request;
//! - a 2026-07-28 client: [`RoundTrip`] ends the `execute_code` request with an `input_required`
//!   result whose `requestState` is signed; the client's retry carries the answer and the
//!   execution, which kept running in the meantime, goes on ([`Paused`] holds it);
//! - `runbyte exec`, or a client that did not declare the capability: the question is refused,
//!   and the program gets an error that names the tool and what was asked.
//!
//! The wait for an answer is bounded by the execution's own time limit (`timeout-ms`) and the
//! call's timeout: a person who takes longer gets the execution's timeout, as any slow call does.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use futures::future::BoxFuture;
use rmcp::{
    RoleServer,
    model::{
        ClientCapabilities, ElicitRequest, ElicitRequestParams, ElicitationSchema, InputRequest,
        RequestStateCodec, SealOptions, ServerRequest,
    },
    service::Peer,
};
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

/// What can be asked: an `elicitation/create`, `sampling/createMessage` or `roots/list` request.
pub type Question = InputRequest;

/// Whoever answers an execution's questions: the client that started it.
pub trait Asker: Send + Sync {
    /// Asks; the answer is the result of the question's method (`ElicitResult`,
    /// `CreateMessageResult`, `ListRootsResult`) as JSON. `Err` says why nobody can answer.
    fn ask(&self, question: Question) -> BoxFuture<'static, Result<Value, String>>;

    /// Asks a question that a re-run of the program would ask again at the same call (a
    /// policy's approval, a 2026-07-28 server's `input_required`): whoever asks for a call
    /// ([`CallAsker`]) may then make the execution resumable anywhere, by replay.
    fn ask_again_able(
        &self,
        question: Question,
        origin: Origin,
    ) -> BoxFuture<'static, Result<Value, String>> {
        let _ = origin;
        self.ask(question)
    }

    /// Asks with what a replay needs to resume the execution at this question.
    fn ask_at(
        &self,
        question: Question,
        point: Point,
    ) -> BoxFuture<'static, Result<Value, String>> {
        let _ = point;
        self.ask(question)
    }
}

/// Where a question that a re-run would ask again comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Origin {
    /// A policy's `ask` verdict, before the call is sent.
    Approval,
    /// A 2026-07-28 server's `input_required` result (the call did not run yet).
    InputRequired,
}

/// A tool call an execution made, and what came of it, as a replay returns it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Recorded {
    pub server: String,
    pub tool: String,
    pub arguments: Value,
    pub result: Result<Value, String>,
}

/// What resuming an execution by replay needs: the calls it made before the question (by
/// their place in the order the program made them), and the call that asked.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Point {
    /// The calls made so far, by index.
    pub recorded: std::collections::BTreeMap<u64, Recorded>,
    /// The index of the call that asked, and how it asked.
    pub index: u64,
    pub origin: Origin,
}

/// The method a question calls.
pub fn method_of(question: &Question) -> &'static str {
    match question {
        InputRequest::CreateMessage(_) => "sampling/createMessage",
        InputRequest::Elicitation(_) => "elicitation/create",
        InputRequest::ListRoots(_) => "roots/list",
        _ => "an unknown request",
    }
}

/// Whether `capabilities` let a client answer `question`, and if not, why.
fn answerable(capabilities: &ClientCapabilities, question: &Question) -> Result<(), String> {
    let (declared, capability) = match question {
        InputRequest::CreateMessage(_) => (capabilities.sampling.is_some(), "sampling"),
        InputRequest::Elicitation(_) => (capabilities.elicitation.is_some(), "elicitation"),
        InputRequest::ListRoots(_) => (capabilities.roots.is_some(), "roots"),
        _ => (false, "an unknown capability"),
    };
    if declared {
        Ok(())
    } else {
        Err(format!(
            "the client did not declare the `{capability}` capability, so it cannot answer `{}`",
            method_of(question)
        ))
    }
}

/// An approval question for a policy's `ask` verdict: a form with one boolean, `approve`.
pub fn approval(question: &str, server: &str, tool: &str, arguments: &Value) -> Question {
    let mut shown = arguments.to_string();
    if shown.len() > 2000 {
        let mut cut = 2000;
        while !shown.is_char_boundary(cut) {
            cut -= 1;
        }
        shown.truncate(cut);
        shown.push('…');
    }
    let schema: ElicitationSchema = serde_json::from_value(json!({
        "type": "object",
        "properties": {"approve": {"type": "boolean", "title": "Approve this call", "default": true}},
        "required": ["approve"],
    }))
    .unwrap_or_else(|_| ElicitationSchema::builder().build_unchecked());
    let params = ElicitRequestParams::FormElicitationParams {
        meta: None,
        message: format!("{question}\n\nRunbyte is about to call `{server}/{tool}` with {shown}"),
        requested_schema: schema,
    };
    InputRequest::Elicitation(ElicitRequest::new(params))
}

/// Whether an answer to [`approval`] approves.
pub fn approved(answer: &Value) -> bool {
    answer["action"] == "accept" && answer["content"]["approve"] != false
}

/// Asks a legacy client session with a server-to-client request.
pub struct SessionAsker {
    peer: Peer<RoleServer>,
}

impl SessionAsker {
    /// The asker of the session whose peer this is; `None` for a 2026-07-28 connection, which
    /// forbids server-to-client requests.
    pub fn of(peer: &Peer<RoleServer>) -> Option<Self> {
        peer.peer_info()?;
        Some(SessionAsker { peer: peer.clone() })
    }
}

impl Asker for SessionAsker {
    fn ask(&self, question: Question) -> BoxFuture<'static, Result<Value, String>> {
        let peer = self.peer.clone();
        Box::pin(async move {
            let capabilities = peer
                .peer_info()
                .map(|info| info.capabilities.clone())
                .unwrap_or_default();
            answerable(&capabilities, &question)?;
            let method = method_of(&question);
            let request = match question {
                InputRequest::CreateMessage(request) => {
                    ServerRequest::CreateMessageRequest(request)
                }
                InputRequest::Elicitation(request) => ServerRequest::ElicitRequest(request),
                InputRequest::ListRoots(request) => ServerRequest::ListRootsRequest(request),
                _ => return Err("Runbyte cannot relay this kind of request".to_owned()),
            };
            let answer = peer
                .send_request(request)
                .await
                .map_err(|error| format!("the client did not answer `{method}`: {error}"))?;
            serde_json::to_value(answer).map_err(|error| error.to_string())
        })
    }
}

/// What an execution run for a 2026-07-28 client tells the request waiting on it.
pub enum Event<T> {
    /// A question, where its answer goes, and (when it can resume anywhere) its replay point.
    Asked {
        question: Box<Question>,
        answer: oneshot::Sender<Result<Value, String>>,
        point: Option<Box<Point>>,
    },
    /// The execution ended with this.
    Done(T),
}

/// Asks a 2026-07-28 client: the question goes to whichever request is waiting on the
/// execution, which ends with `input_required`.
pub struct RoundTrip<T> {
    capabilities: ClientCapabilities,
    events: mpsc::Sender<Event<T>>,
}

impl<T: Send + 'static> RoundTrip<T> {
    /// An asker for an execution whose client declared `capabilities`, and the receiving end
    /// of its events.
    pub fn new(capabilities: ClientCapabilities) -> (Self, mpsc::Receiver<Event<T>>) {
        let (events, receiver) = mpsc::channel(4);
        (
            RoundTrip {
                capabilities,
                events,
            },
            receiver,
        )
    }

    /// The sender the execution reports its end on.
    pub fn done_sender(&self) -> mpsc::Sender<Event<T>> {
        self.events.clone()
    }
}

impl<T: Send + 'static> RoundTrip<T> {
    fn send(
        &self,
        question: Question,
        point: Option<Point>,
    ) -> BoxFuture<'static, Result<Value, String>> {
        let (capabilities, events) = (self.capabilities.clone(), self.events.clone());
        Box::pin(async move {
            answerable(&capabilities, &question)?;
            let (answer, answered) = oneshot::channel();
            events
                .send(Event::Asked {
                    question: Box::new(question),
                    answer,
                    point: point.map(Box::new),
                })
                .await
                .map_err(|_| "the client's request has ended".to_owned())?;
            answered
                .await
                .map_err(|_| "the client did not come back with an answer".to_owned())?
        })
    }
}

impl<T: Send + 'static> Asker for RoundTrip<T> {
    fn ask(&self, question: Question) -> BoxFuture<'static, Result<Value, String>> {
        self.send(question, None)
    }

    fn ask_at(
        &self,
        question: Question,
        point: Point,
    ) -> BoxFuture<'static, Result<Value, String>> {
        self.send(question, Some(point))
    }
}

/// How long a paused execution's `requestState` stays valid (its own time limit usually ends it
/// sooner).
const STATE_TTL: Duration = Duration::from_secs(24 * 3600);
/// The most executions waiting for a client's answer at once.
const MAX_PAUSED: usize = 1024;

/// One execution waiting for its client's answer.
pub struct Waiting<T> {
    /// The question asked, to ask again when a retry does not answer it.
    pub question: Question,
    /// Where the answer goes.
    pub answer: oneshot::Sender<Result<Value, String>>,
    /// The execution's later events.
    pub events: mpsc::Receiver<Event<T>>,
    /// Cancels the execution (when the client gives up on a retry).
    pub cancel: CancellationToken,
    /// Its replay point, when it can resume anywhere.
    pub point: Option<Point>,
    since: Instant,
}

/// Executions of 2026-07-28 clients that wait for an answer, by the key in their signed
/// `requestState`. The state names the process (`replica`) that holds the execution and, when
/// the execution can resume anywhere, carries its journal ([`Point`]); it is bound to the
/// program's text, so it answers only a retry of the same `execute_code`.
pub struct Paused<T> {
    codec: RequestStateCodec,
    /// Encrypts the journal a state carries (the tool results the program saw).
    journal_key: ring::aead::LessSafeKey,
    replica: String,
    waiting: Mutex<HashMap<String, Waiting<T>>>,
    /// States this process resumed by replay, so that one is never replayed twice here.
    replayed: Mutex<(
        std::collections::HashSet<String>,
        std::collections::VecDeque<String>,
    )>,
    /// Bound on each entry's life: past it, the execution has timed out anyway.
    keep: Duration,
}

/// What a `requestState` holds (signed as a whole; the journal also encrypted).
#[derive(serde::Serialize, serde::Deserialize)]
struct StateText {
    replica: String,
    key: String,
    /// The replay [`Point`] as JSON, encrypted: nonce then ciphertext and tag, base64url.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    journal: Option<String>,
}

/// The journal's key: HKDF-SHA256 of the signing secret, for ChaCha20-Poly1305.
fn journal_key(secret: &[u8]) -> Result<ring::aead::LessSafeKey, String> {
    let salt = ring::hkdf::Salt::new(ring::hkdf::HKDF_SHA256, b"runbyte requestState journal");
    let prk = salt.extract(secret);
    let okm = prk
        .expand(&[b"v1"], &ring::aead::CHACHA20_POLY1305)
        .map_err(|_| "cannot derive the journal key".to_owned())?;
    Ok(ring::aead::LessSafeKey::new(ring::aead::UnboundKey::from(
        okm,
    )))
}

/// How a retry resumes its execution.
pub enum Resumed<T> {
    /// It waits in this process.
    Here {
        key: String,
        waiting: Box<Waiting<T>>,
    },
    /// It paused elsewhere and can be resumed by replaying its journal.
    Replay(Box<Point>),
}

/// The most replayed states a process remembers (to refuse a second replay of one).
const MAX_REPLAYED: usize = 65_536;

impl<T> Paused<T> {
    /// An empty table whose states are signed with `secret` (from `[server] state-key-file`),
    /// or with a fresh random key of this process's own when there is none.
    pub fn new(keep: Duration, secret: Option<Vec<u8>>) -> Result<Self, String> {
        let secret = match secret {
            Some(secret) => secret,
            None => {
                let mut random = vec![0u8; 32];
                getrandom::fill(&mut random)
                    .map_err(|e| format!("cannot make a signing key: {e}"))?;
                random
            }
        };
        let journal_key = journal_key(&secret)?;
        let codec = RequestStateCodec::try_new(secret)
            .map_err(|e| format!("the requestState signing key is not usable: {e}"))?;
        let mut tag = [0u8; 6];
        getrandom::fill(&mut tag).map_err(|e| format!("cannot name this process: {e}"))?;
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|name| name.trim().to_owned())
            .unwrap_or_default();
        let tag: String = tag.iter().map(|b| format!("{b:02x}")).collect();
        Ok(Paused {
            codec,
            journal_key,
            replica: format!("{host}/{}/{tag}", std::process::id()),
            waiting: Mutex::new(HashMap::new()),
            replayed: Mutex::default(),
            keep,
        })
    }

    /// Keeps a waiting execution of `code`; the signed `requestState` that finds it again.
    pub fn pause(&self, key: String, waiting: Waiting<T>, code: &str) -> Result<String, String> {
        let mut table = self.waiting.lock().map_err(|_| "poisoned".to_owned())?;
        let keep = self.keep;
        table.retain(|_, entry| entry.since.elapsed() < keep && !entry.answer.is_closed());
        if table.len() >= MAX_PAUSED {
            return Err(format!(
                "{MAX_PAUSED} executions already wait for their clients' answers"
            ));
        }
        let state = self.seal(&key, waiting.point.as_ref(), code)?;
        table.insert(key, waiting);
        Ok(state)
    }

    fn seal(&self, key: &str, point: Option<&Point>, code: &str) -> Result<String, String> {
        let journal = point.map(|point| self.encrypt(point)).transpose()?;
        let text = StateText {
            replica: self.replica.clone(),
            key: key.to_owned(),
            journal,
        };
        let text = serde_json::to_vec(&text).map_err(|e| e.to_string())?;
        Ok(self.codec.seal_with(
            &text,
            &SealOptions::new()
                .ttl(STATE_TTL)
                .associated_data(code.as_bytes()),
        ))
    }

    /// A fresh `requestState` for an execution already in the table.
    pub fn reseal(&self, key: &str, code: &str) -> Result<String, String> {
        let table = self.waiting.lock().map_err(|_| "poisoned".to_owned())?;
        let waiting = table.get(key).ok_or("the execution has ended")?;
        self.seal(key, waiting.point.as_ref(), code)
    }

    /// The execution a client's `requestState` names. A state that was altered, signed with
    /// another key, or bound to another program is an error; so is one whose execution ended
    /// here, and one that paused elsewhere without a journal (or was replayed here already).
    pub fn resume(&self, state: &str, code: &str) -> Result<Resumed<T>, String> {
        let payload = self
            .codec
            .open_with(state, code.as_bytes())
            .map_err(|error| {
                format!(
                    "the requestState was not issued by this Runbyte (nor a replica sharing its \
                 state-key-file) for this program, or it was altered ({error})"
                )
            })?;
        let text: StateText = serde_json::from_slice(&payload)
            .map_err(|_| "the requestState does not name an execution".to_owned())?;
        if text.replica == self.replica {
            let mut table = self.waiting.lock().map_err(|_| "poisoned".to_owned())?;
            let waiting = table.remove(&text.key).ok_or_else(|| {
                "the execution this answer belongs to has ended (it ran out of time, or it was \
                 already answered)"
                    .to_owned()
            })?;
            return Ok(Resumed::Here {
                key: text.key,
                waiting: Box::new(waiting),
            });
        }
        let Some(point) = text
            .journal
            .map(|journal| self.decrypt(&journal))
            .transpose()?
        else {
            return Err(format!(
                "the execution this answer belongs to waits in another Runbyte process \
                 (`{}`) and cannot resume elsewhere (its question came while other calls were \
                 in flight, or from a server's request during a call): route this client's \
                 retries to that replica",
                text.replica
            ));
        };
        let mut replayed = self.replayed.lock().map_err(|_| "poisoned".to_owned())?;
        let (seen, order) = &mut *replayed;
        let id = format!("{}|{}", text.replica, text.key);
        if !seen.insert(id.clone()) {
            return Err("this answer was already used to resume its execution here".to_owned());
        }
        order.push_back(id);
        if order.len() > MAX_REPLAYED
            && let Some(oldest) = order.pop_front()
        {
            seen.remove(&oldest);
        }
        Ok(Resumed::Replay(Box::new(point)))
    }

    fn encrypt(&self, point: &Point) -> Result<String, String> {
        use base64::Engine as _;
        let mut sealed = serde_json::to_vec(point).map_err(|e| e.to_string())?;
        let mut nonce = [0u8; ring::aead::NONCE_LEN];
        getrandom::fill(&mut nonce).map_err(|e| format!("cannot make a nonce: {e}"))?;
        self.journal_key
            .seal_in_place_append_tag(
                ring::aead::Nonce::assume_unique_for_key(nonce),
                ring::aead::Aad::empty(),
                &mut sealed,
            )
            .map_err(|_| "cannot encrypt the journal".to_owned())?;
        let mut out = nonce.to_vec();
        out.extend_from_slice(&sealed);
        Ok(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(out))
    }

    fn decrypt(&self, journal: &str) -> Result<Point, String> {
        use base64::Engine as _;
        let unreadable = || "the requestState's journal cannot be read".to_owned();
        let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(journal)
            .map_err(|_| unreadable())?;
        if bytes.len() < ring::aead::NONCE_LEN {
            return Err(unreadable());
        }
        let (nonce, sealed) = bytes.split_at(ring::aead::NONCE_LEN);
        let nonce =
            ring::aead::Nonce::try_assume_unique_for_key(nonce).map_err(|_| unreadable())?;
        let mut sealed = sealed.to_vec();
        let plain = self
            .journal_key
            .open_in_place(nonce, ring::aead::Aad::empty(), &mut sealed)
            .map_err(|_| unreadable())?;
        serde_json::from_slice(plain).map_err(|_| unreadable())
    }

    /// Puts back an execution whose retry did not answer its question.
    pub fn put_back(&self, key: String, waiting: Waiting<T>) {
        if let Ok(mut table) = self.waiting.lock() {
            table.insert(key, waiting);
        }
    }
}

impl<T> Waiting<T> {
    /// A waiting execution, from now.
    pub fn new(
        question: Question,
        answer: oneshot::Sender<Result<Value, String>>,
        events: mpsc::Receiver<Event<T>>,
        cancel: CancellationToken,
        point: Option<Point>,
    ) -> Self {
        Waiting {
            question,
            answer,
            events,
            cancel,
            point,
            since: Instant::now(),
        }
    }
}

/// The executions a downstream connection's calls are making, for the questions its server
/// sends during them (2025-11-25 and earlier).
#[derive(Default, Clone)]
pub struct Callers {
    calls: Arc<Mutex<Vec<Arc<Caller>>>>,
}

/// One call in flight: its execution's asker, and whether a question was refused.
pub struct Caller {
    asker: Option<Arc<dyn Asker>>,
    refused: Mutex<Option<String>>,
}

impl Caller {
    /// Why a question during this call could not be asked, if one could not.
    pub fn refused(&self) -> Option<String> {
        self.refused.lock().ok().and_then(|refused| refused.clone())
    }
}

/// A call's place in [`Callers`], left when dropped.
pub struct InFlight {
    callers: Callers,
    caller: Arc<Caller>,
}

impl InFlight {
    /// The call.
    pub fn caller(&self) -> &Caller {
        &self.caller
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if let Ok(mut calls) = self.callers.calls.lock() {
            calls.retain(|caller| !Arc::ptr_eq(caller, &self.caller));
        }
    }
}

impl Callers {
    /// Registers a call for as long as the guard lives.
    pub fn enter(&self, asker: Option<Arc<dyn Asker>>) -> InFlight {
        let caller = Arc::new(Caller {
            asker,
            refused: Mutex::new(None),
        });
        if let Ok(mut calls) = self.calls.lock() {
            calls.push(caller.clone());
        }
        InFlight {
            callers: self.clone(),
            caller,
        }
    }

    /// Asks the execution whose call is in flight. With calls of several executions in flight
    /// on one connection, which one the server means cannot be told: the question is refused.
    pub async fn ask(&self, question: Question) -> Result<Value, String> {
        let method = method_of(&question);
        let calls: Vec<Arc<Caller>> = self
            .calls
            .lock()
            .map(|calls| calls.clone())
            .unwrap_or_default();
        let Some(first) = calls.first() else {
            return Err(format!(
                "`{method}` arrived while no call from a program was in flight; Runbyte relays \
                 questions only during a call"
            ));
        };
        let same = |a: &Option<Arc<dyn Asker>>, b: &Option<Arc<dyn Asker>>| match (a, b) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            (None, None) => true,
            _ => false,
        };
        if calls.iter().any(|call| !same(&call.asker, &first.asker)) {
            let why = format!(
                "`{method}` arrived while calls of several executions were in flight on this \
                 connection, so Runbyte cannot tell whose user to ask (set share = \"session\" \
                 for this server)"
            );
            for call in &calls {
                call.refuse(&why);
            }
            return Err(why);
        }
        let Some(asker) = first.asker.clone() else {
            let why = format!("`{method}` cannot be relayed: this execution has no client to ask");
            first.refuse(&why);
            return Err(why);
        };
        asker.ask(question).await.inspect_err(|why| {
            for call in &calls {
                call.refuse(why);
            }
        })
    }
}

impl Caller {
    fn refuse(&self, why: &str) {
        if let Ok(mut refused) = self.refused.lock() {
            refused.get_or_insert_with(|| why.to_owned());
        }
    }
}

/// Answers every question without a person: a form with the defaults of its schema (or a
/// plain value of each property's type), a sampling request with a fixed text, `roots/list`
/// with no roots. For `runbyte probe`, which exercises a server's tools unattended.
pub struct Unattended;

impl Unattended {
    /// A value for a property of an elicitation schema: its default, its first choice, or a
    /// plain value of its type.
    fn value_for(property: &Value) -> Value {
        if let Some(default) = property.get("default") {
            return default.clone();
        }
        if let Some(first) = property
            .get("enum")
            .and_then(Value::as_array)
            .and_then(|choices| choices.first())
        {
            return first.clone();
        }
        match property.get("type").and_then(Value::as_str) {
            Some("boolean") => json!(true),
            Some("integer" | "number") => json!(1),
            Some("array") => json!([]),
            Some("object") => json!({}),
            _ => json!("x"),
        }
    }
}

impl Asker for Unattended {
    fn ask(&self, question: Question) -> BoxFuture<'static, Result<Value, String>> {
        let answer = match &question {
            InputRequest::Elicitation(request) => {
                let params = serde_json::to_value(&request.params).unwrap_or_default();
                let content: serde_json::Map<String, Value> = params
                    .pointer("/requestedSchema/properties")
                    .and_then(Value::as_object)
                    .map(|properties| {
                        properties
                            .iter()
                            .map(|(name, property)| (name.clone(), Self::value_for(property)))
                            .collect()
                    })
                    .unwrap_or_default();
                Ok(json!({"action": "accept", "content": content}))
            }
            InputRequest::CreateMessage(_) => Ok(json!({
                "role": "assistant",
                "content": {"type": "text", "text": "ok"},
                "model": "runbyte-probe",
                "stopReason": "endTurn",
            })),
            InputRequest::ListRoots(_) => Ok(json!({"roots": []})),
            _ => Err("Runbyte cannot answer this kind of request".to_owned()),
        };
        Box::pin(std::future::ready(answer))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn elicit(message: &str) -> Question {
        approval(message, "s", "t", &json!({"a": 1}))
    }

    fn waiting(point: Option<Point>) -> Waiting<u32> {
        let (answer, _answered) = oneshot::channel();
        let (_events_tx, events) = mpsc::channel(1);
        Waiting::new(elicit("q"), answer, events, CancellationToken::new(), point)
    }

    fn here(resumed: Result<Resumed<u32>, String>) -> String {
        match resumed {
            Ok(Resumed::Here { key, .. }) => key,
            Ok(Resumed::Replay(_)) => panic!("replayed"),
            Err(error) => panic!("{error}"),
        }
    }

    #[tokio::test]
    async fn a_paused_execution_is_found_by_its_state_and_only_once() {
        let paused: Paused<u32> = Paused::new(Duration::from_secs(60), None).unwrap();
        let state = paused
            .pause("k1".to_owned(), waiting(None), "code")
            .unwrap();
        // Altered by one character: refused by name.
        let mut altered = state.clone().into_bytes();
        let last = altered.len() - 1;
        altered[last] = if altered[last] == b'A' { b'B' } else { b'A' };
        let error = paused
            .resume(std::str::from_utf8(&altered).unwrap(), "code")
            .err()
            .unwrap();
        assert!(error.contains("not issued by this Runbyte"), "{error}");
        // Bound to its program: another program's retry cannot use it.
        assert!(paused.resume(&state, "other code").is_err());
        // Another process's key: refused too.
        let other: Paused<u32> = Paused::new(Duration::from_secs(60), None).unwrap();
        assert!(other.resume(&state, "code").is_err());
        assert_eq!(here(paused.resume(&state, "code")), "k1");
        let error = paused.resume(&state, "code").err().unwrap();
        assert!(error.contains("has ended"), "{error}");
    }

    #[tokio::test]
    async fn another_replica_replays_a_journal_once_and_refuses_a_state_without_one() {
        let secret = b"a shared key of thirty-two bytes!".to_vec();
        let (one, two): (Paused<u32>, Paused<u32>) = (
            Paused::new(Duration::from_secs(60), Some(secret.clone())).unwrap(),
            Paused::new(Duration::from_secs(60), Some(secret)).unwrap(),
        );
        let without = one.pause("k2".to_owned(), waiting(None), "code").unwrap();
        let error = two.resume(&without, "code").err().unwrap();
        assert!(error.contains("another Runbyte process"), "{error}");
        let point = Point {
            recorded: [(
                0,
                Recorded {
                    server: "s".into(),
                    tool: "t".into(),
                    arguments: json!({}),
                    result: Ok(json!(1)),
                },
            )]
            .into_iter()
            .collect(),
            index: 1,
            origin: Origin::Approval,
        };
        let with = one
            .pause("k3".to_owned(), waiting(Some(point.clone())), "code")
            .unwrap();
        match two.resume(&with, "code") {
            Ok(Resumed::Replay(replayed)) => assert_eq!(*replayed, point),
            _ => panic!("not replayed"),
        }
        let error = two.resume(&with, "code").err().unwrap();
        assert!(error.contains("already used"), "{error}");
        // Where it paused, it resumes in memory.
        assert_eq!(here(one.resume(&with, "code")), "k3");
    }

    #[tokio::test]
    async fn a_question_during_calls_of_two_executions_is_refused() {
        let callers = Callers::default();
        let one: Arc<dyn Asker> = Arc::new(Unattended);
        let two: Arc<dyn Asker> = Arc::new(Unattended);
        let first = callers.enter(Some(one.clone()));
        let answer = callers.ask(elicit("alone")).await.unwrap();
        assert_eq!(answer["action"], "accept");
        assert_eq!(answer["content"]["approve"], true);
        let second = callers.enter(Some(two));
        let error = callers.ask(elicit("which?")).await.unwrap_err();
        assert!(error.contains("several executions"), "{error}");
        assert!(first.caller().refused().is_some());
        assert!(second.caller().refused().is_some());
        drop((first, second));
        let error = callers.ask(elicit("nobody")).await.unwrap_err();
        assert!(error.contains("no call"), "{error}");
    }

    #[test]
    fn approval_shows_the_call_and_reads_the_answer() {
        let question = approval("Allow?", "github", "delete_repo", &json!({"name": "x"}));
        let text = serde_json::to_value(&question).unwrap().to_string();
        assert!(
            text.contains("github/delete_repo") && text.contains(r#"{\"name\":\"x\"}"#),
            "{text}"
        );
        assert!(approved(
            &json!({"action": "accept", "content": {"approve": true}})
        ));
        assert!(!approved(
            &json!({"action": "accept", "content": {"approve": false}})
        ));
        assert!(!approved(&json!({"action": "decline"})));
    }
}

#[cfg(test)]
mod journal_tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn the_journal_travels_encrypted_and_an_altered_one_is_unreadable() {
        let paused: Paused<u32> =
            Paused::new(Duration::from_secs(60), Some(b"k".repeat(32))).unwrap();
        let point = Point {
            recorded: [(
                0,
                Recorded {
                    server: "s".into(),
                    tool: "t".into(),
                    arguments: json!({"q": "secret-argument"}),
                    result: Ok(json!("secret-result")),
                },
            )]
            .into_iter()
            .collect(),
            index: 1,
            origin: Origin::InputRequired,
        };
        let sealed = paused.encrypt(&point).unwrap();
        assert!(!sealed.contains("secret"));
        use base64::Engine as _;
        let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(&sealed)
            .unwrap();
        assert!(!String::from_utf8_lossy(&raw).contains("secret"));
        assert_eq!(paused.decrypt(&sealed).unwrap(), point);
        let mut altered = raw.clone();
        let last = altered.len() - 1;
        altered[last] ^= 1;
        let altered = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(altered);
        assert!(paused.decrypt(&altered).is_err());
        // Another key cannot read it.
        let other: Paused<u32> =
            Paused::new(Duration::from_secs(60), Some(b"o".repeat(32))).unwrap();
        assert!(other.decrypt(&sealed).is_err());
    }
}
