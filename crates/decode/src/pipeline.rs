//! Parallel, bounded-memory decoding of per-CPU SPE streams, merged by time.
//!
//! One worker thread per AUX stream reads its chunks in pieces of at most
//! [`DecodeOptions::piece_bytes`] (positional reads, so streams never wait on each other for
//! I/O), decodes them with a streaming [`RecordDecoder`], converts timestamps and attributes
//! threads, and sends batches over a bounded channel. The caller's thread merges the streams by
//! time with a k-way heap and hands every sample to a sink in order. Memory is bounded by
//! streams × (channel depth + 2) × batch size, whatever the input size.
//!
//! Why a thread per stream rather than a fixed pool: the merge needs the head of every stream;
//! a pool smaller than the number of streams could have all its threads blocked on full channels
//! while the merge waits for a stream that is not scheduled.

use crate::threads::ThreadTimeline;
use spelunk_spe::{DecodeIssue, DecodeStats, RecordDecoder, SpeRecord, SpeSample};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Arc;

/// Where the AUX bytes live (a perf.data file in practice; memory in tests).
pub trait AuxSource: Sync {
    /// Fills `buf` with the bytes at `file_offset`.
    fn read_at(&self, file_offset: u64, buf: &mut [u8]) -> std::io::Result<()>;
    /// Name for error messages (the file path).
    fn name(&self) -> String;
}

/// One piece of a stream: `size` bytes at `file_offset`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AuxChunkDesc {
    pub file_offset: u64,
    pub size: u64,
    /// False when data between the previous chunk and this one was lost (the decoder resets).
    pub contiguous: bool,
}

/// One CPU's (or, in per-thread recordings, one thread's) SPE byte stream.
#[derive(Clone, Debug, Default)]
pub struct StreamDesc {
    pub cpu: Option<u32>,
    /// Set for per-thread buffers: every record of the stream belongs to this thread.
    pub tid: Option<u32>,
    pub pid: Option<u32>,
    pub chunks: Vec<AuxChunkDesc>,
}

/// Converts SPE timestamps (timer ticks) to perf time in ns.
pub type TimeConvFn = Arc<dyn Fn(u64) -> u64 + Send + Sync>;

/// Everything needed to decode a recording.
#[derive(Clone, Default)]
pub struct DecodePlan {
    pub streams: Vec<StreamDesc>,
    pub time_conv: Option<TimeConvFn>,
    pub threads: ThreadTimeline,
}

#[derive(Clone, Debug)]
pub struct DecodeOptions {
    /// Largest single read.
    pub piece_bytes: usize,
    /// Upper bound on the memory held by in-flight batches.
    pub buffer_budget_bytes: usize,
    /// Incremented with the bytes each worker has decoded (for progress bars).
    pub progress: Option<Arc<AtomicU64>>,
}

impl Default for DecodeOptions {
    fn default() -> Self {
        DecodeOptions {
            piece_bytes: 1 << 20,
            buffer_budget_bytes: 64 << 20,
            progress: None,
        }
    }
}

/// Per-stream result.
#[derive(Clone, Debug, Default)]
pub struct StreamOutcome {
    pub cpu: Option<u32>,
    pub tid: Option<u32>,
    pub stats: DecodeStats,
}

/// What a decode produced besides the samples.
#[derive(Clone, Debug, Default)]
pub struct DecodeOutcome {
    pub samples: u64,
    pub stats: DecodeStats,
    /// Decode problems with file offsets, ordered by offset (at most a few per stream).
    pub issues: Vec<DecodeIssue>,
    pub streams: Vec<StreamOutcome>,
}

/// Why a decode stopped early. Samples handed to the sink before the error are kept.
#[derive(Debug, thiserror::Error)]
pub enum PipelineError<E: std::error::Error + 'static> {
    #[error("{name}: reading {len} bytes at byte {offset}: {source}")]
    Read {
        name: String,
        offset: u64,
        len: usize,
        source: std::io::Error,
    },
    #[error(transparent)]
    Sink(E),
    #[error("decoder thread for stream {stream} panicked (bug)")]
    WorkerPanicked { stream: usize },
}

