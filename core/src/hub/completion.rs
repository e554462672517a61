//! `completion/complete` passed on to the server whose prompt or resource template is being
//! filled in: the client asks Runbyte with Runbyte's name for the prompt (or URI for the
//! template), and the server answers with its own values.

use rmcp::{
    model::{CompleteRequestParams, CompleteResult},
    service::ServiceError,
};

use super::{CatalogError, Hub};

impl Hub {
    /// Asks `server` to complete an argument of one of its prompts or resource templates
    /// (`params` names it as the server does), bounded by the server's call timeout. A server
    /// that does not declare `completions` is not asked: it has nothing to offer, and the
    /// answer is an empty completion, as the spec gives for no suggestions.
    pub async fn complete(
        &self,
        server: &str,
        params: CompleteRequestParams,
        session: Option<&str>,
    ) -> Result<CompleteResult, CatalogError> {
        let (connection, within) = self.answering(server, session).await?;
        let offers = connection
            .service
            .peer()
            .peer_info()
            .is_some_and(|info| info.capabilities.completions.is_some());
        if !offers {
            return Ok(CompleteResult::default());
        }
        let failed = |why: String| CatalogError::Failed {
            server: server.to_owned(),
            why,
        };
        let argument = params.argument.name.clone();
        match tokio::time::timeout(within, connection.service.peer().complete(params)).await {
            Ok(Ok(result)) => Ok(result),
            Ok(Err(ServiceError::McpError(error))) => Err(failed(format!(
                "completing `{argument}` failed: {} (JSON-RPC error {})",
                error.message, error.code.0
            ))),
            Ok(Err(error)) => Err(failed(format!("completing `{argument}` failed: {error}"))),
            Err(_) => Err(failed(format!(
                "did not answer completing `{argument}` within {} ms",
                within.as_millis()
            ))),
        }
    }
}
