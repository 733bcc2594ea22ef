package supervisor

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/hapsuper/hapsuper/runtimeapi"
)

// te is a table entry: address, requests, rate.
func te(key string, n, rate uint64) runtimeapi.TableEntry {
	return runtimeapi.TableEntry{Key: key, Requests: n, Rate: rate}
}

// verdict is whether the check says the pod is marked down, and its text.
func verdict(c *lbCheck) (bool, string) {
	p := c.condition()
	return p.MarkedDown(), p.String()
}

func tables(byWorker map[int][]runtimeapi.TableEntry) *lbTables { return &lbTables{byWorker: byWorker} }

// Every address checking at the stop must get its threshold of failed
// checks, counted from the first reading after the check failed, over
// every worker; an address that stopped checking before (no rate) is no
// checker; one that starts later is.
func TestLBCheckVerdict(t *testing.T) {
	c := &lbCheck{bind: ":8404", threshold: 2}
	if done, d := verdict(c); done || !strings.Contains(d, "not failed yet") {
		t.Fatalf("before any reading: %v %q", done, d)
	}
	c.observe(tables(map[int][]runtimeapi.TableEntry{100: {te("::ffff:10.0.0.5", 40, 6), te("::ffff:10.0.0.6", 38, 6), te("::ffff:10.9.9.9", 3, 0)}}))
	c.observe(tables(map[int][]runtimeapi.TableEntry{100: {te("::ffff:10.0.0.5", 42, 6), te("::ffff:10.0.0.6", 39, 6), te("::ffff:10.9.9.9", 3, 0)}}))
	done, d := verdict(c)
	if done || !strings.Contains(d, "10.0.0.5 2, 10.0.0.6 1") || strings.Contains(d, "10.9.9.9") {
		t.Fatalf("one address short: %v %q", done, d)
	}
	// A reload's new worker answered 200 until its check was failed: a
	// balancer may have started counting again, so every address does.
	c.observe(tables(map[int][]runtimeapi.TableEntry{100: {te("::ffff:10.0.0.5", 42, 6), te("::ffff:10.0.0.6", 39, 6)}, 200: {te("::ffff:10.0.0.6", 0, 0)}}))
	if done, d = verdict(c); done || !strings.Contains(d, "10.0.0.5 0, 10.0.0.6 0") {
		t.Fatalf("after a new worker every address counts afresh: %v %q", done, d)
	}
	c.observe(tables(map[int][]runtimeapi.TableEntry{100: {te("::ffff:10.0.0.5", 44, 6), te("::ffff:10.0.0.6", 40, 6)},
		200: {te("::ffff:10.0.0.6", 1, 1), te("::ffff:10.0.0.7", 1, 1)}}))
	done, d = verdict(c)
	if done || !strings.Contains(d, "10.0.0.5 2, 10.0.0.6 2, 10.0.0.7 1") {
		t.Fatalf("an address that began checking since must reach the threshold too: %v %q", done, d)
	}
	c.observe(tables(map[int][]runtimeapi.TableEntry{200: {te("::ffff:10.0.0.6", 1, 1), te("::ffff:10.0.0.7", 2, 2)}}))
	if done, d = verdict(c); !done || !strings.Contains(d, "threshold 2") {
		t.Fatalf("every address at its threshold: %v %q", done, d)
	}
}

// No address checked the pod: pending, asking whether the balancer's check
// is on the bind; a failed reading is named.
func TestLBCheckNoChecker(t *testing.T) {
	c := &lbCheck{bind: ":8404", threshold: 2}
	c.observe(tables(map[int][]runtimeapi.TableEntry{100: {te("::ffff:10.9.9.9", 3, 0)}}))
	c.observe(&lbTables{err: errors.New("show table on worker 100: no such table")})
	done, d := verdict(c)
	if done || !strings.Contains(d, "is the balancer's health check on :8404?") || !strings.Contains(d, "no such table") {
		t.Fatalf("%v %q", done, d)
	}
}

