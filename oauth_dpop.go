package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"time"
)

// This file holds DPoP (RFC 9449): the per-server ECDSA P-256 proof key
// (kept in the server's token store record), the proof JWTs sent with
// token requests and resource requests, and the server-provided nonces
// (DPoP-Nonce) those servers ask proofs to carry.

// A dpopKey is a DPoP proof key: an ECDSA P-256 private key with its
// public JWK, that JWK's thumbprint (RFC 7638) and the encoded header
// every proof of the key starts with. Immutable.
type dpopKey struct {
	priv  *ecdsa.PrivateKey
	jwk   map[string]string
	thumb string
	// header is the base64url proof header: redacting it redacts every
	// proof of the key, so the redactor does not grow with each request.
	header string
	// stored is the private key as the token store keeps it (encode).
	stored string
}

// newDPoPKey generates a fresh P-256 proof key.
func newDPoPKey() (*dpopKey, error) {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("dpop: generate key: %w", err)
	}
	return dpopKeyOf(priv)
}

// parseDPoPKey reads a key written by encode (base64url PKCS #8 DER).
func parseDPoPKey(s string) (*dpopKey, error) {
	der, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("dpop: stored key: %v", err)
	}
	key, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		return nil, fmt.Errorf("dpop: stored key: %v", err)
	}
	priv, ok := key.(*ecdsa.PrivateKey)
	if !ok || priv.Curve != elliptic.P256() {
		return nil, errors.New("dpop: stored key is not a P-256 key")
	}
	return dpopKeyOf(priv)
}

// dpopKeyOf returns the proof key of priv: its public JWK, thumbprint,
// proof header and stored form, computed once.
func dpopKeyOf(priv *ecdsa.PrivateKey) (*dpopKey, error) {
	pub, err := priv.PublicKey.ECDH()
	if err != nil {
		return nil, fmt.Errorf("dpop: key: %w", err)
	}
	raw := pub.Bytes() // 0x04 || X || Y
	enc := base64.RawURLEncoding
	k := &dpopKey{priv: priv, jwk: map[string]string{
		"kty": "EC", "crv": "P-256",
		"x": enc.EncodeToString(raw[1:33]), "y": enc.EncodeToString(raw[33:65]),
	}}
	// RFC 7638: the required members, lexicographic order, no spaces.
	canon := fmt.Sprintf(`{"crv":"P-256","kty":"EC","x":%q,"y":%q}`, k.jwk["x"], k.jwk["y"])
	sum := sha256.Sum256([]byte(canon))
	k.thumb = enc.EncodeToString(sum[:])
	header, _ := json.Marshal(map[string]any{"typ": "dpop+jwt", "alg": "ES256", "jwk": k.jwk})
	k.header = enc.EncodeToString(header)
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return nil, fmt.Errorf("dpop: key: %w", err)
	}
	k.stored = enc.EncodeToString(der)
	return k, nil
}

// encode returns the private key as stored in the token store record.
func (k *dpopKey) encode() string { return k.stored }

// dpopTarget returns the htu of a request to u: without query and
// fragment (RFC 9449 §4.2).
func dpopTarget(u *url.URL) string {
	c := *u
	c.RawQuery, c.Fragment, c.RawFragment, c.User = "", "", "", nil
	return c.String()
}

// proof returns a DPoP proof JWT for a request with method to u; ath
// binds it to accessToken when not empty; nonce is included when not
// empty.
func (k *dpopKey) proof(method string, u *url.URL, accessToken, nonce string) (string, error) {
	claims := map[string]any{
		"jti": randomToken(16), "htm": method, "htu": dpopTarget(u), "iat": time.Now().Unix(),
	}
	if accessToken != "" {
		sum := sha256.Sum256([]byte(accessToken))
		claims["ath"] = base64.RawURLEncoding.EncodeToString(sum[:])
	}
	if nonce != "" {
		claims["nonce"] = nonce
	}
	body, _ := json.Marshal(claims)
	enc := base64.RawURLEncoding
	signed := k.header + "." + enc.EncodeToString(body)
	digest := sha256.Sum256([]byte(signed))
	r, s, err := ecdsa.Sign(rand.Reader, k.priv, digest[:])
	if err != nil {
		return "", fmt.Errorf("dpop: sign proof: %w", err)
	}
	sig := make([]byte, 64)
	r.FillBytes(sig[:32])
	s.FillBytes(sig[32:])
	return signed + "." + enc.EncodeToString(sig), nil
}

