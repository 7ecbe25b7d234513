//! A perf_event ring buffer mapped from an event fd: the data area, where the kernel writes
//! records (MMAP2, COMM, AUX, ITRACE_START, LOST, ...), and the optional AUX area, where a
//! hardware tracer such as Arm SPE writes its raw trace.
//!
//! Facts used (kernel UAPI `include/uapi/linux/perf_event.h`, the comments on
//! `struct perf_event_mmap_page`; perf_event_open(2)):
//! - The mapping is 1 + 2^n pages at offset 0; the first page is the control page. Its fields
//!   `data_offset`/`data_size` (at bytes 1040/1048) give the data area.
//! - `data_head` (byte 1024) is written by the kernel and only grows; user space reads it, then
//!   issues a read barrier (smp_rmb), reads the records between `data_tail` and `data_head`
//!   (positions are modulo `data_size`; a record may wrap around the end), issues a full
//!   barrier (smp_mb) and stores the new `data_tail` (byte 1032).
//! - The AUX area: user space writes `aux_offset` and `aux_size` (bytes 1072/1080) into the
//!   control page, then maps `aux_size` bytes at file offset `aux_offset`, which must be page
//!   aligned and past the data area; the page count must be a power of two. A writable AUX
//!   mapping gives the normal mode: the kernel does not overwrite data before user space moves
//!   `aux_tail` (byte 1064) past it. `aux_head` (byte 1056) is the kernel's write position. The
//!   kernel reports each piece of AUX data with a `PERF_RECORD_AUX {aux_offset, aux_size,
//!   flags}` in the data area.
//! - Time conversion: `time_shift` (u16, byte 50), `time_mult` (u32, 52), `time_zero` (u64,
//!   64), `time_cycles` (80), `time_mask` (88), with capability bits `cap_user_time_zero` (bit
//!   4 of the u64 at byte 40) and `cap_user_time_short` (bit 5), read under the seqlock `lock`
//!   (u32, byte 8): re-read while it changes.
//!
//! Everything that touches the kernel is in [`MappedRing`]; the record framing is
//! [`take_records`] over a copy function, so it is tested on plain memory.

use crate::timeconv::TimeConv;
use std::io;
use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};

/// Byte offsets in `struct perf_event_mmap_page`.
mod page {
    pub const LOCK: usize = 8;
    pub const CAPABILITIES: usize = 40;
    pub const TIME_SHIFT: usize = 50;
    pub const TIME_MULT: usize = 52;
    pub const TIME_ZERO: usize = 64;
    pub const TIME_CYCLES: usize = 80;
    pub const TIME_MASK: usize = 88;
    /// The fields above fit in this many bytes (copied under the seqlock).
    pub const TIME_FIELDS_END: usize = 96;
    pub const DATA_HEAD: usize = 1024;
    pub const DATA_TAIL: usize = 1032;
    pub const DATA_OFFSET: usize = 1040;
    pub const DATA_SIZE: usize = 1048;
    pub const AUX_HEAD: usize = 1056;
    pub const AUX_TAIL: usize = 1064;
    pub const AUX_OFFSET: usize = 1072;
    pub const AUX_SIZE: usize = 1080;
    pub const CAP_USER_TIME_ZERO: u64 = 1 << 4;
    pub const CAP_USER_TIME_SHORT: u64 = 1 << 5;
}

/// One record copied out of the data area.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RingRecord {
    /// `perf_event_header.type`.
    pub ty: u32,
    pub misc: u16,
    /// Everything after the 8-byte header (the sample_id trailer included).
    pub body: Vec<u8>,
}

impl RingRecord {
    /// The record typed, for an event with `attr` (its sample_id layout); `Ok(None)` for types
    /// spelunk does not use. `position` (the stream position) only names the record in errors.
    pub fn parse(
        &self,
        attr: &crate::attr::EventAttr,
        position: u64,
    ) -> Result<Option<crate::reader::SidebandRecord>, String> {
        let Some(pi) = attr.parse_info() else {
            return Err("the event's sample_type cannot be parsed".into());
        };
        crate::reader::parse_sideband(
            self.ty,
            self.misc,
            &self.body,
            attr.sample_id_size(),
            pi,
            0,
            position,
        )
    }
}

/// The data area holds something that is not a record: the ring cannot be read further.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "perf ring buffer: a record header at stream position {position} says {size} bytes, but \
     {available} are available (the ring is corrupt; records after it are lost)"
)]
pub struct RingError {
    pub position: u64,
    pub size: u16,
    pub available: u64,
}

