// The browser leaf's DIDComm against known answers: the ECDH-1PU draft's
// Appendix B, the DIDComm spec's appendix messages (the vectors the Go
// package checks too, in didcomm/vectors_test.go), its own round trips in
// every mode, and the receiver rules.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { x25519 } from '@noble/curves/ed25519.js';
import * as d from '../src/didcomm/index.js';
import { b64u, unb64u, utf8Encode } from '../src/didcomm/bytes.js';
import { deriveKEK, encrypt, openContent, recipientZ, sealContent, senderZ, wrapKey } from '../src/didcomm/jwe.js';

const vectors = JSON.parse(readFileSync(new URL('./spec-vectors.json', import.meta.url), 'utf8'));
const hexBytes = (h) => Uint8Array.from(h.match(/../g), (x) => parseInt(x, 16));

test('ECDH-1PU draft-04 Appendix B', () => {
  const alice = unb64u('i9KuFhSzEBsiv3PKVL5115OCdsqQai5nj_Flzfkw5jU');
  const eph = unb64u('x8EVZH4Fwk673_mUujnliJoSrLz0zYzzCWp5GUX2fc8');
  const bob = unb64u('1gDirl_r_Y3-qUa3WXHgEXrrEHngWThU3c9zj9A2uBg');
  const charlie = unb64u('Jcv8gklhMjC0b-lsk5onBbppWAx5ncNtbM63Jr9xBQE');
  const protectedB64 = b64u(utf8Encode('{"alg":"ECDH-1PU+A128KW","enc":"A256CBC-HS512","apu":"QWxpY2U","apv":"Qm9iIGFuZCBDaGFybGll","epk":{"kty":"OKP","crv":"X25519","x":"k9of_cpAajy0poW5gaixXGs9nHkwg1AFqUAFa39dyBc"}}'));
  const cek = hexBytes('fffefdfcfbfaf9f8f7f6f5f4f3f2f1f0efeeedecebeae9e8e7e6e5e4e3e2e1e0dfdedddcdbdad9d8d7d6d5d4d3d2d1d0cfcecdcccbcac9c8c7c6c5c4c3c2c1c0');
  const iv = hexBytes('000102030405060708090a0b0c0d0e0f');
  const { ciphertext, tag } = sealContent('A256CBC-HS512', cek, iv, utf8Encode(protectedB64), utf8Encode('Three is a magic number.'));
  assert.equal(b64u(ciphertext), 'Az2IWsISEMDJvyc5XRL-3-d-RgNBOGolCsxFFoUXFYw');
  assert.equal(b64u(tag), 'HLb4fTlm8spGmij3RyOs2gJ4DpHM4hhVRwdF_hGb3WQ');
  for (const [to, want] of [
    [bob, 'pOMVA9_PtoRe7xXW1139NzzN1UhiFoio8lGto9cf0t8PyU-sjNXH8-LIRLycq8CHJQbDwvQeU1cSl55cQ0hGezJu2N9IY0QN'],
    [charlie, '56GVudgRLIMEElQ7DpXsijJVRSWUSDNdbWkdV3g0GUNq6hcT_GkxwnxlPIWrTXCqRpVKQC8fe4z3PQ2YH2afvjQ28aiCTWFE'],
  ]) {
    const z = senderZ(eph, x25519.getPublicKey(to), alice);
    const kek = deriveKEK('ECDH-1PU+A128KW', z, utf8Encode('Alice'), utf8Encode('Bob and Charlie'), tag);
    assert.equal(b64u(wrapKey(kek, cek)), want);
    assert.deepEqual(recipientZ(to, x25519.getPublicKey(eph), x25519.getPublicKey(alice)), z);
  }
  assert.equal(new TextDecoder().decode(openContent('A256CBC-HS512', cek, iv, utf8Encode(protectedB64), ciphertext, tag)), 'Three is a magic number.');
});

