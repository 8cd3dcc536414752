// The JSON API (/api/...), as the pages call it. Every answer also tells the sidebar's
// connection indicator whether the cluster is reachable.

export const TOKEN = document.querySelector('meta[name="console-token"]')?.content || "";
export const TOKEN_HEADER = "X-Console-Token";

export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

const UNREACHABLE = new Set([502, 503, 504]);

function report(ok, message) {
  window.dispatchEvent(new CustomEvent("cluster-status", { detail: { ok, message } }));
}

async function call(path, options) {
  let response;
  try {
    response = await fetch(path, options);
  } catch (e) {
    report(false, "the console server is not answering");
    throw new ApiError(0, "the console server is not answering (was it stopped?)");
  }
  let doc = null;
  try {
    doc = await response.json();
  } catch (e) {
    doc = null;
  }
  if (response.status === 401) {
    // the session ended (logged out elsewhere, idle too long, the console restarted): log in again
    location.assign(`/login?${new URLSearchParams({ next: location.pathname + location.search })}`);
  }
  if (!response.ok) {
    const message = (doc && doc.error) || `${response.status} ${response.statusText}`;
    report(!UNREACHABLE.has(response.status), message);
    throw new ApiError(response.status, message);
  }
  report(true);
  return doc;
}

export function get(path, query) {
  const qs = query ? new URLSearchParams(Object.entries(query).filter(([, v]) => v !== null && v !== undefined && v !== "")) : null;
  return call(qs && qs.toString() ? `${path}?${qs}` : path, { headers: { Accept: "application/json" } });
}

export function post(path, body) {
  return call(path, {
    method: "POST",
    headers: { "Content-Type": "application/json", Accept: "application/json", [TOKEN_HEADER]: TOKEN },
    body: JSON.stringify(body),
  });
}

// A path segment: topic names and group ids may hold characters a URL cannot.
export const seg = encodeURIComponent;
