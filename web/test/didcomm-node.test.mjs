// The browser leaf's DIDComm against didcomm-node 0.4.1 (SICPA's
// didcomm-rust in WebAssembly, installed in interop/ for the Go interop
// tests, whose DID documents and secrets shapes this reuses:
// interop/didcomm/interop.mjs): each packs, the other unpacks, in every
// mode both implement.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import * as d from '../src/didcomm/index.js';
import { b64u } from '../src/didcomm/bytes.js';

const require = createRequire(new URL('../../interop/package.json', import.meta.url));
let Message;
try {
  ({ Message } = require('didcomm-node'));
} catch (e) {
  throw new Error(`interop/node_modules/didcomm-node is missing: run \`cd interop && npm ci\` (${e.message})`);
}

class DocResolver {
  constructor(dids) {
    this.docs = new Map(dids.map((did) => [did, { service: [], ...d.didDocument(did) }]));
  }
  async resolve(did) {
    return this.docs.get(did) ?? null;
  }
}

// A party's private keys as didcomm-node takes them (JsonWebKey2020).
class SecretResolver {
  constructor(s) {
    this.secrets = new Map([
      [s.signing.id, { id: s.signing.id, type: 'JsonWebKey2020', privateKeyJwk: { kty: 'OKP', crv: 'Ed25519', x: b64u(s.signing.publicKey), d: b64u(s.signing.seed) } }],
      [s.agreement[0].id, { id: s.agreement[0].id, type: 'JsonWebKey2020', privateKeyJwk: { kty: 'OKP', crv: 'X25519', x: b64u(s.agreement[0].publicKey), d: b64u(s.agreement[0].secret) } }],
    ]);
  }
  async get_secret(id) {
    return this.secrets.get(id) ?? null;
  }
  async find_secrets(ids) {
    return ids.filter((id) => this.secrets.has(id));
  }
}

const anonOpts = { forward: false, enc_alg_anon: 'A256cbcHs512EcdhEsA256kw' };
const newMsg = (from, to) => ({ ...d.newMessage('https://didcomm.org/basicmessage/2.0/message', { content: 'hello' }), from: from.did, to: [to.did] });

test('JS packs, didcomm-node unpacks', async () => {
  const alice = d.secretsFromSeed(d.newSeed());
  const bob = d.secretsFromSeed(d.newSeed());
  const docs = new DocResolver([alice.did, bob.did]);
  const p = new d.Packer(alice, d.didKeyResolver);
  for (const opt of [{ mode: 'authcrypt' }, { mode: 'anoncrypt' }, { mode: 'anoncrypt', enc: 'A256GCM' }, { mode: 'anoncrypt', enc: 'XC20P' }, { mode: 'signed' }, { mode: 'authcrypt', sign: true }, { mode: 'authcrypt', protectSender: true }, { mode: 'plaintext' }]) {
    const m = newMsg(alice, bob);
    if (opt.mode === 'anoncrypt') delete m.from;
    const [got, meta] = await Message.unpack(p.pack(m, opt), docs, new SecretResolver(bob), {});
    const name = JSON.stringify(opt);
    assert.equal(got.as_value().id, m.id, name);
    assert.equal(got.as_value().body.content, 'hello', name);
    assert.equal(meta.encrypted, opt.mode === 'anoncrypt' || opt.mode === 'authcrypt', name);
    assert.equal(meta.authenticated, opt.mode === 'authcrypt' || opt.mode === 'signed' || !!opt.sign, name);
    if (opt.mode === 'authcrypt') assert.equal(meta.encrypted_from_kid, alice.agreement[0].id, name);
    if (opt.mode === 'signed' || opt.sign) assert.equal(meta.sign_from, alice.signing.id, name);
  }
});

test('didcomm-node packs, JS unpacks', async () => {
  const alice = d.secretsFromSeed(d.newSeed());
  const bob = d.secretsFromSeed(d.newSeed());
  const docs = new DocResolver([alice.did, bob.did]);
  const secrets = new SecretResolver(alice);
  const u = new d.Unpacker(bob, d.didKeyResolver, { replay: new d.ReplayGuard() });
  const cases = {
    authcrypt: async (m) => (await new Message(m).pack_encrypted(bob.did, alice.did, null, docs, secrets, anonOpts))[0],
    anoncrypt: async (m) => (await new Message(m).pack_encrypted(bob.did, null, null, docs, secrets, anonOpts))[0],
    'anoncrypt/XC20P': async (m) => (await new Message(m).pack_encrypted(bob.did, null, null, docs, secrets, { forward: false }))[0],
    'authcrypt+sign': async (m) => (await new Message(m).pack_encrypted(bob.did, alice.did, alice.did, docs, secrets, anonOpts))[0],
    'authcrypt+protect': async (m) => (await new Message(m).pack_encrypted(bob.did, alice.did, null, docs, secrets, { ...anonOpts, protect_sender: true }))[0],
    signed: async (m) => (await new Message(m).pack_signed(alice.did, docs, secrets))[0],
    plaintext: async (m) => new Message(m).pack_plaintext(docs),
  };
  for (const [name, pack] of Object.entries(cases)) {
    const m = newMsg(alice, bob);
    const got = u.unpack(await pack(m));
    assert.equal(got.message.id, m.id, name);
    assert.equal(got.message.body.content, 'hello', name);
    assert.equal(got.authenticated, !name.startsWith('anoncrypt') && name !== 'plaintext', name);
    if (name.startsWith('authcrypt')) assert.equal(got.senderKID, alice.agreement[0].id, name);
    if (name === 'anoncrypt/XC20P') assert.equal(got.enc, 'XC20P', name);
    if (name === 'signed' || name === 'authcrypt+sign') assert.deepEqual(got.signerKIDs, [alice.signing.id], name);
    if (name === 'authcrypt+protect') assert.equal(got.mode, 'anoncrypt', name);
  }
});
