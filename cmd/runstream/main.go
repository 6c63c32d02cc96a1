// Command runstream is the runstream server and its command-line tools.
//
//	runstream serve      run the server (SQLite under ./runstream-data by default)
//	runstream import     copy a DeerFlow deployment's data into the store
//	runstream doctor     check a deployment and say what to fix
//	runstream version    print the version
//
// Run "runstream help" or "runstream COMMAND --help" for the flags; every
// flag can also be set with a RUNSTREAM_* environment variable.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		// The first signal starts a graceful shutdown; restoring the
		// default handling lets a second one end the process at once.
		<-ctx.Done()
		stop()
	}()
	err := (&Main{}).Run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "runstream:", err)
		os.Exit(exitCode(err))
	}
}
