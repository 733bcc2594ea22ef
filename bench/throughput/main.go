// Command throughput measures what hapsuper costs a serving HAProxy: req/s
// of the same HAProxy configuration run bare and under hapsuper, A/B
// interleaved in one run, plus hapsuper's own RSS and CPU while it serves;
// then what an idle HAProxy costs bare and under hapsuper (CPU of
// hapsuper, of HAProxy's master and of its workers), interleaved too, and
// optionally under a second hapsuper build for a before/after in one run.
//
//	cd bench && go run ./throughput [-rounds 5] [-duration 5s] [-connections 50]
//	    [-idle 20s] [-idle-rounds 3] [-baseline path/to/older/hapsuper]
//
// It needs haproxy and wrk (Debian packages) and loopback only. HAProxy
// answers from the config itself (http-request return), so the figure is
// HAProxy's ceiling on this machine and any supervisor overhead shows in it.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hapsuper/hapsuper/test/harness"
)

func main() {
	rounds := flag.Int("rounds", 5, "A/B rounds (each runs bare, then under hapsuper)")
	duration := flag.Duration("duration", 5*time.Second, "wrk duration per measurement")
	conns := flag.Int("connections", 50, "wrk connections")
	hapsuperBin := flag.String("hapsuper", "", "hapsuper binary (default: build ./cmd/hapsuper)")
	idle := flag.Duration("idle", 20*time.Second, "idle measurement per process and round (0: none)")
	idleRounds := flag.Int("idle-rounds", 3, "idle rounds (each runs bare, under hapsuper, under -baseline)")
	baseline := flag.String("baseline", "", "a second hapsuper binary measured idle in the same rounds (before/after)")
	flag.Parse()
	if err := run(*rounds, *duration, *conns, *hapsuperBin); err != nil {
		fmt.Fprintln(os.Stderr, "throughput:", err)
		os.Exit(1)
	}
	if *idle > 0 && *idleRounds > 0 {
		if err := runIdle(*idleRounds, *idle, *hapsuperBin, *baseline); err != nil {
			fmt.Fprintln(os.Stderr, "throughput: idle:", err)
			os.Exit(1)
		}
	}
}

// setup makes the work directory, builds hapsuper when bin is empty and
// writes the HAProxy configuration on a free port.
func setup(bin string) (dir, hapsuper, cfg, url string, err error) {
	if dir, err = os.MkdirTemp("", "hapsuper-bench-"); err != nil {
		return "", "", "", "", err
	}
	defer func() {
		if err != nil {
			os.RemoveAll(dir)
		}
	}()
	if bin == "" {
		if bin, err = harness.Build(dir); err != nil {
			return "", "", "", "", err
		}
	}
	port, err := harness.FreePort()
	if err != nil {
		return "", "", "", "", err
	}
	cfg = filepath.Join(dir, "haproxy.cfg")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, config, port), 0o644); err != nil {
		return "", "", "", "", err
	}
	return dir, bin, cfg, fmt.Sprintf("http://127.0.0.1:%d/", port), nil
}

