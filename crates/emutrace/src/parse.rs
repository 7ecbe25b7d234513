//! Payload parsers: one function per record type, bounds-checked, never panicking. Each returns
//! a `TraceErrorKind` on malformed input; the reader adds file name and offset.

use crate::error::TraceErrorKind;
use crate::format::{fixed_len, sample_flags};
use crate::types::*;
use spelunk_spe::{
    CodeAddress, DataPhysicalAddress, DataVirtualAddress, Events, OpType, SpeRecord, Terminator,
};
use std::sync::Arc;

/// A little-endian cursor over a payload.
pub(crate) struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Cursor { buf, pos: 0 }
    }
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.pos.checked_add(n)?;
        let s = self.buf.get(self.pos..end)?;
        self.pos = end;
        Some(s)
    }
    pub(crate) fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|s| s[0])
    }
    pub(crate) fn u16(&mut self) -> Option<u16> {
        self.take(2).map(|s| u16::from_le_bytes([s[0], s[1]]))
    }
    pub(crate) fn u32(&mut self) -> Option<u32> {
        self.take(4)
            .map(|s| u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
    }
    pub(crate) fn u64(&mut self) -> Option<u64> {
        self.take(8).map(|s| {
            let mut b = [0u8; 8];
            b.copy_from_slice(s);
            u64::from_le_bytes(b)
        })
    }
    fn str16(&mut self) -> Option<String> {
        let n = self.u16()? as usize;
        self.take(n)
            .map(|s| String::from_utf8_lossy(s).into_owned())
    }
    fn rest_string(&mut self) -> String {
        let s = self.buf.get(self.pos..).unwrap_or(&[]);
        self.pos = self.buf.len();
        String::from_utf8_lossy(s).into_owned()
    }
    fn at_end(&self) -> bool {
        self.pos >= self.buf.len()
    }
    fn seek(&mut self, pos: usize) -> Option<()> {
        if pos > self.buf.len() {
            return None;
        }
        self.pos = pos;
        Some(())
    }
}

fn too_short(record: &'static str, len: usize, min: usize) -> TraceErrorKind {
    TraceErrorKind::TooShort { record, len, min }
}

fn malformed(record: &'static str, detail: impl Into<String>) -> TraceErrorKind {
    TraceErrorKind::Malformed {
        record,
        detail: detail.into(),
    }
}

fn check_len(record: &'static str, p: &[u8], min: usize) -> Result<(), TraceErrorKind> {
    if p.len() < min {
        return Err(too_short(record, p.len(), min));
    }
    Ok(())
}

