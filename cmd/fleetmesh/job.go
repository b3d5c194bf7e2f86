package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"fleetmesh.org/fleetmesh/compute"
)

func init() {
	register("job", "run a WebAssembly job on other nodes of the mesh through the running node (job run)", runJob)
}

// runJob is `fleetmesh job run`: the running node plans the job, runs it
// on executors of the mesh and judges their results (spec/compute.md).
func runJob(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "run" {
		args = args[1:]
	} else if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		return fmt.Errorf("%w: fleetmesh job %q: the verb is run (fleetmesh job run --home DIR --module FILE --input FILE)", errUsage, args[0])
	}
	fs := flag.NewFlagSet("job", flag.ContinueOnError)
	fs.SetOutput(stderr)
	h := homeFlag(fs)
	module := fs.String("module", "", "WebAssembly `file` to run (a WASI command: input on stdin, output on stdout)")
	input := fs.String("input", "", "`file` whose bytes are the job's input (- for stdin is not taken: give a file)")
	redundancy := fs.Int("redundancy", 0, "least number of executors (`K`; 0: [compute] redundancy)")
	asJSON := fs.Bool("json", false, "print one JSON object: output (base64), result_hash, executors, outcome, reason, runs")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *module == "" || *input == "" {
		return fmt.Errorf("%w: --module FILE and --input FILE are required", errUsage)
	}
	if *redundancy < 0 || *redundancy > compute.MaxRedundancy {
		return fmt.Errorf("%w: --redundancy %d: give 1 to %d", errUsage, *redundancy, compute.MaxRedundancy)
	}
	mod, err := os.ReadFile(*module)
	if err != nil {
		return fmt.Errorf("--module: %w", err)
	}
	if len(mod) > compute.MaxModuleBytes {
		return fmt.Errorf("--module %s: %d bytes, a job's module is at most %d", *module, len(mod), compute.MaxModuleBytes)
	}
	in, err := os.ReadFile(*input)
	if err != nil {
		return fmt.Errorf("--input: %w", err)
	}
	if len(in) > compute.MaxInputBytes {
		return fmt.Errorf("--input %s: %d bytes, a job's input is at most %d", *input, len(in), compute.MaxInputBytes)
	}
	c, err := newControl(*h)
	if err != nil {
		return err
	}
	var v compute.Verdict
	if err := c.do(ctx, "POST", "/jobs/run", compute.RunRequest{Module: mod, Input: in, Redundancy: *redundancy}, &v); err != nil {
		return err
	}
	if *asJSON {
		return printJSON(stdout, v)
	}
	fmt.Fprintf(stderr, "job %s: %s", v.JobID, v.Outcome)
	if v.Reason != "" {
		fmt.Fprintf(stderr, " (%s)", v.Reason)
	}
	fmt.Fprintf(stderr, "\nexecutors: %s\n", strings.Join(v.Executors, ", "))
	if v.Outcome != "ok" {
		return errors.New("no result accepted")
	}
	fmt.Fprintf(stderr, "result_hash: %s\n", v.ResultHash)
	_, err = stdout.Write(v.Output)
	return err
}
