//! Watches of one log share one reader: a *feed*, a thread that waits for
//! the log's new records, reads each once, encodes it once, and broadcasts
//! it to every watch of the log (each a task, not a thread). Feeds are
//! keyed by the log's id, which stays with it across renames and is never
//! another log's, as a watch follows its log across renames.
//!
//! The broadcast is a shortcut, never the source of truth. A watch keeps the
//! seq it needs next and takes a broadcast record only if it is that seq;
//! whatever it misses — the records before it joined, a record too large to
//! broadcast, a gap, records lost in the journal, a lag behind the
//! broadcast's buffer, a feed that ended — it reads from the journal itself
//! with a journal watch of its own, and so with the journal's errors. So a
//! watch delivers exactly what a watch of its own would: every seq in order,
//! no gap, no duplicate, and a slow client never holds the others back.
//!
//! Invariant: a feed is in [`Feeds`] while it runs, and it leaves only
//! under the registry's lock, when nobody receives from it, or when it ends
//! (the server stops, its watch fails). A watch joins under the same lock,
//! so it never joins a feed that is leaving unless the feed ends, which it
//! sees as a closed channel: it then joins again (starting a new feed) and
//! reads from the journal what came meanwhile.

use std::collections::hash_map::Entry;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::response::sse::Event;
use tokio::sync::broadcast::{self, error::RecvError};
use varve_log::{LogError, LogId, Seq, Watch};

use crate::app::Shared;
use crate::error::ApiError;
use crate::namespaces::Served;
use crate::wire::encode_value;

/// How often a waiting feed looks whether it still has watches and whether the server stops.
const FEED_POLL: Duration = Duration::from_millis(250);

/// Records a feed holds for watches that have not taken them yet. A watch
/// further behind is told it lagged and reads from the journal instead.
const FEED_BUFFER: usize = 256;

/// The largest record a feed broadcasts; a watch reads a larger one from
/// the journal itself. A feed's buffer thus holds at most `FEED_BUFFER`
/// such values, in base64: under 6 MiB.
const BROADCAST_VALUE_BYTES_MAX: usize = 16 << 10;

/// A catch-up reads at most this many records from the journal at once…
const CATCH_UP_RECORDS_MAX: usize = 64;
/// …or stops after about this many bytes of values, so a watch holds little.
const CATCH_UP_BYTES_MAX: usize = 1 << 20;

/// A record as a feed broadcasts it.
#[derive(Clone, Debug)]
struct Broadcast {
    seq: Seq,
    /// The value in base64; `None` when larger than
    /// [`BROADCAST_VALUE_BYTES_MAX`], or when the broadcast only marks a
    /// run of lost records that ends at `seq`.
    data: Option<Arc<str>>,
}

/// A feed's key: the namespace, and the id of the log it reads.
type FeedKey = (String, LogId);

/// The feeds running, by namespace and log.
#[derive(Default)]
pub struct Feeds {
    running: Mutex<HashMap<FeedKey, Arc<Feed>>>,
}

struct Feed {
    sender: broadcast::Sender<Broadcast>,
}

