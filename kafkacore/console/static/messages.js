// The message browser: the newest records, from an offset, or from a time; each record's
// key, value, headers and timestamp. Values that are JSON are pretty-printed, binary is shown
// escaped (or as hex); everything goes onto the page as text.

import { get, seg } from "./api.js";
import { field } from "./dialog.js";
import { badge, card, el, fill, link, pageHead } from "./dom.js";
import { bytes, count, localInput, timestamp } from "./format.js";

const MODES = [["newest", "Newest first"], ["offset", "From an offset"], ["timestamp", "From a time"]];

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
  const time = el("input", { id: "time", type: "datetime-local", step: "1" });
  time.value = q.get("timestamp") ? localInput(Number(q.get("timestamp"))) : localInput(Date.now() - 3600 * 1000);
  const limit = el("input", { id: "limit", type: "number", min: "1", max: "500", value: q.get("limit") || "50" });
  const offsetField = field("Offset", offset);
  const timeField = field("From (local time)", time);
  const load = el("button", { class: "primary", id: "load", type: "submit" }, "Show");
  const form = el("form", { class: "toolbar", id: "browse-form" },
    field("Partition", partition), field("Show", mode), offsetField, timeField, field("At most", limit), load);
  const status = el("span", { id: "browse-status" });
  const results = el("div", { id: "records", class: "records" });
  const problem = el("div", { id: "browse-error" });
  fill(ctx.root,
    pageHead([link("/topics", "Topics"), " / ", link(`/topics/${seg(name)}`, name), " /"], "Messages"),
    problem,
    card("Records", { hint: status }, form, results));

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
    return out;
  };
  const show = async (params) => {
    fill(problem);
    fill(status, "loading…");
    try {
      const doc = await get(`/api/topics/${seg(name)}/messages`, params);
      if (!ctx.isCurrent()) return;
      fill(status, `${doc.records.length} record${doc.records.length === 1 ? "" : "s"}`);
      fill(results, doc.records.length ? doc.records.map(recordView)
        : el("div", { class: "empty" }, "No records here (the partition is empty, or nothing at or after that point)."));
    } catch (e) {
      if (!ctx.isCurrent()) return;
      fill(status, "");
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

function recordView(r) {
  return el("article", { class: "record", dataset: { partition: String(r.partition), offset: String(r.offset) } },
    el("div", { class: "record-meta" },
      el("span", { class: "where" }, `partition ${r.partition} · offset ${count(r.offset)}`),
      el("span", { class: "ts", title: `${r.timestamp} ms (${r.timestamp_type})` }, timestamp(r.timestamp)),
      el("span", {}, r.timestamp_type)),
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
  const head = el("div", { class: "value-head" }, badge(KIND_LABEL[v.kind], KIND_TONE[v.kind]), bytes(v.size),
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
  if (role !== "value" && v.kind === "text") return pre; // a short text key or header needs no caption
  return el("div", {}, head, pre);
}
