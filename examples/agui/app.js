// An AG-UI front end in plain DOM. HttpAgent, from the official client,
// holds the thread and talks to POST /agui; this module draws the thread,
// with the sub-agents' work inside the calls that delegated to them, and
// the agent state, answers interrupts (approvals and questions), and runs
// the tools the page declares. README.md says how to run it.
import { HttpAgent, randomUUID } from "@ag-ui/client";

// The tools the page runs itself. Every run offers them to the model; a
// call of one ends the run with its id in pendingToolCallIds, and the next
// run brings its result.
const clientTools = {
  set_theme: {
    description: "Switch the page the person is reading between its light and dark colours.",
    parameters: {
      type: "object",
      properties: { theme: { type: "string", enum: ["light", "dark"] } },
      required: ["theme"],
      additionalProperties: false,
    },
    run({ theme }) {
      if (theme !== "light" && theme !== "dark") {
        throw new Error(`there is no theme ${JSON.stringify(theme)}: light or dark`);
      }
      document.documentElement.dataset.theme = theme;
      return `The page is ${theme} now.`;
    },
  },
};
const tools = Object.entries(clientTools).map(([name, { description, parameters }]) => ({ name, description, parameters }));

// How many runs in a row may end in calls of the page's tools, as the
// agent's own loop is capped.
const maxToolRounds = 8;

const $ = (selector) => document.querySelector(selector);
const ui = {
  messages: $("#messages"), interrupts: $("#interrupts"), status: $("#status"),
  composer: $("#composer"), input: $("#input"), send: $("#send"),
  state: $("#state"), stateChange: $("#state-change"), thread: $("#thread"), stored: $("#stored"),
};

// el makes an element with a class and children (text or elements).
function el(tag, className, ...children) {
  const e = document.createElement(tag);
  if (className) e.className = className;
  e.append(...children);
  return e;
}

let agent;
const rows = new Map(); // a message's id → its <li>
// The sub-agents' runs, by subagentRunId, from SUBAGENT_STARTED: the
// sub-agent's name, the call that delegated (parentToolCallId), and its
// state: working, done (SUBAGENT_FINISHED), failed (SUBAGENT_ERROR, with
// its error), or stopped, when the run ended without saying.
const runs = new Map();

// newThread starts a thread of its own: the server keeps it under this id.
function newThread() {
  agent = new HttpAgent({ url: "/agui", threadId: `example-${randomUUID()}` });
  // Send only what the server does not hold yet: the messages after the
  // last one it sent, which are ours. It holds the rest.
  agent.use((input, next) => {
    let i = input.messages.length;
    while (i > 0 && ["user", "tool"].includes(input.messages[i - 1].role)) i--;
    return next.run({ ...input, messages: input.messages.slice(i) });
  });
  agent.subscribe({
    onMessagesChanged: render,
    onStateChanged: () => { ui.state.textContent = JSON.stringify(agent.state, null, 2); },
    onStateSnapshotEvent: () => { ui.stateChange.textContent = "STATE_SNAPSHOT at the start of the run"; },
    onStateDeltaEvent: ({ event }) => {
      ui.stateChange.textContent = "STATE_DELTA: " + event.delta.map((op) => `${op.op} ${op.path}`).join(", ");
    },
    onSubagentStartedEvent: ({ event }) => {
      runs.set(event.subagentRunId, { id: event.subagentRunId, name: event.name, callId: event.parentToolCallId, state: "working", error: "" });
      render();
    },
    onSubagentFinishedEvent: ({ event }) => endRun(event.subagentRunId, "done"),
    onSubagentErrorEvent: ({ event }) => endRun(event.subagentRunId, "failed", event.message),
  });
  rows.clear();
  runs.clear();
  ui.messages.replaceChildren();
  ui.interrupts.replaceChildren();
  ui.interrupts.hidden = true;
  ui.state.textContent = "{}";
  ui.stateChange.textContent = "";
  ui.thread.textContent = agent.threadId;
  ui.stored.href = `/sessions/${encodeURIComponent(agent.threadId)}`;
  setState("idle");
}