pub(crate) fn config(p: &[u8]) -> Result<RunConfig, TraceErrorKind> {
    check_len("CONFIG", p, fixed_len::CONFIG)?;
    let mut c = Cursor::new(p);
    let bad = || too_short("CONFIG", p.len(), fixed_len::CONFIG);
    let fixed = c.u32().ok_or_else(bad)? as usize;
    if fixed < fixed_len::CONFIG || fixed > p.len() {
        return Err(malformed(
            "CONFIG",
            format!(
                "fixed-part size {fixed} outside {}..={}",
                fixed_len::CONFIG,
                p.len()
            ),
        ));
    }
    let mut u32s = [0u32; 42];
    let cache_line_bytes = c.u32().ok_or_else(bad)?;
    let midr = c.u64().ok_or_else(bad)?;
    let cpu_hz = c.u64().ok_or_else(bad)?;
    let timer_hz = c.u64().ok_or_else(bad)?;
    let spe_interval = c.u32().ok_or_else(bad)?;
    let spe_interval_mean_x2 = c.u32().ok_or_else(bad)?;
    let spe_flags = c.u32().ok_or_else(bad)?;
    let spe_type_filter = c.u32().ok_or_else(bad)?;
    let spe_min_latency = c.u32().ok_or_else(bad)?;
    let spe_counter_bits = c.u32().ok_or_else(bad)?;
    let spe_event_filter = c.u64().ok_or_else(bad)?;
    for v in u32s.iter_mut().take(36) {
        *v = c.u32().ok_or_else(bad)?;
    }
    // 1.4 appended the THP policy and the huge page shift (offsets 216 and 220, after 1.2's
    // two stride prefetcher fields)
    let (thp, huge_page_shift) = if fixed >= 224 {
        c.seek(216).ok_or_else(bad)?;
        let thp = c.u32().ok_or_else(bad)?;
        (Some(ThpPolicy::from_code(thp)), c.u32().ok_or_else(bad)?)
    } else {
        (None, 0)
    };
    c.seek(fixed).ok_or_else(bad)?;
    let cpu_name = c
        .str16()
        .ok_or_else(|| malformed("CONFIG", "truncated CPU name"))?;
    let tool_version = c
        .str16()
        .ok_or_else(|| malformed("CONFIG", "truncated tool version"))?;
    let host_arch = c
        .str16()
        .ok_or_else(|| malformed("CONFIG", "truncated host architecture"))?;
    // 1.3 added the platform preset's name (empty without one); before, the record ends here.
    let platform = if c.at_end() {
        None
    } else {
        Some(
            c.str16()
                .ok_or_else(|| malformed("CONFIG", "truncated platform name"))?,
        )
    }
    .filter(|p| !p.is_empty());
    let [page_shift, dispatch_width, rob_size, ls_issue_queue, mshrs, store_buffer, mispredict_penalty_cycles, l1d_bytes, l1d_assoc, l1d_latency_cycles, l1i_bytes, l1i_assoc, l2_bytes, l2_assoc, l2_latency_cycles, slc_bytes, slc_assoc, slc_latency_cycles, dram_latency_cycles, peer_latency_cycles, prefetch_distance_lines, l1d_tlb_entries, l1i_tlb_entries, l2_tlb_entries, l2_tlb_assoc, l1_tlb_latency_cycles, l2_tlb_latency_cycles, walk_latency_cycles, bp_history_bits, bp_table_bits, btb_entries, ras_entries, max_cores, switch_min_cycles, switch_max_cycles, timeline_interval_us, ..] =
        u32s;
    Ok(RunConfig {
        cache_line_bytes,
        midr,
        cpu_hz,
        timer_hz,
        spe_interval,
        spe_interval_mean_x2,
        spe_flags,
        spe_type_filter,
        spe_min_latency,
        spe_counter_bits,
        spe_event_filter,
        page_shift,
        dispatch_width,
        rob_size,
        ls_issue_queue,
        mshrs,
        store_buffer,
        mispredict_penalty_cycles,
        l1d_bytes,
        l1d_assoc,
        l1d_latency_cycles,
        l1i_bytes,
        l1i_assoc,
        l2_bytes,
        l2_assoc,
        l2_latency_cycles,
        slc_bytes,
        slc_assoc,
        slc_latency_cycles,
        dram_latency_cycles,
        peer_latency_cycles,
        prefetch_distance_lines,
        l1d_tlb_entries,
        l1i_tlb_entries,
        l2_tlb_entries,
        l2_tlb_assoc,
        l1_tlb_latency_cycles,
        l2_tlb_latency_cycles,
        walk_latency_cycles,
        bp_history_bits,
        bp_table_bits,
        btb_entries,
        ras_entries,
        max_cores,
        switch_min_cycles,
        switch_max_cycles,
        timeline_interval_us,
        cpu_name,
        tool_version,
        host_arch,
        platform,
        thp,
        huge_page_shift,
    })
}

pub(crate) fn process(p: &[u8]) -> Result<ProcessInfo, TraceErrorKind> {
    check_len("PROCESS", p, fixed_len::PROCESS)?;
    let mut c = Cursor::new(p);
    let pid = c.u32().unwrap_or(0);
    let argc = c.u32().unwrap_or(0) as usize;
    let rest = p.get(8..).unwrap_or(&[]);
    let mut argv: Vec<String> = rest
        .split(|b| *b == 0)
        .map(|s| String::from_utf8_lossy(s).into_owned())
        .collect();
    // the strings are NUL-terminated: split leaves one empty tail
    if rest.last() == Some(&0) {
        argv.pop();
    }
    if argv.len() != argc {
        return Err(malformed(
            "PROCESS",
            format!("argc is {argc} but {} strings follow", argv.len()),
        ));
    }
    Ok(ProcessInfo { pid, argv })
}

pub(crate) fn thread_start(p: &[u8]) -> Result<ThreadStart, TraceErrorKind> {
    check_len("THREAD_START", p, fixed_len::THREAD_START)?;
    let mut c = Cursor::new(p);
    let e = || too_short("THREAD_START", p.len(), fixed_len::THREAD_START);
    let pid = c.u32().ok_or_else(e)?;
    let tid = c.u32().ok_or_else(e)?;
    let parent_tid = c.u32().ok_or_else(e)?;
    let core = c.u16().ok_or_else(e)?;
    let _ = c.u16();
    let timestamp = c.u64().ok_or_else(e)?;
    let vg_tid = c.u32().ok_or_else(e)?;
    Ok(ThreadStart {
        pid,
        tid,
        parent_tid,
        core,
        timestamp,
        vg_tid,
    })
}

