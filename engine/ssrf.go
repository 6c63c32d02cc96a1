package engine

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"syscall"
	"time"

	"github.com/runstream/runstream/tracing"
)

// HTTPAllowList names the hosts and networks the http node and the
// http_get tool may reach although their addresses are not public
// (loopback, private, link-local, unspecified, and the like). The zero
// value allows none of them. It is immutable once parsed.
type HTTPAllowList struct {
	hosts    map[string]bool
	prefixes []netip.Prefix
}

// ParseHTTPAllowList parses a comma-separated list of host names
// ("api.internal"), addresses ("127.0.0.1", "::1") and CIDR networks
// ("10.0.0.0/8"). Empty entries are ignored.
func ParseHTTPAllowList(s string) (HTTPAllowList, error) {
	var l HTTPAllowList
	for _, entry := range strings.Split(s, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		if err := l.add(entry); err != nil {
			return HTTPAllowList{}, err
		}
	}
	return l, nil
}

func (l *HTTPAllowList) add(entry string) error {
	if p, err := netip.ParsePrefix(entry); err == nil {
		l.prefixes = append(l.prefixes, p.Masked())
		return nil
	}
	if a, err := netip.ParseAddr(entry); err == nil {
		a = a.Unmap()
		l.prefixes = append(l.prefixes, netip.PrefixFrom(a, a.BitLen()))
		return nil
	}
	host := strings.ToLower(strings.TrimSuffix(entry, "."))
	if host == "" || strings.ContainsAny(host, "/:@ ") {
		return fmt.Errorf("http allow list: %q is not a host name, an address or a CIDR network", entry)
	}
	if l.hosts == nil {
		l.hosts = map[string]bool{}
	}
	l.hosts[host] = true
	return nil
}

// String lists the entries, for logs.
func (l HTTPAllowList) String() string {
	var parts []string
	for h := range l.hosts {
		parts = append(parts, h)
	}
	for _, p := range l.prefixes {
		parts = append(parts, p.String())
	}
	return strings.Join(parts, ",")
}

func (l HTTPAllowList) allowsHost(host string) bool {
	return l.hosts[strings.ToLower(strings.TrimSuffix(host, "."))]
}

func (l HTTPAllowList) allowsAddr(a netip.Addr) bool {
	for _, p := range l.prefixes {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// nonPublic are networks that are not the public internet, besides those
// netip.Addr's methods name: shared address space, IETF protocol
// assignments, benchmarking, reserved, NAT64 and 6to4 (which embed an
// IPv4 address), site-local and documentation.
var nonPublic = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("192.0.2.0/24"),
	netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("198.51.100.0/24"),
	netip.MustParsePrefix("203.0.113.0/24"),
	netip.MustParsePrefix("240.0.0.0/4"),
	netip.MustParsePrefix("64:ff9b::/96"),
	netip.MustParsePrefix("64:ff9b:1::/48"),
	netip.MustParsePrefix("2002::/16"),
	netip.MustParsePrefix("fec0::/10"),
	netip.MustParsePrefix("2001:db8::/32"),
}

// addressClass names why a is not public ("loopback", "private"…), or is
// "" for a public address. IPv4-mapped IPv6 addresses are judged as the
// IPv4 address they carry.
func addressClass(a netip.Addr) string {
	a = a.Unmap()
	switch {
	case a.IsLoopback():
		return "loopback"
	case a.IsUnspecified():
		return "unspecified"
	case a.IsPrivate():
		return "private"
	case a.IsLinkLocalUnicast(), a.IsLinkLocalMulticast():
		return "link-local"
	case a.IsMulticast(), a.IsInterfaceLocalMulticast():
		return "multicast"
	}
	for _, p := range nonPublic {
		if p.Contains(a) {
			return "reserved"
		}
	}
	return ""
}

// errAddressNotAllowed is wrapped by the error of a connection the guard
// refused.
var errAddressNotAllowed = errors.New("the address is not allowed")

// AddressNotAllowedError is a connection the SSRF guard refused: the
// address is not public and not in the allow list.
type AddressNotAllowedError struct {
	Addr  netip.Addr
	Class string
}

func (e *AddressNotAllowedError) Error() string {
	return fmt.Sprintf("%s address %s is not allowed (allow it with --http-node-allow)", e.Class, e.Addr)
}

func (e *AddressNotAllowedError) Unwrap() error { return errAddressNotAllowed }

// guardControl is a net.Dialer Control: it refuses a connection to an
// address that is not public, unless allow lists it. It runs on the
// resolved address of every connection, so a host name that resolves to
// a private address, and every redirect, are judged too.
func guardControl(allow HTTPAllowList) func(network, address string, _ syscall.RawConn) error {
	return func(network, address string, _ syscall.RawConn) error {
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return fmt.Errorf("http guard: %s: %w", address, errAddressNotAllowed)
		}
		a := ap.Addr().Unmap()
		if class := addressClass(a); class != "" && !allow.allowsAddr(a) {
			return &AddressNotAllowedError{Addr: a, Class: class}
		}
		return nil
	}
}

// GuardedClient returns a client that reaches only public addresses and
// the hosts and networks of allow: the client of the http node, the
// http_get tool and the openai llm provider, whose addresses a
// definition chooses.
func GuardedClient(allow HTTPAllowList) *http.Client { return guardedClient(allow) }

// guardedClient returns the default client of the http node: no proxy
// (a proxy would hide the address actually reached), a dialer that
// refuses addresses that are not public unless allow lists them, at
// most maxHTTPRedirects redirects, each dialled through the same guard,
// and, for a traced node attempt, a client span per request whose
// traceparent goes with it (tracing.Transport).
func guardedClient(allow HTTPAllowList) *http.Client {
	guarded := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second, Control: guardControl(allow)}
	open := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	transport := &http.Transport{
		Proxy: nil,
		DialContext: func(ctx context.Context, network, address string) (net.Conn, error) {
			host, _, err := net.SplitHostPort(address)
			if err == nil && allow.allowsHost(host) {
				return open.DialContext(ctx, network, address)
			}
			return guarded.DialContext(ctx, network, address)
		},
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          100,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	return &http.Client{Transport: tracing.Transport(transport), CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if len(via) >= maxHTTPRedirects {
			return fmt.Errorf("more than %d redirects", maxHTTPRedirects)
		}
		if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
			return fmt.Errorf("a redirect to a %s URL", req.URL.Scheme)
		}
		return nil
	}}
}