/// Copies the records between stream positions `tail` and `head` of a circular area of
/// `area_len` bytes (a power of two) into `out`; `copy(pos, buf)` fills `buf` from position
/// `pos` (modulo `area_len`; it handles the wrap). Returns the new tail (= `head` unless an
/// error stops it, then the position of the bad header).
pub fn take_records(
    area_len: u64,
    tail: u64,
    head: u64,
    mut copy: impl FnMut(u64, &mut [u8]),
    out: &mut Vec<RingRecord>,
) -> Result<u64, RingError> {
    let mut pos = tail;
    while head.wrapping_sub(pos) >= 8 {
        let available = head.wrapping_sub(pos);
        let mut h = [0u8; 8];
        copy(pos, &mut h);
        let ty = u32::from_le_bytes([h[0], h[1], h[2], h[3]]);
        let misc = u16::from_le_bytes([h[4], h[5]]);
        let size = u16::from_le_bytes([h[6], h[7]]);
        if size < 8 || u64::from(size) > available || u64::from(size) > area_len {
            return Err(RingError {
                position: pos,
                size,
                available,
            });
        }
        let mut body = vec![0u8; usize::from(size) - 8];
        copy(pos.wrapping_add(8), &mut body);
        out.push(RingRecord { ty, misc, body });
        pos = pos.wrapping_add(u64::from(size));
    }
    Ok(pos)
}

/// Copies `buf.len()` bytes starting at stream position `pos` of a circular buffer at `base`
/// of `len` bytes.
///
/// # Safety
/// `base` must point to `len` readable bytes, and `buf.len() <= len`.
unsafe fn copy_circular(base: *const u8, len: u64, pos: u64, buf: &mut [u8]) {
    let start = (pos % len) as usize;
    let first = buf.len().min(len as usize - start);
    std::ptr::copy_nonoverlapping(base.add(start), buf.as_mut_ptr(), first);
    if first < buf.len() {
        std::ptr::copy_nonoverlapping(base, buf.as_mut_ptr().add(first), buf.len() - first);
    }
}

/// Parses the time-conversion fields of a copy of the control page's first
/// [`page::TIME_FIELDS_END`] bytes; `None` unless `cap_user_time_zero` is set (the kernel
/// offers no conversion from the hardware counter to perf time).
pub fn time_conv_from_page(p: &[u8]) -> Option<TimeConv> {
    let u16_at = |o: usize| Some(u16::from_le_bytes(p.get(o..o + 2)?.try_into().ok()?));
    let u32_at = |o: usize| Some(u32::from_le_bytes(p.get(o..o + 4)?.try_into().ok()?));
    let u64_at = |o: usize| Some(u64::from_le_bytes(p.get(o..o + 8)?.try_into().ok()?));
    let caps = u64_at(page::CAPABILITIES)?;
    if caps & page::CAP_USER_TIME_ZERO == 0 {
        return None;
    }
    Some(TimeConv {
        time_shift: u16_at(page::TIME_SHIFT)?,
        time_mult: u32_at(page::TIME_MULT)?,
        time_zero: u64_at(page::TIME_ZERO)?,
        time_cycles: u64_at(page::TIME_CYCLES)?,
        time_mask: u64_at(page::TIME_MASK)?,
        cap_user_time_zero: true,
        cap_user_time_short: caps & page::CAP_USER_TIME_SHORT != 0,
    })
}

/// An event's mapped ring buffer (and AUX area, when mapped with one).
pub struct MappedRing {
    base: *mut u8,
    map_len: usize,
    data_offset: usize,
    data_size: u64,
    aux: *mut u8,
    aux_len: usize,
}

// SAFETY: the mappings are owned by this value; the kernel is the only other writer and the
// shared words are accessed atomically.
unsafe impl Send for MappedRing {}

