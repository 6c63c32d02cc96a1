package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/runstream/runstream/auth"
	"github.com/runstream/runstream/httpapi"
)

// Auth modes of serve --auth.
const (
	authNone  = "none"
	authToken = "token"
	authJWT   = "jwt"
)

// Defaults of the per-user append rate with --auth token or jwt. With
// --auth none every request is the one local user, so a per-user rate
// would cap the whole instance: there is none by default.
const (
	defaultAppendRate  = 200
	defaultAppendBurst = 400
	// appendRateByMode is --append-rate's default: defaultAppendRate with
	// authentication, no limit without.
	appendRateByMode = -1
)

// authFlags are serve's authentication and per-user limit flags.
type authFlags struct {
	mode           string
	insecureNoAuth bool
	apiKeysFile    string
	jwtKeysFile    string
	jwtIssuer      string
	jwtAudience    string
	jwtLeeway      time.Duration
	sessionKeyFile string
	sessionTTL     time.Duration
	cookieSecure   bool
	corsOrigins    string
	appendRate     float64
	appendBurst    int
	streamLifetime time.Duration
	// keysReloadInterval is how often the key file is checked for a
	// change (0: only at SIGHUP).
	keysReloadInterval time.Duration

	// api is what build made of the flags, for httpapi.Config.Auth.
	api httpapi.AuthConfig
	// reload re-reads the key file (SIGHUP, or a change seen by
	// reloadKeys); nil in mode none.
	reload func() error
	// keysFile is the file reload reads; "" in mode none.
	keysFile string
	// keysLoaded is the key file as stat'ed just before build read it
	// (nil: it could not be), from which reloadKeys tells a change: a
	// change made between that read and reloadKeys's start (while the
	// store opens) is seen, not taken for the file the keys came from.
	keysLoaded os.FileInfo
}

// add registers the flags on fs.
func (a *authFlags) add(fs *flag.FlagSet) {
	fs.StringVar(&a.mode, "auth", authNone, "how callers authenticate: none (one local user; loopback addresses only unless --insecure-no-auth), token (API keys of --api-keys-file) or jwt (tokens verified with --jwt-keys-file)")
	fs.BoolVar(&a.insecureNoAuth, "insecure-no-auth", false, "allow --auth none on a non-loopback --addr: anyone who reaches the port acts as the one local user")
	fs.StringVar(&a.apiKeysFile, "api-keys-file", "", "--auth token: a file of \"user-id sha256:HEX\" lines (runstream auth hash-key makes the hash); re-read on SIGHUP and when it changes (--keys-reload-interval)")
	fs.StringVar(&a.jwtKeysFile, "jwt-keys-file", "", "--auth jwt: the verification keys, a JWKS document (oct: HS256, RSA: RS256, EC P-256: ES256) or PEM public keys; re-read on SIGHUP and when it changes (--keys-reload-interval)")
	fs.DurationVar(&a.keysReloadInterval, "keys-reload-interval", 10*time.Second, "how often the key file (--api-keys-file, --jwt-keys-file) is checked for a change; a change that stays for one more interval is reloaded, as at SIGHUP, so that every instance sharing the file applies it (0: only at SIGHUP)")
	fs.StringVar(&a.jwtIssuer, "jwt-issuer", "", "--auth jwt: the iss every token must carry (default: not checked)")
	fs.StringVar(&a.jwtAudience, "jwt-audience", "", "--auth jwt: the aud every token must carry (default: not checked)")
	fs.DurationVar(&a.jwtLeeway, "jwt-leeway", auth.DefaultLeeway, "--auth jwt: clock skew allowed on exp and nbf")
	fs.StringVar(&a.sessionKeyFile, "session-key-file", "", "the key that signs browser session cookies (at least 32 bytes, e.g. openssl rand -hex 32); give every instance sharing a database the same file (default: a random key, so sessions end with the process and do not cross instances)")
	fs.DurationVar(&a.sessionTTL, "session-ttl", auth.DefaultSessionTTL, "how long a browser session lasts (never past the credential it was made from)")
	fs.BoolVar(&a.cookieSecure, "cookie-secure", false, "mark the session cookie Secure and expect https Origins: set it when clients reach the server over TLS (a terminating proxy included)")
	fs.StringVar(&a.corsOrigins, "cors-origins", "", "origins (comma-separated scheme://host[:port]) whose pages may call the API with credentials (default: none, CORS off; * is refused)")
	fs.Float64Var(&a.appendRate, "append-rate", appendRateByMode, fmt.Sprintf("thread event appends (requests) per second each user may sustain on this instance, the next answering 429 RATE_LIMITED (0: no limit; default: %d with --auth token or jwt, no limit with --auth none, whose one user is every caller)", defaultAppendRate))
	fs.IntVar(&a.appendBurst, "append-burst", defaultAppendBurst, "appends a user may make at once, above --append-rate")
	fs.DurationVar(&a.streamLifetime, "max-stream-lifetime", time.Hour, "longest an SSE stream stays open; the client resumes with Last-Event-ID (a stream also ends when its credential or session expires, or when the key it was opened with, an API key or a JWT's, is removed from its keys file and the file reloaded)")
}

