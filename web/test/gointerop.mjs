// Drives the browser leaf's DIDComm (web/src/didcomm) for the Go interop
// tests (web/didcomm_test.go): reads one JSON request on stdin, writes one
// JSON answer on stdout.
//
//   {"op":"unpack","seed":"<hex>","messages":["<packed>",...]}
//     -> [{"message":{...},"mode":"...","authenticated":b,"non_repudiable":b,
//          "sender_kid":"...","signer_kids":[...],"enc":"..."} | {"error":"...","code":"..."}]
//   {"op":"pack","seed":"<hex>","requests":[{"message":{...},"options":{"mode":...}}]}
//     -> ["<packed>" | {"error":"..."}]
//   {"op":"did","seed":"<hex>"} -> {"did":"...","signing_kid":"...","agreement_kid":"..."}
import { Packer, Unpacker, didKeyResolver, secretsFromSeed } from '../src/didcomm/index.js';

const chunks = [];
for await (const c of process.stdin) chunks.push(c);
const req = JSON.parse(Buffer.concat(chunks).toString('utf8'));
const secrets = secretsFromSeed(Uint8Array.from(Buffer.from(req.seed, 'hex')));
let out;
switch (req.op) {
  case 'did':
    out = { did: secrets.did, signing_kid: secrets.signing.id, agreement_kid: secrets.agreement[0].id };
    break;
  case 'pack': {
    const p = new Packer(secrets, didKeyResolver);
    out = req.requests.map((r) => {
      try {
        return p.pack(r.message, r.options);
      } catch (e) {
        return { error: e.message };
      }
    });
    break;
  }
  case 'unpack': {
    const u = new Unpacker(secrets, didKeyResolver);
    out = req.messages.map((m) => {
      try {
        const g = u.unpack(m);
        return { message: g.message, mode: g.mode, authenticated: g.authenticated, non_repudiable: g.nonRepudiable, sender_kid: g.senderKID, signer_kids: g.signerKIDs, enc: g.enc };
      } catch (e) {
        return { error: e.message, code: e.code || '' };
      }
    });
    break;
  }
  default:
    console.error(`unknown op ${req.op}`);
    process.exit(2);
}
process.stdout.write(JSON.stringify(out));
