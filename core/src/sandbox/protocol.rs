//! What the host and an engine say to each other. Over a worker's pipes each message is one line
//! of JSON; to an engine on a host thread the same values go through channels unserialized.
//!
//! ```text
//! worker → host   {"t":"ready","version":1}                       once, after start
//! host → worker   {"t":"run","program":{"source":"…"},"limits":{…},"determinism":{"seed":…},"generation":7}
//! worker → host   {"t":"started"}                                 transpiled: the program runs
//!                                                                  (sources over 16 KiB only)
//! worker → host   {"t":"load","id":1,"path":"/servers/demo/index.ts"}
//! host → worker   {"t":"module","id":1,"source":"export * from './echo';"}   (null: no such module)
//! worker → host   {"t":"paths","id":2}
//! host → worker   {"t":"path_list","id":2,"paths":["/servers/index.ts", …]}
//! worker → host   {"t":"call","id":3,"server":"demo","tool":"echo","arguments":{…}}
//!                  (recording: also "observed":{"clock":[…],"turns":[{"reply":1},{"timer":2}]})
//! host → worker   {"t":"reply","id":3,"ok":"{\"content\":[…]}"}   or   {"t":"reply","id":3,"err":"…"}
//!                  (a read that may be given again: also "fresh_ms":59000)
//! worker → host   {"t":"log","level":"log","text":"hello"}
//! worker → host   {"t":"dropped","bytes":123456}                  console bytes dropped so far
//! host → worker   {"t":"cancel"}
//! worker → host   {"t":"done","report":{…}}
//! host → worker   {"t":"transpile","id":4,"source":"…"}           for an engine on a host thread
//! worker → host   {"t":"transpiled","id":4,"result":{"Ok":{…}}}
//! ```
//!
//! A source over 16 KiB reaches the worker as source and is transpiled there, after admission
//! and within the execution's deadline and the worker's memory limit, so that a source that
//! makes SWC run away costs one worker, never the host; `started` tells the host that
//! transpiling is over. A smaller one arrives transpiled (`{"transpiled":{…}}`).
//!
//! A reply carries the tool's result as JSON text, parsed by QuickJS itself, so that no depth
//! limit of a JSON parser in between applies. The worker exits when its stdin closes.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{Determinism, ExecError, Observed, Transpiled};

/// Bumped whenever a message changes shape; a worker of another version is refused.
pub(crate) const PROTOCOL_VERSION: u32 = 4;

/// The limits an engine enforces itself (the bridge's limits are the host's).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct EngineLimits {
    /// The execution's time limit.
    pub timeout_ms: u64,
    /// Of it, what was spent before the engine started (transpiling): the engine's deadline is
    /// `timeout_ms - spent_ms` from its start.
    #[serde(default)]
    pub spent_ms: u64,
    pub memory_bytes: usize,
    pub stack_bytes: usize,
    pub max_output_bytes: usize,
    pub max_tool_calls: u32,
}

/// Native stack beyond the QuickJS stack limit, for the engine's own frames.
pub(crate) const ENGINE_STACK_MARGIN: usize = 16 << 20;

/// The memory a worker may use beyond the QuickJS heap and the stacks, above what it had when
/// it started: room for SWC to transpile the largest source accepted (1 MiB of ordinary
/// TypeScript takes about 100 MiB) and the module cache. Past it an allocation fails and the
/// worker dies; the host reports the execution as having exceeded the sandbox's memory, and
/// replaces the worker.
pub(crate) const TRANSPILE_MEMORY_BYTES: usize = 1 << 30;

impl EngineLimits {
    /// The native stack of the thread an engine runs on: the QuickJS stack limit plus
    /// [`ENGINE_STACK_MARGIN`].
    pub(crate) fn thread_stack(&self) -> usize {
        self.stack_bytes.saturating_add(ENGINE_STACK_MARGIN)
    }

    /// What a worker may use beyond its start for an execution with these limits: the QuickJS
    /// heap and stacks, and [`TRANSPILE_MEMORY_BYTES`] (see [`crate::platform::memory`] for how
    /// each OS holds a worker to it). The host caps a worker's job with it, the worker itself.
    pub(crate) fn execution_memory(&self) -> usize {
        self.memory_bytes
            .saturating_add(self.thread_stack())
            .saturating_add(TRANSPILE_MEMORY_BYTES)
    }
}

/// Host to engine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "t", rename_all = "snake_case")]
pub(crate) enum ToEngine {
    Run {
        program: Program,
        limits: EngineLimits,
        /// `Math.random`'s seed, whether to record what the program observes, and what an
        /// earlier run observed when this one replays it.
        #[serde(default)]
        determinism: Determinism,
        /// The module provider's generation: a worker drops its module cache when it changes.
        generation: u64,
    },
    Module {
        id: u64,
        source: Option<String>,
    },
    PathList {
        id: u64,
        paths: Vec<String>,
    },
    Reply {
        id: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        ok: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        err: Option<String>,
        /// How long the program may be given `ok` again for the same call without asking
        /// (see [`super::Answer::fresh`]).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        fresh_ms: Option<u64>,
    },
    Cancel,
    /// Transpile a source and answer, running nothing (thread isolation's larger sources).
    Transpile {
        id: u64,
        source: String,
    },
}

/// What a run starts from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Program {
    /// The agent's TypeScript, for the worker to transpile.
    Source(String),
    /// Already transpiled.
    Transpiled(Transpiled),
}

/// Engine to host.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "t", rename_all = "snake_case")]
pub(crate) enum FromEngine {
    Ready {
        version: u32,
    },
    Load {
        id: u64,
        path: String,
    },
    Paths {
        id: u64,
    },
    Call {
        id: u64,
        server: String,
        tool: String,
        arguments: Value,
        /// The arguments' size as JSON, roughly: what the host holds while the call waits.
        #[serde(default)]
        bytes: usize,
        /// What the program observed since its previous call (when recording).
        #[serde(default, skip_serializing_if = "Observed::is_empty")]
        observed: Observed,
    },
    Log {
        level: String,
        text: String,
    },
    Dropped {
        bytes: usize,
    },
    Done {
        report: Report,
    },
    /// The source is transpiled; the program starts.
    Started,
    Transpiled {
        id: u64,
        result: Result<Transpiled, ExecError>,
    },
}

/// How an execution ended, as the engine saw it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Report {
    pub result: Result<Value, ExecError>,
    pub calls: u32,
    pub failed_calls: u32,
    pub logs_dropped: usize,
    /// Calls the engine answered itself, by server (see [`super::Answer::fresh`]).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub cached: BTreeMap<String, u32>,
}
