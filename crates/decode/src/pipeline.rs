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

use crate::threads::ThreadTimeline;
use spelunk_spe::{DecodeIssue, DecodeStats, RecordDecoder, SpeRecord, SpeSample};
use std::cmp::Reverse;
use std::collections::binary_heap::{BinaryHeap, PeekMut};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{channel, sync_channel, Receiver, Sender, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};

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
fn piece_buffer(stream: &StreamDesc, opts: &DecodeOptions) -> Vec<u8> {
    let largest = stream.chunks.iter().map(|c| c.size).max().unwrap_or(0);
    let len = usize::try_from(largest).map_or(opts.piece_bytes, |l| l.min(opts.piece_bytes));
    vec![0u8; len.max(1)]
}

const CHANNEL_DEPTH: usize = 2;
const MIN_BATCH: usize = 256;
const MAX_BATCH: usize = 16 * 1024;

/// Records per batch, so that the batches in flight stay within `budget`: per stream, the
/// merge's channel, the batch being filled and the one being read, and with `helpers` a job
/// queued and one being mapped per helper, each holding its records in context too.
fn batch_records(streams: usize, budget: usize, item_bytes: usize, helpers: usize) -> usize {
    let batches = CHANNEL_DEPTH + 2 + 2 * helpers;
    let record_bytes = item_bytes
        + 8
        + if helpers > 0 {
            std::mem::size_of::<Placed>()
        } else {
            0
        };
    let per = budget / (streams.max(1) * batches * record_bytes.max(1));
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
    /// A batch a helper is mapping; it comes through this channel when done (the channel closes
    /// without it when the helper panicked).
    Pending(Receiver<Batch<T>>),
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

/// A record placed in context: what a worker hands a helper to map.
type Placed = (SpeRecord, SampleContext);

/// A full batch of a stream's records for a helper to map into `batch` (whose keys the worker
/// has set and whose items are empty) and send back through `done`.
struct Job<T> {
    records: Vec<Placed>,
    batch: Batch<T>,
    done: Sender<Batch<T>>,
}

/// A worker's side of its helpers: where jobs go, and where their record vectors come back to
/// be reused (no fresh pages to fault in for every batch).
struct HelperLink<T> {
    jobs: SyncSender<Job<T>>,
    records_back: Receiver<Vec<Placed>>,
}

/// Maps `records` into `batch` with `map` (one run: begin, map each, end).
fn map_run<M: SampleMap>(map: &mut M, records: &[Placed], batch: &mut Batch<M::Item>) {
    map.begin();
    batch
        .items
        .extend(records.iter().map(|(r, c)| map.map(r, c)));
    map.end();
}

/// A batch the merge has finished with, or a new one.
fn recycled<T>(free: &Receiver<Batch<T>>, batch_len: usize) -> Batch<T> {
    match free.try_recv() {
        Ok(mut b) => {
            b.keys.clear();
            b.items.clear();
            b
        }
        Err(_) => Batch::with_capacity(batch_len),
    }
}

/// Sends a worker's full batch of `records` (keys in `batch`) on towards the merge: to a free
/// helper, the merge getting a placeholder it waits on, or, when every helper is busy, mapped
/// here. Returns false when the merge has stopped, and the record vector when it is free for
/// reuse.
fn hand_off<M: SampleMap>(
    link: &HelperLink<M::Item>,
    map: &mut M,
    records: Vec<Placed>,
    batch: Batch<M::Item>,
    tx: &SyncSender<Msg<M::Item>>,
) -> (bool, Option<Vec<Placed>>) {
    let (done, pending) = channel();
    match link.jobs.try_send(Job {
        records,
        batch,
        done,
    }) {
        Ok(()) => (tx.send(Msg::Pending(pending)).is_ok(), None),
        Err(TrySendError::Full(job) | TrySendError::Disconnected(job)) => {
            let Job {
                mut records,
                mut batch,
                ..
            } = job;
            map_run(map, &records, &mut batch);
            records.clear();
            (tx.send(Msg::Batch(batch)).is_ok(), Some(records))
        }
    }
}

/// A helper thread: maps the jobs of one stream with its own fork of the stream's map until the
/// worker is done, then returns the fork (for [`SampleMap::join`]).
fn helper<M: SampleMap>(
    mut map: M,
    jobs: &Mutex<Receiver<Job<M::Item>>>,
    records_back: Sender<Vec<Placed>>,
) -> M {
    loop {
        let job = jobs.lock().unwrap_or_else(|e| e.into_inner()).recv();
        let Ok(Job {
            mut records,
            mut batch,
            done,
        }) = job
        else {
            return map;
        };
        let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            map_run(&mut map, &records, &mut batch)
        }));
        if let Err(panic) = run {
            // Give back what the map holds (see SampleMap::end); the merge, finding `done`
            // closed, fails the decode with WorkerPanicked.
            map.end();
            std::panic::resume_unwind(panic);
        }
        // Nobody waits when the merge has stopped: then the batch is dropped.
        let _ = done.send(batch);
        records.clear();
        let _ = records_back.send(records);
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
    helpers: Option<HelperLink<M::Item>>,
) -> WorkerResult {
    let mut dec = RecordDecoder::new();
    let mut att = Attributor::new(stream, plan);
    let mut buf = piece_buffer(stream, opts);
    let mut batch = Batch::with_capacity(batch_len);
    // With helpers, records are gathered here and mapped by a helper (or by this worker when
    // all are busy); without, each is mapped as it is decoded.
    let mut records: Vec<Placed> =
        Vec::with_capacity(if helpers.is_some() { batch_len } else { 0 });
    let mut last_key = 0u64;
    let mut stopped = false;
    let done = |dec: RecordDecoder| WorkerResult {
        stats: *dec.stats(),
        issues: dec.issues().to_vec(),
    };
    let read = read_pieces(src, stream, &mut buf, &mut dec, |dec, piece, at| {
        if helpers.is_none() {
            map.begin();
        }
        dec.feed_each(piece, at, |r| {
            if stopped {
                return;
            }
            let c = att.attribute(r);
            if let Some(t) = c.time_ns {
                last_key = t;
            }
            batch.keys.push(last_key);
            match &helpers {
                Some(link) => {
                    records.push((*r, c));
                    if records.len() >= batch_len {
                        let keys = std::mem::replace(&mut batch, recycled(&free, batch_len));
                        let full = std::mem::take(&mut records);
                        let (sent, back) = hand_off(link, map, full, keys, &tx);
                        stopped = !sent;
                        records = back
                            .or_else(|| link.records_back.try_recv().ok())
                            .unwrap_or_else(|| Vec::with_capacity(batch_len));
                    }
                }
                None => {
                    batch.items.push(map.map(r, &c));
                    if batch.items.len() >= batch_len {
                        let full = std::mem::replace(&mut batch, recycled(&free, batch_len));
                        // The send blocks while the merge waits on other streams: nothing
                        // shared may be held meanwhile (see SampleMap::end).
                        map.end();
                        stopped = tx.send(Msg::Batch(full)).is_err();
                        map.begin();
                    }
                }
            }
        });
        if helpers.is_none() {
            map.end();
        }
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
    match &helpers {
        Some(link) if !records.is_empty() => {
            let _ = hand_off(link, map, records, batch, &tx);
        }
        _ if !batch.items.is_empty() => {
            let _ = tx.send(Msg::Batch(batch));
        }
        _ => {}
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
    let helpers_wanted = helpers_per_stream(plan, opts);
    // Each stream's forks, made before the maps are lent to the workers.
    let mut forks: Vec<Vec<M>> = maps
        .iter()
        .map(|m| (0..helpers_wanted).map_while(|_| m.fork()).collect())
        .collect();
    let batch_len = batch_records(
        plan.streams.len(),
        opts.buffer_budget_bytes,
        std::mem::size_of::<M::Item>(),
        forks.iter().map(Vec::len).max().unwrap_or(0),
    );
    let (result, joined) = std::thread::scope(|scope| {
        let mut handles = Vec::new();
        let mut helper_handles = Vec::new();
        let mut heads: Vec<Option<Head<M::Item>>> = Vec::new();
        let mut failure: Option<PipelineError<E>> = None;
        for (i, ((stream, map), forks)) in plan
            .streams
            .iter()
            .zip(maps.iter_mut())
            .zip(forks.iter_mut())
            .enumerate()
        {
            let (tx, rx) = sync_channel(CHANNEL_DEPTH);
            let (free_tx, free_rx) = channel();
            let link = if forks.is_empty() {
                None
            } else {
                let (jobs_tx, jobs_rx) = sync_channel(forks.len());
                let (back_tx, back_rx) = channel();
                let jobs_rx = Arc::new(Mutex::new(jobs_rx));
                for fork in forks.drain(..) {
                    let jobs_rx = jobs_rx.clone();
                    let back_tx = back_tx.clone();
                    let spawned = std::thread::Builder::new()
                        .spawn_scoped(scope, move || helper(fork, &jobs_rx, back_tx));
                    match spawned {
                        Ok(h) => helper_handles.push((i, h)),
                        // Fewer helpers: the worker maps what they cannot take.
                        Err(_) => break,
                    }
                }
                Some(HelperLink {
                    jobs: jobs_tx,
                    records_back: back_rx,
                })
            };
            let spawned = std::thread::Builder::new().spawn_scoped(scope, move || {
                let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    worker(
                        src, plan, stream, opts, batch_len, &mut *map, tx, free_rx, link,
                    )
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

        // Pulls the next batch of stream `i` (blocking); false when the stream is finished.
        let refill =
            |i: usize, head: &mut Head<M::Item>, failure: &mut Option<PipelineError<E>>| -> bool {
                loop {
                    let next = match head.rx.recv() {
                        Ok(Msg::Batch(b)) => b,
                        Ok(Msg::Pending(done)) => match done.recv() {
                            Ok(b) => b,
                            Err(_) => {
                                // The helper mapping it panicked.
                                if failure.is_none() {
                                    *failure = Some(PipelineError::WorkerPanicked { stream: i });
                                }
                                return false;
                            }
                        },
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
                    };
                    if next.items.is_empty() {
                        continue;
                    }
                    let done = std::mem::replace(&mut head.batch, next);
                    if done.items.capacity() > 0 {
                        let _ = head.free.send(done);
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
            if refill(i, head, &mut failure) {
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
            if head.pos < head.batch.items.len() || refill(i, head, &mut failure) {
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
        // The workers are done, so their job queues are closed and the helpers finish.
        let mut joined = Vec::new();
        for (i, h) in helper_handles {
            match h.join() {
                Ok(fork) => joined.push((i, fork)),
                Err(_) => {
                    if failure.is_none() {
                        failure = Some(PipelineError::WorkerPanicked { stream: i });
                    }
                }
            }
        }
        outcome.issues.sort_by_key(|i| i.offset);
        let result = match failure {
            Some(e) => Err(e),
            None => Ok(outcome),
        };
        (result, joined)
    });
    for (i, fork) in joined {
        maps[i].join(fork);
    }
    result
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
