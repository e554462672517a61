//! What a program can observe that its text does not determine: the clock, `Math.random`, and
//! the order in which its timers fire and its calls' replies arrive. A run that records sends
//! its clock readings and turns to the host with each tool call; a run that replays an earlier
//! one is served the earlier readings and follows the earlier order until they run out, then
//! goes on live. `Math.random` is a seeded generator (SplitMix64): the same seed, the same
//! numbers, so it needs no record.
//!
//! `Date.now()`, `new Date()` and `Date()` read the clock here; every other `Date` function is
//! QuickJS's own (instances are real dates, with the same prototype).

use std::{collections::VecDeque, rc::Rc};

use rquickjs::{
    Ctx, Exception, Function, Object, Value,
    object::{Accessor, Property},
};

use super::Shared;
use crate::sandbox::{Determinism, MAX_OBSERVED, Observed, Turn};

/// One execution's nondeterminism: its generator, what it replays, what it has recorded.
pub(super) struct Nondet {
    state: u64,
    record: bool,
    clock: VecDeque<f64>,
    turns: VecDeque<Turn>,
    /// Recorded since the last tool call (sent with the next one).
    seen: Observed,
    recorded: usize,
}

impl Nondet {
    pub(super) fn new(determinism: Determinism) -> Self {
        Nondet {
            state: determinism.seed,
            record: determinism.record,
            clock: determinism.replay.clock.into(),
            turns: determinism.replay.turns.into(),
            seen: Observed::default(),
            recorded: 0,
        }
    }

    /// A number in [0, 1) with 53 random bits.
    fn random(&mut self) -> f64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64
    }

    /// The clock: the earlier run's next reading while there is one, then the system's.
    fn now(&mut self) -> f64 {
        let now = self.clock.pop_front().unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0.0, |d| d.as_millis() as f64)
        });
        if self.counts() {
            self.seen.clock.push(now);
        }
        now
    }

    /// Counts one more observation; `false` when it is not to be recorded.
    fn counts(&mut self) -> bool {
        if !self.record || self.seen.overflow {
            return false;
        }
        self.recorded += 1;
        if self.recorded > MAX_OBSERVED {
            self.seen = Observed {
                overflow: true,
                ..Observed::default()
            };
            return false;
        }
        true
    }

    /// Records a turn the event loop took.
    pub(super) fn took(&mut self, turn: Turn) {
        if self.counts() {
            self.seen.turns.push(turn);
        }
    }

    /// The turn the earlier run took next, while replaying.
    pub(super) fn next_turn(&self) -> Option<Turn> {
        self.turns.front().copied()
    }

    /// The expected turn was taken.
    pub(super) fn advance(&mut self) {
        self.turns.pop_front();
    }

    /// The program no longer follows the earlier run's order: the rest is live.
    pub(super) fn stop_replaying(&mut self) {
        self.turns.clear();
    }

    /// What was recorded since the last call, to send with the next one.
    pub(super) fn take_seen(&mut self) -> Observed {
        if self.seen.overflow {
            // Once over, every later message says so (the host keeps the first).
            return Observed {
                overflow: true,
                ..Observed::default()
            };
        }
        std::mem::take(&mut self.seen)
    }
}

/// Replaces `Math.random`, and `Date` on its first use (most programs never touch it, and
/// wrapping it costs a parse), before any of the program's code runs.
pub(super) fn install<'js>(ctx: &Ctx<'js>, shared: &Rc<Shared>) -> rquickjs::Result<()> {
    let wrapper = shared.clone();
    let get = move |ctx: Ctx<'js>| -> rquickjs::Result<Value<'js>> { wrap_date(&ctx, &wrapper) };
    let set = move |ctx: Ctx<'js>, value: Value<'js>| define_date(&ctx, value);
    ctx.globals()
        .prop("Date", Accessor::new(get, set).configurable())?;
    let generator = shared.clone();
    let random = Function::new(ctx.clone(), move || generator.nondet.borrow_mut().random())?
        .with_name("random")?;
    ctx.globals()
        .get::<_, Object>("Math")?
        .set("random", random)?;
    Ok(())
}

/// Puts the wrapped `Date` in place of the accessor, and returns it.
fn wrap_date<'js>(ctx: &Ctx<'js>, shared: &Rc<Shared>) -> rquickjs::Result<Value<'js>> {
    let original = shared
        .original_date(ctx)
        .ok_or_else(|| Exception::throw_internal(ctx, "the engine's Date is gone"))?;
    // The prelude reads `globalThis.Date`: the original, as a plain property again.
    define_date(ctx, original.into_value())?;
    let clock = shared.clone();
    let now = Function::new(ctx.clone(), move || clock.nondet.borrow_mut().now())?;
    let wrap: Function = ctx.eval(DATE_PRELUDE)?;
    wrap.call::<_, ()>((now,))?;
    ctx.globals().get("Date")
}

/// `globalThis.Date = value`, as the built-in property is (writable, configurable, hidden).
fn define_date<'js>(ctx: &Ctx<'js>, value: Value<'js>) -> rquickjs::Result<()> {
    ctx.globals()
        .prop("Date", Property::from(value).writable().configurable())
}

/// A `Date` whose clock readings go through `now`; the original's prototype, statics and
/// instances otherwise.
const DATE_PRELUDE: &str = r#"(function (now) {
  "use strict";
  const Original = globalThis.Date;
  const construct = Reflect.construct;
  function Date(...args) {
    if (new.target === undefined) {
      return construct(Original, [now()], Original).toString();
    }
    return construct(Original, args.length === 0 ? [now()] : args, new.target);
  }
  Object.defineProperty(Date, "length", { value: 7 });
  Date.prototype = Original.prototype;
  Object.defineProperty(Date, "prototype", { writable: false });
  Object.defineProperty(Date, "now", {
    value: function now_() { return now(); }, writable: true, configurable: true,
  });
  Object.defineProperty(Date.now, "name", { value: "now" });
  Date.parse = Original.parse;
  Date.UTC = Original.UTC;
  Object.defineProperty(Date, "parse", { enumerable: false });
  Object.defineProperty(Date, "UTC", { enumerable: false });
  Object.defineProperty(Original.prototype, "constructor", {
    value: Date, writable: true, configurable: true,
  });
  Object.defineProperty(globalThis, "Date", {
    value: Date, writable: true, configurable: true, enumerable: false,
  });
})"#;