impl MappedRing {
    /// Maps `fd`'s ring with `data_pages` data pages (a power of two) and, when `aux_pages` is
    /// non-zero (a power of two, at least 2), a writable AUX area of that many pages.
    pub fn map(fd: i32, data_pages: usize, aux_pages: usize) -> io::Result<MappedRing> {
        let bad = |what: &str| io::Error::new(io::ErrorKind::InvalidInput, what.to_string());
        if !data_pages.is_power_of_two() {
            return Err(bad("data pages must be a power of two"));
        }
        if aux_pages != 0 && (!aux_pages.is_power_of_two() || aux_pages < 2) {
            return Err(bad("AUX pages must be a power of two, at least 2"));
        }
        // SAFETY: sysconf has no memory effects.
        let page_size = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) })
            .ok()
            .filter(|p| *p > 0)
            .unwrap_or(4096);
        let map_len = (1 + data_pages) * page_size;
        // SAFETY: a fresh shared mapping of the event fd; checked for MAP_FAILED.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let mut ring = MappedRing {
            base: base.cast(),
            map_len,
            data_offset: page_size,
            data_size: (data_pages * page_size) as u64,
            aux: std::ptr::null_mut(),
            aux_len: 0,
        };
        // Kernels since 4.1 fill data_offset/data_size; older ones leave 0 (then: page 1 on).
        let (off, size) = (ring.word(page::DATA_OFFSET), ring.word(page::DATA_SIZE));
        let (off, size) = (
            off.load(Ordering::Relaxed) as usize,
            size.load(Ordering::Relaxed),
        );
        if size != 0 && size.is_power_of_two() && off + size as usize <= map_len {
            ring.data_offset = off;
            ring.data_size = size;
        }
        if aux_pages > 0 {
            let aux_len = aux_pages * page_size;
            ring.word(page::AUX_OFFSET)
                .store(map_len as u64, Ordering::SeqCst);
            ring.word(page::AUX_SIZE)
                .store(aux_len as u64, Ordering::SeqCst);
            // SAFETY: as above, at the page-aligned offset just written to the control page.
            let aux = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    aux_len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_SHARED,
                    fd,
                    map_len as libc::off_t,
                )
            };
            if aux == libc::MAP_FAILED {
                return Err(io::Error::last_os_error());
            }
            ring.aux = aux.cast();
            ring.aux_len = aux_len;
        }
        Ok(ring)
    }

    /// A u64 field of the control page, accessed atomically.
    fn word(&self, offset: usize) -> &AtomicU64 {
        debug_assert!(offset % 8 == 0 && offset + 8 <= 4096);
        // SAFETY: the control page is mapped for the lifetime of self and 8-byte aligned there.
        unsafe { &*(self.base.add(offset) as *const AtomicU64) }
    }

    /// Bytes of the AUX area (0 without one).
    pub fn aux_len(&self) -> usize {
        self.aux_len
    }

    /// Copies out every complete record the kernel has written since the last call and gives
    /// the space back to the kernel.
    pub fn drain(&mut self, out: &mut Vec<RingRecord>) -> Result<usize, RingError> {
        let before = out.len();
        // data_head, then smp_rmb: Acquire orders the record reads after it.
        let head = self.word(page::DATA_HEAD).load(Ordering::Acquire);
        let tail = self.word(page::DATA_TAIL).load(Ordering::Relaxed);
        // SAFETY: the data area is mapped; positions are taken modulo its size.
        let base = unsafe { self.base.add(self.data_offset) } as *const u8;
        let size = self.data_size;
        let result = take_records(
            size,
            tail,
            head,
            |pos, buf| unsafe { copy_circular(base, size, pos, buf) },
            out,
        );
        let new_tail = match &result {
            Ok(t) => *t,
            // Corrupt: give everything back so the kernel can go on writing.
            Err(_) => head,
        };
        // smp_mb, then data_tail.
        fence(Ordering::SeqCst);
        self.word(page::DATA_TAIL)
            .store(new_tail, Ordering::Relaxed);
        result.map(|_| out.len() - before)
    }

    /// Appends `size` bytes of the AUX area from stream position `offset` to `out`. Data older
    /// than the AUX area's size has been overwritten and cannot be asked for.
    pub fn aux_copy(&self, offset: u64, size: u64, out: &mut Vec<u8>) {
        if self.aux_len == 0 || size == 0 {
            return;
        }
        let size = size.min(self.aux_len as u64) as usize;
        let at = out.len();
        out.resize(at + size, 0);
        // SAFETY: the AUX area is mapped with aux_len bytes; size <= aux_len.
        unsafe { copy_circular(self.aux, self.aux_len as u64, offset, &mut out[at..]) };
    }

    /// The kernel's AUX write position.
    pub fn aux_head(&self) -> u64 {
        self.word(page::AUX_HEAD).load(Ordering::Acquire)
    }

    /// Gives the AUX area up to stream position `upto` back to the kernel.
    pub fn aux_release(&self, upto: u64) {
        fence(Ordering::SeqCst);
        self.word(page::AUX_TAIL).store(upto, Ordering::Relaxed);
    }

    /// The kernel's perf-time conversion for this event (see [`time_conv_from_page`]).
    pub fn time_conv(&self) -> Option<TimeConv> {
        // SAFETY: the control page is mapped; `lock` is a 4-byte aligned u32.
        let lock = unsafe { &*(self.base.add(page::LOCK) as *const AtomicU32) };
        let mut copy = [0u8; page::TIME_FIELDS_END];
        for _ in 0..1000 {
            let seq = lock.load(Ordering::Acquire);
            // SAFETY: the first TIME_FIELDS_END bytes of the control page are mapped.
            unsafe {
                std::ptr::copy_nonoverlapping(self.base, copy.as_mut_ptr(), copy.len());
            }
            fence(Ordering::Acquire);
            if lock.load(Ordering::Relaxed) == seq {
                return time_conv_from_page(&copy);
            }
        }
        None
    }
}

