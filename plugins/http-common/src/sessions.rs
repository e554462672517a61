//! A listener's open sessions by id, with how many each client IP holds: one table behind one
//! lock, so the count and the sessions counted never disagree.

use std::{
    collections::HashMap,
    net::IpAddr,
    sync::Arc,
    time::{Duration, Instant},
};

use hyper::{Response, StatusCode};

use crate::{
    jsonrpc,
    limits::{Full, ListenLimits, Occupancy},
    server::{self, Body},
};

pub struct SessionTable<S> {
    by_id: HashMap<String, (IpAddr, Arc<S>)>,
    occupancy: Occupancy,
}

impl<S> Default for SessionTable<S> {
    fn default() -> Self {
        Self {
            by_id: HashMap::new(),
            occupancy: Occupancy::default(),
        }
    }
}

impl<S> SessionTable<S> {
    /// Adds a session unless `peer` already holds `max-sessions-per-peer` or the table holds
    /// `max-sessions`.
    pub fn insert(
        &mut self,
        id: String,
        peer: IpAddr,
        session: Arc<S>,
        limits: &ListenLimits,
    ) -> Result<(), Full> {
        self.occupancy
            .try_add(peer, limits.max_sessions_per_peer, limits.max_sessions)?;
        if let Some((old_peer, _)) = self.by_id.insert(id, (peer, session)) {
            // 128 random bits do not collide; if they ever did, the count stays right.
            self.occupancy.remove(old_peer);
        }
        Ok(())
    }

    pub fn get(&self, id: &str) -> Option<&Arc<S>> {
        self.by_id.get(id).map(|(_, session)| session)
    }

    pub fn contains(&self, id: &str) -> bool {
        self.by_id.contains_key(id)
    }

    pub fn remove(&mut self, id: &str) -> Option<Arc<S>> {
        let (peer, session) = self.by_id.remove(id)?;
        self.occupancy.remove(peer);
        Some(session)
    }

    /// Every session, removed.
    pub fn drain(&mut self) -> Vec<Arc<S>> {
        self.occupancy = Occupancy::default();
        self.by_id
            .drain()
            .map(|(_, (_, session))| session)
            .collect()
    }

    /// The sessions `expired` picks, left in the table (ending one removes it).
    pub fn select(&self, mut expired: impl FnMut(&S) -> bool) -> Vec<Arc<S>> {
        self.by_id
            .values()
            .filter(|(_, session)| expired(session))
            .map(|(_, session)| session.clone())
            .collect()
    }

    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }
}

/// The answer to a new session over a cap: 503 when the listener is full, 429 when the client
/// IP is.
pub fn refused(full: Full, peer: IpAddr) -> Response<Body> {
    let (status, why) = match full {
        Full::Total(max) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "too many sessions (at most {max}); end one with DELETE or wait for idle ones to expire"
            ),
        ),
        Full::Peer(max) => (
            StatusCode::TOO_MANY_REQUESTS,
            format!(
                "too many sessions from {peer} (at most {max}); end one with DELETE or wait for idle ones to expire"
            ),
        ),
    };
    server::error_status(status, jsonrpc::TRANSPORT_ERROR, &why)
}

/// When a session was last busy, and whether it got past `initialize`: what decides when it
/// expires. A session with a request or stream open is never idle.
#[derive(Debug)]
pub struct Activity {
    last: Instant,
    open: usize,
    initialized: bool,
}

impl Default for Activity {
    fn default() -> Self {
        Self {
            last: Instant::now(),
            open: 0,
            initialized: false,
        }
    }
}

impl Activity {
    /// A request or stream opened.
    pub fn begin(&mut self) {
        self.open += 1;
        self.last = Instant::now();
    }

    /// A request or stream ended.
    pub fn end(&mut self) {
        self.open = self.open.saturating_sub(1);
        self.last = Instant::now();
    }

    /// The client got past `initialize` (it confirmed with `notifications/initialized`, or sent
    /// anything else).
    pub fn initialized(&mut self) {
        self.initialized = true;
    }

    /// How long past its timeout the session has been idle, if it has: `Some(timeout)`.
    pub fn expired(&self, limits: &ListenLimits, now: Instant) -> Option<Duration> {
        if self.open > 0 {
            return None;
        }
        let timeout = match self.initialized {
            true => limits.session_idle_timeout,
            false => limits.uninitialized_session_timeout,
        };
        (now.saturating_duration_since(self.last) >= timeout).then_some(timeout)
    }
}

/// Runs `sweep` every `interval` on the runtime behind `tasks`, until it answers `false` or the
/// tasks are aborted. One task per listener, however many sessions it has.
pub fn sweep_every(
    tasks: &crate::Tasks,
    interval: Duration,
    mut sweep: impl FnMut() -> bool + Send + 'static,
) {
    tasks.spawn(async move {
        let mut ticker = tokio::time::interval(interval);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticker.tick().await;
            if !sweep() {
                return;
            }
        }
    });
}
