// Key custody of the browser leaf (spec/browser-leaf.md "Key custody"):
// the 32-byte Ed25519 seed is kept encrypted with AES-256-GCM under a
// non-extractable WebCrypto AES key, both in the leaf's `keys` store; the
// seed is decrypted into memory when the leaf opens. A non-extractable
// WebCrypto Ed25519 key cannot be used instead: did:key's key agreement is
// the X25519 form of the Ed25519 key, which WebCrypto cannot derive from
// a key it will not export.
import { newSeed } from '../didcomm/didkey.js';

const subtle = () => globalThis.crypto.subtle;

/**
 * Returns the leaf's seed from storage, making, wrapping and storing one
 * the first time. The wrapping key is generated non-extractable, so no
 * script can read it; only this origin's WebCrypto can unwrap the seed.
 * @param {import('./index.js').Storage} storage
 * @returns {Promise<Uint8Array>}
 */
export async function loadOrCreateSeed(storage) {
  const kept = await storage.get('keys', 'seed');
  if (kept) {
    const plain = await subtle().decrypt({ name: 'AES-GCM', iv: kept.iv }, kept.wrappingKey, kept.wrapped);
    const seed = new Uint8Array(plain);
    if (seed.length !== 32) throw new Error('leaf: the stored seed is not 32 bytes');
    return seed;
  }
  const wrappingKey = await subtle().generateKey({ name: 'AES-GCM', length: 256 }, false, ['encrypt', 'decrypt']);
  const seed = newSeed();
  const iv = globalThis.crypto.getRandomValues(new Uint8Array(12));
  const wrapped = new Uint8Array(await subtle().encrypt({ name: 'AES-GCM', iv }, wrappingKey, seed));
  await storage.batch([{ store: 'keys', key: 'seed', value: { v: 1, alg: 'AES-GCM', iv, wrapped, wrappingKey } }]);
  return seed;
}
