package didcomm

import "fmt"

// Report-problem 2.0 codes (https://identity.foundation/didcomm-messaging/spec/v2.1/#problem-codes):
// "e" (error) "p" (protocol-scoped) then a descriptor from the spec's list
// (trust, trust.crypto, xfer, did, msg, me.res, req.time), extended with a
// word that says exactly what was wrong. spec/didcomm.md lists them.
const (
	CodeMalformed       = "e.p.msg.malformed"
	CodeUnsupportedType = "e.p.msg.unsupported-type"
	CodeNotRecipient    = "e.p.msg.not-recipient"
	CodeCrypto          = "e.p.trust.crypto"
	CodeSenderMismatch  = "e.p.trust.crypto.sender-mismatch"
	CodeReplay          = "e.p.trust.replay"
	CodeUnauthorized    = "e.p.trust.unauthorized"
	CodeExpired         = "e.p.req.time"
	CodeTooBig          = "e.p.xfer.too-big"
	CodeUnresolvable    = "e.p.did.unresolvable"
	CodeQueueFull       = "e.p.me.res.queue-full"
	CodeRateLimited     = "e.p.me.res.rate-limited"
	CodeInternal        = "e.p.me"
)

// Problem is an error a receiver answers with a problem report: the code to
// send and what went wrong.
type Problem struct {
	Code string
	Err  error
}

func (p *Problem) Error() string { return fmt.Sprintf("didcomm: %s: %v", p.Code, p.Err) }

// Unwrap returns the underlying error.
func (p *Problem) Unwrap() error { return p.Err }

func problemf(code, format string, args ...any) *Problem {
	return &Problem{Code: code, Err: fmt.Errorf(format, args...)}
}
