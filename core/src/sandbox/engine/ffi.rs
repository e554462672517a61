//! The few QuickJS calls rquickjs does not wrap, used to read a value without running the
//! program's code: own properties with their descriptors (no prototype, no getter unless asked)
//! and the internal class of an object. Everything unsafe in the engine is in this file.

use rquickjs::{Ctx, Function, Module, Value, module::Declared, qjs};

/// One own property: a value, or an accessor's getter.
pub(crate) enum Prop<'js> {
    Data(Value<'js>),
    Getter(Option<Function<'js>>),
}

/// What an object is, by its internal class (which the program cannot change).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Class {
    Array,
    Function,
    Proxy,
    Date,
    Map,
    Set,
    Error,
    Promise,
    ArrayBuffer,
    /// A typed array, with its element count.
    TypedArray(usize),
    Plain,
}

fn raw_ctx(ctx: &Ctx<'_>) -> *mut qjs::JSContext {
    ctx.as_raw().as_ptr()
}

/// The class of an object value.
pub(crate) fn class_of<'js>(ctx: &Ctx<'js>, value: &Value<'js>) -> Class {
    let raw = value.as_raw();
    // SAFETY: `raw` is a live value of `ctx` (borrowed from `value` for the duration of the
    // calls); these predicates only read its class id and never run JavaScript.
    unsafe {
        if qjs::JS_IsProxy(raw) {
            Class::Proxy
        } else if qjs::JS_IsArray(raw) {
            Class::Array
        } else if qjs::JS_IsFunction(raw_ctx(ctx), raw) {
            Class::Function
        } else if qjs::JS_IsDate(raw) {
            Class::Date
        } else if qjs::JS_IsMap(raw) {
            Class::Map
        } else if qjs::JS_IsSet(raw) {
            Class::Set
        } else if qjs::JS_IsError(raw) {
            Class::Error
        } else if qjs::JS_IsPromise(raw) {
            Class::Promise
        } else if qjs::JS_IsArrayBuffer(raw) {
            Class::ArrayBuffer
        } else if qjs::JS_GetTypedArrayType(raw) >= 0 {
            Class::TypedArray(typed_array_len(ctx, value))
        } else {
            Class::Plain
        }
    }
}

fn typed_array_len<'js>(ctx: &Ctx<'js>, value: &Value<'js>) -> usize {
    let (mut offset, mut length, mut per_element): (qjs::size_t, qjs::size_t, qjs::size_t) =
        (0, 0, 0);
    // SAFETY: `value` is a live typed array of `ctx`; the call fills the three out-parameters and
    // returns a new reference to the buffer (or an exception), which `Value::from_raw` takes
    // ownership of and frees.
    let buffer = unsafe {
        let buffer = qjs::JS_GetTypedArrayBuffer(
            raw_ctx(ctx),
            value.as_raw(),
            &mut offset,
            &mut length,
            &mut per_element,
        );
        Value::from_raw(ctx.clone(), buffer)
    };
    if buffer.is_exception() {
        let _ = ctx.catch();
        return 0;
    }
    length.checked_div(per_element).unwrap_or(0) as usize
}

/// An element of an array or typed array by index: own properties only (a hole is `None`, even
/// when a prototype has that index).
pub(crate) fn own_index<'js>(
    ctx: &Ctx<'js>,
    object: &Value<'js>,
    index: u32,
) -> rquickjs::Result<Option<Prop<'js>>> {
    // SAFETY: an index atom is an immediate (no allocation, no reference to free for indices
    // below 2^31, freed anyway below).
    let atom = unsafe { qjs::JS_NewAtomUInt32(raw_ctx(ctx), index) };
    if atom == qjs::JS_ATOM_NULL {
        return Err(rquickjs::Error::Exception);
    }
    let prop = own_property(ctx, object, atom);
    // SAFETY: `atom` was created above and is released exactly once.
    unsafe { qjs::JS_FreeAtom(raw_ctx(ctx), atom) };
    prop
}

