package compute

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/ipfs/go-cid"
	mh "github.com/multiformats/go-multihash"

	"fleetmesh.org/fleetmesh/compute/sandbox"
	"fleetmesh.org/fleetmesh/didcomm"
)

// Protocol identifier and message types (spec/compute.md).
const (
	PIURI       = "https://fleetmesh.org/protocols/job/1.0"
	TypeOffer   = PIURI + "/offer"
	TypeAccept  = PIURI + "/accept"
	TypeDecline = PIURI + "/decline"
	TypeInput   = PIURI + "/input"
	TypeCommit  = PIURI + "/commit"
	TypeReveal  = PIURI + "/reveal"
	TypeResult  = PIURI + "/result"
	TypeCancel  = PIURI + "/cancel"
	// TypeSealed is the type of the inner message that carries a job's
	// input (to the executor) or output (to the requester), authcrypted
	// end to end inside the outer message.
	TypeSealed = PIURI + "/sealed"
)

// Protocol bounds: what any message of job/1.0 may carry at most,
// whatever the configuration. They keep an input message (module and
// sealed input, each base64 inside an authcrypt JWE inside another)
// under the DIDComm unpacker's 1 MiB (didcomm.DefaultMaxMessageBytes).
const (
	MaxModuleBytes = 192 << 10
	MaxInputBytes  = 128 << 10
	MaxOutputBytes = 128 << 10
	MaxRedundancy  = 16
	MaxDeadlineMS  = 60_000
	MaxMemoryPages = 1024 // 64 MiB
	MaxCallDepth   = sandbox.MaxCallDepth
	maxJobIDLen    = 64
	maxReasonLen   = 512
)

// Outcomes an executor reports (the sandbox's outcomes, spec/compute.md
// "Outcomes"): ok, or a limit reached, or a trap.
const (
	OutcomeOK             = "ok"
	OutcomeOutOfFuel      = "out_of_fuel"
	OutcomeOutOfMemory    = "out_of_memory"
	OutcomeStackExhausted = "stack_exhausted"
	OutcomeDeadline       = "deadline"
	OutcomeOutputTooLarge = "output_too_large"
	OutcomeTrap           = "trap"
)

var outcomes = map[string]bool{OutcomeOK: true, OutcomeOutOfFuel: true, OutcomeOutOfMemory: true,
	OutcomeStackExhausted: true, OutcomeDeadline: true, OutcomeOutputTooLarge: true, OutcomeTrap: true}

// Decline reasons (decline body's code).
const (
	DeclineNotOffered = "not_offered" // this node does not execute jobs
	DeclineBusy       = "busy"        // its concurrency is taken
	DeclineLimits     = "limits"      // the job's limits exceed this node's
	DeclineGrant      = "grant"       // no compute units left in the requester's grant
	DeclineModule     = "module"      // the module is refused (size, CID)
)

var declineCodes = map[string]bool{DeclineNotOffered: true, DeclineBusy: true, DeclineLimits: true, DeclineGrant: true, DeclineModule: true}

// ErrMalformed is wrapped by every refusal of a malformed job message.
var ErrMalformed = errors.New("compute: malformed job message")

func malformed(format string, args ...any) error {
	return &didcomm.Problem{Code: didcomm.CodeMalformed, Err: fmt.Errorf("%w: "+format, append([]any{ErrMalformed}, args...)...)}
}

var jobIDPattern = regexp.MustCompile(`^[0-9a-f]{32}$`)

// NewJobID returns a fresh random job id.
func NewJobID() string { return didcomm.NewID() }

func checkJobID(id string) error {
	if len(id) > maxJobIDLen || !jobIDPattern.MatchString(id) {
		return malformed("job_id %.64q: must be 32 lowercase hex digits", id)
	}
	return nil
}

