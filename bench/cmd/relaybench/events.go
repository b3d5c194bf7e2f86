package main

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"github.com/btcsuite/btcd/btcec/v2"
	"github.com/btcsuite/btcd/btcec/v2/schnorr"
	"github.com/nbd-wtf/go-nostr"
)

// corpusVersion changes whenever the generator changes, so a stale cache
// file is never reused for a different event set.
const corpusVersion = 1

// baseCreatedAt is the fixed start of the generated timeline (2026-05-29),
// recent enough that a relay with a "too old" policy would still take it.
const baseCreatedAt = 1_780_000_000

// timelineSeconds is the span the generated created_at values cover.
const timelineSeconds = 180 * 24 * 3600

// maxAuthors bounds the number of distinct signing keys.
const maxAuthors = 10_000

// eventMeta is what the query generator needs to know about one event.
type eventMeta struct {
	id        string
	author    int32
	kind      int32
	createdAt int64
	eTag      string // first "e" tag value, empty if none
}

// corpus is the deterministic, pre-signed event set both relays receive.
type corpus struct {
	frames  [][]byte // ["EVENT",{...}] frames, ready to send
	meta    []eventMeta
	authors []string // hex x-only public keys
}

// corpusParams says which corpus to build; the same params always give the
// same events, byte for byte.
type corpusParams struct {
	events int
	seed   uint64
}

func (p corpusParams) authorCount() int {
	return min(max(p.events/50, 10), maxAuthors)
}

func (p corpusParams) cachePath(dir string) string {
	return filepath.Join(dir, fmt.Sprintf("events-v%d-n%d-seed%d.jsonl", corpusVersion, p.events, p.seed))
}

// loadOrBuildCorpus reads the cached corpus for p from cacheDir, or generates
// and signs it (on all cores) and writes the cache atomically.
func loadOrBuildCorpus(p corpusParams, cacheDir string, logf func(string, ...any)) (*corpus, error) {
	if p.events < 100 {
		return nil, fmt.Errorf("corpus: --events must be at least 100, got %d", p.events)
	}
	path := p.cachePath(cacheDir)
	if c, err := readCorpus(path, p); err == nil {
		logf("loaded %d pre-signed events from %s", len(c.frames), path)
		return c, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		logf("cache %s unusable (%v); regenerating", path, err)
	}
	logf("generating and signing %d events on %d cores (cached afterwards in %s)", p.events, runtime.NumCPU(), path)
	events, err := generateEvents(p)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return nil, fmt.Errorf("corpus: cache dir: %w", err)
	}
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return nil, fmt.Errorf("corpus: %w", err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	for i := range events {
		b, err := events[i].MarshalJSON()
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("corpus: encode event %d: %w", i, err)
		}
		w.Write(b)
		w.WriteByte('\n')
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return nil, fmt.Errorf("corpus: write cache: %w", err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("corpus: write cache: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return nil, fmt.Errorf("corpus: %w", err)
	}
	return readCorpus(path, p)
}

// readCorpus parses a cache file back into frames and metadata, and checks
// that it holds exactly the expected number of events.
func readCorpus(path string, p corpusParams) (*corpus, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	c := &corpus{
		frames: make([][]byte, 0, p.events),
		meta:   make([]eventMeta, 0, p.events),
	}
	authorIdx := make(map[string]int32, p.authorCount())
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var ev nostr.Event
		if err := ev.UnmarshalJSON(line); err != nil {
			return nil, fmt.Errorf("corpus: %s line %d: %w", path, len(c.frames)+1, err)
		}
		frame := make([]byte, 0, len(line)+10)
		frame = append(frame, `["EVENT",`...)
		frame = append(frame, line...)
		frame = append(frame, ']')
		a, ok := authorIdx[ev.PubKey]
		if !ok {
			a = int32(len(c.authors))
			authorIdx[ev.PubKey] = a
			c.authors = append(c.authors, ev.PubKey)
		}
		m := eventMeta{id: ev.ID, author: a, kind: int32(ev.Kind), createdAt: int64(ev.CreatedAt)}
		if t := ev.Tags.GetFirst([]string{"e", ""}); t != nil {
			m.eTag = (*t)[1]
		}
		c.frames = append(c.frames, frame)
		c.meta = append(c.meta, m)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("corpus: read %s: %w", path, err)
	}
	if len(c.frames) != p.events {
		return nil, fmt.Errorf("corpus: %s holds %d events, want %d", path, len(c.frames), p.events)
	}
	return c, nil
}

// authorKey derives author i's secret key from the seed; deterministic so
// that the corpus can be rebuilt identically anywhere.
func authorKey(seed uint64, i int) *btcec.PrivateKey {
	var buf [16]byte
	binary.BigEndian.PutUint64(buf[:8], seed)
	binary.BigEndian.PutUint64(buf[8:], uint64(i))
	h := sha256.Sum256(append([]byte("fleetmesh-relaybench-author"), buf[:]...))
	k, _ := btcec.PrivKeyFromBytes(h[:])
	return k
}

