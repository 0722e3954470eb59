// The lambda-agent chat page. It uses the local run's API as any client
// would: POST /chat/stream for turns (Server-Sent Events), and for the
// responses to a paused turn's interrupts; GET /sessions and GET
// /sessions/{id} for the list and the transcripts, with the interrupts that
// wait; DELETE /sessions/{id}; regenerate and edit, which POST /chat/stream
// runs too; a link to GET /sessions/{id}/export; GET /memory, DELETE
// /memory/{id} and DELETE /memory for the memory panel; GET
// /sessions/{id}/audit and its records' hrefs for what the model saw. GET
// /local/info, the local run's own route, says which model answers.
// Everything the model, a tool or a user wrote is rendered as text, never as
// HTML.
"use strict";

const $ = (id) => document.getElementById(id);
// pinned: the view showed the end of the thread when last scrolled.
// pending: the cards of the interrupts the session's last turn waits for,
// each {interrupt, card, box, response}; paused: the Turn they are in.
// count: the number of messages the session stores, the index the next
// turn's first message gets; each user message that starts a turn keeps its
// index in its element's data-index, for an edit.
const state = { sessionId: "", busy: false, removed: 0, summarized: false, pinned: true, pending: [], paused: null, count: 0 };
// owners: the Turn that shows each tool use, by the use's id, for results
// that arrive in a later turn (a resume, or a message that denies).
const owners = new Map();
// The session list: the ids shown, and the cursor of the next page.
const list = { loaded: false, ids: new Set(), cursor: "" };
const PAGE = 50;
// The memory panel: whether the caller has memory (null until known), the
// number of records shown, the cursor of the next page, the pending
// re-reads, and seq, which a read must still hold when it ends to be shown.
const mem = { enabled: null, shown: 0, cursor: "", timers: [], seq: 0 };

// api calls the JSON API and throws the API's error message on failure,
// with the response's status.
async function api(path, options) {
  const resp = await fetch(path, options);
  const body = resp.status === 204 ? null : await resp.json().catch(() => null);
  if (!resp.ok) {
    const e = (body && body.error) || {};
    const err = new Error(`${resp.status} ${e.code || ""}: ${e.message || resp.statusText}`);
    err.status = resp.status;
    err.code = e.code || "";
    throw err;
  }
  return body;
}

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

function button(className, text, onClick) {
  const b = el("button", className, text);
  b.type = "button";
  b.addEventListener("click", onClick);
  return b;
}

function setStatus(text) { $("status").textContent = text || ""; }

function setBusy(busy) {
  state.busy = busy;
  for (const b of document.querySelectorAll("#send, #new-chat, .example, #pending-deny, .interrupt button, .interrupt input, .rewind")) b.disabled = busy;
  follow(showRegenerate);
}

// ---- scrolling -----------------------------------------------------------
// The view follows the end of the thread while it is there; a reader who
// scrolled up stays where they are, and gets a button back to the end.

function atEnd() {
  const m = $("messages");
  return m.scrollHeight - m.scrollTop - m.clientHeight < 32;
}

function toEnd() {
  const m = $("messages");
  m.scrollTop = m.scrollHeight;
  state.pinned = true;
  $("jump").hidden = true;
}

// follow makes a change to the thread, keeping the end in view if it was.
function follow(change) {
  const pinned = atEnd();
  change();
  if (pinned) toEnd();
  else $("jump").hidden = false;
}

// ---- the model -----------------------------------------------------------

async function loadInfo() {
  const note = $("model-note"), badge = $("model");
  try {
    const info = await api("/local/info");
    const offline = info.model === "offline";
    badge.textContent = offline ? "Offline model" : "Bedrock";
    badge.title = offline ? info.where : `${info.where}, ${info.model_id}`;
    badge.classList.add(info.model);
    badge.hidden = false;
    note.className = `callout ${info.model}`;
    note.replaceChildren(el("strong", "", offline ? "Offline model. " : "Amazon Bedrock. "), offline
      ? `${info.where}, so a stand-in model answers with canned replies: it echoes you, calls the calculator for arithmetic, remembers what you tell it, and tells the time. With AWS credentials, the local run talks to Bedrock instead.`
      : `Messages go to ${info.where}, model ${info.model_id}, with your AWS credentials.`);
  } catch (err) {
    note.textContent = `Could not tell which model answers: ${err.message}`;
  }
}

// ---- sessions ------------------------------------------------------------

// when says when a session started, briefly: "Today 14:05", "3 Mar 09:12".
function when(iso) {
  const d = new Date(iso), now = new Date();
  const time = d.toLocaleTimeString([], { hour: "numeric", minute: "2-digit" });
  if (d.toDateString() === now.toDateString()) return `Today ${time}`;
  const day = { day: "numeric", month: "short" };
  if (d.getFullYear() !== now.getFullYear()) day.year = "numeric";
  return `${d.toLocaleDateString([], day)} ${time}`;
}

// shortId is enough of an id to tell sessions with one title apart.
function shortId(id) { return id.length > 10 ? id.slice(0, 8) : id; }

function trashIcon() {
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("viewBox", "0 0 16 16");
  svg.setAttribute("aria-hidden", "true");
  const path = document.createElementNS(ns, "path");
  path.setAttribute("d", "M3 4.5h10M6.5 4.5V3h3v1.5M4.5 4.5l.6 8.5h5.8l.6-8.5M7 7v4M9 7v4");
  svg.append(path);
  return svg;
}

function sessionItem(s) {
  const title = s.title || s.session_id;
  const li = el("li", "session-item");
  const open = button("session", undefined, () => {
    closeSessions();
    openSession(s.session_id);
  });
  open.dataset.id = s.session_id;
  open.title = `${title}\n${s.session_id} · ${new Date(s.created_at).toLocaleString()}`;
  open.append(el("span", "title", title), el("span", "when", `${when(s.created_at)} · ${shortId(s.session_id)}`));
  if (s.session_id === state.sessionId) open.classList.add("current");
  const del = button("delete", undefined, () => confirmDelete(li, s.session_id, title));
  del.title = "Delete this session";
  del.setAttribute("aria-label", `Delete the session “${title}” (${shortId(s.session_id)})`);
  del.append(trashIcon());
  li.append(open, del);
  return li;
}

function showSessions(sessions, where) {
  const ul = $("sessions");
  const items = [];
  for (const s of sessions) {
    if (list.ids.has(s.session_id)) continue;
    list.ids.add(s.session_id);
    items.push(sessionItem(s));
  }
  if (where === "top") ul.prepend(...items);
  else ul.append(...items);
  $("sessions-note").textContent = list.ids.size ? "" : "No sessions yet.";
}

function setCursor(cursor) {
  list.cursor = cursor || "";
  $("more-sessions").hidden = !list.cursor;
}

// loadSessions reads the first page of the list, or, once it has, adds the
// sessions that started since: the list is newest first, so the pages
// already read stay as they are.
async function loadSessions() {
  try {
    const body = await api(`/sessions?limit=${PAGE}`);
    showSessions(body.sessions, "top");
    if (!list.loaded) setCursor(body.next_cursor);
    list.loaded = true;
  } catch (err) {
    $("sessions-note").textContent = `Could not list sessions: ${err.message}`;
  }
}

async function moreSessions() {
  const more = $("more-sessions");
  more.disabled = true;
  try {
    const body = await api(`/sessions?limit=${PAGE}&cursor=${encodeURIComponent(list.cursor)}`);
    showSessions(body.sessions, "end");
    setCursor(body.next_cursor);
  } catch (err) {
    $("sessions-note").textContent = `Could not list more sessions: ${err.message}`;
  } finally {
    more.disabled = false;
  }
}

