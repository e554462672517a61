//! The one path of a tool call, for a program's call and a client's direct call alike: the
//! user's approval of a changed tool definition (`pin = "ask"`, `super::pin_ask`), the
//! policies' verdict (told the tool's pin state), the Hub's call (it validates the arguments) within its timeout, then the
//! call's span and metrics, the audit log, the tokens of its result, the shape of an untyped
//! result, and every error redacted. A step added to a call is added here, once.
//!
//! What only a program's call has (counting its position, the replay journal, divergence, the
//! refusal of direct-only servers) stays in the bridge (`super::bridge`); what only a direct
//! call has (its result returned as the server gave it, but for [`crate::hub::Uris`]'s URIs)
//! in `super::direct`.

use std::{borrow::Cow, sync::Arc, time::Duration};

use opentelemetry::context::FutureExt as _;
use rmcp::model::CallToolResult;
use runbyte_plugin_api::wire;
use serde_json::Value;

use super::{pin_ask::PinAsks, value::map_result};
use crate::{
    audit::{AuditLog, CallEnd},
    hub::{CallError, CallOptions, Hub},
    infer::Inferred,
    kept::{self, Kept},
    policy::{Judge, Refusal},
    relay::Asker,
    telemetry::{CallOutcome, Telemetry},
    tokens::Pending,
};

/// The parts of the gateway every call passes through.
#[derive(Clone)]
pub struct Gate {
    hub: Hub,
    audit: Option<AuditLog>,
    telemetry: Telemetry,
    /// Where the shapes of untyped tools' results are recorded (a gateway that serves the VFS).
    inferred: Option<Arc<Inferred>>,
    /// The approvals of changed tool definitions being asked.
    pin_asks: Arc<PinAsks>,
    /// The values programs keep for their sessions' later programs (`./state`).
    kept: Arc<Kept>,
}

/// Who makes the calls: one execution (a program's calls) or one direct call. Kept for the
/// whole execution, so that a call copies nothing of it.
pub struct Caller {
    /// The client session.
    pub session: String,
    /// The execution's id (a direct call has one of its own).
    pub execution: String,
    /// The policies, with the calls each judges.
    pub judges: Vec<Judge>,
    /// Where the tokens of the results are counted.
    pub tokens: Arc<Pending>,
    /// How many of its calls were answered from what the servers' caching hints let the Hub
    /// keep (the summary's `cached`).
    pub cached: Arc<std::sync::atomic::AtomicU32>,
    /// Whose values its `./state` calls keep and recall.
    pub keeps: kept::Owner,
}

/// Where one call stands in its execution: the calls made before it (a direct call: none).
#[derive(Clone, Copy, Default)]
pub struct Position {
    /// Calls before it.
    pub calls: u64,
    /// Calls to its server before it.
    pub calls_to_server: u64,
    /// Calls to its tool before it.
    pub calls_to_tool: u64,
}

/// One call, as it enters the gate.
pub struct Request {
    /// The server's name as configured.
    pub server: String,
    /// The tool's name on the server.
    pub tool: String,
    /// The arguments, as given.
    pub arguments: Value,
    /// Where it stands in its execution.
    pub position: Position,
    /// How long it may take unless a policy says otherwise.
    pub timeout: Duration,
    /// The most it may take whatever a policy says: the time its execution has left.
    pub time_left: Duration,
    /// A program's `readResource`: judged as a call of this name, then the resource is read.
    pub reads_resource: bool,
    /// Whether the server's result is wanted as it came (a direct call), beside its value.
    pub keep_result: bool,
    /// Where the server's progress and log messages go (a direct call's client).
    pub notices: Option<Arc<dyn crate::relay::Notices>>,
    /// A 2026-07-28 client's direct call: the server's questions go back to it.
    pub pass_through: Option<Arc<crate::hub::PassThrough>>,
}