// generateEvents builds p.events events: one profile (kind 0) and one contact
// list (kind 3) per author, then a timeline of notes (1), reactions (7) and
// long-form articles (30023) with e/p/t tags. IDs are computed in order (so
// replies can point at earlier events); the Schnorr signatures, the expensive
// part, are computed in parallel afterwards.
func generateEvents(p corpusParams) ([]nostr.Event, error) {
	nAuthors := p.authorCount()
	if 2*nAuthors > p.events {
		return nil, fmt.Errorf("corpus: %d events is too few for %d authors", p.events, nAuthors)
	}
	rng := rand.New(rand.NewPCG(p.seed, 0x6a09e667f3bcc908))
	keys := make([]*btcec.PrivateKey, nAuthors)
	pubs := make([]string, nAuthors)
	for i := range keys {
		keys[i] = authorKey(p.seed, i)
		pubs[i] = hex.EncodeToString(schnorr.SerializePubKey(keys[i].PubKey()))
	}
	zipf := rand.NewZipf(rng, 1.2, 50, uint64(nAuthors-1))
	pickAuthor := func() int {
		if rng.IntN(2) == 0 {
			return rng.IntN(nAuthors)
		}
		return int(zipf.Uint64())
	}

	events := make([]nostr.Event, p.events)
	owner := make([]int, p.events)
	notes := make([]int, 0, p.events) // indexes of kind-1 events, reaction/reply targets
	for i := range events {
		ev := &events[i]
		ts := baseCreatedAt + int64(i)*timelineSeconds/int64(p.events) + rng.Int64N(600)
		ev.CreatedAt = nostr.Timestamp(ts)
		var a int
		switch {
		case i < nAuthors:
			a = i
			ev.Kind = 0
			ev.Content = fmt.Sprintf(`{"name":"bench-%d","about":%q,"picture":"https://example.invalid/a/%d.png"}`,
				i, words(rng, 40+rng.IntN(160)), i)
			ev.Tags = nostr.Tags{}
		case i < 2*nAuthors:
			a = i - nAuthors
			ev.Kind = 3
			n := 10 + rng.IntN(91)
			ev.Tags = make(nostr.Tags, 0, n)
			for range n {
				ev.Tags = append(ev.Tags, nostr.Tag{"p", pubs[rng.IntN(nAuthors)]})
			}
		default:
			a = pickAuthor()
			r := rng.IntN(100)
			switch {
			case r < 62 || len(notes) == 0:
				ev.Kind = 1
				ev.Content = words(rng, 50+rng.IntN(451))
				ev.Tags = nostr.Tags{}
				if len(notes) > 0 && rng.IntN(100) < 35 {
					t := pickTarget(rng, notes)
					ev.Tags = append(ev.Tags, nostr.Tag{"e", events[t].ID, "", "reply"}, nostr.Tag{"p", pubs[owner[t]]})
				}
				for range rng.IntN(4) * boolInt(rng.IntN(100) < 30) {
					ev.Tags = append(ev.Tags, nostr.Tag{"t", hashtags[rng.IntN(len(hashtags))]})
				}
				if rng.IntN(100) < 20 {
					ev.Tags = append(ev.Tags, nostr.Tag{"p", pubs[rng.IntN(nAuthors)]})
				}
			case r < 92:
				ev.Kind = 7
				t := pickTarget(rng, notes)
				ev.Content = reactions[rng.IntN(len(reactions))]
				ev.Tags = nostr.Tags{{"e", events[t].ID}, {"p", pubs[owner[t]]}}
			default:
				ev.Kind = 30023
				ev.Content = words(rng, 200+rng.IntN(301))
				ev.Tags = nostr.Tags{
					{"d", "article-" + strconv.Itoa(i)},
					{"title", words(rng, 20+rng.IntN(40))},
					{"published_at", strconv.FormatInt(ts, 10)},
					{"t", hashtags[rng.IntN(len(hashtags))]},
				}
			}
		}
		owner[i] = a
		ev.PubKey = pubs[a]
		h := sha256.Sum256(ev.Serialize())
		ev.ID = hex.EncodeToString(h[:])
		if ev.Kind == 1 {
			notes = append(notes, i)
		}
	}

	workers := runtime.NumCPU()
	var wg sync.WaitGroup
	errs := make([]error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < len(events); i += workers {
				id, _ := hex.DecodeString(events[i].ID)
				sig, err := schnorr.Sign(keys[owner[i]], id)
				if err != nil {
					errs[w] = fmt.Errorf("corpus: sign event %d: %w", i, err)
					return
				}
				events[i].Sig = hex.EncodeToString(sig.Serialize())
			}
		}()
	}
	wg.Wait()
	return events, errors.Join(errs...)
}

// pickTarget chooses a note to reply to or react to: half the time one of
// the 200 newest (a "hot" thread), otherwise any earlier note.
func pickTarget(rng *rand.Rand, notes []int) int {
	if rng.IntN(2) == 0 {
		return notes[len(notes)-1-rng.IntN(min(200, len(notes)))]
	}
	return notes[rng.IntN(len(notes))]
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

var hashtags = []string{"nostr", "bitcoin", "art", "music", "photography", "dev", "golang", "food", "travel",
	"zap", "meme", "science", "books", "privacy", "linux", "coffee", "plebchain", "grownostr", "news", "sports"}

var reactions = []string{"+", "+", "+", "🤙", "❤️", "-", "🔥"}

var wordList = strings.Fields(`the a relay event note key sign mesh node home anchor leaf client sync store
	query filter author kind tag time fast slow good day night coffee code test bench build run network peer
	message value price bitcoin lightning zap hello world again today tomorrow yesterday great small large
	über café naïve "quoted" back\slash tab	emoji🎉`)

// words returns about n bytes of pseudo-random text, with the odd newline,
// quote and non-ASCII character so that JSON escaping is exercised.
func words(rng *rand.Rand, n int) string {
	var b strings.Builder
	b.Grow(n + 16)
	for b.Len() < n {
		if b.Len() > 0 {
			if rng.IntN(25) == 0 {
				b.WriteByte('\n')
			} else {
				b.WriteByte(' ')
			}
		}
		b.WriteString(wordList[rng.IntN(len(wordList))])
	}
	return b.String()
}