// confirmDelete asks in the list item itself, which then deletes or goes
// back to what it was.
function confirmDelete(li, id, title) {
  const before = [...li.childNodes];
  const restore = (focus) => {
    li.classList.remove("confirming");
    li.replaceChildren(...before);
    if (focus) li.querySelector(".delete").focus();
  };
  const cancel = button("quiet", "Cancel", () => restore(true));
  const yes = button("danger", "Delete", async () => {
    yes.disabled = cancel.disabled = true;
    try {
      await api(`/sessions/${encodeURIComponent(id)}`, { method: "DELETE" });
    } catch (err) {
      restore(true);
      $("sessions-note").textContent = `Could not delete the session: ${err.message}`;
      return;
    }
    const next = li.nextElementSibling || li.previousElementSibling;
    li.remove();
    list.ids.delete(id);
    $("sessions-note").textContent = list.ids.size ? "" : "No sessions yet.";
    if (state.sessionId === id) newChat();
    (next ? next.querySelector(".session") : $("new-chat")).focus();
    refreshMemorySoon(); // what memory learned from the session goes with it
  });
  const question = el("div", "confirm");
  question.setAttribute("role", "group");
  question.setAttribute("aria-label", "Confirm the deletion");
  const what = el("span", "question", "Delete ");
  what.append(el("q", "", title), "?");
  question.append(what, yes, cancel);
  question.addEventListener("keydown", (e) => {
    if (e.key === "Escape") {
      e.stopPropagation();
      restore(true);
    }
  });
  li.classList.add("confirming");
  li.replaceChildren(question);
  cancel.focus();
}

function showSession(id, title) {
  state.sessionId = id;
  $("session-title").textContent = title || (id ? id : "New chat");
  $("session-id").textContent = id ? id : "";
  if (id) history.replaceState(null, "", `#s=${encodeURIComponent(id)}`);
  else history.replaceState(null, "", location.pathname);
  const exp = $("export");
  exp.hidden = !id;
  if (id) {
    exp.href = `/sessions/${encodeURIComponent(id)}/export`;
    exp.download = `${id}.json`;
  } else {
    exp.removeAttribute("href");
  }
  for (const b of document.querySelectorAll("#sessions .session")) {
    b.classList.toggle("current", b.dataset.id === id);
    if (b.dataset.id === id) b.setAttribute("aria-current", "true");
    else b.removeAttribute("aria-current");
  }
}

// showWelcome shows the first screen in place of an empty thread.
function showWelcome() {
  const empty = !state.sessionId && !$("messages").children.length;
  $("welcome").hidden = !empty;
  $("messages").hidden = empty;
  if (empty) $("jump").hidden = true;
}

function newChat() {
  if (state.busy) return;
  showSession("", "");
  state.removed = 0;
  state.summarized = false;
  state.count = 0;
  $("messages").replaceChildren();
  owners.clear();
  showPending(null, []);
  showWindow({ removed: 0, summarized: false }, null);
  showWelcome();
  closeSessions();
  $("input").focus();
}

// openSession loads a whole transcript, page by page.
async function openSession(id) {
  if (state.busy) {
    setStatus("Wait for the answer to finish before opening another session.");
    return;
  }
  setStatus("Loading…");
  try {
    let cursor = "", first = null;
    const messages = [];
    do {
      const q = `limit=1000${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`;
      const page = await api(`/sessions/${encodeURIComponent(id)}?${q}`);
      first = first || page;
      messages.push(...page.messages);
      cursor = page.next_cursor || "";
    } while (cursor);
    showSession(id, first.title);
    // Messages that expired, always the oldest, are left out: first is the
    // stored index of the first one shown.
    state.count = (first.first || 0) + messages.length;
    renderTranscript(messages, first.first || 0);
    showRegenerate();
    const paused = first.interrupts.length ? owners.get(first.interrupts[0].id) : null;
    showPending(paused, first.interrupts);
    state.removed = first.window.removed;
    state.summarized = first.window.summarized;
    showWindow(first.window, first.summary);
    showWelcome();
    toEnd();
    if (state.pending.length) focusCard(state.pending[0]);
    setStatus("");
  } catch (err) {
    newChat();
    setStatus(`Could not open ${id}: ${err.message}`);
  }
}

// showWindow says which stored messages the model still sees.
function showWindow(window, summary) {
  const banner = $("window-banner");
  banner.replaceChildren();
  if (!window.removed) {
    banner.hidden = true;
    return;
  }
  banner.hidden = false;
  banner.append(el("span", "", window.summarized
    ? `The first ${window.removed} messages are summarized; the model sees the summary and the messages after it.`
    : `The model sees messages from #${window.removed + 1} on; the first ${window.removed} have slid out of its window.`));
  if (summary) {
    const details = el("details");
    details.append(el("summary", "", "Summary"), el("p", "", summary));
    banner.append(details);
  }
}

// ---- memory --------------------------------------------------------------
// What the agent learned about the caller in earlier sessions, which it
// recalls in later ones: listed a page at a time, each record deleted by its
// button, all of it forgotten after a confirmation. Memory learns after a
// turn's commit, in the background: the panel reads it again shortly after
// each answer, a few times.

const MEMORY_PAGE = 50;
// When to read memory again after a turn, in milliseconds.
const MEMORY_AGAIN = [300, 1200, 3000];

function memoryItem(r) {
  const li = el("li", "memory-item");
  li.dataset.id = r.id;
  const from = r.source && r.source.session_id ? ` in session ${shortId(r.source.session_id)}` : "";
  li.title = `Learned ${when(r.updated_at)}${from}`;
  const del = button("delete", undefined, () => forgetRecord(li, r.id));
  del.title = "Forget this";
  del.setAttribute("aria-label", `Forget “${r.text}”`);
  del.append(trashIcon());
  li.append(el("span", "kind", r.kind), el("span", "text", r.text), del);
  return li;
}

// showMemory shows the records of a read, in place of those shown, and
// keeps the focus on the record it was on.
function showMemory(enabled, records, cursor) {
  const ul = $("memory-records");
  const focused = ul.contains(document.activeElement) ? document.activeElement.closest("li").dataset.id : null;
  mem.enabled = enabled;
  ul.replaceChildren(...records.map(memoryItem));
  mem.shown = records.length;
  mem.cursor = cursor || "";
  $("more-memory").hidden = !mem.cursor;
  $("memory").classList.toggle("off", !enabled);
  $("memory-off").hidden = enabled;
  if (focused) {
    const again = [...ul.children].find((li) => li.dataset.id === focused);
    (again ? again.querySelector(".delete") : $("memory-title")).focus();
  }
  memoryNote();
}

// memoryNote says what the panel shows when it shows no records, and
// offers Forget all when it does.
function memoryNote() {
  const confirming = !$("memory-confirm").hidden;
  $("forget-all").hidden = confirming || !mem.enabled || mem.shown === 0;
  let note = "";
  if (mem.enabled === false) {
    note = "Long-term memory is off: nothing is carried from one session to the next. The local run keeps memory unless started with -memory=false.";
  } else if (mem.enabled && mem.shown === 0) {
    note = "Nothing yet. Tell the agent about yourself, such as “My favourite colour is teal.”, then ask it in a new chat.";
  }
  $("memory-note").textContent = note;
}

// loadMemory reads the caller's memory again, as many pages as are shown.
async function loadMemory() {
  const seq = ++mem.seq;
  try {
    const records = [];
    let cursor = "", enabled = false;
    do {
      const body = await api(`/memory?limit=${MEMORY_PAGE}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`);
      enabled = body.enabled;
      records.push(...body.records);
      cursor = body.next_cursor || "";
    } while (cursor && records.length < mem.shown);
    if (seq === mem.seq) showMemory(enabled, records, cursor);
  } catch (err) {
    if (seq === mem.seq) $("memory-note").textContent = `Could not read memory: ${err.message}`;
  }
}

