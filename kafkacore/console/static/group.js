// A group: members and their partitions, committed offset (a share group's: the share-partition
// start offset) and lag per partition,
// lag over the last minutes, resetting its offsets (only while it has no members) and
// deleting it (the broker refuses while it has members).

import { get, post, seg } from "./api.js";
import { LineChart } from "./chart.js";
import { openDialog, field } from "./dialog.js";
import { card, el, fill, link, pageHead, table, tile } from "./dom.js";
import { count, localInput } from "./format.js";
import { stateBadge } from "./groups.js";
import { canWrite } from "./session.js";

export async function render(ctx) {
  const [groupId] = ctx.params;
  ctx.title(groupId);
  const base = `/api/groups/${seg(groupId)}`;
  let doc = await get(base);

  const tiles = el("div", { class: "tiles", id: "group-tiles" });
  const members = el("div", { id: "members" });
  const offsets = el("div", { id: "offsets" });
  const canvas = el("canvas", { class: "chart", id: "lag-chart" });
  const legend = el("div", { class: "chart-legend" });
  const resetButton = el("button", { id: "reset-offsets", type: "button" }, "Reset offsets");
  const deleteButton = el("button", { class: "danger", id: "delete-group", type: "button" }, "Delete group");
  fill(ctx.root,
    pageHead([link("/groups", "Consumer groups"), " /"], groupId, canWrite() ? [resetButton, deleteButton] : null),
    tiles,
    card("Lag", { hint: "records behind the end of the log, all partitions" }, el("div", { class: "card-body" }, canvas, legend)),
    card("Offsets", { hint: doc.protocol_type === "share" ? "lag = end offset − share-partition start offset"
      : "lag = end offset − committed offset" }, offsets),
    card("Members", {}, members));

  // The total lag shown is the chart's latest sample once there is one, so the tile and the
  // chart never disagree (the group's document is fetched at another moment than the sample).
  let sampledLag = null;
  let lastSampleTime = null; // of the chart's latest point
  let staleUpTo = null; // samples taken up to this time predate a reset: not shown in the tile
  const draw = () => {
    const lag = sampledLag ?? doc.lag;
    const share = doc.protocol_type === "share";
    const epochs = doc.group_epoch !== null && doc.group_epoch !== undefined; // KIP-848 and KIP-932 groups
    fill(tiles,
      tile("State", stateBadge(doc.state), { id: "tile-state" }),
      tile("Type", doc.group_type || "–", { id: "tile-type", small: true }),
      tile("Members", count(doc.members.length), { id: "tile-members" }),
      tile("Total lag", count(lag), { id: "tile-lag", tone: lag > 0 ? null : "good" }),
      tile("Coordinator", `broker ${doc.coordinator}`, { small: true }),
      tile("Assignor", doc.protocol || "–", { small: true }),
      epochs ? tile("Group epoch", count(doc.group_epoch), { id: "tile-group-epoch", small: true }) : null,
      epochs ? tile("Assignment epoch", count(doc.assignment_epoch), { id: "tile-assignment-epoch", small: true }) : null);
    if (share) {
      drawShare();
      return;
    }
    fill(offsets, table([
      { title: "Topic", cls: "name", cell: (o) => link(`/topics/${seg(o.topic)}`, o.topic) },
      { title: "Partition", num: true, cell: (o) => String(o.partition) },
      { title: "Committed", num: true, cell: (o) => count(o.committed) },
      { title: "End", num: true, cell: (o) => count(o.end) },
      { title: "Lag", num: true, cell: (o) => count(o.lag) },
      { title: "Member", cell: (o) => memberName(doc, o.member) },
    ], doc.offsets, { id: "offset-table", empty: "No committed offsets.",
      rowAttrs: (o) => ({ dataset: { topic: o.topic, partition: String(o.partition) } }) }));
    fill(members, table([
      { title: "Member", cls: "mono", cell: (m) => m.member_id },
      { title: "Client", cell: (m) => m.client_id },
      { title: "Host", cls: "mono", cell: (m) => m.host },
      epochs ? { title: "Epoch", num: true, cell: (m) => count(m.member_epoch) } : null,
      { title: "Partitions", cell: (m) => m.assignment.map(([t, p]) => `${t}-${p}`).join(", ") || "–" },
    ].filter(Boolean), doc.members, { id: "member-table", empty: "No active members." }));
  };
  // A share group (KIP-932): no commits; each share partition's start offset (SPSO) is where
  // its records are not all acknowledged yet, and a partition may be shared by several members.
  const drawShare = () => {
    fill(offsets, table([
      { title: "Topic", cls: "name", cell: (o) => link(`/topics/${seg(o.topic)}`, o.topic) },
      { title: "Partition", num: true, cell: (o) => String(o.partition) },
      { title: "Start offset (SPSO)", num: true, cell: (o) => count(o.start_offset) },
      { title: "End", num: true, cell: (o) => count(o.end) },
      { title: "Lag", num: true, cell: (o) => count(o.lag) },
      { title: "Members", cell: (o) => o.members.length ? o.members.flatMap((m, i) => [i ? ", " : null, memberName(doc, m)]) : "–" },
    ], doc.offsets, { id: "offset-table", empty: "No share-partition state yet.",
      rowAttrs: (o) => ({ dataset: { topic: o.topic, partition: String(o.partition) } }) }));
    fill(members, table([
      { title: "Member", cls: "mono", cell: (m) => m.member_id },
      { title: "Client", cell: (m) => m.client_id },
      { title: "Host", cls: "mono", cell: (m) => m.host },
      { title: "Epoch", num: true, cell: (m) => count(m.member_epoch) },
      { title: "Partitions", cell: (m) => m.assignment.map(([t, p]) => `${t}-${p}`).join(", ") || "–" },
    ], doc.members, { id: "member-table", empty: "No active members." }));
  };
  draw();
  deleteButton.addEventListener("click", () => deleteDialog(ctx, doc));
  resetButton.addEventListener("click", () => resetDialog(doc, async () => {
    doc = await get(base);
    sampledLag = null; // the samples so far predate the reset: show the new offsets' lag until a newer one
    staleUpTo = lastSampleTime;
    draw();
  }));

  const chart = new LineChart(canvas, { color: "#d9480f" });
  ctx.onLeave(() => chart.dispose());
  let interval = 1000; // replaced by the server's sampling interval
  const refreshChart = async () => {
    const s = await get(`${base}/series`);
    chart.update(s.points);
    interval = s.interval_s * 1000;
    const last = s.points[s.points.length - 1];
    fill(legend, el("span", {}, "now ", el("strong", { id: "lag-now" }, count(last ? last[1] : null)),
      " records behind"), el("span", {}, "sampled every ", `${s.interval_s} s`));
    if (last) {
      lastSampleTime = last[0];
      if (staleUpTo === null || last[0] > staleUpTo) {
        sampledLag = last[1];
        if (ctx.isCurrent()) draw();
      }
    }
  };
  await refreshChart();
  ctx.live(refreshChart, interval);
  ctx.live(async () => { doc = await get(base); if (ctx.isCurrent()) draw(); }, 5000);
}