// runIdle measures idle CPU bare, under hapsuper and under the baseline
// build, rotating the order each round so drift spreads over all three.
func runIdle(rounds int, d time.Duration, bin, baseline string) error {
	dir, bin, cfg, url, err := setup(bin)
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	type subject struct {
		name string
		run  func() (idleCPU, error)
		got  []idleCPU
	}
	subjects := []*subject{
		{name: "bare HAProxy", run: func() (idleCPU, error) { return measureIdleBare(cfg, url, d) }},
		{name: "under hapsuper", run: func() (idleCPU, error) { return measureIdleUnder(bin, cfg, dir, url, d) }},
	}
	if baseline != "" {
		subjects = append(subjects, &subject{name: "under baseline build", run: func() (idleCPU, error) { return measureIdleUnder(baseline, cfg, dir, url, d) }})
	}
	fmt.Println()
	for r := range rounds {
		for i := range subjects {
			sj := subjects[(i+r)%len(subjects)]
			c, err := sj.run()
			if err != nil {
				return fmt.Errorf("round %d, %s: %w", r+1, sj.name, err)
			}
			sj.got = append(sj.got, c)
			fmt.Printf("idle round %d/%d, %s: hapsuper %.3f%%, master %.3f%%, workers %.3f%%; hapsuper RSS %.1f MB (anon %.1f, file %.1f)\n",
				r+1, rounds, sj.name, c.hapsuper, c.master, c.workers, float64(c.rssKB)/1024, float64(c.anonKB)/1024, float64(c.fileKB)/1024)
		}
	}
	fmt.Printf("\n| idle (median of %d × %s) | hapsuper, %% of one core | HAProxy master | HAProxy workers | hapsuper RSS (anon + file), MB |\n|---|---|---|---|---|\n", rounds, d)
	for _, sj := range subjects {
		pick := func(f func(idleCPU) float64) float64 {
			var v []float64
			for _, c := range sj.got {
				v = append(v, f(c))
			}
			return median(v)
		}
		rss := "—"
		if sj.got[0].rssKB > 0 {
			rss = fmt.Sprintf("%.1f (%.1f + %.1f)", pick(func(c idleCPU) float64 { return float64(c.rssKB) / 1024 }),
				pick(func(c idleCPU) float64 { return float64(c.anonKB) / 1024 }), pick(func(c idleCPU) float64 { return float64(c.fileKB) / 1024 }))
		}
		fmt.Printf("| %s | %.3f | %.3f | %.3f | %s |\n", sj.name,
			pick(func(c idleCPU) float64 { return c.hapsuper }),
			pick(func(c idleCPU) float64 { return c.master }),
			pick(func(c idleCPU) float64 { return c.workers }), rss)
	}
	return nil
}

func run(rounds int, duration time.Duration, conns int, bin string) error {
	if rounds <= 0 {
		return nil
	}
	if _, err := exec.LookPath("wrk"); err != nil {
		return fmt.Errorf("wrk not found: apt-get install wrk")
	}
	dir, bin, cfg, url, err := setup(bin)
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	var bare, under, ratios []float64
	var rss []int64
	var cpu []float64
	for r := 1; r <= rounds; r++ {
		// Alternate the order (ABBA) so that warm-up and drift cancel out.
		var b, u float64
		var m usage
		if r%2 == 1 {
			if b, err = measureBare(cfg, url, duration, conns); err == nil {
				u, m, err = measureUnder(bin, cfg, dir, url, duration, conns)
			}
		} else {
			if u, m, err = measureUnder(bin, cfg, dir, url, duration, conns); err == nil {
				b, err = measureBare(cfg, url, duration, conns)
			}
		}
		if err != nil {
			return fmt.Errorf("round %d: %w", r, err)
		}
		bare, under, ratios = append(bare, b), append(under, u), append(ratios, u/b)
		rss, cpu = append(rss, m.rssKB), append(cpu, m.cpuPercent)
		fmt.Printf("round %d/%d: bare %.0f req/s, under hapsuper %.0f req/s (ratio %.3f), hapsuper RSS %.1f MB, CPU %.2f%%\n",
			r, rounds, b, u, u/b, float64(m.rssKB)/1024, m.cpuPercent)
	}
	mb, mu := median(bare), median(under)
	fmt.Printf("\n| measure | value |\n|---|---|\n")
	fmt.Printf("| HAProxy req/s bare (median of %d × %s, %d conns) | %.0f |\n", rounds, duration, conns, mb)
	fmt.Printf("| HAProxy req/s under hapsuper (median) | %.0f |\n", mu)
	fmt.Printf("| ratio under/bare, median of the rounds' ratios (target ≥ 0.99) | %.3f (min %.3f, max %.3f) |\n",
		median(ratios), slices.Min(ratios), slices.Max(ratios))
	fmt.Printf("| hapsuper RSS while serving, max (target ≤ 20 MB) | %.1f MB |\n", float64(slices.Max(rss))/1024)
	fmt.Printf("| hapsuper CPU while serving, median (of one core) | %.2f%% |\n", median(cpu))
	return nil
}

