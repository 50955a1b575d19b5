// evalkit's long-lived driver of an installed OpenClaw's own memory search (the code path of
// `openclaw memory search` and of the agent's `memory_search` tool), so start-up is paid once per run.
//
//   node openclaw_driver.mjs --package <openclaw package folder> [--agent <id>]
//
// It does not contain OpenClaw code. It locates, inside the installed package's dist/, the module the CLI entry
// (dist/entry.js) loads for its `memory` command, and takes OpenClaw's own `getMemorySearchManager`, `loadConfig`
// and `resolveDefaultAgentId` from it, resolving their bundled aliases from the module's own export / import lines
// (so no hashed file name or minified alias is written here). Then it answers JSON lines on stdin, one at a time:
//
//   {"op": "search", "id": "q1", "query": "...", "maxResults": 6, "minScore": 0.35}   (the last two optional)
//     -> {"evk": "result", "id": "q1", "ms": 12.3, "results": [...manager.search(...)...], "injected": "..."}
//   {"op": "sync", "id": "s1"}       re-open the manager (a new one starts dirty) and index what changed
//     -> {"evk": "synced", "id": "s1", "ms": 180.2, "files": 164, "chunks": 165}
//   {"op": "status", "id": "x"}      -> {"evk": "status", "id": "x", "status": {...}}
//
// "injected" is what the memory_search tool hands the model for that search: the results with their citation
// ("<snippet>\n\nSource: <path>#L<a>-L<b>", citations "auto" in a direct chat) and the status fields, as
// pretty-printed JSON (two-space indent) — the tool's own result text. A startup line {"evk": "ready", ...} or
// {"evk": "fatal", "message": ...} (exit 2) comes first; a failed request is {"evk": "error", "id", "message"}.
// Protocol lines are the only thing on stdout: everything OpenClaw prints goes to stderr.
import fs from "node:fs";
import path from "node:path";
import readline from "node:readline";
import { pathToFileURL } from "node:url";
import { performance } from "node:perf_hooks";

const t0 = performance.now();
const protocolOut = process.stdout.write.bind(process.stdout);
const send = (obj) => protocolOut(JSON.stringify(obj) + "\n");
for (const level of ["log", "info", "warn", "debug", "trace"]) console[level] = (...a) => console.error(...a);
process.stdout.write = (chunk, ...rest) => process.stderr.write(chunk, ...rest);

const argValue = (flag, fallback) => {
  const at = process.argv.indexOf(flag);
  return at >= 0 && at + 1 < process.argv.length ? process.argv[at + 1] : fallback;
};
const packageDir = path.resolve(argValue("--package", "."));
const distDir = path.join(packageDir, "dist");

function fatal(message) {
  send({ evk: "fatal", message });
  process.exit(2);
}

// The dist module reached from entry.js (static or dynamic relative imports, breadth first) whose name says it is
// the memory command's.
function memoryCommandModule() {
  const relImport = /(?:from\s+|import\s*\(\s*)"\.\/([^"]+\.js)"/g;
  const visited = new Set(["entry.js"]);
  const pending = ["entry.js"];
  while (pending.length) {
    const file = pending.shift();
    if (/^memory-cli-[^/]*\.js$/.test(file)) return file;
    let source;
    try {
      source = fs.readFileSync(path.join(distDir, file), "utf8");
    } catch {
      continue;
    }
    for (const m of source.matchAll(relImport)) {
      if (!visited.has(m[1])) {
        visited.add(m[1]);
        pending.push(m[1]);
      }
    }
  }
  return null;
}

// `export { local as exported, ... }`: the local name under which `name` is exported (or name itself).
function exportedAs(source, name) {
  for (const block of source.matchAll(/export\s*\{([^}]*)\}/g)) {
    for (const item of block[1].split(",")) {
      const [local, exported] = item.trim().split(/\s+as\s+/);
      if (local === name) return exported ?? local;
    }
  }
  return null;
}

// `import { original as local } from "./x.js"`: where `local` comes from.
function importOf(source, local) {
  for (const m of source.matchAll(/import\s*\{([^}]*)\}\s*from\s*"(\.\/[^"]+)"/g)) {
    for (const item of m[1].split(",")) {
      const [original, alias] = item.trim().split(/\s+as\s+/);
      if ((alias ?? original) === local) return { file: m[2], name: original };
    }
  }
  return null;
}