// A dpopProver signs the proofs of one server's requests with its key and
// the latest nonce each origin (authorization server, resource server)
// gave. Its key and proof header joined the redactor (learn) when it was made.
// Safe for concurrent use.
type dpopProver struct {
	key *dpopKey
	mu  sync.Mutex
	// guards nonces, by origin (scheme://host)
	nonces map[string]string
}

// sign returns a proof for a request with method to u (bound to
// accessToken when not empty), carrying u's origin's latest nonce.
func (p *dpopProver) sign(method string, u *url.URL, accessToken string) (string, error) {
	p.mu.Lock()
	nonce := p.nonces[u.Scheme+"://"+u.Host]
	p.mu.Unlock()
	return p.key.proof(method, u, accessToken, nonce)
}

// note keeps the DPoP-Nonce of a response from u's origin; it reports
// whether the nonce is new (a retry with it can succeed).
func (p *dpopProver) note(u *url.URL, h http.Header) bool {
	nonce := h.Get("DPoP-Nonce")
	if nonce == "" {
		return false
	}
	origin := u.Scheme + "://" + u.Host
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.nonces == nil {
		p.nonces = map[string]string{}
	}
	fresh := p.nonces[origin] != nonce
	p.nonces[origin] = nonce
	return fresh
}

// resourceNonceChallenge reports whether a resource server's 401 asks for
// a DPoP nonce (RFC 9449 §9): a DPoP challenge with error
// use_dpop_nonce.
func resourceNonceChallenge(status int, h http.Header) bool {
	if status != http.StatusUnauthorized {
		return false
	}
	for _, c := range parseWWWAuthenticate(h.Values("Www-Authenticate")) {
		if c.Scheme == "dpop" && c.Params["error"] == "use_dpop_nonce" {
			return true
		}
	}
	return false
}

// wantsDPoP reports whether tokens from as are requested with DPoP under
// mode ("" is auto).
func wantsDPoP(mode string, as authServerMetadata) bool {
	switch mode {
	case dpopNever:
		return false
	case dpopAlways:
		return true
	}
	return slices.Contains(as.DPoPSigningAlgValuesSupported, "ES256")
}

// dpopProver returns the server's prover, loading its key from the
// record or creating (and persisting) one. Called with the lock held.
func (c *oauthClient) dpopProver() (*dpopProver, error) {
	if c.prover != nil && c.rec.DPoPKey == c.prover.key.encode() {
		return c.prover, nil
	}
	var key *dpopKey
	var err error
	if c.rec.DPoPKey != "" {
		key, err = parseDPoPKey(c.rec.DPoPKey)
		if err != nil {
			return nil, fmt.Errorf("server %q: %w; run: harnessd mcp logout %s", c.server, err, c.server)
		}
		c.learn(c.rec.DPoPKey, key.header)
	} else {
		if key, err = newDPoPKey(); err != nil {
			return nil, err
		}
		c.rec.DPoPKey = key.encode()
		c.learn(c.rec.DPoPKey, key.header)
		if err := c.persist(); err != nil {
			return nil, err
		}
	}
	c.prover = &dpopProver{key: key}
	return c.prover, nil
}

// tokenProver returns the prover for token requests to as, or nil when
// the server's mode and as say no DPoP. Called with the lock held.
func (c *oauthClient) tokenProver(as authServerMetadata) (*dpopProver, error) {
	if !wantsDPoP(c.cfg.DPoP, as) {
		return nil, nil
	}
	return c.dpopProver()
}
