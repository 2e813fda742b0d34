// A small OpenAI-compatible chat server around node-llama-cpp (llama.cpp, CPU, prebuilt).
//
//   node tools/node/llm-server.mjs --model FILE.gguf [--host 127.0.0.1] [--port 8012]
//        [--threads 1] [--ctx 2048] [--alias smollm2]
//
// response_format: {"type": "json_object"} constrains the reply to JSON and
// {"type": "json_schema", "json_schema": {"schema": …}} to that schema (llama.cpp grammars,
// like llama-server): the judge's replies parse by construction.
//
// Routes: GET /health, GET /v1/models, POST /v1/chat/completions (non-streaming).
// One request is generated at a time (one llama.cpp sequence, like llama-server with one
// slot); others wait in arrival order. A client that closes its connection aborts its
// generation at once (or leaves the queue), so a timed-out attempt never keeps the slot.
// Started by `make local-model` / app/llm/local_server.py; tests start it on a free port.
//
// The guard of app/local_http.py, the same three rules: only its own Host (127.0.0.1:PORT or
// localhost:PORT, exact: a DNS-rebinding page gets 403); no framing (CSP frame-ancestors
// 'none', X-Frame-Options DENY, nosniff); a POST must not be cross-site (Sec-Fetch-Site,
// Origin) and must be application/json (a page elsewhere cannot send that without a
// preflight, which this server never grants).
import http from "node:http";
import { randomBytes } from "node:crypto";
import { getLlama, LlamaChatSession } from "node-llama-cpp";

function args(argv) {
  const out = { host: "127.0.0.1", port: 8012, threads: 1, ctx: 2048, alias: "smollm2" };
  for (let i = 0; i < argv.length; i += 2) {
    const key = argv[i].replace(/^--/, "");
    if (!(key in out) && key !== "model") throw new Error(`unknown option ${argv[i]}`);
    out[key] = ["port", "threads", "ctx"].includes(key) ? Number(argv[i + 1]) : argv[i + 1];
  }
  if (!out.model) throw new Error("--model FILE.gguf is required");
  return out;
}

const opt = args(process.argv.slice(2));
const llama = await getLlama({ gpu: false, build: "never", logLevel: "error" });
const model = await llama.loadModel({ modelPath: opt.model });
const context = await model.createContext({ contextSize: opt.ctx, threads: opt.threads, sequences: 1 });
const sequence = context.getSequence();

let busy = Promise.resolve();
let served = 0;

const SECURITY_HEADERS = {
  "Content-Security-Policy": "default-src 'none'; frame-ancestors 'none'",
  "X-Frame-Options": "DENY",
  "X-Content-Type-Options": "nosniff",
  "Referrer-Policy": "no-referrer",
  "Cross-Origin-Resource-Policy": "same-origin",
};

function send(res, code, body) {
  const data = Buffer.from(JSON.stringify(body));
  res.writeHead(code, { "Content-Type": "application/json", "Content-Length": data.length, ...SECURITY_HEADERS });
  res.end(data);
}

function ownHosts() {
  const port = server.address().port;
  const names = new Set(["127.0.0.1", "localhost", opt.host.toLowerCase()]);
  return [...names].map((name) => `${name}:${port}`);
}

// [status, message] when the request must be refused (see the header), else null
function refused(req) {
  const own = ownHosts();
  if (!own.includes((req.headers.host || "").trim().toLowerCase())) {
    return [403, "wrong Host: this server answers only to its own address"];
  }
  if (req.method !== "POST") return null;
  const site = (req.headers["sec-fetch-site"] || "").trim().toLowerCase();
  if (site === "cross-site" || site === "same-site") {
    return [403, `a ${site} request may not use this server`];
  }
  const origin = req.headers.origin;
  if (origin !== undefined && !own.map((h) => `http://${h}`).includes(origin.trim().toLowerCase())) {
    return [403, `requests from ${JSON.stringify(origin)} may not use this server`];
  }
  const media = (req.headers["content-type"] || "").split(";")[0].trim().toLowerCase();
  if (media !== "application/json") {
    return [415, `the body must be application/json, not ${media || "untyped"}`];
  }
  return null;
}

function error(res, code, message, type = "invalid_request_error") {
  send(res, code, { error: { message, type, code: null } });
}

function readBody(req) {
  return new Promise((resolve, reject) => {
    const parts = [];
    let size = 0;
    req.on("data", (c) => {
      size += c.length;
      if (size > 4_000_000) reject(new Error("request body over 4 MB"));
      else parts.push(c);
    });
    req.on("end", () => resolve(Buffer.concat(parts).toString("utf8")));
    req.on("error", reject);
  });
}

function history(messages) {
  // OpenAI messages -> node-llama-cpp chat history + the last user prompt
  if (!Array.isArray(messages) || messages.length === 0) throw new Error("'messages' must be a non-empty array");
  const last = messages[messages.length - 1];
  if (!last || last.role !== "user" || typeof last.content !== "string")
    throw new Error("the last message must be {role: 'user', content: string}");
  const items = [];
  for (const m of messages.slice(0, -1)) {
    if (typeof m?.content !== "string") throw new Error("every message needs a string 'content'");
    if (m.role === "system") items.push({ type: "system", text: m.content });
    else if (m.role === "user") items.push({ type: "user", text: m.content });
    else if (m.role === "assistant") items.push({ type: "model", response: [m.content] });
    else throw new Error(`unknown role ${JSON.stringify(m.role)}`);
  }
  return { items, prompt: last.content };
}

const grammars = new Map(); // canonical schema text -> LlamaGrammar (built once each)

