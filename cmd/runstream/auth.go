package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"unicode"

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
			if errors.Is(err, flag.ErrHelp) {
				return nil
			}
			return err
		}
		line, err := bufio.NewReader(io.LimitReader(m.Stdin, 4096)).ReadString('\n')
		if err != nil && err != io.EOF {
			return fmt.Errorf("read the key from standard input: %w", err)
		}
		key := strings.TrimRight(line, "\r\n")
		if len(key) < auth.MinKeyLength {
			return fmt.Errorf("%w: the key on standard input has %d bytes, at least %d are needed: make one with runstream auth new-key USER", errUsage, len(key), auth.MinKeyLength)
		}
		hash, err := auth.HashKey(key)
		if err != nil {
			return fmt.Errorf("%w: %v", errUsage, err)
		}
		fmt.Fprintln(stdout, hash)
		return nil
	case "new-key":
		const newKeySynopsis = "runstream auth new-key USER"
		for _, a := range args[1:] {
			if a == "-h" || a == "-help" || a == "--help" {
				fmt.Fprintf(stdout, "Usage: %s\n\nPrints a new API key and its line for --api-keys-file.\n", newKeySynopsis)
				return nil
			}
		}
		if len(args) != 2 {
			return fmt.Errorf("%w: new-key takes one USER; usage: %s", errUsage, newKeySynopsis)
		}
		user := args[1]
		if user == "" || strings.HasPrefix(user, "-") || strings.ContainsFunc(user, unicode.IsSpace) {
			return fmt.Errorf("%w: USER must be one word that does not start with '-' (the keys file separates the user from the hash with a space); usage: %s", errUsage, newKeySynopsis)
		}
		key := auth.NewKey()
		hash, err := auth.HashKey(key)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "key: %s\nkeys-file line: %s %s\n", key, user, hash)
		return nil
	case "help", "-h", "--help":
		fmt.Fprintf(stdout, "Usage: %s\n", synopsis)
		return nil
	}
	return fmt.Errorf("%w: unknown auth subcommand %q (hash-key, new-key)", errUsage, args[0])
}