pub(crate) fn thread_name(p: &[u8]) -> Result<ThreadName, TraceErrorKind> {
    check_len("THREAD_NAME", p, fixed_len::THREAD_NAME)?;
    let mut c = Cursor::new(p);
    let e = || too_short("THREAD_NAME", p.len(), fixed_len::THREAD_NAME);
    let tid = c.u32().ok_or_else(e)?;
    let _ = c.u32();
    let timestamp = c.u64().ok_or_else(e)?;
    Ok(ThreadName {
        tid,
        timestamp,
        name: c.rest_string(),
    })
}

pub(crate) fn thread_exit(p: &[u8]) -> Result<ThreadExit, TraceErrorKind> {
    check_len("THREAD_EXIT", p, fixed_len::THREAD_EXIT)?;
    let mut c = Cursor::new(p);
    let e = || too_short("THREAD_EXIT", p.len(), fixed_len::THREAD_EXIT);
    let tid = c.u32().ok_or_else(e)?;
    let core = c.u16().ok_or_else(e)?;
    let _ = c.u16();
    let timestamp = c.u64().ok_or_else(e)?;
    Ok(ThreadExit {
        tid,
        core,
        timestamp,
    })
}

pub(crate) fn mmap(p: &[u8]) -> Result<Mapping, TraceErrorKind> {
    check_len("MMAP", p, fixed_len::MMAP)?;
    let mut c = Cursor::new(p);
    let e = || too_short("MMAP", p.len(), fixed_len::MMAP);
    let pid = c.u32().ok_or_else(e)?;
    let tid = c.u32().ok_or_else(e)?;
    let addr = c.u64().ok_or_else(e)?;
    let len = c.u64().ok_or_else(e)?;
    let file_offset = c.u64().ok_or_else(e)?;
    let prot = c.u32().ok_or_else(e)?;
    let flags = c.u32().ok_or_else(e)?;
    let timestamp = c.u64().ok_or_else(e)?;
    let path = c.rest_string();
    Ok(Mapping {
        pid,
        tid,
        addr,
        len,
        file_offset,
        readable: prot & 1 != 0,
        writable: prot & 2 != 0,
        executable: prot & 4 != 0,
        path: if flags & 1 != 0 || !path.is_empty() {
            Some(path)
        } else {
            None
        },
        timestamp,
    })
}

pub(crate) fn munmap(p: &[u8]) -> Result<Unmapping, TraceErrorKind> {
    check_len("MUNMAP", p, fixed_len::MUNMAP)?;
    let mut c = Cursor::new(p);
    let e = || too_short("MUNMAP", p.len(), fixed_len::MUNMAP);
    Ok(Unmapping {
        addr: c.u64().ok_or_else(e)?,
        len: c.u64().ok_or_else(e)?,
        timestamp: c.u64().ok_or_else(e)?,
    })
}

pub(crate) fn counter_schema(p: &[u8]) -> Result<Arc<[CounterDef]>, TraceErrorKind> {
    check_len("COUNTER_SCHEMA", p, fixed_len::COUNTER_SCHEMA)?;
    let mut c = Cursor::new(p);
    let n = c.u32().unwrap_or(0) as usize;
    // each entry is at least 6 bytes: bound the allocation by the payload
    if n > p.len() / 6 {
        return Err(malformed(
            "COUNTER_SCHEMA",
            format!("{n} counters cannot fit in {} bytes", p.len()),
        ));
    }
    let mut defs = Vec::with_capacity(n);
    for i in 0..n {
        let code = c
            .u32()
            .ok_or_else(|| malformed("COUNTER_SCHEMA", format!("entry {i} truncated")))?;
        let name = c
            .str16()
            .ok_or_else(|| malformed("COUNTER_SCHEMA", format!("entry {i} name truncated")))?;
        defs.push(CounterDef { code, name });
    }
    Ok(defs.into())
}

