// The JWE layer of DIDComm v2 (General JSON serialization, RFC 7516 §7.2.1):
// anoncrypt (ECDH-ES+A256KW) and authcrypt (ECDH-1PU+A256KW,
// draft-madden-jose-ecdh-1pu-04) over X25519, with one ephemeral key shared
// by every recipient, apu = the sender kid, apv = SHA-256 of the sorted
// recipient kids joined with ".", and AAD = the base64url protected header
// (DIDComm Messaging v2.1, "Cryptographic Algorithms").
//
// Why this is written here on @noble rather than taken from a library:
// jose (panva) has no ECDH-1PU, which authcrypt needs, and makes no single
// epk shared by several recipients; the `didcomm` wasm package is large and
// old. The Go package (didcomm/jwe.go) is hand-written for the same reasons;
// this follows it rule for rule and is tested against it both ways and
// against the ECDH-1PU draft's Appendix B vector (web/test/didcomm.test.mjs).
// The primitives (X25519, AES key wrap, AES-CBC, HMAC-SHA-512, AES-GCM,
// XChaCha20-Poly1305, SHA-256) are @noble's.
import { x25519 } from '@noble/curves/ed25519.js';
import { aeskw, cbc, gcm } from '@noble/ciphers/aes.js';
import { xchacha20poly1305 } from '@noble/ciphers/chacha.js';
import { sha256, sha512 } from '@noble/hashes/sha2.js';
import { hmac } from '@noble/hashes/hmac.js';
import { b64u, concat, equalBytes, lengthPrefixed, randomBytes, u32be, unb64u, utf8Decode, utf8Encode } from './bytes.js';
import { MediaTypeEncrypted } from './message.js';
import { didOf } from './didkey.js';
import { CodeCrypto, CodeMalformed, CodeNotRecipient, CodeSenderMismatch, CodeUnresolvable, Problem, problem } from './problem.js';

export const AlgAnon = 'ECDH-ES+A256KW';
export const AlgAuth = 'ECDH-1PU+A256KW';
export const EncA256CBCHS512 = 'A256CBC-HS512';
export const EncA256GCM = 'A256GCM';
export const EncXC20P = 'XC20P';

const cekSizes = { [EncA256CBCHS512]: 64, [EncA256GCM]: 32, [EncXC20P]: 32 };
const ivSizes = { [EncA256CBCHS512]: 16, [EncA256GCM]: 12, [EncXC20P]: 24 };
const tagSizes = { [EncA256CBCHS512]: 32, [EncA256GCM]: 16, [EncXC20P]: 16 };

function cbcHmacTag(macKey, aad, iv, ct) {
  const al = new Uint8Array(8);
  new DataView(al.buffer).setBigUint64(0, BigInt(aad.length) * 8n);
  return hmac(sha512, macKey, concat(aad, iv, ct, al)).slice(0, 32);
}

/** Encrypts plaintext with the CEK; returns ciphertext and tag (RFC 7518 §5.2 for CBC-HMAC). */
export function sealContent(enc, cek, iv, aad, plaintext) {
  if (cekSizes[enc] === undefined) throw new Error(`unsupported enc ${JSON.stringify(enc)}`);
  if (cek.length !== cekSizes[enc] || iv.length !== ivSizes[enc]) throw new Error(`wrong key or iv length for ${enc}`);
  if (enc === EncA256CBCHS512) {
    const ct = cbc(cek.slice(32), iv).encrypt(plaintext);
    return { ciphertext: ct, tag: cbcHmacTag(cek.slice(0, 32), aad, iv, ct) };
  }
  const out = (enc === EncA256GCM ? gcm : xchacha20poly1305)(cek, iv, aad).encrypt(plaintext);
  const n = out.length - 16;
  return { ciphertext: out.slice(0, n), tag: out.slice(n) };
}

/** Opens what sealContent sealed; throws on any mismatch. */
export function openContent(enc, cek, iv, aad, ciphertext, tag) {
  if (cekSizes[enc] === undefined) throw new Error(`unsupported enc ${JSON.stringify(enc)}`);
  if (cek.length !== cekSizes[enc] || iv.length !== ivSizes[enc] || tag.length !== tagSizes[enc]) {
    throw new Error(`iv or tag has the wrong length for ${enc}`);
  }
  if (enc === EncA256CBCHS512) {
    if (!equalBytes(cbcHmacTag(cek.slice(0, 32), aad, iv, ciphertext), tag)) throw new Error('authentication tag does not match');
    return cbc(cek.slice(32), iv).decrypt(ciphertext);
  }
  return (enc === EncA256GCM ? gcm : xchacha20poly1305)(cek, iv, aad).decrypt(concat(ciphertext, tag));
}

function kwKeySize(alg) {
  if (alg.endsWith('+A256KW')) return 32;
  if (alg.endsWith('+A128KW')) return 16; // only in the ECDH-1PU draft's vector
  throw new Error(`unsupported alg ${JSON.stringify(alg)}`);
}