// build checks the flags against addr and loads the key files. In mode
// none it refuses a non-loopback addr unless --insecure-no-auth, and warns
// in the log either way.
func (a *authFlags) build(addr string, logger *slog.Logger) error {
	if (a.appendRate < 0 && a.appendRate != appendRateByMode) || a.appendBurst < 0 {
		return fmt.Errorf("%w: --append-rate and --append-burst must not be negative", errUsage)
	}
	if a.appendRate == appendRateByMode {
		a.appendRate = defaultAppendRate
		if a.mode == authNone {
			a.appendRate = 0
		}
	}
	if a.sessionTTL <= 0 || a.streamLifetime <= 0 {
		return fmt.Errorf("%w: --session-ttl and --max-stream-lifetime must be positive", errUsage)
	}
	if a.keysReloadInterval < 0 {
		return fmt.Errorf("%w: --keys-reload-interval must not be negative", errUsage)
	}
	origins, err := httpapi.ParseCORSOrigins(a.corsOrigins)
	if err != nil {
		return fmt.Errorf("%w: --cors-origins: %v", errUsage, err)
	}
	a.api = httpapi.AuthConfig{CookieSecure: a.cookieSecure, CORSOrigins: origins}
	switch a.mode {
	case authNone:
		if !httpapi.LoopbackHost(addr) && !a.insecureNoAuth {
			return fmt.Errorf("%w: --addr %s is not a loopback address and --auth is none: anyone who reaches it would act as the one local user; "+
				"set --auth token or --auth jwt, or pass --insecure-no-auth to serve without authentication anyway", errUsage, addr)
		}
		// On loopback, the server also refuses what another site's page
		// can make a browser here send it (DNS rebinding, cross-site
		// writes); --insecure-no-auth serves anyone who reaches it.
		a.api.LocalOnly = !a.insecureNoAuth
		logger.Warn("authentication is off (--auth none): every request acts as the one local user", "user", httpapi.LocalUser, "addr", addr)
		return nil
	case authToken:
		if a.apiKeysFile == "" {
			return fmt.Errorf("%w: --auth token needs --api-keys-file", errUsage)
		}
		a.keysLoaded, _ = os.Stat(a.apiKeysFile)
		keys, err := auth.LoadKeys(a.apiKeysFile)
		if err != nil {
			return fmt.Errorf("%w: --api-keys-file: %v", errUsage, err)
		}
		a.api.Credentials, a.reload, a.keysFile = keys, keys.Reload, a.apiKeysFile
		logger.Info("authentication: API keys", "keys", keys.Len(), "file", a.apiKeysFile)
	case authJWT:
		if a.jwtKeysFile == "" {
			return fmt.Errorf("%w: --auth jwt needs --jwt-keys-file", errUsage)
		}
		leeway := a.jwtLeeway
		if leeway == 0 {
			leeway = -1 // JWTConfig: zero means the default, negative none
		}
		a.keysLoaded, _ = os.Stat(a.jwtKeysFile)
		v, err := auth.NewJWT(auth.JWTConfig{KeysFile: a.jwtKeysFile, Issuer: a.jwtIssuer, Audience: a.jwtAudience, Leeway: leeway})
		if err != nil {
			return fmt.Errorf("%w: --jwt-keys-file: %v", errUsage, err)
		}
		a.api.Credentials, a.reload, a.keysFile = v, v.Reload, a.jwtKeysFile
		logger.Info("authentication: JWT", "keys", v.Len(), "file", a.jwtKeysFile, "issuer", a.jwtIssuer, "audience", a.jwtAudience)
	default:
		return fmt.Errorf("%w: --auth must be none, token or jwt, not %q", errUsage, a.mode)
	}
	key := auth.RandomSessionKey()
	if a.sessionKeyFile != "" {
		if key, err = auth.ReadSessionKey(a.sessionKeyFile); err != nil {
			return fmt.Errorf("%w: --session-key-file: %v", errUsage, err)
		}
	} else {
		logger.Warn("no --session-key-file: browser sessions use a random key, end with this process and are not accepted by other instances")
	}
	if a.api.Sessions, err = auth.NewSessions(key, a.sessionTTL, nil); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	return nil
}

// printWarning writes, in mode none, the warning that goes beside the
// "listening on" lines of stdout.
func (a *authFlags) printWarning(stdout io.Writer) {
	if a.mode == authNone {
		fmt.Fprintf(stdout, "WARNING: --auth none: every request acts as the one local user %q, with no authentication (see docs/SECURITY.md)\n", httpapi.LocalUser)
	}
}

