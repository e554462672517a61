//! Import resolution and loading over the VFS. `./servers/demo`, `/servers/demo` and
//! `servers/demo` all name `/servers/demo`, found as itself, with `.ts`/`.js`, or as
//! `…/index.ts`/`…/index.js`; relative imports resolve against the importing module's folder
//! (the agent's program sits at `/`). `runbyte:bridge` is the native bridge module. Errors list
//! what exists and the closest match.

use std::{rc::Rc, sync::Arc, time::Instant};

use rquickjs::{
    Ctx, Exception, Module, Value, WriteOptions,
    loader::{ImportAttributes, Loader, Resolver},
    module::Declared,
    promise::PromiseState,
};

use super::{
    AGENT_MODULE, ErrorKind, ExecError, FromEngine, ModuleSource, Shared, ToEngine, compiled, ffi,
    globals::BridgeModule, next_id,
};
use crate::sandbox::Transpiled;

/// The bridge module's name.
pub(crate) const BRIDGE: &str = "runbyte:bridge";
/// Exports listed in a "no such export" error before "and N more".
const LISTED: usize = 40;

pub(super) struct VfsResolver(pub Rc<Shared>);
pub(super) struct VfsLoader(pub Rc<Shared>);

impl Resolver for VfsResolver {
    fn resolve<'js>(
        &mut self,
        ctx: &Ctx<'js>,
        base: &str,
        name: &str,
        _attributes: Option<ImportAttributes<'js>>,
    ) -> rquickjs::Result<String> {
        if name == BRIDGE {
            return Ok(name.to_owned());
        }
        let wanted = normalize(base, name);
        for candidate in candidates(&wanted) {
            if self.0.module_exists(&candidate) {
                return Ok(candidate);
            }
        }
        let message = not_found(&self.0, base, name, &wanted);
        self.0.module_errors.borrow_mut().push(message.clone());
        Err(Exception::throw_reference(ctx, &message))
    }
}

impl Loader for VfsLoader {
    fn load<'js>(
        &mut self,
        ctx: &Ctx<'js>,
        name: &str,
        _attributes: Option<ImportAttributes<'js>>,
    ) -> rquickjs::Result<Module<'js, Declared>> {
        if name == BRIDGE {
            return Module::declare_def::<BridgeModule, _>(ctx.clone(), name);
        }
        match self.0.module_source(name) {
            Some(source) => {
                if let Some(module) = self
                    .0
                    .compiled(name)
                    .and_then(|code| ffi::load_compiled(ctx, &code))
                {
                    return Ok(module);
                }
                let module = Module::declare(ctx.clone(), name, source.as_bytes())?;
                // Written before anything ran: the module as compiled from the host's source.
                if let Ok(code) = module.write(WriteOptions::default()) {
                    self.0.keep_compiled(name, code);
                }
                Ok(module)
            }
            None => {
                let message = format!("cannot load module `{name}`: the host did not provide it");
                self.0.module_errors.borrow_mut().push(message.clone());
                Err(Exception::throw_reference(ctx, &message))
            }
        }
    }
}

impl Shared {
    fn module_exists(&self, path: &str) -> bool {
        match &self.modules {
            ModuleSource::Local(provider) => match provider.load(path) {
                Some(source) => {
                    self.loaded.borrow_mut().insert(path.to_owned(), source);
                    true
                }
                None => false,
            },
            // Asked one path at a time (answers cached, misses too): the whole list is
            // thousands of paths with a large catalogue, and only an error needs it.
            ModuleSource::Remote(_) => self.module_source(path).is_some(),
        }
    }

