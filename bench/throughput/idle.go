package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/hapsuper/hapsuper/test/harness"
)

// idleCPU is what an idle HAProxy costs, in % of one core: hapsuper (zero
// when bare), HAProxy's master and its workers.
type idleCPU struct {
	hapsuper, master, workers float64
	// hapsuper's VmRSS, RssAnon and RssFile at the end of the window, kB
	// (zero when bare).
	rssKB, anonKB, fileKB int64
}

// idleSettle is how long a process runs before an idle measurement starts:
// startup (and hapsuper's fast polling until HAProxy serves) is not idle.
const idleSettle = 2 * time.Second

// measureIdleBare runs HAProxy alone in master-worker mode, as hapsuper
// runs it, and measures it for d without traffic.
func measureIdleBare(cfg, url string, d time.Duration) (idleCPU, error) {
	cmd := bare(cfg)
	stop, err := start(cmd, url, 5*time.Second)
	defer stop()
	if err != nil {
		return idleCPU{}, err
	}
	time.Sleep(idleSettle)
	master := cmd.Process.Pid
	m0, w0 := cpuNanos(master), cpuNanos(children(master)...)
	t0 := time.Now()
	time.Sleep(d)
	el := time.Since(t0)
	return idleCPU{
		master:  percent(cpuNanos(master)-m0, el),
		workers: percent(cpuNanos(children(master)...)-w0, el),
	}, nil
}

// measureIdleUnder runs the same HAProxy under a hapsuper binary, routing
// off, and measures hapsuper, the master and the workers for d without
// traffic.
func measureIdleUnder(bin, cfg, dir, url string, d time.Duration) (idleCPU, error) {
	cmd := under(bin, cfg, dir, "--routing", "off")
	stop, err := start(cmd, url, 10*time.Second)
	defer stop()
	if err != nil {
		return idleCPU{}, err
	}
	time.Sleep(idleSettle)
	sup := cmd.Process.Pid
	kids := children(sup)
	if len(kids) != 1 {
		return idleCPU{}, fmt.Errorf("hapsuper %d has %d children, want the HAProxy master alone", sup, len(kids))
	}
	master := kids[0]
	s0, m0, w0 := cpuNanos(sup), cpuNanos(master), cpuNanos(children(master)...)
	t0 := time.Now()
	time.Sleep(d)
	el := time.Since(t0)
	return idleCPU{
		hapsuper: percent(cpuNanos(sup)-s0, el),
		master:   percent(cpuNanos(master)-m0, el),
		workers:  percent(cpuNanos(children(master)...)-w0, el),
		rssKB:    harness.StatusKB(sup, "VmRSS"),
		anonKB:   harness.StatusKB(sup, "RssAnon"),
		fileKB:   harness.StatusKB(sup, "RssFile"),
	}, nil
}

func percent(ns int64, el time.Duration) float64 {
	return 100 * float64(ns) / float64(el.Nanoseconds())
}

// cpuNanos is the CPU time the processes' threads ran, in ns, from
// /proc/<pid>/task/*/schedstat: nanosecond precision, where /proc/<pid>/stat
// counts 10 ms ticks (an idle process runs well under one per second).
// Threads that exit take their time with them; neither hapsuper's nor
// HAProxy's exit while idle.
func cpuNanos(pids ...int) int64 {
	var sum int64
	for _, pid := range pids {
		tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
		for _, t := range tasks {
			b, err := os.ReadFile(t)
			if err != nil {
				continue
			}
			f := strings.Fields(string(b))
			if len(f) > 0 {
				n, _ := strconv.ParseInt(f[0], 10, 64)
				sum += n
			}
		}
	}
	return sum
}

// children are the pids whose parent is pid.
func children(pid int) []int {
	var out []int
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	for _, t := range tasks {
		b, _ := os.ReadFile(t)
		for f := range strings.FieldsSeq(string(b)) {
			if n, err := strconv.Atoi(f); err == nil {
				out = append(out, n)
			}
		}
	}
	return out
}
