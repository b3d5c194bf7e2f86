package main

import (
	"flag"
	"fmt"
	"strings"
)

// helpExamples is an example of every command and verb, by the name its
// flag set carries ("run", "didcomm invite"). TestEveryCommandHasHelp
// fails when a command or verb has none.
var helpExamples = map[string]string{
	"init":            "fleetmesh init --home ~/.fleetmesh --class home",
	"id":              "fleetmesh id --home ~/.fleetmesh",
	"run":             "fleetmesh run --home ~/.fleetmesh --join fmjoin1…",
	"invite":          "fleetmesh invite --home ~/.fleetmesh --ttl 2h",
	"gateway":         "fleetmesh gateway --home ~/gateway --backend wss://backend.internal",
	"status":          "fleetmesh status --home ~/.fleetmesh",
	"backup":          "fleetmesh backup --home ~/.fleetmesh --out /mnt/backup/fleetmesh-2026-01-02",
	"conformance":     "fleetmesh conformance --target ws://127.0.0.1:7447",
	"leaf":            "fleetmesh leaf --home ~/leaf --pair fmjoin1… --subscribe '{\"kinds\":[1]}' --once",
	"receipts":        "fleetmesh receipts --home ~/.fleetmesh --node did:key:z6Mk… --verify",
	"standing":        "fleetmesh standing --home ~/.fleetmesh --json",
	"label":           "fleetmesh label --home ~/.fleetmesh --author 3bf0c63f…459d --reason spam --note 'floods kind 1' --expires 720h",
	"why":             "fleetmesh why --home ~/.fleetmesh --event 5c83da77…1b2a",
	"job":             "fleetmesh job run --home ~/.fleetmesh --module sha256.wasm --input data.bin --redundancy 3 --json",
	"version":         "fleetmesh version --json",
	"store migrate":   "fleetmesh store migrate --home ~/.fleetmesh --to postgres://fleetmesh:secret@127.0.0.1:5432/fleetmesh",
	"grants list":     "fleetmesh grants list --home ~/.fleetmesh",
	"grants offer":    "fleetmesh grants offer --home ~/.fleetmesh --to did:key:z6Mk… --service events --quota 10000",
	"grants revoke":   "fleetmesh grants revoke --home ~/.fleetmesh --id GRANT_ID",
	"didcomm pack":    "echo '{\"type\":\"https://didcomm.org/basicmessage/2.0/message\",\"body\":{\"content\":\"hi\"}}' | fleetmesh didcomm pack --home ~/.fleetmesh --to did:key:z6Mk…",
	"didcomm unpack":  "fleetmesh didcomm unpack --home ~/.fleetmesh < envelope.json",
	"didcomm ping":    "fleetmesh didcomm ping --home ~/.fleetmesh --endpoint http://192.0.2.7:7447/didcomm",
	"didcomm invite":  "fleetmesh didcomm invite --home ~/.fleetmesh --qr",
	"didcomm mediate": "fleetmesh didcomm mediate --home ~/leaf --mediator http://192.0.2.7:7447/didcomm",
	"didcomm send":    "echo '{\"type\":\"https://didcomm.org/basicmessage/2.0/message\",\"body\":{\"content\":\"hi\"}}' | fleetmesh didcomm send --home ~/.fleetmesh --to did:key:z6Mk… --via http://192.0.2.7:7447/didcomm",
	"didcomm pickup":  "fleetmesh didcomm pickup --home ~/leaf --mediator http://192.0.2.7:7447/didcomm",
}

// grantsVerbs describes the verbs of `fleetmesh grants`.
var grantsVerbs = map[string]string{
	"list":   "list the grants this node gave and holds",
	"offer":  "offer a peer a grant of a service for a quota per window",
	"revoke": "revoke a grant this node gave",
}

// verbSummaries are the descriptions of every verb by its flag set's
// name ("didcomm invite"), filled in by init: the verb tables refer to
// the commands, which refer to parse, which reads this.
var verbSummaries = map[string]string{}

func init() {
	for n, v := range didcommVerbs {
		verbSummaries["didcomm "+n] = v.summary
	}
	for n, s := range grantsVerbs {
		verbSummaries["grants "+n] = s
	}
	for n, s := range storeVerbs {
		verbSummaries["store "+n] = s
	}
}

// helpSummary is the one-line description of a command or verb, by its
// flag set's name.
func helpSummary(name string) string {
	if s, ok := verbSummaries[name]; ok {
		return s
	}
	return commands[name].summary
}

// setUsage makes fs's -h print the command's description, its example
// and its flags. A command that wrote its own usage text keeps it, and
// gets the one-line description and the example after it.
func setUsage(fs *flag.FlagSet) {
	if own := fs.Usage; own != nil {
		fs.Usage = func() {
			own()
			w := fs.Output()
			fmt.Fprintf(w, "\nIn short: %s.\n", helpSummary(fs.Name()))
			if ex := helpExamples[fs.Name()]; ex != "" {
				fmt.Fprintf(w, "\nExample:\n  %s\n", ex)
			}
		}
		return
	}
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "usage: fleetmesh %s [flags]\n\n", fs.Name())
		if s := helpSummary(fs.Name()); s != "" {
			fmt.Fprintf(w, "%s\n\n", strings.ToUpper(s[:1])+s[1:])
		}
		if ex := helpExamples[fs.Name()]; ex != "" {
			fmt.Fprintf(w, "Example:\n  %s\n\n", ex)
		}
		fmt.Fprintln(w, "Flags:")
		fs.PrintDefaults()
	}
}
