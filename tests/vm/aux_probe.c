/* aux_probe: checks the test-only spe_stub.ko (tests/vm/spe-stub, PMU arm_spe_0) through the
 * kernel's real AUX-area ABI, without spelunk: perf_event_open, the data ring plus AUX area
 * mmaps, PERF_RECORD_AUX / ITRACE_START records, aux_tail, re-enabling after TRUNCATED.
 * Every record the module says it wrote (its `injected` counter) must be read back exactly
 * once, in sequence; the TRUNCATED/COLLISION flags seen must match its counters.
 * Static aarch64 program, run as root inside the VM by tests/vm/test.sh. Prints "ok ..." or
 * "FAIL ..." per check and "aux_probe ..." information lines; exits 1 on any failure. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PMU_DIR "/sys/bus/event_source/devices/arm_spe_0/"
#define PARAMS "/sys/module/spe_stub/parameters/"
#define REC 64
#define VA_BASE 0x0000ffff00000000ULL
#define PC_BASE 0x0000aaaa00400000ULL

static int failures;

#define OK(...) (printf("ok " __VA_ARGS__), putchar('\n'))
#define BAD(...) (printf("FAIL " __VA_ARGS__), putchar('\n'), failures++)
#define CHECK(cond, ...) ((cond) ? OK(__VA_ARGS__) : BAD(__VA_ARGS__))

static long long read_ll(const char *path)
{
	char buf[64] = {0};
	int fd = open(path, O_RDONLY);
	long long v = -1;

	if (fd >= 0) {
		if (read(fd, buf, sizeof(buf) - 1) > 0)
			v = strtoll(buf, NULL, 0);
		close(fd);
	}
	return v;
}

static int write_str(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY);
	int rc = -1;

	if (fd >= 0) {
		rc = write(fd, s, strlen(s)) == (ssize_t)strlen(s) ? 0 : -1;
		close(fd);
	}
	return rc;
}

static void set_param(const char *name, long long v)
{
	char path[128], val[32];

	snprintf(path, sizeof(path), PARAMS "%s", name);
	snprintf(val, sizeof(val), "%lld", v);
	if (write_str(path, val))
		BAD("cannot write %s", path);
}

struct counters {
	long long injected, dropped, collisions, truncations;
};

static struct counters counters(void)
{
	struct counters c = {
		read_ll(PARAMS "injected"), read_ll(PARAMS "dropped"),
		read_ll(PARAMS "collisions"), read_ll(PARAMS "truncations"),
	};
	return c;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

static void spin_ms(int ms)
{
	uint64_t end = now_ns() + (uint64_t)ms * 1000000ULL;
	volatile unsigned long x = 0;

	while (now_ns() < end)
		for (int i = 0; i < 1000; i++)
			x++;
}

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

static uint64_t cntvct(void)
{
	uint64_t v;

	__asm__ volatile("isb; mrs %0, cntvct_el0" : "=r"(v));
	return v;
}

/* A workload: a child that waits for the go byte, then spins `ms` (and, if grand_ms > 0,
 * forks a grandchild spinning grand_ms concurrently, to exercise inherited events). */
static pid_t spawn(int ms, int grand_ms, int *go_fd)
{
	int p[2];
	pid_t pid;

	if (pipe(p))
		return -1;
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		char c;
		pid_t g = -1;

		close(p[1]);
		if (read(p[0], &c, 1) != 1)
			_exit(2);
		if (grand_ms > 0) {
			g = fork();
			if (g == 0) {
				spin_ms(grand_ms);
				_exit(0);
			}
		}
		spin_ms(ms);
		if (g > 0)
			waitpid(g, NULL, 0);
		_exit(0);
	}
	close(p[0]);
	*go_fd = p[1];
	return pid;
}

static void go(int go_fd)
{
	if (write(go_fd, "g", 1) != 1)
		BAD("cannot start the workload");
	close(go_fd);
}

static int pmu_type;

static void spe_attr(struct perf_event_attr *a)
{
	memset(a, 0, sizeof(*a));
	a->size = sizeof(*a);
	a->type = pmu_type;
	a->config = 1;			/* ts_enable */
	a->sample_period = 1024;	/* caps/min_interval */
	a->disabled = 1;
	a->sample_id_all = 1;
	a->sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU;
	a->read_format = PERF_FORMAT_TOTAL_TIME_ENABLED;
}

