// The interactive flame graph of `tachyon convert --to flamegraph-html` and `tachyon diff
// --html`: reads the profile the page embeds (#profile-data, written by
// std-adapter/src/html/flame.rs and diff.rs), draws it on a canvas root at the top, and
// answers clicks (zoom), the search box (highlight) and the thread selector (numbers of one
// thread). A differential page colours each frame by how its own samples changed, and can
// show the tree of what only the baseline had instead. Nothing is fetched.
// `window.tachyonFlame` lets a test ask what is drawn where.
(function () {
  'use strict';
  const data = JSON.parse(document.getElementById('profile-data').textContent);
  const S = data.strings;
  const diff = data.diff || null;
  // The tree drawn: the profile's, or on a differential page the baseline's elided paths.
  let nodes, N, parent, func, depth, size, maxDepth, delta;
  function useTree(tree, deltas) {
    nodes = tree;
    N = tree.parent.length;
    parent = tree.parent;
    func = tree.func;
    delta = deltas;
    // Nodes come in preorder, each after its parent: depths and subtree sizes in two passes.
    depth = new Int32Array(N);
    size = new Int32Array(N).fill(1);
    maxDepth = 0;
    for (let i = 1; i < N; i++) {
      depth[i] = depth[parent[i]] + 1;
      if (depth[i] > maxDepth) maxDepth = depth[i];
    }
    for (let i = N - 1; i > 0; i--) size[parent[i]] += size[i];
  }
  useTree(data.nodes, diff);
  const fname = data.funcs.name, ffile = data.funcs.file, fline = data.funcs.line;
  const ROW = 18;
  const canvas = document.getElementById('flame');
  const ctx = canvas.getContext('2d');
  const tip = document.getElementById('tip');
  const totalEl = document.getElementById('total');
  const crumbs = document.getElementById('crumbs');
  const search = document.getElementById('search');
  const matchInfo = document.getElementById('match-info');
  const threadSel = document.getElementById('thread');

  function nameOf(i) { return i === 0 ? 'all' : S[fname[func[i]]]; }
  function whereOf(i) {
    if (i === 0) return '';
    const f = func[i], file = S[ffile[f]], line = fline[f];
    if (file === '~' && line === 0) return '';
    return line > 0 ? file + ':' + line : file;
  }

  // The numbers shown: all threads', or one thread's.
  let value = Float64Array.from(nodes.value);
  let own = Float64Array.from(nodes.self);
  // A thread's numbers: each node's rows (its own samples and those of the nodes below it
  // the page leaves out) plus its children's, added up children first (they come after
  // their parents).
  function selectThread(t) {
    if (t < 0) {
      value = Float64Array.from(nodes.value);
      own = Float64Array.from(nodes.self);
      return;
    }
    value = new Float64Array(N);
    own = new Float64Array(N);
    const rows = data.thread_rows;
    for (let i = 0; i < N; i++) {
      const row = rows[i];
      for (let k = 0; k < row.length; k += 3) {
        if (row[k] === t) { value[i] = row[k + 1]; own[i] = row[k + 2]; break; }
      }
    }
    for (let i = N - 1; i > 0; i--) value[parent[i]] += value[i];
  }

  let zoom = 0;
  let term = '';
  let matched = new Uint8Array(N);
  let matchedSamples = 0;
  let x = new Float64Array(N), w = new Float64Array(N), cursor = new Float64Array(N);
  // What the last draw put where, per row: node numbers in left-to-right order.
  let drawn = [];

  function layout() {
    x.fill(0); w.fill(0);
    for (let a = zoom; ; a = parent[a]) { x[a] = 0; w[a] = value[a] > 0 ? 1 : 0; if (a === 0) break; }
    const whole = value[zoom] || 1;
    cursor[zoom] = 0;
    for (let i = zoom + 1; i < zoom + size[zoom]; i++) {
      const p = parent[i];
      x[i] = cursor[p];
      w[i] = value[i] / whole;
      cursor[p] += w[i];
      cursor[i] = x[i];
    }
  }

  function hue(s) {
    let h = 0;
    for (let k = 0; k < s.length; k++) h = (h * 31 + s.charCodeAt(k)) >>> 0;
    return h;
  }

  function draw() {
    const width = canvas.clientWidth;
    const rows = maxDepth + 1;
    const ratio = window.devicePixelRatio || 1;
    canvas.height = rows * ROW * ratio;
    canvas.width = width * ratio;
    canvas.style.height = rows * ROW + 'px';
    ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
    ctx.clearRect(0, 0, width, rows * ROW);
    ctx.font = '12px ui-monospace, "DejaVu Sans Mono", monospace';
    ctx.textBaseline = 'middle';
    const charWidth = ctx.measureText('M').width || 7;
    drawn = [];
    for (let r = 0; r < rows; r++) drawn.push([]);
    const searching = term !== '';
    const ancestors = [];
    for (let a = zoom; a !== 0; a = parent[a]) ancestors.push(a);
    ancestors.push(0);
    ancestors.reverse();
    const one = (i) => {
      const px = x[i] * width, pw = w[i] * width;
      const y = depth[i] * ROW;
      const h = hue(nameOf(i));
      let fill;
      if (searching && matched[i]) fill = '#c026d3';
      else if (i === 0) fill = '#b0b0b8';
      else if (delta) fill = changeColour(i, searching);
      else fill = 'hsl(' + (10 + h % 45) + ',' + (70 + (h >> 8) % 20) + '%,' + (searching ? 82 : 60 + (h >> 16) % 12) + '%)';
      ctx.fillStyle = fill;
      ctx.fillRect(px, y, Math.max(pw - 1, 0.5), ROW - 1);
      if (pw > charWidth * 3) {
        const label = nameOf(i);
        const fit = Math.floor((pw - 6) / charWidth);
        ctx.fillStyle = searching && matched[i] ? '#fff' : '#111';
        ctx.fillText(fit >= label.length ? label : label.slice(0, Math.max(fit - 1, 1)) + '…', px + 3, y + ROW / 2);
      }
      drawn[depth[i]].push(i);
    };
    for (const a of ancestors) if (w[a] > 0) one(a);
    const end = zoom + size[zoom];
    for (let i = zoom + 1; i < end; ) {
      if (w[i] * width < 0.5) { i += size[i]; continue; }
      one(i);
      i++;
    }
  }

  function render() {
    layout();
    draw();
    totalEl.textContent = value[0].toLocaleString('en-US');
    crumbs.textContent = '';
    const path = [];
    for (let a = zoom; ; a = parent[a]) { path.push(a); if (a === 0) break; }
    path.reverse();
    path.forEach((a, k) => {
      if (k > 0) crumbs.appendChild(document.createTextNode(' › '));
      const link = document.createElement('a');
      link.textContent = nameOf(a);
      link.dataset.node = a;
      link.addEventListener('click', () => { zoom = a; render(); });
      crumbs.appendChild(link);
    });
    showMatches();
  }

  function nodeAt(cx, cy) {
    const row = Math.floor(cy / ROW);
    const list = drawn[row];
    if (!list) return -1;
    const width = canvas.clientWidth;
    for (const i of list) {
      if (cx >= x[i] * width && cx < (x[i] + w[i]) * width) return i;
    }
    return -1;
  }

  // Red where a frame's own samples grew since the baseline, blue where they shrank, by how
  // much (diff_pct, capped at ±100 %); grey where they stayed.
  function changeColour(i, pale) {
    const t = Math.max(-1, Math.min(1, delta.diff_pct[i] / 100));
    const light = pale ? 90 : 92 - Math.abs(t) * 40;
    if (Math.abs(t) < 0.005) return 'hsl(220,6%,' + (pale ? 90 : 82) + '%)';
    return (t > 0 ? 'hsl(0,75%,' : 'hsl(215,75%,') + light + '%)';
  }

  function signed(v) { return (v > 0 ? '+' : '') + v.toLocaleString('en-US', { maximumFractionDigits: 1 }); }

  function pct(n, d) { return d > 0 ? (100 * n / d).toFixed(2) + '%' : '–'; }

  canvas.addEventListener('mousemove', (e) => {
    const r = canvas.getBoundingClientRect();
    const i = nodeAt(e.clientX - r.left, e.clientY - r.top);
    if (i < 0) { tip.style.display = 'none'; return; }
    const where = whereOf(i);
    tip.innerHTML = '';
    const b = document.createElement('b');
    b.textContent = nameOf(i);
    tip.appendChild(b);
    if (where) {
      const d = document.createElement('div');
      d.className = 'where';
      d.textContent = where;
      tip.appendChild(d);
    }
    const lines = [
      value[i].toLocaleString('en-US') + ' samples, ' + pct(value[i], value[0]) + ' of all' +
        (zoom !== 0 ? ', ' + pct(value[i], value[zoom]) + ' of the zoomed frame' : ''),
      own[i].toLocaleString('en-US') + ' samples in the frame itself (' + pct(own[i], value[0]) + ')',
    ];
    if (delta && i !== 0) {
      const b = delta.baseline[i];
      lines.push('baseline: ' + b.toLocaleString('en-US', { maximumFractionDigits: 1 }) + ' in the frame itself, ' +
        delta.baseline_total[i].toLocaleString('en-US', { maximumFractionDigits: 1 }) + ' at or below it');
      lines.push('change: ' + signed(delta.diff[i]) + ' samples (' + signed(delta.diff_pct[i]) + '%)');
    }
    for (const t of lines) { const d = document.createElement('div'); d.textContent = t; tip.appendChild(d); }
    tip.style.display = 'block';
    tip.style.left = Math.min(e.clientX + 12, window.innerWidth - tip.offsetWidth - 4) + 'px';
    tip.style.top = (e.clientY + 14) + 'px';
  });
  canvas.addEventListener('mouseleave', () => { tip.style.display = 'none'; });
  canvas.addEventListener('click', (e) => {
    const r = canvas.getBoundingClientRect();
    const i = nodeAt(e.clientX - r.left, e.clientY - r.top);
    if (i >= 0) { zoom = i; render(); }
  });
  document.getElementById('reset').addEventListener('click', () => { zoom = 0; render(); });
  document.addEventListener('keydown', (e) => {
    if (e.key === 'Escape' && document.activeElement !== search) { zoom = 0; render(); }
  });

  function findMatches() {
    matched.fill(0);
    if (term === '') return;
    const t = term.toLowerCase();
    const hit = new Uint8Array(fname.length);
    for (let f = 0; f < fname.length; f++) {
      hit[f] = S[fname[f]].toLowerCase().includes(t) || S[ffile[f]].toLowerCase().includes(t) ? 1 : 0;
    }
    for (let i = 1; i < N; i++) matched[i] = hit[func[i]];
  }

  // Samples in matching frames under the zoomed one, each counted once (not again below a
  // matching frame).
  function showMatches() {
    matchedSamples = 0;
    if (term === '') { matchInfo.textContent = ''; return; }
    const end = zoom + size[zoom];
    for (let i = zoom; i < end; ) {
      if (matched[i]) { matchedSamples += value[i]; i += size[i]; } else i++;
    }
    matchInfo.textContent = 'Matched: ' + matchedSamples.toLocaleString('en-US') + ' samples (' +
      pct(matchedSamples, value[zoom]) + ')';
  }

  search.addEventListener('input', () => { term = search.value.trim(); findMatches(); render(); });

  if (data.threads.length > 1) {
    const perThread = new Float64Array(data.threads.length);
    for (const row of data.thread_rows) for (let k = 0; k < row.length; k += 3) perThread[row[k]] += row[k + 1];
    data.threads.forEach((tid, t) => {
      const n = perThread[t];
      const o = document.createElement('option');
      o.value = String(t);
      o.textContent = 'thread ' + tid + ' (' + n.toLocaleString('en-US') + ')';
      threadSel.appendChild(o);
    });
    threadSel.addEventListener('change', () => { selectThread(Number(threadSel.value)); render(); });
  } else {
    threadSel.disabled = true;
  }

  window.addEventListener('resize', () => render());

  // A differential page's second tree: what only the baseline had.
  const viewSel = document.getElementById('view');
  if (viewSel) {
    if (!data.elided) viewSel.options[1].disabled = true;
    viewSel.addEventListener('change', () => {
      const elided = viewSel.value === 'elided' && data.elided;
      useTree(elided ? data.elided : data.nodes, elided ? data.elided : diff);
      threadSel.value = '-1';
      threadSel.disabled = elided || data.threads.length < 2;
      selectThread(-1);
      zoom = 0;
      matched = new Uint8Array(N);
      x = new Float64Array(N); w = new Float64Array(N); cursor = new Float64Array(N);
      findMatches();
      render();
    });
  }

  const api = {
    total: () => value[0],
    zoomed: () => zoom,
    find: (name) => { for (let i = 1; i < N; i++) if (nameOf(i) === name) return i; return -1; },
    name: nameOf,
    value: (i) => value[i],
    // The node's box in the viewport's CSS pixels (after scrolling it into view).
    rect: (i) => {
      const r = canvas.getBoundingClientRect(), width = canvas.clientWidth;
      return { x: r.left + x[i] * width, y: r.top + depth[i] * ROW, w: w[i] * width, h: ROW - 1 };
    },
    matchedSamples: () => matchedSamples,
    matchedNodes: () => { let n = 0; for (let i = 0; i < N; i++) n += matched[i]; return n; },
    drawnNodes: () => drawn.reduce((n, row) => n + row.length, 0),
    nodes: () => N,
    readyMs: 0,
  };
  window.tachyonFlame = api;
  render();
  api.readyMs = performance.now();
})();
