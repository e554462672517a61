//! The metrics `/metrics` shows, in the OpenMetrics text format (which Prometheus scrapes):
//!
//! | metric | labels |
//! |---|---|
//! | `runbyte_executions_total` | `outcome`: `ok`, an error kind (`runtime`, `timeout`, ...) or `not_run` |
//! | `runbyte_execution_duration_seconds` (histogram) | — |
//! | `runbyte_tool_calls_total` | `server`, `tool`, `outcome` (`ok`, `tool_error`, `denied`, `timeout`, `failed`) |
//! | `runbyte_limit_hits_total` | `limit`: `timeout`, `memory`, `stack`, `size`, `queue`, `call-timeout` |
//! | `runbyte_cache_hits_total` | `server`, `kind` (`resource`): answers from what a server's caching hints let Runbyte keep |
//! | `runbyte_downstream_server_up` (gauge, read at scrape time) | `server`, `state` (`starting`, `ready`, `failed`) |
//!
//! Labels stay bounded: a server is a configured one (or `_unknown`: a program may name any);
//! a tool is one its server lists (else `_unknown`: a program may name any, and a made-up name
//! takes no label), one of the first [`MAX_TOOLS`] such names seen with a plain spelling (or
//! `_other`: downstream servers choose tool names).

use std::{
    collections::{BTreeSet, HashSet},
    sync::{Mutex, OnceLock},
    time::Duration,
};

use prometheus_client::{
    encoding::EncodeLabelSet,
    metrics::{counter::Counter, family::Family, gauge::Gauge, histogram::Histogram},
    registry::Registry,
};

use super::CallOutcome;

/// The most distinct (server, tool) pairs labelled by name; later ones count as `_other`.
pub const MAX_TOOLS: usize = 1000;
/// The longest tool name used as a label.
const MAX_TOOL_NAME: usize = 128;