/// What came out of the gate.
pub struct Passed {
    /// The result as a program sees it ([`map_result`]), or why the call failed (denied, not
    /// sent, failed, or the tool's own error), redacted.
    pub value: Result<Value, String>,
    /// The server's result as it came, when [`Request::keep_result`] asked and the server
    /// answered.
    pub result: Option<CallToolResult>,
    /// Why the call failed, as the Hub said it, when [`Request::keep_result`] asked (a direct
    /// call passes a server's JSON-RPC error or question on as it came).
    pub failure: Option<CallError>,
    /// How long a program may be given the same value for the same call again without asking
    /// (see [`crate::sandbox::Answer::fresh`]): a read its server said may be kept, of a server
    /// no policy judges.
    pub fresh: Option<Duration>,
}

impl Gate {
    /// The gate of a gateway's parts.
    pub fn new(
        hub: Hub,
        audit: Option<AuditLog>,
        telemetry: Telemetry,
        inferred: Option<Arc<Inferred>>,
    ) -> Self {
        Gate {
            hub,
            audit,
            telemetry,
            inferred,
            pin_asks: Arc::default(),
            kept: Arc::default(),
        }
    }

    /// The values programs keep for their sessions (`./state`).
    pub fn kept(&self) -> &Arc<Kept> {
        &self.kept
    }

    /// The Hub the calls go to.
    pub fn hub(&self) -> &Hub {
        &self.hub
    }

    /// Where calls' spans and metrics go.
    pub fn telemetry(&self) -> &Telemetry {
        &self.telemetry
    }

    /// The audit log, when one is configured.
    pub fn audit(&self) -> Option<&AuditLog> {
        self.audit.as_ref()
    }

    /// Where the shapes of untyped tools' results are recorded, when the gateway serves the VFS.
    pub fn inferred(&self) -> Option<&Arc<Inferred>> {
        self.inferred.as_ref()
    }

    /// Passes one call of `caller` through every step. `asker` answers what a policy or the
    /// tool asks of the user; `trace` is the context the call's span is a child of.
    pub async fn call(
        &self,
        caller: &Caller,
        asker: Option<Arc<dyn Asker>>,
        trace: &opentelemetry::Context,
        request: Request,
    ) -> Passed {
        let span = self
            .telemetry
            .tool_call(trace, &request.server, &request.tool);
        let started = std::time::Instant::now();
        let (server, tool) = (request.server.clone(), request.tool.clone());
        let mut outcome = CallOutcome::Failed;
        let mut denied = false;
        let mut failure = None;
        let mut fresh = None;
        let watched = Watched {
            trace: span.context(),
            outcome: &mut outcome,
            denied: &mut denied,
            failure: &mut failure,
            fresh: &mut fresh,
        };
        let (value, result) = match self.send(caller, asker, request, watched).await {
            Ok(sent) => sent,
            // An error may quote a server's URL or what it answered: redacted before the
            // program, the client or the audit log sees it.
            Err(error) => (Err(crate::redact::redact(&error).into_owned()), None),
        };
        self.telemetry.call_done(span, (&server, &tool), outcome);
        if let Some(audit) = &self.audit {
            let end = match &value {
                Ok(_) => CallEnd::Ok,
                Err(error) if denied => CallEnd::Denied(error),
                Err(error) => CallEnd::Failed(error),
            };
            audit.tool_call(
                &caller.session,
                &caller.execution,
                &server,
                &tool,
                started.elapsed(),
                end,
            );
        }
        Passed {
            fresh: fresh.filter(|_| value.is_ok()),
            value,
            result,
            failure,
        }
    }

