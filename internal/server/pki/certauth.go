package pki

import (
	"crypto/sha256"
	"net/http"
	"time"

	utilcache "k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/utils/clock"
)

// ClientCertCacheTTL is how long a client certificate chain's
// authentication is remembered: a chain signed by a CA that is removed
// from the client CA bundle stops authenticating at most this long after.
const ClientCertCacheTTL = 10 * time.Second

// clientCertCacheSize bounds the chains remembered (one per client
// identity, not per connection).
const clientCertCacheSize = 4096

// CacheClientCertificates returns auth, which must be the server's whole
// request authenticator, remembering for ttl whom a request authenticated
// by its TLS client certificates alone was. The generic API server checks
// the client certificate chain against the client CA on every request (an
// ECDSA or RSA signature check), although the chain of a
// connection never changes; with the cache it is checked once per chain
// and ttl.
//
// A request's answer depends on its certificates alone, and is cached,
// only when it carries no other credential: no Authorization header (the
// loopback and webhook tokens), no Sec-WebSocket-Protocol header (tokens
// of websocket clients). Front-proxy (request header) authentication
// reads further headers: the caller must not wrap an authenticator that
// has it. Only successes are cached; an entry expires after ttl or when
// a certificate of its chain does, whichever is sooner.
func CacheClientCertificates(auth authenticator.Request, ttl time.Duration) authenticator.Request {
	return newCertCache(auth, ttl, clock.RealClock{})
}

func newCertCache(auth authenticator.Request, ttl time.Duration, clock utilcache.Clock) *certCache {
	return &certCache{auth: auth, ttl: ttl, clock: clock, cache: utilcache.NewLRUExpireCacheWithClock(clientCertCacheSize, clock)}
}

type certCache struct {
	auth  authenticator.Request
	ttl   time.Duration
	clock utilcache.Clock
	cache *utilcache.LRUExpireCache
}

func (c *certCache) AuthenticateRequest(req *http.Request) (*authenticator.Response, bool, error) {
	key, ok := certsOnly(req)
	if !ok {
		return c.auth.AuthenticateRequest(req)
	}
	if cached, found := c.cache.Get(key); found {
		resp := *cached.(*authenticator.Response)
		return &resp, true, nil
	}
	resp, ok, err := c.auth.AuthenticateRequest(req)
	if err != nil || !ok || resp == nil {
		return resp, ok, err
	}
	now := c.clock.Now()
	ttl := c.ttl
	for _, cert := range req.TLS.PeerCertificates {
		if left := cert.NotAfter.Sub(now); left < ttl {
			ttl = left
		}
	}
	if ttl > 0 {
		stored := *resp
		c.cache.Add(key, &stored, ttl)
	}
	return resp, ok, err
}

// certsOnly gives the cache key of a request whose only credential is its
// TLS client certificate chain: a digest of the chain as the client sent
// it (DER certificates delimit themselves).
func certsOnly(req *http.Request) ([sha256.Size]byte, bool) {
	if req.TLS == nil || len(req.TLS.PeerCertificates) == 0 {
		return [sha256.Size]byte{}, false
	}
	if req.Header.Get("Authorization") != "" || req.Header.Get("Sec-WebSocket-Protocol") != "" {
		return [sha256.Size]byte{}, false
	}
	h := sha256.New()
	for _, cert := range req.TLS.PeerCertificates {
		h.Write(cert.Raw)
	}
	var key [sha256.Size]byte
	h.Sum(key[:0])
	return key, true
}
