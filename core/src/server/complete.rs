//! The one place every answer to a client passes: [`Answering`] wraps a [`Session`] so that
//! each result sent to a 2026-07-28 client carries `resultType`, whichever path made it (a
//! legacy server's result passed on as it is, a list, a prompt, an error result).

use std::borrow::Cow;

use rmcp::{
    RoleServer, Service,
    model::{ClientRequest, ErrorData, ProtocolVersion, ResultType, ServerConfig, ServerResult},
    service::{NotificationContext, RequestContext, ServiceRole},
};

use super::Session;

/// A [`Session`] as served: its answers, completed for the revision the request speaks.
#[derive(Clone)]
pub struct Answering(pub Session);

/// Whether a request speaks 2026-07-28 or later (ISO dates compare as the calendar does).
fn is_2026_07_28_or_later(context: &RequestContext<RoleServer>) -> bool {
    context
        .protocol_version()
        .is_some_and(|v| v.as_str() >= ProtocolVersion::V_2026_07_28.as_str())
}

/// Gives a result that lacks `resultType` the `"complete"` 2026-07-28 requires (a legacy
/// server's result has none; rmcp leaves such a result as the handler made it). A result whose
/// type says something else (`input_required`) is left as it is.
pub(super) fn complete(result: &mut ServerResult) {
    let result_type = match result {
        ServerResult::CompleteResult(r) => &mut r.result_type,
        ServerResult::GetPromptResult(r) => &mut r.result_type,
        ServerResult::ListPromptsResult(r) => &mut r.result_type,
        ServerResult::ListResourcesResult(r) => &mut r.result_type,
        ServerResult::ListResourceTemplatesResult(r) => &mut r.result_type,
        ServerResult::ReadResourceResult(r) => &mut r.result_type,
        ServerResult::ListToolsResult(r) => &mut r.result_type,
        ServerResult::CallToolResult(r) => &mut r.result_type,
        ServerResult::ListSkillsResult(r) => &mut r.result_type,
        ServerResult::GetSkillResult(r) => &mut r.result_type,
        _ => return,
    };
    result_type.get_or_insert(ResultType::COMPLETE);
}

impl Service<RoleServer> for Answering {
    async fn handle_request(
        &self,
        request: ClientRequest,
        context: RequestContext<RoleServer>,
    ) -> Result<ServerResult, ErrorData> {
        let modern = is_2026_07_28_or_later(&context);
        let mut result =
            <Session as Service<RoleServer>>::handle_request(&self.0, request, context).await?;
        if modern {
            complete(&mut result);
        }
        Ok(result)
    }

    async fn handle_notification(
        &self,
        notification: <RoleServer as ServiceRole>::PeerNot,
        context: NotificationContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        <Session as Service<RoleServer>>::handle_notification(&self.0, notification, context).await
    }

    fn get_info(&self) -> ServerConfig {
        <Session as Service<RoleServer>>::get_info(&self.0)
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        <Session as Service<RoleServer>>::supported_protocol_versions(&self.0)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use rmcp::model::{CallToolResult, ContentBlock, InputRequiredResult};

    use super::*;

    #[test]
    fn a_result_without_a_type_is_completed_and_another_type_is_kept() {
        // As a legacy server's result is read: no `resultType`.
        let legacy: CallToolResult = serde_json::from_value(
            serde_json::json!({"content": [{"type": "text", "text": "hi"}]}),
        )
        .unwrap();
        assert_eq!(legacy.result_type, None);
        let mut result = ServerResult::CallToolResult(legacy);
        complete(&mut result);
        let wire = serde_json::to_value(&result).unwrap();
        assert_eq!(wire["resultType"], "complete", "{wire}");

        let mut made =
            ServerResult::CallToolResult(CallToolResult::success(vec![ContentBlock::text("x")]));
        complete(&mut made);
        assert_eq!(
            serde_json::to_value(&made).unwrap()["resultType"],
            "complete"
        );

        let asking: InputRequiredResult = serde_json::from_value(serde_json::json!({
            "resultType": "input_required",
            "inputRequests": {},
            "requestState": "s",
        }))
        .unwrap();
        let mut asking = ServerResult::InputRequiredResult(asking);
        complete(&mut asking);
        assert_eq!(
            serde_json::to_value(&asking).unwrap()["resultType"],
            "input_required"
        );
    }
}
