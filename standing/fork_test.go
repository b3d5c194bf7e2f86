package standing

import (
	"sync"
	"testing"
	"time"

	"fleetmesh.org/fleetmesh/receipt"
)

// TestForkProofSpreadsAndZeroes: a 50-node in-memory mesh (a ring with
// chords; each node a goroutine with an inbox, passing a proof on to its
// neighbours the first time it sees it, as accounting spreads proofs)
// where every node holds every verified receipt. Two nodes sign two
// different receipts for one sequence number; the proof, given to one
// node far from them, reaches every node, and every node other than the
// forkers then gives both standing zero, while before it they had
// standing at their neighbours. Other nodes keep theirs.
func TestForkProofSpreadsAndZeroes(t *testing.T) {
	const n = 50
	k := keys(t, n)
	const w0 = 1_764_900_000 / 3600 * 3600
	var rs []*receipt.Receipt
	neigh := make([][]int, n)
	for i := range n {
		for _, d := range []int{1, 7} {
			j := (i + d) % n
			neigh[i] = append(neigh[i], j)
			neigh[j] = append(neigh[j], i)
			rs = append(rs, served(t, k[i], k[j], w0, 1, 10_000, 8_000))
		}
	}
	views := make([]*View, n)
	for i := range views {
		cfg := DefaultConfig()
		cfg.Walks = 4000
		v, err := NewView(k[i].DID(), cfg, nil, uint64(i))
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			if err := v.AddReceipt(r); err != nil {
				t.Fatal(err)
			}
		}
		v.Recompute(time.Unix(w0, 0))
		views[i] = v
	}
	x, y := 10, 11
	if views[12].Of(k[x].DID()) <= 0 || views[9].Of(k[x].DID()) <= 0 {
		t.Fatal("the forker had no standing at its neighbours before the proof")
	}
	// x and y both sign a second seq 1 with other figures.
	fork, err := receipt.NewForkProof(served(t, k[x], k[y], w0, 1, 10_000, 8_000), served(t, k[x], k[y], w0, 1, 99_000, 8_000))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := fork.Encode()

	inbox := make([]chan []byte, n)
	for i := range inbox {
		inbox[i] = make(chan []byte, 2*n)
	}
	var inFlight sync.WaitGroup
	var mu sync.Mutex
	reached := map[int]bool{}
	done := make(chan struct{})
	var nodes sync.WaitGroup
	for i := range n {
		nodes.Add(1)
		go func() {
			defer nodes.Done()
			for {
				select {
				case <-done:
					return
				case b := <-inbox[i]:
					p, err := receipt.DecodeForkProof(b)
					if err != nil {
						t.Errorf("node %d: %v", i, err)
					} else if err := views[i].AddForkProof(p); err != nil {
						t.Errorf("node %d: %v", i, err)
					}
					mu.Lock()
					first := !reached[i]
					reached[i] = true
					mu.Unlock()
					if first {
						for _, j := range neigh[i] {
							inFlight.Add(1)
							inbox[j] <- b
						}
					}
					inFlight.Done()
				}
			}
		}()
	}
	inFlight.Add(1)
	inbox[35] <- raw
	inFlight.Wait()
	close(done)
	nodes.Wait()
	if len(reached) != n {
		t.Fatalf("the proof reached %d of %d nodes", len(reached), n)
	}
	for i, v := range views {
		if i == x || i == y {
			continue
		}
		if s := v.Of(k[x].DID()) + v.Of(k[y].DID()); s != 0 {
			t.Errorf("node %d: the forkers keep standing %v", i, s)
		}
	}
	if views[12].Of(k[13].DID()) <= 0 || views[9].Of(k[8].DID()) <= 0 {
		t.Error("nodes outside the fork lost their standing")
	}
}
