// A topic: its partitions (offsets, leader, replicas, ISR), its configs (those set apart
// from the defaults highlighted, each editable), its throughput over the last minutes, adding
// partitions, producing a record, and deleting it.

import { get, post, seg } from "./api.js";
import { LineChart } from "./chart.js";
import { openDialog, field } from "./dialog.js";
import { badge, card, el, fill, link, pageHead, table, tile } from "./dom.js";
import { bytes, count, rate, timestamp } from "./format.js";
import { configTable, sourceCell, valueCell } from "./configs.js";
import { canWrite } from "./session.js";

export async function render(ctx) {
  const [name] = ctx.params;
  ctx.title(name);
  const base = `/api/topics/${seg(name)}`;
  let doc = await get(base);

  const tiles = el("div", { class: "tiles", id: "topic-tiles" });
  const partitions = el("div", { id: "partitions" });
  const configs = el("div", { id: "configs" });
  const onlyChanged = el("input", { type: "checkbox", id: "only-changed" });
  const canvas = el("canvas", { class: "chart", id: "topic-chart" });
  const legend = el("div", { class: "chart-legend" });
  const deleteButton = el("button", { class: "danger", id: "delete-topic", type: "button" }, "Delete topic");
  const partitionsButton = el("button", { id: "add-partitions", type: "button" }, "Add partitions");
  fill(ctx.root,
    pageHead([link("/topics", "Topics"), " /"], name,
      el("a", { class: "button primary", href: `/topics/${seg(name)}/messages`, dataset: { link: "" }, id: "browse-messages" }, "Browse messages"),
      doc.internal || !canWrite() ? null : [partitionsButton, deleteButton]),
    tiles,
    card("Throughput", { hint: "records/s produced" }, el("div", { class: "card-body" }, canvas, legend)),
    card("Partitions", { hint: "start: the first offset kept · end: the offset the next record gets" }, partitions),
    doc.internal || !canWrite() ? null : produceForm(name, () => doc.partitions.length, () => reload()),
    card("Configs", { hint: "highlighted: set on this topic or the broker, not the default · default: the value without that setting",
      actions: field("only non-default", onlyChanged, { inline: true }) }, configs));

  const draw = () => {
    fill(tiles,
      tile("Partitions", count(doc.partitions.length), { id: "tile-partitions" }),
      tile("Replication", count(doc.replication_factor), { id: "tile-replication" }),
      tile("Messages", count(doc.messages), { id: "tile-messages" }),
      tile("Size", bytes(doc.size), { id: "tile-size" }),
      tile("Rate", rate(doc.rate), { id: "tile-rate" }),
      tile("Topic id", doc.topic_id || "–", { small: true }));
    fill(partitions, table([
      { title: "Partition", num: true, cell: (p) => link(`/topics/${seg(name)}/messages?partition=${p.partition}&mode=offset&offset=${p.start}`, String(p.partition)) },
      { title: "Start offset", num: true, cell: (p) => count(p.start) },
      { title: "End offset", num: true, cell: (p) => count(p.end) },
      { title: "Messages", num: true, cell: (p) => count(p.messages) },
      { title: "Size", num: true, cell: (p) => bytes(p.size) },
      { title: "Leader", num: true, cell: (p) => (p.leader < 0 ? badge("none", "bad") : String(p.leader)) },
      { title: "Replicas", cell: (p) => p.replicas.join(", ") },
      { title: "In sync", cell: (p) => p.isr.join(", ") || "–" },
      { title: "Status", cell: (p) => (p.leader < 0 ? badge("offline", "bad") : p.under_replicated ? badge("under-replicated", "warn") : badge("in sync", "ok")) },
    ], doc.partitions, { id: "partition-table", rowAttrs: (p) => ({ dataset: { partition: String(p.partition) } }) }));
    const shown = doc.configs.filter((c) => !onlyChanged.checked || !c.is_default);
    const edit = canWrite() ? [{ title: "", cell: (c) => (c.read_only || c.sensitive ? null
      : el("button", { type: "button", class: "small", "data-role": "edit-config", onclick: () => configDialog(name, c, reload) }, "Edit")) }] : [];
    fill(configs, configTable(shown, { id: "config-table", extra: edit }));
  };
  const reload = async () => { doc = await get(base); if (ctx.isCurrent()) draw(); };
  draw();
  onlyChanged.addEventListener("change", draw);
  deleteButton.addEventListener("click", () => deleteDialog(ctx, name));
  partitionsButton.addEventListener("click", () => partitionsDialog(name, doc.partitions.length, reload));

  const chart = new LineChart(canvas, { color: "#2f6fed" });
  ctx.onLeave(() => chart.dispose());
  let interval = 1000; // replaced by the server's sampling interval
  const refreshChart = async () => {
    const s = await get(`${base}/series`);
    chart.update(s.points);
    interval = s.interval_s * 1000;
    const last = s.points[s.points.length - 1];
    fill(legend, el("span", {}, "now ", el("strong", { id: "topic-rate-now" }, rate(last ? last[1] : null))),
      el("span", {}, "end offsets summed: ", el("strong", {}, count(s.end_offset))));
  };
  await refreshChart();
  ctx.live(refreshChart, interval);
  ctx.live(reload, 5000);
}

