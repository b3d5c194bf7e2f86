// DIDComm plaintext messages (spec "Plaintext Message Structure"), with the
// checks the Go package makes of every plaintext (didcomm/message.go).
import { CodeMalformed, problem } from './problem.js';
import { hex, randomBytes } from './bytes.js';

export const MediaTypePlain = 'application/didcomm-plain+json';
export const MediaTypeSigned = 'application/didcomm-signed+json';
export const MediaTypeEncrypted = 'application/didcomm-encrypted+json';

/** A random message id: 128 bits, hex, as the Go package makes them. */
export const newID = () => hex(randomBytes(16));

/**
 * A message of type `type` with a fresh id, created now.
 * @param {string} type
 * @param {object} [body]
 * @returns {import('./index.js').Message}
 */
export function newMessage(type, body = {}) {
  return { id: newID(), typ: MediaTypePlain, type, created_time: Math.floor(Date.now() / 1000), body };
}

const isObject = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);

/**
 * Checks the headers every plaintext must have; throws a Problem.
 * @param {any} m
 */
export function validate(m) {
  if (!isObject(m)) throw problem(CodeMalformed, 'plaintext is not a JSON object');
  if (typeof m.id !== 'string' || m.id === '') throw problem(CodeMalformed, 'message has no id');
  if (typeof m.type !== 'string' || m.type === '') throw problem(CodeMalformed, `message ${m.id} has no type`);
  if (m.typ !== undefined && m.typ !== '' && m.typ !== MediaTypePlain) throw problem(CodeMalformed, `message ${m.id}: typ ${JSON.stringify(m.typ)}`);
  if (!isObject(m.body)) throw problem(CodeMalformed, `message ${m.id}: body must be a JSON object`);
  if (m.from !== undefined && typeof m.from !== 'string') throw problem(CodeMalformed, `message ${m.id}: from must be a string`);
  if (m.to !== undefined && !(Array.isArray(m.to) && m.to.every((x) => typeof x === 'string'))) {
    throw problem(CodeMalformed, `message ${m.id}: to must be an array of strings`);
  }
  for (const k of ['created_time', 'expires_time']) {
    if (m[k] !== undefined && !Number.isInteger(m[k])) throw problem(CodeMalformed, `message ${m.id}: ${k} must be an integer`);
  }
  if (m.attachments !== undefined && !Array.isArray(m.attachments)) throw problem(CodeMalformed, `message ${m.id}: attachments must be an array`);
}

/** The message's thread id: thid, or its own id when it starts one. */
export const threadOf = (m) => m.thid || m.id;

/**
 * Serializes a plaintext with its headers in the order the Go package
 * writes them; empty optional headers are left out.
 */
const headerOrder = ['id', 'typ', 'type', 'from', 'to', 'thid', 'pthid', 'created_time', 'expires_time', 'body', 'attachments', 'return_route'];
const known = new Set(headerOrder);

export function encodePlaintext(m) {
  const out = {};
  for (const k of headerOrder) {
    const v = m[k];
    if (v === undefined || v === null || v === '' || v === 0) {
      if (k === 'body') out.body = {};
      continue;
    }
    if (Array.isArray(v) && v.length === 0) continue;
    out[k] = v;
  }
  for (const k of Object.keys(m)) if (!known.has(k) && m[k] !== undefined) out[k] = m[k];
  return JSON.stringify(out);
}
