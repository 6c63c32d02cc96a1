package auth

import "sync"

// revocations holds the AfterRevoke callbacks of a Revocable's open
// credentials (streams opened with them), and hands out, when the keys in
// use are replaced, those of the credentials the new keys no longer hold.
// Keys and JWT share it. Its zero value is ready to use.
type revocations struct {
	// mu orders a swap of the keys in use with the registrations, so that
	// none misses the swap that revokes its credential.
	mu       sync.Mutex
	watchers map[*revocationWatcher]struct{}
}

// revocationWatcher is a callback of AfterRevoke and the Identity it
// watches.
type revocationWatcher struct {
	id Identity
	f  func()
}

// after arranges for f to be called once id's credential is revoked: by
// the swap after which holds(id) is false, or at once, before after
// returns, when holds(id) is false already. holds reads the keys in use.
// stop unregisters f.
func (r *revocations) after(holds func(Identity) bool, id Identity, f func()) (stop func()) {
	r.mu.Lock()
	if !holds(id) {
		r.mu.Unlock()
		f()
		return func() {}
	}
	if r.watchers == nil {
		r.watchers = make(map[*revocationWatcher]struct{})
	}
	w := &revocationWatcher{id: id, f: f}
	r.watchers[w] = struct{}{}
	r.mu.Unlock()
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		delete(r.watchers, w)
	}
}

// swap puts new keys in use (store) and unregisters and returns the
// callbacks of the credentials that holds, which reads the keys in use,
// no longer holds. The caller calls them, outside any lock of its own.
func (r *revocations) swap(store func(), holds func(Identity) bool) (revoked []func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	store()
	for w := range r.watchers {
		if !holds(w.id) {
			delete(r.watchers, w)
			revoked = append(revoked, w.f)
		}
	}
	return revoked
}

// len returns the number of callbacks registered and not yet called nor
// stopped.
func (r *revocations) len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.watchers)
}
