package dashboard

import (
	"fmt"
	"strings"
	"time"
)

// Headline is what the top of the page says about the node: the facts an
// operator looks at first, each of which the page gives with its state in
// plain words. The node that serves the page fills it in at each load
// (Options.Headline).
type Headline struct {
	// Version is the build's version.
	Version string
	// Uptime is how long the node has served.
	Uptime time.Duration
	// Class is the class the node declares now; ClassConfig the one
	// configured (auto lets reachability decide).
	Class, ClassConfig string
	// Reachability is what AutoNAT found: public, private or unknown.
	Reachability string
	// Iroh is the iroh endpoint's state (up, starting, off), IrohWhy why
	// it is off, IrohRelay its home relay ("" for none).
	Iroh, IrohWhy, IrohRelay string
	// Peers counts the connected mesh peers; PeerKinds splits them.
	Peers     int
	PeerKinds []PeerKind
	// StorageBytes is storage used as storage_max_bytes counts it;
	// StorageMaxBytes the bound (0: none).
	StorageBytes, StorageMaxBytes int64
	// Errors are the latest warnings and errors, oldest first, each
	// message once with its count.
	Errors []Error
}

// PeerKind counts connected peers of one class over one transport.
type PeerKind struct {
	Class, Transport string
	Count            int
}

// Error is one logged warning or error message and how often it came.
type Error struct {
	Time    time.Time
	Level   string
	Message string
	Count   int
}

// fact is one line of the headline: a name, its value, and its state in
// plain words, with a tone (ok, info, warn, bad) the page colours.
type fact struct {
	Name, Value, State, Tone string
}

// headlineErrors bounds the errors the headline lists.
const headlineErrors = 3

// facts says the headline in words.
func (h Headline) facts() []fact {
	class := h.Class
	if h.ClassConfig != "" && h.ClassConfig != h.Class {
		class += " (configured " + h.ClassConfig + ")"
	}
	out := []fact{
		{"Version", h.Version, "the build this node runs", "info"},
		{"Uptime", h.Uptime.Truncate(time.Second).String(), "serving since " + time.Now().Add(-h.Uptime).Format("2006-01-02 15:04"), "info"},
		{"Class", class, classWords(h.Class), "info"},
		reachFact(h),
		irohFact(h),
		peersFact(h),
		storageFact(h),
	}
	return append(out, errorsFact(h.Errors))
}

func classWords(class string) string {
	switch class {
	case "anchor":
		return "a public node: relays and stores for others, helps nodes behind NAT"
	case "home":
		return "a node behind NAT or a firewall: a full relay with storage, reached by hole punching or through anchors"
	case "leaf":
		return "an intermittent device: keeps its own data, wakes to sync"
	}
	return "not declared yet"
}

func reachFact(h Headline) fact {
	f := fact{Name: "Reachability", Value: h.Reachability}
	switch {
	case h.Reachability == "public":
		f.State, f.Tone = "normal: other nodes can dial it directly", "ok"
	case h.Reachability == "private" && h.Class == "anchor":
		f.State, f.Tone = "wrong for an anchor: other nodes cannot dial it; open its mesh port or declare it home", "bad"
	case h.Reachability == "private":
		f.State, f.Tone = "normal behind NAT: peers reach it by hole punching or through an anchor's relay", "ok"
	default:
		f.Value = "unknown"
		f.State, f.Tone = "not known yet: peers tell it once it has some (AutoNAT)", "info"
	}
	return f
}

func irohFact(h Headline) fact {
	f := fact{Name: "Iroh", Value: h.Iroh}
	switch h.Iroh {
	case "up":
		f.State, f.Tone = "serving", "ok"
		if h.IrohRelay != "" {
			f.State += " with home relay " + h.IrohRelay
		}
	case "starting":
		f.State, f.Tone = "starting its helper; it serves in a few seconds", "info"
	default:
		f.Value = "off"
		f.State, f.Tone = "off", "info"
		if h.IrohWhy != "" {
			f.State += ": " + h.IrohWhy
		}
	}
	return f
}

func peersFact(h Headline) fact {
	var kinds []string
	for _, k := range h.PeerKinds {
		kinds = append(kinds, fmt.Sprintf("%d %s over %s", k.Count, k.Class, k.Transport))
	}
	f := fact{Name: "Peers", Value: fmt.Sprintf("%d connected", h.Peers)}
	if len(kinds) > 0 {
		f.Value += " (" + strings.Join(kinds, ", ") + ")"
	}
	switch {
	case h.Peers > 0:
		f.State, f.Tone = "in the mesh", "ok"
	case h.Uptime < time.Minute:
		f.State, f.Tone = "looking for peers", "info"
	default:
		f.State, f.Tone = "alone: no mesh peer; give it a way in (run --join CODE, see docs/operators.md)", "warn"
	}
	return f
}

func storageFact(h Headline) fact {
	f := fact{Name: "Storage", Value: byteSize(h.StorageBytes) + " used"}
	if h.StorageMaxBytes <= 0 {
		f.State, f.Tone = "no bound set (storage_max_bytes)", "info"
		return f
	}
	share := float64(h.StorageBytes) / float64(h.StorageMaxBytes)
	f.Value += fmt.Sprintf(" of %s (%.1f %%)", byteSize(h.StorageMaxBytes), 100*share)
	switch {
	case share >= 0.95:
		f.State, f.Tone = "full: it refuses new events; raise storage_max_bytes or free the disk", "bad"
	case share >= 0.8:
		f.State, f.Tone = "filling up: raise storage_max_bytes soon", "warn"
	default:
		f.State, f.Tone = "room to spare", "ok"
	}
	return f
}

func errorsFact(errs []Error) fact {
	if len(errs) == 0 {
		return fact{"Last errors", "none", "no warning or error logged since the start", "ok"}
	}
	var lines []string
	for _, e := range errs[max(0, len(errs)-headlineErrors):] {
		l := e.Time.Format("15:04:05") + " " + e.Message
		if e.Count > 1 {
			l += fmt.Sprintf(" (×%d)", e.Count)
		}
		lines = append(lines, l)
	}
	kinds := "1 kind"
	if len(errs) > 1 {
		kinds = fmt.Sprintf("%d kinds", len(errs))
	}
	return fact{"Last errors", strings.Join(lines, "; "), kinds + " of warning or error logged; fleetmesh status lists them", "warn"}
}

// byteSize is n with a decimal prefix.
func byteSize(n int64) string {
	return human(float64(n)) + "B"
}
