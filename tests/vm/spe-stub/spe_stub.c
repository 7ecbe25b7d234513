// SPDX-License-Identifier: GPL-2.0
/*
 * spe_stub: a TEST-ONLY stand-in for an Arm SPE device, for spelunk's arm64 VM test
 * (tests/vm, scripts/arm64-vm.sh). It is never built for, shipped to, or installed on
 * users' machines: it only ever runs inside the throw-away QEMU VM, which has no SPE.
 *
 * It registers a PMU named "arm_spe_0" with the sysfs files (format/, caps/, cpumask) and
 * event_init checks of Linux 6.1's SPE driver, so that a recorder written for the real
 * device exercises the kernel's real AUX-area ABI (mmap of the AUX area, aux_head/aux_tail,
 * PERF_RECORD_AUX flags, PERF_RECORD_ITRACE_START, disable-on-TRUNCATED). The "hardware" is
 * a pinned hrtimer: while the event is started on a CPU, every period_us microseconds it
 * writes `batch` fixed 64-byte SPE load records into the AUX buffer. Written from the
 * documented perf PMU / AUX interfaces (include/linux/perf_event.h), not from the real
 * driver's code.
 *
 * Counters and knobs: /sys/module/spe_stub/parameters/ (see tests/vm/README.md).
 */
#include <linux/atomic.h>
#include <linux/capability.h>
#include <linux/cpumask.h>
#include <linux/device.h>
#include <linux/hrtimer.h>
#include <linux/ktime.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/perf_event.h>
#include <linux/slab.h>
#include <linux/vmalloc.h>
#include <asm/arch_timer.h>
#include <asm/unaligned.h>

#define STUB_REC_SIZE 64
#define STUB_MIN_PERIOD 256	/* smallest sample_period accepted (PMSIRR.INTERVAL granule) */

/* ---- module parameters: knobs (rw) and counters (ro) ---- */

static unsigned int period_us = 200;
module_param(period_us, uint, 0644);
MODULE_PARM_DESC(period_us, "injection timer period in microseconds (min 10)");

static unsigned int batch = 8;
module_param(batch, uint, 0644);
MODULE_PARM_DESC(batch, "records written per timer tick (max 4096)");

static unsigned int collide_every;
module_param(collide_every, uint, 0644);
MODULE_PARM_DESC(collide_every, "set PERF_AUX_FLAG_COLLISION on every Nth perf_aux_output_end (0: never)");

/* Global record sequence number: the next seq to write == the number of records written. */
static atomic64_t stub_seq = ATOMIC64_INIT(0);
static atomic64_t stub_dropped = ATOMIC64_INIT(0);
static atomic64_t stub_collisions = ATOMIC64_INIT(0);
static atomic64_t stub_truncations = ATOMIC64_INIT(0);
/* Every perf_aux_output_end the stub makes; drives collide_every. */
static atomic64_t stub_ends = ATOMIC64_INIT(0);

static int stub_counter_get(char *buf, const struct kernel_param *kp)
{
	return sysfs_emit(buf, "%lld\n", (long long)atomic64_read(kp->arg));
}

static const struct kernel_param_ops stub_counter_ops = {
	.get = stub_counter_get,
};

module_param_cb(injected, &stub_counter_ops, &stub_seq, 0444);
MODULE_PARM_DESC(injected, "records written into AUX buffers (their seq are 0..injected-1)");
module_param_cb(dropped, &stub_counter_ops, &stub_dropped, 0444);
MODULE_PARM_DESC(dropped, "records not written because the AUX buffer had no room");
module_param_cb(collisions, &stub_counter_ops, &stub_collisions, 0444);
MODULE_PARM_DESC(collisions, "perf_aux_output_end calls with PERF_AUX_FLAG_COLLISION");
module_param_cb(truncations, &stub_counter_ops, &stub_truncations, 0444);
MODULE_PARM_DESC(truncations, "perf_aux_output_end calls with PERF_AUX_FLAG_TRUNCATED");

/* ---- sysfs: format/, caps/, cpumask (names and values of Linux 6.1's arm_spe_pmu) ---- */

PMU_FORMAT_ATTR(ts_enable, "config:0");
PMU_FORMAT_ATTR(pa_enable, "config:1");
PMU_FORMAT_ATTR(pct_enable, "config:2");
PMU_FORMAT_ATTR(jitter, "config:16");
PMU_FORMAT_ATTR(branch_filter, "config:32");
PMU_FORMAT_ATTR(load_filter, "config:33");
PMU_FORMAT_ATTR(store_filter, "config:34");
PMU_FORMAT_ATTR(event_filter, "config1:0-63");
PMU_FORMAT_ATTR(min_latency, "config2:0-11");