// endRun marks how a sub-agent's run ended, and shows it.
function endRun(id, state, error = "") {
  const run = runs.get(id);
  if (!run) return;
  Object.assign(run, { state, error });
  render();
}

// textOf is a message's text: a string, or the text parts of a list.
function textOf(content) {
  if (typeof content === "string") return content;
  return (content ?? []).filter((p) => p.type === "text").map((p) => p.text).join("\n");
}

// render draws agent.messages: each user and assistant message of the
// thread once, by id, and each tool call under its assistant message with
// its result, the tool message whose toolCallId names it. A sub-agent's
// messages carry its subagentRunId: they are drawn inside the line of the
// call that delegated to it, never as messages of the thread.
function render() {
  const following = atEnd();
  // What the messages hold: the tools' results, by call, and the messages
  // to draw, by run.
  const found = {
    results: new Map(agent.messages.filter((m) => m.role === "tool").map((m) => [m.toolCallId, textOf(m.content)])),
    byRun: new Map(), // a run's id ("" for the thread's own) → its messages
  };
  for (const m of agent.messages) {
    if (m.role !== "user" && m.role !== "assistant") continue;
    const run = m.subagentRunId ?? "";
    if (!found.byRun.has(run)) found.byRun.set(run, []);
    found.byRun.get(run).push(m);
  }
  show(ui.messages, (found.byRun.get("") ?? []).map((m) => drawMessage(m, `message ${m.role}`, found)));
  if (following) toEnd();
}

// drawMessage returns the row of message m, made once and brought up to
// date: its text, and its tool calls with their results.
function drawMessage(m, className, found) {
  let row = rows.get(m.id);
  if (!row) {
    row = el("li", className, el("div", "text"), el("ul", "calls"));
    row.dataset.id = m.id;
    row.dataset.pieces = "0";
    rows.set(m.id, row);
  }
  const text = row.querySelector(":scope > .text");
  const now = textOf(m.content);
  if (text.textContent !== now) {
    text.textContent = now;
    row.dataset.pieces = String(Number(row.dataset.pieces) + 1); // streamed: one per change
  }
  for (const call of m.toolCalls ?? []) drawCall(row.querySelector(":scope > .calls"), call, found);
  return row;
}

// drawCall draws a tool call on one line of list: its name, input and
// result, and the work of the sub-agent it delegated to, if it did.
function drawCall(list, call, found) {
  let line = list.querySelector(`:scope > [data-call="${CSS.escape(call.id)}"]`);
  if (!line) {
    line = el("li", "call", el("span", "name", call.function.name), " ", el("code", "args"), " ", el("span", "result"));
    line.dataset.call = call.id;
    line.dataset.name = call.function.name;
    list.append(line);
  }
  line.querySelector(":scope > .args").textContent = call.function.arguments;
  const result = found.results.get(call.id);
  line.classList.toggle("waiting", result === undefined);
  line.querySelector(":scope > .result").textContent = result ?? "waiting";
  for (const run of runs.values()) {
    if (run.callId === call.id) drawWork(line, run, found);
  }
}

// drawWork draws a sub-agent's run in the line of the call that delegated
// to it, before the call's result: who works and how it ended, and its
// messages as they stream, with its own calls, and their sub-agents' work
// nested in turn.
function drawWork(line, run, found) {
  let box = line.querySelector(`:scope > .agent-work[data-run="${CSS.escape(run.id)}"]`);
  if (!box) {
    box = el("div", "agent-work", el("div", "agent-name"), el("ol", "work"));
    box.dataset.run = run.id;
    box.dataset.agent = run.name;
    line.insertBefore(box, line.querySelector(":scope > .result"));
  }
  box.className = `agent-work ${run.state}`;
  box.querySelector(":scope > .agent-name").textContent = {
    working: `${run.name} is working…`,
    done: `${run.name} answered`,
    failed: `${run.name} failed: ${run.error}`,
    stopped: `${run.name} stopped: the run ended first`,
  }[run.state];
  show(box.querySelector(":scope > .work"), (found.byRun.get(run.id) ?? []).map((m) => drawMessage(m, "step", found)));
}

