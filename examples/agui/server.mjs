// The AG-UI example's server: it serves the page and its bundle, and passes
// POST /agui and /sessions/* on to the agent, so that the browser talks to
// one origin and the agent needs no CORS. Node's standard library only.
//
//	AGENT_URL=http://127.0.0.1:3000 PORT=5173 node server.mjs
//
// AGENT_URL is the agent's base URL (default: the local run's), PORT the
// port to listen on (default 5173; 0 picks a free one), on 127.0.0.1.
import { createServer, request } from "node:http";
import { readFile } from "node:fs/promises";
import { join } from "node:path";

const agent = new URL(process.env.AGENT_URL || "http://127.0.0.1:3000");
const port = Number(process.env.PORT ?? 5173);
const dir = import.meta.dirname;

// The files the page needs, and nothing else: no path reaches the disk.
const files = {
  "/": ["index.html", "text/html; charset=utf-8"],
  "/dist/app.js": ["dist/app.js", "text/javascript; charset=utf-8"],
  "/dist/app.js.map": ["dist/app.js.map", "application/json"],
};

// Hop-by-hop headers belong to one connection, not to the request.
const hopByHop = new Set(["connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding", "upgrade"]);

function endToEnd(headers) {
  return Object.fromEntries(Object.entries(headers).filter(([name]) => !hopByHop.has(name)));
}

// proxy passes a request to the agent and its answer back as it comes:
// each chunk of an SSE stream is written as soon as it arrives.
function proxy(req, res) {
  const upstream = request(new URL(req.url, agent), {
    method: req.method,
    headers: { ...endToEnd(req.headers), host: agent.host },
  }, (answer) => {
    res.writeHead(answer.statusCode, endToEnd(answer.headers));
    answer.pipe(res);
  });
  upstream.on("error", (err) => {
    if (!res.headersSent) {
      res.writeHead(502, { "content-type": "application/json" });
    }
    res.end(JSON.stringify({ error: { code: "bad_gateway", message: `the agent at ${agent.origin}: ${err.message}` } }));
  });
  // A browser that goes away ends the request; the agent's turn goes on.
  res.on("close", () => upstream.destroy());
  req.pipe(upstream);
}

async function serveFile(req, res) {
  const [name, type] = files[new URL(req.url, "http://x").pathname];
  try {
    const body = await readFile(join(dir, name));
    res.writeHead(200, { "content-type": type, "cache-control": "no-cache" });
    res.end(body);
  } catch (err) {
    res.writeHead(500, { "content-type": "text/plain" });
    res.end(`${name}: ${err.code === "ENOENT" ? "not built: run npm start, or npm run build" : err.message}\n`);
  }
}

const server = createServer((req, res) => {
  const path = new URL(req.url, "http://x").pathname;
  if (path === "/agui" || path.startsWith("/sessions/")) {
    proxy(req, res);
  } else if (req.method === "GET" && Object.hasOwn(files, path)) {
    serveFile(req, res);
  } else {
    res.writeHead(404, { "content-type": "text/plain" });
    res.end("not found\n");
  }
});

server.listen(port, "127.0.0.1", () => {
  console.log(`AG-UI example on http://127.0.0.1:${server.address().port}, talking to the agent at ${agent.origin}`);
});
