// What the browser leaf keeps, behind the small interface the app backs
// with IndexedDB and tests back in memory (spec/browser-leaf.md "What it
// keeps").
//
// A Storage has named stores of string keys and structured-clonable
// values (objects, strings, numbers, Uint8Array, CryptoKey):
//
//   get(store, key)   → Promise<value | undefined>
//   entries(store)    → Promise<[key, value][]>, sorted by key (as IndexedDB
//                       orders string keys: by UTF-16 code units)
//   batch(ops)        → Promise<void>: ops is [{store, key, value}] (put)
//                       or [{store, key, del: true}] (delete), applied
//                       atomically: all or none, durable once resolved.
//
// With idb, one object store per name (out-of-line keys) and batch as one
// readwrite transaction over the stores it names, resolved on its
// `done`. The leaf is the only writer of its stores while it runs (it
// serializes its own operations; the app runs one leaf per origin, e.g.
// under a Web Lock).

/** The names of the stores the leaf uses. */
export const Stores = Object.freeze(['keys', 'homes', 'messages', 'seen', 'outbox', 'rejected', 'acct', 'receipts', 'meta']);

/** A Storage in memory: for tests, and a page that must not persist. */
export function memoryStorage() {
  /** @type {Map<string, Map<string, any>>} */
  const stores = new Map();
  const store = (name) => {
    if (!stores.has(name)) stores.set(name, new Map());
    return stores.get(name);
  };
  const copy = (v) => (v === undefined ? undefined : structuredClone(v));
  return {
    async get(name, key) {
      return copy(store(name).get(key));
    },
    async entries(name) {
      return [...store(name).entries()].sort((x, y) => (x[0] < y[0] ? -1 : x[0] > y[0] ? 1 : 0)).map(([k, v]) => [k, copy(v)]);
    },
    async batch(ops) {
      const staged = ops.map((op) => ({ ...op, value: copy(op.value) }));
      for (const op of staged) {
        if (op.del) store(op.store).delete(op.key);
        else store(op.store).set(op.key, op.value);
      }
    },
  };
}

/** A fixed-width key for a number, so that keys sort as the numbers do. */
export const numKey = (n) => String(n).padStart(16, '0');