pub(crate) fn sample(p: &[u8]) -> Result<Sample, TraceErrorKind> {
    check_len("SAMPLE", p, fixed_len::SAMPLE)?;
    let mut c = Cursor::new(p);
    let e = || too_short("SAMPLE", p.len(), fixed_len::SAMPLE);
    let tid = c.u32().ok_or_else(e)?;
    let core = c.u16().ok_or_else(e)?;
    let op_class = c.u8().ok_or_else(e)?;
    let op_subclass = c.u8().ok_or_else(e)?;
    let events = c.u32().ok_or_else(e)?;
    let total = c.u16().ok_or_else(e)?;
    let issue = c.u16().ok_or_else(e)?;
    let xlat = c.u16().ok_or_else(e)?;
    let data_source = c.u16().ok_or_else(e)?;
    let flags = c.u8().ok_or_else(e)?;
    let access_size = c.u8().ok_or_else(e)?;
    let level = c.u8().ok_or_else(e)?;
    let _ = c.u8();
    let pc = c.u64().ok_or_else(e)?;
    let va = c.u64().ok_or_else(e)?;
    let pa = c.u64().ok_or_else(e)?;
    let target = c.u64().ok_or_else(e)?;
    let ts = c.u64().ok_or_else(e)?;
    let exact = c.u32().ok_or_else(e)?;
    if op_class > 3 {
        return Err(malformed(
            "SAMPLE",
            format!("operation class {op_class} is not 0..=3"),
        ));
    }
    let has = |f: u8| flags & f != 0;
    let record = SpeRecord {
        // user-space code in the non-secure state, as Linux runs programs
        pc: Some(CodeAddress::new(pc, 0, true)),
        branch_target: has(sample_flags::TARGET).then(|| CodeAddress::new(target, 0, true)),
        prev_branch_target: None,
        data_va: has(sample_flags::VA).then(|| DataVirtualAddress::new(va, 0)),
        data_pa: has(sample_flags::PA).then(|| DataPhysicalAddress::new(pa, true, false, 0)),
        op: Some(OpType::new(op_class, op_subclass)),
        events: Some(Events(u64::from(events))),
        data_source: has(sample_flags::DATA_SOURCE).then_some(u64::from(data_source)),
        total_latency_cycles: Some(total),
        issue_latency_cycles: Some(issue),
        translation_latency_cycles: has(sample_flags::TRANSLATION_LATENCY).then_some(xlat),
        context_el1: Some(tid),
        context_el2: None,
        timestamp: has(sample_flags::TIMESTAMP).then_some(ts),
        other_counter: None,
        other_address: None,
        terminator: if has(sample_flags::TIMESTAMP) {
            Terminator::Timestamp
        } else {
            Terminator::End
        },
    };
    Ok(Sample {
        tid,
        core,
        record,
        access_size,
        level: MemoryLevel::from_u8(level),
        exact_total_latency_cycles: exact,
    })
}

pub(crate) fn annotation(p: &[u8]) -> Result<Annotation, TraceErrorKind> {
    check_len("ANNOTATION", p, fixed_len::ANNOTATION)?;
    let mut c = Cursor::new(p);
    let e = || too_short("ANNOTATION", p.len(), fixed_len::ANNOTATION);
    let kind = AnnotationKind::from_u8(c.u8().ok_or_else(e)?);
    let _ = c.u8();
    let depth = c.u16().ok_or_else(e)?;
    let tid = c.u32().ok_or_else(e)?;
    let core = c.u16().ok_or_else(e)?;
    let _ = c.u16();
    let _ = c.u32();
    let timestamp = c.u64().ok_or_else(e)?;
    let addr = c.u64().ok_or_else(e)?;
    let size = c.u64().ok_or_else(e)?;
    Ok(Annotation {
        kind,
        depth,
        tid,
        core,
        timestamp,
        addr,
        size,
        name: c.rest_string(),
    })
}

pub(crate) fn counters(
    p: &[u8],
    schema: Option<&Arc<[CounterDef]>>,
) -> Result<CounterSnapshot, TraceErrorKind> {
    check_len("COUNTERS", p, fixed_len::COUNTERS)?;
    let mut c = Cursor::new(p);
    let e = || too_short("COUNTERS", p.len(), fixed_len::COUNTERS);
    let tid = c.u32().ok_or_else(e)?;
    let core = c.u16().ok_or_else(e)?;
    let reason = SnapshotReason::from_u8(c.u8().ok_or_else(e)?);
    let _ = c.u8();
    let timestamp = c.u64().ok_or_else(e)?;
    let cycles = c.u64().ok_or_else(e)?;
    let n = c.u32().ok_or_else(e)? as usize;
    let _ = c.u32();
    let schema = schema
        .cloned()
        .ok_or_else(|| malformed("COUNTERS", "no COUNTER_SCHEMA record precedes it"))?;
    if n != schema.len() {
        return Err(malformed(
            "COUNTERS",
            format!("{n} values but the schema has {} counters", schema.len()),
        ));
    }
    let need = fixed_len::COUNTERS + n * 8;
    if p.len() < need {
        return Err(malformed(
            "COUNTERS",
            format!("{n} values need {need} bytes, payload has {}", p.len()),
        ));
    }
    let mut values = Vec::with_capacity(n);
    for _ in 0..n {
        values.push(c.u64().unwrap_or(0));
    }
    Ok(CounterSnapshot {
        tid,
        core,
        reason,
        timestamp,
        cycles,
        schema,
        values,
    })
}