fn own_property<'js>(
    ctx: &Ctx<'js>,
    object: &Value<'js>,
    atom: qjs::JSAtom,
) -> rquickjs::Result<Option<Prop<'js>>> {
    let mut desc = std::mem::MaybeUninit::<qjs::JSPropertyDescriptor>::uninit();
    // SAFETY: `object` is live; on a return of 1 QuickJS filled `desc` with three owned values,
    // each handed to `Value::from_raw` exactly once below. Objects other than proxies never run
    // JavaScript here (callers refuse proxies first).
    unsafe {
        let found = qjs::JS_GetOwnProperty(raw_ctx(ctx), desc.as_mut_ptr(), object.as_raw(), atom);
        if found < 0 {
            return Err(rquickjs::Error::Exception);
        }
        if found == 0 {
            return Ok(None);
        }
        let desc = desc.assume_init();
        let value = Value::from_raw(ctx.clone(), desc.value);
        let getter = Value::from_raw(ctx.clone(), desc.getter);
        let _setter = Value::from_raw(ctx.clone(), desc.setter);
        if desc.flags & qjs::JS_PROP_GETSET as i32 != 0 {
            Ok(Some(Prop::Getter(getter.into_function())))
        } else {
            Ok(Some(Prop::Data(value)))
        }
    }
}

/// The own enumerable string-keyed properties of an object, in the engine's order (integer keys
/// ascending, then the rest in insertion order), read without running getters.
pub(crate) fn own_enumerable<'js>(
    ctx: &Ctx<'js>,
    object: &Value<'js>,
) -> rquickjs::Result<Vec<(String, Prop<'js>)>> {
    let mut tab: *mut qjs::JSPropertyEnum = std::ptr::null_mut();
    let mut len: u32 = 0;
    let flags = (qjs::JS_GPN_STRING_MASK | qjs::JS_GPN_ENUM_ONLY) as i32;
    // SAFETY: on success QuickJS allocates `tab` with `len` entries, each owning an atom; all of
    // them are released by the one `JS_FreePropertyEnum` below, after the last use.
    unsafe {
        if qjs::JS_GetOwnPropertyNames(raw_ctx(ctx), &mut tab, &mut len, object.as_raw(), flags) < 0
        {
            return Err(rquickjs::Error::Exception);
        }
        let entries = if tab.is_null() {
            &[][..]
        } else {
            std::slice::from_raw_parts(tab, len as usize)
        };
        let mut out = Vec::with_capacity(entries.len());
        let mut failure = None;
        for entry in entries {
            let key = atom_string(ctx, entry.atom);
            match own_property(ctx, object, entry.atom) {
                Ok(Some(prop)) => out.push((key, prop)),
                Ok(None) => {}
                Err(error) => {
                    failure = Some(error);
                    break;
                }
            }
        }
        qjs::JS_FreePropertyEnum(raw_ctx(ctx), tab, len);
        match failure {
            Some(error) => Err(error),
            None => Ok(out),
        }
    }
}

fn atom_string(ctx: &Ctx<'_>, atom: qjs::JSAtom) -> String {
    // SAFETY: `atom` is live (owned by the caller); the returned string value is owned and freed
    // by `Value`.
    let value = unsafe { Value::from_raw(ctx.clone(), qjs::JS_AtomToString(raw_ctx(ctx), atom)) };
    if value.is_exception() {
        let _ = ctx.catch();
        return String::new();
    }
    value.get::<String>().unwrap_or_default()
}

/// A symbol's description, read from its atom (not through the patchable
/// `Symbol.prototype.description`).
pub(crate) fn symbol_description(ctx: &Ctx<'_>, symbol: &Value<'_>) -> String {
    // SAFETY: `symbol` is live; the atom made from it is released once after use.
    unsafe {
        let atom = qjs::JS_ValueToAtom(raw_ctx(ctx), symbol.as_raw());
        if atom == qjs::JS_ATOM_NULL {
            let _ = ctx.catch();
            return String::new();
        }
        let text = atom_string(ctx, atom);
        qjs::JS_FreeAtom(raw_ctx(ctx), atom);
        text
    }
}

/// A primitive's string form (`123` for a BigInt) by the engine's own conversion; never runs
/// the program's code for primitives.
pub(crate) fn primitive_string(ctx: &Ctx<'_>, value: &Value<'_>) -> String {
    // SAFETY: `value` is live; `JS_ToString` returns an owned value (or an exception).
    let text =
        unsafe { Value::from_raw(ctx.clone(), qjs::JS_ToString(raw_ctx(ctx), value.as_raw())) };
    if text.is_exception() {
        let _ = ctx.catch();
        return String::new();
    }
    text.get::<String>().unwrap_or_default()
}

