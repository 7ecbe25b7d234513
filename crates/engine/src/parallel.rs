//! The report's decode in parallel: each decode worker aggregates its stream's samples into a
//! shard of the profile ([`ProfileShard`]), and only the order-dependent part (first time,
//! timeline reservoir) runs in the time-ordered merge. The same report as feeding every
//! sample to one [`ProfileBuilder`] in decode order (tested below).

use crate::recording::{Recording, RecordingError};
use spelunk_analysis::profile::{OrderedSample, ProfileBuilder, ProfileShard};
use spelunk_decode::{SampleContext, SampleMap};
use spelunk_spe::{DecodeStats, SpeRecord, SpeSample};
use std::sync::{Condvar, Mutex};

/// The profile shards the decode workers aggregate into: about one per core, however many
/// streams (CPUs) the recording has. Each shard holds a set of per-PC aggregates, so one per
/// stream would cost a recording of 64 CPUs running the same code 64 copies of them.
struct ShardPool<'a> {
    free: Mutex<Vec<ProfileShard<'a>>>,
    returned: Condvar,
}

impl<'a> ShardPool<'a> {
    /// `n` shards of `builder` (at least one).
    fn new(builder: &ProfileBuilder<'a>, n: usize) -> Self {
        ShardPool {
            free: Mutex::new((0..n.max(1)).map(|_| builder.shard()).collect()),
            returned: Condvar::new(),
        }
    }

    /// Takes a free shard, waiting for one if all are taken (their holders are mapping
    /// records, never waiting on anything: see SampleMap::end).
    fn take(&self) -> ProfileShard<'a> {
        let mut free = self.free.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(s) = free.pop() {
                return s;
            }
            free = self.returned.wait(free).unwrap_or_else(|e| e.into_inner());
        }
    }

    fn give_back(&self, shard: ProfileShard<'a>) {
        self.free
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(shard);
        self.returned.notify_one();
    }

    fn into_shards(self) -> Vec<ProfileShard<'a>> {
        self.free.into_inner().unwrap_or_else(|e| e.into_inner())
    }
}

/// A decode worker's part of the report: aggregates its stream's samples into a shard of the
/// profile taken from the pool for each run of records (in parallel with the other streams)
/// and passes on, in time order, what the order-dependent part needs.
struct ProfileMap<'p, 'a> {
    pool: &'p ShardPool<'a>,
    held: Option<ProfileShard<'a>>,
}

impl<'p, 'a> ProfileMap<'p, 'a> {
    fn new(pool: &'p ShardPool<'a>) -> Self {
        ProfileMap { pool, held: None }
    }

    /// The shard this map holds, taken from the pool if it holds none (the worker calls
    /// `begin` first, so only a map used outside a run takes one here).
    #[inline]
    fn shard(&mut self) -> &mut ProfileShard<'a> {
        let pool = self.pool;
        self.held.get_or_insert_with(|| pool.take())
    }

    #[inline]
    fn add(&mut self, s: &SpeSample) -> OrderedSample {
        self.shard().add(s)
    }

    fn take(&mut self) {
        self.shard();
    }

    fn give_back(&mut self) {
        if let Some(s) = self.held.take() {
            self.pool.give_back(s);
        }
    }
}

impl SampleMap for ProfileMap<'_, '_> {
    type Item = OrderedSample;
    #[inline]
    fn map(&mut self, r: &SpeRecord, c: &SampleContext) -> OrderedSample {
        self.add(&c.sample(r))
    }
    fn begin(&mut self) {
        self.take();
    }
    fn end(&mut self) {
        self.give_back();
    }
    /// Helpers aggregate into shards of the same pool: the shards are summed at the end.
    fn fork(&self) -> Option<Self> {
        Some(ProfileMap::new(self.pool))
    }
}

/// [`ProfileMap`] that also passes the sample on, for the passes riding on the report's
/// decode (the c2c scan, the advisor's scan: they take samples in time order).
struct ProfileMapWithSample<'p, 'a>(ProfileMap<'p, 'a>);

