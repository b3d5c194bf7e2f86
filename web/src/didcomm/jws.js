// DIDComm signed messages: JWS General JSON serialization (RFC 7515 §7.2.1)
// with EdDSA (Ed25519, RFC 8037), the signer's kid in the per-signature
// header and in the protected header, as the Go package writes them
// (didcomm/jws.go) and didcomm-rust reads them.
import { ed25519 } from '@noble/curves/ed25519.js';
import { b64u, unb64u, utf8Decode, utf8Encode } from './bytes.js';
import { MediaTypeSigned } from './message.js';
import { didOf } from './didkey.js';
import { CodeCrypto, CodeMalformed, CodeUnresolvable, Problem, problem } from './problem.js';

/**
 * Signs payload with the signing secret (`{id, seed}`); returns the JWS as JSON.
 * @param {Uint8Array} payload
 * @param {{id: string, seed: Uint8Array}} signer
 */
export function sign(payload, signer) {
  const protectedB64 = b64u(utf8Encode(JSON.stringify({ typ: MediaTypeSigned, alg: 'EdDSA', kid: signer.id })));
  const payloadB64 = b64u(payload);
  const sig = ed25519.sign(utf8Encode(protectedB64 + '.' + payloadB64), signer.seed);
  return JSON.stringify({ payload: payloadB64, signatures: [{ protected: protectedB64, signature: b64u(sig), header: { kid: signer.id } }] });
}

/**
 * Verifies every signature of a parsed JWS (general or flattened JSON)
 * with the signers' authentication keys. Throws a Problem.
 * @returns {{payload: Uint8Array, signers: string[]}}
 */
export function verify(j, resolver, maxSignatures) {
  let sigs = j.signatures;
  if (sigs === undefined && typeof j.signature === 'string') sigs = [{ protected: j.protected, signature: j.signature, header: j.header }];
  if (!Array.isArray(sigs) || sigs.length === 0 || sigs.length > maxSignatures) {
    throw problem(CodeMalformed, `JWS has ${Array.isArray(sigs) ? sigs.length : 0} signatures (1..${maxSignatures} allowed)`);
  }
  if (typeof j.payload !== 'string') throw problem(CodeMalformed, 'JWS has no payload');
  let payload;
  try {
    payload = unb64u(j.payload);
  } catch (e) {
    throw problem(CodeMalformed, `JWS payload: ${e.message}`);
  }
  const signers = [];
  sigs.forEach((s, i) => {
    if (!s || typeof s.protected !== 'string' || typeof s.signature !== 'string') throw problem(CodeMalformed, `signature ${i} lacks protected or signature`);
    let ph;
    let sig;
    try {
      ph = JSON.parse(utf8Decode(unb64u(s.protected)));
      sig = unb64u(s.signature);
    } catch (e) {
      throw problem(CodeMalformed, `JWS signature ${i}: ${e.message}`);
    }
    if (!ph || typeof ph !== 'object') throw problem(CodeMalformed, `JWS signature ${i}: protected header is not an object`);
    if (ph.alg !== 'EdDSA') throw problem(CodeMalformed, `JWS: unsupported alg ${JSON.stringify(ph.alg)}`);
    if (ph.crit !== undefined) throw problem(CodeMalformed, 'JWS: crit headers are not understood');
    if (ph.typ !== undefined && ph.typ !== MediaTypeSigned) throw problem(CodeMalformed, `JWS typ ${JSON.stringify(ph.typ)}`);
    const kid = (s.header && typeof s.header.kid === 'string' && s.header.kid) || (typeof ph.kid === 'string' && ph.kid) || '';
    if (kid === '') throw problem(CodeMalformed, `signature ${i} has no kid`);
    if (typeof ph.kid === 'string' && s.header && typeof s.header.kid === 'string' && ph.kid !== s.header.kid) {
      throw problem(CodeMalformed, `signature ${i}: protected and unprotected kid differ`);
    }
    let ks;
    try {
      ks = resolver.resolve(didOf(kid));
    } catch (e) {
      throw e instanceof Problem ? e : problem(CodeUnresolvable, e.message);
    }
    const k = ks.authentication.find((a) => a.id === kid);
    if (!k) throw problem(CodeUnresolvable, `signer ${kid} is not an authentication key of ${ks.did}`);
    let ok = false;
    try {
      ok = sig.length === 64 && ed25519.verify(sig, utf8Encode(s.protected + '.' + j.payload), k.key, { zip215: false });
    } catch {
      ok = false;
    }
    if (!ok) throw problem(CodeCrypto, `signature by ${kid} does not verify`);
    signers.push(kid);
  });
  return { payload, signers };
}
