//! `runbyte serve` over stdio, driven by a real MCP client process (this test, through rmcp's
//! child-process transport).

use rmcp::{ServiceExt, transport::TokioChildProcess};
use runbyte_tests::{TempDir, config_with, runbyte};
use tokio::process::Command;

#[tokio::test]
async fn serve_over_stdio_answers_initialize_and_ping() {
    let dir = TempDir::new("serve-stdio");
    dir.write("runbyte.toml", &config_with(""));
    let mut command = Command::new(runbyte());
    command
        .arg("serve")
        .current_dir(dir.path())
        .env("RUNBYTE_LOG", "warn");
    let client = ().serve(TokioChildProcess::new(command).unwrap()).await.unwrap();
    let info = client.peer().peer_info().unwrap();
    assert_eq!(info.server_info.as_ref().unwrap().name, "runbyte");
    assert!(
        info.instructions
            .as_deref()
            .unwrap_or_default()
            .contains("execute_code")
    );
    client
        .peer()
        .send_request(rmcp::model::ClientRequest::PingRequest(Default::default()))
        .await
        .unwrap();
    client.cancel().await.unwrap();
}
