//! The audit log: one JSON line per execution and per tool call, with who (session), what
//! (server, tool), how long and how it ended. Configured secrets (`crate::redact`: header and
//! environment values, URL userinfo and query values, token files) and those the process learns
//! later (OAuth tokens, as it obtains them) are redacted from each line before it is written, in
//! their raw and their JSON-escaped forms.

use std::{
    fs::{File, OpenOptions},
    io::Write,
    path::Path,
    sync::{Arc, Mutex},
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use serde_json::{Value, json};

use crate::{config::Config, redact::Secrets};

/// A shared audit log. Cheap to clone.
#[derive(Clone)]
pub struct AuditLog {
    inner: Arc<Inner>,
}

struct Inner {
    file: Mutex<File>,
    secrets: Secrets,
}

/// An execution's tokens as the audit log records them (`runbyte stats` reads them back).
pub struct ExecutionTokens {
    /// What its answer cost and what the tool results it read cost.
    pub accounting: crate::tokens::Accounting,
    /// The tool results' tokens by server.
    pub by_server: std::collections::BTreeMap<String, crate::tokens::Count>,
}

/// How a call in the audit log ended: its `outcome` and `error`.
#[derive(Debug, Clone, Copy)]
pub enum CallEnd<'a> {
    /// It gave a result.
    Ok,
    /// A policy refused it; the message says which and why.
    Denied(&'a str),
    /// It failed otherwise (the tool's error, the server, a policy that could not judge).
    Failed(&'a str),
}

impl AuditLog {
    /// Opens (appending, creating) the configured audit file, if there is one.
    pub fn from_config(config: &Config) -> Result<Option<AuditLog>, String> {
        let Some(path) = &config.server.audit_log else {
            return Ok(None);
        };
        let secrets = Secrets::from_config(config);
        Self::open(path, secrets).map(Some)
    }

    /// Opens `path` for appending, redacting `secrets` from every line. A new file is created
    /// owner-only (0600): it holds session ids and error texts. An existing file that others
    /// may read is used, with a warning.
    pub fn open(path: &Path, secrets: Secrets) -> Result<AuditLog, String> {
        let mut options = OpenOptions::new();
        options.create(true).append(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(0o600);
        }
        let file = options
            .open(path)
            .map_err(|e| format!("cannot open the audit log {}: {e}", path.display()))?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = file
                .metadata()
                .map(|m| m.permissions().mode() & 0o777)
                .unwrap_or(0);
            if mode & 0o077 != 0 {
                tracing::warn!(
                    "the audit log {} is open to other users (mode {mode:04o}); `chmod 600` it",
                    path.display()
                );
            }
        }
        Ok(AuditLog {
            inner: Arc::new(Inner {
                file: Mutex::new(file),
                secrets,
            }),
        })
    }

    fn write(&self, mut record: Value) {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        record["time"] = json!(format!("{}.{:03}", now.as_secs(), now.subsec_millis()));
        // The configured secrets, then those learnt since (OAuth tokens, as they are obtained).
        let configured = self.inner.secrets.redact(&record.to_string()).into_owned();
        let mut line = crate::redact::redact(&configured).into_owned();
        line.push('\n');
        let Ok(mut file) = self.inner.file.lock() else {
            return;
        };
        if let Err(error) = file.write_all(line.as_bytes()) {
            tracing::warn!("cannot write the audit log: {error}");
        }
    }

    /// One tool call from an execution (or a client's direct call), and how it ended.
    pub fn tool_call(
        &self,
        session: &str,
        execution: &str,
        server: &str,
        tool: &str,
        duration: Duration,
        end: CallEnd<'_>,
    ) {
        let (outcome, error) = match end {
            CallEnd::Ok => ("ok", None),
            CallEnd::Denied(message) => ("denied", Some(message)),
            CallEnd::Failed(message) => ("error", Some(message)),
        };
        self.write(json!({
            "event": "tool_call",
            "session": session,
            "execution": execution,
            "server": server,
            "tool": tool,
            "duration_ms": duration.as_millis() as u64,
            "outcome": outcome,
            "error": error,
        }));
    }

    /// A tool definition's pin (see [`crate::pins`]): `held`, `warned` (served changed),
    /// `approved` or `reset`, and what changed.
    pub fn pin(&self, server: &str, tool: &str, action: &str, change: &str) {
        self.pin_by(server, tool, action, change, None);
    }

    /// [`AuditLog::pin`], with who did it (`by`: an approval's approver, see
    /// [`crate::pins::Pins::approve_kept`]).
    pub fn pin_by(
        &self,
        server: &str,
        tool: &str,
        action: &str,
        change: &str,
        by: Option<&serde_json::Value>,
    ) {
        let mut record = json!({
            "event": "pin",
            "server": server,
            "tool": tool,
            "action": action,
            "change": change,
        });
        if let Some(by) = by {
            record["by"] = by.clone();
        }
        self.write(record);
    }

    /// One execution, with its tokens when they were counted.
    pub fn execution(
        &self,
        session: &str,
        execution: &str,
        duration: Duration,
        calls: u32,
        error: Option<&str>,
        tokens: Option<&ExecutionTokens>,
    ) {
        let mut record = json!({
            "event": "execution",
            "session": session,
            "execution": execution,
            "duration_ms": duration.as_millis() as u64,
            "tool_calls": calls,
            "outcome": if error.is_some() { "error" } else { "ok" },
            "error": error,
        });
        if let Some(tokens) = tokens {
            record["tokens"] = json!({
                "encoding": crate::tokens::ENCODING,
                "returned": tokens.accounting.returned,
                "consumed": tokens.accounting.consumed,
                "consumed_by_server": tokens.by_server,
            });
        }
        self.write(record);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn lines_are_json_and_secrets_are_redacted() {
        let path = std::env::temp_dir().join(format!("runbyte-audit-{}.jsonl", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let secrets = Secrets::new([
            "Bearer tok-123456".into(),
            "tok-123456".into(),
            "q\"uo\\te".into(),
        ]);
        let log = AuditLog::open(&path, secrets).unwrap();
        let error = "HTTP 401 with Authorization: Bearer tok-123456 and q\"uo\\te".to_owned();
        log.tool_call(
            "s1",
            "x1",
            "gh",
            "list",
            Duration::from_millis(12),
            CallEnd::Failed(&error),
        );
        log.execution("s1", "x1", Duration::from_millis(40), 1, None, None);
        log.tool_call(
            "s1",
            "x2",
            "gh",
            "delete",
            Duration::from_millis(1),
            CallEnd::Denied("gh/delete was denied by policy `readonly`: it writes"),
        );
        log.tool_call("s1", "x2", "gh", "list", Duration::ZERO, CallEnd::Ok);
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(!text.contains("tok-123456"), "{text}");
        // A secret holding `"` or `\` is caught as it reads inside the JSON line.
        assert!(!text.contains("uo"), "{text}");
        let lines: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines[0]["event"], "tool_call");
        assert_eq!(lines[0]["outcome"], "error");
        assert_eq!(
            lines[0]["error"],
            "HTTP 401 with Authorization: [REDACTED] and [REDACTED]"
        );
        assert_eq!(lines[1]["tool_calls"], 1);
        assert_eq!(lines[2]["outcome"], "denied");
        assert_eq!(
            lines[2]["error"],
            "gh/delete was denied by policy `readonly`: it writes"
        );
        assert_eq!(lines[3]["outcome"], "ok");
        assert_eq!(lines[3]["error"], Value::Null);
        let _ = std::fs::remove_file(&path);
    }

    #[cfg(unix)]
    #[test]
    fn a_new_log_is_owner_only_and_an_open_one_is_kept() {
        use std::os::unix::fs::PermissionsExt;
        let path = std::env::temp_dir().join(format!("runbyte-audit-mode-{}", std::process::id()));
        let _ = std::fs::remove_file(&path);
        let mode = |path: &Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
        AuditLog::open(&path, Secrets::default()).unwrap();
        assert_eq!(mode(&path), 0o600);
        // An existing log others can read is still used (with a warning), and left as it is.
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let log = AuditLog::open(&path, Secrets::default()).unwrap();
        log.execution("s", "x", Duration::from_millis(1), 0, None, None);
        assert_eq!(mode(&path), 0o644);
        assert!(std::fs::read_to_string(&path).unwrap().contains("\"s\""));
        let _ = std::fs::remove_file(&path);
    }
}
