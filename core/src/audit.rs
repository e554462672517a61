//! The audit log: one JSON line per execution and per tool call, with who (session), what
//! (server, tool), how long and how it ended. Configured secrets (every header and environment
//! value of every server) are redacted from each line before it is written.

use std::{
    fs::{File, OpenOptions},
    io::Write,
    path::Path,
    sync::{Arc, Mutex},
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use serde_json::{Value, json};

use crate::config::Config;

/// Shortest value treated as a secret: shorter ones would redact ordinary words.
const MIN_SECRET_LEN: usize = 6;

/// A shared audit log. Cheap to clone.
#[derive(Clone)]
pub struct AuditLog {
    inner: Arc<Inner>,
}

struct Inner {
    file: Mutex<File>,
    secrets: Vec<String>,
}

impl AuditLog {
    /// Opens (appending, creating) the configured audit file, if there is one.
    pub fn from_config(config: &Config) -> Result<Option<AuditLog>, String> {
        let Some(path) = &config.server.audit_log else {
            return Ok(None);
        };
        let mut secrets: Vec<String> = config
            .servers
            .values()
            .flat_map(|server| server.headers.values().chain(server.env.values()))
            .flat_map(|value| {
                // `Bearer abc123` redacts the token as well as the whole value.
                let mut parts = vec![value.clone()];
                parts.extend(value.split_whitespace().map(str::to_owned));
                parts
            })
            .filter(|value| value.len() >= MIN_SECRET_LEN)
            .collect();
        secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        secrets.dedup();
        Self::open(path, secrets).map(Some)
    }

    /// Opens `path` for appending, redacting `secrets` from every line.
    pub fn open(path: &Path, secrets: Vec<String>) -> Result<AuditLog, String> {
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|e| format!("cannot open the audit log {}: {e}", path.display()))?;
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
        let mut line = record.to_string();
        for secret in &self.inner.secrets {
            if line.contains(secret.as_str()) {
                line = line.replace(secret.as_str(), "[REDACTED]");
            }
        }
        line.push('\n');
        let Ok(mut file) = self.inner.file.lock() else {
            return;
        };
        if let Err(error) = file.write_all(line.as_bytes()) {
            tracing::warn!("cannot write the audit log: {error}");
        }
    }

    /// One tool call from an execution.
    pub fn tool_call(
        &self,
        session: &str,
        execution: &str,
        server: &str,
        tool: &str,
        duration: Duration,
        error: Option<&String>,
    ) {
        let outcome = match error {
            None => "ok",
            Some(message) if message.contains("was denied by policy") => "denied",
            Some(_) => "error",
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

    /// One execution.
    pub fn execution(
        &self,
        session: &str,
        execution: &str,
        duration: Duration,
        calls: u32,
        error: Option<&str>,
    ) {
        self.write(json!({
            "event": "execution",
            "session": session,
            "execution": execution,
            "duration_ms": duration.as_millis() as u64,
            "tool_calls": calls,
            "outcome": if error.is_some() { "error" } else { "ok" },
            "error": error,
        }));
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
        let log =
            AuditLog::open(&path, vec!["Bearer tok-123456".into(), "tok-123456".into()]).unwrap();
        let error = "HTTP 401 with Authorization: Bearer tok-123456".to_owned();
        log.tool_call(
            "s1",
            "x1",
            "gh",
            "list",
            Duration::from_millis(12),
            Some(&error),
        );
        log.execution("s1", "x1", Duration::from_millis(40), 1, None);
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(!text.contains("tok-123456"), "{text}");
        let lines: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines[0]["event"], "tool_call");
        assert_eq!(lines[0]["outcome"], "error");
        assert_eq!(lines[0]["error"], "HTTP 401 with Authorization: [REDACTED]");
        assert_eq!(lines[1]["tool_calls"], 1);
        let _ = std::fs::remove_file(&path);
    }
}
