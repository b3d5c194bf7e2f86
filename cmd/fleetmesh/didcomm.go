package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"strings"

	"fleetmesh.org/fleetmesh/didcomm"
	"fleetmesh.org/fleetmesh/identity"
)

func init() {
	register("didcomm", "pack, unpack and send DIDComm v2 messages (pack|unpack|ping|mediate|send|pickup|invite)", runDIDComm)
}

// didcommSubcommands are the verbs of `fleetmesh didcomm`.
var didcommSubcommands = map[string]func(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error{
	"pack":   didcommPack,
	"unpack": didcommUnpack,
}

func runDIDComm(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return fmt.Errorf("%w: fleetmesh didcomm pack|unpack|ping|mediate|send|pickup|invite [flags]", errUsage)
	}
	sub, ok := didcommSubcommands[args[0]]
	if !ok {
		return fmt.Errorf("%w: unknown didcomm verb %q (pack, unpack, ping, mediate, send, pickup, invite)", errUsage, args[0])
	}
	return sub(ctx, args[1:], stdin, stdout, stderr)
}

// didcommLoadKey reads DIR/node.key and says how to make one when missing.
func didcommLoadKey(home string) (*identity.Key, error) {
	if home == "" {
		return nil, fmt.Errorf("%w: --home DIR is required", errUsage)
	}
	path := filepath.Join(home, "node.key")
	k, err := identity.LoadKey(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("no node key at %s: run `fleetmesh init --home %s` first", path, home)
	}
	return k, err
}

func didcommParseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
	}
	return nil
}

func didcommPack(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("didcomm pack", flag.ContinueOnError)
	fs.SetOutput(stderr)
	home := fs.String("home", "", "node home directory (holds node.key)")
	var to didcommDIDs
	fs.Var(&to, "to", "recipient DID (repeatable; added to the message's `to`)")
	mode := fs.String("mode", "authcrypt", "authcrypt, anoncrypt, signed or plaintext")
	enc := fs.String("enc", didcomm.EncA256CBCHS512, "anoncrypt content encryption: A256CBC-HS512, A256GCM or XC20P")
	sign := fs.Bool("sign", false, "also sign inside the encryption (non-repudiation)")
	if err := didcommParseFlags(fs, args); err != nil {
		return err
	}
	m, err := didcomm.ParseMode(*mode)
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	k, err := didcommLoadKey(*home)
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
	home := fs.String("home", "", "node home directory (holds node.key)")
	if err := didcommParseFlags(fs, args); err != nil {
		return err
	}
	k, err := didcommLoadKey(*home)
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
