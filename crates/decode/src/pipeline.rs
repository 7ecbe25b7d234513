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
//!
//! With fewer streams than cores (a program recorded on one CPU has one AUX stream), a stream's
//! worker gets helper threads: the worker decodes and places records in context, and hands
//! each full batch of records to a helper to map (attribution, aggregation: most of a report's
//! per-record work), or maps it itself when every helper is busy. The merge receives the
//! batches in stream order, each as soon as its map is done, so the items and their order are
//! those of a single worker ([`SampleMap::fork`]).

mod segments;

use crate::threads::ThreadTimeline;
use segments::SegmentReader;
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
    /// Helper threads mapping records for each stream whose map can fork ([`SampleMap::fork`]);
    /// `None`: [`map_helpers`] of the machine's cores.
    pub helpers_per_stream: Option<usize>,
}

impl Default for DecodeOptions {
    fn default() -> Self {
        DecodeOptions {
            piece_bytes: 1 << 20,
            buffer_budget_bytes: 64 << 20,
            progress: None,
            helpers_per_stream: None,
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
pub(crate) fn piece_buffer(stream: &StreamDesc, opts: &DecodeOptions) -> Vec<u8> {
    let largest = stream.chunks.iter().map(|c| c.size).max().unwrap_or(0);
    let len = usize::try_from(largest).map_or(opts.piece_bytes, |l| l.min(opts.piece_bytes));
    vec![0u8; len.max(1)]
}

const CHANNEL_DEPTH: usize = 2;
const MIN_BATCH: usize = 256;
const MAX_BATCH: usize = 16 * 1024;

/// Records per batch, so that the batches in flight stay within `budget`: per decoding thread,
/// the merge's channel, the batch being filled and the one being read.
fn batch_records(threads: usize, budget: usize, item_bytes: usize) -> usize {
    let per = budget / (threads.max(1) * (CHANNEL_DEPTH + 2) * (item_bytes + 8).max(1));
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
    /// Another map for this stream, for a helper thread that maps some of the stream's batches
    /// while the worker decodes the next ones (see the module doc). An item must not depend on
    /// which of a stream's maps made it. `None` (the default): the worker maps every record.
    fn fork(&self) -> Option<Self>
    where
        Self: Sized,
    {
        None
    }
    /// Takes back a fork's state after the decode (e.g. adds its counts to this map's).
    fn join(&mut self, _fork: Self)
    where
        Self: Sized,
    {
    }
}

/// Most helper threads a stream's worker gets: one worker decodes a stream about three times as
/// fast as one thread maps a report's records, so more would wait.
pub const MAX_HELPERS_PER_STREAM: usize = 3;

/// Helper threads per stream when `streams` streams are decoded on `cores` cores: the cores
/// the workers leave idle, shared among the streams, at most [`MAX_HELPERS_PER_STREAM`].
pub fn map_helpers(streams: usize, cores: usize) -> usize {
    if streams == 0 {
        return 0;
    }
    (cores.saturating_sub(streams) / streams).min(MAX_HELPERS_PER_STREAM)
}

/// The helpers each stream of `plan` gets under `opts` ([`DecodeOptions::helpers_per_stream`] or
/// [`map_helpers`] of the machine's cores), for maps that fork. A caller sharing state among
/// the maps (a pool of aggregates) can size it for `streams × (1 + this)` threads mapping at once.
pub fn helpers_per_stream(plan: &DecodePlan, opts: &DecodeOptions) -> usize {
    let env = || std::env::var("SPELUNK_DECODE_HELPERS").ok()?.parse().ok();
    opts.helpers_per_stream.or_else(env).unwrap_or_else(|| {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        map_helpers(plan.streams.len(), cores)
    })
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
pub(crate) struct Attributor<'a> {
    stream: &'a StreamDesc,
    plan: &'a DecodePlan,
    /// Last `running` answer for this stream's CPU and the time range it holds for.
    running: Option<RunningSpan>,
    /// Last `pid_of` answer.
    pid_of: Option<(u32, Option<u32>)>,
}

impl<'a> Attributor<'a> {
    pub(crate) fn new(stream: &'a StreamDesc, plan: &'a DecodePlan) -> Self {
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
    pub(crate) fn attribute(&mut self, r: &SpeRecord) -> SampleContext {
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
pub(crate) struct Batch<T> {
    pub keys: Vec<u64>,
    pub items: Vec<T>,
    /// The first `unkeyed` items take the key of the stream's item before them (set by the
    /// merge): untimed records at the start of a segment (pipeline/segments.rs).
    pub unkeyed: usize,
}

impl<T> Batch<T> {
    pub(crate) fn with_capacity(n: usize) -> Self {
        Batch {
            keys: Vec::with_capacity(n),
            items: Vec::with_capacity(n),
            unkeyed: 0,
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
pub(crate) fn read_pieces<S: AuxSource>(
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

/// A batch the merge has finished with, or a new one.
pub(crate) fn recycled<T>(free: &Receiver<Batch<T>>, batch_len: usize) -> Batch<T> {
    match free.try_recv() {
        Ok(mut b) => {
            b.keys.clear();
            b.items.clear();
            b.unkeyed = 0;
            b
        }
        Err(_) => Batch::with_capacity(batch_len),
    }
}

/// How a part of a stream ended (see [`decode_part`]).
pub(crate) enum PartEnd {
    /// Every record was decoded and handed on.
    Done,
    /// The merge stopped taking batches.
    Stopped,
    /// A read failed: (file offset, length, error); the records before it were handed on.
    ReadError(u64, usize, std::io::Error),
}

/// What [`decode_part`] works with besides the bytes: the stream's context, the map, and
/// where batches go.
pub(crate) struct PartSink<'a, 'p, M: SampleMap, F: FnMut(Batch<M::Item>) -> bool> {
    pub att: &'a mut Attributor<'p>,
    pub map: &'a mut M,
    pub free: &'a Receiver<Batch<M::Item>>,
    pub batch_len: usize,
    /// Adds decoded bytes to the progress counter.
    pub progress: Option<&'a AtomicU64>,
    /// Hands a full batch on; false when the merge has stopped.
    pub send: F,
}

/// Decodes `part` (a stream, or a segment of one: see pipeline/segments.rs) with `dec`: each
/// record placed in context and mapped, in batches of `batch_len` handed to `send`, the last
/// one partial. Keys: a timed record's time; an untimed one takes the key of the part's
/// previous timed record, or, before the part's first, `prev_key` when given (a whole stream:
/// 0) else none, left to the merge (`Batch::unkeyed`: a segment does not know the key of the
/// previous segment's last record).
pub(crate) fn decode_part<S: AuxSource, M: SampleMap, F: FnMut(Batch<M::Item>) -> bool>(
    src: &S,
    part: &StreamDesc,
    dec: &mut RecordDecoder,
    buf: &mut [u8],
    prev_key: Option<u64>,
    sink: &mut PartSink<'_, '_, M, F>,
) -> PartEnd {
    let PartSink {
        att,
        map,
        free,
        batch_len,
        progress,
        send,
    } = sink;
    let batch_len = *batch_len;
    let mut batch = Batch::with_capacity(batch_len);
    let mut last_key = prev_key;
    let mut stopped = false;
    let read = read_pieces(src, part, buf, dec, |dec, piece, at| {
        map.begin();
        dec.feed_each(piece, at, |r| {
            if stopped {
                return;
            }
            let c = att.attribute(r);
            if let Some(t) = c.time_ns {
                last_key = Some(t);
            }
            match last_key {
                Some(k) => batch.keys.push(k),
                None => {
                    batch.keys.push(0);
                    batch.unkeyed += 1;
                }
            }
            batch.items.push(map.map(r, &c));
            if batch.items.len() >= batch_len {
                // Reuse a batch the merge has finished with (no fresh pages to fault in).
                let full = std::mem::replace(&mut batch, recycled(free, batch_len));
                // The send blocks while the merge waits on other streams: nothing shared
                // may be held meanwhile (see SampleMap::end).
                map.end();
                stopped = !send(full);
                map.begin();
            }
        });
        map.end();
        if let Some(p) = progress {
            p.fetch_add(piece.len() as u64, Ordering::Relaxed);
        }
        !stopped // false: the merge stopped (sink error)
    });
    if stopped {
        return PartEnd::Stopped;
    }
    // What was decoded goes on, also before a failed read.
    if !batch.items.is_empty() && !send(batch) {
        return PartEnd::Stopped;
    }
    match read {
        Ok(()) => PartEnd::Done,
        Err((offset, len, error)) => PartEnd::ReadError(offset, len, error),
    }
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
    let mut sink = PartSink {
        att: &mut att,
        map,
        free: &free,
        batch_len,
        progress: opts.progress.as_deref(),
        send: |b| tx.send(Msg::Batch(b)).is_ok(),
    };
    match decode_part(src, stream, &mut dec, &mut buf, Some(0), &mut sink) {
        PartEnd::Done => dec.finish(),
        PartEnd::Stopped => {}
        PartEnd::ReadError(offset, len, error) => {
            let _ = tx.send(Msg::ReadError { offset, len, error });
        }
    }
    WorkerResult {
        stats: *dec.stats(),
        issues: dec.issues().to_vec(),
    }
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

/// Where the merge gets a stream's batches from.
enum Feed<T> {
    /// The stream's worker.
    Worker {
        rx: Receiver<Msg<T>>,
        free: Sender<Batch<T>>,
    },
    /// The stream's segments, decoded by its worker and helpers (pipeline/segments.rs).
    Segments(SegmentReader<T>),
}

struct Head<T> {
    feed: Feed<T>,
    batch: Batch<T>,
    pos: usize,
    /// The key of the stream's last item handed out (for a batch's unkeyed items).
    last_key: u64,
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
    // A stream with helpers is cut into segments (pipeline/segments.rs): its worker and helpers
    // decode them in turn, each with a map of its own, from the starts a framing thread finds.
    let helpers = helpers_per_stream(plan, opts);
    let segments: Vec<Vec<StreamDesc>> = plan
        .streams
        .iter()
        .map(|s| {
            if helpers == 0 {
                return Vec::new();
            }
            let segs = segments::split(s, opts.piece_bytes as u64);
            if segs.len() < 2 {
                Vec::new()
            } else {
                segs
            }
        })
        .collect();
    let mut forks: Vec<Vec<M>> = maps
        .iter()
        .zip(&segments)
        .map(|(m, segs)| {
            if segs.is_empty() {
                return Vec::new();
            }
            let forks: Vec<M> = (0..helpers).map_while(|_| m.fork()).collect();
            if forks.len() == helpers {
                forks
            } else {
                Vec::new()
            }
        })
        .collect();
    let threads_per_stream = 1 + forks.iter().map(Vec::len).max().unwrap_or(0);
    let starts: Vec<segments::Starts> = segments
        .iter()
        .map(|s| segments::Starts::new(s.len()))
        .collect();
    let batch_len = batch_records(
        plan.streams.len() * threads_per_stream,
        opts.buffer_budget_bytes,
        std::mem::size_of::<M::Item>(),
    );
    let spawn_error = |source| PipelineError::Spawn {
        streams: plan.streams.len(),
        source,
    };
    let result = std::thread::scope(|scope| {
        let mut handles = Vec::new();
        let mut heads: Vec<Option<Head<M::Item>>> = Vec::new();
        let mut failure: Option<PipelineError<E>> = None;
        'streams: for (i, ((stream, map), forks)) in plan
            .streams
            .iter()
            .zip(maps.iter_mut())
            .zip(forks.iter_mut())
            .enumerate()
        {
            let feed = if forks.is_empty() {
                let (tx, rx) = sync_channel(CHANNEL_DEPTH);
                let (free_tx, free_rx) = channel();
                let spawned = std::thread::Builder::new().spawn_scoped(scope, move || {
                    giving_back_on_panic(map, |map| {
                        Some(worker(src, plan, stream, opts, batch_len, map, tx, free_rx))
                    })
                });
                match spawned {
                    Ok(h) => handles.push((i, h)),
                    Err(source) => {
                        // No merge then: dropping the heads below stops the started workers.
                        failure = Some(spawn_error(source));
                        break 'streams;
                    }
                }
                Feed::Worker { rx, free: free_tx }
            } else {
                let segs = &segments[i];
                let starts = &starts[i];
                let threads = forks.len() + 1;
                match std::thread::Builder::new().spawn_scoped(scope, move || {
                    let dec = segments::framing(src, stream, segs, starts, opts);
                    Some(WorkerResult {
                        stats: *dec.stats(),
                        issues: dec.issues().to_vec(),
                    })
                }) {
                    Ok(h) => handles.push((i, h)),
                    Err(source) => {
                        failure = Some(spawn_error(source));
                        break 'streams;
                    }
                }
                let mut rxs = Vec::with_capacity(threads);
                let mut frees = Vec::with_capacity(threads);
                let stream_maps = std::iter::once(&mut *map).chain(forks.iter_mut());
                for (t, m) in stream_maps.enumerate() {
                    let (tx, rx) = sync_channel(CHANNEL_DEPTH);
                    let (free_tx, free_rx) = channel();
                    let spawned = std::thread::Builder::new().spawn_scoped(scope, move || {
                        giving_back_on_panic(m, |m| {
                            segments::segment_worker(
                                src, plan, stream, segs, starts, t, threads, opts, batch_len, m,
                                tx, free_rx,
                            );
                            None
                        })
                    });
                    match spawned {
                        Ok(h) => handles.push((i, h)),
                        Err(source) => {
                            failure = Some(spawn_error(source));
                            break 'streams;
                        }
                    }
                    rxs.push(rx);
                    frees.push(free_tx);
                }
                Feed::Segments(SegmentReader::new(segs.len(), rxs, frees))
            };
            heads.push(Some(Head {
                feed,
                batch: Batch::with_capacity(0),
                pos: 0,
                last_key: 0,
            }));
        }
        let mut heap = BinaryHeap::new();
        let mut samples = 0u64;

        // Pulls the next batch of a stream (blocking); false when the stream is finished.
        let refill = |head: &mut Head<M::Item>, failure: &mut Option<PipelineError<E>>| -> bool {
            loop {
                let next = match &mut head.feed {
                    Feed::Worker { rx, .. } => match rx.recv() {
                        Ok(Msg::Batch(b)) => Ok(Some(b)),
                        Ok(Msg::ReadError { offset, len, error }) => Err((offset, len, error)),
                        Err(_) => Ok(None),
                    },
                    Feed::Segments(r) => r.next_batch(),
                };
                let mut next = match next {
                    Ok(Some(b)) => b,
                    Ok(None) => return false,
                    Err((offset, len, error)) => {
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
                };
                if next.items.is_empty() {
                    continue;
                }
                if let Some(&k) = head.batch.keys.last() {
                    head.last_key = k;
                }
                let unkeyed = next.unkeyed.min(next.keys.len());
                next.keys[..unkeyed].fill(head.last_key);
                let done = std::mem::replace(&mut head.batch, next);
                if done.items.capacity() > 0 {
                    match &head.feed {
                        Feed::Worker { free, .. } => {
                            let _ = free.send(done);
                        }
                        Feed::Segments(r) => r.give_back(done),
                    }
                }
                head.pos = 0;
                return true;
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
        // Dropping the receivers unblocks any thread still sending.
        drop(heads);
        let mut outcome = DecodeOutcome {
            samples,
            ..Default::default()
        };
        let mut per_stream: Vec<Option<WorkerResult>> =
            (0..plan.streams.len()).map(|_| None).collect();
        for (i, h) in handles {
            match h.join() {
                Ok(Some(res)) => per_stream[i] = Some(res),
                Ok(None) => {}
                Err(_) => {
                    if failure.is_none() {
                        failure = Some(PipelineError::WorkerPanicked { stream: i });
                    }
                }
            }
        }
        for (i, stream) in plan.streams.iter().enumerate() {
            if let Some(res) = per_stream[i].take() {
                outcome.stats.add(&res.stats);
                outcome.issues.extend(res.issues);
                outcome.streams.push(StreamOutcome {
                    cpu: stream.cpu,
                    tid: stream.tid,
                    stats: res.stats,
                });
            }
        }
        outcome.issues.sort_by_key(|i| i.offset);
        match failure {
            Some(e) => Err(e),
            None => Ok(outcome),
        }
    });
    for (i, forks) in forks.into_iter().enumerate() {
        for fork in forks {
            maps[i].join(fork);
        }
    }
    result
}

/// Runs `f` with `map`; if it panics, gives back what the map holds first (see
/// SampleMap::end): other threads waiting on a shared pool then finish, and the decode fails
/// with WorkerPanicked instead of hanging.
fn giving_back_on_panic<M: SampleMap, R>(map: &mut M, f: impl FnOnce(&mut M) -> R) -> R {
    let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(&mut *map)));
    run.unwrap_or_else(|panic| {
        map.end();
        std::panic::resume_unwind(panic)
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
