package negentropy

import (
	"math/rand/v2"
	"testing"
)

// benchSetSize and benchDiff are the project's benchmark: two sets of a
// million items that differ by 0.1%.
const (
	benchSetSize = 1_000_000
	benchDiff    = 1_000
)

// benchPair is a prepared pair of sorted sets.
type benchPair struct {
	a, b *Vector
	diff int
}

// scatteredPair: each side holds 1,000,000 items; 500 of each side's are
// missing on the other, spread uniformly over the whole time span.
func scatteredPair(b *testing.B) benchPair {
	r := rand.New(rand.NewPCG(11, 12))
	ts := func() uint64 { return 1_600_000_000 + r.Uint64N(100_000_000) }
	a, bb := makeSets(r, benchSetSize-benchDiff/2, benchDiff/2, benchDiff/2, ts)
	return vectors(b, a, bb, benchDiff)
}

// recentPair: the responder holds 1,000,000 items, the initiator the same
// but for the newest 1,000 (a node that was offline for a while).
func recentPair(b *testing.B) benchPair {
	r := rand.New(rand.NewPCG(13, 14))
	var a, bb []Item
	for i := range benchSetSize {
		it := randomItem(r, 1_600_000_000+uint64(i)*100+r.Uint64N(100))
		bb = append(bb, it)
		if i < benchSetSize-benchDiff {
			a = append(a, it)
		}
	}
	return vectors(b, a, bb, benchDiff)
}

func vectors(b *testing.B, a, bb []Item, diff int) benchPair {
	va, err := NewVector(a)
	if err != nil {
		b.Fatal(err)
	}
	vb, err := NewVector(bb)
	if err != nil {
		b.Fatal(err)
	}
	return benchPair{a: va, b: vb, diff: diff}
}

// BenchmarkReconcile1M reconciles two million-item sets that differ by
// 1,000 items, in process, and reports the bytes each way, the round trips
// and the ratio of all bytes sent to the size of the difference itself
// (1,000 ids × 32 bytes). The "naive" case is the peer to compare against:
// each side sends its full id list. Run it with
//
//	go test -run XXX -bench BenchmarkReconcile1M -benchtime 3x ./negentropy/
func BenchmarkReconcile1M(b *testing.B) {
	pairs := []struct {
		name string
		make func(*testing.B) benchPair
	}{
		{"scattered", scatteredPair},
		{"recent", recentPair},
	}
	for _, p := range pairs {
		var pair benchPair
		for _, lim := range []struct {
			name  string
			limit int
		}{{"unlimited", 0}, {"frames_60000", 60_000}} {
			b.Run(p.name+"/negentropy_"+lim.name, func(b *testing.B) {
				if pair.a == nil {
					pair = p.make(b)
				}
				cfg := Config{FrameSizeLimit: lim.limit}
				b.ReportAllocs()
				var up, down, rounds, found int
				b.ResetTimer()
				for range b.N {
					up, down, rounds, found = benchSync(b, pair, cfg)
				}
				if found != pair.diff {
					b.Fatalf("found %d differences, want %d", found, pair.diff)
				}
				reportBytes(b, up, down, rounds, pair.diff)
			})
		}
		b.Run(p.name+"/naive_full_id_lists", func(b *testing.B) {
			if pair.a == nil {
				pair = p.make(b)
			}
			var up, down, found int
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				up, down, found = benchNaive(b, pair)
			}
			if found != pair.diff {
				b.Fatalf("found %d differences, want %d", found, pair.diff)
			}
			reportBytes(b, up, down, 1, pair.diff)
		})
	}
}

func reportBytes(b *testing.B, up, down, rounds, diff int) {
	b.ReportMetric(float64(up), "bytes-up")
	b.ReportMetric(float64(down), "bytes-down")
	b.ReportMetric(float64(rounds), "round-trips")
	b.ReportMetric(float64(up+down)/float64(diff*IDSize), "x-diff-size")
}

// benchSync runs one reconciliation and returns bytes up, bytes down, round
// trips and the number of differences the initiator learned.
func benchSync(b *testing.B, p benchPair, cfg Config) (up, down, rounds, found int) {
	in, err := NewInitiator(p.a, cfg)
	if err != nil {
		b.Fatal(err)
	}
	resp, err := NewResponder(p.b, cfg)
	if err != nil {
		b.Fatal(err)
	}
	msg, err := in.Initiate()
	if err != nil {
		b.Fatal(err)
	}
	for {
		rounds++
		up += len(msg)
		reply, err := resp.Reconcile(msg)
		if err != nil {
			b.Fatal(err)
		}
		down += len(reply)
		st, err := in.Reconcile(reply)
		if err != nil {
			b.Fatal(err)
		}
		found += len(st.Have) + len(st.Need)
		if st.Done() {
			return up, down, rounds, found
		}
		msg = st.Next
	}
}

// benchNaive is the exchange negentropy replaces: each side sends all its
// ids (32 bytes each) and the initiator diffs them against a set of its own.
func benchNaive(b *testing.B, p benchPair) (up, down, found int) {
	list := func(v *Vector) []byte {
		out := make([]byte, 0, v.Size()*IDSize)
		if err := v.Iterate(0, v.Size(), func(_ int, it Item) bool {
			out = append(out, it.ID[:]...)
			return true
		}); err != nil {
			b.Fatal(err)
		}
		return out
	}
	sent, back := list(p.a), list(p.b)
	theirs := make(map[ID]struct{}, len(back)/IDSize)
	for i := 0; i < len(back); i += IDSize {
		theirs[ID(back[i:i+IDSize])] = struct{}{}
	}
	ours := make(map[ID]struct{}, len(sent)/IDSize)
	for i := 0; i < len(sent); i += IDSize {
		id := ID(sent[i : i+IDSize])
		ours[id] = struct{}{}
		if _, ok := theirs[id]; !ok {
			found++
		}
	}
	for id := range theirs {
		if _, ok := ours[id]; !ok {
			found++
		}
	}
	return len(sent), len(back), found
}
