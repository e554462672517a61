//! `[server] state-store`: a Redis that the replicas behind one balancer share, for what a paused
//! execution's `requestState` cannot carry and for what one process cannot know.
//!
//! - A journal too large to travel inline (see [`crate::relay::Paused`]) is kept here, already
//!   encrypted (the store never sees a tool's arguments or results), under a random key that
//!   expires with the state; the state carries only that key.
//! - "This state was replayed" is a claim here (`SET runbyte:replayed:<id> 1 NX EX <ttl>`), so
//!   that a state resumes once across every replica, not once per process. The id is a keyed
//!   digest (HMAC-SHA256 under a key derived from the state key) of the state's identity: the
//!   store never learns which replica or execution a claim is for, and whoever writes to it
//!   cannot compute the claim of a state it has not seen claimed. Both live only as long as
//!   the state (its execution's time limit plus a few seconds).
//!
//! Every operation is bounded: [`CONNECT_TIMEOUT`] to connect, [`COMMAND_TIMEOUT`] per command;
//! an unreachable store is an error that names it, never a wait. One multiplexed connection is
//! made on first use and shared by every request; one that breaks is dropped and made again by a
//! later operation, no sooner than [`RETRY_AFTER`] after a failed attempt (a store that is down
//! costs a pause one quick failure, not a connect timeout each time).

use std::{
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use redis::{AsyncConnectionConfig, Value, aio::MultiplexedConnection};

/// The longest a connection to the store may take to open.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// The longest one command may wait for its answer.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(2);
/// How long after a failed connection attempt operations fail at once instead of trying again.
const RETRY_AFTER: Duration = Duration::from_secs(1);
/// The most of a kept journal that is read back: a store that holds more under a token (it was
/// not written by a replica: the recorder stops at 256 KiB of JSON) cannot make a replica read
/// more than this into memory.
pub const MAX_KEPT_JOURNAL: usize = 8 << 20;
/// Where journals are kept, by random token.
const JOURNAL_PREFIX: &str = "runbyte:journal:";
/// Where "replayed" claims are made, by a keyed digest of the state's identity.
const REPLAYED_PREFIX: &str = "runbyte:replayed:";
/// How many times [`StateStore::update_pins`] reads and writes again when another writer
/// wrote first.
pub const SWAP_ATTEMPTS: usize = 16;
/// Where a server's pins (and held definitions) are kept, one key per server.
const PINS_PREFIX: &str = "runbyte:pins:";
/// The most of a server's pins that is read back (as [`crate::pins::MAX_FILE_BYTES`]).
pub const MAX_KEPT_PINS: usize = 16 << 20;
/// Where a task run by an execution is recorded (its state, its owner and, once done, its
/// result), by its id.
const TASK_PREFIX: &str = "runbyte:task:";
/// Where a `tasks/cancel` sent to a replica that does not run the task is left for the one
/// that does, by the task's id.
const TASK_CANCEL_PREFIX: &str = "runbyte:task-cancel:";
/// The most of a task's record that is kept or read back: a result larger than this stays
/// only in the process that ran it.
pub const MAX_KEPT_TASK: usize = 1 << 20;
/// Sets `KEYS[1]` to `ARGV[3]` only if it still holds what was read: nothing when `ARGV[1]` is
/// `0`, else `ARGV[2]`. Answers 1 when it was set, 0 when another writer came first.
const SWAP_SCRIPT: &str = "local now = redis.call('GET', KEYS[1]) \
if (ARGV[1] == '0' and now == false) or (ARGV[1] == '1' and now == ARGV[2]) then \
redis.call('SET', KEYS[1], ARGV[3]) return 1 end return 0";

/// The SHA-1 of a server's pins key, computed by the store, `absent` without one: what a
/// replica polls, so that the pins travel only when they changed. (SHA-1 tells a change from
/// none here; whoever could forge a collision could write the key anyway.)
const PINS_DIGEST_SCRIPT: &str = "local now = redis.call('GET', KEYS[1]) \
if now == false then return 'absent' end return redis.sha1hex(now)";

/// A store operation that failed: the store (its address, never its password), what was being
/// done, and why.
#[derive(Debug, Clone, thiserror::Error)]
#[error("the state store {store} {doing}: {why}")]
pub struct StoreError {
    store: String,
    doing: &'static str,
    why: String,
}

/// The shared store. Cheap to clone: clones share the connection.
#[derive(Clone)]
pub struct StateStore {
    inner: Arc<Inner>,
}

struct Inner {
    /// `redis://host:port/db`, without credentials: for logs and errors.
    name: String,
    backend: Backend,
}

enum Backend {
    Redis {
        client: redis::Client,
        link: Mutex<Link>,
    },
    /// A map that answers the few commands used here, for unit tests.
    #[cfg(test)]
    Memory(Mutex<std::collections::HashMap<Vec<u8>, Vec<u8>>>),
}

/// The state of the one connection, behind one lock (never held across I/O).
enum Link {
    Idle,
    Up(MultiplexedConnection),
    Down(Instant),
}

/// Whether `url` can name a state store; the error says why not (without the URL's password).
pub fn check_url(url: &str) -> Result<(), String> {
    open_client(url).map(|_| ())
}

fn open_client(url: &str) -> Result<(redis::Client, String), String> {
    let scheme = url.split_once("://").map(|(scheme, _)| scheme);
    match scheme.map(str::to_ascii_lowercase).as_deref() {
        Some("redis") => {}
        Some("rediss") => {
            return Err(format!(
                "`{}`: TLS to Redis (rediss://) is not built into Runbyte; use redis:// on a \
                 private network, or a TLS tunnel to the store",
                without_password(url)
            ));
        }
        _ => {
            return Err(format!(
                "`{}` is not a redis:// URL (redis://host:port[/db])",
                without_password(url)
            ));
        }
    }
    let client = redis::Client::open(url)
        .map_err(|e| format!("`{}` is not a usable Redis URL: {e}", without_password(url)))?;
    let info = client.get_connection_info();
    let name = format!("redis://{}/{}", info.addr(), info.redis_settings().db());
    Ok((client, name))
}

/// `url` with any `user:password@` taken out.
fn without_password(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => format!("{scheme}://{}", &rest[at + 1..]),
        None => url.to_owned(),
    }
}

