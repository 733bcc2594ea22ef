package metrics

import (
	"bytes"
	"os"
	"runtime"
	"strconv"
	"syscall"
)

// writeRuntime writes the Go runtime's state under client_golang's names,
// so that dashboards built on its Go collector keep working: goroutines,
// threads, heap and GC totals. The GC pause summary has no quantiles, only
// its sum and count.
func writeRuntime(e *exposition) {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	threads, _ := runtime.ThreadCreateProfile(nil)
	e.one("go_goroutines", "gauge", "Number of goroutines that currently exist.", float64(runtime.NumGoroutine()))
	e.one("go_threads", "gauge", "Number of OS threads created.", float64(threads))
	e.family("go_info", "gauge", "Information about the Go environment.")
	e.sample("go_info", 1, "version", runtime.Version())
	e.family("go_gc_duration_seconds", "summary", "A summary of the wall-time pause (stop-the-world) duration in garbage collection cycles.")
	e.sample("go_gc_duration_seconds_sum", float64(m.PauseTotalNs)/1e9)
	e.sample("go_gc_duration_seconds_count", float64(m.NumGC))
	e.one("go_memstats_alloc_bytes", "gauge", "Number of heap bytes allocated and currently in use.", float64(m.HeapAlloc))
	e.one("go_memstats_alloc_bytes_total", "counter", "Total number of heap bytes allocated, even if freed.", float64(m.TotalAlloc))
	e.one("go_memstats_heap_inuse_bytes", "gauge", "Number of heap bytes that are in use.", float64(m.HeapInuse))
	e.one("go_memstats_heap_objects", "gauge", "Number of currently allocated objects.", float64(m.HeapObjects))
	e.one("go_memstats_next_gc_bytes", "gauge", "Number of heap bytes when next garbage collection will take place.", float64(m.NextGC))
	e.one("go_memstats_last_gc_time_seconds", "gauge", "Number of seconds since 1970 of last garbage collection.", float64(m.LastGC)/1e9)
	e.one("go_memstats_stack_inuse_bytes", "gauge", "Number of bytes obtained from system for stack allocator in non-CGO environments.", float64(m.StackInuse))
	e.one("go_memstats_sys_bytes", "gauge", "Number of bytes obtained from system.", float64(m.Sys))
}

// userHZ is the unit of the times in /proc/<pid>/stat: USER_HZ, 100 on
// every Linux ABI.
const userHZ = 100

// writeProcess writes the process's CPU, memory and file descriptors under
// client_golang's process collector names, read from /proc. A value that
// cannot be read is left out of the scrape rather than failing it.
func writeProcess(e *exposition) {
	if st, ok := readStat(); ok {
		e.one("process_cpu_seconds_total", "counter", "Total user and system CPU time spent in seconds.", float64(st.utime+st.stime)/userHZ)
		e.one("process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.", float64(st.vsize))
		e.one("process_resident_memory_bytes", "gauge", "Resident memory size in bytes.", float64(st.rss*int64(os.Getpagesize())))
		if boot, ok := bootTime(); ok {
			e.one("process_start_time_seconds", "gauge", "Start time of the process since unix epoch in seconds.", float64(boot)+float64(st.start)/userHZ)
		}
	}
	if fds, err := os.ReadDir("/proc/self/fd"); err == nil {
		e.one("process_open_fds", "gauge", "Number of open file descriptors.", float64(len(fds)))
	}
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err == nil {
		e.one("process_max_fds", "gauge", "Maximum number of open file descriptors.", float64(lim.Cur))
	}
}

// stat is what writeProcess takes from /proc/self/stat.
type stat struct {
	utime, stime, start, vsize, rss int64
}

func readStat() (stat, bool) {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return stat{}, false
	}
	return parseStat(b)
}

// parseStat reads proc(5)'s stat line. The command name is in parentheses
// and may hold spaces and parentheses itself, so fields are counted from
// the last ')': field N of proc(5) is fields[N-3] after it.
func parseStat(b []byte) (stat, bool) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return stat{}, false
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 22 {
		return stat{}, false
	}
	var st stat
	for _, p := range []struct {
		dst   *int64
		field int
	}{{&st.utime, 14}, {&st.stime, 15}, {&st.start, 22}, {&st.vsize, 23}, {&st.rss, 24}} {
		v, err := strconv.ParseInt(string(f[p.field-3]), 10, 64)
		if err != nil {
			return stat{}, false
		}
		*p.dst = v
	}
	return st, true
}

// bootTime is the btime line of /proc/stat: the boot time in seconds since
// the epoch, which process start times count from.
func bootTime() (int64, bool) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, false
	}
	for line := range bytes.SplitSeq(b, []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte("btime ")); ok {
			n, err := strconv.ParseInt(string(bytes.TrimSpace(v)), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}
