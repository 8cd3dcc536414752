// Building the page: every piece of data goes into the DOM as a text node or an attribute
// value, never as markup, so a record holding "<script>" shows as those characters.

export function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name === "class") node.className = value;
    else if (name === "dataset") Object.assign(node.dataset, value);
    else if (name.startsWith("on") && typeof value === "function") node.addEventListener(name.slice(2), value);
    else if (name === "value") node.value = value;
    else node.setAttribute(name, value === true ? "" : String(value));
  }
  append(node, children);
  return node;
}

export function append(node, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

// Replaces the contents of `node` with `children`.
export function fill(node, ...children) {
  node.replaceChildren();
  return append(node, children);
}

// A link handled by the single-page router (app.js) instead of a full page load.
export function link(href, ...children) {
  return el("a", { href, dataset: { link: "" } }, ...children);
}

export function badge(text, tone) {
  return el("span", { class: `badge${tone ? " " + tone : ""}` }, text);
}

export function tile(label, value, { tone, small, id } = {}) {
  return el("div", { class: `tile${tone ? " " + tone : ""}`, id },
    el("div", { class: "label" }, label),
    el("div", { class: `value${small ? " small" : ""}` }, value));
}

export function card(title, { hint, id, actions } = {}, ...body) {
  return el("section", { class: "card", id },
    el("h2", {}, el("span", {}, title), hint ? el("span", { class: "hint" }, hint) : null, actions || null),
    ...body);
}

// A table: columns are [{ title, num, cell(row) -> node or text }]; rowAttrs(row) -> attributes.
export function table(columns, rows, { empty = "Nothing here yet.", rowAttrs, id } = {}) {
  if (!rows.length) return el("div", { class: "empty", id }, empty);
  return el("div", { class: "table-wrap" },
    el("table", { id },
      el("thead", {}, el("tr", {}, columns.map((c) => el("th", { class: c.num ? "num" : null }, c.title)))),
      el("tbody", {}, rows.map((row) => el("tr", rowAttrs ? rowAttrs(row) : {},
        columns.map((c) => el("td", { class: [c.num ? "num" : "", c.cls || ""].join(" ").trim() || null },
          c.cell(row))))))));
}

export function pageHead(crumbs, title, ...actions) {
  return el("div", { class: "page-head" },
    el("div", {}, el("div", { class: "crumbs" }, crumbs), el("h1", {}, title)),
    el("div", { class: "actions" }, actions));
}

export function alertBox(message, tone = "error") {
  return el("div", { class: `alert ${tone}`, role: tone === "error" ? "alert" : "status" }, message);
}
