// A time-series line chart on a <canvas>: the last few minutes of samples, a y axis from 0
// with round gridlines, the newest value marked. The data drawn last stays on the element
// (data-points, data-latest, data-last-time) for scripts and tests to read.

import { clock, compact } from "./format.js";

const PAD = { left: 50, right: 14, top: 12, bottom: 24 };
const GRID = "#e8ecf3";
const AXIS_TEXT = "#7a8599";
const FONT = '11px system-ui, "DejaVu Sans", sans-serif';

const TICKS = 4; // gridlines above zero
const MIN_WINDOW_MS = 60000;

// The smallest "round" step (1, 2 or 5 times a power of ten) at or above x.
function roundStep(x) {
  if (x <= 0) return 1;
  const p = 10 ** Math.floor(Math.log10(x));
  for (const m of [1, 2, 5, 10]) if (m * p >= x) return m * p;
  return 10 * p;
}

export class LineChart {
  constructor(canvas, { color = "#2f6fed", windowMs = 180000, empty = "waiting for samples…" } = {}) {
    this.canvas = canvas;
    this.color = color;
    this.windowMs = windowMs;
    this.empty = empty;
    this.points = [];
    this.resize = new ResizeObserver(() => this.draw());
    this.resize.observe(canvas);
  }

  update(points) {
    this.points = points || [];
    const last = this.points[this.points.length - 1];
    this.canvas.dataset.points = String(this.points.length);
    this.canvas.dataset.latest = last ? String(last[1]) : "";
    this.canvas.dataset.lastTime = last ? String(last[0]) : "";
    this.draw();
  }

  dispose() {
    this.resize.disconnect();
  }

  draw() {
    const canvas = this.canvas;
    const dpr = window.devicePixelRatio || 1;
    const w = canvas.clientWidth;
    const h = canvas.clientHeight;
    if (!w || !h) return;
    if (canvas.width !== Math.round(w * dpr) || canvas.height !== Math.round(h * dpr)) {
      canvas.width = Math.round(w * dpr);
      canvas.height = Math.round(h * dpr);
    }
    const ctx = canvas.getContext("2d");
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, w, h);
    ctx.font = FONT;
    const plotW = w - PAD.left - PAD.right;
    const plotH = h - PAD.top - PAD.bottom;

    const pts = this.points;
    const tMax = pts.length ? pts[pts.length - 1][0] : Date.now();
    // the window grows with the history up to windowMs, so a young chart is not a sliver
    const span = Math.min(this.windowMs, Math.max(MIN_WINDOW_MS, pts.length ? tMax - pts[0][0] : 0));
    const tMin = tMax - span;
    const visible = pts.filter(([t]) => t >= tMin);
    const yMax = TICKS * roundStep((Math.max(0, ...visible.map(([, v]) => v)) * 1.1) / TICKS);
    const x = (t) => PAD.left + ((t - tMin) / span) * plotW;
    const y = (v) => PAD.top + plotH - (v / yMax) * plotH;

    // horizontal gridlines and their values
    ctx.textAlign = "right";
    ctx.textBaseline = "middle";
    for (let i = 0; i <= TICKS; i += 1) {
      const v = (yMax * i) / TICKS;
      const gy = Math.round(y(v)) + 0.5;
      ctx.strokeStyle = GRID;
      ctx.lineWidth = 1;
      ctx.beginPath();
      ctx.moveTo(PAD.left, gy);
      ctx.lineTo(w - PAD.right, gy);
      ctx.stroke();
      ctx.fillStyle = AXIS_TEXT;
      ctx.fillText(compact(v), PAD.left - 8, gy);
    }
    // times along the bottom: each end and the middle
    ctx.textBaseline = "top";
    [[tMin, "left"], [(tMin + tMax) / 2, "center"], [tMax, "right"]].forEach(([t, align]) => {
      ctx.textAlign = align;
      ctx.fillStyle = AXIS_TEXT;
      ctx.fillText(clock(t), x(t), h - PAD.bottom + 7);
    });

    if (visible.length < 2) {
      ctx.textAlign = "center";
      ctx.textBaseline = "middle";
      ctx.fillStyle = AXIS_TEXT;
      ctx.fillText(this.empty, PAD.left + plotW / 2, PAD.top + plotH / 2);
      return;
    }
    // the area under the line, then the line
    ctx.beginPath();
    ctx.moveTo(x(visible[0][0]), y(0));
    visible.forEach(([t, v]) => ctx.lineTo(x(t), y(v)));
    ctx.lineTo(x(visible[visible.length - 1][0]), y(0));
    ctx.closePath();
    ctx.fillStyle = this.color + "22";
    ctx.fill();
    ctx.beginPath();
    visible.forEach(([t, v], i) => (i ? ctx.lineTo(x(t), y(v)) : ctx.moveTo(x(t), y(v))));
    ctx.strokeStyle = this.color;
    ctx.lineWidth = 2;
    ctx.lineJoin = "round";
    ctx.stroke();
    // the newest value
    const [lt, lv] = visible[visible.length - 1];
    ctx.beginPath();
    ctx.arc(x(lt), y(lv), 3.5, 0, 2 * Math.PI);
    ctx.fillStyle = "#fff";
    ctx.fill();
    ctx.lineWidth = 2;
    ctx.stroke();
  }
}