async function moreMemory() {
  const more = $("more-memory");
  more.disabled = true;
  const seq = ++mem.seq;
  try {
    const body = await api(`/memory?limit=${MEMORY_PAGE}&cursor=${encodeURIComponent(mem.cursor)}`);
    if (seq !== mem.seq) return;
    $("memory-records").append(...body.records.map(memoryItem));
    mem.shown += body.records.length;
    mem.cursor = body.next_cursor || "";
    more.hidden = !mem.cursor;
    memoryNote();
  } catch (err) {
    $("memory-note").textContent = `Could not read more of memory: ${err.message}`;
  } finally {
    more.disabled = false;
  }
}

// refreshMemorySoon reads memory again a few times over the next seconds,
// while it learns from the turn that just ended.
function refreshMemorySoon() {
  if (mem.enabled === false) return;
  for (const t of mem.timers) clearTimeout(t);
  mem.timers = MEMORY_AGAIN.map((ms) => setTimeout(loadMemory, ms));
}

async function forgetRecord(li, id) {
  const del = li.querySelector(".delete");
  del.disabled = true;
  mem.seq++; // a read under way may still hold the record
  try {
    await api(`/memory/${encodeURIComponent(id)}`, { method: "DELETE" });
  } catch (err) {
    if (err.status !== 404) { // a record gone already is what was asked
      del.disabled = false;
      $("memory-note").textContent = `Could not forget it: ${err.message}`;
      return;
    }
  }
  const next = li.nextElementSibling || li.previousElementSibling;
  li.remove();
  mem.shown--;
  memoryNote();
  (next ? next.querySelector(".delete") : $("memory-title")).focus();
}

function confirmForget(asking) {
  $("memory-confirm").hidden = !asking;
  memoryNote();
  (asking ? $("forget-cancel") : $("forget-all")).focus();
}

async function forgetAll() {
  $("forget-yes").disabled = $("forget-cancel").disabled = true;
  mem.seq++;
  try {
    await api("/memory", { method: "DELETE" });
    $("memory-confirm").hidden = true;
    showMemory(mem.enabled, [], "");
    $("memory-title").focus();
  } catch (err) {
    $("memory-note").textContent = `Could not forget: ${err.message}`;
  } finally {
    $("forget-yes").disabled = $("forget-cancel").disabled = false;
  }
}

// ---- the narrow layout's session list ------------------------------------

function sessionsOpen() { return document.body.classList.contains("sessions-open"); }

function openSessions() {
  document.body.classList.add("sessions-open");
  $("open-sessions").setAttribute("aria-expanded", "true");
  document.querySelector("main").inert = true;
  const current = document.querySelector("#sessions .session.current");
  if (current) current.scrollIntoView({ block: "nearest" });
  $("new-chat").focus();
}

function closeSessions() {
  if (!sessionsOpen()) return;
  const inside = $("sidebar").contains(document.activeElement);
  document.body.classList.remove("sessions-open");
  $("open-sessions").setAttribute("aria-expanded", "false");
  document.querySelector("main").inert = false;
  if (inside) $("open-sessions").focus();
}

// ---- rendering -----------------------------------------------------------

// addUser shows a message of the user's; index, the message's in the
// stored session, makes it editable.
function addUser(text, index) {
  const li = el("li", "turn user");
  li.append(el("div", "text", text));
  $("messages").append(li);
  if (index !== undefined) stored(li, index);
  return li;
}

// stored gives a message of the user's its index in the stored session,
// and an Edit button.
function stored(li, index) {
  li.dataset.index = String(index);
  const edit = button("quiet rewind edit", "Edit", () => startEdit(li));
  edit.setAttribute("aria-label", "Edit this message and run it again");
  edit.disabled = state.busy;
  const row = el("div", "turn-actions");
  row.append(edit);
  li.append(row);
}

// isTurnStart is true of a user message that starts a turn: one that is no
// tool result, which only a turn start may be rewound to.
function isTurnStart(m) { return m.role === "user" && !m.content.some((b) => b.toolResult); }

// turnStart returns the index of the first turn start of a turn's
// messages, which are stored from base on, or -1.
function turnStart(messages, base) {
  const i = (messages || []).findIndex(isTurnStart);
  return i < 0 ? -1 : base + i;
}

// resultPreview renders a stored tool result's content as text.
function resultPreview(r) {
  return (r.content || []).map((c) => c.text ?? (c.json ? JSON.stringify(c.json) : "[media]")).join(" ");
}

// showResults shows the tool results of messages in the boxes of their
// calls, wherever those are in the thread.
function showResults(messages) {
  for (const m of messages || []) {
    if (m.role !== "user") continue;
    for (const b of m.content) {
      const r = b.toolResult;
      const owner = r && owners.get(r.toolUseId);
      if (owner) owner.toolResult(r.toolUseId, r.status, resultPreview(r));
    }
  }
}

// Work is a sub-agent's work on a task, drawn inside the box of the tool
// call that delegated it: its text and its own tool calls, as they stream.
class Work {
  constructor(box, name) {
    this.box = box;
    this.div = el("div", "agent-work");
    this.div.dataset.agent = name;
    this.div.append(el("div", "agent-name", `${name} is working…`));
    this.segment = null;
    this.tools = new Map();
    box.insertBefore(this.div, box.querySelector(":scope > .result"));
  }
  text(delta) {
    if (!this.segment) {
      this.segment = el("div", "text");
      this.div.append(this.segment);
    }
    this.segment.textContent += delta;
  }
  toolUse(id, name, input) {
    this.segment = null;
    this.div.append(toolBox(this, id, name, input));
  }
  toolResult(id, status, preview) { showToolResult(this.tools.get(id), status, preview); }
  waiting(id, kind) { showWaiting(this.tools.get(id), kind); }
  resume(name) {
    this.segment = null;
    this.div.classList.remove("waiting");
    this.div.querySelector(".agent-name").textContent = `${name} is working…`;
    this.box.querySelector(":scope > .result").textContent = "running…";
  }
  // end closes the work: answered, failed with error, or suspended, when
  // it waits for a person.
  end(name, error, suspended) {
    const line = error ? `${name} failed: ${error}` : suspended ? `${name} waits for you` : `${name} answered`;
    this.div.querySelector(".agent-name").textContent = line;
    this.div.classList.add(error ? "failed" : suspended ? "waiting" : "done");
    if (suspended) this.box.querySelector(":scope > .result").textContent = `waiting for you to answer ${name}`;
  }
}

// works are the sub-agents' works under way, by the id of the tool call
// that delegated them.
const works = new Map();

// toolBox draws a tool call of owner's, whose result is to come.
function toolBox(owner, id, name, input) {
  const box = el("div", "tool pending");
  box.dataset.id = id;
  box.dataset.name = name;
  const call = el("div", "call");
  call.append(el("span", "name", name), el("code", "input", JSON.stringify(input)));
  box.append(call, el("div", "result", "running…"));
  owner.tools.set(id, box);
  owners.set(id, owner);
  return box;
}

// showWaiting marks a tool call's box as waiting for a person.
function showWaiting(box, kind) {
  if (!box || !box.classList.contains("pending")) return;
  box.classList.add("waiting");
  box.querySelector(":scope > .result").textContent = kind === "question" ? "waiting for your answer" : "waiting for your approval";
}

// showToolResult fills a tool call's box with its result.
function showToolResult(box, status, preview) {
  if (!box) return;
  box.classList.remove("pending", "waiting", "success", "error");
  box.classList.add(status === "error" ? "error" : "success");
  box.querySelector(":scope > .result").textContent = preview || "(no output)";
}

