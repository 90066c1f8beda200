// Opens the pages tachyon writes in Debian's headless Chromium and uses them as a person
// would: clicks, types, picks a thread.
//
//   node check.cjs PLAYWRIGHT_DIR MANIFEST.json
//
// PLAYWRIGHT_DIR holds node_modules/playwright-core (scripts/viewer-tools.sh installs the
// version package-lock.json pins). MANIFEST lists pages:
//
//   [{"kind": "flamegraph", "page": "/path/x.html", "ui": true, "total": 1234,
//     "threads": {"31601": 600, ...}, "screenshot": "/path/x.png", "ready_ms": 1000},
//    {"kind": "diff", ..., "elided_total": 56.5},
//    {"kind": "heatmap", "page": "/path/dir/index.html", "ui": true, "total": 1234, "pages": 3,
//     "sources": 2, "screenshot": "/path/index.png", "file_screenshot": "/path/file.png"}, ...]
//
// `total` and `threads` come from another output than the page (the collapsed stacks), so
// that the page's numbers are checked against an independent count. Every page: no console
// error or uncaught exception, no request but the page itself (a heatmap: its own folder),
// the total shown equal to `total`, each thread picked showing that thread's total; a
// heatmap's index links exactly its `pages` file pages, each of which shows the samples the
// index gives it and has a row for each of its sampled lines.
//
// The rest are checks of the page's controls, whose subject is the content of the profile (a
// frame wide enough to click, a line that two colourings paint differently), so they run on
// pages marked "ui", which the test makes of inputs the repository holds or builds: the
// script ready within `ready_ms` of navigation (the best of three loads); clicking the widest
// frame below the root zooms to it (the frame then spans the chart) and reset zooms out;
// typing its name into the search box highlights exactly the frames whose name or file holds
// it (their pixels take the match colour). A differential page: the widest frame (at least 4
// pixels) whose own samples grew by over half is drawn red, the widest that shrank by over
// half blue (each colour seen on some page of the run), and the view of what only the
// baseline had shows `elided_total` samples (none is offered when it is null). A heatmap:
// `sources` file pages show their source text; the filter box hides the files that do not
// match; colouring by self repaints a line whose two shades differ by at least three degrees
// of hue (seen on some file page of each heatmap), and colouring by total again paints every
// line as the page was first painted (the page's Rust and its script agree). Prints a line
// per page and exits 1 if any check failed. Run it inside a network namespace of its own
// (`unshare -n`) so that nothing could be fetched even if a page tried.
'use strict';
const fs = require('fs');
const path = require('path');

const [playwrightDir, manifestPath] = process.argv.slice(2);
const { chromium } = require(path.join(playwrightDir, 'node_modules', 'playwright-core'));
const MATCH_RGB = [0xc0, 0x26, 0xd3];

function fail(problems, page, what) {
  problems.push(`${path.basename(page)}: ${what}`);
}