const moduleFile = memoryCommandModule();
if (!moduleFile) fatal(`no memory command module reachable from ${distDir}/entry.js`);
const moduleSource = fs.readFileSync(path.join(distDir, moduleFile), "utf8");
const managerExport = exportedAs(moduleSource, "getMemorySearchManager");
const configImport = importOf(moduleSource, "loadConfig");
const agentImport = importOf(moduleSource, "resolveDefaultAgentId");
if (!managerExport || !configImport || !agentImport) {
  fatal(`${moduleFile}: getMemorySearchManager / loadConfig / resolveDefaultAgentId not found`);
}
const load = (file) => import(pathToFileURL(path.join(distDir, file)).href);
const getMemorySearchManager = (await load(moduleFile))[managerExport];
const loadConfig = (await load(configImport.file))[configImport.name];
const resolveDefaultAgentId = (await load(agentImport.file))[agentImport.name];
const importMs = performance.now() - t0;

const cfg = loadConfig();
const agentId = argValue("--agent", undefined) ?? resolveDefaultAgentId(cfg);
async function openManager() {
  const { manager, error } = await getMemorySearchManager({ cfg, agentId });
  if (!manager) throw new Error(error ?? "memory search is disabled");
  return manager;
}
let manager;
try {
  manager = await openManager();
} catch (e) {
  fatal(e instanceof Error ? e.message : String(e));
}

const pkgVersion = JSON.parse(fs.readFileSync(path.join(packageDir, "package.json"), "utf8")).version;
const statusOf = (m) => {
  const s = m.status?.() ?? {};
  return { provider: s.provider, model: s.model, fallback: s.fallback, files: s.files, chunks: s.chunks,
           dirty: s.dirty, backend: s.backend, vector: s.vector?.available, fts: s.fts?.available,
           mode: s.custom?.searchMode };
};
send({ evk: "ready", version: pkgVersion, agentId, module: moduleFile, importMs: +importMs.toFixed(1),
       startupMs: +(performance.now() - t0).toFixed(1), status: statusOf(manager) });

const citation = (r) => `${r.path}${r.startLine === r.endLine ? `#L${r.startLine}` : `#L${r.startLine}-L${r.endLine}`}`;
function toolText(results) {
  const s = manager.status?.() ?? {};
  const decorated = results.map((r) => ({ ...r, citation: citation(r),
                                          snippet: `${String(r.snippet ?? "").trim()}\n\nSource: ${citation(r)}` }));
  return JSON.stringify({ results: decorated, provider: s.provider, model: s.model, fallback: s.fallback,
                          citations: "auto", mode: s.custom?.searchMode }, null, 2);
}

async function handle(req) {
  const started = performance.now();
  const ms = () => +(performance.now() - started).toFixed(3);
  if (req.op === "sync") {
    await manager.close?.();
    manager = await openManager();
    await manager.sync?.({ reason: "evalkit" });
    const s = statusOf(manager);
    return { evk: "synced", id: req.id ?? null, ms: ms(), files: s.files, chunks: s.chunks, dirty: s.dirty };
  }
  if (req.op === "status") return { evk: "status", id: req.id ?? null, status: statusOf(manager) };
  if (req.op === "search") {
    const opts = {};
    if (req.maxResults != null) opts.maxResults = req.maxResults;
    if (req.minScore != null) opts.minScore = req.minScore;
    const results = await manager.search(String(req.query ?? ""), opts);
    return { evk: "result", id: req.id ?? null, ms: ms(), results, injected: toolText(results) };
  }
  throw new Error(`unknown op ${JSON.stringify(req.op)}`);
}

const lines = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
let queue = Promise.resolve();
lines.on("line", (line) => {
  if (!line.trim()) return;
  queue = queue.then(async () => {
    let req;
    try {
      req = JSON.parse(line);
    } catch (e) {
      send({ evk: "error", id: null, message: `not JSON: ${e.message}` });
      return;
    }
    try {
      send(await handle(req));
    } catch (e) {
      send({ evk: "error", id: req.id ?? null, message: e instanceof Error ? e.message : String(e) });
    }
  });
});
lines.on("close", async () => {
  await queue;
  await manager.close?.();
  process.exit(0);
});
