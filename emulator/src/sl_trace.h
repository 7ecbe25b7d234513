/* SPDX-License-Identifier: GPL-2.0-or-later (a Valgrind tool; see LICENSE.md) */
/* spelunk emulator: trace writer. The byte layouts are specified in emulator/FORMAT.md; every
 * function here writes exactly one record of that document. */
#ifndef SL_TRACE_H
#define SL_TRACE_H

#include "sl_model.h"

#define SLT_MAGIC "SPLKEMUT"
#define SLT_VERSION_MAJOR 1
#define SLT_VERSION_MINOR 4

enum {
   SLT_CONFIG = 1,
   SLT_PROCESS = 2,
   SLT_THREAD_START = 3,
   SLT_THREAD_NAME = 4,
   SLT_THREAD_EXIT = 5,
   SLT_MMAP = 6,
   SLT_MUNMAP = 7,
   SLT_COUNTER_SCHEMA = 8,
   SLT_SAMPLE = 9,
   SLT_ANNOTATION = 10,
   SLT_COUNTERS = 11,
   SLT_OBJECT_TRUTH = 12,
   SLT_END = 13,
   SLT_ALLOC = 14,       /* 1.1 */
   SLT_FREE = 15,        /* 1.1 */
   SLT_BLOCK_TRUTH = 16, /* 1.1 */
};

/* ALLOC kinds */
enum {
   SL_ALLOC_MALLOC = 1,
   SL_ALLOC_CALLOC = 2,
   SL_ALLOC_REALLOC = 3,
   SL_ALLOC_ALIGNED = 4,
   SL_ALLOC_MMAP = 5,
};

/* FREE kinds: how a block ended */
enum {
   SL_FREE_FREE = 1,
   SL_FREE_REALLOC = 2,
   SL_FREE_MUNMAP = 3,
   SL_FREE_SUPERSEDED = 4, /* allocated again while the tool still had it live */
};

/* annotation kinds */
enum {
   SLA_PHASE_BEGIN = 1,
   SLA_PHASE_END = 2,
   SLA_OBJECT = 3,
   SLA_OBJECT_FREE = 4,
   SLA_TAG_MAPPING = 5,
};

/* counter snapshot reasons */
enum {
   SLR_PERIODIC = 0,
   SLR_ANNOTATION = 1,
   SLR_THREAD_EXIT = 2,
   SLR_FINAL = 3,
   SLR_THREAD_START = 4,
};

typedef struct {
   Int fd;
   UChar *buf;
   UInt used, cap;
   ULong written;
   Bool failed;
} SlTrace;

/* Writes go through a buffer; sl_trace_flush() empties it. */
void sl_trace_init(SlTrace *t, Int fd);
void sl_trace_flush(SlTrace *t);

/* Record builder: begin, append fields, end (fills in the length). */
void slt_begin(SlTrace *t, UShort type);
void slt_u8(SlTrace *t, UChar v);
void slt_u16(SlTrace *t, UShort v);
void slt_u32(SlTrace *t, UInt v);
void slt_u64(SlTrace *t, ULong v);
void slt_bytes(SlTrace *t, const void *p, UInt n);
void slt_end(SlTrace *t);

void slt_file_header(SlTrace *t);
void slt_config(SlTrace *t, const SlConfig *cfg, UInt switch_min, UInt switch_max,
                ULong timeline_ns, const HChar *tool_version, const HChar *host_arch);
void slt_counter_schema(SlTrace *t, const SlConfig *c);
void slt_sample(SlTrace *t, UInt tid, const SlSample *s);
void slt_counters(SlTrace *t, const SlConfig *c, UInt tid, UInt core, UChar reason, ULong ts,
                  ULong cycles, const ULong v[SL_NCOUNTERS]);

#endif