impl Drop for MappedRing {
    fn drop(&mut self) {
        // SAFETY: unmapping what map() mapped, once.
        unsafe {
            if !self.aux.is_null() {
                libc::munmap(self.aux.cast(), self.aux_len);
            }
            libc::munmap(self.base.cast(), self.map_len);
        }
    }
}

/// `PERF_EVENT_IOC_*` requests (`_IO('$', n)`; `ID` is `_IOR('$', 7, u64)`).
mod ioc {
    pub const ENABLE: libc::c_ulong = 0x2400;
    pub const DISABLE: libc::c_ulong = 0x2401;
    pub const SET_OUTPUT: libc::c_ulong = 0x2405;
    pub const ID: libc::c_ulong = 0x8008_2407;
}

/// An open perf event; closed on drop.
#[derive(Debug)]
pub struct EventFd(i32);

impl EventFd {
    /// `perf_event_open(attr, pid, cpu, -1, PERF_FLAG_FD_CLOEXEC)` with `attr` the raw bytes of
    /// a `perf_event_attr` (its own `size` field says how many the kernel reads).
    pub fn open(attr: &[u8], pid: i32, cpu: i32) -> io::Result<EventFd> {
        const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 1 << 3;
        if attr.len() < 64 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "perf_event_attr shorter than 64 bytes",
            ));
        }
        // SAFETY: attr points to a live buffer at least as large as its size field (the
        // callers build it with EventAttr::to_bytes, whose size field is its length).
        let fd = unsafe {
            libc::syscall(
                libc::SYS_perf_event_open,
                attr.as_ptr(),
                pid as libc::c_long,
                cpu as libc::c_long,
                -1 as libc::c_long,
                PERF_FLAG_FD_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(EventFd(fd as i32))
    }

    pub fn raw(&self) -> i32 {
        self.0
    }

    fn ioctl(&self, req: libc::c_ulong, arg: libc::c_ulong) -> io::Result<()> {
        // SAFETY: perf ioctls on an fd we own; arg is an integer or a pointer we pass below.
        let r = unsafe { libc::ioctl(self.0, req as _, arg) };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// PERF_EVENT_IOC_ENABLE (also re-enables an AUX event the kernel stopped after a
    /// TRUNCATED record, and its inherited children).
    pub fn enable(&self) -> io::Result<()> {
        self.ioctl(ioc::ENABLE, 0)
    }

    pub fn disable(&self) -> io::Result<()> {
        self.ioctl(ioc::DISABLE, 0)
    }

    /// PERF_EVENT_IOC_SET_OUTPUT: this event's records go to `target`'s ring (same CPU).
    pub fn set_output(&self, target: &EventFd) -> io::Result<()> {
        self.ioctl(ioc::SET_OUTPUT, target.0 as libc::c_ulong)
    }

    /// PERF_EVENT_IOC_ID: the kernel's id of this event (the IDENTIFIER in its records).
    pub fn id(&self) -> io::Result<u64> {
        let mut id = 0u64;
        self.ioctl(ioc::ID, &mut id as *mut u64 as libc::c_ulong)?;
        Ok(id)
    }
}

impl Drop for EventFd {
    fn drop(&mut self) {
        // SAFETY: closing an fd we own, once.
        unsafe {
            libc::close(self.0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(ty: u32, misc: u16, body: &[u8]) -> Vec<u8> {
        let mut r = Vec::new();
        r.extend_from_slice(&ty.to_le_bytes());
        r.extend_from_slice(&misc.to_le_bytes());
        r.extend_from_slice(&((8 + body.len()) as u16).to_le_bytes());
        r.extend_from_slice(body);
        r
    }

    /// A circular area of `len` bytes holding `stream` written from stream position `start`.
    fn ring(len: usize, start: u64, stream: &[u8]) -> Vec<u8> {
        let mut area = vec![0xeeu8; len];
        for (i, b) in stream.iter().enumerate() {
            area[((start + i as u64) % len as u64) as usize] = *b;
        }
        area
    }

    fn copier(area: &[u8]) -> impl FnMut(u64, &mut [u8]) + '_ {
        move |pos, buf| unsafe { copy_circular(area.as_ptr(), area.len() as u64, pos, buf) }
    }

    #[test]
    fn records_that_wrap_around_the_end_come_out_whole() {
        let a = record(3, 0x2000, b"comm-body-16byte");
        let b = record(11, 0, &[7u8; 24]);
        let c = record(12, 0, &[1, 2, 3, 4, 5, 6, 7, 8]);
        let stream: Vec<u8> = [a.clone(), b.clone(), c.clone()].concat();
        // Start 28 bytes before the end of a 128-byte area: `b`'s header and body wrap.
        let start = 1000 * 128 + 100;
        let area = ring(128, start, &stream);
        let mut out = Vec::new();
        let head = start + stream.len() as u64;
        let tail = take_records(128, start, head, copier(&area), &mut out).unwrap();
        assert_eq!(tail, head);
        assert_eq!(out.len(), 3);
        assert_eq!((out[0].ty, out[0].misc), (3, 0x2000));
        assert_eq!(out[0].body, b"comm-body-16byte");
        assert_eq!((out[1].ty, out[1].body.clone()), (11, vec![7u8; 24]));
        assert_eq!(out[2].body, [1, 2, 3, 4, 5, 6, 7, 8]);
    }

    #[test]
    fn nothing_new_and_partial_headers_wait() {
        let area = vec![0u8; 64];
        let mut out = Vec::new();
        assert_eq!(take_records(64, 128, 128, copier(&area), &mut out), Ok(128));
        assert_eq!(take_records(64, 128, 133, copier(&area), &mut out), Ok(128));
        assert!(out.is_empty());
    }

    #[test]
    fn a_corrupt_header_stops_with_its_position() {
        let mut stream = record(3, 0, &[0u8; 8]);
        stream.extend_from_slice(&record(4, 0, &[0u8; 8])[..6]);
        stream.extend_from_slice(&[0, 0]); // size 0
        let area = ring(64, 0, &stream);
        let mut out = Vec::new();
        let e = take_records(64, 0, stream.len() as u64, copier(&area), &mut out).unwrap_err();
        assert_eq!(out.len(), 1);
        assert_eq!((e.position, e.size, e.available), (16, 0, 8));
        // A size larger than what the kernel says it wrote.
        let stream = record(3, 0, &[0u8; 40]);
        let area = ring(64, 0, &stream);
        let e = take_records(64, 0, 16, copier(&area), &mut Vec::new()).unwrap_err();
        assert_eq!((e.position, e.size, e.available), (0, 48, 16));
    }

    #[test]
    fn time_conversion_needs_cap_user_time_zero() {
        let mut p = vec![0u8; page::TIME_FIELDS_END];
        p[page::TIME_SHIFT..page::TIME_SHIFT + 2].copy_from_slice(&21u16.to_le_bytes());
        p[page::TIME_MULT..page::TIME_MULT + 4].copy_from_slice(&87_381_333u32.to_le_bytes());
        p[page::TIME_ZERO..page::TIME_ZERO + 8].copy_from_slice(&123u64.to_le_bytes());
        p[page::TIME_MASK..page::TIME_MASK + 8].copy_from_slice(&u64::MAX.to_le_bytes());
        assert_eq!(time_conv_from_page(&p), None);
        p[page::CAPABILITIES] = (page::CAP_USER_TIME_ZERO | page::CAP_USER_TIME_SHORT) as u8;
        let t = time_conv_from_page(&p).unwrap();
        assert_eq!(
            (t.time_shift, t.time_mult, t.time_zero),
            (21, 87_381_333, 123)
        );
        assert!(t.cap_user_time_short);
        assert_eq!(t.time_mask, u64::MAX);
    }
}
