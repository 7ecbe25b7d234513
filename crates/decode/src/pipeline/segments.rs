//! One AUX stream decoded on several threads, with the serial decode's result.
//!
//! With fewer streams than cores (a program recorded on one CPU has one AUX stream), a stream
//! is cut into segments: runs of whole AUX chunks of about a read piece, a larger chunk cut at
//! piece boundaries ([`split`]). A framing thread runs the stream's decoder over the whole
//! stream without placing or mapping its records (a third of the per-record work), and at each
//! segment's start hands over where the decoder is: between records, or inside a packet or a
//! record ([`RecordDecoder::resumed`]). The stream's worker and its helper threads take the
//! segments in turn; each decodes its segment from exactly that state, so every record is
//! decoded once and as the serial decoder decodes it, and places and maps it as a lone worker
//! would ([`super::SampleMap::fork`]). The merge reads the segments' batches in stream order.
//! The stream's statistics and issues are the framing decoder's: the serial decode's.

use super::{
    decode_part, piece_buffer, read_pieces, Attributor, AuxChunkDesc, AuxSource, Batch,
    DecodeOptions, DecodePlan, PartEnd, PartSink, SampleMap, StreamDesc,
};
use spelunk_spe::RecordDecoder;
use std::sync::mpsc::{Receiver, Sender, SyncSender};
use std::sync::{Condvar, Mutex};

/// Cuts `stream` into segments of about `target_bytes`: whole chunks while they fit (a chunk
/// boundary is a record boundary on real recordings), a larger chunk cut from its start at
/// multiples of `target_bytes` (record boundaries too when records have a fixed size dividing
/// it, as N1's 64 bytes do), its later parts contiguous with the first.
pub(crate) fn split(stream: &StreamDesc, target_bytes: u64) -> Vec<StreamDesc> {
    let target = target_bytes.max(1);
    let empty = || StreamDesc {
        chunks: Vec::new(),
        ..stream.clone()
    };
    let mut out = Vec::new();
    let mut cur = empty();
    let mut cur_bytes = 0u64;
    for c in &stream.chunks {
        if c.size <= target {
            cur.chunks.push(*c);
            cur_bytes += c.size;
        } else {
            if !cur.chunks.is_empty() {
                out.push(std::mem::replace(&mut cur, empty()));
            }
            let mut off = 0u64;
            while off < c.size {
                let n = (c.size - off).min(target);
                cur.chunks.push(AuxChunkDesc {
                    file_offset: c.file_offset + off,
                    size: n,
                    contiguous: c.contiguous || off > 0,
                });
                off += n;
                cur_bytes = n;
                if n == target {
                    out.push(std::mem::replace(&mut cur, empty()));
                    cur_bytes = 0;
                }
            }
        }
        if cur_bytes >= target {
            out.push(std::mem::replace(&mut cur, empty()));
            cur_bytes = 0;
        }
    }
    if !cur.chunks.is_empty() {
        out.push(cur);
    }
    out
}

/// What a segment thread sends the merge, per segment in turn: its batches, then its end (or
/// the read that failed).
pub(crate) enum SegMsg<T> {
    Batch(Batch<T>),
    End,
    ReadError {
        offset: u64,
        len: usize,
        error: std::io::Error,
    },
}

/// Where a segment's decode starts: the framing decoder's state there, or the read that failed
/// before it.
enum Start {
    Pending,
    At(Box<RecordDecoder>),
    Failed {
        offset: u64,
        len: usize,
        kind: std::io::ErrorKind,
        message: String,
    },
}

/// The segments' starts, filled in by the framing thread as it reaches them.
pub(crate) struct Starts {
    slots: Vec<Mutex<Start>>,
    ready: Condvar,
}

impl Starts {
    pub(crate) fn new(segments: usize) -> Self {
        Starts {
            slots: (0..segments).map(|_| Mutex::new(Start::Pending)).collect(),
            ready: Condvar::new(),
        }
    }