const config = `global
    maxconn 4096
defaults
    mode http
    timeout connect 2s
    timeout client 30s
    timeout server 30s
frontend bench
    bind 127.0.0.1:%d
    http-request return status 200 content-type text/plain string "ok"
`

// bare is HAProxy alone in master-worker mode, as hapsuper runs it.
func bare(cfg string) *exec.Cmd { return exec.Command("haproxy", "-W", "-db", "-f", cfg) }

// under is the same HAProxy under the hapsuper binary bin, its sockets in
// dir, with extra flags.
func under(bin, cfg, dir string, flags ...string) *exec.Cmd {
	return exec.Command(bin, slices.Concat([]string{
		"--master-socket", filepath.Join(dir, "master.sock"),
		"--status-socket", filepath.Join(dir, "status.sock"),
		"--override-file", filepath.Join(dir, "override.cfg"),
		"--log-level", "warn"}, flags, []string{"--", "haproxy", "-f", cfg})...)
}

// start runs cmd and returns once it serves url, with the stop to defer:
// SIGTERM, then SIGKILL after bound.
func start(cmd *exec.Cmd, url string, bound time.Duration) (stop func(), err error) {
	cmd.Stderr = os.Stderr // HAProxy's own, or inherited from hapsuper
	if err := cmd.Start(); err != nil {
		return func() {}, err
	}
	stop = func() { cmd.Process.Signal(syscall.SIGTERM); waitBounded(cmd, bound) }
	return stop, harness.WaitListening(nil, strings.TrimSuffix(strings.TrimPrefix(url, "http://"), "/"), 5*time.Second)
}

func waitBounded(cmd *exec.Cmd, bound time.Duration) {
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(bound):
		cmd.Process.Kill()
		<-done
	}
}

func measureBare(cfg, url string, d time.Duration, conns int) (float64, error) {
	stop, err := start(bare(cfg), url, 5*time.Second)
	defer stop()
	if err != nil {
		return 0, err
	}
	return wrk(url, d, conns)
}

type usage struct {
	rssKB      int64
	cpuPercent float64
}

func measureUnder(bin, cfg, dir, url string, d time.Duration, conns int) (float64, usage, error) {
	cmd := under(bin, cfg, dir, "--quiet-period", "200ms")
	stop, err := start(cmd, url, 10*time.Second)
	defer stop()
	if err != nil {
		return 0, usage{}, err
	}
	t0, c0 := time.Now(), harness.CPUTicks(cmd.Process.Pid)
	rps, err := wrk(url, d, conns)
	if err != nil {
		return 0, usage{}, err
	}
	elapsed, ticks := time.Since(t0).Seconds(), harness.CPUTicks(cmd.Process.Pid)-c0
	u := usage{rssKB: harness.StatusKB(cmd.Process.Pid, "VmRSS"), cpuPercent: 100 * float64(ticks) / 100 / elapsed} // USER_HZ = 100
	return rps, u, nil
}

var reqPerSec = regexp.MustCompile(`Requests/sec:\s+([0-9.]+)`)

func wrk(url string, d time.Duration, conns int) (float64, error) {
	out, err := exec.Command("wrk", "-t", "1", "-c", strconv.Itoa(conns), "-d", d.String(), url).CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("wrk: %v: %s", err, out)
	}
	m := reqPerSec.FindSubmatch(out)
	if m == nil {
		return 0, fmt.Errorf("no Requests/sec in wrk output: %s", out)
	}
	return strconv.ParseFloat(string(m[1]), 64)
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}