async function grammarFor(format) {
  if (format === undefined || format === null || format.type === "text") return undefined;
  let key;
  let build;
  if (format.type === "json_object") {
    key = "json";
    build = () => llama.getGrammarFor("json");
  } else if (format.type === "json_schema") {
    const schema = format.json_schema?.schema;
    if (schema === null || typeof schema !== "object") {
      throw new Error("response_format json_schema needs json_schema.schema (an object)");
    }
    key = JSON.stringify(schema);
    build = () => llama.createGrammarForJsonSchema(schema);
  } else {
    throw new Error(`response_format type ${JSON.stringify(format.type)} is not supported`);
  }
  if (!grammars.has(key)) {
    try {
      grammars.set(key, await build());
    } catch (e) {
      throw new Error(`response_format: schema not usable as a grammar (${e.message || e})`);
    }
  }
  return grammars.get(key);
}

async function complete(body, signal) {
  const { items, prompt } = history(body.messages);
  const grammar = await grammarFor(body.response_format);
  // no clearHistory(): node-llama-cpp keeps the tokens the new prompt shares with the last one
  // (e.g. the same system prompt) and evaluates only the rest, like llama-server's prompt cache
  const before = sequence.tokenMeter.getState();
  const session = new LlamaChatSession({ contextSequence: sequence, autoDisposeSequence: false });
  try {
    session.setChatHistory([...items]);
    const maxTokens = Number.isInteger(body.max_tokens) ? body.max_tokens
      : Number.isInteger(body.max_completion_tokens) ? body.max_completion_tokens : 256;
    const temperature = typeof body.temperature === "number" ? body.temperature : 1.0;
    const stop = typeof body.stop === "string" ? [body.stop] : Array.isArray(body.stop) ? body.stop : [];
    const meta = await session.promptWithMeta(prompt, {
      maxTokens,
      temperature,
      seed: Number.isInteger(body.seed) ? body.seed : undefined,
      grammar,
      customStopTriggers: stop.length ? stop : undefined,
      signal,
      stopOnAbortSignal: true,
    });
    const after = sequence.tokenMeter.getState();
    const text = meta.responseText;
    const completion = after.usedOutputTokens - before.usedOutputTokens;
    // the whole prompt as an OpenAI server reports it (reused prefix + newly evaluated
    // tokens): the chat wrapper's rendering of the history up to the empty model turn,
    // tokenized. (The context's length is not it: it held stale tokens after a prefix reuse
    // and was shorter than the completion after an aborted request.)
    const asked = [...session.getChatHistory().slice(0, -1), { type: "model", response: [] }];
    const { contextText } = session.chatWrapper.generateContextState({ chatHistory: asked });
    const promptTokens = contextText.tokenize(model.tokenizer).length;
    return {
      id: `chatcmpl-${randomBytes(8).toString("hex")}`,
      object: "chat.completion",
      created: Math.floor(Date.now() / 1000),
      model: opt.alias,
      choices: [{
        index: 0,
        message: { role: "assistant", content: text },
        finish_reason: meta.stopReason === "maxTokens" ? "length" : "stop",
      }],
      usage: {
        prompt_tokens: promptTokens,
        completion_tokens: completion,
        total_tokens: promptTokens + completion,
        // what was evaluated for this request (the rest came from the kept prefix)
        prompt_tokens_details: { cached_tokens: Math.max(0, promptTokens - (after.usedInputTokens - before.usedInputTokens)) },
      },
      aborted: meta.stopReason === "abort",
    };
  } finally {
    session.dispose({ disposeSequence: false });
  }
}

const server = http.createServer(async (req, res) => {
  try {
    const refusal = refused(req);
    if (refusal !== null) return error(res, refusal[0], refusal[1]);
    if (req.method === "GET" && (req.url === "/health" || req.url === "/")) {
      return send(res, 200, { status: "ok", served });
    }
    if (req.method === "GET" && req.url === "/v1/models") {
      return send(res, 200, { object: "list", data: [{ id: opt.alias, object: "model", owned_by: "node-llama-cpp" }] });
    }
    if (req.method !== "POST" || !["/v1/chat/completions", "/chat/completions"].includes(req.url)) {
      return error(res, 404, "unknown route");
    }
    let body;
    try {
      body = JSON.parse(await readBody(req));
    } catch (e) {
      return error(res, 400, `invalid JSON body (${e.message})`);
    }
    if (body?.stream) return error(res, 400, "stream: true is not supported by this server");
    const abort = new AbortController();
    res.on("close", () => { if (!res.writableEnded) abort.abort(); });
    const turn = busy.then(async () => {
      if (abort.signal.aborted) return null; // the client left while queued
      return complete(body, abort.signal);
    });
    busy = turn.catch(() => {});
    let result;
    try {
      result = await turn;
    } catch (e) {
      return error(res, 400, String(e.message || e));
    }
    if (result === null || result.aborted) return; // nobody is listening any more
    delete result.aborted;
    served += 1;
    send(res, 200, result);
  } catch (e) {
    if (!res.headersSent) error(res, 500, `server error: ${e.message || e}`, "server_error");
  }
});

server.listen(opt.port, opt.host, () => {
  console.log(`llm-server ${opt.alias} on http://${opt.host}:${opt.port}/v1 (threads ${opt.threads}, ctx ${opt.ctx})`);
});

for (const sig of ["SIGTERM", "SIGINT"]) {
  process.on(sig, async () => {
    server.close();
    await context.dispose();
    await model.dispose();
    process.exit(0);
  });
}
