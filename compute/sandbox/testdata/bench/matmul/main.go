// Command matmul is a compute-sandbox benchmark job: it reads n from
// stdin, fills two n×n float64 matrices from a fixed linear congruential
// sequence, multiplies them and prints the sum and trace of the product.
// Built with GOOS=wasip1 GOARCH=wasm.
package main

import (
	"fmt"
	"os"
)

func main() {
	var n int
	if _, err := fmt.Fscan(os.Stdin, &n); err != nil || n <= 0 || n > 1024 {
		fmt.Println("want a size from 1 to 1024 on stdin")
		os.Exit(1)
	}
	x := uint32(1)
	next := func() float64 {
		x = x*1664525 + 1013904223
		return float64(x>>8)/float64(1<<24) - 0.5
	}
	a, b, c := make([]float64, n*n), make([]float64, n*n), make([]float64, n*n)
	for i := range a {
		a[i], b[i] = next(), next()
	}
	for i := 0; i < n; i++ {
		for k := 0; k < n; k++ {
			aik := a[i*n+k]
			for j := 0; j < n; j++ {
				c[i*n+j] += aik * b[k*n+j]
			}
		}
	}
	var sum, trace float64
	for i := 0; i < n; i++ {
		trace += c[i*n+i]
		for j := 0; j < n; j++ {
			sum += c[i*n+j]
		}
	}
	fmt.Printf("%.9e %.9e\n", sum, trace)
}
