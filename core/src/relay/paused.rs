//! Executions of 2026-07-28 clients that wait for an answer: the signed `requestState` that
//! finds one again, the journal it carries (compressed, encrypted) or keeps in the state store,
//! and the rule that a state resumes once.

use std::{
    collections::HashMap,
    sync::Mutex,
    time::{Duration, Instant, SystemTime},
};

use rmcp::model::{RequestStateCodec, SealOptions};
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::{Event, Point, Question};
use crate::state_store::StateStore;

/// How long after its execution's deadline (its `timeout-ms` from its start) a `requestState`
/// is still taken: room for the clocks of two replicas to disagree a little. Past it, the state
/// is refused everywhere (-32602): the execution it names has timed out where it paused, and a
/// replay would make its calls after its own time limit. A journal kept in the state store, and
/// the claim that a state was replayed, live as long.
pub const STATE_SLACK: Duration = Duration::from_secs(5);
/// The longest any `requestState` lives, whatever its execution's time limit.
const MAX_STATE_LIFE: Duration = Duration::from_secs(24 * 3600);
/// The most executions waiting for a client's answer at once.
const MAX_PAUSED: usize = 1024;
/// The largest sealed journal a `requestState` carries itself (base64 makes it 4/3 of that in
/// the state). Past it, the journal goes to the state store, or, without one, the execution
/// resumes only on the replica that paused it.
///
/// Only past it, and not every journal: a state that carries its journal costs the store no
/// write, no read and no memory for a day, and a pause never waits on the store for the usual
/// small journal; the price is at most ~85 KiB more in each retry. (Replaying still asks the
/// store, to claim the state once.)
const MAX_INLINE_JOURNAL: usize = 64 << 10;
/// The most a sealed journal may inflate to when it is read back: well above what the recorder
/// keeps (256 KiB of JSON, `execute::bridge`), far below what would hurt a replica fed a deflate
/// bomb by a peer that holds the key.
const MAX_INFLATED_JOURNAL: usize = 8 << 20;
/// The sealed journal's format, its first byte (authenticated with it): 1 is the JSON of a
/// [`Point`], raw deflate, then ChaCha20-Poly1305 (nonce, ciphertext, tag). Another value is a
/// journal of another version of Runbyte, refused by name. Format 2 binds the journal to the
/// state it belongs to: its associated data is the format byte and a digest of the state's
/// identity ([`Paused::bound`]: replica, execution key, program, expiry), so a journal moved
/// under another state's token in the store does not open. Format 1 (unbound) is refused.
const JOURNAL_FORMAT: u8 = 2;

/// One execution waiting for its client's answer.
pub struct Waiting<T> {
    /// The question asked, to ask again when a retry does not answer it.
    pub question: Question,
    /// Where the answer goes.
    pub answer: oneshot::Sender<Result<Value, String>>,
    /// The execution's later events.
    pub events: mpsc::Receiver<Event<T>>,
    /// Cancels the execution (when the client gives up on a retry).
    pub cancel: CancellationToken,
    /// Its replay point, when it can resume anywhere.
    pub point: Option<Point>,
    /// When the execution ends (its time limit): its state expires [`STATE_SLACK`] later.
    pub deadline: SystemTime,
    since: Instant,
}

/// Executions of 2026-07-28 clients that wait for an answer, by the key in their signed
/// `requestState`. The state names the process (`replica`) that holds the execution and, when
/// the execution can resume anywhere, carries its journal ([`Point`]) or, past
/// [`MAX_INLINE_JOURNAL`], the key under which the state store keeps it; it is bound to the
/// program's text, so it answers only a retry of the same `execute_code`.
///
/// A state resumes its execution once: where it paused, by taking it out of the table; elsewhere
/// by replay, which needs a state store: the replay is claimed there (once across the replicas)
/// and in this process. Without a store, nothing can tell one replica (or a restarted process)
/// that another already replayed a state, so a state resumes only in the process that paused
/// it, and a journal is not even made to travel. With a store, a state that could have been
/// replayed is claimed where it paused too, so the execution never goes on twice. Every state
/// expires with its execution (its deadline plus [`STATE_SLACK`], signed in the state).
///
/// The journal's bounds, and where each is enforced:
///
/// | bound | value | enforced by |
/// |---|---|---|
/// | JSON recorded | 256 KiB | `execute::bridge` (`MAX_JOURNAL_BYTES`): past it, not replayable |
/// | sealed, inline in the state | [`MAX_INLINE_JOURNAL`], 64 KiB | [`Paused::pause`]: past it, the store, else not replayable |
/// | JSON inflated on resume | [`MAX_INFLATED_JOURNAL`], 8 MiB | [`Paused::resume`]: past it, refused |
/// | life of the state, in the store, of the claim | execution's deadline + [`STATE_SLACK`] (5 s), at most 24 h | the state's signed `expires`, Redis `EX` |
/// | store connect, command | 2 s, 2 s | `crate::state_store` |
pub struct Paused<T> {
    codec: RequestStateCodec,
    /// Encrypts the journal a state carries (the tool results the program saw).
    journal_key: ring::aead::LessSafeKey,
    /// Keys the replay claims' names in the store.
    claim_key: ring::hmac::Key,
    /// This process among the replicas: random, opaque (no host name, no process id).
    replica: String,
    waiting: Mutex<HashMap<String, Waiting<T>>>,
    /// States this process resumed by replay, so that one is never replayed twice here (when
    /// there is no store to claim them in).
    replayed: Mutex<(
        std::collections::HashSet<String>,
        std::collections::VecDeque<String>,
    )>,
    /// Bound on each entry's life: past it, the execution has timed out anyway.
    keep: Duration,
    /// `[server] state-store`, shared by the replicas.
    store: Option<StateStore>,
}