// Turn is an assistant turn: text segments, tool calls and their results,
// and a line about the turn once it is done.
class Turn {
  constructor() {
    this.li = el("li", "turn assistant");
    this.li.dataset.pieces = "0";
    this.segment = null;
    this.tools = new Map();
    // The stored messages the turn shows, from and to their indexes, once
    // known; saw is the view of what the model saw to make them.
    this.from = null;
    this.to = null;
    this.saw = null;
    $("messages").append(this.li);
  }
  // stored says that messages, stored from index first on, are the turn's
  // (a resume adds to those of the turn it resumes), and offers what the
  // model saw to make them.
  stored(first, messages) {
    const n = (messages || []).length;
    if (!n || !state.sessionId) return;
    this.span(first, first + n - 1);
  }
  // span offers what the model saw to make the stored messages from index
  // from to index to, with those the turn showed already.
  span(from, to) {
    this.from = this.from === null ? from : Math.min(this.from, from);
    this.to = this.to === null ? to : Math.max(this.to, to);
    const view = sawView(state.sessionId, this.from, this.to);
    if (this.saw) this.saw.replaceWith(view);
    else this.li.insertBefore(view, this.li.querySelector(":scope > .regenerate-row"));
    this.saw = view;
  }
  text(delta, streamed = true) {
    if (!this.segment) {
      this.segment = el("div", "text");
      this.li.append(this.segment);
    }
    this.segment.textContent += delta;
    if (streamed) this.li.dataset.pieces = String(Number(this.li.dataset.pieces) + 1);
  }
  toolUse(id, name, input) {
    this.segment = null; // text after the call is a new segment
    this.li.append(toolBox(this, id, name, input));
  }
  // waiting marks a call that waits for a person.
  waiting(id, kind) { showWaiting(this.tools.get(id), kind); }
  toolResult(id, status, preview) { showToolResult(this.tools.get(id), status, preview); }
  done(d) {
    this.li.classList.add("done");
    this.li.classList.remove("failed");
    // The final text is done.text. It differs from what streamed when the
    // agent closed the turn itself, such as at its cycle limit. A turn
    // that paused ends with a tool call: its text is the one before it.
    const squash = (s) => s.replace(/\s+/g, "");
    const texts = this.li.querySelectorAll(":scope > .text");
    const last = texts.length ? texts[texts.length - 1].textContent : "";
    if (d.text && squash(last) !== squash(d.text)) {
      this.segment = null;
      this.text(d.text, false);
    }
    const u = d.usage || {}, m = d.metrics || {};
    const parts = [
      `${u.input_tokens ?? 0} in · ${u.output_tokens ?? 0} out tokens`,
      `${m.model_calls ?? 0} model call${m.model_calls === 1 ? "" : "s"}`,
    ];
    if (m.tool_calls) parts.push(`${m.tool_calls} tool call${m.tool_calls === 1 ? "" : "s"}`);
    if (m.reductions) parts.push(`${m.reductions} reduction${m.reductions === 1 ? "" : "s"}`);
    // The share of the input the prompt cache served, and the turn's cost
    // when the model's prices are known.
    const read = u.cache_read_input_tokens ?? 0;
    const input = (u.input_tokens ?? 0) + read + (u.cache_write_input_tokens ?? 0);
    if (read > 0) parts.push(`${Math.round((100 * read) / input)}% of input from the cache`);
    if (typeof m.estimated_cost_usd === "number") parts.push(`$${m.estimated_cost_usd.toFixed(4)}`);
    parts.push(`${((m.duration_ms ?? 0) / 1000).toFixed(1)} s`, d.stop_reason);
    this.li.append(el("div", "meta usage", parts.join(" · ")));
    const w = d.window || { removed: 0 };
    if (w.removed > state.removed) {
      const what = w.summarized && !state.summarized
        ? `Older messages were summarized: ${w.removed} are now out of the model's window.`
        : `The window slid: ${w.removed - state.removed} more message${w.removed - state.removed === 1 ? "" : "s"} left the model's view (${w.removed} in all).`;
      this.li.append(el("div", "meta window", what));
    }
    state.removed = w.removed;
    state.summarized = w.summarized;
  }
  fail(error) {
    this.li.classList.add("done", "failed");
    this.problem(error);
  }
  // problem says what went wrong, without marking the turn failed: a resume
  // that failed leaves its turn as it was.
  problem(error) {
    this.li.append(el("div", "meta error", `${error.code}: ${error.message}`));
  }
  // giveBack returns a failed turn's message to the input box, or, when
  // something new is being typed there, offers to.
  giveBack(text) {
    const input = $("input");
    if (!input.value.trim()) {
      input.value = text;
      this.li.append(el("div", "meta", "Your message is back in the input box, to edit or send again."));
      return;
    }
    const restore = button("quiet restore", "Put my message back in the input box", () => {
      input.value = text;
      input.focus();
      restore.remove();
    });
    this.li.append(restore);
  }
}

// renderTranscript draws stored messages: tool results, which come back in
// the next user message, join their calls.
function renderTranscript(messages, base = 0) {
  $("messages").replaceChildren();
  owners.clear();
  let turn = null;
  // asked is the index of the user's message that the next answer follows.
  let asked = null;
  const spans = [];
  for (const [k, m] of messages.entries()) {
    const i = base + k;
    if (m.role === "user") {
      showResults([m]);
      const text = m.content.filter((b) => b.text).map((b) => b.text).join("\n");
      const media = m.content.filter((b) => b.image || b.document).length;
      if (text || media) {
        // A message with attachments is not offered for an edit, which
        // would send its text alone.
        const editable = isTurnStart(m) && !media;
        addUser(text + (media ? ` [${media} attachment${media === 1 ? "" : "s"}]` : ""), editable ? i : undefined);
        turn = null;
        asked = i;
      }
      continue;
    }
    if (!turn) {
      turn = new Turn();
      spans.push({ turn, from: asked ?? i, to: i });
    }
    spans[spans.length - 1].to = i;
    for (const b of m.content) {
      if (b.text) turn.text(b.text, false);
      if (b.toolUse) turn.toolUse(b.toolUse.toolUseId, b.toolUse.name, b.toolUse.input);
    }
    turn.li.classList.add("done");
  }
  for (const s of spans) s.turn.span(s.from, s.to);
}

// ---- what the model saw --------------------------------------------------
// Each answer offers, collapsed, the audit record of the turn that made it
// (GET /sessions/{id}/audit, docs/audit.md): for each model call, the
// request as it went over the wire (the system prompt, the messages with
// the turn's context blocks, the tools, the cache points) and the answer.
// It is read when first opened. A record holds the model's, the tools' and
// the user's words, which are hostile: it is drawn with textContent only.

// CONTEXT_HEADER begins a text block that gives a turn context, such as
// recalled memory, rather than the person's words: agent.ContextHeader,
// which a test holds this to.
const CONTEXT_HEADER = "Context from the application this conversation runs in (not written by the person):";
const AUDIT_PAGE = 100;

// sawView is the collapsed view of what the model saw to make the messages
// of session id stored from index from to index to.
function sawView(id, from, to) {
  const details = el("details", "saw");
  details.dataset.from = String(from);
  details.dataset.to = String(to);
  const body = el("div", "saw-body");
  details.append(el("summary", "", "What the model saw"), body);
  let read = false;
  details.addEventListener("toggle", () => {
    if (!details.open || read) return;
    read = true;
    showSaw(id, from, to, body);
  });
  return details;
}

// auditOf reads the records of session id's turns whose first message is
// stored from index from to index to, each with its record: one a page
// lists without it, being too large for the page, is read alone by its
// href.
async function auditOf(id, from, to) {
  const out = [];
  let cursor = "";
  do {
    const page = await api(`/sessions/${encodeURIComponent(id)}/audit?limit=${AUDIT_PAGE}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`);
    out.push(...page.records.filter((r) => r.at >= from && r.at <= to));
    // The records are listed oldest turn first: none past to follows.
    const last = page.records[page.records.length - 1];
    cursor = last && last.at > to ? "" : page.next_cursor || "";
  } while (cursor);
  for (const r of out) {
    if (r.record || !r.href) continue;
    try {
      r.record = (await api(r.href)).record;
    } catch (err) {
      r.problem = err.message;
    }
  }
  return out;
}

