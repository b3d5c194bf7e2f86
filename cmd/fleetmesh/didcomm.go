package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	"fleetmesh.org/fleetmesh/didcomm"
	"fleetmesh.org/fleetmesh/didcomm/mediation"
	"fleetmesh.org/fleetmesh/didcomm/oob"
	"fleetmesh.org/fleetmesh/didcomm/routing"
	"fleetmesh.org/fleetmesh/didcomm/transport"
	"fleetmesh.org/fleetmesh/didcomm/trustping"
	"fleetmesh.org/fleetmesh/identity"
	"fleetmesh.org/fleetmesh/standing"
)

func init() {
	register("didcomm", "pack, unpack and send DIDComm v2 messages (pack|unpack|ping|mediate|send|pickup|invite)", runDIDComm)
}

// didcommVerbs are the verbs of `fleetmesh didcomm`.
var didcommVerbs = verbs{
	"pack":    {"pack a plaintext message (stdin) into a signed or encrypted envelope", didcommPack},
	"unpack":  {"unpack an envelope (stdin) and print its plaintext", didcommUnpack},
	"ping":    {"send a trust-ping to a node and wait for its response", didcommPing},
	"invite":  {"print an out-of-band invitation to this node (what a leaf pairs with)", didcommInvite},
	"mediate": {"ask a node to mediate for this one (coordinate-mediation 3.0)", didcommMediate},
	"send":    {"send a message to a DID through its mediator or endpoint", didcommSend},
	"pickup":  {"pick up messages queued at a mediator (message pickup 3.0)", didcommPickup},
}

func runDIDComm(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	return didcommVerbs.run(ctx, "didcomm", args, stdin, stdout, stderr)
}

// didcommPack reads a plaintext message on stdin and prints it packed:
// authcrypt (the default), anoncrypt, signed or plaintext.
func didcommPack(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("didcomm pack", flag.ContinueOnError)
	fs.SetOutput(stderr)
	home := fs.String("home", defaultHome(), "node home directory (holds node.key)")
	var to didcommDIDs
	fs.Var(&to, "to", "recipient `DID` (repeatable; added to the message's to)")
	mode := fs.String("mode", "authcrypt", "authcrypt, anoncrypt, signed or plaintext")
	enc := fs.String("enc", didcomm.EncA256CBCHS512, "anoncrypt content encryption: A256CBC-HS512, A256GCM or XC20P")
	sign := fs.Bool("sign", false, "also sign inside the encryption (non-repudiation)")
	if err := parse(fs, args); err != nil {
		return err
	}
	m, err := didcomm.ParseMode(*mode)
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	k, err := loadKey(*home)
	if err != nil {
		return err
	}
	secrets, err := didcomm.SecretsFromKey(k)
	if err != nil {
		return err
	}
	in, err := io.ReadAll(io.LimitReader(stdin, didcomm.DefaultMaxMessageBytes+1))
	if err != nil {
		return fmt.Errorf("read stdin: %w", err)
	}
	var msg didcomm.Message
	if err := json.Unmarshal(in, &msg); err != nil {
		return fmt.Errorf("stdin is not a DIDComm plaintext message: %w", err)
	}
	for _, d := range to {
		if !didcommContains(msg.To, d) {
			msg.To = append(msg.To, d)
		}
	}
	if msg.ID == "" {
		msg.ID = didcomm.NewID()
	}
	if (m == didcomm.ModeAnoncrypt || m == didcomm.ModeAuthcrypt) && len(msg.To) == 0 {
		return fmt.Errorf("%w: %s needs --to DID (or a `to` in the message)", errUsage, m)
	}
	p := &didcomm.Packer{Secrets: secrets, Resolver: didcomm.DIDKeyResolver{}}
	out, err := p.Pack(&msg, didcomm.PackOptions{Mode: m, Enc: *enc, Sign: *sign})
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "%s\n", out)
	return err
}

