// Command sha256 is a compute-sandbox benchmark job: it hashes its stdin
// 64 times over (each round hashes the input and the previous digest) and
// prints the last digest in hex. Built with GOOS=wasip1 GOARCH=wasm.
package main

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
)

func main() {
	in, err := io.ReadAll(os.Stdin)
	if err != nil {
		os.Exit(1)
	}
	var sum [32]byte
	for i := 0; i < 64; i++ {
		h := sha256.New()
		h.Write(sum[:])
		h.Write(in)
		h.Sum(sum[:0])
	}
	os.Stdout.WriteString(hex.EncodeToString(sum[:]) + "\n")
}
