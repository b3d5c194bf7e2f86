// Report-problem 2.0 codes, the same as the Go package's (didcomm/problem.go;
// spec/didcomm.md lists them), and the error that carries one.

export const CodeMalformed = 'e.p.msg.malformed';
export const CodeUnsupportedType = 'e.p.msg.unsupported-type';
export const CodeNotRecipient = 'e.p.msg.not-recipient';
export const CodeCrypto = 'e.p.trust.crypto';
export const CodeSenderMismatch = 'e.p.trust.crypto.sender-mismatch';
export const CodeReplay = 'e.p.trust.replay';
export const CodeUnauthorized = 'e.p.trust.unauthorized';
export const CodeExpired = 'e.p.req.time';
export const CodeTooBig = 'e.p.xfer.too-big';
export const CodeUnresolvable = 'e.p.did.unresolvable';
export const CodeQueueFull = 'e.p.me.res.queue-full';
export const CodeRateLimited = 'e.p.me.res.rate-limited';
export const CodeInternal = 'e.p.me';

/** An error a receiver answers with a problem report: `code` is what to send. */
export class Problem extends Error {
  /** @param {string} code @param {string} message */
  constructor(code, message) {
    super(`didcomm: ${code}: ${message}`);
    this.name = 'Problem';
    this.code = code;
  }
}

/** @returns {Problem} */
export const problem = (code, message) => new Problem(code, message);