// A member as people know it: its client id and host (the generated member id as a tooltip).
function memberName(doc, memberId) {
  const m = doc.members.find((x) => x.member_id === memberId);
  if (!m) return "–";
  return el("span", { title: m.member_id }, `${m.client_id} `, el("span", { class: "muted mono" }, m.host));
}

// A preview (the API's dry run) first; the reset itself only from the preview.
function resetDialog(doc, reload) {
  const topics = [...new Set(doc.offsets.map((o) => o.topic))];
  const topic = el("select", { id: "reset-topic" }, topics.map((t) => el("option", { value: t }, t)));
  const to = el("select", { id: "reset-to" },
    el("option", { value: "earliest" }, "the earliest offset"),
    el("option", { value: "latest" }, "the latest offset (skip everything)"),
    el("option", { value: "offset" }, "a given offset"),
    el("option", { value: "timestamp" }, "a time (the first record at or after it)"));
  const offset = el("input", { id: "reset-offset", type: "number", min: "0", value: "0" });
  const offsetField = field("Offset (kept within each partition's range)", offset);
  // local time, to the second; partitions with no record that late go to their end
  const time = el("input", { id: "reset-time", type: "datetime-local", step: "1", value: localInput(Date.now() - 3600_000) });
  const timeField = field("Time (this browser's time zone)", time);
  const plan = el("div", { id: "reset-plan" });
  const warning = doc.members.length
    ? el("div", { class: "warning" }, `The group has ${doc.members.length} active member(s): stop them before resetting.`)
    : null;
  let previewed = null;
  const request = () => {
    if (to.value === "timestamp" && Number.isNaN(new Date(time.value).getTime())) throw new Error("pick a date and time");
    return { topic: topic.value, to: to.value, offset: to.value === "offset" ? offset.value : undefined,
      timestamp: to.value === "timestamp" ? new Date(time.value).getTime() : undefined };
  };
  const handle = openDialog({
    title: `Reset offsets of ${doc.group_id}`,
    body: el("div", { class: "stack" }, warning, field("Topic", topic), field("Move to", to), offsetField, timeField, plan),
    confirm: { label: "Preview" },
    async onConfirm(h) {
      if (!previewed) {
        const result = await post(`/api/groups/${seg(doc.group_id)}/reset-offsets`, { ...request(), dry_run: true });
        previewed = request();
        fill(plan, table([
          { title: "Partition", num: true, cell: (o) => String(o.partition) },
          { title: "Now", num: true, cell: (o) => count(o.current) },
          { title: "New", num: true, cell: (o) => el("strong", {}, count(o.new)) },
        ], result.offsets, { id: "reset-plan-table" }));
        fill(h.confirmButton, "Reset offsets");
        h.confirmButton.classList.replace("primary", "solid");
        h.confirmButton.classList.add("danger");
        return false;
      }
      await post(`/api/groups/${seg(doc.group_id)}/reset-offsets`, { ...previewed, confirm: doc.group_id });
      await reload();
    },
  });
  const changed = () => {
    offsetField.hidden = to.value !== "offset";
    timeField.hidden = to.value !== "timestamp";
    if (previewed) { // a changed choice needs a new preview
      previewed = null;
      fill(plan);
      fill(handle.confirmButton, "Preview");
      handle.confirmButton.classList.remove("danger", "solid");
      handle.confirmButton.classList.add("primary");
    }
  };
  [topic, to, offset, time].forEach((i) => i.addEventListener("input", changed));
  changed();
  if (!topics.length) handle.error("The group has no committed offsets to reset.");
}

// Typed confirmation, then DeleteGroups; a group with members is refused by the broker
// (NON_EMPTY_GROUP), and its message stays in the dialog.
function deleteDialog(ctx, doc) {
  const typed = el("input", { id: "confirm-group", autocomplete: "off", placeholder: doc.group_id });
  const handle = openDialog({
    title: "Delete group",
    body: el("div", { class: "stack" },
      el("div", { class: "warning" }, "This deletes ", el("strong", {}, doc.group_id), " and its committed offsets. Its consumers would start again from auto.offset.reset."),
      field("Type the group's id to confirm", typed)),
    confirm: { label: "Delete group", danger: true, enabled: false },
    async onConfirm() {
      await post(`/api/groups/${seg(doc.group_id)}/delete`, { confirm: typed.value });
      ctx.navigate("/groups");
    },
  });
  typed.addEventListener("input", () => { handle.confirmButton.disabled = typed.value !== doc.group_id; });
  typed.focus();
}