    fn module_source(&self, path: &str) -> Option<Arc<str>> {
        if let Some(source) = self.loaded.borrow().get(path) {
            return Some(source.clone());
        }
        match &self.modules {
            ModuleSource::Local(provider) => provider.load(path),
            ModuleSource::Remote(cache) => {
                if let Ok(cache) = cache.lock()
                    && let Some(cached) = cache.sources.get(path)
                {
                    return cached.clone();
                }
                let id = next_id();
                let mut link = self.link.borrow_mut();
                link.send(FromEngine::Load {
                    id,
                    path: path.to_owned(),
                });
                let source = link.wait_for(self.deadline, |message| match message {
                    ToEngine::Module { id: got, source } if *got == id => Some(source.clone()),
                    _ => None,
                })?;
                let source: Option<Arc<str>> = source.map(Arc::from);
                if let Ok(mut cache) = cache.lock() {
                    cache.sources.insert(path.to_owned(), source.clone());
                }
                source
            }
        }
    }

    /// This module's bytecode, if an earlier execution compiled it from the same generation.
    fn compiled(&self, path: &str) -> Option<Arc<[u8]>> {
        match &self.modules {
            ModuleSource::Local(provider) => {
                compiled::local_get(provider, self.start_generation, path)
            }
            ModuleSource::Remote(cache) => cache.lock().ok()?.compiled.get(path),
        }
    }

    fn keep_compiled(&self, path: &str, code: Vec<u8>) {
        match &self.modules {
            ModuleSource::Local(provider) => {
                compiled::local_put(provider, self.start_generation, path, code)
            }
            ModuleSource::Remote(cache) => {
                if let Ok(mut cache) = cache.lock() {
                    cache.compiled.put(path, code);
                }
            }
        }
    }

    /// Every module path, for resolving against and for errors that list what exists.
    fn all_paths(&self) -> Arc<Vec<String>> {
        match &self.modules {
            ModuleSource::Local(provider) => Arc::new(provider.paths()),
            ModuleSource::Remote(cache) => {
                if let Ok(cache) = cache.lock()
                    && let Some(paths) = &cache.paths
                {
                    return paths.clone();
                }
                let id = next_id();
                let mut link = self.link.borrow_mut();
                link.send(FromEngine::Paths { id });
                let paths = link
                    .wait_for(self.deadline, |message| match message {
                        ToEngine::PathList { id: got, paths } if *got == id => Some(paths.clone()),
                        _ => None,
                    })
                    .map(Arc::new);
                match paths {
                    Some(paths) => {
                        if let Ok(mut cache) = cache.lock() {
                            cache.paths = Some(paths.clone());
                        }
                        paths
                    }
                    None => Arc::new(Vec::new()),
                }
            }
        }
    }
}

/// The absolute VFS path an import names, before extensions are tried.
pub(crate) fn normalize(base: &str, name: &str) -> String {
    let joined = if name.starts_with("./") || name.starts_with("../") || name == "." || name == ".."
    {
        // A saved skill (`/skills/<name>.ts`) was written as a program: its imports resolve as
        // the program's do, from the root.
        let dir = if base == AGENT_MODULE || !base.starts_with('/') || base.starts_with("/skills/")
        {
            ""
        } else {
            base.rsplit_once('/').map_or("", |(dir, _)| dir)
        };
        format!("{dir}/{name}")
    } else if name.starts_with('/') {
        name.to_owned()
    } else {
        format!("/{name}")
    };
    let mut parts: Vec<&str> = Vec::new();
    for part in joined.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            part => parts.push(part),
        }
    }
    format!("/{}", parts.join("/"))
}

/// The paths tried for an import, in order.
pub(crate) fn candidates(path: &str) -> Vec<String> {
    let mut out = vec![path.to_owned()];
    if let Some(stem) = path.strip_suffix(".js") {
        out.push(format!("{stem}.ts"));
    } else if let Some(stem) = path.strip_suffix(".ts") {
        out.push(format!("{stem}.js"));
    } else {
        for suffix in [".ts", ".js", "/index.ts", "/index.js"] {
            out.push(format!("{path}{suffix}"));
        }
    }
    out
}

/// A path without its extension or `/index`: the shortest way to import it.
fn import_name(path: &str) -> &str {
    let stem = path
        .strip_suffix(".ts")
        .or_else(|| path.strip_suffix(".js"))
        .unwrap_or(path);
    stem.strip_suffix("/index").unwrap_or(stem)
}

