//! What a 2026-07-28 client's direct call asks the user (a changed tool's approval under
//! `pin = "ask"`, a policy's `ask` verdict). Such a client has no session to be asked through:
//! the call is answered `input_required` with Runbyte's question and a `requestState` of
//! Runbyte's own, and the client's retry of the same call carries the answer.
//!
//! An answer goes only to the question it was given for, on the call it was asked on: the
//! state is sealed with the `requestState` key (`[server] state-key-file`, else this process's
//! own) and binds the server, the tool, the canonical arguments and a digest of the question,
//! which holds the new definition's digest and diff. A retry of another call, or one whose
//! question is now another (the tool changed again), is asked afresh. A state is taken once
//! (in the state store when there is one, so once across the replicas) and lives
//! [`ANSWER_WITHIN`].

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use futures::future::BoxFuture;
use rmcp::model::{ClientCapabilities, InputResponses};
use serde_json::{Value, json};

use crate::relay::{self, Asker, Origin, Paused, Question};

/// The start of every `requestState` Runbyte gives a direct call it answers `input_required`:
/// a retry whose state starts with it answers Runbyte, and its server never sees it.
pub const STATE_PREFIX: &str = "runbyte-ask.";

/// What the state is sealed for (its associated data): no other state of Runbyte's opens as one.
const PURPOSE: &str = "runbyte/direct-call-question/1";

/// How long the client has to answer.
pub const ANSWER_WITHIN: Duration = Duration::from_secs(600);

/// A retry's `requestState` (without [`STATE_PREFIX`]) and `inputResponses`.
pub struct DirectRetry {
    pub state: String,
    pub answers: Option<InputResponses>,
}

/// The asker of one 2026-07-28 direct call.
#[derive(Clone)]
pub struct DirectAsk(Arc<Inner>);

struct Inner {
    capabilities: ClientCapabilities,
    /// The call's digest: its server, tool and canonical arguments.
    call: String,
    /// The retry's answer, with the digest of the question it was given for.
    answer: Mutex<Option<(String, Value)>>,
    /// The question this call asks, when it asks one.
    asked: Mutex<Option<Question>>,
}

impl DirectAsk {
    /// The asker of the call of `server`/`tool` with `arguments`, by a client of
    /// `capabilities`; with `retry`, the answer it brings, once its state opens, belongs to
    /// this call and was not taken before. `Err`: why the retry is refused (invalid params).
    pub async fn new<T>(
        paused: &Paused<T>,
        capabilities: Option<&Value>,
        (server, tool, arguments): (&str, &str, &Value),
        retry: Option<DirectRetry>,
    ) -> Result<DirectAsk, String> {
        let capabilities = capabilities
            .and_then(|c| serde_json::from_value(c.clone()).ok())
            .unwrap_or_default();
        let call = digest(&json!([server, tool, relay::canonical(arguments)]).to_string());
        let mut answer = None;
        if let Some(retry) = retry {
            let payload = paused.open_for(PURPOSE, &retry.state)?;
            if payload["call"] != call.as_str() {
                return Err(format!(
                    "the requestState was given for another call than this one of \
                     `{server}/{tool}` (another tool, or other arguments): make the call again"
                ));
            }
            let given = retry
                .answers
                .and_then(|mut answers| answers.remove(super::round_trip::INPUT_KEY));
            if let Some(given) = given {
                if !given.is_object() {
                    return Err(format!(
                        "inputResponses.{} must be an object (the answer's result)",
                        super::round_trip::INPUT_KEY
                    ));
                }
                let id = payload["id"].as_str().unwrap_or_default();
                if !paused.take_once(id, ANSWER_WITHIN).await? {
                    return Err(
                        "this answer was used already: make the call again to be asked again"
                            .to_owned(),
                    );
                }
                let question = payload["question"].as_str().unwrap_or_default().to_owned();
                answer = Some((question, given));
            }
        }
        Ok(DirectAsk(Arc::new(Inner {
            capabilities,
            call,
            answer: Mutex::new(answer),
            asked: Mutex::default(),
        })))
    }

    /// The question the call asked and no answer came for, with the `requestState` (with
    /// [`STATE_PREFIX`]) that its answer comes back with.
    pub fn asked<T>(&self, paused: &Paused<T>) -> Option<Result<(Question, String), String>> {
        let question = self.0.asked.lock().ok()?.take()?;
        let mut id = [0u8; 16];
        if let Err(error) = getrandom::fill(&mut id) {
            return Some(Err(format!("cannot make a requestState: {error}")));
        }
        let payload = json!({
            "id": relay::hex(&id),
            "call": self.0.call,
            "question": digest(&serde_json::to_string(&question).unwrap_or_default()),
        });
        Some(
            paused
                .seal_for(PURPOSE, payload, ANSWER_WITHIN)
                .map(|state| (question, format!("{STATE_PREFIX}{state}"))),
        )
    }
}

