package main

import (
	"errors"
	"sync"
	"time"

	"github.com/hapsuper/hapsuper/test/k8s/k8stest"
)

// freezer freezes nodes' kube-proxies for a while, each at most once at a
// time, and thaws them whatever happens.
type freezer struct {
	wg   sync.WaitGroup
	mu   sync.Mutex
	busy map[*k8stest.Node]bool
	errs []error
}

// freeze stops n's kube-proxy now and resumes it d later, unless it is
// already frozen by f.
func (f *freezer) freeze(n *k8stest.Node, d time.Duration) {
	f.mu.Lock()
	if f.busy == nil {
		f.busy = map[*k8stest.Node]bool{}
	}
	if f.busy[n] {
		f.mu.Unlock()
		return
	}
	f.busy[n] = true
	f.mu.Unlock()
	if err := n.KubeProxy.Freeze(); err != nil {
		f.fail(err)
	}
	f.wg.Go(func() {
		time.Sleep(d)
		if err := n.KubeProxy.Thaw(); err != nil {
			f.fail(err)
		}
		f.mu.Lock()
		f.busy[n] = false
		f.mu.Unlock()
	})
}

func (f *freezer) fail(err error) {
	f.mu.Lock()
	f.errs = append(f.errs, err)
	f.mu.Unlock()
}

// wait returns once every frozen kube-proxy was thawed, with what failed.
func (f *freezer) wait() error {
	f.wg.Wait()
	f.mu.Lock()
	defer f.mu.Unlock()
	return errors.Join(f.errs...)
}