async function flamegraph(browser, entry, problems) {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const page = await context.newPage();
  const errors = [];
  const requests = [];
  const url = 'file://' + entry.page;
  page.on('console', (m) => { if (m.type() === 'error') errors.push('console: ' + m.text()); });
  page.on('pageerror', (e) => errors.push('uncaught: ' + e.message));
  page.on('request', (r) => { if (r.url() !== url) requests.push(r.url()); });
  await page.goto(url, { waitUntil: 'load' });
  const ready = await page.waitForFunction(() => window.tachyonFlame && window.tachyonFlame.readyMs > 0, null,
    { timeout: 20000 }).then(() => true, () => false);
  const before = problems.length;
  const f = (what) => fail(problems, entry.page, what);
  if (!ready) {
    f('the flame graph never became ready' + (errors.length ? ': ' + errors.join('; ') : ''));
    await context.close();
    return;
  }
  // The page's own time: the best of up to three loads. The other tests run beside this one
  // on two cores, and a first load of the deep recording's page took 1.2 s there where it
  // takes 0.3-0.5 s alone; a page slower than the limit at every load still fails.
  const loads = [await page.evaluate(() => window.tachyonFlame.readyMs)];
  while (entry.ui && entry.ready_ms && Math.min(...loads) > entry.ready_ms && loads.length < 3) {
    await page.reload({ waitUntil: 'load' });
    await page.waitForFunction(() => window.tachyonFlame && window.tachyonFlame.readyMs > 0, null, { timeout: 20000 });
    loads.push(await page.evaluate(() => window.tachyonFlame.readyMs));
  }
  const readyMs = Math.min(...loads);
  if (entry.ui && entry.ready_ms && readyMs > entry.ready_ms) {
    f(`ready after ${loads.map((t) => t.toFixed(0)).join(', ')} ms in ${loads.length} loads (limit ${entry.ready_ms})`);
  }
  const shown = async () => Number((await page.textContent('#total')).replace(/,/g, ''));
  const total = await shown();
  if (total !== entry.total) f(`total shown ${total}, the profile has ${entry.total}`);

  const data = await page.evaluate(() => JSON.parse(document.getElementById('profile-data').textContent));
  const n = data.nodes.parent.length;
  const name = (i) => data.strings[data.funcs.name[data.nodes.func[i]]];
  const file = (i) => data.strings[data.funcs.file[data.nodes.func[i]]];
  // The frame to click: the biggest one below the root that does not already span the chart.
  let target = -1;
  for (let i = 1; i < n; i++) {
    if (data.nodes.value[i] < data.nodes.value[0] && (target < 0 || data.nodes.value[i] > data.nodes.value[target])) target = i;
  }
  if (target < 0 && n > 1) target = 1;
  if (!entry.ui) target = -1;
  const canvasWidth = await page.evaluate(() => document.getElementById('flame').clientWidth);
  if (target > 0) {
    // Scrolled into view: the frame's row may be far down a deep profile's chart.
    await page.evaluate((i) => window.scrollBy(0, window.tachyonFlame.rect(i).y - 200), target);
    const r = await page.evaluate((i) => window.tachyonFlame.rect(i), target);
    await page.mouse.click(r.x + Math.min(r.w / 2, 5), r.y + r.h / 2);
    const zoomed = await page.evaluate(() => window.tachyonFlame.zoomed());
    const after = await page.evaluate((i) => window.tachyonFlame.rect(i), target);
    const crumb = await page.evaluate(() => { const a = document.querySelectorAll('#crumbs a'); return a[a.length - 1].textContent; });
    if (zoomed !== target) f(`clicking "${name(target)}" zoomed to node ${zoomed}, not ${target}`);
    else if (Math.abs(after.w - canvasWidth) > 1) f(`zoomed "${name(target)}" is ${after.w.toFixed(1)} px wide, the chart ${canvasWidth}`);
    else if (crumb !== name(target)) f(`breadcrumb shows "${crumb}" after zooming to "${name(target)}"`);
    await page.click('#reset');
    if (await page.evaluate(() => window.tachyonFlame.zoomed()) !== 0) f('reset did not zoom out');
  }

  // Search: a function's name, matched in names and files regardless of case.
  if (target > 0) {
    const term = name(target);
    await page.fill('#search', term);
    const t = term.toLowerCase();
    let want = 0;
    for (let i = 1; i < n; i++) if (name(i).toLowerCase().includes(t) || file(i).toLowerCase().includes(t)) want++;
    const got = await page.evaluate(() => window.tachyonFlame.matchedNodes());
    if (got !== want) f(`search "${term}" highlighted ${got} frames, ${want} match`);
    const r = await page.evaluate((i) => window.tachyonFlame.rect(i), target);
    const rgb = await page.evaluate(([x, y]) => {
      const c = document.getElementById('flame');
      const b = c.getBoundingClientRect();
      const k = window.devicePixelRatio || 1;
      return Array.from(c.getContext('2d').getImageData(Math.floor((x - b.left) * k), Math.floor((y - b.top) * k), 1, 1).data.slice(0, 3));
    }, [r.x + 1, r.y + r.h / 2]);
    if (rgb.some((v, k) => Math.abs(v - MATCH_RGB[k]) > 2)) f(`matched frame "${term}" drawn rgb(${rgb}), not the match colour`);
    const info = await page.textContent('#match-info');
    if (!/^Matched: [\d,]+ samples/.test(info)) f(`match summary reads "${info}"`);
    await page.fill('#search', '');
    if (await page.evaluate(() => window.tachyonFlame.matchedNodes()) !== 0) f('clearing the search left frames highlighted');
  }

  // Each thread picked shows its own total; all threads again the whole.
  const threads = Object.entries(entry.threads || {});
  if (threads.length > 1) {
    const options = await page.$$eval('#thread option', (os) => os.map((o) => [o.value, o.textContent]));
    for (const [tid, want] of threads.slice(0, 8)) {
      const option = options.find(([, label]) => label.startsWith('thread ' + tid + ' '));
      if (!option) { f(`no thread ${tid} in the selector`); continue; }
      await page.selectOption('#thread', option[0]);
      const got = await shown();
      if (got !== want) f(`thread ${tid}: total shown ${got}, the thread has ${want}`);
    }
    await page.selectOption('#thread', '-1');
    if (await shown() !== entry.total) f('all threads again: the total did not come back');
  }
  if (entry.kind === 'diff' && entry.ui) await differential(page, entry, data, f);
  if (entry.screenshot) await page.screenshot({ path: entry.screenshot });
  for (const e of errors) f(e);
  for (const r of requests) f('requested ' + r);
  if (problems.length === before) {
    const what = entry.ui ? 'controls checked' : 'numbers checked';
    console.log(`ok ${path.basename(entry.page)}: ${total} samples, ${n} frames, ready in ${readyMs.toFixed(0)} ms; ${what}`);
  }
  await context.close();
}

