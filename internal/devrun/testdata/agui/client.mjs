// Drives POST /agui of a running server with the official AG-UI client,
// HttpAgent, and checks every event it receives against @ag-ui/core's
// schemas. Usage: node client.mjs URL SCENARIO [BEARER]
//
// It prints one JSON object on stdout: for each run, the types of its
// events, the schema violations found, and the error it ended with; and the
// thread the client holds at the end. The Go test (agui_client_test.go)
// decides what is right.
import { HttpAgent } from "@ag-ui/client";
import { EventSchemas } from "@ag-ui/core/schemas";
import { randomUUID } from "node:crypto";

const [url, scenario, bearer] = process.argv.slice(2);
const headers = bearer ? { Authorization: `Bearer ${bearer}` } : {};

// onlyNew makes the client send only what the server does not hold yet:
// the messages after the last one the server sent, which are the client's
// own. The server keeps the thread, so the rest is only weight.
function onlyNew(agent) {
  agent.use((input, next) => {
    let i = input.messages.length;
    while (i > 0 && input.messages[i - 1].role === "user") i--;
    return next.run({ ...input, messages: input.messages.slice(i) });
  });
  return agent;
}

async function run(agent, text) {
  const out = { events: [], violations: [], error: null };
  agent.addMessage({ id: randomUUID(), role: "user", content: text });
  try {
    await agent.runAgent({}, {
      onEvent({ event }) {
        out.events.push(event.type);
        const parsed = EventSchemas.safeParse(event);
        if (!parsed.success) {
          out.violations.push(`${event.type}: ${parsed.error.message}`);
        }
      },
    });
  } catch (e) {
    out.error = String(e && e.message ? e.message : e);
  }
  return out;
}

const threadId = `agui-${scenario}-${randomUUID()}`;
const result = { threadId, runs: [] };
const agent = new HttpAgent({ url: `${url}/agui`, threadId, headers });
switch (scenario) {
  case "whole": // HttpAgent as it comes: the whole thread every run
    result.runs.push(await run(agent, "What is 6*7?"));
    result.runs.push(await run(agent, "And 7*8?"));
    break;
  case "new": // only the messages the server does not hold yet
    onlyNew(agent);
    result.runs.push(await run(agent, "What is 6*7?"));
    result.runs.push(await run(agent, "And 7*8?"));
    break;
  case "foreign": { // a thread another owner holds
    const owned = new HttpAgent({ url: `${url}/agui`, threadId, headers: {} });
    result.runs.push(await run(owned, "mine"));
    result.runs.push(await run(agent, "let me in"));
    break;
  }
  default:
    throw new Error(`unknown scenario ${scenario}`);
}
result.messages = agent.messages;
process.stdout.write(JSON.stringify(result));