// The DIDComm spec's appendix parties (X25519 keys only).
function specParties() {
  const bobKey = (id, dB64) => ({ id, crv: 'X25519', secret: unb64u(dB64) });
  const bob = {
    did: 'did:example:bob',
    agreement: [bobKey('did:example:bob#key-x25519-1', 'b9NnuOCB0hm7YGNvaE9DMhwH_wjZA1-gWD6dA0JWdL0'), bobKey('did:example:bob#key-x25519-2', 'p-vteoF1gopny1HXywt76xz_uC83UUmrgszsI-ThBKk')],
  };
  const resolver = d.staticResolver({
    'did:example:alice': {
      did: 'did:example:alice',
      keyAgreement: [{ id: 'did:example:alice#key-x25519-1', crv: 'X25519', key: unb64u('avH0O2Y4tqLAq8y9zpianr8ajii5m4F_mICrzNlatXs') }],
      authentication: [{ id: 'did:example:alice#key-1', key: unb64u('G-boxFB6vOZBu-wXkm-9Lh79I8nf9Z50cILaOgKKGww') }],
    },
  });
  return { bob, resolver };
}

test('DIDComm spec appendix vectors', () => {
  const { bob, resolver } = specParties();
  const at = () => 1516269100; // between the vectors' created and expires times
  for (const [name, mode, enc, sender, signer] of [
    ['specAnonXC20P', 'anoncrypt', 'XC20P', '', ''],
    ['specAuthX25519', 'authcrypt', 'A256CBC-HS512', 'did:example:alice#key-x25519-1', ''],
    ['specSigned', 'signed', '', '', 'did:example:alice#key-1'],
  ]) {
    const got = new d.Unpacker(bob, resolver, { now: at }).unpack(vectors[name]);
    assert.equal(got.message.id, '1234567890', name);
    assert.equal(got.message.from, 'did:example:alice', name);
    assert.equal(got.message.body.messagespecificattribute, 'and its value', name);
    assert.equal(got.mode, mode, name);
    assert.equal(got.enc, enc, name);
    assert.equal(got.senderKID, sender, name);
    assert.deepEqual(got.signerKIDs, signer ? [signer] : [], name);
    assert.equal(got.authenticated, sender !== '' || signer !== '', name);
    assert.throws(() => new d.Unpacker(bob, resolver, { now: () => 1516385932 }).unpack(vectors[name]), { code: d.CodeExpired }, `${name} after expiry`);
  }
  // P-256 is not a curve a did:key of Ed25519 has: refused, and said so.
  assert.throws(() => new d.Unpacker(bob, resolver, { now: at }).unpack(vectors.specAnonP256XC20P), (e) => e.code === d.CodeMalformed && /X25519 only/.test(e.message));
});

test('did:key spec vector', () => {
  const s = d.secretsFromSeed(new Uint8Array(32));
  assert.equal(s.did, 'did:key:z6MkiTBz1ymuepAQ4HEHYSF1H8quG5GLVVQR3djdX3mDooWp');
  assert.equal(s.agreement[0].id, 'did:key:z6MkiTBz1ymuepAQ4HEHYSF1H8quG5GLVVQR3djdX3mDooWp#z6LShs9GGnqk85isEBzzshkuVWrVKsRp24GnDuHk8QWkARMW');
  assert.deepEqual(d.didDocument(s.did).keyAgreement, [s.agreement[0].id]);
  assert.throws(() => d.publicKeyFromDID('did:key:z6LShs9GGnqk85isEBzzshkuVWrVKsRp24GnDuHk8QWkARMW'), /multicodec/);
});

const modes = [
  { mode: 'authcrypt' },
  { mode: 'anoncrypt' },
  { mode: 'anoncrypt', enc: 'A256GCM' },
  { mode: 'anoncrypt', enc: 'XC20P' },
  { mode: 'signed' },
  { mode: 'authcrypt', sign: true },
  { mode: 'authcrypt', protectSender: true },
  { mode: 'plaintext' },
];

