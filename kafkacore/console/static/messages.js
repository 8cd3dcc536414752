// The message browser: a dense table of records (the newest, from an offset, or from a time),
// each row opening onto its full key, value and headers; a search run by the console over a
// bounded scan (a substring, or a JSON path test); export of the rows shown as JSON lines or
// CSV. Values that are JSON (or decoded Avro) are pretty-printed, binary is shown escaped (or
// as hex); everything goes onto the page as text.

import { get, seg } from "./api.js";
import { field } from "./dialog.js";
import { badge, card, el, fill, link, pageHead } from "./dom.js";
import { bytes, count, localInput, timestamp } from "./format.js";

const MODES = [["newest", "Newest first"], ["offset", "From an offset"], ["timestamp", "From a time"]];
const WHERE = [["any", "Key, value or headers"], ["key", "Key"], ["value", "Value"], ["headers", "Headers"]];
const COLUMNS = ["Partition", "Offset", "Timestamp", "Key", "Value", "Headers", "Size"];
const PREVIEW_CHARS = 160;

export async function render(ctx) {
  const [name] = ctx.params;
  ctx.title(`${name} · messages`);
  const topic = await get(`/api/topics/${seg(name)}`);
  const q = ctx.query;

  const partition = el("select", { id: "partition" },
    el("option", { value: "" }, "All partitions"),
    topic.partitions.map((p) => el("option", { value: String(p.partition) }, `Partition ${p.partition}`)));
  partition.value = q.get("partition") || "";
  const mode = el("select", { id: "mode" }, MODES.map(([v, label]) => el("option", { value: v }, label)));
  mode.value = MODES.some(([v]) => v === q.get("mode")) ? q.get("mode") : "newest";
  const offset = el("input", { id: "offset", type: "number", min: "0", value: q.get("offset") || "0", class: "mono" });
  // to the millisecond, as Kafka's timestamps: a jump lands on the first record at or after it
  const time = el("input", { id: "time", type: "datetime-local", step: "0.001" });
  time.value = inputTime(q.get("timestamp") ? Number(q.get("timestamp")) : Date.now() - 3600 * 1000);
  const limit = el("input", { id: "limit", type: "number", min: "1", max: "500", value: q.get("limit") || "50" });
  const text = el("input", { id: "search", type: "search", placeholder: "text in the record", value: q.get("q") || "" });
  const where = el("select", { id: "search-in" }, WHERE.map(([v, label]) => el("option", { value: v }, label)));
  where.value = WHERE.some(([v]) => v === q.get("in")) ? q.get("in") : "any";
  const path = el("input", { id: "json-path", class: "mono", placeholder: "$.user.id == 42", value: q.get("path") || "" });
  const scan = el("input", { id: "scan", type: "number", min: "1", max: "100000", value: q.get("scan") || "10000" });
  const offsetField = field("Offset", offset);
  const timeField = field("From (local time)", time);
  const load = el("button", { class: "primary", id: "load", type: "submit" }, "Show");
  const form = el("form", { id: "browse-form" },
    el("div", { class: "toolbar" },
      field("Partition", partition), field("Show", mode), offsetField, timeField, field("At most", limit)),
    el("div", { class: "toolbar" },
      el("label", { class: "field grow" }, "Search", text), field("In", where),
      el("label", { class: "field grow" }, "JSON path (value)", path),
      field("Scan at most", scan), load));
  const status = el("span", { id: "browse-status" });
  const note = el("div", { id: "scan-note", class: "scan-note", hidden: true });
  const results = el("div", { id: "records" });
  const problem = el("div", { id: "browse-error" });
  let shown = [];
  const exportJsonl = el("button", { type: "button", id: "export-jsonl", disabled: true }, "Export JSON lines");
  const exportCsv = el("button", { type: "button", id: "export-csv", disabled: true }, "Export CSV");
  const fileName = (ext) => `${name}-${partition.value === "" ? "all" : `p${partition.value}`}-${mode.value}.${ext}`;
  exportJsonl.addEventListener("click", () => download(fileName("jsonl"), "application/x-ndjson", toJsonLines(shown)));
  exportCsv.addEventListener("click", () => download(fileName("csv"), "text/csv", toCsv(shown)));
  fill(ctx.root,
    pageHead([link("/topics", "Topics"), " / ", link(`/topics/${seg(name)}`, name), " /"], "Messages",
      exportJsonl, exportCsv),
    problem,
    card("Records", { hint: status }, form, note, results));

  const sync = () => {
    offsetField.hidden = mode.value !== "offset";
    timeField.hidden = mode.value !== "timestamp";
    // offsets belong to one partition: "all" cannot be read from an offset
    partition.options[0].disabled = mode.value === "offset";
    if (mode.value === "offset" && partition.value === "") partition.value = String(topic.partitions[0]?.partition ?? "");
  };
  mode.addEventListener("change", sync);
  sync();

  const query = () => {
    const out = { mode: mode.value, partition: partition.value, limit: limit.value };
    if (mode.value === "offset") out.offset = offset.value;
    if (mode.value === "timestamp") out.timestamp = String(new Date(time.value).getTime());
    if (text.value !== "") Object.assign(out, { q: text.value, in: where.value });
    if (path.value.trim() !== "") out.path = path.value.trim();
    if ((out.q || out.path) && scan.value !== "10000") out.scan = scan.value;
    return out;
  };
  const show = async (params) => {
    fill(problem);
    fill(status, "loading…");
    try {
      const doc = await get(`/api/topics/${seg(name)}/messages`, params);
      if (!ctx.isCurrent()) return;
      shown = doc.records;
      exportJsonl.disabled = exportCsv.disabled = shown.length === 0;
      fill(status, `${count(shown.length)} record${shown.length === 1 ? "" : "s"}`);
      note.hidden = !doc.scan.searched;
      if (doc.scan.searched) {
        const s = doc.scan;
        fill(note, `Scanned ${count(s.scanned)} of ${count(s.total)} records, ${count(shown.length)} shown`,
          s.complete ? "." : ` (the scan stops at ${count(s.limit)}: raise "Scan at most", or start elsewhere, to look further).`);
      }
      fill(results, shown.length ? recordsTable(shown)
        : el("div", { class: "empty" }, doc.scan.searched ? "No record matched in what was scanned."
          : "No records here (the partition is empty, or nothing at or after that point)."));
    } catch (e) {
      if (!ctx.isCurrent()) return;
      shown = [];
      exportJsonl.disabled = exportCsv.disabled = true;
      fill(status, "");
      note.hidden = true;
      fill(results);
      fill(problem, el("div", { class: "alert error", role: "alert", id: "browse-problem" }, e.message));
    }
  };
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const params = query();
    const qs = new URLSearchParams(Object.entries(params).filter(([, v]) => v !== ""));
    history.replaceState(null, "", `${location.pathname}?${qs}`);
    show(params);
  });
  await show(query());
}

