// The lambda-agent chat page. It uses the local run's API as any client
// would: POST /chat/stream for turns (Server-Sent Events), GET /sessions and
// GET /sessions/{id} for the list and the transcripts. Everything the model
// or a user wrote is rendered as text, never as HTML.
"use strict";

const $ = (id) => document.getElementById(id);
const state = { sessionId: "", busy: false, removed: 0, summarized: false };

// api calls the JSON API and throws the API's error message on failure.
async function api(path, options) {
  const resp = await fetch(path, options);
  const body = resp.status === 204 ? null : await resp.json();
  if (!resp.ok) {
    const e = (body && body.error) || {};
    throw new Error(`${resp.status} ${e.code || ""}: ${e.message || resp.statusText}`);
  }
  return body;
}

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

function setStatus(text) { $("status").textContent = text || ""; }

// ---- sessions ------------------------------------------------------------

async function loadSessions() {
  try {
    const body = await api("/sessions?limit=50");
    const list = $("sessions");
    list.replaceChildren();
    for (const s of body.sessions) {
      const item = el("li");
      const button = el("button", "session", s.title || s.session_id);
      button.type = "button";
      button.dataset.id = s.session_id;
      button.title = `${s.session_id} · ${new Date(s.created_at).toLocaleString()}`;
      if (s.session_id === state.sessionId) button.classList.add("current");
      button.addEventListener("click", () => openSession(s.session_id));
      item.append(button);
      list.append(item);
    }
    $("sessions-note").textContent = body.sessions.length ? "" : "No sessions yet.";
  } catch (err) {
    $("sessions-note").textContent = `Could not list sessions: ${err.message}`;
  }
}

function showSession(id, title) {
  state.sessionId = id;
  $("session-title").textContent = title || (id ? id : "New chat");
  $("session-id").textContent = id ? id : "";
  if (id) history.replaceState(null, "", `#s=${encodeURIComponent(id)}`);
  else history.replaceState(null, "", location.pathname);
  for (const b of document.querySelectorAll("#sessions .session")) {
    b.classList.toggle("current", b.dataset.id === id);
  }
}

function newChat() {
  showSession("", "");
  state.removed = 0;
  state.summarized = false;
  $("messages").replaceChildren();
  showWindow({ removed: 0, summarized: false }, null);
  $("input").focus();
}