    fn set(&self, k: usize, start: Start) {
        if let Some(slot) = self.slots.get(k) {
            *slot.lock().unwrap_or_else(|e| e.into_inner()) = start;
            self.ready.notify_all();
        }
    }

    /// Waits for segment `k`'s start: the decoder to decode it with, or the failed read.
    fn wait(&self, k: usize) -> Result<RecordDecoder, (u64, usize, std::io::Error)> {
        let Some(slot) = self.slots.get(k) else {
            return Ok(RecordDecoder::new());
        };
        let mut s = slot.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            match &*s {
                Start::Pending => {
                    s = self.ready.wait(s).unwrap_or_else(|e| e.into_inner());
                }
                Start::At(dec) => return Ok((**dec).clone()),
                Start::Failed {
                    offset,
                    len,
                    kind,
                    message,
                } => return Err((*offset, *len, std::io::Error::new(*kind, message.clone()))),
            }
        }
    }

    /// Every segment not started yet fails with the read that failed (so none waits forever).
    fn fail_rest(&self, offset: u64, len: usize, error: &std::io::Error) {
        for (k, slot) in self.slots.iter().enumerate() {
            let pending = matches!(
                *slot.lock().unwrap_or_else(|e| e.into_inner()),
                Start::Pending
            );
            if pending {
                self.set(
                    k,
                    Start::Failed {
                        offset,
                        len,
                        kind: error.kind(),
                        message: error.to_string(),
                    },
                );
            }
        }
    }
}

/// The framing thread: the stream's decoder over every segment in order, records dropped,
/// each segment's start handed over as it is reached. Returns the decoder (the serial decode's
/// statistics and issues), finished unless a read failed.
pub(crate) fn framing<S: AuxSource>(
    src: &S,
    stream: &StreamDesc,
    segments: &[StreamDesc],
    starts: &Starts,
    opts: &DecodeOptions,
) -> RecordDecoder {
    let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let mut dec = RecordDecoder::new();
        let mut buf = piece_buffer(stream, opts);
        for (k, seg) in segments.iter().enumerate() {
            starts.set(k, Start::At(Box::new(dec.resumed())));
            if let Err((offset, len, error)) =
                read_pieces(src, seg, &mut buf, &mut dec, |dec, piece, at| {
                    dec.feed_each(piece, at, |_| {});
                    true
                })
            {
                starts.fail_rest(offset, len, &error);
                return dec;
            }
        }
        dec.finish();
        dec
    }));
    run.unwrap_or_else(|panic| {
        // No segment thread may wait for a start that will not come.
        let bug = std::io::Error::other("the framing thread panicked (bug)");
        starts.fail_rest(0, 0, &bug);
        std::panic::resume_unwind(panic)
    })
}

/// A segment thread: decodes segments `first`, `first + step`, ... of `stream`, each from the
/// start the framing thread gives, and sends each one's batches and end to the merge.
#[allow(clippy::too_many_arguments)]
pub(crate) fn segment_worker<S: AuxSource, M: SampleMap>(
    src: &S,
    plan: &DecodePlan,
    stream: &StreamDesc,
    segments: &[StreamDesc],
    starts: &Starts,
    first: usize,
    step: usize,
    opts: &DecodeOptions,
    batch_len: usize,
    map: &mut M,
    tx: SyncSender<SegMsg<M::Item>>,
    free: Receiver<Batch<M::Item>>,
) {
    let mut att = Attributor::new(stream, plan);
    let mut buf = piece_buffer(stream, opts);
    let mut sink = PartSink {
        att: &mut att,
        map,
        free: &free,
        batch_len,
        progress: opts.progress.as_deref(),
        send: |b| tx.send(SegMsg::Batch(b)).is_ok(),
    };
    for (k, seg) in segments.iter().enumerate().skip(first).step_by(step.max(1)) {
        let mut dec = match starts.wait(k) {
            Ok(dec) => dec,
            Err((offset, len, error)) => {
                let _ = tx.send(SegMsg::ReadError { offset, len, error });
                return;
            }
        };
        match decode_part(src, seg, &mut dec, &mut buf, None, &mut sink) {
            PartEnd::Done => {
                if tx.send(SegMsg::End).is_err() {
                    return;
                }
            }
            PartEnd::Stopped => return,
            PartEnd::ReadError(offset, len, error) => {
                let _ = tx.send(SegMsg::ReadError { offset, len, error });
                return;
            }
        }
    }
}

