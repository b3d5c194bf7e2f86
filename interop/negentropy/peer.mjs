// One side of a negentropy v1 (NIP-77) reconciliation, run by a JavaScript
// implementation nobody at fleetmesh wrote, so that fleetmesh's Go package
// can be tested against it:
//   ndk          @nostr-dev-kit/sync's Negentropy (initiator or responder);
//   nostr-tools  nostr-tools/nip77's Negentropy (initiator only: it answers
//                IdList ranges as a client does, so it is no responder).
//
// Usage: node peer.mjs <ndk|nostr-tools> <initiator|responder> <items-file> <frameSizeLimit>
//   items-file: one item a line, "<timestamp> <64 hex id>".
//   frameSizeLimit: 0 for none (ndk only; nostr-tools needs >= 4096).
// Line protocol on stdin/stdout:
//   "MSG <hex>"   a negentropy message, either way.
//   initiator, when done: "HAVE <hex id>"..., "NEED <hex id>"..., "DONE <messages received>".
//   "ERR <text>"  then exit 1.
// The responder answers every MSG line and exits when stdin closes.
import { readFileSync } from "node:fs";
import { createInterface } from "node:readline";
import * as ndk from "@nostr-dev-kit/sync";
import { nip77 as nostrTools } from "nostr-tools";

const [impl, role, itemsFile, limitArg] = process.argv.slice(2);
const out = (s) => process.stdout.write(s + "\n");
if (!["ndk", "nostr-tools"].includes(impl) || !["initiator", "responder"].includes(role) ||
    (impl === "nostr-tools" && role !== "initiator")) {
  out("ERR usage: node peer.mjs <ndk|nostr-tools> <initiator|responder> <items-file> <frameSizeLimit>");
  process.exit(1);
}
const limit = Number(limitArg || 0);

const items = [];
for (const line of readFileSync(itemsFile, "utf8").split("\n")) {
  if (line.trim() === "") continue;
  const [ts, id] = line.trim().split(" ");
  items.push([Number(ts), id]);
}

// Both libraries behind one shape: initiate() and reconcile(bytes) give
// { next: Uint8Array | undefined, have: hex[], need: hex[] }.
function makePeer() {
  if (impl === "ndk") {
    const storage = new ndk.NegentropyStorage();
    for (const [ts, id] of items) storage.insert(ts, id);
    storage.seal();
    const neg = new ndk.Negentropy(storage, limit);
    return {
      initiate: async () => neg.initiate(),
      reconcile: async (msg) => {
        const res = await neg.reconcile(msg);
        return { next: res.nextMessage, have: res.have.map(ndk.uint8ArrayToHex), need: res.need.map(ndk.uint8ArrayToHex) };
      },
    };
  }
  const storage = new nostrTools.NegentropyStorageVector();
  for (const [ts, id] of items) storage.insert(ts, id);
  storage.seal();
  const neg = new nostrTools.Negentropy(storage, limit);
  return {
    initiate: async () => ndk.hexToUint8Array(neg.initiate()),
    reconcile: async (msg) => {
      const have = [];
      const need = [];
      const next = neg.reconcile(ndk.uint8ArrayToHex(msg), (id) => have.push(id), (id) => need.push(id));
      return { next: next === null ? undefined : ndk.hexToUint8Array(next), have, need };
    },
  };
}

async function main() {
  const neg = makePeer();
  // Sets: with frame size limits the spec lets an initiator report an id
  // more than once; the test compares sets.
  const have = new Set();
  const need = new Set();
  let received = 0;
  if (role === "initiator") out("MSG " + ndk.uint8ArrayToHex(await neg.initiate()));
  const rl = createInterface({ input: process.stdin, crlfDelay: Infinity });
  for await (const line of rl) {
    if (!line.startsWith("MSG ")) throw new Error("unexpected line: " + line.slice(0, 40));
    received++;
    const res = await neg.reconcile(ndk.hexToUint8Array(line.slice(4)));
    if (role === "responder") {
      out("MSG " + ndk.uint8ArrayToHex(res.next));
      continue;
    }
    for (const id of res.have) have.add(id);
    for (const id of res.need) need.add(id);
    if (res.next === undefined) {
      for (const id of have) out("HAVE " + id);
      for (const id of need) out("NEED " + id);
      out("DONE " + received);
      rl.close();
      return;
    }
    out("MSG " + ndk.uint8ArrayToHex(res.next));
  }
}

main().catch((e) => {
  out("ERR " + String(e && e.message ? e.message : e).replace(/\n/g, " "));
  process.exit(1);
});
