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
use std::collections::binary_heap::{BinaryHeap, PeekMut};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{channel, sync_channel, Receiver, Sender, SyncSender};
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
    /// Each AUX stream is decoded on its own thread (the time-ordered merge needs them all
    /// under way); the system refused one more (e.g. a recording with tens of thousands of
    /// per-CPU or per-thread streams).
    #[error(
        "cannot start a decode thread for each of the {streams} AUX streams (the system \
         refused one more: {source})"
    )]
    Spawn {
        streams: usize,
        source: std::io::Error,
    },
    #[error(
        "{streams} AUX streams: spelunk decodes at most {MAX_STREAMS} (one thread each; a \
         per-CPU recording has one stream per CPU, arm64 Linux at most 4096)"
    )]
    TooManyStreams { streams: usize },
}

/// The most AUX streams decoded at once, each on its own thread. Above some tens of thousands
/// the system refuses threads in a way Rust cannot report as an error (a new thread's guard
/// page), so more are refused up front.
pub const MAX_STREAMS: usize = 16384;

fn check_streams<E: std::error::Error>(plan: &DecodePlan) -> Result<(), PipelineError<E>> {
    match plan.streams.len() {
        n if n > MAX_STREAMS => Err(PipelineError::TooManyStreams { streams: n }),
        _ => Ok(()),
    }
}

/// The read buffer a stream needs: a piece, or less when its largest AUX chunk is smaller
/// (a recording of many CPUs has many small streams; each buffer is zeroed when made).
fn piece_buffer(stream: &StreamDesc, opts: &DecodeOptions) -> Vec<u8> {
    let largest = stream.chunks.iter().map(|c| c.size).max().unwrap_or(0);
    let len = usize::try_from(largest).map_or(opts.piece_bytes, |l| l.min(opts.piece_bytes));
    vec![0u8; len.max(1)]
}

const CHANNEL_DEPTH: usize = 2;
const MIN_BATCH: usize = 256;
const MAX_BATCH: usize = 16 * 1024;

fn batch_records(streams: usize, budget: usize, item_bytes: usize) -> usize {
    let per = budget / (streams.max(1) * (CHANNEL_DEPTH + 2) * (item_bytes + 8).max(1));
    per.clamp(MIN_BATCH, MAX_BATCH)
}

/// Work done in a stream's decode worker, in parallel with the other streams and before the
/// merge: turns each sample into the item the merge hands to the sink. Keep per-record work
/// here (the merge is serial) and make items small (they are what the merge moves).
pub trait SampleMap: Send {
    type Item: Send;
    /// Maps the sample made of `record` placed in `context` (the record is the decoder's own:
    /// no copy is made unless the map makes one).
    fn map(&mut self, record: &SpeRecord, context: &SampleContext) -> Self::Item;
    /// The worker is about to map a run of records (a piece of its stream). A map that
    /// borrows shared state for a run (an aggregate from a pool smaller than the number of
    /// streams) takes it here; `map` is only called between `begin` and [`Self::end`].
    #[inline]
    fn begin(&mut self) {}
    /// The run is over: the worker may now block (handing a batch to the merge, which may be
    /// waiting for another stream) or finish, so shared state taken in `begin` goes back.
    /// Also called once when the worker panics, inside a run or not.
    #[inline]
    fn end(&mut self) {}
}

/// Where and when a record was sampled: an [`SpeSample`] without its record.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SampleContext {
    pub cpu: Option<u32>,
    pub pid: Option<u32>,
    pub tid: Option<u32>,
    pub time_ns: Option<u64>,
}

impl SampleContext {
    #[inline]
    pub fn sample(&self, record: &SpeRecord) -> SpeSample {
        SpeSample {
            cpu: self.cpu,
            pid: self.pid,
            tid: self.tid,
            time_ns: self.time_ns,
            record: *record,
        }
    }
}

/// The identity map: the sink gets the samples themselves.
struct Samples;

impl SampleMap for Samples {
    type Item = SpeSample;
    #[inline]
    fn map(&mut self, r: &SpeRecord, c: &SampleContext) -> SpeSample {
        c.sample(r)
    }
}

/// A `running` answer, (pid, tid) or none, valid for times in `[lo, hi)`: (lo, hi, answer).
type RunningSpan = (u64, u64, Option<(u32, u32)>);