// The value of a datetime-local input with milliseconds (format.js's localInput stops at seconds).
function inputTime(ms) {
  return `${localInput(ms)}.${String(((ms % 1000) + 1000) % 1000).padStart(3, "0")}`;
}

function recordsTable(recs) {
  const body = el("tbody", {});
  for (const r of recs) {
    const row = el("tr", { class: "record", tabindex: "0", "aria-expanded": "false",
      dataset: { partition: String(r.partition), offset: String(r.offset) } },
      el("td", { class: "num" }, String(r.partition)),
      el("td", { class: "num mono" }, count(r.offset)),
      el("td", { class: "ts nowrap", title: `${r.timestamp} ms (${r.timestamp_type})` }, timestamp(r.timestamp)),
      el("td", { class: "preview", "data-role": "key-preview" }, preview(r.key)),
      el("td", { class: "preview", "data-role": "value-preview" }, kindBadges(r.value), preview(r.value)),
      el("td", { class: "num", "data-role": "header-count" }, String(r.headers.length)),
      el("td", { class: "num nowrap", "data-role": "size" }, bytes(r.size)));
    let detail = null;
    const toggle = () => {
      if (detail) {
        detail.remove();
        detail = null;
      } else {
        detail = el("tr", { class: "record-detail" }, el("td", { colspan: String(COLUMNS.length) }, recordView(r)));
        row.after(detail);
      }
      row.setAttribute("aria-expanded", String(!!detail));
    };
    row.addEventListener("click", (event) => { if (!event.target.closest("button")) toggle(); });
    row.addEventListener("keydown", (event) => {
      if (event.key === "Enter" || event.key === " ") { event.preventDefault(); toggle(); }
    });
    body.append(row);
  }
  return el("div", { class: "table-wrap" },
    el("table", { id: "records-table", class: "dense" },
      el("colgroup", {}, COLUMNS.map((c) => el("col", { class: `c-${c.toLowerCase()}` }))),
      el("thead", {}, el("tr", {}, COLUMNS.map((c, i) => el("th", { class: [0, 1, 5, 6].includes(i) ? "num" : null }, c)))),
      body));
}

// One line of a key or value for its table cell (the full text is in the opened row).
function preview(v) {
  if (v.kind === "null") return el("span", { class: "muted" }, "null");
  if (v.kind === "empty") return el("span", { class: "muted" }, "empty");
  const flat = (v.kind === "json" && !v.truncated ? JSON.stringify(JSON.parse(v.text)) : v.text).replace(/\s+/g, " ");
  return el("span", { class: "mono" }, flat.length > PREVIEW_CHARS ? `${flat.slice(0, PREVIEW_CHARS)}…` : flat);
}

function kindBadges(v) {
  const out = [];
  if (v.format === "avro") out.push(badge("Avro", "info"));
  if (v.schema_id !== undefined) {
    out.push(el("span", { class: "badge", "data-role": "schema-id", title: "Confluent wire format" }, `schema ${v.schema_id}`));
  }
  if (v.kind === "binary") out.push(badge("binary", "warn"));
  return out.length ? el("span", { class: "badges" }, out) : null;
}

