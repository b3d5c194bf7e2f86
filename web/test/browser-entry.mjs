// Runs in headless Chromium (web/test/browser.test.mjs): the leaf's
// modules as the app bundles them, on the browser's own IndexedDB and
// WebCrypto. Sets window.result.
import { Leaf, webCryptoKeyStore } from '../src/leaf/index.js';
import { idbStorage } from '../src/leaf/idbstorage.js';
import { Packer, Unpacker, didKeyResolver, newSeed, secretsFromSeed } from '../src/didcomm/index.js';

async function run() {
  const first = await idbStorage('fleetmesh-leaf-test');
  const leaf = await Leaf.open({ storage: first, keyStore: webCryptoKeyStore(first) });
  await first.batch([{ store: 'meta', key: 'b', value: 2 }, { store: 'meta', key: 'a', value: 1 }]);
  first.close();
  // A second open, as after a reload: the same identity from IndexedDB.
  const second = await idbStorage('fleetmesh-leaf-test');
  const again = await Leaf.open({ storage: second, keyStore: webCryptoKeyStore(second) });
  const kept = await second.get('keys', 'seed');
  let exported = 'refused';
  try {
    await crypto.subtle.exportKey('raw', kept.wrappingKey);
    exported = 'exported';
  } catch {
    // what a non-extractable key must do
  }
  const entries = await second.entries('meta');
  // DIDComm both ways with another party, in the browser.
  const other = secretsFromSeed(newSeed());
  const m = { id: 'b1', type: 'https://didcomm.org/basicmessage/2.0/message', body: { content: 'in the browser' }, to: [other.did] };
  const packed = new Packer(secretsFromSeed(newSeed()), didKeyResolver).pack(m, { mode: 'authcrypt', sign: true });
  const got = new Unpacker(other, didKeyResolver).unpack(packed);
  return {
    did: leaf.did,
    didAgain: again.did,
    keyType: kept.wrappingKey.constructor.name,
    extractable: kept.wrappingKey.extractable,
    exported,
    wrappedBytes: kept.wrapped.length,
    entries,
    content: got.message.body.content,
    authenticated: got.authenticated,
  };
}

run().then(
  (r) => (window.result = r),
  (e) => (window.result = { error: e.stack || String(e) }),
);
