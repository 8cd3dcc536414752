// A config table, as the topic and broker pages show it: each config's value, where the value
// comes from (DescribeConfigs' source) and the value it would have without that setting.

import { badge, el, table } from "./dom.js";

const muted = (text) => el("span", { class: "muted" }, text);

export function sourceCell(c) {
  return c.is_default ? muted("default") : badge(c.source.toLowerCase().replaceAll("_", " "), "warn");
}

export function valueCell(c) {
  if (c.sensitive) return muted("(sensitive)");
  return c.value === null ? muted("null") : c.value;
}

// What the config would be without its own setting ("168 (log.retention.hours)" when a broker
// config of another name and unit stands behind it).
function defaultCell(c) {
  if (c.is_default) return "";
  if (c.default === null) return muted("–");
  return c.default.name === c.name ? c.default.value : [c.default.value, " ", muted(`(${c.default.name})`)];
}

// Name, value, where it comes from and the value it would have without that setting;
// `extra` adds columns (the topic page's Edit buttons).
export function configTable(rows, { id, extra = [], empty = "Every config has its default value." } = {}) {
  return table([
    { title: "Name", cls: "mono", cell: (c) => c.name },
    { title: "Value", cls: "mono", cell: valueCell },
    { title: "Source", cell: sourceCell },
    { title: "Default", cls: "mono", cell: defaultCell },
    ...extra,
  ], rows, { id, empty, rowAttrs: (c) => ({ class: c.is_default ? null : "changed", dataset: { config: c.name } }) });
}
