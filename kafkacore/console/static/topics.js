// The topic list (partitions, replication, messages, size, rate) and the create-topic dialog.

import { get, post } from "./api.js";
import { openDialog, field } from "./dialog.js";
import { badge, card, el, fill, link, pageHead, table } from "./dom.js";
import { bytes, count, rate } from "./format.js";
import { canWrite } from "./session.js";

export async function render(ctx) {
  ctx.title("Topics");
  const showInternal = el("input", { type: "checkbox", id: "show-internal" });
  const filter = el("input", { type: "search", placeholder: "Filter by name", id: "topic-filter", class: "grow" });
  const list = el("div", { id: "topics" });
  const hint = el("span", {});
  const createButton = el("button", { class: "primary", id: "create-topic", type: "button" }, "Create topic");
  fill(ctx.root,
    pageHead("Cluster", "Topics", canWrite() ? createButton : null),
    card("All topics", { hint },
      el("div", { class: "toolbar" }, filter, field("show internal topics", showInternal, { inline: true })),
      list));

  let doc = null;
  const draw = () => {
    const words = filter.value.trim().toLowerCase();
    const rows = doc.topics.filter((t) => !words || t.name.toLowerCase().includes(words));
    fill(hint, `${doc.topics.length} topic${doc.topics.length === 1 ? "" : "s"}` +
      (doc.sizes_known ? "" : " · sizes unknown: the brokers do not report them (DescribeLogDirs)"));
    fill(list, table([
      { title: "Name", cls: "name", cell: (t) => [link(`/topics/${encodeURIComponent(t.name)}`, t.name), t.internal ? [" ", badge("internal")] : null] },
      { title: "Partitions", num: true, cell: (t) => count(t.partitions) },
      { title: "Replication", num: true, cell: (t) => count(t.replication_factor) },
      { title: "Messages", num: true, cell: (t) => count(t.messages) },
      { title: "Size", num: true, cell: (t) => bytes(t.size) },
      { title: "Rate", num: true, cell: (t) => rate(t.rate) },
      { title: "Status", cell: status },
    ], rows, { id: "topic-table", empty: words ? "No topic matches the filter." : "No topics yet.",
      rowAttrs: (t) => ({ dataset: { topic: t.name } }) }));
  };
  const load = async () => {
    doc = await get("/api/topics", { internal: showInternal.checked ? "1" : null });
    if (ctx.isCurrent()) draw();
  };
  filter.addEventListener("input", draw);
  showInternal.addEventListener("change", load);
  createButton.addEventListener("click", () => createTopicDialog(ctx, load));
  await load();
  ctx.live(load, 3000);
}

function status(t) {
  if (t.offline) return badge(`${t.offline} offline`, "bad");
  if (t.under_replicated) return badge(`${t.under_replicated} under-replicated`, "warn");
  return badge("healthy", "ok");
}

// Two steps: the form, then a summary to confirm; only the confirmation sends the request.
function createTopicDialog(ctx, reload) {
  const name = el("input", { id: "new-topic-name", required: true, autocomplete: "off", placeholder: "orders" });
  const partitions = el("input", { id: "new-topic-partitions", type: "number", min: "1", value: "1" });
  const replication = el("input", { id: "new-topic-replication", type: "number", min: "1", value: "1" });
  const configs = el("input", { id: "new-topic-configs", placeholder: "retention.ms=86400000, cleanup.policy=compact" });
  const summary = el("div", { id: "create-summary" });
  const form = el("div", { class: "stack" },
    field("Name", name), field("Partitions", partitions), field("Replication factor", replication),
    field("Configs (optional, name=value, comma-separated)", configs), summary);
  let request = null;
  const handle = openDialog({
    title: "Create topic",
    body: form,
    confirm: { label: "Review" },
    async onConfirm(h) {
      if (!request) {
        request = parseForm();
        fill(summary, el("div", { class: "alert notice" },
          "Create topic ", el("strong", {}, request.name), ` with ${request.partitions} partition(s), replication factor ${request.replication_factor}`,
          Object.keys(request.configs).length ? ` and ${Object.entries(request.configs).map(([k, v]) => `${k}=${v}`).join(", ")}` : "",
          "?"));
        [name, partitions, replication, configs].forEach((i) => { i.disabled = true; });
        fill(h.confirmButton, "Create topic");
        return false; // the dialog stays open for the confirmation
      }
      await post("/api/topics", { ...request, confirm: request.name });
      await reload();
    },
  });
  function parseForm() {
    const n = name.value.trim();
    if (!n) throw new Error("a topic needs a name");
    const out = { name: n, partitions: Number(partitions.value), replication_factor: Number(replication.value), configs: {} };
    if (!Number.isInteger(out.partitions) || out.partitions < 1) throw new Error("partitions must be a whole number, 1 or more");
    if (!Number.isInteger(out.replication_factor) || out.replication_factor < 1) throw new Error("the replication factor must be a whole number, 1 or more");
    for (const item of configs.value.split(",").map((s) => s.trim()).filter(Boolean)) {
      const eq = item.indexOf("=");
      if (eq < 1) throw new Error(`"${item}" is not name=value`);
      out.configs[item.slice(0, eq).trim()] = item.slice(eq + 1).trim();
    }
    return out;
  }
  name.focus();
  return handle;
}
