//! The host's modules as QuickJS bytecode, kept for the executions after the one that compiled
//! them. Every execution has a runtime of its own, so without this each one parsed and compiled
//! every module it imports again: a server's index of 250 tools, or all of `/servers`, on every
//! run. Reading bytecode back costs a fraction of that.
//!
//! What is kept is only what this engine's own QuickJS wrote of a module the host provided,
//! right after compiling it and before anything ran (a program cannot reach it), for one
//! generation of the host's modules. A worker process keeps it in its [`super::ModuleCache`];
//! an engine thread (thread isolation) keeps it per thread, for one provider identity (one VFS
//! snapshot, see [`ModuleProvider::identity`]).

use std::{
    any::Any,
    cell::RefCell,
    collections::HashMap,
    sync::{Arc, Weak},
};

use crate::sandbox::ModuleProvider;

/// What one cache holds at most; past it, modules are compiled each time as before. The stubs
/// of 5,000 tools' indexes take about 270 KiB; an engine thread keeps a cache of its own.
const MAX_BYTES: usize = 16 << 20;

/// Compiled modules by path, for one generation.
#[derive(Default)]
pub(crate) struct Compiled {
    code: HashMap<String, Arc<[u8]>>,
    bytes: usize,
}

impl Compiled {
    pub(crate) fn get(&self, path: &str) -> Option<Arc<[u8]>> {
        self.code.get(path).cloned()
    }

    pub(crate) fn put(&mut self, path: &str, code: Vec<u8>) {
        if self.code.contains_key(path) || self.bytes.saturating_add(code.len()) > MAX_BYTES {
            return;
        }
        self.bytes += code.len();
        self.code.insert(path.to_owned(), code.into());
    }
}

/// An engine thread's cache: of one provider identity (held weakly, which also keeps its
/// address from being reused by another), at one generation.
struct Local {
    identity: Weak<dyn Any + Send + Sync>,
    generation: u64,
    compiled: Compiled,
}

thread_local! {
    static LOCAL: RefCell<Option<Local>> = const { RefCell::new(None) };
}

fn same(local: &Local, identity: &Weak<dyn Any + Send + Sync>, generation: u64) -> bool {
    local.generation == generation && Weak::ptr_eq(&local.identity, identity)
}

/// This thread's bytecode of `path` from `provider` at `generation`.
pub(crate) fn local_get(
    provider: &Arc<dyn ModuleProvider>,
    generation: u64,
    path: &str,
) -> Option<Arc<[u8]>> {
    let identity = provider.identity()?;
    LOCAL.with_borrow(|local| {
        local
            .as_ref()
            .filter(|local| same(local, &identity, generation))
            .and_then(|local| local.compiled.get(path))
    })
}

/// Keeps `code` as this thread's bytecode of `path` from `provider` at `generation`, dropping
/// what the thread kept of another provider or generation.
pub(crate) fn local_put(
    provider: &Arc<dyn ModuleProvider>,
    generation: u64,
    path: &str,
    code: Vec<u8>,
) {
    let Some(identity) = provider.identity() else {
        return;
    };
    LOCAL.with_borrow_mut(|local| {
        if !local
            .as_ref()
            .is_some_and(|local| same(local, &identity, generation))
        {
            *local = Some(Local {
                identity,
                generation,
                compiled: Compiled::default(),
            });
        }
        if let Some(local) = local {
            local.compiled.put(path, code);
        }
    });
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::sync::{Mutex, atomic::AtomicBool};

    use super::*;
    use crate::sandbox::{
        Determinism,
        engine::{self, Link, ModuleSource},
        protocol::EngineLimits,
    };

    /// One module whose text the test may change, at generation 1 throughout.
    struct One {
        source: Mutex<Arc<str>>,
        identity: Arc<()>,
    }

    impl ModuleProvider for One {
        fn load(&self, path: &str) -> Option<Arc<str>> {
            (path == "/m.js").then(|| self.source.lock().unwrap().clone())
        }
        fn paths(&self) -> Vec<String> {
            vec!["/m.js".to_owned()]
        }
        fn generation(&self) -> u64 {
            1
        }
        fn identity(&self) -> Option<Weak<dyn Any + Send + Sync>> {
            let identity: Arc<dyn Any + Send + Sync> = self.identity.clone();
            Some(Arc::downgrade(&identity))
        }
    }

    /// Runs `import { v } from '/m.js'` on this thread, the engine as a thread isolation host
    /// runs it; its value.
    fn run(provider: &Arc<dyn ModuleProvider>) -> serde_json::Value {
        let program =
            crate::sandbox::transpile("import { v } from '/m.js'; export default v;", "agent.ts")
                .unwrap();
        let limits = EngineLimits {
            timeout_ms: 10_000,
            spent_ms: 0,
            memory_bytes: 32 << 20,
            stack_bytes: 512 << 10,
            max_output_bytes: 1 << 16,
            max_tool_calls: 1,
        };
        let (_, inbox) = crate::sandbox::mailbox::mailbox();
        let link = Link::new(Box::new(|_| {}), inbox);
        let (report, _) = engine::run(
            &program,
            limits,
            Determinism::default(),
            link,
            ModuleSource::Local(provider.clone()),
            Arc::new(AtomicBool::new(false)),
        );
        engine::between_runs();
        report.result.unwrap()
    }

    /// The second execution runs what the first compiled, not the source again: shown by a
    /// source changed under the same generation, which a real provider never does.
    #[test]
    fn a_later_execution_runs_the_bytecode_an_earlier_one_kept() {
        std::thread::spawn(|| {
            let one = Arc::new(One {
                source: Mutex::new(Arc::from("export const v = 1;")),
                identity: Arc::new(()),
            });
            let provider: Arc<dyn ModuleProvider> = one.clone();
            assert_eq!(run(&provider), serde_json::json!(1));
            assert!(local_get(&provider, 1, "/m.js").is_some());
            *one.source.lock().unwrap() = Arc::from("export const v = 2;");
            assert_eq!(run(&provider), serde_json::json!(1));
            // Bytes QuickJS refuses are compiled from the source instead.
            LOCAL.with_borrow_mut(|local| *local = None);
            local_put(&provider, 1, "/m.js", b"not bytecode".to_vec());
            assert_eq!(run(&provider), serde_json::json!(2));
            // Another provider (another snapshot) keeps nothing of this one's.
            let other: Arc<dyn ModuleProvider> = Arc::new(One {
                source: Mutex::new(Arc::from("export const v = 3;")),
                identity: Arc::new(()),
            });
            assert_eq!(run(&other), serde_json::json!(3));
            assert!(local_get(&provider, 1, "/m.js").is_none());
        })
        .join()
        .unwrap();
    }

    #[test]
    fn a_cache_is_bounded_and_keeps_the_first_code_of_a_path() {
        let mut compiled = Compiled::default();
        compiled.put("/a.js", vec![1, 2, 3]);
        compiled.put("/a.js", vec![9]);
        assert_eq!(compiled.get("/a.js").as_deref(), Some(&[1u8, 2, 3][..]));
        compiled.put("/big.js", vec![0; MAX_BYTES]);
        assert_eq!(compiled.get("/big.js"), None);
        assert_eq!(compiled.bytes, 3);
    }
}
