// The brokers: each with the replicas it holds and the partitions it leads, its log
// directories and their size, and which one is the controller; one broker's page adds its
// configs (with where each value comes from) and its topics.

import { get, seg } from "./api.js";
import { field } from "./dialog.js";
import { badge, card, el, fill, link, pageHead, table, tile } from "./dom.js";
import { bytes, count } from "./format.js";
import { configTable } from "./configs.js";

const role = (b) => (b.controller ? badge("controller", "info") : badge("broker"));

// "12.1 GiB free of 250 GiB" (the volume's figures come with DescribeLogDirs v4+)
function disk(d) {
  if (d.usable_bytes === null || d.total_bytes === null) return "–";
  return `${bytes(d.usable_bytes)} free of ${bytes(d.total_bytes)}`;
}

function dirStatus(d) {
  return d.error ? badge(d.error, "bad") : badge("online", "ok");
}

export async function renderList(ctx) {
  ctx.title("Brokers");
  const tiles = el("div", { class: "tiles", id: "broker-tiles" });
  const list = el("div", { id: "brokers" });
  const dirs = el("div", { id: "log-dirs" });
  fill(ctx.root, pageHead("Cluster", "Brokers"), tiles,
    card("All brokers", { hint: "replicas: partitions with a copy on the broker · leaders: those it answers for" }, list),
    card("Log directories", { hint: "sizes from DescribeLogDirs" }, dirs));
  const load = async () => {
    const doc = await get("/api/brokers");
    if (!ctx.isCurrent()) return;
    const total = doc.log_dirs_known ? doc.brokers.reduce((n, b) => n + (b.size || 0), 0) : null;
    fill(tiles,
      tile("Brokers", count(doc.brokers.length), { id: "tile-brokers" }),
      tile("Controller", doc.controller < 0 ? "none" : `broker ${doc.controller}`, { small: true, id: "tile-controller" }),
      tile("Replicas", count(doc.brokers.reduce((n, b) => n + b.replicas, 0)), { id: "tile-replicas" }),
      tile("Size on disk", bytes(total), { id: "tile-size" }));
    fill(list, table([
      { title: "Id", num: true, cell: (b) => link(`/brokers/${b.node_id}`, String(b.node_id)) },
      { title: "Host", cls: "mono", cell: (b) => `${b.host}:${b.port}` },
      { title: "Rack", cell: (b) => b.rack || "–" },
      { title: "Role", cell: role },
      { title: "Replicas", num: true, cell: (b) => count(b.replicas) },
      { title: "Leaders", num: true, cell: (b) => count(b.leaders) },
      { title: "Size", num: true, cell: (b) => bytes(b.size) },
    ], doc.brokers, { id: "broker-list", rowAttrs: (b) => ({ dataset: { broker: String(b.node_id) } }) }));
    const rows = doc.brokers.flatMap((b) => b.log_dirs.map((d) => ({ ...d, broker: b.node_id })));
    fill(dirs, table([
      { title: "Broker", num: true, cell: (d) => String(d.broker) },
      { title: "Path", cls: "mono", cell: (d) => d.path },
      { title: "Partitions", num: true, cell: (d) => count(d.partitions) },
      { title: "Size", num: true, cell: (d) => bytes(d.size) },
      { title: "Disk", cell: disk },
      { title: "Status", cell: dirStatus },
    ], rows, { id: "log-dir-table", empty: doc.log_dirs_known ? "No log directories reported." : "The brokers do not report their log directories (DescribeLogDirs)." }));
  };
  await load();
  ctx.live(load, 5000);
}

export async function renderOne(ctx) {
  const [id] = ctx.params;
  ctx.title(`Broker ${id}`);
  const base = `/api/brokers/${seg(id)}`;
  let doc = await get(base);
  const tiles = el("div", { class: "tiles", id: "broker-detail-tiles" });
  const dirs = el("div", { id: "log-dirs" });
  const topics = el("div", { id: "broker-topics" });
  const configs = el("div", { id: "configs" });
  const onlyChanged = el("input", { type: "checkbox", id: "only-changed" });
  const filter = el("input", { type: "search", placeholder: "Filter configs by name", id: "config-filter", class: "grow" });
  fill(ctx.root,
    pageHead([link("/brokers", "Brokers"), " /"], `Broker ${doc.node_id}`),
    tiles,
    card("Log directories", {}, dirs),
    card("Configs", { hint: "highlighted: set in the broker's configuration, not the default" },
      el("div", { class: "toolbar" }, filter, field("only non-default", onlyChanged, { inline: true })), configs),
    card("Topics", { hint: "the partitions of each topic this broker holds a copy of, and leads" }, topics));
  const draw = () => {
    fill(tiles,
      tile("Role", role(doc), { id: "tile-role" }),
      tile("Address", `${doc.host}:${doc.port}`, { small: true, id: "tile-address" }),
      tile("Rack", doc.rack || "–", { small: true }),
      tile("Replicas", count(doc.replicas), { id: "tile-replicas" }),
      tile("Leaders", count(doc.leaders), { id: "tile-leaders" }),
      tile("Size on disk", bytes(doc.size), { id: "tile-size" }));
    fill(dirs, table([
      { title: "Path", cls: "mono", cell: (d) => d.path },
      { title: "Partitions", num: true, cell: (d) => count(d.partitions) },
      { title: "Size", num: true, cell: (d) => bytes(d.size) },
      { title: "Disk", cell: disk },
      { title: "Status", cell: dirStatus },
    ], doc.log_dirs, { id: "log-dir-table", empty: "This broker does not report its log directories (DescribeLogDirs)." }));
    fill(topics, table([
      { title: "Topic", cls: "name", cell: (t) => [link(`/topics/${seg(t.topic)}`, t.topic), t.internal ? [" ", badge("internal")] : null] },
      { title: "Replicas", num: true, cell: (t) => count(t.replicas) },
      { title: "Leaders", num: true, cell: (t) => count(t.leaders) },
      { title: "Size", num: true, cell: (t) => bytes(t.size) },
    ], doc.topics, { id: "broker-topic-table", empty: "This broker holds no partitions.",
      rowAttrs: (t) => ({ dataset: { topic: t.topic } }) }));
    drawConfigs();
  };
  const drawConfigs = () => {
    const words = filter.value.trim().toLowerCase();
    const shown = doc.configs.filter((c) => (!onlyChanged.checked || !c.is_default) && (!words || c.name.includes(words)));
    fill(configs, configTable(shown, { id: "config-table" }));
  };
  draw();
  onlyChanged.addEventListener("change", drawConfigs);
  filter.addEventListener("input", drawConfigs);
  ctx.live(async () => { doc = await get(base); if (ctx.isCurrent()) draw(); }, 10000);
}

export const render = (ctx) => (ctx.params.length ? renderOne(ctx) : renderList(ctx));