impl Feeds {
    /// The number of feeds running (one per log watched).
    pub fn running(&self) -> usize {
        self.lock().len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<FeedKey, Arc<Feed>>> {
        self.running.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Receive the broadcasts of the feed of log `id` (named `log` when
    /// the watch began), starting the feed if none runs.
    fn join(
        state: &Shared,
        served: &Arc<Served>,
        ns: &str,
        (id, log): (LogId, &str),
    ) -> Result<broadcast::Receiver<Broadcast>, ApiError> {
        let key = (ns.to_owned(), id);
        let mut running = state.feeds.lock();
        if let Entry::Occupied(feed) = running.entry(key.clone()) {
            return Ok(feed.get().sender.subscribe());
        }
        // The feed broadcasts the records after the latest; the watches read
        // those before.
        let from = served.journal().latest_id(id, log)? + 1;
        let mut watch = served.journal().watch_id(id, log, from)?;
        let (sender, receiver) = broadcast::channel(FEED_BUFFER);
        let feed = Arc::new(Feed { sender });
        running.insert(key.clone(), Arc::clone(&feed));
        drop(running);
        let (feed_state, served) = (Arc::clone(state), Arc::clone(served));
        let started = std::thread::Builder::new().name("varve-feed".into()).spawn(move || {
            let state = feed_state;
            loop {
                if state.is_stopping() {
                    break;
                }
                match watch.next_timeout(FEED_POLL) {
                    Ok(Some(record)) => {
                        let data = (record.value.len() <= BROADCAST_VALUE_BYTES_MAX)
                            .then(|| Arc::<str>::from(encode_value(&record.value)));
                        // An error here: no watch receives; it is looked into below.
                        if feed.sender.send(Broadcast { seq: record.seq, data }).is_ok() {
                            continue;
                        }
                    }
                    Ok(None) => {}
                    // A marker: each watch reads the loss from the journal.
                    Err(LogError::Lost { last, .. }) => {
                        if feed.sender.send(Broadcast { seq: last, data: None }).is_ok() {
                            continue;
                        }
                    }
                    // The log was deleted, or the feed fell behind retention:
                    // each watch finds out for itself when it catches up.
                    Err(_) => break,
                }
                if state.feeds.leave_if_unwatched(&key, &feed) {
                    break;
                }
            }
            state.feeds.leave(&key, &feed);
            drop(served);
        });
        if let Err(source) = started {
            state.feeds.lock().remove(&(ns.to_owned(), id));
            return Err(ApiError::Log(LogError::Io { context: "starting a watch's feed".into(), source }));
        }
        Ok(receiver)
    }

    /// Remove `feed` if nobody receives from it; says whether it was removed.
    fn leave_if_unwatched(&self, key: &FeedKey, feed: &Arc<Feed>) -> bool {
        let mut running = self.lock();
        if feed.sender.receiver_count() > 0 {
            return false;
        }
        if running.get(key).is_some_and(|f| Arc::ptr_eq(f, feed)) {
            running.remove(key);
        }
        true
    }

    fn leave(&self, key: &FeedKey, feed: &Arc<Feed>) {
        let mut running = self.lock();
        if running.get(key).is_some_and(|f| Arc::ptr_eq(f, feed)) {
            running.remove(key);
        }
    }
}

/// What a watch still has to read from the journal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum CatchUp {
    Nothing,
    Through(Seq),
    ToTheEnd,
}

/// One watch: the SSE events of a log from `next` on, for one client.
pub struct Subscription {
    state: Shared,
    served: Arc<Served>,
    ns: String,
    /// The log's id, and its name when the watch began (for errors).
    id: LogId,
    log: String,
    /// The watch's own journal watch, for what it reads itself; `None`
    /// only while a read has it.
    journal: Option<Watch>,
    /// The seq this watch delivers next.
    next: Seq,
    /// `None` after its feed ended, until the watch joins another.
    broadcasts: Option<broadcast::Receiver<Broadcast>>,
    /// A read from the journal to do (or go on with) before taking the next broadcast.
    catch_up: CatchUp,
    /// Events read from the journal, to send before anything else.
    ready: VecDeque<Event>,
    /// An error that ends the watch was queued: end once `ready` is sent.
    ended: bool,
}

impl Subscription {
    /// Watch `log` from `from`: joins (or starts) its feed now, so an
    /// unknown log is this call's error, not an event.
    pub fn open(state: &Shared, served: Arc<Served>, ns: &str, log: &str, from: Seq) -> Result<Subscription, ApiError> {
        let next = from.max(1);
        let id = served.journal().log_id(log)?;
        let journal = served.journal().watch_id(id, log, next)?;
        let broadcasts = Feeds::join(state, &served, ns, (id, log))?;
        // Every record appended from now on comes by the broadcast (or the
        // watch sees the gap); those before, the watch reads, unless it
        // starts past them, as a watch of new records does.
        let catch_up = if served.journal().latest_id(id, log)? < next { CatchUp::Nothing } else { CatchUp::ToTheEnd };
        state.metrics.open_watches.inc();
        Ok(Subscription {
            state: Arc::clone(state),
            served,
            ns: ns.to_owned(),
            id,
            log: log.to_owned(),
            journal: Some(journal),
            next,
            broadcasts: Some(broadcasts),
            catch_up,
            ready: VecDeque::new(),
            ended: false,
        })
    }

    /// The next event to send; `None` ends the stream (an error that ends
    /// the watch was sent, or the server stops).
    pub async fn next_event(&mut self) -> Option<Event> {
        loop {
            if let Some(event) = self.ready.pop_front() {
                return Some(event);
            }
            if self.ended || self.state.is_stopping() {
                return None;
            }
            if self.catch_up != CatchUp::Nothing {
                self.read_journal().await;
                continue;
            }
            let Some(broadcasts) = self.broadcasts.as_mut() else {
                match Feeds::join(&self.state, &self.served, &self.ns, (self.id, &self.log)) {
                    // Then the records that landed while no feed ran.
                    Ok(receiver) => (self.broadcasts, self.catch_up) = (Some(receiver), CatchUp::ToTheEnd),
                    Err(error) => {
                        self.ready.push_back(error_event(&error));
                        self.ended = true;
                    }
                }
                continue;
            };
            match broadcasts.recv().await {
                Ok(record) if record.seq < self.next => {}
                Ok(Broadcast { seq, data: Some(data) }) if seq == self.next => {
                    self.next += 1;
                    return Some(record_event(seq, &data));
                }
                // A gap before it, lost records, or a record too large to broadcast.
                Ok(record) => self.catch_up = CatchUp::Through(record.seq),
                Err(RecvError::Lagged(_)) => {
                    self.state.metrics.watch_lags.inc();
                    self.catch_up = CatchUp::ToTheEnd;
                }
                Err(RecvError::Closed) => self.broadcasts = None,
            }
        }
    }

    /// Read one batch of the catch-up from the journal, from `next`, into
    /// `ready`; the catch-up is done when the batch was not cut short by its
    /// bounds.
    async fn read_journal(&mut self) {
        let through = match self.catch_up {
            CatchUp::Through(seq) => Some(seq),
            CatchUp::ToTheEnd | CatchUp::Nothing => None,
        };
        let Some(mut watch) = self.journal.take() else {
            debug_assert!(false, "the journal watch is back after every read");
            self.ended = true;
            return;
        };
        watch.skip_to(self.next);
        let read = tokio::task::spawn_blocking(move || {
            let batch = read_from_journal(&mut watch, through);
            (watch, batch)
        })
        .await;
        match read {
            Ok((watch, batch)) => {
                self.journal = Some(watch);
                self.next = batch.next;
                self.ready.extend(batch.events);
                self.ended |= batch.ended;
                if !batch.cut_short {
                    self.catch_up = CatchUp::Nothing;
                }
            }
            Err(join_error) => {
                let error = LogError::Io {
                    context: format!("reading log {:?} for a watch", self.log),
                    source: std::io::Error::other(join_error.to_string()),
                };
                self.ready.push_back(error_event(&ApiError::Log(error)));
                self.ended = true;
            }
        }
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        self.state.metrics.open_watches.dec();
    }
}

/// What one catch-up read.
struct Batch {
    events: Vec<Event>,
    /// The seq to deliver after them.
    next: Seq,
    /// The last event is an error that ends the watch.
    ended: bool,
    /// The batch stopped at its bounds, not at `through` or the log's end.
    cut_short: bool,
}

/// Read on with `watch` (the watch's own): records up to `through` or the
/// log's end, at most [`CATCH_UP_RECORDS_MAX`] of them or about
/// [`CATCH_UP_BYTES_MAX`] bytes. A run of lost records is an error event
/// and the read goes on; any other error (the log deleted, the watch behind
/// retention) is an error event that ends the watch.
fn read_from_journal(watch: &mut Watch, through: Option<Seq>) -> Batch {
    let mut batch = Batch { events: Vec::new(), next: watch.next_seq(), ended: false, cut_short: false };
    let mut bytes = 0;
    loop {
        if through.is_some_and(|through| watch.next_seq() > through) {
            break;
        }
        if batch.events.len() >= CATCH_UP_RECORDS_MAX || bytes >= CATCH_UP_BYTES_MAX {
            batch.cut_short = true;
            break;
        }
        match watch.next_timeout(Duration::ZERO) {
            Ok(Some(record)) => {
                bytes += record.value.len();
                batch.events.push(record_event(record.seq, &encode_value(&record.value)));
            }
            Ok(None) => break,
            Err(error) => {
                let go_on = matches!(error, LogError::Lost { .. });
                batch.events.push(error_event(&ApiError::Log(error)));
                if !go_on {
                    batch.ended = true;
                    break;
                }
            }
        }
    }
    batch.next = watch.next_seq();
    batch
}

fn record_event(seq: Seq, data: &str) -> Event {
    Event::default().id(seq.to_string()).event("record").data(data)
}

fn error_event(error: &ApiError) -> Event {
    Event::default().event("error").data(error.to_json().to_string())
}
