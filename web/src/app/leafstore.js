// The IndexedDB Storage the leaf protocol keeps its state in (the
// interface of web/src/leaf/storage.js): database fleetmesh-leaf, one
// object store per name in Stores, out-of-line string keys; batch is one
// readwrite transaction over the stores it names, resolved when it is
// durable (done).
import { openDB } from 'idb';

export function idbStorage(stores, name = 'fleetmesh-leaf') {
  const dbp = openDB(name, 1, {
    upgrade(d) {
      for (const s of stores) d.createObjectStore(s);
    },
  });
  return {
    async get(store, key) {
      return (await dbp).get(store, key);
    },
    async entries(store) {
      const d = await dbp;
      const tx = d.transaction(store);
      const [keys, values] = await Promise.all([tx.store.getAllKeys(), tx.store.getAll()]);
      return keys.map((k, i) => [k, values[i]]);
    },
    async batch(ops) {
      if (!ops.length) return;
      const d = await dbp;
      const tx = d.transaction([...new Set(ops.map((o) => o.store))], 'readwrite', { durability: 'strict' });
      for (const o of ops) {
        const st = tx.objectStore(o.store);
        if (o.del) st.delete(o.key);
        else st.put(o.value, o.key);
      }
      await tx.done;
    },
  };
}