async function showSaw(id, from, to, body) {
  body.setAttribute("aria-busy", "true");
  body.replaceChildren(el("p", "note", "Reading the audit record…"));
  try {
    const records = await auditOf(id, from, to);
    body.replaceChildren(...(records.length
      ? records.map((r, i) => sawCall(r, i, records.length))
      : [el("p", "note", "No model call of this answer is recorded: its records have expired, or were not stored.")]));
  } catch (err) {
    body.replaceChildren(el("p", "note error", err.code === "audit_off"
      ? "The audit record is off (AUDIT=off), so what the model saw was not kept. The local run keeps it unless AUDIT=off."
      : `Could not read the audit record: ${err.message}`));
  } finally {
    body.removeAttribute("aria-busy");
  }
}

// sawPart is a labelled part of a model call's view.
function sawPart(className, label, ...children) {
  const div = el("div", `saw-part ${className}`);
  div.append(el("div", "label", label), ...children);
  return div;
}

// sawCall draws the record of the i-th of n model calls.
function sawCall(entry, i, n) {
  const section = el("section", "saw-call");
  section.dataset.id = entry.id;
  const rec = entry.record;
  const head = [`Model call ${i + 1} of ${n}`];
  if (rec) head.push(rec.model_id, rec.stream ? "ConverseStream" : "Converse", `${rec.duration_ms} ms`);
  if (entry.outcome !== "committed") head.push(`a turn that ${entry.outcome === "failed" ? "failed, and stored nothing" : entry.outcome}`);
  section.append(el("h4", "", head.join(" · ")));
  if (!rec) {
    section.append(el("p", "note error", `Not shown: ${entry.problem || "the record is not in the answer"}`));
    return section;
  }
  const req = rec.request || {};
  const points = req.cache_points || {};
  const system = req.system || [];
  section.append(sawPart("system", "System prompt",
    ...(system.length ? system.map((t) => el("pre", "saw-text", t)) : [el("p", "note", "(none)")]),
    ...(points.system ? [el("div", "saw-cache", "cache point after the system prompt")] : [])));

  const cached = new Set(points.messages || []);
  const list = el("ol", "saw-messages");
  for (const [k, m] of (req.messages || []).entries()) {
    const li = el("li", `saw-message ${m.role}`);
    li.append(el("div", "saw-role", `#${k} ${m.role}`), ...(m.content || []).map(sawBlock));
    if (cached.has(k)) li.append(el("div", "saw-cache", "cache point after this message"));
    list.append(li);
  }
  section.append(sawPart("messages", `Messages (${(req.messages || []).length})`, list));

  const tools = req.tools || [];
  if (tools.length) {
    const ul = el("ul", "saw-tools");
    for (const t of tools) {
      const d = el("details", "saw-tool");
      d.dataset.name = t.name;
      d.append(el("summary", "", t.name));
      if (t.description) d.append(el("p", "saw-description", t.description));
      d.append(el("pre", "saw-json", pretty(t.input_schema)));
      const li = el("li");
      li.append(d);
      ul.append(li);
    }
    const notes = [`tool choice: ${req.tool_choice || "auto"}`];
    if (points.tools) notes.push("cache point after the tools");
    section.append(sawPart("tools", `Tools (${tools.length})`, ul, el("div", "saw-meta", notes.join(" · "))));
  }
  const settings = [];
  const inf = req.inference;
  if (inf) {
    if (inf.max_tokens !== undefined) settings.push(`max tokens ${inf.max_tokens}`);
    if (inf.temperature !== undefined) settings.push(`temperature ${inf.temperature}`);
    if (inf.top_p !== undefined) settings.push(`top p ${inf.top_p}`);
    if (inf.stop_sequences) settings.push(`stop sequences ${JSON.stringify(inf.stop_sequences)}`);
  }
  if (req.guardrail) settings.push(`guardrail ${req.guardrail.id} version ${req.guardrail.version}${req.guardrail.trace ? ", traced" : ""}`);
  if (settings.length) section.append(sawPart("settings", "Settings", el("div", "saw-meta", settings.join(" · "))));

  const resp = rec.response;
  if (!resp) {
    section.append(sawPart("output failed", "Error", el("pre", "saw-text", rec.error || "(no answer)")));
    return section;
  }
  const u = resp.usage || {};
  const usage = [`stop reason: ${resp.stop_reason}`, `${u.input_tokens ?? 0} in · ${u.output_tokens ?? 0} out tokens`];
  if (u.cache_read_input_tokens) usage.push(`${u.cache_read_input_tokens} read from the cache`);
  if (u.cache_write_input_tokens) usage.push(`${u.cache_write_input_tokens} written to the cache`);
  if (resp.latency_ms) usage.push(`${resp.latency_ms} ms in the model`);
  const stop = el("div", "saw-meta saw-stop", usage.join(" · "));
  section.append(sawPart("output", "Output", ...((resp.message && resp.message.content) || []).map(sawBlock), stop,
    ...(resp.guardrail ? [el("pre", "saw-json", `guardrail: ${pretty(resp.guardrail)}`)] : [])));
  return section;
}

// sawBlock draws a content block of a recorded message; a text block that
// gives context, such as recalled memory, is marked as not the person's.
function sawBlock(b) {
  const block = (kind, label, ...children) => {
    const div = el("div", `saw-block ${kind}`);
    if (label) div.append(el("div", "saw-kind", label));
    div.append(...children);
    return div;
  };
  if (b.text !== undefined) {
    return b.text.startsWith(CONTEXT_HEADER)
      ? block("context", "context block: the application's, not the person's words", el("pre", "saw-text", b.text))
      : block("text", "", el("pre", "saw-text", b.text));
  }
  if (b.toolUse) return block("tool-use", `tool use: ${b.toolUse.name} (${b.toolUse.toolUseId})`, el("pre", "saw-json", pretty(b.toolUse.input)));
  if (b.toolResult) {
    const r = b.toolResult;
    return block("tool-result", `tool result of ${r.toolUseId}${r.status ? ` (${r.status})` : ""}`,
      ...(r.content || []).map((c) => c.text !== undefined ? el("pre", "saw-text", c.text)
        : c.json !== undefined ? el("pre", "saw-json", pretty(c.json)) : el("div", "note", media(c))));
  }
  if (b.reasoning) return block("reasoning", "reasoning", el("pre", "saw-text", b.reasoning.text || "[redacted]"));
  if (b.image || b.document) return block("media", "", el("div", "note", media(b)));
  return block("other", "other block", el("pre", "saw-json", pretty(b)));
}

// media says what an image or a document of a record is, without its
// bytes.
function media(c) {
  const m = c.image || c.document;
  if (!m) return "[a block this page does not know]";
  const src = m.source || {};
  const size = src.bytes ? `, ${Math.floor((src.bytes.length * 3) / 4)} bytes` : src.s3Location ? `, at ${src.s3Location.uri}` : "";
  return `[${c.image ? "image" : "document"}${m.name ? ` ${m.name}` : ""}, ${m.format}${size}]`;
}

// ---- interrupts ----------------------------------------------------------
// A turn that paused shows a card in the box of each tool use it waits for:
// Approve or Deny for an approval, options and a text box for a question.
// One request answers them all, sent once the last one is decided; until
// then a decision can be changed. A message sent instead denies them, after
// a confirmation.

let cardCount = 0;

// pretty renders JSON for a person: indented, as text.
function pretty(v) {
  try {
    return JSON.stringify(v, null, 2);
  } catch {
    return String(v);
  }
}

// expiresText says when an interrupt expires: "Expires today 14:05 (in 3 h)".
function expiresText(iso) {
  const ms = new Date(iso) - Date.now();
  if (!(ms > 0)) return "Expired: a response counts as a denial.";
  const min = Math.round(ms / 60000);
  const left = min < 1 ? "under a minute" : min < 120 ? `${min} min` : `${Math.round(min / 60)} h`;
  return `Expires ${when(iso).replace(/^Today/, "today")} (in ${left}). Unanswered, it counts as denied.`;
}

