// spelunk HTML report: renders the embedded report (schema spelunk-report/1) and, when present,
// top-down results (schema spelunk-topdown/1). Every number shown is a number of the JSON,
// formatted (never recomputed); figures are defined in docs/report.md and docs/topdown.md.
// Text from the data is only ever set with textContent, never parsed as markup.
(function () {
  'use strict';

  // ---------- data
  // Addresses above 2^53 (kernel) do not fit a double: keep their exact digits as BigInt for
  // the tables (the timeline plots doubles; a pixel does not need the low bits).
  function reviver(key, value, context) {
    if (typeof value === 'number' && !Number.isSafeInteger(value) && Number.isInteger(value) &&
        (key === 'address' || key === 'start' || key === 'pc') && !(this && 't_ns' in this) &&
        context && typeof context.source === 'string' && /^\d+$/.test(context.source)) {
      return BigInt(context.source);
    }
    return value;
  }
  const DATA = JSON.parse(document.getElementById('spelunk-data').textContent, reviver);
  // A report page has `report` (with `report.c2c` under --c2c); `spelunk c2c --html` writes a
  // page with only `c2c`.
  const R = DATA.report;
  const TD = DATA.topdown;
  const C2C = R ? R.c2c : DATA.c2c;
  // The advisor's findings (spelunk-advise/1): in the report, or alone (`spelunk advise --html`).
  const ADV = R ? R.advice : DATA.advice;
  const app = document.getElementById('app');

  // ---------- formatting (Rust's rules, so the page matches the terminal digit for digit)
  // Fixed-point with ties to even on the exact binary value, as Rust's {:.N} does.
  function fixed(x, digits) {
    if (x === null || x === undefined || !isFinite(x)) return '-';
    if (Math.abs(x) >= 1e21) return String(x);
    const neg = x < 0 || Object.is(x, -0);
    const exact = Math.abs(x).toFixed(100);
    const dot = exact.indexOf('.');
    const intPart = exact.slice(0, dot);
    const frac = exact.slice(dot + 1);
    let kept = (intPart + frac.slice(0, digits)).split('').map(Number);
    const rest = frac.slice(digits);
    let up = false;
    if (rest[0] > '5') up = true;
    else if (rest[0] === '5') up = /[1-9]/.test(rest.slice(1)) || kept[kept.length - 1] % 2 === 1;
    if (up) {
      let i = kept.length - 1;
      while (i >= 0 && kept[i] === 9) { kept[i] = 0; i--; }
      if (i < 0) kept.unshift(1); else kept[i] += 1;
    }
    const s = kept.join('');
    const ip = s.slice(0, s.length - digits).replace(/^0+(?=\d)/, '');
    const out = digits > 0 ? ip + '.' + s.slice(s.length - digits) : ip;
    return (neg ? '-' : '') + out;
  }
  const grouping = new Intl.NumberFormat('en-US', { maximumFractionDigits: 0 });
  const fmt = {
    fixed,
    int: (n) => (n === null || n === undefined ? '-' : grouping.format(n)),
    pct: (x) => (x === null || x === undefined ? '-' : fixed(100 * x, 1) + '%'),
    lat: (x) => fixed(x, 1),
    hex: (n) => (n === null || n === undefined ? '-' : '0x' + n.toString(16)),
    // Durations as the terminal prints them (crates/report/src/text.rs).
    ns: (t) => {
      if (t >= 1e9) return fixed(t / 1e9, 3) + ' s';
      if (t >= 1e6) return fixed(t / 1e6, 3) + ' ms';
      return fixed(t / 1e3, 1) + ' us';
    },
    short: (p) => (p ? p.split('/').pop() : '-'),
  };

  // ---------- DOM helpers
  function h(tag, props, ...kids) {
    const e = document.createElement(tag);
    if (props) {
      for (const [k, v] of Object.entries(props)) {
        if (v === null || v === undefined) continue;
        if (k === 'class') e.className = v;
        else if (k === 'text') e.textContent = v;
        else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
        else if (k === 'style') Object.assign(e.style, v);
        else e.setAttribute(k, v);
      }
    }
    for (const c of kids.flat()) {
      if (c === null || c === undefined || c === false) continue;
      e.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return e;
  }
  const nav = document.getElementById('nav');
  function section(id, title, note) {
    const s = h('section', { class: 'card', id }, h('h2', { text: title }), note ? h('p', { class: 'note', text: note }) : null);
    app.append(s);
    nav.append(h('a', { href: '#' + id, text: title.replace(/ \(.*/, '') }));
    return s;
  }

  function tile(id, label, value, sub) {
    return h('div', { class: 'tile', id }, h('div', { class: 'label', text: label }), h('div', { class: 'value', text: value }), sub ? h('div', { class: 'sub', text: sub }) : null);
  }

  // Colours: data sources and objects get stable colours from these palettes.
  const PALETTE = ['#4e79a7', '#f28e2b', '#e15759', '#76b7b2', '#59a14f', '#edc948', '#b07aa1', '#ff9da7',
    '#9c755f', '#1f77b4', '#d62728', '#2ca02c', '#9467bd', '#8c564b', '#e377c2', '#17becf', '#bcbd22',
    '#aec7e8', '#ffbb78', '#98df8a'];
  const sourceColour = new Map();
  ((R && R.data_sources) || []).forEach((d, i) => sourceColour.set(d.source, PALETTE[i % PALETTE.length]));
  function colourOfSource(name) {
    if (!sourceColour.has(name)) sourceColour.set(name, PALETTE[sourceColour.size % PALETTE.length]);
    return sourceColour.get(name);
  }

  // ---------- sortable tables
  // A column: {key, label, num, value(row) -> raw JSON value, cell(row, td) -> fills td, cls}.
  // Rows without a value ('-') go last whichever the direction.
  function compare(a, b, dir) {
    const na = a === null || a === undefined, nb = b === null || b === undefined;
    if (na || nb) return na === nb ? 0 : na ? 1 : -1;
    if (typeof a === 'string' && typeof b === 'string') return dir * a.localeCompare(b);
    return dir * (a < b ? -1 : a > b ? 1 : 0);
  }
  // opts.sorted: the key of the column the rows arrive sorted by (largest first), marked as such.
  // Columns with a `group` get a header row above theirs (perf c2c's two-level headers).
  function table(id, columns, rows, opts) {
    opts = opts || {};
    const thead = h('thead');
    const tbody = h('tbody');
    const t = h('table', { class: 'data', id }, thead, tbody);
    const hr = h('tr');
    let sorted = { col: -1, dir: 0 };
    const trs = rows.map((r, ri) => {
      const tr = h('tr', { 'data-index': String(ri) });
      for (const c of columns) {
        const v = c.value(r);
        const td = h('td', { 'data-col': c.key, class: [c.num ? 'num' : '', c.cls || ''].join(' ').trim() || null });
        if (v !== null && v !== undefined) td.setAttribute('data-value', String(v));
        if (c.cell) c.cell(r, td, v);
        else td.textContent = v === null || v === undefined ? '-' : c.num ? fmt.int(v) : String(v);
        tr.append(td);
      }
      tr._values = columns.map((c) => c.value(r));
      tr._index = ri;
      return tr;
    });
    columns.forEach((c, ci) => {
      const arrow = h('span', { class: 'arrow' });
      const th = h('th', {
        class: (c.num ? 'num ' : '') + 'sortable', 'data-col': c.key, title: c.title || 'click to sort',
        'aria-sort': 'none',
        onclick: () => {
          // Numbers sort largest first on the first click, text A-Z.
          const first = c.num ? -1 : 1;
          const dir = sorted.col === ci ? -sorted.dir : first;
          sorted = { col: ci, dir };
          trs.sort((a, b) => compare(a._values[ci], b._values[ci], dir) || a._index - b._index);
          tbody.replaceChildren(...trs);
          hr.querySelectorAll('th').forEach((x) => { x.setAttribute('aria-sort', 'none'); x.querySelector('.arrow').textContent = ''; });
          th.setAttribute('aria-sort', dir > 0 ? 'ascending' : 'descending');
          arrow.textContent = dir > 0 ? '▲' : '▼';
        },
      }, c.label, arrow);
      hr.append(th);
      if (opts.sorted === c.key) {
        sorted = { col: ci, dir: -1 };
        th.setAttribute('aria-sort', 'descending');
        arrow.textContent = '▼';
      }
    });
    if (columns.some((c) => c.group)) {
      const gr = h('tr', { class: 'groups' });
      for (let i = 0; i < columns.length;) {
        let j = i;
        while (j + 1 < columns.length && columns[j + 1].group === columns[i].group) j++;
        gr.append(h('th', { colspan: String(j - i + 1), class: columns[i].group ? 'group' : null, text: columns[i].group || '' }));
        i = j + 1;
      }
      thead.append(gr);
      thead.classList.add('grouped');
    }
    thead.append(hr);
    tbody.append(...trs);
    return h('div', { class: 'tablewrap' }, t);
  }

  // Column builders.
  const col = {
    count: (key, label, get, title) => ({ key, label, num: true, title, value: get, cell: (r, td, v) => { td.textContent = fmt.int(v); if (v === 0) td.classList.add('zero'); } }),
    share: (key, label, get) => ({
      key, label, num: true, cls: 'share', value: get,
      cell: (r, td, v) => {
        td.append(h('span', { class: 'bar', style: { width: Math.max(0, Math.min(1, v || 0)) * 100 + '%' } }), h('span', { class: 'txt', text: fmt.pct(v) }));
      },
    }),
    lat: (key, label, get, title) => ({ key, label, num: true, title, value: get, cell: (r, td, v) => { td.textContent = fmt.lat(v); } }),
    cycles: (key, label, get, title) => ({ key, label, num: true, title, value: get, cell: (r, td, v) => { td.textContent = v === null || v === undefined ? '-' : String(v); } }),
    text: (key, label, get, cls) => ({ key, label, cls, value: get, cell: (r, td, v) => { td.textContent = v === null || v === undefined || v === '' ? '-' : String(v); } }),
    hex: (key, label, get) => ({ key, label, num: true, cls: 'hex', value: get, cell: (r, td, v) => { td.textContent = fmt.hex(v); } }),
  };
  const L = (g, f) => (g && g.load_latency ? g.load_latency[f] : null);
  const X = (g, f) => (g && g.load_exec_latency ? g.load_exec_latency[f] : null);
  // "top source": the group's largest data source and its share of the group's loads (as the
  // terminal prints it).
  function topSource(g) {
    const total = (g.sources || []).reduce((a, s) => a + s.loads, 0);
    if (!g.sources || !g.sources.length || total === 0) return null;
    return { name: g.sources[0].source, share: g.sources[0].loads / total, total };
  }
  const topSourceCol = {
    key: 'top_source', label: 'top source', title: 'largest data source and its share of the loads',
    value: (g) => { const t = topSource(g); return t ? t.name : null; },
    cell: (g, td) => {
      const t = topSource(g);
      td.textContent = t ? t.name + ' ' + fixed(100 * t.share, 0) + '%' : '-';
    },
  };
  const mixCol = {
    key: 'source_mix', label: 'data-source mix', title: 'loads per data source',
    value: (g) => { const t = topSource(g); return t ? t.total : null; },
    cell: (g, td) => {
      const t = topSource(g);
      if (!t) { td.textContent = '-'; return; }
      const bar = h('div', { class: 'mix', title: g.sources.map((s) => s.source + ': ' + fmt.int(s.loads)).join('\n') });
      for (const s of g.sources) bar.append(h('span', { style: { width: (100 * s.loads / t.total) + '%', background: colourOfSource(s.source) } }));
      td.append(bar);
    },
  };
  const statCols = [
    col.share('cost', 'cost', (g) => g.cost_share),
    col.share('share', 'share', (g) => g.share),
    col.count('samples', 'samples', (g) => g.samples),
    col.count('loads', 'loads', (g) => g.loads),
    col.count('stores', 'stores', (g) => g.stores),
    col.lat('ld_lat_mean', 'ld lat', (g) => L(g, 'mean'), 'mean total load latency (cycles)'),
    col.cycles('ld_lat_p50', 'p50', (g) => L(g, 'p50'), 'median total load latency (cycles)'),
    col.cycles('ld_lat_p99', 'p99', (g) => L(g, 'p99'), '99th percentile total load latency (cycles)'),
    col.lat('exec_mean', 'exec', (g) => X(g, 'mean'), 'mean derived execution latency = total - issue - translation (cycles)'),
    col.count('l1d_miss', 'L1D miss', (g) => g.l1d_miss),
    col.count('llc_miss', 'LLC miss', (g) => g.llc_miss),
    col.count('tlb_walk', 'TLB walk', (g) => g.tlb_walk),
    col.count('remote', 'remote', (g) => g.remote),
    col.count('mispredicts', 'mispred', (g) => g.mispredicts, 'branches with the MISPRED event'),
    topSourceCol,
  ];
  // `--sort` orders (docs/report.md) -> the column showing that figure.
  const SORT_COLUMN = {
    cost: 'cost', samples: 'samples', loads: 'loads', stores: 'stores', latency: 'ld_lat_mean', p99: 'ld_lat_p99',
    exec: 'exec_mean', 'l1d-miss': 'l1d_miss', 'llc-miss': 'llc_miss', 'tlb-walk': 'tlb_walk',
    mispredicts: 'mispredicts', remote: 'remote',
  };

  // ---------- losses (first, and loud when anything was lost)
  function renderLosses() {
    const l = R ? R.recording.losses : C2C.losses;
    const items = [
      ['undecodable_bytes', 'undecodable bytes'],
      ['dropped_records', 'dropped records'],
      ['incomplete_records', 'incomplete records'],
      ['truncated_packets', 'truncated packets'],
      ['aux_truncated', 'AUX buffers truncated'],
      ['aux_partial', 'AUX buffers partial'],
      ['aux_collision', 'AUX buffers with collisions'],
      ['lost_events', 'PERF_RECORD_LOST events'],
      ['lost_records', 'records lost (PERF_RECORD_LOST)'],
    ];
    const some = items.filter(([k]) => l[k] > 0);
    const box = h('div', { class: 'losses ' + (some.length || l.problems.length ? 'some' : 'none'), id: 'losses-banner' });
    if (!some.length && !l.problems.length) {
      box.append(h('span', { class: 'title', text: 'Losses: none' }), ' — nothing was lost between the hardware and this report.');
    } else {
      box.append(h('div', { class: 'title', text: 'LOSSES: this recording is incomplete' }));
      const ul = h('ul');
      for (const [k, label] of some) ul.append(h('li', { 'data-loss': k }, h('b', { text: fmt.int(l[k]) }), ' ' + label));
      for (const p of l.problems) ul.append(h('li', { text: p }));
      box.append(ul);
    }
    app.append(box);
    if (R && R.recording.missing_files && R.recording.missing_files.length) {
      app.append(h('div', { class: 'warnbox', id: 'missing-files' },
        h('b', { text: 'Not found on this machine (no symbols; try --symfs): ' }),
        R.recording.missing_files.join(', ')));
    }
    return items;
  }

  // ---------- recording overhead and compute/prefetch tiles (also on a --no-spe page)
  function renderCostTiles(s) {
    const rec = R.recording;
    const ov = rec.overhead;
    if (ov) {
      // [NMO paper §VII-A]: the command's recorded runs against its native runs (spelunk record --overhead).
      const x = (v) => (v === null || v === undefined ? 'not available' : fmt.fixed(v, 2) + 'x');
      s.append(h('div', { class: 'tiles', id: 'overhead' },
        tile('tile-overhead', 'recording slowdown ([NMO paper §VII-A]; ' + ov.mode + ', ' + ov.runs + ' runs each)', x(ov.slowdown),
          'median wall: native ' + fmt.ns(ov.native_wall.median_ns) + ', recorded ' + fmt.ns(ov.recorded_wall.median_ns) + '; CPU time ' + x(ov.cpu_slowdown))));
    }
    const cp = R.compute;
    if (cp) {
      // NMO's perp and pf modes from the counter totals (docs/report.md, "Compute and prefetch").
      const it = cp.intensity;
      const mem = it.traffic.length ? it.traffic[0] : null;
      const perByte = (t) => (t === null ? '-' : t.flops_per_byte !== null ? fmt.fixed(t.flops_per_byte, 4) + ' FLOPs/B'
        : t.fp_simd_instructions_per_byte !== null ? fmt.fixed(t.fp_simd_instructions_per_byte, 4) + ' FP/SIMD instr./B' : '-');
      const pf = cp.prefetch;
      s.append(h('div', { class: 'tiles', id: 'compute-prefetch' },
        tile('tile-intensity', 'operational intensity (' + (mem ? mem.level : 'no traffic count') + ')', perByte(mem),
          (it.flops !== null ? fmt.int(Math.round(it.flops)) + ' FLOPs = ' + it.flops_formula
            : it.fp_simd_instructions !== null ? fmt.int(it.fp_simd_instructions) + ' FP/SIMD instructions (VFP_SPEC + ASE_SPEC), not FLOPs' : 'no FP count')
          + (mem ? '; ' + fmt.int(mem.bytes) + ' B = ' + mem.formula : '') + '; ridge point ' + (it.ridge_flops_per_byte === null ? it.ridge_note : fmt.fixed(it.ridge_flops_per_byte, 3))),
        tile('tile-prefetch', 'prefetch accuracy / coverage', fmt.pct(pf.accuracy) + ' / ' + fmt.pct(pf.coverage),
          Object.keys(pf.counts).map((k) => k + ' ' + fmt.int(pf.counts[k])).join(', ') || 'no prefetch events counted')));
      it.not_available.concat(pf.not_available.map((n) => 'prefetch ' + n)).forEach((n) => s.append(h('div', { class: 'note', text: 'not available: ' + n })));
    }
  }

  // ---------- summary
  function renderSummary(lossItems) {
    const rec = R.recording;
    const s = section('summary', 'Recording', 'What was recorded and how it was sampled (docs/report.md).');
    const tile = (id, label, value, sub) => h('div', { class: 'tile', id }, h('div', { class: 'label', text: label }), h('div', { class: 'value', text: value }), sub ? h('div', { class: 'sub', text: sub }) : null);
    const cpu = rec.cpu_model ? rec.cpu_model + (rec.midr ? ' (MIDR ' + rec.midr + ')' : '') : rec.midr ? 'unknown CPU (MIDR ' + rec.midr + ')' : 'unknown CPU';
    const sm = rec.sampling;
    let interval = 'unknown', intervalSub = 'no SPE sampling period in the recording';
    if (sm) {
      interval = sm.effective_interval !== null ? fmt.int(sm.effective_interval) + ' ops' : 'unknown';
      const parts = [];
      parts.push('requested -c ' + (sm.requested_period !== null ? fmt.int(sm.requested_period) : '-'));
      if (sm.min_interval !== null) parts.push('min ' + fmt.int(sm.min_interval));
      if (sm.base_interval !== null) parts.push('base ' + fmt.int(sm.base_interval));
      parts.push(sm.jitter ? 'jitter on' : 'no jitter');
      if (sm.note) parts.push(sm.note);
      intervalSub = parts.join('; ');
    }
    const t = R.totals;
    s.append(h('div', { class: 'tiles' },
      tile('tile-duration', 'duration (first to last sample)', fmt.ns(rec.duration_ns), fmt.int(rec.duration_ns) + ' ns'),
      tile('tile-samples', 'samples selected', fmt.int(rec.samples_selected), fmt.int(rec.samples_decoded) + ' decoded'),
      tile('tile-interval', 'sampling interval applied', interval, intervalSub),
      tile('tile-cpu', rec.emulated ? 'CPU (emulated by spelunk)' : 'CPU', rec.cpu_model || '-', cpu),
      tile('tile-ops', 'operations', fmt.int(t.loads) + ' loads', fmt.int(t.stores) + ' stores, ' + fmt.int(t.branches) + ' branches (' + fmt.int(t.mispredicts) + ' mispredicted), ' + fmt.int(t.other) + ' other'),
      tile('tile-latency', 'load latency (mean)', t.load_latency ? fmt.lat(t.load_latency.mean) + ' cycles' : '-',
        t.load_latency ? 'p50 ' + t.load_latency.p50 + ', p99 ' + t.load_latency.p99 + ', max ' + t.load_latency.max + '; exec mean ' + (t.load_exec_latency ? fmt.lat(t.load_exec_latency.mean) : '-') : 'no loads with a latency')));
    const q = rec.sampling_quality;
    if (q) {
      // [NMO paper eq. 1] and [SPE methodology table 2.2], from the PMU counts recorded with the profile.
      const ratio = (x) => (x === null || x === undefined ? '-' : fmt.fixed(x, 6));
      const accSub = q.accuracy === null ? 'no MEM_ACCESS count or interval'
        : '1 - |' + fmt.int(q.mem_access) + ' MEM_ACCESS - ' + fmt.int(q.memory_samples) + ' memory samples x ' + fmt.int(q.interval) + '| / MEM_ACCESS';
      s.append(h('div', { class: 'tiles', id: 'sampling-quality' },
        tile('tile-accuracy', 'sampling accuracy ([NMO paper eq. 1])', q.accuracy === null ? '-' : fmt.pct(q.accuracy), accSub),
        tile('tile-ratios', 'SPE sampling ratios (' + q.counts_from + ' counts)', ratio(q.sampling_ratio),
          'sampling (FEED/POP); filter ' + ratio(q.filter_ratio) + ' (FILTRATE/FEED); collision ' + ratio(q.collision_ratio) + ' (COLLISION/POP)')));
      q.notes.forEach((n) => s.append(h('div', { class: 'warnbox', text: n })));
    }
    renderCostTiles(s);
    if (R.filter && R.filter.length) {
      s.append(h('div', { class: 'chips', id: 'filter' }, h('span', { class: 'note', text: 'filter:' }), R.filter.map((f) => h('span', { class: 'chip', text: f }))));
    }
    const row = h('div', { class: 'row' });
    const lossTable = table('losses', [
      col.text('what', 'lost or skipped', (r) => r[1]),
      { key: 'count', label: 'count', num: true, value: (r) => rec.losses[r[0]], cell: (r, td, v) => { td.textContent = fmt.int(v); td.classList.add(v > 0 ? 'lost' : 'zero'); } },
    ], lossItems);
    row.append(h('div', null, h('h3', { text: 'Losses' }), lossTable));
    if (R.cpus && R.cpus.length) {
      const max = Math.max(...R.cpus.map((c) => c.samples), 1);
      row.append(h('div', null, h('h3', { text: 'Samples per CPU' }), table('cpus', [
        col.text('cpu', 'cpu', (c) => (c.cpu === null ? null : c.cpu)),
        { key: 'samples', label: 'samples', num: true, cls: 'share', value: (c) => c.samples,
          cell: (c, td, v) => td.append(h('span', { class: 'bar', style: { width: (100 * v / max) + '%' } }), h('span', { class: 'txt', text: fmt.int(v) })) },
      ], R.cpus)));
    }
    if (R.threads && R.threads.length) {
      row.append(h('div', { id: 'threads-panel' }, h('h3', { text: 'Threads' }), table('threads', [
        col.share('share', 'share', (r) => r.share),
        col.count('samples', 'samples', (r) => r.samples),
        col.text('pid', 'pid', (r) => r.pid),
        col.text('tid', 'tid', (r) => r.tid),
        col.text('name', 'name', (r) => r.name, 'key'),
      ], R.threads)));
    }
    s.append(row);
    if (R.threads && R.threads.length) nav.append(h('a', { href: '#threads-panel', text: 'Threads' }));
  }

  // ---------- hotspots
  function renderHotspots() {
    const order = R.hotspot_sort || 'cost';
    const s = section('hotspots', 'Hotspots', 'Samples attributed exactly (SPE has no skid) to the function, source line, instruction and DSO of their PC. Load latency in cycles; exec = total - issue - translation. Rows: the first by ' + order + ' (--sort); click a column to sort them.');
    const kinds = [
      ['functions', 'Functions', 'function'],
      ['lines', 'Source lines', 'source line'],
      ['instructions', 'Instructions', 'instruction'],
      ['dsos', 'DSOs', 'dso'],
    ];
    const tabs = h('div', { class: 'tabs', role: 'tablist' });
    const panels = [];
    kinds.forEach(([k, label, what], i) => {
      const rows = R.hotspots[k] || [];
      const cols = [
        { key: 'key', label: what, cls: 'key', value: (r) => r.key, cell: (r, td, v) => { td.textContent = v; if (r.file && k !== 'lines') td.title = r.file + (r.line ? ':' + r.line : ''); } },
      ];
      if (k === 'instructions') {
        cols.push(col.text('function', 'function+offset', (r) => (r.function ? r.function + (r.function_offset !== null ? '+0x' + r.function_offset.toString(16) : '') : null), 'key'));
      }
      if (k === 'lines') cols.push(col.text('function', 'function', (r) => r.function, 'key'));
      cols.push(...statCols);
      if (k !== 'dsos') cols.push(col.text('dso', 'dso', (r) => (r.dso ? fmt.short(r.dso) : null), 'path'));
      const panel = h('div', { class: 'tabpanel', role: 'tabpanel', id: 'panel-' + k, hidden: i === 0 ? null : '' },
        rows.length ? table('hotspots-' + k, cols, rows, { sorted: SORT_COLUMN[order] }) : h('div', { class: 'empty', text: 'no rows' }));
      const btn = h('button', {
        role: 'tab', id: 'tab-' + k, 'aria-selected': i === 0 ? 'true' : 'false', text: label + ' (' + rows.length + ')',
        onclick: () => {
          tabs.querySelectorAll('button').forEach((b) => b.setAttribute('aria-selected', 'false'));
          btn.setAttribute('aria-selected', 'true');
          panels.forEach((p) => { p.hidden = p !== panel; });
        },
      });
      tabs.append(btn);
      panels.push(panel);
    });
    s.append(tabs, ...panels);
  }

  // ---------- data sources
  function renderDataSources() {
    const s = section('data-sources-section', 'Load latency by data source', 'Loads per data source (where the data came from) and their latency in cycles: total, issue, translation and derived execution (total - issue - translation). Histograms: loads by total latency.');
    if (!R.data_sources.length) { s.append(h('div', { class: 'empty', text: 'no loads with a data source' })); return; }
    const sum = (f) => [
      col.lat(f + '_mean', f + ' mean', (d) => (d[f] ? d[f].mean : null)),
      col.cycles(f + '_p50', 'p50', (d) => (d[f] ? d[f].p50 : null)),
      col.cycles(f + '_p99', 'p99', (d) => (d[f] ? d[f].p99 : null)),
    ];
    s.append(table('data-sources', [
      { key: 'source', label: 'source', value: (d) => d.source, cell: (d, td, v) => { td.append(h('span', { class: 'swatch', style: { background: colourOfSource(v) } }), v); } },
      col.count('loads', 'loads', (d) => d.loads),
      col.share('share', 'share', (d) => d.share),
      ...sum('total'),
      col.cycles('total_p90', 'p90', (d) => (d.total ? d.total.p90 : null)),
      col.cycles('total_max', 'max', (d) => (d.total ? d.total.max : null)),
      col.lat('issue_mean', 'issue mean', (d) => (d.issue ? d.issue.mean : null)),
      col.lat('translation_mean', 'translation mean', (d) => (d.translation ? d.translation.mean : null)),
      ...sum('execution'),
    ], R.data_sources));
    const grid = h('div', { class: 'hists', id: 'histograms' });
    s.append(grid);
    for (const d of R.data_sources) {
      const hist = d.total_histogram;
      const box = h('div', { class: 'hist', 'data-source': d.source },
        h('div', { class: 'title' }, h('span', { class: 'swatch', style: { background: colourOfSource(d.source) } }), d.source,
          h('span', { class: 'note', text: ' — ' + fmt.int(d.loads) + ' loads; total latency, buckets of ' + hist.bucket_cycles + ' cycles' })));
      const plot = h('div', { class: 'plot' });
      box.append(plot);
      grid.append(box);
      if (!hist.buckets.length) { plot.append(h('div', { class: 'empty', text: 'no latencies' })); continue; }
      // The JSON lists non-empty buckets; empty buckets between them are drawn as zero.
      const w = hist.bucket_cycles || 1;
      const byStart = new Map(hist.buckets.map(([b, n]) => [b, n]));
      const first = hist.buckets[0][0], last = hist.buckets[hist.buckets.length - 1][0];
      const xs = [], ys = [];
      if ((last - first) / w <= 20000) {
        for (let b = first; b <= last; b += w) { xs.push(b); ys.push(byStart.get(b) || 0); }
      } else {
        for (const [b, n] of hist.buckets) { xs.push(b); ys.push(n); }
      }
      charts.push(() => {
        const u = new uPlot({
          width: Math.max(260, box.clientWidth - 18), height: 170,
          legend: { show: false },
          cursor: { drag: { x: true, y: false } },
          scales: { x: { time: false, range: (u, lo, hi) => [lo, hi + w] }, y: { range: (u, lo, hi) => [0, Math.max(1, hi) * 1.08] } },
          axes: [
            { size: 30, font: '11px system-ui, sans-serif', values: (u, v) => v.map((x) => String(x)) },
            { size: 48, font: '11px system-ui, sans-serif', values: (u, v) => v.map((x) => fmt.int(x)) },
          ],
          series: [
            { label: 'cycles' },
            { label: 'loads', fill: colourOfSource(d.source) + 'cc', stroke: colourOfSource(d.source), width: 0,
              paths: uPlot.paths.bars({ size: [1, Infinity], align: 1, gap: 0 }), points: { show: false } },
          ],
        }, [xs, ys], plot);
        window.spelunk.charts['hist:' + d.source] = u;
      });
    }
  }

  // ---------- objects
  function renderObjects() {
    const s = section('objects-section', 'Data objects', 'Loads and stores by the data object their address falls in: globals and statics from the binaries\' symbol tables, annotated objects, heap, stack, anonymous and file mappings.');
    if (!R.objects.length) { s.append(h('div', { class: 'empty', text: 'no memory accesses with a known object' })); return; }
    s.append(table('objects', [
      col.text('name', 'object', (o) => o.name, 'key'),
      col.text('kind', 'kind', (o) => o.kind),
      col.count('size', 'size (bytes)', (o) => o.size),
      col.share('share', 'share', (o) => o.share),
      col.count('samples', 'samples', (o) => o.samples),
      col.count('loads', 'loads', (o) => o.loads),
      col.count('stores', 'stores', (o) => o.stores),
      col.lat('ld_lat_mean', 'ld lat', (o) => L(o, 'mean'), 'mean total load latency (cycles)'),
      col.cycles('ld_lat_p99', 'p99', (o) => L(o, 'p99')),
      col.count('l1d_miss', 'L1D miss', (o) => o.l1d_miss),
      col.count('llc_miss', 'LLC miss', (o) => o.llc_miss),
      col.count('tlb_walk', 'TLB walk', (o) => o.tlb_walk),
      topSourceCol,
      mixCol,
      col.hex('start', 'start', (o) => o.start),
      col.text('dso', 'dso', (o) => (o.dso ? fmt.short(o.dso) : null), 'path'),
    ], R.objects));
  }

  // ---------- phases
  function renderPhases() {
    if (!R.phases || !R.phases.length) return;
    const s = section('phases-section', 'Phases', 'Named phases (annotation API): the samples taken while the phase was open on their thread (nested phases count in their parents too); first begin and last end since the first sample; thread time summed over instances. Instances are bands on the timeline.');
    s.append(table('phases', [
      col.text('name', 'phase', (p) => p.name, 'key'),
      { key: 'start_ns', label: 'start', num: true, value: (p) => p.start_ns, cell: (p, td, v) => { td.textContent = fmt.ns(v); } },
      { key: 'end_ns', label: 'end', num: true, value: (p) => p.end_ns, cell: (p, td, v) => { td.textContent = fmt.ns(v); } },
      { key: 'instances', label: 'instances', num: true, value: (p) => p.instances, cell: (p, td, v) => { td.textContent = fmt.int(v); } },
      { key: 'duration_ns', label: 'thread time', num: true, value: (p) => p.duration_ns, cell: (p, td, v) => { td.textContent = fmt.ns(v); } },
      ...statCols,
    ], R.phases));
  }


  // ---------- c2c: cache lines shared between cores (spelunk-c2c/1, docs/c2c.md)
  // Formatted as `spelunk c2c` prints them: shares with two decimals, mean cycles with none.
  const c2cPct = (x) => (x === null || x === undefined ? '-' : fixed(100 * x, 2) + '%');
  const c2cCycles = (x) => (x === null || x === undefined ? '-' : fixed(x, 0));
  const threadLabel = (t) => (t.tid !== null && t.tid !== undefined ? (t.name !== null && t.name !== undefined ? t.tid + ':' + t.name : String(t.tid))
    : t.cpu !== null && t.cpu !== undefined ? 'cpu' + t.cpu : '?');
  const symbolOf = (a) => (a.function ? a.function + (a.function_offset !== null && a.function_offset !== undefined ? '+0x' + a.function_offset.toString(16) : '') : '[unknown]');
  const sourceOf = (a) => (a.file && a.line !== null && a.line !== undefined ? fmt.short(a.file) + ':' + a.line : '-');
  const offsetText = (o) => '0x' + o.offset.toString(16) + (o.object ? ' ' + o.object : '');
  const VERDICT = { false_sharing: 'false sharing', true_sharing: 'true sharing', true_and_false_sharing: 'true+false sharing', none: 'none' };
  function verdictCol() {
    return {
      key: 'verdict', label: 'verdict', value: (l) => VERDICT[l.verdict] || l.verdict,
      cell: (l, td, v) => { td.append(h('span', { class: 'verdict ' + l.verdict, text: v, title: l.verdict_reason })); },
    };
  }
  function c2cPctCol(key, label, get, group, title) {
    return { key, label, group, title, num: true, value: get, cell: (r, td, v) => { td.textContent = c2cPct(v); if (v === 0) td.classList.add('zero'); } };
  }
  function grouped(c, group) { c.group = group; return c; }
  // The per-line counters (perf c2c's Shared Data Cache Line Table, docs/c2c.md).
  function countCols(get) {
    const g = (f) => (r) => get(r)[f];
    return [
      grouped(col.count('peer_total', 'Total', (r) => get(r).peer_local + get(r).peer_remote, 'loads served by another core\'s cache'), 'LdPeer'),
      grouped(col.count('peer_local', 'Local', g('peer_local')), 'LdPeer'),
      grouped(col.count('peer_remote', 'Remote', g('peer_remote')), 'LdPeer'),
      grouped(col.count('records', 'records', g('records')), 'Total'),
      grouped(col.count('loads', 'loads', g('loads')), 'Total'),
      grouped(col.count('stores', 'stores', g('stores')), 'Total'),
      grouped(col.count('store_l1_hit', 'L1Hit', g('store_l1_hit')), 'Stores'),
      grouped(col.count('store_l1_miss', 'L1Miss', g('store_l1_miss')), 'Stores'),
      grouped(col.count('store_na', 'N/A', g('store_na')), 'Stores'),
      grouped(col.count('load_fb', 'FB', g('load_fb')), 'Core Load Hit'),
      grouped(col.count('load_l1', 'L1', g('load_l1')), 'Core Load Hit'),
      grouped(col.count('load_l2', 'L2', g('load_l2')), 'Core Load Hit'),
      grouped(col.count('load_lcl_hit', 'LclHit', g('load_lcl_hit')), 'LLC Load Hit'),
      grouped(col.count('load_lcl_hitm', 'LclHitm', g('load_lcl_hitm')), 'LLC Load Hit'),
      grouped(col.count('load_rmt_hit', 'RmtHit', g('load_rmt_hit')), 'RMT Load Hit'),
      grouped(col.count('load_rmt_hitm', 'RmtHitm', g('load_rmt_hitm')), 'RMT Load Hit'),
      grouped(col.count('load_dram_lcl', 'Lcl', g('load_dram_lcl')), 'Load Dram'),
      grouped(col.count('load_dram_rmt', 'Rmt', g('load_dram_rmt')), 'Load Dram'),
    ];
  }
  function renderC2c() {
    if (!C2C) return;
    const s = section('c2c', 'Cache-line sharing (c2c)', 'Cache lines that moved between cores: a load served by another core\'s cache (a peer snoop) shows one. Lines ranked by their peer-snoop loads, in perf c2c\'s columns, with the data object and a false/true-sharing verdict; below, per line, its offsets and the code addresses touching them. Figures defined in docs/c2c.md.');
    const t = C2C.totals;
    const tile = (id, label, value, sub) => h('div', { class: 'tile', id }, h('div', { class: 'label', text: label }), h('div', { class: 'value', text: value }), sub ? h('div', { class: 'sub', text: sub }) : null);
    s.append(h('div', { class: 'tiles', id: 'c2c-totals' },
      tile('c2c-tile-records', 'loads and stores with an address', fmt.int(t.records), fmt.int(t.loads) + ' loads, ' + fmt.int(t.stores) + ' stores'),
      tile('c2c-tile-peer', 'peer-snoop loads', fmt.int(t.peer_local + t.peer_remote), fmt.int(t.peer_local) + ' local, ' + fmt.int(t.peer_remote) + ' remote'),
      tile('c2c-tile-lines', 'cache lines with peer snoops', fmt.int(t.lines_with_peer_snoops), C2C.lines.length + ' shown; line size ' + C2C.line_size + ' bytes')));
    if (C2C.filter && C2C.filter.length && !R) {
      s.append(h('div', { class: 'chips' }, h('span', { class: 'note', text: 'filter:' }), C2C.filter.map((f) => h('span', { class: 'chip', text: f }))));
    }
    if (!C2C.lines.length) {
      s.append(h('div', { class: 'empty', id: 'c2c-empty', text: t.records ? 'No cache line had a load served by another core\'s cache (no peer snoops): no sharing between cores was sampled.'
        : 'No selected sample is a load or store with a data address.' }));
      return;
    }
    const details = new Map();
    s.append(h('h3', { text: 'Shared data cache lines' }), table('c2c-lines', [
      { key: 'index', label: '#', num: true, value: (l) => l.index,
        cell: (l, td, v) => { td.append(h('a', { href: '#c2c-line-' + v, text: String(v), onclick: () => { const d = details.get(v); if (d) d.open = true; } })); } },
      col.hex('address', 'address', (l) => l.address),
      col.text('object', 'object', (l) => l.object, 'key'),
      verdictCol(),
      { key: 'peer_snoop_share', label: 'Peer Snoop', num: true, cls: 'share', title: 'the line\'s peer-snoop loads / those of all lines with any',
        value: (l) => l.peer_snoop_share,
        cell: (l, td, v) => { td.append(h('span', { class: 'bar', style: { width: Math.max(0, Math.min(1, v || 0)) * 100 + '%' } }), h('span', { class: 'txt', text: c2cPct(v) })); } },
      ...countCols((l) => l),
      col.count('pa_count', 'PA cnt', (l) => l.pa_count, 'distinct physical lines seen'),
      col.count('cpu_count', 'cpu cnt', (l) => l.cpu_count),
    ], C2C.lines, { sorted: 'peer_total' }));

    for (const line of C2C.lines) {
      const i = line.index;
      const box = h('details', { class: 'c2c-line', id: 'c2c-line-' + i, open: i === 0 ? '' : null });
      details.set(i, box);
      box.append(h('summary', null,
        h('b', { text: '#' + i + ' ' + fmt.hex(line.address) }), line.object ? ' (' + line.object + ')' : '', ' — ',
        h('span', { class: 'verdict ' + line.verdict, text: VERDICT[line.verdict] || line.verdict }),
        h('span', { class: 'note', text: ' peer snoops ' + fmt.int(line.peer_local + line.peer_remote) + ' (lcl ' + fmt.int(line.peer_local) + ', rmt ' + fmt.int(line.peer_remote) + '), records ' + fmt.int(line.records) + ', loads ' + fmt.int(line.loads) + ', stores ' + fmt.int(line.stores) })));
      box.append(h('p', { class: 'verdict-reason', id: 'c2c-reason-' + i }, h('b', { text: 'Why: ' }), line.verdict_reason));
      box.append(h('h3', { text: 'Offsets' }), table('c2c-offsets-' + i, [
        { key: 'offset', label: 'offset', num: true, cls: 'hex', value: (o) => o.offset, cell: (o, td, v) => { td.textContent = '0x' + v.toString(16); } },
        col.text('object', 'object+offset', (o) => o.object, 'key'),
        col.count('records', 'records', (o) => o.records),
        col.count('loads', 'loads', (o) => o.loads),
        col.count('stores', 'stores', (o) => o.stores),
        grouped(col.count('peer_local', 'Local', (o) => o.peer_local), 'LdPeer'),
        grouped(col.count('peer_remote', 'Remote', (o) => o.peer_remote), 'LdPeer'),
        grouped(col.count('store_l1_hit', 'L1Hit', (o) => o.store_l1_hit), 'Stores'),
        grouped(col.count('store_l1_miss', 'L1Miss', (o) => o.store_l1_miss), 'Stores'),
        grouped(col.count('store_na', 'N/A', (o) => o.store_na), 'Stores'),
        col.count('pa_count', 'PA cnt', (o) => o.pa_count),
        { key: 'pcs', label: 'code addresses (symbol, source line)', value: (o) => o.accesses.length,
          cell: (o, td) => { td.classList.add('list'); for (const a of o.accesses) td.append(h('div', { text: fmt.hex(a.pc) + ' ' + symbolOf(a) + ' ' + sourceOf(a) + ' (' + fmt.int(a.records) + ')' })); } },
        { key: 'threads', label: 'threads (loads/stores)', value: (o) => o.threads.length,
          cell: (o, td) => { td.classList.add('list'); for (const t of o.threads) td.append(h('div', { text: threadLabel(t.thread) + ' ' + fmt.int(t.loads) + '/' + fmt.int(t.stores) })); } },
      ], line.offsets));
      const rows = [];
      for (const o of line.offsets) for (const a of o.accesses) rows.push({ o, a });
      box.append(h('h3', { text: 'Code addresses (perf c2c\'s Pareto: one row per offset and code address)' }), table('c2c-pcs-' + i, [
        c2cPctCol('peer_remote_pct', 'Rmt', (r) => r.a.peer_remote_pct, 'Peer Snoop', 'this row\'s remote peer-snoop loads / the line\'s'),
        c2cPctCol('peer_local_pct', 'Lcl', (r) => r.a.peer_local_pct, 'Peer Snoop', 'this row\'s local peer-snoop loads / the line\'s'),
        c2cPctCol('store_l1_hit_pct', 'L1 Hit', (r) => r.a.store_l1_hit_pct, 'Store Refs'),
        c2cPctCol('store_l1_miss_pct', 'L1 Miss', (r) => r.a.store_l1_miss_pct, 'Store Refs'),
        c2cPctCol('store_na_pct', 'N/A', (r) => r.a.store_na_pct, 'Store Refs'),
        { key: 'offset', label: 'offset', cls: 'hex', num: true, value: (r) => r.o.offset, cell: (r, td) => { td.textContent = offsetText(r.o); } },
        col.count('pa_count', 'PA cnt', (r) => r.o.pa_count),
        col.hex('pc', 'code address', (r) => r.a.pc),
        grouped({ key: 'cycles_rmt', label: 'rmt peer', num: true, value: (r) => r.a.mean_cycles_peer_remote, cell: (r, td, v) => { td.textContent = c2cCycles(v); } }, 'cycles (mean)'),
        grouped({ key: 'cycles_lcl', label: 'lcl peer', num: true, value: (r) => r.a.mean_cycles_peer_local, cell: (r, td, v) => { td.textContent = c2cCycles(v); } }, 'cycles (mean)'),
        grouped({ key: 'cycles_load', label: 'load', num: true, value: (r) => r.a.mean_cycles_load, cell: (r, td, v) => { td.textContent = c2cCycles(v); } }, 'cycles (mean)'),
        col.count('records', 'records', (r) => r.a.records),
        col.count('loads', 'loads', (r) => r.a.loads),
        col.count('stores', 'stores', (r) => r.a.stores),
        grouped(col.count('peer_local', 'Local', (r) => r.a.peer_local), 'LdPeer'),
        grouped(col.count('peer_remote', 'Remote', (r) => r.a.peer_remote), 'LdPeer'),
        col.count('cpu_count', 'cpu cnt', (r) => r.a.cpu_count),
        col.text('symbol', 'symbol', (r) => symbolOf(r.a), 'list'),
        col.text('dso', 'shared object', (r) => (r.a.dso ? fmt.short(r.a.dso) : null), 'path'),
        col.text('source', 'source:line', (r) => sourceOf(r.a), 'list'),
        col.text('threads', 'threads', (r) => r.a.threads.map(threadLabel).join(', '), 'list'),
      ], rows));
      s.append(box);
    }
  }

  // ---------- phase bands behind a chart whose x is ms since the first sample
  const phaseColours = ['rgba(78,121,167,0.10)', 'rgba(242,142,43,0.10)', 'rgba(89,161,79,0.10)', 'rgba(176,122,161,0.10)'];
  // One band per phase instance of R.phase_spans, coloured by phase name (bands of threads
  // overlap); returns the bands drawn.
  function samplePhaseBands(u) {
    const ctx = u.ctx;
    let bands = 0;
    const spans = R.phase_spans || [];
    const names = [...new Set(spans.map((p) => p.name))];
    const labelledUntil = new Map(); // one label where instances of a name overlap
    spans.forEach((ph) => {
      const i = names.indexOf(ph.name);
      const x0 = u.valToPos(ph.start_ns / 1e6, 'x', true);
      const x1 = u.valToPos(ph.end_ns / 1e6, 'x', true);
      const l = Math.max(u.bbox.left, Math.min(x0, x1)), r = Math.min(u.bbox.left + u.bbox.width, Math.max(x0, x1));
      if (r <= l) return;
      ctx.save();
      ctx.fillStyle = phaseColours[i % phaseColours.length];
      ctx.fillRect(l, u.bbox.top, r - l, u.bbox.height);
      ctx.fillStyle = '#3a4355';
      ctx.font = (12 * uPlot.pxRatio) + 'px system-ui, sans-serif';
      if (!(ph.start_ns < (labelledUntil.get(ph.name) ?? -1))) {
        ctx.fillText(ph.name, l + 4 * uPlot.pxRatio, u.bbox.top + 14 * uPlot.pxRatio, Math.max(0, r - l - 8 * uPlot.pxRatio));
        labelledUntil.set(ph.name, ph.end_ns);
      }
      ctx.restore();
      bands++;
    });
    return bands;
  }

  // ---------- scatter plots of accesses against time (ms since the first sample)
  // Address and offset ticks at multiples of powers of two, so the hex labels are round.
  const pow2 = Array.from({ length: 64 }, (_, i) => 2 ** i);
  const hexAxis = (u, vals) => vals.map((v) => (v < 0 ? '' : '0x' + Math.round(v).toString(16)));
  // A few percent of margin; a flat range (one address, one instant) gets `flat` of room.
  const paddedRange = (flat) => (u, lo, hi) => {
    if (lo === null || hi === null) return [0, 1];
    const pad = hi > lo ? (hi - lo) * 0.04 : Math.max(1, Math.abs(lo) * 1e-9, flat);
    return [lo - pad, hi + pad];
  };
  // uPlot options of a zoomable scatter (x: ms, y: hexadecimal), phase bands behind it.
  function scatterOptions(holder, o) {
    return {
      mode: 2,
      width: Math.max(o.minWidth, holder.clientWidth), height: o.height,
      legend: { live: false },
      cursor: { dataIdx: () => null, points: { show: false }, drag: { x: true, y: true, uni: 30 } },
      scales: { x: { time: false, range: paddedRange(o.flat) }, y: { range: paddedRange(o.flat) } },
      axes: [
        { label: 'time since first sample (ms)', size: o.xSize, font: '11px system-ui, sans-serif', labelFont: '12px system-ui, sans-serif' },
        Object.assign({ label: o.yLabel, font: '11px ' + getComputedStyle(document.body).getPropertyValue('--mono'), labelFont: '12px system-ui, sans-serif', values: hexAxis }, o.yAxis),
      ],
      series: o.series,
      hooks: Object.assign({ drawClear: [(u) => { holder.setAttribute('data-phase-bands', String(samplePhaseBands(u))); }] }, o.hooks),
    };
  }

  // ---------- timeline: sampled addresses over time, coloured by object, phase bands
  function renderTimeline() {
    const tl = R.timeline;
    const s = section('timeline-section', 'Addresses over time',
      'Each dot is a sampled memory access: time since the first sample (x), data address (y), coloured by data object. A uniform random sample of ' + fmt.int(tl.population) + ' accesses. Drag to zoom (x and y), double-click to reset, click a legend entry to hide it.');
    const holder = h('div', { class: 'plot', id: 'timeline', 'data-points': '0', 'data-population': String(tl.population) });
    s.append(holder);
    if (!tl.points.length) { holder.append(h('div', { class: 'empty', text: 'no memory accesses with an address and a time' })); return; }
    // One series per object (most sampled first), then "other objects" and "no object".
    const MAXSERIES = PALETTE.length - 1;
    const groups = new Map();
    const groupOf = (p) => (p.object === null || p.object === undefined ? 'none' : p.object < MAXSERIES ? p.object : 'other');
    tl.points.forEach((p, i) => {
      const g = groupOf(p);
      if (!groups.has(g)) groups.set(g, []);
      groups.get(g).push(i);
    });
    const order = [...groups.keys()].sort((a, b) => (typeof a === 'number' ? a : a === 'other' ? 1e9 : 2e9) - (typeof b === 'number' ? b : b === 'other' ? 1e9 : 2e9));
    const series = [{}];
    const data = [null];
    const members = [];
    for (const g of order) {
      const idx = groups.get(g);
      const xs = new Float64Array(idx.length), ys = new Float64Array(idx.length);
      idx.forEach((pi, j) => { xs[j] = tl.points[pi].t_ns / 1e6; ys[j] = Number(tl.points[pi].address); });
      const label = g === 'none' ? 'no object' : g === 'other' ? 'other objects' : R.objects[g] ? R.objects[g].name : 'object ' + g;
      const colour = g === 'none' ? '#9aa3b2' : g === 'other' ? '#5d6677' : PALETTE[g % PALETTE.length];
      series.push({ label: label + ' (' + fmt.int(idx.length) + ')', stroke: colour, fill: colour + 'b0',
        paths: uPlot.paths.points(), points: { show: false, size: 4, width: 0 } });
      data.push([xs, ys]);
      members.push(idx);
    }
    const tip = h('div', { class: 'tooltip' });
    holder.append(tip);
    charts.push(() => {
      const u = new uPlot(scatterOptions(holder, {
        minWidth: 400, height: 460, flat: 64, xSize: 40, yLabel: 'data address', yAxis: { size: 120, incrs: pow2, space: 40 }, series,
        hooks: {
          setCursor: [(u) => {
            const { left, top } = u.cursor;
            if (left === undefined || left < 0) { tip.style.display = 'none'; return; }
            let best = null, bestD = 64;
            for (let si = 1; si < u.series.length; si++) {
              if (!u.series[si].show) continue;
              const [xs, ys] = u.data[si];
              for (let j = 0; j < xs.length; j++) {
                const dx = u.valToPos(xs[j], 'x') - left, dy = u.valToPos(ys[j], 'y') - top;
                const d = dx * dx + dy * dy;
                if (d < bestD) { bestD = d; best = [si, j]; }
              }
            }
            if (!best) { tip.style.display = 'none'; return; }
            const p = tl.points[members[best[0] - 1][best[1]]];
            const obj = p.object !== null && p.object !== undefined && R.objects[p.object] ? R.objects[p.object].name : 'no object';
            tip.replaceChildren(
              h('div', { text: (p.store ? 'store' : 'load') + ' @ ' + fmt.hex(p.address) }),
              h('div', { text: 'object: ' + obj }),
              h('div', { text: 't = ' + fmt.ns(p.t_ns) }),
              h('div', { text: (p.source ? 'source: ' + p.source : 'no data source') + (p.total_latency !== null && p.total_latency !== undefined ? '; latency ' + p.total_latency + ' cycles' : '') }));
            tip.style.display = 'block';
            const x = u.over.offsetLeft + left + 12, y = u.over.offsetTop + top + 12;
            tip.style.left = Math.min(x, holder.clientWidth - 260) + 'px';
            tip.style.top = y + 'px';
          }],
        },
      }), data, holder);
      holder.setAttribute('data-points', String(members.reduce((a, m) => a + m.length, 0)));
      window.spelunk.charts.timeline = u;
    });
  }

  // ---------- address over time per data object (docs/report.md, "Address over time per object")
  function renderObjectTimelines() {
    const views = R.object_timelines || [];
    if (!views.length) return;
    const s = section('object-timelines-section', 'Address over time per object',
      'The access pattern inside each of the most sampled data objects [NMO paper §VI-C]: time since the first sample (x), offset into the object (y), loads and stores. ' +
      'The points are the object\'s share of the timeline\'s uniform sample of ' + fmt.int(R.timeline.population) + ' accesses (an object with few samples has few points). Phase instances are bands. Drag to zoom, double-click to reset.');
    const grid = h('div', { class: 'object-timelines' });
    s.append(grid);
    views.forEach((v, k) => {
      const id = 'object-timeline-' + k;
      const holder = h('div', { class: 'plot', id, 'data-object': String(v.object), 'data-points': String(v.points.length) });
      const span = v.points.length
        ? fmt.int(v.points.length) + ' points of ' + fmt.int(v.samples) + ' samples; ' + fmt.ns(v.first_t_ns) + ' .. ' + fmt.ns(v.last_t_ns) + ', offsets ' + fmt.hex(v.min_offset_bytes) + ' .. ' + fmt.hex(v.max_offset_bytes)
        : 'no point of the timeline\'s sample fell in it (' + fmt.int(v.samples) + ' samples)';
      grid.append(h('div', { class: 'object-timeline' }, h('h3', { text: v.name + ' (' + fmt.int(v.size_bytes) + ' bytes)' }), h('p', { class: 'note', text: span }), holder));
      if (!v.points.length) return;
      charts.push(() => {
        const series = [{}];
        const data = [null];
        [['loads', false, PALETTE[0]], ['stores', true, PALETTE[1]]].forEach(([label, store, colour]) => {
          const pts = v.points.filter((p) => p.store === store);
          if (!pts.length) return;
          data.push([Float64Array.from(pts, (p) => p.t_ns / 1e6), Float64Array.from(pts, (p) => p.offset_bytes)]);
          series.push({ label: label + ' (' + fmt.int(pts.length) + ')', stroke: colour, fill: colour + 'b0', paths: uPlot.paths.points(), points: { show: false, size: 4, width: 0 } });
        });
        window.spelunk.charts[id] = new uPlot(scatterOptions(holder, {
          minWidth: 300, height: 220, flat: 8, xSize: 36, yLabel: 'offset (bytes)', yAxis: { size: 80, incrs: pow2, space: 30 }, series,
        }), data, holder);
      });
    });
  }

  // ---------- cumulative access distribution over the footprint (docs/report.md)
  function renderFootprint() {
    const F = R.footprint;
    if (!F) return;
    const s = section('footprint-section', 'Access distribution over the footprint',
      'The tiering question: ' + fmt.int(F.regions) + ' pages of ' + fmt.int(F.region_bytes) + ' bytes (per process) hold the ' + fmt.int(F.accesses) + ' sampled loads and stores with an address. ' +
      'Pages sorted hottest first: after the k hottest, their share of the touched footprint (x) against their share of the accesses (y). The dashed diagonal is every page equally accessed. Drag to zoom, double-click to reset.');
    s.append(table('footprint-key-points', [
      { key: 'access_percent', label: 'accesses', num: true, value: (r) => r.access_percent, cell: (r, td, v) => { td.textContent = v + '%'; } },
      col.count('regions', 'pages', (r) => r.regions),
      col.count('bytes', 'bytes', (r) => r.bytes),
      col.share('footprint_fraction', 'of footprint', (r) => r.footprint_fraction),
    ], F.key_points));
    s.append(h('p', { class: 'note', id: 'footprint-hottest', text: 'Touched footprint ' + fmt.int(F.footprint_bytes) + ' bytes; the hottest page has ' + fmt.pct(F.hottest_region_fraction) + ' of the accesses.' }));
    const holder = h('div', { class: 'plot', id: 'footprint-plot', 'data-points': String(F.curve.length) });
    s.append(holder);
    charts.push(() => {
      const xs = F.curve.map((p) => 100 * p.footprint_fraction);
      window.spelunk.charts.footprint = new uPlot({
        width: Math.max(400, holder.clientWidth), height: 300,
        scales: { x: { time: false, range: [0, 100] }, y: { range: [0, 100] } },
        axes: [{ label: 'share of the touched footprint (%), hottest pages first' }, { label: 'share of sampled accesses (%)', size: 60 }],
        series: [
          { label: 'footprint %', value: (u, v) => (v === null ? '-' : fixed(v, 1)) },
          { label: 'accesses %', stroke: PALETTE[0], width: 2, value: (u, v) => (v === null ? '-' : fixed(v, 1)) },
          { label: 'uniform', stroke: '#9aa3b2', width: 1, dash: [5, 5], value: (u, v) => (v === null ? '-' : fixed(v, 1)) },
        ],
      }, [xs, F.curve.map((p) => 100 * p.access_fraction), xs], holder);
    });
  }

  // ---------- timelines: resident memory and PMU-derived rates over time (docs/report.md)
  function renderTimelines() {
    const T = R && R.timelines;
    if (!T) return;
    const s = section('timelines-section', 'Memory and counters over time',
      'The process tree of ' + (T.command.join(' ') || 'the command') + ' sampled while it ran: time since the command\'s start (' + T.clock + '). ' +
      (T.spe ? '' : 'Recorded with --no-spe: no SPE samples, only these timelines. ') + 'Drag to zoom, double-click to reset, click a legend entry to hide it.');
    const MIB = 1024 * 1024;
    const phaseColours = ['rgba(78,121,167,0.10)', 'rgba(242,142,43,0.10)', 'rgba(89,161,79,0.10)', 'rgba(176,122,161,0.10)'];
    // Phase instances (on the timelines' clock) as bands behind a chart whose x is seconds.
    const bands = (holder) => (u) => {
      const spans = T.phases || [];
      const names = [...new Set(spans.map((p) => p.name))];
      const ctx = u.ctx;
      spans.forEach((ph) => {
        const x0 = u.valToPos(ph.start_ns / 1e9, 'x', true), x1 = u.valToPos(ph.end_ns / 1e9, 'x', true);
        const l = Math.max(u.bbox.left, Math.min(x0, x1)), r = Math.min(u.bbox.left + u.bbox.width, Math.max(x0, x1));
        if (r <= l) return;
        ctx.save();
        ctx.fillStyle = phaseColours[names.indexOf(ph.name) % phaseColours.length];
        ctx.fillRect(l, u.bbox.top, r - l, u.bbox.height);
        ctx.fillStyle = '#3a4355';
        ctx.font = (12 * uPlot.pxRatio) + 'px system-ui, sans-serif';
        ctx.fillText(ph.name, l + 4 * uPlot.pxRatio, u.bbox.top + 14 * uPlot.pxRatio, Math.max(0, r - l - 8 * uPlot.pxRatio));
        ctx.restore();
      });
      holder.setAttribute('data-phase-bands', String(spans.length));
    };
    const chart = (id, title, yLabel, xs, series) => {
      const holder = h('div', { class: 'plot', id, 'data-points': String(xs.length) });
      s.append(h('h3', { text: title }), holder);
      charts.push(() => {
        window.spelunk.charts[id] = new uPlot({
          width: Math.max(400, holder.clientWidth), height: 260,
          scales: { x: { time: false } },
          axes: [{ label: 'time since the command\'s start (s)' }, { label: yLabel, size: 70 }],
          series: [{ label: 't (s)', value: (u, v) => (v === null ? '-' : fixed(v, 3)) }].concat(series.map((se, i) => ({
            label: se.label, stroke: PALETTE[i % PALETTE.length], width: 1.5, value: (u, v) => (v === null || v === undefined ? '-' : fixed(v, 1)),
          }))),
          hooks: { drawClear: [bands(holder)] },
        }, [xs].concat(series.map((se) => se.values)), holder);
      });
    };
    const cap = T.capacity;
    if (cap) {
      const xs = cap.points.map((p) => p.t_ns / 1e9);
      const classes = ['heap', 'anon', 'file', 'stack', 'total'];
      const series = classes.map((c) => ({ label: c + ' (MiB)', values: cap.points.map((p) => p.all_nodes[c + '_bytes'] / MIB) }));
      if (cap.nodes.length > 1) {
        cap.nodes.forEach((n, k) => series.push({ label: 'node ' + (n === null ? '?' : n) + ' total (MiB)', values: cap.points.map((p) => p.nodes[k].total_bytes / MIB) }));
      }
      chart('capacity-plot', 'Resident memory (from /proc/PID/' + cap.source + ', every ' + fixed(cap.interval_ns / 1e6, 0) + ' ms)', 'MiB', xs, series);
      const pk = cap.peak;
      s.append(h('p', { class: 'note', id: 'capacity-peaks', text: 'Peaks per class (each at its own time): heap ' + fixed(pk.heap_bytes / MIB, 1) + ' MiB, anon ' + fixed(pk.anon_bytes / MIB, 1) +
        ' MiB, file ' + fixed(pk.file_bytes / MIB, 1) + ' MiB, stack ' + fixed(pk.stack_bytes / MIB, 1) + ' MiB; largest total ' + fixed(pk.total_bytes / MIB, 1) + ' MiB' +
        (cap.peak_t_ns !== null ? ' at ' + fmt.ns(cap.peak_t_ns) : '') + '.' }));
      cap.notes.forEach((n) => s.append(h('p', { class: 'note', text: 'note: ' + n })));
    }
    const C = T.counters;
    if (C) {
      const xs = C.intervals.map((iv) => iv.end_ns / 1e9);
      C.derived.forEach((d, k) => {
        const div = d.unit === 'bytes/s' || d.unit === 'beats/s' ? 1e6 : 1;
        const unit = d.unit === 'bytes/s' ? 'MB/s' : d.unit === 'beats/s' ? 'M beats/s' : d.unit;
        chart('counters-plot-' + d.name, d.name + ' = ' + d.formula, unit, xs, [{ label: d.name + ' (' + unit + ')', values: C.intervals.map((iv) => (iv.rates[k] === null ? null : iv.rates[k] / div)) }]);
        s.append(h('p', { class: 'note', text: d.source }));
      });
      if (C.events.length) {
        s.append(h('p', { class: 'note', id: 'counters-counted', text: 'Counted (' + [C.pmu, C.scope, C.grouping].filter((x) => x).join('; ') + '): ' +
          C.events.map((e) => e.name + (e.running_fraction !== null && e.running_fraction < 1 ? ' (counted ' + fixed(100 * e.running_fraction, 0) + '% of the time; scaled)' : '')).join(', ') }));
      }
      if (C.not_counted.length) {
        s.append(h('div', { class: 'warnbox', id: 'counters-not-counted' }, h('b', { text: 'Not counted (never shown as 0): ' }),
          h('ul', null, C.not_counted.map((n) => h('li', { text: n.name + ' (0x' + n.code.toString(16) + '): ' + n.reason })))));
      }
      C.notes.forEach((n) => s.append(h('p', { class: 'note', text: 'note: ' + n })));
    }
  }

  // ---------- top-down
  function renderTopdown() {
    if (!TD) return;
    const s = section('topdown', 'Top-down (PMU counters)', 'From spelunk topdown --json (' + TD.source.kind + ': ' + TD.source.detail + '). Stage 1 is the decision tree with the bottleneck marked; stage 2 lists the groups it points at. Formulas in docs/topdown.md.');
    if (TD.notes && TD.notes.length) {
      s.append(h('details', { class: 'note' }, h('summary', { text: TD.notes.length + ' notes on the counts' }), h('ul', null, TD.notes.map((n) => h('li', { text: n })))));
    }
    TD.scopes.forEach((sc, si) => {
      const ev = sc.totals;
      const byName = new Map(ev.metrics.map((m) => [m.name, m]));
      const title = (name) => (byName.get(name) ? byName.get(name).title : name);
      const fmtVal = (v, units) => (v === null || v === undefined ? 'n/a' : fixed(v, 2) + (units && units.startsWith('percent') ? '%' : ''));
      const box = h('div', { class: 'scope', id: 'topdown-scope-' + si });
      box.append(h('h3', { text: 'Scope: ' + sc.scope + ' — ' + sc.cpu.product + ' (' + sc.cpu.catalog + '), ' + (sc.cpu.slots !== null ? sc.cpu.slots + ' slots/cycle (' + sc.cpu.slots_source + ')' : 'slots unknown') }));
      (sc.cpu.notes || []).forEach((n) => box.append(h('p', { class: 'note', text: n })));
      const path = h('div', { class: 'bottleneck-path' }, 'Bottleneck: ');
      if (ev.bottleneck_path.length) ev.bottleneck_path.forEach((m, i) => path.append(i ? ' → ' : '', h('b', { text: title(m) })));
      else path.append(h('span', { class: 'note', text: 'none flagged' }));
      box.append(path);
      const tree = h('ul', { class: 'tree' });
      const node = (n) => {
        const pct = n.units && n.units.startsWith('percent') && n.value !== null ? Math.max(0, Math.min(100, n.value)) : null;
        const li = h('li', null, h('div', { class: 'node' + (n.flagged ? ' flagged' : '') + (n.bottleneck ? ' bottleneck' : ''), 'data-metric': n.metric },
          h('span', { class: 'name', text: title(n.metric) + (n.flagged ? ' ⚑' : '') }),
          h('span', { class: 'val', text: fmtVal(n.value, n.units) }),
          pct !== null ? h('div', { class: 'gauge' }, h('span', { style: { width: pct + '%' } })) : h('span', { class: 'note', text: n.units })));
        if (n.next_groups && n.next_groups.length && (n.flagged || n.bottleneck)) li.append(h('div', { class: 'next', text: 'look next at: ' + n.next_groups.join(', ') }));
        if (n.children && n.children.length) li.append(h('ul', null, n.children.map(node)));
        return li;
      };
      ev.tree.forEach((n) => tree.append(node(n)));
      box.append(tree);
      if (ev.warnings.length) {
        box.append(h('div', { class: 'warnbox' }, h('b', { text: 'Warnings' }), h('ul', null, ev.warnings.map((w) => h('li', { text: w.kind + ': ' + w.message })))));
      }
      const rows = [];
      for (const g of sc.groups) for (const m of g.metrics) if (byName.has(m)) rows.push([g.group, byName.get(m)]);
      box.append(h('h3', { text: 'Metrics by group' }), table('topdown-metrics-' + si, [
        col.text('group', 'group', (r) => r[0]),
        col.text('metric', 'metric', (r) => r[1].title, 'key'),
        { key: 'value', label: 'value', num: true, value: (r) => r[1].value, cell: (r, td, v) => { td.textContent = v === null ? 'n/a' : fixed(v, 2); if (v === null) td.title = r[1].unavailable ? JSON.stringify(r[1].unavailable) : ''; } },
        col.text('units', 'units', (r) => r[1].units),
        col.text('threshold', 'threshold', (r) => (r[1].threshold ? r[1].threshold.direction + ' ' + r[1].threshold.value : null)),
        { key: 'flagged', label: 'flagged', value: (r) => (r[1].flagged ? 1 : 0), cell: (r, td, v) => { td.textContent = v ? 'yes' : ''; if (v) td.classList.add('flag'); } },
        col.text('formula', 'formula', (r) => r[1].formula, 'path'),
      ], rows));
      if (sc.intervals && sc.intervals.length > 1) {
        const names = ev.tree.map((n) => n.metric);
        const plot = h('div', { class: 'plot' });
        box.append(h('h3', { text: 'Over time (' + sc.intervals.length + ' intervals)' }), plot);
        charts.push(() => {
          const xs = sc.intervals.map((iv) => iv.time_s);
          const ser = [{ label: 'time (s)' }];
          const dat = [xs];
          names.forEach((n, i) => {
            ser.push({ label: title(n), stroke: PALETTE[i % PALETTE.length], width: 1.5, value: (u, v) => (v === null ? '-' : fixed(v, 2)) });
            dat.push(sc.intervals.map((iv) => (iv.metrics[n] === undefined ? null : iv.metrics[n])));
          });
          window.spelunk.charts['topdown:' + si] = new uPlot({ width: Math.max(400, plot.clientWidth), height: 240, scales: { x: { time: false } }, series: ser }, dat, plot);
        });
      }
      s.append(box);
    });
  }

  // ---------- findings (spelunk-advise/1, docs/advise.md): the first screen
  function renderFindings() {
    if (!ADV) return;
    const s = section('findings', 'Findings', 'What is wrong, where, the fix and the gain to expect, most cycles at stake first (spelunk advise; rules, thresholds and sources in docs/advise.md).');
    const x = (v) => (v >= 10 ? fixed(v, 0) : fixed(v, 2)) + 'x';
    if (!ADV.findings.length) {
      s.append(h('div', { class: 'empty', id: 'findings-empty', text: 'No finding raised; ' + ADV.ruled_out.length + ' classes checked (below).' }));
    }
    const list = h('ol', { id: 'findings-list', class: 'findings' });
    for (const f of ADV.findings.slice(0, 10)) {
      const g = f.gain;
      const li = h('li', { class: 'finding' },
        h('div', { class: 'finding-title' }, h('span', { class: 'tag', text: f.class }), h('span', { text: ' ' + f.title })),
        h('div', { class: 'sub', text: 'fix: ' + f.fix.summary }),
        h('div', { class: 'sub', text: 'gain ' + x(g.low_speedup) + '-' + x(g.upper_speedup) + ' (likely ' + x(g.likely_speedup) + '); ' + fmt.pct(g.share_of_cycles) + ' of the cycles at stake' }));
      const d = h('details', {}, h('summary', { text: 'evidence and steps' }));
      for (const e of f.evidence) {
        const v = e.unit === 'share' ? fmt.pct(e.value) : fixed(e.value, 1) + ' ' + e.unit;
        const t = e.threshold === null || e.threshold === undefined ? '' : ' (threshold ' + (e.unit === 'share' ? fmt.pct(e.threshold) : String(e.threshold)) + ')';
        d.append(h('div', { class: 'sub', text: e.name + ': ' + v + t + ' over ' + fmt.int(e.samples) + ' samples' }));
      }
      for (const st of f.fix.steps) d.append(h('div', { class: 'sub', text: '- ' + st }));
      d.append(h('div', { class: 'sub', text: 'rule ' + f.rule + ': ' + f.source }));
      li.append(d);
      list.append(li);
    }
    s.append(list);
    if (ADV.ruled_out.length) {
      const d = h('details', { id: 'ruled-out' }, h('summary', { text: 'Ruled out (' + ADV.ruled_out.length + ')' }));
      for (const r of ADV.ruled_out) d.append(h('div', { class: 'sub', text: r.class + ' — ' + r.kind + ': ' + r.reason }));
      s.append(d);
    }
  }

  // ---------- go
  const charts = [];
  window.spelunk = { data: DATA, fmt, charts: {}, ready: false };
  // A --no-spe recording is its timelines alone: no samples, so no sample sections.
  const spe = !(R && R.timelines && !R.timelines.spe);
  renderFindings();
  const lossItems = spe ? renderLosses() : null;
  if (R && spe) {
    renderSummary(lossItems);
    renderHotspots();
    renderDataSources();
    renderObjects();
    renderPhases();
  }
  if (R && !spe && (R.recording.overhead || R.compute)) {
    renderCostTiles(section('summary', 'Recording', 'What recording cost and what the counters say (docs/report.md).'));
  }
  renderC2c();
  if (R && spe) {
    renderTimeline();
    renderObjectTimelines();
    renderFootprint();
  }
  renderTimelines();
  renderTopdown();
  // Charts are built once the layout exists (their width comes from it).
  for (const make of charts) make();
  window.spelunk.ready = true;
  document.documentElement.setAttribute('data-ready', 'true');
})();