// Limits bound one run of a job (spec/compute.md "Limits").
type Limits struct {
	// Fuel is the most fuel the run may burn.
	Fuel uint64 `json:"fuel"`
	// MemoryPages is the most 64 KiB pages of linear memory.
	MemoryPages uint32 `json:"memory_pages"`
	// OutputBytes is the most bytes the module may write to stdout.
	OutputBytes uint32 `json:"output_bytes"`
	// CallDepth is the deepest call stack.
	CallDepth uint32 `json:"call_depth"`
	// DeadlineMS is the wall-clock bound on the run, in milliseconds.
	DeadlineMS uint32 `json:"deadline_ms"`
}

// Check refuses limits outside the protocol's bounds.
func (l Limits) Check() error {
	switch {
	case l.Fuel == 0:
		return malformed("limits.fuel: must be above 0")
	case l.MemoryPages == 0 || l.MemoryPages > MaxMemoryPages:
		return malformed("limits.memory_pages %d: must be from 1 to %d", l.MemoryPages, MaxMemoryPages)
	case l.OutputBytes > MaxOutputBytes:
		return malformed("limits.output_bytes %d: at most %d", l.OutputBytes, MaxOutputBytes)
	case l.CallDepth == 0 || l.CallDepth > MaxCallDepth:
		return malformed("limits.call_depth %d: must be from 1 to %d", l.CallDepth, MaxCallDepth)
	case l.DeadlineMS == 0 || l.DeadlineMS > MaxDeadlineMS:
		return malformed("limits.deadline_ms %d: must be from 1 to %d", l.DeadlineMS, MaxDeadlineMS)
	}
	return nil
}

// Within reports whether every bound of l is at most max's.
func (l Limits) Within(max Limits) bool {
	return l.Fuel <= max.Fuel && l.MemoryPages <= max.MemoryPages && l.OutputBytes <= max.OutputBytes &&
		l.CallDepth <= max.CallDepth && l.DeadlineMS <= max.DeadlineMS
}

// Offer is the offer body: requester to executor.
type Offer struct {
	JobID string `json:"job_id"`
	// Module is the module's CID (CIDv1, raw codec, sha2-256).
	Module string `json:"module"`
	// ModuleBytes is the module's size.
	ModuleBytes int    `json:"module_bytes"`
	Limits      Limits `json:"limits"`
	// Redundancy is how many executors the requester runs the job on.
	Redundancy int `json:"redundancy"`
}

// Accept is the accept body: executor to requester.
type Accept struct {
	JobID string `json:"job_id"`
	// NeedModule asks the requester to send the module's bytes with the
	// input (false when the executor holds a module with that CID).
	NeedModule bool `json:"need_module"`
}

// Decline is the decline body: executor to requester.
type Decline struct {
	JobID  string `json:"job_id"`
	Code   string `json:"code"`
	Reason string `json:"reason,omitempty"`
}

// Input is the input body: requester to executor. Sealed is the job's
// input, authcrypted to the executor alone (Seal).
type Input struct {
	JobID string `json:"job_id"`
	// Module is the module's bytes, base64 (standard, padded), when the
	// executor asked for them.
	Module string          `json:"module,omitempty"`
	Sealed json.RawMessage `json:"sealed"`
}

// Commit is the commit body: executor to requester, the executor's
// binding commitment to its result (verify.Commit) before any executor
// reveals.
type Commit struct {
	JobID      string `json:"job_id"`
	Commitment string `json:"commitment"`
}

// Reveal is the reveal body: requester to executor, sent once every
// executor of the job has committed; it lists the commitments gathered,
// so that an executor can see the commit phase closed.
type Reveal struct {
	JobID       string   `json:"job_id"`
	Commitments []string `json:"commitments"`
}

// Result is the result body: executor to requester, opening its
// commitment. Sealed is the output authcrypted to the requester alone.
type Result struct {
	JobID   string `json:"job_id"`
	Outcome string `json:"outcome"`
	// ResultHash is sha2-256 of the canonical output bytes, hex.
	ResultHash string `json:"result_hash"`
	// Fuel is the fuel the run burned.
	Fuel uint64 `json:"fuel"`
	// Nonce is the commitment's 32 random bytes, hex.
	Nonce string `json:"nonce"`
	// Metered is when the executor metered the run's units as given
	// (Unix seconds; 0 or absent: not said), the time whose accounting
	// window the requester counts them in if it falls within the job.
	Metered int64           `json:"metered,omitempty"`
	Sealed  json.RawMessage `json:"sealed"`
}