#define STUB_PA_ENABLE BIT_ULL(1)
#define STUB_PCT_ENABLE BIT_ULL(2)

static struct attribute *stub_format_attrs[] = {
	&format_attr_ts_enable.attr,
	&format_attr_pa_enable.attr,
	&format_attr_pct_enable.attr,
	&format_attr_jitter.attr,
	&format_attr_branch_filter.attr,
	&format_attr_load_filter.attr,
	&format_attr_store_filter.attr,
	&format_attr_event_filter.attr,
	&format_attr_min_latency.attr,
	NULL,
};

static const struct attribute_group stub_format_group = {
	.name = "format",
	.attrs = stub_format_attrs,
};

/* What a Neoverse N1 reports: micro-op sampling, no random-error support, 12-bit counters. */
#define STUB_CAP(_name, _val)						\
static ssize_t _name##_show(struct device *dev,				\
			    struct device_attribute *attr, char *buf)	\
{									\
	return sysfs_emit(buf, "%u\n", (unsigned int)(_val));		\
}									\
static DEVICE_ATTR_RO(_name)

STUB_CAP(arch_inst, 0);
STUB_CAP(ernd, 0);
STUB_CAP(count_size, 12);
STUB_CAP(min_interval, 1024);

static struct attribute *stub_caps_attrs[] = {
	&dev_attr_arch_inst.attr,
	&dev_attr_ernd.attr,
	&dev_attr_count_size.attr,
	&dev_attr_min_interval.attr,
	NULL,
};

static const struct attribute_group stub_caps_group = {
	.name = "caps",
	.attrs = stub_caps_attrs,
};

static ssize_t cpumask_show(struct device *dev, struct device_attribute *attr, char *buf)
{
	return cpumap_print_to_pagebuf(true, buf, cpu_possible_mask);
}
static DEVICE_ATTR_RO(cpumask);

static struct attribute *stub_top_attrs[] = {
	&dev_attr_cpumask.attr,
	NULL,
};

static const struct attribute_group stub_top_group = {
	.attrs = stub_top_attrs,
};

static const struct attribute_group *stub_attr_groups[] = {
	&stub_top_group,
	&stub_format_group,
	&stub_caps_group,
	NULL,
};

/* ---- the AUX buffer ---- */

struct stub_buf {
	void *base;		/* the AUX pages, vmapped contiguously */
	unsigned long size;	/* bytes, a power of two */
	bool overwrite;		/* read-only user mapping: snapshot mode */
};

static void *stub_setup_aux(struct perf_event *event, void **pages, int nr_pages,
			    bool overwrite)
{
	int node = event->cpu == -1 ? NUMA_NO_NODE : cpu_to_node(event->cpu);
	struct page **pglist;
	struct stub_buf *buf;
	int i;

	/* Like the real device: at least two pages, an even count in snapshot mode. */
	if (nr_pages < 2 || (overwrite && (nr_pages & 1)))
		return NULL;
	buf = kzalloc_node(sizeof(*buf), GFP_KERNEL, node);
	if (!buf)
		return NULL;
	pglist = kcalloc(nr_pages, sizeof(*pglist), GFP_KERNEL);
	if (!pglist)
		goto fail;
	for (i = 0; i < nr_pages; i++)
		pglist[i] = virt_to_page(pages[i]);
	buf->base = vmap(pglist, nr_pages, VM_MAP, PAGE_KERNEL);
	kfree(pglist);
	if (!buf->base)
		goto fail;
	buf->size = (unsigned long)nr_pages << PAGE_SHIFT;
	buf->overwrite = overwrite;
	return buf;
fail:
	kfree(buf);
	return NULL;
}

static void stub_free_aux(void *aux)
{
	struct stub_buf *buf = aux;

	vunmap(buf->base);
	kfree(buf);
}

/* ---- one SPE record ---- */

/*
 * A Neoverse N1 64-byte SPE load record (the N1's fixed record layout, as Linux perf 6.1
 * decodes it). Packet encodings: Arm Architecture Reference Manual, SPE packet encodings.
 *   0  b0 <8>      address, index 0 (PC); top byte 0x80: EL0, NS=1
 *   9  00 x5       context slot (PAD)
 *   14 00 x5       context slot (PAD)
 *   19 49 00       operation type: load/store class, LD, general-purpose register
 *   21 52 02 00    events (2 bytes): RETIRED
 *   24 99 <2>      counter, index 1: issue latency
 *   27 98 <2>      counter, index 0: total latency
 *   30 b2 <8>      address, index 2: data virtual address
 *   39 9a 01 00    counter, index 2: translation latency
 *   42 00 x9       physical-address slot (PAD)
 *   51 00 x4       PAD
 *   55 71 <8>      timestamp
 * The record's seq is recoverable from its VA: (VA - 0xffff00000000) / 64.
 */