// The poller fails the check once per worker, from the stop on, and reads
// every worker's table.
func TestLBCheckIO(t *testing.T) {
	cli := &fakeLBCLI{tables: map[int][]runtimeapi.TableEntry{100: {te("10.0.0.5", 1, 1)}, 101: nil}}
	io := &lbCheckIO{cli: cli}
	s := runtimeapi.Sample{Workers: []runtimeapi.WorkerSample{{Process: runtimeapi.Process{PID: 100}}, {Process: runtimeapi.Process{PID: 101}}}}
	if got := io.poll(t.Context(), s); got != nil || len(cli.failed) != 0 {
		t.Fatalf("before the stop: %+v, failed %v", got, cli.failed)
	}
	io.failing.Store(true)
	io.poll(t.Context(), s)
	got := io.poll(t.Context(), s)
	if got.err != nil || len(got.byWorker) != 2 || len(got.byWorker[100]) != 1 {
		t.Fatalf("tables %+v", got)
	}
	if len(cli.failed) != 2 || cli.failed[0] != "100 hapsuper-lb-serving/serving maint" {
		t.Fatalf("set server calls %v: want one per worker", cli.failed)
	}
	cli.err = errors.New("No such server.")
	io.failed = nil
	if got := io.poll(t.Context(), s); got.err == nil || !strings.Contains(got.err.Error(), "fail the load balancer's check on worker 100") {
		t.Fatalf("error %v", got.err)
	}
}

type fakeLBCLI struct {
	tables map[int][]runtimeapi.TableEntry
	failed []string
	err    error
}

func (f *fakeLBCLI) SetServerState(_ context.Context, pid int, server, state string) error {
	if f.err != nil {
		return f.err
	}
	f.failed = append(f.failed, fmt.Sprintf("%d %s %s", pid, server, state))
	return nil
}

func (f *fakeLBCLI) ShowTable(_ context.Context, pid int, name string) ([]runtimeapi.TableEntry, error) {
	return f.tables[pid], nil
}

// An address idle at the stop (in the table, no rate: it last checked more
// than two minutes before) that checks again during the drain is a checker
// like any other: the drain waits for its threshold too, on the worker it
// was read on first and after a reload's new worker alike.
func TestLBCheckIdleAddressChecksAgain(t *testing.T) {
	c := &lbCheck{bind: ":8404", threshold: 3}
	c.observe(tables(map[int][]runtimeapi.TableEntry{100: {te("::ffff:10.0.0.5", 40, 6), te("::ffff:10.0.0.8", 7, 0)}}))
	c.observe(tables(map[int][]runtimeapi.TableEntry{100: {te("::ffff:10.0.0.5", 43, 6), te("::ffff:10.0.0.8", 8, 1)}}))
	done, d := verdict(c)
	if done || !strings.Contains(d, "10.0.0.5 3, 10.0.0.8 1") {
		t.Fatalf("an idle address that checks again must reach the threshold: %v %q", done, d)
	}
	c.observe(tables(map[int][]runtimeapi.TableEntry{100: {te("::ffff:10.0.0.5", 44, 6), te("::ffff:10.0.0.8", 10, 1)}}))
	if done, d = verdict(c); !done || !strings.Contains(d, "10.0.0.5 4, 10.0.0.8 3") {
		t.Fatalf("both at their threshold: %v %q", done, d)
	}

	// After a reload: idle in the new worker's first reading, then checking.
	c = &lbCheck{bind: ":8404", threshold: 1}
	c.observe(tables(map[int][]runtimeapi.TableEntry{100: {te("::ffff:10.0.0.5", 40, 6)}}))
	c.observe(tables(map[int][]runtimeapi.TableEntry{100: {te("::ffff:10.0.0.5", 41, 6)}, 200: {te("::ffff:10.0.0.9", 2, 0)}}))
	c.observe(tables(map[int][]runtimeapi.TableEntry{100: {te("::ffff:10.0.0.5", 42, 6)}, 200: {te("::ffff:10.0.0.9", 2, 0)}}))
	if done, d := verdict(c); !done || strings.Contains(d, "10.0.0.9") {
		t.Fatalf("an idle address that stays idle is no checker: %v %q", done, d)
	}
	c.observe(tables(map[int][]runtimeapi.TableEntry{100: {te("::ffff:10.0.0.5", 43, 6)}, 200: {te("::ffff:10.0.0.9", 3, 1)}}))
	if done, d := verdict(c); !done || !strings.Contains(d, "10.0.0.9 1") {
		t.Fatalf("the new worker's idle address checking again counts: %v %q", done, d)
	}
}