impl StateStore {
    /// A store at `url` (`redis://[user:password@]host[:port][/db]`). Nothing connects until the
    /// first operation.
    pub fn open(url: &str) -> Result<StateStore, String> {
        let (client, name) = open_client(url)?;
        Ok(StateStore {
            inner: Arc::new(Inner {
                name,
                backend: Backend::Redis {
                    client,
                    link: Mutex::new(Link::Idle),
                },
            }),
        })
    }

    /// Changes an in-memory store's keys and values as whoever can write to a store could.
    #[cfg(test)]
    pub fn tamper(&self, change: impl FnOnce(&mut std::collections::HashMap<Vec<u8>, Vec<u8>>)) {
        if let Backend::Memory(map) = &self.inner.backend {
            change(&mut map.lock().unwrap_or_else(|p| p.into_inner()));
        }
    }

    /// An in-memory store, for unit tests.
    #[cfg(test)]
    pub fn memory() -> StateStore {
        StateStore {
            inner: Arc::new(Inner {
                name: "memory://test".to_owned(),
                backend: Backend::Memory(Mutex::default()),
            }),
        }
    }

    /// The store's address, without credentials.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// Keeps `sealed` for `ttl`; the random token that finds it again.
    pub async fn put(&self, sealed: &[u8], ttl: Duration) -> Result<String, StoreError> {
        let token = random_token().map_err(|why| self.error("could not keep a journal", why))?;
        let mut command = redis::cmd("SET");
        command
            .arg(format!("{JOURNAL_PREFIX}{token}"))
            .arg(sealed)
            .arg("EX")
            .arg(ttl.as_secs().max(1));
        match self.send("could not keep a journal", &command).await? {
            Value::Okay => Ok(token),
            other => Err(self.unexpected("could not keep a journal", &other)),
        }
    }

