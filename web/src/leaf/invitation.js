// Reading the invitations a home gives a leaf (spec/leaf.md, spec/invite.md,
// spec/didcomm.md "Out-of-band"), as leaf.parseInvitation does in Go: the
// join code of `fleetmesh invite` (fmjoin1…, or its fleetmesh: link),
// signed by the node and carrying its DIDComm endpoint; the out-of-band
// URL of `fleetmesh didcomm invite` (?_oob=), or that invitation's JSON,
// which is also what a node's `GET /didcomm` answers (pairing with the node
// that served the app).
import { ed25519 } from '@noble/curves/ed25519.js';
import { bech32 } from '@scure/base';
import { concat, unb64u, utf8Decode, utf8Encode } from '../didcomm/bytes.js';
import { didFromPublicKey, publicKeyFromDID } from '../didcomm/didkey.js';

export const JoinHRP = 'fmjoin';
export const JoinScheme = 'fleetmesh:';
const maxCodeBytes = 2048;
const maxAddrs = 16;
const maxLifetimeSecs = 30 * 24 * 3600;
const maxOOBBytes = 8 << 10;
const TypeInvitation = 'https://didcomm.org/out-of-band/2.0/invitation';

/** Whether s looks like a join code or its link. */
export function isJoinCode(s) {
  const t = s.trim().toLowerCase();
  return (t.startsWith(JoinScheme) ? t.slice(JoinScheme.length) : t).startsWith(JoinHRP + '1');
}

function checkEndpoint(e) {
  let u;
  try {
    u = new URL(e);
  } catch {
    return false;
  }
  return (u.protocol === 'http:' || u.protocol === 'https:') && u.host !== '';
}

/**
 * Decodes and verifies a join code at now (Unix seconds) by the rules of
 * spec/invite.md "Verification". The addresses are checked for their TLV
 * shape only (the leaf does not dial them; the signature covers them).
 * @returns {{did: string, endpoint: string, expires: number}}
 */
export function parseJoinCode(s, now = Math.floor(Date.now() / 1000)) {
  const bad = (m) => new Error(`invite: ${m}: malformed join code`);
  if (s.length > maxCodeBytes) throw bad(`code is ${s.length} bytes, at most ${maxCodeBytes}`);
  s = s.trim();
  if (s.slice(0, JoinScheme.length).toLowerCase() === JoinScheme) s = s.slice(JoinScheme.length);
  let dec;
  try {
    dec = bech32.decode(s, false);
  } catch (e) {
    throw bad(`not bech32 (a typo?): ${e.message}`);
  }
  if (dec.prefix !== JoinHRP) throw bad(`prefix ${JSON.stringify(dec.prefix)} is not ${JSON.stringify(JoinHRP)}`);
  let raw;
  try {
    raw = bech32.fromWords(dec.words);
  } catch (e) {
    throw bad(e.message);
  }
  let key = null;
  let addrs = 0;
  let endpoint = '';
  let exp = 0;
  let sigAt = -1;
  let sig = null;
  for (let i = 0; i < raw.length; ) {
    if (sigAt >= 0) throw bad('data after the signature');
    if (raw.length - i < 2) throw bad(`truncated TLV at byte ${i}`);
    const typ = raw[i];
    const n = raw[i + 1];
    if (raw.length - i - 2 < n) throw bad(`TLV of type ${typ} runs past the end`);
    const v = raw.slice(i + 2, i + 2 + n);
    if ((i === 0) !== (typ === 0)) throw bad('the key must come first, exactly once');
    switch (typ) {
      case 0:
        if (n !== 32) throw bad(`key of ${n} bytes`);
        key = v;
        break;
      case 1:
        if (exp !== 0 || endpoint !== '') throw bad('address after the endpoint or the expiry');
        if (addrs === maxAddrs) throw bad(`more than ${maxAddrs} addresses`);
        if (n === 0) throw bad(`address ${addrs} is empty`);
        addrs++;
        break;
      case 4: {
        if (exp !== 0 || endpoint !== '' || addrs === 0) throw bad('the endpoint must come once, after the addresses and before the expiry');
        let e;
        try {
          e = utf8Decode(v);
        } catch {
          throw bad('endpoint is not UTF-8');
        }
        if (!checkEndpoint(e)) throw bad(`endpoint ${JSON.stringify(e)} is not an http(s) URL`);
        endpoint = e;
        break;
      }
      case 2:
        if (n !== 4 || exp !== 0) throw bad('expiry must be 4 bytes, once');
        exp = new DataView(v.buffer, v.byteOffset, 4).getUint32(0);
        break;
      case 3:
        if (n !== 64) throw bad(`signature of ${n} bytes`);
        sigAt = i;
        sig = v;
        break;
      default:
        throw bad(`unknown TLV type ${typ}`);
    }
    i += 2 + n;
  }
  if (addrs === 0 || exp === 0 || sigAt < 0) throw bad('needs a key, an address, an expiry and a signature');
  let ok = false;
  try {
    ok = ed25519.verify(sig, concat(utf8Encode('fleetmesh-invite-v1\u0000'), raw.slice(0, sigAt)), key, { zip215: false });
  } catch {
    ok = false;
  }
  if (!ok) throw new Error('invite: join code signature does not verify (tampered or signed by another key)');
  const did = didFromPublicKey(key);
  if (now >= exp) throw new Error(`invite: ${did}: expired at ${new Date(exp * 1000).toISOString()}: join code expired`);
  if (exp - now > maxLifetimeSecs) throw new Error(`invite: expires ${new Date(exp * 1000).toISOString()}, more than 30 days from now: join code expired`);
  return { did, endpoint, expires: exp };
}