// The colour of the middle of node `i`'s first pixels.
async function pixel(page, i) {
  const r = await page.evaluate((k) => { window.scrollBy(0, window.tachyonFlame.rect(k).y - 200); return window.tachyonFlame.rect(k); }, i);
  return page.evaluate(([x, y]) => {
    const c = document.getElementById('flame');
    const b = c.getBoundingClientRect();
    const k = window.devicePixelRatio || 1;
    return Array.from(c.getContext('2d').getImageData(Math.floor((x - b.left) * k), Math.floor((y - b.top) * k), 1, 1).data.slice(0, 3));
  }, [r.x + 1, r.y + r.h / 2]);
}

// Colours the differential pages were checked for, over the whole run: each must be seen.
const coloursChecked = { red: 0, blue: 0 };

async function differential(page, entry, data, f) {
  const d = data.diff;
  const n = data.nodes.parent.length;
  // The widest frame that matches and is drawn at least 4 pixels wide (a frame of 0.05 % of
  // the samples is under a pixel: its colour cannot be read where it is).
  const widest = async (pred) => {
    const order = [];
    for (let i = 1; i < n; i++) if (pred(i)) order.push(i);
    order.sort((a, b) => data.nodes.value[b] - data.nodes.value[a]);
    for (const i of order.slice(0, 20)) {
      if ((await page.evaluate((k) => window.tachyonFlame.rect(k), i)).w >= 4) return i;
    }
    return -1;
  };
  const grew = await widest((i) => d.diff_pct[i] > 50);
  const shrank = await widest((i) => d.diff_pct[i] < -50);
  for (const [i, want] of [[grew, 'red'], [shrank, 'blue']]) {
    if (i < 0) continue;
    const [r, , b] = await pixel(page, i);
    const got = r > b + 40 ? 'red' : b > r + 40 ? 'blue' : 'grey';
    if (got !== want) f(`frame ${i} (change ${d.diff_pct[i].toFixed(1)} %) drawn ${got}, not ${want}`);
    coloursChecked[want]++;
  }
  const options = await page.$$eval('#view option', (os) => os.map((o) => [o.value, o.disabled]));
  const elidedOffered = options.some(([v, disabled]) => v === 'elided' && !disabled);
  if (elidedOffered !== (entry.elided_total !== null)) f(`the baseline-only view offered: ${elidedOffered}`);
  if (elidedOffered) {
    await page.selectOption('#view', 'elided');
    const total = Number((await page.textContent('#total')).replace(/,/g, ''));
    if (Math.abs(total - entry.elided_total) > 0.5) f(`baseline-only view: total ${total}, want ${entry.elided_total}`);
    const nodes = await page.evaluate(() => window.tachyonFlame.nodes());
    if (nodes !== data.elided.parent.length) f(`baseline-only view has ${nodes} nodes, the page ${data.elided.parent.length}`);
    await page.selectOption('#view', 'current');
    if (Number((await page.textContent('#total')).replace(/,/g, '')) !== entry.total) f('back to the new profile: total wrong');
  }
}