    /// What [`StateStore::put`] kept under `token`; `None` once it expired or was deleted.
    /// At most [`MAX_KEPT_JOURNAL`] bytes are read (`GETRANGE`); more is an error.
    pub async fn get(&self, token: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let mut command = redis::cmd("GETRANGE");
        command
            .arg(format!("{JOURNAL_PREFIX}{token}"))
            .arg(0)
            .arg(MAX_KEPT_JOURNAL);
        match self.send("could not read a journal", &command).await? {
            // A missing key reads as empty; a kept journal never is.
            Value::BulkString(bytes) if bytes.is_empty() => Ok(None),
            Value::BulkString(bytes) if bytes.len() > MAX_KEPT_JOURNAL => Err(self.error(
                "could not read a journal",
                format!("it holds more than {MAX_KEPT_JOURNAL} bytes, which no replica writes"),
            )),
            Value::BulkString(bytes) => Ok(Some(bytes)),
            Value::Nil => Ok(None),
            other => Err(self.unexpected("could not read a journal", &other)),
        }
    }

    /// Deletes what [`StateStore::put`] kept under `token` (nothing if it is gone already).
    pub async fn delete(&self, token: &str) -> Result<(), StoreError> {
        let mut command = redis::cmd("DEL");
        command.arg(format!("{JOURNAL_PREFIX}{token}"));
        self.send("could not delete a journal", &command)
            .await
            .map(|_| ())
    }

    /// Claims `id` for `ttl`: `true` for the first claim, `false` when it was claimed already
    /// (by this or any other process sharing the store).
    pub async fn claim(&self, id: &str, ttl: Duration) -> Result<bool, StoreError> {
        let mut command = redis::cmd("SET");
        command
            .arg(format!("{REPLAYED_PREFIX}{id}"))
            .arg(1)
            .arg("NX")
            .arg("EX")
            .arg(ttl.as_secs().max(1));
        match self.send("could not record a resumption", &command).await? {
            Value::Okay => Ok(true),
            Value::Nil => Ok(false),
            other => Err(self.unexpected("could not record a resumption", &other)),
        }
    }

    /// Whether `id` was claimed.
    pub async fn claimed(&self, id: &str) -> Result<bool, StoreError> {
        let mut command = redis::cmd("EXISTS");
        command.arg(format!("{REPLAYED_PREFIX}{id}"));
        match self
            .send("could not look up a resumption", &command)
            .await?
        {
            Value::Int(count) => Ok(count > 0),
            other => Err(self.unexpected("could not look up a resumption", &other)),
        }
    }

    /// What is kept under `server`'s pins key; `None` when nothing is. At most
    /// [`MAX_KEPT_PINS`] bytes are read; more is an error.
    pub async fn pins(&self, server: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let mut command = redis::cmd("GETRANGE");
        command
            .arg(format!("{PINS_PREFIX}{server}"))
            .arg(0)
            .arg(MAX_KEPT_PINS);
        match self.send("could not read the pins", &command).await? {
            // A missing key reads as empty; kept pins never are.
            Value::BulkString(bytes) if bytes.is_empty() => Ok(None),
            Value::BulkString(bytes) if bytes.len() > MAX_KEPT_PINS => Err(self.error(
                "could not read the pins",
                format!("they are more than {MAX_KEPT_PINS} bytes, which no replica writes"),
            )),
            Value::BulkString(bytes) => Ok(Some(bytes)),
            Value::Nil => Ok(None),
            other => Err(self.unexpected("could not read the pins", &other)),
        }
    }

