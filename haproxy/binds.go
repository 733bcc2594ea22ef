package haproxy

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"syscall"

	parser "github.com/haproxytech/client-native/v5/config-parser"
	"github.com/haproxytech/client-native/v5/config-parser/types"
)

// Bind is one TCP address a frontend (or listen section) binds.
type Bind struct {
	Frontend string
	Addr     string // host:port as net.Listen takes it; host empty: every address
}

// TCPBinds returns the TCP addresses the frontends and listen sections of
// files bind, in the files' order. Unix sockets, file descriptors, port
// ranges, QUIC and addresses with variables are left out: only what can be
// tried with net.Listen is returned.
func TCPBinds(files []string) ([]Bind, error) {
	p, err := parseFiles(files)
	if err != nil {
		return nil, err
	}
	var binds []Bind
	for _, section := range []parser.Section{parser.Frontends, parser.Listen} {
		names, _ := p.SectionsGet(section)
		for _, name := range names {
			data, err := p.Get(section, name, "bind")
			if err != nil {
				continue // no bind
			}
			list, _ := data.([]types.Bind)
			for _, b := range list {
				if addr, ok := tcpAddr(b.Path); ok {
					binds = append(binds, Bind{Frontend: name, Addr: addr})
				}
			}
		}
	}
	return binds, nil
}

// tcpAddr is path as a host:port net.Listen takes, when it is one.
func tcpAddr(path string) (string, bool) {
	for _, p := range []string{"ipv4@", "ipv6@", "tcp@", "tcp4@", "tcp6@"} {
		path = strings.TrimPrefix(path, p)
	}
	if strings.Contains(path, "@") || strings.Contains(path, "$") || strings.HasPrefix(path, "/") {
		return "", false
	}
	host, port, err := net.SplitHostPort(path)
	if err != nil {
		return "", false
	}
	if n, err := strconv.Atoi(port); err != nil || n <= 0 || n > 65535 {
		return "", false // a range, a name, or none
	}
	if host == "*" {
		host = ""
	}
	return net.JoinHostPort(host, port), true
}

// CheckPortsFree fails, naming the frontend, the address and the fix, when
// another process already listens on an address a frontend binds: HAProxy
// binds with SO_REUSEPORT, so it would start and share the port's new
// connections with that process without a word. Each address is bound
// once without SO_REUSEPORT and released at once. Addresses that cannot be
// bound for another reason (not this host's, a privileged port) are
// HAProxy's to report.
func CheckPortsFree(binds []Bind) error {
	for _, b := range binds {
		ln, err := net.Listen("tcp", b.Addr)
		if err == nil {
			ln.Close()
			continue
		}
		if errors.Is(err, syscall.EADDRINUSE) {
			return fmt.Errorf("frontend %s binds %s, where another process already listens (HAProxy's SO_REUSEPORT would split the new connections with it): stop that process or change the bind (ss -ltnp shows who listens)", b.Frontend, b.Addr)
		}
	}
	return nil
}
