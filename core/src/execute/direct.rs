//! A client's direct call (`expose = "direct"` or `"both"`): the session's limits from the
//! policies, then the gate, as a program's call; the server's result comes back as it is (its
//! resource URIs those the client reads, as the gate gives every result). A task the server
//! answered with (SEP-2663) comes back under an id of Runbyte's ([`crate::hub::Hub::adopt_task`]).

use std::sync::Arc;

use rmcp::model::{CallToolResponse, ErrorData, InputRequiredResult, ResultType};

use super::{
    Executor,
    direct_ask::{DirectAsk, DirectRetry},
    gate::{Caller, Position, Request},
};
use crate::{
    hub::{CallError, PassThrough},
    relay::Asker,
    telemetry::Parent,
};

/// One direct call, as a client asked it.
pub struct DirectCall<'a> {
    /// The client session.
    pub session: &'a str,
    /// Who the client is, for the tasks its call makes: only it sees them.
    pub owner: &'a str,
    /// The transport the session came through.
    pub listener: Option<&'a str>,
    /// Who answers what a tool or a policy asks of the user (`None`: nobody can).
    pub asker: Option<Arc<dyn Asker>>,
    /// The server and the tool on it.
    pub target: (&'a str, &'a str),
    /// The arguments, as given.
    pub arguments: serde_json::Value,
    /// The trace context the client's request carried.
    pub parent: Parent,
    /// Where the server's progress and log messages during the call go.
    pub notices: Option<Arc<dyn crate::relay::Notices>>,
    /// A 2026-07-28 client's call: its server's questions go back to it as they came.
    pub pass_through: Option<Arc<PassThrough>>,
    /// A 2026-07-28 client's retry that answers a question of Runbyte's (see [`super::direct_ask`]).
    pub retry: Option<DirectRetry>,
}

/// Why a direct call has no result.
pub enum DirectError {
    /// The call was not made or failed on Runbyte's side (denied, invalid, unreachable, timed
    /// out): the client reads why as the tool's error (redacted).
    Failed(String),
    /// The server answered with a JSON-RPC error: the client gets it as it came (redacted).
    Server(ErrorData),
}

impl Executor {
    /// Calls a tool for a client that sees it directly: the policies judge it as they judge a
    /// program's call (with the session's limits for its timeout), and it passes the same gate
    /// (the Hub checks the arguments and sends it; it is traced, audited, its tokens counted
    /// into the session's totals and its shape learned). The server's result comes back as it
    /// is (its resource URIs those the client reads, see [`crate::hub::Uris`]), marked complete
    /// for 2026-07-28 clients, or its question when it asked one of a client it passes them to
    /// ([`PassThrough`]).
    pub async fn direct(&self, call: DirectCall<'_>) -> Result<CallToolResponse, DirectError> {
        let (limits, judges) = self
            .session_limits(call.session, call.listener)
            .await
            .map_err(DirectError::Failed)?;
        let caller = Caller {
            session: call.session.to_owned(),
            execution: super::execution_id(),
            judges,
            tokens: Arc::default(),
            cached: Arc::default(),
            // A direct call names a server's tool, never `./state`.
            keeps: crate::kept::Owner::Refused("a direct call keeps nothing".to_owned()),
        };
        let (server, tool) = call.target;
        // A 2026-07-28 client without a session is asked by `input_required` (see
        // [`super::direct_ask`]).
        let invalid = |why: String| DirectError::Server(ErrorData::invalid_params(why, None));
        let direct_ask = match (&call.asker, &call.pass_through) {
            (None, Some(through)) => {
                let paused = self.paused().map_err(DirectError::Failed)?;
                let asker = DirectAsk::new(
                    paused,
                    through.capabilities.as_ref(),
                    (server, tool, &call.arguments),
                    call.retry,
                )
                .await
                .map_err(invalid)?;
                Some(asker)
            }
            _ => None,
        };
        let asker = call.asker.or_else(|| {
            direct_ask
                .clone()
                .map(|asker| Arc::new(asker) as Arc<dyn Asker>)
        });
        let request = Request {
            server: server.to_owned(),
            tool: tool.to_owned(),
            arguments: call.arguments,
            position: Position::default(),
            timeout: limits.call_timeout,
            time_left: limits.timeout,
            reads_resource: false,
            keep_result: true,
            notices: call.notices,
            pass_through: call.pass_through.clone(),
        };
        let passed = self
            .gate
            .call(&caller, asker, &call.parent.context(), request)
            .await;
        self.count_direct(caller);
        if let Some(asked) = direct_ask.as_ref().and_then(|asker| {
            let paused = self.paused().ok()?;
            asker.asked(paused)
        }) {
            let (question, state) = asked.map_err(DirectError::Failed)?;
            let questions = [(super::round_trip::INPUT_KEY.to_owned(), question)]
                .into_iter()
                .collect();
            return Ok(InputRequiredResult::new(Some(questions), Some(state)).into());
        }
        if let Some(mut result) = passed.result {
            // A legacy server's result has no `resultType`; 2026-07-28 requires it (rmcp drops
            // it again for legacy clients).
            result.result_type.get_or_insert(ResultType::COMPLETE);
            return Ok(result.into());
        }
        match passed.failure {
            Some(CallError::Asked { .. })
                if let Some(asked) = call.pass_through.as_ref().and_then(|p| p.asked()) =>
            {
                Ok(CallToolResponse::InputRequired(asked))
            }
            Some(CallError::Asked { .. })
                if let Some(through) = call.pass_through.as_ref()
                    && let Some(mut created) = through.task() =>
            {
                self.gate.hub().adopt_task(
                    server,
                    Some(call.session),
                    call.owner,
                    through.capabilities.clone(),
                    &mut created.task,
                );
                Ok(CallToolResponse::Task(created))
            }
            // A tool the server does not have is a protocol error, as the server would answer.
            Some(error @ CallError::UnknownTool { .. }) => {
                Err(DirectError::Server(ErrorData::invalid_params(
                    crate::redact::redact(&error.to_string()).into_owned(),
                    None,
                )))
            }
            // Not an authorization's refusal: those say how to log in, in Runbyte's words.
            Some(CallError::Protocol {
                answer: Some(error),
                auth: None,
                ..
            }) => Err(DirectError::Server(*error)),
            _ => Err(DirectError::Failed(
                passed
                    .value
                    .err()
                    .unwrap_or_else(|| "the call returned nothing".to_owned()),
            )),
        }
    }

    /// Adds a direct call's tokens to its session's totals, once counted (the client reads the
    /// result as it is: what it returned is what it consumed). The answer does not wait.
    fn count_direct(&self, caller: Caller) {
        let tokens = self.tokens.clone();
        tokio::spawn(async move {
            let consumed = caller
                .tokens
                .by_server(crate::tokens::COUNT_WAIT)
                .await
                .into_values()
                .fold(crate::tokens::Count::default(), |sum, count| sum + count);
            if consumed.tokens > 0 {
                let accounting = crate::tokens::Accounting {
                    returned: consumed,
                    consumed,
                };
                tokens.add(&caller.session, &accounting);
            }
        });
    }
}