    /// The SHA-1 of what is kept under `server`'s pins key, in lower-case hex, computed by the
    /// store; `absent` when nothing is.
    pub async fn pins_digest(&self, server: &str) -> Result<String, StoreError> {
        let mut command = redis::cmd("EVAL");
        command
            .arg(PINS_DIGEST_SCRIPT)
            .arg(1)
            .arg(format!("{PINS_PREFIX}{server}"));
        match self.send("could not look at the pins", &command).await? {
            Value::BulkString(bytes) => String::from_utf8(bytes)
                .map_err(|_| self.error("could not look at the pins", "not text".to_owned())),
            Value::SimpleString(text) => Ok(text),
            other => Err(self.unexpected("could not look at the pins", &other)),
        }
    }

    /// Sets `server`'s pins to `new` if they are still `read` (`None`: nothing was kept), in
    /// one step on the store: `true` when set, `false` when another writer came first.
    pub async fn swap_pins(
        &self,
        server: &str,
        read: Option<&[u8]>,
        new: &[u8],
    ) -> Result<bool, StoreError> {
        let mut command = redis::cmd("EVAL");
        command
            .arg(SWAP_SCRIPT)
            .arg(1)
            .arg(format!("{PINS_PREFIX}{server}"))
            .arg(if read.is_some() { "1" } else { "0" })
            .arg(read.unwrap_or_default())
            .arg(new);
        match self.send("could not write the pins", &command).await? {
            Value::Int(1) => Ok(true),
            Value::Int(0) => Ok(false),
            other => Err(self.unexpected("could not write the pins", &other)),
        }
    }

    /// Reads `server`'s pins, lets `change` make new ones from them, and writes those if no
    /// other writer wrote meanwhile; read again and changed again otherwise, at most
    /// [`SWAP_ATTEMPTS`] times. `change` answers `None` when there is nothing to write. What
    /// another writer wrote is never lost: a write that keeps losing is an error.
    pub async fn update_pins<R>(
        &self,
        server: &str,
        mut change: impl FnMut(Option<&[u8]>) -> Result<(Option<Vec<u8>>, R), String>,
    ) -> Result<R, StoreError> {
        for _ in 0..SWAP_ATTEMPTS {
            let read = self.pins(server).await?;
            let (new, answer) =
                change(read.as_deref()).map_err(|why| self.error("could not use the pins", why))?;
            let Some(new) = new else {
                return Ok(answer);
            };
            if self.swap_pins(server, read.as_deref(), &new).await? {
                return Ok(answer);
            }
            // Another writer came first: a moment for it to finish, then read what it wrote.
            tokio::task::yield_now().await;
        }
        Err(self.error(
            "could not write the pins",
            format!("other writers wrote first {SWAP_ATTEMPTS} times in a row"),
        ))
    }

    /// Forgets `server`'s pins (`runbyte pins reset`): its next listing is pinned anew.
    pub async fn forget_pins(&self, server: &str) -> Result<(), StoreError> {
        let mut command = redis::cmd("DEL");
        command.arg(format!("{PINS_PREFIX}{server}"));
        self.send("could not forget the pins", &command)
            .await
            .map(|_| ())
    }

    /// Records task `id` as `record` (at most [`MAX_KEPT_TASK`] bytes: the caller keeps to
    /// it) for `ttl`.
    pub async fn put_task(&self, id: &str, record: &[u8], ttl: Duration) -> Result<(), StoreError> {
        let mut command = redis::cmd("SET");
        command
            .arg(format!("{TASK_PREFIX}{id}"))
            .arg(record)
            .arg("EX")
            .arg(ttl.as_secs().max(1));
        match self.send("could not record a task", &command).await? {
            Value::Okay => Ok(()),
            other => Err(self.unexpected("could not record a task", &other)),
        }
    }

