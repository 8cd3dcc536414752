// The groups: type (Kafka's group type: classic, consumer for KIP-848, share for KIP-932),
// protocol type, state, members, topics and total lag (a share group's: log end minus each
// share partition's start offset).

import { get, seg } from "./api.js";
import { badge, card, el, fill, link, pageHead, table } from "./dom.js";
import { count } from "./format.js";

// classic states, then KIP-848's Assigning and Reconciling
export const STATE_TONE = { Stable: "ok", Empty: null, PreparingRebalance: "warn", CompletingRebalance: "warn", Dead: "bad",
  Assigning: "warn", Reconciling: "warn" };

export function stateBadge(state) {
  return badge(state || "unknown", STATE_TONE[state] === undefined ? "warn" : STATE_TONE[state]);
}

export async function render(ctx) {
  ctx.title("Consumer groups");
  const list = el("div", { id: "groups" });
  const hint = el("span", {});
  fill(ctx.root, pageHead("Cluster", "Consumer groups"), card("All groups", { hint }, list));
  const load = async () => {
    const doc = await get("/api/groups");
    if (!ctx.isCurrent()) return;
    fill(hint, `${doc.groups.length} group${doc.groups.length === 1 ? "" : "s"}`);
    fill(list, table([
      { title: "Group", cls: "name", cell: (g) => link(`/groups/${seg(g.group_id)}`, g.group_id) },
      { title: "Type", cell: (g) => g.group_type || "–" },
      { title: "Protocol", cell: (g) => g.protocol_type || "–" },
      { title: "State", cell: (g) => stateBadge(g.state) },
      { title: "Members", num: true, cell: (g) => count(g.members) },
      { title: "Topics", cell: (g) => g.topics.join(", ") || "–" },
      { title: "Lag", num: true, cell: (g) => count(g.lag) },
    ], doc.groups, { id: "group-table", empty: "No consumer groups yet.", rowAttrs: (g) => ({ dataset: { group: g.group_id } }) }));
  };
  await load();
  ctx.live(load, 3000);
}
