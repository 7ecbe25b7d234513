//! Numeric facts of the perf_event / perf.data ABI that this crate reads and writes.
//!
//! Provenance, per group:
//! - kernel UAPI `include/uapi/linux/perf_event.h`: record types (`enum perf_event_type`),
//!   `PERF_RECORD_MISC_*`, `enum perf_event_sample_format`, the `perf_event_attr` bitfield order,
//!   `PERF_ATTR_SIZE_VER*`, `PERF_AUX_FLAG_*`, `PERF_TYPE_*`, `PERF_COUNT_SW_DUMMY`;
//! - tools/perf `Documentation/perf.data-file-format.txt` and the record structs of
//!   `tools/lib/perf/include/perf/event.h` (struct layouts only): user record types
//!   (`enum perf_user_event_type`), header feature bits (`HEADER_*`), `perf_file_header`;
//! - perf's `enum auxtrace_type` (tools/perf/util/auxtrace.h): the numbers perf stores in
//!   `PERF_RECORD_AUXTRACE_INFO.type`.

/// `PERF_RECORD_*` kernel record types (`enum perf_event_type`, perf_event.h).
pub mod record {
    pub const MMAP: u32 = 1;
    pub const LOST: u32 = 2;
    pub const COMM: u32 = 3;
    pub const EXIT: u32 = 4;
    pub const THROTTLE: u32 = 5;
    pub const UNTHROTTLE: u32 = 6;
    pub const FORK: u32 = 7;
    pub const READ: u32 = 8;
    pub const SAMPLE: u32 = 9;
    pub const MMAP2: u32 = 10;
    pub const AUX: u32 = 11;
    pub const ITRACE_START: u32 = 12;
    pub const LOST_SAMPLES: u32 = 13;
    pub const SWITCH: u32 = 14;
    pub const SWITCH_CPU_WIDE: u32 = 15;
    pub const NAMESPACES: u32 = 16;
    pub const KSYMBOL: u32 = 17;
    pub const BPF_EVENT: u32 = 18;
    pub const CGROUP: u32 = 19;
    pub const TEXT_POKE: u32 = 20;
    pub const AUX_OUTPUT_HW_ID: u32 = 21;
    /// Highest kernel record type this crate knows by name.
    pub const KERNEL_MAX: u32 = AUX_OUTPUT_HW_ID;

    // perf's own records (`enum perf_user_event_type`, tools/lib/perf/include/perf/event.h and
    // perf.data-file-format.txt).
    pub const HEADER_ATTR: u32 = 64;
    pub const HEADER_EVENT_TYPE: u32 = 65;
    pub const HEADER_TRACING_DATA: u32 = 66;
    pub const HEADER_BUILD_ID: u32 = 67;
    pub const FINISHED_ROUND: u32 = 68;
    pub const ID_INDEX: u32 = 69;
    pub const AUXTRACE_INFO: u32 = 70;
    pub const AUXTRACE: u32 = 71;
    pub const AUXTRACE_ERROR: u32 = 72;
    pub const THREAD_MAP: u32 = 73;
    pub const CPU_MAP: u32 = 74;
    pub const STAT_CONFIG: u32 = 75;
    pub const STAT: u32 = 76;
    pub const STAT_ROUND: u32 = 77;
    pub const EVENT_UPDATE: u32 = 78;
    pub const TIME_CONV: u32 = 79;
    pub const HEADER_FEATURE: u32 = 80;
    pub const COMPRESSED: u32 = 81;
    pub const FINISHED_INIT: u32 = 82;
    pub const COMPRESSED2: u32 = 83;
    pub const BPF_METADATA: u32 = 84;
    pub const SCHEDSTAT_CPU: u32 = 85;
    pub const SCHEDSTAT_DOMAIN: u32 = 86;
    /// Highest perf user record type this crate knows by name.
    pub const USER_MAX: u32 = SCHEDSTAT_DOMAIN;

