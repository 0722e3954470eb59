package remote

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// Why A2A agents get a network of their own: the SDK's client calls the
// URL that the agent's card names, so whoever serves the card chooses
// where the function's requests, their headers and signatures go. The card
// is checked (pickInterface), and below that every connection is checked
// where it is made, on the address dialled, so that a name that resolves
// to the function's own host, its VPC or the instance metadata service is
// refused too, however DNS answers, and every request is checked for its
// origin before anything is added to it.

// ErrForbiddenAddress is a connection to an A2A agent refused for its
// address: a loopback (but to an agent configured on one), link-local,
// private, unspecified or multicast address, or the Lambda Runtime API.
var ErrForbiddenAddress = errors.New("A2A agents may not be reached at this address")

// ErrOtherOrigin is a request to an A2A agent refused because it is not
// for the origin of the agent's card URL: a redirect elsewhere, say.
var ErrOtherOrigin = errors.New("A2A requests go to the origin of the agent's card URL only")

// forbiddenAddr says why ip is an address no agent may be reached at, or
// returns "".
func forbiddenAddr(ip netip.Addr) string {
	ip = ip.Unmap()
	switch {
	case ip.IsLoopback():
		return "a loopback address"
	case ip.IsMulticast() || ip == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		return "a multicast or broadcast address"
	case ip.IsLinkLocalUnicast():
		return "a link-local address (the instance metadata service is one)"
	case ip.IsPrivate():
		return "a private address"
	case ip.IsUnspecified() || ip.Is4() && ip.As4()[0] == 0:
		return "an unspecified address"
	}
	return ""
}

// dialGuard is the check of every connection made for one agent.
type dialGuard struct {
	// loopback allows loopback addresses: the agent's card URL names one.
	loopback bool
	// runtimeAPI is AWS_LAMBDA_RUNTIME_API, the host and port of the
	// Lambda Runtime API, refused always; "" for none.
	runtimeAPI string
}

// control is a net.Dialer's Control: it runs on the address about to be
// connected to, after DNS.
func (g dialGuard) control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%s: %w", address, ErrForbiddenAddress)
	}
	if isRuntimeAPI(g.runtimeAPI, ap) {
		return fmt.Errorf("%s is the Lambda Runtime API: %w", address, ErrForbiddenAddress)
	}
	if why := forbiddenAddr(ap.Addr()); why != "" && !(g.loopback && ap.Addr().Unmap().IsLoopback()) {
		return fmt.Errorf("%s is %s: %w", address, why, ErrForbiddenAddress)
	}
	return nil
}

// isRuntimeAPI reports whether ap is the Lambda Runtime API that
// runtimeAPI ("127.0.0.1:9001") names. Every loopback address on its port
// counts, when it is on one.
func isRuntimeAPI(runtimeAPI string, ap netip.AddrPort) bool {
	host, port, err := net.SplitHostPort(runtimeAPI)
	if err != nil || port != strconv.Itoa(int(ap.Port())) {
		return false
	}
	addr := ap.Addr().Unmap()
	if loopbackHost(host) && addr.IsLoopback() {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap() == addr
}

// cardIsRuntimeAPI reports whether a card URL names the Lambda Runtime API
// literally, which the configuration check refuses before any connection.
func cardIsRuntimeAPI(runtimeAPI string, u *url.URL) bool {
	o := originOf(u)
	port, err := strconv.ParseUint(o.port, 10, 16)
	if err != nil {
		return false
	}
	var addr netip.Addr
	switch ip, err := netip.ParseAddr(o.host); {
	case err == nil:
		addr = ip
	case o.host == "localhost":
		addr = netip.IPv6Loopback()
	default:
		return false
	}
	return isRuntimeAPI(runtimeAPI, netip.AddrPortFrom(addr, uint16(port)))
}

// a2aTransport sends the requests of one agent: to the card URL's origin
// alone, with the agent's headers, signed when it is configured so, and
// with answers bounded as MCP servers' are (capped).
type a2aTransport struct {
	origin  origin
	headers map[string]string
	signer  *iamSigner // nil but for A2AAuthIAM
	next    http.RoundTripper
}

func (t *a2aTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if o := originOf(r.URL); o != t.origin || r.Host != "" && !strings.EqualFold(r.Host, r.URL.Host) {
		if r.Body != nil {
			_ = r.Body.Close()
		}
		return nil, fmt.Errorf("%s: %w (%s)", o, ErrOtherOrigin, t.origin)
	}
	r = r.Clone(r.Context())
	for k, v := range t.headers {
		r.Header.Set(k, v)
	}
	if t.signer != nil {
		if err := t.signer.sign(r); err != nil {
			if r.Body != nil {
				_ = r.Body.Close()
			}
			return nil, err
		}
	}
	resp, err := t.next.RoundTrip(r)
	if err == nil {
		over, _ := r.Context().Value(overKey{}).(*atomic.Bool)
		resp.Body = &capped{ReadCloser: resp.Body, left: MaxResponseBytes, over: over}
	}
	return resp, err
}

// newA2AHTTPClient returns the client of one agent, whose card URL is u.
// tlsConfig and resolver are nil but in tests.
func newA2AHTTPClient(u *url.URL, headers map[string]string, signer *iamSigner, runtimeAPI string, tlsConfig *tls.Config, resolver *net.Resolver) *http.Client {
	guard := dialGuard{loopback: loopbackHost(u.Hostname()), runtimeAPI: runtimeAPI}
	dialer := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second, Control: guard.control, Resolver: resolver}
	base := &http.Transport{
		// No proxy: the guard checks the address dialled, which must be
		// the agent's.
		Proxy:                 nil,
		DialContext:           dialer.DialContext,
		TLSClientConfig:       tlsConfig.Clone(),
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          4,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	o := originOf(u)
	return &http.Client{
		Transport: &a2aTransport{origin: o, headers: headers, signer: signer, next: base},
		CheckRedirect: func(r *http.Request, via []*http.Request) error {
			if originOf(r.URL) != o {
				return fmt.Errorf("a redirect to %s: %w", originOf(r.URL), ErrOtherOrigin)
			}
			if len(via) >= 5 {
				return errors.New("stopped after 5 redirects")
			}
			return nil
		},
	}
}
