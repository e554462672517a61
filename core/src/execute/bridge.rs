//! The sandbox's door to the Hub: each tool call counted, passed through every policy, sent,
//! and its result turned into the value the program sees.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};

use futures::{FutureExt, future::BoxFuture};
use serde_json::Value;

use super::gate::{Caller, Gate, Position, Request};
use crate::{
    relay::{Asker, Asking, Origin, Point, Question, Recorded},
    sandbox::{Answer, Determinism, Observed, ToolBridge, ToolCall},
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

/// The sandbox's door: each call is counted, then passes the gate ([`Gate`]).
pub struct HubBridge {
    /// The one path of every call.
    gate: Arc<Gate>,
    /// The execution making the calls.
    caller: Arc<Caller>,
    counts: Mutex<Counts>,
    /// Who answers what a tool or a policy asks of the user.
    asker: Option<Arc<dyn Asker>>,
    /// The calls made, when the execution may have to resume elsewhere.
    journal: Option<Arc<Mutex<Journal>>>,
    /// The journal of an earlier run of this program, when this run is its replay.
    replay: Option<Arc<Replaying>>,
    /// Servers exposed to clients directly only (`expose = "direct"`): not to programs.
    direct_only: Arc<[String]>,
    /// The execution's trace context: each call's span is its child.
    trace: opentelemetry::Context,
    /// Set when a replay took another path than the run it replays: the program is stopped.
    divergence: Arc<Divergence>,
}

/// Why a replay stopped its program: it made another call than its first run at a recorded
/// place, or the call at the replay point (or its question) is not the one the user answered.
/// Once set, every later call of the program fails with it, and the execution is cancelled (its
/// result is this error, whatever the program did with the failed call).
#[derive(Default)]
struct Divergence {
    why: std::sync::OnceLock<String>,
    stop: Mutex<Option<tokio_util::sync::CancellationToken>>,
}

impl Divergence {
    /// Records `why` (the first divergence wins) and stops the execution; the error calls get.
    fn diverge(&self, why: String) -> String {
        let why = self.why.get_or_init(|| why).clone();
        if let Some(stop) = self.stop.lock().ok().and_then(|mut stop| stop.take()) {
            stop.cancel();
        }
        why
    }

    fn diverged(&self) -> Option<&String> {
        self.why.get()
    }
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
    /// When the earlier run's execution ends (its own time limit): the replay ends then too.
    deadline: std::time::SystemTime,
}

impl Replaying {
    /// A replay of the run that stopped at `point`, with the user's answer to its question;
    /// the execution it resumes ends at `deadline`.
    pub fn new(point: Point, answer: Value, deadline: std::time::SystemTime) -> Self {
        Replaying {
            point,
            answer: Mutex::new(Some(answer)),
            deadline,
        }
    }

    /// When the execution it resumes ends.
    pub fn deadline(&self) -> std::time::SystemTime {
        self.deadline
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
    fn pause_at(&mut self, index: u64, origin: Origin, asking: Asking) -> Option<Point> {
        let alone = self.in_flight.iter().all(|other| *other == index);
        if !alone || self.full || *self.paused.borrow() {
            return None;
        }
        self.paused.send_replace(true);
        Some(Point {
            recorded: self.recorded.clone(),
            index,
            origin,
            asking,
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
    /// The call, when a question may carry a replay point or be answered by one (the journal's
    /// copy: its digest is taken only when the call asks).
    called: Option<Arc<Called>>,
    divergence: Arc<Divergence>,
    /// Questions asked during this call so far.
    asked: std::sync::atomic::AtomicUsize,
}

/// One call as the journal records it.
#[derive(Clone)]
struct Called {
    server: String,
    tool: String,
    arguments: Value,
}

impl Called {
    /// The identity of this call asking `question`: one SHA-256 of the arguments, one of the
    /// question.
    fn asking(&self, question: &Question) -> Asking {
        Asking::of(
            &self.server,
            &self.tool,
            crate::relay::digest(&self.arguments),
            question,
        )
    }
}

/// The most questions one call may put to the user (a server's requests during a legacy call,
/// `input_required` rounds and their requests, a policy's approval): a server that keeps asking
/// gets refusals, and the user is not flooded.
const MAX_QUESTIONS_PER_CALL: usize = 16;

impl CallAsker {
    fn new(
        inner: Arc<dyn Asker>,
        journal: Option<Arc<Mutex<Journal>>>,
        (replay, divergence): (Option<Arc<Replaying>>, Arc<Divergence>),
        index: u64,
        called: Option<Arc<Called>>,
    ) -> Self {
        CallAsker {
            inner,
            journal,
            replay,
            index,
            called,
            divergence,
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

    /// The answer a replay already has for this question: only when this is the call that
    /// asked in the run replayed, asking the same question the same way. The same place with
    /// another call or another question is a divergence (`Err`), which stops the program: the
    /// user's answer never goes to a call or a question they did not see.
    fn answered(&self, question: &Question, origin: Origin) -> Result<Option<Value>, String> {
        let Some(replay) = self.replay.as_ref() else {
            return Ok(None);
        };
        let point = &replay.point;
        if point.index != self.index || point.origin != origin {
            return Ok(None);
        }
        let Ok(mut answer) = replay.answer.lock() else {
            return Ok(None);
        };
        if answer.is_none() {
            return Ok(None);
        }
        let asking = self.called.as_ref().map(|called| called.asking(question));
        let expected = &point.asking;
        match asking {
            Some(asking) if asking == *expected => Ok(answer.take()),
            asking => {
                // The answer is spent either way: nothing else may get it.
                *answer = None;
                let now = asking.as_ref().map_or_else(
                    || "a call Runbyte cannot identify".to_owned(),
                    |asking| format!("`{}/{}`", asking.server, asking.tool),
                );
                let what = match &asking {
                    Some(asking)
                        if asking.server == expected.server
                            && asking.tool == expected.tool
                            && asking.arguments == expected.arguments =>
                    {
                        "the same call asking another question".to_owned()
                    }
                    Some(asking)
                        if asking.server == expected.server && asking.tool == expected.tool =>
                    {
                        format!("{now} with other arguments")
                    }
                    _ => now,
                };
                Err(self.divergence.diverge(format!(
                    "the program took another path when it was resumed: the user's answer was \
                     for call #{} to `{}/{}` ({}), and that call is now {what}; it stopped \
                     rather than give the answer to a call or a question the user did not see \
                     (the replica that resumed it has other servers, tools or modules than the \
                     one that paused it, or runs another version of Runbyte)",
                    self.index + 1,
                    expected.server,
                    expected.tool,
                    origin_text(origin),
                )))
            }
        }
    }
}

/// `Err` with the divergence when the call at a replay point (`server`, `tool`, `arguments`) is
/// not the one that asked there (one SHA-256 of the arguments, once per replay).
fn at_point(point: &Point, (server, tool, arguments): (&str, &str, &Value)) -> Result<(), String> {
    let expected = &point.asking;
    if expected.server == server
        && expected.tool == tool
        && expected.arguments == crate::relay::digest(arguments)
    {
        return Ok(());
    }
    let other = if expected.server == server && expected.tool == tool {
        " with other arguments"
    } else {
        ""
    };
    Err(format!(
        "the program took another path when it was resumed: the user's answer was for call #{} \
         to `{}/{}` ({}), and that call is now `{server}/{tool}`{other}; it stopped rather than \
         give the answer to a call the user did not see (the replica that resumed it has other \
         servers, tools or modules than the one that paused it, or runs another version of \
         Runbyte)",
        point.index + 1,
        expected.server,
        expected.tool,
        origin_text(point.origin),
    ))
}

fn origin_text(origin: Origin) -> &'static str {
    match origin {
        Origin::Approval => "a policy's approval",
        Origin::PinApproval => "the approval of its changed definition",
        Origin::InputRequired => "the server's `input_required` question",
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
        match self.answered(&question, origin) {
            Ok(Some(answer)) => return Box::pin(std::future::ready(Ok(answer))),
            Ok(None) => {}
            Err(diverged) => return Box::pin(std::future::ready(Err(diverged))),
        }
        let journal = self.journal.as_ref().zip(self.called.as_ref());
        let point = journal.and_then(|(journal, called)| {
            let asking = called.asking(&question);
            journal.lock().ok()?.pause_at(self.index, origin, asking)
        });
        let journal = journal.map(|(journal, _)| journal);
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
    /// A bridge for one execution (`caller`) whose calls pass `gate`; `trace` is the
    /// execution's span (each call's is its child), and programs may not call the servers in
    /// `direct_only` (exposed to clients directly only).
    pub fn new(
        gate: Arc<Gate>,
        caller: Caller,
        asker: Option<Arc<dyn Asker>>,
        resumable: Resumable,
        (trace, direct_only): (opentelemetry::Context, Arc<[String]>),
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
            gate,
            caller: Arc::new(caller),
            counts: Mutex::default(),
            asker,
            journal,
            replay,
            direct_only,
            trace,
            divergence: Arc::default(),
        }
    }

    /// Cancels `stop` (the sandbox's token of this execution) when a replay diverges.
    pub fn stop_on_divergence(&self, stop: tokio_util::sync::CancellationToken) {
        if let Ok(mut slot) = self.divergence.stop.lock() {
            if self.divergence.diverged().is_some() {
                stop.cancel();
            } else {
                *slot = Some(stop);
            }
        }
    }

    /// Why this replay stopped its program, when it diverged from the run it replays.
    pub fn diverged(&self) -> Option<String> {
        self.divergence.diverged().cloned()
    }

    /// How many of the execution's calls were answered from kept results (see
    /// [`crate::hub::Hub::read_resource_kept`]).
    pub fn cached(&self) -> u32 {
        self.caller
            .cached
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The tokens the tool results of this execution would have cost the model through direct
    /// calls, by server, once every count is done.
    pub async fn consumed(&self) -> std::collections::BTreeMap<String, crate::tokens::Count> {
        self.caller
            .tokens
            .by_server(crate::tokens::COUNT_WAIT)
            .await
    }

    /// The recorded result of call `index` when this run replays a journal that has it; an
    /// error when the program asks for another call there (it diverged from its first run),
    /// and at the replay point, when the call there is not the one that asked: either stops
    /// the program ([`Divergence`]).
    ///
    /// Arguments compare as JSON values, exactly: the same keys with the same values in any
    /// order are the same (`serde_json`'s maps compare so, `preserve_order` or not), `1` and
    /// `1.0` are not, strings compare by their characters.
    fn replayed(&self, index: u64, call: &ToolCall) -> Option<Result<Value, String>> {
        let replay = self.replay.as_ref()?;
        let Some(recorded) = replay.point.recorded.get(&index) else {
            if index == replay.point.index
                && let Err(why) =
                    at_point(&replay.point, (&call.server, &call.tool, &call.arguments))
            {
                return Some(Err(self.divergence.diverge(why)));
            }
            return None;
        };
        if recorded.server != call.server
            || recorded.tool != call.tool
            || recorded.arguments != call.arguments
        {
            let other = if recorded.server == call.server && recorded.tool == call.tool {
                " with other arguments"
            } else {
                ""
            };
            return Some(Err(self.divergence.diverge(format!(
                "the program took another path when it was resumed: its call #{} is now \
                 {}/{}{other}, where its first run called {}/{}; it stopped rather than guess \
                 (the replica that resumed it has other servers, tools or modules than the one \
                 that paused it, or runs another version of Runbyte)",
                index + 1,
                call.server,
                call.tool,
                recorded.server,
                recorded.tool
            ))));
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
        let answering = self.answer(call);
        Box::pin(async move { answering.await.map(|answer| answer.value) })
    }

    /// A read may be given again only where no journal records the run: a replay must meet
    /// each of its first run's calls again (see [`crate::sandbox::Answer::fresh`]).
    fn answer(&self, call: ToolCall) -> BoxFuture<'static, Result<Answer, String>> {
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
        let index = position.calls;
        if let Some(why) = self.divergence.diverged() {
            return Box::pin(std::future::ready(Err(why.clone())));
        }
        if let Some(replayed) = self.replayed(index, &call) {
            return Box::pin(std::future::ready(replayed.map(Answer::from)));
        }
        let (gate, caller, trace) = (self.gate.clone(), self.caller.clone(), self.trace.clone());
        let journal = self.journal.clone();
        // The journal's copy of the call, which the asker reads when the call asks.
        let recording = journal.as_ref().map(|journal| {
            let called = Called {
                server: call.server.clone(),
                tool: call.tool.clone(),
                arguments: call.arguments.clone(),
            };
            (journal.clone(), Arc::new(called))
        });
        let asker = self.asker.clone().map(|inner| -> Arc<dyn Asker> {
            Arc::new(CallAsker::new(
                inner,
                journal.clone(),
                (self.replay.clone(), self.divergence.clone()),
                index,
                recording.as_ref().map(|(_, called)| called.clone()),
            ))
        });
        async move {
            if let Some((journal, ..)) = &recording {
                Journal::enter(journal, index).await;
            }
            let request = Request {
                reads_resource: call.tool == crate::hub::READ_RESOURCE,
                server: call.server,
                tool: call.tool,
                arguments: call.arguments,
                position,
                timeout: call.timeout,
                time_left: call.time_left,
                keep_result: false,
                notices: None,
                pass_through: None,
            };
            let passed = gate.call(&caller, asker, &trace, request).await;
            let fresh = passed.fresh.filter(|_| recording.is_none());
            let result = passed.value;
            if let Some((journal, called)) = recording
                && let Ok(mut journal) = journal.lock()
            {
                let result = result.clone();
                // The asker is gone with the call: the copy is the journal's alone by now.
                let Called {
                    server,
                    tool,
                    arguments,
                } = Arc::unwrap_or_clone(called);
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
            result.map(|value| Answer { value, fresh })
        }
        .boxed()
    }
}

#[cfg(test)]
mod asker_tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[tokio::test]
    async fn one_call_may_ask_only_so_many_questions() {
        let asker = CallAsker::new(
            Arc::new(crate::relay::Unattended),
            None,
            (None, Arc::default()),
            0,
            None,
        );
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

#[cfg(test)]
mod replay_tests {
    //! An answer reaches, in a replay, only the call that asked it in the run replayed: the
    //! same server, tool, arguments (as JSON values: key order aside) and question. Generated
    //! runs are paused at a question, changed (modules, tools, arguments, questions), and
    //! replayed with the user's answer.
    #![allow(clippy::unwrap_used)]

    use proptest::{prelude::*, sample::select};
    use serde_json::json;

    use super::*;

    /// Takes the replay point a question carries; answers live questions with `live`.
    #[derive(Default)]
    struct Capture {
        point: Mutex<Option<Point>>,
        asked_live: std::sync::atomic::AtomicBool,
    }

    impl Asker for Capture {
        fn ask(&self, _question: Question) -> BoxFuture<'static, Result<Value, String>> {
            self.asked_live
                .store(true, std::sync::atomic::Ordering::Relaxed);
            Box::pin(std::future::ready(Ok(json!({"live": true}))))
        }

        fn ask_at(
            &self,
            _question: Question,
            point: Point,
        ) -> BoxFuture<'static, Result<Value, String>> {
            *self.point.lock().unwrap() = Some(point);
            self.asked_live
                .store(true, std::sync::atomic::Ordering::Relaxed);
            Box::pin(std::future::ready(Ok(json!({"live": true}))))
        }
    }

    /// One call that asks.
    #[derive(Debug, Clone)]
    struct Call {
        server: String,
        tool: String,
        arguments: Value,
        question: String,
        origin: Origin,
    }

    impl Call {
        fn question(&self) -> Question {
            match self.origin {
                Origin::Approval | Origin::PinApproval => crate::relay::approval(
                    &self.question,
                    &self.server,
                    &self.tool,
                    &self.arguments,
                ),
                // A server's own form: its text is the server's.
                Origin::InputRequired => {
                    crate::relay::approval(&self.question, "server", "form", &Value::Null)
                }
            }
        }

        fn called(&self) -> Arc<Called> {
            Arc::new(Called {
                server: self.server.clone(),
                tool: self.tool.clone(),
                arguments: self.arguments.clone(),
            })
        }
    }

    /// The run that asked: its replay point at call `index`.
    fn pause(call: &Call, index: u64) -> Point {
        let journal = Arc::new(Mutex::new(Journal::new(1)));
        let capture = Arc::new(Capture::default());
        let asker = CallAsker::new(
            capture.clone(),
            Some(journal),
            (None, Arc::default()),
            index,
            Some(call.called()),
        );
        let answer =
            futures::executor::block_on(asker.ask_again_able(call.question(), call.origin));
        assert_eq!(answer.unwrap(), json!({"live": true}));
        capture
            .point
            .lock()
            .unwrap()
            .take()
            .expect("no replay point")
    }

    /// How a replay of `point` with `answer` went for `call` at `index`.
    #[derive(Debug, PartialEq)]
    enum Went {
        /// The call got the user's answer.
        Answered,
        /// The program stopped: it diverged.
        Diverged(String),
        /// The question was put to the user again (the answer went nowhere).
        AskedAgain,
    }

    fn replay(point: Point, call: &Call, index: u64) -> Went {
        let answer = json!({"action": "accept", "content": {"approve": true}});
        let replaying = Arc::new(Replaying::new(
            point.clone(),
            answer.clone(),
            std::time::SystemTime::now(),
        ));
        let divergence: Arc<Divergence> = Arc::default();
        // What `HubBridge::replayed` checks when the call is made.
        if index == point.index
            && let Err(why) = at_point(&point, (&call.server, &call.tool, &call.arguments))
        {
            return Went::Diverged(divergence.diverge(why));
        }
        let capture = Arc::new(Capture::default());
        let asker = CallAsker::new(
            capture.clone(),
            Some(Arc::new(Mutex::new(Journal::new(1)))),
            (Some(replaying), divergence.clone()),
            index,
            Some(call.called()),
        );
        let got = futures::executor::block_on(asker.ask_again_able(call.question(), call.origin));
        match (got, divergence.diverged()) {
            (Ok(got), None) if got == answer => {
                assert!(
                    !capture
                        .asked_live
                        .load(std::sync::atomic::Ordering::Relaxed)
                );
                Went::Answered
            }
            (Ok(_), None) => Went::AskedAgain,
            (Err(why), Some(diverged)) => {
                assert_eq!(&why, diverged);
                Went::Diverged(why)
            }
            (got, diverged) => panic!("{got:?} with divergence {diverged:?}"),
        }
    }

    fn scalar() -> impl Strategy<Value = Value> {
        prop_oneof![
            select(vec!["scratch", "prod", "Prod", "scratch ", "", "0"]).prop_map(Value::from),
            (-3i64..3).prop_map(Value::from),
            select(vec![0.5f64, 1.0, -0.0]).prop_map(Value::from),
            any::<bool>().prop_map(Value::from),
            Just(Value::Null),
        ]
    }

    fn arguments() -> impl Strategy<Value = Value> {
        let value = scalar().prop_recursive(2, 8, 3, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..3).prop_map(Value::Array),
                prop::collection::btree_map(select(vec!["x", "y"]), inner, 0..3).prop_map(|map| {
                    Value::Object(map.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
                }),
            ]
        });
        prop::collection::btree_map(select(vec!["target", "force", "n", "path"]), value, 0..4)
            .prop_map(|map| {
                Value::Object(map.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())
            })
    }

    fn call() -> impl Strategy<Value = Call> {
        (
            select(vec!["fs", "db", "fs2"]),
            select(vec!["delete_thing", "echo", "delete_things"]),
            arguments(),
            select(vec![
                "Delete it?",
                "Allow a call that may change something?",
            ]),
            select(vec![
                Origin::Approval,
                Origin::InputRequired,
                Origin::PinApproval,
            ]),
        )
            .prop_map(|(server, tool, arguments, question, origin)| Call {
                server: server.to_owned(),
                tool: tool.to_owned(),
                arguments,
                question: question.to_owned(),
                origin,
            })
    }

    /// `value` with every object's keys in reverse order: the same JSON value.
    fn reordered(value: &Value) -> Value {
        match value {
            Value::Object(map) => Value::Object(
                map.iter()
                    .rev()
                    .map(|(k, v)| (k.clone(), reordered(v)))
                    .collect(),
            ),
            Value::Array(items) => Value::Array(items.iter().map(reordered).collect()),
            other => other.clone(),
        }
    }

    /// What changed between the pause and the replay.
    #[derive(Debug, Clone)]
    enum Change {
        Nothing,
        /// The same arguments, their keys in another order.
        KeyOrder,
        /// Another call altogether (another module, tool list, or program path).
        Another(Call),
        /// The same call with these arguments.
        Arguments(Value),
        /// The same call asking this question.
        Question(String),
    }

    fn change() -> impl Strategy<Value = Change> {
        prop_oneof![
            1 => Just(Change::Nothing),
            1 => Just(Change::KeyOrder),
            2 => call().prop_map(Change::Another),
            2 => arguments().prop_map(Change::Arguments),
            1 => select(vec!["Delete it?", "Delete prod?", "Allow?"])
                .prop_map(|q| Change::Question(q.to_owned())),
        ]
    }

    fn changed(call: &Call, change: &Change) -> Call {
        let mut call = call.clone();
        match change {
            Change::Nothing => {}
            Change::KeyOrder => call.arguments = reordered(&call.arguments),
            Change::Another(other) => call = other.clone(),
            Change::Arguments(arguments) => call.arguments = arguments.clone(),
            Change::Question(question) => call.question = question.clone(),
        }
        call
    }

    proptest! {
        #![proptest_config(ProptestConfig {
            cases: 1024,
            failure_persistence: None,
            ..ProptestConfig::default()
        })]

        /// Whatever changed, the answer reaches the call only when its server, tool, arguments
        /// and question are the ones the user saw; a changed call at the replay point ends the
        /// program (never a silent fall-through to another call).
        #[test]
        fn an_answer_never_reaches_a_call_the_user_did_not_see(
            first in call(),
            change in change(),
            index in 0u64..3,
        ) {
            let point = pause(&first, index);
            prop_assert_eq!(point.index, index);
            let then = changed(&first, &change);
            let same = then.server == first.server
                && then.tool == first.tool
                && then.arguments == first.arguments
                && then.question() == first.question()
                && then.origin == first.origin;
            let went = replay(point.clone(), &then, index);
            if same {
                prop_assert_eq!(went, Went::Answered);
            } else if then.origin == first.origin {
                match &went {
                    Went::Diverged(why) => {
                        prop_assert!(why.contains("took another path"), "{}", why);
                        prop_assert!(why.contains(&format!("`{}/{}`", first.server, first.tool)), "{}", why);
                        // The arguments are never quoted: they may be secret.
                        if let Some(target) = then.arguments.get("target").and_then(Value::as_str)
                            && target.len() > 3
                        {
                            prop_assert!(!why.contains(target), "{}", why);
                        }
                    }
                    other => prop_assert!(false, "not stopped: {:?}", other),
                }
            } else {
                // Asked another way (a policy's approval where the server asked, or back): a
                // new question to the user, never the old answer.
                prop_assert_ne!(went, Went::Answered);
            }
            // The same call at another place in the program never gets the answer.
            let elsewhere = replay(point, &first, index + 1);
            prop_assert_ne!(elsewhere, Went::Answered);
        }
    }

    /// The reviewers' case: the user approved `delete_thing {"target":"scratch"}`; the replica
    /// that replayed it would have called `delete_thing {"target":"prod"}` at that place.
    #[test]
    fn an_approval_of_scratch_does_not_delete_prod() {
        let scratch = Call {
            server: "things".into(),
            tool: "delete_thing".into(),
            arguments: json!({"target": "scratch"}),
            question: "Allow a call that may change something?".into(),
            origin: Origin::Approval,
        };
        let point = pause(&scratch, 2);
        let prod = Call {
            arguments: json!({"target": "prod"}),
            ..scratch.clone()
        };
        let Went::Diverged(why) = replay(point.clone(), &prod, 2) else {
            panic!("prod got the answer");
        };
        assert!(
            why.contains("call #3 to `things/delete_thing`")
                && why.contains("now `things/delete_thing` with other arguments")
                && !why.contains("prod")
                && !why.contains("scratch"),
            "{why}"
        );
        assert_eq!(replay(point, &scratch, 2), Went::Answered);
    }

    #[test]
    fn the_corpus_of_replays_answers_only_the_call_asked() {
        let cases: Vec<Value> =
            serde_json::from_str(include_str!("../../../tests/corpus/replay/answers.json"))
                .unwrap();
        assert!(cases.len() >= 8);
        let call = |value: &Value| Call {
            server: value["server"].as_str().unwrap().to_owned(),
            tool: value["tool"].as_str().unwrap().to_owned(),
            arguments: value["arguments"].clone(),
            question: value["question"].as_str().unwrap().to_owned(),
            origin: Origin::Approval,
        };
        for case in cases {
            let point = pause(&call(&case["asked"]), 1);
            let went = replay(point, &call(&case["replayed"]), 1);
            if case["answered"] == true {
                assert_eq!(went, Went::Answered, "{}", case["why"]);
            } else {
                assert!(
                    matches!(went, Went::Diverged(_)),
                    "{}: {went:?}",
                    case["why"]
                );
            }
        }
    }

    #[test]
    fn recorded_arguments_compare_as_json_values_exactly() {
        let one: Value = serde_json::from_str(r#"{"a": 1, "b": {"c": [1, "x"]}}"#).unwrap();
        let two: Value = serde_json::from_str(r#"{"b": {"c": [1, "x"]}, "a": 1}"#).unwrap();
        assert_eq!(one, two);
        assert_ne!(one, json!({"a": 1.0, "b": {"c": [1, "x"]}}));
        assert_ne!(one, json!({"a": 1, "b": {"c": ["x", 1]}}));
        assert_ne!(one, json!({"a": 1, "b": {"c": [1, "x"]}, "d": null}));
    }
}