/// Places records in context (time, thread, process), caching the last thread-timeline answer:
/// records of a stream come in time order, so consecutive lookups almost always fall in the
/// same scheduling interval and the same thread.
struct Attributor<'a> {
    stream: &'a StreamDesc,
    plan: &'a DecodePlan,
    /// Last `running` answer for this stream's CPU and the time range it holds for.
    running: Option<RunningSpan>,
    /// Last `pid_of` answer.
    pid_of: Option<(u32, Option<u32>)>,
}

impl<'a> Attributor<'a> {
    fn new(stream: &'a StreamDesc, plan: &'a DecodePlan) -> Self {
        Attributor {
            stream,
            plan,
            running: None,
            pid_of: None,
        }
    }

    #[inline]
    fn running(&mut self, cpu: u32, t: u64) -> Option<(u32, u32)> {
        if let Some((lo, hi, r)) = self.running {
            if lo <= t && t < hi {
                return r;
            }
        }
        let (r, lo, hi) = self.plan.threads.running_span(cpu, t);
        self.running = Some((lo, hi, r));
        r
    }

    #[inline]
    fn pid_of(&mut self, tid: u32) -> Option<u32> {
        if let Some((t, p)) = self.pid_of {
            if t == tid {
                return p;
            }
        }
        let p = self.plan.threads.pid_of(tid);
        self.pid_of = Some((tid, p));
        p
    }

    /// Places a record in context: time, thread, process.
    #[inline]
    fn attribute(&mut self, r: &SpeRecord) -> SampleContext {
        let stream = self.stream;
        let time_ns = match (&self.plan.time_conv, r.timestamp) {
            (Some(tc), Some(ts)) => Some(tc(ts)),
            _ => None,
        };
        let running = match (stream.cpu, time_ns) {
            (Some(cpu), Some(t)) => self.running(cpu, t),
            _ => None,
        };
        let tid = r.context_tid().or(stream.tid).or(running.map(|(_, t)| t));
        let pid = tid
            .and_then(|t| self.pid_of(t))
            .or_else(|| {
                if tid.is_some() && tid == stream.tid {
                    stream.pid
                } else {
                    None
                }
            })
            .or_else(|| running.filter(|(_, t)| Some(*t) == tid).map(|(p, _)| p));
        SampleContext {
            cpu: stream.cpu,
            pid,
            tid,
            time_ns,
        }
    }
}

/// Items of one stream in stream order, with their merge keys: the sample's time, or for
/// samples without one the key of the stream's previous timed sample (so untimed samples keep
/// their stream position).
struct Batch<T> {
    keys: Vec<u64>,
    items: Vec<T>,
}

impl<T> Batch<T> {
    fn with_capacity(n: usize) -> Self {
        Batch {
            keys: Vec::with_capacity(n),
            items: Vec::with_capacity(n),
        }
    }
}

