// The person's Nostr key for posting: a NIP-07 signer (window.nostr) where
// the browser has one, else a local key made here and kept in IndexedDB
// on this device only. The secret never leaves this module except to sign,
// and guard() refuses any outgoing text that carries it (the boundary,
// spec/web.md): the home node never sees key material from the app.
import { finalizeEvent, generateSecretKey, getPublicKey } from 'nostr-tools/pure';
import { nsecEncode } from 'nostr-tools/nip19';
import { bytesToHex } from '@noble/hashes/utils.js';
import { getMeta, setMeta } from './store.js';

let signer;

// nostrSigner returns { pubkey, kind: 'nip07' | 'local', sign(template) }.
export async function nostrSigner() {
  if (signer) return signer;
  if (globalThis.nostr?.getPublicKey) {
    const pubkey = await globalThis.nostr.getPublicKey();
    signer = { pubkey, kind: 'nip07', sign: (t) => globalThis.nostr.signEvent(t), secrets: [] };
    return signer;
  }
  let sk = await getMeta('nostr_sk');
  if (!sk) {
    sk = generateSecretKey();
    await setMeta('nostr_sk', sk);
  }
  const hex = bytesToHex(sk);
  signer = {
    pubkey: getPublicKey(sk),
    kind: 'local',
    sign: async (t) => finalizeEvent(t, sk),
    secrets: [hex, nsecEncode(sk)],
  };
  return signer;
}

// normalize drops everything but letters and digits, so a key split by
// spaces, dashes or zero-width characters is still found.
const normalize = (s) => s.toLowerCase().replace(/[^a-z0-9]/g, '');

// guard throws when text carries a secret the app holds, or any nsec1 /
// ncryptsec1 string (someone's key): such a note is never sent.
export function guard(text) {
  const flat = normalize(text);
  const secrets = (signer?.secrets || []).map(normalize);
  if (secrets.some((s) => s && flat.includes(s)) || /n(crypt)?sec1[02-9ac-hj-np-z]{50,}/.test(flat)) {
    throw new Error('refused: this note carries a secret key; keys never leave this device');
  }
}
