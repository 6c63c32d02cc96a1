package httpapi

import (
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/runstream/runstream"
)

// AppendRate bounds how fast each user may append thread run events, with
// a token bucket per user on this instance.
type AppendRate struct {
	// PerSecond is the sustained rate of append requests per user. Zero or
	// negative: no limit.
	PerSecond float64
	// Burst is how many appends a user may make at once after being idle.
	// Defaults to PerSecond rounded up (at least 1).
	Burst int
}

// limitMetrics counts the outcomes of the per-user limits, by limit
// (streams, appends) and outcome (allowed, limited); never by user.
func newLimitMetrics(reg prometheus.Registerer) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "runstream_user_limit_total",
		Help: "Requests subject to a per-user limit, by limit and outcome.",
	}, []string{"limit", "outcome"})
	reg.MustRegister(c)
	return c
}

// countLimit records the outcome of a per-user limit check.
func (s *Server) countLimit(limit string, err error) {
	outcome := "allowed"
	if err != nil {
		outcome = "limited"
	}
	s.limitOutcomes.WithLabelValues(limit, outcome).Inc()
}

// limitAppends answers RATE_LIMITED (429, with Retry-After) to a user who
// has used up their append bucket, before h reads the body.
func (s *Server) limitAppends(h handlerFunc) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		wait := s.appends.take(userOf(r), time.Now())
		if wait > 0 {
			err := runstream.Errorf(runstream.CodeRateLimited, "too many appends: at most %g per second per user", s.appends.rate).
				WithDetail("limit", s.appends.rate)
			s.countLimit("appends", err)
			w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(wait.Seconds()))))
			return err
		}
		s.countLimit("appends", nil)
		return h(w, r)
	}
}

// userBuckets holds a token bucket per user. Idle users' buckets, full
// again, are dropped, so the map holds only recently active users.
type userBuckets struct {
	rate, burst float64 // rate 0: no limit

	mu        sync.Mutex
	buckets   map[string]*bucket
	lastSweep time.Time
}

type bucket struct {
	tokens float64
	at     time.Time
}

func newUserBuckets(cfg AppendRate) *userBuckets {
	b := &userBuckets{buckets: make(map[string]*bucket)}
	if cfg.PerSecond > 0 {
		b.rate = cfg.PerSecond
		b.burst = float64(cfg.Burst)
		if cfg.Burst <= 0 {
			b.burst = max(1, math.Ceil(cfg.PerSecond))
		}
	}
	return b
}

// take spends one token of user's bucket at now and returns 0, or, with
// the bucket empty, how long until a token is back.
func (u *userBuckets) take(user string, now time.Time) time.Duration {
	if u.rate == 0 {
		return 0
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	u.sweep(now)
	b := u.buckets[user]
	if b == nil {
		b = &bucket{tokens: u.burst, at: now}
		u.buckets[user] = b
	}
	b.tokens = min(u.burst, b.tokens+now.Sub(b.at).Seconds()*u.rate)
	b.at = now
	if b.tokens < 1 {
		return time.Duration((1 - b.tokens) / u.rate * float64(time.Second))
	}
	b.tokens--
	return 0
}

// sweep drops, at most once a minute, the buckets that are full again.
func (u *userBuckets) sweep(now time.Time) {
	if now.Sub(u.lastSweep) < time.Minute {
		return
	}
	u.lastSweep = now
	refill := time.Duration(u.burst / u.rate * float64(time.Second))
	for user, b := range u.buckets {
		if now.Sub(b.at) >= refill {
			delete(u.buckets, user)
		}
	}
}
