// Packing a plaintext into one of the four envelopes, as the Go Packer
// does (didcomm/pack.go): plaintext, signed, anoncrypt, authcrypt, with
// optional signing inside the encryption and sender protection
// (anoncrypt around authcrypt).
import { utf8Encode } from './bytes.js';
import { didOf } from './didkey.js';
import { encrypt, EncA256CBCHS512 } from './jwe.js';
import { sign } from './jws.js';
import { encodePlaintext, MediaTypePlain, validate } from './message.js';

export const ModePlaintext = 'plaintext';
export const ModeSigned = 'signed';
export const ModeAnoncrypt = 'anoncrypt';
export const ModeAuthcrypt = 'authcrypt';

/** Packs messages from one DID. */
export class Packer {
  /**
   * @param {import('./index.js').Secrets|null} secrets the sender's keys; null packs only plaintext and anoncrypt
   * @param {import('./index.js').Resolver} resolver
   */
  constructor(secrets, resolver) {
    this.secrets = secrets;
    this.resolver = resolver;
  }

  /**
   * Serializes m in the chosen envelope, encrypting to every DID in m.to.
   * For authcrypt and signed modes m.from is set to the packer's DID if
   * empty, and must equal it otherwise.
   * @param {import('./index.js').Message} m
   * @param {import('./index.js').PackOptions} opt
   * @returns {string} the packed message (JSON)
   */
  pack(m, opt) {
    const msg = { ...m };
    if (!msg.typ) msg.typ = MediaTypePlain;
    if (msg.body === undefined) msg.body = {};
    const needsSender = opt.mode === ModeAuthcrypt || opt.mode === ModeSigned || opt.sign;
    if (needsSender) {
      if (!this.secrets) throw new Error(`didcomm: ${opt.mode} needs the sender's keys`);
      if (!msg.from) msg.from = this.secrets.did;
      if (msg.from !== this.secrets.did) throw new Error(`didcomm: from ${msg.from} is not the packer's DID ${this.secrets.did}`);
    }
    validate(msg);
    const plain = encodePlaintext(msg);
    switch (opt.mode) {
      case ModePlaintext:
        return plain;
      case ModeSigned:
        return this.#sign(plain);
      case ModeAnoncrypt:
      case ModeAuthcrypt:
        break;
      default:
        throw new Error(`didcomm: unknown mode ${JSON.stringify(opt.mode)}`);
    }
    const payload = opt.sign ? this.#sign(plain) : plain;
    if (!msg.to || msg.to.length === 0) throw new Error('didcomm: message has no `to`');
    const keys = this.#recipientKeys(msg.to);
    if (opt.mode === ModeAnoncrypt) return encrypt(utf8Encode(payload), keys, null, opt.enc || EncA256CBCHS512);
    const sender = this.secrets.agreement[0];
    if (!sender) throw new Error('didcomm: authcrypt: sender has no key-agreement key');
    const inner = encrypt(utf8Encode(payload), keys, sender, EncA256CBCHS512);
    if (!opt.protectSender) return inner;
    // Anoncrypt the authcrypt JWE to the same recipients (spec
    // "Protecting the sender identity").
    return encrypt(utf8Encode(inner), keys, null, EncA256CBCHS512);
  }

  #sign(plain) {
    if (!this.secrets || !this.secrets.signing) throw new Error('didcomm: signed: no signing key');
    return sign(utf8Encode(plain), this.secrets.signing);
  }

  // Every DID in to, resolved to its X25519 key-agreement keys.
  #recipientKeys(to) {
    const out = [];
    for (const did of to) {
      const ks = this.resolver.resolve(didOf(did));
      const keys = ks.keyAgreement.filter((k) => !k.crv || k.crv === 'X25519');
      if (keys.length === 0) throw new Error(`didcomm: ${did} has no X25519 key-agreement key`);
      out.push(...keys);
    }
    return out;
  }
}