/// A failed read met while reading a segmented stream: (file offset, length, error).
pub(crate) type ReadFailure = (u64, usize, std::io::Error);

/// The merge's side of a segmented stream: its batches in stream order.
pub(crate) struct SegmentReader<T> {
    /// From each segment thread, in the order the threads take segments.
    rxs: Vec<Receiver<SegMsg<T>>>,
    /// Batches back to the thread they came from, for reuse.
    frees: Vec<Sender<Batch<T>>>,
    segments: usize,
    /// The segment being read.
    seg: usize,
    /// The thread the batch being read came from.
    from: usize,
    finished: bool,
}

impl<T> SegmentReader<T> {
    pub(crate) fn new(
        segments: usize,
        rxs: Vec<Receiver<SegMsg<T>>>,
        frees: Vec<Sender<Batch<T>>>,
    ) -> Self {
        SegmentReader {
            rxs,
            frees,
            segments,
            seg: 0,
            from: 0,
            finished: false,
        }
    }

    /// Gives a batch the merge is done with back to the thread it came from.
    pub(crate) fn give_back(&self, batch: Batch<T>) {
        if let Some(f) = self.frees.get(self.from) {
            let _ = f.send(batch);
        }
    }

    /// The next batch of the stream; `Ok(None)` when it is over (or a thread ended early: its
    /// join reports why), `Err` at a failed read (the batches before it were handed out).
    pub(crate) fn next_batch(&mut self) -> Result<Option<Batch<T>>, ReadFailure> {
        while !self.finished && self.seg < self.segments && !self.rxs.is_empty() {
            let t = self.seg % self.rxs.len();
            match self.rxs[t].recv() {
                Ok(SegMsg::Batch(b)) => {
                    self.from = t;
                    return Ok(Some(b));
                }
                Ok(SegMsg::End) => self.seg += 1,
                Ok(SegMsg::ReadError { offset, len, error }) => {
                    self.finished = true;
                    return Err((offset, len, error));
                }
                Err(_) => self.finished = true,
            }
        }
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stream(sizes: &[(u64, bool)]) -> StreamDesc {
        let mut at = 1000;
        StreamDesc {
            cpu: Some(3),
            chunks: sizes
                .iter()
                .map(|&(size, contiguous)| {
                    let c = AuxChunkDesc {
                        file_offset: at,
                        size,
                        contiguous,
                    };
                    at += size + 48;
                    c
                })
                .collect(),
            ..Default::default()
        }
    }

    /// Segments hold every byte once, in order; whole chunks while they fit; a large chunk is
    /// cut at multiples of the target, its later parts contiguous; a gap's flag is kept.
    #[test]
    fn segments_cover_the_stream_in_order() {
        let s = stream(&[(300, true), (300, true), (2500, false), (100, true)]);
        let segs = split(&s, 1000);
        let sizes: Vec<Vec<(u64, bool)>> = segs
            .iter()
            .map(|g| g.chunks.iter().map(|c| (c.size, c.contiguous)).collect())
            .collect();
        assert_eq!(
            sizes,
            vec![
                vec![(300, true), (300, true)],
                vec![(1000, false)],
                vec![(1000, true)],
                vec![(500, true), (100, true)],
            ]
        );
        let c = &s.chunks[2];
        assert_eq!(segs[2].chunks[0].file_offset, c.file_offset + 1000);
        assert!(segs.iter().all(|g| g.cpu == Some(3)));
        let total: u64 = segs.iter().flat_map(|g| &g.chunks).map(|c| c.size).sum();
        assert_eq!(total, 3200);
    }
}