    /// Task `id`'s record; `None` when there is none (never one, or expired). At most
    /// [`MAX_KEPT_TASK`] bytes are read; more is an error.
    pub async fn task(&self, id: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let mut command = redis::cmd("GETRANGE");
        command
            .arg(format!("{TASK_PREFIX}{id}"))
            .arg(0)
            .arg(MAX_KEPT_TASK);
        match self.send("could not read a task", &command).await? {
            Value::BulkString(bytes) if bytes.is_empty() => Ok(None),
            Value::BulkString(bytes) if bytes.len() > MAX_KEPT_TASK => Err(self.error(
                "could not read a task",
                format!("it holds more than {MAX_KEPT_TASK} bytes, which no replica writes"),
            )),
            Value::BulkString(bytes) => Ok(Some(bytes)),
            Value::Nil => Ok(None),
            other => Err(self.unexpected("could not read a task", &other)),
        }
    }

    /// Asks whichever replica runs task `id` to cancel it (it looks every second), for `ttl`.
    pub async fn cancel_task(&self, id: &str, ttl: Duration) -> Result<(), StoreError> {
        let mut command = redis::cmd("SET");
        command
            .arg(format!("{TASK_CANCEL_PREFIX}{id}"))
            .arg(1)
            .arg("EX")
            .arg(ttl.as_secs().max(1));
        match self.send("could not cancel a task", &command).await? {
            Value::Okay => Ok(()),
            other => Err(self.unexpected("could not cancel a task", &other)),
        }
    }

    /// Whether a replica asked to cancel task `id` ([`StateStore::cancel_task`]).
    pub async fn task_cancelled(&self, id: &str) -> Result<bool, StoreError> {
        let mut command = redis::cmd("EXISTS");
        command.arg(format!("{TASK_CANCEL_PREFIX}{id}"));
        match self
            .send("could not look up a task's cancel", &command)
            .await?
        {
            Value::Int(count) => Ok(count > 0),
            other => Err(self.unexpected("could not look up a task's cancel", &other)),
        }
    }

    /// Whether the store answers.
    pub async fn ping(&self) -> Result<(), StoreError> {
        self.send("did not answer", &redis::cmd("PING"))
            .await
            .map(|_| ())
    }

    fn error(&self, doing: &'static str, why: impl Into<String>) -> StoreError {
        StoreError {
            store: self.inner.name.clone(),
            doing,
            why: why.into(),
        }
    }

    fn unexpected(&self, doing: &'static str, value: &Value) -> StoreError {
        self.error(doing, format!("unexpected answer {value:?}"))
    }

    /// Sends one command, bounded in time.
    async fn send(&self, doing: &'static str, command: &redis::Cmd) -> Result<Value, StoreError> {
        let (client, link) = match &self.inner.backend {
            Backend::Redis { client, link } => (client, link),
            #[cfg(test)]
            Backend::Memory(map) => return Ok(memory_answer(map, command)),
        };
        let mut connection = self.connection(client, link, doing).await?;
        let answer = tokio::time::timeout(
            COMMAND_TIMEOUT,
            command.query_async::<Value>(&mut connection),
        )
        .await;
        match answer {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(error)) => {
                if error.is_io_error()
                    || error.is_timeout()
                    || error.is_connection_dropped()
                    || error.is_unrecoverable_error()
                {
                    forget(link, Link::Idle);
                }
                Err(self.error(doing, error.to_string()))
            }
            Err(_) => {
                forget(link, Link::Idle);
                Err(self.error(
                    doing,
                    format!("no answer within {} s", COMMAND_TIMEOUT.as_secs()),
                ))
            }
        }
    }

    /// The shared connection, opened when there is none (the lock is not held while it opens:
    /// two requests may open one each, and the last one kept wins).
    async fn connection(
        &self,
        client: &redis::Client,
        link: &Mutex<Link>,
        doing: &'static str,
    ) -> Result<MultiplexedConnection, StoreError> {
        {
            let link = link
                .lock()
                .map_err(|_| self.error(doing, "its connection's lock is poisoned"))?;
            match &*link {
                Link::Up(connection) => return Ok(connection.clone()),
                Link::Down(since) if since.elapsed() < RETRY_AFTER => {
                    return Err(self.error(
                        doing,
                        "it could not be reached a moment ago (Runbyte tries again within a second)",
                    ));
                }
                _ => {}
            }
        }
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(CONNECT_TIMEOUT))
            .set_response_timeout(Some(COMMAND_TIMEOUT));
        // The client's own timeout covers resolving, connecting and the handshake; this one is
        // there in case a later version of the crate stops doing so.
        let opened = tokio::time::timeout(
            CONNECT_TIMEOUT,
            client.get_multiplexed_async_connection_with_config(&config),
        )
        .await;
        let failed = |why: String| {
            forget(link, Link::Down(Instant::now()));
            self.error(doing, format!("it cannot be reached ({why})"))
        };
        match opened {
            Ok(Ok(connection)) => {
                if let Ok(mut link) = link.lock() {
                    *link = Link::Up(connection.clone());
                }
                Ok(connection)
            }
            Ok(Err(error)) => Err(failed(error.to_string())),
            Err(_) => Err(failed(format!(
                "no connection within {} s",
                CONNECT_TIMEOUT.as_secs()
            ))),
        }
    }
}

