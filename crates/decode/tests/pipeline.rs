//! The decode pipeline on in-memory streams whose content is known record by record.

use spelunk_decode::{
    decode, AuxChunkDesc, AuxSource, DecodeOptions, DecodePlan, PipelineError, StreamDesc,
    SwitchIn, ThreadTimeline,
};
use spelunk_spe::synth::{SynthConfig, SynthStream};
use spelunk_spe::{RecordLayout, SpeRecord, SpeSample};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// A "file" in memory; optionally fails reads that touch `fail_at`.
struct MemFile {
    bytes: Vec<u8>,
    fail_at: Option<u64>,
}

impl AuxSource for MemFile {
    fn read_at(&self, off: u64, buf: &mut [u8]) -> std::io::Result<()> {
        let end = off as usize + buf.len();
        if let Some(f) = self.fail_at {
            if (off..end as u64).contains(&f) {
                return Err(std::io::Error::other("injected read failure"));
            }
        }
        let src = self
            .bytes
            .get(off as usize..end)
            .ok_or_else(|| std::io::Error::other("past end"))?;
        buf.copy_from_slice(src);
        Ok(())
    }
    fn name(&self) -> String {
        "mem.data".into()
    }
}

/// Lays out `streams` (records per CPU) in one file, each stream cut into chunks of `chunk`
/// bytes interleaved between streams (as perf writes AUXTRACE records of several CPUs).
fn layout(streams: &[Vec<SpeRecord>], chunk: usize) -> (MemFile, Vec<StreamDesc>) {
    let encoded: Vec<Vec<u8>> = streams
        .iter()
        .map(|recs| {
            let mut b = Vec::new();
            for r in recs {
                r.encode(RecordLayout::N1Padded64, &mut b);
            }
            b
        })
        .collect();
    let mut file = vec![0xeeu8; 100]; // a "header" the chunks never point into
    let mut descs: Vec<StreamDesc> = (0..streams.len())
        .map(|i| StreamDesc {
            cpu: Some(i as u32),
            ..Default::default()
        })
        .collect();
    let mut pos = vec![0usize; streams.len()];
    loop {
        let mut progressed = false;
        for (i, e) in encoded.iter().enumerate() {
            if pos[i] < e.len() {
                let n = chunk.min(e.len() - pos[i]);
                descs[i].chunks.push(AuxChunkDesc {
                    file_offset: file.len() as u64,
                    size: n as u64,
                    contiguous: true,
                });
                file.extend_from_slice(&e[pos[i]..pos[i] + n]);
                file.extend_from_slice(&[0xee; 48]); // another record's header between chunks
                pos[i] += n;
                progressed = true;
            }
        }
        if !progressed {
            break;
        }
    }
    (
        MemFile {
            bytes: file,
            fail_at: None,
        },
        descs,
    )
}

fn synth(seed: u64, n: usize, context: Option<u32>, first_ts: u64) -> Vec<SpeRecord> {
    let cfg = SynthConfig {
        seed,
        context,
        first_timestamp: first_ts,
        ..SynthConfig::default()
    };
    SynthStream::new(cfg).take(n).collect()
}

fn collect(
    file: &MemFile,
    plan: &DecodePlan,
    opts: &DecodeOptions,
) -> (Vec<SpeSample>, spelunk_decode::DecodeOutcome) {
    let mut out = Vec::new();
    let outcome = decode(file, plan, opts, |s| {
        out.push(*s);
        Ok::<(), std::io::Error>(())
    })
    .unwrap();
    (out, outcome)
}