const CHANNEL_DEPTH: usize = 2;
const MIN_BATCH: usize = 256;
const MAX_BATCH: usize = 16 * 1024;

fn batch_records(streams: usize, budget: usize) -> usize {
    let per = budget / (streams.max(1) * (CHANNEL_DEPTH + 2) * std::mem::size_of::<SpeSample>());
    per.clamp(MIN_BATCH, MAX_BATCH)
}

/// Places a record in context: time, thread, process.
fn attribute(r: &SpeRecord, stream: &StreamDesc, plan: &DecodePlan) -> SpeSample {
    let time_ns = match (&plan.time_conv, r.timestamp) {
        (Some(tc), Some(ts)) => Some(tc(ts)),
        _ => None,
    };
    let running = match (stream.cpu, time_ns) {
        (Some(cpu), Some(t)) => plan.threads.running(cpu, t),
        _ => None,
    };
    let tid = r.context_tid().or(stream.tid).or(running.map(|(_, t)| t));
    let pid = tid
        .and_then(|t| plan.threads.pid_of(t))
        .or_else(|| {
            if tid.is_some() && tid == stream.tid {
                stream.pid
            } else {
                None
            }
        })
        .or_else(|| running.filter(|(_, t)| Some(*t) == tid).map(|(p, _)| p));
    SpeSample {
        cpu: stream.cpu,
        pid,
        tid,
        time_ns,
        record: *r,
    }
}

enum Msg {
    Batch(Vec<SpeSample>),
    ReadError {
        offset: u64,
        len: usize,
        error: std::io::Error,
    },
}

struct WorkerResult {
    stats: DecodeStats,
    issues: Vec<DecodeIssue>,
}

fn worker<S: AuxSource>(
    src: &S,
    plan: &DecodePlan,
    stream: &StreamDesc,
    opts: &DecodeOptions,
    batch_len: usize,
    tx: SyncSender<Msg>,
) -> WorkerResult {
    let mut dec = RecordDecoder::new();
    let mut buf = vec![0u8; opts.piece_bytes.max(1)];
    let mut recs = Vec::with_capacity(batch_len);
    let mut batch = Vec::with_capacity(batch_len);
    let done = |dec: RecordDecoder| WorkerResult {
        stats: *dec.stats(),
        issues: dec.issues().to_vec(),
    };
    for chunk in &stream.chunks {
        if !chunk.contiguous {
            dec.discontinuity();
        }
        let mut off = 0u64;
        while off < chunk.size {
            let n = (chunk.size - off).min(buf.len() as u64) as usize;
            let at = chunk.file_offset + off;
            if let Err(error) = src.read_at(at, &mut buf[..n]) {
                let _ = tx.send(Msg::ReadError {
                    offset: at,
                    len: n,
                    error,
                });
                return done(dec);
            }
            recs.clear();
            dec.feed(&buf[..n], at, &mut recs);
            for r in &recs {
                batch.push(attribute(r, stream, plan));
                if batch.len() >= batch_len {
                    let full = std::mem::replace(&mut batch, Vec::with_capacity(batch_len));
                    if tx.send(Msg::Batch(full)).is_err() {
                        return done(dec); // the merge stopped (sink error)
                    }
                }
            }
            if let Some(p) = &opts.progress {
                p.fetch_add(n as u64, Ordering::Relaxed);
            }
            off += n as u64;
        }
    }
    dec.finish();
    if !batch.is_empty() {
        let _ = tx.send(Msg::Batch(batch));
    }
    done(dec)
}

struct Head {
    rx: Receiver<Msg>,
    batch: Vec<SpeSample>,
    pos: usize,
    /// Merge key of the last sample with a time, so untimed samples keep their stream position.
    last_key: u64,
}

