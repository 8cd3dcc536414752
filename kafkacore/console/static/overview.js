// The cluster overview: brokers, controller, counts, partitions in trouble, total throughput.

import { get } from "./api.js";
import { LineChart } from "./chart.js";
import { badge, card, el, fill, link, pageHead, table, tile } from "./dom.js";
import { count, rate } from "./format.js";

const BUSIEST = 5;

export async function render(ctx) {
  ctx.title("Overview");
  const o = await get("/api/overview");
  const tiles = el("div", { class: "tiles", id: "overview-tiles" });
  const brokers = el("div", { id: "brokers" });
  const busiest = el("div", { id: "busiest" });
  const canvas = el("canvas", { class: "chart", id: "cluster-chart" });
  const legend = el("div", { class: "chart-legend" });
  fill(ctx.root,
    pageHead("Cluster", "Overview"),
    tiles,
    el("div", { class: "grid-2" },
      el("div", {},
        card("Brokers", { hint: "controller marked" }, brokers),
        card("Busiest topics", { hint: "by records/s over the last seconds" }, busiest)),
      card("Throughput", { hint: "records/s produced, all topics" }, el("div", { class: "card-body" }, canvas, legend))));

  const draw = (doc) => {
    fill(tiles,
      tile("Brokers", count(doc.brokers.length), { id: "tile-brokers" }),
      tile("Topics", count(doc.topics), { id: "tile-topics" }),
      tile("Partitions", count(doc.partitions), { id: "tile-partitions" }),
      tile("Consumer groups", count(doc.groups), { id: "tile-groups" }),
      tile("Under-replicated", count(doc.under_replicated), { id: "tile-under-replicated", tone: doc.under_replicated ? "bad" : "good" }),
      tile("Offline partitions", count(doc.offline), { id: "tile-offline", tone: doc.offline ? "bad" : "good" }),
      tile("Controller", doc.controller < 0 ? "none" : `broker ${doc.controller}`, { small: true, id: "tile-controller" }),
      tile("Cluster id", doc.cluster_id || "–", { small: true, id: "tile-cluster-id" }));
    fill(brokers, table([
      { title: "Id", cell: (b) => link(`/brokers/${b.node_id}`, String(b.node_id)), num: true },
      { title: "Host", cell: (b) => el("span", { class: "mono" }, `${b.host}:${b.port}`) },
      { title: "Rack", cell: (b) => b.rack || "–" },
      { title: "Role", cell: (b) => (b.controller ? badge("controller", "info") : badge("broker")) },
    ], doc.brokers, { id: "broker-table" }));
  };
  draw(o);

  const chart = new LineChart(canvas, { color: "#2f6fed" });
  ctx.onLeave(() => chart.dispose());
  let interval = 1000; // replaced by the server's sampling interval
  const refreshChart = async () => {
    const s = await get("/api/cluster/series");
    chart.update(s.points);
    interval = s.interval_s * 1000;
    const last = s.points[s.points.length - 1];
    fill(legend, el("span", {}, "now ", el("strong", {}, rate(last ? last[1] : null))),
      el("span", {}, "sampled every ", `${s.interval_s} s`));
  };
  const refreshTopics = async () => {
    const { topics } = await get("/api/topics");
    const top = topics.filter((t) => t.rate !== null).sort((a, b) => b.rate - a.rate || b.messages - a.messages).slice(0, BUSIEST);
    fill(busiest, table([
      { title: "Topic", cls: "name", cell: (t) => link(`/topics/${encodeURIComponent(t.name)}`, t.name) },
      { title: "Messages", num: true, cell: (t) => count(t.messages) },
      { title: "Rate", num: true, cell: (t) => rate(t.rate) },
    ], top, { id: "busiest-table", empty: "No rates yet: they need two samples." }));
  };
  await Promise.all([refreshChart(), refreshTopics()]);
  ctx.live(refreshChart, interval);
  ctx.live(refreshTopics, 3000);
  ctx.live(async () => draw(await get("/api/overview")), 5000);
}
