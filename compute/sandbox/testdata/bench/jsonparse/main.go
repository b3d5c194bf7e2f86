// Command jsonparse is a compute-sandbox benchmark job: it parses the JSON
// document on stdin into generic values, counts its nodes, re-encodes it
// and prints the count and the length of the re-encoding. Built with
// GOOS=wasip1 GOARCH=wasm.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
)

func count(v any) int {
	switch t := v.(type) {
	case map[string]any:
		n := 1
		for _, e := range t {
			n += count(e)
		}
		return n
	case []any:
		n := 1
		for _, e := range t {
			n += count(e)
		}
		return n
	}
	return 1
}

func main() {
	in, err := io.ReadAll(os.Stdin)
	if err != nil {
		os.Exit(1)
	}
	var v any
	if err := json.Unmarshal(in, &v); err != nil {
		fmt.Println("invalid:", err)
		os.Exit(1)
	}
	out, err := json.Marshal(v)
	if err != nil {
		os.Exit(1)
	}
	fmt.Println(count(v), len(out))
}