    /// The verdict, the Hub's call, the tokens and the inferred shape: the steps that may end
    /// the call early (`Err`: it was denied or failed).
    async fn send(
        &self,
        caller: &Caller,
        asker: Option<Arc<dyn Asker>>,
        request: Request,
        watched: Watched<'_>,
    ) -> Result<(Result<Value, String>, Option<CallToolResult>), String> {
        let Request {
            server,
            tool,
            arguments,
            position,
            timeout,
            time_left,
            reads_resource,
            keep_result,
            notices,
            pass_through,
        } = request;
        // `./state` is the host's own: no server to ask for a spec, no pin.
        let keeps = server == kept::SERVER;
        let spec = if reads_resource || keeps {
            None
        } else {
            match self.hub.tool(&server, &tool).await {
                Ok(spec) => Some(spec),
                Err(error) => {
                    let why = error.to_string();
                    if keep_result {
                        *watched.failure = Some(error);
                    }
                    return Err(why);
                }
            }
        };
        // A changed definition reaches nothing before the user approves it (`pin = "ask"`).
        let spec = match spec {
            Some(spec) => {
                let settled = self
                    .pin_asks
                    .settle(
                        &self.hub,
                        asker.as_deref(),
                        (&caller.execution, &server, &tool),
                        &arguments,
                    )
                    .await;
                match settled {
                    Ok(approved) => Some(approved.unwrap_or(spec)),
                    Err(refused) => {
                        *watched.outcome = CallOutcome::Denied;
                        *watched.denied = true;
                        return Err(refused);
                    }
                }
            }
            None => None,
        };
        // A program is the model's: an MCP App's own tool is not for it (a direct call is the
        // host's, whose app may call it).
        if !keep_result && spec.as_ref().is_some_and(crate::hub::is_app_only) {
            return Err(format!(
                "`{tool}` of server `{server}` is for its MCP App only (`_meta.ui.visibility` \
                 has no \"model\"); programs cannot call it"
            ));
        }
        let judged = caller
            .judges
            .iter()
            .any(|judge| judge.judged.covers(&server));
        let granted = if judged {
            // A keep shows as a write (of the session's store only), a recall as a read.
            let annotations = match keeps {
                true => Some(Cow::Owned(kept::annotations(&tool))),
                false => spec
                    .as_ref()
                    .and_then(|spec| spec.annotations.as_ref())
                    .map(|a| Cow::Owned(serde_json::to_value(a).unwrap_or(Value::Null))),
            };
            let asked = wire::Call {
                server: Cow::Borrowed(&server),
                tool: Cow::Borrowed(&tool),
                arguments: Cow::Borrowed(&arguments),
                annotations,
                context: wire::CallContext {
                    session: Cow::Borrowed(&caller.session),
                    execution: Cow::Borrowed(&caller.execution),
                    calls: position.calls,
                    calls_to_server: position.calls_to_server,
                    calls_to_tool: position.calls_to_tool,
                    pin: match reads_resource || keeps {
                        true => wire::PinState::Unpinned,
                        false => self.hub.pins().state(&server, &tool),
                    },
                },
            };
            crate::policy::check_call(&caller.judges, &asked, time_left, asker.as_deref())
                .await
                .map_err(|refusal| {
                    // Telemetry counts a policy that could not judge as a denial too.
                    *watched.outcome = CallOutcome::Denied;
                    *watched.denied = matches!(refusal, Refusal::Denied(_));
                    refusal.to_string()
                })?
        } else {
            None
        };
        if keeps {
            let value = self
                .kept
                .call(&caller.keeps, &tool, &arguments)
                .map_err(|error| error.to_string())?;
            *watched.outcome = CallOutcome::Ok;
            return Ok((Ok(value), None));
        }
        if reads_resource {
            let (read, fresh) = self
                .read_resource((&caller.session, &caller.cached), &server, &arguments)
                .await?;
            *watched.outcome = CallOutcome::Ok;
            // A policy judges each call as it comes, so a read it judges is asked for each time.
            if !judged {
                *watched.fresh = fresh;
            }
            return Ok((Ok(read), None));
        }
        // A result `[servers.<name>.cache]` keeps answers the same call while it is fresh.
        let cached = spec
            .as_ref()
            .filter(|spec| self.hub.keeps_results(&server, spec));
        let kept = cached.and_then(|spec| {
            self.hub
                .kept_result(&server, spec, &arguments, &caller.session)
        });
        let answer = match kept {
            Some(result) => {
                caller
                    .cached
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                self.telemetry.cache_hit(&server, "tool");
                Ok(result)
            }
            None => {
                let options = CallOptions {
                    session: Some(caller.session.clone()),
                    timeout: Some(granted.unwrap_or(timeout)),
                    asker,
                    notices,
                    pass_through,
                };
                let sent = cached.map(|spec| (spec.clone(), arguments.clone()));
                // The span's context is current while the Hub sends: its `traceparent` goes
                // downstream.
                let answer = self
                    .hub
                    .call(&server, &tool, arguments, options)
                    .with_context(watched.trace)
                    .await;
                if let (Ok(result), Some((spec, arguments))) = (&answer, &sent) {
                    self.hub
                        .keep_result(&server, spec, arguments, &caller.session, result);
                }
                answer
            }
        };
        *watched.outcome = call_outcome(&answer);
        let mut result = match answer {
            Ok(result) => result,
            Err(error) => {
                let why = error.to_string();
                if keep_result {
                    *watched.failure = Some(error);
                }
                return Err(why);
            }
        };
        // Embedded resources and links carry the URIs a client reads, for a program (which may
        // read or return them) and a direct call's client alike.
        self.hub.uris().in_result(&server, &mut result);
        caller.tokens.add(&server, &result);
        let (value, result) = if keep_result {
            let value = map_result(&server, &tool, result.clone());
            (value, Some(result))
        } else {
            (map_result(&server, &tool, result), None)
        };
        if let (Some(inferred), Some(spec), Ok(value)) = (&self.inferred, &spec, &value) {
            inferred.record(&server, spec, value);
        }
        Ok((
            value.map_err(|error| crate::redact::redact(&error).into_owned()),
            result,
        ))
    }

