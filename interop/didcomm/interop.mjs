// Drives didcomm-node (SICPA's didcomm-rust compiled to WebAssembly) for
// fleetmesh's Go interop tests and benchmark. Reads one JSON request on
// stdin and writes one JSON answer on stdout.
//
//   {"op":"unpack","docs":[...],"secrets":[...],"messages":["<packed>",...]}
//     -> [{"message":{...},"metadata":{...}} | {"error":"..."}]
//   {"op":"pack","docs":[...],"secrets":[...],"requests":[{"mode":"authcrypt|anoncrypt|signed|plaintext","message":{...}}]}
//     -> ["<packed>" | {"error":"..."}]
//   {"op":"forward","docs":[...],"secrets":[...],"requests":[{"message":{...},"routing_keys":["<kid>"]}]}
//     -> ["<anoncrypted forward for the first routing key>" | {"error":"..."}]
//     (authcrypts message from its from to its to[0], then wraps it with
//     Message.wrap_in_forward as a sender to a mediated recipient does)
//   {"op":"bench","docs":[...],"secrets":[...],"message":{...},"mode":"authcrypt|anoncrypt","seconds":N}
//     -> {"pack_per_sec":x,"unpack_per_sec":y}
//
// docs are DID documents exactly as fleetmesh's identity.Resolve makes them;
// secrets are {id, type: "JsonWebKey2020", privateKeyJwk}.
import { Message } from 'didcomm-node';

function readStdin() {
  return new Promise((resolve, reject) => {
    const chunks = [];
    process.stdin.on('data', (c) => chunks.push(c));
    process.stdin.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    process.stdin.on('error', reject);
  });
}

class DocResolver {
  constructor(docs) {
    this.docs = new Map(docs.map((d) => [d.id, { service: [], ...d }]));
  }
  async resolve(did) {
    return this.docs.get(did) ?? null;
  }
}

class SecretResolver {
  constructor(secrets) {
    this.secrets = new Map(secrets.map((s) => [s.id, s]));
  }
  async get_secret(id) {
    return this.secrets.get(id) ?? null;
  }
  async find_secrets(ids) {
    return ids.filter((id) => this.secrets.has(id));
  }
}

const anonOpts = { forward: false, enc_alg_anon: 'A256cbcHs512EcdhEsA256kw' };

async function pack(req, dids, secrets) {
  const m = new Message(req.message);
  switch (req.mode) {
    case 'plaintext':
      return m.pack_plaintext(dids);
    case 'signed':
      return (await m.pack_signed(req.message.from, dids, secrets))[0];
    case 'anoncrypt':
      return (await m.pack_encrypted(req.message.to[0], null, null, dids, secrets, anonOpts))[0];
    case 'authcrypt':
      return (await m.pack_encrypted(req.message.to[0], req.message.from, null, dids, secrets, anonOpts))[0];
    default:
      throw new Error(`unknown mode ${req.mode}`);
  }
}

async function unpack(packed, dids, secrets) {
  const [msg, meta] = await Message.unpack(packed, dids, secrets, {});
  return { message: msg.as_value(), metadata: meta };
}

async function bench(req, dids, secrets) {
  const until = (s) => Date.now() + s * 1000;
  const packed = await pack({ mode: req.mode, message: req.message }, dids, secrets);
  let n = 0;
  const start = Date.now();
  for (const end = until(req.seconds); Date.now() < end; n++) {
    await pack({ mode: req.mode, message: req.message }, dids, secrets);
  }
  const packRate = n / ((Date.now() - start) / 1000);
  n = 0;
  const start2 = Date.now();
  for (const end = until(req.seconds); Date.now() < end; n++) {
    await unpack(packed, dids, secrets);
  }
  const unpackRate = n / ((Date.now() - start2) / 1000);
  return { pack_per_sec: packRate, unpack_per_sec: unpackRate };
}

const req = JSON.parse(await readStdin());
const dids = new DocResolver(req.docs);
const secrets = new SecretResolver(req.secrets);
let out;
const errorOf = (e) => ({ error: `${e.name}: ${e.message}` });
switch (req.op) {
  case 'unpack':
    out = [];
    for (const p of req.messages) {
      try {
        out.push(await unpack(p, dids, secrets));
      } catch (e) {
        out.push(errorOf(e));
      }
    }
    break;
  case 'pack':
    out = [];
    for (const r of req.requests) {
      try {
        out.push(await pack(r, dids, secrets));
      } catch (e) {
        out.push(errorOf(e));
      }
    }
    break;
  case 'forward':
    out = [];
    for (const r of req.requests) {
      try {
        const inner = await pack({ mode: 'authcrypt', message: r.message }, dids, secrets);
        out.push(await Message.wrap_in_forward(inner, {}, r.message.to[0], r.routing_keys, anonOpts.enc_alg_anon, dids));
      } catch (e) {
        out.push(errorOf(e));
      }
    }
    break;
  case 'bench':
    out = await bench(req, dids, secrets);
    break;
  default:
    console.error(`unknown op ${req.op}`);
    process.exit(2);
}
process.stdout.write(JSON.stringify(out));
