/**
 * @file The browser leaf's leaf protocol: plain ESM that runs in a page, a
 * service worker and Node. It speaks with its homes exactly what the Go
 * leaf speaks (spec/leaf.md; the profile is spec/browser-leaf.md).
 *
 * API (stable; what the app uses):
 *
 *   const storage = await idbStorage()              // IndexedDB (idb); memoryStorage() in tests
 *   const leaf = await Leaf.open({
 *     storage,                                       // Storage (below)
 *     keyStore: webCryptoKeyStore(storage),          // {seed(): Promise<Uint8Array(32)>}
 *     fetch?, budgetMs?, exchangeTimeoutMs?, deliveryBatch?,
 *     windowSecs?,                                   // must equal the homes' [accounting] window (default 3600)
 *     disputePeriodSecs?, maxSeen?, now?,            // now(): ms, for tests
 *   })
 *   leaf.did                                         // 'did:key:z6Mk…', show it to the person
 *   await leaf.pairWithNode(location.origin)         // the node that served the app (GET /didcomm)
 *   await leaf.pair(invitation)                      // join code, fleetmesh: link, ?_oob= URL or its JSON
 *     → {did, endpoint}
 *   await leaf.homes()                               // [{did, endpoint, mediated}]
 *   await leaf.sendMessage(toDID, {type, body, …})   // → id; queued, authcrypted now, sent by the next wake
 *   await leaf.wake({signal?})                       // → Summary; mediation, pickup, outbox, receipts
 *   await leaf.messages(afterSeq = 0, limit = 100)   // [{seq, delivery_id, mediator, id, from, authenticated,
 *                                                    //   message} | {…, packed, error}]
 *   await leaf.deleteMessage(seq)
 *   await leaf.outbox(), await leaf.rejected()       // waiting entries; refused for good, with reason
 *   await leaf.receipts()                            // as `fleetmesh receipts --json` prints them
 *
 *   parseInvitation(text) → {did, endpoint}          // to show whom a link pairs with before pairing
 *   Defaults, Stores, numKey
 *
 * One leaf per origin at a time: the app opens it under a Web Lock (or in
 * one service worker); its operations are serialized inside.
 *
 * @typedef {Object} Storage  named stores of string keys and structured-clonable values
 * @property {(store: string, key: string) => Promise<any>} get        undefined when absent
 * @property {(store: string) => Promise<Array<[string, any]>>} entries  sorted by key
 * @property {(ops: Array<{store: string, key: string, value?: any, del?: boolean}>) => Promise<void>} batch
 *   atomic (one IndexedDB readwrite transaction), durable once resolved
 *
 * @typedef {Object} Summary  what one wake did (the Go leaf's Summary fields it has)
 * @property {number} picked_up      messages stored (duplicates not counted)
 * @property {number} outbox_sent    outbox messages a home took
 * @property {number} outbox_left    outbox messages still waiting
 * @property {number} receipts       receipts co-signed with homes in this wake
 * @property {number} receipts_left  closed windows still to exchange
 * @property {number} round_trips    DIDComm requests with their answers
 * @property {number} bytes_sent     bytes of DIDComm messages POSTed
 * @property {number} bytes_received bytes of answers
 * @property {number} duration_ms
 * @property {boolean} caught_up     every home reached, queues drained, outbox empty, no error
 * @property {boolean} cancelled     aborted, or out of budget
 * @property {string} error          the first error ('' when none)
 */
export { Leaf, Defaults } from './leaf.js';
export { memoryStorage, numKey, Stores } from './storage.js';
export { idbStorage } from './idbstorage.js';
export { loadOrCreateSeed } from './keystore.js';
export { parseInvitation, parseJoinCode, parseOOB, isJoinCode } from './invitation.js';

import { loadOrCreateSeed } from './keystore.js';

/**
 * The key store the app uses: the seed wrapped by a non-extractable
 * WebCrypto AES-GCM key in the leaf's `keys` store (spec/browser-leaf.md
 * "Key custody").
 * @param {Storage} storage
 */
export const webCryptoKeyStore = (storage) => ({ seed: () => loadOrCreateSeed(storage) });