#[test]
fn streams_merge_by_time_and_keep_every_record() {
    let streams = vec![
        synth(1, 5000, Some(100), 1_000_000),
        synth(2, 3000, Some(200), 1_000_500),
        synth(3, 1, None, 0),
    ];
    // 1000-byte chunks split records and packets at arbitrary points.
    let (file, descs) = layout(&streams, 1000);
    let plan = DecodePlan {
        streams: descs,
        time_conv: Some(Arc::new(|ticks| ticks * 40)), // 25 MHz timer
        threads: ThreadTimeline::new(),
    };
    // A tiny buffer budget forces many small batches through the channels.
    let opts = DecodeOptions {
        piece_bytes: 777,
        buffer_budget_bytes: 1,
        ..Default::default()
    };
    let (out, outcome) = collect(&file, &plan, &opts);
    assert_eq!(out.len(), 8001);
    assert_eq!(outcome.samples, 8001);
    assert!(!outcome.stats.has_losses(), "{:?}", outcome.stats);
    assert!(outcome.issues.is_empty());
    // Globally ordered by time.
    assert!(out.windows(2).all(|w| w[0].time_ns <= w[1].time_ns));
    // Each stream's records come out unchanged and in order, with time = ticks × 40.
    for (cpu, recs) in streams.iter().enumerate() {
        let got: Vec<&SpeSample> = out.iter().filter(|s| s.cpu == Some(cpu as u32)).collect();
        assert_eq!(got.len(), recs.len());
        for (s, r) in got.iter().zip(recs) {
            assert_eq!(s.record, *r);
            assert_eq!(s.time_ns, r.timestamp.map(|t| t * 40));
            assert_eq!(s.tid, r.context_el1);
        }
    }
}

#[test]
fn threads_from_the_timeline_when_records_have_no_context() {
    let recs = synth(7, 1000, None, 1000);
    let mid = recs[500].timestamp.unwrap();
    let (file, descs) = layout(std::slice::from_ref(&recs), 4096);
    let mut threads = ThreadTimeline::new();
    threads.switch_in(SwitchIn {
        cpu: 0,
        time_ns: 0,
        pid: 50,
        tid: 51,
    });
    threads.switch_in(SwitchIn {
        cpu: 0,
        time_ns: mid,
        pid: 60,
        tid: 60,
    });
    threads.finish();
    let plan = DecodePlan {
        streams: descs,
        time_conv: Some(Arc::new(|t| t)),
        threads,
    };
    let (out, _) = collect(&file, &plan, &DecodeOptions::default());
    for s in &out {
        let want = if s.time_ns.unwrap() < mid {
            (50, 51)
        } else {
            (60, 60)
        };
        assert_eq!((s.pid.unwrap(), s.tid.unwrap()), want);
    }
}

#[test]
fn gaps_reset_the_decoder_and_are_counted() {
    let recs = synth(9, 10, Some(1), 1000);
    let (file, mut descs) = layout(&[recs], 100); // 64-byte records: chunk 2 starts mid-record
    descs[0].chunks[1].contiguous = false;
    let plan = DecodePlan {
        streams: descs,
        time_conv: None,
        threads: ThreadTimeline::new(),
    };
    let (out, outcome) = collect(&file, &plan, &DecodeOptions::default());
    // Chunk 1 = record 0 + 36 bytes of record 1 (incomplete at the gap); chunk 2 starts 28 bytes
    // into record 1: its tail decodes as a record without PC (the ADDRESS/... packets after the
    // cut) — the decoder cannot know it was cut, only that it lost data at the gap.
    assert_eq!(outcome.stats.incomplete_records, 1);
    assert_eq!(out.iter().filter(|s| s.record.pc.is_some()).count(), 9);
    assert!(
        out.iter().all(|s| s.time_ns.is_none()),
        "no TIME_CONV: no perf time"
    );
}

#[test]
fn read_errors_name_the_offset_and_keep_earlier_samples() {
    let recs = synth(11, 2000, Some(1), 1000);
    let (mut file, descs) = layout(&[recs], 8192);
    let bad = descs[0].chunks[3].file_offset + 10;
    file.fail_at = Some(bad);
    let plan = DecodePlan {
        streams: descs.clone(),
        time_conv: None,
        threads: ThreadTimeline::new(),
    };
    let mut n = 0;
    let err = decode(
        &file,
        &plan,
        &DecodeOptions {
            piece_bytes: 8192,
            ..Default::default()
        },
        |_| {
            n += 1;
            Ok::<(), std::io::Error>(())
        },
    )
    .unwrap_err();
    match err {
        PipelineError::Read { name, offset, .. } => {
            assert_eq!(name, "mem.data");
            assert_eq!(offset, descs[0].chunks[3].file_offset);
        }
        other => panic!("unexpected {other:?}"),
    }
    // The first 3 chunks (3 × 8192 bytes = 384 records) reached the sink... at least those that
    // were batched before the failure; never more than were decoded.
    assert!(n <= 384);
}

