package k8stest

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

const (
	slotLockDir = "/run/hapsuper-k8s"
	maxSlots    = 200
	portBase    = 20000
)

// slot is the share of host resources one harness holds while it runs: the
// host subnet 10.250.<n>.0/24 and the ports portBase+4n … portBase+4n+2 on
// the host. A lock file (released by the kernel when the process dies) makes
// parallel test processes pick different slots.
type slot struct {
	n    int
	lock *os.File
}

// claimSlot takes the first free slot.
func claimSlot() (*slot, error) {
	if err := os.MkdirAll(slotLockDir, 0o755); err != nil {
		return nil, fmt.Errorf("create %s: %w", slotLockDir, err)
	}
	for n := range maxSlots {
		f, err := os.OpenFile(filepath.Join(slotLockDir, "slot-"+strconv.Itoa(n)), os.O_CREATE|os.O_RDWR, 0o600)
		if err != nil {
			return nil, fmt.Errorf("open slot lock: %w", err)
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
			f.Close()
			continue
		}
		s := &slot{n: n, lock: f}
		if s.free() {
			return s, nil
		}
		f.Close()
	}
	return nil, errors.New("claim a network slot: all taken (are many harnesses running, or 10.250.x.0/24 in use on the host?)")
}

// free checks that nothing else on the host uses the slot's subnet or ports.
func (s *slot) free() bool {
	hostNet := s.hostPrefix()
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil && hostNet.Overlaps(p) {
			return false
		}
	}
	for _, port := range []int{s.etcdPort(), s.etcdPeerPort(), s.apiserverPort()} {
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			return false
		}
		ln.Close()
	}
	return true
}

func (s *slot) release() { s.lock.Close() }

func (s *slot) hostPrefix() netip.Prefix {
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 250, byte(s.n), 0}), 24)
}

// hostIP is the host's address on the fabric; the apiserver listens there.
func (s *slot) hostIP() netip.Addr { return netip.AddrFrom4([4]byte{10, 250, byte(s.n), 1}) }

// nodeIP is node i's address on the fabric.
func (s *slot) nodeIP(i int) netip.Addr {
	return netip.AddrFrom4([4]byte{10, 250, byte(s.n), byte(10 + i)})
}

func (s *slot) etcdPort() int      { return portBase + 4*s.n }
func (s *slot) etcdPeerPort() int  { return portBase + 4*s.n + 1 }
func (s *slot) apiserverPort() int { return portBase + 4*s.n + 2 }
