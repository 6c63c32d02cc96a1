package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/runstream/runstream/auth"
)

// authCommand runs "runstream auth SUBCOMMAND": hash-key reads an API key
// from standard input (never the command line, which other users of the
// machine can see) and prints the hash for --api-keys-file; new-key makes
// a key and prints it with the keys-file line for a user.
func (m *Main) authCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	const synopsis = "runstream auth hash-key < KEY_FILE | runstream auth new-key USER"
	if len(args) == 0 {
		fmt.Fprintf(stderr, "Usage: %s\n", synopsis)
		return fmt.Errorf("%w: auth needs a subcommand: hash-key or new-key", errUsage)
	}
	switch args[0] {
	case "hash-key":
		fs := flag.NewFlagSet("auth hash-key", flag.ContinueOnError)
		if err := m.parseFlags(fs, args[1:], stderr, "runstream auth hash-key < KEY_FILE"); err != nil {
			return err
		}
		line, err := bufio.NewReader(io.LimitReader(m.Stdin, 4096)).ReadString('\n')
		if err != nil && err != io.EOF {
			return fmt.Errorf("read the key from standard input: %w", err)
		}
		hash, err := auth.HashKey(strings.TrimRight(line, "\r\n"))
		if err != nil {
			return fmt.Errorf("%w: %v", errUsage, err)
		}
		fmt.Fprintln(stdout, hash)
		return nil
	case "new-key":
		if len(args) != 2 || strings.TrimSpace(args[1]) != args[1] || args[1] == "" || strings.ContainsAny(args[1], " \t") {
			return fmt.Errorf("%w: usage: runstream auth new-key USER", errUsage)
		}
		key := auth.NewKey()
		hash, err := auth.HashKey(key)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "key: %s\nkeys-file line: %s %s\n", key, args[1], hash)
		return nil
	case "help", "-h", "--help":
		fmt.Fprintf(stdout, "Usage: %s\n", synopsis)
		return nil
	}
	return fmt.Errorf("%w: unknown auth subcommand %q (hash-key, new-key)", errUsage, args[0])
}