// field is a labelled block of JSON in a card.
function field(label, value) {
  const div = el("div", "field");
  div.append(el("div", "label", label), el("pre", "json", pretty(value)));
  return div;
}

// showPending shows the cards of interrupts in turn, the one that paused,
// and replaces whatever cards were shown: none for an empty list.
function showPending(turn, interrupts) {
  for (const p of state.pending) p.card.remove();
  state.pending = [];
  state.paused = null;
  if (interrupts.length) {
    turn = turn || new Turn();
    state.paused = turn;
    for (const interrupt of interrupts) {
      // A sub-agent's tool use is drawn in its work, inside the delegation.
      let owner = owners.get(interrupt.id);
      if (!owner || !owner.tools.has(interrupt.id)) {
        turn.toolUse(interrupt.id, interrupt.tool, interrupt.input);
        owner = turn;
      }
      owner.waiting(interrupt.id, interrupt.kind);
      const box = owner.tools.get(interrupt.id);
      const p = { interrupt, box, response: null, card: null };
      p.card = interruptCard(p);
      box.append(p.card);
      state.pending.push(p);
    }
  }
  showPendingBar();
}

// interruptCard builds the card of one pending interrupt, undecided.
function interruptCard(p) {
  const i = p.interrupt, question = i.kind === "question";
  const card = el("div", `interrupt ${question ? "question" : "approval"}`);
  card.tabIndex = -1;
  card.setAttribute("role", "group");
  const who = (i.agent_path || []).join(" → ");
  const title = el("h3", "", question ? `${who || "The agent"} asks you` : `Approval needed: ${i.tool}${who ? ` for ${who}` : ""}`);
  title.id = `interrupt-${++cardCount}`;
  card.setAttribute("aria-labelledby", title.id);
  card.append(title);
  const payload = i.payload || {};
  if (question) {
    card.append(el("p", "reason ask", payload.question || i.reason));
  } else {
    card.append(el("p", "reason", i.reason));
    card.append(field(`Input to ${i.tool}`, i.input ?? {}));
    if (i.payload !== undefined && i.payload !== null) card.append(field("Details", i.payload));
  }
  card.append(el("div", "expires", expiresText(i.expires_at)));
  const actions = el("div", "actions");
  card.append(actions);
  undecided(p, card);
  return card;
}

// undecided gives a card its controls.
function undecided(p, card = p.card) {
  p.response = null;
  const actions = card.querySelector(".actions");
  const i = p.interrupt, id = i.id;
  const input = document.createElement("input");
  input.type = "text";
  if (i.kind === "question") {
    const options = Array.isArray(i.payload && i.payload.options) ? i.payload.options : [];
    const choices = el("div", "options");
    for (const o of options) choices.append(button("quiet option", String(o), () => decide(p, { interrupt_id: id, answer: String(o) })));
    input.placeholder = options.length ? "Or write your answer" : "Your answer";
    input.setAttribute("aria-label", "Your answer");
    input.className = "answer";
    const sendAnswer = () => {
      const answer = input.value.trim();
      if (answer) decide(p, { interrupt_id: id, answer });
      else input.focus();
    };
    input.addEventListener("keydown", (e) => {
      if (e.key === "Enter" && !e.isComposing) {
        e.preventDefault();
        sendAnswer();
      }
    });
    const answerRow = el("div", "answer-row");
    answerRow.append(input, button("primary send-answer", "Send answer", sendAnswer));
    actions.replaceChildren(...(options.length ? [choices] : []), answerRow,
      button("quiet decline", "Decline to answer", () => decide(p, { interrupt_id: id, approve: false })));
  } else {
    input.placeholder = "Reason, if you deny (optional)";
    input.setAttribute("aria-label", "Reason for denying (optional)");
    input.className = "deny-reason";
    const deny = () => {
      const r = { interrupt_id: id, approve: false };
      if (input.value.trim()) r.message = input.value.trim();
      decide(p, r);
    };
    input.addEventListener("keydown", (e) => {
      if (e.key === "Enter" && !e.isComposing) {
        e.preventDefault();
        deny();
      }
    });
    actions.replaceChildren(
      button("primary approve", "Approve", () => decide(p, { interrupt_id: id, approve: true })),
      button("quiet deny", "Deny", deny),
      input);
  }
  card.classList.remove("decided");
  for (const c of actions.querySelectorAll("button, input")) c.disabled = state.busy;
}

// decisionText says what a response decided.
function decisionText(r) {
  if (r.answer !== undefined) return `You answered: ${r.answer}`;
  if (r.approve) return "You approved this.";
  return r.message ? `You denied this: ${r.message}` : "You denied this.";
}

// decide records a card's response, and sends them all once each card has
// one.
function decide(p, response) {
  if (state.busy) return;
  p.response = response;
  const waiting = state.pending.filter((q) => !q.response);
  if (!waiting.length) {
    resume();
    return;
  }
  const actions = p.card.querySelector(".actions");
  p.card.classList.add("decided");
  const change = button("quiet change", "Change", () => {
    undecided(p);
    showPendingBar();
    focusCard(p);
  });
  change.setAttribute("aria-label", `Change your response to ${p.interrupt.tool}`);
  actions.replaceChildren(el("span", "decision", `${decisionText(response)} It is sent once you respond to the other request${waiting.length === 1 ? "" : "s"}.`), change);
  showPendingBar();
  focusCard(waiting[0]);
}

// focusCard moves the focus to a card: to its answer box for a question.
function focusCard(p) {
  const target = p.card.querySelector("input.answer") || p.card;
  target.focus({ preventScroll: true });
  p.card.scrollIntoView({ block: "nearest" });
}

// live returns the cards whose interrupts have not expired: the ones a
// message would deny.
function live() { return state.pending.filter((p) => new Date(p.interrupt.expires_at) > Date.now()); }

// showPendingBar says, above the composer, that the turn waits, and how
// many responses are still to give.
function showPendingBar() {
  const bar = $("pending-bar"), n = state.pending.length;
  const input = $("input");
  bar.classList.remove("confirming");
  if (!n) {
    bar.hidden = true;
    input.placeholder = input.dataset.placeholder;
    return;
  }
  const left = state.pending.filter((p) => !p.response).length;
  const what = n === 1 ? `The agent waits for your ${state.pending[0].interrupt.kind === "question" ? "answer" : "approval"}.`
    : `The agent waits for your responses to ${n} requests${left < n ? `: ${n - left} decided, ${left} to go` : ""}.`;
  $("pending-text").textContent = `${what} A message you send instead denies ${n === 1 ? "it" : "them"}.`;
  $("pending-show").hidden = false;
  $("pending-deny").hidden = $("pending-cancel").hidden = true;
  bar.hidden = false;
  input.placeholder = `Respond above, or write a message to deny ${n === 1 ? "it" : "them"} and move on`;
}

// confirmDeny asks before a message denies the pending interrupts, in the
// bar above the composer; the message stays in the input box until then.
function confirmDeny(text) {
  const n = live().length;
  const names = [...new Set(live().map((p) => p.interrupt.tool))].join(", ");
  const bar = $("pending-bar");
  bar.classList.add("confirming");
  $("pending-text").textContent = `This will deny the pending request${n === 1 ? "" : "s"} (${names}) and send your message.`;
  $("pending-show").hidden = true;
  $("pending-deny").hidden = $("pending-cancel").hidden = false;
  $("pending-deny").onclick = () => {
    if (state.busy) return;
    // What the input holds now, should it have changed since.
    const now = $("input").value.trim() || text;
    $("input").value = "";
    showPendingBar();
    send(now, true);
  };
  $("pending-cancel").focus();
}