/**
 * The Concat KDF of RFC 7518 §4.6.2 over Z. For ECDH-1PU in key-wrapping
 * mode, draft-madden-jose-ecdh-1pu-04 §2.3 appends the content tag
 * (length-prefixed) to SuppPubInfo; tag is null for ECDH-ES.
 */
export function deriveKEK(alg, z, apu, apv, tag) {
  const size = kwKeySize(alg);
  let pub = u32be(size * 8);
  if (tag) pub = concat(pub, lengthPrefixed(tag));
  const digest = sha256(concat(u32be(1), z, lengthPrefixed(utf8Encode(alg)), lengthPrefixed(apu), lengthPrefixed(apv), pub));
  return digest.slice(0, size);
}

export const wrapKey = (kek, cek) => aeskw(kek).encrypt(cek);
export const unwrapKey = (kek, wrapped) => aeskw(kek).decrypt(wrapped);

function ecdh(secret, pub) {
  const z = x25519.getSharedSecret(secret, pub);
  if (z.every((b) => b === 0)) throw new Error('X25519 agreement gave the all-zero value');
  return z;
}

/** Z for the sender: Ze, or Ze ‖ Zs for ECDH-1PU. */
export function senderZ(ephemeralSecret, recipientPub, senderStaticSecret) {
  const ze = ecdh(ephemeralSecret, recipientPub);
  return senderStaticSecret ? concat(ze, ecdh(senderStaticSecret, recipientPub)) : ze;
}

/** Z for the recipient. */
export function recipientZ(mySecret, epk, senderStaticPub) {
  const ze = ecdh(mySecret, epk);
  return senderStaticPub ? concat(ze, ecdh(mySecret, senderStaticPub)) : ze;
}

/** apv: SHA-256 over the recipient kids sorted (bytewise, as Go sorts) and joined with ".". */
export function apvFor(kids) {
  const sorted = [...kids].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  return sha256(utf8Encode(sorted.join('.')));
}

/**
 * Encrypts payload to recipients (X25519 keys): anoncrypt when sender is
 * null, authcrypt otherwise (which requires A256CBC-HS512).
 * @param {Uint8Array} payload
 * @param {{id: string, key: Uint8Array}[]} recipients
 * @param {{id: string, secret: Uint8Array}|null} sender
 * @param {string} enc
 * @returns {string} the JWE as JSON
 */
export function encrypt(payload, recipients, sender, enc = EncA256CBCHS512) {
  if (recipients.length === 0) throw new Error('no recipient keys');
  if (sender && enc !== EncA256CBCHS512) throw new Error(`authcrypt requires ${EncA256CBCHS512}, not ${enc}`);
  if (cekSizes[enc] === undefined) throw new Error(`unsupported enc ${JSON.stringify(enc)}`);
  const alg = sender ? AlgAuth : AlgAnon;
  const eSecret = x25519.utils.randomSecretKey();
  const ePub = x25519.getPublicKey(eSecret);
  const cek = randomBytes(cekSizes[enc]);
  const iv = randomBytes(ivSizes[enc]);
  const kids = recipients.map((r) => r.id);
  const apv = apvFor(kids);
  const h = { typ: MediaTypeEncrypted, alg, enc };
  let apu = new Uint8Array(0);
  if (sender) {
    h.skid = sender.id;
    apu = utf8Encode(sender.id);
    h.apu = b64u(apu);
  }
  h.apv = b64u(apv);
  h.epk = { kty: 'OKP', crv: 'X25519', x: b64u(ePub) };
  const protectedB64 = b64u(utf8Encode(JSON.stringify(h)));
  const { ciphertext, tag } = sealContent(enc, cek, iv, utf8Encode(protectedB64), payload);
  const out = { protected: protectedB64, recipients: [], iv: b64u(iv), ciphertext: b64u(ciphertext), tag: b64u(tag) };
  for (const r of recipients) {
    const z = senderZ(eSecret, r.key, sender ? sender.secret : null);
    const kek = deriveKEK(alg, z, apu, apv, sender ? tag : null);
    out.recipients.push({ header: { kid: r.id }, encrypted_key: b64u(wrapKey(kek, cek)) });
  }
  return JSON.stringify(out);
}

const str = (v) => typeof v === 'string';

function decodeB64(what, s) {
  try {
    return unb64u(s);
  } catch (e) {
    throw problem(CodeMalformed, `${what}: ${e.message}`);
  }
}

/** An X25519 public key from an OKP JWK (the only curve the browser leaf uses). */
export function x25519FromJWK(j) {
  if (!j || typeof j !== 'object' || j.kty !== 'OKP' || j.crv !== 'X25519') {
    throw new Error(`unsupported key ${JSON.stringify(j && { kty: j.kty, crv: j.crv })} (X25519 only)`);
  }
  const x = unb64u(j.x);
  if (x.length !== 32) throw new Error('bad x coordinate');
  return x;
}

