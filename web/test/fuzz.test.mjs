// Bounded, deterministic mutation tests of what the browser leaf decodes
// from the network: every refusal of a changed packed message is a Problem
// with a report-problem code (never a TypeError of a missing check), no
// change to a signed or encrypted message is accepted as another message,
// and every refusal of a changed receipt or invitation is the decoder's
// own error. The Go decoders have their fuzz targets (didcomm, receipt,
// invite); these are the JS ones' counterpart, kept short for CI.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as d from '../src/didcomm/index.js';
import { decodeReceipt, encodeReceipt, newReceipt, pairOf, signReceipt, zeroSide } from '../src/leaf/receipt.js';
import { parseInvitation } from '../src/leaf/invitation.js';

const rounds = 400;

// xorshift32: the same mutations on every run.
function prng(seed) {
  let x = seed >>> 0 || 1;
  return (n) => {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    return x % n;
  };
}

const alphabet = 'AZaz09-_{}":,[]. \\=+/xq';

function mutateText(s, r) {
  const i = r(s.length);
  switch (r(4)) {
    case 0:
      return s.slice(0, i) + alphabet[r(alphabet.length)] + s.slice(i + 1);
    case 1:
      return s.slice(0, i) + s.slice(i + 1 + r(8));
    case 2:
      return s.slice(0, i) + s.slice(r(s.length)) ;
    default:
      return s.slice(0, i) + alphabet[r(alphabet.length)] + s.slice(i);
  }
}

test('unpack: changed messages are refused with a code, or unchanged', () => {
  const alice = d.secretsFromSeed(new Uint8Array(32).fill(1));
  const bob = d.secretsFromSeed(new Uint8Array(32).fill(2));
  const p = new d.Packer(alice, d.didKeyResolver);
  const u = new d.Unpacker(bob, d.didKeyResolver);
  const r = prng(28);
  for (const mode of ['authcrypt', 'anoncrypt', 'signed']) {
    const m = { ...d.newMessage('https://didcomm.org/basicmessage/2.0/message', { content: 'fuzz' }), to: [bob.did] };
    const packed = p.pack(m, { mode });
    for (let i = 0; i < rounds; i++) {
      const bad = mutateText(packed, r);
      try {
        const got = u.unpack(bad);
        // A change the envelope does not cover (whitespace, member order,
        // an unprotected header) may pass; the message must be the same.
        assert.equal(got.message.id, m.id, `${mode}: a changed message was accepted as another: ${bad}`);
        assert.equal(got.message.body.content, 'fuzz');
      } catch (e) {
        assert.ok(e instanceof d.Problem, `${mode}: refused without a problem code: ${e.stack}\n${bad}`);
      }
    }
  }
});

test('decodeReceipt: changed receipts are refused by the decoder', () => {
  const x = d.secretsFromSeed(new Uint8Array(32).fill(3));
  const y = d.secretsFromSeed(new Uint8Array(32).fill(4));
  const [a, b] = pairOf(x.did, y.did);
  const rc = newReceipt(a, b, 3600, 3600, 1, null, zeroSide(), zeroSide());
  rc.counts_a.gave.mediation_messages = 3;
  signReceipt(rc, x.did, x.signing.seed);
  const raw = encodeReceipt(rc);
  const r = prng(29);
  for (let i = 0; i < rounds; i++) {
    const bad = Uint8Array.from(raw);
    bad[r(bad.length)] = r(256);
    const cut = r(4) === 0 ? bad.slice(0, r(bad.length)) : bad;
    try {
      decodeReceipt(cut);
    } catch (e) {
      assert.match(e.message, /^receipt: /, `refused with another error: ${e.stack}`);
    }
  }
});

test('parseInvitation: changed invitations are refused by the reader', () => {
  const node = d.secretsFromSeed(new Uint8Array(32).fill(5));
  const inv = JSON.stringify({ type: 'https://didcomm.org/out-of-band/2.0/invitation', id: '1', from: node.did, body: { services: [{ serviceEndpoint: { uri: 'http://192.0.2.1:7447/didcomm' } }] } });
  const url = 'http://192.0.2.1:7447/didcomm?_oob=' + Buffer.from(inv).toString('base64url');
  const r = prng(30);
  for (const text of [inv, url, 'fleetmesh:fmjoin1qqsg4z8rm46qnuv4l4fdktfuhfwh9jn8pxl3m9qjr0ehfzqpks8k7hqppqzvvvmyq']) {
    for (let i = 0; i < rounds; i++) {
      const bad = mutateText(text, r);
      try {
        parseInvitation(bad);
      } catch (e) {
        assert.match(e.message, /^(leaf: pair|invite): /, `refused with another error: ${e.stack}\n${bad}`);
      }
    }
  }
});