static void stub_fill_record(u8 *r, u64 seq)
{
	u64 pc = 0x0000aaaa00400000ULL + (seq % 16) * 4;

	memset(r, 0, STUB_REC_SIZE);
	r[0] = 0xb0;
	put_unaligned_le64(pc | (0x80ULL << 56), r + 1);
	r[19] = 0x49;
	r[21] = 0x52;
	put_unaligned_le16(0x0002, r + 22);
	r[24] = 0x99;
	put_unaligned_le16(5, r + 25);
	r[27] = 0x98;
	put_unaligned_le16(10 + (u16)(seq % 200), r + 28);
	r[30] = 0xb2;
	put_unaligned_le64(0x0000ffff00000000ULL + seq * STUB_REC_SIZE, r + 31);
	r[39] = 0x9a;
	put_unaligned_le16(1, r + 40);
	r[55] = 0x71;
	put_unaligned_le64(__arch_counter_get_cntvct(), r + 56);
}

/* ---- per-event state ---- */

struct stub_event {
	struct perf_event *event;
	struct hrtimer timer;		/* pinned to the CPU the event was started on */
	struct perf_output_handle handle; /* open (handle.event != NULL) while started */
};

static ktime_t stub_period(void)
{
	return ns_to_ktime((u64)max(READ_ONCE(period_us), 10U) * NSEC_PER_USEC);
}

/*
 * Writes one batch at the handle's position. Returns the bytes written (records and pad);
 * sets PERF_AUX_FLAG_TRUNCATED on the handle when a record did not fit.
 */
static unsigned long stub_write_batch(struct perf_output_handle *h)
{
	struct stub_buf *buf = perf_get_aux(h);
	unsigned int i, n = min(READ_ONCE(batch), 4096U);
	/* Snapshot mode writes regardless of the reader; otherwise the handle says how much. */
	unsigned long space = buf->overwrite ? ULONG_MAX : h->size;
	unsigned long done = 0;

	for (i = 0; i < n; i++) {
		unsigned long off = (h->head + done) & (buf->size - 1);
		unsigned long pad = buf->size - off < STUB_REC_SIZE ? buf->size - off : 0;

		if (done + pad + STUB_REC_SIZE > space) {
			atomic64_inc(&stub_dropped);
			perf_aux_output_flag(h, PERF_AUX_FLAG_TRUNCATED);
			continue;
		}
		if (pad) {	/* never wrap a record: pad to the end of the buffer */
			memset(buf->base + off, 0, pad);
			done += pad;
			off = 0;
		}
		stub_fill_record(buf->base + off, atomic64_inc_return(&stub_seq) - 1);
		done += STUB_REC_SIZE;
	}
	return done;
}

static void stub_output_end(struct perf_output_handle *h, unsigned long size)
{
	unsigned int every = READ_ONCE(collide_every);
	u64 n = atomic64_inc_return(&stub_ends);

	if (every && n % every == 0) {
		perf_aux_output_flag(h, PERF_AUX_FLAG_COLLISION);
		atomic64_inc(&stub_collisions);
	}
	if (h->aux_flags & PERF_AUX_FLAG_TRUNCATED)
		atomic64_inc(&stub_truncations);
	if (perf_get_aux(h) && ((struct stub_buf *)perf_get_aux(h))->overwrite)
		h->head += size;	/* snapshot mode: the driver moves aux_head */
	/* The records must be visible before the kernel publishes aux_head. */
	smp_wmb();
	perf_aux_output_end(h, size);
}

/* The "hardware": runs in hard-irq context on the event's CPU. */
static enum hrtimer_restart stub_tick(struct hrtimer *timer)
{
	struct stub_event *se = container_of(timer, struct stub_event, timer);
	struct perf_event *event = se->event;
	unsigned long done;
	bool truncated;