/// What a `requestState` holds (signed as a whole; the journal also encrypted).
#[derive(serde::Serialize, serde::Deserialize)]
struct StateText {
    replica: String,
    key: String,
    /// When the state stops resuming anything: its execution's deadline plus
    /// [`STATE_SLACK`], in milliseconds since the Unix epoch.
    expires: u64,
    /// The sealed replay [`Point`] (see [`JOURNAL_FORMAT`]), base64url.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    journal: Option<String>,
    /// The token under which the state store keeps the sealed journal, when it was too large to
    /// carry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    stored: Option<String>,
}

impl StateText {
    /// Whether another replica could replay it.
    fn replayable(&self) -> bool {
        self.journal.is_some() || self.stored.is_some()
    }

    /// What a replay claims (in this process's memory; the store gets its keyed digest).
    fn id(&self) -> String {
        format!("{}|{}", self.replica, self.key)
    }

    fn expires_at(&self) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_millis(self.expires)
    }

    /// How long the state has left; zero once it expired.
    fn left(&self) -> Duration {
        self.expires_at()
            .duration_since(SystemTime::now())
            .unwrap_or_default()
    }
}

/// `time` in milliseconds since the Unix epoch.
fn unix_ms(time: SystemTime) -> u64 {
    time.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |since| {
            u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
        })
}

/// The key that names replay claims in the store: HKDF-SHA256 of the signing secret.
fn claim_key(secret: &[u8]) -> ring::hmac::Key {
    let salt = ring::hkdf::Salt::new(ring::hkdf::HKDF_SHA256, b"runbyte requestState claim");
    let prk = salt.extract(secret);
    match prk.expand(&[b"v1"], ring::hmac::HMAC_SHA256) {
        Ok(okm) => ring::hmac::Key::from(okm),
        // HMAC-SHA256's key length is always within HKDF's output limit.
        Err(_) => ring::hmac::Key::new(ring::hmac::HMAC_SHA256, secret),
    }
}

/// The journal's key: HKDF-SHA256 of the signing secret, for ChaCha20-Poly1305.
fn journal_key(secret: &[u8]) -> Result<ring::aead::LessSafeKey, String> {
    let salt = ring::hkdf::Salt::new(ring::hkdf::HKDF_SHA256, b"runbyte requestState journal");
    let prk = salt.extract(secret);
    let okm = prk
        .expand(&[b"v1"], &ring::aead::CHACHA20_POLY1305)
        .map_err(|_| "cannot derive the journal key".to_owned())?;
    Ok(ring::aead::LessSafeKey::new(ring::aead::UnboundKey::from(
        okm,
    )))
}

/// How a retry resumes its execution.
pub enum Resumed<T> {
    /// It waits in this process.
    Here {
        key: String,
        waiting: Box<Waiting<T>>,
    },
    /// It paused elsewhere and can be resumed by replaying its journal; its execution ends at
    /// `deadline` (the first run's), and so does the replay.
    Replay {
        point: Box<Point>,
        deadline: SystemTime,
    },
}

/// Why a retry's `requestState` resumes nothing.
#[derive(Debug, thiserror::Error)]
pub enum ResumeError {
    /// The state resumes nothing, now or later: altered, not issued by a replica sharing the
    /// key, bound to another program, already used, expired, or held by another replica.
    #[error("{0}")]
    Refused(String),
    /// The state store could not be used (the error names it); the same retry may succeed once
    /// it answers again.
    #[error("{0}")]
    Store(String),
}

/// Where a sealed journal travels.
enum Carried {
    /// Nowhere: the execution resumes only where it paused.
    Not,
    /// In the state, base64url.
    Inline(String),
    /// In the state store, under this token.
    Stored(String),
}

/// The most replayed states a process remembers (to refuse a second replay of one).
const MAX_REPLAYED: usize = 65_536;

const ALREADY_USED: &str =
    "this answer was already used to resume its execution (on this replica or another)";

impl<T> Paused<T> {
    /// An empty table whose states are signed with `secret` (from `[server] state-key-file`),
    /// or with a fresh random key of this process's own when there is none; large journals and
    /// replay claims go to `store` (`[server] state-store`) when there is one.
    pub fn new(
        keep: Duration,
        secret: Option<Vec<u8>>,
        store: Option<StateStore>,
    ) -> Result<Self, String> {
        let secret = match secret {
            Some(secret) => secret,
            None => {
                let mut random = vec![0u8; 32];
                getrandom::fill(&mut random)
                    .map_err(|e| format!("cannot make a signing key: {e}"))?;
                random
            }
        };
        let journal_key = journal_key(&secret)?;
        let claim_key = claim_key(&secret);
        let codec = RequestStateCodec::try_new(secret)
            .map_err(|e| format!("the requestState signing key is not usable: {e}"))?;
        // Random, so that a state says nothing of the machine or the process that paused it.
        let mut tag = [0u8; 12];
        getrandom::fill(&mut tag).map_err(|e| format!("cannot name this process: {e}"))?;
        Ok(Paused {
            codec,
            journal_key,
            claim_key,
            replica: super::hex(&tag),
            waiting: Mutex::new(HashMap::new()),
            replayed: Mutex::default(),
            keep,
            store,
        })
    }

    /// The state store, when there is one.
    pub fn store(&self) -> Option<&StateStore> {
        self.store.as_ref()
    }

