// The browser leaf's parts that need no home: key custody, its storage
// in memory, the canonical CBOR of receipts and the receipt bounds, and
// the refusals of its API before any network.
import { test } from 'node:test';
import { createServer } from 'node:net';
import { once } from 'node:events';
import assert from 'node:assert/strict';
import { Leaf, memoryStorage, loadOrCreateSeed, parseInvitation, webCryptoKeyStore } from '../src/leaf/index.js';
import { decode, encode } from '../src/leaf/cbor.js';
import { agree, zeroSide, DefaultBounds } from '../src/leaf/receipt.js';
import { secretsFromSeed } from '../src/didcomm/index.js';

test('key custody: the seed is kept wrapped under a non-extractable key', async () => {
  const storage = memoryStorage();
  const seed = await loadOrCreateSeed(storage);
  assert.deepEqual(await loadOrCreateSeed(storage), seed, 'the same seed on the next open');
  const kept = await storage.get('keys', 'seed');
  assert.equal(kept.wrappingKey.extractable, false);
  await assert.rejects(globalThis.crypto.subtle.exportKey('raw', kept.wrappingKey), 'the wrapping key cannot be exported');
  const hay = Buffer.from(JSON.stringify(kept, (_, v) => (v instanceof Uint8Array ? Array.from(v) : v)));
  assert.equal(Buffer.from(kept.wrapped).indexOf(Buffer.from(seed)), -1, 'the wrapped form does not contain the seed');
  assert.equal(hay.indexOf(Buffer.from(JSON.stringify(Array.from(seed)).slice(1, -1))), -1);
  const a = await Leaf.open({ storage, keyStore: webCryptoKeyStore(storage) });
  assert.equal(a.did, secretsFromSeed(seed).did);
});

test('memory storage: batches apply whole and values are copies', async () => {
  const s = memoryStorage();
  const v = { n: 1, b: Uint8Array.of(1, 2) };
  await s.batch([{ store: 'x', key: 'b', value: v }, { store: 'x', key: 'a', value: 2 }]);
  v.n = 9;
  assert.deepEqual(await s.get('x', 'b'), { n: 1, b: Uint8Array.of(1, 2) });
  assert.deepEqual((await s.entries('x')).map(([k]) => k), ['a', 'b']);
  await s.batch([{ store: 'x', key: 'a', del: true }]);
  assert.equal(await s.get('x', 'a'), undefined);
});

test('canonical CBOR: encodes deterministically, refuses what is not canonical', () => {
  // Keys sort by their encoding: shorter first, then bytewise.
  assert.deepEqual(Array.from(encode({ bb: 1, a: 300, c: null })), [0xa3, 0x61, 0x61, 0x19, 0x01, 0x2c, 0x61, 0x63, 0xf6, 0x62, 0x62, 0x62, 0x01]);
  assert.deepEqual(decode(encode({ a: Uint8Array.of(7), t: 'x', f: false })), { a: Uint8Array.of(7), t: 'x', f: false });
  for (const [name, bytes, why] of [
    ['long integer', [0xa1, 0x61, 0x61, 0x1a, 0, 0, 0x01, 0x2c], /canonical/],
    ['unsorted keys', [0xa2, 0x61, 0x62, 0x01, 0x61, 0x61, 0x01], /canonical/],
    ['duplicate key', [0xa2, 0x61, 0x61, 0x01, 0x61, 0x61, 0x02], /duplicate/],
    ['indefinite map', [0xbf, 0x61, 0x61, 0x01, 0xff], /indefinite/],
    ['tag', [0xc0, 0x61, 0x78], /major type 6/],
    ['float', [0xf9, 0x3c, 0x00], /floats/],
    ['negative', [0x20], /major type 1/],
    ['trailing data', [0x01, 0x01], /after the record/],
    ['truncated', [0x62, 0x61], /end of input/],
    ['bad UTF-8', [0x61, 0xff], /./],
  ]) {
    assert.throws(() => decode(Uint8Array.from(bytes)), why, name);
  }
});