// resume sends the responses to every card in one request, and draws the
// rest of the turn into the one that paused.
async function resume() {
  const pending = state.pending;
  const responses = pending.map((p) => p.response);
  const turn = state.paused && state.paused.li === $("messages").lastElementChild ? state.paused : new Turn();
  for (const p of pending) {
    p.card.classList.add("decided");
    p.card.querySelector(".actions").replaceChildren(el("span", "decision", "Sending…"));
  }
  setBusy(true);
  showPendingBar(); // a question about a message is moot now
  setStatus("Sending your response…");
  toEnd();
  const out = await stream({ session_id: state.sessionId, responses }, turn, null, true);
  setBusy(false);
  setStatus("");
  const stale = ["no_interrupt_pending", "conflict", "invalid_responses"];
  if (out.refused && stale.includes(out.refused.code)) {
    // Answered elsewhere, being answered, or not what the session waits
    // for: the stored session says where it stands.
    await openSession(state.sessionId);
    setStatus(`Your response was refused (${out.refused.code}), and the session was reloaded: ${out.refused.message}`);
    return;
  }
  if (!out.done) {
    for (const p of pending) undecided(p);
    showPendingBar();
    setStatus("Your response did not go through; respond again to retry.");
    focusCard(pending[0]);
    return;
  }
  for (const p of pending) {
    p.box.insertBefore(el("div", "decision", decisionText(p.response)), p.box.querySelector(":scope > .result"));
    p.card.remove();
  }
  state.pending = [];
  state.paused = null;
  follow(() => turn.stored(state.count, out.done.messages));
  state.count += (out.done.messages || []).length;
  after(turn, out.done);
}

// after shows what a turn that ended left waiting, if anything, and where
// the focus goes next.
function after(turn, done) {
  refreshMemorySoon();
  follow(() => showPending(turn, done.stop_reason === "interrupt" ? done.interrupts || [] : []));
  if (state.pending.length) focusCard(state.pending[0]);
  else $("input").focus();
}

// ---- streaming -----------------------------------------------------------

// readEvents yields the Server-Sent Events of a response as they arrive.
async function* readEvents(resp) {
  const reader = resp.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      let name = "message", data = "";
      for (const line of block.split("\n")) {
        if (line.startsWith("event: ")) name = line.slice(7);
        else if (line.startsWith("data: ")) data += line.slice(6);
      }
      yield { name, data: data ? JSON.parse(data) : {} };
    }
  }
}

// stream sends a turn's request to POST /chat/stream and draws what
// happens into turn. title names a new session in the list. A resuming
// request's failure is noted in turn without failing it. It returns the
// done event's ChatResponse, or what went wrong: refused, the error of a
// request the API answered with an error status, or failed.
async function stream(body, turn, title, resuming) {
  const out = { done: null, refused: null, failed: null };
  const fail = (error) => {
    out.failed = error;
    follow(() => (resuming ? turn.problem(error) : turn.fail(error)));
  };
  try {
    const resp = await fetch("/chat/stream", {
      method: "POST",
      headers: { "Content-Type": "application/json", "Idempotency-Key": crypto.randomUUID() },
      body: JSON.stringify(body),
    });
    if (!resp.ok) {
      const e = await resp.json().catch(() => ({}));
      out.refused = (e && e.error) || { code: String(resp.status), message: resp.statusText };
      fail(out.refused);
      return out;
    }
    for await (const ev of readEvents(resp)) {
      switch (ev.name) {
        case "start":
          if (!state.sessionId) {
            // The list may not have it yet: it is read from an index that
            // DynamoDB updates shortly after a commit.
            showSessions([{ session_id: ev.data.session_id, title, created_at: new Date().toISOString() }], "top");
            showSession(ev.data.session_id, title);
          }
          break;
        case "text": follow(() => turn.text(ev.data.delta)); break;
        case "tool_use": follow(() => turn.toolUse(ev.data.id, ev.data.name, ev.data.input)); break;
        case "tool_result": {
          const owner = owners.get(ev.data.id);
          if (owner) follow(() => owner.toolResult(ev.data.id, ev.data.status, ev.data.preview));
          break;
        }
        case "agent_start": {
          const owner = owners.get(ev.data.id);
          const box = owner && owner.tools.get(ev.data.id);
          const paused = works.get(ev.data.id); // a resumed sub-agent goes on in its work
          if (paused) follow(() => paused.resume(ev.data.name));
          else if (box) follow(() => works.set(ev.data.id, new Work(box, ev.data.name)));
          break;
        }
        case "agent_text": {
          const work = works.get(ev.data.agent_id);
          if (work) follow(() => work.text(ev.data.delta));
          break;
        }
        case "agent_tool_use": {
          const work = works.get(ev.data.agent_id);
          if (work) follow(() => work.toolUse(ev.data.id, ev.data.name, ev.data.input));
          break;
        }
        case "agent_tool_result": {
          const work = works.get(ev.data.agent_id);
          if (work) follow(() => work.toolResult(ev.data.id, ev.data.status, ev.data.preview));
          break;
        }
        case "agent_end": {
          const work = works.get(ev.data.id);
          if (work) follow(() => work.end(ev.data.name, ev.data.error, ev.data.suspended));
          if (!ev.data.suspended) works.delete(ev.data.id);
          break;
        }
        case "interrupt": {
          const owner = owners.get(ev.data.id);
          if (owner) follow(() => owner.waiting(ev.data.id, ev.data.kind));
          break;
        }
        case "done":
          out.done = ev.data;
          // Results that were not streamed, such as the denials a message
          // gave the uses it moved on from.
          follow(() => {
            showResults(ev.data.messages);
            turn.done(ev.data);
          });
          break;
        case "error": fail(ev.data.error); break;
      }
    }
    if (!out.done && !out.failed) {
      fail({ code: "disconnected", message: "The stream ended before the turn did. Reload the session to see whether it was saved." });
    }
  } catch (err) {
    fail({ code: "network", message: err.message });
  }
  return out;
}

// send sends a message; denyPending denies what the session waits for.
async function send(text, denyPending = false) {
  setBusy(true);
  const asked = addUser(text);
  const turn = new Turn();
  showWelcome();
  toEnd(); // the user just spoke: show it, whatever they were reading
  setStatus("Thinking…");
  const body = { message: text };
  if (state.sessionId) body.session_id = state.sessionId;
  if (denyPending) body.deny_pending = true;
  const out = await stream(body, turn, text, false);
  if (out.refused) asked.classList.add("rejected");
  if (out.failed) follow(() => turn.giveBack(text));
  setBusy(false);
  setStatus("");
  if (out.refused && out.refused.code === "interrupt_pending") {
    // The session paused where this page did not see it, as in another
    // tab: show what it waits for.
    await openSession(state.sessionId);
    setStatus("This session waits for your response to the request shown. Your message is in the input box.");
    return;
  }
  if (out.done) {
    // The session moved on: what it waited for was denied, or had expired.
    for (const p of state.pending) {
      const expired = new Date(p.interrupt.expires_at) <= Date.now();
      const note = el("div", "decision", expired ? "It expired before you responded." : "Denied: you sent a message instead.");
      p.box.insertBefore(note, p.box.querySelector(":scope > .result"));
    }
    showPending(null, []);
    const at = turnStart(out.done.messages, state.count);
    if (at >= 0) follow(() => stored(asked, at));
    follow(() => turn.stored(state.count, out.done.messages));
    state.count += (out.done.messages || []).length;
    loadSessions();
    after(turn, out.done);
    return;
  }
  if (out.failed && !out.refused) loadSessions();
  $("input").focus();
}

// ---- regenerate and edit ------------------------------------------------
// Regenerate runs the last user message again, in place of its answer; Edit
// runs an edited message in place of the one it edits and all that follows.
// Each is one turn, streamed as a message's is. The messages it replaces are
// hidden while it runs, removed once it is done, and shown again if it
// fails, with what went wrong.

