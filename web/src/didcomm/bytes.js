// Byte and text encodings the DIDComm envelopes use: UTF-8, base64url
// without padding (JOSE, RFC 7515 §2), standard base64 with padding (how
// Go's encoding/json writes a []byte, which the receipt exchange's bodies
// carry), and small helpers on Uint8Array.
import { base64, base64urlnopad, utf8 } from '@scure/base';

/** @param {string} s @returns {Uint8Array} */
export const utf8Encode = (s) => utf8.decode(s);
/** @param {Uint8Array} b @returns {string} */
export const utf8Decode = (b) => {
  // fatal: invalid UTF-8 is refused, as Go's json refuses it in a string.
  return new TextDecoder('utf-8', { fatal: true }).decode(b);
};

/** base64url without padding. @param {Uint8Array} b */
export const b64u = (b) => base64urlnopad.encode(b);
/** Decodes base64url without padding (padding is refused, as Go's RawURLEncoding does). @param {string} s */
export function unb64u(s) {
  if (typeof s !== 'string') throw new Error('not a base64url string');
  return base64urlnopad.decode(s);
}
/** Standard base64 with padding (Go's encoding/json for []byte). @param {Uint8Array} b */
export const b64std = (b) => base64.encode(b);
/** @param {string} s */
export function unb64std(s) {
  if (typeof s !== 'string') throw new Error('not a base64 string');
  return base64.decode(s);
}

/** @param {...Uint8Array} parts */
export function concat(...parts) {
  let n = 0;
  for (const p of parts) n += p.length;
  const out = new Uint8Array(n);
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.length;
  }
  return out;
}

/** Constant-time equality of two byte strings of public length. */
export function equalBytes(a, b) {
  if (a.length !== b.length) return false;
  let d = 0;
  for (let i = 0; i < a.length; i++) d |= a[i] ^ b[i];
  return d === 0;
}

/** n random bytes from the platform's CSPRNG (WebCrypto). */
export function randomBytes(n) {
  const b = new Uint8Array(n);
  globalThis.crypto.getRandomValues(b);
  return b;
}

/** 4-byte big-endian. */
export function u32be(n) {
  const b = new Uint8Array(4);
  new DataView(b.buffer).setUint32(0, n);
  return b;
}

/** 4-byte big-endian length, then b (JOSE Concat KDF's Datalen ‖ Data). */
export const lengthPrefixed = (b) => concat(u32be(b.length), b);

/** Lower-case hex. */
export const hex = (b) => Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