fn not_found(shared: &Shared, base: &str, name: &str, wanted: &str) -> String {
    let paths = shared.all_paths();
    let mut servers: Vec<&str> = paths
        .iter()
        .filter_map(|p| p.strip_prefix("/servers/")?.split('/').next())
        .filter(|s| !s.is_empty() && !s.contains('.'))
        .collect();
    servers.sort_unstable();
    servers.dedup();
    let listing = if servers.is_empty() {
        "there are no servers".to_owned()
    } else {
        format!("the servers are: {}", servers.join(", "))
    };
    let names: Vec<&str> = paths.iter().map(|p| import_name(p)).collect();
    let suggestion = closest(import_name(wanted), names.iter().copied())
        .map(|best| format!("; did you mean `{best}`?"))
        .unwrap_or_default();
    format!("cannot find module `{name}` (imported from {base}); {listing}{suggestion}")
}

/// The candidate nearest to `wanted` by edit distance, if near enough to be a likely typo.
pub(crate) fn closest<'a>(
    wanted: &str,
    candidates: impl Iterator<Item = &'a str>,
) -> Option<&'a str> {
    crate::text::closest(wanted, candidates)
}

/// QuickJS's "Could not find export 'x' in module 'm'", rewritten to list what `m` exports and
/// the closest name, positioned at the import in the agent's source.
pub(super) fn missing_export<'js>(
    ctx: &Ctx<'js>,
    shared: &Shared,
    program: &Transpiled,
    message: &str,
) -> Option<ExecError> {
    let rest = message.split("Could not find export '").nth(1)?;
    let (export, rest) = rest.split_once("' in module '")?;
    let module = rest.strip_suffix('\'').unwrap_or(rest);
    let exports = module_exports(ctx, shared, module);
    let mut text = format!("module `{module}` has no export `{export}`");
    if let Some(exports) = exports {
        let shown: Vec<&str> = exports.iter().take(LISTED).map(String::as_str).collect();
        if shown.is_empty() {
            text.push_str("; it exports nothing");
        } else {
            text.push_str(&format!("; it exports: {}", shown.join(", ")));
            if exports.len() > LISTED {
                text.push_str(&format!(" (and {} more)", exports.len() - LISTED));
            }
        }
        if let Some(best) = closest(export, exports.iter().map(String::as_str)) {
            text.push_str(&format!("; did you mean `{best}`?"));
        }
    }
    Some(ExecError {
        kind: ErrorKind::Module,
        message: text,
        position: import_position(program, export),
        stack: None,
    })
}

/// The names a module exports, by importing it (generated modules only define functions).
fn module_exports<'js>(ctx: &Ctx<'js>, shared: &Shared, module: &str) -> Option<Vec<String>> {
    let promise = Module::import(ctx, module).ok()?;
    while promise.state() == PromiseState::Pending {
        if shared.stopped() || Instant::now() >= shared.deadline {
            return None;
        }
        match ffi::run_job(ctx) {
            Ok(true) => {}
            _ => break,
        }
    }
    let namespace: Value = promise.result::<Value>()?.ok()?;
    let object = namespace.as_object()?;
    Some(object.keys::<String>().filter_map(Result::ok).collect())
}

/// Where the agent imports `name`: the first `import` line of the generated code naming it,
/// mapped back.
fn import_position(program: &Transpiled, name: &str) -> Option<(u32, u32)> {
    program
        .code()
        .split('\n')
        .enumerate()
        .find_map(|(i, line)| {
            if !line.trim_start().starts_with("import") {
                return None;
            }
            let at = find_word(line, name)?;
            program.original_position(i as u32 + 1, at as u32 + 1)
        })
}

fn find_word(line: &str, word: &str) -> Option<usize> {
    let is_ident = |c: char| c.is_alphanumeric() || c == '_' || c == '$';
    line.match_indices(word).map(|(i, _)| i).find(|&i| {
        let before = line[..i].chars().next_back();
        let after = line[i + word.len()..].chars().next();
        !before.is_some_and(is_ident) && !after.is_some_and(is_ident)
    })
}
