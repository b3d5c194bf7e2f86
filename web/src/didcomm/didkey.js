// did:key for Ed25519 keys (w3c-ccg did-method-key): the DID is
// `did:key:z` + base58btc(0xed 0x01 ‖ key); its key-agreement key is the
// X25519 form of the same key (RFC 7748 §4.1's birational map), 0xec 0x01,
// `z6LS…`. The document is a function of the DID, as identity.Resolve
// makes it in Go, so no network is needed to resolve one.
import { ed25519, x25519 } from '@noble/curves/ed25519.js';
import { base58 } from '@scure/base';
import { concat } from './bytes.js';
import { CodeUnresolvable, problem } from './problem.js';

export const DIDKeyPrefix = 'did:key:';
const ed25519Codec = [0xed, 0x01];
const x25519Codec = [0xec, 0x01];

const multibase = (codec, key) => 'z' + base58.encode(concat(Uint8Array.from(codec), key));

/** Multibase of an Ed25519 public key (z6Mk…). */
export const multibaseEd25519 = (pub) => multibase(ed25519Codec, pub);
/** Multibase of an X25519 public key (z6LS…). */
export const multibaseX25519 = (pub) => multibase(x25519Codec, pub);

/** The did:key of an Ed25519 public key. */
export const didFromPublicKey = (pub) => DIDKeyPrefix + multibaseEd25519(pub);

/** The DID of a DID URL: without fragment, query or path parameters. */
export function didOf(kid) {
  return kid.split('#')[0].split('?')[0];
}

function decodeMultibaseKey(mb, codec) {
  if (!mb.startsWith('z')) throw new Error(`${JSON.stringify(mb)} is not multibase base58btc`);
  let raw;
  try {
    raw = base58.decode(mb.slice(1));
  } catch (e) {
    throw new Error(`${JSON.stringify(mb)} is not base58btc: ${e.message}`);
  }
  if (raw.length < 2 || raw[0] !== codec[0] || raw[1] !== codec[1]) throw new Error(`${JSON.stringify(mb)} has the wrong multicodec`);
  const key = raw.slice(2);
  if (key.length !== 32) throw new Error(`${JSON.stringify(mb)}: key of ${key.length} bytes`);
  return key;
}

/**
 * The Ed25519 public key of a did:key DID (a fragment is ignored); throws
 * when it is not a did:key of a valid Ed25519 point.
 * @param {string} did
 * @returns {Uint8Array}
 */
export function publicKeyFromDID(did) {
  did = did.split('#')[0];
  if (!did.startsWith(DIDKeyPrefix)) throw new Error(`${JSON.stringify(did)} is not a did:key`);
  const key = decodeMultibaseKey(did.slice(DIDKeyPrefix.length), ed25519Codec);
  try {
    ed25519.Point.fromBytes(key);
  } catch {
    throw new Error(`${JSON.stringify(did)}: not a point of Ed25519`);
  }
  return key;
}

/** X25519 public key of an Ed25519 public key (did:key's key agreement). */
export const x25519FromEd25519 = (pub) => ed25519.utils.toMontgomery(pub);

/** Verification method id of the DID's Ed25519 key (did:key:z6Mk…#z6Mk…). */
export function signingKeyID(did) {
  const pub = publicKeyFromDID(did);
  return didFromPublicKey(pub) + '#' + multibaseEd25519(pub);
}

/** Verification method id of the DID's derived X25519 key (did:key:z6Mk…#z6LS…). */
export function keyAgreementID(did) {
  const pub = publicKeyFromDID(did);
  return didFromPublicKey(pub) + '#' + multibaseX25519(x25519FromEd25519(pub));
}

/**
 * The DID document of a did:key, exactly as the Go identity.Resolve writes
 * it (the 2020 suites with publicKeyMultibase, which didcomm-node reads).
 */
export function didDocument(did) {
  const pub = publicKeyFromDID(did);
  const x = x25519FromEd25519(pub);
  did = didFromPublicKey(pub);
  const edID = did + '#' + multibaseEd25519(pub);
  const xID = did + '#' + multibaseX25519(x);
  return {
    '@context': ['https://www.w3.org/ns/did/v1', 'https://w3id.org/security/suites/ed25519-2020/v1', 'https://w3id.org/security/suites/x25519-2020/v1'],
    id: did,
    verificationMethod: [
      { id: edID, type: 'Ed25519VerificationKey2020', controller: did, publicKeyMultibase: multibaseEd25519(pub) },
      { id: xID, type: 'X25519KeyAgreementKey2020', controller: did, publicKeyMultibase: multibaseX25519(x) },
    ],
    authentication: [edID],
    assertionMethod: [edID],
    capabilityInvocation: [edID],
    capabilityDelegation: [edID],
    keyAgreement: [xID],
  };
}

/**
 * Resolves did:key DIDs to their keys with no network.
 * @type {import('./index.js').Resolver}
 */
export const didKeyResolver = {
  resolve(did) {
    let pub;
    try {
      pub = publicKeyFromDID(did);
    } catch (e) {
      throw problem(CodeUnresolvable, `DID cannot be resolved: ${e.message}`);
    }
    const canonical = didFromPublicKey(pub);
    return {
      did: canonical,
      keyAgreement: [{ id: keyAgreementID(canonical), crv: 'X25519', key: x25519FromEd25519(pub) }],
      authentication: [{ id: signingKeyID(canonical), key: pub }],
    };
  },
};

/**
 * A resolver of fixed key sets (peers known out of band, test vectors).
 * @param {Record<string, import('./index.js').Keys>} map
 */
export function staticResolver(map) {
  return {
    resolve(did) {
      const ks = map[did];
      if (!ks) throw problem(CodeUnresolvable, `${did}: DID cannot be resolved`);
      return ks;
    },
  };
}

/**
 * The secrets of a did:key identity from its 32-byte Ed25519 seed: the
 * seed signs, and the X25519 key derived from it (the first half of
 * SHA-512 of the seed, RFC 8032 §5.1.5, clamped by X25519) agrees keys.
 * @param {Uint8Array} seed
 * @returns {import('./index.js').Secrets}
 */
export function secretsFromSeed(seed) {
  if (!(seed instanceof Uint8Array) || seed.length !== 32) throw new Error('an Ed25519 seed is 32 bytes');
  const pub = ed25519.getPublicKey(seed);
  const did = didFromPublicKey(pub);
  const xsec = ed25519.utils.toMontgomerySecret(seed);
  return {
    did,
    signing: { id: signingKeyID(did), seed: Uint8Array.from(seed), publicKey: pub },
    agreement: [{ id: keyAgreementID(did), crv: 'X25519', secret: xsec, publicKey: x25519.getPublicKey(xsec) }],
  };
}

/** A new random Ed25519 seed (32 bytes from WebCrypto's CSPRNG). */
export const newSeed = () => ed25519.utils.randomSecretKey();
