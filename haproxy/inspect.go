package haproxy

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	parser "github.com/haproxytech/client-native/v5/config-parser"
	"github.com/haproxytech/client-native/v5/config-parser/options"
	"github.com/haproxytech/client-native/v5/config-parser/types"

	"github.com/hapsuper/hapsuper/conf"
)

// Frontend is one frontend (or listen section) of the user's configuration:
// what HAProxy reports as a FRONTEND row in `show stat`.
type Frontend struct {
	Name string
	Mode string // "http" or "tcp": its own mode, else its defaults section's, else tcp
	// Graceful says that HAProxy's soft stop ends this frontend's
	// established connections cleanly: TCP mode (they are left alone), or
	// HTTP with option idle-close-on-response (an idle kept-alive connection
	// gets one more response, with Connection: close; HTTP/2 gets GOAWAY).
	// Once routing is withdrawn only its new connections count for quiet.
	Graceful bool
	// IdleBound is, for a graceful HTTP frontend, how long after the soft
	// stop an idle kept-alive connection can hold its worker:
	// close-spread-time when set, else the first of timeout
	// http-keep-alive, http-request, client (HAProxy's fallback order),
	// else 0: nothing ends it before the hard stop.
	IdleBound time.Duration
}

// Inspection is what hapsuper learned from the user's HAProxy configuration.
type Inspection struct {
	Frontends     []Frontend    // sorted by name
	HardStopAfter time.Duration // the user's global hard-stop-after; 0 when unset
	Warnings      []string      // each says what to change
}

// parseMu serialises parsing: the config parser keeps state in a package
// variable.
var parseMu sync.Mutex

// Inspect reads the configuration files, in HAProxy's order, and checks them
// against s. It never writes them. Unknown names in s.IgnoreFrontends are an
// error that lists the known frontends. Conditional blocks (.if) are not
// evaluated: what they hold counts as set.
func Inspect(files []string, s conf.Settings) (Inspection, error) {
	p, err := parseFiles(files)
	if err != nil {
		return Inspection{}, err
	}
	var in Inspection
	c := config{p}
	spread, err := c.globalTime("close-spread-time")
	if err != nil {
		return Inspection{}, fmt.Errorf("%w in global of %s", err, strings.Join(files, ", "))
	}
	for _, section := range []parser.Section{parser.Frontends, parser.Listen} {
		names, _ := p.SectionsGet(section)
		for _, name := range names {
			fe, err := c.frontend(section, name, spread)
			if err != nil {
				return Inspection{}, fmt.Errorf("%w in %s %s of %s", err, section, name, strings.Join(files, ", "))
			}
			in.Frontends = append(in.Frontends, fe)
		}
	}
	slices.SortFunc(in.Frontends, func(a, b Frontend) int { return strings.Compare(a.Name, b.Name) })
	if err := checkIgnored(in.Frontends, s.IgnoreFrontends); err != nil {
		return Inspection{}, err
	}

	for _, fe := range in.Frontends {
		if fe.Mode != "http" || slices.Contains(s.IgnoreFrontends, fe.Name) {
			continue
		}
		section := c.sectionOf(fe.Name)
		switch {
		case !fe.Graceful:
			in.Warnings = append(in.Warnings, fmt.Sprintf(
				"frontend %s: idle keep-alive connections are closed at soft stop, so a client reusing one can fail, and its kept-alive requests keep the drain from ending before --max-wait: add `option idle-close-on-response` to defaults or frontend %s", fe.Name, fe.Name))
		case fe.IdleBound == 0:
			in.Warnings = append(in.Warnings, fmt.Sprintf(
				"frontend %s: nothing ends an idle kept-alive connection after the soft stop (no timeout http-keep-alive, http-request or client, no close-spread-time), so one idle client keeps HAProxy until the hard stop: add `timeout http-keep-alive 10s` to defaults or frontend %s", fe.Name, fe.Name))
		case fe.IdleBound > s.Budget()-s.WithdrawnQuiet(s.Routing):
			in.Warnings = append(in.Warnings, fmt.Sprintf(
				"frontend %s: idle kept-alive connections may stay %v after the soft stop (its keep-alive timeout), longer than the stop budget %v allows, so HAProxy ends at the hard stop: lower `timeout http-keep-alive` or set `close-spread-time` in global", fe.Name, fe.IdleBound, s.Budget()))
		}
		if _, ok := c.lookup(section, fe.Name, "timeout client-fin").(*types.SimpleTimeout); !ok {
			in.Warnings = append(in.Warnings, fmt.Sprintf(
				"frontend %s: HTTP/2 connections without streams stay open after the soft stop until the client closes them: add `timeout client-fin` (such as 5s) to defaults or frontend %s", fe.Name, fe.Name))
		}
	}

	if v, err := p.Get(parser.Global, parser.GlobalSectionName, "hard-stop-after"); err == nil {
		if sc, ok := v.(*types.StringC); ok {
			d, err := parseHAProxyTime(sc.Value)
			if err != nil {
				return Inspection{}, fmt.Errorf("read hard-stop-after %q in global of %s: %w", sc.Value, strings.Join(files, ", "), err)
			}
			in.HardStopAfter = d
			if d > s.Budget() {
				in.Warnings = append(in.Warnings, fmt.Sprintf(
					"global hard-stop-after %s is longer than the stop budget %v (--grace-period − --margin): hapsuper's override file sets hard-stop-after %v, which wins; lower it in your configuration to silence this",
					sc.Value, s.Budget(), s.Budget()))
			}
		}
	}
	return in, nil
}

