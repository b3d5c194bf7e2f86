/**
 * @file DIDComm Messaging v2 for the browser leaf (and Node): plain ESM on
 * @noble, speaking exactly what the Go package `didcomm` speaks
 * (spec/didcomm.md; the profile in spec/browser-leaf.md).
 *
 * API (stable; the app and web/src/leaf use only this):
 *
 *   Identity (did:key, Ed25519 with the derived X25519 key agreement):
 *     newSeed() → Uint8Array(32)
 *     secretsFromSeed(seed) → Secrets           the DID and its private keys
 *     didFromPublicKey(pub), publicKeyFromDID(did), didDocument(did),
 *     signingKeyID(did), keyAgreementID(did), didOf(kidOrDid)
 *     didKeyResolver: Resolver                   resolves any did:key, no network
 *     staticResolver({did: Keys}) → Resolver
 *
 *   Envelopes:
 *     new Packer(secrets|null, resolver).pack(message, {mode, enc?, sign?, protectSender?}) → string
 *       mode: 'plaintext' | 'signed' | 'anoncrypt' | 'authcrypt'
 *       (ModePlaintext, ModeSigned, ModeAnoncrypt, ModeAuthcrypt);
 *       enc (anoncrypt only): 'A256CBC-HS512' (default), 'A256GCM', 'XC20P'
 *     new Unpacker(secrets|null, resolver, {limits?, replay?: ReplayGuard, now?}).unpack(data) → Unpacked
 *       throws Problem {code, message} with the report-problem 2.0 code to answer with
 *     new ReplayGuard(windowSecs = 600, maxEntries = 100000)
 *
 *   Messages:
 *     newMessage(type, body?) → Message            fresh id, created now
 *     newID(), validate(message), threadOf(message)
 *     MediaTypePlain, MediaTypeSigned, MediaTypeEncrypted
 *     Problem, Code* (the Go package's problem codes)
 *
 * Only X25519 keys are used for key agreement (a did:key of Ed25519 has
 * no other); P-256 and P-384, which the Go package also reads, are not.
 *
 * Key material: Secrets holds the seed and the X25519 secret in memory
 * only; nothing here stores or sends them (spec/browser-leaf.md "Key
 * custody").
 *
 * @typedef {{id: string, typ?: string, type: string, from?: string, to?: string[],
 *   thid?: string, pthid?: string, created_time?: number, expires_time?: number,
 *   body: object, attachments?: object[], return_route?: string}} Message
 * @typedef {{id: string, crv?: string, key: Uint8Array}} AgreementKey
 * @typedef {{id: string, key: Uint8Array}} SigningKey
 * @typedef {{did: string, keyAgreement: AgreementKey[], authentication: SigningKey[]}} Keys
 * @typedef {{resolve(did: string): Keys}} Resolver
 * @typedef {{did: string, signing: {id: string, seed: Uint8Array, publicKey: Uint8Array},
 *   agreement: {id: string, crv: string, secret: Uint8Array, publicKey: Uint8Array}[]}} Secrets
 * @typedef {{mode: string, enc?: string, sign?: boolean, protectSender?: boolean}} PackOptions
 * @typedef {{message: Message, plaintext: string, mode: string, encrypted: boolean,
 *   authenticated: boolean, nonRepudiable: boolean, senderKID: string, signerKIDs: string[],
 *   recipientKID: string, enc: string}} Unpacked
 */
export {
  didDocument,
  didFromPublicKey,
  didKeyResolver,
  didOf,
  keyAgreementID,
  newSeed,
  publicKeyFromDID,
  secretsFromSeed,
  signingKeyID,
  staticResolver,
  x25519FromEd25519,
} from './didkey.js';
export { AlgAnon, AlgAuth, EncA256CBCHS512, EncA256GCM, EncXC20P } from './jwe.js';
export { MediaTypeEncrypted, MediaTypePlain, MediaTypeSigned, newID, newMessage, threadOf, validate } from './message.js';
export { ModeAnoncrypt, ModeAuthcrypt, ModePlaintext, ModeSigned, Packer } from './pack.js';
export * from './problem.js';
export { DefaultLimits, ReplayGuard, Unpacker } from './unpack.js';
