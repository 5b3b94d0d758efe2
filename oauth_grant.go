package main

import (
	"bytes"
	"cmp"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// This file holds the OAuth requests of a client: dynamic client
// registration (RFC 7591), the authorization request with PKCE and its
// response check (RFC 9207), token requests (authorization code, refresh,
// client credentials) with client authentication, including
// private_key_jwt assertions (RFC 7523) signed with ES256 or RS256.

// Token endpoint authentication methods.
const (
	authMethodBasic = "client_secret_basic"
	authMethodPost  = "client_secret_post"
	authMethodNone  = "none"
	authMethodJWT   = "private_key_jwt"
)

// An oauthClientID is how harnessd identifies itself to one authorization
// server: bound to that server's issuer, never presented to another.
type oauthClientID struct {
	Issuer       string `json:"issuer"`
	ClientID     string `json:"client_id"`
	ClientSecret string `json:"client_secret,omitempty"`
	AuthMethod   string `json:"token_endpoint_auth_method"`
	RedirectURI  string `json:"redirect_uri,omitempty"`
}

// An oauthToken is an access token with what is needed to use and renew
// it.
type oauthToken struct {
	AccessToken   string    `json:"access_token"`
	RefreshToken  string    `json:"refresh_token,omitempty"`
	Expiry        time.Time `json:"expiry,omitzero"`
	Scopes        []string  `json:"scopes,omitempty"`
	Issuer        string    `json:"issuer"`
	TokenEndpoint string    `json:"token_endpoint"`
	Resource      string    `json:"resource"`
	// TokenType is "DPoP" for a DPoP-bound token, "" for a bearer token.
	TokenType string `json:"token_type,omitempty"`
}

// expiresWithin reports whether the token expires within d of now; a
// token without an expiry never does.
func (t *oauthToken) expiresWithin(d time.Duration, now time.Time) bool {
	return !t.Expiry.IsZero() && now.Add(d).After(t.Expiry)
}

// randomToken returns n random bytes, base64url-encoded without padding.
func randomToken(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// pkceChallenge returns the S256 code challenge of verifier (RFC 7636).
func pkceChallenge(verifier string) string {
	sum := sha256.Sum256([]byte(verifier))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// An authorizationRequest is one authorization code flow in progress: what
// the client must remember between sending the person to the
// authorization endpoint and redeeming the code.
type authorizationRequest struct {
	AS          authServerMetadata
	Client      oauthClientID
	RedirectURI string
	State       string
	Verifier    string
	Scopes      []string
	Resource    string
}

// newAuthorizationRequest returns a flow with a fresh state and PKCE
// verifier.
func newAuthorizationRequest(as authServerMetadata, client oauthClientID, redirectURI string, scopes []string, resource string) *authorizationRequest {
	return &authorizationRequest{
		AS: as, Client: client, RedirectURI: redirectURI,
		State: randomToken(24), Verifier: randomToken(32),
		Scopes: scopes, Resource: resource,
	}
}

// URL returns the authorization URL a person opens.
func (r *authorizationRequest) URL() (string, error) {
	u, err := url.Parse(r.AS.AuthorizationEndpoint)
	if err != nil || r.AS.AuthorizationEndpoint == "" {
		return "", fmt.Errorf("oauth: authorization server %q has no usable authorization_endpoint", r.AS.Issuer)
	}
	if err := checkOAuthEndpoint("authorization_endpoint", r.AS.AuthorizationEndpoint); err != nil {
		return "", err
	}
	q := u.Query()
	q.Set("response_type", "code")
	q.Set("client_id", r.Client.ClientID)
	q.Set("redirect_uri", r.RedirectURI)
	q.Set("state", r.State)
	q.Set("code_challenge", pkceChallenge(r.Verifier))
	q.Set("code_challenge_method", "S256")
	if len(r.Scopes) > 0 {
		q.Set("scope", strings.Join(r.Scopes, " "))
	}
	if r.Resource != "" {
		q.Set("resource", r.Resource)
	}
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// code checks the authorization response (the URL the authorization server
// redirected to) and returns its code. It refuses an error response, a
// wrong state, and an iss parameter as RFC 9207 says: when the server
// advertises iss, iss must be present; when present, it must equal the
// issuer exactly, advertised or not. Only then may the code be redeemed.
func (r *authorizationRequest) code(redirected string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(redirected))
	if err != nil {
		return "", fmt.Errorf("oauth: the redirected url does not parse: %v", err)
	}
	q := u.Query()
	if e := q.Get("error"); e != "" {
		return "", fmt.Errorf("oauth: the authorization server refused: %s %s", e, q.Get("error_description"))
	}
	if q.Get("state") != r.State {
		return "", errors.New("oauth: the redirected url is not the answer to this login (state differs); start the login again")
	}
	iss, hasIss := q["iss"]
	switch {
	case hasIss && (len(iss) != 1 || iss[0] != r.AS.Issuer):
		return "", fmt.Errorf("oauth: the authorization response comes from issuer %q, not %q; refusing it", strings.Join(iss, ","), r.AS.Issuer)
	case !hasIss && r.AS.IssParameterSupported:
		return "", fmt.Errorf("oauth: the authorization server %q advertises the iss parameter but its response has none; refusing it", r.AS.Issuer)
	}
	code := q.Get("code")
	if code == "" {
		return "", errors.New("oauth: the redirected url has no code")
	}
	return code, nil
}

// A tokenRequestor sends token requests for one client identity at one
// token endpoint.
type tokenRequestor struct {
	http     *http.Client
	endpoint string
	client   oauthClientID
	// key signs private_key_jwt assertions; nil for other methods.
	key *signingKey
	// dpop signs DPoP proofs of the requests; nil sends none.
	dpop *dpopProver
	// learn is told every credential the requestor makes or receives
	// (assertion, tokens) before it is used; nil tells no one.
	learn func(values ...string)
}

// A tokenError is an error answer of a token endpoint (RFC 6749 §5.2).
type tokenError struct {
	Status      int
	Code        string
	Description string
}

func (e *tokenError) Error() string {
	msg := fmt.Sprintf("oauth: token endpoint answered %d", e.Status)
	if e.Code != "" {
		msg += " " + e.Code
	}
	if e.Description != "" {
		msg += ": " + e.Description
	}
	return msg
}

// invalidGrant reports whether err says the grant (the refresh token or
// code) is no longer valid: asking again with it cannot succeed.
func invalidGrant(err error) bool {
	var te *tokenError
	return errors.As(err, &te) && (te.Code == "invalid_grant" || te.Code == "invalid_client" || te.Code == "unauthorized_client")
}

// request POSTs form to the token endpoint with the client's
// authentication (and a DPoP proof when the requestor has a prover; a
// use_dpop_nonce answer is retried once with the nonce given) and returns
// the token. The token's issuer, endpoint and resource are set from the
// requestor and form; scopes default to requested when the answer names
// none.
func (tr *tokenRequestor) request(ctx context.Context, form url.Values, requested []string) (tok oauthToken, err error) {
	_, sp := startSpan(ctx, nil, "oauth token", spanClient,
		stringAttr("http.request.method", http.MethodPost),
		stringAttr("harnessd.oauth.grant_type", form.Get("grant_type")))
	if sp != nil {
		if u, perr := url.Parse(tr.endpoint); perr == nil {
			sp.set(stringAttr("server.address", u.Hostname()))
		}
		defer func() {
			var te *tokenError
			if errors.As(err, &te) {
				sp.set(intAttr("http.response.status_code", int64(te.Status)))
				sp.fail(cmp.Or(te.Code, strconv.Itoa(te.Status)), "")
			} else {
				sp.failErr("", err)
			}
			sp.end()
		}()
	}
	if err := tr.checkEndpoint(); err != nil {
		return oauthToken{}, err
	}
	if err := tr.authenticate(form); err != nil {
		return oauthToken{}, err
	}
	var answer tokenAnswer
	for attempt := 0; ; attempt++ {
		status, header, raw, err := tr.post(ctx, form)
		if err != nil {
			return oauthToken{}, err
		}
		answer = tokenAnswer{}
		jsonErr := json.Unmarshal(raw, &answer)
		// Whatever the answer holds is a credential from here on, even in
		// an answer refused below.
		tr.tell(answer.AccessToken, answer.RefreshToken, answer.IDToken)
		if tr.dpop != nil {
			u, _ := url.Parse(tr.endpoint)
			if tr.dpop.note(u, header) && answer.Error == "use_dpop_nonce" && attempt == 0 {
				continue
			}
		}
		if status/100 != 2 || answer.Error != "" {
			return oauthToken{}, &tokenError{Status: status, Code: answer.Error, Description: answer.ErrorDescription}
		}
		if jsonErr != nil || answer.AccessToken == "" {
			return oauthToken{}, fmt.Errorf("oauth: token endpoint %s answered without an access_token", tr.endpoint)
		}
		break
	}
	tok = oauthToken{
		AccessToken:   answer.AccessToken,
		RefreshToken:  answer.RefreshToken,
		Scopes:        requested,
		Issuer:        tr.client.Issuer,
		TokenEndpoint: tr.endpoint,
		Resource:      form.Get("resource"),
	}
	switch {
	case answer.TokenType == "" || strings.EqualFold(answer.TokenType, "bearer"):
	case strings.EqualFold(answer.TokenType, "dpop") && tr.dpop != nil:
		tok.TokenType = "DPoP"
	default:
		return oauthToken{}, fmt.Errorf("oauth: token endpoint %s issued a %q token; only bearer and DPoP tokens are supported", tr.endpoint, answer.TokenType)
	}
	if answer.Scope != "" {
		tok.Scopes = strings.Fields(answer.Scope)
	}
	if answer.ExpiresIn > 0 {
		tok.Expiry = time.Now().Add(time.Duration(answer.ExpiresIn) * time.Second)
	}
	return tok, nil
}

// checkEndpoint refuses a missing token endpoint and one that is not
// https (or loopback).
func (tr *tokenRequestor) checkEndpoint() error {
	if tr.endpoint == "" {
		return fmt.Errorf("oauth: authorization server %q has no token_endpoint", tr.client.Issuer)
	}
	return checkOAuthEndpoint("token_endpoint", tr.endpoint)
}

// tell hands credentials to learn, if set.
func (tr *tokenRequestor) tell(values ...string) {
	if tr.learn != nil {
		tr.learn(values...)
	}
}

// A tokenAnswer is a token endpoint's answer (RFC 6749 §5.1, §5.2).
type tokenAnswer struct {
	AccessToken      string `json:"access_token"`
	TokenType        string `json:"token_type"`
	ExpiresIn        int64  `json:"expires_in"`
	RefreshToken     string `json:"refresh_token"`
	IDToken          string `json:"id_token"`
	Scope            string `json:"scope"`
	Error            string `json:"error"`
	ErrorDescription string `json:"error_description"`
}

// authenticate adds the client's authentication to form, except for
// client_secret_basic, which post adds as a header.
func (tr *tokenRequestor) authenticate(form url.Values) error {
	switch tr.client.AuthMethod {
	case authMethodBasic:
	case authMethodPost:
		form.Set("client_id", tr.client.ClientID)
		form.Set("client_secret", tr.client.ClientSecret)
	case authMethodJWT:
		if tr.key == nil {
			return errors.New("oauth: private_key_jwt needs oauth.private_key_file")
		}
		assertion, err := tr.key.clientAssertion(tr.client.ClientID, tr.client.Issuer)
		if err != nil {
			return err
		}
		tr.tell(assertion)
		form.Set("client_assertion_type", "urn:ietf:params:oauth:client-assertion-type:jwt-bearer")
		form.Set("client_assertion", assertion)
	default:
		if tr.client.ClientID != "" {
			form.Set("client_id", tr.client.ClientID)
		}
	}
	return nil
}

// post sends form to the token endpoint once (with a fresh DPoP proof
// when the requestor has a prover) and returns the answer's status,
// header and body.
func (tr *tokenRequestor) post(ctx context.Context, form url.Values) (int, http.Header, []byte, error) {
	body := form.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, tr.endpoint, strings.NewReader(body))
	if err != nil {
		return 0, nil, nil, fmt.Errorf("oauth: token request: %w", err)
	}
	if tr.client.AuthMethod == authMethodBasic {
		req.SetBasicAuth(url.QueryEscape(tr.client.ClientID), url.QueryEscape(tr.client.ClientSecret))
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	if tr.dpop != nil {
		proof, err := tr.dpop.sign(http.MethodPost, req.URL, "")
		if err != nil {
			return 0, nil, nil, err
		}
		req.Header.Set("DPoP", proof)
	}
	resp, err := tr.http.Do(req)
	if err != nil {
		return 0, nil, nil, fmt.Errorf("oauth: token request: %w", err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, oauthMetadataLimit))
	if err != nil {
		return 0, nil, nil, fmt.Errorf("oauth: token request: read answer: %w", err)
	}
	return resp.StatusCode, resp.Header, raw, nil
}

// redeem exchanges the code of an authorization response for a token.
func (tr *tokenRequestor) redeem(ctx context.Context, r *authorizationRequest, code string) (oauthToken, error) {
	form := url.Values{
		"grant_type":    {"authorization_code"},
		"code":          {code},
		"redirect_uri":  {r.RedirectURI},
		"code_verifier": {r.Verifier},
	}
	setResource(form, r.Resource)
	return tr.request(ctx, form, r.Scopes)
}

// refresh renews tok with its refresh token. The answer keeps the old
// refresh token when the server does not rotate it.
func (tr *tokenRequestor) refresh(ctx context.Context, tok oauthToken) (oauthToken, error) {
	form := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tok.RefreshToken}}
	setResource(form, tok.Resource)
	fresh, err := tr.request(ctx, form, tok.Scopes)
	if err != nil {
		return oauthToken{}, err
	}
	if fresh.RefreshToken == "" {
		fresh.RefreshToken = tok.RefreshToken
	}
	return fresh, nil
}

// clientCredentials requests a token for the client itself (no person).
func (tr *tokenRequestor) clientCredentials(ctx context.Context, scopes []string, resource string) (oauthToken, error) {
	form := url.Values{"grant_type": {"client_credentials"}}
	if len(scopes) > 0 {
		form.Set("scope", strings.Join(scopes, " "))
	}
	setResource(form, resource)
	return tr.request(ctx, form, scopes)
}

func setResource(form url.Values, resource string) {
	if resource != "" {
		form.Set("resource", resource)
	}
}

// chooseAuthMethod returns the token endpoint authentication a client with
// (or without) a secret uses at a server that supports the given methods
// (none listed means client_secret_basic, RFC 8414's default).
func chooseAuthMethod(supported []string, hasSecret bool) string {
	switch {
	case !hasSecret:
		return authMethodNone
	case len(supported) == 0 || slices.Contains(supported, authMethodBasic):
		return authMethodBasic
	case slices.Contains(supported, authMethodPost):
		return authMethodPost
	}
	return authMethodBasic
}

// registerClient registers harnessd with the authorization server by
// dynamic client registration (RFC 7591) for the given redirect URI.
func registerClient(ctx context.Context, client *http.Client, as authServerMetadata, redirectURI string, scopes []string) (oauthClientID, error) {
	if as.RegistrationEndpoint == "" {
		return oauthClientID{}, fmt.Errorf("oauth: authorization server %q does not offer dynamic client registration; register harnessd there and set oauth.client_id (and client_secret) for this server", as.Issuer)
	}
	if err := checkOAuthEndpoint("registration_endpoint", as.RegistrationEndpoint); err != nil {
		return oauthClientID{}, err
	}
	method := authMethodBasic
	for _, m := range []string{authMethodBasic, authMethodPost, authMethodNone} {
		if slices.Contains(as.TokenEndpointAuthMethodsSupported, m) {
			method = m
			break
		}
	}
	meta := map[string]any{
		"client_name":                "harnessd",
		"redirect_uris":              []string{redirectURI},
		"grant_types":                []string{"authorization_code", "refresh_token"},
		"response_types":             []string{"code"},
		"token_endpoint_auth_method": method,
		"application_type":           "native",
	}
	if len(scopes) > 0 {
		meta["scope"] = strings.Join(scopes, " ")
	}
	body, _ := json.Marshal(meta)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, as.RegistrationEndpoint, bytes.NewReader(body))
	if err != nil {
		return oauthClientID{}, fmt.Errorf("oauth: register: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return oauthClientID{}, fmt.Errorf("oauth: register: %w", err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, oauthMetadataLimit))
	var answer struct {
		ClientID     string `json:"client_id"`
		ClientSecret string `json:"client_secret"`
		AuthMethod   string `json:"token_endpoint_auth_method"`
		Error        string `json:"error"`
		Description  string `json:"error_description"`
	}
	jsonErr := json.Unmarshal(raw, &answer)
	if resp.StatusCode/100 != 2 {
		return oauthClientID{}, fmt.Errorf("oauth: register at %s: status %d %s %s", as.RegistrationEndpoint, resp.StatusCode, answer.Error, answer.Description)
	}
	if jsonErr != nil || answer.ClientID == "" {
		return oauthClientID{}, fmt.Errorf("oauth: register at %s: the answer has no client_id", as.RegistrationEndpoint)
	}
	id := oauthClientID{
		Issuer: as.Issuer, ClientID: answer.ClientID, ClientSecret: answer.ClientSecret,
		AuthMethod: answer.AuthMethod, RedirectURI: redirectURI,
	}
	if id.AuthMethod == "" || (id.AuthMethod != authMethodNone && id.ClientSecret == "") {
		id.AuthMethod = chooseAuthMethod(as.TokenEndpointAuthMethodsSupported, id.ClientSecret != "")
	}
	return id, nil
}

// A signingKey is a private key for private_key_jwt client assertions.
type signingKey struct {
	alg    string // "ES256" or "RS256"
	signer crypto.Signer
}

// parseSigningKey reads a PEM private key (PKCS #8, SEC 1 or PKCS #1): a
// P-256 key signs ES256, an RSA key RS256. alg, when not empty, must
// agree with the key.
func parseSigningKey(pemBytes []byte, alg string) (*signingKey, error) {
	block, _ := pem.Decode(pemBytes)
	if block == nil {
		return nil, errors.New("no PEM block found")
	}
	var key any
	var err error
	switch block.Type {
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(block.Bytes)
	case "RSA PRIVATE KEY":
		key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
	default:
		key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	}
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", block.Type, err)
	}
	var k *signingKey
	switch key := key.(type) {
	case *ecdsa.PrivateKey:
		if key.Curve.Params().BitSize != 256 {
			return nil, fmt.Errorf("an EC key on %s; only P-256 (ES256) is supported", key.Curve.Params().Name)
		}
		k = &signingKey{alg: "ES256", signer: key}
	case *rsa.PrivateKey:
		k = &signingKey{alg: "RS256", signer: key}
	default:
		return nil, fmt.Errorf("a %T key; use a P-256 EC or an RSA key", key)
	}
	if alg != "" && alg != k.alg {
		return nil, fmt.Errorf("the key signs %s, not %s", k.alg, alg)
	}
	return k, nil
}

// clientAssertion returns a signed JWT naming clientID as issuer and
// subject and audience as the authorization server (RFC 7523 §3), valid
// for five minutes.
func (k *signingKey) clientAssertion(clientID, audience string) (string, error) {
	now := time.Now().Unix()
	header, _ := json.Marshal(map[string]string{"alg": k.alg, "typ": "JWT"})
	claims, _ := json.Marshal(map[string]any{
		"iss": clientID, "sub": clientID, "aud": audience,
		"iat": now, "exp": now + 300, "jti": randomToken(16),
	})
	enc := base64.RawURLEncoding
	signed := enc.EncodeToString(header) + "." + enc.EncodeToString(claims)
	digest := sha256.Sum256([]byte(signed))
	var sig []byte
	switch key := k.signer.(type) {
	case *ecdsa.PrivateKey:
		r, s, err := ecdsa.Sign(rand.Reader, key, digest[:])
		if err != nil {
			return "", fmt.Errorf("oauth: sign client assertion: %w", err)
		}
		sig = make([]byte, 64)
		r.FillBytes(sig[:32])
		s.FillBytes(sig[32:])
	default:
		var err error
		sig, err = k.signer.Sign(rand.Reader, digest[:], crypto.SHA256)
		if err != nil {
			return "", fmt.Errorf("oauth: sign client assertion: %w", err)
		}
	}
	return signed + "." + enc.EncodeToString(sig), nil
}
