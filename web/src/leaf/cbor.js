// The canonical CBOR of fleetmesh's signed records (spec/receipts.md
// "Canonical form"; internal/canon in Go): RFC 8949 §4.2.1 core
// deterministic encoding, for the subset records use: unsigned integers,
// byte and text strings, maps with text keys, false, true and null.
//
// Hand-written because a receipt must encode to exactly the bytes the Go
// side signs, and the npm CBOR codecs either do not sort keys
// deterministically by default or bring far more than a page needs; the
// subset is small and the decoder refuses everything outside it (floats,
// tags, indefinite lengths, negative integers, duplicate keys, invalid
// UTF-8, non-shortest lengths), then re-encodes and compares, as the Go
// decoder does.
import { concat, utf8Decode, utf8Encode } from '../didcomm/bytes.js';

/** Records are at most 64 KiB (canon.MaxBytes). */
export const MaxBytes = 64 << 10;

function head(major, n) {
  if (!Number.isSafeInteger(n) || n < 0) throw new Error(`cbor: ${n} is not an unsigned integer below 2^53`);
  const m = major << 5;
  if (n < 24) return Uint8Array.of(m | n);
  if (n < 0x100) return Uint8Array.of(m | 24, n);
  if (n < 0x10000) return Uint8Array.of(m | 25, n >> 8, n & 0xff);
  if (n < 0x100000000) return Uint8Array.of(m | 26, n >>> 24, (n >>> 16) & 0xff, (n >>> 8) & 0xff, n & 0xff);
  const b = new Uint8Array(9);
  b[0] = m | 27;
  new DataView(b.buffer).setBigUint64(1, BigInt(n));
  return b;
}

function compareBytes(a, b) {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return a[i] - b[i];
  return a.length - b.length;
}

/**
 * Encodes a value: number (unsigned integer), Uint8Array, string, boolean,
 * null, or a plain object (a map with text keys, sorted bytewise by their
 * encoding; undefined members are left out).
 * @returns {Uint8Array}
 */
export function encode(v) {
  if (v === null) return Uint8Array.of(0xf6);
  if (v === false) return Uint8Array.of(0xf4);
  if (v === true) return Uint8Array.of(0xf5);
  if (typeof v === 'number') return head(0, v);
  if (v instanceof Uint8Array) return concat(head(2, v.length), v);
  if (typeof v === 'string') {
    const b = utf8Encode(v);
    return concat(head(3, b.length), b);
  }
  if (typeof v === 'object' && !Array.isArray(v)) {
    const pairs = Object.entries(v)
      .filter(([, x]) => x !== undefined)
      .map(([k, x]) => [encode(k), encode(x)]);
    pairs.sort((p, q) => compareBytes(p[0], q[0]));
    return concat(head(5, pairs.length), ...pairs.flat());
  }
  throw new Error(`cbor: cannot encode ${typeof v}`);
}

/**
 * Decodes a record strictly (see the file comment) and checks that the
 * input is the canonical encoding of what it decodes to.
 * @param {Uint8Array} data
 */
export function decode(data) {
  if (data.length > MaxBytes) throw new Error(`cbor: ${data.length} bytes exceeds ${MaxBytes}`);
  let pos = 0;
  const need = (n) => {
    if (pos + n > data.length) throw new Error('cbor: unexpected end of input');
  };
  const arg = (info) => {
    if (info < 24) return info;
    const size = { 24: 1, 25: 2, 26: 4, 27: 8 }[info];
    if (size === undefined) throw new Error('cbor: indefinite lengths and reserved values are refused');
    need(size);
    let n = 0n;
    for (let i = 0; i < size; i++) n = (n << 8n) | BigInt(data[pos++]);
    if (n > BigInt(Number.MAX_SAFE_INTEGER)) throw new Error('cbor: integer above 2^53');
    return Number(n);
  };
  const item = (depth) => {
    if (depth > 8) throw new Error('cbor: nested too deeply');
    need(1);
    const b = data[pos++];
    const major = b >> 5;
    const info = b & 0x1f;
    switch (major) {
      case 0:
        return arg(info);
      case 2:
      case 3: {
        const n = arg(info);
        need(n);
        const bytes = data.slice(pos, pos + n);
        pos += n;
        return major === 2 ? bytes : utf8Decode(bytes);
      }
      case 5: {
        const n = arg(info);
        if (n > 64) throw new Error('cbor: map of more than 64 pairs');
        const out = {};
        for (let i = 0; i < n; i++) {
          const k = item(depth + 1);
          if (typeof k !== 'string') throw new Error('cbor: map key is not text');
          if (Object.prototype.hasOwnProperty.call(out, k)) throw new Error(`cbor: duplicate key ${JSON.stringify(k)}`);
          out[k] = item(depth + 1);
        }
        return out;
      }
      case 7:
        if (info === 20) return false;
        if (info === 21) return true;
        if (info === 22) return null;
        throw new Error('cbor: floats and simple values other than false, true and null are refused');
      default:
        throw new Error(`cbor: major type ${major} is refused`);
    }
  };
  const v = item(0);
  if (pos !== data.length) throw new Error('cbor: data after the record');
  if (compareBytes(encode(v), data) !== 0) throw new Error('cbor: not in canonical form (deterministic CBOR, RFC 8949 §4.2.1)');
  return v;
}
