// The Storage of the browser leaf on IndexedDB (through idb): one object
// store per name in Stores, string keys out of line, values stored by
// structured clone (a CryptoKey included, which is how the seed's
// wrapping key is kept without ever being readable), and a batch as one
// readwrite transaction with strict durability, resolved when it commits.
import { openDB } from 'idb';
import { Stores } from './storage.js';

/**
 * Opens (creating on first use) the leaf's database.
 * @param {string} [name] the IndexedDB database name
 * @returns {Promise<import('./index.js').Storage & {close(): void}>}
 */
export async function idbStorage(name = 'fleetmesh-leaf') {
  const db = await openDB(name, 1, {
    upgrade(d) {
      for (const s of Stores) d.createObjectStore(s);
    },
  });
  return {
    get: (store, key) => db.get(store, key),
    async entries(store) {
      const tx = db.transaction(store);
      const [keys, values] = await Promise.all([tx.store.getAllKeys(), tx.store.getAll(), tx.done]);
      return keys.map((k, i) => [k, values[i]]);
    },
    async batch(ops) {
      const names = [...new Set(ops.map((o) => o.store))];
      if (names.length === 0) return;
      const tx = db.transaction(names, 'readwrite', { durability: 'strict' });
      for (const o of ops) {
        const st = tx.objectStore(o.store);
        if (o.del) st.delete(o.key);
        else st.put(o.value, o.key);
      }
      await tx.done;
    },
    close: () => db.close(),
  };
}