    /// The `PERF_RECORD_*` name of a record type, or `PERF_RECORD_<n>` for unknown ones.
    pub fn name(t: u32) -> String {
        let s = match t {
            MMAP => "MMAP",
            LOST => "LOST",
            COMM => "COMM",
            EXIT => "EXIT",
            THROTTLE => "THROTTLE",
            UNTHROTTLE => "UNTHROTTLE",
            FORK => "FORK",
            READ => "READ",
            SAMPLE => "SAMPLE",
            MMAP2 => "MMAP2",
            AUX => "AUX",
            ITRACE_START => "ITRACE_START",
            LOST_SAMPLES => "LOST_SAMPLES",
            SWITCH => "SWITCH",
            SWITCH_CPU_WIDE => "SWITCH_CPU_WIDE",
            NAMESPACES => "NAMESPACES",
            KSYMBOL => "KSYMBOL",
            BPF_EVENT => "BPF_EVENT",
            CGROUP => "CGROUP",
            TEXT_POKE => "TEXT_POKE",
            AUX_OUTPUT_HW_ID => "AUX_OUTPUT_HW_ID",
            HEADER_ATTR => "HEADER_ATTR",
            HEADER_EVENT_TYPE => "HEADER_EVENT_TYPE",
            HEADER_TRACING_DATA => "HEADER_TRACING_DATA",
            HEADER_BUILD_ID => "HEADER_BUILD_ID",
            FINISHED_ROUND => "FINISHED_ROUND",
            ID_INDEX => "ID_INDEX",
            AUXTRACE_INFO => "AUXTRACE_INFO",
            AUXTRACE => "AUXTRACE",
            AUXTRACE_ERROR => "AUXTRACE_ERROR",
            THREAD_MAP => "THREAD_MAP",
            CPU_MAP => "CPU_MAP",
            STAT_CONFIG => "STAT_CONFIG",
            STAT => "STAT",
            STAT_ROUND => "STAT_ROUND",
            EVENT_UPDATE => "EVENT_UPDATE",
            TIME_CONV => "TIME_CONV",
            HEADER_FEATURE => "HEADER_FEATURE",
            COMPRESSED => "COMPRESSED",
            FINISHED_INIT => "FINISHED_INIT",
            COMPRESSED2 => "COMPRESSED2",
            BPF_METADATA => "BPF_METADATA",
            SCHEDSTAT_CPU => "SCHEDSTAT_CPU",
            SCHEDSTAT_DOMAIN => "SCHEDSTAT_DOMAIN",
            _ => return format!("PERF_RECORD_{t}"),
        };
        format!("PERF_RECORD_{s}")
    }

    /// True for types this crate knows (kernel 1..=21, perf 64..=86).
    pub fn is_known(t: u32) -> bool {
        (1..=KERNEL_MAX).contains(&t) || (HEADER_ATTR..=USER_MAX).contains(&t)
    }
}

/// `perf_event_header.misc` bits (perf_event.h).
pub mod misc {
    pub const CPUMODE_MASK: u16 = 0x7;
    pub const CPUMODE_UNKNOWN: u16 = 0;
    pub const KERNEL: u16 = 1;
    pub const USER: u16 = 2;
    pub const HYPERVISOR: u16 = 3;
    pub const GUEST_KERNEL: u16 = 4;
    pub const GUEST_USER: u16 = 5;
    /// MMAP/MMAP2: a data (non-executable) mapping.
    pub const MMAP_DATA: u16 = 1 << 13;
    /// COMM: the name changed because of exec.
    pub const COMM_EXEC: u16 = 1 << 13;
    /// SWITCH/SWITCH_CPU_WIDE: this is the switch-out record.
    pub const SWITCH_OUT: u16 = 1 << 13;
    /// SWITCH/SWITCH_CPU_WIDE (with SWITCH_OUT): the task was preempted (still runnable).
    pub const SWITCH_OUT_PREEMPT: u16 = 1 << 14;
    /// MMAP2: the record carries a build id instead of device/inode numbers.
    pub const MMAP_BUILD_ID: u16 = 1 << 14;
}