// Cancel is the cancel body: either party abandons the job.
type Cancel struct {
	JobID  string `json:"job_id"`
	Reason string `json:"reason,omitempty"`
}

// ModuleCID is the CID a job names its module by: CIDv1, raw codec,
// sha2-256 of the module's bytes.
func ModuleCID(module []byte) cid.Cid {
	h, _ := mh.Sum(module, mh.SHA2_256, -1)
	return cid.NewCidV1(cid.Raw, h)
}

// CheckModule refuses module bytes that do not hash to the CID named.
func CheckModule(name string, module []byte) error {
	c, err := cid.Decode(name)
	if err != nil {
		return malformed("module %.80q: not a CID: %v", name, err)
	}
	if !ModuleCID(module).Equals(c) {
		return &didcomm.Problem{Code: didcomm.CodeMalformed, Err: fmt.Errorf("compute: module bytes do not match CID %s", c)}
	}
	return nil
}

// ResultHash hashes canonical output bytes.
func ResultHash(output []byte) [32]byte { return sha256.Sum256(output) }

func hex32(field, s string) ([32]byte, error) {
	var out [32]byte
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != 32 {
		return out, malformed("%s %.80q: must be 64 hex digits", field, s)
	}
	copy(out[:], b)
	return out, nil
}

// decode parses m's body as T after checking the message type; unknown
// fields are ignored, as DIDComm asks of headers, so a later minor
// version can add some.
func decode[T any](m *didcomm.Message, typ string) (*T, error) {
	if m.Type != typ {
		return nil, malformed("message type %s, want %s", m.Type, typ)
	}
	var b T
	if err := json.Unmarshal(m.Body, &b); err != nil {
		return nil, malformed("%s body: %v", typ[len(PIURI)+1:], err)
	}
	return &b, nil
}

// ParseOffer decodes and checks an offer.
func ParseOffer(m *didcomm.Message) (*Offer, error) {
	b, err := decode[Offer](m, TypeOffer)
	if err != nil {
		return nil, err
	}
	if err := checkJobID(b.JobID); err != nil {
		return nil, err
	}
	if _, err := cid.Decode(b.Module); err != nil {
		return nil, malformed("module %.80q: not a CID: %v", b.Module, err)
	}
	if b.ModuleBytes < 1 || b.ModuleBytes > MaxModuleBytes {
		return nil, malformed("module_bytes %d: must be from 1 to %d", b.ModuleBytes, MaxModuleBytes)
	}
	if b.Redundancy < 1 || b.Redundancy > MaxRedundancy {
		return nil, malformed("redundancy %d: must be from 1 to %d", b.Redundancy, MaxRedundancy)
	}
	if err := b.Limits.Check(); err != nil {
		return nil, err
	}
	return b, nil
}

// ParseAccept decodes and checks an accept.
func ParseAccept(m *didcomm.Message) (*Accept, error) {
	b, err := decode[Accept](m, TypeAccept)
	if err != nil {
		return nil, err
	}
	return b, checkJobID(b.JobID)
}

// ParseDecline decodes and checks a decline.
func ParseDecline(m *didcomm.Message) (*Decline, error) {
	b, err := decode[Decline](m, TypeDecline)
	if err != nil {
		return nil, err
	}
	if err := checkJobID(b.JobID); err != nil {
		return nil, err
	}
	if !declineCodes[b.Code] {
		return nil, malformed("decline code %.40q: unknown", b.Code)
	}
	if len(b.Reason) > maxReasonLen {
		return nil, malformed("decline reason: longer than %d bytes", maxReasonLen)
	}
	return b, nil
}

