// Command runstream is the runstream server and its command-line tools.
//
//	runstream serve      run the server (SQLite under ./runstream-data by default)
//	runstream tail       follow a workflow run's events
//	runstream events     print a workflow run's or a thread run's stored events
//	runstream run        publish a workflow, run it and follow it
//	runstream import     copy a DeerFlow deployment's data into the store
//	runstream doctor     check a deployment and say what to fix
//	runstream migrate    apply the store's schema migrations and exit
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
	ctx, stop := context.WithCancel(context.Background())
	go exitOnSecondSignal(stop)
	err := (&Main{}).Run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "runstream:", err)
		os.Exit(exitCode(err))
	}
}

// exitOnSecondSignal calls shutdown at the first SIGINT or SIGTERM, which
// starts a graceful shutdown, and ends the process at the second, as the
// signal's default handling would. Both are caught on one channel
// registered before either can arrive: restoring the default handling
// after the first, from a goroutine that may not have run yet, could let a
// second signal that came quickly be swallowed.
func exitOnSecondSignal(shutdown func()) {
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	<-signals
	shutdown()
	sig := <-signals
	signal.Reset(sig)
	if s, ok := sig.(syscall.Signal); ok {
		syscall.Kill(os.Getpid(), s)
	}
	os.Exit(1) // not reached when the signal ends the process
}