#[test]
fn sink_errors_stop_the_workers() {
    let streams = vec![synth(1, 20000, Some(1), 0), synth(2, 20000, Some(2), 0)];
    let (file, descs) = layout(&streams, 65536);
    let plan = DecodePlan {
        streams: descs,
        time_conv: None,
        threads: ThreadTimeline::new(),
    };
    let mut n = 0;
    let err = decode(&file, &plan, &DecodeOptions::default(), |_| {
        n += 1;
        if n == 100 {
            Err(std::io::Error::other("disk full"))
        } else {
            Ok(())
        }
    })
    .unwrap_err();
    assert!(matches!(err, PipelineError::Sink(_)));
    assert_eq!(n, 100);
}

/// A pool of one token, which maps hold while they map (as the report's profile shards are
/// pooled): workers must give it back before they block handing a batch to the merge, which
/// may be waiting for another stream's batch, or the decode would deadlock. A worker that
/// waits more than 20 s for the token records it and panics (a failed test, not a hang).
struct TokenPool {
    free: Mutex<bool>,
    returned: Condvar,
    timed_out: AtomicBool,
}

impl TokenPool {
    fn new() -> Self {
        TokenPool {
            free: Mutex::new(true),
            returned: Condvar::new(),
            timed_out: AtomicBool::new(false),
        }
    }

    fn maps(&self, n: usize) -> Vec<TokenMap<'_>> {
        (0..n)
            .map(|_| TokenMap {
                pool: self,
                held: false,
                mapped: 0,
                unpaired_ends: 0,
                panic_at: None,
            })
            .collect()
    }

    fn is_free(&self) -> bool {
        *self.free.lock().unwrap_or_else(|e| e.into_inner())
    }
}

struct TokenMap<'p> {
    pool: &'p TokenPool,
    held: bool,
    mapped: u64,
    unpaired_ends: u64,
    /// Panics on mapping this many records (a bug in a map or the decoder).
    panic_at: Option<u64>,
}

impl spelunk_decode::SampleMap for TokenMap<'_> {
    type Item = u32;
    fn map(&mut self, r: &SpeRecord, _: &spelunk_decode::SampleContext) -> u32 {
        assert!(self.held, "map called outside begin/end");
        self.mapped += 1;
        if Some(self.mapped) == self.panic_at {
            panic!("injected panic while holding the token");
        }
        r.context_el1.unwrap_or(0)
    }
    fn begin(&mut self) {
        assert!(!self.held, "begin twice");
        let free = self.pool.free.lock().unwrap_or_else(|e| e.into_inner());
        let (mut free, wait) = self
            .pool
            .returned
            .wait_timeout_while(free, Duration::from_secs(20), |f| !*f)
            .unwrap_or_else(|e| e.into_inner());
        if wait.timed_out() {
            self.pool.timed_out.store(true, Ordering::Relaxed);
            panic!("token never given back: deadlock");
        }
        *free = false;
        self.held = true;
    }
    fn end(&mut self) {
        if !self.held {
            self.unpaired_ends += 1;
            return;
        }
        *self.pool.free.lock().unwrap_or_else(|e| e.into_inner()) = true;
        self.pool.returned.notify_all();
        self.held = false;
    }
}

/// Six streams of interleaved times (the merge needs every stream's next batch in turn),
/// decoded in the smallest batches so the workers block on the merge often.
fn six_interleaved_streams() -> (Vec<Vec<SpeRecord>>, MemFile, DecodePlan, DecodeOptions) {
    let streams: Vec<Vec<SpeRecord>> = (0..6)
        .map(|i| synth(10 + i, 4000, Some(100 + i as u32), 1_000_000 + i * 7))
        .collect();
    let (file, descs) = layout(&streams, 1000);
    let plan = DecodePlan {
        streams: descs,
        time_conv: Some(Arc::new(|ticks| ticks)),
        threads: ThreadTimeline::new(),
    };
    let opts = DecodeOptions {
        piece_bytes: 4096,
        buffer_budget_bytes: 1,
        ..Default::default()
    };
    (streams, file, plan, opts)
}

