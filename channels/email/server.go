package email

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
)

// Server is where the SMTP mailer delivers: a parsed NEWSLETTER_SMTP_URL.
type Server struct {
	Host, Username, Password string
	Port                     int
	TLS                      string // none, starttls or tls
}

// ParseServerURL parses smtp://user:pass@host:port?tls=none|starttls|tls.
// The default TLS mode is starttls (opportunistic would silently send
// credentials in clear text); port defaults follow the mode.
func ParseServerURL(s string) (Server, error) {
	u, err := url.Parse(s)
	if err != nil {
		return Server{}, err
	}
	if u.Scheme != "smtp" && u.Scheme != "smtps" {
		return Server{}, fmt.Errorf("scheme %q is not smtp", u.Scheme)
	}
	out := Server{Host: u.Hostname(), TLS: u.Query().Get("tls")}
	if out.Host == "" {
		return Server{}, errors.New("no host")
	}
	if out.TLS == "" {
		out.TLS = "starttls"
		if u.Scheme == "smtps" {
			out.TLS = "tls"
		}
	}
	switch out.TLS {
	case "none":
		out.Port = 25
	case "starttls":
		out.Port = 587
	case "tls":
		out.Port = 465
	default:
		return Server{}, fmt.Errorf("tls=%q is not none, starttls or tls", out.TLS)
	}
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return Server{}, fmt.Errorf("port %q", p)
		}
		out.Port = n
	}
	if u.User != nil {
		out.Username = u.User.Username()
		out.Password, _ = u.User.Password()
	}
	return out, nil
}
