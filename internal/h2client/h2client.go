// Package h2client makes the HTTP client the push channels (FCM, APNs)
// send with: HTTP/2 over TLS, one connection carrying every concurrent
// request.
package h2client

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"time"
)

// New is an HTTP client speaking HTTP/2 over TLS (trusting rootCAs, or the
// system's roots when nil) with a timeout of timeout a request. One
// connection carries every concurrent request, as the push services want
// (they advertise many concurrent streams a connection and count
// connections against the sender): MaxConnsPerHost 1 makes concurrent
// first requests wait for the connection being dialled rather than each
// dial its own, and past the streams the server allows net/http opens a
// second connection rather than fail. HTTP/2 pings find a connection that
// died quietly, so a request is not left waiting on it until its timeout.
func New(rootCAs *x509.CertPool, timeout time.Duration) *http.Client {
	return &http.Client{
		Timeout: timeout,
		Transport: &http.Transport{
			Proxy:               http.ProxyFromEnvironment,
			TLSClientConfig:     &tls.Config{RootCAs: rootCAs, MinVersion: tls.VersionTLS12},
			ForceAttemptHTTP2:   true,
			MaxConnsPerHost:     1,
			TLSHandshakeTimeout: 10 * time.Second,
			IdleConnTimeout:     time.Hour,
			HTTP2:               &http.HTTP2Config{SendPingTimeout: time.Minute, PingTimeout: 15 * time.Second},
		},
	}
}