/// `enum perf_event_sample_format` bits (`perf_event_attr.sample_type`, perf_event.h).
pub mod sample {
    pub const IP: u64 = 1 << 0;
    pub const TID: u64 = 1 << 1;
    pub const TIME: u64 = 1 << 2;
    pub const ADDR: u64 = 1 << 3;
    pub const READ: u64 = 1 << 4;
    pub const CALLCHAIN: u64 = 1 << 5;
    pub const ID: u64 = 1 << 6;
    pub const CPU: u64 = 1 << 7;
    pub const PERIOD: u64 = 1 << 8;
    pub const STREAM_ID: u64 = 1 << 9;
    pub const RAW: u64 = 1 << 10;
    pub const BRANCH_STACK: u64 = 1 << 11;
    pub const REGS_USER: u64 = 1 << 12;
    pub const STACK_USER: u64 = 1 << 13;
    pub const WEIGHT: u64 = 1 << 14;
    pub const DATA_SRC: u64 = 1 << 15;
    pub const IDENTIFIER: u64 = 1 << 16;
    pub const TRANSACTION: u64 = 1 << 17;
    pub const REGS_INTR: u64 = 1 << 18;
    pub const PHYS_ADDR: u64 = 1 << 19;
}

/// `perf_event_attr` bitfield (the u64 after `read_format`), bit numbers in declaration order
/// (perf_event.h).
pub mod attr_flag {
    pub const DISABLED: u64 = 1 << 0;
    pub const INHERIT: u64 = 1 << 1;
    pub const PINNED: u64 = 1 << 2;
    pub const EXCLUSIVE: u64 = 1 << 3;
    pub const EXCLUDE_USER: u64 = 1 << 4;
    pub const EXCLUDE_KERNEL: u64 = 1 << 5;
    pub const EXCLUDE_HV: u64 = 1 << 6;
    pub const EXCLUDE_IDLE: u64 = 1 << 7;
    pub const MMAP: u64 = 1 << 8;
    pub const COMM: u64 = 1 << 9;
    pub const FREQ: u64 = 1 << 10;
    pub const INHERIT_STAT: u64 = 1 << 11;
    pub const ENABLE_ON_EXEC: u64 = 1 << 12;
    pub const TASK: u64 = 1 << 13;
    pub const WATERMARK: u64 = 1 << 14;
    // precise_ip: bits 15-16
    pub const MMAP_DATA: u64 = 1 << 17;
    pub const SAMPLE_ID_ALL: u64 = 1 << 18;
    pub const EXCLUDE_HOST: u64 = 1 << 19;
    pub const EXCLUDE_GUEST: u64 = 1 << 20;
    pub const EXCLUDE_CALLCHAIN_KERNEL: u64 = 1 << 21;
    pub const EXCLUDE_CALLCHAIN_USER: u64 = 1 << 22;
    pub const MMAP2: u64 = 1 << 23;
    pub const COMM_EXEC: u64 = 1 << 24;
    pub const USE_CLOCKID: u64 = 1 << 25;
    pub const CONTEXT_SWITCH: u64 = 1 << 26;
    pub const WRITE_BACKWARD: u64 = 1 << 27;
    pub const NAMESPACES: u64 = 1 << 28;
    pub const KSYMBOL: u64 = 1 << 29;
    pub const BPF_EVENT: u64 = 1 << 30;
}