/* The event's time_enabled: it stops growing while the event is disabled. */
static uint64_t time_enabled(int fd)
{
	uint64_t v[2] = {0, 0};

	return read(fd, v, sizeof(v)) == sizeof(v) ? v[1] : 0;
}

static int perf_open(struct perf_event_attr *a, pid_t pid, int cpu)
{
	return syscall(SYS_perf_event_open, a, pid, cpu, -1, PERF_FLAG_FD_CLOEXEC);
}

/* One event: its data ring and AUX area, and what was read from them. */
struct ring {
	int fd;
	struct perf_event_mmap_page *pg;
	unsigned char *data, *aux;
	uint64_t data_size, aux_size;
	size_t base_len;
	int reenable;			/* IOC_ENABLE after a TRUNCATED record */
	int snapshot;			/* overwrite mode: AUX records are only counted */
	/* results */
	uint64_t next_off;		/* AUX offset the next AUX record must start at */
	uint64_t first_seq, next_seq, last_ts;
	int have_seq;
	long records, pads, bad, gaps, ts_back, aux_recs, aux_empty, aux_gaps;
	long trunc, coll, partial, ovw, itrace, lost, other, reenables;
};

static int ring_map_mode(struct ring *r, int fd, int data_pages, int aux_pages, int aux_prot);

static int ring_map(struct ring *r, int fd, int data_pages, int aux_pages)
{
	/* Writable: normal (non-overwrite) mode, the reader moves aux_tail. */
	return ring_map_mode(r, fd, data_pages, aux_pages, PROT_READ | PROT_WRITE);
}