/// Runs one pending promise job. `Ok(false)`: none was pending. `Err(exception)`: the job threw
/// out of the engine (an interrupt or out of memory; ordinary exceptions become rejections).
pub(crate) fn run_job<'js>(ctx: &Ctx<'js>) -> Result<bool, Value<'js>> {
    let mut job_ctx: *mut qjs::JSContext = std::ptr::null_mut();
    // SAFETY: the runtime is locked by the surrounding `Context::with`; with one context per
    // runtime, a failed job leaves its exception on `ctx`, which `catch` takes.
    let result =
        unsafe { qjs::JS_ExecutePendingJob(qjs::JS_GetRuntime(raw_ctx(ctx)), &mut job_ctx) };
    match result {
        0 => Ok(false),
        r if r > 0 => Ok(true),
        _ => Err(ctx.catch()),
    }
}

/// Raises the memory limit, so that reporting and teardown after an out-of-memory error do not
/// fail for want of a few bytes.
pub(crate) fn set_memory_limit(ctx: &Ctx<'_>, bytes: usize) {
    // SAFETY: the runtime pointer comes from a live context; the limit is a plain setting.
    unsafe { qjs::JS_SetMemoryLimit(qjs::JS_GetRuntime(raw_ctx(ctx)), bytes as qjs::size_t) };
}

/// Whether an exception is QuickJS's uncatchable one (an interrupt).
pub(crate) fn is_uncatchable(value: &Value<'_>) -> bool {
    // SAFETY: a pure predicate on a live value.
    unsafe { qjs::JS_IsUncatchableError(value.as_raw()) }
}

/// An identity for cycle detection: the object's address.
pub(crate) fn identity(value: &Value<'_>) -> usize {
    // SAFETY: reads the pointer half of a live object value; nothing is dereferenced.
    unsafe { qjs::JS_VALUE_GET_PTR(value.as_raw()) as usize }
}

fn own_named<'js>(ctx: &Ctx<'js>, object: &Value<'js>, name: &str) -> Option<Value<'js>> {
    // SAFETY: the atom is created from a valid UTF-8 buffer and released once after use.
    let atom = unsafe { qjs::JS_NewAtomLen(raw_ctx(ctx), name.as_ptr().cast(), name.len() as _) };
    if atom == qjs::JS_ATOM_NULL {
        let _ = ctx.catch();
        return None;
    }
    let prop = own_property(ctx, object, atom);
    // SAFETY: as above.
    unsafe { qjs::JS_FreeAtom(raw_ctx(ctx), atom) };
    match prop {
        Ok(Some(Prop::Data(value))) => Some(value),
        Ok(_) => None,
        Err(_) => {
            let _ = ctx.catch();
            None
        }
    }
}

/// An own data property that is a string (a function's `name`), without running getters.
pub(crate) fn own_string<'js>(ctx: &Ctx<'js>, object: &Value<'js>, name: &str) -> Option<String> {
    own_named(ctx, object, name)?.as_string()?.to_string().ok()
}

/// An own data property that is a number (an array's `length`).
pub(crate) fn own_u32<'js>(ctx: &Ctx<'js>, object: &Value<'js>, name: &str) -> Option<u32> {
    let n = own_named(ctx, object, name)?.as_number()?;
    (n >= 0.0 && n <= u32::MAX as f64).then_some(n as u32)
}

/// A module read back from bytecode this engine wrote (`Module::write` right after compiling
/// a module the host provided); `None` if QuickJS refuses it, and the caller compiles the source.
pub(crate) fn load_compiled<'js>(ctx: &Ctx<'js>, code: &[u8]) -> Option<Module<'js, Declared>> {
    // SAFETY: QuickJS trusts bytecode it reads. `code` only ever comes from a
    // `compiled::Compiled` cache, which holds nothing but what this process's own QuickJS
    // wrote of the host's modules before any of their code ran; a program's values never
    // reach it. The bytes are copied (this QuickJS has no ROM data), so they need not outlive
    // the module.
    unsafe { Module::load(ctx.clone(), code) }.ok()
}
