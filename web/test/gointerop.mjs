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
//   {"op":"countersign","seed":"<hex>","receipt":"<base64>"}
//     -> {"json":{receipt as `fleetmesh receipts --json`},"receipt":"<base64, signed by seed too>"} | {"error"}
//   {"op":"disputed","seed":"<hex>","peer":"did:key:…","window_start":N,"window_secs":N,"mine":Side}
//     -> {"receipt":"<base64>"}
//   {"op":"invitations","texts":["...",...]} -> [{"did":"...","endpoint":"..."} | {"error":"..."}]
import { Packer, Unpacker, didKeyResolver, secretsFromSeed } from '../src/didcomm/index.js';
import { b64std, unb64std } from '../src/didcomm/bytes.js';
import { decodeReceipt, disputedReceipt, encodeReceipt, receiptJSON, signReceipt, verifyReceipt, verifySigner } from '../src/leaf/receipt.js';
import { parseInvitation } from '../src/leaf/invitation.js';

const chunks = [];
for await (const c of process.stdin) chunks.push(c);
const req = JSON.parse(Buffer.concat(chunks).toString('utf8'));
const secrets = req.seed ? secretsFromSeed(Uint8Array.from(Buffer.from(req.seed, 'hex'))) : null;
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
  case 'countersign':
    try {
      const r = decodeReceipt(unb64std(req.receipt));
      const other = r.a === secrets.did ? r.b : r.a;
      if (!verifySigner(r, other)) throw new Error(`${other}'s signature does not verify`);
      const json = receiptJSON(r);
      signReceipt(r, secrets.did, secrets.signing.seed);
      verifyReceipt(r);
      out = { json, receipt: b64std(encodeReceipt(r)) };
    } catch (e) {
      out = { error: e.message };
    }
    break;
  case 'disputed':
    out = { receipt: b64std(encodeReceipt(disputedReceipt(secrets.did, secrets.signing.seed, req.peer, req.window_start, req.window_secs, req.mine, null))) };
    break;
  case 'invitations':
    out = req.texts.map((text) => {
      try {
        return parseInvitation(text);
      } catch (e) {
        return { error: e.message };
      }
    });
    break;
  default:
    console.error(`unknown op ${req.op}`);
    process.exit(2);
}
process.stdout.write(JSON.stringify(out));
