// headroom's live view: each update from its stream (events) replaces the page's body
// (HTML the run's report renderer made) and draws its charts; the last
// update is the run's report, which replaces the page. Nothing is fetched
// but from this server; nothing is sent to it.
"use strict";

// The report's palette (Okabe-Ito without yellow), in series order.
const palette = ["#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#56b4e9", "#000000"];

const state = document.getElementById("state");
const live = document.getElementById("live");
let updates = 0;
const stream = new EventSource("events"); // relative: under the page's key

// An update: a line of JSON (the charts' points, or {"report": true}), then the HTML to show.
stream.onmessage = (e) => {
  const nl = e.data.indexOf("\n");
  const head = JSON.parse(nl < 0 ? e.data : e.data.slice(0, nl));
  const html = nl < 0 ? "" : e.data.slice(nl + 1);
  if (head.report) { // the run is over: its report takes the page's place
    stream.close();
    document.open();
    document.write(html);
    document.close();
    return;
  }
  live.innerHTML = html;
  for (const c of head.charts || []) {
    const canvas = live.querySelector(`canvas[data-chart="${CSS.escape(c.name)}"]`);
    if (canvas) draw(canvas, c);
  }
  updates++;
  state.textContent = `live: ${updates} updates, the last at ${new Date().toLocaleTimeString()}`;
};

stream.onerror = () => {
  if (stream.readyState === EventSource.CLOSED) {
    state.textContent = "disconnected: headroom stopped before its report was sent";
  } else {
    state.textContent = "reconnecting to headroom…";
  }
};

// niceStep is a round step (1, 2 or 5 times a power of ten) giving about n ticks over span.
function niceStep(span, n) {
  const raw = span / n;
  const mag = Math.pow(10, Math.floor(Math.log10(raw)));
  const f = raw / mag;
  return (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * mag;
}

function ticks(lo, hi, n) {
  if (!(hi > lo)) { hi = lo + 1; }
  const step = niceStep(hi - lo, n);
  const out = [];
  for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) out.push(+v.toPrecision(12));
  return out;
}

function label(v) {
  const a = Math.abs(v);
  if (a >= 1e6) return (v / 1e6).toPrecision(3) + "M";
  if (a >= 1e4) return (v / 1e3).toPrecision(3) + "k";
  return String(+v.toPrecision(4));
}

// draw draws chart c (series of flat x, y points; null is no value) on canvas.
function draw(canvas, c) {
  const W = 560, H = 300, dpr = window.devicePixelRatio || 1;
  canvas.width = W * dpr;
  canvas.height = H * dpr;
  const g = canvas.getContext("2d");
  g.scale(dpr, dpr);
  g.fillStyle = "#fff";
  g.fillRect(0, 0, W, H);
  const L = 56, R = 14, T = 30, B = 58;
  let x0 = Infinity, x1 = -Infinity, y1 = 0;
  for (const s of c.series) {
    for (let i = 0; i < s.points.length; i += 2) {
      const x = s.points[i], y = s.points[i + 1];
      if (y === null) continue;
      x0 = Math.min(x0, x); x1 = Math.max(x1, x); y1 = Math.max(y1, y);
    }
  }
  g.fillStyle = "#1f2328";
  g.font = "bold 14px system-ui, sans-serif";
  g.fillText(c.title, L, 20);
  g.font = "11px system-ui, sans-serif";
  if (x0 === Infinity) {
    g.fillText("no data yet", L + 10, T + 30);
    return;
  }
  if (x1 <= x0) x1 = x0 + 1;
  const yt = ticks(0, y1 || 1, 5), ytop = yt[yt.length - 1];
  const px = (x) => L + (x - x0) / (x1 - x0) * (W - L - R);
  const py = (y) => H - B - y / ytop * (H - T - B);
  g.strokeStyle = "#d0d7de";
  g.lineWidth = 1;
  g.textAlign = "right";
  for (const v of yt) {
    g.beginPath(); g.moveTo(L, py(v)); g.lineTo(W - R, py(v)); g.stroke();
    g.fillText(label(v), L - 6, py(v) + 4);
  }
  g.textAlign = "center";
  for (const v of ticks(x0, x1, 6)) {
    if (v < x0 || v > x1) continue;
    g.fillText(label(v), px(v), H - B + 16);
  }
  g.fillText(c.x, L + (W - L - R) / 2, H - B + 32);
  g.save();
  g.translate(14, T + (H - T - B) / 2);
  g.rotate(-Math.PI / 2);
  g.fillText(c.y, 0, 0);
  g.restore();
  g.textAlign = "left";
  let lx = L;
  c.series.forEach((s, i) => {
    const colour = palette[i % palette.length];
    g.strokeStyle = colour;
    g.lineWidth = 2;
    g.setLineDash(s.dashed ? [6, 4] : []);
    g.beginPath();
    let pen = false;
    for (let j = 0; j < s.points.length; j += 2) {
      const y = s.points[j + 1];
      if (y === null) { pen = false; continue; }
      const X = px(s.points[j]), Y = py(y);
      if (pen) g.lineTo(X, Y); else g.moveTo(X, Y);
      pen = true;
    }
    g.stroke();
    // the legend, under the axis
    g.beginPath(); g.moveTo(lx, H - 12); g.lineTo(lx + 24, H - 12); g.stroke();
    g.fillStyle = "#1f2328";
    g.fillText(s.name, lx + 30, H - 8);
    lx += 40 + g.measureText(s.name).width;
  });
  g.setLineDash([]);
}