impl Asker for DirectAsk {
    /// What a server asks during the call cannot wait for a retry (the call would run twice):
    /// nobody answers it, as before this call had an asker.
    fn ask(&self, question: Question) -> BoxFuture<'static, Result<Value, String>> {
        let method = relay::method_of(&question);
        Box::pin(async move {
            Err(format!(
                "a 2026-07-28 client's direct call has no session to answer `{method}` during \
                 the call"
            ))
        })
    }

    /// Runbyte's own approvals, asked before the call is sent, go to the client as
    /// `input_required`; anything else as [`DirectAsk::ask`].
    fn ask_again_able(
        &self,
        question: Question,
        origin: Origin,
    ) -> BoxFuture<'static, Result<Value, String>> {
        if !matches!(origin, Origin::Approval | Origin::PinApproval) {
            return self.ask(question);
        }
        let inner = self.0.clone();
        Box::pin(async move {
            let asked = digest(&serde_json::to_string(&question).map_err(|e| e.to_string())?);
            let answer = inner
                .answer
                .lock()
                .ok()
                .and_then(|mut answer| answer.take());
            if let Some((given_for, answer)) = answer
                && given_for == asked
            {
                return Ok(answer);
            }
            relay::answerable(&inner.capabilities, &question)?;
            if let Ok(mut slot) = inner.asked.lock() {
                *slot = Some(question);
            }
            Err("the question goes to the client (`input_required`)".to_owned())
        })
    }
}

/// SHA-256 of `text`, in hex.
fn digest(text: &str) -> String {
    relay::hex(ring::digest::digest(&ring::digest::SHA256, text.as_bytes()).as_ref())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn paused() -> Paused<()> {
        Paused::new(Duration::from_secs(60), Some(vec![7u8; 32]), None).unwrap()
    }

    fn elicit(message: &str) -> Question {
        relay::approval(message, "t", "echo", &json!({"message": "hi"}))
    }

    #[tokio::test]
    async fn an_answer_goes_only_to_its_question_on_its_call_once() {
        let paused = paused();
        let capabilities = json!({"elicitation": {}});
        let call = ("t", "echo", &json!({"message": "hi"}));
        let first = DirectAsk::new(&paused, Some(&capabilities), call, None)
            .await
            .unwrap();
        assert!(
            first
                .ask_again_able(elicit("approve A?"), Origin::PinApproval)
                .await
                .is_err()
        );
        let (_, state) = first.asked(&paused).unwrap().unwrap();
        let state = state.strip_prefix(STATE_PREFIX).unwrap().to_owned();
        let answer = json!({"action": "accept", "content": {"approve": true}});
        let retry = |state: &str| DirectRetry {
            state: state.to_owned(),
            answers: Some(
                [("runbyte_input".to_owned(), answer.clone())]
                    .into_iter()
                    .collect(),
            ),
        };

        // Another question on the same call is asked afresh, and the answer is spent.
        let again = DirectAsk::new(&paused, Some(&capabilities), call, Some(retry(&state)))
            .await
            .unwrap();
        assert!(
            again
                .ask_again_able(elicit("approve B?"), Origin::PinApproval)
                .await
                .is_err()
        );
        assert!(again.asked(&paused).is_some());
        let spent = DirectAsk::new(&paused, Some(&capabilities), call, Some(retry(&state))).await;
        assert!(spent.err().unwrap().contains("used already"));

        // Its own question gets the answer.
        let first = DirectAsk::new(&paused, Some(&capabilities), call, None)
            .await
            .unwrap();
        let _ = first
            .ask_again_able(elicit("approve A?"), Origin::Approval)
            .await;
        let (_, state) = first.asked(&paused).unwrap().unwrap();
        let state = state.strip_prefix(STATE_PREFIX).unwrap().to_owned();
        let answered = DirectAsk::new(&paused, Some(&capabilities), call, Some(retry(&state)))
            .await
            .unwrap();
        assert_eq!(
            answered
                .ask_again_able(elicit("approve A?"), Origin::Approval)
                .await
                .unwrap(),
            answer
        );
        assert!(answered.asked(&paused).is_none());

        // Another call's arguments, another purpose's state, another key: refused.
        let other = ("t", "echo", &json!({"message": "bye"}));
        let refused =
            DirectAsk::new(&paused, Some(&capabilities), other, Some(retry(&state))).await;
        assert!(refused.err().unwrap().contains("another call"));
        let foreign = paused
            .seal_for("another purpose", json!({}), ANSWER_WITHIN)
            .unwrap();
        let refused =
            DirectAsk::new(&paused, Some(&capabilities), call, Some(retry(&foreign))).await;
        assert!(
            refused
                .err()
                .unwrap()
                .contains("not issued by this Runbyte")
        );
        let elsewhere =
            Paused::<()>::new(Duration::from_secs(60), Some(vec![8u8; 32]), None).unwrap();
        let refused =
            DirectAsk::new(&elsewhere, Some(&capabilities), call, Some(retry(&state))).await;
        assert!(
            refused
                .err()
                .unwrap()
                .contains("not issued by this Runbyte")
        );
    }

    #[tokio::test]
    async fn only_runbytes_approvals_are_asked_and_only_of_a_client_that_can_answer() {
        let paused = paused();
        let asker = DirectAsk::new(&paused, Some(&json!({})), ("t", "echo", &json!({})), None)
            .await
            .unwrap();
        let why = asker
            .ask_again_able(elicit("approve?"), Origin::PinApproval)
            .await
            .unwrap_err();
        assert!(why.contains("`elicitation` capability"), "{why}");
        assert!(asker.asked(&paused).is_none());
        // What a server asks during a call is not put off to a retry.
        let asker = DirectAsk::new(
            &paused,
            Some(&json!({"elicitation": {}})),
            ("t", "echo", &json!({})),
            None,
        )
        .await
        .unwrap();
        for origin in [None, Some(Origin::InputRequired)] {
            let why = match origin {
                None => asker.ask(elicit("server asks")).await,
                Some(origin) => asker.ask_again_able(elicit("server asks"), origin).await,
            }
            .unwrap_err();
            assert!(
                why.contains("no session to answer `elicitation/create`"),
                "{why}"
            );
            assert!(asker.asked(&paused).is_none());
        }
    }
}