// A file page's colourings: by self, then by total again. Returns 1 if a line whose two shades
// differ by at least three degrees of hue was repainted (fewer may round to one colour), 0 if
// the page has no such line. Each colouring is on its own scale, log(n + 1) / log(max + 1),
// the hue 50 - 45 t as the page rounds it.
async function recolouring(page, name, data, f) {
  const max = { self: 0, total: 0 };
  for (const [, s, t] of data.lines) { max.self = Math.max(max.self, s); max.total = Math.max(max.total, t); }
  const hue = (n, m) => (n > 0 && m > 0 ? Math.round(50 - 45 * Math.min(1, Math.log(n + 1) / Math.log(m + 1))) : null);
  let line = null;
  let apart = 0;
  for (const [l, s, t] of data.lines) {
    const a = hue(s, max.self);
    const b = hue(t, max.total);
    if (a !== null && b !== null && Math.abs(a - b) > apart) { line = l; apart = Math.abs(a - b); }
  }
  const colours = () => page.$$eval('table.lines tbody tr', (rs) => rs.map((r) => [r.id, getComputedStyle(r).backgroundColor]));
  const first = await colours();
  await page.selectOption('#mode', 'self');
  const bySelf = new Map(await colours());
  await page.selectOption('#mode', 'total');
  const again = await colours();
  const differ = again.map(([id, c], i) => [id, first[i][1], c]).filter(([, a, b]) => a !== b).map(([id, a, b]) => `${id} ${a} → ${b}`);
  if (differ.length) f(`${name}: colouring by total again painted ${differ.length} lines otherwise, first ${differ[0]}`);
  if (line === null || apart < 3) return 0;
  const before = new Map(first).get('line-' + line);
  if (bySelf.get('line-' + line) === before) f(`${name}: colouring by self left line ${line} ${before}`);
  return 1;
}