// unpackResult is what `didcomm unpack` prints.
type unpackResult struct {
	Sender        string           `json:"sender,omitempty"`
	Authenticated bool             `json:"authenticated"`
	Mode          string           `json:"mode"`
	SenderKID     string           `json:"sender_kid,omitempty"`
	SignerKIDs    []string         `json:"signer_kids,omitempty"`
	RecipientKID  string           `json:"recipient_kid,omitempty"`
	Enc           string           `json:"enc,omitempty"`
	Message       *didcomm.Message `json:"message"`
}

func didcommUnpack(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("didcomm unpack", flag.ContinueOnError)
	fs.SetOutput(stderr)
	home := fs.String("home", defaultHome(), "node home directory (holds node.key)")
	if err := parse(fs, args); err != nil {
		return err
	}
	k, err := loadKey(*home)
	if err != nil {
		return err
	}
	secrets, err := didcomm.SecretsFromKey(k)
	if err != nil {
		return err
	}
	in, err := io.ReadAll(io.LimitReader(stdin, didcomm.DefaultMaxMessageBytes+1))
	if err != nil {
		return fmt.Errorf("read stdin: %w", err)
	}
	u := &didcomm.Unpacker{Secrets: secrets, Resolver: didcomm.DIDKeyResolver{}}
	got, err := u.Unpack([]byte(strings.TrimSpace(string(in))))
	if err != nil {
		return err
	}
	res := unpackResult{
		Authenticated: got.Authenticated,
		Mode:          got.String(),
		SenderKID:     got.SenderKID,
		SignerKIDs:    got.SignerKIDs,
		RecipientKID:  got.RecipientKID,
		Enc:           got.Enc,
		Message:       got.Message,
	}
	if got.Authenticated {
		res.Sender = got.Message.From
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(res)
}

// didcommDIDs is a repeatable string flag.
type didcommDIDs []string

func (s *didcommDIDs) String() string     { return strings.Join(*s, ",") }
func (s *didcommDIDs) Set(v string) error { *s = append(*s, v); return nil }

func didcommContains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// didcommTimeout bounds every network exchange of the didcomm verbs.
const didcommTimeout = 30 * time.Second

// didcommPeer is a node key's packer and unpacker.
type didcommPeer struct {
	key      *identity.Key
	packer   *didcomm.Packer
	unpacker *didcomm.Unpacker
}

func didcommLoadPeer(home string) (*didcommPeer, error) {
	k, err := loadKey(home)
	if err != nil {
		return nil, err
	}
	s, err := didcomm.SecretsFromKey(k)
	if err != nil {
		return nil, err
	}
	r := didcomm.DIDKeyResolver{}
	return &didcommPeer{key: k, packer: &didcomm.Packer{Secrets: s, Resolver: r}, unpacker: &didcomm.Unpacker{Secrets: s, Resolver: r}}, nil
}

// didcommFetchDID learns a node's DID from the out-of-band invitation its
// DIDComm endpoint serves on GET.
func didcommFetchDID(ctx context.Context, endpoint string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, endpoint, nil)
	if err != nil {
		return "", fmt.Errorf("%w: endpoint %q: %v", errUsage, endpoint, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("fetch invitation from %s: %w", endpoint, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, oob.MaxURLBytes))
	if err != nil {
		return "", fmt.Errorf("fetch invitation from %s: %w", endpoint, err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("fetch invitation from %s: HTTP %d", endpoint, resp.StatusCode)
	}
	inv, _, err := oob.Parse(string(body))
	if err != nil {
		return "", fmt.Errorf("invitation from %s: %w", endpoint, err)
	}
	return inv.From, nil
}

func didcommHTTPExchange(endpoint string) mediation.Exchange {
	return func(ctx context.Context, packed []byte) ([]byte, error) {
		out, err := transport.PostHTTP(ctx, http.DefaultClient, endpoint, packed)
		if errors.Is(err, transport.ErrStatus) && len(out) > 0 {
			return out, nil // a problem report; the caller reads its code
		}
		return out, err
	}
}

func didcommMediatorClient(ctx context.Context, p *didcommPeer, endpoint string) (*mediation.Client, error) {
	did, err := didcommFetchDID(ctx, endpoint)
	if err != nil {
		return nil, err
	}
	return &mediation.Client{Packer: p.packer, Unpacker: p.unpacker, Mediator: did, Exchange: didcommHTTPExchange(endpoint)}, nil
}

// peerCommand is what the didcomm subcommands that talk to one peer share:
// a home holding this side's key, the peer's endpoint under a flag of its
// own name, and a deadline for the whole exchange.
type peerCommand struct {
	fs       *flag.FlagSet
	home     *string
	endpoint *string
	flagName string
}

func newPeerCommand(name, homeUse, flagName, endpointUse string, stderr io.Writer) *peerCommand {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return &peerCommand{
		fs:       fs,
		home:     fs.String("home", defaultHome(), homeUse),
		endpoint: fs.String(flagName, "", endpointUse),
		flagName: flagName,
	}
}

// start parses args, requires the endpoint, loads this side's keys and
// gives ctx the exchange's deadline.
func (c *peerCommand) start(ctx context.Context, args []string) (*didcommPeer, context.Context, context.CancelFunc, error) {
	if err := parse(c.fs, args); err != nil {
		return nil, nil, nil, err
	}
	if *c.endpoint == "" {
		return nil, nil, nil, fmt.Errorf("%w: --%s URL is required", errUsage, c.flagName)
	}
	p, err := didcommLoadPeer(*c.home)
	if err != nil {
		return nil, nil, nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, didcommTimeout)
	return p, ctx, cancel, nil
}

func didcommPing(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	cmd := newPeerCommand("didcomm ping", "node home directory (holds node.key)", "endpoint", "the peer's DIDComm HTTP endpoint (http://HOST:PORT/didcomm)", stderr)
	p, ctx, cancel, err := cmd.start(ctx, args)
	if err != nil {
		return err
	}
	defer cancel()
	endpoint := cmd.endpoint
	did, err := didcommFetchDID(ctx, *endpoint)
	if err != nil {
		return err
	}
	ping, err := trustping.NewPing(p.key.DID(), did)
	if err != nil {
		return err
	}
	ping.ReturnRoute = "all"
	packed, err := p.packer.Pack(ping, didcomm.PackOptions{Mode: didcomm.ModeAuthcrypt})
	if err != nil {
		return err
	}
	start := time.Now()
	out, err := didcommHTTPExchange(*endpoint)(ctx, packed)
	if err != nil {
		return err
	}
	rtt := time.Since(start)
	got, err := p.unpacker.Unpack(out)
	if err != nil {
		return fmt.Errorf("answer: %w", err)
	}
	if !trustping.IsResponseTo(got.Message, ping.ID) || !got.Authenticated || got.Message.From != did {
		return fmt.Errorf("answer is %s from %q, not a ping-response from %s", got.Message.Type, got.Message.From, did)
	}
	return printJSON(stdout, map[string]any{"did": did, "rtt_ms": rtt.Milliseconds()})
}

func didcommInvite(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("didcomm invite", flag.ContinueOnError)
	fs.SetOutput(stderr)
	home := fs.String("home", defaultHome(), "node home directory (holds node.key)")
	endpoint := fs.String("endpoint", "", "where this node accepts DIDComm, `URL` http(s)://HOST:PORT/didcomm (default: the running node's relay address, as fleetmesh invite finds it)")
	qr := fs.Bool("qr", false, "also print the invitation URL as a QR code")
	if err := parse(fs, args); err != nil {
		return err
	}
	k, err := loadKey(*home)
	if err != nil {
		return err
	}
	if *endpoint == "" {
		own, err := ownAddrs(ctx, *home, k)
		if err != nil {
			return err
		}
		if own.endpoint == "" {
			return fmt.Errorf("%w: no DIDComm endpoint to put in the invitation: the node in %s listens on no address another machine can dial; start it, or give --endpoint http://HOST:PORT/didcomm", errUsage, *home)
		}
		*endpoint = own.endpoint
	}
	inv, err := oob.New(k.DID(), oob.GoalMediate, "DIDComm with this fleetmesh node; it mediates for leaves", *endpoint)
	if err != nil {
		return err
	}
	u, err := oob.URL(*endpoint, inv)
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	fmt.Fprintln(stdout, u)
	if *qr {
		code, err := oob.QR(u)
		if err != nil {
			return err
		}
		fmt.Fprint(stdout, code)
	}
	return nil
}

func didcommMediate(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	cmd := newPeerCommand("didcomm mediate", "leaf home directory (holds node.key)", "mediator",
		"the mediator's DIDComm HTTP endpoint (http://HOST:PORT/didcomm); several, comma-separated, are asked in order of standing at the node running in --home", stderr)
	p, ctx, cancel, err := cmd.start(ctx, args)
	if err != nil {
		return err
	}
	defer cancel()
	cands, err := mediatorCandidates(ctx, p, *cmd.endpoint)
	if err != nil {
		return err
	}
	standing.Order(homeStanding(ctx, *cmd.home), cands, func(c mediatorCandidate) string { return c.Mediator })
	var errs []error
	for _, c := range cands {
		out, err := askMediation(ctx, p, c)
		if err == nil {
			return printJSON(stdout, out)
		}
		errs = append(errs, fmt.Errorf("%s: %w", c.endpoint, err))
	}
	return errors.Join(errs...)
}

// mediatorCandidate is one --mediator endpoint with its mediator's DID.
type mediatorCandidate struct {
	*mediation.Client
	endpoint string
}

// mediatorCandidates fetches the DID of each comma-separated endpoint in
// list; an endpoint that does not answer is left out, unless none does.
func mediatorCandidates(ctx context.Context, p *didcommPeer, list string) ([]mediatorCandidate, error) {
	var cands []mediatorCandidate
	var errs []error
	for _, e := range strings.Split(list, ",") {
		if e = strings.TrimSpace(e); e == "" {
			continue
		}
		c, err := didcommMediatorClient(ctx, p, e)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		cands = append(cands, mediatorCandidate{c, e})
	}
	if len(cands) == 0 && len(errs) == 0 {
		return nil, fmt.Errorf("%w: --mediator %q names no endpoint", errUsage, list)
	}
	if len(cands) == 0 {
		return nil, errors.Join(errs...)
	}
	return cands, nil
}

// homeStanding is the standing view of the node running in dir, read
// from its control socket (`fleetmesh standing`), or nil when no node
// runs there or it keeps none: then mediators are asked in the order
// given (spec/standing.md "Use").
func homeStanding(ctx context.Context, dir string) standing.Reader {
	c, err := newControl(dir)
	if err != nil {
		return nil
	}
	var es []standing.Entry
	if err := c.do(ctx, "GET", "/standing", nil, &es); err != nil {
		return nil
	}
	m := make(standingOf, len(es))
	for _, e := range es {
		m[e.DID] = e.Standing
	}
	return m
}

// standingOf is a standing view read from a running node.
type standingOf map[string]float64

// Of is did's standing (standing.Reader).
func (m standingOf) Of(did string) float64 { return m[did] }

// askMediation asks c to mediate for this side and registers its DID.
func askMediation(ctx context.Context, p *didcommPeer, c mediatorCandidate) (map[string]any, error) {
	routingDIDs, err := c.RequestMediation(ctx)
	if err != nil {
		return nil, err
	}
	res, err := c.UpdateRecipients(ctx, mediation.Update{RecipientDID: p.key.DID(), Action: "add"})
	if err != nil {
		return nil, err
	}
	if len(res) != 1 || (res[0].Result != "success" && res[0].Result != "no_change") {
		return nil, fmt.Errorf("mediator did not register %s: %+v", p.key.DID(), res)
	}
	return map[string]any{"did": p.key.DID(), "mediator": c.Mediator, "routing_did": routingDIDs, "endpoint": c.endpoint}, nil
}

func didcommSend(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("didcomm send", flag.ContinueOnError)
	fs.SetOutput(stderr)
	home := fs.String("home", defaultHome(), "sender home directory (holds node.key)")
	to := fs.String("to", "", "recipient DID")
	via := fs.String("via", "", "the recipient's mediator endpoint (http://HOST:PORT/didcomm)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *to == "" || *via == "" {
		return fmt.Errorf("%w: --to DID and --via URL are required", errUsage)
	}
	p, err := didcommLoadPeer(*home)
	if err != nil {
		return err
	}
	in, err := io.ReadAll(io.LimitReader(stdin, didcomm.DefaultMaxMessageBytes+1))
	if err != nil {
		return fmt.Errorf("read stdin: %w", err)
	}
	var msg didcomm.Message
	if err := json.Unmarshal(in, &msg); err != nil {
		return fmt.Errorf("stdin is not a DIDComm plaintext message: %w", err)
	}
	if msg.ID == "" {
		msg.ID = didcomm.NewID()
	}
	if msg.CreatedTime == 0 {
		msg.CreatedTime = time.Now().Unix()
	}
	msg.To = []string{*to}
	inner, err := p.packer.Pack(&msg, didcomm.PackOptions{Mode: didcomm.ModeAuthcrypt})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, didcommTimeout)
	defer cancel()
	mediatorDID, err := didcommFetchDID(ctx, *via)
	if err != nil {
		return err
	}
	fwd, err := routing.Route(p.packer, inner, *to, mediatorDID)
	if err != nil {
		return err
	}
	if _, err := transport.PostHTTP(ctx, http.DefaultClient, *via, fwd); err != nil {
		return err
	}
	return printJSON(stdout, map[string]any{"id": msg.ID, "to": *to, "via": mediatorDID})
}

func didcommPickup(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	cmd := newPeerCommand("didcomm pickup", "leaf home directory (holds node.key)", "mediator", "the mediator's DIDComm HTTP endpoint (http://HOST:PORT/didcomm)", stderr)
	limit := cmd.fs.Int("limit", 10, "messages per delivery")
	p, ctx, cancel, err := cmd.start(ctx, args)
	if err != nil {
		return err
	}
	defer cancel()
	if *limit < 1 {
		return fmt.Errorf("%w: --limit must be positive", errUsage)
	}
	seen, err := mediation.OpenSeen(filepath.Join(*cmd.home, "didcomm"), mediation.DefaultMaxSeen)
	if err != nil {
		return err
	}
	defer seen.Close()
	c, err := didcommMediatorClient(ctx, p, *cmd.endpoint)
	if err != nil {
		return err
	}
	c.Seen = seen
	enc := json.NewEncoder(stdout)
	n, err := c.Collect(ctx, *limit, func(id string, packed []byte) error {
		got, err := p.unpacker.Unpack(packed)
		if err != nil {
			// An unreadable message is reported and dropped: keeping it
			// would block the queue forever.
			fmt.Fprintf(stderr, "fleetmesh didcomm pickup: dropping delivery %s: %v\n", id, err)
			return nil
		}
		res := unpackResult{Authenticated: got.Authenticated, Mode: got.String(), SenderKID: got.SenderKID, SignerKIDs: got.SignerKIDs, RecipientKID: got.RecipientKID, Enc: got.Enc, Message: got.Message}
		if got.Authenticated {
			res.Sender = got.Message.From
		}
		return enc.Encode(res)
	})
	fmt.Fprintf(stderr, "fleetmesh didcomm pickup: %d messages\n", n)
	return err
}