/**
 * Opens a parsed JWE with the first of our keys it is addressed to,
 * resolving the sender's key from skid for authcrypt. Throws a Problem.
 * @returns {{payload: Uint8Array, alg: string, enc: string, senderKID: string, recipientKID: string}}
 */
export function decrypt(j, secrets, resolver, maxRecipients) {
  if (!Array.isArray(j.recipients) || j.recipients.length === 0 || j.recipients.length > maxRecipients) {
    throw problem(CodeMalformed, `JWE has ${Array.isArray(j.recipients) ? j.recipients.length : 0} recipients (1..${maxRecipients} allowed)`);
  }
  if (!str(j.protected) || !str(j.iv) || !str(j.ciphertext) || !str(j.tag)) throw problem(CodeMalformed, 'JWE lacks protected, iv, ciphertext or tag');
  let h;
  try {
    h = JSON.parse(utf8Decode(unb64u(j.protected)));
  } catch (e) {
    throw problem(CodeMalformed, `protected header: ${e.message}`);
  }
  if (!h || typeof h !== 'object') throw problem(CodeMalformed, 'protected header is not an object');
  if (h.typ !== undefined && h.typ !== '' && h.typ !== MediaTypeEncrypted) throw problem(CodeMalformed, `JWE typ ${JSON.stringify(h.typ)}`);
  let senderPub = null;
  let apu = new Uint8Array(0);
  let skid = '';
  if (h.alg === AlgAnon) {
    if (h.skid) throw problem(CodeMalformed, 'anoncrypt JWE carries skid');
  } else if (h.alg === AlgAuth) {
    if (h.enc !== EncA256CBCHS512) throw problem(CodeCrypto, `authcrypt with enc ${JSON.stringify(h.enc)} (only ${EncA256CBCHS512} is allowed)`);
    if (!str(h.apu) || h.apu === '') throw problem(CodeMalformed, 'authcrypt JWE has no apu');
    apu = decodeB64('apu', h.apu);
    let apuText;
    try {
      apuText = utf8Decode(apu);
    } catch {
      throw problem(CodeMalformed, 'apu is not UTF-8');
    }
    skid = str(h.skid) && h.skid !== '' ? h.skid : apuText; // the spec lets apu stand in for a missing skid
    if (apuText !== skid) throw problem(CodeSenderMismatch, `apu ${JSON.stringify(apuText)} does not name skid ${JSON.stringify(skid)}`);
    let ks;
    try {
      ks = resolver.resolve(didOf(skid));
    } catch (e) {
      throw e instanceof Problem ? e : problem(CodeUnresolvable, e.message);
    }
    const k = ks.keyAgreement.find((x) => x.id === skid);
    if (!k) throw problem(CodeUnresolvable, `sender key ${skid} is not a keyAgreement key of ${ks.did}`);
    if (k.crv && k.crv !== 'X25519') throw problem(CodeCrypto, `sender key ${skid} is not X25519`);
    senderPub = k.key;
  } else {
    throw problem(CodeCrypto, `unsupported alg ${JSON.stringify(h.alg)}`);
  }
  if (cekSizes[h.enc] === undefined) throw problem(CodeCrypto, `unsupported enc ${JSON.stringify(h.enc)}`);
  if (!h.epk) throw problem(CodeMalformed, 'JWE has no epk');
  let epk;
  try {
    epk = x25519FromJWK(h.epk);
  } catch (e) {
    throw problem(CodeMalformed, `epk: ${e.message}`);
  }
  const kids = j.recipients.map((r) => (r && r.header && str(r.header.kid) ? r.header.kid : ''));
  const apv = decodeB64('apv', str(h.apv) ? h.apv : '');
  if (!equalBytes(apv, apvFor(kids))) throw problem(CodeCrypto, 'apv does not match the recipient kids');
  const iv = decodeB64('iv', j.iv);
  const ct = decodeB64('ciphertext', j.ciphertext);
  const tag = decodeB64('tag', j.tag);
  for (const r of j.recipients) {
    const kid = r && r.header ? r.header.kid : undefined;
    const mine = secrets ? secrets.agreement.find((a) => a.id === kid) : undefined;
    if (!mine) continue;
    const wk = decodeB64('encrypted_key', str(r.encrypted_key) ? r.encrypted_key : '');
    let cek;
    try {
      const z = recipientZ(mine.secret, epk, senderPub);
      const kek = deriveKEK(h.alg, z, apu, apv, h.alg === AlgAuth ? tag : null);
      cek = unwrapKey(kek, wk);
    } catch (e) {
      throw problem(CodeCrypto, `unwrap key for ${kid}: ${e.message}`);
    }
    let pt;
    try {
      pt = openContent(h.enc, cek, iv, utf8Encode(j.protected), ct, tag);
    } catch (e) {
      throw problem(CodeCrypto, `decrypt: ${e.message}`);
    }
    return { payload: pt, alg: h.alg, enc: h.enc, senderKID: skid, recipientKID: kid };
  }
  throw problem(CodeNotRecipient, `none of the ${j.recipients.length} recipient keys is ours`);
}
