//! Constants of the trace format (emulator/FORMAT.md): magic, versions, record types and the
//! sizes of fixed parts. All integers in a trace are little-endian.

/// The first 8 bytes of every trace.
pub const MAGIC: &[u8; 8] = b"SPLKEMUT";
/// The major version this reader understands. Minor versions only append fields to fixed
/// parts or add record types, so a reader reads any minor version of its major.
pub const VERSION_MAJOR: u16 = 1;
/// Size of the file header (magic, major, minor, header size, flags, reserved).
pub const FILE_HEADER_LEN: usize = 32;
/// Size of a record header: type (u16), reserved (u16), payload length (u32).
pub const RECORD_HEADER_LEN: usize = 8;
/// Largest payload the reader accepts (guards memory against corrupt lengths).
pub const MAX_PAYLOAD: u32 = 64 << 20;

/// Record types.
pub mod record_type {
    pub const CONFIG: u16 = 1;
    pub const PROCESS: u16 = 2;
    pub const THREAD_START: u16 = 3;
    pub const THREAD_NAME: u16 = 4;
    pub const THREAD_EXIT: u16 = 5;
    pub const MMAP: u16 = 6;
    pub const MUNMAP: u16 = 7;
    pub const COUNTER_SCHEMA: u16 = 8;
    pub const SAMPLE: u16 = 9;
    pub const ANNOTATION: u16 = 10;
    pub const COUNTERS: u16 = 11;
    pub const OBJECT_TRUTH: u16 = 12;
    pub const END: u16 = 13;
    /// Version 1.1: heap blocks.
    pub const ALLOC: u16 = 14;
    pub const FREE: u16 = 15;
    pub const BLOCK_TRUTH: u16 = 16;
}

/// Name of a record type for messages.
pub fn record_name(t: u16) -> &'static str {
    use record_type::*;
    match t {
        CONFIG => "CONFIG",
        PROCESS => "PROCESS",
        THREAD_START => "THREAD_START",
        THREAD_NAME => "THREAD_NAME",
        THREAD_EXIT => "THREAD_EXIT",
        MMAP => "MMAP",
        MUNMAP => "MUNMAP",
        COUNTER_SCHEMA => "COUNTER_SCHEMA",
        SAMPLE => "SAMPLE",
        ANNOTATION => "ANNOTATION",
        COUNTERS => "COUNTERS",
        OBJECT_TRUTH => "OBJECT_TRUTH",
        END => "END",
        ALLOC => "ALLOC",
        FREE => "FREE",
        BLOCK_TRUTH => "BLOCK_TRUTH",
        _ => "unknown",
    }
}

/// Fixed-part sizes (the minimum payload length of each record type, version 1.0).
pub mod fixed_len {
    /// CONFIG's fixed part is self-describing (its first u32); this is the 1.0 size.
    pub const CONFIG: usize = 208;
    pub const PROCESS: usize = 8;
    pub const THREAD_START: usize = 32;
    pub const THREAD_NAME: usize = 16;
    pub const THREAD_EXIT: usize = 16;
    pub const MMAP: usize = 48;
    pub const MUNMAP: usize = 24;
    pub const COUNTER_SCHEMA: usize = 4;
    pub const SAMPLE: usize = 72;
    pub const ANNOTATION: usize = 40;
    pub const COUNTERS: usize = 32;
    pub const OBJECT_TRUTH: usize = 56;
    pub const END: usize = 24;
    pub const ALLOC: usize = 40;
    pub const FREE: usize = 32;
    pub const BLOCK_TRUTH: usize = 64;
}

/// SAMPLE flag bits: which optional fields are valid.
pub mod sample_flags {
    pub const VA: u8 = 1;
    pub const PA: u8 = 2;
    pub const TARGET: u8 = 4;
    pub const DATA_SOURCE: u8 = 8;
    pub const TRANSLATION_LATENCY: u8 = 16;
    pub const TIMESTAMP: u8 = 32;
}

/// CONFIG SPE flag bits.
pub mod spe_flags {
    pub const JITTER: u32 = 1;
    pub const COLLISIONS: u32 = 2;
    pub const TIMESTAMPS: u32 = 4;
    pub const PHYSICAL_ADDRESSES: u32 = 8;
    /// PMSIDR_EL1.ERnd as modelled (always 0 in 1.0).
    pub const ERND: u32 = 16;
}

/// CONFIG type-filter bits.
pub mod type_filter {
    pub const LOAD: u32 = 1;
    pub const STORE: u32 = 2;
    pub const BRANCH: u32 = 4;
}