#[test]
fn maps_sharing_one_token_neither_deadlock_nor_map_outside_a_run() {
    let (streams, file, plan, opts) = six_interleaved_streams();
    let pool = TokenPool::new();
    let mut maps = pool.maps(streams.len());
    let mut per_tid = std::collections::HashMap::<u32, u64>::new();
    spelunk_decode::decode_map(&file, &plan, &opts, &mut maps, |tid| {
        *per_tid.entry(*tid).or_default() += 1;
        Ok::<(), std::io::Error>(())
    })
    .unwrap();
    for (i, (m, recs)) in maps.iter().zip(&streams).enumerate() {
        assert!(!m.held, "stream {i} kept the token");
        assert_eq!(m.unpaired_ends, 0, "stream {i}: end without begin");
        assert_eq!(m.mapped, recs.len() as u64);
        assert_eq!(per_tid[&(100 + i as u32)], recs.len() as u64);
    }
    assert!(pool.is_free(), "the token is back");
}

/// A worker that panics while its map holds the token: the decode fails with
/// WorkerPanicked, and no other worker waits for the token in vain.
#[test]
fn a_worker_panicking_inside_a_run_fails_the_decode_without_a_hang() {
    let (streams, file, plan, opts) = six_interleaved_streams();
    let pool = TokenPool::new();
    let mut maps = pool.maps(streams.len());
    maps[2].panic_at = Some(1500);
    let r = spelunk_decode::decode_map(&file, &plan, &opts, &mut maps, |_| {
        Ok::<(), std::io::Error>(())
    });
    assert!(
        matches!(r, Err(PipelineError::WorkerPanicked { stream: 2 })),
        "{r:?}"
    );
    assert!(
        !pool.timed_out.load(Ordering::Relaxed),
        "a worker waited for the token in vain"
    );
    assert!(!maps[2].held, "the panicking worker's token was given back");
}

/// A map whose forks map on helper threads (as the report's and `decode`'s maps do), all of
/// them sharing one token (so a helper and its worker hold it in turn), the samples
/// themselves as items.
struct ForkingMap<'p> {
    token: TokenMap<'p>,
    forks_joined: u64,
    mapped_by_forks: u64,
    /// A fork panics on mapping this many records.
    fork_panic_at: Option<u64>,
}

impl<'p> ForkingMap<'p> {
    fn new(pool: &'p TokenPool, n: usize, fork_panic_at: Option<u64>) -> Vec<Self> {
        pool.maps(n)
            .into_iter()
            .map(|token| ForkingMap {
                token,
                forks_joined: 0,
                mapped_by_forks: 0,
                fork_panic_at,
            })
            .collect()
    }
}

impl spelunk_decode::SampleMap for ForkingMap<'_> {
    type Item = SpeSample;
    fn map(&mut self, r: &SpeRecord, c: &spelunk_decode::SampleContext) -> SpeSample {
        self.token.map(r, c);
        c.sample(r)
    }
    fn begin(&mut self) {
        self.token.begin();
    }
    fn end(&mut self) {
        self.token.end();
    }
    fn fork(&self) -> Option<Self> {
        let mut fork = ForkingMap::new(self.token.pool, 1, self.fork_panic_at).pop()?;
        fork.token.panic_at = self.fork_panic_at;
        Some(fork)
    }
    fn join(&mut self, fork: Self) {
        assert!(!fork.token.held, "a fork kept the token");
        assert_eq!(
            fork.token.unpaired_ends, 0,
            "a fork ended without beginning"
        );
        self.forks_joined += 1;
        self.mapped_by_forks += fork.token.mapped;
    }
}

/// One stream of `n` synthetic records in chunks of `chunk` bytes, with a timer when `timed`.
fn one_stream(
    seed: u64,
    n: usize,
    chunk: usize,
    timed: bool,
) -> (Vec<SpeRecord>, MemFile, DecodePlan) {
    let records = synth(seed, n, Some(5), if timed { 1_000 } else { 0 });
    let (file, descs) = layout(std::slice::from_ref(&records), chunk);
    let time_conv: Option<spelunk_decode::TimeConvFn> = if timed {
        Some(Arc::new(|ticks| ticks))
    } else {
        None
    };
    let plan = DecodePlan {
        streams: descs,
        time_conv,
        threads: ThreadTimeline::new(),
    };
    (records, file, plan)
}

