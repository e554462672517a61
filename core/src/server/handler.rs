//! The MCP server logic every listener serves: Runbyte's own tools.

use std::sync::Arc;

use rmcp::{
    ErrorData, RoleServer, ServerHandler,
    model::{DiscoverResult, Implementation, ServerCapabilities, ServerConfig},
    service::RequestContext,
};

use crate::runtime::Runtime;

/// How a client learns the workflow, in a few lines (kept short: every client loads it).
pub const INSTRUCTIONS: &str = "Runbyte turns the tools of many MCP servers into typed functions \
in a virtual filesystem. Explore with list_directory('/servers'), read a tool's module with \
read_file, or find tools with search_tools. Then call execute_code with a short TypeScript \
program that imports from './servers/<server>' and returns only what you need; intermediate \
data stays in the sandbox.";

/// One client session's server.
#[derive(Clone)]
pub struct Gateway {
    runtime: Arc<Runtime>,
    session: String,
}

impl Gateway {
    /// The server for one client session.
    pub fn new(runtime: Arc<Runtime>, session: String) -> Self {
        Gateway { runtime, session }
    }

    /// The runtime this session serves.
    pub fn runtime(&self) -> &Arc<Runtime> {
        &self.runtime
    }

    /// The session's id.
    pub fn session(&self) -> &str {
        &self.session
    }
}

impl ServerHandler for Gateway {
    // Logging is deprecated from 2026-07-28 (SEP-2577); the revisions Runbyte serves have it.
    #[allow(deprecated)]
    fn get_info(&self) -> ServerConfig {
        let mut info = ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_logging()
                .build(),
        );
        info.server_info = Implementation::new("runbyte", env!("CARGO_PKG_VERSION"));
        info.instructions = Some(INSTRUCTIONS.to_owned());
        info
    }

    /// Runbyte speaks the initialize handshake (protocol revisions up to 2025-11-25); a client
    /// that probes with `server/discover` gets "method not found" and falls back, as the spec
    /// intends.
    async fn discover(
        &self,
        _context: RequestContext<RoleServer>,
    ) -> Result<DiscoverResult, ErrorData> {
        Err(ErrorData::new(
            rmcp::model::ErrorCode::METHOD_NOT_FOUND,
            "server/discover",
            None,
        ))
    }
}
