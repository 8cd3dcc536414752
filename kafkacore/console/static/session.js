// Who is logged in and whether they may change anything: GET /api/session, asked once before
// the first page is drawn. The server refuses writes by itself; this only keeps the pages from
// offering buttons that would be refused.

import { get } from "./api.js";

export const session = { login: false, user: null, read_only: false };

export async function loadSession() {
  Object.assign(session, await get("/api/session"));
  return session;
}

export const canWrite = () => !session.read_only;