impl SampleMap for ProfileMapWithSample<'_, '_> {
    type Item = (OrderedSample, SpeSample);
    #[inline]
    fn map(&mut self, r: &SpeRecord, c: &SampleContext) -> (OrderedSample, SpeSample) {
        let s = c.sample(r);
        (self.0.add(&s), s)
    }
    fn begin(&mut self) {
        self.0.take();
    }
    fn end(&mut self) {
        self.0.give_back();
    }
    fn fork(&self) -> Option<Self> {
        self.0.fork().map(ProfileMapWithSample)
    }
}

/// A pass fed every decoded sample in time order beside the profile (the c2c scan's first
/// pass, the advisor's access scan).
pub type SampleTap<'t> = &'t mut dyn FnMut(&SpeSample);

/// Decodes `rec` into `builder` (and into `tap`, e.g. c2c's first pass): the same report as
/// `rec.decode(|s| builder.add(s))`, but the per-sample aggregation runs in the decode
/// workers, into a pool of shards (about one per core), and only the order-dependent part (first
/// time, timeline reservoir) in the time-ordered merge; the shards are merged at the end
/// (sums).
pub fn profile(
    rec: &Recording,
    builder: &mut ProfileBuilder,
    tap: Option<SampleTap>,
) -> Result<DecodeStats, RecordingError> {
    // One shard more than the cores: a worker the OS deschedules while it holds a shard does
    // not stall the others (measured on 2 cores, 1 GiB, 64 streams: 2 shards 10.3 s, 3
    // shards 8.6 s; docs/performance.md).
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    profile_in(rec, builder, tap, cores + 1)
}

/// Samples per batch handed to a side pass's thread: large enough that the hand-off costs
/// nothing per sample, small enough (4096 × ~120 bytes) to stay in cache.
const SIDE_BATCH: usize = 4096;
/// Batches in flight to the side pass: the merge runs ahead of it by at most this many.
const SIDE_QUEUE: usize = 8;

/// [`profile`] with `side` fed every decoded sample in time order on a thread of its own (the
/// passes riding on the report's decode: the advisor's scan, c2c's first pass), so the
/// time-ordered merge only hands samples over in batches and the side pass runs beside the
/// decode instead of holding up the merge (on a 256 MiB recording the advisor's scan in the
/// merge made `spelunk report` 3.2× slower: docs/performance.md). The side pass gets the
/// samples in the same order as a tap would: its results are the same.
pub fn profile_with_side_pass<F>(
    rec: &Recording,
    builder: &mut ProfileBuilder,
    mut side: F,
) -> Result<DecodeStats, RecordingError>
where
    F: FnMut(&SpeSample) + Send,
{
    std::thread::scope(|scope| {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<SpeSample>>(SIDE_QUEUE);
        let worker = scope.spawn(move || {
            for batch in rx {
                batch.iter().for_each(&mut side);
            }
        });
        let mut batch = Vec::with_capacity(SIDE_BATCH);
        let mut tap = |s: &SpeSample| {
            batch.push(*s);
            if batch.len() >= SIDE_BATCH {
                let full = std::mem::replace(&mut batch, Vec::with_capacity(SIDE_BATCH));
                // A send fails only when the side pass panicked: the join below says so.
                let _ = tx.send(full);
            }
        };
        let stats = profile(rec, builder, Some(&mut tap));
        if !batch.is_empty() {
            let _ = tx.send(batch);
        }
        drop(tx);
        if let Err(panic) = worker.join() {
            std::panic::resume_unwind(panic);
        }
        stats
    })
}