	if ((event->hw.state & PERF_HES_STOPPED) || !se->handle.event)
		return HRTIMER_NORESTART;
	done = stub_write_batch(&se->handle);
	truncated = se->handle.aux_flags & PERF_AUX_FLAG_TRUNCATED;
	stub_output_end(&se->handle, done);
	/*
	 * After TRUNCATED the core disables the event (from irq_work); stop writing until the
	 * user re-enables it, which calls ->add/->start again.
	 */
	if (truncated || !perf_aux_output_begin(&se->handle, event)) {
		event->hw.state |= PERF_HES_STOPPED;
		return HRTIMER_NORESTART;
	}
	hrtimer_forward_now(timer, stub_period());
	return HRTIMER_RESTART;
}

/* ---- struct pmu callbacks (all called on the event's CPU with interrupts off) ---- */

static struct pmu stub_pmu;

static void stub_destroy(struct perf_event *event)
{
	struct stub_event *se = event->pmu_private;

	hrtimer_cancel(&se->timer);
	kfree(se);
	event->pmu_private = NULL;
}

static int stub_event_init(struct perf_event *event)
{
	struct perf_event_attr *attr = &event->attr;
	struct stub_event *se;

	if (attr->type != stub_pmu.type)
		return -ENOENT;
	if (event->cpu >= 0 && !cpu_possible(event->cpu))
		return -ENOENT;
	if (attr->exclude_idle)
		return -EOPNOTSUPP;
	/* A period, never a frequency: the buffer holds the samples, nothing counts them. */
	if (attr->freq)
		return -EINVAL;
	if (attr->sample_period < STUB_MIN_PERIOD)
		return -EINVAL;
	if ((attr->config & (STUB_PA_ENABLE | STUB_PCT_ENABLE)) && !perfmon_capable())
		return -EACCES;

	se = kzalloc(sizeof(*se), GFP_KERNEL);
	if (!se)
		return -ENOMEM;
	se->event = event;
	hrtimer_init(&se->timer, CLOCK_MONOTONIC, HRTIMER_MODE_REL_PINNED_HARD);
	se->timer.function = stub_tick;
	event->pmu_private = se;
	event->destroy = stub_destroy;
	return 0;
}

static void stub_start(struct perf_event *event, int flags)
{
	struct stub_event *se = event->pmu_private;

	event->hw.state = 0;
	if (!perf_aux_output_begin(&se->handle, event)) {
		/* No AUX area (or no room): stay stopped, as the real device does. */
		event->hw.state |= PERF_HES_STOPPED;
		return;
	}
	hrtimer_start(&se->timer, stub_period(), HRTIMER_MODE_REL_PINNED_HARD);
}

static void stub_stop(struct perf_event *event, int flags)
{
	struct stub_event *se = event->pmu_private;

	/* Same CPU, interrupts off: the pinned callback cannot be running now. */
	hrtimer_cancel(&se->timer);
	if (se->handle.event)
		stub_output_end(&se->handle, 0);
	event->hw.state |= PERF_HES_STOPPED | PERF_HES_UPTODATE;
}

static int stub_add(struct perf_event *event, int flags)
{
	event->hw.state = PERF_HES_STOPPED | PERF_HES_UPTODATE;
	if (flags & PERF_EF_START)
		stub_start(event, PERF_EF_RELOAD);
	return 0;
}

static void stub_del(struct perf_event *event, int flags)
{
	stub_stop(event, PERF_EF_UPDATE);
}

static void stub_read(struct perf_event *event)
{
	/* No counter: everything goes to the AUX buffer. */
}

static struct pmu stub_pmu = {
	.module		= THIS_MODULE,
	.capabilities	= PERF_PMU_CAP_EXCLUSIVE | PERF_PMU_CAP_ITRACE,
	.task_ctx_nr	= perf_sw_context,
	.attr_groups	= stub_attr_groups,
	.event_init	= stub_event_init,
	.add		= stub_add,
	.del		= stub_del,
	.start		= stub_start,
	.stop		= stub_stop,
	.read		= stub_read,
	.setup_aux	= stub_setup_aux,
	.free_aux	= stub_free_aux,
};

static int __init stub_init(void)
{
	int ret = perf_pmu_register(&stub_pmu, "arm_spe_0", -1);

	if (ret)
		return ret;
	pr_info("spe_stub: test-only arm_spe_0 registered (type %d, period %u us, batch %u)\n",
		stub_pmu.type, period_us, batch);
	return 0;
}

static void __exit stub_exit(void)
{
	perf_pmu_unregister(&stub_pmu);
}

module_init(stub_init);
module_exit(stub_exit);
MODULE_DESCRIPTION("TEST-ONLY fake Arm SPE PMU (arm_spe_0) for spelunk's VM tests");
MODULE_LICENSE("GPL");
