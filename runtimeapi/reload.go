package runtimeapi

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// ErrReloadFailed is wrapped when the master (2.7 and later) answers
// `Success=0` to a reload; the error carries its output.
var ErrReloadFailed = errors.New("reload failed")

// Reload runs `reload` on the master. HAProxy 2.7 and later answer
// "Success=1" or "Success=0" followed by the startup logs; Success=0 is an
// error carrying them. HAProxy 2.6 answers nothing: the master re-executes
// itself and the connection ends with EOF, which is a success here; whether
// the new configuration loaded shows only later as the master's
// FailedReloads in ShowProc (or in HAProxy's own log).
func (c *Client) Reload(ctx context.Context) error {
	reply, err := c.roundTrip(ctx, "reload")
	if err != nil {
		return fmt.Errorf("reload on master: %w", err)
	}
	if err := parseReload(reply); err != nil {
		return fmt.Errorf("reload on master: %w", err)
	}
	return nil
}

func parseReload(reply string) error {
	switch first := firstLine(reply); {
	case reply == "":
		return nil // 2.6
	case first == "Success=1":
		return nil
	case first == "Success=0":
		return fmt.Errorf("%w (check the configuration; HAProxy said: %q)", ErrReloadFailed, strings.TrimSpace(reply))
	default:
		return unexpected(reply, `"Success=1" or nothing`)
	}
}