test('receipt bounds: tolerance or slack, from the checker figures alone', () => {
  const side = (gaveMsgs, gotEvents, gotBytes) => {
    const s = zeroSide();
    s.gave.mediation_messages = gaveMsgs;
    s.received.events = gotEvents;
    s.received.bytes = gotBytes;
    return s;
  };
  const theirs = (gotMsgs, gaveEvents, gaveBytes) => {
    const s = zeroSide();
    s.received.mediation_messages = gotMsgs;
    s.gave.events = gaveEvents;
    s.gave.bytes = gaveBytes;
    return s;
  };
  for (const [name, mine, other, ok] of [
    ['equal', side(10, 5, 500), theirs(10, 5, 500), true],
    ['within slack', side(10, 5, 500), theirs(8, 5, 500), true],
    ['beyond slack', side(10, 5, 500), theirs(7, 5, 500), false],
    ['within tolerance', side(1000, 0, 0), theirs(980, 0, 0), true],
    ['beyond tolerance', side(1000, 0, 0), theirs(979, 0, 0), false],
    ['bytes within two mean events', side(0, 5, 500), theirs(0, 5, 700), true],
    ['bytes beyond two mean events', side(0, 5, 500), theirs(0, 5, 701), false],
  ]) {
    assert.equal(agree(mine, other, DefaultBounds) === '', ok, name);
  }
});

test('the API refuses before any network', async () => {
  const storage = memoryStorage();
  const leaf = await Leaf.open({ storage, keyStore: webCryptoKeyStore(storage), fetch: () => assert.fail('no request may be made') });
  await assert.rejects(leaf.sendMessage(leaf.did, { type: 'https://didcomm.org/basicmessage/2.0/message' }), /pair with a home node first/);
  await assert.rejects(leaf.sendMessage('did:web:example.org', { type: 'x' }), /not a did:key/);
  await assert.rejects(leaf.pair('fmjoin1qqqqqq'), /malformed join code/);
  await assert.rejects(leaf.pair('https://example.org/?_oob=e30'), /not an invitation/);
  const noHTTP = { type: 'https://didcomm.org/out-of-band/2.0/invitation', id: '1', from: leaf.did, body: { services: [{ serviceEndpoint: { uri: '/ip4/192.0.2.1/tcp/4001' } }] } };
  assert.throws(() => parseInvitation(JSON.stringify(noHTTP)), /no http\(s\) DIDComm endpoint/);
  const s = await leaf.wake();
  assert.equal(s.caught_up, false, 'a leaf with no home is not caught up');
  assert.equal(s.error, '');
});

test('a home that does not answer is retried, then left for the wake, and no timer outlives it', async () => {
  const storage = memoryStorage();
  const node = secretsFromSeed(new Uint8Array(32).fill(7)).did;
  let requests = 0;
  const counting = await Leaf.open({
    storage,
    keyStore: webCryptoKeyStore(storage),
    unreachableAfterMs: 600,
    budgetMs: 20_000,
    fetch: async (url, init) => {
      requests++;
      return fetch(url, init);
    },
  });
  // A loopback port just freed: nothing listens, every dial is refused.
  const srv = createServer().listen(0, '127.0.0.1');
  await once(srv, 'listening');
  const port = srv.address().port;
  srv.close();
  await once(srv, 'close');
  const endpoint = `http://127.0.0.1:${port}/didcomm`;
  await counting.pair(JSON.stringify({ type: 'https://didcomm.org/out-of-band/2.0/invitation', id: '1', from: node, body: { services: [{ serviceEndpoint: { uri: endpoint } }] } }));
  const timers = () => process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;
  const before = timers();
  const s = await counting.wake();
  assert.equal(timers(), before, 'the wake left a timer behind');
  assert.ok(s.error.includes(`unreachable for 0.6 s: transport: POST ${endpoint}: fetch failed: ECONNREFUSED`), s.error);
  assert.ok(requests >= 2, `retried: ${requests} requests`);
  assert.equal(s.cancelled, false, 'left before the budget ended');
});
