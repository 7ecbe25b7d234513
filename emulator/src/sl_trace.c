/* SPDX-License-Identifier: GPL-2.0-or-later (a Valgrind tool; see LICENSE.md) */
/* spelunk emulator: trace writer (layouts in emulator/FORMAT.md). */
#include "sl_trace.h"

#ifdef SL_NATIVE
#include <unistd.h>
static Int sl_write_fd(Int fd, const void *p, UInt n) { return (Int)write(fd, p, n); }
#else
#include "pub_tool_libcfile.h"
static Int sl_write_fd(Int fd, const void *p, UInt n) { return VG_(write)(fd, p, (Int)n); }
#endif

#define SLT_BUF (1u << 20)

static UInt rec_start; /* offset of the open record's header in the buffer */

void sl_trace_init(SlTrace *t, Int fd)
{
   t->fd = fd;
   if (!t->buf) t->buf = SL_CALLOC(SLT_BUF, 1);
   t->cap = SLT_BUF;
   t->used = 0;
   t->written = 0;
   t->failed = False;
}

void sl_trace_flush(SlTrace *t)
{
   UInt off = 0;
   if (t->fd < 0) {
      t->used = 0;
      return;
   }
   while (off < t->used) {
      Int n = sl_write_fd(t->fd, t->buf + off, t->used - off);
      if (n <= 0) {
         t->failed = True;
         break;
      }
      off += (UInt)n;
   }
   t->written += off;
   t->used = 0;
}

static inline void need(SlTrace *t, UInt n)
{
   if (t->used + n > t->cap) {
      /* move the open record to the front after flushing what precedes it */
      UInt keep = t->used - rec_start, start = rec_start;
      UInt saved_used = t->used;
      t->used = start;
      sl_trace_flush(t);
      SL_MEMMOVE(t->buf, t->buf + start, keep);
      t->used = keep;
      rec_start = 0;
      (void)saved_used;
      SL_ASSERT(t->used + n <= t->cap);
   }
}

void slt_u8(SlTrace *t, UChar v) { need(t, 1); t->buf[t->used++] = v; }
void slt_u16(SlTrace *t, UShort v)
{
   need(t, 2);
   t->buf[t->used++] = (UChar)v;
   t->buf[t->used++] = (UChar)(v >> 8);
}
void slt_u32(SlTrace *t, UInt v)
{
   UInt i;
   need(t, 4);
   for (i = 0; i < 4; i++) t->buf[t->used++] = (UChar)(v >> (8 * i));
}
void slt_u64(SlTrace *t, ULong v)
{
   UInt i;
   need(t, 8);
   for (i = 0; i < 8; i++) t->buf[t->used++] = (UChar)(v >> (8 * i));
}
void slt_bytes(SlTrace *t, const void *p, UInt n)
{
   need(t, n);
   SL_MEMMOVE(t->buf + t->used, p, n);
   t->used += n;
}

void slt_begin(SlTrace *t, UShort type)
{
   need(t, 8);
   rec_start = t->used;
   slt_u16(t, type);
   slt_u16(t, 0);
   slt_u32(t, 0); /* length, filled by slt_end */
}

void slt_end(SlTrace *t)
{
   UInt len = t->used - rec_start - 8, i;
   for (i = 0; i < 4; i++) t->buf[rec_start + 4 + i] = (UChar)(len >> (8 * i));
   rec_start = t->used;
}

static UInt sl_strlen(const HChar *s)
{
   UInt n = 0;
   if (!s) return 0;
   while (s[n]) n++;
   return n;
}

static void slt_str16(SlTrace *t, const HChar *s)
{
   UInt n = sl_strlen(s);
   if (n > 0xffff) n = 0xffff;
   slt_u16(t, (UShort)n);
   slt_bytes(t, s, n);
}

void slt_file_header(SlTrace *t)
{
   rec_start = t->used;
   slt_bytes(t, SLT_MAGIC, 8);
   slt_u16(t, SLT_VERSION_MAJOR);
   slt_u16(t, SLT_VERSION_MINOR);
   slt_u32(t, 32);
   slt_u64(t, 0);
   slt_u64(t, 0);
   rec_start = t->used;
}