/// With helper threads mapping a stream's batches (one stream, as a program recorded on one
/// CPU has, and six interleaved ones), the sink gets exactly the samples, in exactly the order,
/// that a decode without helpers gives; every record is mapped once, by the worker or a helper;
/// every fork is joined back.
#[test]
fn helpers_keep_every_sample_in_order() {
    let (records, file1, one_plan) = one_stream(7, 20000, 1000, true);
    let one = vec![records];
    let (six, file6, six_plan, _) = six_interleaved_streams();
    for (streams, file, plan) in [(&one, &file1, &one_plan), (&six, &file6, &six_plan)] {
        let small = DecodeOptions {
            piece_bytes: 4096,
            buffer_budget_bytes: 1,
            helpers_per_stream: Some(0),
            ..Default::default()
        };
        let (want, _) = collect(file, plan, &small);
        assert_eq!(want.len(), streams.iter().map(Vec::len).sum::<usize>());
        for helpers in [1, 2, 3] {
            let opts = DecodeOptions {
                helpers_per_stream: Some(helpers),
                ..small.clone()
            };
            let pool = TokenPool::new();
            let mut maps = ForkingMap::new(&pool, streams.len(), None);
            let mut got = Vec::with_capacity(want.len());
            let outcome = spelunk_decode::decode_map(file, plan, &opts, &mut maps, |s| {
                got.push(*s);
                Ok::<(), std::io::Error>(())
            })
            .unwrap();
            assert_eq!(outcome.samples, want.len() as u64);
            assert!(got == want, "{helpers} helpers: samples differ");
            for (m, recs) in maps.iter().zip(streams.iter()) {
                assert_eq!(m.forks_joined, helpers as u64);
                // Each record is decoded and mapped once, by the worker or a helper.
                assert_eq!(m.token.mapped + m.mapped_by_forks, recs.len() as u64);
                // The stream has many segments, taken in turn.
                assert!(m.mapped_by_forks > 0, "the helpers mapped nothing");
                assert!(!m.token.held);
            }
            assert!(pool.is_free(), "the token is back");
            assert!(!pool.timed_out.load(Ordering::Relaxed));
        }
    }
}

/// A helper that panics while it holds the token: the decode fails with WorkerPanicked for
/// its stream, and nobody waits for the token in vain.
#[test]
fn a_helper_panicking_fails_the_decode_without_a_hang() {
    let (_, file, plan) = one_stream(9, 30000, 1000, true);
    let opts = DecodeOptions {
        piece_bytes: 4096,
        buffer_budget_bytes: 1,
        helpers_per_stream: Some(2),
        ..Default::default()
    };
    let pool = TokenPool::new();
    let mut maps = ForkingMap::new(&pool, 1, Some(300));
    let r = spelunk_decode::decode_map(&file, &plan, &opts, &mut maps, |_| {
        Ok::<(), std::io::Error>(())
    });
    assert!(
        matches!(r, Err(PipelineError::WorkerPanicked { stream: 0 })),
        "{r:?}"
    );
    assert!(!pool.timed_out.load(Ordering::Relaxed));
}

/// A sink error with helpers at work stops the worker and its helpers (no hang).
#[test]
fn sink_errors_stop_the_helpers() {
    let (_, file, plan) = one_stream(4, 40000, 65536, false);
    let opts = DecodeOptions {
        buffer_budget_bytes: 1,
        helpers_per_stream: Some(3),
        ..Default::default()
    };
    let pool = TokenPool::new();
    let mut maps = ForkingMap::new(&pool, 1, None);
    let mut n = 0;
    let err = spelunk_decode::decode_map(&file, &plan, &opts, &mut maps, |_| {
        n += 1;
        if n == 1000 {
            Err(std::io::Error::other("disk full"))
        } else {
            Ok(())
        }
    })
    .unwrap_err();
    assert!(matches!(err, PipelineError::Sink(_)));
    assert_eq!(n, 1000);
    assert!(pool.is_free());
}