    /// Keeps a waiting execution of `code`; the signed `requestState` that finds it again. A
    /// journal past [`MAX_INLINE_JOURNAL`] is written to the state store first (a store that
    /// fails is logged, and the execution resumes only here).
    pub async fn pause(
        &self,
        key: String,
        waiting: Waiting<T>,
        code: &str,
    ) -> Result<String, String> {
        let full = || format!("{MAX_PAUSED} executions already wait for their clients' answers");
        {
            let mut table = self.waiting.lock().map_err(|_| "poisoned".to_owned())?;
            let keep = self.keep;
            let now = SystemTime::now();
            // Past its state's expiry, no retry can find an entry: it goes too.
            table.retain(|_, entry| {
                entry.since.elapsed() < keep
                    && !entry.answer.is_closed()
                    && now < entry.deadline + STATE_SLACK
            });
            if table.len() >= MAX_PAUSED {
                return Err(full());
            }
        }
        let now = SystemTime::now();
        let expires = (waiting.deadline + STATE_SLACK).min(now + MAX_STATE_LIFE);
        let mut text = StateText {
            replica: self.replica.clone(),
            key,
            expires: unix_ms(expires),
            journal: None,
            stored: None,
        };
        let code_digest = ring::digest::digest(&ring::digest::SHA256, code.as_bytes());
        match &waiting.point {
            // Without a store, no journal travels: no replica could tell whether another one
            // (or this one, restarted) replayed it already.
            Some(point) if self.store.is_some() => {
                let bound = self.bound(&text, code_digest.as_ref());
                match self.carry(point, &bound, text.left() + STATE_SLACK).await? {
                    Carried::Not => {}
                    Carried::Inline(journal) => text.journal = Some(journal),
                    Carried::Stored(token) => text.stored = Some(token),
                }
            }
            _ => {}
        }
        let state = self.seal(&text, code)?;
        let key = text.key;
        let mut table = self.waiting.lock().map_err(|_| "poisoned".to_owned())?;
        // Pauses that ran while this one wrote to the store may have filled it.
        if table.len() >= MAX_PAUSED {
            return Err(full());
        }
        table.insert(key, waiting);
        Ok(state)
    }

    /// What a journal of the state `text` (of a program whose SHA-256 is `code_digest`) is
    /// sealed with as associated data: the format byte, then a digest of the state's identity.
    fn bound(&self, text: &StateText, code_digest: &[u8]) -> Vec<u8> {
        let mut identity = ring::digest::Context::new(&ring::digest::SHA256);
        for part in [text.replica.as_bytes(), text.key.as_bytes(), code_digest] {
            identity.update(&(part.len() as u64).to_be_bytes());
            identity.update(part);
        }
        identity.update(&text.expires.to_be_bytes());
        let mut bound = vec![JOURNAL_FORMAT];
        bound.extend_from_slice(identity.finish().as_ref());
        bound
    }

    /// Where `point` travels: in the state, in the store (for `ttl`), or (the store failing)
    /// nowhere.
    async fn carry(&self, point: &Point, bound: &[u8], ttl: Duration) -> Result<Carried, String> {
        use base64::Engine as _;
        let sealed = self.encrypt(point, bound)?;
        if sealed.len() <= MAX_INLINE_JOURNAL {
            return Ok(Carried::Inline(
                base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(sealed),
            ));
        }
        let Some(store) = &self.store else {
            tracing::info!(
                bytes = sealed.len(),
                "the journal is too large for a requestState and no [server] state-store is set: \
                 the execution resumes only on this replica"
            );
            return Ok(Carried::Not);
        };
        match store.put(&sealed, ttl).await {
            Ok(token) => Ok(Carried::Stored(token)),
            Err(error) => {
                tracing::warn!(
                    store = store.name(),
                    "{error}: the execution resumes only on this replica"
                );
                Ok(Carried::Not)
            }
        }
    }

    fn seal(&self, text: &StateText, code: &str) -> Result<String, String> {
        // The codec's own expiry is a second of slack past `expires`, so that a state past it
        // reads as expired (by `expires`, with the message that says so) rather than as altered.
        let ttl = text.left() + Duration::from_secs(1);
        let text = serde_json::to_vec(text).map_err(|e| e.to_string())?;
        Ok(self.codec.seal_with(
            &text,
            &SealOptions::new().ttl(ttl).associated_data(code.as_bytes()),
        ))
    }

    /// The execution a client's `requestState` names. A state that was altered, signed with
    /// another key, or bound to another program is refused; so is one whose execution ended
    /// here, one that paused elsewhere without a journal, and one used already. A state store
    /// that a replay needs and that fails is a [`ResumeError::Store`].
    ///
    /// `answered` says whether the retry carries the answer: a replay needs it, and without it
    /// is refused before the state is claimed (so that the state still resumes with it later).
    pub async fn resume(
        &self,
        state: &str,
        code: &str,
        answered: bool,
    ) -> Result<Resumed<T>, ResumeError> {
        use base64::Engine as _;
        let payload = self
            .codec
            .open_with(state, code.as_bytes())
            .map_err(|error| {
                ResumeError::Refused(match error {
                    rmcp::model::RequestStateError::Expired => expired(),
                    error => format!(
                        "the requestState was not issued by this Runbyte (nor a replica sharing \
                         its state-key-file) for this program, or it was altered ({error})"
                    ),
                })
            })?;
        let text: StateText = serde_json::from_slice(&payload).map_err(|_| {
            ResumeError::Refused("the requestState does not name an execution".to_owned())
        })?;
        if text.left().is_zero() {
            return Err(ResumeError::Refused(expired()));
        }
        if text.replica == self.replica {
            return self.resume_here(text).await;
        }
        let Some(store) = &self.store else {
            return Err(ResumeError::Refused(
                "the execution this answer belongs to paused in another Runbyte process (or \
                 in this one before it restarted), and without a [server] state-store an \
                 execution resumes only in the process that paused it (nothing else could make \
                 sure it resumes once): route this client's retries to that replica, or give \
                 every replica the same state-store"
                    .to_owned(),
            ));
        };
        if !answered && text.replayable() {
            return Err(ResumeError::Refused(
                "the retry carries no answer, and this execution paused on another replica: it \
                 resumes here only with its answer"
                    .to_owned(),
            ));
        }
        let sealed = match (&text.journal, &text.stored) {
            (Some(journal), _) => base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(journal)
                .map_err(|_| ResumeError::Refused(UNREADABLE.to_owned()))?,
            (None, Some(token)) => self.fetch(store, &text, token).await?,
            (None, None) => {
                return Err(ResumeError::Refused(format!(
                    "the execution this answer belongs to waits in another Runbyte process \
                     (replica `{}`) and cannot resume elsewhere (its question came while other \
                     calls were in flight, or from a server's request during a call, or the \
                     state store failed when it paused): route this client's retries to that \
                     replica",
                    text.replica
                )));
            }
        };
        let code_digest = ring::digest::digest(&ring::digest::SHA256, code.as_bytes());
        let bound = self.bound(&text, code_digest.as_ref());
        let point = self
            .decrypt(&sealed, &bound)
            .map_err(ResumeError::Refused)?;
        self.claim(store, &text).await?;
        if let Some(token) = &text.stored
            && let Err(error) = store.delete(token).await
        {
            tracing::warn!("{error}; it expires on its own");
        }
        Ok(Resumed::Replay {
            point: Box::new(point),
            deadline: text.expires_at() - STATE_SLACK,
        })
    }

