package main

import (
	"flag"
	"fmt"
	"net/http"
	"os"
	"strings"
)

// credentialFile is the --credential-file flag of the commands that call a
// server (tail, run): a file holding the API key or JWT they send as
// "Authorization: Bearer". A file, not a flag value, so that the
// credential does not show in the process list.
type credentialFile struct{ path string }

func (c *credentialFile) add(fs *flag.FlagSet) {
	fs.StringVar(&c.path, "credential-file", "", "file holding the API key or JWT sent as Authorization: Bearer, for a server with --auth token or jwt (default: none)")
}

// httpClient returns http.DefaultClient without a credential file, else a
// client that sends the file's credential with every request.
func (c *credentialFile) httpClient() (*http.Client, error) {
	if c.path == "" {
		return http.DefaultClient, nil
	}
	data, err := os.ReadFile(c.path)
	if err != nil {
		return nil, fmt.Errorf("%w: --credential-file: %v", errUsage, err)
	}
	cred := strings.TrimSpace(string(data))
	if cred == "" || strings.ContainsAny(cred, " \t\r\n") {
		return nil, fmt.Errorf("%w: --credential-file %s must hold one credential", errUsage, c.path)
	}
	return &http.Client{Transport: bearerTransport{credential: cred, base: http.DefaultTransport}}, nil
}

// bearerTransport adds the Authorization header to each request.
type bearerTransport struct {
	credential string
	base       http.RoundTripper
}

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.credential)
	return b.base.RoundTrip(r)
}