// checkListener refuses, with --auth none and without
// --insecure-no-auth, a listener bound to an address that is not
// loopback. The --addr check before it reads the host name; a name such
// as foo.localhost, or localhost in an unusual hosts file, is resolved by
// the listen, and only the address it bound tells where the server is
// reachable.
func (a *authFlags) checkListener(addr net.Addr) error {
	if a.mode != authNone || a.insecureNoAuth {
		return nil
	}
	if tcp, ok := addr.(*net.TCPAddr); ok && tcp.IP.IsLoopback() {
		return nil
	}
	return fmt.Errorf("%w: serve listens on %s, which is not a loopback address, and --auth is none: "+
		"set --auth token or --auth jwt, or pass --insecure-no-auth to serve without authentication anyway", errUsage, addr)
}

// reloadKeys re-reads the key file at every SIGHUP and, every
// --keys-reload-interval, when it changed, until ctx ends. A key removed
// from its file (an API key, or a JWT verification key) is revoked at the
// reload: requests with it (with the tokens it signed), and the sessions
// made from them, are refused, and the streams opened with either end
// (auth.Keys.Reload, auth.JWT.Reload, httpapi.Server.AfterRevoke). What
// the reload could not apply is logged: for API keys, the broken lines
// (the others apply, so a removed key is revoked whatever else the file
// holds); for JWT keys, the whole file (the keys in use stay).
//
// A change is the file's size, modification time or identity (a new file
// moved or linked in its place, as a Kubernetes secret is updated). It is
// reloaded once it has stayed for one more interval, so that a file being
// written is not read half-way, which could revoke the keys of its lines
// not yet written.
func (a *authFlags) reloadKeys(ctx context.Context, logger *slog.Logger) {
	if a.reload == nil {
		return
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	var tick <-chan time.Time
	if a.keysReloadInterval > 0 {
		ticker := time.NewTicker(a.keysReloadInterval)
		tick = ticker.C
		context.AfterFunc(ctx, ticker.Stop)
	}
	watch := keysFileWatch{loaded: a.keysLoaded}
	// reload reads the file, which info describes as stat'ed just before.
	reload := func(why string, info os.FileInfo) {
		watch.reloaded(info)
		if err := a.reload(); err != nil {
			logger.Error("reload the keys", "auth", a.mode, "on", why, "error", err)
			return
		}
		logger.Info("keys reloaded", "auth", a.mode, "on", why)
	}
	go func() {
		defer signal.Stop(hup)
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				info, _ := os.Stat(a.keysFile)
				reload("SIGHUP", info)
			case <-tick:
				info, err := os.Stat(a.keysFile)
				switch watch.tick(info, err) {
				case keysUnreadable:
					logger.Warn("the key file cannot be read; the keys in use stay", "auth", a.mode, "error", err)
				case keysChanged:
					reload("change of "+a.keysFile, info)
				}
			}
		}
	}()
}

// keysFileWatch is what the polling of a keys file knows of it: the file
// as stat'ed before it was last read (nil: it could not be), and a change
// seen but not reloaded yet, waiting to stay one more interval.
type keysFileWatch struct {
	loaded, seen os.FileInfo
}

// What a poll of the keys file calls for (keysFileWatch.tick).
const (
	keysUnchanged  = iota // nothing: as loaded, or a change not yet stable
	keysChanged           // reload: a change that stayed one interval
	keysUnreadable        // warn: the file just became unreadable
)

// tick takes the file's stat of one poll (info, or err) and tells what it
// calls for. A change (size, modification time or identity) is reloaded
// at the poll after the one that saw it, if the file is still as seen
// then: a file being written is not read half-way.
func (w *keysFileWatch) tick(info os.FileInfo, err error) int {
	switch {
	case err != nil:
		warn := w.loaded != nil || w.seen != nil
		w.loaded, w.seen = nil, nil
		if warn {
			return keysUnreadable
		}
	case sameFile(info, w.loaded):
		w.seen = nil
	case !sameFile(info, w.seen):
		w.seen = info // changed: reload if it stays so
	default: // the file as seen, and stat'ed, one interval ago
		return keysChanged
	}
	return keysUnchanged
}

// reloaded records that the file, as info describes it, was read.
func (w *keysFileWatch) reloaded(info os.FileInfo) { w.loaded, w.seen = info, nil }

// sameFile reports whether a and b (either may be nil) describe the same
// file at the same size and modification time.
func sameFile(a, b os.FileInfo) bool {
	return a != nil && b != nil && os.SameFile(a, b) && a.Size() == b.Size() && a.ModTime().Equal(b.ModTime())
}