fn forget(link: &Mutex<Link>, now: Link) {
    if let Ok(mut link) = link.lock() {
        *link = now;
    }
}

/// 16 random bytes in hex.
fn random_token() -> Result<String, String> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(|e| format!("cannot make a key: {e}"))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// What a Redis would answer to the commands [`StateStore`] sends (expiry aside).
#[cfg(test)]
fn memory_answer(
    map: &Mutex<std::collections::HashMap<Vec<u8>, Vec<u8>>>,
    command: &redis::Cmd,
) -> Value {
    let args: Vec<Vec<u8>> = command
        .args_iter()
        .filter_map(|arg| match arg {
            redis::Arg::Simple(bytes) => Some(bytes.to_vec()),
            _ => None,
        })
        .collect();
    let Ok(mut map) = map.lock() else {
        return Value::Nil;
    };
    match args.first().map(Vec::as_slice) {
        Some(b"SET") => {
            let only_new = args.iter().any(|arg| arg == b"NX");
            if only_new && map.contains_key(&args[1]) {
                return Value::Nil;
            }
            map.insert(args[1].clone(), args[2].clone());
            Value::Okay
        }
        Some(b"GETRANGE") => {
            let end = std::str::from_utf8(&args[3])
                .ok()
                .and_then(|end| end.parse::<usize>().ok())
                .unwrap_or(0);
            let kept = map.get(&args[1]).cloned().unwrap_or_default();
            Value::BulkString(kept[..kept.len().min(end + 1)].to_vec())
        }
        Some(b"EVAL") if args[1] == PINS_DIGEST_SCRIPT.as_bytes() => {
            Value::BulkString(match map.get(&args[3]) {
                Some(now) => super::pins::sha1_hex(now).into_bytes(),
                None => b"absent".to_vec(),
            })
        }
        Some(b"EVAL") => {
            // SWAP_SCRIPT: script, 1, key, whether read, read, new.
            let now = map.get(&args[3]);
            let same = match args[4].as_slice() {
                b"0" => now.is_none(),
                _ => now == Some(&args[5]),
            };
            if same {
                map.insert(args[3].clone(), args[6].clone());
            }
            Value::Int(i64::from(same))
        }
        Some(b"DEL") => Value::Int(i64::from(map.remove(&args[1]).is_some())),
        Some(b"EXISTS") => Value::Int(i64::from(map.contains_key(&args[1]))),
        _ => Value::SimpleString("PONG".to_owned()),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn only_redis_urls_are_taken_and_passwords_are_never_shown() {
        assert!(check_url("redis://127.0.0.1:6379/2").is_ok());
        assert!(check_url("redis://:s3cret@cache.internal").is_ok());
        let store = StateStore::open("redis://user:s3cret@cache.internal:6380/1").unwrap();
        assert_eq!(store.name(), "redis://cache.internal:6380/1");
        let error = check_url("rediss://:s3cret@cache.internal").unwrap_err();
        assert!(
            error.contains("TLS") && !error.contains("s3cret"),
            "{error}"
        );
        let error = check_url("http://:s3cret@cache.internal").unwrap_err();
        assert!(
            error.contains("not a redis://") && !error.contains("s3cret"),
            "{error}"
        );
        assert!(check_url("cache.internal:6379").is_err());
    }

    #[tokio::test]
    async fn an_unreachable_store_fails_quickly_and_names_itself() {
        // Nothing listens on port 1 of the loopback address: refused at once.
        let store = StateStore::open("redis://127.0.0.1:1").unwrap();
        let started = Instant::now();
        let error = store.put(b"x", Duration::from_secs(5)).await.unwrap_err();
        assert!(
            error.to_string().contains("redis://127.0.0.1:1/0"),
            "{error}"
        );
        // Within RETRY_AFTER, the next operation does not try again.
        let error = store.claim("id", Duration::from_secs(5)).await.unwrap_err();
        assert!(error.to_string().contains("a moment ago"), "{error}");
        assert!(started.elapsed() < CONNECT_TIMEOUT * 2);
    }

    #[tokio::test]
    async fn the_memory_store_answers_like_redis() {
        let store = StateStore::memory();
        let token = store.put(b"sealed", Duration::from_secs(5)).await.unwrap();
        assert_eq!(store.get(&token).await.unwrap().unwrap(), b"sealed");
        store.delete(&token).await.unwrap();
        assert!(store.get(&token).await.unwrap().is_none());
        assert!(!store.claimed("r|k").await.unwrap());
        assert!(store.claim("r|k", Duration::from_secs(5)).await.unwrap());
        assert!(!store.claim("r|k", Duration::from_secs(5)).await.unwrap());
        assert!(store.claimed("r|k").await.unwrap());
        store.ping().await.unwrap();
    }

    #[tokio::test]
    async fn a_task_record_and_its_cancel_are_kept_and_an_oversized_one_refused() {
        let store = StateStore::memory();
        let ttl = Duration::from_secs(60);
        assert_eq!(store.task("t1").await.unwrap(), None);
        store.put_task("t1", b"{}", ttl).await.unwrap();
        assert_eq!(store.task("t1").await.unwrap().as_deref(), Some(&b"{}"[..]));
        assert!(!store.task_cancelled("t1").await.unwrap());
        store.cancel_task("t1", ttl).await.unwrap();
        assert!(store.task_cancelled("t1").await.unwrap());
        assert!(!store.task_cancelled("t2").await.unwrap());
        store
            .put_task("t2", &vec![b'x'; MAX_KEPT_TASK + 10], ttl)
            .await
            .unwrap();
        let error = store.task("t2").await.unwrap_err().to_string();
        assert!(error.contains("more than 1048576 bytes"), "{error}");
    }

    #[tokio::test]
    async fn a_kept_journal_is_read_back_whole_and_an_oversized_one_is_refused() {
        let store = StateStore::memory();
        let ttl = Duration::from_secs(60);
        let token = store.put(b"sealed", ttl).await.unwrap();
        assert_eq!(
            store.get(&token).await.unwrap().as_deref(),
            Some(&b"sealed"[..])
        );
        assert_eq!(store.get("no-such-token").await.unwrap(), None);
        // What no replica writes (a store written by someone else): refused, not read whole.
        let huge = vec![7u8; MAX_KEPT_JOURNAL + 100];
        let token = store.put(&huge, ttl).await.unwrap();
        let error = store.get(&token).await.unwrap_err().to_string();
        assert!(error.contains("more than 8388608 bytes"), "{error}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn concurrent_pins_writers_lose_nothing_through_the_compare_and_set() {
        let store = StateStore::memory();
        let (writers, each) = (8, 25);
        let tasks: Vec<_> = (0..writers)
            .map(|writer| {
                let store = store.clone();
                tokio::spawn(async move {
                    let mut written = Vec::new();
                    for n in 0..each {
                        let name = format!("w{writer}-{n}");
                        let added = store
                            .update_pins("t", |read| {
                                let mut names: Vec<String> = match read {
                                    Some(bytes) => serde_json::from_slice(bytes).unwrap(),
                                    None => Vec::new(),
                                };
                                names.push(name.clone());
                                Ok((Some(serde_json::to_vec(&names).unwrap()), ()))
                            })
                            .await;
                        if added.is_ok() {
                            written.push(name);
                        }
                        tokio::task::yield_now().await;
                    }
                    written
                })
            })
            .collect();
        let mut written = Vec::new();
        for task in tasks {
            written.extend(task.await.unwrap());
        }
        let kept: Vec<String> =
            serde_json::from_slice(&store.pins("t").await.unwrap().unwrap()).unwrap();
        let mut sorted = kept.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), kept.len(), "a write was applied twice");
        written.sort();
        // Every write that was acknowledged is kept, and nothing else.
        assert_eq!(sorted, written);
        assert!(
            written.len() * 2 >= writers * each,
            "{} written",
            written.len()
        );
    }

    #[tokio::test]
    async fn a_pins_swap_sets_only_over_what_was_read() {
        let store = StateStore::memory();
        assert!(store.swap_pins("t", None, b"one").await.unwrap());
        // Written over by someone who read nothing: refused.
        assert!(!store.swap_pins("t", None, b"two").await.unwrap());
        assert!(!store.swap_pins("t", Some(b"old"), b"two").await.unwrap());
        assert!(store.swap_pins("t", Some(b"one"), b"two").await.unwrap());
        assert_eq!(store.pins("t").await.unwrap().as_deref(), Some(&b"two"[..]));
        assert_eq!(store.pins("other").await.unwrap(), None);
    }

    /// A `redis-server` of this test's own on a free loopback port, stopped when dropped;
    /// `None` when none is installed.
    struct Redis(std::process::Child, u16);

    impl Redis {
        fn start() -> Option<Redis> {
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .ok()?
                .local_addr()
                .ok()?
                .port();
            let child = std::process::Command::new("redis-server")
                .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
                .args(["--save", "", "--appendonly", "no"])
                .stdout(std::process::Stdio::null())
                .spawn()
                .ok()?;
            Some(Redis(child, port))
        }
    }

    impl Drop for Redis {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_real_redis_swaps_pins_only_over_what_was_read() {
        let Some(redis) = Redis::start() else {
            eprintln!("no redis-server: skipped");
            return;
        };
        let store = StateStore::open(&format!("redis://127.0.0.1:{}", redis.1)).unwrap();
        let started = Instant::now();
        while store.ping().await.is_err() {
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "redis never answered"
            );
            tokio::time::sleep(Duration::from_millis(1100)).await;
        }
        assert_eq!(store.pins("t").await.unwrap(), None);
        assert!(store.swap_pins("t", None, b"one").await.unwrap());
        assert!(!store.swap_pins("t", None, b"two").await.unwrap());
        assert!(!store.swap_pins("t", Some(b"old"), b"two").await.unwrap());
        assert!(store.swap_pins("t", Some(b"one"), b"two").await.unwrap());
        assert_eq!(store.pins("t").await.unwrap().as_deref(), Some(&b"two"[..]));
        let writers: Vec<_> = (0..8)
            .map(|writer| {
                let store = store.clone();
                tokio::spawn(async move {
                    store
                        .update_pins("u", |read| {
                            let mut kept = read.map(<[u8]>::to_vec).unwrap_or_default();
                            kept.push(b'a' + writer);
                            Ok((Some(kept), ()))
                        })
                        .await
                })
            })
            .collect();
        for writer in writers {
            writer.await.unwrap().unwrap();
        }
        let mut kept = store.pins("u").await.unwrap().unwrap();
        kept.sort_unstable();
        assert_eq!(kept, b"abcdefgh");
    }
}