    /// The name of `text`'s replay claim in the store: HMAC-SHA256 of its identity.
    fn claim_name(&self, text: &StateText) -> String {
        super::hex(ring::hmac::sign(&self.claim_key, text.id().as_bytes()).as_ref())
    }

    /// A state that paused in this process: its execution, taken out of the table. With a
    /// store, a state that another replica could have replayed is claimed first: when one did,
    /// this execution must not go on too, and it is cancelled.
    async fn resume_here(&self, text: StateText) -> Result<Resumed<T>, ResumeError> {
        let waiting = {
            let mut table = self
                .waiting
                .lock()
                .map_err(|_| ResumeError::Refused("poisoned".to_owned()))?;
            table.remove(&text.key).ok_or_else(|| {
                ResumeError::Refused(
                    "the execution this answer belongs to has ended (it ran out of time, or it \
                     was already answered)"
                        .to_owned(),
                )
            })?
        };
        if let Some(store) = &self.store
            && text.replayable()
        {
            match store
                .claim(&self.claim_name(&text), text.left() + STATE_SLACK)
                .await
            {
                Ok(true) => {
                    if let Some(token) = &text.stored
                        && let Err(error) = store.delete(token).await
                    {
                        tracing::warn!("{error}; it expires on its own");
                    }
                }
                Ok(false) => {
                    waiting.cancel.cancel();
                    return Err(ResumeError::Refused(ALREADY_USED.to_owned()));
                }
                // No replica can replay it while the store fails either (its claim fails too):
                // the execution here goes on.
                Err(error) => tracing::warn!("{error}; resuming the execution where it paused"),
            }
        }
        Ok(Resumed::Here {
            key: text.key,
            waiting: Box::new(waiting),
        })
    }

    /// The sealed journal the store keeps for `text`.
    async fn fetch(
        &self,
        store: &StateStore,
        text: &StateText,
        token: &str,
    ) -> Result<Vec<u8>, ResumeError> {
        match store.get(token).await {
            Ok(Some(sealed)) => Ok(sealed),
            Ok(None) => Err(ResumeError::Refused(
                if store.claimed(&self.claim_name(text)).await.unwrap_or(false) {
                    ALREADY_USED.to_owned()
                } else {
                    format!(
                        "the journal of this execution is no longer in the state store {} (it \
                         expired, or the store lost it)",
                        store.name()
                    )
                },
            )),
            Err(error) => Err(ResumeError::Store(format!(
                "{error}; the execution can resume once it answers again"
            ))),
        }
    }

    /// Records that `text` is being replayed, in the store and in this process; refused when
    /// it was already (the process's own record holds even if someone deletes the store's).
    async fn claim(&self, store: &StateStore, text: &StateText) -> Result<(), ResumeError> {
        self.claim_here(text)?;
        match store
            .claim(&self.claim_name(text), text.left() + STATE_SLACK)
            .await
        {
            Ok(true) => Ok(()),
            Ok(false) => Err(ResumeError::Refused(ALREADY_USED.to_owned())),
            Err(error) => {
                // Not replayed after all: the same retry may come back once the store answers.
                self.unclaim_here(text);
                Err(ResumeError::Store(format!(
                    "{error}; without it Runbyte cannot make sure the execution resumes only once"
                )))
            }
        }
    }

    /// Seals `payload` as a `requestState` of Runbyte's own that names no execution: for
    /// `purpose` (authenticated with it, so a state of one purpose never opens as another's)
    /// and this replica, for `ttl`.
    pub fn seal_for(&self, purpose: &str, payload: Value, ttl: Duration) -> Result<String, String> {
        let text = serde_json::json!({"replica": self.replica, "payload": payload});
        let text = serde_json::to_vec(&text).map_err(|e| e.to_string())?;
        Ok(self.codec.seal_with(
            &text,
            &SealOptions::new()
                .ttl(ttl)
                .associated_data(purpose.as_bytes()),
        ))
    }