    /// Reads a resource for a program: `arguments.uri` is a URI a client reads (see
    /// [`crate::hub::Uris`]), of the call's server.
    /// The program gets the contents as the client would (`uri`, `mimeType`, `text` or `blob`),
    /// and how long its server said they stay fresh (`ttlMs`, what is left of it for a read
    /// kept).
    async fn read_resource(
        &self,
        (session, cached): (&str, &std::sync::atomic::AtomicU32),
        server: &str,
        arguments: &Value,
    ) -> Result<(Value, Option<Duration>), String> {
        let uri = arguments
            .get("uri")
            .and_then(Value::as_str)
            .ok_or("readResource(uri): the URI must be a string")?;
        if !self.hub.uris().may_be_of(uri, server) {
            return Err(format!(
                "readResource: `{uri}` is not a resource URI of server `{server}` \
                 (runbyte://{server}/<uri>, or ui://{server}/<rest> for a UI resource)"
            ));
        }
        let (result, kept) = self
            .hub
            .read_resource_kept(uri, Some(session))
            .await
            .map_err(|e| e.to_string())?;
        if kept {
            cached.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            self.telemetry.cache_hit(server, "resource");
        }
        let fresh = result
            .ttl_ms
            .filter(|ttl| *ttl > 0)
            .map(Duration::from_millis);
        Ok((
            serde_json::to_value(result.contents).unwrap_or(Value::Null),
            fresh,
        ))
    }
}

/// What one call's steps tell its span: the trace to send under, and how the call ended.
struct Watched<'a> {
    trace: opentelemetry::Context,
    outcome: &'a mut CallOutcome,
    /// Whether a policy's verdict refused the call (the audit log's `denied`).
    denied: &'a mut bool,
    /// The Hub's error, kept for a caller that wants it as it came.
    failure: &'a mut Option<CallError>,
    /// How long the answer may be given again ([`Passed::fresh`]).
    fresh: &'a mut Option<Duration>,
}

/// How a call that reached the Hub ended.
fn call_outcome(answer: &Result<CallToolResult, CallError>) -> CallOutcome {
    match answer {
        Ok(result) if result.is_error == Some(true) => CallOutcome::ToolError,
        // A question passed on to the client: the call is answered on its retry.
        Ok(_) | Err(CallError::Asked { .. }) => CallOutcome::Ok,
        Err(CallError::Timeout { .. }) => CallOutcome::Timeout,
        Err(_) => CallOutcome::Failed,
    }
}
