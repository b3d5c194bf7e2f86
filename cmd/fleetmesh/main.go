// Command fleetmesh runs a fleetmesh node and its tools. It parses flags and
// wires packages together; protocol logic lives in the packages it calls.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
)

// command is one subcommand. Subcommands register themselves from the file
// that holds them, so adding one touches no shared list.
type command struct {
	summary string
	run     func(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error
}

var commands = map[string]command{}

func register(name, summary string, run func(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error) {
	commands[name] = command{summary: summary, run: run}
}

// errUsage marks an error whose message already says what to fix; main
// prints it without a stack of prefixes and exits 2.
var errUsage = errors.New("usage")

// verb is one verb of a command that has several (`didcomm pack`, …).
type verb struct {
	summary string
	run     func(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error
}

// verbs are a command's verbs by name.
type verbs map[string]verb

// run dispatches args[0] to its verb; no verb, or -h/--help/help, prints the
// verbs (the latter exits 0, as every command's --help does).
func (vs verbs) run(ctx context.Context, cmd string, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	names := make([]string, 0, len(vs))
	for n := range vs {
		names = append(names, n)
	}
	sort.Strings(names)
	list := func(w io.Writer) {
		fmt.Fprintf(w, "usage: fleetmesh %s <verb> [flags]\n\n", cmd)
		for _, n := range names {
			fmt.Fprintf(w, "  %-10s %s\n", n, vs[n].summary)
		}
		fmt.Fprintf(w, "\nRun 'fleetmesh %s <verb> -h' for a verb's flags.\n", cmd)
	}
	if len(args) == 0 {
		list(stderr)
		return fmt.Errorf("%w: fleetmesh %s needs a verb: %s", errUsage, cmd, strings.Join(names, ", "))
	}
	switch args[0] {
	case "-h", "--help", "-help", "help":
		list(stdout)
		return nil
	}
	v, ok := vs[args[0]]
	if !ok {
		return fmt.Errorf("%w: unknown %s verb %q (%s)", errUsage, cmd, args[0], strings.Join(names, ", "))
	}
	return v.run(ctx, args[1:], stdin, stdout, stderr)
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: fleetmesh <command> [flags]")
	fmt.Fprintln(w)
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-12s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Run 'fleetmesh <command> -h' for a command's flags.")
}

func main() {
	os.Exit(realMain(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func realMain(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	if args[0] == "--version" || args[0] == "-version" {
		args = append([]string{"version"}, args[1:]...)
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "fleetmesh: unknown command %q\n\n", args[0])
		usage(stderr)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := cmd.run(ctx, args[1:], stdin, stdout, stderr)
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		fmt.Fprintf(stderr, "fleetmesh %s: %v\n", args[0], err)
		return 2
	default:
		fmt.Fprintf(stderr, "fleetmesh %s: %v\n", args[0], err)
		return 1
	}
}