/// `perf_event_attr` sizes and field offsets (perf_event.h `PERF_ATTR_SIZE_VER*`; the offsets
/// follow from the field order: type u32, size u32, config, sample_period|freq, sample_type,
/// read_format, flags, wakeup u32, bp_type u32, config1, config2, branch_sample_type,
/// sample_regs_user, sample_stack_user u32, clockid s32, sample_regs_intr, aux_watermark u32,
/// sample_max_stack u16, pad u16, aux_sample_size u32, pad u32, sig_data, config3).
pub mod attr {
    pub const SIZE_VER0: u32 = 64;
    pub const SIZE_VER1: u32 = 72;
    pub const SIZE_VER7: u32 = 128;
    pub const SIZE_VER8: u32 = 136;
    /// The size perf 6.1 writes (its `sizeof(struct perf_event_attr)`, observed in files it
    /// records: `perf evlist -v` prints `size: 128`).
    pub const SIZE_PERF_6_1: u32 = SIZE_VER7;
    pub const OFF_TYPE: usize = 0;
    pub const OFF_SIZE: usize = 4;
    pub const OFF_CONFIG: usize = 8;
    pub const OFF_SAMPLE_PERIOD: usize = 16;
    pub const OFF_SAMPLE_TYPE: usize = 24;
    pub const OFF_READ_FORMAT: usize = 32;
    pub const OFF_FLAGS: usize = 40;
    pub const OFF_WAKEUP: usize = 48;
    pub const OFF_CONFIG1: usize = 56;
    pub const OFF_CONFIG2: usize = 64;
    pub const OFF_CLOCKID: usize = 92;
    pub const OFF_AUX_WATERMARK: usize = 104;
    pub const OFF_CONFIG3: usize = 128;
}

/// `perf_event_attr.type` values (perf_event.h `enum perf_type_id`).
pub mod event_type {
    pub const HARDWARE: u32 = 0;
    pub const SOFTWARE: u32 = 1;
    pub const TRACEPOINT: u32 = 2;
    pub const HW_CACHE: u32 = 3;
    pub const RAW: u32 = 4;
    pub const BREAKPOINT: u32 = 5;
    /// `PERF_COUNT_SW_DUMMY` (config of the `dummy` software event perf uses for sideband).
    pub const SW_DUMMY: u64 = 9;
    /// `PERF_COUNT_SW_CPU_CLOCK`.
    pub const SW_CPU_CLOCK: u64 = 0;
}

/// `PERF_AUX_FLAG_*` (perf_event.h): flags of a `PERF_RECORD_AUX`.
pub mod aux_flag {
    /// The record was truncated to fit (data after it was lost).
    pub const TRUNCATED: u64 = 0x01;
    /// The snapshot from overwrite mode.
    pub const OVERWRITE: u64 = 0x02;
    /// The record contains gaps (for SPE: the last record is partial).
    pub const PARTIAL: u64 = 0x04;
    /// Sample collision (for SPE: the hardware dropped samples; raise the period).
    pub const COLLISION: u64 = 0x08;
    /// PMU-specific trace format type (bits 8-15, `PERF_AUX_FLAG_PMU_FORMAT_TYPE_MASK`).
    pub const PMU_FORMAT_TYPE_MASK: u64 = 0xff00;
}

/// perf.data header feature bits (`HEADER_*`, perf.data-file-format.txt).
pub mod feature {
    pub const TRACING_DATA: u32 = 1;
    pub const BUILD_ID: u32 = 2;
    pub const HOSTNAME: u32 = 3;
    pub const OSRELEASE: u32 = 4;
    pub const VERSION: u32 = 5;
    pub const ARCH: u32 = 6;
    pub const NRCPUS: u32 = 7;
    pub const CPUDESC: u32 = 8;
    pub const CPUID: u32 = 9;
    pub const TOTAL_MEM: u32 = 10;
    pub const CMDLINE: u32 = 11;
    pub const EVENT_DESC: u32 = 12;
    pub const CPU_TOPOLOGY: u32 = 13;
    pub const NUMA_TOPOLOGY: u32 = 14;
    pub const BRANCH_STACK: u32 = 15;
    pub const PMU_MAPPINGS: u32 = 16;
    pub const GROUP_DESC: u32 = 17;
    pub const AUXTRACE: u32 = 18;
    pub const STAT: u32 = 19;
    pub const CACHE: u32 = 20;
    pub const SAMPLE_TIME: u32 = 21;
    /// Called SAMPLE_TOPOLOGY by linux-perf-data; perf's header.h names it MEM_TOPOLOGY.
    pub const MEM_TOPOLOGY: u32 = 22;
    /// Number of bits in the header's feature bitmap (`HEADER_FEAT_BITS`).
    pub const BITS: u32 = 256;
}

