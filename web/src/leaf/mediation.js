// The leaf's side of coordinate-mediation 3.0, message pickup 3.0 and
// routing 2.0 over the HTTP binding (spec/leaf.md "The wake sequence",
// spec/didcomm.md), as didcomm/mediation.Client and didcomm/transport do
// in Go: every request authcrypted to the home with return_route "all",
// its answer read from the same HTTP response.
import { MediaTypeEncrypted, MediaTypePlain, MediaTypeSigned, newID, newMessage, Problem } from '../didcomm/index.js';
import { CodeMalformed, CodeSenderMismatch } from '../didcomm/problem.js';

export const PIURIMediation = 'https://didcomm.org/coordinate-mediation/3.0';
export const PIURIPickup = 'https://didcomm.org/messagepickup/3.0';
export const TypeMediateRequest = PIURIMediation + '/mediate-request';
export const TypeMediateGrant = PIURIMediation + '/mediate-grant';
export const TypeMediateDeny = PIURIMediation + '/mediate-deny';
export const TypeRecipientUpdate = PIURIMediation + '/recipient-update';
export const TypeRecipientUpdateResponse = PIURIMediation + '/recipient-update-response';
export const TypeStatusRequest = PIURIPickup + '/status-request';
export const TypeStatus = PIURIPickup + '/status';
export const TypeDeliveryRequest = PIURIPickup + '/delivery-request';
export const TypeDelivery = PIURIPickup + '/delivery';
export const TypeMessagesReceived = PIURIPickup + '/messages-received';
export const TypeForward = 'https://didcomm.org/routing/2.0/forward';
export const TypeProblemReport = 'https://didcomm.org/report-problem/2.0/problem-report';

/** The largest answer read (transport.MaxFrameBytes). */
export const MaxAnswerBytes = 1 << 20;

/**
 * The request never got an answer (refused, reset, timed out): worth
 * another try on a new request, unlike a refusal the home answered.
 */
export class TransportError extends Error {
  constructor(message) {
    super(message);
    this.name = 'TransportError';
  }
}

/** The media type of a packed message from its shape (transport.MediaType). */
export function mediaTypeOf(packed) {
  if (packed.includes('"ciphertext"')) return MediaTypeEncrypted;
  if (packed.includes('"signatures"') || packed.includes('"payload"')) return MediaTypeSigned;
  return MediaTypePlain;
}

/**
 * POSTs a packed message to a DIDComm HTTP endpoint and returns the
 * answer body (null on 202 or an empty body). An error status with a body
 * (a problem report) returns the body for the caller to read its code, as
 * the Go leaf does; without one it throws.
 * @param {typeof fetch} fetchFn
 * @param {string} endpoint
 * @param {string} packed
 * @param {AbortSignal} signal
 * @returns {Promise<string|null>}
 */
export async function postDIDComm(fetchFn, endpoint, packed, signal) {
  let resp;
  try {
    resp = await fetchFn(endpoint, { method: 'POST', headers: { 'Content-Type': mediaTypeOf(packed) }, body: packed, signal });
  } catch (e) {
    // Node's fetch says only "fetch failed"; its cause says why.
    const why = e.cause ? `: ${e.cause.code || e.cause.message}` : '';
    throw new TransportError(`transport: POST ${endpoint}: ${e.message}${why}`);
  }
  let text;
  try {
    text = await resp.text();
  } catch (e) {
    throw new TransportError(`transport: reading the answer from ${endpoint}: ${e.message}`);
  }
  if (text.length > MaxAnswerBytes) throw new Error(`transport: answer larger than ${MaxAnswerBytes} bytes`);
  if (resp.status >= 400) {
    if (text.trim() !== '') return text;
    throw new Error(`transport: HTTP error status ${resp.status} from ${endpoint}`);
  }
  if (resp.status === 202 || text === '') return null;
  return text;
}

/** The problem report's code and comment, or null when m is none. */
export function problemOf(m) {
  if (m.type !== TypeProblemReport) return null;
  const b = m.body || {};
  return { code: typeof b.code === 'string' && b.code ? b.code : CodeMalformed, comment: typeof b.comment === 'string' ? b.comment : '' };
}