impl Head {
    fn key(&mut self) -> u64 {
        if let Some(t) = self.batch[self.pos].time_ns {
            self.last_key = t;
        }
        self.last_key
    }
}

/// Decodes every stream of `plan` from `src`, calling `sink` with each sample in time order
/// (per-stream order is kept; streams without timestamps come one after another).
pub fn decode<S, F, E>(
    src: &S,
    plan: &DecodePlan,
    opts: &DecodeOptions,
    mut sink: F,
) -> Result<DecodeOutcome, PipelineError<E>>
where
    S: AuxSource,
    F: FnMut(&SpeSample) -> Result<(), E>,
    E: std::error::Error + 'static,
{
    let batch_len = batch_records(plan.streams.len(), opts.buffer_budget_bytes);
    std::thread::scope(|scope| {
        let mut handles = Vec::new();
        let mut heads: Vec<Option<Head>> = Vec::new();
        for stream in &plan.streams {
            let (tx, rx) = sync_channel(CHANNEL_DEPTH);
            handles.push(scope.spawn(move || worker(src, plan, stream, opts, batch_len, tx)));
            heads.push(Some(Head {
                rx,
                batch: Vec::new(),
                pos: 0,
                last_key: 0,
            }));
        }
        let mut heap = BinaryHeap::new();
        let mut failure: Option<PipelineError<E>> = None;
        let mut samples = 0u64;

        // Pulls the next batch of stream `i` (blocking); false when the stream is finished.
        let refill = |head: &mut Head, failure: &mut Option<PipelineError<E>>| -> bool {
            loop {
                match head.rx.recv() {
                    Ok(Msg::Batch(b)) if b.is_empty() => continue,
                    Ok(Msg::Batch(b)) => {
                        head.batch = b;
                        head.pos = 0;
                        return true;
                    }
                    Ok(Msg::ReadError { offset, len, error }) => {
                        if failure.is_none() {
                            *failure = Some(PipelineError::Read {
                                name: src.name(),
                                offset,
                                len,
                                source: error,
                            });
                        }
                        return false;
                    }
                    Err(_) => return false,
                }
            }
        };

        for (i, slot) in heads.iter_mut().enumerate() {
            let head = slot.as_mut().expect("just inserted"); // ok: slots were filled above
            if refill(head, &mut failure) {
                heap.push(Reverse((head.key(), i)));
            } else {
                *slot = None;
            }
        }
        while failure.is_none() {
            let Some(Reverse((_, i))) = heap.pop() else {
                break;
            };
            let Some(head) = heads[i].as_mut() else {
                continue;
            };
            if let Err(e) = sink(&head.batch[head.pos]) {
                failure = Some(PipelineError::Sink(e));
                break;
            }
            samples += 1;
            head.pos += 1;
            if head.pos < head.batch.len() || refill(head, &mut failure) {
                heap.push(Reverse((head.key(), i)));
            } else {
                heads[i] = None;
            }
        }
        // Dropping the receivers unblocks any worker still sending.
        drop(heads);
        let mut outcome = DecodeOutcome {
            samples,
            ..Default::default()
        };
        for (i, (h, stream)) in handles.into_iter().zip(&plan.streams).enumerate() {
            match h.join() {
                Ok(res) => {
                    outcome.stats.add(&res.stats);
                    outcome.issues.extend(res.issues);
                    outcome.streams.push(StreamOutcome {
                        cpu: stream.cpu,
                        tid: stream.tid,
                        stats: res.stats,
                    });
                }
                Err(_) => {
                    if failure.is_none() {
                        failure = Some(PipelineError::WorkerPanicked { stream: i });
                    }
                }
            }
        }
        outcome.issues.sort_by_key(|i| i.offset);
        match failure {
            Some(e) => Err(e),
            None => Ok(outcome),
        }
    })
}