// parseFiles parses the files as one configuration, as HAProxy does: a
// defaults section applies to the proxies after it, in the next files too
// (readConfig says what the parser is given).
func parseFiles(files []string) (parser.Parser, error) {
	all, err := readConfig(files)
	if err != nil {
		return nil, err
	}
	parseMu.Lock()
	defer parseMu.Unlock()
	p, err := parser.New(options.Reader(bytes.NewReader(all)), options.UseListenSectionParsers)
	if err != nil {
		return nil, fmt.Errorf("parse HAProxy configuration %s: %w", strings.Join(files, ", "), err)
	}
	return p, nil
}

func checkIgnored(frontends []Frontend, ignored []string) error {
	var known []string
	for _, fe := range frontends {
		known = append(known, fe.Name)
	}
	for _, name := range ignored {
		if !slices.Contains(known, name) {
			return fmt.Errorf("check --ignore-frontends: no frontend %q in the HAProxy configuration; it has: %s", name, strings.Join(known, ", "))
		}
	}
	return nil
}

// config answers questions about a parsed configuration, following each
// proxy's defaults section and that section's `from` chain.
type config struct{ p parser.Parser }

// sectionOf says whether name is a frontend or a listen section.
func (c config) sectionOf(name string) parser.Section {
	if names, _ := c.p.SectionsGet(parser.Frontends); slices.Contains(names, name) {
		return parser.Frontends
	}
	return parser.Listen
}

// lookup returns the attribute's value in the proxy, else in its defaults
// chain; nil when set nowhere.
func (c config) lookup(section parser.Section, name, attribute string) any {
	for seen := 0; name != "" && seen < 64; seen++ { // bound: `from` cycles
		if v, err := c.p.Get(section, name, attribute); err == nil && v != nil {
			return v
		}
		name, _ = c.p.SectionsDefaultsFromGet(section, name)
		section = parser.Defaults
	}
	return nil
}

// frontend reads one frontend's mode and how its soft stop ends its
// connections; spread is the global close-spread-time (0 when unset).
func (c config) frontend(section parser.Section, name string, spread time.Duration) (Frontend, error) {
	fe := Frontend{Name: name, Mode: c.mode(section, name)}
	if fe.Mode != "http" {
		fe.Graceful = true
		return fe, nil
	}
	opt, ok := c.lookup(section, name, "option idle-close-on-response").(*types.SimpleOption)
	fe.Graceful = ok && !opt.NoOption
	if !fe.Graceful {
		return fe, nil
	}
	if spread > 0 {
		fe.IdleBound = spread
		return fe, nil
	}
	for _, timeout := range []string{"http-keep-alive", "http-request", "client"} {
		t, ok := c.lookup(section, name, "timeout "+timeout).(*types.SimpleTimeout)
		if !ok {
			continue
		}
		d, err := parseHAProxyTime(t.Value)
		if err != nil {
			return Frontend{}, fmt.Errorf("read timeout %s %q: %w", timeout, t.Value, err)
		}
		if d > 0 {
			fe.IdleBound = d
			break
		}
	}
	return fe, nil
}

// globalTime reads a time of the global section; 0 when unset.
func (c config) globalTime(attribute string) (time.Duration, error) {
	v, err := c.p.Get(parser.Global, parser.GlobalSectionName, attribute)
	if err != nil {
		return 0, nil
	}
	sc, ok := v.(*types.StringC)
	if !ok || sc.Value == "" || sc.Value == "infinite" {
		return 0, nil
	}
	d, err := parseHAProxyTime(sc.Value)
	if err != nil {
		return 0, fmt.Errorf("read %s %q: %w", attribute, sc.Value, err)
	}
	return d, nil
}

func (c config) mode(section parser.Section, name string) string {
	if m, ok := c.lookup(section, name, "mode").(*types.StringC); ok && m.Value != "" {
		return m.Value
	}
	return "tcp"
}

// parseHAProxyTime reads an HAProxy time: an integer with an optional unit
// (us, ms, s, m, h, d); milliseconds without one.
func parseHAProxyTime(v string) (time.Duration, error) {
	units := []struct {
		suffix string
		unit   time.Duration
	}{{"us", time.Microsecond}, {"ms", time.Millisecond}, {"s", time.Second}, {"m", time.Minute}, {"h", time.Hour}, {"d", 24 * time.Hour}}
	num, unit := v, time.Millisecond
	for _, u := range units {
		if n, ok := strings.CutSuffix(v, u.suffix); ok {
			num, unit = n, u.unit
			break
		}
	}
	var n int64
	if _, err := fmt.Sscanf(num, "%d", &n); err != nil || fmt.Sprint(n) != num || n < 0 {
		return 0, fmt.Errorf("not an HAProxy time: use a number with a unit such as 30s or 1h")
	}
	return time.Duration(n) * unit, nil
}