function recordView(r) {
  return el("div", { class: "record-full" },
    el("div", { class: "record-meta" },
      el("span", { class: "where" }, `partition ${r.partition} · offset ${count(r.offset)}`),
      el("span", { title: `${r.timestamp} ms` }, `${timestamp(r.timestamp)} · ${r.timestamp_type}`),
      el("span", {}, `${bytes(r.size)} (key, value and headers)`)),
    el("div", { class: "record-grid" },
      el("div", { class: "k" }, "Key"), bytesView(r.key, "key"),
      el("div", { class: "k" }, "Headers"),
      r.headers.length
        ? el("div", { class: "headers-list" }, r.headers.map((h) => el("div", { class: "header-row" },
          el("span", { class: "hk" }, h.key), bytesView(h.value, "header"))))
        : el("div", { class: "muted", "data-role": "no-headers" }, el("span", { class: "k" }, "none")),
      el("div", { class: "k" }, "Value"), bytesView(r.value, "value")));
}

const KIND_LABEL = { json: "JSON", text: "text", binary: "binary" };
const KIND_TONE = { json: "info", text: null, binary: "warn" };

// One key, value or header value, as the API described it (see console/records.py).
function bytesView(v, role) {
  if (v.kind === "null") return el("pre", { class: "bytes nothing", "data-role": role, "data-kind": "null" }, "null");
  if (v.kind === "empty") return el("pre", { class: "bytes nothing", "data-role": role, "data-kind": "empty" }, "empty (0 bytes)");
  const pre = el("pre", { class: `bytes ${v.kind}`, "data-role": role, "data-kind": v.kind }, v.text);
  const framed = v.schema_id !== undefined;
  const head = el("div", { class: "value-head" },
    badge(v.format === "avro" ? "Avro" : KIND_LABEL[v.kind], KIND_TONE[v.kind]), bytes(v.size),
    framed ? el("span", { "data-role": "schema-id" }, `· Confluent-framed, schema id ${v.schema_id}`) : null,
    v.truncated ? el("span", {}, "· shown cut at 64 KiB") : null);
  if (v.kind === "binary") {
    const toggle = el("button", { type: "button", "data-role": "hex-toggle" }, "hex");
    toggle.addEventListener("click", () => {
      const hex = toggle.textContent === "hex";
      fill(pre, hex ? v.hex : v.text);
      fill(toggle, hex ? "escaped" : "hex");
    });
    head.append(toggle);
  }
  const note = v.note ? el("div", { class: "value-note", "data-role": "note" }, v.note) : null;
  if (role !== "value" && v.kind === "text" && !framed) return pre; // a short text key or header needs no caption
  return el("div", {}, head, note, pre);
}

// -- export: the rows shown, as they are shown -------------------------------------------------

// A key or value for an export: JSON as its document, text as text, binary as base64.
function exported(v) {
  if (v.kind === "null") return null;
  if (v.kind === "empty") return "";
  if (v.kind === "json") return v.truncated ? v.text : JSON.parse(v.text);
  if (v.kind === "binary") return { base64: v.base64 };
  return v.text;
}

function exportRow(r) {
  const out = { partition: r.partition, offset: r.offset, timestamp: r.timestamp, timestamp_type: r.timestamp_type,
    key: exported(r.key), value: exported(r.value), headers: r.headers.map((h) => ({ key: h.key, value: exported(h.value) })) };
  if (r.value.schema_id !== undefined) out.value_schema_id = r.value.schema_id;
  return out;
}

export function toJsonLines(recs) {
  return recs.map((r) => JSON.stringify(exportRow(r)) + "\n").join("");
}

const CSV_COLUMNS = ["partition", "offset", "timestamp", "timestamp_type", "key", "value", "headers"];

// RFC 4180: every text field quoted, quotes doubled, CRLF between rows. A key or value is its
// text: JSON compact, binary as "base64:...", null as an empty field; headers one JSON array.
function csvText(v) {
  if (v.kind === "null") return null;
  if (v.kind === "empty") return "";
  if (v.kind === "json") return v.truncated ? v.text : JSON.stringify(JSON.parse(v.text));
  if (v.kind === "binary") return `base64:${v.base64}`;
  return v.text;
}

export function toCsv(recs) {
  const cell = (s) => (s === null ? "" : `"${s.replaceAll('"', '""')}"`);
  const rows = recs.map((r) => [String(r.partition), String(r.offset), String(r.timestamp), r.timestamp_type,
    cell(csvText(r.key)), cell(csvText(r.value)), cell(JSON.stringify(exportRow(r).headers))].join(","));
  return [CSV_COLUMNS.join(","), ...rows].join("\r\n") + "\r\n";
}

function download(fileName, type, content) {
  const url = URL.createObjectURL(new Blob([content], { type }));
  const a = el("a", { href: url, download: fileName, hidden: true });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}