// One config: a new value (SET), or back to its default (DELETE); the broker checks the value
// and its refusal (INVALID_CONFIG, naming what it expects) shows in the dialog.
function configDialog(name, c, reload) {
  const value = el("input", { id: "config-value", class: "mono", autocomplete: "off", value: c.value ?? "" });
  const reset = c.source === "DYNAMIC_TOPIC_CONFIG"
    ? el("button", { type: "button", id: "config-reset", class: "danger" }, "Back to default") : null;
  const handle = openDialog({
    title: `${c.name} of ${name}`,
    body: el("div", { class: "stack" },
      el("div", { class: "muted" }, "Now ", el("strong", { class: "mono" }, valueCell(c)), " · ", sourceCell(c),
        c.default ? [" · without it: ", el("span", { class: "mono" }, c.default.value), c.default.name === c.name ? "" : ` (${c.default.name})`] : null),
      field("New value", value)),
    confirm: { label: "Save" },
    extraButtons: reset ? [reset] : [],
    async onConfirm() {
      await post(`/api/topics/${seg(name)}/configs`, { set: { [c.name]: value.value }, confirm: name });
      await reload();
    },
  });
  reset?.addEventListener("click", async () => {
    handle.error("");
    try {
      await post(`/api/topics/${seg(name)}/configs`, { delete: [c.name], confirm: name });
      handle.close();
      await reload();
    } catch (e) {
      handle.error(e.message);
    }
  });
  value.focus();
  value.select();
}

// Kafka adds partitions, never removes them; keys hashed to a partition may land elsewhere after.
function partitionsDialog(name, current, reload) {
  const total = el("input", { id: "partition-count", type: "number", min: String(current + 1), value: String(current + 1) });
  openDialog({
    title: `Add partitions to ${name}`,
    body: el("div", { class: "stack" },
      el("div", { class: "warning" }, `${name} has ${current} partition(s). Partitions cannot be removed again, and records with a key may go to another partition than before.`),
      field("New number of partitions", total)),
    confirm: { label: "Add partitions" },
    async onConfirm() {
      await post(`/api/topics/${seg(name)}/partitions`, { count: Number(total.value), confirm: name });
      await reload();
    },
  });
  total.focus();
}

function deleteDialog(ctx, name) {
  const typed = el("input", { id: "confirm-name", autocomplete: "off", placeholder: name });
  const handle = openDialog({
    title: "Delete topic",
    body: el("div", { class: "stack" },
      el("div", { class: "warning" }, "This deletes ", el("strong", {}, name), " and every record in it, on every broker. It cannot be undone."),
      field("Type the topic's name to confirm", typed)),
    confirm: { label: "Delete topic", danger: true, enabled: false },
    async onConfirm() {
      await post(`/api/topics/${seg(name)}/delete`, { confirm: typed.value });
      ctx.navigate("/topics");
    },
  });
  typed.addEventListener("input", () => { handle.confirmButton.disabled = typed.value !== name; });
  typed.focus();
}

// Key, value and headers as UTF-8 text; the partition is the partitioner's choice unless picked.
function produceForm(name, partitionCount, reload) {
  const key = el("input", { id: "produce-key", class: "mono", autocomplete: "off", placeholder: "none" });
  const value = el("textarea", { id: "produce-value", class: "mono", rows: "4", placeholder: '{"id": 1}' });
  const tombstone = el("input", { type: "checkbox", id: "produce-null" });
  const headers = el("textarea", { id: "produce-headers", class: "mono", rows: "2", placeholder: "trace-id=abc (one name=value a line)" });
  const partition = el("select", { id: "produce-partition" });
  const result = el("div", { id: "produce-result", role: "status" });
  const button = el("button", { type: "submit", class: "primary", id: "produce" }, "Produce");
  const partitions = () => fill(partition, el("option", { value: "" }, "any (the partitioner picks)"),
    Array.from({ length: partitionCount() }, (_, i) => el("option", { value: String(i) }, String(i))));
  partitions();
  partition.addEventListener("focus", () => { const was = partition.value; partitions(); partition.value = was; });
  tombstone.addEventListener("change", () => { value.disabled = tombstone.checked; });
  const form = el("form", { class: "produce-form card-body", id: "produce-form" },
    el("div", { class: "produce-grid" },
      field("Key (empty: none)", key),
      field("Partition", partition),
      el("div", { class: "wide" }, field("Value", value), field("null value (a tombstone)", tombstone, { inline: true })),
      el("div", { class: "wide" }, field("Headers", headers))),
    el("div", { class: "produce-foot" }, button, result));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    button.disabled = true;
    fill(result);
    try {
      const body = { key: key.value === "" ? null : key.value, value: tombstone.checked ? null : value.value,
        headers: parseHeaders(headers.value), partition: partition.value === "" ? null : Number(partition.value), confirm: name };
      const r = await post(`/api/topics/${seg(name)}/produce`, body);
      fill(result, el("span", { class: "ok-text" }, "Written to partition ", el("strong", { id: "produced-partition" }, String(r.partition)),
        " at offset ", el("strong", { id: "produced-offset" }, String(r.offset))), ` · ${timestamp(r.timestamp)} · `,
      link(`/topics/${seg(name)}/messages?partition=${r.partition}&mode=offset&offset=${r.offset}&limit=1`, "show it"));
      await reload();
    } catch (e) {
      fill(result, el("span", { class: "form-error", id: "produce-error" }, e.message));
    } finally {
      button.disabled = false;
    }
  });
  return card("Produce a record", { hint: "key, value and header values are sent as UTF-8 text" }, form);
}

// "name=value" lines; a line without "=" is a header with a null value
function parseHeaders(text) {
  return text.split("\n").map((line) => line.trim()).filter(Boolean).map((line) => {
    const eq = line.indexOf("=");
    return eq < 0 ? { key: line, value: null } : { key: line.slice(0, eq).trim(), value: line.slice(eq + 1) };
  });
}