// ParseInput decodes and checks an input; the module, when present, is
// returned decoded (its CID is checked against the offer by the caller).
func ParseInput(m *didcomm.Message) (*Input, []byte, error) {
	b, err := decode[Input](m, TypeInput)
	if err != nil {
		return nil, nil, err
	}
	if err := checkJobID(b.JobID); err != nil {
		return nil, nil, err
	}
	var module []byte
	if b.Module != "" {
		if base64.StdEncoding.DecodedLen(len(b.Module)) > MaxModuleBytes+2 {
			return nil, nil, malformed("module: larger than %d bytes", MaxModuleBytes)
		}
		if module, err = base64.StdEncoding.DecodeString(b.Module); err != nil {
			return nil, nil, malformed("module: not base64: %v", err)
		}
	}
	if len(b.Sealed) == 0 || b.Sealed[0] != '{' {
		return nil, nil, malformed("sealed: must be a DIDComm encrypted message (a JSON object)")
	}
	return b, module, nil
}

// ParseCommit decodes and checks a commit.
func ParseCommit(m *didcomm.Message) (*Commit, [32]byte, error) {
	b, err := decode[Commit](m, TypeCommit)
	if err != nil {
		return nil, [32]byte{}, err
	}
	if err := checkJobID(b.JobID); err != nil {
		return nil, [32]byte{}, err
	}
	c, err := hex32("commitment", b.Commitment)
	return b, c, err
}

// ParseReveal decodes and checks a reveal.
func ParseReveal(m *didcomm.Message) (*Reveal, error) {
	b, err := decode[Reveal](m, TypeReveal)
	if err != nil {
		return nil, err
	}
	if err := checkJobID(b.JobID); err != nil {
		return nil, err
	}
	if len(b.Commitments) < 1 || len(b.Commitments) > MaxRedundancy {
		return nil, malformed("commitments: must list from 1 to %d", MaxRedundancy)
	}
	for _, c := range b.Commitments {
		if _, err := hex32("commitments[]", c); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// Opening is a result's checked fields, decoded.
type Opening struct {
	Outcome    string
	ResultHash [32]byte
	Fuel       uint64
	Nonce      [32]byte
	// Metered is the result's `metered`, the zero time when absent.
	Metered time.Time
}

// ParseResult decodes and checks a result.
func ParseResult(m *didcomm.Message) (*Result, Opening, error) {
	var o Opening
	b, err := decode[Result](m, TypeResult)
	if err != nil {
		return nil, o, err
	}
	if err := checkJobID(b.JobID); err != nil {
		return nil, o, err
	}
	if !outcomes[b.Outcome] {
		return nil, o, malformed("outcome %.40q: unknown", b.Outcome)
	}
	if o.ResultHash, err = hex32("result_hash", b.ResultHash); err != nil {
		return nil, o, err
	}
	if o.Nonce, err = hex32("nonce", b.Nonce); err != nil {
		return nil, o, err
	}
	if len(b.Sealed) == 0 || b.Sealed[0] != '{' {
		return nil, o, malformed("sealed: must be a DIDComm encrypted message (a JSON object)")
	}
	if b.Metered < 0 {
		return nil, o, malformed("metered %d: must be Unix seconds, or absent", b.Metered)
	}
	o.Outcome, o.Fuel = b.Outcome, b.Fuel
	if b.Metered > 0 {
		o.Metered = time.Unix(b.Metered, 0)
	}
	return b, o, nil
}

// ParseCancel decodes and checks a cancel.
func ParseCancel(m *didcomm.Message) (*Cancel, error) {
	b, err := decode[Cancel](m, TypeCancel)
	if err != nil {
		return nil, err
	}
	if err := checkJobID(b.JobID); err != nil {
		return nil, err
	}
	if len(b.Reason) > maxReasonLen {
		return nil, malformed("cancel reason: longer than %d bytes", maxReasonLen)
	}
	return b, nil
}

// Message builds a job message of type typ with body b, threaded on
// thid (the job's thread; empty starts one).
func Message(typ, thid string, b any) (*didcomm.Message, error) {
	m, err := didcomm.NewMessage(typ, b)
	if err != nil {
		return nil, err
	}
	m.Thid = thid
	return m, nil
}