// show makes items the children of list, in order, touching the list only
// when they differ.
function show(list, items) {
  const children = [...list.children];
  if (children.length !== items.length || children.some((c, i) => c !== items[i])) {
    list.replaceChildren(...items);
  }
}

// atEnd says whether the reader is at the end of the page, where new
// messages should stay in view; toEnd scrolls there.
function atEnd() {
  return window.innerHeight + window.scrollY >= document.documentElement.scrollHeight - 80;
}

function toEnd() {
  window.scrollTo(0, document.documentElement.scrollHeight);
}

// setState says what the page is doing: idle, running, or waiting for the
// person to answer interrupts. Only an idle page takes a message.
function setState(state, status = "") {
  document.body.dataset.state = state;
  ui.input.disabled = ui.send.disabled = state !== "idle";
  ui.status.textContent = status;
  ui.status.classList.remove("error");
}

// fail says why a run failed. Interrupts the failed run was to answer
// still wait, and are shown again.
function fail(text) {
  if (agent.pendingInterrupts.length > 0) ask(agent.pendingInterrupts);
  else setState("idle");
  ui.status.textContent = text;
  ui.status.classList.add("error");
}

// runOnce runs the agent once, offering the page's tools, and says how the
// run ended: finished (the RUN_FINISHED parameters), or error, and whether
// the stream began, which tells a refusal from a failure.
async function runOnce(params) {
  const out = { started: false, finished: null, error: "" };
  setState("running", "Running…");
  try {
    await agent.runAgent({ ...params, tools }, {
      onRunStartedEvent: () => { out.started = true; },
      onRunFinishedEvent: (finished) => { out.finished = finished; },
      onRunErrorEvent: ({ event }) => { out.error = `${event.code ?? "error"}: ${event.message}`; },
    });
  } catch (err) {
    const e = err?.payload?.error; // the agent's JSON error body, for a refusal
    out.error = e ? `${e.code}: ${e.message}` : String(err?.message ?? err);
  }
  for (const run of runs.values()) {
    if (run.state === "working") endRun(run.id, "stopped");
  }
  return out;
}

// run runs the agent until the turn needs the person or ends: it runs the
// page's tools that a run leaves pending, and runs again with their
// results. It returns the first run's end.
async function run(params = {}) {
  let first;
  for (let round = 0; round <= maxToolRounds; round++) {
    const out = await runOnce(params);
    first ??= out;
    if (out.error || !out.finished) {
      fail(out.error || "the run ended without RUN_FINISHED");
      return first;
    }
    const { outcome } = out.finished;
    if (outcome === "interrupt") {
      ask(out.finished.interrupts);
      return first;
    }
    const pending = outcome === "success" ? out.finished.pendingToolCallIds : [];
    if (pending.length === 0) {
      setState("idle");
      return first;
    }
    for (const id of pending) {
      agent.addMessage({ id: randomUUID(), role: "tool", toolCallId: id, content: runTool(id) });
    }
    params = {};
  }
  fail(`stopped: the model called the page's tools ${maxToolRounds} runs in a row`);
  return first;
}

// runTool runs the call of one of the page's tools and returns its result:
// what it says, or what went wrong, which the model reads either way.
function runTool(id) {
  const call = agent.messages.flatMap((m) => m.toolCalls ?? []).find((c) => c.id === id);
  const tool = call && clientTools[call.function.name];
  if (!tool) return `error: this page has no tool ${call?.function.name ?? id}`;
  try {
    return tool.run(JSON.parse(call.function.arguments || "{}"));
  } catch (err) {
    return `error: ${err.message}`;
  }
}

