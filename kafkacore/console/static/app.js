// The single-page application: routes URLs to pages, keeps their live updates running only
// while they are shown, and shows the cluster's reachability in the sidebar.

import { ApiError, TOKEN, get } from "./api.js";
import * as brokers from "./brokers.js";
import { el, fill, link } from "./dom.js";
import * as group from "./group.js";
import * as groups from "./groups.js";
import * as messages from "./messages.js";
import * as overview from "./overview.js";
import { loadSession, session } from "./session.js";
import * as topic from "./topic.js";
import * as topics from "./topics.js";

const ROUTES = [
  [/^\/$/, overview, "overview"],
  [/^\/topics$/, topics, "topics"],
  [/^\/topics\/([^/]+)$/, topic, "topics"],
  [/^\/topics\/([^/]+)\/messages$/, messages, "topics"],
  [/^\/groups$/, groups, "groups"],
  [/^\/groups\/([^/]+)$/, group, "groups"],
  [/^\/brokers$/, brokers, "brokers"],
  [/^\/brokers\/([^/]+)$/, brokers, "brokers"],
];

const RETRY_MS = 3000;
const main = document.getElementById("main");
let current = null; // { timers, disposers } of the page on screen

function leave() {
  if (!current) return;
  current.timers.forEach(clearInterval); // (clears the retry timeouts too: one id space)
  current.disposers.forEach((f) => f());
  current = null;
}

export function navigate(url, { replace = false } = {}) {
  if (replace) history.replaceState(null, "", url);
  else history.pushState(null, "", url);
  show();
}

async function show() {
  leave();
  const path = location.pathname.replace(/\/+$/, "") || "/";
  const root = el("div", { class: "page" });
  fill(main, root);
  const page = { timers: [], disposers: [] };
  current = page;
  const match = ROUTES.map(([re, mod, nav]) => [re.exec(path), mod, nav]).find(([m]) => m);
  document.querySelectorAll(".sidebar nav a").forEach((a) => a.classList.toggle("active", !!match && a.dataset.nav === match[2]));
  if (!match) {
    document.title = "Not found · kafkacore console";
    fill(root, notFound(`There is no page at ${location.pathname}.`));
    return;
  }
  const [m, mod] = match;
  const ctx = {
    root,
    params: m.slice(1).map(decodeURIComponent),
    query: new URLSearchParams(location.search),
    navigate,
    title: (t) => { document.title = `${t} · kafkacore console`; },
    // runs fn every ms while the page is shown (skipping a round while the previous one runs)
    live(fn, ms) {
      let busy = false;
      page.timers.push(setInterval(async () => {
        if (busy || current !== page) return;
        busy = true;
        try { await fn(); } catch (e) { /* shown by the connection indicator; the next round retries */ }
        finally { busy = false; }
      }, ms));
    },
    onLeave(fn) { page.disposers.push(fn); },
    isCurrent: () => current === page,
  };
  try {
    await mod.render(ctx);
  } catch (e) {
    if (current !== page) return;
    if (e instanceof ApiError && e.status === 404) {
      fill(root, notFound(e.message));
    } else if (e instanceof ApiError && (e.status === 0 || e.status >= 502)) {
      // the cluster (or the console) is away: try again until it is back
      fill(root, el("div", { class: "alert error", role: "alert" }, `Could not load this page: ${e.message}. Trying again…`));
      page.timers.push(setTimeout(() => { if (current === page) show(); }, RETRY_MS));
    } else {
      fill(root, el("div", { class: "alert error", role: "alert" }, `Could not load this page: ${e.message}`));
    }
  }
}

function notFound(message) {
  return el("div", { class: "card not-found", id: "not-found" },
    el("h1", {}, "Not found"),
    el("p", { class: "muted" }, message),
    el("p", {}, link("/", "Overview"), " · ", link("/topics", "Topics"), " · ", link("/groups", "Consumer groups"), " · ", link("/brokers", "Brokers")));
}

// links marked data-link change the page without reloading it
document.addEventListener("click", (event) => {
  const a = event.target.closest("a[data-link]");
  if (!a || event.defaultPrevented || event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey) return;
  event.preventDefault();
  if (a.getAttribute("href") !== location.pathname + location.search) navigate(a.getAttribute("href"));
});
window.addEventListener("popstate", show);

// the sidebar's indicator follows every API answer
const indicator = document.getElementById("connection");
let clusterName = "cluster";
window.addEventListener("cluster-status", (event) => {
  const { ok, message } = event.detail;
  indicator.classList.toggle("ok", ok);
  indicator.classList.toggle("down", !ok);
  fill(indicator.querySelector(".label"), ok ? clusterName : message || "cluster unreachable");
  indicator.title = ok ? "the cluster answers" : message || "";
});
get("/api/overview").then((o) => {
  clusterName = o.bootstrap;
  fill(indicator.querySelector(".label"), clusterName);
}).catch(() => {});

// who is logged in, and read-only or not, before the first page decides which buttons to show
function drawSession() {
  const parts = [];
  if (session.read_only) parts.push(el("span", { class: "badge warn read-only-mark", id: "read-only-mark", title: "this console does not change the cluster" }, "read-only"));
  if (session.user) {
    parts.push(el("span", { id: "session-user" }, `logged in as ${session.user}`));
    // a form, not a fetch: the server ends the session and sends the browser to the login page
    parts.push(el("form", { method: "post", action: "/logout" },
      el("input", { type: "hidden", name: "token", value: TOKEN }),
      el("button", { type: "submit", id: "logout" }, "Log out")));
  }
  if (parts.length) document.querySelector(".sidebar").append(el("div", { class: "session", id: "session" }, parts));
}

loadSession().then(drawSession, () => {}).finally(show);
