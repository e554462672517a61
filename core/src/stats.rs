//! `runbyte stats`: totals read back from the audit log (JSON lines, see [`crate::audit`]):
//! executions, tool calls, and the tokens executions returned against the tokens the tool
//! results they read would have cost through direct calls, per server.

use std::{collections::BTreeMap, io::BufRead, path::Path};

use serde_json::Value;

use crate::tokens::Count;

/// One server's totals.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct ServerStats {
    pub calls: u64,
    pub failed: u64,
    /// The tokens of its results that programs read.
    pub consumed: Count,
}

/// The audit log's totals.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Stats {
    pub executions: u64,
    pub failed_executions: u64,
    pub calls: u64,
    pub failed_calls: u64,
    /// Executions whose tokens were counted (older logs have none).
    pub counted: u64,
    pub returned: Count,
    pub consumed: Count,
    pub servers: BTreeMap<String, ServerStats>,
    /// Lines that are not JSON objects of a known event (skipped).
    pub skipped: u64,
    /// The encodings the counts were made in.
    pub encodings: Vec<String>,
}

impl Stats {
    /// The totals of the audit log at `path`, read a line at a time.
    pub fn read(path: &Path) -> std::io::Result<Stats> {
        let file = std::fs::File::open(path)?;
        let mut stats = Stats::default();
        for line in std::io::BufReader::new(file).lines() {
            stats.add_line(&line?);
        }
        Ok(stats)
    }

    fn add_line(&mut self, line: &str) {
        if line.trim().is_empty() {
            return;
        }
        let Ok(record) = serde_json::from_str::<Value>(line) else {
            self.skipped += 1;
            return;
        };
        match record.get("event").and_then(Value::as_str) {
            Some("execution") => {
                self.executions += 1;
                if record["outcome"] != "ok" {
                    self.failed_executions += 1;
                }
                let tokens = &record["tokens"];
                if tokens.is_object() {
                    self.counted += 1;
                    self.returned += count(&tokens["returned"]);
                    self.consumed += count(&tokens["consumed"]);
                    if let Some(encoding) = tokens["encoding"].as_str()
                        && !self.encodings.iter().any(|e| e == encoding)
                    {
                        self.encodings.push(encoding.to_owned());
                    }
                    if let Some(by_server) = tokens["consumed_by_server"].as_object() {
                        for (server, consumed) in by_server {
                            self.servers.entry(server.clone()).or_default().consumed +=
                                count(consumed);
                        }
                    }
                }
            }
            Some("tool_call") => {
                self.calls += 1;
                let server = record["server"].as_str().unwrap_or("?").to_owned();
                let entry = self.servers.entry(server).or_default();
                entry.calls += 1;
                if record["outcome"] != "ok" {
                    self.failed_calls += 1;
                    entry.failed += 1;
                }
            }
            // A tool pin held, warned, approved or reset: no execution, no call.
            Some("pin") => {}
            _ => self.skipped += 1,
        }
    }

    /// The totals as the command prints them.
    pub fn render(&self, path: &Path) -> String {
        let encodings = if self.encodings.is_empty() {
            "none counted".to_owned()
        } else {
            self.encodings.join(", ")
        };
        let mut out = format!(
            "audit log: {}\nexecutions: {} ({} failed)\ntool calls: {} ({} failed)\n",
            path.display(),
            self.executions,
            self.failed_executions,
            self.calls,
            self.failed_calls
        );
        let saved = self.consumed.tokens as i128 - self.returned.tokens as i128;
        let share = if self.consumed.tokens > 0 {
            format!(
                " ({:.1}% of the tool results)",
                saved as f64 * 100.0 / self.consumed.tokens as f64
            )
        } else {
            String::new()
        };
        out.push_str(&format!(
            "tokens ({encodings}), over {} counted executions:\n  returned to the model: {}\n  \
             in the tool results programs read: {}\n  saved: {saved}{share}\n",
            self.counted, self.returned, self.consumed
        ));
        if !self.servers.is_empty() {
            let width = self
                .servers
                .keys()
                .map(String::len)
                .max()
                .unwrap_or(6)
                .max(6);
            out.push_str(&format!(
                "{:<width$}  {:>8}  {:>8}  {:>14}\n",
                "server", "calls", "failed", "result tokens"
            ));
            for (server, stats) in &self.servers {
                out.push_str(&format!(
                    "{:<width$}  {:>8}  {:>8}  {:>14}\n",
                    server,
                    stats.calls,
                    stats.failed,
                    stats.consumed.to_string()
                ));
            }
        }
        if self.skipped > 0 {
            out.push_str(&format!("({} lines skipped: not an event)\n", self.skipped));
        }
        out
    }
}

fn count(value: &Value) -> Count {
    serde_json::from_value(value.clone()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn totals_add_up_per_server_and_skip_what_is_not_an_event() {
        let mut stats = Stats::default();
        for line in [
            r#"{"event":"tool_call","server":"demo","outcome":"ok"}"#,
            r#"{"event":"tool_call","server":"demo","outcome":"error"}"#,
            r#"{"event":"execution","outcome":"ok","tokens":{"encoding":"o200k_base","returned":{"tokens":5},"consumed":{"tokens":100},"consumed_by_server":{"demo":{"tokens":100}}}}"#,
            r#"{"event":"execution","outcome":"error"}"#,
            "not json",
            "",
        ] {
            stats.add_line(line);
        }
        assert_eq!((stats.executions, stats.failed_executions), (2, 1));
        assert_eq!((stats.calls, stats.failed_calls, stats.counted), (2, 1, 1));
        assert_eq!(stats.servers["demo"].consumed.tokens, 100);
        assert_eq!(stats.skipped, 1);
        let text = stats.render(Path::new("audit.jsonl"));
        assert!(
            text.contains("saved: 95 (95.0% of the tool results)"),
            "{text}"
        );
        assert!(text.contains("tokens (o200k_base)"), "{text}");
    }
}