/// perf.data file header (`struct perf_file_header`, perf.data-file-format.txt): `magic[8]`,
/// size, attr_size, attrs{offset,size}, data{offset,size}, event_types{offset,size},
/// 256 feature bits.
pub mod header {
    /// "PERFILE2" read as a little-endian u64 in a little-endian file.
    pub const MAGIC: [u8; 8] = *b"PERFILE2";
    /// The same magic as written by a big-endian machine (byte-swapped).
    pub const MAGIC_SWAPPED: [u8; 8] = *b"2ELIFREP";
    /// Version-1 perf files (not described by the format document; rejected).
    pub const MAGIC_V1: [u8; 8] = *b"PERFFILE";
    /// `sizeof(struct perf_file_header)`.
    pub const SIZE: u64 = 104;
    /// `sizeof(struct perf_pipe_file_header)` (magic + size): pipe mode.
    pub const PIPE_SIZE: u64 = 16;
    /// `sizeof(struct perf_file_section)`.
    pub const SECTION_SIZE: u64 = 16;
    pub const OFF_ATTRS: usize = 24;
    pub const OFF_DATA: usize = 40;
    pub const OFF_EVENT_TYPES: usize = 56;
    pub const OFF_FEATURES: usize = 72;
}

/// `enum auxtrace_type` (tools/perf/util/auxtrace.h): `PERF_RECORD_AUXTRACE_INFO.type`.
pub mod auxtrace_type {
    pub const UNKNOWN: u32 = 0;
    pub const INTEL_PT: u32 = 1;
    pub const INTEL_BTS: u32 = 2;
    pub const CS_ETM: u32 = 3;
    pub const ARM_SPE: u32 = 4;
    pub const S390_CPUMSF: u32 = 5;
    pub const HISI_PTT: u32 = 6;
    pub const VPA_DTL: u32 = 7;

    /// A human name for an AUXTRACE_INFO type.
    pub fn name(t: u32) -> String {
        match t {
            INTEL_PT => "Intel PT".into(),
            INTEL_BTS => "Intel BTS".into(),
            CS_ETM => "Arm CoreSight ETM".into(),
            ARM_SPE => "Arm SPE".into(),
            S390_CPUMSF => "s390 CPU-MF sampling".into(),
            HISI_PTT => "HiSilicon PTT".into(),
            VPA_DTL => "powerpc VPA DTL".into(),
            _ => format!("unknown AUX trace type {t}"),
        }
    }
}

/// Fixed record sizes (header included) from the record structs in
/// tools/lib/perf/include/perf/event.h and perf.data-file-format.txt.
pub mod size {
    /// `struct perf_event_header`.
    pub const HEADER: usize = 8;
    /// `struct perf_record_auxtrace` (the payload follows and is not counted in header.size).
    pub const AUXTRACE: usize = 48;
    /// `struct perf_record_auxtrace_info` without `priv[]`.
    pub const AUXTRACE_INFO_FIXED: usize = 16;
    /// `struct perf_record_time_conv` up to `time_zero` (the layout before Linux 5.10).
    pub const TIME_CONV_SHORT: usize = 32;
    /// `struct perf_record_time_conv` with time_cycles, time_mask and the cap bytes.
    pub const TIME_CONV_LONG: usize = 56;
    /// `struct perf_record_aux` without sample_id.
    pub const AUX: usize = 32;
}