/// [`profile`] with at most `shards` shards.
fn profile_in(
    rec: &Recording,
    builder: &mut ProfileBuilder,
    tap: Option<SampleTap>,
    shards: usize,
) -> Result<DecodeStats, RecordingError> {
    if builder.needs_first_time() {
        // A time range is relative to the first sample: the shards need it before the decode.
        let t0 = rec.first_time_ns()?;
        builder.set_first_time(t0);
    }
    // No more shards than threads mapping at once: each stream's worker and its helpers.
    let mapping = rec.plan.streams.len() * (1 + rec.map_helpers());
    let pool = ShardPool::new(builder, shards.min(mapping));
    let stats = match tap {
        None => {
            let mut maps: Vec<_> = rec
                .plan
                .streams
                .iter()
                .map(|_| ProfileMap::new(&pool))
                .collect();
            let stats = rec.decode_map(&mut maps, |o| builder.add_ordered(o))?;
            maps.iter_mut().for_each(ProfileMap::give_back);
            stats
        }
        Some(tap) => {
            let mut maps: Vec<_> = rec
                .plan
                .streams
                .iter()
                .map(|_| ProfileMapWithSample(ProfileMap::new(&pool)))
                .collect();
            let stats = rec.decode_map(&mut maps, |(o, s)| {
                builder.add_ordered(o);
                tap(s);
            })?;
            maps.iter_mut().for_each(|m| m.0.give_back());
            stats
        }
    };
    if let Some(all) = ProfileShard::merge_all(pool.into_shards()) {
        builder.merge(all);
    }
    Ok(stats)
}

#[cfg(test)]
mod tests {
    use super::*;
    use spelunk_analysis::model::RecordingInfo;
    use spelunk_analysis::profile::{EventClass, Filter, ReportLimits};
    use spelunk_testkit::SynthRecording;

    /// However few shards the workers share (one for six streams) or many (one each), and
    /// with or without helper threads mapping each stream's batches (one stream or six), the
    /// report is the serial one: every sample fed in decode order to one builder, timeline and
    /// time-range filter included.
    #[test]
    fn any_number_of_shards_gives_the_serial_report() {
        let dir = std::env::temp_dir().join(format!("spelunk-shard-pool-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for cpus in [6, 1] {
            let path = dir.join(format!("{cpus}-cpus.data"));
            SynthRecording {
                cpus,
                records_per_cpu: 24000 / u64::from(cpus),
                chunk_bytes: 4096,
                ..Default::default()
            }
            .write(&path)
            .unwrap();
            let mut rec =
                Recording::open(&path, None, spelunk_perf::sidecar::SidecarUse::Read).unwrap();
            assert_eq!(rec.plan.streams.len(), cpus as usize);
            let objects = rec.ctx.data_objects(None);
            let limits = ReportLimits {
                timeline_points: 500,
                ..Default::default()
            };
            let json = |rec: &Recording, b: ProfileBuilder| {
                let mut sym = rec.symbolizer(None, None);
                let r = b.finish(
                    &rec.ctx.spaces,
                    &mut sym,
                    &rec.ctx.thread_names,
                    RecordingInfo::default(),
                    None,
                );
                serde_json::to_string(&r).unwrap()
            };
            let filters = [
                Filter::default(),
                Filter {
                    time_range_s: Some((0.001, 0.003)),
                    event: Some(EventClass::Load),
                    ..Default::default()
                },
            ];
            for filter in filters {
                rec.decode_options.helpers_per_stream = Some(0);
                let mut serial = ProfileBuilder::new(&rec.interp, &objects, filter.clone(), limits);
                rec.decode(|s| serial.add(s)).unwrap();
                let want = json(&rec, serial);
                assert!(want.contains("\"loads\""), "{want}");
                for helpers in [0, 1, 3] {
                    rec.decode_options.helpers_per_stream = Some(helpers);
                    // Small batches: many hand-offs to the helpers.
                    rec.decode_options.buffer_budget_bytes = 1;
                    for shards in [1, 2, 6] {
                        let mut b =
                            ProfileBuilder::new(&rec.interp, &objects, filter.clone(), limits);
                        profile_in(&rec, &mut b, None, shards).unwrap();
                        assert!(
                            json(&rec, b) == want,
                            "{cpus} streams, {helpers} helpers, {shards} shards, {filter:?}"
                        );
                    }
                }
            }
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