enum Msg<T> {
    Batch(Batch<T>),
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

/// Reads `stream`'s chunks in file order, in pieces of at most `buf.len()` bytes, telling
/// `dec` where a chunk does not continue the previous one; `piece` gets each piece and its file
/// offset and returns whether to go on. A failed read stops with its (offset, length, error).
fn read_pieces<S: AuxSource>(
    src: &S,
    stream: &StreamDesc,
    buf: &mut [u8],
    dec: &mut RecordDecoder,
    mut piece: impl FnMut(&mut RecordDecoder, &[u8], u64) -> bool,
) -> Result<(), (u64, usize, std::io::Error)> {
    for chunk in &stream.chunks {
        if !chunk.contiguous {
            dec.discontinuity();
        }
        let mut off = 0u64;
        while off < chunk.size {
            let n = (chunk.size - off).min(buf.len() as u64) as usize;
            let at = chunk.file_offset + off;
            src.read_at(at, &mut buf[..n]).map_err(|e| (at, n, e))?;
            if !piece(dec, &buf[..n], at) {
                return Ok(());
            }
            off += n as u64;
        }
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn worker<S: AuxSource, M: SampleMap>(
    src: &S,
    plan: &DecodePlan,
    stream: &StreamDesc,
    opts: &DecodeOptions,
    batch_len: usize,
    map: &mut M,
    tx: SyncSender<Msg<M::Item>>,
    free: Receiver<Batch<M::Item>>,
) -> WorkerResult {
    let mut dec = RecordDecoder::new();
    let mut att = Attributor::new(stream, plan);
    let mut buf = piece_buffer(stream, opts);
    let mut batch = Batch::with_capacity(batch_len);
    let mut last_key = 0u64;
    let mut stopped = false;
    let done = |dec: RecordDecoder| WorkerResult {
        stats: *dec.stats(),
        issues: dec.issues().to_vec(),
    };
    let read = read_pieces(src, stream, &mut buf, &mut dec, |dec, piece, at| {
        map.begin();
        dec.feed_each(piece, at, |r| {
            if stopped {
                return;
            }
            let c = att.attribute(r);
            if let Some(t) = c.time_ns {
                last_key = t;
            }
            batch.keys.push(last_key);
            batch.items.push(map.map(r, &c));
            if batch.items.len() >= batch_len {
                // Reuse a batch the merge has finished with (no fresh pages to fault in).
                let next = match free.try_recv() {
                    Ok(mut b) => {
                        b.keys.clear();
                        b.items.clear();
                        b
                    }
                    Err(_) => Batch::with_capacity(batch_len),
                };
                let full = std::mem::replace(&mut batch, next);
                // The send blocks while the merge waits on other streams: nothing shared
                // may be held meanwhile (see SampleMap::end).
                map.end();
                stopped = tx.send(Msg::Batch(full)).is_err();
                map.begin();
            }
        });
        map.end();
        if let Some(p) = &opts.progress {
            p.fetch_add(piece.len() as u64, Ordering::Relaxed);
        }
        !stopped // false: the merge stopped (sink error)
    });
    if let Err((offset, len, error)) = read {
        let _ = tx.send(Msg::ReadError { offset, len, error });
        return done(dec);
    }
    if stopped {
        return done(dec);
    }
    dec.finish();
    if !batch.items.is_empty() {
        let _ = tx.send(Msg::Batch(batch));
    }
    done(dec)
}

/// The time of the first timed sample [`decode`] hands to its sink, or None when no sample
/// has a time; found by decoding each stream (in parallel) only up to its first timed record,
/// read in the same pieces as [`decode`] reads it. For analyses that aggregate in the decode
/// workers but filter by time relative to the first sample.
///
/// Why the minimum of the streams' first times is the merge's first: a stream's samples before
/// its first timed one carry merge key 0 and so all come out before any timed sample but one at
/// time 0; when the first timed sample comes out, every other unfinished stream's head is
/// either such an untimed sample (key 0, so that time is 0) or its own first timed sample, of
/// a key at least as large.
pub fn first_time_ns<S: AuxSource>(
    src: &S,
    plan: &DecodePlan,
    opts: &DecodeOptions,
) -> Result<Option<u64>, PipelineError<std::convert::Infallible>> {
    let Some(tc) = &plan.time_conv else {
        return Ok(None);
    };
    check_streams(plan)?;
    let first_of = |stream: &StreamDesc| -> Result<Option<u64>, PipelineError<_>> {
        let mut dec = RecordDecoder::new();
        let mut buf = piece_buffer(stream, opts);
        let mut first = None;
        read_pieces(src, stream, &mut buf, &mut dec, |dec, piece, at| {
            dec.feed_each(piece, at, |r| {
                if first.is_none() {
                    first = r.timestamp.map(|ts| tc(ts));
                }
            });
            first.is_none()
        })
        .map_err(|(offset, len, source)| PipelineError::Read {
            name: src.name(),
            offset,
            len,
            source,
        })?;
        Ok(first)
    };
    let streams = plan.streams.len();
    let firsts: Vec<_> = std::thread::scope(|scope| {
        let mut handles = Vec::with_capacity(streams);
        for stream in &plan.streams {
            match std::thread::Builder::new().spawn_scoped(scope, move || first_of(stream)) {
                Ok(h) => handles.push(h),
                // The threads started finish on their own (each reads one stream's start).
                Err(source) => return vec![Err(PipelineError::Spawn { streams, source })],
            }
        }
        handles
            .into_iter()
            .enumerate()
            .map(|(i, h)| {
                h.join()
                    .unwrap_or(Err(PipelineError::WorkerPanicked { stream: i }))
            })
            .collect()
    });
    let mut min: Option<u64> = None;
    for f in firsts {
        if let Some(t) = f? {
            min = Some(min.map_or(t, |m| m.min(t)));
        }
    }
    Ok(min)
}

struct Head<T> {
    rx: Receiver<Msg<T>>,
    free: Sender<Batch<T>>,
    batch: Batch<T>,
    pos: usize,
}

/// Decodes every stream of `plan` from `src`, calling `sink` with each sample in time order
/// (per-stream order is kept; streams without timestamps come one after another).
pub fn decode<S, F, E>(
    src: &S,
    plan: &DecodePlan,
    opts: &DecodeOptions,
    sink: F,
) -> Result<DecodeOutcome, PipelineError<E>>
where
    S: AuxSource,
    F: FnMut(&SpeSample) -> Result<(), E>,
    E: std::error::Error + 'static,
{
    let mut maps: Vec<Samples> = plan.streams.iter().map(|_| Samples).collect();
    decode_map(src, plan, opts, &mut maps, sink)
}

/// Like [`decode`], but each stream's worker first turns its samples into items with its own
/// [`SampleMap`] (`maps[i]` for stream `i`, in parallel); `sink` gets the items in the same
/// time order as [`decode`] gives the samples. The maps keep their state (e.g. per-stream
/// summaries) for the caller to combine.
pub fn decode_map<S, M, F, E>(
    src: &S,
    plan: &DecodePlan,
    opts: &DecodeOptions,
    maps: &mut [M],
    mut sink: F,
) -> Result<DecodeOutcome, PipelineError<E>>
where
    S: AuxSource,
    M: SampleMap,
    F: FnMut(&M::Item) -> Result<(), E>,
    E: std::error::Error + 'static,
{
    assert_eq!(maps.len(), plan.streams.len(), "one SampleMap per stream");
    check_streams(plan)?;
    let batch_len = batch_records(
        plan.streams.len(),
        opts.buffer_budget_bytes,
        std::mem::size_of::<M::Item>(),
    );
    std::thread::scope(|scope| {
        let mut handles = Vec::new();
        let mut heads: Vec<Option<Head<M::Item>>> = Vec::new();
        let mut failure: Option<PipelineError<E>> = None;
        for (stream, map) in plan.streams.iter().zip(maps.iter_mut()) {
            let (tx, rx) = sync_channel(CHANNEL_DEPTH);
            let (free_tx, free_rx) = channel();
            let spawned = std::thread::Builder::new().spawn_scoped(scope, move || {
                let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    worker(src, plan, stream, opts, batch_len, &mut *map, tx, free_rx)
                }));
                run.unwrap_or_else(|panic| {
                    // Give back what the map holds (see SampleMap::end): other workers waiting
                    // on a shared pool then finish, and the decode fails with WorkerPanicked
                    // instead of hanging.
                    map.end();
                    std::panic::resume_unwind(panic)
                })
            });
            match spawned {
                Ok(h) => handles.push(h),
                Err(source) => {
                    // No merge then: dropping the heads below stops the started workers.
                    failure = Some(PipelineError::Spawn {
                        streams: plan.streams.len(),
                        source,
                    });
                    break;
                }
            }
            heads.push(Some(Head {
                rx,
                free: free_tx,
                batch: Batch::with_capacity(0),
                pos: 0,
            }));
        }
        let mut heap = BinaryHeap::new();
        let mut samples = 0u64;

        // Pulls the next batch of a stream (blocking); false when the stream is finished.
        let refill = |head: &mut Head<M::Item>, failure: &mut Option<PipelineError<E>>| -> bool {
            loop {
                match head.rx.recv() {
                    Ok(Msg::Batch(b)) if b.items.is_empty() => continue,
                    Ok(Msg::Batch(b)) => {
                        let done = std::mem::replace(&mut head.batch, b);
                        if done.items.capacity() > 0 {
                            let _ = head.free.send(done);
                        }
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
            if failure.is_some() {
                break;
            }
            let head = slot.as_mut().expect("just inserted"); // ok: slots were filled above
            if refill(head, &mut failure) {
                heap.push(Reverse((head.batch.keys[0], i)));
            } else {
                *slot = None;
            }
        }
        // The k-way merge: the stream whose head has the smallest (key, stream index) goes
        // next. The top of the heap is updated in place (one sift) rather than popped and
        // pushed back.
        while failure.is_none() {
            let Some(mut top) = heap.peek_mut() else {
                break;
            };
            let Reverse((_, i)) = *top;
            let Some(head) = heads[i].as_mut() else {
                PeekMut::pop(top);
                continue;
            };
            if let Err(e) = sink(&head.batch.items[head.pos]) {
                failure = Some(PipelineError::Sink(e));
                break;
            }
            samples += 1;
            head.pos += 1;
            if head.pos < head.batch.items.len() || refill(head, &mut failure) {
                *top = Reverse((head.batch.keys[head.pos], i));
            } else {
                PeekMut::pop(top);
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

#[cfg(test)]
mod tests {
    use super::*;
    use spelunk_spe::synth::{SynthConfig, SynthStream};
    use spelunk_spe::RecordLayout;

    struct Mem(Vec<u8>);

    impl AuxSource for Mem {
        fn read_at(&self, off: u64, buf: &mut [u8]) -> std::io::Result<()> {
            let src = self.0.get(off as usize..off as usize + buf.len());
            buf.copy_from_slice(src.ok_or_else(|| std::io::Error::other("past end"))?);
            Ok(())
        }
        fn name(&self) -> String {
            "mem".into()
        }
    }

    /// More streams than threads can be started for: an error up front, never an abort.
    #[test]
    fn too_many_streams_is_an_error() {
        let plan = DecodePlan {
            streams: vec![StreamDesc::default(); MAX_STREAMS + 1],
            ..DecodePlan::default()
        };
        let r = decode(&Mem(vec![]), &plan, &DecodeOptions::default(), |_| {
            Ok::<(), std::io::Error>(())
        });
        assert!(
            matches!(r, Err(PipelineError::TooManyStreams { streams }) if streams == MAX_STREAMS + 1)
        );
    }

    /// `first_time_ns` is the time of the first timed sample `decode` hands out, with streams
    /// whose first records have no timestamp, a stream without any, and first times that do
    /// not follow the stream order.
    #[test]
    fn first_time_is_the_merges_first_timed_sample() {
        let stream = |seed, n, untimed: usize, first_ts| -> Vec<SpeRecord> {
            let cfg = SynthConfig {
                seed,
                first_timestamp: first_ts,
                ..SynthConfig::default()
            };
            let mut v: Vec<SpeRecord> = SynthStream::new(cfg).take(n).collect();
            for r in v.iter_mut().take(untimed) {
                r.timestamp = None;
            }
            v
        };
        let cases = [
            vec![stream(1, 500, 0, 9_000), stream(2, 400, 0, 5_000)],
            vec![stream(1, 500, 300, 1_000), stream(2, 400, 10, 7_000)],
            vec![stream(3, 50, 50, 0), stream(4, 400, 399, 2_000)],
            vec![stream(5, 50, 50, 0)],
        ];
        for streams in cases {
            let mut file = vec![0u8; 16];
            let mut plan = DecodePlan {
                time_conv: Some(Arc::new(|t| t * 40)),
                ..Default::default()
            };
            for (i, recs) in streams.iter().enumerate() {
                let mut b = Vec::new();
                for r in recs {
                    r.encode(RecordLayout::N1Padded64, &mut b);
                }
                plan.streams.push(StreamDesc {
                    cpu: Some(i as u32),
                    chunks: vec![AuxChunkDesc {
                        file_offset: file.len() as u64,
                        size: b.len() as u64,
                        contiguous: true,
                    }],
                    ..Default::default()
                });
                file.extend_from_slice(&b);
            }
            let src = Mem(file);
            let opts = DecodeOptions {
                piece_bytes: 1000,
                ..Default::default()
            };
            let mut first = None;
            decode(&src, &plan, &opts, |s| {
                if first.is_none() {
                    first = s.time_ns;
                }
                Ok::<(), std::io::Error>(())
            })
            .unwrap();
            assert_eq!(first_time_ns(&src, &plan, &opts).unwrap(), first);
        }
    }
}