    /// What [`Paused::seal_for`] sealed for `purpose`. Refused: a state altered, signed with
    /// another key, of another purpose, expired, or (without a state store, where no replica
    /// could tell whether another took it) sealed by another replica.
    pub fn open_for(&self, purpose: &str, state: &str) -> Result<Value, String> {
        let payload = self.codec.open_with(state, purpose.as_bytes()).map_err(
            |error| match error {
                rmcp::model::RequestStateError::Expired => {
                    "the requestState has expired: make the call again".to_owned()
                }
                error => format!(
                    "the requestState was not issued by this Runbyte (nor a replica sharing its \
                     state-key-file) for this call, or it was altered ({error})"
                ),
            },
        )?;
        let mut text: Value = serde_json::from_slice(&payload)
            .map_err(|_| "the requestState names nothing".to_owned())?;
        if self.store.is_none() && text["replica"] != self.replica.as_str() {
            return Err(
                "the requestState was issued by another Runbyte process (or this one \
                        before it restarted), and without a [server] state-store each one \
                        takes only its own: make the call again"
                    .to_owned(),
            );
        }
        Ok(text["payload"].take())
    }

    /// Takes `id` (of a state [`Paused::seal_for`] sealed) once for `ttl`: in the state store
    /// when there is one (so once across the replicas), else in this process. `Ok(false)`:
    /// taken before.
    pub async fn take_once(&self, id: &str, ttl: Duration) -> Result<bool, String> {
        let named = format!("once/{id}");
        if let Some(store) = &self.store {
            let name = super::hex(ring::hmac::sign(&self.claim_key, named.as_bytes()).as_ref());
            return store
                .claim(&name, ttl)
                .await
                .map_err(|error| error.to_string());
        }
        let mut replayed = self.replayed.lock().map_err(|_| "poisoned".to_owned())?;
        let (seen, order) = &mut *replayed;
        if !seen.insert(named.clone()) {
            return Ok(false);
        }
        order.push_back(named);
        if order.len() > MAX_REPLAYED
            && let Some(oldest) = order.pop_front()
        {
            seen.remove(&oldest);
        }
        Ok(true)
    }

    fn unclaim_here(&self, text: &StateText) {
        if let Ok(mut replayed) = self.replayed.lock() {
            let (seen, order) = &mut *replayed;
            let id = text.id();
            seen.remove(&id);
            order.retain(|other| *other != id);
        }
    }

    /// Records in this process that `text` is being replayed.
    fn claim_here(&self, text: &StateText) -> Result<(), ResumeError> {
        let mut replayed = self
            .replayed
            .lock()
            .map_err(|_| ResumeError::Refused("poisoned".to_owned()))?;
        let (seen, order) = &mut *replayed;
        let id = text.id();
        if !seen.insert(id.clone()) {
            return Err(ResumeError::Refused(
                "this answer was already used to resume its execution here".to_owned(),
            ));
        }
        order.push_back(id);
        if order.len() > MAX_REPLAYED
            && let Some(oldest) = order.pop_front()
        {
            seen.remove(&oldest);
        }
        Ok(())
    }

    /// `point` sealed: [`JOURNAL_FORMAT`], then its JSON deflated and encrypted, with `bound`
    /// ([`Paused::bound`]) as associated data.
    fn encrypt(&self, point: &Point, bound: &[u8]) -> Result<Vec<u8>, String> {
        let json = serde_json::to_vec(point).map_err(|e| e.to_string())?;
        self.seal_deflated(miniz_oxide::deflate::compress_to_vec(&json, 6), bound)
    }

    fn seal_deflated(&self, mut sealed: Vec<u8>, bound: &[u8]) -> Result<Vec<u8>, String> {
        let mut nonce = [0u8; ring::aead::NONCE_LEN];
        getrandom::fill(&mut nonce).map_err(|e| format!("cannot make a nonce: {e}"))?;
        self.journal_key
            .seal_in_place_append_tag(
                ring::aead::Nonce::assume_unique_for_key(nonce),
                ring::aead::Aad::from(bound),
                &mut sealed,
            )
            .map_err(|_| "cannot encrypt the journal".to_owned())?;
        let mut out = Vec::with_capacity(1 + nonce.len() + sealed.len());
        out.push(JOURNAL_FORMAT);
        out.extend_from_slice(&nonce);
        out.extend_from_slice(&sealed);
        Ok(out)
    }

    fn decrypt(&self, sealed: &[u8], bound: &[u8]) -> Result<Point, String> {
        let unreadable = || UNREADABLE.to_owned();
        let Some((&format, rest)) = sealed.split_first() else {
            return Err(unreadable());
        };
        if format != JOURNAL_FORMAT {
            return Err(format!(
                "the requestState's journal is in format {format}, and this Runbyte reads format \
                 {JOURNAL_FORMAT}: a replica of another version paused it (resume it there)"
            ));
        }
        if rest.len() < ring::aead::NONCE_LEN {
            return Err(unreadable());
        }
        let (nonce, sealed) = rest.split_at(ring::aead::NONCE_LEN);
        let nonce =
            ring::aead::Nonce::try_assume_unique_for_key(nonce).map_err(|_| unreadable())?;
        let mut sealed = sealed.to_vec();
        let deflated = self
            .journal_key
            .open_in_place(nonce, ring::aead::Aad::from(bound), &mut sealed)
            .map_err(|_| {
                "the requestState's journal cannot be read: it was altered, or it belongs to \
                 another state (a journal moved in the state store)"
                    .to_owned()
            })?;
        let json =
            miniz_oxide::inflate::decompress_to_vec_with_limit(deflated, MAX_INFLATED_JOURNAL)
                .map_err(|error| match error.status {
                    miniz_oxide::inflate::TINFLStatus::HasMoreOutput => format!(
                        "the requestState's journal inflates past {} MiB: refused",
                        MAX_INFLATED_JOURNAL >> 20
                    ),
                    _ => unreadable(),
                })?;
        serde_json::from_slice(&json).map_err(|_| unreadable())
    }
}

const UNREADABLE: &str = "the requestState's journal cannot be read";