pub(crate) fn object_truth(p: &[u8]) -> Result<ObjectTruth, TraceErrorKind> {
    check_len("OBJECT_TRUTH", p, fixed_len::OBJECT_TRUTH)?;
    let mut c = Cursor::new(p);
    let e = || too_short("OBJECT_TRUTH", p.len(), fixed_len::OBJECT_TRUTH);
    Ok(ObjectTruth {
        addr: c.u64().ok_or_else(e)?,
        size: c.u64().ok_or_else(e)?,
        accesses: exact_accesses(&mut c).ok_or_else(e)?,
        name: c.rest_string(),
    })
}

pub(crate) fn alloc(p: &[u8]) -> Result<Alloc, TraceErrorKind> {
    check_len("ALLOC", p, fixed_len::ALLOC)?;
    let mut c = Cursor::new(p);
    let e = || too_short("ALLOC", p.len(), fixed_len::ALLOC);
    let kind = AllocKind::from_u8(c.u8().ok_or_else(e)?);
    let frames = usize::from(c.u8().ok_or_else(e)?);
    let core = c.u16().ok_or_else(e)?;
    let tid = c.u32().ok_or_else(e)?;
    let timestamp = c.u64().ok_or_else(e)?;
    let id = c.u64().ok_or_else(e)?;
    let addr = c.u64().ok_or_else(e)?;
    let size = c.u64().ok_or_else(e)?;
    let need = fixed_len::ALLOC + frames * 8;
    if p.len() < need {
        return Err(malformed(
            "ALLOC",
            format!("{frames} frames need {need} bytes, payload has {}", p.len()),
        ));
    }
    let mut stack = Vec::with_capacity(frames);
    for _ in 0..frames {
        stack.push(c.u64().unwrap_or(0));
    }
    Ok(Alloc {
        kind,
        core,
        tid,
        timestamp,
        id,
        addr,
        size,
        stack,
    })
}

pub(crate) fn free(p: &[u8]) -> Result<Free, TraceErrorKind> {
    check_len("FREE", p, fixed_len::FREE)?;
    let mut c = Cursor::new(p);
    let e = || too_short("FREE", p.len(), fixed_len::FREE);
    let kind = match c.u8().ok_or_else(e)? {
        1 => FreeKind::Free,
        2 => FreeKind::Realloc,
        3 => FreeKind::Munmap,
        4 => FreeKind::Superseded,
        o => FreeKind::Other(o),
    };
    let _ = c.u8();
    Ok(Free {
        kind,
        core: c.u16().ok_or_else(e)?,
        tid: c.u32().ok_or_else(e)?,
        timestamp: c.u64().ok_or_else(e)?,
        id: c.u64().ok_or_else(e)?,
        addr: c.u64().ok_or_else(e)?,
    })
}

pub(crate) fn block_truth(p: &[u8]) -> Result<BlockTruth, TraceErrorKind> {
    check_len("BLOCK_TRUTH", p, fixed_len::BLOCK_TRUTH)?;
    let mut c = Cursor::new(p);
    let e = || too_short("BLOCK_TRUTH", p.len(), fixed_len::BLOCK_TRUTH);
    Ok(BlockTruth {
        id: c.u64().ok_or_else(e)?,
        addr: c.u64().ok_or_else(e)?,
        size: c.u64().ok_or_else(e)?,
        accesses: exact_accesses(&mut c).ok_or_else(e)?,
    })
}

/// The five counts OBJECT_TRUTH and BLOCK_TRUTH share, in FORMAT.md's order.
fn exact_accesses(c: &mut Cursor<'_>) -> Option<ExactAccesses> {
    Some(ExactAccesses {
        loads: c.u64()?,
        stores: c.u64()?,
        load_bytes: c.u64()?,
        store_bytes: c.u64()?,
        l1d_misses: c.u64()?,
    })
}

pub(crate) fn end(p: &[u8]) -> Result<EndInfo, TraceErrorKind> {
    check_len("END", p, fixed_len::END)?;
    let mut c = Cursor::new(p);
    let e = || too_short("END", p.len(), fixed_len::END);
    Ok(EndInfo {
        exit_status: c.u32().ok_or_else(e)?,
        flags: c.u32().ok_or_else(e)?,
        samples_written: c.u64().ok_or_else(e)?,
        end_timestamp: c.u64().ok_or_else(e)?,
    })
}
