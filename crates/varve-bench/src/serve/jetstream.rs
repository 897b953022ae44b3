//! The JetStream baseline: publishes to one stream of a `nats-server` on
//! the same machine, through the `async-nats` client, on a tokio runtime of
//! the benchmark's own.
//!
//! The stream is what a Varve log is closest to: one subject, R=1 (a single
//! server), file storage. A publish counts once its ack has come back (the
//! server stored the message, fsynced or not as its `sync_interval` says):
//! the analogue of an acknowledged append. Two shapes, as for Varve:
//! - one publish, then wait for its ack (the analogue of one `append`);
//! - [`BATCH_RECORDS`](super::measure::BATCH_RECORDS) publishes sent back
//!   to back, then wait for their acks (pipelined, the analogue of one
//!   `append_batch`; JetStream's atomic batches need `allow_atomic` and a
//!   batch publisher async-nats does not have, and are not what a client
//!   that wants speed uses).

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_nats::jetstream::{self, stream};
use bytes::Bytes;
use tokio::runtime::Runtime;
use tokio::sync::Barrier;

use super::measure::{payload, Throughput};
use crate::{BenchError, Result};

/// The stream, and the one subject its messages are published on.
const STREAM: &str = "BENCH";
const SUBJECT: &str = "bench";
/// Longest wait for JetStream to answer its first API request after the
/// server starts listening (it may still be recovering its store).
const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// Longest wait for an ack. With `sync_interval: always` the server fsyncs
/// each message in turn, so 64 clients × 100 pipelined publishes take
/// seconds to acknowledge: the client's default (5 s) is too short for
/// that queue, and an ack that times out would end the benchmark.
const ACK_TIMEOUT: Duration = Duration::from_secs(120);

fn failed(what: &str, error: impl std::fmt::Display) -> BenchError {
    BenchError::External(format!("JetStream: {what}: {error}"))
}

/// A JetStream stream to publish to, on a server already listening.
pub(super) struct JetStream<'a> {
    runtime: &'a Runtime,
    addr: String,
    stream: stream::Stream,
}

impl<'a> JetStream<'a> {
    /// Connect to `addr` (`127.0.0.1:PORT`) and create the stream, retrying
    /// until JetStream answers.
    pub(super) fn create(runtime: &'a Runtime, addr: &str) -> Result<JetStream<'a>> {
        let stream = runtime.block_on(async {
            let client = async_nats::connect(addr).await.map_err(|e| failed("connecting", e))?;
            let context = jetstream::new(client);
            let config = stream::Config {
                name: STREAM.into(),
                subjects: vec![SUBJECT.into()],
                storage: stream::StorageType::File,
                num_replicas: 1,
                ..stream::Config::default()
            };
            let started = Instant::now();
            loop {
                match context.get_or_create_stream(config.clone()).await {
                    Ok(stream) => return Ok(stream),
                    Err(error) if started.elapsed() < READY_TIMEOUT => {
                        let _ = error;
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                    Err(error) => return Err(failed("creating the stream", error)),
                }
            }
        })?;
        Ok(JetStream { runtime, addr: addr.to_owned(), stream })
    }

    /// Records (acknowledged publishes) by `clients` clients,
    /// each with a connection of its own, for about `budget`: one publish
    /// at a time when `batch` is 1, else `batch` pipelined. The stream is
    /// purged first, so every measurement starts from an empty one.
    pub(super) fn publish_rate(&self, clients: usize, batch: usize, budget: Duration) -> Result<Throughput> {
        self.runtime.block_on(async {
            self.stream.purge().await.map_err(|e| failed("purging the stream", e))?;
            let barrier = Arc::new(Barrier::new(clients + 1));
            let value = Bytes::from(payload(0));
            let mut tasks = Vec::with_capacity(clients);
            for _ in 0..clients {
                let (barrier, value, addr) = (Arc::clone(&barrier), value.clone(), self.addr.clone());
                tasks.push(tokio::spawn(async move {
                    let context = async_nats::connect(addr)
                        .await
                        .map(|client| jetstream::ContextBuilder::new().timeout(ACK_TIMEOUT).build(client));
                    // Every task reaches the barrier, failed or not, so none waits forever.
                    barrier.wait().await;
                    let context = context.map_err(|e| failed("connecting", e))?;
                    let deadline = Instant::now() + budget;
                    let mut records = 0u64;
                    let mut acks = Vec::with_capacity(batch);
                    while Instant::now() < deadline {
                        for _ in 0..batch {
                            acks.push(
                                context.publish(SUBJECT, value.clone()).await.map_err(|e| failed("publishing", e))?,
                            );
                        }
                        for ack in acks.drain(..) {
                            ack.await.map_err(|e| failed("waiting for an ack", e))?;
                        }
                        records += batch as u64;
                    }
                    Ok::<u64, BenchError>(records)
                }));
            }
            barrier.wait().await;
            let started = Instant::now();
            let mut total = 0;
            for task in tasks {
                total += task.await.map_err(|e| failed("a client task", e))??;
            }
            Ok(Throughput { records: total, elapsed: started.elapsed() })
        })
    }
}