#define CONFIG_FIXED 244u

void slt_config(SlTrace *t, const SlConfig *c, UInt switch_min, UInt switch_max,
                ULong timeline_ns, const HChar *tool_version, const HChar *host_arch)
{
   UInt start;
   slt_begin(t, SLT_CONFIG);
   start = t->used;
   slt_u32(t, CONFIG_FIXED);                     /*   0 fixed-part size */
   slt_u32(t, SL_LINE);                          /*   4 cache line size */
   slt_u64(t, c->midr);                          /*   8 */
   slt_u64(t, c->cpu_hz);                        /*  16 */
   slt_u64(t, c->timer_hz);                      /*  24 */
   slt_u32(t, c->spe_interval);                  /*  32 */
   slt_u32(t, (UInt)sl_spe_interval_x2(c));      /*  36 */
   slt_u32(t, (c->spe_jitter ? 1u : 0u) | (c->spe_collisions ? 2u : 0u) | (c->spe_ts ? 4u : 0u) |
                 (c->spe_pa ? 8u : 0u));          /*  40 flags; bit 4 (ERnd) is 0 */
   slt_u32(t, c->spe_type_filter);               /*  44 */
   slt_u32(t, c->spe_min_latency);               /*  48 */
   slt_u32(t, c->spe_counter_bits);              /*  52 */
   slt_u64(t, c->spe_event_filter);              /*  56 */
   slt_u32(t, c->page_shift);                    /*  64 */
   slt_u32(t, c->dispatch_width);                /*  68 */
   slt_u32(t, c->rob_size);                      /*  72 */
   slt_u32(t, c->ls_issue_queue);                /*  76 */
   slt_u32(t, c->mshrs);                         /*  80 */
   slt_u32(t, c->store_buffer);                  /*  84 */
   slt_u32(t, c->mispredict_penalty);            /*  88 */
   slt_u32(t, c->l1d_size);                      /*  92 */
   slt_u32(t, c->l1d_assoc);                     /*  96 */
   slt_u32(t, c->l1d_lat);                       /* 100 */
   slt_u32(t, c->l1i_size);                      /* 104 */
   slt_u32(t, c->l1i_assoc);                     /* 108 */
   slt_u32(t, c->l2_size);                       /* 112 */
   slt_u32(t, c->l2_assoc);                      /* 116 */
   slt_u32(t, c->l2_lat);                        /* 120 */
   slt_u32(t, c->slc_size);                      /* 124 */
   slt_u32(t, c->slc_assoc);                     /* 128 */
   slt_u32(t, c->slc_lat);                       /* 132 */
   slt_u32(t, c->dram_lat);                      /* 136 */
   slt_u32(t, c->peer_lat);                      /* 140 */
   slt_u32(t, c->prefetch_distance);             /* 144 */
   slt_u32(t, c->l1dtlb_entries);                /* 148 */
   slt_u32(t, c->l1itlb_entries);                /* 152 */
   slt_u32(t, c->l2tlb_entries);                 /* 156 */
   slt_u32(t, c->l2tlb_assoc);                   /* 160 */
   slt_u32(t, c->l1tlb_lat);                     /* 164 */
   slt_u32(t, c->l2tlb_lat);                     /* 168 */
   slt_u32(t, c->walk_lat);                      /* 172 */
   slt_u32(t, c->bp_hist_bits);                  /* 176 */
   slt_u32(t, c->bp_table_bits);                 /* 180 */
   slt_u32(t, c->btb_entries);                   /* 184 */
   slt_u32(t, c->ras_entries);                   /* 188 */
   slt_u32(t, c->max_cores);                     /* 192 */
   slt_u32(t, switch_min);                       /* 196 */
   slt_u32(t, switch_max);                       /* 200 */
   slt_u32(t, (UInt)(timeline_ns / 1000));       /* 204 timeline interval, virtual us */
   slt_u32(t, c->stride_distance);               /* 208 (1.2) */
   slt_u32(t, c->stride_max_lines);              /* 212 (1.2) */
   slt_u32(t, c->thp);                           /* 216 THP policy (1.4) */
   slt_u32(t, c->huge_shift);                    /* 220 huge page shift, 0 = none (1.4) */
   slt_u32(t, c->split_penalty);                 /* 224 line-crossing penalty, cycles (1.4) */
   slt_u32(t, c->fwd_lat);                       /* 228 store-to-load forwarding, cycles (1.4) */
   slt_u32(t, c->fwd_fail_penalty);              /* 232 forwarding failure replay, cycles (1.4) */
   slt_u32(t, c->n_l1_pcs);                      /* 236 --l1-pcs ranges (1.4) */
   slt_u32(t, c->n_huge_ranges);                 /* 240 --huge-range ranges (1.4) */
   SL_ASSERT(t->used - start == CONFIG_FIXED);
   slt_str16(t, c->cpu_name);
   slt_str16(t, tool_version);
   slt_str16(t, host_arch);
   slt_str16(t, c->platform_name); /* 1.3; empty without --platform */
   slt_end(t);
}