/**
 * Reads an out-of-band invitation URL (?_oob=) or its JSON.
 * @returns {{message: object, body: object}}
 */
export function parseOOB(s) {
  if (s.length > maxOOBBytes) throw new Error(`oob: invitation is ${s.length} bytes (at most ${maxOOBBytes})`);
  s = s.trim();
  let json = s;
  if (!s.startsWith('{')) {
    let u;
    try {
      u = new URL(s);
    } catch (e) {
      throw new Error(`oob: ${e.message}`);
    }
    const enc = u.searchParams.get('_oob');
    if (!enc) throw new Error('oob: URL has no _oob parameter');
    try {
      json = utf8Decode(unb64u(enc.replace(/=+$/, '')));
    } catch (e) {
      throw new Error(`oob: _oob is not base64url: ${e.message}`);
    }
  }
  let m;
  try {
    m = JSON.parse(json);
  } catch (e) {
    throw new Error(`oob: ${e.message}`);
  }
  if (!m || m.type !== TypeInvitation || !m.id || !m.from) throw new Error(`oob: not an invitation with id and from (type ${JSON.stringify(m && m.type)})`);
  if (!m.body || typeof m.body !== 'object') throw new Error('oob: body is not an object');
  return { message: m, body: m.body };
}

/**
 * A home's DID and DIDComm endpoint from any invitation a node prints.
 * @param {string} invitation
 * @returns {{did: string, endpoint: string}}
 */
export function parseInvitation(invitation, now) {
  if (isJoinCode(invitation)) {
    const inv = parseJoinCode(invitation, now);
    if (!inv.endpoint) {
      throw new Error(`leaf: pair: the join code of ${inv.did} carries no DIDComm endpoint (its node listened on no address another machine can dial): make one with \`fleetmesh invite --endpoint http://HOST:PORT/didcomm\``);
    }
    return { did: inv.did, endpoint: inv.endpoint };
  }
  let inv;
  try {
    inv = parseOOB(invitation);
  } catch (e) {
    throw new Error(`leaf: pair: ${e.message} (pair with the join code \`fleetmesh invite\` prints, or a \`fleetmesh didcomm invite\` URL)`);
  }
  try {
    publicKeyFromDID(inv.message.from);
  } catch (e) {
    throw new Error(`leaf: pair: invitation from ${JSON.stringify(inv.message.from)}: ${e.message}`);
  }
  for (const s of Array.isArray(inv.body.services) ? inv.body.services : []) {
    const u = s && s.serviceEndpoint && s.serviceEndpoint.uri;
    if (typeof u === 'string' && (u.startsWith('http://') || u.startsWith('https://'))) return { did: inv.message.from, endpoint: u };
  }
  throw new Error(`leaf: pair: the invitation from ${inv.message.from} has no http(s) DIDComm endpoint in its services (pair with the join code \`fleetmesh invite\` prints instead)`);
}
