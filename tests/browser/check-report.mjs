// Checks spelunk's HTML report in headless Chromium (Debian's /usr/bin/chromium, driven by
// playwright-core; no browser is downloaded). Run by crates/cli/tests/html_report.rs, which
// writes the pages and a manifest:
//   node tests/browser/check-report.mjs MANIFEST.json
// MANIFEST: {"pages": [{"name", "html", "json", "topdown" (path or null), "screenshot",
//            "hostile_thread_name"?, "with_phases"?}]}
// A page is a `spelunk report --html` page (its JSON: `--json`, schema spelunk-report/1, with
// `c2c` under --c2c) or a `spelunk c2c --html` page (its JSON: schema spelunk-c2c/1).
// For each page: no request but the page itself, no console error, no CSP violation; the
// tables, histograms, scatter, c2c and top-down sections show the JSON's figures; sorting,
// tabs and links work; a full-page screenshot is written. Prints "N passed, M failed"; exits 1 on a failure.
import { readFileSync, writeFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const { chromium } = require('playwright-core');

const manifest = JSON.parse(readFileSync(process.argv[2], 'utf8'));
let passed = 0;
let failed = 0;
function check(name, ok, detail) {
  if (ok) {
    passed++;
    console.log(`ok - ${name}`);
  } else {
    failed++;
    console.log(`not ok - ${name}${detail === undefined ? '' : ': ' + (typeof detail === 'string' ? detail : JSON.stringify(detail))}`);
  }
}
function eq(name, actual, expected) {
  const a = JSON.stringify(actual);
  const e = JSON.stringify(expected);
  check(name, a === e, `got ${a}, expected ${e}`);
}

// Rust's {:.N} (ties to even on the exact binary value), implemented independently of the
// page: the double as an exact fraction with BigInt.
function rustFixed(x, digits) {
  if (x === null || x === undefined) return '-';
  const view = new DataView(new ArrayBuffer(8));
  view.setFloat64(0, Math.abs(x));
  const bits = view.getBigUint64(0);
  const exp = Number((bits >> 52n) & 0x7ffn);
  let mant = bits & ((1n << 52n) - 1n);
  let e;
  if (exp === 0) e = -1074;
  else { mant |= 1n << 52n; e = exp - 1075; }
  const [p, q] = e >= 0 ? [mant << BigInt(e), 1n] : [mant, 1n << BigInt(-e)];
  const scaled = p * 10n ** BigInt(digits);
  let n = scaled / q;
  const r = scaled % q;
  if (2n * r > q || (2n * r === q && n % 2n === 1n)) n += 1n;
  const s = n.toString().padStart(digits + 1, '0');
  return (x < 0 ? '-' : '') + (digits ? s.slice(0, -digits) + '.' + s.slice(-digits) : s);
}
const int = (n) => (n === null || n === undefined ? '-' : n.toLocaleString('en-US'));
const pct = (x) => rustFixed(100 * x, 1) + '%';
const lat = (l, f) => (l ? (f === 'mean' ? rustFixed(l.mean, 1) : String(l[f])) : '-');
function topSource(g) {
  const total = g.sources.reduce((a, s) => a + s.loads, 0);
  return g.sources.length && total ? `${g.sources[0].source} ${rustFixed((100 * g.sources[0].loads) / total, 0)}%` : '-';
}

// `--sort` orders and the column showing each figure (docs/report.md).
const SORT_COLUMN = {
  cost: 'cost',
  samples: 'samples', loads: 'loads', stores: 'stores', latency: 'ld_lat_mean', p99: 'ld_lat_p99', exec: 'exec_mean',
  'l1d-miss': 'l1d_miss', 'llc-miss': 'llc_miss', 'tlb-walk': 'tlb_walk', mispredicts: 'mispredicts', remote: 'remote',
};

const ns = (t) => (t >= 1e9 ? rustFixed(t / 1e9, 3) + ' s' : t >= 1e6 ? rustFixed(t / 1e6, 3) + ' ms' : rustFixed(t / 1e3, 1) + ' us');

// The report has no phases until the annotation runtime records them: a copy of a page with
// three phases added to its embedded JSON checks the phase table and the timeline's bands. The
// copy also gets an object at a kernel address above 2^53, which the table must show exactly.
const KERNEL_START = '18446603336526616185'; // 0xffff800012345679, not a double
const KERNEL_HEX = '0xffff800012345679';
function withPhases(spec) {
  const html = readFileSync(spec.html, 'utf8');
  const open = '<script type="application/json" id="spelunk-data">';
  const i = html.indexOf(open) + open.length;
  const j = html.indexOf('</script>', i);
  const data = JSON.parse(html.slice(i, j));
  const dur = data.report.recording.duration_ns;
  data.report.phases = [['init', 0, dur / 3], ['sweep', dur / 3, (2 * dur) / 3], ['lookup', (2 * dur) / 3, dur]]
    .map(([name, a, b]) => ({ name, instances: 1, threads: 1, duration_ns: Math.round(b) - Math.round(a), start_ns: Math.round(a), end_ns: Math.round(b), ...data.report.totals }));
  data.report.phase_spans = data.report.phases.map((p) => ({ name: p.name, tid: 1, depth: 1, start_ns: p.start_ns, end_ns: p.end_ns }));
  data.report.objects.push({ name: 'kernel_object', kind: 'anonymous', dso: null, start: 424242, size: 4096,
    ...Object.fromEntries(Object.entries(data.report.totals).map(([k, v]) => [k, typeof v === 'number' ? 0 : Array.isArray(v) ? [] : null])) });
  const text = JSON.stringify(data).replace('"start":424242', `"start":${KERNEL_START}`).replace(/</g, '\\u003c').replace(/>/g, '\\u003e').replace(/&/g, '\\u0026');
  const out = { ...spec, name: spec.name + '+phases', html: spec.html.replace(/\.html$/, '-phases.html'),
    json: spec.json.replace(/\.json$/, '-phases.json'), screenshot: spec.screenshot.replace(/\.png$/, '-phases.png') };
  writeFileSync(out.html, html.slice(0, i) + text + html.slice(j));
  data.report.objects[data.report.objects.length - 1].start = KERNEL_HEX; // what the table must show
  writeFileSync(out.json, JSON.stringify(data.report));
  return out;
}

async function rows(page, id) {
  return page.$$eval(`#${id} tbody tr`, (trs) =>
    trs.map((tr) => Object.fromEntries([...tr.cells].map((c) => [c.dataset.col, { text: c.textContent, value: c.dataset.value ?? null }]))));
}

// --- c2c (docs/c2c.md), formatted as `spelunk c2c` prints it (crates/report/src/c2c_text.rs):
// shares with two decimals, mean cycles with none.
const c2cPct = (x) => rustFixed(100 * x, 2) + '%';
const cycles = (x) => (x === null ? '-' : rustFixed(x, 0));
const hex = (x) => '0x' + x.toString(16);
const short = (p) => p.split('/').pop();
const threadLabel = (t) => (t.tid !== null ? (t.name !== null ? `${t.tid}:${t.name}` : String(t.tid)) : t.cpu !== null ? `cpu${t.cpu}` : '?');
const symbolOf = (a) => (a.function ? a.function + (a.function_offset !== null ? '+' + hex(a.function_offset) : '') : '[unknown]');
const sourceOf = (a) => (a.file && a.line !== null ? `${short(a.file)}:${a.line}` : '-');
const VERDICT = { false_sharing: 'false sharing', true_sharing: 'true sharing', true_and_false_sharing: 'true+false sharing', none: 'none' };
const LINE_COUNTS = ['peer_local', 'peer_remote', 'records', 'loads', 'stores', 'store_l1_hit', 'store_l1_miss', 'store_na', 'load_fb', 'load_l1',
  'load_l2', 'load_lcl_hit', 'load_lcl_hitm', 'load_rmt_hit', 'load_rmt_hitm', 'load_dram_lcl', 'load_dram_rmt'];

async function checkC2c(page, c2c, n, spec) {
  const t = c2c.totals;
  check(`${n}: c2c section present`, await page.isVisible('#c2c'));
  eq(`${n}: c2c tiles (records, peer loads, lines)`,
    [await page.textContent('#c2c-tile-records .value'), await page.textContent('#c2c-tile-peer .value'), await page.textContent('#c2c-tile-lines .value')],
    [int(t.records), int(t.peer_local + t.peer_remote), int(t.lines_with_peer_snoops)]);
  if (!c2c.lines.length) {
    const empty = await page.textContent('#c2c-empty');
    check(`${n}: c2c says there are no peer snoops`, empty.includes('no peer snoops'), empty);
    eq(`${n}: no c2c line table without lines`, await page.$('#c2c-lines'), null);
    return;
  }
  // The Shared Data Cache Line Table: every row, every column.
  const got = await rows(page, 'c2c-lines');
  eq(`${n}: c2c line rows (index, address, object, verdict, Peer Snoop, LdPeer total, perf c2c's counts, PA cnt, cpu cnt)`,
    got.map((r) => [r.index.text, r.address.text, r.object.text, r.verdict.text, r.peer_snoop_share.text, r.peer_total.text,
      ...LINE_COUNTS.map((k) => r[k].text), r.pa_count.text, r.cpu_count.text]),
    c2c.lines.map((l) => [String(l.index), hex(l.address), l.object ?? '-', VERDICT[l.verdict], c2cPct(l.peer_snoop_share), int(l.peer_local + l.peer_remote),
      ...LINE_COUNTS.map((k) => int(l[k])), int(l.pa_count), int(l.cpu_count)]));
  eq(`${n}: c2c lines arrive ranked by peer snoops (marked)`,
    await page.$$eval('#c2c-lines th[aria-sort="descending"]', (ths) => ths.map((x) => x.dataset.col)), ['peer_total']);
  eq(`${n}: c2c verdict reasons`,
    await page.$$eval('.verdict-reason', (ps) => ps.map((p) => p.textContent)), c2c.lines.map((l) => 'Why: ' + l.verdict_reason));

  // Per line: the offsets table and the code addresses (perf c2c's Pareto), every row.
  for (const l of c2c.lines) {
    const i = l.index;
    const offs = await rows(page, `c2c-offsets-${i}`);
    eq(`${n}: line ${i} offsets (offset, object+offset, records, loads, stores, peer local/remote, stores by L1D, PA cnt, code addresses, threads)`,
      offs.map((r) => [r.offset.text, r.object.text, r.records.text, r.loads.text, r.stores.text, r.peer_local.text, r.peer_remote.text,
        r.store_l1_hit.text, r.store_l1_miss.text, r.store_na.text, r.pa_count.text, r.pcs.text, r.threads.text]),
      l.offsets.map((o) => [hex(o.offset), o.object ?? '-', int(o.records), int(o.loads), int(o.stores), int(o.peer_local), int(o.peer_remote),
        int(o.store_l1_hit), int(o.store_l1_miss), int(o.store_na), int(o.pa_count),
        o.accesses.map((a) => `${hex(a.pc)} ${symbolOf(a)} ${sourceOf(a)} (${int(a.records)})`).join(''),
        o.threads.map((x) => `${threadLabel(x.thread)} ${int(x.loads)}/${int(x.stores)}`).join('')]));
    const pcs = await rows(page, `c2c-pcs-${i}`);
    eq(`${n}: line ${i} code addresses (Rmt, Lcl, store refs, offset, PA cnt, pc, cycles, counts, cpu cnt, symbol, dso, source, threads)`,
      pcs.map((r) => [r.peer_remote_pct.text, r.peer_local_pct.text, r.store_l1_hit_pct.text, r.store_l1_miss_pct.text, r.store_na_pct.text,
        r.offset.text, r.pa_count.text, r.pc.text, r.cycles_rmt.text, r.cycles_lcl.text, r.cycles_load.text, r.records.text, r.loads.text,
        r.stores.text, r.peer_local.text, r.peer_remote.text, r.cpu_count.text, r.symbol.text, r.dso.text, r.source.text, r.threads.text]),
      l.offsets.flatMap((o) => o.accesses.map((a) => [c2cPct(a.peer_remote_pct), c2cPct(a.peer_local_pct), c2cPct(a.store_l1_hit_pct),
        c2cPct(a.store_l1_miss_pct), c2cPct(a.store_na_pct), hex(o.offset) + (o.object ? ' ' + o.object : ''), int(o.pa_count), hex(a.pc),
        cycles(a.mean_cycles_peer_remote), cycles(a.mean_cycles_peer_local), cycles(a.mean_cycles_load), int(a.records), int(a.loads),
        int(a.stores), int(a.peer_local), int(a.peer_remote), int(a.cpu_count), symbolOf(a), a.dso ? short(a.dso) : '-', sourceOf(a),
        a.threads.map(threadLabel).join(', ')])));
  }
  if (spec.hostile_thread_name) {
    const cells = await page.$$eval('[id^="c2c-offsets-"] td[data-col="threads"]', (tds) => tds.map((td) => td.textContent));
    check(`${n}: hostile thread name shown literally in the c2c tables`, cells.some((c) => c.includes(spec.hostile_thread_name)), cells);
  }

  // The line index links to the line's details and opens them (no request: a fragment).
  const last = c2c.lines[c2c.lines.length - 1].index;
  check(`${n}: line ${last}'s details start closed unless first`, (await page.$eval(`#c2c-line-${last}`, (d) => d.open)) === (last === 0));
  await page.click(`#c2c-lines a[href="#c2c-line-${last}"]`);
  check(`${n}: clicking # ${last} opens its details`, await page.$eval(`#c2c-line-${last}`, (d) => d.open));

  // Sorting: records largest first, again smallest first; objects A-Z; an offsets table too.
  if (c2c.lines.length > 1) {
    const recs = async () => (await rows(page, 'c2c-lines')).map((r) => Number(r.records.value));
    await page.click('#c2c-lines th[data-col="records"]');
    const desc = await recs();
    check(`${n}: c2c lines sort by records, descending`, desc.every((v, i) => i === 0 || desc[i - 1] >= v), desc);
    await page.click('#c2c-lines th[data-col="records"]');
    const asc = await recs();
    check(`${n}: and ascending`, asc.every((v, i) => i === 0 || asc[i - 1] <= v), asc);
    eq(`${n}: sorted rows keep their figures`, [...asc].sort((a, b) => a - b), c2c.lines.map((l) => l.records).sort((a, b) => a - b));
    await page.click('#c2c-lines th[data-col="object"]');
    const objs = (await rows(page, 'c2c-lines')).map((r) => r.object.text);
    eq(`${n}: c2c lines sort by object A-Z`, objs, [...objs].sort((a, b) => a.localeCompare(b)));
  }
  const first = c2c.lines[0];
  if (first.offsets.length > 1) {
    await page.click(`#c2c-offsets-${first.index} th[data-col="loads"]`);
    const loads = (await rows(page, `c2c-offsets-${first.index}`)).map((r) => Number(r.loads.value));
    eq(`${n}: offsets sort by loads, descending`, loads, first.offsets.map((o) => o.loads).sort((a, b) => b - a));
  }
}

// The report's own sections (a `spelunk report` page).
async function checkReport(page, json, topdown, n) {
  // --- findings first (spelunk-advise/1 in `advice`), then summary and losses
  if (json.advice) {
    check(`${n}: findings section present`, await page.isVisible('#findings'));
    eq(`${n}: findings listed = JSON findings (at most 10)`, await page.$$eval('#findings-list > li', (e) => e.length),
      Math.min(10, json.advice.findings.length));
    eq(`${n}: findings come first`, await page.$eval('main > section', (e) => e.id), 'findings');
  }
  const rec = json.recording;
  eq(`${n}: samples tile`, await page.textContent('#tile-samples .value'), int(rec.samples_selected));
  const interval = rec.sampling && rec.sampling.effective_interval !== null ? `${int(rec.sampling.effective_interval)} ops` : 'unknown';
  eq(`${n}: sampling interval tile`, await page.textContent('#tile-interval .value'), interval);
  const q = rec.sampling_quality;
  if (q) {
    eq(`${n}: accuracy tile (eq. 1)`, await page.textContent('#tile-accuracy .value'), q.accuracy === null ? '-' : pct(q.accuracy));
    eq(`${n}: sampling ratio tile`, await page.textContent('#tile-ratios .value'), q.sampling_ratio === null ? '-' : rustFixed(q.sampling_ratio, 6));
  } else {
    eq(`${n}: no sampling-quality tiles without counts`, await page.$('#sampling-quality'), null);
  }
  check(`${n}: duration tile shows duration_ns`, (await page.textContent('#tile-duration .sub')) === `${int(rec.duration_ns)} ns`);
  const lossRows = await rows(page, 'losses');
  const lossKeys = ['undecodable_bytes', 'dropped_records', 'incomplete_records', 'truncated_packets', 'aux_truncated', 'aux_partial', 'aux_collision', 'lost_events', 'lost_records'];
  eq(`${n}: loss table = JSON losses`, lossRows.map((r) => Number(r.count.value)), lossKeys.map((k) => rec.losses[k]));
  const anyLoss = lossKeys.some((k) => rec.losses[k] > 0) || rec.losses.problems.length > 0;
  const bannerClass = await page.getAttribute('#losses-banner', 'class');
  eq(`${n}: losses banner ${anyLoss ? 'loud' : 'calm'}`, bannerClass, anyLoss ? 'losses some' : 'losses none');
  if (anyLoss) {
    const banner = await page.textContent('#losses-banner');
    for (const k of lossKeys.filter((k) => rec.losses[k] > 0)) {
      eq(`${n}: banner lists ${k}`, await page.textContent(`#losses-banner li[data-loss="${k}"] b`), int(rec.losses[k]));
    }
    check(`${n}: banner says the recording is incomplete`, banner.includes('LOSSES'), banner);
  }
  const cpus = await rows(page, 'cpus');
  eq(`${n}: per-CPU samples`, cpus.map((r) => [r.cpu.text, Number(r.samples.value)]), json.cpus.map((c) => [String(c.cpu), c.samples]));
  const threads = await rows(page, 'threads');
  eq(`${n}: threads`, threads.map((r) => [r.tid.text, r.name.text, Number(r.samples.value), r.share.text]),
    json.threads.map((t) => [String(t.tid), t.name ?? '-', t.samples, pct(t.share)]));

  // --- hotspot tables: every row's figures
  for (const kind of ['functions', 'lines', 'instructions', 'dsos']) {
    const want = json.hotspots[kind];
    if (!want.length) continue;
    await page.click(`#tab-${kind}`);
    check(`${n}: tab ${kind} shows its table`, await page.isVisible(`#hotspots-${kind}`));
    const got = await rows(page, `hotspots-${kind}`);
    eq(`${n}: ${kind} rows (key, samples, share, loads, stores, ld lat, p50, p99, exec, L1D miss, mispred, top source)`,
      got.map((r) => [r.key.text, r.samples.text, r.samples.value, r.share.text, r.share.value, r.loads.text, r.stores.text,
        r.ld_lat_mean.text, r.ld_lat_p50.text, r.ld_lat_p99.text, r.exec_mean.text, r.l1d_miss.text, r.mispredicts.text, r.top_source.text]),
      want.map((h) => [h.key, int(h.samples), String(h.samples), pct(h.share), String(h.share), int(h.loads), int(h.stores),
        lat(h.load_latency, 'mean'), lat(h.load_latency, 'p50'), lat(h.load_latency, 'p99'), lat(h.load_exec_latency, 'mean'), int(h.l1d_miss), int(h.mispredicts), topSource(h)]));
    // The rows arrive in the --sort order, and the page marks that column.
    eq(`${n}: ${kind} marked as sorted by ${json.hotspot_sort}`,
      await page.$$eval(`#hotspots-${kind} th[aria-sort="descending"]`, (ths) => ths.map((t) => t.dataset.col)), [SORT_COLUMN[json.hotspot_sort]]);
  }
  await page.click('#tab-functions');
  check(`${n}: other tabs hidden again`, !(await page.isVisible('#hotspots-instructions')) && (await page.isVisible('#hotspots-functions')));

  // --- sorting by clicking headers (a click on the column the rows are sorted by reverses it)
  if (json.hotspots.functions.length > 1) {
    const samplesOf = async () => (await rows(page, 'hotspots-functions')).map((r) => Number(r.samples.value));
    if (json.hotspot_sort === 'samples') await page.click('#hotspots-functions th[data-col="samples"]');
    await page.click('#hotspots-functions th[data-col="samples"]');
    const desc = await samplesOf();
    check(`${n}: click samples sorts descending`, desc.every((v, i) => i === 0 || desc[i - 1] >= v), desc);
    eq(`${n}: aria-sort descending`, await page.getAttribute('#hotspots-functions th[data-col="samples"]', 'aria-sort'), 'descending');
    await page.click('#hotspots-functions th[data-col="samples"]');
    const asc = await samplesOf();
    check(`${n}: second click sorts ascending`, asc.every((v, i) => i === 0 || asc[i - 1] <= v) && (desc[0] === desc[desc.length - 1] || asc[0] < asc[asc.length - 1]), asc);
    eq(`${n}: one sorted column at a time`, await page.$$eval('#hotspots-functions th[aria-sort]:not([aria-sort="none"])', (t) => t.length), 1);
    await page.click('#hotspots-functions th[data-col="key"]');
    const keys = (await rows(page, 'hotspots-functions')).map((r) => r.key.text);
    eq(`${n}: click name sorts A-Z`, keys, [...keys].sort((a, b) => a.localeCompare(b)));
  }

  // --- data sources and histograms
  const ds = await rows(page, 'data-sources');
  eq(`${n}: data-source rows (source, loads, share, total mean/p50/p99/max, execution mean)`,
    ds.map((r) => [r.source.text, r.loads.text, r.share.text, r.total_mean.text, r.total_p50.text, r.total_p99.text, r.total_max.text, r.execution_mean.text]),
    json.data_sources.map((d) => [d.source, int(d.loads), pct(d.share), lat(d.total, 'mean'), lat(d.total, 'p50'), lat(d.total, 'p99'), lat(d.total, 'max'), lat(d.execution, 'mean')]));
  const hists = await page.evaluate(() => Object.entries(window.spelunk.charts).filter(([k]) => k.startsWith('hist:'))
    .map(([k, u]) => [k.slice(5), u.data[1].reduce((a, b) => a + b, 0), u.data[1].filter((v) => v > 0).length]));
  eq(`${n}: one histogram per source with the JSON's bucket counts`, hists,
    json.data_sources.map((d) => [d.source, d.total_histogram.buckets.reduce((a, b) => a + b[1], 0), d.total_histogram.buckets.filter((b) => b[1] > 0).length]));

  // --- objects
  if (json.objects.length) {
    const ob = await rows(page, 'objects');
    eq(`${n}: object rows (name, kind, samples, loads, stores, share, ld lat, start, size)`,
      ob.map((r) => [r.name.text, r.kind.text, r.samples.text, r.loads.text, r.stores.text, r.share.text, r.ld_lat_mean.text, r.start.text, r.size.value]),
      json.objects.map((o) => [o.name, o.kind, int(o.samples), int(o.loads), int(o.stores), pct(o.share), lat(o.load_latency, 'mean'), typeof o.start === 'string' ? o.start : '0x' + o.start.toString(16), String(o.size)]));
    await page.click('#objects th[data-col="ld_lat_mean"]');
    const byLat = (await rows(page, 'objects')).map((r) => r.name.text);
    const expected = [...json.objects].filter((o) => o.load_latency).sort((a, b) => b.load_latency.mean - a.load_latency.mean)[0];
    eq(`${n}: objects sorted by load latency: slowest first`, byLat[0], expected ? expected.name : byLat[0]);
  }

  // --- the scatter
  const tl = json.timeline;
  eq(`${n}: scatter data-points = JSON timeline points`, Number(await page.getAttribute('#timeline', 'data-points')), tl.points.length);
  if (tl.points.length) {
    const plotted = await page.evaluate(() => {
      const u = window.spelunk.charts.timeline;
      const total = u.data.slice(1).reduce((a, s) => a + s[0].length, 0);
      const { left, top, width, height } = u.bbox;
      const img = u.ctx.getImageData(left, top, width, height).data;
      let inked = 0;
      for (let i = 3; i < img.length; i += 4) if (img[i] > 0) inked++;
      return { total, inked, series: u.series.slice(1).map((s) => s.label) };
    });
    eq(`${n}: uPlot holds every timeline point`, plotted.total, tl.points.length);
    check(`${n}: scatter is drawn (${plotted.inked} inked pixels)`, plotted.inked > Math.min(2000, tl.points.length * 4), plotted);
    const named = new Set(tl.points.filter((p) => p.object !== null && p.object < 19).map((p) => json.objects[p.object].name));
    check(`${n}: legend names the objects of the timeline`, [...named].every((o) => plotted.series.some((l) => l.startsWith(o + ' ('))), plotted.series);
    // Hover the first point of the first series: the tooltip names its address.
    await page.locator('#timeline').scrollIntoViewIfNeeded();
    const at = await page.evaluate(() => {
      const u = window.spelunk.charts.timeline;
      const r = u.over.getBoundingClientRect();
      return { x: r.left + u.valToPos(u.data[1][0][0], 'x'), y: r.top + u.valToPos(u.data[1][1][0], 'y') };
    });
    const t1 = Date.now();
    await page.mouse.move(at.x, at.y);
    await page.waitForSelector('#timeline .tooltip', { state: 'visible', timeout: 5000 });
    const tip = await page.textContent('#timeline .tooltip');
    check(`${n}: hover shows a tooltip with an address (${Date.now() - t1} ms)`, /@ 0x[0-9a-f]+/.test(tip) && tip.includes('object: '), tip);
    // Drag to zoom, then measure a redraw of the full scatter.
    const box = await page.evaluate(() => {
      const r = window.spelunk.charts.timeline.over.getBoundingClientRect();
      return { cx: r.left + r.width / 2, cy: r.top + r.height / 2 };
    });
    const before = await page.evaluate(() => window.spelunk.charts.timeline.scales.x.max);
    await page.mouse.move(box.cx - 100, box.cy - 60);
    await page.mouse.down();
    await page.mouse.move(box.cx + 100, box.cy + 60, { steps: 5 });
    await page.mouse.up();
    const after = await page.evaluate(() => window.spelunk.charts.timeline.scales.x.max);
    check(`${n}: drag zooms the scatter`, after < before, { before, after });
    // Zoom back out; time until uPlot has redrawn every point (its draw hook).
    const redrawMs = await page.evaluate(() => new Promise((resolve) => {
      const u = window.spelunk.charts.timeline;
      let done = false;
      const t = performance.now();
      (u.hooks.draw = u.hooks.draw || []).push(() => { if (!done) { done = true; resolve(performance.now() - t); } });
      u.setScale('x', { min: null, max: null });
      u.setScale('y', { min: null, max: null });
    }));
    check(`${n}: full scatter redraw under 1 s (${redrawMs.toFixed(0)} ms)`, redrawMs < 1000);
    await page.mouse.move(5, 5);
  }

  // --- phases: table and bands
  if (json.phases.length) {
    const ph = await rows(page, 'phases');
    eq(`${n}: phase rows`, ph.map((r) => [r.name.text, r.start_ns.text, r.end_ns.text, r.samples.text]),
      json.phases.map((p) => [p.name, ns(p.start_ns), ns(p.end_ns), int(p.samples)]));
    eq(`${n}: a band per phase instance on the timeline`, Number(await page.getAttribute('#timeline', 'data-phase-bands')), json.phase_spans.length);
  } else {
    eq(`${n}: no phase table without phases`, await page.$('#phases'), null);
  }

  // --- access distribution over the footprint and address over time per object (docs/report.md)
  const F = json.footprint;
  if (F) {
    const kp = await rows(page, 'footprint-key-points');
    eq(`${n}: footprint key points`, kp.map((r) => [r.access_percent.text, r.regions.text, r.bytes.text, r.footprint_fraction.text]),
      F.key_points.map((k) => [k.access_percent + '%', int(k.regions), int(k.bytes), pct(k.footprint_fraction)]));
    eq(`${n}: footprint curve data-points`, Number(await page.getAttribute('#footprint-plot', 'data-points')), F.curve.length);
    eq(`${n}: uPlot holds the footprint curve`, await page.evaluate(() => window.spelunk.charts.footprint.data[1].length), F.curve.length);
  } else {
    eq(`${n}: no footprint section without accesses`, await page.$('#footprint-section'), null);
  }
  const views = json.object_timelines || [];
  eq(`${n}: one plot per object view`, await page.$$eval('#object-timelines-section .plot', (e) => e.length), views.length);
  for (const [k, v] of views.entries()) {
    const id = 'object-timeline-' + k;
    eq(`${n}: ${id} data-points`, Number(await page.getAttribute('#' + id, 'data-points')), v.points.length);
    if (!v.points.length) continue;
    const plotted = await page.evaluate((id) => window.spelunk.charts[id].data.slice(1).reduce((a, d) => a + d[0].length, 0), id);
    eq(`${n}: uPlot holds every point of ${id}`, plotted, v.points.length);
    check(`${n}: ${id} bands at most the phase instances`, Number(await page.getAttribute('#' + id, 'data-phase-bands')) <= json.phase_spans.length);
  }

  // --- top-down
  if (topdown) {
    const sc = topdown.scopes[0];
    const ev = sc.totals;
    const title = (m) => (ev.metrics.find((x) => x.name === m) || { title: m }).title;
    check(`${n}: top-down section present`, await page.isVisible('#topdown'));
    const path = await page.textContent('#topdown-scope-0 .bottleneck-path');
    eq(`${n}: bottleneck path`, path, 'Bottleneck: ' + (ev.bottleneck_path.length ? ev.bottleneck_path.map(title).join(' → ') : 'none flagged'));
    const countNodes = (ns) => ns.reduce((a, x) => a + 1 + countNodes(x.children), 0);
    const nodes = await page.$$eval('#topdown-scope-0 .tree .node', (els) => els.map((e) => [e.dataset.metric, e.querySelector('.val').textContent]));
    eq(`${n}: tree nodes`, nodes.length, countNodes(ev.tree));
    const flat = (ns) => ns.flatMap((x) => [[x.metric, x.value === null ? 'n/a' : rustFixed(x.value, 2) + (x.units.startsWith('percent') ? '%' : '')], ...flat(x.children)]);
    eq(`${n}: tree values`, nodes, flat(ev.tree));
    const mrows = await rows(page, 'topdown-metrics-0');
    const want = sc.groups.flatMap((g) => g.metrics.map((m) => ev.metrics.find((x) => x.name === m)).filter(Boolean).map((m) => [g.group, m.title, m.value === null ? 'n/a' : rustFixed(m.value, 2)]));
    eq(`${n}: top-down metric rows`, mrows.map((r) => [r.group.text, r.metric.text, r.value.text]), want);
  } else {
    check(`${n}: no top-down section without top-down input`, (await page.$('#topdown')) === null);
  }

}

async function checkPage(browser, spec) {
  const json = JSON.parse(readFileSync(spec.json, 'utf8'));
  const topdown = spec.topdown ? JSON.parse(readFileSync(spec.topdown, 'utf8')) : null;
  const n = spec.name;
  // `spelunk c2c --html` pages carry the c2c report alone; report pages may have one (--c2c).
  const isC2cPage = json.schema === 'spelunk-c2c/1';
  const c2c = isC2cPage ? json : json.c2c || null;
  const context = await browser.newContext({ viewport: { width: 1400, height: 900 } });
  const url = pathToFileURL(spec.html).href;
  const requests = [];
  const blocked = [];
  const consoleErrors = [];
  const pageErrors = [];
  await context.route('**/*', (route) => {
    const u = route.request().url();
    if (u === url) return route.continue();
    blocked.push(u);
    return route.abort();
  });
  const page = await context.newPage();
  page.on('request', (r) => requests.push(r.url()));
  page.on('websocket', (w) => requests.push(w.url()));
  page.on('console', (m) => { if (m.type() === 'error' || m.type() === 'warning') consoleErrors.push(`${m.type()}: ${m.text()}`); });
  page.on('pageerror', (e) => pageErrors.push(String(e)));
  await page.addInitScript(() => {
    window.__csp = [];
    document.addEventListener('securitypolicyviolation', (e) => window.__csp.push(`${e.violatedDirective} ${e.blockedURI}`));
  });

  const t0 = Date.now();
  await page.goto(url, { waitUntil: 'load' });
  await page.waitForSelector('html[data-ready="true"]', { timeout: 30000 });
  const loadMs = Date.now() - t0;
  console.log(`# ${n}: ${spec.html} ready in ${loadMs} ms`);
  check(`${n}: page ready within 10 s (${loadMs} ms)`, loadMs < 10000);

  // --- hostile text stays text
  eq(`${n}: title is the file name as text`, await page.title(), isC2cPage ? `spelunk c2c: ${json.file}` : `spelunk report: ${json.recording.file}`);
  eq(`${n}: only the page's three scripts exist`, await page.evaluate(() => document.scripts.length), 3);
  eq(`${n}: no element made from data (img, iframe, link)`, await page.evaluate(() => document.querySelectorAll('img, iframe, link, object, embed').length), 0);
  if (spec.hostile_thread_name && !isC2cPage) {
    const th = await rows(page, 'threads');
    check(`${n}: hostile thread name shown literally`, th.some((r) => r.name.text === spec.hostile_thread_name), th.map((r) => r.name.text));
  }

  // --- page-side formatting matches Rust's {:.N}
  const samples = [0.25, 0.35, 10.25, 2.5, 0.5, 1.5, 0.125, 10.75, 99.95, 5.55, 1e-7, 123456.789, 0.05, 57.943925233644855];
  const pageFixed = await page.evaluate((xs) => xs.map((x) => [0, 1, 2, 3].map((d) => window.spelunk.fmt.fixed(x, d))), samples);
  eq(`${n}: fmt.fixed rounds like Rust`, pageFixed, samples.map((x) => [0, 1, 2, 3].map((d) => rustFixed(x, d))));
  eq(`${n}: fmt.fixed on known Rust outputs`, [pageFixed[0][1], pageFixed[2][1], pageFixed[3][0], pageFixed[6][2]], ['0.2', '10.2', '2', '0.12']);

  if (isC2cPage) {
    eq(`${n}: a c2c page has no report sections`, await page.$$eval('#hotspots, #summary, #timeline', (e) => e.length), 0);
  } else {
    await checkReport(page, json, topdown, n);
  }
  if (isC2cPage) {
    const l = json.losses;
    const anyLoss = ['undecodable_bytes', 'dropped_records', 'incomplete_records', 'truncated_packets', 'aux_truncated', 'aux_partial',
      'aux_collision', 'lost_events', 'lost_records'].some((k) => l[k] > 0) || l.problems.length > 0;
    eq(`${n}: losses banner ${anyLoss ? 'loud' : 'calm'}`, await page.getAttribute('#losses-banner', 'class'), anyLoss ? 'losses some' : 'losses none');
  }
  if (c2c) await checkC2c(page, c2c, n, spec);
  else eq(`${n}: no c2c section without --c2c`, await page.$('#c2c'), null);

  await page.evaluate(() => window.scrollTo(0, 0));
  await page.screenshot({ path: spec.screenshot, fullPage: true });
  console.log(`# ${n}: screenshot ${spec.screenshot}`);

  // --- nothing left the page
  const csp = await page.evaluate(() => window.__csp);
  eq(`${n}: no request but the page itself`, requests, [url]);
  eq(`${n}: nothing blocked by the route guard`, blocked, []);
  eq(`${n}: no CSP violation`, csp, []);
  eq(`${n}: no console error or warning`, consoleErrors, []);
  eq(`${n}: no uncaught exception`, pageErrors, []);
  await context.close();
}

const t0 = Date.now();
const browser = await chromium.launch({
  executablePath: process.env.SPELUNK_CHROMIUM || '/usr/bin/chromium',
  // Debian's chromium as root, on a machine without a network: no sandbox, no background
  // traffic (Playwright adds a fresh --user-data-dir).
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
try {
  const pages = manifest.pages.flatMap((p) => (p.with_phases ? [p, withPhases(p)] : [p]));
  for (const spec of pages) {
    try {
      await checkPage(browser, spec);
    } catch (e) {
      check(`${spec.name}: page checks ran to the end`, false, String(e && e.stack ? e.stack : e));
    }
  }
} finally {
  await browser.close();
}
console.log(`# browser checks took ${((Date.now() - t0) / 1000).toFixed(1)} s`);
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
