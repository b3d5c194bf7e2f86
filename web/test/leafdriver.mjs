// Runs the browser leaf (web/src/leaf) under Node for the end-to-end tests
// against `fleetmesh` processes (e2e/webleaf_test.go): one process is one
// open of the app; its state persists between processes in a directory,
// as IndexedDB does between opens of a page. Reads one JSON request on
// stdin, writes one JSON answer on stdout:
//
//   {"dir": "...", "window_secs": N, "commands": [
//      {"op":"did"} | {"op":"pair","invitation":"..."} | {"op":"pairWithNode","url":"..."} |
//      {"op":"wake"} | {"op":"send","to":"did:key:…","message":{...}} |
//      {"op":"messages"} | {"op":"receipts"} | {"op":"homes"}]}
//   -> {"results": [...], "sent": [{"url","method","headers","body"}]}
//
// The seed is DIR/seed (32 raw bytes, made by the test, so it can look
// for it in what was sent); `sent` is every HTTP request the leaf made,
// whole.
import { readFileSync, renameSync, writeFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { Leaf } from '../src/leaf/index.js';
import { b64std, unb64std } from '../src/didcomm/bytes.js';

// fileStorage is the Storage interface over one JSON file, rewritten
// whole (to a temporary file, then renamed) by every batch.
function fileStorage(path) {
  const revive = (_, v) => (v && typeof v === 'object' && typeof v.$bytes === 'string' ? unb64std(v.$bytes) : v);
  const replace = (_, v) => (v instanceof Uint8Array ? { $bytes: b64std(v) } : v);
  let data = existsSync(path) ? JSON.parse(readFileSync(path, 'utf8'), revive) : {};
  const copy = (v) => (v === undefined ? undefined : JSON.parse(JSON.stringify(v, replace), revive));
  return {
    async get(store, key) {
      return copy((data[store] || {})[key]);
    },
    async entries(store) {
      return Object.entries(data[store] || {})
        .sort((x, y) => (x[0] < y[0] ? -1 : x[0] > y[0] ? 1 : 0))
        .map(([k, v]) => [k, copy(v)]);
    },
    async batch(ops) {
      const next = copy(data);
      for (const op of ops) {
        next[op.store] = next[op.store] || {};
        if (op.del) delete next[op.store][op.key];
        else next[op.store][op.key] = copy(op.value);
      }
      writeFileSync(path + '.tmp', JSON.stringify(next, replace));
      renameSync(path + '.tmp', path);
      data = next;
    },
  };
}

const chunks = [];
for await (const c of process.stdin) chunks.push(c);
const req = JSON.parse(Buffer.concat(chunks).toString('utf8'));
const sent = [];
const recordingFetch = async (url, init = {}) => {
  sent.push({ url: String(url), method: init.method || 'GET', headers: init.headers || {}, body: typeof init.body === 'string' ? init.body : '' });
  return fetch(url, init);
};
const storage = fileStorage(join(req.dir, 'leaf.json'));
const keyStore = { seed: async () => new Uint8Array(readFileSync(join(req.dir, 'seed'))) };
const leaf = await Leaf.open({ storage, keyStore, fetch: recordingFetch, windowSecs: req.window_secs || undefined, budgetMs: 20_000 });
const results = [];
for (const c of req.commands) {
  try {
    switch (c.op) {
      case 'did':
        results.push({ did: leaf.did });
        break;
      case 'pair':
        results.push(await leaf.pair(c.invitation));
        break;
      case 'pairWithNode':
        results.push(await leaf.pairWithNode(c.url));
        break;
      case 'homes':
        results.push(await leaf.homes());
        break;
      case 'wake':
        results.push(await leaf.wake());
        break;
      case 'send':
        results.push({ id: await leaf.sendMessage(c.to, c.message) });
        break;
      case 'messages':
        results.push(await leaf.messages());
        break;
      case 'receipts':
        results.push(await leaf.receipts());
        break;
      default:
        results.push({ error: `unknown op ${c.op}` });
    }
  } catch (e) {
    results.push({ error: e.message });
  }
}
process.stdout.write(JSON.stringify({ results, sent }));