/// The content type of [`Metrics::render`]'s text.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CallLabels {
    server: String,
    tool: String,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LimitLabels {
    limit: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CacheLabels {
    server: String,
    kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ServerLabels {
    server: String,
    state: &'static str,
}

/// The gateway's metrics. Recording is a few atomic adds (and a lock for a tool call's labels).
pub struct Metrics {
    registry: Registry,
    executions: Family<OutcomeLabels, Counter>,
    duration: Histogram,
    calls: Family<CallLabels, Counter>,
    limits: Family<LimitLabels, Counter>,
    cache_hits: Family<CacheLabels, Counter>,
    servers: Family<ServerLabels, Gauge>,
    /// The configured servers: the only server labels.
    known: BTreeSet<String>,
    /// The (server, tool) pairs labelled by name so far.
    tools: Mutex<HashSet<(String, String)>>,
    /// Whether a server lists a tool (see [`Metrics::only_listed`]).
    listed: OnceLock<Box<Lister>>,
}

/// Whether a server lists a tool.
type Lister = dyn Fn(&str, &str) -> bool + Send + Sync;

impl Metrics {
    /// Empty metrics for a gateway with these configured servers.
    pub fn new(known: BTreeSet<String>) -> Metrics {
        let mut registry = Registry::default();
        let executions = Family::<OutcomeLabels, Counter>::default();
        registry.register(
            "runbyte_executions",
            "Executions of execute_code, by outcome",
            executions.clone(),
        );
        // From 5 ms to about 82 s: a trivial program to one near the longest time limits.
        let duration = Histogram::new(prometheus_client::metrics::histogram::exponential_buckets(
            0.005, 2.0, 15,
        ));
        registry.register(
            "runbyte_execution_duration_seconds",
            "Wall-clock time of executions, waiting included",
            duration.clone(),
        );
        let calls = Family::<CallLabels, Counter>::default();
        registry.register(
            "runbyte_tool_calls",
            "Tool calls to downstream servers (from programs and direct), by outcome",
            calls.clone(),
        );
        let limits = Family::<LimitLabels, Counter>::default();
        registry.register(
            "runbyte_limit_hits",
            "Executions and calls stopped by a limit, by limit",
            limits.clone(),
        );
        let cache_hits = Family::<CacheLabels, Counter>::default();
        registry.register(
            "runbyte_cache_hits",
            "Answers given from what the servers' caching hints (ttlMs, cacheScope) let Runbyte keep",
            cache_hits.clone(),
        );
        let servers = Family::<ServerLabels, Gauge>::default();
        registry.register(
            "runbyte_downstream_server_up",
            "1 for each downstream server's current state",
            servers.clone(),
        );
        Metrics {
            registry,
            executions,
            duration,
            calls,
            limits,
            cache_hits,
            servers,
            known,
            tools: Mutex::default(),
            listed: OnceLock::new(),
        }
    }

    /// From now on a tool is labelled by name only when `listed(server, tool)` says its server
    /// lists it; other names count as `_unknown` and take no label slot.
    pub fn only_listed(&self, listed: impl Fn(&str, &str) -> bool + Send + Sync + 'static) {
        let _ = self.listed.set(Box::new(listed));
    }

    pub(super) fn execution(
        &self,
        outcome: &'static str,
        limit: Option<&'static str>,
        took: Duration,
    ) {
        self.executions
            .get_or_create(&OutcomeLabels { outcome })
            .inc();
        self.duration.observe(took.as_secs_f64());
        if let Some(limit) = limit {
            self.limits.get_or_create(&LimitLabels { limit }).inc();
        }
    }

    pub(super) fn call(&self, server: &str, tool: &str, outcome: CallOutcome) {
        let server = if self.known.contains(server) {
            server
        } else {
            "_unknown"
        };
        let tool = self.tool_label(server, tool);
        self.calls
            .get_or_create(&CallLabels {
                server: server.to_owned(),
                tool,
                outcome: outcome.as_str(),
            })
            .inc();
        if outcome == CallOutcome::Timeout {
            self.limits
                .get_or_create(&LimitLabels {
                    limit: "call-timeout",
                })
                .inc();
        }
    }

    /// `tool` as a label: its name while its server lists it, fewer than [`MAX_TOOLS`] have
    /// been seen and it is spelled plainly; `_unknown` for a name its server does not list (a
    /// program may make one up); else `_other`.
    fn tool_label(&self, server: &str, tool: &str) -> String {
        let plain = !tool.is_empty()
            && tool.len() <= MAX_TOOL_NAME
            && tool
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b'/'));
        if server == "_unknown" || !plain {
            return "_other".to_owned();
        }
        let key = (server.to_owned(), tool.to_owned());
        if self
            .tools
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(&key)
        {
            return key.1;
        }
        // Asked outside the lock: the Hub takes its own.
        if self
            .listed
            .get()
            .is_some_and(|listed| !listed(server, tool))
        {
            return "_unknown".to_owned();
        }
        let mut tools = self.tools.lock().unwrap_or_else(|p| p.into_inner());
        if tools.contains(&key) || tools.len() < MAX_TOOLS && tools.insert(key) {
            tool.to_owned()
        } else {
            "_other".to_owned()
        }
    }

    /// `hits` answers from the cache of `server`'s results (`kind`: `resource`, `tool`).
    pub(super) fn cache_hits(&self, server: &str, kind: &'static str, hits: u64) {
        let server = if self.known.contains(server) {
            server
        } else {
            "_unknown"
        };
        self.cache_hits
            .get_or_create(&CacheLabels {
                server: server.to_owned(),
                kind,
            })
            .inc_by(hits);
    }

    /// The metrics as OpenMetrics text, with the servers' states (name, `starting` | `ready` |
    /// `failed`) as they are now.
    pub fn render<'a>(&self, servers: impl IntoIterator<Item = (&'a str, &'static str)>) -> String {
        self.servers.clear();
        for (server, state) in servers {
            self.servers
                .get_or_create(&ServerLabels {
                    server: server.to_owned(),
                    state,
                })
                .set(1);
        }
        let mut text = String::new();
        if let Err(error) = prometheus_client::encoding::text::encode(&mut text, &self.registry) {
            // Writing to a String does not fail; should an encoder ever, say so in the text.
            return format!("# the metrics could not be encoded: {error}\n# EOF\n");
        }
        text
    }
}