// openSession loads a whole transcript, page by page.
async function openSession(id) {
  if (state.busy) return;
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
    renderTranscript(messages);
    state.removed = first.window.removed;
    state.summarized = first.window.summarized;
    showWindow(first.window, first.summary);
    setStatus("");
  } catch (err) {
    setStatus(`Could not open ${id}: ${err.message}`);
    newChat();
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

// ---- rendering -----------------------------------------------------------

function addUser(text) {
  const li = el("li", "turn user");
  li.append(el("div", "text", text));
  $("messages").append(li);
  li.scrollIntoView({ block: "end" });
  return li;
}

// Turn is an assistant turn: text segments, tool calls and their results,
// and a line about the turn once it is done.
class Turn {
  constructor() {
    this.li = el("li", "turn assistant");
    this.li.dataset.pieces = "0";
    this.segment = null;
    this.tools = new Map();
    $("messages").append(this.li);
  }
  text(delta, streamed = true) {
    if (!this.segment) {
      this.segment = el("div", "text");
      this.li.append(this.segment);
    }
    this.segment.textContent += delta;
    if (streamed) this.li.dataset.pieces = String(Number(this.li.dataset.pieces) + 1);
    this.li.scrollIntoView({ block: "end" });
  }
  toolUse(id, name, input) {
    this.segment = null; // text after the call is a new segment
    const box = el("div", "tool pending");
    box.dataset.id = id;
    box.dataset.name = name;
    const call = el("div", "call");
    call.append(el("span", "name", name), el("code", "input", JSON.stringify(input)));
    box.append(call, el("div", "result", "running…"));
    this.tools.set(id, box);
    this.li.append(box);
  }
  toolResult(id, status, preview) {
    const box = this.tools.get(id);
    if (!box) return;
    box.classList.remove("pending");
    box.classList.add(status === "error" ? "error" : "success");
    box.querySelector(".result").textContent = preview || "(no output)";
  }
  done(d) {
    this.li.classList.add("done");
    // The final text is done.text. It differs from what streamed when the
    // agent closed the turn itself, such as at its cycle limit.
    const squash = (s) => s.replace(/\s+/g, "");
    if (d.text && (!this.segment || squash(this.segment.textContent) !== squash(d.text))) {
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
    this.li.classList.add("failed");
    this.li.append(el("div", "meta error", `${error.code}: ${error.message}`));
  }
}

// renderTranscript draws stored messages: tool results, which come back in
// the next user message, join their calls.
function renderTranscript(messages) {
  $("messages").replaceChildren();
  let turn = null;
  const calls = new Map();
  for (const m of messages) {
    if (m.role === "user") {
      for (const b of m.content) {
        if (b.toolResult) {
          const owner = calls.get(b.toolResult.toolUseId);
          const preview = (b.toolResult.content || []).map((c) => c.text ?? (c.json ? JSON.stringify(c.json) : "[media]")).join(" ");
          if (owner) owner.toolResult(b.toolResult.toolUseId, b.toolResult.status, preview);
        }
      }
      const text = m.content.filter((b) => b.text).map((b) => b.text).join("\n");
      const media = m.content.filter((b) => b.image || b.document).length;
      if (text || media) {
        addUser(text + (media ? ` [${media} attachment${media === 1 ? "" : "s"}]` : ""));
        turn = null;
      }
      continue;
    }
    if (!turn) turn = new Turn();
    for (const b of m.content) {
      if (b.text) turn.text(b.text);
      if (b.toolUse) {
        turn.toolUse(b.toolUse.toolUseId, b.toolUse.name, b.toolUse.input);
        calls.set(b.toolUse.toolUseId, turn);
      }
    }
    turn.li.classList.add("done");
  }
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

async function send(text) {
  state.busy = true;
  $("send").disabled = true;
  addUser(text);
  const turn = new Turn();
  setStatus("Thinking…");
  try {
    const body = { message: text };
    if (state.sessionId) body.session_id = state.sessionId;
    const resp = await fetch("/chat/stream", {
      method: "POST",
      headers: { "Content-Type": "application/json", "Idempotency-Key": crypto.randomUUID() },
      body: JSON.stringify(body),
    });
    if (!resp.ok) {
      const e = await resp.json().catch(() => ({}));
      turn.fail((e && e.error) || { code: String(resp.status), message: resp.statusText });
      return;
    }
    let finished = false;
    for await (const ev of readEvents(resp)) {
      finished = finished || ev.name === "done" || ev.name === "error";
      switch (ev.name) {
        case "start":
          if (!state.sessionId) showSession(ev.data.session_id, text);
          break;
        case "text": turn.text(ev.data.delta); break;
        case "tool_use": turn.toolUse(ev.data.id, ev.data.name, ev.data.input); break;
        case "tool_result": turn.toolResult(ev.data.id, ev.data.status, ev.data.preview); break;
        case "done": turn.done(ev.data); break;
        case "error": turn.fail(ev.data.error); break;
      }
    }
    if (!finished) {
      turn.fail({ code: "disconnected", message: "The stream ended before the turn did. Reload the session to see whether it was saved." });
    }
    loadSessions();
  } catch (err) {
    turn.fail({ code: "network", message: err.message });
  } finally {
    state.busy = false;
    $("send").disabled = false;
    setStatus("");
    $("input").focus();
  }
}

// ---- wiring --------------------------------------------------------------

$("composer").addEventListener("submit", (e) => {
  e.preventDefault();
  const text = $("input").value.trim();
  if (!text || state.busy) return;
  $("input").value = "";
  send(text);
});
$("input").addEventListener("keydown", (e) => {
  if (e.key === "Enter" && !e.shiftKey) {
    e.preventDefault();
    $("composer").requestSubmit();
  }
});
$("new-chat").addEventListener("click", newChat);

const fromHash = new URLSearchParams(location.hash.slice(1)).get("s");
loadSessions();
if (fromHash) openSession(fromHash); else newChat();
