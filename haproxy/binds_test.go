package haproxy

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A frontend whose port another process listens on stops the start with
// an error naming the frontend, the address and the fix; free ports, unix
// sockets and addresses of other hosts pass.
func TestCheckPortsFree(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	freeAddr := free.Addr().String()
	free.Close()
	cfg := filepath.Join(t.TempDir(), "haproxy.cfg")
	body := "defaults\n    mode http\nfrontend web\n    bind " + freeAddr + "\n    bind /tmp/x.sock\n    bind 192.0.2.1:80\n" +
		"listen stats\n    bind " + taken.Addr().String() + "\n"
	if err := os.WriteFile(cfg, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	binds, err := TCPBinds([]string{cfg})
	if err != nil {
		t.Fatal(err)
	}
	want := []Bind{{"web", freeAddr}, {"web", "192.0.2.1:80"}, {"stats", taken.Addr().String()}}
	if len(binds) != len(want) {
		t.Fatalf("TCPBinds = %v, want %v", binds, want)
	}
	for i := range want {
		if binds[i] != want[i] {
			t.Errorf("TCPBinds[%d] = %v, want %v", i, binds[i], want[i])
		}
	}
	err = CheckPortsFree(binds)
	if err == nil || !strings.Contains(err.Error(), "frontend stats binds "+taken.Addr().String()) || !strings.Contains(err.Error(), "stop that process or change the bind") {
		t.Errorf("CheckPortsFree with %s taken = %v", taken.Addr(), err)
	}
	if err := CheckPortsFree(binds[:2]); err != nil {
		t.Errorf("CheckPortsFree with free ports = %v", err)
	}
}

func TestTCPAddr(t *testing.T) {
	for in, want := range map[string]string{
		":8080": ":8080", "*:80": ":80", "0.0.0.0:443": "0.0.0.0:443", "[::]:443": "[::]:443",
		"ipv4@127.0.0.1:81": "127.0.0.1:81", "/run/x.sock": "", "unix@x.sock": "", "fd@3": "",
		":8080-8090": "", "${IP}:80": "", "quic4@:443": "",
	} {
		got, ok := tcpAddr(in)
		if got != want || ok != (want != "") {
			t.Errorf("tcpAddr(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
}