/* The counters the configured core implements (sl_counter_implemented), in enum order: the
 * schema and every COUNTERS record list the same ones. */
static UInt n_implemented(const SlConfig *c)
{
   UInt i, n = 0;
   for (i = 0; i < SL_NCOUNTERS; i++) n += sl_counter_implemented(c, i) ? 1u : 0u;
   return n;
}

void slt_counter_schema(SlTrace *t, const SlConfig *c)
{
   UInt i;
   slt_begin(t, SLT_COUNTER_SCHEMA);
   slt_u32(t, n_implemented(c));
   for (i = 0; i < SL_NCOUNTERS; i++) {
      if (!sl_counter_implemented(c, i)) continue;
      slt_u32(t, sl_counter_info[i].code);
      slt_str16(t, sl_counter_info[i].name);
   }
   slt_end(t);
}

void slt_sample(SlTrace *t, UInt tid, const SlSample *s)
{
   slt_begin(t, SLT_SAMPLE);
   slt_u32(t, tid);                  /*  0 */
   slt_u16(t, (UShort)s->core);      /*  4 */
   slt_u8(t, s->op_class);           /*  6 */
   slt_u8(t, s->op_subclass);        /*  7 */
   slt_u32(t, s->events);            /*  8 */
   slt_u16(t, s->total_lat);         /* 12 */
   slt_u16(t, s->issue_lat);         /* 14 */
   slt_u16(t, s->xlat_lat);          /* 16 */
   slt_u16(t, s->data_source);       /* 18 */
   slt_u8(t, (UChar)s->flags);       /* 20 */
   slt_u8(t, s->access_size);        /* 21 */
   slt_u8(t, s->level);              /* 22 */
   slt_u8(t, 0);                     /* 23 */
   slt_u64(t, s->pc);                /* 24 */
   slt_u64(t, s->va);                /* 32 */
   slt_u64(t, s->pa);                /* 40 */
   slt_u64(t, s->target);            /* 48 */
   slt_u64(t, s->ts);                /* 56 */
   slt_u32(t, (UInt)(s->exact_total_cycles > 0xffffffffull ? 0xffffffffull
                                                            : s->exact_total_cycles)); /* 64 */
   slt_u32(t, 0);                    /* 68 */
   slt_end(t);
}

void slt_counters(SlTrace *t, const SlConfig *c, UInt tid, UInt core, UChar reason, ULong ts,
                  ULong cycles, const ULong v[SL_NCOUNTERS])
{
   UInt i;
   slt_begin(t, SLT_COUNTERS);
   slt_u32(t, tid);
   slt_u16(t, (UShort)core);
   slt_u8(t, reason);
   slt_u8(t, 0);
   slt_u64(t, ts);
   slt_u64(t, cycles);
   slt_u32(t, n_implemented(c));
   slt_u32(t, 0);
   for (i = 0; i < SL_NCOUNTERS; i++)
      if (sl_counter_implemented(c, i)) slt_u64(t, v[i]);
   slt_end(t);
}
