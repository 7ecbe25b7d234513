/* SPDX-License-Identifier: GPL-2.0-or-later (a Valgrind tool; see LICENSE.md) */
/* Unit tests of the emulator's machine model (emulator/src/sl_model.c), built natively by
 * emulator/build.sh and run by emulator/test.sh. Expected values are computed by hand in the
 * comments from the configured geometry; none is read back from the model's own state. */
#include <stdio.h>
#include <stdlib.h>
#include "sl_model.h"

static int failures;

#define CHECK(cond, ...)                                                                         \
   do {                                                                                          \
      if (!(cond)) {                                                                             \
         failures++;                                                                             \
         printf("FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                                  \
         printf(__VA_ARGS__);                                                                    \
         printf("\n");                                                                           \
      }                                                                                          \
   } while (0)

static SlSample last;
static unsigned n_samples;
static void sink(void *ctx, const SlSample *s)
{
   (void)ctx;
   last = *s;
   n_samples++;
}

/* A tiny hierarchy: L1D 4 sets x 2 ways, L2 8 sets x 2 ways, SLC 16 sets x 2 ways, DRAM
 * without a bandwidth limit. */
static SlSystem *tiny(void)
{
   SlConfig c;
   SlSink k = {sink, NULL};
   sl_config_default(&c);
   c.l1d_size = 512; c.l1d_assoc = 2;
   c.l2_size = 1024; c.l2_assoc = 2;
   c.slc_size = 2048; c.slc_assoc = 2;
   c.prefetch_distance = 0;
   c.stride_distance = 0;
   c.dram_channels = 0; /* unlimited DRAM bandwidth: no queueing in the exact latencies below */
   c.spe_interval = 1 << 20; /* no samples unless a test asks */
   if (sl_config_check(&c)) abort();
   return sl_system_new(&c, &k);
}

static SlLevel load(SlCore *c, Addr va)
{
   SlMemOp m = {0x1000, va, 8, False, SL_LS_GP, 0, 0};
   SlLevel l;
   sl_mem(c, &m, &l);
   return l;
}

static SlLevel store(SlCore *c, Addr va)
{
   SlMemOp m = {0x1004, va, 8, True, SL_LS_GP, 0, 0};
   SlLevel l;
   sl_mem(c, &m, &l);
   return l;
}

/* A counter as the trace reports it. */
static unsigned long long cnt(SlCore *c, SlCounter k)
{
   ULong v[SL_NCOUNTERS];
   sl_core_counters(c, v);
   return (unsigned long long)v[k];
}

static const char *lv(SlLevel l)
{
   static const char *n[] = {"L1D", "L2", "PEER", "SLC", "DRAM"};
   return l < SL_NLVL ? n[l] : "?";
}

static void test_cache_sequence(void)
{
   SlSystem *s = tiny();
   SlCore *c = sl_core(s, 0);
   /* Addresses 256 bytes apart map to L1D set 0 (4 sets of 64 B lines); L2 has 8 sets, so
    * A=0, B=256, C=512 go to L2 sets 0, 4, 0; SLC (16 sets) sets 0, 4, 8. */
   Addr base = 0x10000000, A = base, B = base + 256, C = base + 512, D = base + 1024;
   SlLevel l;
   l = load(c, A); CHECK(l == SL_LVL_DRAM, "A first: %s", lv(l));
   l = load(c, B); CHECK(l == SL_LVL_DRAM, "B first: %s", lv(l));
   l = load(c, A); CHECK(l == SL_LVL_L1D, "A again: %s", lv(l));        /* L1 set0 = {A,B} */
   l = load(c, C); CHECK(l == SL_LVL_DRAM, "C first: %s", lv(l));       /* evicts B (LRU) */
   l = load(c, B); CHECK(l == SL_LVL_L2, "B after eviction: %s", lv(l)); /* still in L2 set 4 */
   /* L1 set0 now {B, C}; A was LRU and got evicted by B. */
   l = load(c, A); CHECK(l == SL_LVL_L2, "A after eviction: %s", lv(l));
   /* D=1024: L2 set 0 holds {A, C} (A MRU) -> D evicts C from L2 (and L1, inclusive). */
   l = load(c, D); CHECK(l == SL_LVL_DRAM, "D first: %s", lv(l));
   l = load(c, C); CHECK(l == SL_LVL_SLC, "C from SLC: %s", lv(l));   /* SLC set 8 kept it */
   CHECK(cnt(c, SL_C_L1D_CACHE) == 8, "L1D_CACHE %llu", cnt(c, SL_C_L1D_CACHE));
   CHECK(cnt(c, SL_C_L1D_CACHE_REFILL) == 7, "L1D_CACHE_REFILL %llu",
         cnt(c, SL_C_L1D_CACHE_REFILL));
   /* 5 data refills + 1 for the page-table descriptor of the first access's walk */
   CHECK(cnt(c, SL_C_L2D_CACHE_REFILL) == 6, "L2D_CACHE_REFILL %llu",
         cnt(c, SL_C_L2D_CACHE_REFILL));
   CHECK(cnt(c, SL_C_LL_CACHE_RD) == 5 && cnt(c, SL_C_LL_CACHE_MISS_RD) == 4, "LL %llu %llu",
         cnt(c, SL_C_LL_CACHE_RD),
         cnt(c, SL_C_LL_CACHE_MISS_RD));
}

static void test_coherence(void)
{
   SlSystem *s = tiny();
   SlCore *a = sl_core(s, 0), *b = sl_core(s, 1);
   Addr X = 0x20000040, Y = 0x20000080;
   SlLevel l;
   l = store(a, X); CHECK(l == SL_LVL_DRAM, "a store X: %s", lv(l));  /* a: M */
   l = load(b, X); CHECK(l == SL_LVL_PEER, "b load X modified in a: %s", lv(l));
   l = load(b, X); CHECK(l == SL_LVL_L1D, "b reload X: %s", lv(l));
   l = load(a, X); CHECK(l == SL_LVL_L1D, "a load X (shared): %s", lv(l));
   l = store(a, X); CHECK(l == SL_LVL_L1D, "a store X (upgrade): %s", lv(l));
   CHECK(cnt(a, SL_T_COHERENCE_INVAL) == 1, "one invalidation, got %llu",
         cnt(a, SL_T_COHERENCE_INVAL));
   l = load(b, X); CHECK(l == SL_LVL_PEER, "b load X after a's upgrade: %s", lv(l));
   /* a clean line read by both: the second reader is served by the SLC, not a peer */
   l = load(a, Y); CHECK(l == SL_LVL_DRAM, "a load Y: %s", lv(l));
   l = load(b, Y); CHECK(l == SL_LVL_SLC, "b load clean Y: %s", lv(l));
   /* b writes Y: a's copy is invalidated, a's next load comes from b */
   l = store(b, Y); CHECK(l == SL_LVL_L1D, "b store Y (upgrade): %s", lv(l));
   l = load(a, Y); CHECK(l == SL_LVL_PEER, "a load Y modified in b: %s", lv(l));
}

/* Ownership takes a round trip when another core holds a copy: an atomic's load (one that
 * reads for ownership) that finds its line Shared completes after the peer-core latency (200
 * cycles by default) counted from its L1 TLB look-up (1 cycle), instead of the 4-cycle L1D
 * hit; with no other copy, it is an ordinary hit. */
static void test_ownership_round_trip(void)
{
   SlSystem *s = tiny();
   SlCore *a = sl_core(s, 0), *b = sl_core(s, 1);
   SlMemOp at = {0x1008, 0x20000040, 8, False, SL_LS_EXT | SL_LS_EXT_AT, 0, 0};
   SlLevel l;
   ULong t0, done;
   store(a, at.va);
   l = load(b, at.va); CHECK(l == SL_LVL_PEER, "b load X modified in a: %s", lv(l));
   t0 = a->t + 10000 * SL_TQ; /* long after every fill */
   sl_core_sync_clock(a, t0);
   done = sl_mem(a, &at, &l);
   CHECK(l == SL_LVL_L1D, "atomic on shared X: %s", lv(l));
   CHECK(done - t0 == 201 * SL_TQ, "atomic on shared X took %llu cycles, want 1 + 200",
         (unsigned long long)((done - t0) / SL_TQ));
   CHECK(cnt(a, SL_T_COHERENCE_INVAL) == 1, "one invalidation, got %llu",
         cnt(a, SL_T_COHERENCE_INVAL));
   l = load(b, at.va); CHECK(l == SL_LVL_PEER, "b load X after a's atomic: %s", lv(l));
   /* a line no other core holds: an ordinary L1D hit (4 cycles) */
   at.va = 0x20000100;
   store(a, at.va);
   t0 = a->t + 10000 * SL_TQ;
   sl_core_sync_clock(a, t0);
   done = sl_mem(a, &at, &l);
   CHECK(done - t0 == 4 * SL_TQ, "atomic on private line took %llu cycles, want 4",
         (unsigned long long)((done - t0) / SL_TQ));
}

static void test_tlb(void)
{
   SlConfig c;
   SlSink k = {sink, NULL};
   SlSystem *s;
   SlCore *core;
   Addr base = 0x40000000;
   int i;
   sl_config_default(&c);
   c.page_shift = 12;
   c.l1dtlb_entries = 2;
   c.l2tlb_entries = 4; c.l2tlb_assoc = 1;
   c.prefetch_distance = 0;
   c.stride_distance = 0;
   c.spe_interval = 256;
   c.spe_collisions = False;
   sl_config_check(&c);
   s = sl_system_new(&c, &k);
   core = sl_core(s, 0);
   /* pages 0,1,2 then 0: L1 DTLB (2 entries, LRU) misses on page 0 again; the L2 TLB (4 sets,
    * 1 way, vpn % 4) still holds it. */
   for (i = 0; i < 3; i++) load(core, base + (Addr)i * 4096);
   CHECK(cnt(core, SL_C_DTLB_WALK) == 3, "3 walks, got %llu",
         cnt(core, SL_C_DTLB_WALK));
   load(core, base);
   CHECK(cnt(core, SL_C_L1D_TLB_REFILL) == 4, "4 L1 refills, got %llu",
         cnt(core, SL_C_L1D_TLB_REFILL));
   CHECK(cnt(core, SL_C_DTLB_WALK) == 3, "no new walk, got %llu",
         cnt(core, SL_C_DTLB_WALK));
   /* page 4 maps to L2 TLB set 0 and evicts page 0 there: page 0 walks again */
   load(core, base + 4 * 4096);
   load(core, base + 1 * 4096);
   load(core, base + 2 * 4096);
   load(core, base);
   CHECK(cnt(core, SL_C_DTLB_WALK) == 5, "walks %llu", cnt(core, SL_C_DTLB_WALK));
   /* translation latency of a sampled L1 DTLB hit is the L1 TLB latency (1 cycle) */
   {
      SlMemOp m = {0x2000, base + 8, 8, False, SL_LS_GP, 0, 0};
      unsigned before = n_samples;
      int j;
      for (j = 0; j < 600 && n_samples == before; j++) {
         SlLevel l;
         sl_mem(core, &m, &l);
      }
      CHECK(n_samples > before, "a sample");
      CHECK(last.xlat_lat == 1 && (last.events & SL_EV_TLB_WALK) == 0, "xlat %u ev %x",
            last.xlat_lat, last.events);
   }
}

static void test_sampling_interval(void)
{
   SlConfig c;
   SlSink k = {sink, NULL};
   SlSystem *s;
   SlCore *core;
   SlAluOp op = {0x3000, 0, SL_C_DP_SPEC, 0};
   unsigned long long n = 0;
   sl_config_default(&c);
   c.spe_interval = 1000; /* rounded down to 768 (multiple of 256) */
   c.spe_collisions = False;
   sl_config_check(&c);
   CHECK(c.spe_interval == 768, "rounded interval %u", c.spe_interval);
   s = sl_system_new(&c, &k);
   core = sl_core(s, 0);
   n_samples = 0;
   /* without jitter one op in 769 is selected ([SPE methodology table 4.3]: interval + 1) */
   while (n < 769ull * 1000) {
      sl_alu(core, 1, &op, NULL);
      n++;
   }
   CHECK(cnt(core, SL_C_SAMPLE_FEED) == 1000, "FEED %llu", cnt(core, SL_C_SAMPLE_FEED));
   CHECK(n_samples == 1000, "samples %u", n_samples);
   CHECK(sl_spe_interval_x2(&c) == 2 * 769, "interval x2");
   /* with jitter the average is interval + 128 (ERnd = 0) */
   c.spe_jitter = True;
   s = sl_system_new(&c, &k);
   core = sl_core(s, 0);
   sl_alu(core, 896u * 20000, NULL, NULL);
   {
      double mean = (double)core->pop / (double)cnt(core, SL_C_SAMPLE_FEED);
      CHECK(mean > 896 * 0.99 && mean < 896 * 1.01, "jittered mean interval %.1f", mean);
   }
}

static void test_dependent_chain_timing(void)
{
   SlSystem *s = tiny();
   SlCore *c = sl_core(s, 0);
   SlMemOp m = {0x4000, 0x50000000, 8, False, SL_LS_GP, 0, 0};
   ULong t0, ready = 0;
   SlLevel l;
   int i;
   sl_mem(c, &m, &l); /* warm */
   t0 = sl_mem(c, &m, &l);
   ready = t0;
   for (i = 0; i < 100; i++) {
      m.addr_ready = ready;
      ready = sl_mem(c, &m, &l);
   }
   /* 100 dependent L1D hits of 4 cycles each */
   CHECK(ready - t0 == 100ull * 4 * SL_TQ, "chain %llu tq", (unsigned long long)(ready - t0));
}

/* A forked child's core restarts its op count; a long load in flight at the fork must still
 * hold back the op rob_size after it, exactly as without the fork. Two identical cores: A runs
 * a DRAM load then rob_size single ops; B runs 10000 ops first, the load, a rebase (the fork),
 * then the same rob_size ops. Both must take the same time from the load's dispatch, at least
 * the load's latency (the window fills up behind it). */
static void test_fork_rebase_keeps_the_window(void)
{
   SlSystem *sa = tiny(), *sb = tiny();
   SlCore *a = sl_core(sa, 0), *b = sl_core(sb, 0);
   SlMemOp m = {0x4000, 0x70000000, 8, False, SL_LS_GP, 0, 0};
   UInt R = sa->cfg.rob_size, i;
   ULong ta, tb, ca, cb;
   SlLevel l;
   for (i = 0; i < 10000; i++) sl_alu(b, 1, NULL, NULL);
   ta = a->t;
   ca = sl_mem(a, &m, &l);
   CHECK(l == SL_LVL_DRAM, "A load from %s", lv(l));
   tb = b->t;
   cb = sl_mem(b, &m, &l);
   CHECK(l == SL_LVL_DRAM, "B load from %s", lv(l));
   sl_core_rebase_ops(b);
   CHECK(b->pop == 0, "B pop %llu after the rebase", (unsigned long long)b->pop);
   for (i = 0; i < R; i++) {
      sl_alu(a, 1, NULL, NULL);
      sl_alu(b, 1, NULL, NULL);
   }
   CHECK(ca - ta == cb - tb, "load latency A %llu, B %llu tq", (unsigned long long)(ca - ta),
         (unsigned long long)(cb - tb));
   CHECK(a->t - ta >= ca - ta, "A: %u ops after the load dispatched before it completed", R);
   CHECK(a->t - ta == b->t - tb, "A %llu tq, B %llu tq after the fork",
         (unsigned long long)(a->t - ta), (unsigned long long)(b->t - tb));
}

static void test_branches(void)
{
   SlSystem *s = tiny();
   SlCore *c = sl_core(s, 0);
   SlBranch b = {0x5000, 0x4ff0, 0x5002, SL_B_COND, True, 0};
   int i;
   for (i = 0; i < 1000; i++) sl_branch(c, &b);
   /* a 2-bit counter starting weakly not-taken mispredicts once per history pattern while
    * the global history fills with ones (12 bits): at most 13 mispredictions */
   CHECK(cnt(c, SL_C_BR_MIS_PRED_RETIRED) <= 13, "mispredicts %llu",
         cnt(c, SL_C_BR_MIS_PRED_RETIRED));
   CHECK(cnt(c, SL_C_BR_RETIRED) == 1000, "retired");
   /* call/return pairs are predicted by the return stack */
   for (i = 0; i < 100; i++) {
      SlBranch call = {0x6000, 0x7000, 0x6005, SL_B_CALL, True, 0};
      SlBranch ret = {0x7010, 0x6005, 0x7011, SL_B_RET, True, 0};
      sl_branch(c, &call);
      sl_branch(c, &ret);
   }
   CHECK(cnt(c, SL_C_BR_RETURN_SPEC) == 100, "returns");
   CHECK(cnt(c, SL_C_BR_MIS_PRED_RETIRED) <= 13, "returns predicted");
}

static void test_collisions(void)
{
   SlConfig c;
   SlSink k = {sink, NULL};
   SlSystem *s;
   SlCore *core;
   int i;
   SlMemOp m = {0x8000, 0, 8, False, SL_LS_GP, 0, 0};
   SlLevel l;
   sl_config_default(&c);
   c.spe_interval = 256;
   c.prefetch_distance = 0;
   c.stride_distance = 0;
   sl_config_check(&c);
   s = sl_system_new(&c, &k);
   core = sl_core(s, 0);
   /* With the N1 window (ROB 128) a selected op retires before the op 128 later dispatches, so
    * the next selection (257 ops later) never finds it in flight: no collision. */
   for (i = 0; i < 20000; i++) {
      m.va = 0x70000000 + (Addr)i * 64 * 3;
      sl_mem(core, &m, &l);
   }
   CHECK(cnt(core, SL_C_SAMPLE_COLLISION) == 0, "ROB 128: %llu collisions",
         cnt(core, SL_C_SAMPLE_COLLISION));
   /* A 1024-op window keeps ~16 misses in flight (MSHRs): a DRAM miss selected at op k
    * completes ~283 cycles later, after op k+257 dispatched (~64 cycles at 4 ops/cycle). */
   c.rob_size = 1024;
   s = sl_system_new(&c, &k);
   core = sl_core(s, 0);
   for (i = 0; i < 20000; i++) {
      m.va = 0x70000000 + (Addr)i * 64 * 3;
      sl_mem(core, &m, &l);
   }
   CHECK(cnt(core, SL_C_SAMPLE_COLLISION) > 0, "ROB 1024: no collision");
   CHECK(cnt(core, SL_C_SAMPLE_FEED) ==
            cnt(core, SL_C_SAMPLE_FILTRATE) + cnt(core, SL_C_SAMPLE_COLLISION),
         "FEED = FILTRATE + COLLISION without filters");
}

/* A software prefetch for L1D starts the fill without holding dispatch back; a demand load of
 * the line waits only for what remains of the fill, and L1D_CACHE_REFILL does not count the
 * prefetch ([N1 PMU methodology] table 9). A prefetch for L2 leaves the load an L1D miss that
 * finds its line in L2. */
static void test_software_prefetch(void)
{
   SlSystem *s = tiny();
   SlCore *c = sl_core(s, 0);
   const SlConfig *cfg = &s->cfg;
   SlMemOp pf = {0x5000, 0x60000040, 64, False, SL_LS_GP, 0, 0};
   SlMemOp ld = {0x5004, 0x60000040, 8, False, SL_LS_GP, 0, 0};
   ULong t0, done;
   SlLevel l;
   load(c, 0x60000000); /* the page's translation is now an L1 DTLB hit */
   t0 = c->t;
   sl_prefetch(c, &pf, SL_PF_L1);
   CHECK(c->t - t0 == SL_TQ / cfg->dispatch_width, "dispatch advanced %llu tq",
         (unsigned long long)(c->t - t0));
   sl_alu(c, 40, NULL, NULL); /* 10 cycles of other work */
   done = sl_mem(c, &ld, &l);
   /* issued at t0, translated in 1 cycle, DRAM load-to-use 283 includes that cycle */
   CHECK(done == t0 + (ULong)cfg->dram_lat * SL_TQ, "load done %llu cycles after the prefetch",
         (unsigned long long)((done - t0) / SL_TQ));
   CHECK(l == SL_LVL_L1D, "served by %s", lv(l));
   CHECK(cnt(c, SL_C_LD_SPEC) == 3 && cnt(c, SL_C_L1D_CACHE) == 3, "LD_SPEC %llu L1D_CACHE %llu",
         cnt(c, SL_C_LD_SPEC), cnt(c, SL_C_L1D_CACHE));
   CHECK(cnt(c, SL_C_L1D_CACHE_REFILL) == 1, "L1D_CACHE_REFILL %llu",
         cnt(c, SL_C_L1D_CACHE_REFILL));
   CHECK(cnt(c, SL_T_PREFETCH_LINES) == 1 && cnt(c, SL_T_LATE_PREFETCH) == 1,
         "prefetched %llu late %llu", cnt(c, SL_T_PREFETCH_LINES), cnt(c, SL_T_LATE_PREFETCH));
   /* for L2: the load misses L1D and is served by L2 */
   pf.va = ld.va = 0x60000080;
   sl_prefetch(c, &pf, SL_PF_L2);
   sl_alu(c, 2000, NULL, NULL); /* 500 cycles: the fill is complete */
   sl_mem(c, &ld, &l);
   CHECK(l == SL_LVL_L2, "L2 prefetch then load: %s", lv(l));
   CHECK(cnt(c, SL_C_L1D_CACHE_REFILL) == 2, "L1D_CACHE_REFILL %llu",
         cnt(c, SL_C_L1D_CACHE_REFILL));
}

/* The stride prefetcher: three dependent loads of one PC 7 lines apart (each address ready when
 * the previous load completes, as in the stride benchmark) confirm the stride; the third, an
 * L1D miss while no other miss is in flight, fills L2 with the 12 lines stride_distance strides
 * ahead and L1D with the next one. Independent loads (misses overlapping) get no L1D fill. A
 * stride of 64 lines (4 KB, lat_mem_rd's) is not followed. */
static void test_stride_prefetcher(void)
{
   SlConfig cf;
   SlSink k = {sink, NULL};
   SlSystem *s;
   SlCore *c;
   Addr base = 0x80000000;
   SlMemOp m = {0x1000, 0, 8, False, SL_LS_GP, 0, 0};
   SlLevel l;
   int i;
   sl_config_default(&cf);
   cf.prefetch_distance = 0;
   cf.spe_interval = 1 << 20;
   cf.page_shift = 21; /* every line below on one page: one walk (the counts below) */
   sl_config_check(&cf);
   CHECK(cf.stride_distance == 12, "default stride distance %u", cf.stride_distance);
   s = sl_system_new(&cf, &k);
   c = sl_core(s, 0);
   for (i = 0; i < 3; i++) {
      m.va = base + (Addr)i * 7 * 64;
      m.addr_ready = sl_mem(c, &m, &l);
   }
   CHECK(cnt(c, SL_T_PREFETCH_LINES) == 13, "prefetched %llu", cnt(c, SL_T_PREFETCH_LINES));
   /* the 4th load finds the line the L1D prefetch brought (a first use, not a refill) */
   m.va = base + 3 * 7 * 64;
   m.addr_ready = sl_mem(c, &m, &l);
   CHECK(l == SL_LVL_L1D && cnt(c, SL_C_L1D_CACHE_REFILL) == 3, "4th: %s, refills %llu", lv(l),
         cnt(c, SL_C_L1D_CACHE_REFILL));
   /* the 5th misses L1D and finds its line in L2 */
   m.va = base + 4 * 7 * 64;
   sl_mem(c, &m, &l);
   CHECK(l == SL_LVL_L2, "5th load from %s", lv(l));
   /* L2D_CACHE/L2D_CACHE_REFILL count transactions from L1 only (the N1 TRM's event
    * descriptions), not the 14 lines the stride prefetcher brought into L2 on its own (16
    * prefetched lines in all): the lookups of the first walk's descriptor, of loads 1, 2, 3
    * and 5 and of the two L1D fills (after the misses of loads 3 and 5); the refills of the
    * descriptor, of loads 1-3, and of the L1D fill after load 3, whose line the prefetcher
    * requested at the same moment (still on its way: not in L2 yet). Load 5 and the second
    * L1D fill find lines that arrived a DRAM latency before: L2 hits. */
   CHECK(cnt(c, SL_C_L2D_CACHE) == 7 && cnt(c, SL_C_L2D_CACHE_REFILL) == 5,
         "L2D_CACHE %llu, L2D_CACHE_REFILL %llu", cnt(c, SL_C_L2D_CACHE),
         cnt(c, SL_C_L2D_CACHE_REFILL));
   /* independent loads: the third one's miss overlaps the second's, L2 only */
   s = sl_system_new(&cf, &k);
   c = sl_core(s, 0);
   for (i = 0; i < 3; i++) load(c, base + (Addr)i * 7 * 64);
   CHECK(cnt(c, SL_T_PREFETCH_LINES) == 12, "independent: prefetched %llu",
         cnt(c, SL_T_PREFETCH_LINES));
   s = sl_system_new(&cf, &k);
   c = sl_core(s, 0);
   for (i = 0; i < 6; i++) load(c, base + (Addr)i * 4096);
   CHECK(cnt(c, SL_T_PREFETCH_LINES) == 0, "4 KB stride prefetched %llu",
         cnt(c, SL_T_PREFETCH_LINES));
}

/* The stream prefetcher's table (MODEL.md "Prefetcher"): SL_NSTREAMS (16) streams, fully
 * associative, least recently used replaced. 16 regions 32 KB apart (one 2 MB page, so the
 * physical regions are 32 KB apart too, as a tiled transpose's rows are), walked round robin
 * line 0, then line 1, then line 2 of each: every stream is confirmed at its third line and
 * prefetches the 10 lines after it (prefetch_distance, within its 4 KB region): 16 x 10 = 160.
 * 17 regions round robin: each region's stream was replaced (the 16 others were used since)
 * before its next line, so no stream is ever confirmed: 0. The table's replacement prefers
 * unconfirmed streams (below). */
static void test_stream_table(void)
{
   SlConfig cf;
   SlSink k = {sink, NULL};
   SlSystem *s;
   SlCore *c;
   Addr base = 0x80000000;
   unsigned n, r, i;
   sl_config_default(&cf);
   cf.stride_distance = 0;
   cf.spe_interval = 1 << 20;
   cf.page_shift = 21;
   sl_config_check(&cf);
   CHECK(cf.prefetch_distance == 10, "default stream distance %u", cf.prefetch_distance);
   for (n = 16; n <= 17; n++) {
      s = sl_system_new(&cf, &k);
      c = sl_core(s, 0);
      for (i = 0; i < 3; i++)
         for (r = 0; r < n; r++) load(c, base + (Addr)r * 32768 + (Addr)i * 64);
      CHECK(cnt(c, SL_T_PREFETCH_LINES) == (n == 16 ? 160 : 0), "%u streams: prefetched %llu",
            n, cnt(c, SL_T_PREFETCH_LINES));
   }
   /* Confidence protects a confirmed stream: region A's lines 0, 1, 2 confirm it (10 lines
    * prefetched, 3..12); 16 single misses in 16 other regions (line 32 of each, L1D sets away
    * from A's lines) take the table's 15 other entries and then replace the least recently
    * used unconfirmed one, never A's; A's line 3 (a first use) finds A's stream, which
    * prefetches one line more (13): 11. Without the protection, A's stream, the least recently
    * used, would be the 16th single's victim and line 3 would start a new one: 10. */
   s = sl_system_new(&cf, &k);
   c = sl_core(s, 0);
   for (i = 0; i < 3; i++) load(c, base + (Addr)i * 64);
   for (r = 1; r <= 16; r++) load(c, base + (Addr)r * 4096 + 32 * 64);
   load(c, base + 3 * 64);
   CHECK(cnt(c, SL_T_PREFETCH_LINES) == 11, "protected stream: prefetched %llu",
         cnt(c, SL_T_PREFETCH_LINES));
}

/* DRAM bandwidth and queueing (MODEL.md "DRAM bandwidth and queueing"): one channel of 6400 MB/s
 * at 1 GHz moves 6.4 bytes a cycle: a line takes 10 cycles (2560 tq) and a 256-cycle bucket
 * holds 6.4 x 256 = 1638 bytes (rounded down), 25 lines (26 x 64 = 1664 > 1638). Lines read at
 * time 0: the 1st waits 0; the 2nd, 64 bytes before it: 2560 x 64 / (2 x (1638 - 64)) = 52.04
 * -> 52 tq; the 25th, 1536 before: 2560 x 1536 / (2 x 102) = 19275.3 -> 19275 tq (75 cycles);
 * the 26th does not fit: it waits for bucket 1, 256 cycles = 65536 tq, and is its first line
 * (no queue). A line read at 1000 cycles (bucket 3, empty) waits 0; one at 300 cycles (bucket 1,
 * which holds one line): 2560 x 64 / (2 x 1574) = 52 tq. Unlimited (0 channels): 0. Through
 * the model, a load served by DRAM takes the DRAM latency plus that wait. */
static void test_dram_bandwidth(void)
{
   SlConfig cf;
   SlSink k = {sink, NULL};
   SlSystem *s;
   ULong w[26];
   unsigned i;
   sl_config_default(&cf);
   CHECK(cf.dram_channels == 8 && cf.dram_channel_mbps == 25600, "default DRAM %u x %u MB/s",
         cf.dram_channels, cf.dram_channel_mbps);
   cf.cpu_hz = 1000000000ull;
   cf.dram_channels = 1;
   cf.dram_channel_mbps = 6400;
   cf.spe_interval = 1 << 20;
   sl_config_check(&cf);
   s = sl_system_new(&cf, &k);
   for (i = 0; i < 26; i++) w[i] = sl_dram_read(s, 0);
   CHECK(w[0] == 0 && w[1] == 52 && w[24] == 19275 && w[25] == 65536,
         "waits %llu %llu %llu %llu", (unsigned long long)w[0], (unsigned long long)w[1],
         (unsigned long long)w[24], (unsigned long long)w[25]);
   CHECK(sl_dram_read(s, 1000ull * SL_TQ) == 0, "empty bucket");
   CHECK(sl_dram_read(s, 300ull * SL_TQ) == 52, "bucket 1's second line");
   cf.dram_channels = 0;
   s = sl_system_new(&cf, &k);
   for (i = 0; i < 30; i++) w[0] = sl_dram_read(s, 0);
   CHECK(w[0] == 0, "unlimited: %llu", (unsigned long long)w[0]);
}

/* The anonymous-mapping check of transparent huge pages: everything is anonymous except the
 * 2 MB region at 0x41000000. */
static Bool anon_except(void *ctx, Addr a, ULong len)
{
   (void)ctx;
   return a + len <= 0x41000000 || a >= 0x41200000;
}

/* Page sizes per mapping (MODEL.md "Translation"): 4 KB base pages; under THP madvise a 2 MB
 * region is one huge page only when a madvise(MADV_HUGEPAGE) covered all of it before its
 * first use; MADV_NOHUGEPAGE wins under always; a region that is not wholly anonymous stays on
 * base pages; an unmapped region is decided again. Walks count pages: one per 4 KB page
 * touched, one per huge page. */
static void test_page_sizes(void)
{
   SlConfig c;
   SlSink k = {sink, NULL};
   SlSystem *s;
   SlCore *core;
   Addr r1 = 0x40200000, r2 = 0x40400000, r3 = 0x40600000;
   sl_config_default(&c);
   c.prefetch_distance = 0;
   c.stride_distance = 0;
   c.spe_interval = 1 << 20;
   CHECK(c.page_shift == 12 && c.thp == SL_THP_MADVISE, "default pages 2^%u, THP %s",
         c.page_shift, sl_thp_name(c.thp));
   CHECK(sl_config_check(&c) == NULL && c.huge_shift == 21, "huge shift %u", c.huge_shift);
   s = sl_system_new(&c, &k);
   core = sl_core(s, 0);
   /* no advice: two 4 KB pages of r1, two walks */
   load(core, r1);
   load(core, r1 + 4096);
   CHECK(cnt(core, SL_C_DTLB_WALK) == 2 && sl_page_shift_of(s, r1) == 12,
         "base pages: %llu walks, shift %u", cnt(core, SL_C_DTLB_WALK), sl_page_shift_of(s, r1));
   /* r2 and r3 advised (r3 only in part): r2's three loads walk once, r3's twice */
   sl_madvise(s, r2, 2u << 20, SL_MADV_HUGEPAGE);
   sl_madvise(s, r3, 1u << 20, SL_MADV_HUGEPAGE);
   load(core, r2);
   load(core, r2 + 4096);
   load(core, r2 + (2u << 20) - 64);
   CHECK(cnt(core, SL_C_DTLB_WALK) == 3 && sl_page_shift_of(s, r2) == 21,
         "huge page: %llu walks, shift %u", cnt(core, SL_C_DTLB_WALK), sl_page_shift_of(s, r2));
   load(core, r3);
   load(core, r3 + 4096);
   CHECK(cnt(core, SL_C_DTLB_WALK) == 5 && sl_page_shift_of(s, r3) == 12,
         "half-advised region: %llu walks", cnt(core, SL_C_DTLB_WALK));
   /* a huge page's frame is aligned to 2 MB: the offset in it is the low 21 bits */
   CHECK((sl_translate_pa(s, r2 + 0x12345) & 0x1fffff) == 0x12345, "huge PA %#llx",
         (unsigned long long)sl_translate_pa(s, r2 + 0x12345));
   /* r1 was used before its advice: it keeps its base pages until it is mapped anew */
   sl_madvise(s, r1, 2u << 20, SL_MADV_HUGEPAGE);
   CHECK(sl_page_shift_of(s, r1) == 12, "r1 after late advice: shift %u",
         sl_page_shift_of(s, r1));
   sl_unmap(s, r1, 2u << 20);
   sl_madvise(s, r1, 2u << 20, SL_MADV_HUGEPAGE);
   CHECK(sl_page_shift_of(s, r1) == 21, "r1 mapped anew and advised: shift %u",
         sl_page_shift_of(s, r1));
   /* unmapping r2 drops its huge page from the TLBs and its advice: base pages, a walk */
   sl_unmap(s, r2, 2u << 20);
   load(core, r2);
   CHECK(cnt(core, SL_C_DTLB_WALK) == 6 && sl_page_shift_of(s, r2) == 12,
         "r2 unmapped: %llu walks, shift %u", cnt(core, SL_C_DTLB_WALK),
         sl_page_shift_of(s, r2));

   /* always: every anonymous region, but not one advised MADV_NOHUGEPAGE in part, nor one
    * that is not wholly anonymous */
   c.thp = SL_THP_ALWAYS;
   s = sl_system_new(&c, &k);
   s->anon_fn = anon_except;
   sl_madvise(s, r3 + 4096, 4096, SL_MADV_NOHUGEPAGE);
   CHECK(sl_page_shift_of(s, r1) == 21 && sl_page_shift_of(s, r3) == 12 &&
         sl_page_shift_of(s, 0x41000000) == 12 && sl_page_shift_of(s, 0x41200000) == 21,
         "always: shifts %u %u %u %u", sl_page_shift_of(s, r1), sl_page_shift_of(s, r3),
         sl_page_shift_of(s, 0x41000000), sl_page_shift_of(s, 0x41200000));
   /* never: advice or not, base pages */
   c.thp = SL_THP_NEVER;
   s = sl_system_new(&c, &k);
   sl_madvise(s, r2, 2u << 20, SL_MADV_HUGEPAGE);
   CHECK(sl_page_shift_of(s, r2) == 12, "never: shift %u", sl_page_shift_of(s, r2));
   /* 64 KB base pages: huge pages are 512 MB (2^16 * 2^13); 2 MB base pages have none */
   c.page_shift = 16;
   CHECK(sl_config_check(&c) == NULL && c.huge_shift == 29, "64 KB: huge shift %u",
         c.huge_shift);
   c.page_shift = 21;
   CHECK(sl_config_check(&c) == NULL && c.huge_shift == 0, "2 MB: huge shift %u",
         c.huge_shift);
   {
      UInt t = 9;
      CHECK(sl_thp_parse("always", &t) && t == SL_THP_ALWAYS && !sl_thp_parse("sometimes", &t),
            "THP names");
   }
}

/* An access that crosses a 64-byte line (MODEL.md "Timing"): two L1D look-ups (L1D_CACHE +2,
 * MEM_ACCESS +1), a fill per missing line, the ALIGNMENT event, and on two L1D hits the L1D
 * latency plus the 1-cycle split penalty: 4 + 1 = 5 cycles. */
static void test_line_crossing(void)
{
   SlConfig cf;
   SlSink k = {sink, NULL};
   SlSystem *s;
   SlCore *c;
   SlMemOp m = {0x1000, 0x40000000 + 60, 8, False, SL_LS_GP, 0, 0};
   SlLevel l;
   ULong t0, done, out[SL_NCOUNTERS];
   sl_config_default(&cf);
   cf.prefetch_distance = 0;
   cf.stride_distance = 0;
   cf.spe_interval = 1 << 20;
   sl_config_check(&cf);
   CHECK(cf.split_penalty == 1, "split penalty %u", cf.split_penalty);
   s = sl_system_new(&cf, &k);
   c = sl_core(s, 0);
   sl_mem(c, &m, &l); /* cold: both lines miss */
   sl_core_counters(c, out);
   CHECK(out[SL_C_L1D_CACHE_REFILL] == 2 && out[SL_C_L1D_CACHE] == 2 && out[SL_C_MEM_ACCESS] == 1,
         "cold split: refills %llu, L1D_CACHE %llu, MEM_ACCESS %llu",
         (unsigned long long)out[SL_C_L1D_CACHE_REFILL], (unsigned long long)out[SL_C_L1D_CACHE],
         (unsigned long long)out[SL_C_MEM_ACCESS]);
   t0 = c->t + 10000 * SL_TQ; /* long after both fills */
   sl_core_sync_clock(c, t0);
   done = sl_mem(c, &m, &l);
   CHECK(l == SL_LVL_L1D && done - t0 == 5 * SL_TQ, "warm split took %llu cycles from %s",
         (unsigned long long)((done - t0) / SL_TQ), lv(l));
   /* a sampled split load carries the ALIGNMENT event (bit 11), an aligned one does not */
   cf.spe_interval = 256;
   s = sl_system_new(&cf, &k);
   {
      SlCore *c2 = sl_core(s, 0);
      unsigned before = n_samples;
      int j;
      SlMemOp m2 = m;
      for (j = 0; j < 600 && n_samples == before; j++) sl_mem(c2, &m2, &l);
      CHECK(n_samples > before && (last.events & SL_EV_ALIGNMENT), "split sample events %#x",
            last.events);
      m2.va = 0x40000000 + 48;
      before = n_samples;
      for (j = 0; j < 600 && n_samples == before; j++) sl_mem(c2, &m2, &l);
      CHECK(n_samples > before && !(last.events & SL_EV_ALIGNMENT), "aligned sample events %#x",
            last.events);
   }
   /* the same bytes aligned within a line: 4 cycles */
   m.va = 0x40000000 + 48;
   t0 = c->t + 10000 * SL_TQ;
   sl_core_sync_clock(c, t0);
   done = sl_mem(c, &m, &l);
   CHECK(done - t0 == 4 * SL_TQ, "aligned load took %llu cycles",
         (unsigned long long)((done - t0) / SL_TQ));
}

/* Store-to-load forwarding (MODEL.md "Timing"), on a line held Modified in L1D: a store at t0
 * whose data is ready at t0 + 50 cycles retires at t0 + 2 (1 + 1) and is written to L1D at
 * t0 + 51 (its data + 1). A load of the same 8 bytes right after it gets them 4 cycles after
 * the data: t0 + 54. A load wider than the store (8 bytes over a 4-byte store) waits for the
 * write, its L1D access again and the 11-cycle replay: t0 + 51 + 4 + 11 = t0 + 66. A load of
 * other bytes: the L1D latency from its dispatch, a quarter cycle after the store's. */
static void test_store_forwarding(void)
{
   SlConfig cf;
   SlSink k = {sink, NULL};
   SlSystem *s;
   SlCore *c;
   Addr x = 0x40000100;
   SlMemOp st = {0x1000, x, 8, True, SL_LS_GP, 0, 0};
   SlMemOp ld = {0x1004, x, 8, False, SL_LS_GP, 0, 0};
   SlLevel l;
   ULong t0, done;
   sl_config_default(&cf);
   cf.prefetch_distance = 0;
   cf.stride_distance = 0;
   cf.spe_interval = 1 << 20;
   sl_config_check(&cf);
   CHECK(cf.fwd_lat == 4 && cf.fwd_fail_penalty == 11, "forwarding %u, replay %u", cf.fwd_lat,
         cf.fwd_fail_penalty);
   s = sl_system_new(&cf, &k);
   c = sl_core(s, 0);
   store(c, x); /* the line, Modified */
   /* forwarded */
   t0 = c->t + 10000 * SL_TQ;
   sl_core_sync_clock(c, t0);
   st.data_ready = t0 + 50 * SL_TQ;
   sl_mem(c, &st, &l);
   done = sl_mem(c, &ld, &l);
   CHECK(done - t0 == 54 * SL_TQ, "forwarded load at t0 + %llu cycles, want 54",
         (unsigned long long)((done - t0) / SL_TQ));
   /* a load wider than the store: the replay */
   t0 = c->t + 10000 * SL_TQ;
   sl_core_sync_clock(c, t0);
   st.size = 4;
   st.data_ready = t0 + 50 * SL_TQ;
   sl_mem(c, &st, &l);
   done = sl_mem(c, &ld, &l);
   CHECK(done - t0 == 66 * SL_TQ, "load wider than the store at t0 + %llu cycles, want 66",
         (unsigned long long)((done - t0) / SL_TQ));
   /* other bytes of the line: not held back */
   t0 = c->t + 10000 * SL_TQ;
   sl_core_sync_clock(c, t0);
   st.data_ready = t0 + 50 * SL_TQ;
   sl_mem(c, &st, &l);
   ld.va = x + 8;
   done = sl_mem(c, &ld, &l);
   CHECK(done - t0 == 4 * SL_TQ + SL_TQ / cf.dispatch_width, "other bytes at t0 + %llu tq",
         (unsigned long long)(done - t0));
   /* once the store is written, a load reads L1D as usual */
   ld.va = x;
   t0 = c->t + 10000 * SL_TQ;
   sl_core_sync_clock(c, t0);
   done = sl_mem(c, &ld, &l);
   CHECK(done - t0 == 4 * SL_TQ, "after the write: %llu cycles",
         (unsigned long long)((done - t0) / SL_TQ));
}

/* The counterfactual knobs (emulator/README.md): loads of a PC range complete at the L1D
 * latency (a cold load: 4 cycles instead of DRAM's 283 + the walk); an address range has huge
 * pages under THP never, in a mapping the OS would not give them. */
static void test_knobs(void)
{
   SlConfig cf;
   SlSink k = {sink, NULL};
   SlSystem *s;
   SlCore *c;
   SlMemOp m = {0x1000, 0x50000000, 8, False, SL_LS_GP, 0, 0};
   SlLevel l;
   ULong t0, done;
   sl_config_default(&cf);
   cf.prefetch_distance = 0;
   cf.stride_distance = 0;
   cf.spe_interval = 1 << 20;
   cf.n_l1_pcs = 1;
   cf.l1_pc_lo[0] = 0x1000;
   cf.l1_pc_hi[0] = 0x1004;
   cf.thp = SL_THP_NEVER;
   cf.n_huge_ranges = 1;
   cf.huge_lo[0] = 0x50200000;
   cf.huge_hi[0] = 0x50400000;
   sl_config_check(&cf);
   s = sl_system_new(&cf, &k);
   s->anon_fn = anon_except; /* (0x50200000 is anonymous anyway) */
   c = sl_core(s, 0);
   t0 = c->t;
   done = sl_mem(c, &m, &l);
   /* the walk's translation is in (L1 TLB 1 + L2 TLB 5 + walk 12 + the descriptor from DRAM
    * 283 = 301 cycles), the data's latency is L1D's: 301 + (4 - 1) = 304 */
   CHECK(l == SL_LVL_L1D && done - t0 == 304 * SL_TQ, "knob load from %s in %llu cycles", lv(l),
         (unsigned long long)((done - t0) / SL_TQ));
   m.pc = 0x1004;
   m.va = 0x50001000;
   t0 = c->t;
   done = sl_mem(c, &m, &l);
   CHECK(l == SL_LVL_DRAM && done - t0 > 283 * SL_TQ, "other load from %s in %llu cycles", lv(l),
         (unsigned long long)((done - t0) / SL_TQ));
   CHECK(sl_page_shift_of(s, 0x50200000) == 21 && sl_page_shift_of(s, 0x50000000) == 12,
         "huge range: shifts %u %u", sl_page_shift_of(s, 0x50200000),
         sl_page_shift_of(s, 0x50000000));
}

/* The knobs of advise --verify (emulator/README.md): with --no-transfer-range over X, a line
 * core a wrote is not served to core b by a (b reads its own copy, from DRAM the first time)
 * and b's store invalidates nothing, so a's next load of X is an L1D hit; --forward-pcs: a load
 * of the bytes a store with data ready 50 cycles later wrote completes at the L1D latency (4
 * cycles, a quarter cycle after the store's dispatch) instead of 4 after the data (54);
 * --no-split-pcs: a warm access crossing a line takes the L1D latency, 4 cycles, not 4 + the
 * 1-cycle split penalty. */
static void test_verify_knobs(void)
{
   SlConfig cf;
   SlSink k = {sink, NULL};
   SlSystem *s;
   SlCore *a, *b;
   Addr X = 0x20000040;
   SlMemOp st = {0x1000, 0x40000100, 8, True, SL_LS_GP, 0, 0};
   SlMemOp ld = {0x1004, 0x40000100, 8, False, SL_LS_GP, 0, 0};
   SlMemOp sp = {0x1008, 0x40000000 + 60, 8, False, SL_LS_GP, 0, 0};
   SlLevel l;
   ULong t0, done;
   sl_config_default(&cf);
   cf.prefetch_distance = 0;
   cf.stride_distance = 0;
   cf.spe_interval = 1 << 20;
   cf.n_no_transfer = 1;
   cf.no_transfer_lo[0] = 0x20000000;
   cf.no_transfer_hi[0] = 0x20001000;
   cf.n_forward_pcs = 1;
   cf.forward_pc_lo[0] = 0x1004;
   cf.forward_pc_hi[0] = 0x1005;
   cf.n_no_split_pcs = 1;
   cf.no_split_pc_lo[0] = 0x1008;
   cf.no_split_pc_hi[0] = 0x100c;
   sl_config_check(&cf);
   s = sl_system_new(&cf, &k);
   a = sl_core(s, 0);
   b = sl_core(s, 1);
   l = store(a, X); CHECK(l == SL_LVL_DRAM, "no-transfer: a store X: %s", lv(l));
   l = load(b, X); CHECK(l == SL_LVL_DRAM, "no-transfer: b load X: %s, want its own copy", lv(l));
   l = store(b, X); CHECK(l == SL_LVL_L1D, "no-transfer: b store X: %s", lv(l));
   l = load(a, X); CHECK(l == SL_LVL_L1D, "no-transfer: a load X after b's store: %s", lv(l));
   CHECK(cnt(a, SL_T_COHERENCE_INVAL) + cnt(b, SL_T_COHERENCE_INVAL) == 0,
         "no-transfer: %llu invalidations",
         cnt(a, SL_T_COHERENCE_INVAL) + cnt(b, SL_T_COHERENCE_INVAL));
   /* forwarding without the wait */
   store(a, st.va); /* the line, Modified */
   t0 = a->t + 10000 * SL_TQ;
   sl_core_sync_clock(a, t0);
   st.data_ready = t0 + 50 * SL_TQ;
   sl_mem(a, &st, &l);
   done = sl_mem(a, &ld, &l);
   CHECK(done - t0 == 4 * SL_TQ + SL_TQ / cf.dispatch_width,
         "forward-pcs: load at t0 + %llu tq, want 4 cycles and a quarter",
         (unsigned long long)(done - t0));
   /* a split access made as one */
   sl_mem(a, &sp, &l); /* cold */
   t0 = a->t + 10000 * SL_TQ;
   sl_core_sync_clock(a, t0);
   done = sl_mem(a, &sp, &l);
   CHECK(l == SL_LVL_L1D && done - t0 == 4 * SL_TQ, "no-split-pcs: warm split took %llu cycles",
         (unsigned long long)((done - t0) / SL_TQ));
}

int main(void)
{
   test_cache_sequence();
   test_coherence();
   test_ownership_round_trip();
   test_tlb();
   test_page_sizes();
   test_line_crossing();
   test_store_forwarding();
   test_knobs();
   test_verify_knobs();
   test_sampling_interval();
   test_dependent_chain_timing();
   test_fork_rebase_keeps_the_window();
   test_branches();
   test_collisions();
   test_software_prefetch();
   test_stride_prefetcher();
   test_stream_table();
   test_dram_bandwidth();
   if (failures) {
      printf("model_test: %d failure(s)\n", failures);
      return 1;
   }
   printf("model_test: all passed\n");
   return 0;
}