/* aux_prot PROT_READ alone: overwrite (snapshot) mode. */
static int ring_map_mode(struct ring *r, int fd, int data_pages, int aux_pages, int aux_prot)
{
	long ps = sysconf(_SC_PAGESIZE);
	void *base, *aux;

	memset(r, 0, sizeof(*r));
	r->fd = fd;
	r->base_len = (size_t)(1 + data_pages) * ps;
	base = mmap(NULL, r->base_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (base == MAP_FAILED)
		return -1;
	r->pg = base;
	r->data = (unsigned char *)base + r->pg->data_offset;
	r->data_size = r->pg->data_size;
	r->pg->aux_offset = r->pg->data_offset + r->pg->data_size;
	r->pg->aux_size = (uint64_t)aux_pages * ps;
	aux = mmap(NULL, r->pg->aux_size, aux_prot, MAP_SHARED, fd, r->pg->aux_offset);
	if (aux == MAP_FAILED) {
		munmap(base, r->base_len);
		r->pg = NULL;
		return -1;
	}
	r->aux = aux;
	r->aux_size = r->pg->aux_size;
	return 0;
}

static void ring_close(struct ring *r)
{
	if (r->aux)
		munmap(r->aux, r->aux_size);
	if (r->pg)
		munmap(r->pg, r->base_len);
	close(r->fd);
}

static uint64_t le(const unsigned char *p, int n)
{
	uint64_t v = 0;

	for (int i = n - 1; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

/* One 64-byte chunk of AUX data: a stub record (checked byte by byte) or padding. */
static void check_chunk(struct ring *r, const unsigned char *c)
{
	static const unsigned char zero[REC];
	uint64_t va = le(c + 31, 8), seq = (va - VA_BASE) / REC, ts = le(c + 56, 8);
	int good;

	if (!memcmp(c, zero, REC)) {
		r->pads++;
		return;
	}
	good = c[0] == 0xb0 && le(c + 1, 8) == ((PC_BASE + (seq % 16) * 4) | 0x80ULL << 56) &&
	       !memcmp(c + 9, zero, 10) && c[19] == 0x49 && c[20] == 0 &&
	       c[21] == 0x52 && le(c + 22, 2) == 2 && c[24] == 0x99 && le(c + 25, 2) == 5 &&
	       c[27] == 0x98 && le(c + 28, 2) == 10 + seq % 200 && c[30] == 0xb2 &&
	       va >= VA_BASE && (va - VA_BASE) % REC == 0 && c[39] == 0x9a &&
	       le(c + 40, 2) == 1 && !memcmp(c + 42, zero, 13) && c[55] == 0x71;
	if (!good) {
		if (r->bad++ < 3) {
			printf("aux_probe: bad record:");
			for (int i = 0; i < REC; i++)
				printf(" %02x", c[i]);
			putchar('\n');
		}
		return;
	}
	if (r->have_seq && seq != r->next_seq && r->gaps++ < 3)
		printf("aux_probe: seq %llu follows %llu\n", (unsigned long long)seq,
		       (unsigned long long)r->next_seq - 1);
	if (!r->have_seq) {
		r->first_seq = seq;
		r->have_seq = 1;
	}
	if (ts < r->last_ts)
		r->ts_back++;
	r->last_ts = ts;
	r->next_seq = seq + 1;
	r->records++;
}

static void aux_consume(struct ring *r, uint64_t off, uint64_t size)
{
	unsigned char c[REC];

	if (off % REC || size % REC) {
		r->bad++;
		printf("aux_probe: AUX record off %llu size %llu not 64-byte aligned\n",
		       (unsigned long long)off, (unsigned long long)size);
		return;
	}
	for (uint64_t o = off; o < off + size; o += REC) {
		memcpy(c, r->aux + o % r->aux_size, REC);	/* 64 divides aux_size */
		check_chunk(r, c);
	}
}

static void ring_copy(struct ring *r, uint64_t pos, void *dst, size_t n)
{
	for (size_t i = 0; i < n; i++)
		((unsigned char *)dst)[i] = r->data[(pos + i) % r->data_size];
}

/* Reads every record the data ring holds; consumes the AUX data each PERF_RECORD_AUX names. */
static void drain(struct ring *r)
{
	uint64_t head = __atomic_load_n(&r->pg->data_head, __ATOMIC_ACQUIRE);
	uint64_t tail = r->pg->data_tail;
	unsigned char rec[65536];
	int truncated = 0;

	while (tail < head) {
		struct perf_event_header h;

		ring_copy(r, tail, &h, sizeof(h));
		if (h.size < sizeof(h))
			break;
		ring_copy(r, tail, rec, h.size);
		if (h.type == PERF_RECORD_AUX) {
			uint64_t off = le(rec + 8, 8), size = le(rec + 16, 8), flags = le(rec + 24, 8);

			r->aux_recs++;
			r->trunc += !!(flags & PERF_AUX_FLAG_TRUNCATED);
			r->coll += !!(flags & PERF_AUX_FLAG_COLLISION);
			r->partial += !!(flags & PERF_AUX_FLAG_PARTIAL);
			r->ovw += !!(flags & PERF_AUX_FLAG_OVERWRITE);
			truncated |= !!(flags & PERF_AUX_FLAG_TRUNCATED);
			if (!size) {
				r->aux_empty++;
			} else if (r->snapshot) {
				r->next_off = off + size;
			} else {
				if (off != r->next_off)
					r->aux_gaps++;
				aux_consume(r, off, size);
				r->next_off = off + size;
				/* Reads of the AUX data complete before the kernel sees the tail. */
				__atomic_thread_fence(__ATOMIC_SEQ_CST);
				__atomic_store_n(&r->pg->aux_tail, off + size, __ATOMIC_RELAXED);
			}
		} else if (h.type == PERF_RECORD_ITRACE_START) {
			if (r->itrace++ < 3)
				printf("aux_probe: ITRACE_START pid %u tid %u\n",
				       (unsigned)le(rec + 8, 4), (unsigned)le(rec + 12, 4));
		} else if (h.type == PERF_RECORD_LOST) {
			r->lost++;
		} else {
			if (r->other++ < 3)
				printf("aux_probe: record type %u size %u\n", h.type, h.size);
		}
		tail += h.size;
	}
	__atomic_store_n(&r->pg->data_tail, tail, __ATOMIC_RELEASE);
	if (truncated && r->reenable) {
		/*
		 * The buffer is drained now: restart the event. DISABLE first: Linux 6.1 (Debian 12)
		 * lacks commit 1476b218327b ("perf/aux: Fix pending disable flow when the AUX ring
		 * buffer overruns"), so on CPU 0 the kernel does not disable the event after
		 * TRUNCATED and a bare ENABLE would be a no-op that never restarts the device.
		 */
		if (ioctl(r->fd, PERF_EVENT_IOC_DISABLE, 0) || ioctl(r->fd, PERF_EVENT_IOC_ENABLE, 0))
			BAD("PERF_EVENT_IOC_DISABLE/ENABLE after TRUNCATED: %s", strerror(errno));
		r->reenables++;
	}
}

/* Polls and drains until the workload exits, then drains what is left. */
static void drain_until_exit(struct ring *r, pid_t pid)
{
	int st;

	for (;;) {
		struct pollfd p = { .fd = r->fd, .events = POLLIN };

		poll(&p, 1, 20);
		drain(r);
		if (waitpid(pid, &st, WNOHANG) == pid)
			break;
	}
	drain(r);
}

static void summary(const char *what, struct ring *r, struct counters *c0, struct counters *c1)
{
	printf("aux_probe %s: records=%ld pads=%ld aux_records=%ld (empty %ld) truncated=%ld "
	       "collision=%ld partial=%ld itrace_start=%ld lost=%ld other=%ld reenables=%ld | "
	       "module: injected=%lld dropped=%lld collisions=%lld truncations=%lld\n",
	       what, r->records, r->pads, r->aux_recs, r->aux_empty, r->trunc, r->coll, r->partial,
	       r->itrace, r->lost, r->other, r->reenables, c1->injected - c0->injected,
	       c1->dropped - c0->dropped, c1->collisions - c0->collisions,
	       c1->truncations - c0->truncations);
}

/* The checks every run ends with: each record the module wrote was read exactly once. */
static void verify(const char *what, struct ring *r, struct counters *c0, struct counters *c1)
{
	long long inj = c1->injected - c0->injected;
	uint64_t aux_head = __atomic_load_n(&r->pg->aux_head, __ATOMIC_ACQUIRE);

	summary(what, r, c0, c1);
	CHECK(r->records > 0 && !r->bad && !r->gaps && r->first_seq == (uint64_t)c0->injected &&
	      r->next_seq == (uint64_t)c1->injected,
	      "%s: %ld well-formed records, seq %lld..%lld consecutive (bad %ld, gaps %ld)", what,
	      r->records, c0->injected, c1->injected - 1, r->bad, r->gaps);
	CHECK(r->records == inj, "%s: records read (%ld) == module's injected (%lld)", what,
	      r->records, inj);
	CHECK(r->trunc == c1->truncations - c0->truncations,
	      "%s: TRUNCATED records (%ld) == module's truncations (%lld)", what, r->trunc,
	      c1->truncations - c0->truncations);
	CHECK(r->coll == c1->collisions - c0->collisions,
	      "%s: COLLISION records (%ld) == module's collisions (%lld)", what, r->coll,
	      c1->collisions - c0->collisions);
	CHECK(!r->lost && !r->aux_gaps && aux_head == r->next_off && !r->pads && !r->ts_back,
	      "%s: AUX records tile the AUX stream up to aux_head %llu (lost %ld, gaps %ld, pads %ld, "
	      "timestamps backwards %ld)", what, (unsigned long long)aux_head, r->lost, r->aux_gaps,
	      r->pads, r->ts_back);
	CHECK(r->last_ts <= cntvct(), "%s: record timestamps are CNTVCT_EL0 values (last %llu)",
	      what, (unsigned long long)r->last_ts);
}

/* Per-CPU event on a workload that forks (pid=child, cpu=0, inherit=1): the children's events
 * write into the parent's buffers. 16-page AUX area, drained while it runs; COLLISION every
 * 7th output_end. */
static void test_inherit(void)
{
	struct perf_event_attr a;
	struct counters c0, c1;
	struct ring r;
	int go_fd, fd;
	pid_t pid;

	set_param("collide_every", 7);
	c0 = counters();
	pid = spawn(300, 150, &go_fd);
	spe_attr(&a);
	a.inherit = 1;
	fd = perf_open(&a, pid, 0);
	if (fd < 0) {
		BAD("inherit: perf_event_open(pid=%d, cpu=0, inherit=1): %s", pid, strerror(errno));
		kill(pid, SIGKILL);
		return;
	}
	if (ring_map(&r, fd, 8, 16)) {
		BAD("inherit: mmap of 1+8 data pages and 16 AUX pages: %s", strerror(errno));
		kill(pid, SIGKILL);
		close(fd);
		return;
	}
	r.reenable = 1;
	CHECK(!ioctl(fd, PERF_EVENT_IOC_ENABLE, 0), "inherit: PERF_EVENT_IOC_ENABLE");
	go(go_fd);
	drain_until_exit(&r, pid);
	c1 = counters();
	set_param("collide_every", 0);
	verify("inherit", &r, &c0, &c1);
	CHECK(r.itrace >= 1, "inherit: PERF_RECORD_ITRACE_START seen (%ld)", r.itrace);
	CHECK(r.coll > 0, "inherit: collide_every=7 produced COLLISION records (%ld)", r.coll);
	ring_close(&r);
}

/* Per-thread event (pid=child, cpu=-1) with a 2-page AUX area that is not drained: the
 * buffer fills (8191 bytes of room: 127 records), TRUNCATED, the stub stops writing (and a
 * fixed kernel disables the event; 6.1 on CPU 0 does not: reported, not judged); after
 * draining, PERF_EVENT_IOC_DISABLE + ENABLE resumes injection. */
static void test_small(void)
{
	struct perf_event_attr a;
	struct counters c0, c1, c2, c3;
	struct ring r;
	int go_fd, fd;
	pid_t pid;

	c0 = counters();
	pid = spawn(300, 0, &go_fd);
	spe_attr(&a);
	fd = perf_open(&a, pid, -1);
	if (fd < 0 || ring_map(&r, fd, 8, 2)) {
		BAD("small: perf_event_open/mmap (pid=%d, cpu=-1, 2 AUX pages): %s", pid,
		    strerror(errno));
		kill(pid, SIGKILL);
		return;
	}
	r.reenable = 1;
	CHECK(!ioctl(fd, PERF_EVENT_IOC_ENABLE, 0), "small: PERF_EVENT_IOC_ENABLE");
	go(go_fd);
	sleep_ms(40);
	c1 = counters();
	uint64_t te1 = time_enabled(fd);
	CHECK(c1.injected - c0.injected == 127 && c1.truncations > c0.truncations &&
	      c1.dropped > c0.dropped,
	      "small: 2-page AUX area full after 127 records, TRUNCATED (injected %lld, "
	      "truncations %lld, dropped %lld)", c1.injected - c0.injected,
	      c1.truncations - c0.truncations, c1.dropped - c0.dropped);
	sleep_ms(20);
	c2 = counters();
	uint64_t te2 = time_enabled(fd);
	CHECK(c2.injected == c1.injected, "small: nothing injected until the buffer is drained");
	/* Fixed kernels disable the event on TRUNCATED (then it restarts only on ENABLE); 6.1
	 * on CPU 0 leaves it enabled, so every schedule-in restarts the stub, which truncates
	 * again at once: one more TRUNCATED record per schedule-in until the reader drains. */
	printf("aux_probe small: after TRUNCATED the kernel %s the event (time_enabled %llu -> "
	       "%llu ns; TRUNCATED so far %lld)\n", te2 == te1 ? "disabled" : "did NOT disable",
	       (unsigned long long)te1, (unsigned long long)te2, c2.truncations - c0.truncations);
	drain(&r);
	CHECK(r.trunc == c2.truncations - c0.truncations && r.trunc >= 1 && r.reenables == 1 &&
	      r.records == 127,
	      "small: read 127 records and the TRUNCATED record(s), restarted (records %ld, "
	      "truncated %ld)", r.records, r.trunc);
	sleep_ms(40);
	c3 = counters();
	CHECK(c3.injected > c2.injected,
	      "small: injection resumes after PERF_EVENT_IOC_DISABLE + ENABLE (+%lld)",
	      c3.injected - c2.injected);
	drain_until_exit(&r, pid);
	c3 = counters();
	verify("small", &r, &c0, &c3);
	CHECK(r.itrace >= 1, "small: PERF_RECORD_ITRACE_START seen (%ld)", r.itrace);
	ring_close(&r);
}

/* CPU-wide event (pid=-1, cpu=0): injects while the CPU idles, too. */
static void test_cpu_wide(void)
{
	struct perf_event_attr a;
	struct counters c0, c1;
	struct ring r;
	uint64_t end;
	int fd;

	c0 = counters();
	spe_attr(&a);
	fd = perf_open(&a, -1, 0);
	if (fd < 0 || ring_map(&r, fd, 8, 16)) {
		BAD("cpu-wide: perf_event_open/mmap (pid=-1, cpu=0): %s", strerror(errno));
		return;
	}
	r.reenable = 1;
	ioctl(fd, PERF_EVENT_IOC_ENABLE, 0);
	end = now_ns() + 30000000ULL;
	while (now_ns() < end) {
		struct pollfd p = { .fd = fd, .events = POLLIN };

		poll(&p, 1, 5);
		drain(&r);
	}
	CHECK(!ioctl(fd, PERF_EVENT_IOC_DISABLE, 0), "cpu-wide: PERF_EVENT_IOC_DISABLE");
	c1 = counters();
	drain(&r);
	verify("cpu-wide", &r, &c0, &c1);
	/* Tear down while the device is running: munmap of the AUX area stops the event
	 * (->stop from the core), then close frees it (the stub's timer must be gone). */
	ioctl(fd, PERF_EVENT_IOC_ENABLE, 0);
	sleep_ms(5);
	c0 = counters();
	ring_close(&r);
	sleep_ms(5);
	c1 = counters();
	sleep_ms(5);
	CHECK(counters().injected == c1.injected && c1.injected >= c0.injected,
	      "cpu-wide: munmap and close while enabled stop the injection");
}

/* CPU-wide event with a read-only (overwrite, snapshot-mode) 4-page AUX area: the stub wraps
 * around; aux_head moves by 64 bytes per record and the buffer ends with the newest records. */
static void test_snapshot(void)
{
	struct perf_event_attr a;
	struct counters c0, c1;
	struct ring r;
	uint64_t aux_head, n, first;
	int fd;

	c0 = counters();
	spe_attr(&a);
	fd = perf_open(&a, -1, 0);
	if (fd < 0 || ring_map_mode(&r, fd, 8, 4, PROT_READ)) {
		BAD("snapshot: perf_event_open/mmap (read-only AUX): %s", strerror(errno));
		return;
	}
	r.snapshot = 1;
	ioctl(fd, PERF_EVENT_IOC_ENABLE, 0);
	sleep_ms(20);
	ioctl(fd, PERF_EVENT_IOC_DISABLE, 0);
	c1 = counters();
	drain(&r);	/* counts the AUX records; the data is read back from aux_head below */
	aux_head = __atomic_load_n(&r.pg->aux_head, __ATOMIC_ACQUIRE);
	n = r.aux_size / REC;
	if (n > (uint64_t)(c1.injected - c0.injected))
		n = c1.injected - c0.injected;
	/* Re-read the last n records (oldest first) from the ring as a snapshot reader would. */
	struct ring s = r;
	s.records = s.bad = s.gaps = s.have_seq = s.pads = s.ts_back = 0;
	s.last_ts = 0;
	for (uint64_t o = aux_head - n * REC; o < aux_head; o += REC)
		check_chunk(&s, r.aux + o % r.aux_size);
	first = c1.injected - n;
	summary("snapshot", &s, &c0, &c1);
	CHECK(c1.injected > c0.injected && aux_head == (uint64_t)(c1.injected - c0.injected) * REC &&
	      r.ovw == r.aux_recs && r.aux_recs > 0 && c1.truncations == c0.truncations,
	      "snapshot: aux_head (%llu) == 64 * injected (%lld), OVERWRITE on all %ld AUX records, "
	      "no TRUNCATED", (unsigned long long)aux_head, c1.injected - c0.injected, r.aux_recs);
	CHECK(s.records == (long)n && !s.bad && !s.gaps && s.first_seq == first &&
	      s.next_seq == (uint64_t)c1.injected,
	      "snapshot: the buffer holds the newest %llu records, seq %llu..%lld",
	      (unsigned long long)n, (unsigned long long)first, c1.injected - 1);
	ring_close(&r);
}

static int open_errno(struct perf_event_attr *a, pid_t pid, int cpu)
{
	int fd = perf_open(a, pid, cpu);

	if (fd >= 0) {
		close(fd);
		return 0;
	}
	return errno;
}

/* event_init's checks, exclusivity, and the AUX size minimum. */
static void test_errors(void)
{
	struct perf_event_attr a;
	struct ring r;
	int e, fd, fd2;
	pid_t pid;

	spe_attr(&a);
	e = open_errno(&a, 0, -1);
	CHECK(e == 0, "open pid=0 cpu=-1 (%s)", strerror(e));
	spe_attr(&a);
	a.freq = 1;
	a.sample_freq = 1000;
	e = open_errno(&a, 0, -1);
	CHECK(e == EINVAL, "freq=1 gives EINVAL (%s)", strerror(e));
	spe_attr(&a);
	a.exclude_idle = 1;
	e = open_errno(&a, 0, -1);
	CHECK(e == EOPNOTSUPP, "exclude_idle gives EOPNOTSUPP (%s)", strerror(e));
	spe_attr(&a);
	a.sample_period = 255;
	e = open_errno(&a, 0, -1);
	CHECK(e == EINVAL, "sample_period 255 gives EINVAL (%s)", strerror(e));
	spe_attr(&a);
	a.sample_period = 256;
	e = open_errno(&a, 0, -1);
	CHECK(e == 0, "sample_period 256 opens (%s)", strerror(e));
	spe_attr(&a);
	a.type = pmu_type + 1000;
	e = open_errno(&a, 0, -1);
	CHECK(e == ENOENT, "an unknown type gives ENOENT (%s)", strerror(e));

	/* PERF_PMU_CAP_EXCLUSIVE: one event per task/CPU; per-task and CPU-wide exclude each other. */
	spe_attr(&a);
	fd = perf_open(&a, 0, -1);
	e = open_errno(&a, 0, -1);
	CHECK(e == EBUSY, "a second event on the same task gives EBUSY (%s)", strerror(e));
	e = open_errno(&a, -1, 0);
	CHECK(e == EBUSY, "a CPU-wide event while a per-task one exists gives EBUSY (%s)",
	      strerror(e));
	if (fd >= 0)
		close(fd);

	/* The AUX area needs at least two pages. */
	spe_attr(&a);
	fd = perf_open(&a, 0, -1);
	fd2 = fd >= 0 ? ring_map(&r, fd, 1, 1) : 0;
	CHECK(fd >= 0 && fd2 < 0, "a 1-page AUX area is refused (%s)", strerror(errno));
	if (fd >= 0 && fd2 == 0)
		ring_close(&r);
	else if (fd >= 0)
		close(fd);

	/* pa_enable/pct_enable need CAP_PERFMON (with perf_event_paranoid -1 so that an
	 * unprivileged user may open the event at all). */
	long long paranoid = read_ll("/proc/sys/kernel/perf_event_paranoid");
	write_str("/proc/sys/kernel/perf_event_paranoid", "-1");
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		int pa, pct, plain;

		if (setgid(65534) || setuid(65534))
			_exit(99);
		spe_attr(&a);
		a.config = 1 | 2;	/* ts_enable | pa_enable */
		pa = open_errno(&a, 0, -1);
		a.config = 1 | 4;	/* ts_enable | pct_enable */
		pct = open_errno(&a, 0, -1);
		a.config = 1;
		plain = open_errno(&a, 0, -1);
		_exit(pa == EACCES && pct == EACCES && plain == 0 ? 0 : 1);
	}
	int st = 0;
	waitpid(pid, &st, 0);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0,
	      "unprivileged: pa_enable/pct_enable give EACCES, ts_enable alone opens (status %d)",
	      WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	char buf[32];
	snprintf(buf, sizeof(buf), "%lld", paranoid);
	write_str("/proc/sys/kernel/perf_event_paranoid", buf);
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	pmu_type = (int)read_ll(PMU_DIR "type");
	if (pmu_type < 0) {
		BAD("no " PMU_DIR "type");
		return 1;
	}
	printf("aux_probe: arm_spe_0 type %d, period_us %lld, batch %lld\n", pmu_type,
	       read_ll(PARAMS "period_us"), read_ll(PARAMS "batch"));
	test_errors();
	test_inherit();
	test_small();
	test_cpu_wide();
	test_snapshot();
	return failures ? 1 : 0;
}