// showRegenerate offers Regenerate on the last answer, once it is done and
// while no turn runs.
function showRegenerate() {
  for (const row of document.querySelectorAll("#messages .turn-actions.regenerate-row")) row.remove();
  const shown = [...document.querySelectorAll("#messages > .turn:not(.replaced)")];
  const last = shown.pop();
  if (!last || state.busy || !state.sessionId) return;
  if (!last.classList.contains("assistant") || !last.classList.contains("done") || last.classList.contains("failed")) return;
  // The answer follows a stored message of the user's.
  if (!shown.some((li) => li.dataset.index !== undefined)) return;
  const again = button("quiet rewind regenerate", "Regenerate", regenerate);
  again.setAttribute("aria-label", "Regenerate this answer");
  const row = el("div", "turn-actions regenerate-row");
  row.append(again);
  last.append(row);
}

// regenerate replaces the last answer: the messages after the last user
// message that starts a turn.
function regenerate() {
  if (state.busy || !state.sessionId) return;
  const starts = document.querySelectorAll("#messages > .turn.user[data-index]:not(.replaced)");
  const from = starts[starts.length - 1];
  if (!from) return;
  const replaced = [];
  for (let n = from.nextElementSibling; n; n = n.nextElementSibling) replaced.push(n);
  rewind({ session_id: state.sessionId, regenerate: true }, Number(from.dataset.index), replaced, from, null);
}

// startEdit turns a message of the user's into a box to edit it in.
function startEdit(li) {
  if (li.classList.contains("editing")) return;
  const before = [...li.childNodes];
  const text = li.querySelector(".text").textContent;
  const form = el("form", "edit-form");
  const id = `edit-${li.dataset.index}`;
  const label = el("label", "visually-hidden", "Edit your message");
  label.htmlFor = id;
  const box = el("textarea", "edit-input");
  box.id = id;
  box.rows = Math.min(8, Math.max(2, text.split("\n").length));
  box.value = text;
  box.required = true;
  const save = el("button", "primary rewind save", "Save");
  save.type = "submit";
  save.disabled = state.busy;
  const cancel = button("quiet cancel", "Cancel", () => restore(true));
  const row = el("div", "edit-actions");
  row.append(save, cancel);
  form.append(label, box, row);
  const restore = (focus) => {
    li.classList.remove("editing");
    li.replaceChildren(...before);
    li.querySelector(".edit").disabled = state.busy;
    if (focus) li.querySelector(".edit").focus();
  };
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    const message = box.value.trim();
    if (state.busy) return;
    if (!message) {
      box.focus();
      return;
    }
    const replaced = [];
    for (let n = li; n; n = n.nextElementSibling) replaced.push(n);
    rewind({ session_id: state.sessionId, edit: { from: Number(li.dataset.index), message } },
      Number(li.dataset.index), replaced, null, { form, box, message });
  });
  box.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      form.requestSubmit();
    }
  });
  form.addEventListener("keydown", (e) => {
    if (e.key === "Escape") {
      e.stopPropagation();
      restore(true);
    }
  });
  li.classList.add("editing");
  li.replaceChildren(form);
  box.focus();
  box.setSelectionRange(box.value.length, box.value.length);
}

// rewind sends a regenerate or an edit, whose turn replaces the messages
// stored from index from on, shown by the elements replaced. asked is the
// user's message that a regenerate runs again; edit, the editor of an edit.
async function rewind(body, from, replaced, asked, edit) {
  setBusy(true);
  for (const n of replaced) n.classList.add("replaced");
  if (edit) asked = addUser(edit.message);
  const turn = new Turn();
  toEnd();
  setStatus(edit ? "Running your edited message…" : "Regenerating…");
  const out = await stream(body, turn, null, false);
  if (!out.done) {
    // Nothing was stored: the messages it would have replaced stay.
    if (edit) asked.remove();
    turn.li.remove();
    for (const n of replaced) n.classList.remove("replaced");
    setStatus("");
    const error = out.refused || out.failed;
    const stale = ["invalid_rewind", "conflict"];
    if (out.refused && stale.includes(out.refused.code)) {
      // The session changed where this page did not see it: the stored
      // session says where it stands.
      setBusy(false);
      await openSession(state.sessionId);
      setStatus(`The ${edit ? "edit" : "regeneration"} was refused (${error.code}), and the session was reloaded: ${error.message}`);
      return;
    }
    // What went wrong shows where the new turn would have: under the
    // edited message, or at the end of the answer kept.
    const problem = el("div", "meta error", `${error.code}: ${error.message}`);
    problem.setAttribute("role", "alert");
    if (edit) edit.form.append(problem);
    else follow(() => (replaced[replaced.length - 1] || asked).append(problem));
    setBusy(false);
    (edit ? edit.box : $("input")).focus();
    return;
  }
  const done = out.done;
  for (const n of replaced) n.remove();
  showPending(null, []);
  const at = done.rewound_to ?? from;
  if (edit) {
    const start = turnStart(done.messages, at);
    if (start >= 0) stored(asked, start);
  }
  state.count = at + (done.messages || []).length;
  follow(() => turn.stored(at, done.messages));
  setBusy(false);
  setStatus("");
  loadSessions();
  if (at !== from) {
    // The session was rewound elsewhere than this page showed.
    await openSession(state.sessionId);
    return;
  }
  after(turn, done);
}

// ---- wiring --------------------------------------------------------------

$("composer").addEventListener("submit", (e) => {
  e.preventDefault();
  const text = $("input").value.trim();
  if (!text || state.busy) return;
  if (live().length) {
    confirmDeny(text);
    return;
  }
  $("input").value = "";
  send(text);
});
$("input").dataset.placeholder = $("input").placeholder;
$("pending-show").addEventListener("click", () => {
  const p = state.pending.find((q) => !q.response) || state.pending[0];
  if (p) focusCard(p);
});
const cancelDeny = () => {
  showPendingBar();
  $("input").focus();
};
$("pending-cancel").addEventListener("click", cancelDeny);
$("pending-bar").addEventListener("keydown", (e) => {
  if (e.key === "Escape" && $("pending-bar").classList.contains("confirming")) {
    e.stopPropagation();
    cancelDeny();
  }
});
$("input").addEventListener("keydown", (e) => {
  if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
    e.preventDefault();
    $("composer").requestSubmit();
  }
});
for (const example of document.querySelectorAll(".example")) {
  example.addEventListener("click", () => { if (!state.busy) send(example.textContent); });
}
$("new-chat").addEventListener("click", newChat);
$("more-sessions").addEventListener("click", moreSessions);
$("more-memory").addEventListener("click", moreMemory);
$("forget-all").addEventListener("click", () => confirmForget(true));
$("forget-cancel").addEventListener("click", () => confirmForget(false));
$("forget-yes").addEventListener("click", forgetAll);
$("memory-confirm").addEventListener("keydown", (e) => {
  if (e.key === "Escape") {
    e.stopPropagation();
    confirmForget(false);
  }
});
$("open-sessions").addEventListener("click", openSessions);
$("close-sessions").addEventListener("click", closeSessions);
$("backdrop").addEventListener("click", closeSessions);
document.addEventListener("keydown", (e) => { if (e.key === "Escape") closeSessions(); });
// A window made wide shows the list beside the thread: nothing to close.
matchMedia("(max-width: 700px)").addEventListener("change", (e) => { if (!e.matches) closeSessions(); });
$("messages").addEventListener("scroll", () => {
  state.pinned = atEnd();
  if (state.pinned) $("jump").hidden = true;
});
// A thread made narrower grows taller: the end stays in view if it was.
new ResizeObserver(() => { if (state.pinned) toEnd(); }).observe($("messages"));
window.addEventListener("hashchange", () => {
  const id = new URLSearchParams(location.hash.slice(1)).get("s");
  if (id && id !== state.sessionId) openSession(id);
});
$("jump").addEventListener("click", () => {
  toEnd();
  $("input").focus();
});

const fromHash = new URLSearchParams(location.hash.slice(1)).get("s");
loadInfo();
loadSessions();
loadMemory();
if (fromHash) openSession(fromHash); else newChat();
