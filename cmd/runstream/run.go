package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
)

// version is set at build time with -ldflags "-X main.version=v1.2.3".
var version = "dev"

// Main runs the command line. Tests drive it directly.
type Main struct {
	// Getenv reads the environment. Defaults to os.Getenv.
	Getenv func(string) string
	// Stdin answers interactive questions ("runstream run" at an input
	// request). Defaults to os.Stdin.
	Stdin io.Reader
	// onListen, if set, is called with the server's address once it
	// listens (tests use it to find a port chosen by the kernel).
	onListen func(addr string)
	// openBackend, if set, opens serve's store in place of openBackend
	// (tests use it to serve over a store of their making).
	openBackend func(context.Context, serveConfig, *slog.Logger) (*backend, error)
}

// errUsage marks errors in the command line; they exit with status 2.
var errUsage = errors.New("usage")

func exitCode(err error) int {
	if errors.Is(err, errUsage) {
		return 2
	}
	return 1
}

// Run executes the command named by args[0].
func (m *Main) Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if m.Getenv == nil {
		m.Getenv = os.Getenv
	}
	if m.Stdin == nil {
		m.Stdin = os.Stdin
	}
	if len(args) == 0 {
		printUsage(stderr)
		return fmt.Errorf("%w: no command given", errUsage)
	}
	switch cmd, rest := args[0], args[1:]; cmd {
	case "serve":
		return m.serve(ctx, rest, stdout, stderr)
	case "bench":
		return m.bench(ctx, rest, stdout, stderr)
	case "tail":
		return m.tail(ctx, rest, stdout, stderr)
	case "events":
		return m.events(ctx, rest, stdout, stderr)
	case "run":
		return m.runWorkflow(ctx, rest, stdout, stderr)
	case "auth":
		return m.authCommand(ctx, rest, stdout, stderr)
	case "import":
		return m.importCommand(ctx, rest, stdout, stderr)
	case "doctor":
		return m.doctor(ctx, rest, stdout, stderr)
	case "migrate":
		return m.migrate(ctx, rest, stdout, stderr)
	case "version", "--version", "-version":
		fmt.Fprintln(stdout, versionString())
		return nil
	case "help", "-h", "--help", "-help":
		printUsage(stdout)
		return nil
	default:
		printUsage(stderr)
		return fmt.Errorf("%w: unknown command %q", errUsage, cmd)
	}
}

func printUsage(w io.Writer) {
	fmt.Fprint(w, `runstream: a durable, replayable event stream for agent and workflow runs.

Usage:
  runstream serve [flags]     run the HTTP server
  runstream tail [flags] RUN  print a workflow run's events as they happen
  runstream events [flags] RUN
                              print a workflow run's stored events (with --thread T,
                              a thread run's) and exit
  runstream run [flags] FILE  publish a workflow (YAML or JSON), run it and follow it
  runstream bench [flags]     measure the SSE path under load (see docs/BENCHMARKS.md)
  runstream import deerflow --from DIR|FILE|URL
                              copy a DeerFlow deployment's run events, run rows
                              and feedback into the store (see docs/DEERFLOW.md)
  runstream doctor [flags]    check a deployment: store, durability, clock, listener, disk
  runstream migrate [flags]   apply the store's missing schema migrations (serve does at start)
  runstream auth hash-key     hash an API key read from stdin for --api-keys-file
  runstream auth new-key USER make an API key and its --api-keys-file line
  runstream version           print the version

Run "runstream COMMAND --help" for a command's flags. Every flag can also be
set with an environment variable: --max-body-bytes is RUNSTREAM_MAX_BODY_BYTES.
`)
}

func versionString() string {
	v, rev := version, ""
	if info, ok := debug.ReadBuildInfo(); ok {
		if v == "dev" && info.Main.Version != "" && info.Main.Version != "(devel)" {
			v = info.Main.Version
		}
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" {
				rev = " " + s.Value
			}
		}
	}
	return fmt.Sprintf("runstream %s%s %s %s/%s", v, rev, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// envName is the environment variable of a flag: RUNSTREAM_ and the flag
// name in upper case with dashes as underscores.
func envName(flagName string) string {
	return "RUNSTREAM_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// parseFlags applies RUNSTREAM_* variables as defaults, then the command
// line, so a flag beats its variable. The usage text names each variable.
func (m *Main) parseFlags(fs *flag.FlagSet, args []string, stderr io.Writer, synopsis string) error {
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: %s\n\nFlags (each also read from its environment variable):\n", synopsis)
		fs.VisitAll(func(f *flag.Flag) {
			fmt.Fprintf(stderr, "  --%s (env %s)\n    \t%s", f.Name, envName(f.Name), f.Usage)
			if f.DefValue != "" {
				fmt.Fprintf(stderr, " (default %q)", f.DefValue)
			}
			fmt.Fprintln(stderr)
		})
	}
	var envErr error
	fs.VisitAll(func(f *flag.Flag) {
		if v := m.Getenv(envName(f.Name)); v != "" && envErr == nil {
			if err := f.Value.Set(v); err != nil {
				envErr = fmt.Errorf("%w: %s=%q: %v", errUsage, envName(f.Name), v, err)
			}
		}
	})
	if envErr != nil {
		return envErr
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return flag.ErrHelp
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
	}
	return nil
}