// ask shows the run's interrupts, each with its answers; once every one
// is answered, the next run takes the answers as resume entries.
function ask(interrupts) {
  const answers = new Map();
  const answer = (interrupt, entry, said) => {
    answers.set(interrupt.id, { interruptId: interrupt.id, ...entry });
    const card = ui.interrupts.querySelector(`[data-id="${CSS.escape(interrupt.id)}"]`);
    card.querySelector(".actions").replaceChildren(el("span", "answered", said));
    if (answers.size === interrupts.length) {
      ui.interrupts.hidden = true;
      ui.interrupts.replaceChildren();
      run({ resume: [...answers.values()] });
    }
  };
  const following = atEnd();
  ui.interrupts.replaceChildren(...interrupts.map((i) => card(i, answer)));
  ui.interrupts.hidden = false;
  if (following) toEnd();
  setState("waiting", interrupts.length > 1 ? `${interrupts.length} requests wait for you.` : "A request waits for you.");
}

// card draws one interrupt: an approval's tool and input with Approve and
// Deny, a question's options, a field for another answer and Decline.
// Every interrupt can be cancelled; an expired one only that.
function card(interrupt, answer) {
  const { tool, input } = interrupt.metadata ?? {};
  const expires = interrupt.expiresAt ? new Date(interrupt.expiresAt) : null;
  const expired = expires !== null && expires <= new Date();
  const box = el("div", `interrupt ${interrupt.reason}`, el("p", "prompt", interrupt.message ?? interrupt.reason));
  box.dataset.id = interrupt.id;
  box.dataset.reason = interrupt.reason;
  const actions = el("div", "actions");
  const button = (label, className, onClick) => {
    const b = el("button", className, label);
    b.type = "button";
    b.addEventListener("click", onClick);
    return b;
  };
  const reason = el("input", "reason");
  reason.placeholder = "Reason (optional)";
  const withReason = () => (reason.value.trim() ? { payload: { reason: reason.value.trim() } } : {});

  if (interrupt.reason === "approval") {
    box.append(el("p", "tool", el("code", "", `${tool} ${JSON.stringify(input)}`)));
    if (!expired) actions.append(button("Approve", "approve primary", () => answer(interrupt, { status: "resolved" }, "Approved")));
    actions.append(reason, button("Deny", "deny", () => answer(interrupt, { status: "cancelled", ...withReason() }, "Denied")));
  } else if (interrupt.reason === "question") {
    const options = input?.options ?? interrupt.responseSchema?.properties?.answer?.examples ?? [];
    if (!expired) {
      for (const option of options) {
        actions.append(button(option, "option", () => answer(interrupt, { status: "resolved", payload: { answer: option } }, option)));
      }
      const other = el("input", "answer");
      other.placeholder = options.length ? "Or another answer" : "Your answer";
      actions.append(other, button("Answer", "send-answer primary", () => {
        if (other.value.trim()) answer(interrupt, { status: "resolved", payload: { answer: other.value.trim() } }, other.value.trim());
      }));
    }
    actions.append(button("Decline", "decline", () => answer(interrupt, { status: "cancelled" }, "Declined")));
  } else {
    actions.append(reason, button("Cancel", "cancel", () => answer(interrupt, { status: "cancelled", ...withReason() }, "Cancelled")));
  }
  box.append(actions);
  if (expires) box.append(el("p", "expires", expired ? "Expired: it counts as denied." : `Answer by ${expires.toLocaleString()}.`));
  return box;
}

// send adds the person's message and runs the agent. A run refused before
// its stream began stored nothing: the message leaves the thread and goes
// back to the input box.
async function send(text) {
  const message = { id: randomUUID(), role: "user", content: text };
  agent.addMessage(message);
  ui.input.value = "";
  const first = await run();
  if (!first.started) {
    agent.setMessages(agent.messages.filter((m) => m.id !== message.id));
    ui.input.value = text;
  }
}

ui.composer.addEventListener("submit", (e) => {
  e.preventDefault();
  const text = ui.input.value.trim();
  if (text && document.body.dataset.state === "idle") send(text);
});
$("#new-thread").addEventListener("click", () => {
  if (document.body.dataset.state !== "running") newThread();
});
for (const b of document.querySelectorAll("#examples button")) {
  b.addEventListener("click", () => { ui.input.value = b.textContent; ui.input.focus(); });
}
$("#client-tools").textContent = tools.map((t) => `${t.name}: ${t.description}`).join("\n");

newThread();
