// Numbers, sizes and times as the pages show them.

const INTEGER = new Intl.NumberFormat("en-US", { maximumFractionDigits: 0 });
const DECIMAL = new Intl.NumberFormat("en-US", { maximumFractionDigits: 1 });

export const DASH = "–";

export function count(n) {
  return n === null || n === undefined ? DASH : INTEGER.format(n);
}

export function rate(perSecond) {
  if (perSecond === null || perSecond === undefined) return DASH;
  return `${perSecond >= 100 ? INTEGER.format(perSecond) : DECIMAL.format(perSecond)}/s`;
}

export function compact(n) {
  const abs = Math.abs(n);
  if (abs >= 1e9) return `${DECIMAL.format(n / 1e9)}G`;
  if (abs >= 1e6) return `${DECIMAL.format(n / 1e6)}M`;
  if (abs >= 1e3) return `${DECIMAL.format(n / 1e3)}k`;
  return abs > 0 && abs < 1 ? String(Number(n.toPrecision(2))) : DECIMAL.format(n);
}

export function bytes(n) {
  if (n === null || n === undefined) return DASH;
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let v = n;
  let i = 0;
  // switch unit at 1000, not 1024: "1,020.4 KiB" reads worse than "1 MiB"
  while (v >= 1000 && i < units.length - 1) { v /= 1024; i += 1; }
  return i === 0 ? `${v} B` : `${DECIMAL.format(v)} ${units[i]}`;
}

const pad = (n, w = 2) => String(n).padStart(w, "0");

// Local time, to the millisecond: 2025-03-01 14:05:09.120
export function timestamp(ms) {
  if (ms === null || ms === undefined || ms < 0) return DASH;
  const d = new Date(ms);
  if (Number.isNaN(d.getTime())) return String(ms);
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ` +
    `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}.${pad(d.getMilliseconds(), 3)}`;
}

export function clock(ms) {
  const d = new Date(ms);
  return `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

// The value a <input type="datetime-local" step="1"> shows for a time in ms.
export function localInput(ms) {
  const d = new Date(ms);
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}
