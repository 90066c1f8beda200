// The heatmap's pages (`tachyon convert --to heatmap`, std-adapter/src/html/heatmap.rs): on
// the index, the filter box hides the files whose path does not hold what is typed; on a
// file's page, the selector colours the lines by the samples that ran through them or by the
// samples in them alone (CPython's intensity, log(n + 1) / log(max + 1)). The numbers are in
// the page itself; this only recolours and filters. Nothing is fetched.
(function () {
  'use strict';
  const data = JSON.parse(document.getElementById('profile-data').textContent);
  const filter = document.getElementById('filter');
  if (filter) {
    const rows = Array.from(document.querySelectorAll('table.files tbody tr'));
    filter.addEventListener('input', () => {
      const t = filter.value.trim().toLowerCase();
      for (const r of rows) {
        const name = r.querySelector('a.file').textContent.toLowerCase();
        r.style.display = name.includes(t) ? '' : 'none';
      }
    });
  }
  const mode = document.getElementById('mode');
  if (mode) {
    const rows = Array.from(document.querySelectorAll('table.lines tbody tr'));
    const max = { self: 0, total: 0 };
    for (const [, s, t] of data.lines) { max.self = Math.max(max.self, s); max.total = Math.max(max.total, t); }
    const paint = () => {
      const key = mode.value;
      for (const r of rows) {
        const n = Number(r.dataset[key]);
        if (n > 0 && max[key] > 0) {
          const t = Math.min(1, Math.log(n + 1) / Math.log(max[key] + 1));
          r.style.background = 'hsla(' + (50 - 45 * t).toFixed(0) + ',90%,55%,' + (0.12 + 0.6 * t).toFixed(3) + ')';
        } else {
          r.style.background = '';
        }
      }
    };
    mode.addEventListener('change', paint);
  }
  window.tachyonHeatmap = { data, ready: true };
})();