fn expired() -> String {
    format!(
        "the requestState has expired: a state lives as long as its execution (its time limit, \
         timeout-ms) and {} s more, and the execution it names has timed out",
        STATE_SLACK.as_secs()
    )
}

impl<T> Waiting<T> {
    /// A waiting execution, from now.
    pub fn new(
        question: Question,
        answer: oneshot::Sender<Result<Value, String>>,
        events: mpsc::Receiver<Event<T>>,
        cancel: CancellationToken,
        point: Option<Point>,
        deadline: SystemTime,
    ) -> Self {
        Waiting {
            question,
            answer,
            events,
            cancel,
            point,
            deadline,
            since: Instant::now(),
        }
    }
}

#[cfg(test)]
mod journal_tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;

    use super::*;
    use crate::relay::{Asking, Origin, Recorded, approval};

    fn point(results: Vec<Value>) -> Point {
        Point {
            recorded: results
                .into_iter()
                .enumerate()
                .map(|(index, result)| {
                    let recorded = Recorded {
                        server: "s".into(),
                        tool: "t".into(),
                        arguments: json!({"q": "secret-argument"}),
                        result: Ok(result),
                    };
                    (index as u64, recorded)
                })
                .collect(),
            index: 1,
            origin: Origin::InputRequired,
            asking: Asking::of("s", "t", crate::relay::digest(&json!({})), &question()),
            seed: 7,
            observed: Default::default(),
        }
    }

    fn question() -> Question {
        approval("q", "s", "t", &json!({}))
    }

    /// A journal whose sealed form is past the inline cap: 96 KiB of text that deflate cannot
    /// shrink much (base64 letters from a xorshift).
    fn large_point() -> Point {
        const LETTERS: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        let results = (0..24)
            .map(|_| {
                let text: String = (0..4096)
                    .map(|_| {
                        state ^= state << 13;
                        state ^= state >> 7;
                        state ^= state << 17;
                        LETTERS[(state % 64) as usize] as char
                    })
                    .collect();
                json!(text)
            })
            .collect();
        point(results)
    }

    fn paused(secret: &[u8], store: Option<StateStore>) -> Paused<u32> {
        Paused::new(Duration::from_secs(60), Some(secret.to_vec()), store).unwrap()
    }

    /// A minute from now: an execution with time left.
    fn soon() -> SystemTime {
        SystemTime::now() + Duration::from_secs(60)
    }

    fn asking_until(
        point: Option<Point>,
        deadline: SystemTime,
    ) -> (Waiting<u32>, CancellationToken) {
        let (answer, _answered) = oneshot::channel();
        let (_events_tx, events) = mpsc::channel(1);
        let cancel = CancellationToken::new();
        let waiting = Waiting::new(question(), answer, events, cancel.clone(), point, deadline);
        (waiting, cancel)
    }

    fn asking(point: Point) -> (Waiting<u32>, CancellationToken) {
        asking_until(Some(point), soon())
    }

    fn replayed(resumed: Result<Resumed<u32>, ResumeError>) -> Point {
        match resumed {
            Ok(Resumed::Replay { point, .. }) => *point,
            Ok(Resumed::Here { .. }) => panic!("resumed here"),
            Err(error) => panic!("{error}"),
        }
    }

    fn refused(resumed: Result<Resumed<u32>, ResumeError>) -> String {
        match resumed {
            Err(ResumeError::Refused(why)) => why,
            Err(ResumeError::Store(why)) => panic!("the store: {why}"),
            Ok(_) => panic!("resumed"),
        }
    }

    const KEY: &[u8] = b"a shared key of thirty-two bytes!";
    const BOUND: &[u8] = b"\x02the identity of a state";

    #[test]
    fn the_journal_travels_compressed_and_encrypted_and_an_altered_one_is_unreadable() {
        let paused = paused(&b"k".repeat(32), None);
        let point = point(vec![json!("secret-result"); 200]);
        let json = serde_json::to_vec(&point).unwrap();
        let sealed = paused.encrypt(&point, BOUND).unwrap();
        assert!(
            sealed.len() * 10 < json.len(),
            "{} of {}",
            sealed.len(),
            json.len()
        );
        assert_eq!(sealed[0], JOURNAL_FORMAT);
        assert!(!String::from_utf8_lossy(&sealed).contains("secret"));
        assert_eq!(paused.decrypt(&sealed, BOUND).unwrap(), point);
        let mut altered = sealed.clone();
        let last = altered.len() - 1;
        altered[last] ^= 1;
        let error = paused.decrypt(&altered, BOUND).unwrap_err();
        assert!(error.contains("cannot be read"), "{error}");
        // Sealed for one state, it does not open for another.
        let error = paused.decrypt(&sealed, b"\x02another state").unwrap_err();
        assert!(error.contains("belongs to another state"), "{error}");
        // The format byte is authenticated, and another one is refused by name: format 1, the
        // journal bound to nothing, too.
        let mut other_format = sealed.clone();
        other_format[0] = 1;
        let error = paused.decrypt(&other_format, BOUND).unwrap_err();
        assert!(error.contains("format 1"), "{error}");
        assert!(paused.decrypt(&[], BOUND).is_err());
        // Another key cannot read it.
        let other = Paused::<u32>::new(Duration::from_secs(60), Some(b"o".repeat(32)), None);
        assert!(other.unwrap().decrypt(&sealed, BOUND).is_err());
    }

    #[test]
    fn a_deflate_bomb_is_refused_before_it_inflates() {
        let paused = paused(KEY, None);
        // 16 MiB of spaces deflate to some 16 KiB (small enough to travel inline); sealed with
        // the right key, as a peer that holds the key could.
        let bomb = miniz_oxide::deflate::compress_to_vec(&vec![b' '; 16 << 20], 10);
        assert!(bomb.len() < MAX_INLINE_JOURNAL, "{}", bomb.len());
        let sealed = paused.seal_deflated(bomb, BOUND).unwrap();
        let error = paused.decrypt(&sealed, BOUND).unwrap_err();
        assert!(error.contains("inflates past 8 MiB"), "{error}");
        // Just under the bound, it inflates (and is then no journal).
        let json = miniz_oxide::deflate::compress_to_vec(&vec![b' '; MAX_INFLATED_JOURNAL], 10);
        let error = paused.decrypt(&paused.seal_deflated(json, BOUND).unwrap(), BOUND);
        assert_eq!(error.unwrap_err(), UNREADABLE);
    }

    #[tokio::test]
    async fn a_journal_past_the_inline_cap_goes_to_the_store_and_resumes_once_anywhere() {
        let store = StateStore::memory();
        let (one, two, three) = (
            paused(KEY, Some(store.clone())),
            paused(KEY, Some(store.clone())),
            paused(KEY, Some(store.clone())),
        );
        // A small journal stays in the state.
        let small = point(vec![json!(1)]);
        assert!(matches!(
            one.carry(&small, BOUND, Duration::from_secs(60))
                .await
                .unwrap(),
            Carried::Inline(_)
        ));
        let large = large_point();
        assert!(one.encrypt(&large, BOUND).unwrap().len() > MAX_INLINE_JOURNAL);
        let (waiting, cancel) = asking(large.clone());
        let state = one.pause("k1".to_owned(), waiting, "code").await.unwrap();
        assert!(state.len() < 1024, "{} bytes", state.len());
        // A retry without the answer elsewhere claims nothing: the state still replays after.
        let error = two.resume(&state, "code", false).await.err().unwrap();
        assert!(error.to_string().contains("no answer"), "{error}");
        assert_eq!(replayed(two.resume(&state, "code", true).await), large);
        // Once across the replicas: a third, and the one that paused it, refuse it.
        let error = three.resume(&state, "code", true).await.err().unwrap();
        assert!(error.to_string().contains("already used"), "{error}");
        let error = one.resume(&state, "code", true).await.err().unwrap();
        assert!(error.to_string().contains("already used"), "{error}");
        assert!(cancel.is_cancelled());
        // Resumed where it paused first, a state cannot be replayed after.
        let (waiting, _cancel) = asking(small);
        let state = one.pause("k2".to_owned(), waiting, "code").await.unwrap();
        assert!(matches!(
            one.resume(&state, "code", true).await,
            Ok(Resumed::Here { .. })
        ));
        let error = two.resume(&state, "code", true).await.err().unwrap();
        assert!(error.to_string().contains("already used"), "{error}");
    }

    #[tokio::test]
    async fn without_a_store_a_state_resumes_only_in_the_process_that_paused_it() {
        // Two processes sharing the key (two replicas, or one restarted): without a store,
        // nothing could tell the second that the first, or a third, replayed the state already.
        let (one, two) = (paused(KEY, None), paused(KEY, None));
        for point in [point(vec![json!(1)]), large_point()] {
            let (waiting, _cancel) = asking(point);
            let state = one.pause("k".to_owned(), waiting, "code").await.unwrap();
            // No journal travels at all.
            assert!(state.len() < 1024, "{} bytes", state.len());
            let error = refused(two.resume(&state, "code", true).await);
            assert!(
                error.contains("resumes only in the process that paused it")
                    && error.contains("state-store"),
                "{error}"
            );
            assert!(matches!(
                one.resume(&state, "code", true).await,
                Ok(Resumed::Here { .. })
            ));
        }
        // A replica without the store cannot replay a state another one paused with a store.
        let three = paused(KEY, Some(StateStore::memory()));
        let (waiting, _cancel) = asking(point(vec![json!(1)]));
        let state = three.pause("k".to_owned(), waiting, "code").await.unwrap();
        let error = refused(two.resume(&state, "code", true).await);
        assert!(error.contains("state-store"), "{error}");
    }

    #[tokio::test]
    async fn a_state_expires_with_its_execution() {
        let store = StateStore::memory();
        let (one, two) = (
            paused(KEY, Some(store.clone())),
            paused(KEY, Some(store.clone())),
        );
        // The replay ends when the execution it resumes would have.
        let deadline = soon();
        let (waiting, _cancel) = asking_until(Some(point(vec![json!(1)])), deadline);
        let state = one.pause("k1".to_owned(), waiting, "code").await.unwrap();
        match two.resume(&state, "code", true).await {
            Ok(Resumed::Replay { deadline: then, .. }) => {
                let off = then
                    .duration_since(deadline)
                    .unwrap_or_else(|e| e.duration());
                assert!(off < Duration::from_millis(2), "{off:?}");
            }
            _ => panic!("not replayed"),
        }
        // An execution past its deadline and the slack: refused where it paused and elsewhere,
        // saying so, and nothing is claimed.
        let past = SystemTime::now() - STATE_SLACK - Duration::from_millis(10);
        for key in ["k2", "k3"] {
            let (waiting, _cancel) = asking_until(Some(point(vec![json!(1)])), past);
            let state = one.pause(key.to_owned(), waiting, "code").await.unwrap();
            for replica in [&two, &one] {
                let error = refused(replica.resume(&state, "code", true).await);
                assert!(error.contains("has expired"), "{error}");
            }
        }
        // Within the slack, it still resumes.
        let just = SystemTime::now() - Duration::from_secs(1);
        let (waiting, _cancel) = asking_until(Some(point(vec![json!(1)])), just);
        let state = one.pause("k4".to_owned(), waiting, "code").await.unwrap();
        replayed(two.resume(&state, "code", true).await);
        // The codec's own expiry (a second past the state's) reads as expired too.
        let error = one.codec.open_with("x", b"code").err();
        assert!(error.is_some());
        let text = StateText {
            replica: "r".into(),
            key: "k".into(),
            expires: unix_ms(SystemTime::now()),
            journal: None,
            stored: None,
        };
        let sealed = one.codec.seal_with(
            &serde_json::to_vec(&text).unwrap(),
            &SealOptions::new()
                .ttl(Duration::from_millis(1))
                .associated_data(b"code"),
        );
        std::thread::sleep(Duration::from_millis(5));
        let error = refused(one.resume(&sealed, "code", true).await);
        assert!(error.contains("has expired"), "{error}");
    }

    #[tokio::test]
    async fn a_journal_moved_to_another_state_in_the_store_does_not_open() {
        let store = StateStore::memory();
        let (one, two) = (
            paused(KEY, Some(store.clone())),
            paused(KEY, Some(store.clone())),
        );
        let mut secret = large_point();
        secret.recorded.get_mut(&0).unwrap().result = Ok(json!("X's secret result"));
        let (x, _cancel) = asking(secret);
        let x = one.pause("x".to_owned(), x, "code").await.unwrap();
        let (y, _cancel) = asking(large_point());
        let y = one.pause("y".to_owned(), y, "code").await.unwrap();
        // Whoever writes to the store copies X's journal over Y's.
        store.tamper(|map| {
            let journals: Vec<Vec<u8>> = map
                .keys()
                .filter(|key| key.starts_with(b"runbyte:journal:"))
                .cloned()
                .collect();
            assert_eq!(journals.len(), 2);
            let (first, second) = (journals[0].clone(), journals[1].clone());
            let (a, b) = (map[&first].clone(), map[&second].clone());
            map.insert(first, b);
            map.insert(second, a);
        });
        for state in [&x, &y] {
            let error = refused(two.resume(state, "code", true).await);
            assert!(error.contains("belongs to another state"), "{error}");
        }
    }

    #[tokio::test]
    async fn a_deleted_claim_does_not_replay_a_state_twice_on_the_same_replica() {
        let store = StateStore::memory();
        let (one, two) = (
            paused(KEY, Some(store.clone())),
            paused(KEY, Some(store.clone())),
        );
        let (waiting, _cancel) = asking(point(vec![json!(1)]));
        let state = one.pause("k".to_owned(), waiting, "code").await.unwrap();
        replayed(two.resume(&state, "code", true).await);
        // The claim's name says nothing of the state: a keyed digest, no replica, no key.
        let mut claims = Vec::new();
        store.tamper(|map| {
            claims = map
                .keys()
                .filter(|key| key.starts_with(b"runbyte:replayed:"))
                .cloned()
                .collect();
            map.retain(|key, _| !key.starts_with(b"runbyte:replayed:"));
        });
        assert_eq!(claims.len(), 1);
        let name = String::from_utf8(claims[0]["runbyte:replayed:".len()..].to_vec()).unwrap();
        assert!(
            name.len() == 64 && name.bytes().all(|b| b.is_ascii_hexdigit()),
            "{name}"
        );
        assert!(
            !name.contains(&one.replica) && !name.contains('|'),
            "{name}"
        );
        // Deleted from the store, the claim still holds on the replica that replayed it.
        let error = refused(two.resume(&state, "code", true).await);
        assert!(error.contains("already used"), "{error}");
    }

    #[tokio::test]
    async fn a_state_names_its_replica_by_an_opaque_random_id() {
        let one = paused(KEY, None);
        let two = paused(KEY, None);
        assert_ne!(one.replica, two.replica);
        assert!(
            one.replica.len() == 24 && one.replica.bytes().all(|b| b.is_ascii_hexdigit()),
            "{}",
            one.replica
        );
        let (waiting, _cancel) = asking_until(None, soon());
        let state = one.pause("k".to_owned(), waiting, "code").await.unwrap();
        let payload = String::from_utf8(one.codec.open_with(&state, b"code").unwrap()).unwrap();
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
        let host = host.trim();
        assert!(
            host.is_empty() || !payload.contains(host),
            "{payload} names the host {host}"
        );
        assert!(
            !payload.contains(&format!("/{}/", std::process::id())),
            "{payload}"
        );
        let text: Value = serde_json::from_str(&payload).unwrap();
        assert_eq!(text["replica"], json!(one.replica), "{payload}");
    }

    #[tokio::test]
    async fn an_unreachable_store_makes_a_pause_local_and_a_replay_fail_by_its_name() {
        let down = StateStore::open("redis://127.0.0.1:1").unwrap();
        let (one, two) = (paused(KEY, Some(down.clone())), paused(KEY, Some(down)));
        let started = Instant::now();
        // Past the cap: the store fails, so the state carries no journal.
        assert!(matches!(
            one.carry(&large_point(), BOUND, Duration::from_secs(60))
                .await
                .unwrap(),
            Carried::Not
        ));
        // A small journal travels inline, but its replay cannot be claimed: refused, for now.
        let (waiting, _cancel) = asking(point(vec![json!(1)]));
        let state = one.pause("k".to_owned(), waiting, "code").await.unwrap();
        match two.resume(&state, "code", true).await {
            Err(ResumeError::Store(error)) => {
                assert!(error.contains("redis://127.0.0.1:1/0"), "{error}");
            }
            Err(other) => panic!("{other}"),
            Ok(_) => panic!("resumed"),
        }
        // Where it paused, it still resumes.
        assert!(matches!(
            one.resume(&state, "code", true).await,
            Ok(Resumed::Here { .. })
        ));
        assert!(started.elapsed() < Duration::from_secs(5));
    }
}