/// Helpers go where cores would idle: none when the streams fill the cores, the idle cores
/// shared among the streams otherwise, at most MAX_HELPERS_PER_STREAM each.
#[test]
fn helpers_fill_idle_cores() {
    use spelunk_decode::{map_helpers, MAX_HELPERS_PER_STREAM};
    assert_eq!(map_helpers(1, 2), 1);
    assert_eq!(map_helpers(2, 2), 0);
    assert_eq!(map_helpers(64, 8), 0);
    assert_eq!(map_helpers(2, 8), 3);
    assert_eq!(map_helpers(3, 8), 1);
    assert_eq!(map_helpers(1, 64), MAX_HELPERS_PER_STREAM);
    assert_eq!(map_helpers(0, 4), 0);
}

/// On damaged data — garbage bytes inside chunks, gaps, chunks cut mid-packet, untimed
/// records — a stream decoded in segments by a worker and helpers gives exactly the serial
/// decode: the samples in order, every statistic, the issues with their offsets.
#[test]
fn helpers_decode_damaged_streams_as_the_serial_decoder_does() {
    let mut records = synth(21, 6000, Some(9), 5_000);
    for r in records.iter_mut().skip(100).step_by(37) {
        r.timestamp = None; // untimed records, some at segment starts
    }
    let (mut file, mut descs) = layout(std::slice::from_ref(&records), 700);
    // Garbage inside some chunks (bad packets, lost records) and gaps between others.
    for (k, c) in descs[0].chunks.iter_mut().enumerate() {
        if k % 5 == 2 {
            let at = c.file_offset as usize + 13;
            file.bytes[at..at + 3].copy_from_slice(&[0x4b, 0xff, 0x07]);
        }
        if k % 7 == 3 {
            c.contiguous = false;
        }
    }
    let plan = DecodePlan {
        streams: descs,
        time_conv: Some(Arc::new(|ticks| ticks)),
        threads: ThreadTimeline::new(),
    };
    let serial = DecodeOptions {
        piece_bytes: 2048,
        buffer_budget_bytes: 1,
        helpers_per_stream: Some(0),
        ..Default::default()
    };
    let (want, want_outcome) = collect(&file, &plan, &serial);
    assert!(want_outcome.stats.bad_bytes > 0 && want_outcome.stats.incomplete_records > 0);
    for helpers in [1, 3] {
        let opts = DecodeOptions {
            helpers_per_stream: Some(helpers),
            ..serial.clone()
        };
        let pool = TokenPool::new();
        let mut maps = ForkingMap::new(&pool, 1, None);
        let mut got = Vec::new();
        let outcome = spelunk_decode::decode_map(&file, &plan, &opts, &mut maps, |s| {
            got.push(*s);
            Ok::<(), std::io::Error>(())
        })
        .unwrap();
        assert!(got == want, "{helpers} helpers: samples differ");
        assert_eq!(outcome.stats, want_outcome.stats, "{helpers} helpers");
        assert_eq!(outcome.issues, want_outcome.issues, "{helpers} helpers");
        assert!(maps[0].mapped_by_forks > 0);
    }
    // A failed read: the same error, and no sample after it.
    file.fail_at = Some(plan.streams[0].chunks[40].file_offset + 5);
    let opts = DecodeOptions {
        helpers_per_stream: Some(2),
        ..serial.clone()
    };
    let pool = TokenPool::new();
    let mut maps = ForkingMap::new(&pool, 1, None);
    let mut n = 0usize;
    let err = spelunk_decode::decode_map(&file, &plan, &opts, &mut maps, |_| {
        n += 1;
        Ok::<(), std::io::Error>(())
    })
    .unwrap_err();
    match err {
        PipelineError::Read { offset, .. } => {
            assert_eq!(offset, plan.streams[0].chunks[40].file_offset)
        }
        other => panic!("unexpected {other:?}"),
    }
    assert!(n < want.len());
    assert!(!pool.timed_out.load(Ordering::Relaxed));
}