async function heatmap(browser, entry, problems) {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const page = await context.newPage();
  const errors = [];
  const requests = [];
  const dir = 'file://' + path.dirname(entry.page) + '/';
  page.on('console', (m) => { if (m.type() === 'error') errors.push('console: ' + m.text()); });
  page.on('pageerror', (e) => errors.push('uncaught: ' + e.message));
  // Its own pages are all a heatmap may open.
  page.on('request', (r) => { if (!r.url().startsWith(dir)) requests.push(r.url()); });
  const f = (what) => fail(problems, entry.page, what);
  const before = problems.length;
  await page.goto('file://' + entry.page, { waitUntil: 'load' });
  const index = await page.evaluate(() => JSON.parse(document.getElementById('profile-data').textContent));
  const total = Number(await page.textContent('#total'));
  if (total !== entry.total) f(`index total ${total}, the profile has ${entry.total}`);
  const links = await page.$$eval('a.file', (as) => as.map((a) => a.getAttribute('href')));
  const want = Array.from({ length: entry.pages }, (_, k) => `file-${k + 1}.html`);
  if (JSON.stringify(links) !== JSON.stringify(want)) f(`index links ${JSON.stringify(links)}, the folder has ${JSON.stringify(want)}`);
  if (entry.file_screenshot === undefined) entry.file_screenshot = null;
  // The filter: the first file's last path part.
  if (entry.ui && index.files.length > 1) {
    const part = index.files[0].file.split('/').pop().toLowerCase();
    await page.fill('#filter', part);
    const shown = await page.$$eval('table.files tbody tr', (rs) => rs.filter((r) => r.style.display !== 'none').length);
    const match = index.files.filter((x) => x.file.toLowerCase().includes(part)).length;
    if (shown !== match) f(`filter "${part}" shows ${shown} files, ${match} match`);
    await page.fill('#filter', '');
  }
  if (entry.screenshot) await page.screenshot({ path: entry.screenshot });
  let sources = 0;
  let recoloured = 0;
  for (const [k, file] of index.files.entries()) {
    if (k >= 40) break;
    await page.goto(dir + file.page, { waitUntil: 'load' });
    const data = await page.evaluate(() => JSON.parse(document.getElementById('profile-data').textContent));
    const shown = Number(await page.textContent('#total'));
    if (shown !== file.total) f(`${file.page}: ${shown} samples shown, the index says ${file.total}`);
    const rows = await page.$$eval('table.lines tbody tr', (rs) => rs.map((r) => r.id));
    for (const [line] of data.lines) if (!rows.includes('line-' + line)) f(`${file.page}: no row for line ${line}`);
    const hot = await page.$$eval('a.hot-link', (as) => as.map((a) => a.getAttribute('href').slice(1)));
    for (const id of hot) if (!rows.includes(id)) f(`${file.page}: hottest-line link #${id} has no row`);
    if (data.source !== null) sources++;
    else if (!(await page.$('#missing'))) f(`${file.page}: no source and no word of it`);
    if (entry.ui) recoloured += await recolouring(page, file.page, data, f);
    if (k === 0 && entry.file_screenshot) {
      await page.selectOption('#mode', 'total');
      await page.screenshot({ path: entry.file_screenshot });
    }
  }
  if (entry.ui && recoloured === 0) f('no file page has a line whose two colourings differ by three degrees of hue');
  if (entry.ui && sources < entry.sources) f(`${sources} pages show their source, want ${entry.sources}`);
  for (const e of errors) f(e);
  for (const r of requests) f('requested ' + r);
  if (problems.length === before) {
    const what = entry.ui ? `${sources} with source, ${recoloured} recoloured` : 'numbers checked';
    console.log(`ok ${entry.page}: ${total} samples, ${links.length} file pages; ${what}`);
  }
  await context.close();
}

async function main() {
  const manifest = JSON.parse(fs.readFileSync(manifestPath, 'utf8'));
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync', '--disable-dev-shm-usage'],
  });
  const problems = [];
  try {
    for (const entry of manifest) {
      if (entry.kind === 'flamegraph' || entry.kind === 'diff') await flamegraph(browser, entry, problems);
      else if (entry.kind === 'heatmap') await heatmap(browser, entry, problems);
      else problems.push(`${entry.page}: unknown kind ${entry.kind}`);
    }
  } finally {
    await browser.close();
  }
  // Every run's differential pages must have shown a grown and a shrunk frame somewhere.
  if (manifest.some((e) => e.kind === 'diff' && e.ui)) {
    for (const [colour, pages] of Object.entries(coloursChecked)) {
      if (pages === 0) problems.push(`no differential page had a frame wide enough to check for ${colour}`);
    }
    console.log(`differential colours checked: red on ${coloursChecked.red} pages, blue on ${coloursChecked.blue}`);
  }
  for (const p of problems) console.log('FAIL ' + p);
  process.exit(problems.length ? 1 : 0);
}

main().catch((e) => { console.log('FAIL ' + (e.stack || e)); process.exit(1); });