test('round trip in every mode', () => {
  const alice = d.secretsFromSeed(d.newSeed());
  const bob = d.secretsFromSeed(d.newSeed());
  const u = new d.Unpacker(bob, d.didKeyResolver, { replay: new d.ReplayGuard() });
  for (const opt of modes) {
    const m = { ...d.newMessage('https://didcomm.org/basicmessage/2.0/message', { content: 'hello' }), to: [bob.did] };
    const got = u.unpack(new d.Packer(alice, d.didKeyResolver).pack(m, opt));
    const name = JSON.stringify(opt);
    assert.equal(got.message.body.content, 'hello', name);
    assert.equal(got.authenticated, opt.mode !== 'anoncrypt' && opt.mode !== 'plaintext', name);
    assert.equal(got.nonRepudiable, opt.mode === 'signed' || !!opt.sign, name);
    if (opt.mode === 'authcrypt') assert.equal(got.senderKID, alice.agreement[0].id, name);
    assert.throws(() => u.unpack(new d.Packer(alice, d.didKeyResolver).pack(m, opt)), { code: d.CodeReplay }, `${name} replayed`);
  }
});

test('receiver rules', () => {
  const alice = d.secretsFromSeed(d.newSeed());
  const bob = d.secretsFromSeed(d.newSeed());
  const carol = d.secretsFromSeed(d.newSeed());
  const p = new d.Packer(alice, d.didKeyResolver);
  const msg = (extra = {}) => ({ ...d.newMessage('https://didcomm.org/trust-ping/2.0/ping'), to: [bob.did], ...extra });
  const bobU = new d.Unpacker(bob, d.didKeyResolver);
  // Not addressed to carol.
  assert.throws(() => new d.Unpacker(carol, d.didKeyResolver).unpack(p.pack(msg(), { mode: 'authcrypt' })), { code: d.CodeNotRecipient });
  // A flipped ciphertext byte.
  const jwe = JSON.parse(p.pack(msg(), { mode: 'authcrypt' }));
  const ct = unb64u(jwe.ciphertext);
  ct[0] ^= 1;
  jwe.ciphertext = b64u(ct);
  assert.throws(() => bobU.unpack(JSON.stringify(jwe)), { code: d.CodeCrypto });
  // An authcrypt by carol whose plaintext claims alice sent it.
  const bobKeys = d.didKeyResolver.resolve(bob.did).keyAgreement;
  const forged = encrypt(utf8Encode(JSON.stringify(msg({ from: alice.did }))), bobKeys, carol.agreement[0]);
  assert.throws(() => bobU.unpack(forged), { code: d.CodeSenderMismatch });
  assert.throws(() => new d.Packer(carol, d.didKeyResolver).pack(msg({ from: alice.did }), { mode: 'authcrypt' }), /not the packer's DID/);
  // Encrypted to bob, but the plaintext's to names only carol.
  const misaddressed = encrypt(utf8Encode(JSON.stringify({ ...msg(), to: [carol.did] })), bobKeys, null);
  assert.throws(() => bobU.unpack(misaddressed), { code: d.CodeNotRecipient });
  // Future-dated and expired.
  const now = Math.floor(Date.now() / 1000);
  assert.throws(() => bobU.unpack(p.pack(msg({ created_time: now + 3600 }), { mode: 'authcrypt' })), { code: d.CodeExpired });
  assert.throws(() => bobU.unpack(p.pack(msg({ expires_time: now - 10 }), { mode: 'authcrypt' })), { code: d.CodeExpired });
  // Too big, and not JSON.
  assert.throws(() => new d.Unpacker(bob, d.didKeyResolver, { limits: { maxMessageBytes: 100 } }).unpack(p.pack(msg(), { mode: 'authcrypt' })), { code: d.CodeTooBig });
  assert.throws(() => bobU.unpack('not json'), { code: d.CodeMalformed });
  // A signature over a changed payload.
  const jws = JSON.parse(p.pack(msg(), { mode: 'signed' }));
  jws.payload = b64u(utf8Encode(JSON.stringify({ ...msg(), from: alice.did })));
  assert.throws(() => bobU.unpack(JSON.stringify(jws)), { code: d.CodeCrypto });
});