/** The recipient side of mediation and pickup with one home. */
export class MediationClient {
  /**
   * @param {{packer: import('../didcomm/index.js').Packer, unpacker: import('../didcomm/index.js').Unpacker,
   *   mediator: string, exchange: (packed: string) => Promise<string|null>}} o
   */
  constructor(o) {
    Object.assign(this, o);
  }

  /**
   * Sends an authcrypted request with return_route "all" and returns the
   * unpacked answer; a problem report comes back as a thrown Problem with
   * the mediator's code.
   */
  async request(type, body) {
    const m = { ...newMessage(type, body), to: [this.mediator], return_route: 'all' };
    const raw = await this.exchange(this.packer.pack(m, { mode: 'authcrypt' }));
    if (raw === null) throw new Error(`mediator: no answer to ${type}`);
    const got = this.unpacker.unpack(raw);
    const r = got.message;
    const p = problemOf(r);
    if (p) throw new Problem(p.code, `mediator refused ${type}: ${p.comment}`);
    if (!got.authenticated || r.from !== this.mediator) throw new Problem(CodeSenderMismatch, `answer to ${type} is not from the mediator ${this.mediator}`);
    if (r.thid !== m.id) throw new Problem(CodeMalformed, `answer to ${type} is on thread ${JSON.stringify(r.thid || '')}`);
    return r;
  }

  /** Asks for mediation and registers recipient; throws when denied. */
  async mediate(recipient) {
    const g = await this.request(TypeMediateRequest, {});
    if (g.type === TypeMediateDeny) throw new Error(`mediator ${this.mediator}: mediation denied`);
    if (g.type !== TypeMediateGrant || !Array.isArray(g.body.routing_did) || g.body.routing_did.length === 0) {
      throw new Error(`mediator: unexpected answer ${g.type} to mediate-request`);
    }
    const u = await this.request(TypeRecipientUpdate, { updates: [{ recipient_did: recipient, action: 'add' }] });
    const res = u.type === TypeRecipientUpdateResponse && Array.isArray(u.body.updated) ? u.body.updated : [];
    if (res.length !== 1 || (res[0].result !== 'success' && res[0].result !== 'no_change')) {
      throw new Error(`mediator did not register ${recipient}: ${JSON.stringify(u.body)}`);
    }
    return g.body.routing_did;
  }

  /**
   * Fetches queued messages in deliveries of at most limit and hands each
   * whole delivery ([{id, packed}]) to handle, which must make it durable
   * before it resolves; only then is the delivery acknowledged. Stops when
   * the mediator answers status (nothing queued).
   */
  async collect(limit, handle) {
    let n = 0;
    for (;;) {
      const r = await this.request(TypeDeliveryRequest, { limit });
      if (r.type === TypeStatus) return n;
      if (r.type !== TypeDelivery || !Array.isArray(r.attachments) || r.attachments.length === 0) throw new Error(`mediator: unexpected answer ${r.type}`);
      const batch = r.attachments.map((a) => {
        if (!a || typeof a.id !== 'string' || a.id === '' || !a.data || a.data.json === undefined) throw new Error('mediator: delivery attachment without id or JSON data');
        return { id: a.id, packed: JSON.stringify(a.data.json) };
      });
      await handle(batch);
      n += batch.length;
      await this.request(TypeMessagesReceived, { message_id_list: batch.map((b) => b.id) });
    }
  }
}

/**
 * Wraps a packed message for `next` in a routing 2.0 forward to the
 * mediator, anoncrypted to it (routing.Route).
 */
export function route(packer, inner, next, mediator) {
  const fwd = {
    ...newMessage(TypeForward, { next }),
    to: [mediator],
    attachments: [{ id: newID(), media_type: MediaTypeEncrypted, data: { json: JSON.parse(inner) } }],
  };
  return packer.pack(fwd, { mode: 'anoncrypt' });
}
