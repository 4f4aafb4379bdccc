// memory/timeline_script.cpp — the timeline page's script (see timeline_script.h), plain
// JavaScript with no library, so that the page works offline.
#include "memgrad/memory/timeline_script.h"

namespace mg::memory {

const char* timeline_script() {
  return R"js((function () {
'use strict';
const D = JSON.parse(document.getElementById('memgrad-data').textContent);
const NC = D.categories.length;
const ALLOCATE = D.kinds.indexOf('allocate'), FREE = D.kinds.indexOf('free'), RETAG = D.kinds.indexOf('retag');
const SEGMENT_ALLOCATE = D.kinds.indexOf('segment_allocate'), SEGMENT_FREE = D.kinds.indexOf('segment_free');
const $ = id => document.getElementById(id);
const svg = $('chart-svg');
const SVG = svg.namespaceURI;  // the page's own SVG element's, so no address is written here

// "512 B", "1.50 KiB", as memgrad's format_bytes.
function bytesText(n) {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let value = Math.abs(n), unit = 0;
  while (value >= 1024 && unit < units.length - 1) { value /= 1024; unit++; }
  return (n < 0 ? '-' : '') + (unit === 0 ? value + ' B' : value.toFixed(2) + ' ' + units[unit]);
}
const msText = ns => (ns / 1e6).toFixed(3) + ' ms';
const label = i => D.labels[i] || '';
function niceStep(range, base) {
  if (range <= 0) return 1;
  const rough = range / 5, power = Math.pow(base, Math.floor(Math.log(rough) / Math.log(base)));
  for (const f of [1, 2, 5, 10, 20, 50, 100, 200, 500]) if (power * f >= rough) return power * f;
  return power * 1000;
}
function element(name, attributes, parent) {
  const node = document.createElementNS(SVG, name);
  for (const key in attributes) node.setAttribute(key, attributes[key]);
  if (parent) parent.appendChild(node);
  return node;
}
// The last index i with values[i] <= x (-1 when none).
function lastAtMost(values, x) {
  let lo = 0, hi = values.length;
  while (lo < hi) { const mid = (lo + hi) >> 1; if (values[mid] <= x) lo = mid + 1; else hi = mid; }
  return lo - 1;
}

// ---- What the page works out once per device ----
function prepare(device) {
  const n = device.time_ns.length;
  const levels = new Float64Array(n * NC), total = new Float64Array(n);
  const level = device.baseline.slice();
  const allocations = [], segments = [];
  const openBlocks = new Map(), openSegments = new Map();
  // A block alive when the recording started; `i` is the event that first mentions it.
  function earlier(i, bytes, blockBytes, category) {
    const a = {address: device.address[i], bytes, blockBytes, category, changes: [], op: 0, module: 0, step: -1,
               from: -1, to: n};
    allocations.push(a);
    return a;
  }
  for (let i = 0; i < n; i++) {
    const kind = device.kind[i], address = device.address[i], c = device.category[i];
    if (kind === ALLOCATE) {
      const a = {address, bytes: device.bytes[i], blockBytes: device.block_bytes[i], category: c, changes: [],
                 op: device.op[i], module: device.module[i], step: device.step[i], from: i, to: n};
      allocations.push(a);
      openBlocks.set(address, a);
    } else if (kind === FREE) {
      const a = openBlocks.get(address) || earlier(i, -device.bytes[i], device.block_bytes[i], c);
      a.to = i;
      openBlocks.delete(address);
    } else if (kind === RETAG) {
      let a = openBlocks.get(address);
      if (!a) { a = earlier(i, device.bytes[i], device.block_bytes[i], device.previous_category[i]); openBlocks.set(address, a); }
      a.changes.push([i, c]);
    } else if (kind === SEGMENT_ALLOCATE) {
      const s = {address, bytes: device.bytes[i], from: i, to: n};
      segments.push(s);
      openSegments.set(address, s);
    } else if (kind === SEGMENT_FREE) {
      const s = openSegments.get(address) || {address, bytes: -device.bytes[i], from: -1, to: n};
      if (!openSegments.has(address)) segments.push(s);
      s.to = i;
      openSegments.delete(address);
    }
    if (kind !== SEGMENT_ALLOCATE && kind !== SEGMENT_FREE) {
      level[c] += device.bytes[i];
      if (kind === RETAG) level[device.previous_category[i]] -= device.bytes[i];
    }
    let sum = 0;
    for (let k = 0; k < NC; k++) { levels[i * NC + k] = level[k]; sum += level[k]; }
    total[i] = sum;
  }
  // The final segments: those and the blocks in them that no event mentioned predate it.
  for (const s of device.segments) {
    if (!openSegments.has(s.address)) segments.push({address: s.address, bytes: s.bytes, from: -1, to: n});
    for (const [address, requested, blockBytes, category, op, module, step, before] of s.blocks) {
      if (openBlocks.has(address)) continue;
      allocations.push({address, bytes: requested, blockBytes, category, changes: [], op, module,
                        step: before ? -1 : step, from: -1, to: n});
    }
  }
  segments.sort((a, b) => a.address - b.address);
  const peak = new Float64Array(NC);
  for (let k = 0; k < NC; k++) peak[k] = device.baseline[k];
  for (let i = 0; i < n; i++) for (let k = 0; k < NC; k++) peak[k] = Math.max(peak[k], levels[i * NC + k]);
  let peakTotal = device.baseline.reduce((x, y) => x + y, 0), peakIndex = -1;
  for (let i = 0; i < n; i++) if (total[i] > peakTotal) { peakTotal = total[i]; peakIndex = i; }
  return {device, n, levels, total, allocations, segments, peak, peakTotal, peakIndex};
}
// A block's category after event i.
function categoryAt(a, i) {
  let c = a.category;
  for (const [at, to] of a.changes) if (at <= i) c = to;
  return c;
}
const alive = (x, i) => x.from <= i && i < x.to;

// ---- State and drawing ----
const prepared = D.devices.map(prepare);
const state = {device: 0, t0: 0, t1: 1, hidden: new Set(), hover: -1, pinned: -1, drawn: []};
const chart = $('chart'), tip = $('tip');

function current() { return prepared[state.device]; }
function endTime(p) { return Math.max(1, p.n ? p.device.time_ns[p.n - 1] : 1); }
function resetView() { state.t0 = 0; state.t1 = endTime(current()); }

function geometry() {
  const box = chart.getBoundingClientRect();
  const width = Math.max(box.width, 300), height = Math.max(box.height, 200);
  const left = 84, right = 16, top = 22, bottom = 40;
  return {width, height, left, top, plotWidth: width - left - right, plotHeight: height - top - bottom};
}
const xOf = (g, t) => g.left + (t - state.t0) / (state.t1 - state.t0) * g.plotWidth;
const timeOf = (g, x) => state.t0 + (x - g.left) / g.plotWidth * (state.t1 - state.t0);

// The events to draw: every one in the view, or, beyond four per pixel column, each
// column's peak and last. The event before the view gives the level at its left edge.
function pointsInView(p, g) {
  const times = p.device.time_ns;
  const first = Math.max(0, lastAtMost(times, state.t0)), last = lastAtMost(times, state.t1);
  const points = [];
  if (p.n === 0 || last < 0) return points;
  if (last - first + 1 <= 4 * g.plotWidth) {
    for (let i = first; i <= last; i++) points.push(i);
    return points;
  }
  let column = -1, peak = -1, previous = -1;
  for (let i = first; i <= last; i++) {
    const x = Math.floor(xOf(g, Math.max(times[i], state.t0)));
    if (x !== column) {
      if (peak >= 0) { points.push(peak); if (previous !== peak) points.push(previous); }
      column = x; peak = i;
    } else if (visibleTotal(p, i) > visibleTotal(p, peak)) {
      peak = i;
    }
    previous = i;
  }
  points.push(peak);
  if (previous !== peak) points.push(previous);
  return points;
}
function visibleTotal(p, i) {
  let sum = 0;
  for (let k = 0; k < NC; k++) if (!state.hidden.has(k)) sum += p.levels[i * NC + k];
  return sum;
}
function stepPath(xs, ys, xEnd) {
  let d = '';
  for (let i = 0; i < xs.length; i++) d += (i === 0 ? 'M' + xs[i].toFixed(1) + ',' : ' H' + xs[i].toFixed(1) + ' V') + ys[i].toFixed(1);
  return d + (xs.length ? ' H' + xEnd.toFixed(1) : '');
}

function draw() {
  const p = current(), g = geometry(), device = p.device;
  svg.setAttribute('viewBox', '0 0 ' + g.width + ' ' + g.height);
  while (svg.firstChild) svg.removeChild(svg.firstChild);
  const points = pointsInView(p, g);
  const shown = D.draw_order.filter(k => !state.hidden.has(k) && p.peak[k] > 0);
  const lines = !state.hidden.has('lines');
  let top = 1;
  for (const i of points) {
    let sum = 0;
    for (const k of shown) sum += p.levels[i * NC + k];
    top = Math.max(top, sum, lines ? device.allocated[i] : 0, lines ? device.reserved[i] : 0);
  }
  const yStep = niceStep(top, 2), yTop = Math.ceil(top / yStep) * yStep;
  const yOf = bytes => g.top + g.plotHeight - bytes / yTop * g.plotHeight;
  const xEnd = g.left + g.plotWidth;
  for (let tick = 0; tick <= yTop + 0.5; tick += yStep) {
    element('line', {x1: g.left, x2: xEnd, y1: yOf(tick), y2: yOf(tick), class: 'grid'}, svg);
    element('text', {x: g.left - 6, y: yOf(tick), class: 'ylabel'}, svg).textContent = bytesText(tick);
  }
  const span = state.t1 - state.t0, xStep = niceStep(span / 1e6, 10) * 1e6;
  for (let tick = Math.ceil(state.t0 / xStep) * xStep; tick <= state.t1 + 1; tick += xStep) {
    element('text', {x: xOf(g, tick), y: g.top + g.plotHeight + 14, class: 'xlabel'}, svg).textContent =
        +(tick / 1e6).toFixed(6) + ' ms';
  }
  const clip = element('clipPath', {id: 'plot-clip'}, element('defs', {}, svg));
  element('rect', {x: g.left, y: 0, width: g.plotWidth, height: g.height}, clip);
  const plot = element('g', {'clip-path': 'url(#plot-clip)'}, svg);
  const xs = points.map(i => Math.max(g.left, xOf(g, device.time_ns[i])));
  const below = points.map(() => 0);
  state.drawn = [];
  for (const k of shown) {
    const topY = [], bottomY = [];
    points.forEach((i, j) => { bottomY.push(yOf(below[j])); below[j] += p.levels[i * NC + k]; topY.push(yOf(below[j])); });
    if (!points.length) continue;
    let d = stepPath(xs, topY, xEnd) + ' V' + bottomY[bottomY.length - 1].toFixed(1);
    for (let j = points.length - 1; j >= 0; j--) d += ' H' + xs[j].toFixed(1) + (j > 0 ? ' V' + bottomY[j - 1].toFixed(1) : '');
    element('path', {d: d + ' Z', fill: D.colours[k], class: 'series', 'data-category': D.categories[k]}, plot);
    state.drawn.push(D.categories[k]);
  }
  if (lines && points.length) {
    element('path', {d: stepPath(xs, points.map(i => yOf(device.reserved[i])), xEnd), class: 'reserved'}, plot);
    element('path', {d: stepPath(xs, points.map(i => yOf(device.allocated[i])), xEnd), class: 'allocated'}, plot);
  }
  D.step_start_ns.forEach((start, step) => {
    if (start < state.t0 || start > state.t1 || start > endTime(p)) return;
    const x = xOf(g, start);
    if (step > 0) element('line', {x1: x, x2: x, y1: g.top - 4, y2: g.top + g.plotHeight, class: 'step'}, plot);
    element('text', {x, y: g.top - 8, class: 'steplabel'}, svg).textContent = 'step ' + step;
  });
  // The phase band: runs of drawn points that share a phase.
  const bandY = g.top + g.plotHeight + 22;
  for (let j = 0; j < points.length;) {
    const phase = device.phase[points[j]];
    let next = j + 1;
    while (next < points.length && device.phase[points[next]] === phase) next++;
    const to = next < points.length ? xs[next] : xEnd;
    // NOTE: at least 2 pixels, so that a phase much shorter than a pixel (an optimizer
    // step beside a long backward) still shows.
    element('rect', {x: xs[j], y: bandY, width: Math.max(to - xs[j], 2), height: 8, fill: D.phase_colours[phase]}, plot);
    j = next;
  }
  element('text', {x: g.left - 6, y: bandY + 4, class: 'ylabel'}, svg).textContent = 'phase';
  if (state.pinned >= 0) {
    const x = xOf(g, device.time_ns[state.pinned]);
    element('line', {x1: x, x2: x, y1: g.top, y2: g.top + g.plotHeight, class: 'pinned'}, plot);
  }
  state.cursor = element('line', {x1: 0, x2: 0, y1: g.top, y2: g.top + g.plotHeight, class: 'cursor', visibility: 'hidden'}, svg);
  $('range').textContent = msText(state.t0) + ' – ' + msText(state.t1) + ' (' + points.length + ' of ' + p.n + ' events drawn)';
}

function drawLegend() {
  const p = current(), legend = $('legend');
  legend.textContent = '';
  function button(text, colour, key, dashed) {
    const b = document.createElement('button');
    b.className = state.hidden.has(key) ? 'off' : '';
    b.dataset.key = String(key);
    const swatch = document.createElement('span');
    swatch.className = 'swatch';
    swatch.style.background = dashed ? 'linear-gradient(#fff 40%, #111 40%, #111 60%, #fff 60%)' : colour;
    b.appendChild(swatch);
    b.appendChild(document.createTextNode(text));
    b.addEventListener('click', () => {
      if (state.hidden.has(key)) state.hidden.delete(key); else state.hidden.add(key);
      b.className = state.hidden.has(key) ? 'off' : '';
      draw();
    });
    legend.appendChild(b);
  }
  for (const k of D.draw_order) if (p.peak[k] > 0) button(D.categories[k] + ' ' + bytesText(p.peak[k]), D.colours[k], k);
  button('allocated / reserved', '', 'lines', true);
  for (let ph = 1; ph < D.phases.length; ph++) {
    const s = document.createElement('span');
    s.innerHTML = '<span class="swatch" style="background:' + D.phase_colours[ph] + '"></span>';
    s.appendChild(document.createTextNode(D.phases[ph]));
    legend.appendChild(s);
  }
}

// The tooltip and the largest live allocations at event i.
function describe(i) {
  const device = current().device;
  const retag = device.kind[i] === RETAG;
  return (msText(device.time_ns[i]) + '  event ' + i + '  step ' + device.step[i] + '  ' + D.phases[device.phase[i]] + '\n' +
      D.kinds[device.kind[i]] + ' ' + bytesText(device.bytes[i]) + '  ' +
      (retag ? D.categories[device.previous_category[i]] + ' -> ' : '') + D.categories[device.category[i]] + '\n' +
      'op: ' + (label(device.op[i]) || '-') + '\nmodule: ' + (label(device.module[i]) || '-') + '\n' +
      'requested ' + bytesText(current().total[i]) + ', allocated ' + bytesText(device.allocated[i]) +
      ', reserved ' + bytesText(device.reserved[i]));
}
function showLargest(i) {
  const p = current(), table = $('largest-table');
  const live = p.allocations.filter(a => alive(a, i)).sort((a, b) => b.bytes - a.bytes);
  let sum = 0;
  for (const a of live) sum += a.bytes;
  $('largest-title').textContent = 'Largest live allocations at ' + msText(p.device.time_ns[i]) + ' (event ' + i +
      '): ' + live.length + ' live, ' + bytesText(sum);
  let html = '<tr><th>bytes</th><th>category</th><th>op</th><th>module</th><th>step</th></tr>';
  const escape = t => t.replace(/&/g, '&amp;').replace(/</g, '&lt;');
  for (const a of live.slice(0, 15)) {
    html += '<tr><td class="bytes">' + bytesText(a.bytes) + '</td><td>' + D.categories[categoryAt(a, i)] + '</td><td>' +
        escape(label(a.op) || '-') + '</td><td>' + escape(label(a.module) || '-') + '</td><td>' +
        (a.from < 0 && a.step < 0 ? 'before' : a.step) + '</td></tr>';
  }
  table.innerHTML = html;
}
// Segments alive at event i, one row each, with the live blocks in them.
function showSegments(i) {
  const p = current(), view = $('segments-view');
  const segments = p.segments.filter(s => alive(s, i));
  const blocks = p.allocations.filter(a => alive(a, i)).sort((a, b) => a.address - b.address);
  let reserved = 0;
  for (const s of segments) reserved += s.bytes;
  $('segments-title').textContent = 'Segments at ' + msText(p.device.time_ns[i]) + ' (event ' + i + '): ' +
      segments.length + ', ' + bytesText(reserved) + ' reserved' + (state.pinned < 0 ? ' (end; click the chart to pick a moment)' : '');
  view.textContent = '';
  const width = Math.max(view.getBoundingClientRect().width - 8, 200), rowHeight = 16, labelWidth = 150;
  const largest = segments.reduce((m, s) => Math.max(m, s.bytes), 1);
  const shown = segments.slice(0, 300);
  const out = element('svg', {width, height: shown.length * rowHeight + 4}, view);
  let b = 0;
  shown.forEach((s, row) => {
    const y = row * rowHeight + 2, barWidth = Math.max(2, (width - labelWidth) * s.bytes / largest);
    const scale = barWidth / s.bytes;
    element('text', {x: 0, y: y + 11, 'font-size': 11}, out).textContent = '0x' + s.address.toString(16) + ' ' + bytesText(s.bytes);
    const bar = element('rect', {x: labelWidth, y, width: barWidth, height: rowHeight - 3, fill: '#eee', stroke: '#999',
                                 class: 'segment'}, out);
    element('title', {}, bar).textContent = 'segment ' + bytesText(s.bytes) + ' at 0x' + s.address.toString(16);
    while (b < blocks.length && blocks[b].address < s.address) b++;
    for (; b < blocks.length && blocks[b].address < s.address + s.bytes; b++) {
      const a = blocks[b], c = categoryAt(a, i), x = labelWidth + (a.address - s.address) * scale;
      const r = element('rect', {x, y, width: Math.max(0.5, a.blockBytes * scale), height: rowHeight - 3,
                                 fill: D.colours[c], class: 'block', 'data-category': D.categories[c]}, out);
      if (a.blockBytes > a.bytes) r.setAttribute('fill-opacity', String(Math.max(0.35, a.bytes / a.blockBytes)));
      element('title', {}, r).textContent = bytesText(a.bytes) + ' (' + bytesText(a.blockBytes) + ' with rounding) ' +
          D.categories[c] + '\nop: ' + (label(a.op) || '-') + '\nmodule: ' + (label(a.module) || '-') +
          '\nstep: ' + (a.step < 0 ? 'before the recording' : a.step);
    }
  });
}
function showMoment() {
  const p = current();
  if (!p.n) return;
  const i = state.pinned >= 0 ? state.pinned : p.n - 1;
  showSegments(i);
  showLargest(state.hover >= 0 ? state.hover : i);
}

// ---- Interaction ----
function zoom(factor, centre) {
  const end = endTime(current());
  let span = Math.min(end, Math.max(1000, (state.t1 - state.t0) / factor));
  let t0 = centre - (centre - state.t0) / (state.t1 - state.t0) * span;
  t0 = Math.min(Math.max(0, t0), end - span);
  state.t0 = t0; state.t1 = t0 + span;
  draw();
}
let drag = null, frame = 0, lastMove = null;
svg.addEventListener('wheel', e => {
  e.preventDefault();
  const g = geometry(), box = svg.getBoundingClientRect();
  zoom(e.deltaY < 0 ? 1.5 : 1 / 1.5, timeOf(g, e.clientX - box.left));
}, {passive: false});
svg.addEventListener('mousedown', e => { drag = {x: e.clientX, t0: state.t0, t1: state.t1, moved: false}; });
window.addEventListener('mouseup', e => {
  if (drag && !drag.moved) {
    const g = geometry(), box = svg.getBoundingClientRect();
    const i = lastAtMost(current().device.time_ns, timeOf(g, e.clientX - box.left));
    if (i >= 0) { state.pinned = i; draw(); showMoment(); }
  }
  drag = null;
});
svg.addEventListener('dblclick', () => { resetView(); draw(); });
svg.addEventListener('mousemove', e => {
  lastMove = e;
  if (!frame) frame = requestAnimationFrame(() => { frame = 0; hover(lastMove); });
});
function hover(e) {
  const g = geometry(), box = svg.getBoundingClientRect(), p = current();
  const x = e.clientX - box.left;
  if (drag) {
    const shift = (drag.x - e.clientX) / g.plotWidth * (drag.t1 - drag.t0);
    if (Math.abs(drag.x - e.clientX) > 3) drag.moved = true;
    const end = endTime(p), span = drag.t1 - drag.t0;
    state.t0 = Math.min(Math.max(0, drag.t0 + shift), end - span);
    state.t1 = state.t0 + span;
    draw();
    return;
  }
  const i = lastAtMost(p.device.time_ns, timeOf(g, x));
  if (i < 0 || x < g.left || x > g.left + g.plotWidth) { tip.style.display = 'none'; return; }
  state.hover = i;
  const cx = Math.max(g.left, xOf(g, p.device.time_ns[i]));
  state.cursor.setAttribute('x1', cx); state.cursor.setAttribute('x2', cx);
  state.cursor.setAttribute('visibility', 'visible');
  tip.textContent = describe(i);
  tip.style.display = 'block';
  tip.style.left = Math.min(x + 14, g.width - 360) + 'px';
  tip.style.top = Math.min(e.clientY - box.top + 14, g.height - 110) + 'px';
  showLargest(i);
}
svg.addEventListener('mouseleave', () => {
  tip.style.display = 'none';
  if (state.cursor) state.cursor.setAttribute('visibility', 'hidden');
});
$('zoom-in').addEventListener('click', () => zoom(2, (state.t0 + state.t1) / 2));
$('zoom-out').addEventListener('click', () => zoom(0.5, (state.t0 + state.t1) / 2));
$('reset').addEventListener('click', () => { resetView(); draw(); });
const select = $('device');
D.devices.forEach((device, k) => {
  const option = document.createElement('option');
  option.value = k; option.textContent = device.name;
  select.appendChild(option);
});
if (D.devices.length < 2) $('device-choice').style.display = 'none';
select.addEventListener('change', () => {
  state.device = +select.value; state.hover = -1; state.pinned = -1;
  resetView(); drawLegend(); draw(); showMoment(); summarize();
});
window.addEventListener('resize', () => { draw(); showMoment(); });

function summarize() {
  const p = current();
  const steps = D.step_start_ns.filter(t => t <= endTime(p)).length;
  let text = p.n + ' events, ' + steps + ' steps';
  if (D.dropped_events > 0) text += ', ' + D.dropped_events + ' older events dropped (ring buffer of ' + D.capacity + ')';
  text += '. Peak requested ' + bytesText(p.peakTotal) + (p.peakIndex >= 0 ? ' at ' + msText(p.device.time_ns[p.peakIndex]) : '') +
      '. Areas: requested bytes by category; solid line: allocated; dashed: reserved.';
  $('summary').textContent = text;
}

window.memgradTimeline = {
  view: () => ({t0: state.t0, t1: state.t1, hidden: [...state.hidden].map(k => typeof k === 'number' ? D.categories[k] : k),
                drawn: state.drawn.slice(), hover: state.hover, pinned: state.pinned}),
  peak: () => ({bytes: current().peakTotal, event: current().peakIndex}),
};
if (!D.devices.length) {
  $('summary').textContent = 'No allocations were recorded.';
} else {
  resetView(); drawLegend(); draw(); showMoment(); summarize();
}
})();
)js";
}

}  // namespace mg::memory
